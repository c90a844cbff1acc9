// The fused relaxation worker (BFS, SSSP, any Relaxation): one launch runs round after round
// on the GPU.
//
// A round expands every vertex of the near queue (round % 2) into the next one: small-degree
// vertices by their own thread (arcs in batches whose loads and atomics are issued together:
// relax_small), medium ones by the whole warp, and vertices of more than
// WARP_EDGES arcs are cut into chunks that warps across the grid share after a grid barrier,
// so a hub does not stall anyone: the advance operator (groute/operators/advance.cuh) over the
// RelaxArcs functor below. Relaxing arc u->v with candidate value c:
//   v local:  atomicMin(dist[v], c); if it improved, v goes to the next near queue (once per
//             round: in_near marks the round it was queued for) when c < threshold, else to the
//             far queue (deferred: soft priority);
//   v remote: if c beats what this device already sent for v (sent_best: vertex refinement),
//             the item (v, c) goes to the owner's outbox; if that outbox is full, u is
//             re-queued and the launch ends after the round so the host can flush (no loss).
// Rounds are separated by a grid barrier (the grid is sized to be resident). Everything the
// blocks must agree on is read after a barrier from slots nobody writes until two rounds later
// (see fused.cuh), so one barrier per round suffices. When the near queue empties, a single
// device (self_advance) moves its threshold by delta and splits the far queue itself;
// otherwise the kernel returns and the host decides. The kernel also returns when the frontier
// crosses the size at which the other grid shape (narrow: one block per SM, cheap barriers for
// road-like graphs; wide: every resident block, for big frontiers) pays, and the host relaunches.
#include "fused.cuh"
#ifndef LINKED
#define LINKED 0        // 1: compiled into linked.cu (which defines Links, linked_send)
#endif


struct Args {
    const long long* indptr; const int* indices; const weight_t* weights;
    int* dist; int* in_near; int* near0; int* near1;
    long long* far0; long long* far1; int far_cap;
    long long* outbox; int out_cap; int* sent_best;
    const long long* offsets; int k; int lo; int hi;
    long long* big_items; int* big_first_chunk;
    int* ctl; unsigned long long* counters;
    const unsigned char* front;   // several devices, BSP pull: 1 per vertex (global new id) of
                                  // the level being pulled from, all devices' vertices
};

// Where one round's output goes.
struct Sink {
    int* next; int* next_count; int marker;     // near queue being filled, its round
    long long* far; int* far_count; int* far_overflow;
    int* out_round; int* out_overflow;          // this round's outbox slots (round % 3)
    int thr;
    int ceiling;                                // ctl[CEILING]: improved from here, not queued
    bool filter;                                // read before the atomicMin (see improve_local)
    bool unique;                                // BFS on one device (see improve_local)
#if LINKED
    const Links* lk;                            // linked.cu: offers go to the
    int round;                                  // owners' rings directly (linked_send)
#endif
};

// Queue u for the round `round` unless it already is (in_near: queue_push_once).
__device__ __forceinline__ void push_near(const Args& a, int* queue, int* count, int u, int round) {
    queue_push_once(a.in_near, queue, count, u, round);
}

__device__ __forceinline__ void push_far(const Args& a, long long* far, int* count, int* overflow,
                                         int u, int value, unsigned long long& deferrals) {
    int slot = aggregated_reserve(count);
    if (slot < a.far_cap) far[slot] = pack_item(u, value);
    else *overflow = 1;
    atomicMin(&a.ctl[FAR_MIN], value);
    ++deferrals;
}

