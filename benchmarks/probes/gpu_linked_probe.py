"""Asynchronous BFS/SSSP across GPUs through device-initiated links (groute/engines/relax/linked.py)
against one GPU's fused worker and the level-synchronous peer kernel, on the same graphs.

Not a pytest module: run it on a machine with two or more GPUs,

    python benchmarks/probes/gpu_linked_probe.py --graphs grid:4900,kron:21 --devices 2 --repeat 3

Every answer must equal the first case's of its app and graph (one GPU's fused worker, itself
checked by the GPU test suite). Prints the median time of ``--repeat`` runs after a warm-up and
the link counters: rounds and idle rounds per GPU, rounds that published items (one
system-scope fence each), items written, offers that found a ring full. ``--blocks`` times
the linked kernel at other grid sizes (GROUTE_LINKED_BLOCKS).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from groute.bench.suite import choose_source  # noqa: E402
from groute.graph import load_graph  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="grid:4900,kron:21")
    ap.add_argument("--apps", default="bfs,sssp")
    ap.add_argument("--devices", default="2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--blocks", default="", help="extra GROUTE_LINKED_BLOCKS values to time")
    ap.add_argument("--partition", default="contiguous")
    args = ap.parse_args()
    from groute.apps.bfs import BFS
    from groute.apps.sssp import SSSP
    from groute import Context
    t0 = time.perf_counter()
    for spec in args.graphs.split(","):
        g = load_graph(spec)
        s, _rule = choose_source(g, spec)
        print(f"== {spec}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs, source {s}", flush=True)
        for app in args.apps.split(","):
            cls, graph = (BFS, g) if app == "bfs" else (SSSP, g.with_weights(seed=0))
            first = None
            cases = [(1, "async", {}, "")]
            for k in (int(x) for x in args.devices.split(",")):
                cases.append((k, "bsp", {"exchange": "peer"}, ""))
                cases.append((k, "async", {"exchange": "peer"}, ""))
                if app == "bfs":
                    cases.append((k, "async", {"exchange": "peer", "priority": False}, ""))
                for b in filter(None, args.blocks.split(",")):
                    cases.append((k, "async", {"exchange": "peer"}, b))
            for k, mode, opts, blocks in cases:
                if blocks:
                    os.environ["GROUTE_LINKED_BLOCKS"] = blocks
                label = f"{app} {mode} {k} GPU {opts} {('blocks=' + blocks) if blocks else ''}"
                try:
                    with Context(backend="cuda", devices=k) as ctx, \
                            cls(graph, ctx=ctx, mode=mode, partition=args.partition, **opts) as solver:
                        res = solver.run(s)
                        times = []
                        for _ in range(args.repeat):
                            res = solver.run(s)
                            times.append(res.time_s)
                        if first is None:
                            first = res.values
                            check = "first"
                        else:
                            check = "ok" if np.array_equal(res.values, first) else "WRONG"
                        st = res.stats
                        extra = ""
                        if solver.peer is not None and hasattr(solver.peer, "cap"):
                            last = solver.peer.run(solver.part.to_new_id(s))
                            extra = (f" idle={last['idle_rounds']} published={last['publishing_rounds']}"
                                     f" full={last['ring_full']} cap={last['ring_capacity']}")
                        print(f"  {label}: {statistics.median(times) * 1e3:9.2f} ms "
                              f"[{min(times) * 1e3:.2f}-{max(times) * 1e3:.2f}] {check} "
                              f"rounds={st['rounds_per_device']} edges={st['edges_traversed']:,} "
                              f"sent={st['items_sent']} deferrals={st['deferrals']}{extra}", flush=True)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"  {label}: ERROR {exc!r}", flush=True)
                finally:
                    os.environ.pop("GROUTE_LINKED_BLOCKS", None)
    print(f"done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
