"""GPU probe: what one grid-wide barrier of groute/operators/barriers.cuh costs on a resident grid.

The persistent kernels (peer BFS/SSSP, persistent PageRank) pass two grid barriers per
iteration; on grid:4900 PageRank spends ~27 us per iteration outside its sweep on one GPU.
This times ``grid_barrier`` alone in a loop (no work between barriers) for several grid shapes
and polling back-offs (``SPIN_NS``), and the persistent PageRank's per-iteration protocol
(barrier, leader's cross-device wait and stopping rule, barrier, broadcast read) next to a
one-barrier broadcast variant, so the cost can be attributed before changing the kernels.

    python benchmarks/probes/gpu_barrier_probe.py [--iters 2000] [--headers DIR ...]

``--headers``: folders holding another checkout's ``persistent.cuh`` and ``barriers.cuh`` (from
``git show REV:groute/operators/...``; the first includes the second from its own folder),
each timed in the same run after the checkout's own, so a change to the barrier or the meeting
is measured before and after on one machine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SOURCE = r"""
#include "persistent.cuh"
// n_bar barriers in a row, nothing between them
extern "C" __global__ void bar_loop(int n_bar, unsigned int* count) {
    unsigned int target = 0;
    for (int i = 0; i < n_bar; ++i) grid_barrier(count, target);
}
// the persistent PageRank's protocol per iteration, without the sweep: barrier; leader:
// cross-device wait (k devices) and a read of every device's stats; barrier; all read stop
extern "C" __global__ void two_bar_protocol(int iters, unsigned int* count, int* stop,
                                            unsigned long long* gbar, unsigned long long gbase,
                                            int k, const double* stats) {
    unsigned int target = 0;
    unsigned long long gtarget = gbase;
    const bool leader = blockIdx.x == 0 && threadIdx.x == 0;
    for (int t = 0; t < iters; ++t) {
        grid_barrier(count, target);
        if (leader) {
            cross_device_wait(gbar, gtarget, k, 1000000000ll);
            *stop = __ldcv(stats + t) < 0.0;    // never true: the rule's read, not its outcome
        }
        grid_barrier(count, target);
        if (__ldcg(stop)) break;
    }
}
// one barrier per iteration: every block arrives; block 0 waits for all, does the leader's
// part and publishes the iteration number (release); the others wait for it (acquire)
extern "C" __global__ void one_bar_protocol(int iters, unsigned int* count, unsigned int* go,
                                            unsigned long long* gbar, unsigned long long gbase,
                                            int k, const double* stats, int* stop) {
    unsigned int target = 0;
    unsigned long long gtarget = gbase;
    for (int t = 0; t < iters; ++t) {
        target += gridDim.x;
        __syncthreads();
        if (threadIdx.x == 0) {
            const unsigned int arrived = atom_add_acq_rel(count, 1u) + 1u;
            if (blockIdx.x == 0) {
                if (arrived != target) while (ld_acquire(count) < target) { }
                cross_device_wait(gbar, gtarget, k, 1000000000ll);
                *stop = __ldcv(stats + t) < 0.0;
                asm volatile("st.release.gpu.u32 [%0], %1;" :: "l"(go), "r"((unsigned)t + 1u) : "memory");
            } else {
                while (ld_acquire(go) < (unsigned)t + 1u) {
#if SPIN_NS > 0
                    __nanosleep(SPIN_NS);
#endif
                }
            }
        }
        __syncthreads();
        if (__ldcg(stop)) break;
    }
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--headers", nargs="*", default=[],
                    help="folders with another persistent.cuh and barriers.cuh, timed after "
                         "the checkout's own")
    ap.add_argument("--spins", default="0,32,128", help="SPIN_NS values, comma separated")
    args = ap.parse_args()
    import cupy
    import numpy as np
    from groute.kernels import resident_blocks_per_sm
    inc = ROOT / "groute" / "operators"
    sms = cupy.cuda.Device(0).attributes["MultiProcessorCount"]
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}: {sms} SMs", flush=True)

    def module(spin, first):
        # the first folder wins the search for persistent.cuh (and so its barriers.cuh); the
        # rest come from the checkout
        return cupy.RawModule(code=SOURCE, options=("-std=c++17", f"-I{first}", f"-I{inc}",
                                                    f"-DSPIN_NS={spin}"),
                              enable_cooperative_groups=True)

    def timed(fn, grid, block, args_of, reps=3):
        best = float("inf")
        for _ in range(reps):
            a = args_of()
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn((grid,), (block,), a)
            stop.record()
            stop.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, stop) * 1e3 / args.iters)
        return best

    stats = cupy.ones(args.iters + 1, np.float64)
    for first, spin in [(h, int(sp)) for h in [str(inc), *args.headers]
                        for sp in args.spins.split(",")]:
        print(f"persistent.cuh and barriers.cuh from {first}", flush=True)
        m = module(spin, first)
        loop, two, one = (m.get_function(n) for n in ("bar_loop", "two_bar_protocol", "one_bar_protocol"))
        for block in (256, 512, 1024):
            per_sm = resident_blocks_per_sm(loop, block, 0)
            for grid in sorted({sms, sms * per_sm // 2, sms * per_sm} - {0}):
                count = cupy.zeros(1, np.uint32)
                us_bar = timed(loop, grid, block, lambda: (np.int32(args.iters), count.fill(0) or count))
                gbar = cupy.zeros(1, np.uint64)
                stop = cupy.zeros(1, np.int32)
                go = cupy.zeros(1, np.uint32)

                def two_args():
                    count.fill(0)
                    return (np.int32(args.iters), count, stop, gbar, np.uint64(int(gbar.get()[0])),
                            np.int32(1), stats)

                def one_args():
                    count.fill(0)
                    go.fill(0)
                    return (np.int32(args.iters), count, go, gbar, np.uint64(int(gbar.get()[0])),
                            np.int32(1), stats, stop)
                us_two = timed(two, grid, block, two_args)
                us_one = timed(one, grid, block, one_args)
                print(f"SPIN_NS={spin:<4} block {block:<5} grid {grid:<5}: barrier {us_bar:6.2f} us; "
                      f"per iteration: two barriers + leader {us_two:6.2f} us, "
                      f"one barrier + broadcast {us_one:6.2f} us", flush=True)


if __name__ == "__main__":
    main()
