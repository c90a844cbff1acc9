// BFS on several GPUs in one persistent launch per device: the devices exchange through each
// other's memory (NVLink peer access) and meet at a cross-device barrier, so the host launches
// once per run instead of steering every level (see traversal_peer.py).
//
// Device `me` owns the vertices [off[me], off[me+1]) (renumbered ids) and their rows; its
// frontier of level L is queue[L & 1] with count ctl[CNT + L % 3]. Per level, every device:
//   A. adds its frontier size and out-arcs to the global sums (on device 0) and meets the others;
//      all then read the same sums and take the same decision: done, push or pull (Beamer's
//      rule with GAP's constants, as the one-device kernel: traversal.cu);
//   push: expands its frontier; a local neighbour is claimed with atomicCAS on its depth and
//      appended to the local next queue; a remote one is offered by setting its bit in the
//      owner's inbox bitmap with a reduction over NVLink (fire-and-forget: no round trip), and
//      the block raises the owner's RECEIVED flag. A per-device bit per vertex (`sent`) keeps
//      it from offering a remote vertex twice;
//   pull: B. writes its frontier as a bitmap into its region of every device's replicated
//      frontier bitmap (coalesced peer stores) and meets the others; then every unreached own
//      vertex looks for a neighbour in the bitmap (local L2 reads) and stops at the first;
//   C. meets the others: every offer has landed. A device whose RECEIVED flag is up then
//      claims the unreached vertices of its inbox (depth L + 1, appended to its next queue)
//      and clears the inbox. Only the owner ever writes a vertex's depth.
// The kernel resets its own state first (depths, sent bits, counters, queue counts, the
// source); peers touch it only after the first cross-device barrier, which this device reaches
// after its reset. The barrier counter on device 0 only grows: the host passes where it stands.
// Cross-device barrier: after a grid barrier, thread 0 of block 0 releases its device's writes
// at system scope with an arrival on device 0's counter, polls it with acquire loads and then
// opens a second grid barrier, which passes the acquired writes on to the other blocks. A poll
// that waits longer than the timeout sets ABORT, the device stops, and the host raises.
#include "traversal.cuh"

#define MAX_DEVICES 8
// Per level, thread 0 of block 0 stamps the global timer (ns) when the level starts, when the
// sums are known (after A), when the expansion starts (after B on pull levels) and when it
// ends (before C): where the time of a level goes, for the first TRACE_LEVELS levels.
#define TRACE_LEVELS 64

enum PeerCtl {
    CNT = 0,            // 3 slots (level % 3): frontier size; peers add to the next one
    PBAR = 3,           // grid barrier arrivals (monotonic within a launch)
    PABORT = 4,         // a cross-device wait timed out
    PLEVELS = 5,        // levels run (written at the end)
    PVERTS = 6,         // 2 ints: the level's global frontier size (64-bit, copied from device 0)
    PARCS = 8,          // 2 ints: the level's global frontier arcs
    PEXIT = 10,         // blocks that left (the last one resets PBAR)
    PRECV = 11,         // a peer put offers into this device's inbox this level
    PCROSS = 12,        // cross-device barriers this launch passed (written at the end; 16 ints)
};
// local 64-bit counters: the traversal.cuh Counter slots the host reads (PROCESSED, EDGES,
// TOTAL_ROUNDS, PULL_ROUNDS) plus these
enum PeerCounter { BIGRES = 12,   // 3 slots (level % 3): (big vertices << 40) | chunks
                   LOCAL_ARCS = 15, // 3 slots (level % 3): this device's frontier arcs
                   REMOTE_OFFERS = 18, BITMAP_WORDS = 19, RECEIVED = 20, PEER_COUNTERS = 21 };
// device 0's global block (64-bit words): arrivals, then per level % 3: vertices, arcs
enum Global { GBAR = 0, GSUM = 1, GLOBAL_SIZE = 8 };

struct PeerArgs {
    const long long* indptr; const int* indices;
    int* dist; int* queue0; int* queue1;
    int* ctl; unsigned long long* counters;
    unsigned int* rep;          // replicated frontier bitmap: region j at word rep_base[j]
    unsigned int* sent;         // bit per global vertex: remote vertices this device offered
    unsigned int* inbox;        // bit per own vertex: offered by peers this level
    unsigned long long* global; // on device 0
    long long* big_items; int* big_first;
    unsigned long long* trace;  // TRACE_LEVELS x 4 global-timer stamps of block 0 (see below)
    long long num_arcs;         // out-arcs of the whole graph
    long long timeout_ns;
    int n_total; int me; int k;
    int pull_ok;                // symmetric graph: pull levels allowed
    int off[MAX_DEVICES + 1];
    int rep_base[MAX_DEVICES];
    int* peer_ctl[MAX_DEVICES]; unsigned int* peer_rep[MAX_DEVICES];
    unsigned int* peer_inbox[MAX_DEVICES];
};