// Offer value c to local vertex lv; queue it if it improved.
__device__ __forceinline__ void improve_local(const Args& a, const Sink& q, int lv, int c,
                                              unsigned long long& deferrals) {
    // the plain read saves an atomic where most offers lose (big frontiers); on small ones
    // it is one more round trip on the critical path
    if (q.filter && c >= *(volatile int*)&a.dist[lv]) return;
    int old = atomicMin(&a.dist[lv], c);
    if (c >= old || c >= q.ceiling) return;
#if UNIT_STEP
    if (q.unique) {
        // BFS on one device: every offer of a round carries the same depth, so only the first
        // one improves and the vertex is queued once without the in_near exchange
        queue_push(q.next, q.next_count, lv);
        return;
    }
#endif
    if (c < q.thr) push_near(a, q.next, q.next_count, lv, q.marker);
    else push_far(a, q.far, q.far_count, q.far_overflow, lv, c, deferrals);
}

// Offer value c to remote vertex v: send it to the owner if it beats what was sent before.
// Returns false if the outbox was full.
__device__ __forceinline__ bool relax_remote(const Args& a, const Sink& q, int v, int c) {
    if (c >= *(volatile int*)&a.sent_best[v]) return true;
    int old = atomicMin(&a.sent_best[v], c);
    if (c >= old) return true;
    int j = owner_of(a.offsets, a.k, v);
#if LINKED
    if (linked_send(*q.lk, q.round, j, v, c)) return true;
    atomicCAS(&a.sent_best[v], c, old);   // the owner's ring is full: the retry sends it again
    return false;
#else
    int slot = aggregated_reserve_labeled(&a.ctl[OUT_COUNT], j, q.out_round);
    if (slot < a.out_cap) {
        a.outbox[(long long)j * a.out_cap + slot] = pack_item(v, c);
        return true;
    }
    atomicCAS(&a.sent_best[v], c, old);   // not sent after all: let the retry send it again
    *q.out_overflow = 1;
    return false;
#endif
}

// Relax arc e out of a local vertex with value d. Returns false if an outbox was full.
__device__ __forceinline__ bool relax(const Args& a, const Sink& q, long long e, int d,
                                      unsigned long long& deferrals) {
    int v = a.indices[e];
    int c = arc_value(d, a.weights, e);
    if (v >= a.lo && v < a.hi) {
        improve_local(a, q, v - a.lo, c, deferrals);
        return true;
    }
    return relax_remote(a, q, v, c);
}

#define BATCH_ARCS 4
// The arcs of small-degree vertices (deg <= 32, one per lane; deg 0 for lanes without one),
// BATCH_ARCS at a time per thread: the arc loads, then the atomics, then the queue appends are
// each issued back to back, so a vertex of degree 4 costs three dependent memory round trips
// where relax() one arc at a time costs two per arc plus one per improvement (on a road grid
// most of a level's latency). Every lane of the warp must call it. Returns false if
// an outbox was full (the caller re-queues the vertex).
__device__ __forceinline__ bool relax_small(const Args& a, const Sink& q, long long start, int deg,
                                            int d, int lane, unsigned long long& deferrals) {
    bool ok = true;
    int most = deg;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) most = max(most, __shfl_xor_sync(0xffffffffu, most, off));
    for (int j = 0; j < most; j += BATCH_ARCS) {
        int v[BATCH_ARCS], c[BATCH_ARCS], old[BATCH_ARCS];
        bool local[BATCH_ARCS], imp[BATCH_ARCS];
#pragma unroll
        for (int k = 0; k < BATCH_ARCS; ++k) {
            v[k] = -1;
            c[k] = VALUE_INF;
            if (j + k < deg) {
                long long e = start + j + k;
                v[k] = a.indices[e];
                c[k] = arc_value(d, a.weights, e);
            }
            local[k] = v[k] >= a.lo && v[k] < a.hi;
        }
        if (q.filter) {                  // plain reads first, all of them, then the atomics
            int seen[BATCH_ARCS];
#pragma unroll
            for (int k = 0; k < BATCH_ARCS; ++k)
                seen[k] = local[k] ? *(volatile int*)&a.dist[v[k] - a.lo] : VALUE_INF;
#pragma unroll
            for (int k = 0; k < BATCH_ARCS; ++k) local[k] = local[k] && c[k] < seen[k];
        }
#pragma unroll
        for (int k = 0; k < BATCH_ARCS; ++k)
            old[k] = local[k] ? atomicMin(&a.dist[v[k] - a.lo], c[k]) : c[k];
#pragma unroll
        for (int k = 0; k < BATCH_ARCS; ++k) {
            imp[k] = c[k] < old[k] && c[k] < q.ceiling;
            if (v[k] >= 0 && !(v[k] >= a.lo && v[k] < a.hi)) ok &= relax_remote(a, q, v[k], c[k]);
        }
        int n = 0;
#if UNIT_STEP
        if (!q.unique)
#endif
        {
            int mark[BATCH_ARCS];        // near items enter the round's queue once (in_near)
#pragma unroll
            for (int k = 0; k < BATCH_ARCS; ++k)
                mark[k] = imp[k] && c[k] < q.thr ? atomicExch(&a.in_near[v[k] - a.lo], q.marker)
                                                 : q.marker;
#pragma unroll
            for (int k = 0; k < BATCH_ARCS; ++k) {
                if (imp[k] && c[k] >= q.thr)
                    push_far(a, q.far, q.far_count, q.far_overflow, v[k] - a.lo, c[k], deferrals);
                imp[k] = mark[k] != q.marker;
            }
        }
#pragma unroll
        for (int k = 0; k < BATCH_ARCS; ++k) n += imp[k];
        int slot = warp_reserve(q.next_count, n, lane);
#pragma unroll
        for (int k = 0; k < BATCH_ARCS; ++k)
            if (imp[k]) q.next[slot++] = v[k] - a.lo;
    }
    return ok;
}

