#!/usr/bin/env python
"""Each app's peak memory per device, set-up and first run, against its share of the CSR
(issue 37, item 5: at most 1.3x CSR/K plus a fixed few hundred MB on the fullest device).

Run from the repository root on a machine with CUDA GPUs (CuPy installed)::

    python benchmarks/probes/gpu_memory_share.py --graphs kron:21,kron:23 --devices 1,2,4
    python benchmarks/probes/gpu_memory_share.py --graphs kron:25 --devices 1,4 --apps pr,bfs
    python benchmarks/probes/gpu_memory_share.py --backend cpu --graphs kron:12 --devices 1,2

For every graph, app (``bfs``, ``sssp`` on random integer weights, ``pr`` BSP, ``pr-async``,
``cc``) and device count: one solver is made and run once, and per device it reports

* ``pool``: the peak bytes CuPy's memory pool holds, sampled every millisecond through set-up
  and the run (:class:`groute.bench.memory.PoolPeak`, as ``groute bench`` measures it), and
  that peak over the device's share of the CSR (``csr / K``: int64 offsets, int32 ids, int32
  weights for SSSP);
* ``live``: the exact peak of the bytes held by live arrays (every allocation passes through
  a counting allocator; what the pool holds beyond it is cached blocks), and the arrays live
  at that moment by where they were allocated (``--sites`` of them, biggest first): what to
  fix when a ratio is high;
* the solver's own estimate of one device (the engines' ``memory`` modules).

Each answer on several devices is compared with the same app's on one device (when ``1`` is
among ``--devices``): depths, distances and components equal, PageRank within an L1 distance
of 1e-4 (PageRank runs to the bench's tolerance). ``--backend cpu`` rehearses on CPU virtual devices (one process: the tracemalloc
peak of all of them, no per-device split, no sites). One JSON line per case on stdout, all of
them in ``--json``; a table at the end. Exit status 1 when a case failed or disagreed.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from groute import Context  # noqa: E402
from groute.bench.memory import PoolPeak, TracedPeak  # noqa: E402
from groute.graph import load_graph  # noqa: E402
from groute.graph.budget import csr_bytes  # noqa: E402
from groute.graph.partition import partition_graph  # noqa: E402

APPS = ("bfs", "sssp", "pr", "pr-async", "cc")
#: the largest L1 distance between PageRank on K devices and on one
PR_MAX_L1 = 1e-4
#: the issue's aim: the fullest device at most this many times its share of the CSR (plus a
#: fixed few hundred MB, shown apart)
AIM = 1.3


class LiveBytes:
    """A CuPy allocator that counts the bytes of live arrays per GPU, exactly, and keeps, for
    each GPU's highest count, the live bytes by allocation site (the innermost frames of the
    repository's code). Each allocation comes from CuPy's default pool as before, wrapped in
    memory whose owner counts it back when the last array on it is gone."""

    def __init__(self, depth: int = 3):
        import cupy
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.depth = depth
        # re-entrant: a collection inside malloc may free tracked arrays on this thread
        self.lock = threading.RLock()
        self.live = {}              # gpu -> bytes
        self.by_site = {}           # gpu -> {site: bytes}
        self.peak = {}              # gpu -> bytes
        self.peak_sites = {}        # gpu -> {site: bytes} at the peak

    def __enter__(self):
        self.cupy.cuda.set_allocator(self.malloc)
        return self

    def __exit__(self, *exc):
        self.cupy.cuda.set_allocator(self.pool.malloc)

    def reset(self):
        with self.lock:
            self.peak = dict(self.live)
            self.peak_sites = {g: dict(s) for g, s in self.by_site.items()}

    def _site(self) -> str:
        """The innermost ``depth`` frames of the repository's code (not this probe's) that
        led to the allocation, innermost first."""
        root, names = str(ROOT), []
        frame = sys._getframe(2)
        while frame is not None and len(names) < self.depth:
            path = frame.f_code.co_filename
            if path.startswith(root) and "/probes/" not in path:
                names.append(f"{Path(path).name}:{frame.f_lineno} {frame.f_code.co_name}")
            frame = frame.f_back
        return " < ".join(names) or "(outside groute)"

    def malloc(self, size):
        cupy = self.cupy
        mem = self.pool.malloc(size)
        gpu = cupy.cuda.runtime.getDevice()
        site = self._site()
        with self.lock:
            self.live[gpu] = self.live.get(gpu, 0) + size
            sites = self.by_site.setdefault(gpu, {})
            sites[site] = sites.get(site, 0) + size
            if self.live[gpu] > self.peak.get(gpu, 0):
                self.peak[gpu] = self.live[gpu]
                self.peak_sites[gpu] = dict(sites)
        owner = _Counted(self, mem, gpu, site, size)
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(mem.ptr, size, owner, gpu), 0)

    def freed(self, gpu, site, size):
        with self.lock:
            self.live[gpu] -= size
            self.by_site[gpu][site] -= size

    def top(self, gpu, n):
        sites = self.peak_sites.get(gpu, {})
        return [[s, b] for s, b in sorted(sites.items(), key=lambda kv: -kv[1])[:n] if b > 0]


class _Counted:
    """Keeps a pool allocation alive while arrays use it; counts it back when they are gone."""

    def __init__(self, tracker, mem, gpu, site, size):
        self.tracker, self.mem, self.gpu, self.site, self.size = tracker, mem, gpu, site, size

    def __del__(self):
        self.tracker.freed(self.gpu, self.site, self.size)


def make_solver(app, graph, ctx, partition):
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    if app == "bfs":
        return BFS(graph, ctx=ctx, partition=partition)
    if app == "sssp":
        return SSSP(graph, ctx=ctx, partition=partition)
    if app in ("pr", "pr-async"):      # the bench's tolerance: answers within PR_MAX_L1
        from groute.bench.specs import pagerank_options
        return PageRank(graph, ctx=ctx, partition=partition, weight=None,
                        mode="async" if app == "pr-async" else "bsp", **pagerank_options(graph))
    return CC(graph, ctx=ctx)


def run_once(app, solver, graph):
    if app in ("bfs", "sssp"):
        return solver.run(int(np.argmax(np.diff(graph.indptr)))).values
    return solver.run().values


def estimate(app, graph, k):
    from groute.engines.components.memory import components_bytes
    from groute.engines.iterate.memory import iteration_bytes
    from groute.engines.relax.memory import traversal_bytes
    fn = {"bfs": traversal_bytes, "sssp": traversal_bytes, "pr": iteration_bytes,
          "pr-async": iteration_bytes, "cc": components_bytes}[app]
    return int(fn(graph.num_vertices, graph.num_edges, weighted=app == "sssp",
                  directed=bool(graph.directed), devices=k).total)


def agrees(app, values, first) -> tuple[bool, str]:
    if first is None:
        return True, "no one-device answer to compare with"
    if app in ("pr", "pr-async"):
        l1 = float(np.abs(np.asarray(values) - first).sum())
        return l1 <= PR_MAX_L1, f"L1 distance to one device {l1:.2e}"
    same = np.array_equal(np.asarray(values), first)
    return same, "equal to one device" if same else "differs from one device"


def case(app, spec, graph, ctx, k, partition, backend, sites, first):
    gpus = [getattr(d, "gpu", 0) for d in ctx.devices]
    tracker = LiveBytes() if backend == "cuda" and sites else None
    probe = PoolPeak(gpus) if backend == "cuda" else TracedPeak()
    gc.collect()
    if tracker is not None:
        tracker.__enter__()
    solver = None
    try:
        probe.start()
        if tracker is not None:
            tracker.reset()
        t0 = time.perf_counter()
        solver = make_solver(app, graph, ctx, partition)
        setup_s = time.perf_counter() - t0
        values = run_once(app, solver, graph)
        mem = probe.finish()
    finally:
        if solver is not None:
            solver.close()
        if tracker is not None:
            tracker.__exit__()
    csr = csr_bytes(graph.num_vertices, graph.num_edges, weighted=app == "sssp")
    share = csr / k
    rec = {"case": f"{app} {spec} {k} dev", "app": app, "graph": spec, "devices": k,
           "vertices": graph.num_vertices, "arcs": graph.num_edges, "csr_bytes": csr,
           "share_bytes": int(share), "setup_s": round(setup_s, 2),
           "estimate_bytes": estimate(app, graph, k), "method": mem["method"]}
    per = mem["per_device_bytes"] or [mem["peak_bytes"]]
    rec["pool_bytes"] = per
    rec["pool_over_share"] = [round(b / share, 3) for b in per]
    rec["fullest_over_share"] = round(max(per) / share, 3)
    rec["fullest_minus_aim_mb"] = round((max(per) - AIM * share) / 1e6, 1)
    if tracker is not None:
        live = [tracker.peak.get(g, 0) for g in gpus]
        rec["live_bytes"] = live
        rec["live_over_share"] = [round(b / share, 3) for b in live]
        rec["sites"] = {f"gpu {g}": tracker.top(g, sites) for g in gpus}
    ok, why = agrees(app, values, first)
    rec.update(ok=ok, check=why)
    return rec, np.asarray(values)


def table(records) -> str:
    lines = ["| app | graph | K | fullest pool / (CSR/K) | per device | over the aim (MB) | "
             "estimate / (CSR/K) | live / (CSR/K) | check |",
             "|---|---|---:|---:|---|---:|---:|---|---|"]
    for r in records:
        if "pool_bytes" not in r:
            lines.append(f"| {r.get('app')} | {r.get('graph')} | {r.get('devices')} | "
                         f"error | | | | | {r.get('error', '')[:80]} |")
            continue
        share = r["share_bytes"]
        lines.append(
            f"| {r['app']} | {r['graph']} | {r['devices']} | {r['fullest_over_share']:.2f} | "
            f"{', '.join(f'{x:.2f}' for x in r['pool_over_share'])} | "
            f"{r['fullest_minus_aim_mb']:+.0f} | {r['estimate_bytes'] / share:.2f} | "
            f"{', '.join(f'{x:.2f}' for x in r.get('live_over_share', [])) or '-'} | "
            f"{'ok' if r['ok'] else 'DIFFERS'}: {r['check']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="kron:21,kron:23", help="comma-separated graph specs")
    ap.add_argument("--devices", default="1,2,4", help="comma-separated device counts")
    ap.add_argument("--apps", default=",".join(APPS), help=f"comma-separated, of {APPS}")
    ap.add_argument("--partition", default="contiguous", help="BFS, SSSP and PageRank's split")
    ap.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--sites", type=int, default=6,
                    help="allocation sites listed per device at its live peak (0: no counting "
                         "allocator)")
    ap.add_argument("--json", help="write every record here too")
    args = ap.parse_args(argv)
    backend = args.backend
    if backend == "auto":
        from groute.device import cuda_device_count
        backend = "cuda" if cuda_device_count() else "cpu"
    apps = [a for a in args.apps.split(",") if a]
    bad = sorted(set(apps) - set(APPS))
    if bad:
        ap.error(f"unknown apps {bad}: use {', '.join(APPS)}")
    counts = sorted(int(x) for x in args.devices.split(","))
    records, failed = [], False
    contexts = {}
    try:
        for spec in [s for s in args.graphs.split(",") if s]:
            t0 = time.perf_counter()
            graph = load_graph(spec, cache=False)
            weighted = None
            print(f"# {spec}: {graph.num_vertices:,} vertices, {graph.num_edges:,} arcs, "
                  f"loaded in {time.perf_counter() - t0:.1f} s", flush=True)
            for app in apps:
                if app == "sssp" and weighted is None:
                    xp = None
                    if backend == "cuda":
                        import cupy as xp
                    weighted = graph.with_weights(seed=1, xp=xp)
                g = weighted if app == "sssp" else graph
                first = None
                for k in counts:
                    if k not in contexts:
                        contexts[k] = Context(k, backend=backend, timeout=120)
                    if k > 1 and app not in ("cc",) and args.partition:
                        partition_graph(g, k, method=args.partition)   # kept on the graph
                    try:
                        rec, values = case(app, spec, g, contexts[k], k, args.partition,
                                           backend, args.sites, first)
                        if k == 1:
                            first = values
                    except Exception as exc:  # noqa: BLE001 - one case's failure hides nothing
                        rec = {"case": f"{app} {spec} {k} dev", "app": app, "graph": spec,
                               "devices": k, "ok": False,
                               "error": f"{type(exc).__name__}: {exc}",
                               "traceback": traceback.format_exc()}
                    failed |= not rec["ok"]
                    records.append(rec)
                    print(json.dumps({key: v for key, v in rec.items() if key != "traceback"}),
                          flush=True)
                    if args.json:
                        Path(args.json).write_text(json.dumps(records, indent=1))
            del graph, weighted
            gc.collect()
    finally:
        for ctx in contexts.values():
            ctx.shutdown()
    print()
    print(table(records))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
