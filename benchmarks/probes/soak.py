#!/usr/bin/env python
"""Soak: many mixed runs (apps, device counts, backends) in one process, and whether they leak.

Run from the repository root; on 4 GPUs (the device tool's ``nvidia-h200-x4``)::

    python benchmarks/probes/soak.py --runs 1000 --backends cuda,cpu --devices 1,2,3,4

Each run picks, seeded, an app (BFS, SSSP, PageRank, CC, k-core, an operator loop run as the
operator calls or fused, an order-free loop on the async engine), a backend, a device count and
a graph, runs it on a context kept for that backend and count (or, ``--fresh`` of the time, on a
new one closed after the run) and checks the answer against ``groute.graph.reference`` (NetworkX
for k-core). Before the runs (after one warm-up run of every kind on every graph, and one on a
new context, which load the kernels and fill CuPy's pools: a kernel first launched later, by a
graph that takes another path, would load its module and grow the GPU's local-memory
reservation then, a step the GPU memory verdict would take for a leak) and after them, with every kept context closed, CuPy's
pools freed and the garbage collected, it measures what a leak would grow: each GPU's used memory (the driver's
count), the host's resident memory, the process's threads (and groute's by name), CuPy streams
alive and open file descriptors; and every ``--every`` runs the same, to show a trend. It prints
one line per checkpoint and a verdict per resource, from the first checkpoint after ``--every``
runs (where there are three or more: one-time steps of the first runs behind it) to the last;
exit status 1 on a wrong answer, a failed run or a resource grown past its allowance
(``ALLOWANCE``). ``--out`` (default ``$OUT/soak.json``
when ``$OUT`` is set) gets the whole record.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import groute  # noqa: E402 - after the path is set
from groute import Context  # noqa: E402
from groute.graph import load_graph, reference  # noqa: E402

APPS = ("bfs", "sssp", "pagerank", "cc", "kcore", "loop", "fused_loop", "async_loop")
GRAPHS = ("kron:11", "grid:40", "er:1500:6:seed=3")
#: how much each resource may grow over the soak before it counts as a leak: memory a
#: long-lived process's allocators keep (bytes), nothing for the counted objects
ALLOWANCE = {"gpu_used_bytes": 64 << 20, "host_rss_bytes": 256 << 20, "threads": 0,
             "groute_threads": 0, "cupy_streams": 0, "open_fds": 0}


def measure(gpus: int) -> dict:
    """What a leak would grow, after the garbage is collected and CuPy's pools are freed (and
    the threads of closed contexts, which end on their own, have ended: up to 10 s)."""
    gc.collect()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("groute") for t in threading.enumerate()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    out = {"threads": threading.active_count(),
           "groute_threads": sum(t.name.startswith("groute") for t in threading.enumerate()),
           "open_fds": len(os.listdir("/proc/self/fd")), "host_rss_bytes": _rss()}
    if gpus:
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
        used = []
        for i in range(gpus):
            with cupy.cuda.Device(i):
                free, total = cupy.cuda.runtime.memGetInfo()
            used.append(int(total - free))
        out["gpu_used_bytes_each"] = used
        out["gpu_used_bytes"] = max(used)
        out["cupy_streams"] = sum(isinstance(o, cupy.cuda.Stream) for o in gc.get_objects())
    return out


def _rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Answers:
    """The reference answer of each (app, graph), computed once."""

    def __init__(self):
        self.graphs, self.known = {}, {}

    def graph(self, spec):
        if spec not in self.graphs:
            g = load_graph(spec, cache=False)
            self.graphs[spec] = g if g.weights is not None else g.with_weights(seed=1)
        return self.graphs[spec]

    def source(self, spec) -> int:
        return int(np.argmax(self.graph(spec).degrees()))

    def want(self, app, spec):
        key = (app, spec)
        if key not in self.known:
            g, s = self.graph(spec), self.source(spec)
            if app in ("bfs", "loop", "fused_loop"):
                value = reference.bfs(g, s)
            elif app == "async_loop":
                value = (np.asarray(reference.bfs(g, s)) >= 0).astype(np.int32)
            elif app == "sssp":
                value = reference.sssp(g, s)
            elif app == "pagerank":
                value = reference.pagerank(g, weighted=True)    # as groute.pagerank: weight="weight"
            elif app == "cc":
                value = reference.connected_components(g)
            else:
                import networkx as nx
                src, dst = g.edges()
                G = nx.Graph()
                G.add_nodes_from(range(g.num_vertices))
                G.add_edges_from(zip(src.tolist(), dst.tolist()))
                G.remove_edges_from(nx.selfloop_edges(G))
                core = nx.core_number(G)
                value = np.array([core[v] for v in range(g.num_vertices)])
            self.known[key] = np.asarray(value)
        return self.known[key]


def claim_functor():
    from groute.operators import Functor

    def claim(s, v):
        v = np.unique(v[s["depth"][v] < 0])
        s["depth"][v] = s["d"] + 1
        return v
    return Functor(name="soak_claim", params="int* depth, int d",
                   cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;", numpy=claim)


def reach_functor():
    from groute.operators import Functor

    def reach(s, v):
        v = np.unique(v[s["reached"][v] == 0])
        s["reached"][v] = 1
        return v
    return Functor(name="soak_reach", params="int* reached",
                   cuda="return atomicCAS(&reached[v], 0, 1) == 0;", numpy=reach)


def run_once(app, g, source, ctx):
    """The app's answer on ``ctx`` (a solver or an engine made for this run and closed)."""
    if app == "bfs":
        return groute.bfs(g, source, ctx=ctx).values
    if app == "sssp":
        return groute.sssp(g, source, ctx=ctx).values
    if app == "pagerank":
        return groute.pagerank(g, ctx=ctx, tol=1e-9).values     # tol is per vertex
    if app == "cc":
        return groute.connected_components(g, ctx=ctx).values
    if app == "kcore":
        return groute.core_number(g.without_weights(), ctx=ctx).values
    from groute.engines import make_engine
    from groute.operators import AdvanceStep, run_loop
    loop = {"loop": "python", "fused_loop": "auto", "async_loop": "async"}[app]
    with make_engine(g, "async" if app == "async_loop" else "bsp", ctx=ctx,
                     loop=loop) as eng:
        if app == "async_loop":
            eng.state("reached", np.int32, 0,
                      values=(np.arange(g.num_vertices) == source).astype(np.int32))
            run_loop(eng.frontier([source]), [AdvanceStep(reach_functor())], order="any")
            return eng.gather("reached")
        depth = np.full(g.num_vertices, -1, np.int32)
        depth[source] = 0
        eng.state("depth", np.int32, values=depth)
        run_loop(eng.frontier([source]), [AdvanceStep(claim_functor())], level="d")
        return eng.gather("depth")


