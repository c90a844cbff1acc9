"""The bench harness's parts: verification, the floor model, peers, counters, the recorded command."""
from __future__ import annotations

import argparse
import shlex

import numpy as np
import pytest

from groute.bench import floor, peers
from groute.bench.report import jsonable
from groute.bench.runner import bytes_moved
from groute.bench.suite import choose_source, make_config
from groute.bench.references import reference_result
from groute.bench.verify import verify
from groute.graph import CSRGraph, load_graph, reference
from support import busiest, need_gpus

pytestmark = pytest.mark.timeout(60)


def path_graph(n=5, weights=None):
    """0 -> 1 -> ... -> n-1, plus an isolated vertex n."""
    src = np.arange(n - 1)
    return CSRGraph.from_edges(src, src + 1, n + 1, weights=weights, directed=True)


# verification -------------------------------------------------------------------------------------
def test_bfs_verification_is_exact():
    g = path_graph()
    ref = reference.bfs(g, 0)
    assert verify("bfs", ref.copy(), ref, g).ok
    wrong = ref.copy()
    wrong[3] = 2
    v = verify("bfs", wrong, ref, g)
    assert not v.ok and "vertex 3" in v.detail
    assert not verify("bfs", ref[:-1], ref, g).ok  # wrong length


def test_sssp_with_integer_weights_must_be_exact():
    g = path_graph(weights=np.full(4, 7, dtype=np.int32))
    ref = reference.sssp(g, 0)
    assert verify("sssp", ref.astype(np.float32), ref, g).ok
    off = ref.copy()
    off[4] += 1e-3  # tiny relative error, but integer weights make any error a bug
    assert not verify("sssp", off, ref, g).ok
    unreached = ref.copy()
    unreached[5] = 3.0  # the isolated vertex reported reachable
    v = verify("sssp", unreached, ref, g)
    assert not v.ok and "reachability" in v.detail


def test_sssp_with_float_weights_allows_float32_rounding():
    g = path_graph(weights=np.array([0.1, 0.2, 0.3, 0.4]))
    ref = reference.sssp(g, 0)
    assert verify("sssp", ref.astype(np.float32), ref, g).ok
    off = ref.copy()
    off[4] *= 1.001
    assert not verify("sssp", off, ref, g).ok


def test_pagerank_verification_uses_l1():
    g = load_graph("kron:6")
    ref = reference.pagerank(g)
    close = ref + 1e-7 / ref.size
    v = verify("pr", close, ref, g)
    assert v.ok and v.error < 1e-6
    far = ref.copy()
    far[0] += 1e-3
    assert not verify("pr", far, ref, g).ok
    assert not verify("pr", np.full_like(ref, np.nan), ref, g).ok


def test_components_pass_when_labels_group_alike():
    g = CSRGraph.from_edges(np.array([0, 2]), np.array([1, 3]), 5).symmetrize()
    ref = reference.connected_components(g)
    assert verify("cc", ref.copy(), ref, g).ok
    renamed = np.array([7, 7, 9, 9, 4])
    v = verify("cc", renamed, ref, g)
    assert v.ok and "not canonical" in v.detail
    merged = np.array([0, 0, 0, 0, 4])
    assert not verify("cc", merged, ref, g).ok
    assert not verify("cc", ref.astype(np.float64), ref, g).ok


# the floor ----------------------------------------------------------------------------------------
def test_floor_bytes_counts_the_csr_and_one_answer_per_vertex():
    g = path_graph(weights=np.ones(4, dtype=np.int32))
    base = g.indptr.nbytes + g.indices.nbytes + 4 * g.num_vertices
    assert floor.floor_bytes("bfs", g) == base
    assert floor.floor_bytes("sssp", g) == base + g.weights.nbytes
    assert floor.floor_bytes("pr", g) == floor.floor_bytes("cc", g) == base


def test_cpu_copy_bandwidth_is_measured():
    from groute.device import CPUDevice
    dev = CPUDevice(0)
    try:
        bw = floor.measure_copy_bandwidth(dev, nbytes=1 << 22, repeat=3)
    finally:
        dev.close()
    assert bw["bytes_per_s"] > 1e8 and bw["copy_bytes"] == 1 << 22


# peers --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("app", ["bfs", "sssp", "pr", "cc"])
@pytest.mark.parametrize("name", ["scipy", "networkx", "igraph"])
def test_cpu_peers_compute_the_reference_answer(app, name):
    if name == "igraph":
        pytest.importorskip("igraph")
    g = load_graph("kron:7")
    if app == "sssp":
        g = g.with_weights(seed=3)
    source, _ = choose_source(g, "kron:7")
    ref = reference_result(app, g, source if app in ("bfs", "sssp") else None)
    peer = peers.prepare_peer(name, app, g, source, networkx_max_arcs=10**9)
    kind, values = peer.answer(peer.run())
    verdict = peers.check_peer_answer(app, kind, values, ref, g)
    assert verdict.ok, verdict.detail


