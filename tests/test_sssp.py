"""SSSP on the distributed worklist against scipy's Dijkstra (groute.graph.reference).

Integer weights are summed exactly (int32), so distances must match exactly; float weights are
summed in float32 and compared to a relative 1e-6. Graphs: hand-made (path, star, two
components, self loops, duplicate arcs with different weights), a real graph, Kronecker and
grid graphs; 1-4 devices, every partitioner, async and BSP, priority on and off with several
deltas, ring and all-to-all; CPU virtual devices and CUDA (marked). Every run has a timeout.
"""
import math
import warnings

import numpy as np
import pytest

from groute.apps.sssp import SSSP, sssp
from groute.cli import main
from groute.graph import CSRGraph, load_graph, reference
from groute.graph import shipped_graph_path
from groute.tuning import TraversalTuning, WorklistTuning

from support import (SHARED_GRAPHS, busiest, check_auto_mode_on_gpu, check_baseline_on_gpu,
                     check_every_partitioner, check_host_exchange_on_gpus, check_peer_exchange,
                     check_peer_exchange_errors, device_cases, need_gpus, shared_graph_path, star)

POWER = shipped_graph_path()     # ships with groute: present wherever the tests run


def weighted(n, edges, directed=True):
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    w = np.array([e[2] for e in edges], dtype=np.int32)
    g = CSRGraph.from_edges(src, dst, n, w, directed=True, name="handmade")
    return g if directed else g.symmetrize()


def hand_made():
    path = weighted(6, [(i, i + 1, i + 1) for i in range(5)])
    star = weighted(9, [(0, i, 10 - i) for i in range(1, 9)], directed=False)
    two = weighted(8, [(0, 1, 4), (1, 2, 1), (0, 2, 9), (4, 5, 2), (5, 6, 2), (6, 7, 2)],
                   directed=False)
    # a shortcut that only pays off late (tests re-relaxation), self loops, repeated arcs
    indptr = np.array([0, 4, 6, 7, 7])
    indices = np.array([0, 1, 1, 3, 1, 2, 3], dtype=np.int32)
    w = np.array([5, 9, 2, 50, 0, 3, 1], dtype=np.int32)
    loops = CSRGraph(indptr, indices, w, name="loops+dups")
    return {"path": path, "star": star, "two-components": two, "loops+dups": loops}


def assert_sssp(values, g, source, msg="", expected=None):
    """``values`` against ``expected`` (default: scipy's Dijkstra from ``source``): exactly for
    integer weights (int32 sums), to a relative 1e-6 for float weights (float32 sums: the
    float32 Bellman-Ford fixpoint of grid:40 and grid:60 with weights 0.5..3 is within 4.5e-7)."""
    expected = reference.sssp(g, source) if expected is None else expected
    if g.weights is not None and np.asarray(g.weights).dtype.kind == "f":
        np.testing.assert_allclose(values, expected, rtol=1e-6, err_msg=msg)
    else:
        np.testing.assert_array_equal(values, expected, err_msg=msg)


def check(g, source, **kw):
    """SSSP from the vertex at position ``source`` (passed by its id) against the reference."""
    res = sssp(g, g.file_id_of(source), **kw)
    assert res.values.dtype == np.float64
    assert_sssp(res.values, g, source)
    return res


