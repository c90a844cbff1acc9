"""Betweenness centrality (groute.betweenness_centrality, apps/betweenness.py) against
networkx.betweenness_centrality: karate, a shared real graph, random directed and undirected
graphs with isolated vertices and self-loops, sampled and given sources, endpoints, unnormalized
scores; 1-4 devices, both backends; the command; the generated kernels compile; and the rule
that apps/betweenness.py imports only groute's public names."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import groute
from groute.apps.betweenness import ACCUMULATE, BACKWARD, FORWARD, Betweenness
from groute.operators import AdvanceStep
from groute.apps.betweenness_cli import GivenSources
from groute.cli import main
from groute.graph import load_graph
from support import (check_imports_only_public_names, compile_generated, device_cases, gpu_marks,
                     need_gpus, operator_doc_blocks, shared_graph_path)

BETWEENNESS = Path(__file__).resolve().parents[1] / "apps" / "betweenness.py"
OPTIONS = [{}, {"endpoints": True}, {"normalized": False},
           {"endpoints": True, "normalized": False}]


def assert_matches(result, G, **options):
    """``result`` (groute's) equals NetworkX's scores of ``G`` with ``options``."""
    ref = nx.betweenness_centrality(G, **options)
    got = result.to_dict()
    assert list(got) == list(ref)
    np.testing.assert_allclose([got[v] for v in G], [ref[v] for v in G], rtol=1e-9,
                               atol=1e-12, err_msg=str(options))
    assert all(type(x) is float for x in got.values())



def random_graph(n, m, seed, directed):
    """``n`` vertices, the last 10 isolated, ``m`` random arcs, self-loops kept."""
    rng = np.random.default_rng(seed)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(rng.integers(0, n - 10, m).tolist(), rng.integers(0, n - 10, m).tolist()))
    G.add_edges_from([(0, 0), (5, 5)])
    return G


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
def test_karate_matches_networkx(backend, k):
    G = nx.karate_club_graph()
    assert_matches(groute.betweenness_centrality(G, backend=backend, devices=k), G)


def test_karate_options_on_one_solver():
    """The solver keeps its engine across runs; each run starts from clean state."""
    G = nx.karate_club_graph()
    with Betweenness(load_graph(G), backend="cpu", devices=2) as solver:
        for options in OPTIONS + [{}]:
            assert_matches(solver.run(**options), G, **options)


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_shared_graph_sampled_matches_networkx(backend, k):
    path = shared_graph_path("netscience")
    g = load_graph(path)
    res = groute.betweenness_centrality(g, k=40, seed=11, backend=backend, devices=k)
    assert res.stats["sources"] == 40 and res.stats["max_depth"] > 5
    ref = nx.betweenness_centrality(g.to_networkx(), k=40, seed=11)
    np.testing.assert_allclose(res.values, [ref[v] for v in range(g.num_vertices)], rtol=1e-9,
                               atol=1e-12)
    assert list(res.to_dict()) == g.ids.tolist()


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 4]))
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_random_graphs_with_isolated_vertices_and_self_loops(backend, k, directed):
    G = random_graph(60, 150, seed=5 + directed, directed=directed)
    with Betweenness(load_graph(G), backend=backend, devices=k, partition="random") as solver:
        for options in OPTIONS if k == 1 else OPTIONS[::3]:
            assert_matches(solver.run(**options), G, **options)


@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_sampled_sources_are_networkx_sources(directed):
    G = random_graph(50, 120, seed=9, directed=directed)
    G = nx.relabel_nodes(G, {v: f"v{v}" for v in G})         # labels: sampling is by position
    for options in OPTIONS:
        for k, seed in [(7, 3), (1, 0), (50, 1)]:
            res = groute.betweenness_centrality(G, k=k, seed=seed, backend="cpu", devices=1,
                                                **options)
            ref = nx.betweenness_centrality(G, k=k, seed=seed, **options)
            got = res.to_dict()
            np.testing.assert_allclose([got[v] for v in G], [ref[v] for v in G], rtol=1e-9,
                                       atol=1e-12, err_msg=f"{options} k={k}")
    # a random.Random seed is used as NetworkX uses it
    import random
    a = groute.betweenness_centrality(G, k=5, seed=random.Random(4), backend="cpu")
    assert a.to_dict() == pytest.approx(nx.betweenness_centrality(G, k=5, seed=random.Random(4)))


def test_given_sources_are_scored_as_a_sample_of_them():
    G = nx.karate_club_graph()
    picked = [33, 0, 5, 16]
    for options in OPTIONS:
        res = groute.betweenness_centrality(G, sources=picked, backend="cpu", devices=2,
                                            **options)
        ref = nx.betweenness_centrality(G, k=4, seed=GivenSources(picked), **options)
        assert res.to_dict() == pytest.approx(ref, rel=1e-9, abs=1e-12)
        assert res.stats["sources"] == 4
    every = groute.betweenness_centrality(G, sources=np.arange(34)[::-1], backend="cpu")
    assert every.to_dict() == pytest.approx(nx.betweenness_centrality(G))
    one = groute.betweenness_centrality(G, sources=[3], backend="cpu")     # k=1: no source data
    assert math.isnan(one.to_dict()[3]) and not math.isnan(one.to_dict()[4])


def test_small_and_empty_graphs():
    assert groute.betweenness_centrality(nx.Graph(), backend="cpu").to_dict() == {}
    for G in (nx.empty_graph(1), nx.empty_graph(5), nx.path_graph(2), nx.path_graph(3),
              nx.DiGraph([(0, 1), (1, 2), (2, 0)])):
        for options in OPTIONS:
            assert_matches(groute.betweenness_centrality(G, backend="cpu", **options), G,
                           **options)
    arrays = groute.betweenness_centrality(([0, 1, 2], [1, 2, 3]), num_vertices=6,
                                           backend="cpu", devices=2)
    path = load_graph(([0, 1, 2], [1, 2, 3]), num_vertices=6)
    assert arrays.to_dict() == pytest.approx(nx.betweenness_centrality(path.to_networkx()))


def test_errors_name_the_argument():
    G = nx.path_graph(4)
    nx.set_edge_attributes(G, 0, "length")
    with pytest.raises(ValueError, match="lengths must be finite and > 0"):
        groute.betweenness_centrality(G, weight="length", backend="cpu")
    with pytest.raises(ValueError, match="k .*or sources"):
        groute.betweenness_centrality(G, k=2, sources=[0], backend="cpu")
    with pytest.raises(ValueError, match="k must be between 1 and the number of vertices"):
        groute.betweenness_centrality(G, k=5, backend="cpu")
    with pytest.raises(TypeError, match="seed must be"):
        groute.betweenness_centrality(G, k=2, seed="x", backend="cpu")
    with pytest.raises(ValueError, match="sources: a vertex appears more than once"):
        groute.betweenness_centrality(G, sources=[1, 1], backend="cpu")
    with pytest.raises(groute.NodeNotFound, match="sources: source 9 is not a vertex"):
        groute.betweenness_centrality(G, sources=[9], backend="cpu")
    for scores in (groute.betweenness_centrality, groute.edge_betweenness_centrality):
        with pytest.raises(ZeroDivisionError, match="no sources"):  # says why it divides by 0
            scores(G, sources=[], backend="cpu")


@pytest.mark.parametrize("backend, k", device_cases([1, 2]))
def test_lengths_that_vanish_in_float64_sums_are_an_error_not_wrong_scores(backend, k):
    """1 + 1e-17 == 1: the cycle b -> c -> b ties, Kahn's order never reaches it, and the
    scores would be wrong (b's 0.0 where NetworkX gives 2/3); the error names the vertices."""
    G = nx.DiGraph()
    G.add_weighted_edges_from([("a", "b", 1.0), ("b", "c", 1e-17), ("c", "b", 1e-17),
                               ("c", "d", 1.0)])
    for scores in (groute.betweenness_centrality, groute.edge_betweenness_centrality):
        with pytest.raises(ValueError, match="tie around a cycle through vertices 'b', 'c': "
                                             ".*1 \\+ 1e-17 == 1"):
            scores(G, weight="weight", backend=backend, devices=k)
    # tiny lengths without a tied cycle are no error, and score as NetworkX's
    H = nx.DiGraph()
    H.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 1e-17), (2, 3, 1.0), (0, 3, 5.0)])
    assert_matches(groute.betweenness_centrality(H, weight="weight", backend=backend,
                                                 devices=k), H, weight="weight")


