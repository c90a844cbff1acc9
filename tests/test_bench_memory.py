"""Memory accounting: the bench's probes (:mod:`groute.bench.memory`), the per-app estimates and
the error before a graph that will not fit (:mod:`groute.memory`), the CSR's own bytes."""
from __future__ import annotations

import contextlib
import gc
import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from groute import memory as library_memory
from groute.engines.components.memory import components_bytes
from groute.engines.iterate.memory import iteration_bytes
from groute.engines.relax import memory as relax_memory
from groute.results import AppResult
from groute.bench import make_config, memory, run_suite
from groute.bench.references import reference_result
from groute.bench.report import markdown
from groute.graph import load_graph
from groute.graph.budget import csr_bytes

pytestmark = pytest.mark.timeout(120)


class FakePool:
    """A pool whose held and used bytes the test sets; counts free_all_blocks calls."""

    def __init__(self, used, held):
        self.used, self.held, self.freed = used, held, 0

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.held

    def free_all_blocks(self):
        self.freed += 1
        self.held = self.used


def fake_pools(pools):
    @contextlib.contextmanager
    def pool_of(gpu):
        yield pools[gpu]
    return pool_of


def test_pool_peak_keeps_the_high_water_a_mid_setup_free_gives_back():
    pools = {0: FakePool(used=1000, held=5000), 1: FakePool(used=0, held=0)}
    probe = memory.PoolPeak([0, 1], pool_of=fake_pools(pools)).start()
    assert pools[0].freed == 1 and pools[0].held == 1000   # cached blocks given back first
    pools[0].held = 1000 + 7000          # set-up's sort
    pools[1].held = 3000
    probe.sample()
    pools[0].free_all_blocks()           # the solver gives the sort's blocks back
    pools[0].held = 1000 + 2000
    probe.first_run_done()
    assert probe._thread is None         # nothing samples while runs are timed
    pools[1].held = 4500                 # a timed run grows device 1's pool
    probe.after_run()
    out = probe.finish()
    assert out["per_device_bytes"] == [7000, 4500]
    assert out["peak_bytes"] == 7000 and out["total_bytes"] == 11500
    assert out["where"] == "gpu"


def test_pool_peak_counts_from_after_the_case_befores_garbage():
    """The case before left its solver in a reference cycle, which only the garbage collector
    frees: collected during this case's set-up, its blocks went back to the pool and held this
    case's arrays, so the pool never grew and the case measured 0 bytes. The baseline is taken
    after a collection."""
    pools = {0: FakePool(used=0, held=0)}

    class Solver:
        def __init__(self):
            self.me = self                      # a cycle: refcounts never free it
            pools[0].used += 600
            pools[0].held += 600

        def __del__(self):
            pools[0].used -= 600                # its blocks stay in the pool, cached

    enabled = gc.isenabled()
    gc.disable()
    try:
        Solver()
        probe = memory.PoolPeak([0], pool_of=fake_pools(pools)).start()
        gc.collect()                            # mid-set-up, had the probe not collected
        pools[0].used += 400                    # this case's arrays
        pools[0].held = max(pools[0].held, pools[0].used)
        assert probe.finish()["peak_bytes"] == 400
    finally:
        if enabled:
            gc.enable()


def test_pool_peak_samples_on_its_own_during_setup():
    pools = {0: FakePool(used=0, held=0)}
    probe = memory.PoolPeak([0], pool_of=fake_pools(pools)).start()
    pools[0].held = 4096
    for _ in range(2000):                # the thread, not the test, must see it
        if probe.high[0] == 4096:
            break
        tracemalloc.get_tracemalloc_memory()   # a cheap call that lets the thread run
        import time
        time.sleep(0.001)
    pools[0].held = 0
    assert probe.finish()["peak_bytes"] == 4096


