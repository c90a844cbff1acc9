// The fused traversal worker (BFS / SSSP): one cooperative launch runs round after round.
//
// A round expands every vertex of the near queue (round % 2) into the next one: small-degree
// vertices by their own thread, medium ones by the whole warp, and vertices of more than
// WARP_EDGES arcs are cut into chunks that warps across the grid share after a grid barrier,
// so a hub does not stall anyone. Relaxing arc u->v with candidate value c:
//   v local:  atomicMin(dist[v], c); if it improved, v goes to the next near queue (once: the
//             in_near flag) when c < threshold, else to the far queue (deferred);
//   v remote: if c beats what this device already sent for v (sent_best), the item (v, c)
//             goes to the owner's outbox; if that outbox is full, u is re-queued and the
//             launch ends after the round so the host can flush (nothing is lost).
// One grid barrier per round: near counts rotate over three slots (read r%3, write (r+1)%3,
// zero (r+2)%3, which nobody touches in round r). When the near queue empties, a single
// device (self_advance) moves its threshold by delta and splits the far queue itself;
// otherwise the kernel returns and the host decides. The grid is sized to be fully resident.
#include "traversal.cuh"

#define WARP_EDGES 1024     // above this, a vertex's arcs are shared out in chunks
#define CHUNK 1024

struct Args {
    const long long* indptr; const int* indices; const weight_t* weights;
    int* dist; int* in_near; int* near0; int* near1;
    long long* far0; long long* far1; int far_cap;
    long long* outbox; int out_cap; int* sent_best;
    const long long* offsets; int k; int lo; int hi;
    long long* big_items; int* big_first_chunk;
    int* ctl; unsigned long long* counters;
};

__device__ __forceinline__ int owner_of(const long long* offsets, int k, int v) {
    int j = 0;
    while (j + 1 < k && v >= offsets[j + 1]) ++j;
    return j;
}

// in_near[u] holds the round u was last queued for: a vertex enters a round's queue once, and
// nothing has to be cleared (or fenced) when it is dequeued.
__device__ __forceinline__ void push_near(const Args& a, int* queue, int* count, int u, int round) {
    if (atomicExch(&a.in_near[u], round) != round) {
        int slot = aggregated_reserve(count);
        queue[slot] = u;                  // capacity n_local: each vertex is queued once
    }
}

__device__ __forceinline__ void push_far(const Args& a, long long* far, int* count, int u,
                                         int value, unsigned long long& deferrals) {
    int slot = aggregated_reserve(count);
    if (slot < a.far_cap) far[slot] = pack_item(u, value);
    else a.ctl[FAR_OVERFLOW] = 1;
    atomicMin(&a.ctl[FAR_MIN], value);
    ++deferrals;
}

// Offer value c to local vertex lv; queue it if it improved.
__device__ __forceinline__ void improve_local(const Args& a, int lv, int c, int thr,
                                              int* next, int* next_count, int round, long long* far,
                                              int* far_count, unsigned long long& deferrals) {
    if (c >= *(volatile int*)&a.dist[lv]) return;
    int old = atomicMin(&a.dist[lv], c);
    if (c >= old) return;
    if (c < thr) push_near(a, next, next_count, lv, round);
    else push_far(a, far, far_count, lv, c, deferrals);
}

// Relax arc e out of local vertex u (value d). Returns false if an outbox was full.
__device__ __forceinline__ bool relax(const Args& a, long long e, int d, int thr, int* next,
                                      int* next_count, int round, long long* far, int* far_count,
                                      unsigned long long& deferrals) {
    int v = a.indices[e];
#if WEIGHTS == 0
    int c = value_add(d, 1);
#else
    int c = value_add(d, a.weights[e]);
#endif
    if (v >= a.lo && v < a.hi) {
        improve_local(a, v - a.lo, c, thr, next, next_count, round, far, far_count, deferrals);
        return true;
    }
    if (c >= *(volatile int*)&a.sent_best[v]) return true;
    int old = atomicMin(&a.sent_best[v], c);
    if (c >= old) return true;
    int j = owner_of(a.offsets, a.k, v);
    int slot = aggregated_reserve(&a.ctl[OUT_COUNT + j]);
    if (slot < a.out_cap) {
        a.outbox[(long long)j * a.out_cap + slot] = pack_item(v, c);
        return true;
    }
    atomicCAS(&a.sent_best[v], c, old);   // not sent after all: let a retry send it again
    a.ctl[OUT_OVERFLOW] = 1;
    return false;
}