// The grid-wide barrier (fused.cuh) on this launch's counter in the control block.
__device__ __forceinline__ void grid_sync(const Args& a, unsigned int& target) {
    grid_barrier((unsigned int*)&a.ctl[BARRIER_COUNT], target);
}

__device__ __forceinline__ long long global_rank() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long global_size() { return (long long)gridDim.x * blockDim.x; }

// The advance functor of a round (advance.cuh): relax every arc of a near-queue vertex into the
// round's sink with the value the vertex has now. Small vertices go through relax_small (BATCH)
// or their own thread; a vertex whose remote offer found no room is queued again for the next
// round, and a hub's slot carries its value along.
struct RelaxArcs {
    const Args& a;
    const Sink& q;
    unsigned long long& deferrals;
    static constexpr bool kMayFail = true;
    static constexpr bool kBatchSmall = BATCH;
    __device__ __forceinline__ int value(int u) const { return *(volatile int*)&a.dist[u]; }
    __device__ __forceinline__ long long big_item(int u, int d) const { return pack_item(u, d); }
    __device__ __forceinline__ void big_vertex(long long item, int& u, int& d) const {
        u = item_vertex(item);
        d = item_value(item);
    }
    __device__ __forceinline__ bool visit(long long e, int d) const { return relax(a, q, e, d, deferrals); }
    __device__ __forceinline__ bool visit_small(long long start, int deg, int d, int lane) const {
        return relax_small(a, q, start, deg, d, lane, deferrals);
    }
    __device__ __forceinline__ void retry(int u) const { push_near(a, q.next, q.next_count, u, q.marker); }
};

// Expand the near queue `cur` (cur_n vertices) into the sink (warps `warp` of `nwarps`);
// vertices of more than WARP_EDGES arcs are reserved in BIG_RESERVE + s3 for expand_big after
// the round's barrier.
__device__ __forceinline__ void expand_near(const Args& a, const Sink& q, const int* cur, int cur_n,
                                            long long warp, long long nwarps, int lane, int s3,
                                            unsigned long long& processed,
                                            unsigned long long& edges,
                                            unsigned long long& deferrals) {
    RelaxArcs f{a, q, deferrals};
    advance_push(a, f, cur, cur_n, BIG_RESERVE + s3, warp, nwarps, lane, processed, edges);
}

