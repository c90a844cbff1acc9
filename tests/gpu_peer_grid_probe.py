"""Probe (device tool, by hand): the persistent peer BFS kernel on one GPU with its grid capped by
``GROUTE_PEER_BLOCKS``, on small and mid-size graphs: app time (CUDA events) and wall time,
median of 15 after a checked first run, then a level trace (``GROUTE_PEER_TRACE=1``) with the
full grid and with one block per SM. Not a test.

    python tests/gpu_peer_grid_probe.py .graphs/email-Enron.mtx.gz,kron:18,kron:21
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

CAPS = (0, 528, 264, 132, 66, 33)     # 0: every resident block (the default)
TRACE_CAPS = (0, 132)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("graphs", help="comma-separated specs or paths")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    from groute.apps.bfs import BFS
    from groute.graph import reference
    from groute.graph.load import load_graph
    from support import busiest

    def solver(g, cap, trace=False):
        os.environ["GROUTE_PEER_BLOCKS"] = str(cap)     # read when the kernel is set up
        os.environ["GROUTE_PEER_TRACE"] = "1" if trace else "0"
        return BFS(g, backend="cuda", devices=1, mode="bsp", exchange="peer")

    for spec in args.graphs.split(","):
        g = load_graph(spec)
        src = busiest(g)
        ref = reference.bfs(g, src)
        for cap in CAPS:
            with solver(g, cap) as s:
                ok = np.array_equal(s.run(src).values, ref)
                app, wall = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    r = s.run(src)
                    wall.append(time.perf_counter() - t0)
                    app.append(r.time_s)
                blocks = s.peer.blocks
            print(f"{spec} cap={cap} blocks={blocks} ok={ok} app median {np.median(app) * 1e3:.3f} ms, "
                  f"wall {np.median(wall) * 1e3:.3f} ms, levels {r.stats.get('rounds')}", flush=True)
        for cap in TRACE_CAPS:
            with solver(g, cap, trace=True) as s:
                s.run(src)
                trace = s.run(src).stats.get("level_trace_us") or [[]]
            print(f"  trace cap={cap} (us per level: A, B, expand, C):",
                  [[float(x) for x in level] for level in trace[0][:14]], flush=True)
        os.environ.pop("GROUTE_PEER_TRACE", None)


if __name__ == "__main__":
    main()
