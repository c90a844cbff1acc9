"""BFS and SSSP options: several sources, NetworkX's cutoff, predecessors and
``groute.shortest_path``, against NetworkX on CPU virtual devices (1-4) and on CUDA devices."""
import networkx as nx
import numpy as np
import pytest

import groute
from groute.apps.bfs import BFS, bfs
from groute.apps.sssp import SSSP, shortest_path, sssp
from groute.engines.relax.parents import parents
from groute.engines.relax.peer import SHARED_SEEDS
from groute.cli import main
from groute.graph import CSRGraph, load_graph

from support import busiest, need_gpus

pytestmark = pytest.mark.timeout(120)


def random_graph(seed, *, directed=True, n=70, p=0.05, weights=True):
    """A random graph with isolated vertices, self-loops and (weighted) zero-weight arcs."""
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed, directed=directed)
    G.add_nodes_from(range(n, n + 4))               # isolated
    for v in rng.choice(n, 3, replace=False):
        G.add_edge(int(v), int(v))                  # self-loops
    if weights:
        for u, v in G.edges:
            G[u][v]["weight"] = int(rng.integers(0, 6))   # zero weights too
    return G


def hop_weight(u, v, d):
    return 1


def check_parents(G, res, sources, weight):
    """Every parent is an in-neighbour on a shortest path, sources and unreached have none,
    and ``path_to`` walks back to a source."""
    dist = res.to_dict()
    pred = res.to_predecessors()
    assert set(pred) == set(dist) - set(sources)
    for v, u in pred.items():
        w = 1 if weight is None else G[u][v][weight]
        assert G.has_edge(u, v) and dist[u] + w == dist[v], (u, v)
    for t in list(dist)[:10]:
        walk = res.path_to(t)
        assert walk[0] in sources and walk[-1] == t
        total = sum(1 if weight is None else G[a][b][weight] for a, b in zip(walk, walk[1:]))
        assert total == dist[t]


CPU_ENGINES = [dict(devices=1), dict(devices=2, mode="async"), dict(devices=3, mode="bsp"),
               dict(devices=4, mode="async", priority=True, delta=2)]


@pytest.mark.parametrize("engine", CPU_ENGINES, ids=lambda e: "-".join(map(str, e.values())))
@pytest.mark.parametrize("directed", [True, False])
def test_bfs_sources_cutoff_predecessors_cpu(engine, directed):
    G = random_graph(1 + directed, directed=directed, weights=False)
    with BFS(groute_graph(G), backend="cpu", partition="contiguous", **engine) as solver:
        for sources, limit in (([0], None), ([0, 9, 33, 71], None), ([5], 0), ([5], 1),
                               ([2, 40], 2), ([0, 9, 33], 3)):
            res = solver.run(sources=sources, cutoff=limit, predecessors=True)
            ref = nx.multi_source_dijkstra_path_length(G, set(sources), cutoff=limit,
                                                       weight=hop_weight)
            assert res.to_dict() == ref, (sources, limit)
            check_parents(G, res, sources, None)
        if len(G) > 1:
            one = solver.run(3, cutoff=2)
            assert one.to_dict() == nx.single_source_shortest_path_length(G, 3, cutoff=2)


def test_cutoff_cuts_the_work():
    """The frontier at the limit is not expanded: far fewer arcs than the whole run."""
    g = load_graph("grid:60")
    with BFS(g, backend="cpu", devices=1) as solver:
        full = solver.run(0)
        cut = solver.run(0, cutoff=5)
    assert np.count_nonzero(cut.values >= 0) == 21          # 1 + 2 + ... + 6 in a grid corner
    assert cut.values.max() == 5
    assert cut.stats["edges_traversed"] < full.stats["edges_traversed"] / 20


@pytest.mark.parametrize("engine", CPU_ENGINES, ids=lambda e: "-".join(map(str, e.values())))
@pytest.mark.parametrize("directed", [True, False])
def test_sssp_sources_predecessors_cpu(engine, directed):
    G = random_graph(7 + directed, directed=directed)
    with SSSP(groute_graph(G, weight="weight"), backend="cpu", partition="contiguous",
              **engine) as solver:
        for sources in ([0], [0, 9, 33, 71], [70]):
            res = solver.run(sources=sources, predecessors=True)
            assert res.to_dict() == nx.multi_source_dijkstra_path_length(G, set(sources))
            check_parents(G, res, sources, "weight")