// The big vertices reserved this round (`reserve`, read after the barrier).
__device__ __forceinline__ void expand_big(const Args& a, const Sink& q, unsigned long long reserve,
                                           long long warp, long long nwarps, int lane,
                                           unsigned long long& deferrals) {
    RelaxArcs f{a, q, deferrals};
    advance_push_big(a, f, reserve, warp, nwarps, lane);
}

// Where round r's output goes: the next near queue (round r + 1), the far queue in use (fc),
// threshold thr; no outbox and no unique-push shortcut (the caller sets those it uses).
__device__ __forceinline__ Sink round_sink(const Args& a, int r, int fc, int thr, bool filter) {
    Sink q;
    q.next = (r & 1) ? a.near0 : a.near1;
    q.next_count = &a.ctl[NEAR_COUNT + (r + 1) % 3];
    q.marker = r + 1;
    q.far = fc ? a.far1 : a.far0;
    q.far_count = &a.ctl[FAR_COUNT + fc];
    q.far_overflow = &a.ctl[FAR_OVERFLOW + fc];
    q.out_round = q.out_overflow = nullptr;
    q.thr = thr;
    q.ceiling = a.ctl[CEILING];
    q.filter = filter;
    q.unique = false;
    return q;
}

// Add a thread's counters into the launch's totals: summed over the warp, one atomic each.
__device__ __forceinline__ void fold_counters(const Args& a, unsigned long long processed,
                                              unsigned long long edges,
                                              unsigned long long deferrals, int lane) {
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
}

// Move deferred items below the new threshold `thr` to the (empty) near queue `cur`.
__device__ void split_far(const Args& a, unsigned int& bar, int& fc, int old_thr, int thr,
                          int* cur, int* cur_count, int round, unsigned long long& deferrals) {
    long long* far_cur = fc ? a.far1 : a.far0;
    long long* far_next = fc ? a.far0 : a.far1;
    int n = *(volatile int*)&a.ctl[FAR_COUNT + fc];
    int overflow = *(volatile int*)&a.ctl[FAR_OVERFLOW + fc];
    int* next_count = &a.ctl[FAR_COUNT + (fc ^ 1)];
    int* next_overflow = &a.ctl[FAR_OVERFLOW + (fc ^ 1)];
    grid_sync(a, bar);                               // everyone has read FAR_MIN and the counts
    if (global_rank() == 0) { a.ctl[FAR_MIN] = VALUE_INF; *next_count = 0; *next_overflow = 0; }
    grid_sync(a, bar);
    long long tid = global_rank(), nthreads = global_size();
    if (!overflow) {
        if (n > a.far_cap) n = a.far_cap;
        for (long long i = tid; i < n; i += nthreads) {
            long long item = __ldcg(&far_cur[i]);
            int u = item_vertex(item), d = item_value(item);
            if (*(volatile int*)&a.dist[u] != d) continue;       // stale: improved since
            if (d < thr) push_near(a, cur, cur_count, u, round);
            else push_far(a, far_next, next_count, next_overflow, u, d, deferrals);
        }
    } else {
        // Some deferred items were not stored. Every vertex whose value is at least the old
        // threshold still has its latest improvement unprocessed: rebuild from the state.
        // (a value at the ceiling was never queued: it stays where it is)
        int n_local = a.hi - a.lo;
        const int ceiling = a.ctl[CEILING];
        for (long long u = tid; u < n_local; u += nthreads) {
            int d = *(volatile int*)&a.dist[u];
            if (d == VALUE_INF || d < old_thr || d >= ceiling) continue;
            if (d < thr) push_near(a, cur, cur_count, (int)u, round);
            else push_far(a, far_next, next_count, next_overflow, (int)u, d, deferrals);
        }
    }
    grid_sync(a, bar);
    if (global_rank() == 0) {
        a.ctl[FAR_INDEX] = fc ^ 1;
        a.ctl[FAR_COUNT + fc] = 0;
        a.ctl[FAR_OVERFLOW + fc] = 0;
    }
    fc ^= 1;
    grid_sync(a, bar);
}