def graph(spec, seed=1):
    g = load_graph(str(POWER) if spec == "power" else spec)
    return g.with_weights(seed=seed)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["path", "star", "two-components", "loops+dups"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_hand_made_graphs(name, k, mode):
    g = hand_made()[name]
    for source in (0, 1):
        check(g, source, backend="cpu", devices=k, partition="contiguous", mode=mode, delta=3,
              timeout=10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("spec", ["power", "kron:9", "grid:20"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("partition", ["metis", "contiguous", "random"])
def test_real_and_generated_graphs_every_partitioner(spec, k, partition):
    check_every_partitioner(SSSP, reference.sssp, graph(spec), k, partition)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["async", "bsp"])
@pytest.mark.parametrize("priority,delta", [(False, None), (True, 1), (True, 20), (True, None)])
@pytest.mark.parametrize("routing", ["all2all", "ring"])
def test_modes_priority_routing(mode, priority, delta, routing):
    g = graph("grid:16")
    res = check(g, 3, backend="cpu", devices=3, partition="random", mode=mode, priority=priority,
                delta=delta, worklist_tuning=WorklistTuning(routing=routing), timeout=20)
    if mode == "async" and priority and delta == 1:
        assert res.stats["threshold_advances"] > 0 and res.stats["deferrals"] > 0


@pytest.mark.timeout(120)
def test_real_graph_from_shared_folder():
    path = shared_graph_path("as-22july06")
    g = load_graph(str(path)).with_weights(seed=5)
    for k, partition in ((1, "contiguous"), (3, "random")):
        check(g, busiest(g), backend="cpu", devices=k, partition=partition, timeout=30)


@pytest.mark.timeout(60)
def test_single_device_priority_defers_and_advances_inside_the_worker():
    g = graph("grid:20")
    on = check(g, 0, backend="cpu", devices=1, delta=8)
    off = check(g, 0, backend="cpu", devices=1, priority=False)
    assert on.stats["deferrals"] > 0 and off.stats["deferrals"] == 0
    # priority orders the work: fewer re-expansions than plain Bellman-Ford
    assert sum(on.stats["items_processed"]) <= sum(off.stats["items_processed"])


@pytest.mark.timeout(60)
def test_auto_priority_follows_the_diameter():
    from groute.engines.relax.solver import low_diameter
    # expanding graphs reach 2^16 vertices (or a quarter) within 16 levels, lattices do not
    assert low_diameter(graph("kron:14")) and not low_diameter(graph("grid:300"))
    assert not low_diameter(weighted(6, []))               # no arcs, no vote
    kron = check(graph("kron:10"), 0, backend="cpu", devices=1)
    grid = check(graph("grid:300"), 0, backend="cpu", devices=1)
    assert kron.stats["priority"] is False and grid.stats["priority"] is True
    # an explicit delta means priority; True/False are taken as they are
    assert check(graph("kron:10"), 0, backend="cpu", devices=1, delta=8).stats["priority"] is True
    assert check(graph("grid:30"), 0, backend="cpu", devices=1, priority=True).stats["priority"]
    with pytest.raises(ValueError, match="auto"):
        SSSP(graph("grid:4"), backend="cpu", devices=1, priority="sometimes")


@pytest.mark.timeout(60)
def test_float_weights_and_unweighted_graphs():
    g = load_graph("grid:12").without_weights()
    rng = np.random.default_rng(3)
    gf = CSRGraph(g.indptr, g.indices, rng.uniform(0.5, 3.0, g.num_edges).astype(np.float32),
                  name="float-weights")
    for k in (1, 3):
        check(gf, 5, backend="cpu", devices=k, partition="random", delta=2.0)
    # no weights: every arc weighs 1, so distances equal BFS depths
    res = sssp(g, 5, backend="cpu", devices=2, partition="contiguous")
    np.testing.assert_array_equal(res.values, reference.bfs(g, 5).astype(np.float64))


@pytest.mark.timeout(60)
def test_edge_cases():
    g = graph("grid:4")
    with pytest.raises(ValueError, match="out of range"):
        sssp(g, 99, backend="cpu", devices=1)
    neg = weighted(3, [(0, 1, 2), (1, 2, -1)])
    with pytest.raises(ValueError, match="negative"):
        sssp(neg, 0, backend="cpu", devices=1)
    empty = CSRGraph(np.zeros(4, dtype=np.int64), np.zeros(0, dtype=np.int32),
                     np.zeros(0, dtype=np.int32))
    assert sssp(empty, 1, backend="cpu", devices=2, partition="contiguous").values.tolist() == \
        [np.inf, 0.0, np.inf]
    with pytest.raises(ValueError, match="delta"):
        sssp(g, 0, backend="cpu", devices=1, delta=0)


def arcs(n, edges, dtype):
    """A directed graph of ``(u, v, weight)`` arcs with weights of ``dtype``."""
    src, dst, w = (np.array(c) for c in zip(*edges))
    return CSRGraph.from_edges(src, dst, n, w.astype(dtype), directed=True, name="arcs")


INT_MAX = 2**31 - 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
def test_a_sum_past_int32_off_every_shortest_path_is_no_error(backend, k):
    """Sums past int32 on arcs no shortest path takes must not raise: the distances fit."""
    cases = [
        (arcs(3, [(0, 1, INT_MAX), (0, 2, 1), (2, 1, 1)], np.int32), [0, 2, 1]),
        (arcs(3, [(0, 0, INT_MAX), (0, 1, INT_MAX), (0, 2, 1), (2, 1, 1), (1, 1, INT_MAX)],
              np.int32), [0, 2, 1]),
        # the largest int32 distance is exact, also along a zero-weight arc
        (arcs(4, [(0, 1, INT_MAX - 3), (1, 2, 2), (2, 3, 0), (3, 2, 5)], np.int32),
         [0, INT_MAX - 3, INT_MAX - 1, INT_MAX - 1]),
    ]
    for g, expected in cases:
        res = sssp(g, 0, backend=backend, devices=min(k, g.num_vertices), partition="contiguous",
                   timeout=10)
        np.testing.assert_array_equal(res.values, expected)
    single = arcs(1, [(0, 0, INT_MAX)], np.int32)
    assert sssp(single, 0, backend=backend, devices=1, timeout=10).values.tolist() == [0.0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2]))
@pytest.mark.parametrize("weight", [None, "weight"])
def test_shortest_path_without_a_target_gives_a_path_to_every_vertex_reached(backend, k,
                                                                          weight):
    """As NetworkX's shortest_path(G, source): a dict of paths (it was 'target None is not a
    vertex'); a vertex not reached has none."""
    import networkx as nx
    import groute
    G = nx.gnp_random_graph(80, 0.05, seed=4, directed=True)
    for u, v in G.edges:
        G[u][v]["weight"] = (3 * u + v) % 7 + 1
    G.add_node("far")
    want = (nx.single_source_shortest_path_length(G, 0) if weight is None
            else nx.single_source_dijkstra_path_length(G, 0, weight=weight))
    got = groute.shortest_path(G, 0, weight=weight, backend=backend, devices=k, timeout=20)
    assert set(got) == set(want) and "far" not in got
    for t, p in got.items():
        assert p[0] == 0 and p[-1] == t and all(G.has_edge(a, b) for a, b in zip(p, p[1:]))
        length = len(p) - 1 if weight is None else sum(G[a][b]["weight"]
                                                       for a, b in zip(p, p[1:]))
        assert length == want[t]
        if len(p) > 1:
            assert got[p[-2]] == p[:-1]         # the tree: a vertex's parent's path and itself


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
def test_a_shortest_distance_past_int32_raises(backend, k):
    for g, far in [(arcs(3, [(0, 1, INT_MAX - 1), (1, 2, 1)], np.int32), 2),
                   (arcs(3, [(0, 1, INT_MAX), (0, 2, 5)], np.int32), 1),
                   (arcs(4, [(0, 1, 2**30), (1, 2, 2**30), (2, 3, 2**30)], np.int32), 2)]:
        with pytest.raises(OverflowError, match=f"vertex {far} .*float weights"):
            sssp(g, 0, backend=backend, devices=k, partition="contiguous", timeout=10)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
def test_a_float_distance_past_float32_raises_instead_of_reading_unreachable(backend, k):
    path = arcs(3, [(0, 1, 3e38), (1, 2, 3e38)], np.float32)
    with pytest.raises(OverflowError, match="vertex 2 .*float32"):
        sssp(path, 0, backend=backend, devices=k, partition="contiguous", timeout=10)
    # big sums off the shortest paths, and a vertex that is truly unreachable, are fine
    ok = arcs(4, [(0, 1, 3e38), (1, 2, 3e38), (0, 2, 1.0), (3, 0, 1.0)], np.float32)
    res = sssp(ok, 0, backend=backend, devices=k, partition="contiguous", timeout=10)
    np.testing.assert_allclose(res.values, [0, 3e38, 1, np.inf], rtol=1e-6)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
@pytest.mark.parametrize("priority", [True, False])
def test_float_weights_near_float32s_limit_raise_no_numpy_warning(backend, k, priority):
    """A mean weight, delta or priority threshold past float32's range is no overflowing cast
    (warnings are errors here, in the device threads too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(OverflowError, match="vertex 2 "):
            sssp(arcs(3, [(0, 1, 3e38), (1, 2, 3e38)], np.float32), 0, backend=backend,
                 devices=k, partition="contiguous", priority=priority, timeout=10)
        g = arcs(5, [(0, 1, 1e38), (1, 2, 1e38), (2, 3, 1e38), (0, 4, 3e38)], np.float32)
        res = sssp(g, 0, backend=backend, devices=k, partition="contiguous", priority=priority,
                   timeout=10)
    np.testing.assert_allclose(res.values, [0, 1e38, 2e38, 3e38, 3e38], rtol=1e-6)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_a_float_window_narrower_than_the_distances_precision_still_advances(backend, k, mode):
    """A delta float32 cannot add to the distances (1e-30 on distances of about 1; 1.0 on
    distances of about 1e8, whose spacing is 8) steps the threshold to the next float32, so
    the run ends with the right distances; a window that stayed put would wait out the
    timeout (one device: spin inside the fused kernel, for good)."""
    gf = float_grid()
    res = sssp(gf, 5, backend=backend, devices=k, mode=mode, priority=True, delta=1e-30,
               partition="contiguous", timeout=20)
    assert_sssp(res.values, gf, 5)
    big = CSRGraph(gf.indptr, gf.indices, (gf.weights * np.float32(1e8)).astype(np.float32),
                   name="float-weights-1e8")
    res = sssp(big, 5, backend=backend, devices=k, mode=mode, priority=True, delta=1.0,
               partition="contiguous", timeout=20)
    assert_sssp(res.values, big, 5)


def test_threshold_bits_past_float32_are_infinity_without_a_warning():
    """The CUDA worker's host side turns thresholds and deltas into the kernels' int32 bits
    (groute/engines/relax/cuda_worker.py): one past float32's range is infinity's bits, with no
    overflowing cast, which the GPU cases of the test above would raise; pure NumPy, so it
    runs without a GPU."""
    from groute.engines.relax.cuda_worker import _bits, _value_of_bits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _bits(3.4e39, "float") == _bits(math.inf, "float")
        assert _value_of_bits(_bits(6e38, "float"), "float") == math.inf
        top = float(np.finfo(np.float32).max)
        assert _value_of_bits(_bits(top, "float"), "float") == top
        assert _value_of_bits(_bits(1.5, "float"), "float") == 1.5


@pytest.mark.timeout(60)
def test_cli_sssp(tmp_path, capsys):
    path = str(shipped_graph_path())
    out = tmp_path / "d.txt"
    rc = main(["sssp", "--graph", path, "--source", "3", "--backend", "cpu", "--devices", "3",
               "--partition", "contiguous", "--routing", "ring", "--repeat", "1", "--verify",
               "--random-weights", "--stats", "--output", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "verify: ok" in text and "weights: random integers 1..64" in text
    rows = np.loadtxt(out)
    assert rows[2, 0] == 3 and rows[2, 1] == 0          # file id 3 is the source
    g = load_graph(path).with_weights(seed=0)
    np.testing.assert_array_equal(rows[:, 1], reference.sssp(g, 2))


# ---------------------------------------------------------------------------------------- CUDA
@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("spec", ["path", "star", "two-components", "loops+dups", "power", "kron:12",
                                  "grid:40"])
@pytest.mark.parametrize("mode,priority", [("async", True), ("async", False), ("bsp", False)])
def test_cuda_one_device(spec, mode, priority):
    need_gpus(1)
    g = hand_made().get(spec) or graph(spec)
    # BSP here is the distributed worklist's (the peer kernel: test_cuda_peer_exchange)
    with SSSP(g, backend="cuda", devices=1, mode=mode, priority=priority, timeout=30,
              exchange="host") as solver:
        for source in (0, busiest(g)):
            res = solver.run(g.file_id_of(source))
            np.testing.assert_array_equal(res.values, reference.sssp(g, source))


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_float_weights_small_delta_and_far_overflow():
    need_gpus(1)
    g = load_graph("grid:60").without_weights()
    rng = np.random.default_rng(3)
    gf = CSRGraph(g.indptr, g.indices, rng.uniform(0.5, 3.0, g.num_edges).astype(np.float32))
    check(gf, 5, backend="cuda", devices=1, delta=0.5)
    # a far queue far too small: overflow must fall back to rebuilding it from the state
    gi = g.with_weights(seed=2)
    with SSSP(gi, backend="cuda", devices=1, delta=1) as solver:
        for w in solver.workers:
            w.far_cap = 16
            rec = w._pack_args()
            import cupy
            w.args = cupy.asarray(np.frombuffer(rec.tobytes(), dtype=np.uint8))
        res = solver.run(7)
        np.testing.assert_array_equal(res.values, reference.sssp(gi, 7))


@pytest.mark.multigpu
@pytest.mark.timeout(180)
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("mode", ["async", "bsp"])
@pytest.mark.parametrize("routing", ["all2all", "ring"])
def test_cuda_multi_device(k, mode, routing):
    check_host_exchange_on_gpus(check, graph, k, mode, routing)


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_plain_cupy_baseline_matches_reference():
    from groute.bench.baselines import cupy_sssp
    check_baseline_on_gpu(cupy_sssp, reference.sssp, graph)


def drive_workers_by_hand(workers, source_new, delta):
    """A sequential stand-in for the distributed worklist, for several workers on one GPU: the
    kernels' multi-device paths (remote relaxations, outboxes and their overflow, absorb,
    host-driven threshold splits) run without needing several GPUs."""
    import math
    thr = delta
    for w in workers:
        w.set_delta(delta)
        w.set_source(source_new)
        w.start(thr)
    for _ in range(100_000):
        pending = [[] for _ in workers]
        moved = False
        for w in workers:
            if w.work.near:
                _, out = w.advance(thr, max_rounds=None, self_advance=False)
                moved = True
                for j, arr in enumerate(out):
                    if arr is not None:     # copied on the stream absorb reads it from
                        with w.device.use(), w.device.compute_stream.raw:
                            pending[j].append(arr.copy())
        for j, items in enumerate(pending):
            if items:
                workers[j].absorb(items, thr)
        if moved or any(pending):
            continue
        far = [w.work.far_min for w in workers if w.work.far]
        if not far:
            return
        thr = max(thr, min(far)) + delta if thr != math.inf else thr
        for w in workers:
            w.split(thr)
    raise AssertionError("the hand-driven exchange did not finish")


@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("app", ["bfs", "sssp"])
def test_cuda_multi_device_kernel_paths_on_one_gpu(app):
    need_gpus(1)
    import math
    from groute.apps.bfs import HOPS
    from groute.apps.sssp import DISTANCE
    from groute.engines.relax.cuda_worker import CUDATraversalWorker
    from groute import Context
    from groute.graph import partition_graph
    g = graph("grid:50") if app == "sssp" else load_graph("kron:12")
    k = 3
    p = partition_graph(g, k, method="random", seed=1)
    n = g.num_vertices
    source = busiest(g)
    with Context(1, backend="cuda", timeout=30) as ctx:
        dev = ctx.devices[0]
        for out_capacity, flush in ((1 << 20, 1 << 16), (8, 16)):    # roomy, then tiny outboxes
            workers = [CUDATraversalWorker(dev, p.local(i), lo=p.offsets[i], hi=p.offsets[i + 1],
                                           offsets=p.offsets, num_vertices=n, kind="int",
                                           weighted=(app == "sssp"), flush_items=flush,
                                           out_capacity=out_capacity, unit=(app == "bfs"),
                                           relaxation=HOPS if app == "bfs" else DISTANCE)
                       for i in range(k)]
            delta = 40 if app == "sssp" else math.inf
            drive_workers_by_hand(workers, int(np.asarray(p.perm)[source]), delta)
            values = np.concatenate([dev.to_host(w.values()) for w in workers]).astype(np.float64)
            values[values == np.iinfo(np.int32).max] = np.inf
            got = np.asarray(p.to_original(values))
            if app == "bfs":
                expected = reference.bfs(g, source).astype(np.float64)
                expected[expected < 0] = np.inf
            else:
                expected = reference.sssp(g, source)
            np.testing.assert_array_equal(got, expected)


@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("ceiling", [None, 0])
def test_a_cuda_worker_starts_from_the_whole_starting_state_whatever_was_there(ceiling):
    """CUDATraversalWorker.start (reset_fused, then place_seeds_fused: plain launches) on three
    parts of a graph on one GPU whose every array holds garbage, seeds on two of them: values
    unreached but the owned seeds' (0); in_near -1 but the queued seeds' (0, and in round 0's
    queue; none under a ceiling of 0); sent_best of the other parts' vertices unreached;
    counters 0; control words 0 but the seeds queued, FAR_MIN (unreached), the threshold and
    the ceiling, the grid barrier's words included."""
    need_gpus(1)
    from groute import Context
    from groute.apps.sssp import DISTANCE
    from groute.engines.relax.cuda_worker import (CTL_SIZE, FAR_MIN, NEAR_COUNT, THRESHOLD,
                                                  CUDATraversalWorker)
    from groute.graph import partition_graph
    g = graph("grid:50")
    k, n = 3, g.num_vertices
    p = partition_graph(g, k, method="random", seed=1)
    offsets = np.asarray(p.offsets)
    seeds = [int(offsets[0]), int(offsets[0]) + 5, int(offsets[2]) + 1]   # parts 0 and 2
    inf = np.iinfo(np.int32).max
    with Context(1, backend="cuda", timeout=30) as ctx:
        dev = ctx.devices[0]
        workers = [CUDATraversalWorker(dev, p.local(i), lo=offsets[i], hi=offsets[i + 1],
                                       offsets=offsets, num_vertices=n, kind="int",
                                       weighted=True, unit=False, relaxation=DISTANCE)
                   for i in range(k)]
        for w in workers:
            junk = ((w.dist, 5), (w.in_near, 7), (w.sent_best, 3), (w.ctl, 9), (w.near[0], -2),
                    (w.counters_dev, 11))
            dev.compute_stream.submit(lambda: [a.fill(v) for a, v in junk])   # the start's order
            w.set_source(seeds, ceiling)
            work = w.start(40)
            mine = np.array([s - w.lo for s in seeds if w.lo <= s < w.hi], np.int64)
            queued = ceiling is None and mine.size > 0
            assert work.near == (mine.size if queued else 0) and work.far == 0
            dist, in_near = w.dist.get()[:w.n_local], w.in_near.get()[:w.n_local]
            want = np.full(w.n_local, inf, np.int32)
            want[mine] = 0
            np.testing.assert_array_equal(dist, want)
            want = np.full(w.n_local, -1, np.int32)
            if queued:
                want[mine] = 0
                assert sorted(w.near[0].get()[:mine.size]) == sorted(mine)
            np.testing.assert_array_equal(in_near, want)
            peers = np.r_[0:w.lo, w.hi:n]
            assert (w.sent_best.get()[peers] == inf).all()
            assert not w.counters_dev.get().any()
            ctl = np.zeros(CTL_SIZE, np.int32)
            ctl[NEAR_COUNT] = mine.size if queued else 0
            ctl[FAR_MIN], ctl[THRESHOLD] = inf, 40
            ctl[22] = inf if ceiling is None else ceiling           # fused.cuh's CEILING
            np.testing.assert_array_equal(w.ctl.get(), ctl)


