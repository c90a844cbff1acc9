"""GPU probe: what the host spends launching one cooperative grid per device, and how late the
devices start after one another.

The per-phase traces of the persistent kernels (GROUTE_PR_TRACE=1, GROUTE_PEER_TRACE=1) showed
the second of two H200s starting 0.27-0.34 ms after the first, in BFS and PageRank alike: a
fixed cost per extra device that four GPUs would pay three times. This times, on the host:

- a trivial kernel launched plainly and cooperatively (``RawModule(enable_cooperative_groups=
  True)``), one device and alternating devices, with few and many arguments, and with the
  arguments packed once and only the driver's launch call left per launch;
- the launches of the persistent PageRank on a grid graph and of peer BFS on a Kronecker graph
  (every call of ``launch_resident`` timed, by device), with the kernels' own start stamps.

    python benchmarks/probes/gpu_launch_probe.py [--repeat 20] [--pr-graph grid:2450] [--bfs-graph kron:21] [--trivial-only]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))     # the tests' helpers (support.busiest)

from support import busiest  # noqa: E402

SOURCE = r"""
extern "C" __global__ void tiny(int* out, int a, int b, int c, int d, int e, int f, int g,
                                long long h, long long i, long long j, long long l) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c + d + e + f + g + (int)(h + i + j + l);
}
extern "C" __global__ void tiny1(int* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] += 1;
}
extern "C" __global__ void busy(long long ns) {
    long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long t = t0;
    while (t - t0 < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
}
"""


def us(samples):
    return f"median {statistics.median(samples) * 1e6:8.1f} us, min {min(samples) * 1e6:8.1f} us"


def trivial(repeat, ngpu):
    import cupy
    import numpy as np
    mods = {}
    for dev in range(ngpu):
        with cupy.cuda.Device(dev):
            for coop in (False, True):
                m = cupy.RawModule(code=SOURCE, enable_cooperative_groups=coop)
                mods[dev, coop] = (m.get_function("tiny"), m.get_function("tiny1"),
                                   cupy.zeros(1, np.int32))
    for coop in (False, True):
        for name, many in (("1 arg", False), ("12 args", True)):
            for devs in ([0], list(range(ngpu))):
                samples = []
                for r in range(repeat + 2):
                    for dev in devs:
                        with cupy.cuda.Device(dev):
                            cupy.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    for dev in devs:
                        with cupy.cuda.Device(dev):
                            f, f1, out = mods[dev, coop]
                            if many:
                                f((132,), (256,), (out, *(np.int32(x) for x in range(7)),
                                                   *(np.int64(x) for x in range(4))))
                            else:
                                f1((132,), (256,), (out,))
                    t1 = time.perf_counter()
                    if r >= 2:
                        samples.append((t1 - t0) / len(devs))
                print(f"trivial kernel, {'cooperative' if coop else 'plain      '}, {name:7s}, "
                      f"devices {devs}: per launch {us(samples)}", flush=True)
    prepacked(mods, repeat)
    # behind a kernel still running on the same stream (a busy wait of 200 us)
    for coop in (False, True):
        f, f1, out = mods[0, coop]
        busy = cupy.RawModule(code=SOURCE).get_function("busy")
        samples = []
        with cupy.cuda.Device(0):
            for r in range(repeat + 2):
                cupy.cuda.Device().synchronize()
                busy((1,), (32,), (np.int64(200_000),))
                t0 = time.perf_counter()
                f1((132,), (256,), (out,))
                t1 = time.perf_counter()
                if r >= 2:
                    samples.append(t1 - t0)
        print(f"trivial kernel, {'cooperative' if coop else 'plain      '}, behind a running "
              f"kernel: launch {us(samples)}", flush=True)


def prepacked(mods, repeat):
    """The same 12-argument launch, with CuPy's argument marshalling skipped: the argument
    array packed once (ctypes), then ``cupy.cuda.driver.launchCooperativeKernel`` (and the
    plain ``launchKernel``) per launch: what a launch costs the host when only the driver call
    is left; and the same through :func:`groute.kernel_launch.launch_kernel` with a
    ``KernelArgs`` (its per-launch lookups included)."""
    import ctypes
    import cupy
    import numpy as np
    from cupy.cuda import driver
    from groute.kernel_launch import KernelArgs, launch_kernel
    for coop in (False, True):
        raw, _, out = mods[0, coop]
        values = ([ctypes.c_void_p(out.data.ptr)] + [ctypes.c_int32(x) for x in range(7)]
                  + [ctypes.c_int64(x) for x in range(4)])
        argv = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        params = ctypes.addressof(argv)
        packed = KernelArgs((out, *(np.int32(x) for x in range(7)),
                             *(np.int64(x) for x in range(4))))
        samples, ours = [], []
        with cupy.cuda.Device(0):
            f = raw.kernel              # the cupy.cuda.Function on device 0
            stream = cupy.cuda.get_current_stream().ptr
            for r in range(repeat + 2):
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                if coop:
                    driver.launchCooperativeKernel(f.ptr, 132, 1, 1, 256, 1, 1, 0, stream, params)
                else:
                    driver.launchKernel(f.ptr, 132, 1, 1, 256, 1, 1, 0, stream, params, 0)
                t1 = time.perf_counter()
                values[1].value = r     # a scalar changed in place, as a run's would be
                if r >= 2:
                    samples.append(t1 - t0)
            cupy.cuda.Device().synchronize()
            ok = int(out.get()[0]) == repeat + sum(range(1, 7)) + sum(range(4))
            for r in range(repeat + 2):
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                launch_kernel(raw, 132, 256, packed)
                t1 = time.perf_counter()
                packed.set(1, np.int32(r))
                if r >= 2:
                    ours.append(t1 - t0)
            cupy.cuda.Device().synchronize()
            ok = ok and int(out.get()[0]) == repeat + sum(range(1, 7)) + sum(range(4))
        kind = "cooperative" if coop else "plain      "
        print(f"trivial kernel, {kind}, 12 args, pre-packed driver call: per launch {us(samples)}; "
              f"launch_kernel(KernelArgs): {us(ours)} (answers {'right' if ok else 'WRONG'})",
              flush=True)


def timed_steps(cls_dev):
    """Host clock and CUDA events around PageRank's run steps: returns the list of
    (step, device name, host seconds, kernel events or None)."""
    import cupy
    steps = []

    def wrap(name, with_events=False):
        plain = getattr(cls_dev, name)

        def f(self, *a, **kw):
            t0 = time.perf_counter()
            ev = None
            if with_events:
                with self.device.use():
                    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
                    e0.record(self.device.compute_stream.raw)
            out = plain(self, *a, **kw)
            if with_events:
                with self.device.use():
                    e1.record(self.device.compute_stream.raw)
                ev = (e0, e1)
            steps.append((name, self.device.name, time.perf_counter() - t0, t0, ev))
            return out
        setattr(cls_dev, name, f)
    wrap("bsp_reset")
    wrap("persistent_launch", with_events=True)
    wrap("persistent_fetch")
    wrap("persistent_result")
    return steps


def report_launches(calls, what=""):
    """Print the launch_resident times recorded in ``calls``, by device, and clear them."""
    per_dev = {}
    for name, sec in calls:
        per_dev.setdefault(name, []).append(sec)
    for name, samples in per_dev.items():
        print(f"   {what}launch_resident on {name}: {us(samples)}", flush=True)
    calls.clear()


def launch_order(reverse: bool):
    """Make CrossDeviceBarrier.launch_each launch the last device first (or restore it)."""
    from groute.engines.peer_barrier import CrossDeviceBarrier
    plain = getattr(CrossDeviceBarrier, "_plain_launch_each", CrossDeviceBarrier.launch_each)
    CrossDeviceBarrier._plain_launch_each = plain
    if not reverse:
        CrossDeviceBarrier.launch_each = plain
        return

    def launch_each(self, launch, order=None):
        return plain(self, launch, order=reversed(range(len(self.devices))))
    CrossDeviceBarrier.launch_each = launch_each


def timed_launches():
    """Wrap launch_resident where the apps call it; returns the list of (device name, seconds)."""
    import groute.engines.peer_barrier as pb
    import groute.engines.relax.cuda_worker as tc
    import groute.engines.relax.linked as tl
    import groute.engines.relax.peer as tp
    calls = []
    plain = pb.launch_resident

    def launch_resident(fn, blocks, block, args, *, device, **kw):
        t0 = time.perf_counter()
        out = plain(fn, blocks, block, args, device=device, **kw)
        calls.append((device.name, time.perf_counter() - t0))
        return out
    for module in (pb, tp, tc, tl):      # each binds its own name
        module.launch_resident = launch_resident
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--pr-graph", default="grid:2450")
    ap.add_argument("--bfs-graph", default="kron:21")
    ap.add_argument("--devices", default=None,
                    help="device counts of the apps' runs (default: 1 and every GPU; more than "
                         "the GPUs with GROUTE_LOGICAL_DEVICES=1)")
    ap.add_argument("--trivial-only", action="store_true",
                    help="only the trivial kernels' launches, no app")
    args = ap.parse_args()
    import os
    os.environ["GROUTE_PR_TRACE"] = "1"
    os.environ["GROUTE_PEER_TRACE"] = "1"
    import cupy
    import numpy as np
    ngpu = cupy.cuda.runtime.getDeviceCount()
    trivial(args.repeat, ngpu)
    if args.trivial_only:
        return
    calls = timed_launches()
    from groute.engines.iterate.device import IterationDevice
    steps = timed_steps(IterationDevice)
    from groute.apps.bfs import BFS
    from groute.apps.pr import PageRank
    from groute.tuning import PageRankTuning
    from groute import Context
    from groute.graph import load_graph
    pr_graph, bfs_graph = load_graph(args.pr_graph), load_graph(args.bfs_graph)
    counts = ([int(x) for x in args.devices.split(",")] if args.devices
              else sorted({1, ngpu}))
    for k in counts:
        g = pr_graph
        with Context(k, backend="cuda") as ctx, PageRank(
                g, ctx=ctx, mode="bsp", partition="contiguous", weight=None,
                tol=1e-6 / g.num_vertices, max_iter=1000,
                tuning=PageRankTuning(persistent=True, trace=True)) as s:
            s.run()
            calls.clear()
            runs = [s.run() for _ in range(args.repeat)]
            tr = runs[-1].stats["iteration_trace"]
            print(f"PageRank persistent {args.pr_graph} x{k}: run {us([r.time_s for r in runs])}; "
                  f"kernels {tr['kernels_us']} us; starts after the first "
                  f"{[d['start_after_first'] for d in tr['per_device_us']]} us", flush=True)
            report_launches(calls)
            for _ in range(args.repeat):    # the runs alone, the answers not read back between
                s._run_bsp()
            report_launches(calls, "without the answers' read-back between runs: ")
            steps.clear()
            t_run = time.perf_counter()
            r = s.run()
            t_end = time.perf_counter()
            print(f"   one run, host timeline (us after run() began), timer {r.time_s * 1e6:.0f} us, "
                  f"run() {1e6 * (t_end - t_run):.0f} us:", flush=True)
            for name, dev, sec, t0, ev in steps:
                kern = ""
                if ev is not None:
                    ev[1].synchronize()
                    kern = f", kernel on the GPU (events) {cupy.cuda.get_elapsed_time(*ev) * 1e3:.0f} us"
                print(f"      {1e6 * (t0 - t_run):8.0f} {name:18s} {dev}: {sec * 1e6:7.1f} us{kern}",
                      flush=True)
        g = bfs_graph
        with Context(k, backend="cuda") as ctx, BFS(g, ctx=ctx, mode="bsp", exchange="peer",
                                                    partition="contiguous") as s:
            src = busiest(g)
            for order in ("in device order", "last device first"):
                reverse = order != "in device order"
                if reverse and k == 1:
                    continue
                launch_order(reverse)
                s.run(src)
                calls.clear()
                runs = [s.run(src) for _ in range(args.repeat)]
                trace = runs[-1].stats.get("level_trace_us")
                first = [rows[0] for rows in trace] if trace else None
                print(f"BFS peer {args.bfs_graph} x{k}, launched {order}: run "
                      f"{us([r.time_s for r in runs])}; level 0 [A, B, expand, C] per device "
                      f"{first}", flush=True)
                report_launches(calls)
            launch_order(False)
            new_src = s.part.to_new_id(src)
            for _ in range(args.repeat):    # the kernels alone, the answers not read back between
                s.peer.run(new_src)
            report_launches(calls, "without the answers' read-back between runs: ")


if __name__ == "__main__":
    main()
