"""Run as several MPI processes on CUDA by tests/test_distributed_gpu.py: BFS and SSSP on the
persistent peer kernel across processes (``exchange="peer"``, each rank's kernel writing into
the others' memory through CUDA IPC), and PageRank on its persistent BSP kernel
(``persistent=True``), against one process on one GPU, twice each on one solver (the meeting
counter carried from run to run); ``fail R SPEC APP``: rank R's launch of BFS's or
PageRank's kernel raises, and every rank must raise, the others naming R's device and the
original error.

``peer_checks.py same SPEC...`` / ``peer_checks.py fail R SPEC bfs|pagerank``."""
import sys
import time

import numpy as np

import groute
from groute import distributed
from groute.apps.bfs import BFS
from groute.apps.pr import PageRank
from groute.apps.sssp import SSSP
from groute.engines.iterate.device import IterationDevice
from groute.engines.relax.peer import PeerTraversal
from groute.graph import load_graph
from groute.tuning import PageRankTuning
from lines import say

SOLVERS = {"bfs": BFS, "sssp": SSSP}


def same(ctx, specs):
    for spec in specs:
        part = distributed.load_graph(spec, ctx)
        whole = load_graph(spec)
        for app, solver in SOLVERS.items():
            one = getattr(groute, app)(whole, 3, backend="cuda", devices=1)
            with solver(part, ctx=ctx, exchange="peer") as s:
                runs = [s.run(3), s.run(5)]
            want = getattr(groute, app)(whole, 5, backend="cuda", devices=1)
            ok = (np.array_equal(runs[0].values, one.values)
                  and np.array_equal(runs[1].values, want.values))
            say(f"rank {ctx.rank} {app} {spec}: {'same' if ok else 'DIFFERENT'} "
                f"exchange {runs[0].stats['exchange']} pull levels "
                f"{runs[0].stats.get('pull_levels')}")
        # PageRank's persistent BSP kernel: each rank's stores into the others' vectors and
        # the stopping check over every rank's stats rows on the devices; twice on one solver
        want = groute.pagerank(whole, backend="cuda", devices=1)
        with PageRank(part, ctx=ctx, tuning=PageRankTuning(persistent=True)) as s:
            runs = [s.run(), s.run()]
        # the same iterations as one process, give or take the last (the stopping sums are
        # added in another order)
        ok = all(float(np.abs(r.values - want.values).sum()) < 1e-4
                 and abs(r.stats["iterations"] - want.stats["iterations"]) <= 1 for r in runs) \
            and runs[0].stats["persistent"] and runs[0].stats["exchange"] == "peer stores"
        say(f"rank {ctx.rank} pagerank {spec}: {'same' if ok else 'DIFFERENT'} exchange "
            f"{runs[0].stats['exchange']} iterations {[r.stats['iterations'] for r in runs]} "
            f"one process {want.stats['iterations']}")
        # weighted, with a window: one given, and the default (each rank estimates its own,
        # all take the smallest)
        part = distributed.load_graph(spec, ctx, weighted=True)
        whole = load_graph(spec, weighted=True)
        want = groute.sssp(whole, 3, backend="cuda", devices=1)
        for delta in (4, None):
            with SSSP(part, ctx=ctx, exchange="peer", priority=True, delta=delta) as s:
                got = s.run(3)
            deltas = ctx.ranks.allgather(got.stats["delta"])
            ok = np.array_equal(got.values, want.values) and len(set(deltas)) == 1
            say(f"rank {ctx.rank} sssp-window-{delta} {spec}: {'same' if ok else 'DIFFERENT'} "
                f"exchange {got.stats['exchange']} deltas {deltas}")


def fail(ctx, bad, spec, app):
    part = distributed.load_graph(spec, ctx)
    if app == "pagerank":
        solver = PageRank(part, ctx=ctx, tuning=PageRankTuning(persistent=True))
    else:
        solver = BFS(part, ctx=ctx, exchange="peer")
    with solver:
        if ctx.rank == bad:
            def launch(self, *args):
                raise ZeroDivisionError("injected failure in the launch")
            if app == "pagerank":
                IterationDevice.persistent_launch = launch
            else:
                PeerTraversal._launch = launch
        start = time.perf_counter()
        try:
            solver.run() if app == "pagerank" else solver.run(3)
            say(f"rank {ctx.rank} did not raise")
        except Exception as exc:  # noqa: BLE001 - what the test reads
            say(f"rank {ctx.rank} raised after {time.perf_counter() - start:.1f} s: "
                f"{type(exc).__name__}: {exc}")


with distributed.Context(backend="cuda", timeout=60) as ctx:
    if sys.argv[1] == "same":
        same(ctx, sys.argv[2:])
    elif sys.argv[1] == "fail":
        fail(ctx, int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: peer_checks.py same SPEC... | fail R SPEC bfs|pagerank")