def test_traced_peak_counts_numpy_arrays_and_stops_tracing():
    was = tracemalloc.is_tracing()
    probe = memory.TracedPeak().start()
    a = np.ones(1 << 20)                 # 8 MiB
    del a
    probe.first_run_done()
    probe.after_run()
    out = probe.finish()
    assert out["where"] == "host"
    assert 8 << 20 <= out["peak_bytes"] < 64 << 20
    assert tracemalloc.is_tracing() == was


_PEAK_OF_A_LOAD = """
import json, numpy as np
from groute.bench import memory
assert memory._reset_rss_peak()
# 96 MiB, touched and returned, as a load returns its graph: past glibc's largest mmap
# threshold (32 MiB), so fresh pages whatever the heap held; kept alive, since the kernel may
# fold pages freed inside fn into VmHWM only lazily
out, mem = memory.host_peak_while(lambda: np.ones(12 << 20))
print(json.dumps(dict(mem, total=int(out.sum()))))
"""


def test_host_peak_while_loading_reads_the_resident_set_peak():
    """The resident-set reading, in a process of its own: in the test process other tests'
    threads and freed memory move the resident size while the load runs, which is noise the
    measurement cannot tell from the load's own pages."""
    import json
    import subprocess
    import sys
    if not memory._reset_rss_peak():
        pytest.skip("this kernel offers no resident-set peak reset")
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", _PEAK_OF_A_LOAD], capture_output=True,
                         text=True, timeout=60, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr
    mem = json.loads(run.stdout.strip().splitlines()[-1])
    assert mem["total"] == 12 << 20
    assert mem["peak_bytes"] >= 90 << 20
    assert "VmHWM" in mem["method"]


def test_host_peak_while_loading_by_tracemalloc(monkeypatch):
    monkeypatch.setattr(memory, "_reset_rss_peak", lambda: False)

    out, mem = memory.host_peak_while(lambda: np.ones(12 << 20))
    assert int(out.sum()) == 12 << 20
    assert mem["peak_bytes"] >= 90 << 20
    assert "tracemalloc" in mem["method"]


def test_case_probe_by_backend():
    assert isinstance(memory.case_probe("cpu", [object()]), memory.TracedPeak)
    probe = memory.case_probe("cuda", [SimpleNamespace(gpu=2), SimpleNamespace(gpu=3)])
    assert isinstance(probe, memory.PoolPeak) and probe.gpus == [2, 3]


def test_add_ratios():
    mem = memory.add_ratios({"peak_bytes": 2400}, 10, 100, weighted=False)
    assert mem["csr_bytes"] == 8 * 11 + 4 * 100
    assert mem["bytes_per_arc"] == 24.0
    assert mem["over_csr"] == pytest.approx(2400 / 488)


def test_csr_bytes_widths():
    assert csr_bytes(10, 20) == 88 + 80
    assert csr_bytes(10, 20, weighted=True) == 88 + 160
    # kron:26:32: ~4.1G arcs, int64 offsets, int32 ids
    assert csr_bytes(2**26, 4_100_000_000) == 8 * (2**26 + 1) + 4 * 4_100_000_000
    assert csr_bytes(2**31, 1) == 8 * (2**31 + 1) + 8     # ids past int32


# ------------------------------------------------------------------------------------------------
# the bench records it
# ------------------------------------------------------------------------------------------------
HELD = 6 << 20


