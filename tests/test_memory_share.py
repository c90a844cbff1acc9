"""Memory that divides by the device count (issue 37, item 5), measured on the CPU backend.

Each app's set-up (PageRank's also with its first run) is traced (tracemalloc) on two graphs
of the same vertices and about four times the arcs (kron:15 with 8 and 32 arcs per vertex):
what the extra arcs cost is the memory that grows with the arcs, free of what grows with the
vertices (the replicated vectors, the worklist's buffers: the "fixed" part). On K devices of
one process the total is what can be measured, so its cost per arc must stay near the CSR's
own (4 bytes per arc, 8 with weights): every device holds its share, and no array of the
whole graph's arcs is made on the way. The steps of the set-up's and the sweeps' bounded
temporaries are made small, so that they stay small beside these graphs too. Each device's
own arc arrays are checked to be about its share.
"""
import gc
import tracemalloc

import numpy as np
import pytest

from groute.apps.bfs import BFS
from groute.apps.cc import CC
from groute.apps.pr import PageRank
from groute.apps.sssp import SSSP
from groute.graph import load_graph
from groute.graph.budget import csr_bytes
from groute.graph.partition import partition_graph
from groute.tuning import PageRankTuning

#: the two graphs: the same 2**15 vertices, about 0.47M and 1.6M arcs
SCALE, FEW, MANY = 15, 8, 32


@pytest.fixture(scope="module")
def graphs():
    out = {}
    for weighted in (False, True):
        for factor in (FEW, MANY):
            g = load_graph(f"kron:{SCALE}:{factor}", cache=False)
            out[weighted, factor] = g.with_weights(seed=1) if weighted else g
    return out


@pytest.fixture(autouse=True)
def small_steps(monkeypatch):
    from groute.engines.components import device as cc_device
    from groute.engines.iterate import device as iterate_device
    from groute.graph import arcs
    monkeypatch.setitem(arcs.IN_ARC_STEP_ARCS, "numpy", (1 << 12, 1 << 12))
    monkeypatch.setattr(iterate_device, "SWEEP_STEP_ARCS", 1 << 12)
    monkeypatch.setattr(cc_device, "REST_STEP_ARCS", 1 << 12)


def traced(make, run):
    """``(peak bytes above the start, solver)``: the tracemalloc peak of ``make()`` (and of
    ``solver.run()`` when ``run``)."""
    gc.collect()
    tracemalloc.start()
    try:
        solver = make()
        if run:
            solver.run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, solver


SOLVERS = {
    "bfs": lambda g, k: BFS(g, backend="cpu", devices=k, partition="contiguous"),
    "sssp": lambda g, k: SSSP(g, backend="cpu", devices=k, partition="contiguous"),
    "pr bins": lambda g, k: PageRank(g, backend="cpu", devices=k, partition="contiguous",
                                     weight=None, tuning=PageRankTuning(bsp_kernel="bins")),
    "pr csc": lambda g, k: PageRank(g, backend="cpu", devices=k, partition="contiguous",
                                    weight=None, tuning=PageRankTuning(bsp_kernel="csc")),
    "pr async": lambda g, k: PageRank(g, backend="cpu", devices=k, partition="contiguous",
                                      weight=None, mode="async"),
    "cc": lambda g, k: CC(g, backend="cpu", devices=k),
}


def arc_arrays(solver) -> list:
    """Each device's arrays of arcs, as the app keeps them."""
    if isinstance(solver, PageRank):
        return [[d.out_indices] if solver.mode == "async" else [d.in_cols] for d in solver.devs]
    if isinstance(solver, CC):
        return [[d.indices] for d in solver.devs]
    return [[w.indices] + ([w.weights] if w.weights is not None else []) for w in solver.workers]


def cost_per_arc(graphs, app, k, run):
    """Bytes per extra arc between the two graphs (module docstring), and the CSR's own;
    the solvers of the larger graph are checked to hold their shares."""
    weighted = app == "sssp"
    peaks, arcs = [], []
    for factor in (FEW, MANY):
        g = graphs[weighted, factor]
        if k > 1:
            partition_graph(g, k, method="contiguous")      # kept on the graph: outside
        peak, solver = traced(lambda: SOLVERS[app](g, k), run)
        try:
            per_device = [sum(a.shape[0] for a in arrays[:1]) for arrays in arc_arrays(solver)]
            assert len(per_device) == k
            assert sum(per_device) == g.num_edges
            assert max(per_device) <= 1.3 * g.num_edges / k, per_device
        finally:
            solver.close()
        peaks.append(peak)
        arcs.append(g.num_edges)
    per_arc = (peaks[1] - peaks[0]) / (arcs[1] - arcs[0])
    g = graphs[weighted, MANY]
    csr_per_arc = (csr_bytes(g.num_vertices, 2 * g.num_edges, weighted=weighted)
                   - csr_bytes(g.num_vertices, g.num_edges, weighted=weighted)) / g.num_edges
    return per_arc, csr_per_arc


@pytest.mark.timeout(300)
@pytest.mark.parametrize("app", ["pr bins", "pr csc"])
def test_pagerank_on_one_device_costs_at_most_one_and_a_half_csrs_per_arc(graphs, app):
    """PageRank's set-up and first run on one device: its in-arcs (the transpose of the
    CSR) and bounded steps, no sort of every arc's key (8 bytes per arc on the host, 32 on a
    GPU) nor a per-arc row array or a gather of every arc at once in the sweeps."""
    per_arc, csr = cost_per_arc(graphs, app, 1, run=True)
    assert per_arc <= 1.5 * csr, (per_arc, csr)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("app", ["pr bins", "pr csc"])
def test_pagerank_on_four_devices_costs_at_most_1_3_csrs_per_arc(graphs, app):
    """The same on four devices: every device builds only its share of the in-arcs, and the
    four shares together cost what one CSR does."""
    per_arc, csr = cost_per_arc(graphs, app, 4, run=True)
    assert per_arc <= 1.3 * csr, (per_arc, csr)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("app", ["bfs", "sssp", "cc", "pr async"])
def test_set_up_costs_at_most_1_3_csrs_per_arc(graphs, app, k):
    """BFS, SSSP (its CSR has weights), CC and the asynchronous PageRank: set-up on 1, 2 and
    4 devices, each device's rows once (the relaxation's CPU worker keeps the graph's int32
    ids and weights; CC keeps no list of the arcs its rest links)."""
    per_arc, csr = cost_per_arc(graphs, app, k, run=False)
    assert per_arc <= 1.3 * csr, (per_arc, csr)
