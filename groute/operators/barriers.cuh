// The grid-wide barrier of the persistent kernels that loop inside one launch per device, for a
// resident grid, and its reset at exit (grid_exit). Where devices meet each other:
// persistent.cuh.
#pragma once

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

