"""BFS on the distributed worklist against scipy's BFS (groute.graph.reference), exactly.

Hand-made graphs (path, star, two components, self loops, duplicate arcs), a real graph, and
generated Kronecker and grid graphs; 1-4 devices, every partitioner, async and BSP, priority on
and off, ring and all-to-all routing, CPU virtual devices (CI) and CUDA (marked ``gpu``).
Every run is under a timeout: wrong termination counting would hang, not pass.
"""
import numpy as np
import pytest

from groute.apps.bfs import BFS, bfs
from groute import Context
from groute.cli import main
from groute.graph import CSRGraph, load_graph, reference
from groute.graph import shipped_graph_path
from groute.tuning import WorklistTuning

from support import (busiest, check_auto_mode_on_gpu, check_baseline_on_gpu,
                     check_every_partitioner, check_host_exchange_on_gpus, check_peer_exchange,
                     check_peer_exchange_errors, graph_from, need_gpus, shared_graph_path, star)

POWER = shipped_graph_path()     # ships with groute: present wherever the tests run


def hand_made():
    path = graph_from(6, [(i, i + 1) for i in range(5)], name="handmade")
    star = graph_from(9, [(0, i) for i in range(1, 9)], directed=False, name="handmade")
    two = graph_from(8, [(0, 1), (1, 2), (2, 0), (4, 5), (5, 6), (6, 7)], directed=False,
                     name="handmade")
    # self loops and repeated arcs: keep them in the CSR (from_edges would merge duplicates)
    indptr = np.array([0, 3, 5, 6, 6])
    indices = np.array([0, 1, 1, 1, 2, 3], dtype=np.int32)
    loops = CSRGraph(indptr, indices, name="loops+dups")
    return {"path": path, "star": star, "two-components": two, "loops+dups": loops}


