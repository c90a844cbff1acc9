// The load-balanced advance: visit the arcs of a frontier's vertices, balanced by degree.
//
// Push (out-arcs of the frontier's vertices), by degree of each vertex:
//   small  (at most 32 arcs):          its own lane walks them (or the functor's batched
//                                      visit_small, all lanes together);
//   medium (33 to WARP_EDGES arcs):    the whole warp, one arc per lane;
//   big    (more than WARP_EDGES arcs): reserved during the pass, then cut into CHUNK-arc chunks
//                                      that warps across the grid share (advance_push_big) after
//                                      a grid barrier the engine places, so a hub does not stall
//                                      one warp.
// advance_push takes 32 vertices per warp; advance_push_warps one vertex per warp (for a frontier
// of at most one vertex per warp of the grid, where 32 per warp would leave most warps idle).
// Pull (advance_pull): every vertex the functor wants scans its arcs for ones from the frontier
// and stops at the first whose visit accepts it (BFS's: the first).
// Gathering pull (advance_gather, advance_gather_big, gather_finish): every vertex the functor
// wants combines the messages of all its arcs from the frontier, balanced by degree as the push:
// a small vertex by its lane, a medium one by the whole warp (a shuffle reduction), both with no
// atomics; a hub in CHUNK-arc chunks across the grid, each chunk reduced by a warp and
// deposited atomically into the hub's accumulator, whose body gather_finish runs after a barrier.
//
// The templates are generic over
//   G: the graph and hub storage, any struct with members
//        const long long* indptr; const int* indices;       (CSR rows)
//        long long* big_items; int* big_first_chunk;         (one slot per reserved hub)
//        unsigned long long* counters;                        (counters[reserve_slot]: the
//                                                              round's hub reservation)
//   F: the algorithm's functor (passed as const F&), with const __forceinline__ members
//        int  value(int u)                       the value u's arcs carry
//        long long big_item(int u, int d)        what a hub's slot holds
//        void big_vertex(long long item, int& u, int& d)   the hub and value back from it
//        bool visit(long long e, int d)          arc e from a vertex of value d; false: no room
//                                                (the vertex is retried)
//        bool visit_small(long long start, int deg, int d, int lane)   kBatchSmall only: the
//                                                arcs of small vertices, every lane calling
//                                                (deg 0 for a lane without one)
//        void retry(int u)                       queue u again (kMayFail only)
//        static constexpr bool kMayFail, kBatchSmall
//      pull functors instead: bool unreached(long long v) (v looks for an arc from the
//      frontier), bool in_frontier(int u), bool claim(long long v) (the visit of v by an arc
//      from the frontier; true: v is accepted and its other arcs are skipped).
//      gathering functors: typedef Acc (the message type), bool wants(long long v),
//      bool in_frontier(int u), Acc message(int u), Acc identity(), Acc combine(Acc, Acc),
//      void deposit(long long v, Acc x) (atomically into v's accumulator, marking v for
//      gather_finish), void finish(long long v, Acc x) (the body; v joins the output when it
//      accepts).
// Everything inlines into the engine's kernel, so the functor costs no call.
#pragma once

#define WARP_EDGES 1024
#define CHUNK 1024

// Big vertices (more than WARP_EDGES arcs) are cut into CHUNK-arc chunks that warps across the
// grid share after a barrier. One 64-bit atomic on `reserve` takes the vertex's slot (high
// bits) and its chunks (low 40 bits), so first chunks increase with the slot and a chunk finds
// its vertex by binary search (big_slot_of). Returns the slot; the caller stores its vertex.
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