def test_peer_answer_check_catches_a_wrong_reachable_set():
    g = path_graph()
    ref = reference.bfs(g, 0)
    assert peers.check_peer_answer("bfs", "reached", np.array([0, 1, 2, 3, 4]), ref, g).ok
    assert not peers.check_peer_answer("bfs", "reached", np.array([0, 1, 2]), ref, g).ok


def test_scipy_power_iteration_matches_the_reference_definition():
    g = load_graph("rmat:8")  # directed, with dangling vertices
    ranks, iterations = peers.power_iteration(peers.scipy_pagerank_operator(g), g.num_vertices, np)
    l1, _ = reference.pagerank_error(ranks / ranks.sum(), reference.pagerank(g))
    assert l1 < 1e-5 and iterations > 1


def test_absent_or_unsuitable_peers_are_skipped_with_a_reason():
    g = load_graph("kron:6")
    with pytest.raises(peers.PeerSkipped, match="NetworkX is pure Python"):
        peers.prepare_peer("networkx", "bfs", g, 0, networkx_max_arcs=10)
    for name in ("igraph", "cugraph", "cupy"):
        try:
            peers.prepare_peer(name, "bfs", g, 0, networkx_max_arcs=10)
        except peers.PeerSkipped as exc:
            assert str(exc)  # a reason, never a silent pass
        # installed and usable: nothing to check here


@pytest.mark.gpu
@pytest.mark.parametrize("app, setup", [("pr", "cupy_pagerank_setup"), ("cc", "cupy_cc_setup")])
def test_cupy_peer_builds_its_matrices_before_the_timed_calls(app, setup, monkeypatch):
    """The plain-CuPy PageRank's transpose (seconds on kron:21, cold) is set-up, not peer time."""
    need_gpus(1)
    import groute.bench.baselines as baselines
    built = []
    original = getattr(baselines, setup)
    monkeypatch.setattr(baselines, setup, lambda graph: built.append(graph) or original(graph))
    g = load_graph("rmat:8")
    peer = peers.prepare_peer("cupy", app, g, None, networkx_max_arcs=10)
    assert len(built) == 1   # in prepare_peer, before any timed call
    kind, values = peer.answer(peer.run())
    assert peers.check_peer_answer(app, kind, values, reference_result(app, g, None), g).ok
    assert all(x is built[0] for x in built)  # the timed call found it built on the same graph
    cache = getattr(built[0], "_cupy_pr_setup" if app == "pr" else "_cupy_cc_setup")
    peer.run()
    assert getattr(built[0], "_cupy_pr_setup" if app == "pr" else "_cupy_cc_setup") is cache


# counters and the recorded command ------------------------------------------------------------------
def test_bytes_moved_prefers_the_apps_counter_and_sums_others():
    assert bytes_moved({"bytes_moved": 10, "bytes_sent": 99}) == 10
    assert bytes_moved({"bytes_moved": {"0->1": 3, "1->0": 4}}) == 7
    assert bytes_moved({"link_bytes": [1, 2], "halo_bytes": 3, "rounds": 5}) == 6
    assert bytes_moved({"rounds": 5}) is None


def test_counters_become_json():
    out = jsonable({"a": np.int64(3), "b": np.arange(3), "c": np.arange(1000), "d": float("inf"),
                     "e": (np.float32(0.5),)})
    assert out == {"a": 3, "b": [0, 1, 2], "c": {"length": 1000, "sum": 499500}, "d": "inf",
                   "e": [0.5]}


def test_json_output_is_strict(tmp_path):
    import json
    from groute.bench.report import write_json
    write_json({"x": float("nan"), "y": [np.float64("inf"), np.int32(2)], "z": np.arange(300)},
               tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data == {"x": "nan", "y": ["inf", 2], "z": list(range(300))}


def test_recorded_command_repeats_the_run():
    from groute.bench import cli
    from groute.cli_support import common_parser
    cfg = make_config("quick", devices=[1, 4], peers=["scipy"], timeout=30.0)
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(), common_parser())
    argv = shlex.split(cli.command_line(cfg))
    assert argv[:2] == ["groute", "bench"]
    again = cli.config_from_args(parser.parse_args(argv[1:]))
    assert again == cfg


def test_source_rule():
    grid = load_graph("grid:5")
    assert choose_source(grid, "grid:5")[0] == 0
    g = load_graph("kron:7")
    v, rule = choose_source(g, "kron:7")
    assert g.degrees()[v] == g.degrees().max() and "highest out-degree" in rule