// A grid-wide barrier for a grid that is entirely resident (the host sizes it so, and launches
// it cooperatively when it can, which guarantees residency). The last block to arrive resets
// the count and then bumps the generation the others spin on; fences order the round's writes
// before the release and the reads after it.
//
// The last block to arrive also takes the decisions every block must agree on (decide != 0):
// whether to stop after this round (an outbox overflowed or holds `flush` items) and, with
// decide == 2, a snapshot of the big-vertex list (which the next round starts refilling). The
// blocks read them after the barrier; nobody writes them again before the next barrier, so all
// blocks see the same values even though fast blocks may already be pushing new work.
__device__ __forceinline__ void grid_sync(const Args& a, int decide = 0, int flush = 0) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile int* gen = &a.ctl[BARRIER_GEN];
        int seen = *gen;
        __threadfence();
        if (atomicAdd(&a.ctl[BARRIER_COUNT], 1) == (int)gridDim.x - 1) {
            __threadfence();
            if (decide) {
                if (decide == 2) {
                    unsigned long long reserve = atomicExch(&a.counters[BIG_RESERVE], 0ull);
                    a.ctl[BIG_N] = (int)(reserve >> 40);
                    a.ctl[BIG_TOTAL] = (int)(reserve & ((1ull << 40) - 1));
                }
                int stop = *(volatile int*)&a.ctl[OUT_OVERFLOW];
                long long out = 0;
                for (int j = 0; j < a.k; ++j) out += *(volatile int*)&a.ctl[OUT_COUNT + j];
                a.ctl[STOP] = stop || (flush > 0 && out >= flush);
                __threadfence();
            }
            atomicExch(&a.ctl[BARRIER_COUNT], 0);
            __threadfence();
            atomicAdd(&a.ctl[BARRIER_GEN], 1);
        } else {
            while (*gen == seen) __nanosleep(20);
        }
        __threadfence();
    }
    __syncthreads();
}

__device__ __forceinline__ long long global_rank() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long global_size() { return (long long)gridDim.x * blockDim.x; }

__device__ void split_far(const Args& a, int& fc, int old_thr, int thr,
                          int* cur, int* cur_count, int round, unsigned long long& deferrals) {
    long long* far_cur = fc ? a.far1 : a.far0;
    long long* far_next = fc ? a.far0 : a.far1;
    int n = *(volatile int*)&a.ctl[FAR_COUNT + fc];
    int overflow = *(volatile int*)&a.ctl[FAR_OVERFLOW];
    int* next_count = &a.ctl[FAR_COUNT + (fc ^ 1)];
    grid_sync(a);                                   // everyone has read FAR_MIN and the counts
    if (global_rank() == 0) { a.ctl[FAR_MIN] = VALUE_INF; *next_count = 0; }
    grid_sync(a);
    long long tid = global_rank(), nthreads = global_size();
    if (!overflow) {
        for (long long i = tid; i < n; i += nthreads) {
            long long item = __ldcg(&far_cur[i]);
            int u = item_vertex(item), d = item_value(item);
            if (*(volatile int*)&a.dist[u] != d) continue;       // stale: improved since
            if (d < thr) push_near(a, cur, cur_count, u, round);
            else push_far(a, far_next, next_count, u, d, deferrals);
        }
    } else {
        // Some deferred items were not stored. Every vertex whose value is at least the old
        // threshold still has its latest improvement unprocessed: rebuild from the state.
        int n_local = a.hi - a.lo;
        for (long long u = tid; u < n_local; u += nthreads) {
            int d = *(volatile int*)&a.dist[u];
            if (d == VALUE_INF || d < old_thr) continue;
            if (d < thr) push_near(a, cur, cur_count, (int)u, round);
            else push_far(a, far_next, next_count, (int)u, d, deferrals);
        }
    }
    grid_sync(a);
    if (global_rank() == 0) {
        a.ctl[FAR_INDEX] = fc ^ 1;
        a.ctl[FAR_COUNT + fc] = 0;
        a.ctl[FAR_OVERFLOW] = 0;
    }
    fc ^= 1;
    grid_sync(a);
}

