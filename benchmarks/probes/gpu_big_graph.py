#!/usr/bin/env python
"""BFS, SSSP, PageRank and CC on one GPU on a graph past 2**31 arcs, each answer checked.

Run from the repository root on a machine with a CUDA GPU (CuPy installed)::

    python benchmarks/probes/gpu_big_graph.py                      # ${BIG_GRAPH:-kron:26:32}
    python benchmarks/probes/gpu_big_graph.py --graph kron:24 --apps bfs,cc
    python benchmarks/probes/gpu_big_graph.py --backend cpu --graph kron:10   # no GPU: a small rehearsal

What it does, in order (each case in its own try/except, so one failure hides nothing):

1. ``load``: generate the graph with ``load_graph`` (on the GPU when there is one, built by
   source-vertex buckets straight into host memory; not cached), recording the time, the host
   peak while generating (resident-set peak) and that peak over the CSR's bytes.
2. ``bfs``, ``sssp`` (random integer weights in [1, 64], hashed on the GPU), ``pr``, ``cc``: one
   solver each on one device, one run, recording set-up and run time and the peak GPU memory
   (CuPy's pool, as ``groute bench`` measures it) per arc and over the CSR. Before a case its
   estimate (the engines' ``memory`` modules) is set against the GPU's free memory: a case that cannot
   fit is reported ``"status": "does not fit"`` with the estimate, not run.
3. Each answer is checked by the linear-time certificates of :mod:`groute.graph.certificates`
   (chunked over the arcs, on the GPU); below 2**31 arcs also against the plain-CuPy baselines
   (``--backend cpu``: against :mod:`groute.graph.reference`). Past 2**31 arcs the baselines'
   per-arc int64/float64 temporaries do not fit beside the graph.

One JSON line per case (``{"case": ..., "ok": ...}``) on stdout, and all of them in ``--json``
(rewritten after every case). Exit status 1 when any case failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from groute.engines.components.memory import components_bytes  # noqa: E402
from groute.engines.iterate.memory import iteration_bytes  # noqa: E402
from groute.engines.relax.memory import traversal_bytes  # noqa: E402
from groute.memory import free_device_bytes  # noqa: E402
from groute.bench.memory import PoolPeak, host_peak_while  # noqa: E402
from groute.graph import certificates as cert  # noqa: E402
from groute.graph import load_graph, reference  # noqa: E402
from groute.graph.budget import csr_bytes  # noqa: E402

APPS = ("bfs", "sssp", "pr", "cc")
#: graphs up to this many arcs are also checked against a baseline (plain CuPy; the CPU
#: reference on the CPU backend)
BASELINE_MAX_ARCS = 2**31 - 1
#: the largest L1 distance between PageRank's answer and one power step applied to it
PR_MAX_RESIDUAL = 1e-4
PR_MAX_L1 = 1e-4


class Run:
    """The cases' records, printed as JSON lines and kept in ``--json``."""

    def __init__(self, json_path):
        self.cases = []
        self.json_path = json_path
        self.t0 = time.perf_counter()

    def record(self, case, ok, **fields):
        rec = {"case": case, "ok": bool(ok), "elapsed_s": round(time.perf_counter() - self.t0, 1),
               **fields}
        self.cases.append(rec)
        print(json.dumps(rec, default=str), flush=True)
        if self.json_path:
            Path(self.json_path).write_text(json.dumps(self.cases, indent=1, default=str))


def _sync(backend):
    if backend == "cuda":
        import cupy
        cupy.cuda.runtime.deviceSynchronize()


def _release_gpu(backend):
    """Hand the pool's cached blocks back to the driver between cases."""
    if backend == "cuda":
        import cupy
        cupy.cuda.runtime.deviceSynchronize()
        cupy.get_default_memory_pool().free_all_blocks()


def _free_gpu_bytes(backend):
    if backend != "cuda":
        return None
    import cupy

    class _Dev:         # what free_device_bytes asks of a device
        backend = "cuda"
        xp = cupy

        @staticmethod
        def memory_info():
            return cupy.cuda.runtime.memGetInfo()

        @staticmethod
        def use():
            return cupy.cuda.Device(0)
    return free_device_bytes(_Dev)