def test_float_weights_parents_follow_the_float32_sums():
    G = random_graph(11, weights=False)
    rng = np.random.default_rng(0)
    for u, v in G.edges:
        G[u][v]["weight"] = float(rng.random()) * 3
    res = sssp(G, 0, predecessors=True, backend="cpu", devices=2, partition="contiguous")
    ref = nx.single_source_dijkstra_path_length(G, 0)
    got = res.to_dict()
    assert set(got) == set(ref)
    assert all(abs(got[v] - ref[v]) <= 1e-5 * max(1.0, ref[v]) for v in ref)
    pred = res.to_predecessors()
    assert set(pred) == set(ref) - {0}
    assert all(G.has_edge(u, v) for v, u in pred.items())


def test_zero_weight_cycles_give_a_tree():
    """Two vertices joined by zero-weight arcs both ways, at the same distance: the parents
    still form a tree (no vertex chooses the one that chose it)."""
    G = nx.DiGraph()
    G.add_weighted_edges_from([(5, 1, 2), (5, 2, 2), (1, 2, 0), (2, 1, 0), (2, 3, 0), (3, 1, 0)])
    res = sssp(G, 5, predecessors=True, backend="cpu", devices=1)
    pred = res.to_predecessors()
    assert pred[1] == 5 and pred[2] == 5 and pred[3] == 2
    assert res.path_to(3) == [5, 2, 3]


def test_parents_pick_the_smallest_parent():
    indptr = np.array([0, 2, 3, 4, 4])
    indices = np.array([1, 2, 3, 3])
    dist = np.array([0, 1, 1, 2], dtype=np.int32)
    out = parents(indptr, indices, None, dist, np.array([0]), np.int32(np.iinfo(np.int32).max))
    assert out.tolist() == [-1, 0, 0, 1]


def test_shortest_path_matches_networkx_and_raises_no_path():
    G = random_graph(3)
    for t in (10, 40, 60):
        if nx.has_path(G, 0, t):
            hops = groute.shortest_path(G, 0, t, backend="cpu", devices=2)
            assert len(hops) == len(nx.shortest_path(G, 0, t))
            assert hops[0] == 0 and hops[-1] == t and nx.is_path(G, hops)
            walk = groute.shortest_path(G, 0, t, weight="weight", backend="cpu")
            assert nx.path_weight(G, walk, "weight") == nx.dijkstra_path_length(G, 0, t)
    with pytest.raises(nx.NetworkXNoPath):
        groute.shortest_path(G, 0, 72, backend="cpu")            # isolated
    with pytest.raises(ValueError, match="target"):
        shortest_path(G, 0, "nope", backend="cpu")


def test_labels_are_kept():
    G = nx.relabel_nodes(nx.path_graph(6), {i: f"v{i}" for i in range(6)})
    res = bfs(G, sources=["v0", "v5"], predecessors=True, backend="cpu", devices=2)
    assert res.to_dict() == {"v0": 0, "v1": 1, "v2": 2, "v3": 2, "v4": 1, "v5": 0}
    assert res.to_predecessors() == {"v1": "v0", "v2": "v1", "v3": "v4", "v4": "v5"}
    assert res.path_to("v3") == ["v5", "v4", "v3"]


def test_errors_name_the_argument():
    G = nx.path_graph(5)
    with BFS(groute_graph(G), backend="cpu", devices=1) as solver:
        with pytest.raises(ValueError, match="either source"):
            solver.run(0, sources=[1])
        with pytest.raises(ValueError, match="either source"):
            solver.run()
        with pytest.raises(ValueError, match="sources is empty"):
            solver.run(sources=[])
        with pytest.raises(ValueError, match="cutoff must be a number >= 0"):
            solver.run(0, cutoff=-1)
        with pytest.raises(ValueError, match="not a vertex|no vertex"):
            solver.run(sources=[0, 17])
        with pytest.raises(ValueError, match="no predecessors"):
            solver.run(0).to_predecessors()
    with SSSP(groute_graph(G), backend="cpu", devices=1) as solver:
        with pytest.raises(ValueError, match="cutoff must be a number >= 0"):
            solver.run(0, cutoff=-1)