# ------------------------------------------------------------------------- through peer memory
def zero_weight_grid():
    """A grid where a third of the arcs weigh 0 (ties everywhere, plateaus of equal distance)."""
    g = load_graph("grid:30")
    w = np.random.default_rng(7).integers(0, 3, g.num_edges).astype(np.int32)
    return CSRGraph(g.indptr, g.indices, w, name="zero-weights")


def float_grid():
    g = load_graph("grid:40")
    w = np.random.default_rng(3).uniform(0.5, 3.0, g.num_edges).astype(np.float32)
    return CSRGraph(g.indptr, g.indices, w, name="float-weights")


def peer_graphs():
    """Hand-made graphs, zero and float weights, high and low diameter, real and generated."""
    graphs = dict(hand_made())
    graphs["zero-weights"] = zero_weight_grid()
    graphs["float-weights"] = float_grid()
    graphs["power"] = graph("power")
    enron = SHARED_GRAPHS / "email-Enron.mtx.gz"
    if enron.exists():
        graphs["email-Enron"] = load_graph(str(enron)).with_weights(seed=4)
    graphs["kron:16"] = graph("kron:16")
    graphs["grid:40"] = graph("grid:40")
    graphs["star50k"] = star().with_weights(seed=2)    # a hub whose arcs are shared out in chunks
    return graphs