def _estimate(app, g):
    fn = {"bfs": traversal_bytes, "sssp": traversal_bytes, "pr": iteration_bytes,
          "cc": components_bytes}[app]
    return fn(g.num_vertices, g.num_edges, weighted=app == "sssp", directed=g.directed,
              devices=1).total


def _gib(b):
    return None if b is None else round(b / 2**30, 2)


def _solve(app, g, backend, source):
    """``(values as NumPy, setup_s, run_s, stats, memory)`` of one solver on one device."""
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    kwargs = {"backend": backend, "devices": 1}
    if app == "pr":
        make = lambda: PageRank(g, weight=None,  # noqa: E731
                                tol=1e-6 / g.num_vertices, max_iter=1000, **kwargs)
    else:
        make = lambda: {"bfs": BFS, "sssp": SSSP, "cc": CC}[app](g, **kwargs)  # noqa: E731
    t0 = time.perf_counter()
    probe = PoolPeak([0]).start() if backend == "cuda" else None
    solver = make()
    try:
        setup_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        res = solver.run(source) if app in ("bfs", "sssp") else solver.run()
        _sync(backend)
        run_s = time.perf_counter() - t1
        memory = probe.finish() if probe is not None else {}
        values = np.asarray(res.values)
        stats = {k: v for k, v in (res.stats or {}).items()
                 if k in ("mode", "iterations", "levels", "rounds", "engine", "kernel", "path")}
        return values, setup_s, run_s, stats, memory
    finally:
        solver.close()
        if probe is not None:
            probe.finish()          # stops its sampling thread (again: harmless)


def _baseline(app, g, source, backend):
    """The baseline's answer as NumPy (plain CuPy on CUDA, the CPU reference otherwise)."""
    if backend != "cuda":
        return {"bfs": lambda: reference.bfs(g, source), "sssp": lambda: reference.sssp(g, source),
                "pr": lambda: reference.pagerank(g), "cc": lambda: reference.connected_components(g)
                }[app]()
    from groute.bench import baselines
    if app == "bfs":
        out = baselines.cupy_bfs(g, source)
    elif app == "sssp":
        out = baselines.cupy_sssp(g, source)
    elif app == "pr":
        out = baselines.cupy_pagerank(g)[0]
    else:
        out = baselines.cupy_cc(g)[0]
    out = out[0] if isinstance(out, tuple) else out
    values = out.get()
    for attr in ("_cupy_pr_setup", "_cupy_cc_setup"):
        if hasattr(g, attr):
            delattr(g, attr)
    return values


def _compare(app, got, want):
    if app == "bfs":
        return bool(np.array_equal(got.astype(np.int64), np.asarray(want).astype(np.int64)))
    if app == "sssp":
        w = np.asarray(want, np.float64)
        gg = np.asarray(got, np.float64)
        return bool(np.array_equal(np.isfinite(w), np.isfinite(gg))
                    and np.allclose(gg[np.isfinite(gg)], w[np.isfinite(w)], rtol=1e-5))
    if app == "pr":
        return float(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)).sum()) <= PR_MAX_L1
    return bool(np.array_equal(reference.canonical_labels(got), reference.canonical_labels(want)))