@pytest.mark.timeout(60)
def test_a_window_narrower_than_one_on_integer_distances_is_one():
    """``delta`` 0.5 on BFS or integer SSSP was a window of int(0.5) = 0 that never advanced
    (the run spun past its timeout): it is a window of 1; inf is no window; a non-number is
    named, also where no window is kept (bsp on CPU devices); all-zero weights, whose default
    window was 0, keep none. (async: the CPU devices' mode that keeps a window.)"""
    mode = "async"
    G = random_graph(3)
    want_bfs = nx.single_source_shortest_path_length(G, 0)
    want_sssp = nx.single_source_dijkstra_path_length(G, 0)
    for delta in (0.5, np.float64(0.3), float("inf"), 2):
        for fn, want in ((bfs, want_bfs), (sssp, want_sssp)):
            got = fn(G, 0, priority=True, delta=delta, mode=mode, backend="cpu", devices=2,
                     timeout=20)
            assert got.to_dict() == want, (fn.__name__, delta)
    for bad, error in (("1", TypeError), (True, TypeError), (0, ValueError),
                       (float("nan"), ValueError)):
        with pytest.raises(error, match="delta must be"):
            sssp(G, 0, priority=True, delta=bad, backend="cpu", devices=1)
        with pytest.raises(error, match="delta must be"):
            sssp(G, 0, priority=True, delta=bad, mode="bsp", backend="cpu", devices=2)
    Z = nx.grid_2d_graph(30, 4)
    nx.set_edge_attributes(Z, 0.0, "weight")
    got = sssp(Z, (0, 0), priority=True, mode=mode, backend="cpu", devices=2, timeout=20)
    assert set(got.to_dict().values()) == {0.0}
    assert main(["sssp", "--graph", "grid:6", "--backend", "cpu", "--devices", "2", "--mode",
                 mode, "--delta", "0.5", "--repeat", "1", "--timeout", "20", "--verify"]) == 0