def test_exchange_peer_needs_cuda_and_two_devices_for_async():
    g = graph("grid:6")
    check_peer_exchange_errors(SSSP, g)
    # auto: the worklist, and BSP on the worklist keeps no priority window
    res = check(g, 0, backend="cpu", devices=2, mode="bsp", partition="contiguous", priority=True)
    assert res.stats["exchange"] == "host" and res.stats["priority"] is False


def test_auto_mode_takes_the_peer_kernel_where_it_can_run(monkeypatch):
    grid, kron = graph("grid:300"), graph("kron:12")
    with SSSP(kron, backend="cpu", devices=1) as solver:
        assert solver.mode == "async"                  # CPU devices: no peer kernel
        monkeypatch.setattr(solver, "_peer_why", None, raising=False)  # as if it could run
        assert solver.auto_mode(kron) == "bsp"         # one device, low diameter: the peer kernel
    with SSSP(grid, backend="cpu", devices=1) as solver:
        monkeypatch.setattr(solver, "_peer_why", None, raising=False)
        assert solver.auto_mode(grid) == "async"       # one device, road-like: the fused worker
    with SSSP(kron, backend="cpu", devices=2, partition="contiguous") as solver:
        monkeypatch.setattr(solver, "_peer_why", None, raising=False)
        assert solver.auto_mode(kron) == "bsp"         # several devices, low diameter: peer too
    with SSSP(grid, backend="cpu", devices=2, partition="contiguous") as solver:
        monkeypatch.setattr(solver, "_peer_why", None, raising=False)
        assert solver.auto_mode(grid) == "async"       # several devices, road-like: linked