// The pull side of a BFS round (advance_pull): an unreached vertex is claimed, at the next depth,
// by the first neighbour at depth `depth` (one device: its own values; several: the replicated
// flags of the level being pulled from, `front`, which cover every device's vertices).
struct PullParent {
    const Args& a;
    const Sink& q;
    bool forced;
    int depth;
    __device__ __forceinline__ bool unreached(long long v) const {
        return *(volatile int*)&a.dist[v] == VALUE_INF;
    }
    __device__ __forceinline__ bool in_frontier(int u) const {
        return forced ? a.front[u] != 0 : *(volatile int*)&a.dist[u] == depth;
    }
    __device__ __forceinline__ bool claim(long long v) const {
        a.dist[v] = depth + 1;
        if (depth + 1 < q.ceiling) push_near(a, q.next, q.next_count, (int)v, q.marker);
        return true;
    }
};

// op 0: advance (run rounds); op 1: split the far queue for threshold `thr`, then return.
// shrink_below / grow_above: return (EXIT_REASON 1) when the frontier leaves this shape's range.
extern "C" __global__ void RESIDENT_BOUNDS
traverse(const Args* __restrict__ pa, int thr, int delta, int self_advance, int max_rounds,
         int flush, int op, int shrink_below, int grow_above, int pull, int filter,
         int pull_unique, int has_big, int pull_level) {
    const Args a = *pa;
    const long long tid = global_rank(), nthreads = global_size();
    const int lane = threadIdx.x & 31;
    const long long warp = tid >> 5, nwarps = nthreads >> 5;
    int r = *(volatile int*)&a.ctl[ROUND];
    int fc = *(volatile int*)&a.ctl[FAR_INDEX];
    unsigned long long processed = 0, edges = 0, deferrals = 0;
    unsigned int bar = 0;
    int rounds = 0, reason = 0;
    long long out_total = 0;
    bool stop = false;
    // BFS direction optimisation (direction.cuh): the direction and the arcs explored by push
    // rounds are carried over between launches in slots read only here and written at the exit
    // On several devices the host decides for all of them (level-synchronous BSP only):
    // pull_level >= 0 means "pull this round, from the vertices flagged in a.front, which
    // are at depth pull_level"; a device with an empty queue still pulls then.
    const bool forced = pull_level >= 0;
    bool pulling = forced || (pull && *(volatile int*)&a.ctl[PULLING]);
    long long explored = pull ? (long long)a.counters[EXPLORED_ARCS] : 0;
    if (op == 1) {
        int* cur = (r & 1) ? a.near1 : a.near0;
        int old_thr = *(volatile int*)&a.ctl[THRESHOLD];
        split_far(a, bar, fc, old_thr, thr, cur, &a.ctl[NEAR_COUNT + r % 3], r, deferrals);
    }
    while (op == 0) {
        const int cur_n = *(volatile int*)&a.ctl[NEAR_COUNT + r % 3];
        int* cur = (r & 1) ? a.near1 : a.near0;
        if (cur_n == 0 && !(forced && rounds == 0)) {
            int far_n = *(volatile int*)&a.ctl[FAR_COUNT + fc];
            int far_over = *(volatile int*)&a.ctl[FAR_OVERFLOW + fc];
            if ((far_n == 0 && !far_over) || !self_advance || thr == VALUE_INF) break;
            int new_thr = next_threshold(thr, *(volatile int*)&a.ctl[FAR_MIN], delta);
            split_far(a, bar, fc, thr, new_thr, cur, &a.ctl[NEAR_COUNT + r % 3], r, deferrals);
            thr = new_thr;
            continue;
        }
        if (rounds >= max_rounds || stop) break;
        if (!forced && (cur_n < shrink_below || cur_n > grow_above)) { reason = 1; break; }
        const int s3 = r % 3, n3 = (r + 1) % 3;
        if (pull && !forced) {
            const long long n_local = a.hi - a.lo;
            if (pulling) {
                pulling = direction_stay_pulling(cur_n, n_local);
            } else if (direction_scout(cur_n, n_local)) {
                // the frontier's arcs: one pass over the queue, one barrier (every thread then
                // reads the same sum, from a slot nobody writes until round r + 2)
                count_frontier_arcs(a, cur, cur_n, tid, nthreads, lane, a.counters, FRONT_ARCS + s3);
                grid_sync(a, bar);
                const long long front_arcs = (long long)__ldcg(&a.counters[FRONT_ARCS + s3]);
                pulling = direction_push_to_pull(front_arcs, a.indptr[n_local] - explored);
                if (!pulling) explored += front_arcs;     // this push round explores them
            }
        }
        Sink q = round_sink(a, r, fc, thr, filter);
        q.out_round = &a.ctl[OUT_ROUND + s3];
        q.out_overflow = &a.ctl[OUT_ROUND_OVERFLOW + s3];
        q.unique = pull_unique && thr == VALUE_INF;
        if (tid == 0) {               // slots of round r + 1, last read during round r - 2
            a.ctl[NEAR_COUNT + (r + 2) % 3] = 0;
            a.ctl[OUT_ROUND + n3] = 0;
            a.ctl[OUT_ROUND_OVERFLOW + n3] = 0;
            a.counters[BIG_RESERVE + n3] = 0;
            a.counters[FRONT_ARCS + n3] = 0;
        }
#if UNIT_STEP
        if (pulling) {
            // pull: every unreached vertex looks for a parent in the frontier (depth r) among
            // its arcs (the graph is symmetric) and stops at the first; the frontier queue is
            // not read. Vertices found are queued as usual, so push can take over again.
            // (several devices: a parent may be anyone's, so the replicated flags are read)
            const int n_local = a.hi - a.lo;
            PullParent f{a, q, forced, forced ? pull_level : r};
            advance_pull(a, f, n_local, tid, nthreads, processed, edges);
            if (tid == 0) a.counters[PULL_ROUNDS] += 1;
            grid_sync(a, bar);
            ++r;
            ++rounds;
            if (forced) break;            // one level: the host exchanges before the next
            continue;
        }
#endif

        expand_near(a, q, cur, cur_n, warp, nwarps, lane, s3, processed, edges, deferrals);
        grid_sync(a, bar);
        // has_big: some local vertex has more than WARP_EDGES arcs (the host knows); without
        // one, the read of the reservation would only add a round trip to every round
        const unsigned long long reserve = has_big ? __ldcg(&a.counters[BIG_RESERVE + s3]) : 0ull;
        if (big_count(reserve) > 0) {
            expand_big(a, q, reserve, warp, nwarps, lane, deferrals);
            grid_sync(a, bar);
        }
        if (flush > 0 || a.k > 1) {    // decided alike everywhere: read after the barrier
            out_total += *(volatile int*)&a.ctl[OUT_ROUND + s3];
            stop = *(volatile int*)&a.ctl[OUT_ROUND_OVERFLOW + s3] || (flush > 0 && out_total >= flush);
        }
        ++r;
        ++rounds;
    }
    fold_counters(a, processed, edges, deferrals, lane);
    if (tid == 0) {
        a.ctl[ROUND] = r;
        a.ctl[FAR_INDEX] = fc;
        a.ctl[THRESHOLD] = thr;
        a.ctl[ROUNDS] = rounds;
        a.ctl[EXIT_REASON] = reason;
        a.counters[TOTAL_ROUNDS] += rounds;
        if (pull && !forced) {
            a.ctl[PULLING] = pulling;
            a.counters[EXPLORED_ARCS] = (unsigned long long)explored;
        }
    }
    // every block has passed its last barrier here; the last to leave zeroes the count
    grid_exit(&a.ctl[BARRIER_COUNT], &a.ctl[EXIT_COUNT]);
}

