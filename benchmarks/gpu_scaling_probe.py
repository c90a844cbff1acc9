"""Strong scaling of BFS, SSSP, PageRank and CC on 1..K GPUs of one machine, cheaply checked.

Not a pytest module: run it on a multi-GPU machine,

    python benchmarks/gpu_scaling_probe.py --graphs kron:25 --devices 1,2 --json scaling.json

Big graphs make the CPU references (scipy) cost minutes, so this script checks differently from
``groute bench``: the first answer of each app is checked against an independent GPU
computation where there is one (BFS: the plain-CuPy level BFS of ``groute/bench/baselines.py``; SSSP:
its plain-CuPy Bellman-Ford, on graphs of up to 2^28 arcs), and every later answer of the app
(other device counts and modes: the fused worker, the worklist, the peer kernel) must equal the
first (BFS, SSSP, CC exactly; PageRank within L1 1e-4). For each case it prints the median time of ``--repeat`` runs after a warm-up,
the speedup over one device, and the counters that explain it (exchange rounds, items and
bytes sent between devices, arcs scanned). ``--budget`` seconds bounds the whole script.
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

from groute.bench.suite import choose_source  # noqa: E402
from groute.graph import load_graph  # noqa: E402

T0 = time.perf_counter()


def log(*a):
    print(f"[{time.perf_counter() - T0:7.1f}s]", *a, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="kron:25")
    ap.add_argument("--apps", default="bfs,sssp,pr,cc")
    ap.add_argument("--devices", default="1,2")
    ap.add_argument("--partition", default="contiguous", choices=["metis", "contiguous", "random"])
    ap.add_argument("--modes", default="async",
                    help="traversal modes (async,bsp); 'bsp:host' / 'bsp:peer' also pick the exchange")
    ap.add_argument("--pr-mode", default="bsp", choices=["async", "bsp"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=500)
    ap.add_argument("--json", default=None)
    ap.add_argument("--variants", default="",
                    help="traversal kernel variants to time on several devices, ';'-separated "
                         "lists of GROUTE_TRAVERSAL_ settings, e.g. 'BATCH=1;BATCH=0'")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a quick check of this script on CPU virtual devices")
    args = ap.parse_args()

    from groute import Context
    from groute.bench.baselines import cupy_bfs, cupy_sssp
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP

    counts = [int(x) for x in args.devices.split(",")]
    out = {"commit": os.environ.get("GROUTE_COMMIT", ""), "cases": []}
    for spec in args.graphs.split(","):
        t = time.perf_counter()
        g = load_graph(spec)
        source, _ = choose_source(g, spec)
        log(f"== {spec}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs ({time.perf_counter() - t:.1f} s); "
            f"source {source}")
        gw = None
        first = {}
        for app in args.apps.split(","):
            modes = [args.pr_mode] if app == "pr" else [None] if app == "cc" else args.modes.split(",")
            if app == "sssp" and gw is None:
                t = time.perf_counter()
                gw = g.with_weights(seed=0)
                log(f"weights in {time.perf_counter() - t:.1f} s")
            variants = [v for v in args.variants.split(";") if v] if app in ("bfs", "sssp") else []
            plan = [(mode, k, None) for mode in modes for k in counts]
            plan += [(mode, k, v) for mode in modes for k in counts if k > 1 for v in variants]
            for mode, k, variant in plan:
                for name in [n for n in os.environ if n.startswith("GROUTE_TRAVERSAL_")]:
                    del os.environ[name]
                for setting in filter(None, (variant or "").split(",")):
                    name, value = setting.split("=", 1)
                    os.environ[f"GROUTE_TRAVERSAL_{name}"] = value
                if time.perf_counter() - T0 > args.budget:
                    log(f"budget of {args.budget:g} s spent: skipping {app} {mode} on {k}")
                    continue
                case = {"graph": spec, "app": app, "mode": mode, "devices": k, "variant": variant}
                try:
                    ctx = Context(k, backend=args.backend, timeout=300)
                except Exception as exc:  # noqa: BLE001 - fewer GPUs than asked
                    log(f"{app} on {k}: {exc}")
                    continue
                try:
                    t = time.perf_counter()
                    part = dict(partition=args.partition)
                    m, _, ex = str(mode).partition(":")
                    if app in ("bfs", "sssp"):
                        part["exchange"] = ex or "auto"
                    if app == "bfs":
                        solver = BFS(g, ctx=ctx, mode=m, **part)
                        run = lambda: solver.run(source)  # noqa: E731
                    elif app == "sssp":
                        solver = SSSP(gw, ctx=ctx, mode=m, **part)
                        run = lambda: solver.run(source)  # noqa: E731
                    elif app == "pr":
                        solver = PageRank(g, ctx=ctx, mode=mode, **part, weight=None,
                                          tol=1e-6 / g.num_vertices, max_iter=1000)
                        run = solver.run
                    else:
                        solver = CC(g, ctx=ctx)
                        run = solver.run
                    case["setup_s"] = time.perf_counter() - t
                    res = run()
                    key = app
                    if key not in first:
                        first[key] = res.values
                        case["check"] = independent_check(app, gw if app == "sssp" else g, source,
                                                          res.values, ctx, cupy_bfs, cupy_sssp)
                    else:
                        case["check"] = same_answer(app, first[key], res.values)
                    times = []
                    for _ in range(args.repeat):
                        r = run()
                        times.append(r.time_s)
                    med = statistics.median(times)
                    case.update(ms=med * 1e3, times_ms=[x * 1e3 for x in times],
                                stats=jsonable(r.stats))
                    base = next((c for c in out["cases"] if c["graph"] == spec and c["app"] == app
                                 and c["mode"] == mode and c["devices"] == counts[0] and "ms" in c
                                 and not c.get("variant")), None)
                    sp = f"  {base['ms'] / case['ms']:.2f}x of {counts[0]}" if base and k != counts[0] else ""
                    st = r.stats or {}
                    keys = ("exchange", "rounds", "items_sent", "bytes_moved", "edges_traversed",
                            "iterations", "launches", "pull_rounds", "pull_levels", "threshold_advances")
                    extra = ", ".join(f"{kk}={st[kk]}" for kk in keys if kk in st)
                    log(f"{app:4} {str(mode):5} {k} GPU{' ' + variant if variant else ''}: {med * 1e3:9.2f} ms (setup {case['setup_s']:.1f} s)"
                        f"{sp}  check: {case['check']}  {extra}")
                    if st.get("phase_seconds") and str(mode).startswith("bsp"):
                        log("     host ms per phase (device: advance/send/barrier/exchange/share): " + "; ".join(
                            f"{d}: " + "/".join(f"{v * 1e3:.1f}" for v in ph.values())
                            for d, ph in enumerate(st["phase_seconds"])))
                        log("     advance ms per level: " + "; ".join(
                            f"{d}: " + " ".join(f"{v * 1e3:.2f}" for v in lv)
                            for d, lv in enumerate(st["advance_seconds"])))
                    if st.get("level_trace_us"):
                        log("     us per level [A sums, B bitmaps, expand, C wait] (GROUTE_PEER_TRACE): " + "; ".join(
                            f"{d}: " + " ".join("/".join(f"{v:g}" for v in row) for row in rows)
                            for d, rows in enumerate(st["level_trace_us"])))
                    solver.close()
                except Exception as exc:  # noqa: BLE001 - keep going, report the failure
                    import traceback
                    traceback.print_exc()
                    case["error"] = repr(exc)
                    log(f"{app} {mode} on {k}: ERROR {exc!r}")
                finally:
                    ctx.shutdown()
                out["cases"].append(case)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    bad = [c for c in out["cases"] if "error" in c or not str(c.get("check", "")).startswith("ok")]
    log(f"done: {len(out['cases'])} cases, {len(bad)} failed or unchecked")
    return 1 if bad else 0


#: SSSP's plain-CuPy check materialises each round's arcs: skipped above this many arcs
SSSP_CHECK_ARCS = 1 << 28


def independent_check(app, g, source, values, ctx, cupy_bfs, cupy_sssp):
    if (app not in ("bfs", "sssp") or ctx.backend != "cuda"
            or (app == "sssp" and g.num_edges > SSSP_CHECK_ARCS)):
        return "ok (reference for the other cases)"
    import cupy
    dg = g.to_device(ctx.devices[0])
    with ctx.devices[0].use():
        ref = cupy.asnumpy((cupy_bfs if app == "bfs" else cupy_sssp)(dg, source))
    del dg
    name = f"plain CuPy {app.upper()}"
    return f"ok (= {name})" if np.array_equal(ref, values) else f"WRONG vs {name}"


def same_answer(app, a, b):
    if app == "pr":
        l1 = float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum())
        return f"ok (L1 {l1:.1e} vs first)" if l1 <= 1e-4 else f"WRONG (L1 {l1:.1e} vs first)"
    return "ok (= first)" if np.array_equal(a, b) else f"WRONG ({int(np.sum(a != b))} differ from first)"


def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x


if __name__ == "__main__":
    sys.exit(main())