@pytest.mark.gpu
@pytest.mark.timeout(600)
@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.multigpu),
                               pytest.param(3, marks=pytest.mark.multigpu),
                               pytest.param(4, marks=pytest.mark.multigpu)])
@pytest.mark.parametrize("priority", [True, False])
def test_cuda_peer_exchange(k, priority):
    """SSSP in one persistent launch per device, exchanging through peer memory, against
    scipy's Dijkstra; several runs per solver (each starts from clean state)."""
    def compare(res, case):
        assert case.solver.priority is priority
        assert_sssp(res.values, case.graph, case.source, case.msg, case.expected)
        if case.name == "power" and priority:
            assert res.stats["threshold_advances"] > 0

    check_peer_exchange(SSSP, k, peer_graphs, reference.sssp, compare, priority=priority)


@pytest.mark.multigpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [2, 4])
def test_cuda_peer_refresh_keeps_the_answer_and_reads_the_peers(k):
    """``TraversalTuning.peer_refresh``: never, after every round and the default all give
    scipy's distances. ``bytes_moved`` is 8 bytes per offer plus, after every round but the
    last when refreshing each round, the distances of every vertex a device does not own
    (``refresh_sent`` in peer.cu): exactly that many, so a refresh that did not run, or read
    too little, fails."""
    need_gpus(k)
    g = graph("kron:12")
    src = busiest(g)
    for share in (None, 0.0, TraversalTuning().peer_refresh):
        res = check(g, src, backend="cuda", devices=k, mode="bsp", exchange="peer",
                    partition="contiguous", priority=False,
                    tuning=TraversalTuning(peer_refresh=share))
        rounds = res.stats["rounds_per_device"]
        assert len(set(rounds)) == 1 and rounds[0] > 2, res.stats
        offers = 8 * sum(res.stats["items_sent"].values())
        if share is None:
            assert res.stats["bytes_moved"] == offers, res.stats
        elif share == 0.0:
            refreshed = 4 * (k - 1) * g.num_vertices * (rounds[0] - 1)
            assert res.stats["bytes_moved"] == offers + refreshed, res.stats