__device__ __forceinline__ void red_add_release_sys(unsigned long long* p, unsigned long long v) {
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned long long global_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct Shared {
    int off[MAX_DEVICES + 1];
    int rep_base[MAX_DEVICES];
    unsigned int* peer_inbox[MAX_DEVICES];
    int offered[MAX_DEVICES];       // this block offered vertices to device j this level
};

__device__ __forceinline__ int owner(const Shared& s, int k, int v) {
    int j = 0;
    while (j + 1 < k && v >= s.off[j + 1]) ++j;
    return j;
}

// Meet every block of every device. `sums`: add this device's frontier size `verts` and arcs
// (LOCAL_ARCS, complete after the first grid barrier) for level slot `slot` to the global sums
// first, and copy the totals into ctl afterwards.
__device__ void cross_sync(const PeerArgs& a, unsigned int& bar, unsigned long long& gtarget,
                           int sums, int slot, long long verts) {
    grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long* g = a.global;
        if (sums) {
            const unsigned long long arcs = __ldcg(&a.counters[LOCAL_ARCS + slot]);
            if (verts) atomicAdd((unsigned long long*)&g[GSUM + 2 * slot], (unsigned long long)verts);
            if (arcs) atomicAdd((unsigned long long*)&g[GSUM + 2 * slot + 1], (unsigned long long)arcs);
        }
        gtarget += a.k;
        red_add_release_sys(&g[GBAR], 1ull);     // orders the block's writes (barrier above) first
        const unsigned long long t0 = global_timer();
        while (ld_acquire_sys(&g[GBAR]) < gtarget) {
            if (global_timer() - t0 > (unsigned long long)a.timeout_ns) {
                a.ctl[PABORT] = 1;
                break;
            }
        }
        if (sums) {
            const unsigned long long v = ld_acquire_sys(&g[GSUM + 2 * slot]);
            const unsigned long long e = ld_acquire_sys(&g[GSUM + 2 * slot + 1]);
            *(unsigned long long*)&a.ctl[PVERTS] = v;
            *(unsigned long long*)&a.ctl[PARCS] = e;
        }
    }
    grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
}