def test_the_command_prints_writes_and_verifies(tmp_path, capsys):
    path = shared_graph_path("karate")
    out = tmp_path / "bc.csv"
    assert main(["betweenness", "--graph", str(path), "--backend", "cpu", "--devices", "2",
                 "--verify", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("betweenness karate: ") and "34 sources, max 0.437635 at vertex 1" \
        in text
    assert "verify: OK" in text
    rows = out.read_text().splitlines()
    assert rows[0] == "id,betweenness" and len(rows) == 35
    for extra in (["--k", "6", "--seed", "2", "--endpoints"],
                  ["--sources", "1,34,3", "--no-normalized"]):
        assert main(["betweenness", "--graph", str(path), "--backend", "cpu", "--verify",
                     "--json", *extra]) == 0
        record = json.loads(capsys.readouterr().out)
        assert record["app"] == "betweenness" and record["verify"]["ok"], extra
        assert record["sources"] == (int(extra[1]) if extra[0] == "--k" else 3)
    assert main(["betweenness", "--graph", "grid:9", "--backend", "cpu", "--devices", "1",
                 "--stats"]) == 0
    text = capsys.readouterr().out
    assert "81 sources" in text and "max_depth: 16" in text      # corner to corner


class PushOnly(Betweenness):
    """Both passes pushed: the gathering steps' atomic form."""
    forward_pass = [AdvanceStep(FORWARD, "push")]
    backward_pass = [AdvanceStep(BACKWARD, "push", over="in")]


class PullOnly(Betweenness):
    """Both passes pulled: every level of the forward pass too."""
    forward_pass = [AdvanceStep(FORWARD, "pull")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_push_pull_and_auto_passes_give_networkxs_scores(k, directed):
    """The app's passes (forward "auto", backward pulled), push-only and pull-only: the same
    scores, NetworkX's, on 1-3 CPU devices with every option."""
    G = random_graph(60, 180, seed=k, directed=directed)
    g = load_graph(G)
    for solver in (Betweenness, PushOnly, PullOnly):
        with solver(g, backend="cpu", devices=k, partition="random") as bc:
            for options in OPTIONS if solver is Betweenness else OPTIONS[:1]:
                result = bc.run(**options)
                assert_matches(result, G, **options)
            stats = result.stats
        pulled = stats["pull_advances"]
        assert (pulled == 0) if solver is PushOnly else pulled > 0, solver.__name__


def test_betweenness_imports_only_groute_public_names():
    check_imports_only_public_names(BETWEENNESS)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_generated_kernels_compile(tmp_path):
    """The app's functors and the ones of the example in docs/OPERATORS_REFERENCE.md."""
    from groute.operators import Functor
    example = {}
    exec(compile(operators_md_example().split("G = nx.karate_club_graph()")[0],
                 "OPERATORS_REFERENCE.md", "exec"), example)
    documented = [f for f in example.values() if isinstance(f, Functor)
                  and f.name not in (FORWARD.name, BACKWARD.name)]
    assert len(documented) == 2
    done = compile_generated([FORWARD, BACKWARD, ACCUMULATE, *documented], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.gpu
def test_kron_on_one_gpu_matches_the_cpu():
    g = load_graph("kron:10")
    gpu = groute.betweenness_centrality(g, k=64, seed=1, backend="cuda", devices=1)
    cpu = groute.betweenness_centrality(g, k=64, seed=1, backend="cpu", devices=1)
    np.testing.assert_allclose(gpu.values, cpu.values, rtol=1e-9, atol=1e-12)
    ref = nx.betweenness_centrality(g.to_networkx(), k=64, seed=1)
    np.testing.assert_allclose(gpu.values, [ref[v] for v in range(g.num_vertices)], rtol=1e-9,
                               atol=1e-12)


def operators_md_example() -> str:
    """The betweenness example of docs/OPERATORS_REFERENCE.md."""
    example = [b for b in operator_doc_blocks() if "betweenness_centrality" in b]
    assert len(example) == 1
    return example[0]


def test_the_example_in_operators_md_runs():
    exec(compile(operators_md_example(), "OPERATORS_REFERENCE.md (betweenness)", "exec"), {})


def test_arguments_by_position_and_seeds_as_networkx_takes_them():
    """NetworkX's argument order (endpoints before seed), its random states (a NumPy
    generator too), and k equal to the vertex count: every vertex, no draw."""
    import random
    G = nx.karate_club_graph()
    positional = groute.betweenness_centrality(G, None, True, None, True, backend="cpu")
    assert positional.to_dict() == pytest.approx(nx.betweenness_centrality(G, None, True, None,
                                                                          True))
    for seed in (7, np.random.RandomState(7), np.random.default_rng(7)):
        seed_nx = seed if isinstance(seed, int) else type(seed)(7) if isinstance(
            seed, np.random.RandomState) else np.random.default_rng(7)
        got = groute.betweenness_centrality(G, k=5, seed=seed, backend="cpu").to_dict()
        assert got == pytest.approx(nx.betweenness_centrality(G, k=5, seed=seed_nx))
    rng = random.Random(3)
    state = rng.getstate()
    every = groute.betweenness_centrality(G, k=len(G), seed=rng, backend="cpu").to_dict()
    assert rng.getstate() == state                      # nothing drawn
    assert every == pytest.approx(nx.betweenness_centrality(G))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_every_source_is_a_round(k, directed):
    """The sources run as rounds (run_rounds) on 1 and 3 CPU devices: isolated sources among
    them, endpoints on and off, NetworkX's scores; one round per source."""
    G = random_graph(40, 90, seed=20 + k, directed=directed)
    picked = [39, 0, 3, 35, 12, 31]                    # 30..39 are isolated
    with Betweenness(load_graph(G), backend="cpu", devices=k, partition="random") as solver:
        for endpoints in (False, True):
            res = solver.run(picked, endpoints=endpoints)
            ref = nx.betweenness_centrality(G, k=len(picked), seed=GivenSources(picked),
                                            endpoints=endpoints)
            assert res.to_dict() == pytest.approx(ref, rel=1e-9, abs=1e-12)
            assert res.stats["rounds"] == "python" and res.stats["sources"] == len(picked)


@pytest.mark.timeout(300)
@pytest.mark.gpu
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_fused_rounds_match_the_python_rounds_and_networkx(directed):
    """Every source in one launch against the operator calls on one GPU, and NetworkX:
    isolated vertices, endpoints on and off; and on a path, sources whose forward levels
    outgrow the store's first offsets (the launch resumes mid-round), fused against the
    operator calls (a few sources: the operator calls take a launch or more per level)."""
    cases = [(random_graph(300, 900, seed=3, directed=directed), None),
             (nx.path_graph(150), [0, 40, 75, 110, 149])]
    for G, sources in cases:
        g = load_graph(G)
        for endpoints in (False, True):
            values = {}
            for loop in ("fused", "python"):
                with Betweenness(g, backend="cuda", devices=1, loop=loop) as solver:
                    res = solver.run(sources, endpoints=endpoints)
                assert res.stats["rounds"] == loop and res.stats["loop"] == loop
                values[loop] = res
                if sources is None:
                    assert_matches(res, G, endpoints=endpoints)
            np.testing.assert_allclose(values["fused"].values, values["python"].values,
                                       rtol=1e-9, atol=1e-12)
            assert values["fused"].stats["levels"] == values["python"].stats["levels"]
            assert values["fused"].stats["max_depth"] == values["python"].stats["max_depth"]
            if sources is not None:
                assert values["fused"].stats["max_depth"] == 149     # from an end of the path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}")
                               for k in (2, 3, 4)])
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_several_cuda_devices_fuse_the_rounds_and_match_networkx(k, directed):
    """On 2-4 CUDA devices (logical ones on one GPU) every source's round runs fused, one
    launch per device (stats["rounds"]), and the scores are NetworkX's: every source and a
    sample, endpoints on and off, a random partition."""
    need_gpus(k)
    G = random_graph(300, 900, seed=3, directed=directed)
    for options in ({}, {"endpoints": True}, {"k": 40, "seed": 2}):
        res = groute.betweenness_centrality(G, backend="cuda", devices=k, partition="random",
                                            **options)
        assert res.stats["rounds"] == "fused" and res.stats["loop"] == "fused", options
        assert_matches(res, G, **options)