def check(g, source, **kw):
    """BFS from the vertex at position ``source`` (passed by its id) against the reference."""
    res = bfs(g, g.file_id_of(source), **kw)
    expected = reference.bfs(g, source)
    np.testing.assert_array_equal(res.values, expected)
    assert res.values.dtype == np.int32
    return res


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["path", "star", "two-components", "loops+dups"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_hand_made_graphs(name, k, mode):
    g = hand_made()[name]
    for source in (0, g.num_vertices - 1):
        check(g, source, backend="cpu", devices=k, partition="contiguous", mode=mode, timeout=10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("spec", ["power", "kron:9", "grid:20"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("partition", ["metis", "contiguous", "random"])
def test_real_and_generated_graphs_every_partitioner(spec, k, partition):
    g = load_graph(str(POWER) if spec == "power" else spec)
    res = check_every_partitioner(BFS, reference.bfs, g, k, partition)
    if not res.stats["pull_rounds"]:     # a pull level does not process its frontier
        assert sum(res.stats["items_processed"]) >= np.count_nonzero(res.values >= 0)
    if k > 1 and partition == "random":
        assert res.stats["bytes_moved"] > 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["async", "bsp"])
@pytest.mark.parametrize("priority", [True, False])
@pytest.mark.parametrize("routing", ["all2all", "ring"])
def test_modes_priority_routing(mode, priority, routing):
    g = load_graph("grid:16")
    res = check(g, 5, backend="cpu", devices=3, partition="random", mode=mode, priority=priority,
                worklist_tuning=WorklistTuning(routing=routing), delta=2, timeout=20)
    assert res.stats["mode"] == mode and res.stats["routing"] == routing
    if routing == "ring":
        assert set(res.stats["items_sent"]) == {"0->1", "1->2", "2->0"}
    if mode == "bsp":
        assert res.stats["rounds_per_device"][0] >= int(res.values.max()) + 1


@pytest.mark.timeout(60)
def test_real_graph_from_shared_folder_directed():
    path = shared_graph_path("polblogs")
    g = load_graph(str(path))
    check(g, busiest(g), backend="cpu", devices=2, partition="random", timeout=20)


@pytest.mark.timeout(60)
def test_edge_cases():
    g = load_graph("grid:4")
    with pytest.raises(ValueError, match="out of range"):
        bfs(g, 16, backend="cpu", devices=1)
    with pytest.raises(ValueError, match="out of range"):
        bfs(g, -1, backend="cpu", devices=1)
    empty = CSRGraph(np.zeros(6, dtype=np.int64), np.zeros(0, dtype=np.int32), name="no-edges")
    res = bfs(empty, 2, backend="cpu", devices=2, partition="contiguous")
    assert res.values.tolist() == [-1, -1, 0, -1, -1]
    tiny = graph_from(2, [(0, 1)])
    with pytest.raises(ValueError, match="devices"):
        bfs(tiny, 0, backend="cpu", devices=3)
    with pytest.raises(ValueError, match="mode"):
        bfs(tiny, 0, backend="cpu", devices=1, mode="sync")
    one = CSRGraph(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32))
    assert bfs(one, 0, backend="cpu", devices=1).values.tolist() == [0]


@pytest.mark.timeout(60)
def test_solver_reuses_a_given_context_and_leaves_it_open():
    g = load_graph("kron:8")
    with Context(2, backend="cpu", timeout=10) as ctx:
        with BFS(g, ctx=ctx, partition="contiguous") as solver:
            a = solver.run(busiest(g))
            b = solver.run(busiest(g))
        np.testing.assert_array_equal(a.values, b.values)
        assert not ctx.stopped
        check(g, 1, ctx=ctx, partition="random")


@pytest.mark.timeout(60)
def test_cli_bfs(tmp_path, capsys):
    path = str(shipped_graph_path())
    out = tmp_path / "d.npy"
    rc = main(["bfs", "--graph", path, "--source", "1", "--backend", "cpu", "--devices", "2",
               "--partition", "random", "--repeat", "2", "--verify", "--stats", "--output", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "verify: ok" in text and "GTEPS" in text and "items_processed" in text
    g = load_graph(path)
    saved = np.load(out)
    np.testing.assert_array_equal(saved["depth"], reference.bfs(g, 0))    # file id 1 = vertex 0
    np.testing.assert_array_equal(saved["id"], np.arange(1, g.num_vertices + 1))
    txt = tmp_path / "d.txt"
    assert main(["bfs", "--graph", path, "--source", "1", "--backend", "cpu", "--devices", "1",
                 "--repeat", "1", "--output", str(txt)]) == 0
    first = txt.read_text().split("\n")[0].split()
    assert first == ["1", "0"]
    assert main(["bfs", "--graph", path, "--source", "0", "--backend", "cpu", "--devices", "1"]) == 1
    assert "not a vertex" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- CUDA
@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("spec", ["path", "star", "two-components", "loops+dups", "power", "kron:12",
                                  "grid:40"])
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_cuda_one_device(spec, mode):
    need_gpus(1)
    g = hand_made().get(spec) or load_graph(str(POWER) if spec == "power"
                                            else spec)
    with BFS(g, backend="cuda", devices=1, mode=mode, timeout=30) as solver:
        for source in (0, busiest(g)):
            res = solver.run(g.file_id_of(source))
            np.testing.assert_array_equal(res.values, reference.bfs(g, source))
            assert res.stats["launches"] >= 1


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_hub_vertices_use_chunks_and_tiny_outboxes_recover():
    need_gpus(1)
    # a star with 50k leaves: the hub's arcs are shared out in chunks across the grid
    hub = star()
    check(hub, 0, backend="cuda", devices=1)
    check(hub, 7, backend="cuda", devices=1)


@pytest.mark.multigpu
@pytest.mark.timeout(180)
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("mode", ["async", "bsp"])
@pytest.mark.parametrize("routing", ["all2all", "ring"])
def test_cuda_multi_device(k, mode, routing):
    check_host_exchange_on_gpus(check, load_graph, k, mode, routing)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.multigpu),
                               pytest.param(3, marks=pytest.mark.multigpu),
                               pytest.param(4, marks=pytest.mark.multigpu)])
def test_cuda_peer_exchange(k):
    """BSP BFS in one persistent launch per device, exchanging through peer memory."""
    def graphs():
        out = dict(hand_made())
        for spec in ("kron:12", "kron:16", "grid:40"):
            out[spec] = load_graph(spec)
        out["power"] = load_graph(str(POWER))
        out["star50k"] = star()     # a hub whose arcs are shared out in chunks, most remote
        return out

    def compare(res, case):
        np.testing.assert_array_equal(res.values, case.expected, err_msg=case.msg)
        if case.name == "kron:16" and case.source == busiest(case.graph):
            assert res.stats["pull_levels"] > 0

    check_peer_exchange(BFS, k, graphs, reference.bfs, compare)


@pytest.mark.multigpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("priority", [True, False])
def test_cuda_linked_exchange(k, priority):
    """Asynchronous BFS on several GPUs in one launch each, offers written into the owners'
    rings (device-initiated links); several runs per solver, every partitioner."""
    def graphs():
        out = dict(hand_made())
        for spec in ("kron:12", "grid:40", "grid:300"):
            out[spec] = load_graph(spec)
        out["power"] = load_graph(str(POWER))
        out["star50k"] = star()
        return out

    def compare(res, case):
        np.testing.assert_array_equal(res.values, case.expected, err_msg=case.msg)
        assert res.stats["priority"] is priority and res.stats["launches"] == k

    check_peer_exchange(BFS, k, graphs, reference.bfs, compare, mode="async", priority=priority)


@pytest.mark.multigpu
@pytest.mark.timeout(300)
def test_cuda_linked_tiny_rings_push_back(monkeypatch):
    """Rings of 4 items: most offers find them full, the senders keep their vertices queued
    and offer again, nothing is lost."""
    need_gpus(2)
    import groute.engines.relax.linked as tl
    monkeypatch.setattr(tl, "MIN_CAPACITY", 4)
    monkeypatch.setattr(tl, "MAX_CAPACITY", 4)
    for spec in ("kron:12", "grid:40"):
        g = load_graph(spec)
        with BFS(g, backend="cuda", devices=2, partition="random", mode="async",
                 exchange="peer", timeout=30) as solver:
            for s in (busiest(g), 0):
                res = solver.run(s)
                np.testing.assert_array_equal(res.values, reference.bfs(g, s), err_msg=spec)
            assert sum(solver.peer.run(0)["ring_full"]) > 0


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_auto_mode_picks_the_persistent_kernel_for_low_diameter_graphs():
    check_auto_mode_on_gpu(check, load_graph)
    directed = load_graph("rmat:12")    # low diameter, but the kernel cannot pull there
    assert directed.directed
    with BFS(directed, backend="cuda", devices=1) as solver:
        assert solver.auto_mode(directed) == "async"


@pytest.mark.multigpu
@pytest.mark.timeout(180)
def test_cuda_auto_mode_on_two_gpus_takes_the_linked_workers_for_road_graphs():
    low, road = check_auto_mode_on_gpu(check, load_graph, k=2)
    assert road.stats["priority"] is False      # the linked workers run without a window


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_plain_cupy_baseline_matches_reference():
    from groute.bench.baselines import cupy_bfs
    check_baseline_on_gpu(cupy_bfs, reference.bfs, load_graph)


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_pull_reshape_and_priority_window():
    need_gpus(1)
    g = load_graph("kron:16")
    res = check(g, busiest(g), backend="cuda", devices=1, mode="async")
    assert res.stats["pull_rounds"] > 0 and res.stats["reshapes"] > 0
    # a finite window (BFS priority): deferred items, and the unique-push shortcut is off
    grid = load_graph("grid:40")
    res = check(grid, 0, backend="cuda", devices=1, delta=3, mode="async")
    assert res.stats["deferrals"] > 0


@pytest.mark.timeout(60)
def test_exchange_option_says_what_can_run():
    g = load_graph("grid:8")
    with pytest.raises(ValueError, match="exchange must be one of"):
        BFS(g, backend="cpu", devices=2, exchange="nvlink")
    check_peer_exchange_errors(BFS, g)
    # auto: the worklist where the peer exchange cannot run
    res = check(g, 0, backend="cpu", devices=2, mode="bsp", partition="contiguous")
    assert res.stats["exchange"] == "host"
    assert check(g, 0, backend="cpu", devices=1, mode="bsp").stats["exchange"] is None


@pytest.mark.timeout(60)
def test_worklist_options_select_the_worklist(monkeypatch):
    """With the peer kernel able to run (its stand-in, as in test_traversal_peer_host.py), a
    WorklistTuning field other than its default means the worklist under exchange="auto" (auto
    mode decides for that exchange) and is an error naming it under exchange="peer"; the peer
    path reports no routing."""
    import groute.engines.relax.solver as traversal
    import groute.engines.relax.peer as traversal_peer
    from test_traversal_peer_host import FakePeer
    monkeypatch.setattr(traversal.RelaxSolver, "_peer_why", None, raising=False)
    monkeypatch.setattr(traversal_peer, "PeerTraversal", FakePeer)
    g, road = load_graph("grid:8"), load_graph("grid:300")
    opts = dict(backend="cpu", devices=2, partition="contiguous", mode="bsp", timeout=10)
    for given in ({}, {"routing": "all2all"}):        # the default, given: still the peer kernel
        res = check(g, 0, **opts, worklist_tuning=WorklistTuning(**given))
        assert (res.stats["exchange"], res.stats["routing"]) == ("peer", None)
    for given in ({"routing": "ring"}, {"rounds_per_launch": 3}, {"packet_size": 64},
                  {"flush_items": 16}):
        res = check(g, 0, **opts, worklist_tuning=WorklistTuning(**given))
        assert res.stats["exchange"] == "host", given
        assert res.stats["routing"] == given.get("routing", "all2all")
        name, value = next(iter(given.items()))
        with pytest.raises(ValueError, match=f"exchange='peer' cannot run here: .*{name}={value!r}"):
            BFS(g, exchange="peer", **opts, worklist_tuning=WorklistTuning(**given))
    auto = dict(opts, mode="auto")
    with BFS(g, **auto) as solver:
        assert solver.auto_mode(road) == "async"      # several devices, road-like: linked
        assert solver.auto_mode(load_graph("kron:12")) == "bsp"   # low diameter: the peer kernel
    for asked in ({"worklist_tuning": WorklistTuning(routing="ring")}, {"exchange": "host"}):
        with BFS(g, **auto, **asked) as solver:
            assert solver.auto_mode(road) == "async"  # the worklist: BSP only for low diameter


@pytest.mark.timeout(60)
def test_one_shot_runs_leave_only_their_kept_context(no_thread_leak):
    """A one-shot run's threads are its kept context's (groute.runtime.kept): a second run
    starts none, and shutting the kept contexts down ends them all."""
    from groute.runtime import kept
    g = load_graph("grid:8")
    options = dict(backend="cpu", devices=3, partition="contiguous", timeout=31,
                   worklist_tuning=WorklistTuning(routing="ring"))
    runs_on = []
    for _ in range(2):
        check(g, 0, **options)
        runs_on += [c for key, (c, _) in kept._kept.items() if key[:3] == ("cpu", 3, 31.0)]
    assert len(runs_on) == 2 and runs_on[0] is runs_on[1]
    kept.shutdown_all()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu,
                                                                         pytest.mark.multigpu])])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_bsp_pulls_across_devices(backend, k):
    """BSP on several devices switches to pull for the big levels of a Kronecker graph (every
    device reading all devices' frontier flags), and stays exact; a directed graph never pulls."""
    if backend == "cuda":
        need_gpus(k)
    g = load_graph("kron:12")
    s = busiest(g)
    pushed = check(g, s, backend=backend, devices=k, partition="random", mode="async", timeout=30)
    res = check(g, s, backend=backend, devices=k, partition="random", mode="bsp", timeout=30)
    assert res.stats["pull_levels"] > 0 and res.stats["pull_rounds"] == k * res.stats["pull_levels"]
    assert res.stats["edges_traversed"] < pushed.stats["edges_traversed"] / 2
    # a small grid: pull levels near the end (few unexplored arcs left), still exact
    grid = load_graph("grid:40")
    check(grid, 0, backend=backend, devices=k, partition="contiguous", mode="bsp", timeout=30)
    directed = load_graph("kron:10")
    directed = CSRGraph(directed.indptr, directed.indices, directed=True, name="kron-directed")
    res = check(directed, busiest(directed), backend=backend, devices=k, mode="bsp", timeout=30)
    assert res.stats["pull_levels"] == 0