// Apply items that arrived from other devices: keep the smaller value, queue what improved.
extern "C" __global__ void RESIDENT_BOUNDS
absorb(const Args* __restrict__ pa, const long long* items, int n, int thr) {
    const Args a = *pa;
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int r = a.ctl[ROUND];
    int fc = a.ctl[FAR_INDEX];
    // the current queue (no round is running): where round r - 1 put its output
    const Sink q = round_sink(a, r - 1, fc, thr, true);
    unsigned long long deferrals = 0;
    for (long long i = tid; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long item = items[i];
        improve_local(a, q, item_vertex(item) - a.lo, item_value(item), deferrals);
    }
    if (deferrals) atomicAdd(&a.counters[DEFERRALS], deferrals);
}

// A worker's state at the start of a run, by every thread of a grid (thread tid of nthreads):
// values unreached, nothing queued (in_near) or sent (sent_best of the other devices' vertices:
// a device never reads its own), the counters zero and every control word (Ctl) zero but
// `queued` seeds in round 0's queue, no deferred value (FAR_MIN), `threshold` and `ceiling`.
// The grid barrier's words are zeroed too: this runs in a launch of its own, which no barrier
// spans. A later launch places the seeds (place_seeds). The fused worker's run starts with
// reset_fused, the linked workers' with reset_linked (linked.cu: this, then their link state).
__device__ __forceinline__ void reset_worker(const Args& a, long long tid, long long nthreads,
                                             int queued, int threshold, int ceiling) {
    const long long n_local = a.hi - a.lo, n_peers = a.offsets[a.k] - n_local;
    for (long long v = tid; v < n_local; v += nthreads) {
        a.dist[v] = VALUE_INF;
        a.in_near[v] = -1;                   // the round it was last queued for: none
    }
    for (long long i = tid; i < n_peers; i += nthreads)
        a.sent_best[i < a.lo ? i : i + n_local] = VALUE_INF;
    for (long long w = tid; w < COUNTERS; w += nthreads) a.counters[w] = 0ull;
    for (long long w = tid; w < CTL_SIZE; w += nthreads)
        a.ctl[w] = w == NEAR_COUNT ? queued : w == FAR_MIN ? VALUE_INF
                 : w == THRESHOLD ? threshold : w == CEILING ? ceiling : 0;
}

