"""Probe (device tool, by hand): the persistent BFS kernel on one GPU with its grid capped by
GROUTE_PEER_BLOCKS, on small and mid-size graphs: app time, wall time, and a level trace.
``python tests/gpu_peer_grid_probe.py .graphs/email-Enron.mtx.gz,kron:18,kron:21``."""
import os, sys, time, numpy as np
from apps.bfs import BFS
from groute.graph.load import load_graph
from groute.graph import reference
import cupy
for spec in sys.argv[1].split(","):
    g = load_graph(spec)
    src = int(np.argmax(np.diff(g.indptr)))
    ref = reference.bfs(g, src)
    for cap in (0, 528, 264, 132, 66, 33):
        os.environ["GROUTE_PEER_BLOCKS"] = str(cap)
        with BFS(g, backend="cuda", devices=1, mode="bsp", exchange="peer") as s:
            r = s.run(src)
            ok = np.array_equal(r.values, ref)
            ts, ws = [], []
            for _ in range(15):
                t0 = time.perf_counter(); r = s.run(src); ws.append(time.perf_counter() - t0); ts.append(r.time_s)
            peer = [v for v in vars(s).values() if type(v).__name__ == "PeerTraversal"]
            blocks = peer[0].blocks if peer else "?"
            print(f"{spec} cap={cap} blocks={blocks} ok={ok} app median {np.median(ts)*1e3:.3f} ms, wall {np.median(ws)*1e3:.3f} ms "
                  f"levels {r.stats.get('rounds')}", flush=True)
    for cap in (0, 132):
        os.environ["GROUTE_PEER_BLOCKS"] = str(cap)
        os.environ["GROUTE_PEER_TRACE"] = "1"
        with BFS(g, backend="cuda", devices=1, mode="bsp", exchange="peer") as s:
            s.run(src)
            r = s.run(src)
            print(f"  trace cap={cap} (us per level: A, B, expand, C):", r.stats.get("level_trace_us", [[]])[0][:14], flush=True)
        os.environ.pop("GROUTE_PEER_TRACE")
