"""Run as several MPI processes by tests/test_distributed_calls.py: calls that differ between
the ranks (rank 1 loads another graph, starts BFS elsewhere, runs SSSP where the others run
BFS, holds a negative weight in its arcs), each of which every rank must refuse alike, naming
what differs; the ranks then go on
together, and the same calls made alike answer. ``call_checks.py TIMEOUT``."""
import sys

import groute
from groute import distributed
from lines import say

with distributed.Context(backend="cpu", timeout=float(sys.argv[1])) as ctx:
    odd = ctx.rank == 1
    graph = None
    calls = {
        "load": lambda: distributed.load_graph("grid:7" if odd else "grid:6", ctx),
        "source": lambda: groute.bfs(graph, 5 if odd else 0, ctx=ctx),
        "app": lambda: (groute.sssp if odd else groute.bfs)(graph, 0, ctx=ctx),
        # the same call, but rank 1's arcs hold a negative weight: every rank names its arc
        "weight": lambda: groute.sssp(weighted, 0, ctx=ctx),
    }
    for case, call in calls.items():
        try:
            call()
            say(f"rank {ctx.rank} {case}: no error")
        except ValueError as exc:
            say(f"rank {ctx.rank} {case}: {exc}")
        if graph is None:
            graph = distributed.load_graph("grid:6", ctx)
            weighted = distributed.load_graph("grid:6", ctx, weighted=True)
            if odd:
                weighted.part.weights[0] = -5
    depth = groute.bfs(graph, 0, ctx=ctx).values
    say(f"rank {ctx.rank} then: the same calls answer, {int(depth.max())} levels")
