"""BFS/SSSP on the GPU: verify against scipy, then time against scipy and plain CuPy (one run).

Not a pytest module (its name does not start with ``test_``): run it on a GPU machine,

    python benchmarks/gpu_bench_traversal.py --graphs kron:21,grid:4900 --json out.json

For every graph: load (timed), pick the source like the bench harness (grid corner, else the
highest-degree vertex), compute the scipy reference (timed: it is the CPU peer), then for each
case (app x mode x priority) build the solver once, run a warm-up, check the answer, and time
``--repeat`` runs (CUDA events; median). The plain-CuPy baselines (groute/bench/baselines.py) run once
after a warm-up unless ``--no-cupy``. Prints one line per case and writes everything as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groute.bench.floor import floor_bytes, measure_copy_bandwidth  # noqa: E402
from groute.tuning import WorklistTuning  # noqa: E402
from groute.bench.suite import choose_source  # noqa: E402
from groute.graph import load_graph  # noqa: E402

CASES = {
    "bfs": [("async", True), ("bsp", False)],
    "sssp": [("async", "auto"), ("async", True), ("async", False), ("bsp", False)],
}


def log(*a):
    print(*a, flush=True)


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        times.append(fn())
    return statistics.median(times), times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="kron:21,grid:4900")
    ap.add_argument("--apps", default="bfs,sssp")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--partition", default="contiguous", choices=["metis", "contiguous", "random"],
                    help="for several devices (metis needs pymetis and is slow on kron:25)")
    ap.add_argument("--routing", default="all2all", choices=["all2all", "ring"])
    ap.add_argument("--no-cupy", action="store_true")
    ap.add_argument("--no-bsp", action="store_true")
    ap.add_argument("--cupy-limit", type=int, default=1 << 40, help="skip CuPy peers above this many arcs")
    ap.add_argument("--delta", type=float, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--configs", default="",
                    help="launch shapes to compare, e.g. 256:0,1024:1 (block size : blocks per SM, "
                         "0 = as many as fit); each runs the async cases")
    ap.add_argument("--bfs-configs", default="", help="extra BFS-only launch configs")
    ap.add_argument("--deltas", default="", help="extra SSSP deltas to time (async, priority on)")
    ap.add_argument("--sssp-configs", default="", help="extra SSSP-only launch configs (async, "
                    "priority auto unless the config says PRIORITY=True/False)")
    ap.add_argument("--skip-cases", default="", help="cases to leave out, comma separated, as "
                    "graph/app/mode/priority, e.g. grid:4900/sssp/async/False")
    ap.add_argument("--max-case-s", type=float, default=None,
                    help="time a case once (no repeats) when its checked run takes longer")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a quick check of this script on CPU virtual devices (no CuPy peers)")
    args = ap.parse_args()

    from groute import Context
    from groute.bench.baselines import cupy_bfs, cupy_sssp
    from groute.apps.bfs import BFS
    from groute.apps.sssp import SSSP
    from groute.graph import reference
    from scipy.sparse import csgraph

    ctx = Context(args.devices, backend=args.backend, timeout=120)
    out = {"device": ctx.devices[0].properties()["name"], "devices": args.devices,
           "commit": os.environ.get("GROUTE_COMMIT", ""), "cases": [], "graphs": {}}
    if args.backend == "cpu":
        args.no_cupy = True
    bw = measure_copy_bandwidth(ctx.devices[0])["bytes_per_s"]
    out["copy_bandwidth"] = bw
    log(f"device {out['device']}, copy bandwidth {bw / 1e12:.2f} TB/s (read+write)")
    for spec in args.graphs.split(","):
        t0 = time.perf_counter()
        g = load_graph(spec)
        t_load = time.perf_counter() - t0
        source, why = choose_source(g, spec)
        gw = g if g.weights is not None else g.with_weights(seed=0)
        gb = g.without_weights() if g.weights is not None else g
        log(f"\n== {spec}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs, loaded in {t_load:.1f} s;"
            f" source {source} ({why})")
        info = out["graphs"][spec] = {"vertices": g.num_vertices, "arcs": g.num_edges, "load_s": t_load,
                                      "source": source}
        m = gb.to_scipy()
        for app in args.apps.split(","):
            graph = gb if app == "bfs" else gw
            # scipy peer and reference
            t0 = time.perf_counter()
            if app == "bfs":
                csgraph.breadth_first_order(m, source, directed=True, return_predecessors=False)
                t_scipy = time.perf_counter() - t0
                ref = reference.bfs(graph, source)
            else:
                ref = reference.sssp(graph, source)
                t_scipy = time.perf_counter() - t0
            info[f"scipy_{app}_s"] = t_scipy
            floor_s = floor_bytes(app, graph) / bw
            log(f"{app}: scipy {t_scipy * 1e3:.1f} ms; floor {floor_s * 1e3:.3f} ms")
            # plain CuPy peer
            t_cupy = None
            if not args.no_cupy and graph.num_edges <= args.cupy_limit:
                import cupy
                dg = graph.to_device(ctx.devices[0])
                fn = cupy_bfs if app == "bfs" else cupy_sssp
                with ctx.devices[0].use():
                    fn(dg, source)
                    cupy.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    vals = fn(dg, source)
                    cupy.cuda.Device().synchronize()
                    t_cupy = time.perf_counter() - t0
                    vals = cupy.asnumpy(vals)
                ok = np.array_equal(vals, ref) if app == "bfs" else np.allclose(vals, ref, rtol=1e-6)
                log(f"{app}: plain CuPy {t_cupy * 1e3:.1f} ms (correct: {ok})")
                info[f"cupy_{app}_s"] = t_cupy
                del dg
            cls = BFS if app == "bfs" else SSSP
            plan = [(m, p, None, args.delta) for m, p in CASES[app]
                    if not (args.no_bsp and m == "bsp")]
            for cfg in filter(None, args.configs.split(",")):
                plan += [(m, p, cfg, args.delta) for m, p in CASES[app] if m == "async"]
            if app == "sssp":
                plan += [("async", True, None, float(d)) for d in filter(None, args.deltas.split(","))]
                plan += [("async", "auto", c, None) for c in filter(None, args.sssp_configs.split(","))]
            else:
                plan += [("async", True, c, None) for c in filter(None, args.bfs_configs.split(","))]
            skip = set(filter(None, args.skip_cases.split(",")))
            plan = [c for c in plan if f"{spec}/{app}/{c[0]}/{c[1]}" not in skip]
            for mode, priority, cfg, delta in plan:
                block, per_sm, *env = (cfg or "256:0").split(":")
                os.environ["GROUTE_TRAVERSAL_BLOCK"] = block
                os.environ["GROUTE_TRAVERSAL_BLOCKS_PER_SM"] = "" if per_sm == "0" else per_sm
                for var in ("PULL", "ADAPTIVE"):
                    os.environ[f"GROUTE_TRAVERSAL_{var}"] = "1"
                for var in ("BATCH", "BARRIER", "SPIN_NS", "NARROW", "BIGCHECK"):    # kernel variants
                    os.environ.pop(f"GROUTE_TRAVERSAL_{var}", None)
                for assignment in env:            # e.g. PULL=0, ADAPTIVE=0, BATCH=0, NARROW=32
                    name, value = assignment.split("=", 1)
                    if name == "PRIORITY":        # not a variable: the case's priority option
                        priority = {"True": True, "False": False}.get(value, value)
                        continue
                    os.environ[f"GROUTE_TRAVERSAL_{name}"] = value
                case = {"graph": spec, "app": app, "mode": mode, "priority": priority,
                        "devices": args.devices, "config": cfg, "delta_asked": delta}
                try:
                    t0 = time.perf_counter()
                    kw = {} if delta is None or app == "bfs" else {"delta": int(delta)}
                    solver = cls(graph, ctx=ctx, partition=args.partition, mode=mode, priority=priority,
                                 worklist_tuning=WorklistTuning(routing=args.routing), **kw)
                    case["setup_s"] = time.perf_counter() - t0
                    try:
                        res = solver.run(source)
                        if app == "sssp" and priority == "auto":
                            case["priority_chosen"] = res.stats["priority"]
                        good = np.array_equal(res.values, ref)
                        case["correct"] = bool(good)
                        if not good:
                            bad = np.flatnonzero(res.values != ref)
                            case["wrong"] = int(bad.size)
                            case["example"] = [int(bad[0]), float(res.values[bad[0]]), float(ref[bad[0]])]
                        if args.max_case_s is not None and res.time_s > args.max_case_s:
                            med, times, last = res.time_s, [res.time_s], res
                        else:
                            med, times = timed(lambda: solver.run(source).time_s, args.repeat)
                            last = solver.run(source)
                    finally:
                        solver.close()
                    case.update(time_s=med, times_s=times, floor_s=floor_s, over_floor=med / floor_s,
                                gteps=graph.num_edges / med / 1e9, vs_scipy=t_scipy / med,
                                vs_cupy=(t_cupy / med) if t_cupy else None, stats=last.stats)
                    case["grid"] = [getattr(solver.workers[0], "blocks", None),
                                    getattr(solver.workers[0], "block", None)]
                    log(f"{app} {mode:5s} prio={priority} cfg={cfg} grid={case['grid']}: {med * 1e3:9.3f} ms  "
                        f"correct={case['correct']}  {case['over_floor']:.1f}x floor  "
                        f"{t_scipy / med:.1f}x scipy" + (f"  {t_cupy / med:.1f}x cupy" if t_cupy else "") +
                        f"  levels={last.stats['levels']} launches={last.stats['launches']} "
                        f"reshapes={last.stats.get('reshapes')} pull={last.stats.get('pull_rounds')} "
                        f"processed={sum(last.stats['items_processed']):,} deferrals={last.stats['deferrals']:,}"
                        f" delta={last.stats['delta']} host_rounds={last.stats['rounds']}"
                        f" moved={last.stats['bytes_moved'] / 1e6:.1f}MB")
                except Exception as exc:  # keep going: one broken case must not cost the rest
                    import traceback
                    traceback.print_exc()
                    case["error"] = f"{type(exc).__name__}: {exc}"
                    log(f"{app} {mode} prio={priority} cfg={cfg}: ERROR {case['error']}")
                out["cases"].append(case)
                if args.json:
                    Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    ctx.shutdown()
    log("\n| graph | app | mode | priority | config | ms | correct | launches | processed |")
    log("|---|---|---|---|---|---:|---|---:|---:|")
    for c in out["cases"]:
        st = c.get("stats") or {}
        prio = c["priority"] if c["priority"] != "auto" else f"auto={c.get('priority_chosen')}"
        t = f"{c['time_s'] * 1e3:.3f}" if "time_s" in c else c.get("error", "?")[:40]
        log(f"| {c['graph']} | {c['app']} | {c['mode']} | {prio} | {c['config'] or 'default'} | {t} | "
            f"{c.get('correct')} | {st.get('launches')} | {sum(st.get('items_processed', [0])):,} |")


if __name__ == "__main__":
    main()
