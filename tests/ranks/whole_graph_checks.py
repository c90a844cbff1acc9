"""Run as several MPI processes by tests/test_distributed_calls.py: CC, PageRank and k-core
given a whole graph on a context spanning processes (they run each rank's rows of a graph
loaded by ranks) are refused alike on every rank with a ValueError saying how to load one,
before anything runs; the context then answers a graph loaded by ranks."""
import groute
from groute import distributed
from groute.graph import load_graph
from lines import say

with distributed.Context(backend="cpu", timeout=20) as ctx:
    whole = load_graph("kron:6")
    for name, call in (("cc", groute.connected_components), ("pagerank", groute.pagerank),
                       ("kcore", groute.core_number)):
        try:
            call(whole, ctx=ctx)
            say(f"rank {ctx.rank} {name}: no error")
        except ValueError as exc:
            say(f"rank {ctx.rank} {name}: refused: {exc}")
    # BFS takes a whole graph on ranks (each rank its devices' rows of it), its parents too
    parents = groute.bfs(whole, 3, predecessors=True, ctx=ctx).predecessors
    want = groute.bfs(whole, 3, predecessors=True, backend="cpu", devices=1).predecessors
    say(f"rank {ctx.rank} bfs parents: {'same' if (parents == want).all() else 'DIFFERENT'}")
    part = distributed.load_graph("kron:6", ctx)
    same = (groute.connected_components(part, ctx=ctx).values
            == groute.connected_components(whole, backend="cpu", devices=1).values).all()
    say(f"rank {ctx.rank} then: {'same' if same else 'DIFFERENT'}")
