#!/usr/bin/env python
"""Probe: what a caller waits for beyond the run itself (issue 37's S5: post-timer host work).

For each graph, device count and app, through the public calls (``groute.bfs(graph, source,
ctx=ctx)``, ``groute.sssp``, ``groute.pagerank``, ``groute.connected_components``) on one
reused Context (``--path call``), or one solver's ``run`` set up once (``--path run``, the
default: the bench's path, and a caller's with many sources): a warm-up call (set-up, compilation), then ``--repeat`` calls timed on the host
against their ``time_s`` (the run alone), so ``wall - time_s`` is the caller's fixed cost: the
staging before the timer, the download, renumbering and conversion after it, the result's
construction. One more call runs under cProfile and its heaviest functions (own time and
cumulative, groute's and NumPy's/CuPy's alike) are kept, so the fixed cost can be attributed.

Device counts above the machine's GPUs run on logical devices (``GROUTE_LOGICAL_DEVICES=1``):
their host costs are the real ones, their kernels share one GPU.

    python benchmarks/probes/gpu_call_latency.py --graphs kron:21,grid:4900 --devices 1,4
    python benchmarks/probes/gpu_call_latency.py --path call --graphs kron:21 --devices 1
    python benchmarks/probes/gpu_call_latency.py --backend cpu --graphs kron:12 --devices 1,2

One JSON line per case on stdout; ``--json FILE`` writes them all, with the profiles.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: the one-shot calls timed, by app name (``--path call``)
CALLS = {
    "bfs": lambda groute, g, ctx: groute.bfs(g, 0, ctx=ctx),
    "sssp": lambda groute, g, ctx: groute.sssp(g, 0, ctx=ctx),
    "pr": lambda groute, g, ctx: groute.pagerank(g, ctx=ctx),
    "cc": lambda groute, g, ctx: groute.connected_components(g, ctx=ctx),
}
#: the apps whose solver's ``run`` takes a source (``--path run``)
SOURCED = ("bfs", "sssp")


def solver_call(app, graph, ctx):
    """``run`` of one solver set up once (the bench's and a many-source user's path)."""
    from groute.registry import algorithm_named
    solver = algorithm_named(app).solver(graph, ctx=ctx)
    return solver, (lambda groute, g, c: solver.run(0) if app in SOURCED else solver.run())


def profile_rows(profile, limit):
    """The ``limit`` heaviest functions of a profile, by own time and by cumulative time."""
    stats = pstats.Stats(profile)
    rows = []
    for (path, line, name), (_, calls, own, cum, _) in stats.stats.items():
        where = f"{Path(path).name}:{line}({name})" if line else name
        rows.append({"function": where, "calls": calls, "own_ms": own * 1e3, "cum_ms": cum * 1e3})
    by_own = sorted(rows, key=lambda r: -r["own_ms"])[:limit]
    by_cum = sorted(rows, key=lambda r: -r["cum_ms"])[:limit]
    return by_own, by_cum


def measure(groute, graph, app, ctx, repeat, limit, path):
    solver = None
    if path == "run":
        solver, call = solver_call(app, graph, ctx)
    else:
        call = CALLS[app]
    try:
        return _measure(groute, graph, ctx, call, repeat, limit)
    finally:
        if solver is not None:
            solver.close()


def _measure(groute, graph, ctx, call, repeat, limit):
    call(groute, graph, ctx)                       # set-up and compilation
    walls, runs = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = call(groute, graph, ctx)
        walls.append(time.perf_counter() - t0)
        runs.append(result.time_s)
    profile = cProfile.Profile()
    profile.enable()
    call(groute, graph, ctx)
    profile.disable()
    by_own, by_cum = profile_rows(profile, limit)
    wall, run = statistics.median(walls), statistics.median(runs)
    return {"wall_ms": wall * 1e3, "time_ms": run * 1e3, "fixed_ms": (wall - run) * 1e3,
            "walls_ms": [w * 1e3 for w in walls], "by_own": by_own, "by_cum": by_cum}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="kron:21,grid:4900")
    ap.add_argument("--devices", default="1,4")
    ap.add_argument("--apps", default="bfs,sssp,pr,cc")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--path", choices=("call", "run"), default="run",
                    help="run: one solver's run, set up once; call: the one-shot function")
    ap.add_argument("--top", type=int, default=25, help="profile rows kept per case")
    ap.add_argument("--json", help="write every case (with its profile) to this file")
    args = ap.parse_args(argv)
    import groute
    from groute.graph import load_graph
    counts = [int(k) for k in args.devices.split(",")]
    if args.backend == "cuda":
        import cupy
        if max(counts) > cupy.cuda.runtime.getDeviceCount():
            os.environ["GROUTE_LOGICAL_DEVICES"] = "1"
    cases = []
    for spec in args.graphs.split(","):
        graph = load_graph(spec)
        for k in counts:
            ctx = groute.Context(devices=k, backend=args.backend)
            try:
                for app in args.apps.split(","):
                    case = {"graph": spec, "devices": k, "app": app, "path": args.path}
                    try:
                        case.update(measure(groute, graph, app, ctx, args.repeat, args.top, args.path))
                    except Exception as exc:         # a failed case is recorded, the rest run
                        case["error"] = f"{type(exc).__name__}: {exc}"
                    cases.append(case)
                    brief = {key: value for key, value in case.items()
                             if key not in ("by_own", "by_cum", "walls_ms")}
                    print(json.dumps(brief), flush=True)
            finally:
                ctx.close()
    if args.json:
        Path(args.json).write_text(json.dumps(cases, indent=1))
    print(f"{'graph':<12} {'K':>2} {'app':<5} {'wall ms':>9} {'run ms':>9} {'fixed ms':>9}")
    for c in cases:
        if "error" in c:
            print(f"{c['graph']:<12} {c['devices']:>2} {c['app']:<5} {c['error']}")
        else:
            print(f"{c['graph']:<12} {c['devices']:>2} {c['app']:<5} {c['wall_ms']:9.2f} "
                  f"{c['time_ms']:9.2f} {c['fixed_ms']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
