"""``groute bench`` on the apps written on the operator API, which bring their own checks
through their bench specs (:mod:`groute.bench.specs`: verify kind, reference, peers, floor, sources):
k-core end to end with the real solver, a wrong k-core reported FAIL, and the paths
betweenness (a sample of sources, ``allclose``) and SCC (``partition``) will take, exercised
with stand-in registrations whose solvers answer from the checks' references."""
from __future__ import annotations

import json

import numpy as np
import pytest

from groute import registry
from groute.results import AppResult
from groute.bench import make_config, run_suite
from groute.bench.checks import betweenness, kcore, scc
from groute.bench.report import markdown
from groute.bench.references import reference_result
from groute.bench.specs import SPECS, BenchSpec
from groute.graph import CSRGraph

pytestmark = pytest.mark.timeout(60)


def config(apps, graphs=("grid:12",), **kw):
    base = dict(apps=list(apps), graphs=list(graphs), devices=[1], modes=["bsp"], repeat=2,
                peers=["scipy", "igraph", "networkx"], peer_repeat=1, backend="cpu", timeout=20)
    base.update(kw)
    return make_config(**base)


def answering(app, *, corrupt=None):
    """A solver class answering ``app`` from its reference, ``corrupt``-ed when given; it
    records what ``run`` was given."""

    class Answering:
        calls = []

        def __init__(self, graph, *, ctx, partition=None, mode=None):
            self.graph = graph

        def run(self, *args):
            Answering.calls.append(args)
            source = None
            if args:
                ids = np.asarray(args[0]).reshape(-1)
                source = np.array([self.graph.vertex_of(i) for i in ids]) if ids.size > 1 \
                    else int(ids[0])
            values = reference_result(app, self.graph, source).copy()
            if corrupt is not None:
                values = corrupt(values)
            return AppResult(values, 1e-3, {})

        def close(self):
            pass
    return Answering


# k-core ------------------------------------------------------------------------------------------
def test_kcore_runs_and_verifies_end_to_end(tmp_path):
    from groute.cli import main
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    code = main(["bench", "--apps", "kcore", "--graphs", "grid:100", "--backend", "cpu",
                 "--devices", "1", "--repeat", "2", "--peers", "scipy,igraph,networkx",
                 "--peer-repeat", "1", "--json", str(out_json), "--markdown", str(out_md),
                 "--quiet"])
    results = json.loads(out_json.read_text())
    (case,) = results["cases"]
    assert code == 0 and case["status"] == "ok", case
    assert case["mode"] is None and case["verify"]["ok"] and case["time_s"] > 0
    assert case["floor_bytes"] == kcore.floor_bytes(_grid(100)) and case["time_over_floor"] > 0
    peers = {p["peer"]: p for p in results["peers"]}
    assert peers["scipy"]["status"] == "skip" and "k-core" in peers["scipy"]["note"]
    assert peers["networkx"]["status"] == "ok"
    if peers["igraph"]["status"] != "skip":     # installed: it must agree
        assert peers["igraph"]["status"] == "ok", peers["igraph"]
    (ref,) = results["references"]
    assert ref["label"] == "groute.bench.checks.kcore.reference (CPU)"
    text = out_md.read_text()
    assert "| k-core | grid:100 | 1 | - | ok |" in text and "vs networkx" in text
    assert "groute.bench.checks.kcore.reference" in text


def _grid(side):
    from groute.graph import load_graph
    return load_graph(f"grid:{side}")


def test_a_wrong_kcore_is_fail_and_not_timed():
    def off_by_one(values):
        values[3] += 1
        return values
    results = run_suite(config(["kcore"], peers=[]),
                        solvers={"kcore": answering("kcore", corrupt=off_by_one)}, progress=False)
    (case,) = results["cases"]
    assert case["status"] == "FAIL" and "time_s" not in case
    assert "vertex 3" in case["note"]
    assert "**FAIL**" in markdown(results)


def test_kcore_runs_on_a_graph_with_self_loops_without_them(tmp_path):
    path = tmp_path / "loops.txt"
    path.write_text("0 1\n1 2\n2 0\n2 2\n2 3\n")
    results = run_suite(config(["kcore"], graphs=[str(path)], peers=["networkx"]),
                        progress=False)
    (case,) = results["cases"]
    assert case["status"] == "ok", case
    assert results["graphs"][0]["self_loops_removed"] == 1
    assert results["peers"][0]["status"] == "ok"