__device__ __forceinline__ int next_threshold(int thr, int far_min, int delta) {
    int base = thr > far_min ? thr : far_min;
#if VALUE_FLOAT
    return __float_as_int(__int_as_float(base) + __int_as_float(delta));
#else
    long long s = (long long)base + delta;
    return s >= (long long)INT_INF ? INT_INF : (int)s;
#endif
}

// op 0: advance (run rounds); op 1: split the far queue for threshold `thr`, then return.
extern "C" __global__ void __launch_bounds__(BLOCK)
traverse(const Args* __restrict__ pa, int thr, int delta, int self_advance, int max_rounds, int flush,
         int op) {
    const Args a = *pa;
    const long long tid = global_rank(), nthreads = global_size();
    const int lane = threadIdx.x & 31;
    const long long warp = tid >> 5, nwarps = nthreads >> 5;
    int r = *(volatile int*)&a.ctl[ROUND];
    int fc = *(volatile int*)&a.ctl[FAR_INDEX];
    unsigned long long processed = 0, edges = 0, deferrals = 0;
    int rounds = 0;

    if (op == 1) {
        int* cur = (r & 1) ? a.near1 : a.near0;
        int old_thr = *(volatile int*)&a.ctl[THRESHOLD];
        split_far(a, fc, old_thr, thr, cur, &a.ctl[NEAR_COUNT + r % 3], r, deferrals);
    }
    while (op == 0) {
        const int cur_n = *(volatile int*)&a.ctl[NEAR_COUNT + r % 3];
        int* cur = (r & 1) ? a.near1 : a.near0;
        if (cur_n == 0) {
            int far_n = *(volatile int*)&a.ctl[FAR_COUNT + fc];
            int far_over = *(volatile int*)&a.ctl[FAR_OVERFLOW];
            if ((far_n == 0 && !far_over) || !self_advance || thr == VALUE_INF) break;
            int new_thr = next_threshold(thr, *(volatile int*)&a.ctl[FAR_MIN], delta);
            split_far(a, fc, thr, new_thr, cur, &a.ctl[NEAR_COUNT + r % 3], r, deferrals);
            thr = new_thr;
            continue;
        }
        // STOP was decided at the barrier that ended the previous round (see grid_sync)
        if (rounds >= max_rounds || (rounds > 0 && *(volatile int*)&a.ctl[STOP])) break;
        int* next = (r & 1) ? a.near0 : a.near1;
        int* next_count = &a.ctl[NEAR_COUNT + (r + 1) % 3];
        long long* far = fc ? a.far1 : a.far0;
        int* far_count = &a.ctl[FAR_COUNT + fc];
        if (tid == 0) { a.ctl[NEAR_COUNT + (r + 2) % 3] = 0; }

        // expand the near queue: whole warps iterate together so they can cooperate
        for (long long base = warp * 32; base < cur_n; base += nwarps * 32) {
            long long i = base + lane;
            int u = -1, d = 0;
            long long start = 0, deg = 0;
            if (i < cur_n) {
                u = __ldcg(&cur[i]);        // written by other blocks last round: skip L1
                d = *(volatile int*)&a.dist[u];
                start = a.indptr[u];
                deg = a.indptr[u + 1] - start;
                ++processed;
                edges += deg;
            }
            bool retry = false;
            if (deg > WARP_EDGES) {                      // shared out after the barrier
                // one 64-bit atomic reserves the slot (high bits) and the chunks (low bits),
                // so first chunks increase with the slot and a chunk's vertex is found by
                // binary search
                unsigned long long chunks = (unsigned long long)((deg + CHUNK - 1) / CHUNK);
                unsigned long long old = atomicAdd(&a.counters[BIG_RESERVE], (1ull << 40) + chunks);
                int slot = (int)(old >> 40);
                a.big_items[slot] = pack_item(u, d);
                a.big_first_chunk[slot] = (int)(old & ((1ull << 40) - 1));
            }
            unsigned medium = __ballot_sync(0xffffffffu, deg > 32 && deg <= WARP_EDGES);
            while (medium) {
                int leader = __ffs(medium) - 1;
                medium &= medium - 1;
                long long s = __shfl_sync(0xffffffffu, start, leader);
                long long m = __shfl_sync(0xffffffffu, deg, leader);
                int dl = __shfl_sync(0xffffffffu, d, leader);
                bool ok = true;
                for (long long e = s + lane; e < s + m; e += 32)
                    ok &= relax(a, e, dl, thr, next, next_count, r + 1, far, far_count, deferrals);
                if (__any_sync(0xffffffffu, !ok) && lane == leader) retry = true;
            }
            if (deg > 0 && deg <= 32) {
                for (long long e = start; e < start + deg; ++e)
                    if (!relax(a, e, d, thr, next, next_count, r + 1, far, far_count, deferrals)) retry = true;
            }
            if (retry) push_near(a, next, next_count, u, r + 1);
        }
        grid_sync(a, 2, flush);
        const int big_n = *(volatile int*)&a.ctl[BIG_N];
        if (big_n > 0) {
            // big vertices: chunks of CHUNK arcs, one per warp, across the whole grid
            const long long total = *(volatile int*)&a.ctl[BIG_TOTAL];
            for (long long c = warp; c < total; c += nwarps) {
                int lo_s = 0, hi_s = big_n - 1;          // last slot whose first chunk <= c
                while (lo_s < hi_s) {
                    int mid = (lo_s + hi_s + 1) >> 1;
                    if (__ldcg(&a.big_first_chunk[mid]) <= c) lo_s = mid; else hi_s = mid - 1;
                }
                long long item = __ldcg(&a.big_items[lo_s]);
                int u = item_vertex(item), d = item_value(item);
                long long s0 = a.indptr[u], end = a.indptr[u + 1];
                long long first = s0 + (c - __ldcg(&a.big_first_chunk[lo_s])) * CHUNK;
                long long last = min(first + CHUNK, end);
                bool ok = true;
                for (long long e = first + lane; e < last; e += 32)
                    ok &= relax(a, e, d, thr, next, next_count, r + 1, far, far_count, deferrals);
                if (__any_sync(0xffffffffu, !ok) && lane == 0) push_near(a, next, next_count, u, r + 1);
            }
            grid_sync(a, 1, flush);
        }
        ++r;
        ++rounds;
    }
    // fold the per-thread counters: one atomic per warp
    for (int off = 16; off > 0; off >>= 1) {
        processed += __shfl_down_sync(0xffffffffu, processed, off);
        edges += __shfl_down_sync(0xffffffffu, edges, off);
        deferrals += __shfl_down_sync(0xffffffffu, deferrals, off);
    }
    if (lane == 0 && (processed | edges | deferrals)) {
        atomicAdd(&a.counters[PROCESSED], processed);
        atomicAdd(&a.counters[EDGES], edges);
        atomicAdd(&a.counters[DEFERRALS], deferrals);
    }
    if (tid == 0) {
        a.ctl[ROUND] = r;
        a.ctl[THRESHOLD] = thr;
        a.ctl[ROUNDS] = rounds;
        a.counters[TOTAL_ROUNDS] += rounds;
    }
}

// Apply items that arrived from other devices: keep the smaller value, queue what improved.
extern "C" __global__ void __launch_bounds__(BLOCK)
absorb(const Args* __restrict__ pa, const long long* items, int n, int thr) {
    const Args a = *pa;
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int r = a.ctl[ROUND];
    int fc = a.ctl[FAR_INDEX];
    int* cur = (r & 1) ? a.near1 : a.near0;
    long long* far = fc ? a.far1 : a.far0;
    unsigned long long deferrals = 0;
    for (long long i = tid; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long item = items[i];
        improve_local(a, item_vertex(item) - a.lo, item_value(item), thr, cur,
                      &a.ctl[NEAR_COUNT + r % 3], r, far, &a.ctl[FAR_COUNT + fc], deferrals);
    }
    if (deferrals) atomicAdd(&a.counters[DEFERRALS], deferrals);
}

// The host builds Args as a NumPy record; this lets it check the layout matches.
extern "C" __global__ void args_layout(long long* out) {
    out[0] = sizeof(Args);
    out[1] = offsetof(Args, far_cap);
    out[2] = offsetof(Args, k);
    out[3] = offsetof(Args, counters);
}