@pytest.mark.multigpu
@pytest.mark.timeout(600)
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("priority", [True, False])
def test_cuda_linked_exchange(k, priority):
    """Asynchronous SSSP on several GPUs in one launch each (device-initiated links), each GPU
    moving its own soft-priority threshold; against scipy's Dijkstra."""
    def compare(res, case):
        assert case.solver.priority is priority
        assert_sssp(res.values, case.graph, case.source, case.msg, case.expected)
        if priority and case.name == "power":
            assert res.stats["deferrals"] > 0

    check_peer_exchange(SSSP, k, peer_graphs, reference.sssp, compare, mode="async",
                        priority=priority)


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_auto_mode_picks_the_peer_kernel_for_low_diameter_graphs():
    low, road = check_auto_mode_on_gpu(check, graph)
    assert low.stats["priority"] is False and road.stats["priority"] is True


@pytest.mark.multigpu
@pytest.mark.timeout(180)
def test_cuda_auto_mode_on_two_gpus_takes_the_linked_workers_for_road_graphs():
    low, road = check_auto_mode_on_gpu(check, graph, k=2)
    assert low.stats["priority"] is False and road.stats["priority"] is True


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_peer_exchange_explicit_delta_and_float_steps():
    need_gpus(1)
    g = graph("grid:40")
    for delta in (1, 7, 10_000):
        res = check(g, 3, backend="cuda", devices=1, mode="bsp", exchange="peer", delta=delta)
        assert res.stats["priority"] and res.stats["delta"] == delta
    # a float delta too small to move past the least distance: the threshold still advances
    gf = float_grid()
    res = sssp(gf, 5, backend="cuda", devices=1, mode="bsp", exchange="peer", delta=1e-30)
    assert_sssp(res.values, gf, 5)