// Offer depth c to vertex v (a global id) found from this device's frontier.
__device__ __forceinline__ void offer(const PeerArgs& a, Shared& s, int v, int c, int nslot,
                                      int* next, unsigned long long& offers) {
    const int j = owner(s, a.k, v);
    const int lv = v - s.off[j];
    if (j == a.me) {
        if (*(volatile int*)&a.dist[lv] != INT_INF) return;
        if (atomicCAS(&a.dist[lv], INT_INF, c) != INT_INF) return;
        next[aggregated_reserve(&a.ctl[CNT + nslot])] = lv;
        return;
    }
    unsigned int* w = &a.sent[v >> 5];
    const unsigned int bit = 1u << (v & 31);
    if (__ldcg(w) & bit) return;
    if (atomicOr(w, bit) & bit) return;
    atomicOr(&s.peer_inbox[j][lv >> 5], 1u << (lv & 31));     // result unused: a reduction
    s.offered[j] = 1;
    ++offers;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
peer_bfs(const PeerArgs* __restrict__ pa, int source, unsigned long long gbase) {
    const PeerArgs& a = *pa;
    __shared__ Shared s;
    if (threadIdx.x <= MAX_DEVICES) s.off[threadIdx.x] = a.off[threadIdx.x];
    if (threadIdx.x < MAX_DEVICES) {
        const int j = threadIdx.x;
        s.rep_base[j] = a.rep_base[j];
        s.peer_inbox[j] = a.peer_inbox[j];
        s.offered[j] = 0;
    }
    __syncthreads();
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nthreads = (long long)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31;
    const long long warp = tid >> 5, nwarps = nthreads >> 5;
    const int me = a.me, lo = s.off[me], n_local = s.off[me + 1] - lo;
    const int words_me = (n_local + 31) >> 5;
    unsigned int bar = 0;
    unsigned long long gtarget = gbase;
    unsigned long long processed = 0, edges = 0, offers = 0, received = 0;
    // this run's state: nobody else touches it before the first cross-device barrier
    for (long long v = tid; v < n_local; v += nthreads) a.dist[v] = INT_INF;
    for (long long w = tid; w < ((long long)a.n_total + 31) >> 5; w += nthreads) a.sent[w] = 0u;
    if (tid < PEER_COUNTERS) a.counters[tid] = 0;
    const bool has_source = source >= lo && source < lo + n_local;
    if (tid == 0) {
        a.ctl[CNT] = has_source ? 1 : 0;
        a.ctl[CNT + 1] = 0;
        a.ctl[PRECV] = 0;
    }
    grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
    if (tid == 0 && has_source) {
        a.dist[source - lo] = 0;
        a.queue0[0] = source - lo;
    }
    grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
    long long explored = 0;
    bool pulling = false;
    int L = 0;
    for (;; ++L) {
        // C of the last level has passed: frontier L is complete everywhere
        const int slot = L % 3, nslot = (L + 1) % 3;
        const bool stamp = tid == 0 && L < TRACE_LEVELS && a.trace != nullptr;
        if (stamp) a.trace[4 * L] = global_timer();
        const int nf = __ldcg(&a.ctl[CNT + slot]);
        int* cur = (L & 1) ? a.queue1 : a.queue0;
        int* next = (L & 1) ? a.queue0 : a.queue1;
        if (tid == 0) {          // slots of level L + 2, last read during level L - 1
            a.ctl[CNT + (L + 2) % 3] = 0;
            a.counters[BIGRES + (L + 2) % 3] = 0;
            a.counters[LOCAL_ARCS + (L + 2) % 3] = 0;
            if (me == 0) { a.global[GSUM + 2 * ((L + 2) % 3)] = 0; a.global[GSUM + 2 * ((L + 2) % 3) + 1] = 0; }
        }
        // A. the frontier's arcs (pull -> push needs only its size)
        if (!pulling) {
            unsigned long long mine = 0;
            for (long long i = tid; i < nf; i += nthreads) {
                const int u = __ldcg(&cur[i]);
                mine += (unsigned long long)(a.indptr[u + 1] - a.indptr[u]);
            }
            for (int o = 16; o > 0; o >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, o);
            if (lane == 0 && mine) atomicAdd(&a.counters[LOCAL_ARCS + slot], mine);
        }
        cross_sync(a, bar, gtarget, 1, slot, nf);
        if (__ldcg(&a.ctl[PABORT])) break;
        const long long g_verts = (long long)__ldcg((unsigned long long*)&a.ctl[PVERTS]);
        const long long g_arcs = (long long)__ldcg((unsigned long long*)&a.ctl[PARCS]);
        if (stamp) a.trace[4 * L + 1] = global_timer();
        if (g_verts == 0) break;
        if (pulling) {
            pulling = g_verts * PULL_BETA >= a.n_total;
        } else if (a.pull_ok) {
            pulling = g_arcs * PULL_ALPHA > a.num_arcs - explored;
            if (!pulling) explored += g_arcs;
        }
        const int c = L + 1;
        if (pulling) {
            // B. this device's frontier as bits, into its region of every device's bitmap
            unsigned int* mine = a.rep + s.rep_base[me];
            for (long long w = tid; w < words_me; w += nthreads) mine[w] = 0u;
            grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
            for (long long i = tid; i < nf; i += nthreads) {
                const int u = __ldcg(&cur[i]);
                atomicOr(&mine[u >> 5], 1u << (u & 31));
            }
            grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
            for (long long w = tid; w < words_me; w += nthreads) {
                const unsigned int bits = __ldcg(&mine[w]);
                for (int j = 0; j < a.k; ++j)
                    if (j != me) a.peer_rep[j][s.rep_base[me] + w] = bits;
            }
            if (tid == 0) a.counters[BITMAP_WORDS] += (unsigned long long)words_me * (a.k - 1);
            cross_sync(a, bar, gtarget, 0, 0, 0);
            if (__ldcg(&a.ctl[PABORT])) break;
            if (stamp) a.trace[4 * L + 2] = global_timer();
            // every unreached own vertex looks for a parent in the frontier
            for (long long v = tid; v < n_local; v += nthreads) {
                if (*(volatile int*)&a.dist[v] != INT_INF) continue;
                const long long e0 = a.indptr[v], e1 = a.indptr[v + 1];
                for (long long e = e0; e < e1; ++e) {
                    ++edges;
                    const int u = a.indices[e];
                    const int j = owner(s, a.k, u);
                    const int lu = u - s.off[j];
                    if ((__ldcg(&a.rep[s.rep_base[j] + (lu >> 5)]) >> (lu & 31)) & 1u) {
                        a.dist[v] = c;
                        ++processed;
                        next[aggregated_reserve(&a.ctl[CNT + nslot])] = (int)v;
                        break;
                    }
                }
            }
            if (tid == 0) a.counters[PULL_ROUNDS] += 1;
        } else {
            if (stamp) a.trace[4 * L + 2] = global_timer();
            // push: whole warps iterate together so they can share medium vertices
            for (long long base = warp * 32; base < nf; base += nwarps * 32) {
                const long long i = base + lane;
                int u = -1;
                long long start = 0, deg = 0;
                if (i < nf) {
                    u = __ldcg(&cur[i]);
                    start = a.indptr[u];
                    deg = a.indptr[u + 1] - start;
                    ++processed;
                    edges += deg;
                }
                if (deg > WARP_EDGES)            // shared out in chunks after the barrier
                    a.big_items[reserve_big(&a.counters[BIGRES + slot], deg, a.big_first)] = u;
                unsigned medium = __ballot_sync(0xffffffffu, deg > 32 && deg <= WARP_EDGES);
                while (medium) {
                    const int leader = __ffs(medium) - 1;
                    medium &= medium - 1;
                    const long long ms = __shfl_sync(0xffffffffu, start, leader);
                    const long long md = __shfl_sync(0xffffffffu, deg, leader);
                    for (long long e = ms + lane; e < ms + md; e += 32)
                        offer(a, s, a.indices[e], c, nslot, next, offers);
                }
                if (deg > 0 && deg <= 32)
                    for (long long e = start; e < start + deg; ++e)
                        offer(a, s, a.indices[e], c, nslot, next, offers);
            }
            grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
            const unsigned long long reserve = __ldcg(&a.counters[BIGRES + slot]);
            const int big_n = big_count(reserve);
            const long long total = big_chunks(reserve);
            for (long long ch = warp; ch < total; ch += nwarps) {
                const int lo_s = big_slot_of(a.big_first, big_n, ch);
                const int u = (int)__ldcg(&a.big_items[lo_s]);
                const long long end = a.indptr[u + 1];
                const long long first = a.indptr[u] + (ch - __ldcg(&a.big_first[lo_s])) * CHUNK;
                const long long last = first + CHUNK < end ? first + CHUNK : end;
                for (long long e = first + lane; e < last; e += 32)
                    offer(a, s, a.indices[e], c, nslot, next, offers);
            }
            // raise RECEIVED at every device this block offered vertices to
            __syncthreads();
            if (threadIdx.x < a.k && s.offered[threadIdx.x]) {
                a.peer_ctl[threadIdx.x][PRECV] = 1;
                s.offered[threadIdx.x] = 0;
            }
        }
        // C. every device's appends into the next queues have landed
        if (a.trace != nullptr && L < TRACE_LEVELS) {     // uniform: every block or none
            grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
            if (stamp) a.trace[4 * L + 3] = global_timer();
        }
        cross_sync(a, bar, gtarget, 0, 0, 0);
        if (__ldcg(&a.ctl[PABORT])) break;
        if (__ldcg(&a.ctl[PRECV])) {
            // claim what the peers offered: unreached vertices get depth L + 1
            for (long long w = tid; w < words_me; w += nthreads) {
                unsigned int bits = __ldcg(&a.inbox[w]);
                if (!bits) continue;
                a.inbox[w] = 0u;
                while (bits) {
                    const int v = (int)(w << 5) + __ffs(bits) - 1;
                    bits &= bits - 1;
                    if (*(volatile int*)&a.dist[v] != INT_INF) continue;
                    a.dist[v] = c;
                    ++received;
                    next[aggregated_reserve(&a.ctl[CNT + nslot])] = v;
                }
            }
            grid_barrier((unsigned int*)&a.ctl[PBAR], bar);
            // peers raise it again only after the next cross-device barrier, which this
            // device reaches after this
            if (tid == 0) a.ctl[PRECV] = 0;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        processed += __shfl_down_sync(0xffffffffu, processed, o);
        edges += __shfl_down_sync(0xffffffffu, edges, o);
        offers += __shfl_down_sync(0xffffffffu, offers, o);
        received += __shfl_down_sync(0xffffffffu, received, o);
    }
    if (lane == 0) {
        if (processed) atomicAdd(&a.counters[PROCESSED], processed);
        if (edges) atomicAdd(&a.counters[EDGES], edges);
        if (offers) atomicAdd(&a.counters[REMOTE_OFFERS], offers);
        if (received) atomicAdd(&a.counters[RECEIVED], received);
    }
    if (tid == 0) {
        a.ctl[PLEVELS] = L;
        *(unsigned long long*)&a.ctl[PCROSS] = (gtarget - gbase) / (unsigned long long)a.k;
        a.counters[TOTAL_ROUNDS] += (unsigned long long)L;
    }
    // the last block to leave resets the grid barrier for the next launch
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&a.ctl[PEXIT], 1) == (int)gridDim.x - 1) {
            a.ctl[PBAR] = 0;
            a.ctl[PEXIT] = 0;
        }
    }
}

// The host builds PeerArgs as a NumPy record; this lets it check the layout matches.
extern "C" __global__ void peer_args_layout(long long* out) {
    out[0] = sizeof(PeerArgs);
    out[1] = offsetof(PeerArgs, off);
    out[2] = offsetof(PeerArgs, peer_ctl);
    out[3] = offsetof(PeerArgs, peer_inbox);
}
