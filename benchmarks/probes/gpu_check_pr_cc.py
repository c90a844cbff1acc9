#!/usr/bin/env python
"""GPU check of PageRank and CC: compile, verify on 1 and all GPUs, time against scipy and CuPy.

Run from the repository root on a machine with CUDA GPUs (CuPy installed; pymetis not needed)::

    python benchmarks/probes/gpu_check_pr_cc.py                 # everything, about 5 minutes on 4 x H200
    python benchmarks/probes/gpu_check_pr_cc.py --quick         # compile + correctness only (< 1 minute)
    python benchmarks/probes/gpu_check_pr_cc.py --big grid:4900 --repeat 3 --budget 300

Stages, in order, so a broken kernel shows up in the first seconds:

1. compile every kernel of ``groute/engines/iterate/iterate.cu`` (with PageRank's header) and
   ``groute/engines/components/union_find.cu`` on every GPU;
2. correctness: PR (async and BSP) and CC on small hand-made, real and random graphs, on 1 GPU
   and on all GPUs (plus 2 when there are more), against ``groute.graph.reference`` (PR: L1 <=
   1e-4; CC: exact labels), and the plain-CuPy baselines on one graph;
3. timings on ``--big`` graphs (default kron:21 and grid:4900): ours on 1 and all GPUs (one
   warm-up, ``--repeat`` runs, median; CUDA events on one GPU), the plain-CuPy baselines (CUDA
   events, same warm-up/median) and scipy (the reference power iteration / csgraph, one run),
   each result verified; times also as a multiple of the one-pass bandwidth floor.

Every case prints one line; a failure prints ``FAIL <case>: <why>`` and the run goes on; the exit
status is 1 if anything failed. A compact table ends the output; with ``$OUT`` set, the results
go to ``$OUT/gpu_check_pr_cc.json`` (rewritten after every case, so a cut-off run keeps what it
did). ``--budget`` seconds stops starting new timing cases (the rest are marked skipped).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from groute.bench.peers import free_gpu_memory  # noqa: E402 - after the path is set
from groute.tuning import CCTuning, PageRankTuning  # noqa: E402


def ACCURATE(g):
    """PageRank's options for these checks: unweighted, to an L1 change of 1e-6 of the mass
    (groute's ``tol`` is per vertex, as NetworkX's) within 1000 iterations."""
    return {"weight": None, "tol": 1e-6 / g.num_vertices, "max_iter": 1000}


def pr_tuning(**knobs):
    """PageRank's tuning from the environment (e.g. GROUTE_PR_TRACE=1), with ``knobs`` set."""
    return dataclasses.replace(PageRankTuning.from_environment(), **knobs)

PR_MAX_L1 = 1e-4
#: "cuda" for the real check; "cpu" (--dry-run) runs the same stages on CPU virtual devices,
#: without the kernels and the CuPy baselines, to test this script on a machine without a GPU.
BACKEND = "cuda"
RESULTS = {"cases": [], "failures": [], "timings": []}
T_START = time.perf_counter()


def out_path():
    out = os.environ.get("OUT")
    return Path(out) / "gpu_check_pr_cc.json" if out else None


def save():
    path = out_path()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(RESULTS, indent=1, default=str))


def elapsed():
    return time.perf_counter() - T_START


def record(case, ok, detail, **extra):
    RESULTS["cases"].append({"case": case, "ok": ok, "detail": detail, **extra})
    if not ok:
        RESULTS["failures"].append(case)
        print(f"FAIL {case}: {detail}", flush=True)
    else:
        print(f"ok   {case}: {detail}", flush=True)
    save()