@pytest.mark.multigpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("app", ["bfs", "sssp"])
@pytest.mark.parametrize("mode", ["bsp", "async"])
@pytest.mark.parametrize("k", [2, 3], ids=["x2", "x3"])
def test_cuda_peer_barrier_timeout_raises_and_the_solver_recovers(app, mode, k, monkeypatch):
    """A device that never launches: the others give up at the cross-device barrier, the run
    raises in the caller, and the next run is right again (BSP: the persistent peer kernels;
    async: the linked workers, whose rings are refilled after the failed run). With three
    devices two give up, each after its own wait."""
    need_gpus(k)
    import groute.engines.peer_barrier as pb
    import groute.engines.relax.linked as tl
    import groute.engines.relax.peer as tp
    from groute.apps.bfs import BFS
    monkeypatch.setattr(pb, "BARRIER_TIMEOUT_S", 0.5)
    g = graph("kron:12") if app == "sssp" else load_graph("kron:12")
    cls = SSSP if app == "sssp" else BFS
    with cls(g, backend="cuda", devices=k, partition="random", mode=mode, exchange="peer",
             timeout=30) as solver:
        owner = tp.PeerTraversal if mode == "bsp" else tl.LinkedTraversal
        real = owner._launch
        monkeypatch.setattr(owner, "_launch",
                            lambda self, i, *args: None if i == 1 else real(self, i, *args))
        with pytest.raises(RuntimeError, match="waited more than 0.5 s at a cross-device barrier"):
            solver.run(0)
        monkeypatch.setattr(owner, "_launch", real)
        res = solver.run(busiest(g))
        expected = (reference.sssp(g, busiest(g)) if app == "sssp"
                    else reference.bfs(g, busiest(g)))
        np.testing.assert_array_equal(res.values, expected)