def test_cli_sources_cutoff_predecessors(tmp_path, capsys):
    out = tmp_path / "parents.csv"
    assert main(["bfs", "--graph", "grid:144", "--backend", "cpu", "--devices", "2",
                 "--sources", "0,143", "--cutoff", "3", "--verify", "--repeat", "1",
                 "--predecessors", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 sources (cutoff 3)" in text and "verify: ok" in text
    rows = out.read_text().splitlines()
    assert rows[0] == "id,parent" and len(rows) - 1 == 2 * (2 + 3 + 4)   # depths 1..3 twice
    assert main(["sssp", "--graph", "grid:144", "--backend", "cpu", "--devices", "3",
                 "--random-weights", "--sources", "5,77", "--verify", "--repeat", "1"]) == 0
    assert "verify: ok" in capsys.readouterr().out
    # one source with an integer id (the default, or --source): the line failed to print
    depths = tmp_path / "depths.csv"
    for app, source, cutoff in (("bfs", [], "2"), ("bfs", ["--source", "7"], "2"),
                                ("sssp", ["--source", "7"], "2.5")):
        assert main([app, "--graph", "grid:144", "--backend", "cpu", "--devices", "2",
                     *source, "--cutoff", cutoff, "--verify", "--repeat", "1",
                     "--output", str(depths)]) == 0
        text = capsys.readouterr().out
        assert f" (cutoff {cutoff}):" in text and "verify: ok" in text and depths.exists()
        depths.unlink()


def groute_graph(G, weight=None):
    from groute.graph import input_graph
    return input_graph(G, weight=weight)


# ---------------------------------------------------------------------------------------- CUDA
GPU_ENGINES = [
    pytest.param(dict(devices=1, mode="async"), id="fused"),
    pytest.param(dict(devices=1, mode="bsp", exchange="host"), id="fused-bsp"),
    pytest.param(dict(devices=1, mode="bsp", exchange="peer"), id="peer1"),
    pytest.param(dict(devices=2, mode="async", exchange="host"), id="worklist2",
                 marks=pytest.mark.multigpu),
    pytest.param(dict(devices=3, mode="bsp", exchange="host"), id="worklist-bsp3",
                 marks=pytest.mark.multigpu),
    pytest.param(dict(devices=2, mode="bsp", exchange="peer"), id="peer2",
                 marks=pytest.mark.multigpu),
    pytest.param(dict(devices=3, mode="async", exchange="peer"), id="linked3",
                 marks=pytest.mark.multigpu),
]


@pytest.mark.gpu
@pytest.mark.timeout(240)
@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_cuda_engines_sources_cutoff_predecessors(engine):
    need_gpus(engine["devices"])
    cases = {"random": (random_graph(4, directed=False, n=400, p=0.01, weights=False), None),
             "grid": (nx.grid_2d_graph(30, 30), None)}
    for name, (G, _) in cases.items():
        srcs = list(G)[:1] + list(G)[len(G) // 2:len(G) // 2 + 2]
        # the peer kernel shares level 0 among up to SHARED_SEEDS seeds, not among more
        many = list(G)[::5][:SHARED_SEEDS + 1]
        with BFS(groute_graph(G), backend="cuda", partition="contiguous", timeout=30,
                 **engine) as solver:
            for sources, limit in ((srcs[:1], None), (srcs, None), (srcs[:1], 0), (srcs, 3),
                                   (srcs[:1], 7), (many, None), (many[:-1], 2)):
                res = solver.run(sources=sources, cutoff=limit, predecessors=True)
                ref = nx.multi_source_dijkstra_path_length(G, set(sources), cutoff=limit,
                                                           weight=hop_weight)
                assert res.to_dict() == ref, (name, sources, limit)
                check_parents(G, res, sources, None)
    G = random_graph(5, n=400, p=0.01)
    with SSSP(groute_graph(G, weight="weight"), backend="cuda", partition="contiguous",
              timeout=30, **engine) as solver:
        for sources in ([0], [0, 100, 399]):
            res = solver.run(sources=sources, predecessors=True)
            assert res.to_dict() == nx.multi_source_dijkstra_path_length(G, set(sources))
            check_parents(G, res, sources, "weight")


def linked_cases():
    """(solver, graph, options) for the linked workers' runs again: BFS without a window and
    with one (far queue, threshold), SSSP with int and float weights, on a grid and Kronecker
    graph."""
    grid, kron = load_graph("grid:60"), load_graph("kron:12")
    floats = np.random.default_rng(3).uniform(0.5, 3.0, grid.num_edges).astype(np.float32)
    return [(BFS, grid, {}), (BFS, kron, {}), (BFS, grid, dict(priority=True, delta=4)),
            (SSSP, grid.with_weights(seed=1), {}), (SSSP, kron.with_weights(seed=1), {}),
            (SSSP, CSRGraph(grid.indptr, grid.indices, floats, name="float-grid"), {})]


@pytest.mark.multigpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [2, 4])
def test_cuda_linked_runs_again_from_other_seeds_under_a_cutoff(k):
    """The linked workers (async on several GPUs, exchange "peer") run again and again on one
    solver, from other seeds (spread over the devices by the random partition), with a cutoff
    and without, and every answer is one GPU's fused worker's: each kernel resets its own
    device's state at its start (values, queues, counters, link state, control words), so a
    cut run after a full one leaves the vertices past the cutoff unreached."""
    need_gpus(k)
    for cls, g, opts in linked_cases():
        n = g.num_vertices
        ids = lambda vs: [g.file_id_of(v) for v in vs]  # noqa: E731
        with cls(g, backend="cuda", devices=k, mode="async", exchange="peer", partition="random",
                 timeout=30, **opts) as linked, \
                cls(g, backend="cuda", devices=1, mode="async", timeout=30, **opts) as one:
            full = linked.run(g.file_id_of(busiest(g)))
            reached = full.values[(full.values >= 0) & np.isfinite(full.values)]
            near = np.sort(reached)[reached.size // 4].item()   # one seed: 3/4 of it past it
            for sources, cutoff in ((None, None), ([0, n // 2, n - 1], near), ([n // 3], 0),
                                    ([n // 4, 3 * n // 4], None), ([n - 1], near)):
                args = (dict(source=g.file_id_of(busiest(g))) if sources is None
                        else dict(sources=ids(sources)))
                res = linked.run(**args, cutoff=cutoff)
                msg = f"{cls.app} {g.name} {opts} sources {sources} cutoff {cutoff}"
                np.testing.assert_array_equal(res.values, one.run(**args, cutoff=cutoff).values,
                                              err_msg=msg)
                assert (res.stats["exchange"], res.stats["launches"]) == ("peer", k), msg
                if cutoff is not None:      # the full run reached what this one must not
                    cut = (res.values < 0) | ~np.isfinite(res.values)
                    assert np.count_nonzero(cut) > np.count_nonzero(
                        (full.values < 0) | ~np.isfinite(full.values)), msg


@pytest.mark.multigpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 4])
def test_cuda_peer_bfs_shares_level_0_without_offers(k):
    """From at most SHARED_SEEDS seeds every GPU expands every seed's row at level 0 and claims
    the targets it owns: a directed star's hub reaches every GPU's leaves, and a run cut after
    level 1's frontier is found offers nothing (``bytes_moved`` counts the hub's row read by
    the other GPUs). From more seeds the hub's owner expands it alone and offers the other
    GPUs' leaves to them (a directed graph never pulls)."""
    need_gpus(k)
    n = 50 * k
    star = CSRGraph.from_edges(np.zeros(n - 1, np.int64), np.arange(1, n), n, directed=True,
                               name="star")
    leaves = {v: 1 for v in range(1, n)}
    with BFS(star, backend="cuda", devices=k, mode="bsp", exchange="peer",
             partition="contiguous", timeout=30) as solver:
        shared = solver.run(0, cutoff=1)
        assert shared.to_dict() == {0: 0, **leaves}
        assert sum(shared.stats["items_sent"].values()) == 0, shared.stats["items_sent"]
        # what moved: the hub's row (two 8-byte bounds, 4 bytes an arc) read by every other GPU
        assert shared.stats["bytes_moved"] == (k - 1) * (16 + 4 * (n - 1)), shared.stats
        seeds = list(range(SHARED_SEEDS + 1))
        alone = solver.run(sources=seeds, cutoff=1)
        assert alone.to_dict() == {**leaves, **{v: 0 for v in seeds}}
        assert sum(alone.stats["items_sent"].values()) > 0, alone.stats["items_sent"]


def test_a_float_distance_equal_to_the_cutoff_is_kept():
    """0.1 + 0.1 in float32 is 0.2 as float32, above the float64 0.2: the run kept vertex 2
    (its ceiling is float32) and the filter after it dropped it. Distances are float32 sums,
    kept where they are at most the float32 cutoff (NetworkX's float64 sums differ where the
    two roundings do: 0.1 + 0.1 + 0.1 is above 0.3 in float64, not in float32)."""
    G = nx.path_graph(8)
    nx.set_edge_attributes(G, 0.1, "weight")
    whole = sssp(G, 0, backend="cpu", devices=2).to_dict()
    for cutoff in (0.2, 0.3, 0.5, 0.7):
        got = sssp(G, 0, cutoff=cutoff, backend="cpu", devices=2).to_dict()
        assert got == {v: d for v, d in whole.items() if np.float32(d) <= np.float32(cutoff)}
    assert sorted(sssp(G, 0, cutoff=0.2, backend="cpu").to_dict()) == \
        sorted(nx.single_source_dijkstra_path_length(G, 0, cutoff=0.2)) == [0, 1, 2]


def test_a_cutoff_past_every_float32_distance_is_none():
    """1e300 warned "overflow encountered in cast" (made a float32 ceiling): it cuts nothing."""
    import warnings
    G = nx.path_graph(4)
    nx.set_edge_attributes(G, 0.5, "weight")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cutoff in (1e300, 2**200):
            assert sorted(sssp(G, 0, cutoff=cutoff, backend="cpu").to_dict()) == [0, 1, 2, 3]
