#!/usr/bin/env python
"""Where the time goes on one GPU for small graphs and what each app holds in GPU memory.

For every graph given: PageRank with its default tuning and with the persistent form
(``PageRankTuning(persistent=True, trace=True)``: one launch for the whole run, per-iteration
phase times), each run verified against ``groute.graph.reference.pagerank``; then BFS, SSSP, PageRank
and CC with the CuPy memory pool's peak bytes (``total_bytes`` after solver set-up and one run,
the pool keeping every block it handed out) against the CSR's own bytes. One JSON line per case.

    python benchmarks/gpu_small_graphs.py --graphs .graphs/email-Enron.mtx.gz,kron:21
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import numpy as np


def timed(fn, repeat):
    import cupy
    fn()
    out = []
    for _ in range(repeat):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        r = fn()
        cupy.cuda.Device().synchronize()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="kron:21")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    import cupy
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC as ConnectedComponents
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    from groute.graph import load_graph
    from groute.graph.reference import pagerank as ref_pagerank
    from groute.tuning import PageRankTuning
    pool = cupy.get_default_memory_pool()
    for spec in args.graphs.split(","):
        g = load_graph(spec)
        csr = g.indptr.nbytes + g.indices.nbytes
        ref = ref_pagerank(g, tol=1e-6) if g.num_edges < 5_000_000 else None
        for label, knobs in (("default", {}), ("persistent", {"persistent": True, "trace": True}),
                             ("check16", {"check_every": 16}),
                             ("persistent_nodevcheck", {"persistent": True})):
            try:
                tuning = dataclasses.replace(PageRankTuning.from_environment(), **knobs)
                with PageRank(g, backend="cuda", devices=1, tuning=tuning, weight=None,
                              tol=1e-6 / g.num_vertices, max_iter=1000) as pr:
                    t, res = timed(pr.run, args.repeat)
                    l1 = float(np.abs(res.values - ref).sum()) if ref is not None else None
                    st = res.stats
                    print(json.dumps({"case": "pr", "graph": spec, "variant": label,
                                      "ms": t * 1e3, "l1": l1,
                                      "iterations": st.get("iterations"),
                                      "persistent": st.get("persistent"),
                                      "reason": st.get("persistent_reason"),
                                      "kernel": st.get("bsp_kernel"),
                                      "trace": str(st.get("iteration_trace"))[:400]},
                                     default=str), flush=True)
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(json.dumps({"case": "pr", "graph": spec, "variant": label,
                                  "error": repr(exc)[:400]}), flush=True)
        for name, cls, kw in (("bfs", BFS, {}), ("sssp", SSSP, {}), ("pr", PageRank, {}),
                              ("cc", ConnectedComponents, {})):
            try:
                pool.free_all_blocks()
                before = pool.total_bytes()
                with cls(g, backend="cuda", devices=1) as solver:
                    setup = pool.total_bytes() - before
                    src = int(g.ids[int(np.argmax(np.diff(g.indptr)))]) if name in ("bfs", "sssp") else None
                    solver.run(src) if src is not None else solver.run()
                    peak = pool.total_bytes() - before
                print(json.dumps({"case": "memory", "graph": spec, "app": name,
                                  "csr_bytes": int(csr), "arcs": int(g.num_edges),
                                  "setup_bytes": int(setup), "pool_bytes": int(peak),
                                  "x_csr": peak / csr, "bytes_per_arc": peak / max(g.num_edges, 1)}),
                      flush=True)
            except Exception as exc:  # noqa: BLE001
                print(json.dumps({"case": "memory", "graph": spec, "app": name,
                                  "error": repr(exc)[:400]}), flush=True)


if __name__ == "__main__":
    main()
