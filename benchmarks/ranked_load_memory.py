#!/usr/bin/env python
"""Each rank's peak host memory while it loads its part of a generated graph, against the
whole graph's CSR (issue 42's target: at most 0.4x with 4 ranks on kron:26).

Run from the repository root as K processes, on the CPU backend (no GPU needed)::

    groute launch -n 4 -- benchmarks/ranked_load_memory.py kron:24 kron:25 kron:26
    groute launch -n 2 -- benchmarks/ranked_load_memory.py kron:16 grid:1000     # a rehearsal

For each graph, in order, every rank loads its part (``groute.distributed.load_graph``, as
``groute launch -n K -- bfs --graph SPEC`` does) with two figures taken around the load:

- ``traced``: the loader's :mod:`tracemalloc` peak (``load_graph(..., measure=True)``): its
  NumPy arrays and Python objects, what docs/DISTRIBUTED.md ("Loading") bounds;
- ``resident``: the process's resident-set peak while loading above its resident size before
  (``VmHWM`` after a reset through ``/proc/self/clear_refs``, as ``groute bench`` measures a
  load; every allocator counted), and ``ru_maxrss`` (the process's peak so far: interpreter,
  MPI and the graphs before included).

Rank 0 prints one line per rank and graph, then one JSON object per graph (``--json FILE``
also writes them all). ``--no-trace`` loads without tracemalloc (it slows the load, by up to
half on a busy host), leaving the resident figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from groute import distributed  # noqa: E402
from groute.bench.memory import host_peak_while  # noqa: E402
from groute.graph.budget import csr_bytes  # noqa: E402
from groute.host_peak import max_rss_bytes  # noqa: E402


def measure(spec: str, ctx, trace: bool) -> dict:
    """Every rank's figures for loading ``spec`` (a collective), on every rank."""
    t0 = time.perf_counter()
    graph, resident = host_peak_while(lambda: distributed.load_graph(spec, ctx, measure=trace))
    seconds = time.perf_counter() - t0
    p = graph.part
    weighted = p.weights is not None
    mine = {"rank": ctx.rank, "seconds": seconds, "vertices": int(p.num_vertices),
            "arcs": int(p.num_edges),
            "part_csr_bytes": csr_bytes(p.num_vertices, p.num_edges, weighted=weighted),
            "resident_bytes": resident["peak_bytes"], "resident_method": resident["method"],
            "max_rss_bytes": max_rss_bytes(),
            "traced_bytes": (graph.load_memory.ranks[ctx.rank]["traced_bytes"] if trace
                             else None)}
    every = ctx.ranks.allgather(mine, what=f"the loading figures of {spec}")
    whole = csr_bytes(graph.num_vertices, graph.num_edges, weighted=weighted)
    out = {"graph": spec, "ranks": len(every), "vertices": graph.num_vertices,
           "arcs": graph.num_edges, "csr_bytes": whole, "per_rank": every}
    for key in ("traced_bytes", "resident_bytes"):
        values = [r[key] for r in every if r[key] is not None]
        out[key.replace("_bytes", "_over_csr")] = max(values) / whole if values else None
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graphs", nargs="+", help="generated graph specs (kron:26, grid:4900)")
    parser.add_argument("--no-trace", action="store_true",
                        help="load without tracemalloc (resident figures only)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every result here")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="seconds a collective may wait (default 3600)")
    args = parser.parse_args(argv)
    results = []
    with distributed.Context(timeout=args.timeout) as ctx:
        for spec in args.graphs:
            result = measure(spec, ctx, trace=not args.no_trace)
            results.append(result)
            if ctx.rank != 0:
                continue
            gib = 2**30
            print(f"{spec}: {result['vertices']:,} vertices, {result['arcs']:,} arcs, CSR "
                  f"{result['csr_bytes'] / gib:.3f} GiB, {result['ranks']} ranks", flush=True)
            for r in result["per_rank"]:
                traced = ("-" if r["traced_bytes"] is None else
                          f"{r['traced_bytes'] / gib:.3f} GiB "
                          f"({r['traced_bytes'] / result['csr_bytes']:.3f}x)")
                resident = ("-" if r["resident_bytes"] is None else
                            f"{r['resident_bytes'] / gib:.3f} GiB "
                            f"({r['resident_bytes'] / result['csr_bytes']:.3f}x)")
                print(f"  rank {r['rank']}: traced {traced}, resident peak {resident}, "
                      f"ru_maxrss {r['max_rss_bytes'] / gib:.3f} GiB; part "
                      f"{r['part_csr_bytes'] / gib:.3f} GiB; {r['seconds']:.1f} s", flush=True)
            print(json.dumps(result), flush=True)
    if args.json and ctx.rank == 0:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
