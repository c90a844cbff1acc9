// Barriers of the persistent kernels that loop inside one launch per device: a grid-wide
// barrier for a resident grid (and its reset at exit: grid_exit) and a cross-device barrier in
// device 0's memory with a timeout. Every persistent kernel (traversal, PageRank) meets this way.
#pragma once
#include "peer_memory.cuh"

// A grid-wide barrier for a resident grid (the host sizes it so and launches it cooperatively
// when it can, which guarantees residency). Arrivals only ever increase: barrier number b of a
// launch completes when the count reaches b * gridDim.x, so nobody has to reset anything
// between barriers. The count wraps past 2^32 arrivals (about 4M barriers of a 1,000-block
// grid: a fused loop of that many levels, a chain's BFS), so the wait compares the signed
// distance to the target, not the two values (count < target passes at once after a wrap).
//
// BARRIER 1 (default): as cooperative_groups' grid sync on sm_70+: the arrival is an acq_rel
// atomic and the wait polls with ld.acquire, no full fences. Release is cumulative, so the
// writes of the whole block (ordered before thread 0 by __syncthreads) are visible to every
// block whose acquire sees the arrival; the last block to arrive sees the count complete in
// its own atomic's return and does not poll at all. BARRIER 0: fence, relaxed atomic, volatile
// polling with back-off, fence (kept to compare).
#ifndef BARRIER
#define BARRIER 1
#endif
#ifndef SPIN_NS
#define SPIN_NS 0           // __nanosleep between polls (BARRIER 1); 0: none
#endif
__device__ __forceinline__ unsigned int atom_add_acq_rel(unsigned int* p, unsigned int v) {
    unsigned int old;
    asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void grid_barrier(unsigned int* count, unsigned int& target) {
    target += gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0) {
#if BARRIER == 1
        if (atom_add_acq_rel(count, 1u) + 1u != target) {
            while ((int)(ld_acquire(count) - target) < 0) {     // wrap-safe: see above
#if SPIN_NS > 0
                __nanosleep(SPIN_NS);
#endif
            }
        }
#else
        __threadfence();
        atomicAdd(count, 1u);
        while ((int)(*(volatile unsigned int*)count - target) < 0) __nanosleep(16);
        __threadfence();
#endif
    }
    __syncthreads();
}

// The exit of a kernel that meets at grid_barrier on `bar_word`: every block calls it once,
// after its last barrier, and the last block to leave (counted in `exit_word`) zeroes both
// words, so the next launch of the same grid starts its barrier count from 0 again. The fence
// orders the block's writes before its exit arrival.
__device__ __forceinline__ void grid_exit(int* bar_word, int* exit_word) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(exit_word, 1) == (int)gridDim.x - 1) {
            *bar_word = 0;
            *exit_word = 0;
        }
    }
}


// The cross-device part of a barrier of k devices, for one thread per device (thread 0 of
// block 0, after a grid barrier, so the release below carries the whole grid's writes:
// release is cumulative). `gbar` (device 0's memory) only ever grows: the host passes where
// it stands when the launch starts and `gtarget` follows it, k arrivals per barrier, so
// nothing is reset between barriers or launches. The acquired writes of the other devices
// reach this device's other blocks through a grid barrier after the call. Returns false when
// the others did not all arrive within timeout_ns (a device stopped or never started): the
// caller sets its abort flag, leaves, and the host raises.
__device__ __forceinline__ bool cross_device_wait(unsigned long long* gbar,
                                                  unsigned long long& gtarget, int k,
                                                  long long timeout_ns) {
    gtarget += k;
    red_add_release_sys(gbar, 1ull);
    const unsigned long long t0 = global_timer();
    while (ld_acquire_sys(gbar) < gtarget) {
        if (global_timer() - t0 > (unsigned long long)timeout_ns) return false;
    }
    return true;
}
