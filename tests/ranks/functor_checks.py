"""Run as several MPI processes by tests/test_distributed_runtime.py: breadth-first search
written on the operator API (the BSP engine across the ranks), whose functor misbehaves on rank
R at level 4: ``raise`` raises, ``stall`` sleeps past the context's timeout; ``leave``: rank R
leaves the context after the search while the others search again. Every rank prints what it
raised. ``functor_checks.py CASE R TIMEOUT``."""
import sys
import time

import numpy as np

from groute import distributed
from groute.engines import make_engine
from groute.operators import Functor, advance
from lines import say

case, bad, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


def search(ctx, graph, misbehave):
    def reach(s, v):
        if misbehave and ctx.rank == bad and s["d"] == 4:
            if case == "raise":
                raise KeyError("injected failure in the functor")
            time.sleep(4 * timeout)
        v = np.unique(v[s["depth"][v] < 0])
        s["depth"][v] = s["d"] + 1
        return v
    functor = Functor(name="reach", params="int* depth, int d", numpy=reach,
                      cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;")
    start = np.full(graph.num_vertices, -1, np.int32)
    start[0] = 0
    with make_engine(graph, "bsp", ctx=ctx) as engine:
        engine.state("depth", np.int32, values=start)
        frontier, d = engine.frontier([0]), 0
        while frontier:
            frontier = advance(frontier, functor, d=d)
            d += 1


with distributed.Context(backend="cpu", timeout=timeout) as ctx:
    graph = distributed.load_graph("grid:8", ctx)
    t0 = time.monotonic()
    try:
        search(ctx, graph, misbehave=case != "leave")
        if case == "leave" and ctx.rank == bad:
            say(f"rank {ctx.rank} leaves")
        else:
            search(ctx, graph, misbehave=False)
            say(f"rank {ctx.rank} did not raise")
    except Exception as exc:  # noqa: BLE001 - what every rank raises is the test's subject
        say(f"rank {ctx.rank} raised after {time.monotonic() - t0:.2f} s: "
            f"{type(exc).__name__}: {exc}")
        ctx.end_job(3)
