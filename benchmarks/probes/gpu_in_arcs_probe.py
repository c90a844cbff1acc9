#!/usr/bin/env python
"""PageRank BSP's set-up peak, the in-arc build, per share on one GPU: how much CuPy's pool holds
and how much of it is live while :func:`groute.engines.iterate.layout.shard_in_arcs` builds the
first of K shares of a graph's degree-ordered in-arcs (the "bins" layout), and its seconds.

Run from the repository root on a machine with a CUDA GPU (CuPy installed)::

    python benchmarks/probes/gpu_in_arcs_probe.py --graphs kron:21,kron:23 --shares 1,2,4

One GPU builds each share as the device that keeps it would: the pool's held and live peaks
are exact (every allocation passes through a counting allocator over the default pool), taken
over what the pool held before, and given over the share's CSR (``CSR/K``: int64 offsets,
int32 ids). Held beyond live is cached blocks the pool could not reuse. The first share of
``degree_split`` is the fullest (it has the rows of the highest in-degree). ``--repeat`` builds
per case (the first also loads kernels). One JSON line per build on stdout (``--json``: all
of them in a file too).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def build_once(device, graph, layout, lo: int, hi: int) -> dict:
    """One build of rows ``[lo, hi)`` on ``device``: peaks over the pool's state before."""
    from groute.bench.memory import ExactPoolPeaks
    from groute.engines.iterate.layout import shard_in_arcs
    device.synchronize()
    with ExactPoolPeaks() as peaks:
        t = time.perf_counter()
        _, cols, _ = shard_in_arcs(device, graph.indptr, graph.indices, (lo, hi),
                                   rank=layout.rank, in_degrees=layout.in_degrees)
        device.synchronize()
        seconds = time.perf_counter() - t
    return {"result_bytes": int(cols.nbytes), "held_bytes": peaks.held,
            "live_bytes": peaks.live, "seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="kron:21", help="comma-separated graph specs")
    ap.add_argument("--shares", default="1,2,4", help="comma-separated K: the first of K shares")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write every record here too")
    args = ap.parse_args(argv)
    from groute import Context
    from groute.engines.iterate.layout import bins_layout, degree_split
    from groute.graph import load_graph
    records = []
    with Context(1, backend="cuda") as ctx:
        device = ctx.devices[0]
        for spec in args.graphs.split(","):
            graph = load_graph(spec)
            layout = bins_layout(graph)
            csr = graph.indptr.nbytes + graph.indices.nbytes
            for k in (int(x) for x in args.shares.split(",")):
                offsets = degree_split(layout.in_indptr, k)
                for rep in range(args.repeat):
                    r = build_once(device, graph, layout, int(offsets[0]), int(offsets[1]))
                    r.update(graph=spec, shares=k, repeat=rep, csr_bytes=csr,
                             held_over_share=round(r["held_bytes"] * k / csr, 3),
                             live_over_share=round(r["live_bytes"] * k / csr, 3))
                    records.append(r)
                    print(json.dumps(r), flush=True)
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
