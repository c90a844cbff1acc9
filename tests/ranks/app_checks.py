"""Run as several MPI processes by tests/test_distributed_apps.py: every app on a
distributed context (each rank loading its part) against the same app in one process."""
import sys

import numpy as np

import groute
from groute import distributed
from groute.graph import load_graph

APPS = {
    "bfs": lambda g, **o: groute.bfs(g, 3, **o),
    "sssp": lambda g, **o: groute.sssp(g, 3, **o),
    "pagerank": lambda g, **o: groute.pagerank(g, **o),
    "cc": lambda g, **o: (groute.weakly_connected_components if g.directed
                          else groute.connected_components)(g, **o),
    "kcore": lambda g, **o: groute.core_number(g, **o),
}


def close(app, a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if app == "pagerank":
        return a.shape == b.shape and float(np.abs(a - b).sum()) < 1e-9
    return np.array_equal(a, b)


with distributed.Context(timeout=60) as ctx:
    for spec in sys.argv[1:]:
        part = distributed.load_graph(spec, ctx)
        whole = load_graph(spec)
        for app, run in APPS.items():
            if app == "kcore" and part.directed:
                continue
            got = run(part, ctx=ctx)
            want = run(whole, backend="cpu", devices=1)
            print(f"rank {ctx.rank} {app} {spec}: "
                  f"{'same' if close(app, got.values, want.values) else 'DIFFERENT'}", flush=True)