def guarded(case, fn):
    """Run ``fn()``; an exception is a failure of ``case`` (with the traceback's last lines)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported, then the run goes on
        tb = traceback.format_exc().strip().splitlines()
        record(case, False, f"{type(exc).__name__}: {exc} | " + " / ".join(tb[-6:]))
        return None


# ------------------------------------------------------------------------------------------------
def stage_compile(ngpu):
    import cupy
    from groute.apps.pr import PAGERANK
    from groute.kernels import get_kernel
    iterate_cu = ROOT / "groute" / "engines" / "iterate" / "iterate.cu"
    union_find_cu = ROOT / "groute" / "engines" / "components" / "union_find.cu"
    include = {iterate_cu: (PAGERANK.include_dir,)}     # the iteration's generated header
    kernels = {iterate_cu: ["pr_pull", "pr_finalize", "pr_push", "pr_apply", "pr_pack",
                                         "pr_bins32", "pr_bins64"] +
                                        [f"pr_csc{w}_k{k}" for w in (32, 64) for k in (1, 2, 4)],
               union_find_cu: ["cc_init", "cc_hook", "cc_merge", "cc_compress", "cc_link_round",
                               "cc_sample_mode", "cc_link_rest"]}
    for gpu in range(ngpu):
        with cupy.cuda.Device(gpu):
            for path, names in kernels.items():
                t0 = time.perf_counter()
                for name in names:
                    get_kernel(path, name, include=include.get(path, ()))
                record(f"compile {path.name} on cuda:{gpu}", True,
                       f"{len(names)} kernels in {time.perf_counter() - t0:.2f} s")
            # the persistent BSP kernels: the same file, compiled for cooperative launch
            from groute.kernels import load_module
            t0 = time.perf_counter()
            module = load_module(iterate_cu, cooperative=True, include=include[iterate_cu])
            names = [f"pr_csc{w}_persistent_k{k}" for w in (32, 64) for k in (1, 2, 4)] + \
                    ["pr_bins32_persistent", "pr_bins64_persistent"]
            for name in names:
                module.get_function(name)
            record(f"compile iterate.cu (cooperative) on cuda:{gpu}", True,
                   f"{len(names)} kernels in {time.perf_counter() - t0:.2f} s")
            if gpu == 0:    # registers and local memory (spills) of the kernels timed most
                for name, fn in (("pr_csc32_k2", get_kernel(iterate_cu, "pr_csc32_k2",
                                                                include=include[iterate_cu])),
                                 ("pr_csc32_persistent_k2", module.get_function("pr_csc32_persistent_k2")),
                                 ("pr_bins32", get_kernel(iterate_cu, "pr_bins32",
                                                              include=include[iterate_cu])),
                                 ("pr_bins32_persistent", module.get_function("pr_bins32_persistent"))):
                    print(f"   {name}: {fn.num_regs} registers, {fn.local_size_bytes} B local",
                          flush=True)


def small_graphs():
    from groute.graph import CSRGraph, load_graph
    from support import SHARED_GRAPHS

    def g(n, edges, directed, name):
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        s, d = e[:, 0], e[:, 1]
        if not directed:
            s, d = np.r_[s, d], np.r_[d, s]
        return CSRGraph.from_edges(s, d, n, directed=directed, name=name)
    rng = np.random.default_rng(3)
    perm = rng.permutation(3000)
    graphs = [
        g(6, [(0, 1), (1, 2), (2, 0), (0, 3), (3, 4), (5, 4)], True, "hand-dangling"),
        g(8, [(0, 1), (1, 2), (3, 2), (6, 5), (4, 5)], True, "hand-directed-weak"),
        g(7, [(0, 1), (2, 3)], False, "hand-isolated"),
        g(3000, np.column_stack([perm[:-1], perm[1:]]), False, "hand-long-path"),
        g(12, [(i, 0) for i in range(1, 12)], True, "hand-star-in"),
    ]
    for name in ("karate.mtx.gz", "polblogs.mtx.gz", "power.mtx.gz", "email-Enron.mtx.gz"):
        if (SHARED_GRAPHS / name).exists():
            graphs.append(load_graph(SHARED_GRAPHS / name, cache=False))
    for spec in ("kron:12", "grid:64", "er:20000:4", "kron:16"):
        graphs.append(load_graph(spec, cache=False))
    return graphs


def device_counts(ngpu):
    return sorted({1, ngpu} | ({2} if ngpu > 2 else set()))


def stage_correctness(ngpu, budget=float("inf")):
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute import Context
    from groute.graph import reference
    graphs = small_graphs()
    refs = {}
    for g in graphs:
        refs[g.name] = (reference.pagerank(g, tol=1e-12), reference.connected_components(g))
    for k in device_counts(ngpu):
        with Context(k, backend=BACKEND, timeout=30) as ctx:
            for g in graphs:
                if g.num_vertices < k:
                    continue
                if elapsed() > budget:
                    print(f"note: correctness stage past {budget:.0f} s: skipping {g.name} x{k}")
                    RESULTS.setdefault("skipped", []).append(f"correctness {g.name} x{k}")
                    continue
                pr_ref, cc_ref = refs[g.name]
                partitions = ("contiguous",) if k == 1 else \
                    (("contiguous", "random") if k == ngpu else ("random",))
                for mode in ("async", "bsp"):
                    for partition in partitions:
                        case = f"PR {mode} {g.name} x{k} {partition if k > 1 else ''}".strip()

                        def run_pr():
                            with PageRank(g, ctx=ctx, mode=mode, partition=partition,
                                          **ACCURATE(g)) as s:
                                res = s.run()
                                again = s.run()
                            l1 = float(np.abs(res.values - pr_ref).sum())
                            l1b = float(np.abs(again.values - pr_ref).sum())
                            ok = l1 <= PR_MAX_L1 and l1b <= PR_MAX_L1 and abs(res.values.sum() - 1) < 1e-6
                            record(case, ok, f"L1 {l1:.2e} (rerun {l1b:.2e}), {res.time_s * 1e3:.2f} ms")
                        guarded(case, run_pr)
                if k > 1 and k == ngpu:
                    case = f"PR bsp {g.name} x{k} random, peer copies instead of peer stores"

                    def run_pr_copies():
                        with PageRank(g, ctx=ctx, mode="bsp", partition="random",
                                      tuning=pr_tuning(peer_writes=False), **ACCURATE(g)) as s:
                            res = s.run()
                        l1 = float(np.abs(res.values - pr_ref).sum())
                        record(case, l1 <= PR_MAX_L1 and res.stats["exchange"] == "peer copies",
                               f"L1 {l1:.2e}, exchange {res.stats['exchange']}")
                    guarded(case, run_pr_copies)
                case = f"CC {g.name} x{k}"

                def run_cc():
                    seg = max(1 << 10, g.num_edges // 7)
                    with CC(g, ctx=ctx, tuning=CCTuning(segment_edges=seg)) as s:
                        res = s.run()
                        again = s.run()
                    ok = np.array_equal(res.values, cc_ref) and np.array_equal(again.values, cc_ref)
                    bad = "" if ok else " " + reference.mismatch_report(res.values, cc_ref)
                    record(case, ok, f"exact={ok}, {res.time_s * 1e3:.2f} ms, segments/device "
                                     f"{res.stats['segments_per_device']}{bad}")
                guarded(case, run_cc)
    if BACKEND != "cuda":
        return
    # the plain-CuPy baselines on a few graphs
    from groute.bench.baselines import cupy_cc, cupy_pagerank
    for g in graphs[-3:]:
        pr_ref, cc_ref = refs[g.name]

        def run_baselines():
            x, it = cupy_pagerank(g, tol=1e-10)
            l1 = float(np.abs(x.get() - pr_ref).sum())
            lab, rounds = cupy_cc(g)
            ok = l1 <= PR_MAX_L1 and np.array_equal(lab.get(), cc_ref)
            record(f"baselines {g.name}", ok, f"cupy PR L1 {l1:.2e} ({it} it), cupy CC exact="
                                              f"{np.array_equal(lab.get(), cc_ref)} ({rounds} rounds)")
        guarded(f"baselines {g.name}", run_baselines)


# ------------------------------------------------------------------------------------------------
def load_big(spec):
    """``load_graph(spec)`` uncached, with a line saying its size and load time."""
    from groute.graph import load_graph
    t0 = time.perf_counter()
    g = load_graph(spec, cache=False)
    print(f"{spec}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs, loaded in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return g


def cuda_timed(fn, repeat):
    """Median seconds of ``fn()`` over ``repeat`` runs after one warm-up, by CUDA events on the
    current stream; returns (median, times, last result)."""
    import cupy
    fn()
    times, out = [], None
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        out = fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times), times, out


def timing(entry):
    RESULTS["timings"].append(entry)
    t = entry.get("median_ms")
    shown = f"{t:10.3f} ms" if t is not None else "   skipped  "
    extra = ", ".join(f"{k}={v}" for k, v in entry.items()
                      if k not in ("graph", "app", "impl", "gpus", "median_ms", "times_ms"))
    print(f"time {entry['app']:8s} {entry['graph']:11s} {entry['impl']:22s} x{entry['gpus']}: {shown}  {extra}",
          flush=True)
    save()


def time_cupy_baselines(g, spec, pr_ref, cc_ref, floor_s, repeat):
    """The plain-CuPy peers on GPU 0, timed like ours and checked against the reference."""
    import cupy
    from groute.bench.baselines import cupy_cc, cupy_pagerank
    with cupy.cuda.Device(0):
        def base_pr():
            med, times, (x, it) = cuda_timed(lambda: cupy_pagerank(g, tol=1e-6), repeat)
            l1 = float(np.abs(x.get() - pr_ref).sum())
            timing({"graph": spec, "app": "pr", "impl": "cupy cuSPARSE SpMV", "gpus": 1,
                    "median_ms": med * 1e3, "iterations": it, "L1": f"{l1:.1e}",
                    "x_floor": round(med / floor_s["pr"], 1)})
        guarded(f"time cupy PR {spec}", base_pr)

        def base_cc():
            med, times, (lab, rounds) = cuda_timed(lambda: cupy_cc(g), repeat)
            ok = np.array_equal(lab.get(), cc_ref)
            timing({"graph": spec, "app": "cc", "impl": "cupy scatter_min", "gpus": 1,
                    "median_ms": med * 1e3, "rounds": rounds, "exact": ok,
                    "x_floor": round(med / floor_s["cc"], 1)})
            if not ok:
                record(f"time cupy CC {spec}", False, "baseline labels differ from the reference")
        guarded(f"time cupy CC {spec}", base_cc)
        for attr in ("_cupy_pr_setup", "_cupy_cc_setup"):
            if hasattr(g, attr):
                delattr(g, attr)
        free_gpu_memory()


def stage_timings(ngpu, specs, repeat, budget):
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute import Context
    from groute.bench.floor import floor_bytes, measure_copy_bandwidth
    from groute.device import CPUDevice, CUDADevice
    from groute.graph import reference

    probe = CUDADevice(0) if BACKEND == "cuda" else CPUDevice(0)
    bw = measure_copy_bandwidth(probe)["bytes_per_s"]
    probe.close()
    RESULTS["copy_bandwidth_GBps"] = bw / 1e9
    print(f"device copy bandwidth (read+write): {bw / 1e9:.0f} GB/s", flush=True)
    for spec in specs:
        if elapsed() > budget:
            timing({"graph": spec, "app": "all", "impl": "(time budget spent)", "gpus": "-",
                    "median_ms": None})
            continue
        g = load_big(spec)
        floor_s = {app: floor_bytes(app, g) / bw for app in ("pr", "cc")}
        # scipy: the reference implementations, one run each (they are also the answers we check)
        t0 = time.perf_counter()
        pr_ref = reference.pagerank(g, tol=1e-6)
        t_pr = time.perf_counter() - t0
        t0 = time.perf_counter()
        cc_ref = reference.connected_components(g)
        t_cc = time.perf_counter() - t0
        timing({"graph": spec, "app": "pr", "impl": "scipy power iteration", "gpus": 0,
                "median_ms": t_pr * 1e3})
        timing({"graph": spec, "app": "cc", "impl": "scipy csgraph", "gpus": 0, "median_ms": t_cc * 1e3})
        if BACKEND == "cuda":
            time_cupy_baselines(g, spec, pr_ref, cc_ref, floor_s, repeat)
        # ours
        for k in device_counts(ngpu):
            for what in ("pr-async", "pr-bsp", "cc"):
                case = f"time {what} {spec} x{k}"
                if elapsed() > budget:
                    timing({"graph": spec, "app": what, "impl": "groute (time budget spent)",
                            "gpus": k, "median_ms": None})
                    continue

                def run_ours():
                    with Context(k, backend=BACKEND, timeout=60) as ctx:
                        t0 = time.perf_counter()
                        if what == "cc":
                            solver = CC(g, ctx=ctx)
                        else:
                            solver = PageRank(g, ctx=ctx, mode=what[3:], partition="contiguous",
                                              **ACCURATE(g))
                        setup = time.perf_counter() - t0
                        try:
                            solver.run()
                            runs = [solver.run() for _ in range(repeat)]
                        finally:
                            solver.close()
                    times = [r.time_s for r in runs]
                    med = statistics.median(times)
                    res = runs[-1]
                    entry = {"graph": spec, "app": what, "impl": "groute", "gpus": k,
                             "median_ms": med * 1e3, "setup_s": round(setup, 1),
                             "x_floor": round(med / floor_s["cc" if what == "cc" else "pr"], 1)}
                    if what == "cc":
                        ok = bool(np.array_equal(res.values, cc_ref))
                        entry.update(exact=ok, segments_per_device=res.stats["segments_per_device"])
                    else:
                        l1 = float(np.abs(res.values - pr_ref).sum())
                        ok = l1 <= PR_MAX_L1
                        entry["L1"] = f"{l1:.1e}"
                        if what == "pr-bsp":
                            entry["iterations"] = res.stats["iterations"]
                        else:
                            entry["rounds"] = res.stats["rounds"]
                            entry["pushes"] = sum(res.stats["vertices_pushed_per_device"])
                            entry["items_sent"] = sum(res.stats["items_sent"].values()) \
                                if res.stats["items_sent"] else 0
                    timing(entry)
                    if not ok:
                        record(case, False, f"wrong answer: {entry}")
                guarded(case, run_ours)
        del g
        if BACKEND == "cuda":
            free_gpu_memory()


PR_VARIANTS = {
    "coo (c566e53 kernels)": {"bsp_kernel": "coo", "check_every": 4, "_spin_s": 0.0},
    "auto (default)": {},
    "coo, spin wait": {"bsp_kernel": "coo", "check_every": 4},
    "csc k1": {"bsp_kernel": "csc", "vertices_per_lane": 1},
    "csc k2": {"bsp_kernel": "csc", "vertices_per_lane": 2},
    "csc k4": {"bsp_kernel": "csc", "vertices_per_lane": 4},
    "csc k2 sd32": {"bsp_kernel": "csc", "small_degree": 32},
    "csc k2 check16": {"bsp_kernel": "csc", "check_every": 16},
    "csc k2 inplace": {"bsp_kernel": "csc", "inplace": True},
    "bins": {"bsp_kernel": "bins"},
    "bins hub1024": {"bsp_kernel": "bins", "hub_degree": 1024},
    "bins hub16384": {"bsp_kernel": "bins", "hub_degree": 16384},
    "bins t512": {"bsp_kernel": "bins", "task_arcs": 512},
    "bins lane2": {"bsp_kernel": "bins", "lane_arcs": 2},
    "bins check16": {"bsp_kernel": "bins", "check_every": 16},
}


def sweep_ms(solver, sweeps=32, per_device=False):
    """Device time of one BSP sweep alone (kernels only): ``sweeps`` iterations queued back to
    back on the solver's device, no convergence skip, no host check, no exchange between
    devices; CUDA events. ``per_device``: every device of the solver at once, a list of each
    one's time (how well the layout balances them). Leaves the solver's vectors changed (run it
    last)."""
    import cupy
    devs = solver.devs if per_device else solver.devs[:1]
    sweeps = min(sweeps, solver.max_iter - 1)
    base = (1.0 - solver.alpha) / solver.n
    marks = []
    for dev in devs:
        dev.device_check = False
        if getattr(dev, "task_next", None) is not None:     # the bins task counters: unused again
            dev.stream.submit(lambda dev=dev: dev.task_next.fill(0))
        dev.bsp_step(0, base)
        with dev.device.use():
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(dev.stream.raw)
        marks.append((start, stop))
    for t in range(1, sweeps + 1):
        for dev in devs:
            dev.bsp_step(t, base)
    out = []
    for dev, (start, stop) in zip(devs, marks):
        with dev.device.use():
            stop.record(dev.stream.raw)
            stop.synchronize()
            out.append(round(cupy.cuda.get_elapsed_time(start, stop) / sweeps, 4))
    return out if per_device else out[0]


def stage_pr_variants(specs, repeat, budget, variants, scipy=True, check=True):
    """BSP PageRank options on one device: right on the small graphs, then timed on ``specs``
    next to the plain-CuPy cuSPARSE power iteration of the same run; every answer against
    ``reference.pagerank`` (tol 1e-6, the contract: L1 <= 1e-4; ``scipy=False``: against the
    cuSPARSE answer instead, the same algorithm and stopping rule in float64, which saves the
    reference's CPU time: 22 s on grid:4900; ``check=False``: no small graphs)."""
    from groute.bench.baselines import cupy_pagerank
    from groute.apps.pr import PageRank
    from groute import Context
    from groute.graph import reference
    import groute.engines.iterate.device
    names = [v for v in variants.split(",") if v] if variants else list(PR_VARIANTS)
    spin_default = groute.engines.iterate.device.SPIN_S

    def opts(name):
        """The solver options of a variant; "_spin_s" sets groute.engines.iterate.device.SPIN_S (0: the earlier
        sleeping wait at every convergence check)."""
        o = dict(PR_VARIANTS[name])
        groute.engines.iterate.device.SPIN_S = o.pop("_spin_s", spin_default)
        return {"tuning": pr_tuning(**o)}
    with Context(1, backend=BACKEND, timeout=60) as ctx:
        bad = 0
        for g in small_graphs() if check else ():
            ref = reference.pagerank(g, tol=1e-12)
            for name in names:
                def one():
                    with PageRank(g, ctx=ctx, mode="bsp", **opts(name), **ACCURATE(g)) as s:
                        a, b = s.run(), s.run()
                    l1 = max(float(np.abs(a.values - ref).sum()), float(np.abs(b.values - ref).sum()))
                    det = bool(np.array_equal(a.values, b.values))
                    # in-place sweeps race and the COO pull adds with float atomics: those
                    # need not repeat bit for bit; the fused Jacobi sweeps (csc, bins) must
                    v = PR_VARIANTS[name]
                    ok = l1 <= PR_MAX_L1 and (det or v.get("inplace", False)
                                              or s.bsp_kernel == "coo")
                    if not ok:
                        record(f"PR {name} {g.name}", False, f"L1 {l1:.2e}, deterministic {det}")
                    return ok
                bad += not guarded(f"PR {name} {g.name}", one)
        if check:
            record("PR variants on the small graphs", bad == 0, f"{len(names)} variants")
        for spec in specs:
            g = load_big(spec)
            ref = None
            if scipy or BACKEND != "cuda":
                t0 = time.perf_counter()
                ref = reference.pagerank(g, tol=1e-6)
                timing({"graph": spec, "app": "pr", "impl": "scipy power iteration", "gpus": 0,
                        "median_ms": (time.perf_counter() - t0) * 1e3})
            base_ms = None
            if BACKEND == "cuda":
                def base():
                    nonlocal ref
                    med, times, (x, it) = cuda_timed(lambda: cupy_pagerank(g, tol=1e-6), repeat)
                    x = x.get()
                    if ref is None:     # the reference's algorithm and rule, in float64
                        ref = x / x.sum()
                    timing({"graph": spec, "app": "pr", "impl": "cupy cuSPARSE SpMV", "gpus": 1,
                            "median_ms": med * 1e3, "iterations": it,
                            "L1": f"{float(np.abs(x - ref).sum()):.1e}"})
                    return med * 1e3
                base_ms = guarded(f"time cupy PR {spec}", base)
                if hasattr(g, "_cupy_pr_setup"):
                    delattr(g, "_cupy_pr_setup")
                free_gpu_memory()
            for name in names:
                if elapsed() > budget:
                    timing({"graph": spec, "app": "pr", "impl": name, "gpus": 1, "median_ms": None})
                    continue

                def ours():
                    t1 = time.perf_counter()
                    with PageRank(g, ctx=ctx, mode="bsp", **opts(name), **ACCURATE(g)) as s:
                        setup = time.perf_counter() - t1
                        s.run()
                        runs = [s.run() for _ in range(repeat)]
                        kernel_ms = sweep_ms(s) if BACKEND == "cuda" else None
                    med = statistics.median(r.time_s for r in runs) * 1e3
                    l1 = max(float(np.abs(r.values - ref).sum()) for r in runs)
                    its = runs[-1].stats["iterations"]
                    timing({"graph": spec, "app": "pr", "impl": name, "gpus": 1, "median_ms": med,
                            "iterations": its, "ms_per_it": round(med / max(its, 1), 4),
                            "sweep_ms": kernel_ms, "L1": f"{l1:.1e}", "setup_s": round(setup, 1),
                            "x_cusparse": None if not base_ms else round(base_ms / med, 2)})
                    if l1 > PR_MAX_L1:
                        record(f"time PR {name} {spec}", False, f"L1 {l1:.2e} > {PR_MAX_L1}")
                guarded(f"time PR {name} {spec}", ours)
            del g
            if BACKEND == "cuda":
                free_gpu_memory()


#: ``--pr-kernels NAME:HOW``: the solver options each HOW adds (and whether one device runs it)
SCALING_HOWS = {
    "": ({}, True),
    "copies": ({"peer_writes": False}, False),      # slices copied after each iteration
    "hostcheck": ({"device_check": False}, True),   # no device-side skip: the host checks every 4
    "persistent": ({"persistent": True}, True),     # one cooperative launch per device per run
    "periteration": ({"persistent": False}, True),  # one launch per device per iteration
}


def stage_pr_scaling(specs, counts, kernels, repeat, budget, partition="contiguous"):
    """BSP PageRank on 1..K devices (the probe's method: median of ``repeat`` solver runs after
    a warm-up), with each device's sweep time (kernels alone, all devices at once: the balance
    of the layout) and the rest of an iteration (exchange, host checks). Every answer must
    equal the first one of its graph (one device, first kernel) within L1 1e-4, like
    gpu_scaling_probe.py; ``--pr-scaling`` with ``--pr-kernels auto,coo`` compares the kernels
    on the same graph object, so the bins relabelling is computed once; a kernel name ending in
    ``:copies`` runs it with ``peer_writes=False`` (slices copied after each iteration instead
    of stored into the peers by the kernel), on several devices only; ``:hostcheck`` with
    ``device_check=False`` (the host reads the stats every 4 iterations and the kernels never
    skip: the protocol before the global device-side check); ``:persistent`` with
    ``persistent=True`` (one cooperative launch per device per run, iterate.cu ``bsp_persistent``),
    ``:periteration`` with ``persistent=False``. ``partition``: the partitioner of the kernels
    that use one (csc, coo)."""
    from groute.apps.pr import PageRank
    from groute import Context
    for spec in specs:
        g = load_big(spec)
        first = None
        same_k = {}     # device count -> (values, iterations) of its first kernel's last run
        for name in kernels:
            kernel, _, how = name.partition(":")
            if how not in SCALING_HOWS:
                raise ValueError(f"--pr-kernels {name}: after ':' use one of "
                                 f"{', '.join(h for h in SCALING_HOWS if h)}")
            extra, on_one = SCALING_HOWS[how]
            for k in counts:
                if k == 1 and not on_one:
                    continue
                case = f"scaling PR bsp {name} {spec} x{k}"
                if elapsed() > budget:
                    timing({"graph": spec, "app": "pr-bsp", "impl": name, "gpus": k, "median_ms": None})
                    continue

                def one():
                    nonlocal first
                    with Context(k, backend=BACKEND, timeout=120) as ctx:
                        t1 = time.perf_counter()
                        with PageRank(g, ctx=ctx, mode="bsp", partition=partition,
                                      tuning=pr_tuning(bsp_kernel=kernel, **extra),
                                      **ACCURATE(g)) as s:
                            setup = time.perf_counter() - t1
                            s.run()
                            runs = [s.run() for _ in range(repeat)]
                            sweeps = sweep_ms(s, per_device=True) if BACKEND == "cuda" else None
                    med = statistics.median(r.time_s for r in runs) * 1e3
                    st = runs[-1].stats
                    its = st["iterations"]
                    if first is None:
                        first = runs[-1].values
                    l1 = max(float(np.abs(r.values - first).sum()) for r in runs)
                    # against the first kernel on as many devices (e.g. per iteration vs persistent)
                    ref_k = same_k.setdefault(k, (runs[-1].values, its))
                    l1_k = max(float(np.abs(r.values - ref_k[0]).sum()) for r in runs)
                    bitwise_k = all(np.array_equal(r.values, ref_k[0]) for r in runs)
                    base = next((e for e in RESULTS["timings"] if e.get("scaling") and e["graph"] == spec
                                 and e["gpus"] == counts[0] and e.get("median_ms")), None)
                    timing({"graph": spec, "app": "pr-bsp", "impl": f"{name} -> {st['kernel']}",
                            "gpus": k, "median_ms": med, "times_ms": [round(r.time_s * 1e3, 2) for r in runs],
                            "iterations": its, "ms_per_it": round(med / max(its, 1), 3),
                            "sweep_ms_per_device": sweeps,
                            "rest_ms_per_it": None if not sweeps else round(med / max(its, 1) - max(sweeps), 3),
                            "vs_first": round(base["median_ms"] / med, 2) if base else None,
                            "L1_vs_first": f"{l1:.1e}", "layout": st.get("layout"),
                            "vs_first_on_x": f"L1 {l1_k:.1e}, bit-equal {bitwise_k}, "
                                             f"iterations {its} vs {ref_k[1]}",
                            "device_check": st.get("device_check"), "check_every": st.get("check_every"),
                            "persistent": st.get("persistent"),
                            "iteration_trace": st.get("iteration_trace"),
                            "l1_change": st.get("l1_change"),
                            "exchange": st.get("exchange"), "arcs_per_device": st["arcs_per_device"],
                            "vertices_per_device": st["vertices_per_device"],
                            "setup_s": round(setup, 1), "scaling": True})
                    record(case, l1 <= PR_MAX_L1, f"L1 {l1:.1e} vs the first answer, {med:.2f} ms, {its} it")
                    if ref_k[0] is not runs[-1].values:     # same device count, another kernel
                        record(f"{case} vs {kernels[0]} x{k}", l1_k <= 1e-6 and its == ref_k[1],
                               f"L1 {l1_k:.1e} (bit-equal {bitwise_k}), {its} vs {ref_k[1]} iterations")
                guarded(case, one)
                if BACKEND == "cuda":
                    free_gpu_memory()
        del g


CC_VARIANTS = {
    "edge-list": {"afforest": False},
    "afforest r2 light": {"sample_rounds": 2, "link": "light"},
    "afforest r2 mixed": {"sample_rounds": 2, "link": "mixed"},
    "afforest r2 hook": {"sample_rounds": 2, "link": "hook"},
    "afforest r1 hook": {"sample_rounds": 1, "link": "hook"},
    "afforest r1 mixed": {"sample_rounds": 1, "link": "mixed"},
    "afforest r1 light": {"sample_rounds": 1, "link": "light"},
    "afforest r0 light": {"sample_rounds": 0, "link": "light"},
    "afforest r2 light segments": {"sample_rounds": 2, "link": "light", "rest": "segments"},
}


def stage_cc_variants(specs, repeat, budget, variants):
    """CC options on one device: exact on the small graphs, then timed on ``specs`` next to the
    plain-CuPy baseline of the same run (and scipy, which gives the answer checked)."""
    from groute.bench.baselines import cupy_cc
    from groute.apps.cc import CC
    from groute import Context
    from groute.graph import reference

    def cc_options(name):
        """The solver options of a CC variant: the path (afforest, rest) and the tuning."""
        o = dict(CC_VARIANTS[name])
        path = {key: o.pop(key) for key in ("afforest", "rest") if key in o}
        return {**path, "tuning": CCTuning(**o)}
    names = [v for v in variants.split(",") if v] if variants else list(CC_VARIANTS)
    with Context(1, backend=BACKEND, timeout=60) as ctx:
        for g in small_graphs():
            ref = reference.connected_components(g)
            for name in names:
                def one():
                    with CC(g, ctx=ctx, **cc_options(name)) as s:
                        a, b = s.run().values, s.run().values
                    ok = np.array_equal(a, ref) and np.array_equal(b, ref)
                    if not ok:
                        record(f"CC {name} {g.name}", False, reference.mismatch_report(a, ref))
                    return ok
                guarded(f"CC {name} {g.name}", one)
        record("CC variants on the small graphs", not RESULTS["failures"], f"{len(names)} variants")
        for spec in specs:
            g = load_big(spec)
            t0 = time.perf_counter()
            ref = reference.connected_components(g)
            timing({"graph": spec, "app": "cc", "impl": "scipy csgraph", "gpus": 0,
                    "median_ms": (time.perf_counter() - t0) * 1e3})
            if BACKEND == "cuda":
                def base():
                    med, times, (lab, _) = cuda_timed(lambda: cupy_cc(g), repeat)
                    timing({"graph": spec, "app": "cc", "impl": "cupy scatter_min", "gpus": 1,
                            "median_ms": med * 1e3, "exact": bool(np.array_equal(lab.get(), ref))})
                guarded(f"time cupy CC {spec}", base)
            for name in names:
                if elapsed() > budget:
                    timing({"graph": spec, "app": "cc", "impl": name, "gpus": 1, "median_ms": None})
                    continue

                def ours():
                    with CC(g, ctx=ctx, **cc_options(name)) as s:
                        s.run()
                        runs = [s.run() for _ in range(repeat)]
                    ok = all(np.array_equal(r.values, ref) for r in runs)
                    st = runs[-1].stats
                    timing({"graph": spec, "app": "cc", "impl": name, "gpus": 1,
                            "median_ms": statistics.median(r.time_s for r in runs) * 1e3,
                            "exact": ok, "giant": st.get("giant_size"), "hooked": st.get("edges")})
                    if not ok:
                        record(f"time CC {name} {spec}", False, "labels differ from the reference")
                guarded(f"time CC {name} {spec}", ours)
            del g
            if BACKEND == "cuda":
                free_gpu_memory()


def table():
    rows = RESULTS["timings"]
    if not rows:
        return
    print("\n| graph | app | implementation | GPUs | median ms | x floor | iterations | vs cuSPARSE | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r.get("median_ms")
        check = r.get("L1", "exact" if r.get("exact") else ("WRONG" if r.get("exact") is False else ""))
        if "L1_vs_first" in r:
            check = f"L1 {r['L1_vs_first']} vs first"
            if "vs_first_on_x" in r:
                check += f"; vs first kernel x{r['gpus']}: {r['vs_first_on_x']}"
        x = r.get("x_cusparse")
        print(f"| {r['graph']} | {r['app']} | {r['impl']} | {r['gpus']} | "
              f"{'-' if t is None else f'{t:.3f}'} | {r.get('x_floor', '')} | "
              f"{r.get('iterations', r.get('rounds', ''))} | {'' if x is None else f'{x}x'} | {check} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="compile and correctness only")
    ap.add_argument("--big", default="kron:21,grid:4900", help="graphs to time (comma-separated)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget", type=float, default=480, help="seconds after which no new timing case starts")
    ap.add_argument("--skip-correctness", action="store_true")
    ap.add_argument("--cc-variants", nargs="?", const="", default=None, metavar="NAMES",
                    help="only CC: the options of CC_VARIANTS (comma-separated names; all when "
                         "empty) on one device, exact on the small graphs, timed on --big")
    ap.add_argument("--pr-variants", nargs="?", const="", default=None, metavar="NAMES",
                    help="only BSP PR: the options of PR_VARIANTS (comma-separated names; all "
                         "when empty) on one device, right on the small graphs, timed on --big "
                         "next to cuSPARSE")
    ap.add_argument("--pr-scaling", nargs="?", const="kron:21", default=None, metavar="GRAPHS",
                    help="only BSP PR scaling: --pr-kernels on --devices GPUs on GRAPHS "
                         "(default kron:21), answers checked against the first")
    ap.add_argument("--pr-kernels", default="auto", help="--pr-scaling: bsp_kernel values")
    ap.add_argument("--devices", default=None, help="--pr-scaling: device counts (default 1 and all)")
    ap.add_argument("--partition", default="contiguous",
                    help="--pr-scaling: partitioner for the csc and coo kernels (default contiguous)")
    ap.add_argument("--no-scipy", action="store_true",
                    help="--pr-variants on a GPU: check the big graphs against the cuSPARSE "
                         "answer (float64, the reference's algorithm) instead of running scipy")
    ap.add_argument("--dry-run", action="store_true",
                    help="run the stages on 4 CPU virtual devices (tests this script without a GPU)")
    args = ap.parse_args()
    global BACKEND
    scaling = None
    if args.pr_scaling is not None:
        def scaling(ngpu):
            counts = [int(x) for x in args.devices.split(",")] if args.devices else device_counts(ngpu)
            guarded("pr scaling", lambda: stage_pr_scaling(
                [s for s in args.pr_scaling.split(",") if s], counts,
                [s for s in args.pr_kernels.split(",") if s], args.repeat, args.budget,
                partition=args.partition))
            table()
            save()
            return 1 if RESULTS["failures"] else 0
    if args.dry_run:
        BACKEND = "cpu"
        RESULTS["machine"] = {"dry_run": "cpu virtual devices"}
        if scaling is not None:
            return scaling(4)
        if args.pr_variants is not None:
            guarded("pr variants", lambda: stage_pr_variants(
                [s for s in args.big.split(",") if s], args.repeat, args.budget, args.pr_variants,
                check=not args.skip_correctness))
            table()
            return 1 if RESULTS["failures"] else 0
        if args.cc_variants is not None:
            guarded("cc variants", lambda: stage_cc_variants(
                [s for s in args.big.split(",") if s], args.repeat, args.budget, args.cc_variants))
            table()
            return 1 if RESULTS["failures"] else 0
        guarded("correctness", lambda: stage_correctness(4))
        if not args.quick:
            guarded("timings", lambda: stage_timings(4, [s for s in args.big.split(",") if s],
                                                     args.repeat, args.budget))
        table()
        return 1 if RESULTS["failures"] else 0
    import logging
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from groute.device import cuda_device_count
    ngpu = cuda_device_count()
    if ngpu == 0:
        print("no CUDA GPU (or no CuPy): nothing to check", file=sys.stderr)
        return 2
    import cupy
    names = [cupy.cuda.runtime.getDeviceProperties(i)["name"] for i in range(ngpu)]
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    RESULTS["machine"] = {"gpus": names, "cupy": cupy.__version__, "numpy": np.__version__}
    print(f"{ngpu} GPU(s): {', '.join(names)}; CuPy {cupy.__version__}", flush=True)
    guarded("compile", lambda: stage_compile(ngpu))
    if RESULTS["failures"]:
        print("kernels do not compile: stopping", file=sys.stderr)
        return 1
    if scaling is not None:
        return scaling(ngpu)
    if args.cc_variants is not None:
        guarded("cc variants", lambda: stage_cc_variants(
            [s for s in args.big.split(",") if s], args.repeat, args.budget, args.cc_variants))
        table()
        save()
        return 1 if RESULTS["failures"] else 0
    if args.pr_variants is not None:
        guarded("pr variants", lambda: stage_pr_variants(
            [s for s in args.big.split(",") if s], args.repeat, args.budget, args.pr_variants,
            scipy=not args.no_scipy, check=not args.skip_correctness))
        table()
        save()
        return 1 if RESULTS["failures"] else 0
    if not args.skip_correctness:
        guarded("correctness", lambda: stage_correctness(ngpu, budget=args.budget / 2))
    print(f"-- correctness done at {elapsed():.0f} s", flush=True)
    if not args.quick:
        specs = [s for s in args.big.split(",") if s]
        guarded("timings", lambda: stage_timings(ngpu, specs, args.repeat, args.budget))
    table()
    RESULTS["seconds"] = round(elapsed(), 1)
    save()
    fails = RESULTS["failures"]
    print(f"\n{len(RESULTS['cases'])} checks, {len(fails)} failed in {elapsed():.0f} s"
          + (": " + "; ".join(fails) if fails else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