def right(app, got, want) -> bool:
    if app == "pagerank":
        return reference.pagerank_error(got, want)[0] <= 1e-3
    if app == "cc":
        return reference.compare_labels(got, want)
    if app == "sssp":
        return np.allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                           rtol=1e-5, equal_nan=True)
    return np.array_equal(np.asarray(got), np.asarray(want))


def kinds(backends, devices, gpus, logical=False):
    """Every (backend, device count) the soak may pick: CUDA counts up to the GPUs there are,
    or any count where ``logical`` devices share them (``GROUTE_LOGICAL_DEVICES=1``)."""
    out = []
    for backend in backends:
        for k in devices:
            if backend == "cuda" and k > gpus and not logical:
                continue
            out.append((backend, k))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1000, help="runs after the warm-up (1000)")
    p.add_argument("--backends", default="auto",
                   help="comma list of cuda, cpu (auto: cuda,cpu with GPUs, else cpu)")
    p.add_argument("--devices", default="1,2,4", help="device counts to mix (1,2,4)")
    p.add_argument("--apps", default=",".join(APPS), help=f"apps to mix ({','.join(APPS)})")
    p.add_argument("--graphs", default=",".join(GRAPHS), help="graph specs to mix")
    p.add_argument("--fresh", type=float, default=0.2,
                   help="the share of runs on a new context, closed after the run (0.2)")
    p.add_argument("--every", type=int, default=250, help="runs between checkpoints (250)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60.0, help="each context's timeout (60)")
    p.add_argument("--out", default=None, help="the JSON record (default $OUT/soak.json)")
    args = p.parse_args(argv)
    from groute.device import cuda_device_count
    gpus = cuda_device_count()
    backends = (["cuda", "cpu"] if gpus else ["cpu"]) if args.backends == "auto" \
        else args.backends.split(",")
    if "cuda" in backends and not gpus:
        p.error("--backends has cuda but CuPy finds no GPU")
    devices = [int(x) for x in args.devices.split(",")]
    apps = [a for a in args.apps.split(",") if a]
    bad = sorted(set(apps) - set(APPS))
    if bad:
        p.error(f"unknown apps {bad}: choose from {', '.join(APPS)}")
    graphs = args.graphs.split(",")
    from groute.config import logical_devices_requested
    pairs = kinds(backends, devices, gpus, logical_devices_requested())
    rng = np.random.default_rng(args.seed)
    answers = Answers()
    kept: dict = {}
    record = {"args": vars(args), "gpus": gpus, "kinds": pairs, "checkpoints": [],
              "failures": [], "runs": 0, "seconds": {}, "made": []}   # made: each run, in order
    out_path = args.out or (str(Path(os.environ["OUT"]) / "soak.json") if "OUT" in os.environ
                            else None)

    def context(backend, k, fresh):
        if fresh:
            return Context(k, backend=backend, timeout=args.timeout)
        if (backend, k) not in kept:
            kept[(backend, k)] = Context(k, backend=backend, timeout=args.timeout)
        return kept[(backend, k)]

    def one(app, backend, k, spec, fresh) -> None:
        g = answers.graph(spec)
        if app in ("fused_loop",) and backend != "cuda":
            app = "loop"
        ctx = context(backend, k, fresh)
        t0 = time.perf_counter()
        try:
            got = run_once(app, g, answers.source(spec), ctx)
            if not right(app, got, answers.want(app, spec)):
                record["failures"].append(f"{app} {backend} x{k} {spec}: wrong answer")
        except Exception as exc:  # noqa: BLE001 - counted, the soak goes on
            record["failures"].append(f"{app} {backend} x{k} {spec}: "
                                      f"{type(exc).__name__}: {exc}"[:500])
        finally:
            if fresh:
                ctx.close()
        key = f"{app} {backend} x{k}"
        record["seconds"].setdefault(key, []).append(time.perf_counter() - t0)

    def checkpoint(label):
        for ctx in kept.values():
            ctx.close()
        kept.clear()
        m = measure(gpus if "cuda" in backends else 0)
        m["after_runs"] = record["runs"]
        m["label"] = label
        record["checkpoints"].append(m)
        print(f"[{label}] runs {record['runs']}: " + ", ".join(
            f"{k} {v}" for k, v in m.items() if k not in ("label", "after_runs")), flush=True)
        if out_path:
            Path(out_path).write_text(json.dumps(record, indent=1))

    t_start = time.perf_counter()
    for app in apps:                      # warm-up: every kind on every graph once, and on
        for backend, k in pairs:          # a new context once
            for spec in graphs:
                one(app, backend, k, spec, fresh=False)
            one(app, backend, k, graphs[0], fresh=True)
    warm_failures = len(record["failures"])
    checkpoint("before")
    for i in range(args.runs):
        app = apps[int(rng.integers(len(apps)))]
        backend, k = pairs[int(rng.integers(len(pairs)))]
        spec = graphs[int(rng.integers(len(graphs)))]
        fresh = bool(rng.random() < args.fresh)
        one(app, backend, k, spec, fresh=fresh)
        record["made"].append(f"{app} {backend} x{k} {spec}{' new context' if fresh else ''}")
        record["runs"] += 1
        if (i + 1) % args.every == 0 and i + 1 < args.runs:
            checkpoint(f"run {i + 1}")
    checkpoint("after")
    # from the first checkpoint after the warm-up's (when there are three or more): the first
    # runs' one-time steps (a kernel first launched by a combination the warm-up did not make, a
    # new context's first allocations) are behind it, and a leak grows with every run after it
    checkpoints = record["checkpoints"]
    before = checkpoints[1] if len(checkpoints) > 2 else checkpoints[0]
    after = checkpoints[-1]
    verdicts = {}
    for name, allowed in ALLOWANCE.items():
        if name not in before:
            continue
        grown = after[name] - before[name]
        verdicts[name] = {"from": before["label"], "before": before[name], "after": after[name],
                          "grown": grown, "allowed": allowed, "leak": grown > allowed,
                          "since_warm_up": after[name] - checkpoints[0][name]}
    record["verdicts"] = verdicts
    record["total_s"] = time.perf_counter() - t_start
    record["median_s"] = {key: float(np.median(v)) for key, v in record["seconds"].items()}
    del record["seconds"]
    if out_path:
        Path(out_path).write_text(json.dumps(record, indent=1))
    for name, v in verdicts.items():
        print(f"{'LEAK' if v['leak'] else 'ok  '} {name}: {v['before']} at {v['from']} -> "
              f"{v['after']} (grown {v['grown']}, allowed {v['allowed']}; since the warm-up "
              f"{v['since_warm_up']})")
    print(f"{record['runs']} runs in {record['total_s']:.0f} s on {pairs}; "
          f"{len(record['failures'])} failures ({warm_failures} in the warm-up)")
    for f in record["failures"][:20]:
        print(f"FAIL {f}")
    return 1 if record["failures"] or any(v["leak"] for v in verdicts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
