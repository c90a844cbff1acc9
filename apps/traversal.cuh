// Shared pieces of the traversal kernels (BFS and SSSP): values, items, queues.
//
// Values are stored as int bit patterns: int32 depths/distances, or the bits of a non-negative
// float32 distance. Non-negative floats order like their bits, so every comparison and every
// atomicMin works on the int; only adding a weight differs (VALUE_FLOAT).
// Items are packed int64: (value bits << 32) | vertex, as groute/worklist/items.py.
#pragma once
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#ifndef VALUE_FLOAT
#define VALUE_FLOAT 0
#endif
#ifndef WEIGHTS          // 0: none (+1 per arc), 1: int32 weights, 2: float32 weights
#define WEIGHTS 0
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

#if WEIGHTS == 2
typedef float weight_t;
#else
typedef int weight_t;
#endif

#define INT_INF 0x7fffffff
#define FLOAT_INF_BITS 0x7f800000
#if VALUE_FLOAT
#define VALUE_INF FLOAT_INF_BITS
#else
#define VALUE_INF INT_INF
#endif

__device__ __forceinline__ int value_add(int d, weight_t w) {
#if VALUE_FLOAT
    return __float_as_int(__int_as_float(d) + (float)w);
#else
    long long s = (long long)d + (long long)w;
    return s >= (long long)INT_INF ? INT_INF - 1 : (int)s;   // saturate below "unreached"
#endif
}

__device__ __forceinline__ long long pack_item(int vertex, int value) {
    return ((long long)value << 32) | (unsigned int)vertex;
}
__device__ __forceinline__ int item_vertex(long long item) { return (int)(item & 0xffffffffLL); }
__device__ __forceinline__ int item_value(long long item) { return (int)(item >> 32); }

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

// The soft-priority threshold after the near work ran out: delta beyond the larger of the
// old threshold and the least deferred value (saturating at "unreached" for ints).
__device__ __forceinline__ int next_threshold(int thr, int far_min, int delta) {
    int base = thr > far_min ? thr : far_min;
#if VALUE_FLOAT
    return __float_as_int(__int_as_float(base) + __int_as_float(delta));
#else
    long long s = (long long)base + delta;
    return s >= (long long)INT_INF ? INT_INF : (int)s;
#endif
}

// Direction optimisation (Beamer; the constants of GAP's BFS): pull once the frontier's arcs
// outnumber 1/PULL_ALPHA of the arcs not yet explored, push again once the frontier holds less
// than 1/PULL_BETA of the vertices.
#define PULL_ALPHA 15
#define PULL_BETA 24

// Big vertices (more than WARP_EDGES arcs) are cut into CHUNK-arc chunks that warps across the
// grid share after a barrier. One 64-bit atomic on `reserve` takes the vertex's slot (high
// bits) and its chunks (low 40 bits), so first chunks increase with the slot and a chunk finds
// its vertex by binary search (big_slot_of). Returns the slot; the caller stores its vertex.
#define WARP_EDGES 1024
#define CHUNK 1024
__device__ __forceinline__ int reserve_big(unsigned long long* reserve, long long deg,
                                           int* first_chunk) {
    const unsigned long long chunks = (unsigned long long)((deg + CHUNK - 1) / CHUNK);
    const unsigned long long old = atomicAdd(reserve, (1ull << 40) + chunks);
    const int slot = (int)(old >> 40);
    first_chunk[slot] = (int)(old & ((1ull << 40) - 1));
    return slot;
}
// The reservation's totals (read after the barrier): big vertices, chunks.
__device__ __forceinline__ int big_count(unsigned long long reserve) { return (int)(reserve >> 40); }
__device__ __forceinline__ long long big_chunks(unsigned long long reserve) {
    return (long long)(reserve & ((1ull << 40) - 1));
}
// The slot of chunk c: the last of the big_n slots whose first chunk is <= c.
__device__ __forceinline__ int big_slot_of(const int* first_chunk, int big_n, long long c) {
    int lo = 0, hi = big_n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (__ldcg(&first_chunk[mid]) <= c) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// The grid-wide barrier (grid_barrier) is shared with the PageRank kernels: peer_sync.cuh.
#include "peer_sync.cuh"

// The control block: counts and flags in device memory, read back by the host after a launch.
// Slots a round writes and all blocks must later read alike come in threes, indexed by
// round % 3: written in round r, read after round r's barrier, zeroed during round r + 2.
enum Ctl {
    NEAR_COUNT = 0,     // 3 slots
    ROUND = 3,          // current round: near queue (round % 2), count slot (round % 3)
    FAR_COUNT = 4,      // 2 slots, indexed by the far buffer in use
    FAR_INDEX = 6,
    FAR_MIN = 7,        // lower bound of deferred values (atomicMin on every far push)
    FAR_OVERFLOW = 8,   // 2 slots: a push found that far buffer full; its split scans the state
    THRESHOLD = 10,     // threshold when the kernel returned (it may advance it itself)
    ROUNDS = 11,        // rounds run by the last launch
    EXIT_REASON = 12,   // 0: done or stopped, 1: the frontier wants the other grid shape
    BARRIER_COUNT = 13, // monotonic arrivals (zeroed by the last block to leave)
    EXIT_COUNT = 14,
    PULLING = 15,       // BFS: the last launch ended in pull mode
    OUT_ROUND = 16,     // 3 slots: items put in outboxes this round
    OUT_ROUND_OVERFLOW = 19, // 3 slots: an outbox was full this round
    OUT_COUNT = 24,     // one slot per destination device (cumulative fill of its outbox)
    CTL_SIZE = 64
};
enum Counter { PROCESSED = 0, EDGES = 1, DEFERRALS = 2, TOTAL_ROUNDS = 3,
               BIG_RESERVE = 4,   // 3 slots: (big vertices << 40) | chunks, per round % 3
               FRONT_ARCS = 7,    // 3 slots, per round % 3: arcs of the round's frontier
               EXPLORED_ARCS = 10, // arcs of the frontiers push rounds expanded (carried over)
               PULL_ROUNDS = 11,
               COUNTERS = 12 };