// Push from the frontier `cur` (n vertices): whole warps (`warp` of `nwarps`) iterate together,
// 32 vertices each, so they can share medium vertices. Hubs are reserved in
// a.counters[reserve_slot] for advance_push_big. A vertex an arc of which found no room is
// retried (f.retry). Counts the vertices and arcs taken into processed and edges.
template <class G, class F>
__device__ __forceinline__ void advance_push(const G& a, const F& f, const int* cur, long long n,
                                             int reserve_slot, long long warp, long long nwarps,
                                             int lane, unsigned long long& processed,
                                             unsigned long long& edges) {
    for (long long base = warp * 32; base < n; base += nwarps * 32) {
        long long i = base + lane;
        int u = -1, d = 0;
        long long start = 0, deg = 0;
        if (i < n) {
            u = __ldcg(&cur[i]);        // written by other blocks last round: skip L1
            d = f.value(u);
            start = a.indptr[u];
            deg = a.indptr[u + 1] - start;
            ++processed;
            edges += deg;
        }
        bool retry = false;
        if (deg > WARP_EDGES)                        // shared out after the barrier
            a.big_items[reserve_big(&a.counters[reserve_slot], deg, a.big_first_chunk)] =
                f.big_item(u, d);
        unsigned medium = __ballot_sync(0xffffffffu, deg > 32 && deg <= WARP_EDGES);
        while (medium) {
            int leader = __ffs(medium) - 1;
            medium &= medium - 1;
            long long s = __shfl_sync(0xffffffffu, start, leader);
            long long m = __shfl_sync(0xffffffffu, deg, leader);
            int dl = __shfl_sync(0xffffffffu, d, leader);
            if constexpr (F::kMayFail) {
                bool ok = true;
                for (long long e = s + lane; e < s + m; e += 32) ok &= f.visit(e, dl);
                if (__any_sync(0xffffffffu, !ok) && lane == leader) retry = true;
            } else {
                for (long long e = s + lane; e < s + m; e += 32) f.visit(e, dl);
            }
        }
        if constexpr (F::kBatchSmall) {
            if (!f.visit_small(start, deg > 0 && deg <= 32 ? (int)deg : 0, d, lane)) retry = true;
        } else {
            if (deg > 0 && deg <= 32) {
                for (long long e = start; e < start + deg; ++e)
                    if (!f.visit(e, d)) retry = true;
            }
        }
        if constexpr (F::kMayFail) {
            if (retry) f.retry(u);
        }
    }
}

// Push from a frontier of at most about one vertex per warp: one vertex per warp, its arcs
// across the lanes (lane 0 counts it). Hubs are reserved as in advance_push.
template <class G, class F>
__device__ __forceinline__ void advance_push_warps(const G& a, const F& f, const int* cur, long long n,
                                                   int reserve_slot, long long warp,
                                                   long long nwarps, int lane,
                                                   unsigned long long& processed,
                                                   unsigned long long& edges) {
    for (long long i = warp; i < n; i += nwarps) {
        const int u = __ldcg(&cur[i]);
        const int d = f.value(u);
        const long long start = a.indptr[u], deg = a.indptr[u + 1] - start;
        if (lane == 0) {
            ++processed;
            edges += deg;
        }
        if (deg > WARP_EDGES) {      // shared out in chunks after the barrier
            if (lane == 0)
                a.big_items[reserve_big(&a.counters[reserve_slot], deg, a.big_first_chunk)] =
                    f.big_item(u, d);
            continue;
        }
        if constexpr (F::kMayFail) {
            bool ok = true;
            for (long long e = start + lane; e < start + deg; e += 32) ok &= f.visit(e, d);
            if (__any_sync(0xffffffffu, !ok) && lane == 0) f.retry(u);
        } else {
            for (long long e = start + lane; e < start + deg; e += 32) f.visit(e, d);
        }
    }
}

// The hubs reserved by a push (`reserve`: the reservation word, read after the grid barrier
// that follows the push): chunks of CHUNK arcs, one per warp, across the whole grid.
template <class G, class F>
__device__ __forceinline__ void advance_push_big(const G& a, const F& f, unsigned long long reserve,
                                                 long long warp, long long nwarps, int lane) {
    const int big_n = big_count(reserve);
    const long long total = big_chunks(reserve);
    for (long long c = warp; c < total; c += nwarps) {
        const int lo_s = big_slot_of(a.big_first_chunk, big_n, c);
        int u, d;
        f.big_vertex(__ldcg(&a.big_items[lo_s]), u, d);
        const long long s0 = a.indptr[u], end = a.indptr[u + 1];
        const long long first = s0 + (c - __ldcg(&a.big_first_chunk[lo_s])) * CHUNK;
        const long long last = min(first + CHUNK, end);
        if constexpr (F::kMayFail) {
            bool ok = true;
            for (long long e = first + lane; e < last; e += 32) ok &= f.visit(e, d);
            if (__any_sync(0xffffffffu, !ok) && lane == 0) f.retry(u);
        } else {
            for (long long e = first + lane; e < last; e += 32) f.visit(e, d);
        }
    }
}