def holding_double(app):
    """A solver answering from the reference that holds HELD bytes from set-up on."""

    class Holding:
        def __init__(self, graph, *, ctx, partition=None, mode=None, tol=None):
            self.graph = graph
            self.buffer = np.ones(HELD // 8)

        def run(self, source=None):
            return AppResult(reference_result(app, self.graph, source).copy(), 1e-3, {})

        def close(self):
            self.buffer = None
    return Holding


def test_the_bench_records_each_cases_peak_and_the_loading_peak():
    config = make_config(apps=["bfs"], graphs=["grid:20"], devices=[1], modes=["async"],
                         repeat=2, peers=[], backend="cpu", timeout=20)
    results = run_suite(config, solvers={"bfs": holding_double("bfs")}, progress=False)
    (case,) = results["cases"]
    mem = case["memory"]
    g = results["graphs"][0]
    assert mem["where"] == "host"
    assert HELD <= mem["peak_bytes"] < 4 * HELD
    assert mem["bytes_per_arc"] == pytest.approx(mem["peak_bytes"] / g["arcs"])
    assert g["weighted"]                 # BFS reads no weights: the CSR it is set against has none
    assert mem["csr_bytes"] == csr_bytes(g["vertices"], g["arcs"])
    assert mem["over_csr"] == pytest.approx(mem["peak_bytes"] / mem["csr_bytes"])
    est = relax_memory.traversal_bytes(g["vertices"], g["arcs"], directed=g["directed"])
    assert mem["estimate_bytes"] == est.total
    assert g["load_memory"]["peak_bytes"] is not None
    assert g["load_memory"]["csr_bytes"] == csr_bytes(g["vertices"], g["arcs"], weighted=True)
    text = markdown(results)
    assert "Memory (peak of each case)" in text and "host peak loading" in text
    row = next(line for line in text.splitlines() if line.startswith("| BFS | grid:20 | 1 |")
               and "host" in line)
    assert f"{mem['bytes_per_arc']:.2f}" in row


# ------------------------------------------------------------------------------------------------
# estimates and the error before uploading
# ------------------------------------------------------------------------------------------------
def test_estimates_grow_with_the_graph_and_the_csr_dominates_big_traversals():
    n, m = 2**26, 4_100_000_000          # kron:26:32
    bfs = relax_memory.traversal_bytes(n, m, directed=False)
    assert bfs.parts["indices (int32)"] == 4 * m
    assert bfs.parts["indptr (int64 arc offsets)"] == 8 * (n + 1)
    assert 1.0 < bfs.total / csr_bytes(n, m) < 1.25     # the aim for BFS
    sssp = relax_memory.traversal_bytes(n, m, weighted=True, directed=False)
    assert sssp.total - bfs.total == 4 * m
    two = relax_memory.traversal_bytes(n, m, directed=False, devices=2)
    assert two.parts["indices (int32)"] == 2 * m and "outboxes (int64)" in two.parts
    cc = components_bytes(n, m, directed=False)
    assert 1.0 < cc.total / csr_bytes(n, m) < 1.25
    assert components_bytes(100, 1000, directed=True).parts["indices (int32)"] == 8000


def test_pagerank_estimate_counts_the_set_up_peak_and_the_vectors_over_all_vertices():
    """The in-arcs' build in a device's memory (its share, a next slot per owned row, every
    vertex's new id, one step of temporaries) is the set-up's peak where it passes the arrays
    kept; those include the start's contribution vector, and on several devices the peer
    masks and export lists. The error before uploading names the arrays of the peak."""
    from groute.graph.arcs import IN_ARC_STEP_BYTES, in_arc_step
    n, m = 2**20, 2**24
    one = iteration_bytes(n, m)
    assert one.parts["start contributions"] == 4 * n
    assert one.setup["new ids (int32)"] == 4 * n
    assert one.setup["build step"] == IN_ARC_STEP_BYTES * in_arc_step(m)
    # a step's temporaries are at most a quarter of the share's 4 bytes per arc above the least
    assert one.setup["build step"] <= m
    big = iteration_bytes(2**25, 2**34, devices=4)
    assert big.setup["build step"] == IN_ARC_STEP_BYTES * 2**22       # the most
    assert one.total == max(sum(one.parts.values()), sum(one.setup.values()))
    four = iteration_bytes(n, m, devices=4)
    assert four.setup["in-arc sources (int32)"] == m            # a quarter of 4 bytes per arc
    assert four.parts["peer masks"] == n // 4
    few_vertices = iteration_bytes(1000, m)                     # the build outweighs the kept
    assert few_vertices.peak_parts is few_vertices.setup
    assert few_vertices.total == sum(few_vertices.setup.values())
    # across processes a rank sorts its share of the in-arcs at once, as 64-bit keys
    ranks = iteration_bytes(n, m, devices=4, processes=True)
    keys = "the ranks' in-arc keys, their sort and the keys received (uint64)"
    assert ranks.setup[keys] == 24 * m // 4 and ranks.total > four.total
    weighted = iteration_bytes(n, m, devices=4, processes=True, weighted=True)
    assert weighted.setup["their order and factors, sent, received and merged"] == 32 * m // 4


def test_traversal_estimate_counts_the_worklists_receive_buffers():
    n, m = 2**20, 2**24
    four = relax_memory.traversal_bytes(n, m, devices=4)
    assert four.parts["receive buffers (int64)"] == 8 * 3 * 3 * 2**20
    assert "receive buffers (int64)" not in relax_memory.traversal_bytes(n, m).parts


def test_pagerank_offsets_widen_past_2_31_in_arcs():
    small = iteration_bytes(1000, 2**31 - 1)
    big = iteration_bytes(1000, 2**31)
    assert small.parts["in-arc offsets"] == 4 * 1001
    assert big.parts["in-arc offsets"] == 8 * 1001


class FakeCudaDevice:
    backend = "cuda"
    name = "fake GPU 0"

    def __init__(self, free, cached):
        self._free = free
        self.xp = SimpleNamespace(get_default_memory_pool=lambda: SimpleNamespace(
            free_bytes=lambda: cached))

    def memory_info(self):
        return self._free, 10 * self._free

    def use(self):
        return contextlib.nullcontext()


def test_check_fits_counts_the_pools_cached_blocks_and_names_the_graph():
    need = relax_memory.traversal_bytes(1000, 100_000)
    library_memory.check_fits([FakeCudaDevice(need.total - 10, 10)], need, "BFS on g")
    with pytest.raises(library_memory.GraphTooLarge, match=r"BFS on g needs about .*indices"):
        library_memory.check_fits([FakeCudaDevice(need.total - 10, 9)], need, "BFS on g")
    library_memory.check_fits([SimpleNamespace(backend="cpu")], need, "BFS on g")  # host: no check


class FakeLogicalDevice(FakeCudaDevice):
    """A logical device (groute.device.logical): its ``gpu``, whose free memory and pool it
    shares with the other devices placed there."""

    def __init__(self, index, gpu, free):
        super().__init__(free, 0)
        self.name, self.gpu = f"cuda:{index}", gpu


def test_logical_devices_on_one_gpu_split_its_free_memory():
    """Four logical devices on one GPU each see the GPU's free memory; what they may use
    together is that once, so each gets a quarter and the error says they share the GPU."""
    need = relax_memory.traversal_bytes(1000, 100_000)
    free = 2 * need.total
    library_memory.check_fits([FakeLogicalDevice(i, i, free) for i in range(4)], need, "BFS on g")
    library_memory.check_fits([FakeLogicalDevice(i, 0, free) for i in range(2)], need, "BFS on g")
    with pytest.raises(library_memory.GraphTooLarge,
                       match=r"BFS on g needs .* on each of 4 device\(s\) .* but cuda:0 is one of "
                             r"4 logical devices sharing GPU 0, .* each\): use fewer logical"):
        library_memory.check_fits([FakeLogicalDevice(i, 0, free) for i in range(4)], need, "BFS on g")
    # two GPUs, three devices: GPU 0 holds two of them (halves), GPU 1 one (whole)
    mixed = [FakeLogicalDevice(0, 0, free), FakeLogicalDevice(1, 1, free // 3),
             FakeLogicalDevice(2, 0, free)]
    with pytest.raises(library_memory.GraphTooLarge, match=r"but cuda:1 has .* free: use more"):
        library_memory.check_fits(mixed, need, "BFS on g")


def test_a_ranks_device_sharing_its_gpu_with_other_processes_gets_its_share():
    """A rank's device (one per process) whose GPU other ranks of its host share: only it is
    in the list, its ``sharing`` says how many processes split the GPU's free memory."""
    need = relax_memory.traversal_bytes(1000, 100_000)
    alone = FakeLogicalDevice(1, 0, 3 * need.total // 2)
    library_memory.check_fits([alone], need, "BFS on g")
    alone.sharing = 2
    with pytest.raises(library_memory.GraphTooLarge, match=r"cuda:1 is one of 2 .* sharing GPU 0"):
        library_memory.check_fits([alone], need, "BFS on g")


@pytest.mark.parametrize("solver, args", [("BFS", (0,)), ("PageRank", ()), ("CC", ())])
def test_solvers_refuse_a_graph_that_will_not_fit_before_uploading(monkeypatch, solver, args):
    import groute.apps.bfs
    import groute.apps.cc
    import groute.apps.pr
    cls = {"BFS": groute.apps.bfs.BFS, "PageRank": groute.apps.pr.PageRank,
           "CC": groute.apps.cc.CC}[solver]
    g = load_graph("grid:8")
    asked = []

    def tiny(device):
        asked.append(device)
        return 100
    monkeypatch.setattr(library_memory, "free_device_bytes", tiny)
    with pytest.raises(library_memory.GraphTooLarge, match=f"{solver} on grid:8 .*64 vertices"):
        cls(g, backend="cpu", devices=1)
    assert asked
    monkeypatch.setattr(library_memory, "free_device_bytes", lambda device: None)
    with cls(g, backend="cpu", devices=1) as s:        # fits: runs as before
        assert s.run(*args).values is not None


@pytest.mark.gpu
def test_a_cc_run_on_one_gpu_stays_within_the_estimate_it_checks():
    """The pool's peak over CC's set-up and two runs on one GPU is within the estimate checked
    before uploading: the answer's int64 labels (8 bytes a vertex, made on the device at the
    end of a run) are counted, and the giant's size is counted without a flag per vertex."""
    import cupy
    import groute.apps.cc
    g = load_graph("grid:1000")             # 1M vertices of degree 4: per-vertex arrays show
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.total_bytes()
    with groute.apps.cc.CC(g, backend="cuda", devices=1) as s:
        for _ in range(2):
            s.run()
        peak = pool.total_bytes() - base
    estimate = components_bytes(g.num_vertices, g.num_edges, directed=g.directed).total
    assert peak <= estimate + (1 << 20), (peak, estimate)


def test_cc_estimate_across_processes_counts_the_changes_a_rank_receives(monkeypatch):
    """Rank 0 holds every other rank's changes at once (at most a whole array each), the
    others rank 0's; in one process the first device reads the others' memory instead."""
    from types import SimpleNamespace
    import groute.apps.cc
    from groute import Context
    from groute.engines.components import solver as cc_solver
    one = components_bytes(1000, 8000, directed=False, devices=4)
    assert not any(k.startswith("changes received") for k in one.parts)
    first = components_bytes(1000, 8000, directed=False, devices=4, received=3)
    assert first.total - one.total == 3 * 4 * 1000
    ranked = lambda here: SimpleNamespace(ranks=object(), devices=[None] * 4,   # noqa: E731
                                          is_local=lambda i: i == here)
    assert cc_solver.changes_held(ranked(0)) == 3 and cc_solver.changes_held(ranked(2)) == 1
    alone = SimpleNamespace(ranks=object(), devices=[None], is_local=lambda i: True)
    assert cc_solver.changes_held(alone) == 0
    seen = []
    monkeypatch.setattr(cc_solver.ComponentsSolver, "_check_memory",
                        lambda self, estimate, graph: seen.append(estimate(100, 400, devices=2)))
    with Context(2, backend="cpu", timeout=20) as ctx:
        groute.apps.cc.CC(load_graph("grid:10"), ctx=ctx).close()
    assert seen and not any(k.startswith("changes received") for k in seen[-1].parts)