def test_commit_comes_from_the_environment_without_git(monkeypatch):
    from groute import machine
    monkeypatch.setattr(machine, "_run", lambda cmd, cwd=None: None)  # no git here
    monkeypatch.setenv("GROUTE_COMMIT", "abc123")
    assert machine.project_version()["commit"] == "abc123"
    monkeypatch.setattr(machine, "_run", lambda cmd, cwd=None: "f" * 40)  # a (stale) copied .git
    assert machine.project_version()["commit"] == "abc123"  # the explicit name wins
    monkeypatch.delenv("GROUTE_COMMIT")
    assert machine.project_version()["commit"] == "f" * 40
    monkeypatch.setattr(machine, "_run", lambda cmd, cwd=None: None)
    assert machine.project_version()["commit"] is None


def test_references_of_big_graphs_are_cached_on_disk(tmp_path, monkeypatch):
    from groute.bench import references
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(references, "REFERENCE_CACHE_MIN_ARCS", 0)
    g = load_graph("kron:6")
    first, cached = references.cached_reference("bfs", g, 3)
    assert not cached and list((tmp_path / "references").glob("bfs-*.npy"))
    monkeypatch.setattr(reference, "bfs", lambda *a, **k: pytest.fail("recomputed a cached reference"))
    again, cached = references.cached_reference("bfs", g, 3)
    assert cached and np.array_equal(first, again)
    with pytest.raises(pytest.fail.Exception):  # another source is another reference
        references.cached_reference("bfs", g, 4)
    other = g.with_weights(seed=1)  # another graph (content) is another reference too
    monkeypatch.undo()
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(references, "REFERENCE_CACHE_MIN_ARCS", 0)
    _, cached = references.cached_reference("sssp", other, 3)
    assert not cached


def test_small_graph_references_are_not_cached(tmp_path, monkeypatch):
    from groute.bench import references
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    _, cached = references.cached_reference("cc", load_graph("kron:6"))
    assert not cached and not (tmp_path / "references").exists()


def test_reference_option_is_checked_and_auto_picks_by_size():
    from groute.bench.suite import REFERENCE_GPU_MIN_ARCS, make_config, reference_where
    with pytest.raises(ValueError, match="--reference must be one of"):
        make_config(apps=["bfs"], graphs=["kron:6"], devices=[1], reference="scipy")
    with pytest.raises(ValueError, match="--reference gpu .* --backend cpu"):
        make_config(apps=["bfs"], graphs=["kron:6"], devices=[1], reference="gpu", backend="cpu")
    assert reference_where("auto", "cpu", 10 * REFERENCE_GPU_MIN_ARCS) == "cpu"
    assert reference_where("auto", "cuda", REFERENCE_GPU_MIN_ARCS - 1) == "cpu"
    assert reference_where("auto", "cuda", REFERENCE_GPU_MIN_ARCS) == "gpu"
    assert reference_where("cpu", "cuda", 10 * REFERENCE_GPU_MIN_ARCS) == "cpu"
    with pytest.raises(ValueError, match="needs CUDA GPUs"):
        reference_where("gpu", "cpu", 1)


def test_gpu_reference_on_a_cpu_run_fails_before_any_work():
    from groute.bench import make_config, run_suite
    config = make_config(apps=["bfs"], graphs=["kron:6"], devices=[1], reference="gpu",
                         backend="auto")
    from groute.runtime.context import resolve_backend
    if resolve_backend("auto") == "cuda":
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="needs CUDA GPUs"):
        run_suite(config, progress=False)


def test_gpu_and_cpu_references_are_cached_apart(tmp_path, monkeypatch):
    from groute.bench import references
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    g = load_graph("kron:6")
    cpu = references._reference_cache_path("bfs", g, 3, "cpu")
    gpu = references._reference_cache_path("bfs", g, 3, "gpu")
    assert cpu != gpu and gpu.name.startswith("bfs-gpu-")
    with pytest.raises(ValueError, match="cpu or gpu"):
        references.cached_reference("bfs", g, 3, "tpu")
    assert "groute.graph.reference.connected_components" in references.reference_label("cc", "cpu")
    assert "cupy_pagerank" in references.reference_label("pr", "gpu")


@pytest.mark.gpu
@pytest.mark.parametrize("app", ["bfs", "sssp", "pr", "cc"])
def test_gpu_reference_agrees_with_the_cpu_reference(app):
    need_gpus(1)
    from groute.bench.peers import gpu_reference
    g = load_graph("kron:12")
    if app == "sssp":
        g = g.with_weights(seed=0)
    source = busiest(g) if app in ("bfs", "sssp") else None
    cpu, gpu = reference_result(app, g, source), gpu_reference(app, g, source)
    assert cpu.dtype == gpu.dtype and cpu.shape == gpu.shape
    assert verify(app, gpu, cpu, g).ok