// Pull over the arcs of vertices [0, n) (threads tid, tid + nthreads, ...): each vertex the
// functor still wants (f.unreached) visits its arcs from vertices of the frontier
// (f.in_frontier) in order, f.claim for each, until one accepts it; the rest of its arcs are
// skipped. A vertex is one thread's, so it is accepted at most once. The arcs are out-arcs of a
// symmetric graph, or in-arcs. Counts arcs read and vertices accepted.
template <class G, class F>
__device__ __forceinline__ void advance_pull(const G& a, const F& f, long long n, long long tid,
                                             long long nthreads, unsigned long long& processed,
                                             unsigned long long& edges) {
    for (long long v = tid; v < n; v += nthreads) {
        if (!f.unreached(v)) continue;
        const long long e0 = a.indptr[v], e1 = a.indptr[v + 1];
        for (long long e = e0; e < e1; ++e) {
            ++edges;
            if (f.in_frontier(a.indices[e]) && f.claim(v)) {
                ++processed;
                break;
            }
        }
    }
}

// The warp's combination of every lane's x (all lanes get it; all 32 lanes call).
template <class F>
__device__ __forceinline__ typename F::Acc warp_combine(const F& f, typename F::Acc x) {
    for (int off = 16; off > 0; off >>= 1) x = f.combine(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}

// The combination of the messages of arcs first, first + step, ... (< last) from frontier
// members; hit: whether there was one.
template <class G, class F>
__device__ __forceinline__ typename F::Acc gather_arcs(const G& a, const F& f, long long first,
                                                       long long last, int step, bool& hit) {
    typename F::Acc acc = f.identity();
    for (long long e = first; e < last; e += step) {
        const int u = a.indices[e];
        if (f.in_frontier(u)) {
            acc = f.combine(acc, f.message(u));
            hit = true;
        }
    }
    return acc;
}

// Gathering pull over the candidates [0, n) (f.wants): whole warps take 32 candidates each; a
// candidate with at least one arc from the frontier gets f.finish with its messages combined.
// Hubs are reserved in a.counters[reserve_slot] for advance_gather_big. Counts the candidates
// and arcs read into processed and edges.
template <class G, class F>
__device__ __forceinline__ void advance_gather(const G& a, const F& f, long long n,
                                               int reserve_slot, long long warp, long long nwarps,
                                               int lane, unsigned long long& processed,
                                               unsigned long long& edges) {
    for (long long base = warp * 32; base < n; base += nwarps * 32) {
        const long long v = base + lane;
        long long start = 0, deg = 0;
        if (v < n && f.wants(v)) {
            start = a.indptr[v];
            deg = a.indptr[v + 1] - start;
            ++processed;
            edges += deg;
        }
        if (deg > WARP_EDGES)                        // shared out after the barrier
            a.big_items[reserve_big(&a.counters[reserve_slot], deg, a.big_first_chunk)] = v;
        unsigned medium = __ballot_sync(0xffffffffu, deg > 32 && deg <= WARP_EDGES);
        while (medium) {
            const int leader = __ffs(medium) - 1;
            medium &= medium - 1;
            const long long s = __shfl_sync(0xffffffffu, start, leader);
            const long long m = __shfl_sync(0xffffffffu, deg, leader);
            bool hit = false;
            const typename F::Acc acc = warp_combine(f, gather_arcs(a, f, s + lane, s + m, 32, hit));
            if (__any_sync(0xffffffffu, hit) && lane == leader) f.finish(v, acc);
        }
        if (deg > 0 && deg <= 32) {
            bool hit = false;
            const typename F::Acc acc = gather_arcs(a, f, start, start + deg, 1, hit);
            if (hit) f.finish(v, acc);
        }
    }
}

// The hubs advance_gather reserved (`reserve`: read after the barrier that follows it): each
// CHUNK-arc chunk reduced by one warp and deposited into its hub's accumulator (f.deposit);
// gather_finish runs their bodies after the next barrier.
template <class G, class F>
__device__ __forceinline__ void advance_gather_big(const G& a, const F& f,
                                                   unsigned long long reserve, long long warp,
                                                   long long nwarps, int lane) {
    const int big_n = big_count(reserve);
    const long long total = big_chunks(reserve);
    for (long long c = warp; c < total; c += nwarps) {
        const int slot = big_slot_of(a.big_first_chunk, big_n, c);
        const long long v = __ldcg(&a.big_items[slot]);
        const long long first = a.indptr[v] + (c - __ldcg(&a.big_first_chunk[slot])) * CHUNK;
        const long long last = min(first + CHUNK, a.indptr[v + 1]);
        bool hit = false;
        const typename F::Acc acc = warp_combine(f, gather_arcs(a, f, first + lane, last, 32, hit));
        if (__any_sync(0xffffffffu, hit) && lane == 0) f.deposit(v, acc);
    }
}

// The bodies of the vertices marked in `marks` (bits over n vertices; threads tid, tid +
// nthreads, ... take a word each): each takes its accumulator, which is reset to the identity,
// and the mark is cleared, so both are ready for the next gathering step.
template <class F>
__device__ __forceinline__ void gather_finish(const F& f, unsigned int* marks,
                                              typename F::Acc* acc, long long n, long long tid,
                                              long long nthreads) {
    for (long long w = tid; w < (n + 31) / 32; w += nthreads) {
        unsigned int bits = __ldcg(&marks[w]);
        if (!bits) continue;
        marks[w] = 0u;
        while (bits) {
            const long long v = w * 32 + (__ffs(bits) - 1);
            bits &= bits - 1;
            const typename F::Acc x = __ldcg(&acc[v]);
            acc[v] = f.identity();
            f.finish(v, x);
        }
    }
}

// The members an advance functor shares when the value its arcs carry is their source vertex
// itself and every visit succeeds: the generated operators' visitors and the fused loops'
// derive from it and add their own visit (and, gathering, their accumulators).
struct SourceVisitor {
    static constexpr bool kMayFail = false;
    static constexpr bool kBatchSmall = false;
    __device__ __forceinline__ int value(int u) const { return u; }
    __device__ __forceinline__ long long big_item(int u, int) const { return u; }
    __device__ __forceinline__ void big_vertex(long long item, int& u, int& d) const {
        u = (int)item;
        d = u;
    }
    __device__ __forceinline__ bool visit_small(long long, int, int, int) const { return true; }
    __device__ __forceinline__ void retry(int) const {}
};

// An advance functor made of two lambdas, for visits that always succeed: value_of(u) gives the
// value u's arcs carry, visit(e, d) handles one arc. A hub's slot holds the vertex alone; its
// value is asked again when its chunks are pushed.
template <class ValueOf, class Visit>
struct ArcVisitor {
    static constexpr bool kMayFail = false;
    static constexpr bool kBatchSmall = false;
    ValueOf value_of;
    Visit visit_arc;
    __device__ __forceinline__ ArcVisitor(ValueOf v, Visit w) : value_of(v), visit_arc(w) {}
    __device__ __forceinline__ int value(int u) const { return value_of(u); }
    __device__ __forceinline__ long long big_item(int u, int) const { return u; }
    __device__ __forceinline__ void big_vertex(long long item, int& u, int& d) const {
        u = (int)item;
        d = value_of(u);
    }
    __device__ __forceinline__ bool visit(long long e, int d) const {
        visit_arc(e, d);
        return true;
    }
    __device__ __forceinline__ bool visit_small(long long, int, int, int) const { return true; }
    __device__ __forceinline__ void retry(int) const {}
};
template <class ValueOf, class Visit>
__device__ __forceinline__ ArcVisitor<ValueOf, Visit> arc_visitor(ValueOf value_of, Visit visit) {
    return ArcVisitor<ValueOf, Visit>(value_of, visit);
}