def _check(app, g, values, source, depth, backend, xp):
    """The certificate's findings, and the baseline comparison where the graph allows one."""
    out = {}
    if app == "bfs":
        out.update(cert.check_bfs(g, source, values, xp))
    elif app == "sssp":
        out.update(cert.check_sssp(g, source, np.where(values < 0, np.inf, values)
                                   if values.dtype.kind == "i" else values, xp))
    elif app == "pr":
        r = cert.pagerank_residual(g, values / values.sum(), xp=xp)
        out["residual_l1"] = r
        if not r <= PR_MAX_RESIDUAL:
            raise AssertionError(f"PageRank residual {r:.3g} > {PR_MAX_RESIDUAL:g}")
    else:
        if depth is None:
            raise AssertionError("CC's certificate needs the BFS depths (run bfs too)")
        out.update(cert.check_components(g, values, source, depth, xp))
    if g.num_edges <= BASELINE_MAX_ARCS:
        try:
            want = _baseline(app, g, source, backend)
            out["baseline"] = "match" if _compare(app, values, want) else "MISMATCH"
        except MemoryError as exc:
            out["baseline"] = f"skipped: out of memory ({exc})"
        _release_gpu(backend)
        if out["baseline"] == "MISMATCH":
            raise AssertionError(f"{app}: the answer differs from the baseline's")
    else:
        out["baseline"] = "skipped: past 2**31 arcs (certificate only)"
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graph", default=os.environ.get("BIG_GRAPH", "kron:26:32"))
    p.add_argument("--backend", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--apps", default=",".join(APPS))
    p.add_argument("--source", type=int, default=None,
                   help="BFS/SSSP source (default: the vertex of largest degree)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    for a in apps:
        if a not in APPS:
            p.error(f"--apps: unknown app {a!r}; use some of {','.join(APPS)}")
    backend = args.backend
    if backend == "cuda":
        import cupy
        xp = cupy
    else:
        xp = np
    run = Run(args.json)

    try:
        t0 = time.perf_counter()
        g, mem = host_peak_while(lambda: load_graph(
            args.graph, cache=False, backend="auto" if backend == "cuda" else "numpy"))
        _release_gpu(backend)
        csr = csr_bytes(g.num_vertices, g.num_edges)
        run.record("load", True, graph=args.graph, vertices=g.num_vertices, arcs=g.num_edges,
                   past_2_31=g.num_edges > 2**31 - 1, seconds=round(time.perf_counter() - t0, 1),
                   host_peak_gib=_gib(mem["peak_bytes"]), csr_gib=_gib(csr),
                   host_peak_over_csr=None if mem["peak_bytes"] is None
                   else round(mem["peak_bytes"] / csr, 2), method=mem["method"])
    except Exception as exc:
        run.record("load", False, graph=args.graph, error=f"{type(exc).__name__}: {exc}",
                   traceback=traceback.format_exc(limit=5))
        return 1

    source = int(np.argmax(np.diff(g.indptr))) if args.source is None else int(args.source)
    depth = None
    weighted = None
    for app in apps:
        rec = {"graph": args.graph, "source": source if app in ("bfs", "sssp") else None}
        try:
            graph = g
            if app == "sssp":
                t0 = time.perf_counter()
                weighted = g.with_weights(seed=0, xp=xp)
                rec["weights_s"] = round(time.perf_counter() - t0, 1)
                graph = weighted
            need = _estimate(app, graph)
            free = _free_gpu_bytes(backend)
            rec.update(estimate_gib=_gib(need), free_gib=_gib(free))
            if free is not None and need > free:
                run.record(app, False, status="does not fit", **rec)
                continue
            values, setup_s, run_s, stats, memory = _solve(app, graph, backend, source)
            _release_gpu(backend)
            peak = memory.get("peak_bytes")
            csr = csr_bytes(g.num_vertices, g.num_edges, weighted=app == "sssp")
            rec.update(setup_s=round(setup_s, 2), run_s=round(run_s, 3), stats=stats,
                       peak_gpu_gib=_gib(peak),
                       gpu_bytes_per_arc=None if peak is None else round(peak / g.num_edges, 2),
                       gpu_peak_over_csr=None if peak is None else round(peak / csr, 2))
            t0 = time.perf_counter()
            rec["check"] = _check(app, graph, values, source, depth, backend, xp)
            rec["check_s"] = round(time.perf_counter() - t0, 1)
            if app == "bfs":
                depth = values
            _release_gpu(backend)
            run.record(app, True, status="ok", **rec)
        except Exception as exc:
            _release_gpu(backend)
            status = "out of memory" if isinstance(exc, MemoryError) else "failed"
            run.record(app, False, status=status, error=f"{type(exc).__name__}: {exc}",
                       traceback=traceback.format_exc(limit=8), **rec)
        if app == "sssp":
            weighted = None
    if "cc" in apps and "bfs" not in apps:
        print("note: CC's certificate uses BFS depths; run bfs with cc", file=sys.stderr)
    failed = [c["case"] for c in run.cases if not c["ok"]]
    print(json.dumps({"summary": True, "failed": failed,
                      "seconds": round(time.perf_counter() - run.t0, 1)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
