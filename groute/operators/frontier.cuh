// The frontier of a device, in the two forms the kernels use:
//   sparse: a queue of vertex ids (int array) with its count in device memory, appended to with
//           warp-aggregated reservations (appends.cuh);
//   dense:  a bitmap, one bit per vertex (unsigned int words).
// queue_to_bitmap converts a queue into a bitmap (values_to_bitmap: the vertices of one value);
// the scans that turn bits back into a queue decide per bit what to keep, so they belong to the
// kernels that own the bitmap.
#pragma once
#include "appends.cuh"

// Append v to the queue (any order; capacity is the caller's).
__device__ __forceinline__ void queue_push(int* queue, int* count, int v) {
    queue[aggregated_reserve(count)] = v;
}

// Append u unless it is already in this round's queue: marks[u] holds the round u was last
// queued for, so nothing has to be cleared (or fenced) when it is dequeued.
__device__ __forceinline__ void queue_push_once(int* marks, int* queue, int* count, int u,
                                                int round) {
    if (atomicExch(&marks[u], round) != round) {
        int slot = aggregated_reserve(count);
        queue[slot] = u;                  // capacity n_local: each vertex once per round
    }
}

__device__ __forceinline__ unsigned int bit_of(int i) { return 1u << (i & 31); }

// Whether bit i is set (an L2 read: other blocks set bits concurrently).
__device__ __forceinline__ bool bitmap_test(const unsigned int* words, int i) {
    return (__ldcg(&words[i >> 5]) >> (i & 31)) & 1u;
}

// Set bit i (the result is unused, so it compiles to a reduction).
__device__ __forceinline__ void bitmap_set(unsigned int* words, int i) {
    atomicOr(&words[i >> 5], bit_of(i));
}

// Set bit i; true when this thread set it first (a plain read filters most repeats).
__device__ __forceinline__ bool bitmap_claim(unsigned int* words, int i) {
    unsigned int* w = &words[i >> 5];
    const unsigned int bit = bit_of(i);
    if (__ldcg(w) & bit) return false;
    return !(atomicOr(w, bit) & bit);
}

// The bitmap of the first n vertices whose value is `value`, every word written (no clearing
// first, no atomics): a warp reads 32 x 32 values coalesced, one ballot per word, lane j keeping
// word j, then stores its 32 words at once. Where a queue holds a sizeable share of the vertices
// whose values tell them apart (a BFS frontier: depth L), this reads n values in order instead
// of an atomic per queued vertex at a random word.
__device__ __forceinline__ void values_to_bitmap(const int* values, int value, long long n,
                                                 unsigned int* words, long long warp,
                                                 long long nwarps, int lane) {
    const long long nwords = (n + 31) >> 5;
    for (long long base = warp * 32; base < nwords; base += nwarps * 32) {
        unsigned int mine = 0;
#pragma unroll 8
        for (int j = 0; j < 32; ++j) {
            const long long v = ((base + j) << 5) + lane;
            const bool hit = v < n && __ldcg(&values[v]) == value;
            const unsigned int bits = __ballot_sync(0xffffffffu, hit);
            if (lane == j) mine = bits;
        }
        if (base + lane < nwords) words[base + lane] = mine;
    }
}

// Set the bit of every vertex of the queue (threads tid, tid + nthreads, ...).
__device__ __forceinline__ void queue_to_bitmap(const int* queue, long long n, unsigned int* words,
                                                long long tid, long long nthreads) {
    for (long long i = tid; i < n; i += nthreads) {
        bitmap_set(words, __ldcg(&queue[i]));
    }
}