// The seeds this device owns (num_seeds local ids, distinct) at value 0 and, if `queued`, in
// round 0's queue, by every thread of a grid, in a launch after the reset's (reset_worker).
__device__ __forceinline__ void place_seeds(const Args& a, const int* seeds, int num_seeds,
                                            bool queued, long long tid, long long nthreads) {
    for (long long i = tid; i < num_seeds; i += nthreads) {
        const int s = seeds[i];
        a.dist[s] = 0;
        if (!queued) continue;
        a.in_near[s] = 0;
        a.near0[i] = s;
    }
}

// The fused worker's reset for a run (reset_worker), launched plainly (no barrier in it) on a
// grid of its own, so the fills stream at the GPU's bandwidth.
extern "C" __global__ void reset_fused(const Args* __restrict__ pa, int queued, int threshold,
                                       int ceiling) {
    reset_worker(*pa, global_rank(), global_size(), queued, threshold, ceiling);
}

// The fused worker's seeds (place_seeds), after reset_fused: num_seeds local ids, queued for
// round 0 if `queued`.
extern "C" __global__ void place_seeds_fused(const Args* __restrict__ pa,
                                             const int* __restrict__ seeds, int num_seeds,
                                             int queued) {
    place_seeds(*pa, seeds, num_seeds, queued, global_rank(), global_size());
}

// The host builds Args as a NumPy record; this lets it check the layout matches.
extern "C" __global__ void args_layout(long long* out) {
    out[0] = sizeof(Args);
    out[1] = offsetof(Args, far_cap);
    out[2] = offsetof(Args, k);
    out[3] = offsetof(Args, counters);
}