@pytest.mark.timeout(120)
def test_parallel_references_equal_the_serial_ones_and_report_failures():
    from groute.bench.references import parallel_references
    g = load_graph("kron:8")
    out = parallel_references({"bfs": ("bfs", g, 3), "cc": ("cc", g, None),
                               "bad": ("bfs", g, g.num_vertices + 5)})
    values, cached, wall = out["bfs"]
    assert np.array_equal(values, reference_result("bfs", g, 3)) and not cached and wall > 0
    assert np.array_equal(out["cc"][0], reference_result("cc", g))
    assert isinstance(out["bad"], Exception) and "source" in str(out["bad"]).lower()



# METIS splits in worker processes ------------------------------------------------------------------
def test_prefetched_metis_splits_fill_the_cache_the_cases_read(tmp_path, monkeypatch):
    """The workers' splits land in the partition cache: partitioning afterwards runs no METIS
    and gets the split a direct call computes."""
    pytest.importorskip("pymetis")
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))   # the spawned workers inherit it
    from groute.bench.partitions import PartitionPrefetch
    from groute.graph import partition_graph
    g = load_graph("grid:30", cache=False)
    direct = {k: partition_graph(load_graph("grid:30", cache=False), k, method="metis",
                                 cache=False, progress=False).owner for k in (2, 3)}
    pre = PartitionPrefetch.start(g, [2, 3])
    try:
        assert 2 in pre and 3 in pre
        assert pre.wait(3) and pre.wait(2)
        assert 2 not in pre
    finally:
        pre.close()
    assert len(list((tmp_path / "partitions").glob("*metis-degw-k2-*"))) == 1
    assert len(list((tmp_path / "partitions").glob("*metis-degw-k3-*"))) == 1
    assert set(pre.waited) == {2, 3}
    import pymetis
    monkeypatch.setattr(pymetis, "part_graph", lambda *a, **k: pytest.fail("METIS ran again"))
    for k in (2, 3):
        assert np.array_equal(partition_graph(g, k, method="metis", progress=False).owner,
                              direct[k])


def test_a_failed_metis_worker_leaves_the_split_to_the_case(tmp_path, monkeypatch, caplog):
    pytest.importorskip("pymetis")
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    from groute.bench.partitions import PartitionPrefetch
    g = load_graph("grid:3", cache=False)                  # 9 vertices: no split into 20
    pre = PartitionPrefetch.start(g, [20])
    try:
        assert not pre.wait(20)
    finally:
        pre.close()
    assert "failed in its worker" in caplog.text and "20 parts" in caplog.text


def _ends_within(proc, seconds) -> bool:
    """Whether a pool's worker process has ended within ``seconds``. Not ``is_alive()``: the
    pool's own thread may reap the process first, and then ``is_alive()`` stays True."""
    import os
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            return True                     # reaped
        if proc.exitcode is not None:
            return True                     # reaped here
        time.sleep(0.05)
    return False


@pytest.mark.timeout(30)
def test_closing_stops_a_split_nobody_waits_for_any_more():
    """A wait interrupted (Ctrl-C) or a graph ended by an error leaves a split running:
    close() terminates its worker at once instead of letting the exit wait for it."""
    import time

    from groute.bench.partitions import PartitionPrefetch
    from groute.bench.processes import spawn_pool
    pool = spawn_pool(1)
    pre = PartitionPrefetch(pool, {2: pool.submit(time.sleep, 60)})
    pre.pending.discard(2)                      # as after an interrupted wait(2)
    procs = list(pool._processes.values())
    t0 = time.perf_counter()
    pre.close()
    assert all(_ends_within(p, 10) for p in procs)
    assert time.perf_counter() - t0 < 10 and pre.pool is None
    pre.close()                                 # a second close is harmless



@pytest.mark.timeout(30)
def test_a_split_past_its_time_limit_is_stopped_and_left_to_the_cases(monkeypatch):
    import time

    import groute.bench.partitions as partitions
    from groute.bench.processes import spawn_pool
    monkeypatch.setattr(partitions, "PARTITION_TIMEOUT_S", 0.2)
    pool = spawn_pool(2)
    pre = partitions.PartitionPrefetch(pool, {2: pool.submit(time.sleep, 60),
                                              4: pool.submit(time.sleep, 60)})
    procs = list(pool._processes.values())
    assert pre.wait(2) is False and pre.pool is None          # every worker stopped
    t0 = time.perf_counter()
    assert pre.wait(4) is False and time.perf_counter() - t0 < 1
    assert all(_ends_within(p, 10) for p in procs)
