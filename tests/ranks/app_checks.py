"""Run as several MPI processes by tests/test_distributed_apps.py (``--backend cpu``) and
tests/test_distributed_gpu.py (``--backend cuda``): every app on a distributed context (each
rank loading its part) against the same app in one process on one device of that backend; on
CUDA also BFS, SSSP and PageRank on the host exchange (``-host``), which ``auto`` leaves for
the kernels over CUDA IPC where each rank has a GPU of its own.
``app_checks.py --backend B SPEC...``; each rank prints its transport first."""
import sys

import numpy as np

import groute
from groute import distributed
from groute.engines.iterate.solver import choose_bsp_kernel
from groute.graph import load_graph
from groute.tuning import PageRankTuning

APPS = {
    "bfs": lambda g, **o: groute.bfs(g, 3, **o),
    "sssp": lambda g, **o: groute.sssp(g, 3, **o),
    "pagerank": lambda g, **o: groute.pagerank(g, **o),
    # the dangling vertices found on every rank's rows
    "pagerank-dangling": lambda g, **o: groute.pagerank(g, dangling={1: 1.0}, **o),
    # both BSP kernels whatever auto picks (bins: the whole graph's degree order, cut by cost)
    "pagerank-bins": lambda g, **o: groute.pagerank(
        g, tuning=PageRankTuning(bsp_kernel="bins"), **o),
    "pagerank-csc": lambda g, **o: groute.pagerank(
        g, tuning=PageRankTuning(bsp_kernel="csc"), **o),
    # start values per vertex: every rank's device starts from the whole vector's products
    "pagerank-nstart": lambda g, **o: groute.pagerank(
        g, nstart={v: 1.0 + v % 3 for v in range(g.num_vertices)}, **o),
    "pagerank-nstart-bins": lambda g, **o: groute.pagerank(
        g, nstart={v: 1.0 + v % 3 for v in range(g.num_vertices)},
        tuning=PageRankTuning(bsp_kernel="bins"), **o),
    "cc": lambda g, **o: (groute.weakly_connected_components if g.directed
                          else groute.connected_components)(g, **o),
    "kcore": lambda g, **o: groute.core_number(g, **o),
    # the shortest-path trees: every rank's proposals met by a minimum, the one-process parents
    "bfs-parents": lambda g, **o: groute.bfs(g, 3, predecessors=True, **o),
    "sssp-parents": lambda g, **o: groute.sssp(g, 3, predecessors=True, **o),
}
#: on the graph with random weights (loaded as ``weighted=True`` by ranks and whole): each
#: in-arc carries its factor through the ranks' exchange, with either kernel
WEIGHTED = {
    "pagerank-weighted-csc": lambda g, **o: groute.pagerank(
        g, tuning=PageRankTuning(bsp_kernel="csc"), **o),
    "pagerank-weighted-bins": lambda g, **o: groute.pagerank(
        g, tuning=PageRankTuning(bsp_kernel="bins"), **o),
}
#: on CUDA ranks with a GPU each, auto takes the kernels over CUDA IPC for BFS, SSSP and
#: PageRank, and CC's reads in place on any CUDA ranks of one host: the host exchange is
#: asked for too (on the CPU backend it is what auto runs)
HOST_EXCHANGE = {
    "bfs-host": lambda g, **o: groute.bfs(g, 3, exchange="host", **o),
    "sssp-host": lambda g, **o: groute.sssp(g, 3, exchange="host", **o),
    "pagerank-host": lambda g, **o: groute.pagerank(
        g, tuning=PageRankTuning(persistent=False), **o),
    "cc-host": lambda g, **o: (groute.weakly_connected_components if g.directed
                               else groute.connected_components)(g, exchange="host", **o),
}


#: PageRank's L1 distance from one process's answer: float64 sums on the CPU backend, float32
#: on CUDA (added in another order across processes)
PAGERANK_L1 = {"cpu": 1e-9, "cuda": 1e-4}


def close(app, a, b, backend) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if app.startswith("pagerank"):
        return a.shape == b.shape and float(np.abs(a - b).sum()) < PAGERANK_L1[backend]
    return np.array_equal(a, b)


if sys.argv[1] != "--backend":
    sys.exit("usage: app_checks.py --backend cpu|cuda SPEC...")
backend, specs = sys.argv[2], sys.argv[3:]
if backend == "cuda":
    APPS.update(HOST_EXCHANGE)
with distributed.Context(backend=backend, timeout=60) as ctx:
    print(f"rank {ctx.rank} transport {ctx.transport}", flush=True)
    for spec in specs:
        part = distributed.load_graph(spec, ctx)
        whole = load_graph(spec)
        for app, run in APPS.items():
            got = run(part, ctx=ctx)
            want = run(whole, backend=backend, devices=1)
            same = (close(app, got.values, want.values, backend) if "parents" not in app
                    else np.array_equal(got.predecessors, want.predecessors))
            print(f"rank {ctx.rank} {app} {spec}: {'same' if same else 'DIFFERENT'}",
                  flush=True)
            if app == "pagerank":       # auto's kernel: the ranks ask the whole graph's
                # in-degrees, and pick what one process picks for as many devices
                same = got.stats["bsp_kernel"] == choose_bsp_kernel(whole, len(ctx.devices))
                print(f"rank {ctx.rank} pagerank-kernel {spec}: "
                      f"{'same' if same else 'DIFFERENT'}", flush=True)
        part = distributed.load_graph(spec, ctx, weighted=True)
        whole = load_graph(spec, weighted=True)
        for app, run in WEIGHTED.items():
            same = close(app, run(part, ctx=ctx).values,
                         run(whole, backend=backend, devices=1).values, backend)
            print(f"rank {ctx.rank} {app} {spec}: {'same' if same else 'DIFFERENT'}",
                  flush=True)