@pytest.mark.timeout(60)
def test_an_overflow_names_the_vertex_by_the_graphs_own_id():
    nx = pytest.importorskip("networkx")
    G = nx.DiGraph()
    G.add_edge("a", "b", weight=INT_MAX - 1)
    G.add_edge("b", "c", weight=1)
    with pytest.raises(OverflowError, match="vertex 'c' "):
        sssp(G, "a", backend="cpu", devices=1, timeout=10)
    H = nx.DiGraph()
    H.add_edge("a", "b", weight=3e38)
    H.add_edge("b", "c", weight=3e38)
    with pytest.raises(OverflowError, match="vertex 'c' "):
        sssp(H, "a", backend="cpu", devices=1, timeout=10)


def test_weight_none_counts_hops_whatever_the_input_holds():
    """A matrix's or edge arrays' own values were the weights with weight=None."""
    import scipy.sparse as sp
    arrays = ([0, 1, 0], [1, 2, 2], [1.0, 1.0, 5.0])
    matrix = sp.csr_matrix([[0, 1, 5], [0, 0, 1], [0, 0, 0]])
    for G in (arrays, matrix):
        assert sssp(G, 0, weight=None, backend="cpu", devices=1).to_dict() == \
            {0: 0.0, 1: 1.0, 2: 1.0}
        assert sssp(G, 0, backend="cpu", devices=1).to_dict() == {0: 0.0, 1: 1.0, 2: 2.0}