def test_kcore_reference_matches_networkx_on_random_directed_graphs():
    import networkx as nx
    rng = np.random.default_rng(7)
    for _ in range(3):
        src, dst = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
        keep = src != dst
        g = CSRGraph.from_edges(src[keep], dst[keep], 60, directed=True)
        expect = nx.core_number(g.to_networkx())
        assert kcore.reference(g).tolist() == [expect[v] for v in range(60)]


def _random_graph(rng, n, m, *, directed, loops_removed=True):
    """A random graph on ``n`` vertices (ids from ``n // 2`` up left mostly isolated), as the
    runner hands it to an app: self-loops removed when the app refuses them."""
    src = rng.integers(0, n // 2, m)
    dst = np.where(rng.random(m) < 0.9, rng.integers(0, n // 2, m), rng.integers(0, n, m))
    if not directed:                    # an undirected CSR holds both arcs of every edge
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    g = CSRGraph.from_edges(src, dst, n, directed=directed)
    return g.remove_self_loops() if loops_removed else g


@pytest.mark.parametrize("directed", [False, True])
def test_kcore_reference_matches_networkx_on_random_graphs(directed):
    import networkx as nx
    rng = np.random.default_rng(11)
    for m in (0, 40, 400, 2000):     # no arcs, sparse, dense enough for cores of several levels
        g = _random_graph(rng, 120, m, directed=directed)
        expect = nx.core_number(g.to_networkx())
        assert kcore.reference(g).tolist() == [expect[v] for v in range(120)], (directed, m)
    assert max(expect.values()) >= 8       # the dense ones peel through many levels


def test_kcore_reference_peels_a_long_path_one_end_at_a_time():
    """A path peels inward from both ends in ~n/2 rounds at level 1, a grid from its corners:
    the rounds' frontiers have to be exact (each vertex leaves once)."""
    n = 501
    a, b = np.arange(n - 1), np.arange(1, n)
    g = CSRGraph.from_edges(np.concatenate([a, b]), np.concatenate([b, a]), n, directed=False)
    assert kcore.reference(g).tolist() == [1] * n
    grid = _load("grid:9")
    import networkx as nx
    expect = nx.core_number(grid.to_networkx())
    assert kcore.reference(grid).tolist() == [expect[v] for v in range(grid.num_vertices)]


def test_kcore_reference_takes_a_vertex_two_leaves_drop_at_once_out_once():
    """Leaves 0 and 1 both hang on 2, which falls to level 1 twice in one round; taking it out
    twice would cost 3 a second neighbour and drop the triangle 3-4-5 to core 1."""
    edges = [(0, 2), (1, 2), (2, 3), (3, 4), (4, 5), (5, 3)]
    a, b = np.array(edges).T
    g = CSRGraph.from_edges(np.concatenate([a, b]), np.concatenate([b, a]), 6, directed=False)
    assert kcore.reference(g).tolist() == [1, 1, 1, 2, 2, 2]


def test_scc_reference_matches_networkx_on_random_directed_graphs():
    import networkx as nx
    rng = np.random.default_rng(5)
    for m in (0, 60, 150, 600):
        g = _random_graph(rng, 100, m, directed=True, loops_removed=False)
        labels = scc.reference(g)
        comps = {frozenset(c) for c in nx.strongly_connected_components(g.to_networkx())}
        ours = {}
        for v, lab in enumerate(labels.tolist()):
            ours.setdefault(lab, set()).add(v)
        assert {frozenset(c) for c in ours.values()} == comps, m


# the igraph peers: built fast, skipped by a build-time budget ------------------------------------------
def test_igraph_graph_holds_every_arc_or_each_edge_once_and_restores_the_collector():
    pytest.importorskip("igraph")
    import gc
    from groute.bench.peers import igraph_graph
    rng = np.random.default_rng(3)
    g = _random_graph(rng, 50, 300, directed=False)
    src, dst = (np.asarray(a) for a in g.edges())
    und = igraph_graph(g, directed=None)
    assert not und.is_directed() and und.vcount() == 50 and und.ecount() == g.num_edges // 2
    assert sorted(und.get_edgelist()) == sorted(zip(src[src <= dst].tolist(),
                                                    dst[src <= dst].tolist()))
    arcs = igraph_graph(g, directed=True)
    assert arcs.is_directed() and sorted(arcs.get_edgelist()) == sorted(zip(src.tolist(),
                                                                             dst.tolist()))
    assert gc.isenabled()
    gc.disable()
    try:
        igraph_graph(g)
        assert not gc.isenabled()          # a caller's choice is left as it was
    finally:
        gc.enable()


def test_igraph_peer_is_skipped_when_its_build_would_pass_the_budget(monkeypatch):
    pytest.importorskip("igraph")
    from groute.bench import peers
    # a build rate slow enough that any graph of the test passes the budget below
    monkeypatch.setattr(peers, "igraph_build_seconds_per_edge", lambda: 1e-3)
    g = _random_graph(np.random.default_rng(1), 40, 200, directed=False)
    edges = g.num_edges // 2           # k-core's igraph graph: each edge once
    with pytest.raises(peers.PeerSkipped, match=rf"about {edges * 1e-3 * 1e3:.2f} ms "
                                                rf"\({edges:,} edges .* over the 100.00 ms case "
                                                rf"budget"):
        peers.prepare_peer("igraph", "kcore", g, None, networkx_max_arcs=10**6,
                           build_budget_s=0.1)
    # SCC's directed graph has every arc: a budget between the two counts runs k-core only
    budget = (edges + g.num_edges) / 2 * 1e-3
    peers.prepare_peer("igraph", "kcore", g, None, networkx_max_arcs=10**6, build_budget_s=budget)
    with pytest.raises(peers.PeerSkipped, match=f"{g.num_edges:,} edges"):
        peers.prepare_peer("igraph", "scc", g.as_directed(), None, networkx_max_arcs=10**6,
                           build_budget_s=budget)
    # no budget: no estimate; the budget is igraph's alone (scipy's matrix is not limited)
    peers.prepare_peer("igraph", "scc", g.as_directed(), None, networkx_max_arcs=10**6)
    peers.prepare_peer("scipy", "scc", g.as_directed(), None, networkx_max_arcs=10**6,
                       build_budget_s=1e-9)
    with pytest.raises(ValueError, match="budget_s"):
        peers.prepare_peer("igraph", "kcore", g, None, networkx_max_arcs=10**6,
                           build_budget_s=0.0)


def test_igraph_build_rate_is_timed_on_this_machine():
    pytest.importorskip("igraph")
    from groute.bench import peers
    rate = peers.igraph_build_seconds_per_edge()
    assert 0 < rate < 1e-4 and peers.igraph_build_seconds_per_edge() == rate   # once a process


def test_kcore_and_scc_peers_in_a_run_record_their_build_apart_from_their_time():
    results = run_suite(config(["kcore"], graphs=["kron:8"]), progress=False)
    peers = {p["peer"]: p for p in results["peers"]}
    assert "scipy has no" in peers["scipy"]["note"] or peers["scipy"]["status"] == "skip"
    for name in ("igraph", "networkx"):
        p = peers[name]
        if p["status"] == "skip":
            assert name == "igraph" and not _has_igraph()
            continue
        assert p["status"] == "ok", p
        assert p["setup_s"] > 0 and p["wall_s"] >= p["setup_s"] + p["time_s"] * p["repeats"] * 0.5


# the paths betweenness and SCC take, with stand-in registrations -------------------------------------
CHECKS = "groute.bench.checks."


def stand_in(monkeypatch, name, label, *, takes_partition=True, **checks):
    """An algorithm registered for the test only, with the bench spec ``checks``; its solver
    is the test's own (``run_suite(solvers=)``)."""
    app = registry.Algorithm(name=name, label=label, solver=np.ndarray, function=np.sort,
                             takes_partition=takes_partition)
    monkeypatch.setitem(registry.ALGORITHMS._entries, name, app)
    monkeypatch.setitem(SPECS, name, BenchSpec(**checks))
    return app


@pytest.fixture
def bc_app(monkeypatch):
    return stand_in(monkeypatch, "bc_test", "BC (test)", verify="allclose", rtol=1e-9,
                    sources=4, reference=(CHECKS + "betweenness", "reference"),
                    floor=(CHECKS + "betweenness", "floor_bytes"),
                    peers={"networkx": (CHECKS + "betweenness", "networkx_peer"),
                           "igraph": (CHECKS + "betweenness", "igraph_peer")})


def test_an_app_with_sources_gets_the_same_sample_as_its_reference_and_peers(bc_app):
    solver = answering("bc_test")
    results = run_suite(config(["bc_test"]), solvers={"bc_test": solver}, progress=False)
    (case,) = results["cases"]
    assert case["status"] == "ok", case
    sample = results["graphs"][0]["sources"]["bc_test"]
    assert sample["count"] == 4 and "out-degree" in sample["rule"]
    (ids,) = solver.calls[0]
    assert len(ids) == 4 and sorted(ids) == sample["first"]    # grid: file ids = vertex ids
    peers = {p["peer"]: p["status"] for p in results["peers"]}
    assert peers["networkx"] == "ok" and peers["scipy"] == "skip"
    assert peers["igraph"] in ("ok", "skip")
    g = _grid(12)
    assert case["floor_bytes"] == betweenness.floor_bytes(g, 4)
    assert "gteps" not in case


def test_betweenness_off_by_a_little_is_fail(bc_app):
    def nudge(values):
        values[np.argmax(values)] *= 1 + 1e-6
        return values
    results = run_suite(config(["bc_test"], peers=[]),
                        solvers={"bc_test": answering("bc_test", corrupt=nudge)}, progress=False)
    (case,) = results["cases"]
    assert case["status"] == "FAIL" and "rtol" in case["note"]


def test_brandes_reference_matches_networkx_from_all_sources():
    import networkx as nx
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 40, 120), rng.integers(0, 40, 120)
    keep = src != dst
    g = CSRGraph.from_edges(src[keep], dst[keep], 40, directed=True)
    expect = nx.betweenness_centrality(g.to_networkx(), normalized=False)
    got = betweenness.reference(g, np.arange(40))
    assert np.allclose(got, [expect[v] for v in range(40)])


@pytest.fixture
def scc_app(monkeypatch):
    return stand_in(monkeypatch, "scc_test", "SCC (test)", takes_partition=False,
                    verify="partition", reference=(CHECKS + "scc", "reference"),
                    floor=(CHECKS + "scc", "floor_bytes"),
                    peers={"scipy": (CHECKS + "scc", "scipy_peer"),
                           "igraph": (CHECKS + "scc", "igraph_peer"),
                           "networkx": (CHECKS + "scc", "networkx_peer")})


def test_components_are_compared_as_partitions(scc_app, tmp_path):
    path = tmp_path / "two_cycles.txt"        # directed: {0,1,2} and {3,4} strong, 5 alone
    path.write_text("0 1\n1 2\n2 0\n2 3\n3 4\n4 3\n4 5\n")
    relabelled = answering("scc_test", corrupt=lambda v: 100 - v)
    results = run_suite(config(["scc_test"], graphs=[str(path)]),
                        solvers={"scc_test": relabelled}, progress=False)
    (case,) = results["cases"]
    assert case["status"] == "ok", case
    assert {p["peer"]: p["status"] for p in results["peers"]} == {
        "scipy": "ok", "igraph": "ok", "networkx": "ok"} or not _has_igraph()
    merged = answering("scc_test", corrupt=lambda v: np.zeros_like(v))
    results = run_suite(config(["scc_test"], graphs=[str(path)], peers=[]),
                        solvers={"scc_test": merged}, progress=False)
    assert results["cases"][0]["status"] == "FAIL"
    assert scc.reference(_load(path)).tolist().count(scc.reference(_load(path))[0]) == 3


def _load(path):
    from groute.graph import load_graph
    return load_graph(str(path))


def _has_igraph():
    import importlib.util
    return importlib.util.find_spec("igraph") is not None


def test_apps_option_takes_every_registered_app():
    assert "kcore" in make_config(graphs=["grid:4"], devices=[1]).apps
    assert make_config(apps=["kcore"], graphs=["grid:4"], devices=[1]).apps == ["kcore"]


def test_scc_runs_an_undirected_graph_as_the_directed_graph_of_its_arcs():
    """The real SCC solver (directed graphs only) on an undirected grid: the harness gives it
    the grid's arcs as a directed graph, whose strong components are the grid's components;
    verified against the scipy reference, the peers agreeing."""
    res = run_suite(config(["scc"], graphs=("grid:6",)), progress=False)
    (case,) = res["cases"]
    assert case["status"] == "ok", case.get("note")
    assert {p["peer"]: p["status"] for p in res["peers"]}["scipy"] == "ok"
    assert "each edge both ways" in markdown(res)


def test_the_real_betweenness_runs_from_the_sample_and_verifies():
    """The registered betweenness app: run from the harness's sample of sources with its
    run options (the plain sum over them), checked against the Brandes reference, the
    NetworkX peer agreeing."""
    res = run_suite(config(["betweenness"], graphs=("grid:8",), peers=["networkx"]),
                    progress=False)
    (case,) = res["cases"]
    assert case["status"] == "ok", case.get("note")
    assert case["stats"]["sources"] == SPECS["betweenness"].sources
    assert {p["peer"]: p["status"] for p in res["peers"]}["networkx"] == "ok"
