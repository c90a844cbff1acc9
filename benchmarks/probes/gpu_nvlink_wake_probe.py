"""Does the first NVLink traffic of a kernel pay a wake-up? (Two CUDA GPUs; run by hand.)

The peer BFS on kron:25 over two H200s spends 110-150 us in its first cross-device barrier and
about 100 us more on the hub's level than one GPU, whether the level's offers go as scattered
reductions or as one 2 MB coalesced store; a 2 MB store of a later level takes under 20 us. This
probe times, inside one kernel on device 1 (global timer, thread 0 of block 0, grid barriers
between phases), a remote load of a word on device 0, a second one, a 2 MB coalesced store into
device 0 and a second such store, after the host has left the GPUs idle for 0 to 100 ms:
if only the first of each pair is slow and the gap matters, the link wakes up. Then, after
100 ms of idleness, a peer copy (cudaMemcpyPeerAsync, 8 B to 16 MB, on a side stream) some
microseconds before the launch: what wakes the link, and how much lead it needs.

    python benchmarks/probes/gpu_nvlink_wake_probe.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

SOURCE = r"""
__device__ unsigned int bar_count;
__device__ __forceinline__ unsigned long long now() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ void grid_sync(unsigned int& target) {
    target += gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(&bar_count, 1u);
        while (*(volatile unsigned int*)&bar_count < target) {}
        __threadfence();
    }
    __syncthreads();
}
__device__ __forceinline__ unsigned long long ld_sys(const unsigned long long* p) {
    unsigned long long v; asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
extern "C" __global__ void probe(unsigned long long* remote_word, unsigned int* remote_buf,
                                 long long words, unsigned long long* stamps, unsigned int base) {
    unsigned int target = base;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nthreads = (long long)gridDim.x * blockDim.x;
    const bool t0 = tid == 0;
    unsigned long long sink = 0;
    grid_sync(target);
    if (t0) stamps[0] = now();
    if (t0) sink += ld_sys(remote_word);
    grid_sync(target);
    if (t0) stamps[1] = now();
    if (t0) sink += ld_sys(remote_word);
    grid_sync(target);
    if (t0) stamps[2] = now();
    for (long long w = tid; w < words; w += nthreads) remote_buf[w] = (unsigned int)w;
    __threadfence_system();
    grid_sync(target);
    if (t0) stamps[3] = now();
    for (long long w = tid; w < words; w += nthreads) remote_buf[w] = (unsigned int)(w + 1);
    __threadfence_system();
    grid_sync(target);
    if (t0) { stamps[4] = now(); stamps[5] = sink; }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 2:
        raise SystemExit("needs two CUDA GPUs")
    with cupy.cuda.Device(0):
        cupy.cuda.runtime.deviceEnablePeerAccess(1)
        word = cupy.zeros(1, np.uint64)
        buf = cupy.zeros(1 << 19, np.uint32)        # 2 MB
    with cupy.cuda.Device(1):
        cupy.cuda.runtime.deviceEnablePeerAccess(0)
        fn = cupy.RawModule(code=SOURCE).get_function("probe")
        stamps = cupy.zeros(8, np.uint64)
        blocks = 132 * 2
        launches = 0
        wake_src = cupy.zeros(1 << 22, np.uint32)      # 16 MB
    with cupy.cuda.Device(0):
        wake_dst = cupy.zeros(1 << 22, np.uint32)
    with cupy.cuda.Device(1):
        side = cupy.cuda.Stream(non_blocking=True)     # the wake copy must not hold the kernel
        print("idle ms | wake bytes | lead us | first remote load | second | first 2 MB store | second  (us)")
        cases = [(0, 0, None), (1, 0, None), (10, 0, None), (20, 0, None), (50, 0, None),
                 (100, 0, None)]
        cases += [(100, size, lead) for size in (8, 1 << 16, 1 << 21, 1 << 24) for lead in (0, 100, 300)]
        for idle_ms, size, lead in cases:
            rows = []
            for _ in range(args.repeat):
                time.sleep(idle_ms / 1e3)
                if lead is not None:            # wake the link: a peer copy, then wait
                    t_wake = time.perf_counter()
                    cupy.cuda.runtime.memcpyPeerAsync(wake_dst.data.ptr, 0, wake_src.data.ptr, 1,
                                                      size, side.ptr)
                    while time.perf_counter() - t_wake < lead / 1e6:
                        pass
                fn((blocks,), (256,), (word, buf, np.int64(buf.size), stamps,
                                       np.uint32(launches * blocks * 5)))
                launches += 1
                cupy.cuda.runtime.deviceSynchronize()
                t = stamps.get().astype(np.int64)
                rows.append(np.diff(t[:5]) / 1e3)
            med = np.median(np.array(rows), axis=0)
            print(f"{idle_ms:7} | {size:10} | {'-' if lead is None else lead:>7} | "
                  + " | ".join(f"{v:8.1f}" for v in med), flush=True)


if __name__ == "__main__":
    main()
