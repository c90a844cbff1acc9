// Warp-aggregated appends: reserve queue slots with one atomic per group of threads instead of
// one per thread.
#pragma once
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// One atomic per group of threads that arrive together (warp-aggregated append).
__device__ __forceinline__ int aggregated_reserve(int* counter) {
    cg::coalesced_group g = cg::coalesced_threads();
    int base = 0;
    if (g.thread_rank() == 0) base = atomicAdd(counter, (int)g.size());
    return g.shfl(base, 0) + (int)g.thread_rank();
}

// The same, for threads that may be filling different counters (one per destination device):
// threads are grouped by `label` first, so each group reserves in its own counter. Also counts
// the reservations in `also` (this round's total) unless it is null.
__device__ __forceinline__ int aggregated_reserve_labeled(int* counters, int label,
                                                          int* also = nullptr) {
    cg::coalesced_group g = cg::coalesced_threads();
    cg::coalesced_group same = cg::labeled_partition(g, label);
    int base = 0;
    if (same.thread_rank() == 0) {
        base = atomicAdd(&counters[label], (int)same.size());
        if (also != nullptr) atomicAdd(also, (int)same.size());
    }
    return same.shfl(base, 0) + (int)same.thread_rank();
}

// Reserve `n` consecutive slots per lane in a queue with one atomic per warp (inclusive scan of
// the counts); every lane of the warp must call it.
__device__ __forceinline__ int warp_reserve(int* counter, int n, int lane) {
    int incl = n;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += t;
    }
    int total = __shfl_sync(0xffffffffu, incl, 31);
    int base = 0;
    if (total > 0) {
        if (lane == 31) base = atomicAdd(counter, total);
        base = __shfl_sync(0xffffffffu, base, 31);
    }
    return base + incl - n;
}
