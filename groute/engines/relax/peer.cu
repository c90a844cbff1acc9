// BFS and SSSP on several GPUs in one persistent launch per device: the devices exchange through
// each other's memory (NVLink peer access) and meet at a cross-device barrier, so the host
// launches once per run instead of steering every level (see peer.py). Both kernels
// share their per-thread state (PeerThread), the barrier, the global sums, the push expansion
// (expand_push, on the advance operator: groute/operators/advance.cuh) and the exit protocol
// (finish).
//
// Device `me` owns the vertices [off[me], off[me+1]) (renumbered ids) and their rows.
//
// peer_bfs: the frontier of level L is queue[L & 1] with count own(ctl)[CNT + L % 3]. From at
// most the host's SHARED_SEEDS seeds level 0 is shared (expand_shared_seeds): every device reads
// every seed's row and claims its own targets, with no meeting and no offers. Per level (every
// level of a run from more seeds or with a cutoff of 0), every device:
//   A. adds its frontier size and out-arcs to the global sums (on device 0) and meets the others;
//      all then read the same sums and take the same decision: done, push or pull (Beamer's
//      rule: groute/operators/direction.cuh, as the one-device kernel);
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
//
// peer_sssp: a vertex is *active* when its distance dropped since it was last expanded: its bit
// is set in the local `active` bitmap (improved by this device) or in inbox[R & 1] (improved
// by a peer in round R). One cross-device barrier per round R:
//   scan: every own vertex with an active bit (inbox[(R - 1) & 1], complete since the last
//      barrier, is merged into `active` and cleared) whose distance is below the threshold T
//      joins the frontier (queue0, sorted by vertex) and loses its bit; the others stay active
//      (deferred: counted, their least distance kept);
//   expand: relax every arc of the frontier with the distance the vertex has now: a local
//      target by atomicMin on its distance, setting its active bit if that improved it; a remote
//      target, if the value beats what this device sent for it before (`sent_best`), by two
//      fire-and-forget reductions over NVLink: red.min on the owner's distance and red.or of its
//      bit in the owner's inbox[R & 1]. Improvements are counted, their least value kept;
//   meet: add (frontier, improvements, deferred, least value of both) to the global sums.
//      No improvement and nothing deferred anywhere: done. Otherwise, if the least active value
//      M is not below T, T becomes M + delta (near-far, but jumping to the next occupied bucket
//      instead of creeping by delta); priority off: T is infinite (Bellman-Ford rounds);
//   refresh: after a round that improved at least refresh_at values anywhere, every device
//      lowers its sent_best to what the owners hold (refresh_sent).
//   Offers of round R go to inbox[R & 1] while the owner may still be scanning inbox[(R-1) & 1]
//   (peers start round R as soon as they pass barrier R - 1), so a scan never races with an
//   incoming bit: a bit it clears was set before the barrier, together with its red.min. A
//   red.min of round R that lands while the owner expands the vertex in round R at worst makes
//   that expansion use the lower value; its bit waits in inbox[R & 1] for round R + 1.
//   Termination: every active bit was either kept at this round's scan (deferred) or set by an
//   improvement of this round, so when both global counts are zero no bit is set anywhere.
//
// Each kernel resets its own state first (values, bitmaps, counters, queue counts, the
// sources); peers touch it only after the first cross-device barrier, which this device reaches
// after its reset. The devices meet, give up and report as every persistent kernel does
// (persistent.cuh): the control block, the meeting on device 0's counter with the sums of a
// level added before the arrival and read after it (cross_sync), the timeout.
#include "fused.cuh"
#include "persistent.cuh"

#define MAX_DEVICES 8
// Per level, thread 0 of block 0 stamps the global timer (ns): BFS when the level starts, when
// the sums are known (after A), when the expansion starts (after B on pull levels) and when it
// ends (before C); SSSP when the round starts, after the scan (twice) and when the expansion
// ends (before the meeting): where the time of a level goes, for the first TRACE_LEVELS levels.
#define TRACE_LEVELS 64
// four resident blocks per SM (at most 64 registers): the occupancy the BFS kernel is tuned for
#define MIN_BLOCKS 4
// BFS pull levels: a frontier of at least 1/FRONTIER_SCAN_SHARE of this device's vertices
// becomes the shared bitmap by a scan of the depths (values_to_bitmap), a smaller one by an
// atomic per queued vertex (queue_to_bitmap); 0: always the latter
#ifndef FRONTIER_SCAN_SHARE
#define FRONTIER_SCAN_SHARE 16
#endif

// The control block (persistent.cuh): the protocol's words (RAN: the levels or rounds run), then
// these int32 words of the kernel's own (own(ctl)).
enum PeerWord {
    CNT = 0,            // 3 slots (level % 3): frontier size; BFS peers add to the next one
    PRECV = 3,          // BFS: a peer put offers into this device's inbox this level
    PADVANCES = 4,      // SSSP: threshold advances (written at the end)
    PEER_WORDS = 8
};
// ABORT's reason of the kernel's own: SSSP ran max_rounds rounds (every device at once)
#define ABORT_ROUNDS ABORT_OWN
__device__ __forceinline__ int* own(unsigned long long* ctl) {
    return (int*)(ctl + PROTOCOL_WORDS);
}
// Global sums of a level: frontier vertices; BFS: the frontier's out-arcs (pull_ok only), SSSP:
// improvements; SSSP: deferred active vertices; SSSP: least value among the active vertices (a
// min, not a sum)
enum Sum { SVERTS = 0, SARCS = 1, SIMPROVED = 1, SFAR = 2, SMIN = 3, NSUM = 4 };
#define NO_MIN 0xffffffffffffffffull
// local 64-bit counters: the fused.cuh Counter slots the host reads (PROCESSED, EDGES,
// DEFERRALS, TOTAL_ROUNDS, PULL_ROUNDS) plus these
enum PeerCounter { BIGRES = 12,   // 3 slots (level % 3): (big vertices << 40) | chunks
                   LSUM = 15,     // 3 x NSUM (level % 3): this device's share of the sums
                   TOTALS = 27,   // NSUM: the last level's global sums, copied from device 0
                   REMOTE_OFFERS = 31, BITMAP_WORDS = 32, RECEIVED = 33,
                   REFRESHES = 34,    // SSSP: refresh_sent passes
                   SEED_ARCS = 35,    // BFS: arcs of other devices' seeds read at level 0
                   PEER_COUNTERS = 36 };
// device 0's meeting block (64-bit words): the protocol's, then per level % 3 the NSUM sums
enum Global { GSUM = MEETING_WORDS, GLOBAL_SIZE = 16 };
static_assert(GSUM + 3 * NSUM <= GLOBAL_SIZE, "peer.cu: the sums outgrow device 0's block");

struct PeerArgs {
    const long long* indptr; const int* indices; const weight_t* weights;
    int* dist; int* queue0;
    int* queue1;                // BFS only (SSSP: null)
    unsigned long long* ctl;    // the control block (persistent.cuh, then PeerWord)
    unsigned long long* counters;
    unsigned int* rep;          // BFS: replicated frontier bitmap: region j at word rep_base[j]
    unsigned int* sent;         // BFS: bit per global vertex: remote vertices this device offered
    unsigned int* inbox;        // bit per own vertex, offered by peers; SSSP: two (round & 1)
    unsigned int* active;       // SSSP: bit per own vertex improved by this device or deferred
    int* sent_best;             // SSSP, several devices: least value sent per global vertex
                                // (BFS: null)
    unsigned long long* global; // on device 0: the meeting block
    long long* big_items; int* big_first_chunk;
    unsigned long long* trace;  // TRACE_LEVELS x 4 global-timer stamps of block 0 (see below)
    long long num_arcs;         // out-arcs of the whole graph
    int n_total; int me; int k;
    int pull_ok;                // symmetric graph: pull levels allowed
    int has_big;                // some own vertex has more than WARP_EDGES arcs
    int off[MAX_DEVICES + 1];
    int rep_base[MAX_DEVICES];
    unsigned long long* peer_ctl[MAX_DEVICES]; unsigned int* peer_rep[MAX_DEVICES];
    unsigned int* peer_inbox[MAX_DEVICES];
    int* peer_dist[MAX_DEVICES];
    const long long* peer_indptr[MAX_DEVICES];   // BFS: every device's rows and arcs, for the
    const int* peer_indices[MAX_DEVICES];        // shared first level (SSSP: null)
};

// Offers to a peer are fire-and-forget reductions on its memory (red_min_sys, red_or_sys:
// peer_memory.cuh), ordered before the owner's reads by the cross-device barrier's system-scope
// release and acquire.

struct Shared {
    int off[MAX_DEVICES + 1];
    int rep_base[MAX_DEVICES];
    unsigned int* peer_inbox[MAX_DEVICES];
    int* peer_dist[MAX_DEVICES];
    int inbox_words[MAX_DEVICES];   // words of device j's inbox (SSSP: of each half)
    int offered[MAX_DEVICES];       // BFS: this block offered vertices to device j this level
};

__device__ __forceinline__ void load_shared(const PeerArgs& a, Shared& s) {
    if (threadIdx.x <= MAX_DEVICES) s.off[threadIdx.x] = a.off[threadIdx.x];
    if (threadIdx.x < MAX_DEVICES) {
        const int j = threadIdx.x;
        s.rep_base[j] = a.rep_base[j];
        s.peer_inbox[j] = a.peer_inbox[j];
        s.peer_dist[j] = a.peer_dist[j];
        s.inbox_words[j] = (a.off[j + 1] - a.off[j] + 31) >> 5;
        s.offered[j] = 0;
    }
    __syncthreads();
}

// What every thread of both kernels keeps for the run: its place in the grid, this device's
// vertex range, the barrier targets and the counters `finish` folds.
struct PeerThread {
    long long tid, nthreads, warp, nwarps;
    int lane;
    int me, lo, n_local, words_me;   // this device owns [lo, lo + n_local): words_me bitmap words
    unsigned int bar;                // grid_barrier's target
    unsigned long long gtarget;      // the meeting counter's target (from where the host says)
    long long timeout_ns;            // how long a meeting waits (the host's, per run)
    // the counters `finish` folds (received: BFS only, deferred: SSSP only)
    unsigned long long processed, edges, offers, received, deferred;
};

// Load the shared block (load_shared) and start the thread's PeerThread.
__device__ __forceinline__ PeerThread start_thread(const PeerArgs& a, Shared& s,
                                                   unsigned long long gbase, long long timeout_ns) {
    load_shared(a, s);
    PeerThread t;
    t.tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    t.nthreads = (long long)gridDim.x * blockDim.x;
    t.warp = t.tid >> 5;
    t.nwarps = t.nthreads >> 5;
    t.lane = threadIdx.x & 31;
    t.me = a.me;
    t.lo = s.off[t.me];
    t.n_local = s.off[t.me + 1] - t.lo;
    t.words_me = (t.n_local + 31) >> 5;
    t.bar = 0;
    t.gtarget = gbase;
    t.timeout_ns = timeout_ns;
    t.processed = t.edges = t.offers = t.received = t.deferred = 0;
    return t;
}

// Thread 0 only: zero this device's share of the sums of level slot `slot` and, on device 0 if
// `global`, the global sums, which nobody reads any more and nobody adds to yet (the callers
// say why).
__device__ __forceinline__ void reset_sums(const PeerArgs& a, int slot, bool global) {
    for (int f = 0; f < NSUM; ++f) {
        const unsigned long long zero = f == SMIN ? NO_MIN : 0ull;
        a.counters[LSUM + NSUM * slot + f] = zero;
        if (global && a.me == 0) a.global[GSUM + NSUM * slot + f] = zero;
    }
}

// The start of a run that peer_bfs and peer_sssp share, after each has zeroed its own per-vertex
// state: this device's counters and control words (`first_count`: the size of frontier 0 here),
// a grid barrier (other threads zeroed the counters), then thread 0 clears both level slots of
// the sums (`global_sums`: device 0 the global ones too; see the callers for when that is safe).
// The caller seeds the sources afterwards.
__device__ __forceinline__ void begin_run(const PeerArgs& a, long long tid, unsigned int& bar,
                                          int first_count, bool global_sums) {
    if (tid < PEER_COUNTERS) a.counters[tid] = 0;
    if (tid == 0) {
        own(a.ctl)[CNT] = first_count;
        own(a.ctl)[CNT + 1] = 0;
        own(a.ctl)[PRECV] = 0;
        protocol_begin(a.ctl);
    }
    protocol_barrier(a.ctl, bar);
    if (tid == 0) {
        reset_sums(a, 0, global_sums);
        reset_sums(a, 1, global_sums);
    }
}

// Meet every block of every device (persistent.cuh's protocol_meet). `sums`: first add this
// device's share of level slot `slot` (LSUM, complete after the meeting's first grid barrier)
// to the global sums, afterwards copy the totals into TOTALS, where every thread reads them
// after the second grid barrier.
__device__ void cross_sync(const PeerArgs& a, PeerThread& t, int sums, int slot) {
    protocol_meet(t.tid == 0, a.ctl, t.bar, a.global, t.gtarget, a.k, t.timeout_ns, [=]() {
        if (!sums) return;
        unsigned long long* g = a.global + GSUM + NSUM * slot;
        for (int f = 0; f < NSUM; ++f) {
            const unsigned long long x = __ldcg(&a.counters[LSUM + NSUM * slot + f]);
            // system scope: every device adds into device 0's words at once
            if (f == SMIN) { if (x != NO_MIN) atomicMin_system(&g[f], x); }
            else if (x) atomicAdd_system(&g[f], x);
        }
    }, [=](bool) {
        if (!sums) return;
        const unsigned long long* g = a.global + GSUM + NSUM * slot;
        for (int f = 0; f < NSUM; ++f) a.counters[TOTALS + f] = ld_acquire_sys(&g[f]);
    });
}

// Push expansion of the frontier `cur` (nf own vertices, level slot `slot`): visit(e, value)
// for every out-arc e of a frontier vertex u, value = value_of(u) (advance.cuh). A frontier of
// at most one vertex per warp of the grid gets a warp per vertex; a larger one, 32 vertices per
// warp. Hubs are cut into chunks that warps across the grid share after a grid barrier, so a
// hub's level does not wait for one warp.
template <class ValueOf, class Visit>
__device__ __forceinline__ void expand_push(const PeerArgs& a, PeerThread& t, const int* cur,
                                            long long nf, int slot, ValueOf value_of, Visit visit) {
    auto f = arc_visitor(value_of, visit);
    if (nf <= t.nwarps)
        advance_push_warps(a, f, cur, nf, BIGRES + slot, t.warp, t.nwarps, t.lane, t.processed,
                           t.edges);
    else
        advance_push(a, f, cur, nf, BIGRES + slot, t.warp, t.nwarps, t.lane, t.processed, t.edges);
    if (!a.has_big) return;          // nothing reserved: no barrier, no round trip
    protocol_barrier(a.ctl, t.bar);
    advance_push_big(a, f, __ldcg(&a.counters[BIGRES + slot]), t.warp, t.nwarps, t.lane);
}

// The exit both kernels share: fold the thread's counters (one atomic per warp), report the
// levels and the meetings passed (`gbase`: where the host said the meeting counter stood);
// the last block to leave resets the grid barrier for the next launch (persistent.cuh).
__device__ void finish(const PeerArgs& a, const PeerThread& t, int levels, unsigned long long gbase) {
    unsigned long long processed = t.processed, edges = t.edges, offers = t.offers,
                       received = t.received, deferred = t.deferred;
    for (int o = 16; o > 0; o >>= 1) {
        processed += __shfl_down_sync(0xffffffffu, processed, o);
        edges += __shfl_down_sync(0xffffffffu, edges, o);
        offers += __shfl_down_sync(0xffffffffu, offers, o);
        received += __shfl_down_sync(0xffffffffu, received, o);
        deferred += __shfl_down_sync(0xffffffffu, deferred, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (processed) atomicAdd(&a.counters[PROCESSED], processed);
        if (edges) atomicAdd(&a.counters[EDGES], edges);
        if (offers) atomicAdd(&a.counters[REMOTE_OFFERS], offers);
        if (received) atomicAdd(&a.counters[RECEIVED], received);
        if (deferred) atomicAdd(&a.counters[DEFERRALS], deferred);
    }
    if (t.tid == 0) {
        protocol_result(a.ctl, levels, 0);
        protocol_crossed(a.ctl, t.gtarget, gbase, a.k);
        a.counters[TOTAL_ROUNDS] += (unsigned long long)levels;
    }
    protocol_exit(a.ctl);
}

// ------------------------------------------------------------------------------------ BFS
// Claim own vertex lv (a local id) at depth c if it is unreached, appending it to the next
// queue (slot nslot's count); the plain read filters most losers before the atomic.
__device__ __forceinline__ void claim_own(const PeerArgs& a, int lv, int c, int nslot,
                                          int* next) {
    if (*(volatile int*)&a.dist[lv] != INT_INF) return;
    if (atomicCAS(&a.dist[lv], INT_INF, c) != INT_INF) return;
    queue_push(next, &own(a.ctl)[CNT + nslot], lv);
}

// Offer depth c to vertex v (a global id) found from this device's frontier.
__device__ __forceinline__ void offer(const PeerArgs& a, Shared& s, int v, int c, int nslot,
                                      int* next, unsigned long long& offers) {
    const int j = owner_of(s.off, a.k, v);
    const int lv = v - s.off[j];
    if (j == a.me) {
        claim_own(a, lv, c, nslot, next);
        return;
    }
    if (!bitmap_claim(a.sent, v)) return;
    // system scope: with 3+ devices, several senders OR into the owner's word at once
    red_or_sys(&s.peer_inbox[j][lv >> 5], 1u << (lv & 31));
    s.offered[j] = 1;
    ++offers;
}

// The first level shared (BFS from a few seeds): every device reads every seed's row, from
// the owner's memory where another device owns the seed, and claims the targets it owns at
// depth 1 into its next queue. No device offers anything and none waits for another: the
// devices meet first at level 1, so a device launched late delays nobody's first level, and a
// hub seed's arcs are claimed by all devices at once instead of by its owner, which would
// offer the others' part one reduction at a time. The owner counts the seeds' arcs in its
// stats, as its own expansion would. Returns the seeds' arcs (the same on every device).
__device__ long long expand_shared_seeds(const PeerArgs& a, const Shared& s, PeerThread& t,
                                         const int* __restrict__ seeds, int num_seeds,
                                         int* next, int nslot) {
    long long arcs = 0;
    for (int i = 0; i < num_seeds; ++i) {
        const int u = seeds[i];
        const int o = owner_of(s.off, a.k, u);
        const long long* rows = o == t.me ? a.indptr : a.peer_indptr[o];
        const int* targets = o == t.me ? a.indices : a.peer_indices[o];
        // one lane reads the row's bounds (a peer's words: over NVLink), the warp shares them
        long long beg = 0, end = 0;
        if (t.lane == 0) {
            beg = __ldcg(&rows[u - s.off[o]]);
            end = __ldcg(&rows[u - s.off[o] + 1]);
        }
        beg = __shfl_sync(0xffffffffu, beg, 0);
        end = __shfl_sync(0xffffffffu, end, 0);
        arcs += end - beg;
        if (t.tid == 0) {
            if (o == t.me) {
                ++t.processed;
                t.edges += (unsigned long long)(end - beg);
            } else {
                a.counters[SEED_ARCS] += (unsigned long long)(end - beg);   // read from o
            }
        }
        for (long long e = beg + t.tid; e < end; e += t.nthreads) {
            const int v = __ldcg(&targets[e]);
            if (v >= t.lo && v < t.lo + t.n_local) claim_own(a, v - t.lo, 1, nslot, next);
        }
    }
    return arcs;
}

// The pull side of a BFS level (advance_pull): an unreached own vertex is claimed, at depth c, by
// the first neighbour set in the replicated frontier bitmap (region j: device j's vertices).
struct PullBitmap {
    const PeerArgs& a;
    const Shared& s;
    int c;
    int* next;
    int* next_count;
    __device__ __forceinline__ bool unreached(long long v) const {
        return *(volatile int*)&a.dist[v] == INT_INF;
    }
    __device__ __forceinline__ bool in_frontier(int u) const {
        const int j = owner_of(s.off, a.k, u);
        return bitmap_test(a.rep + s.rep_base[j], u - s.off[j]);
    }
    __device__ __forceinline__ bool claim(long long v) const {
        a.dist[v] = c;
        queue_push(next, next_count, (int)v);
        return true;
    }
};

// seeds: the num_seeds sources this device owns (local ids, distinct); max_level: the frontier
// of that level is not expanded (the depth limit; INT_MAX: none); shared: num_shared > 0 (the
// same on every device, and max_level > 0): every source (global ids, distinct), and level 0
// is expand_shared_seeds on every device, with no meeting.
extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
peer_bfs(const PeerArgs* __restrict__ pa, const int* __restrict__ seeds, int num_seeds,
         unsigned long long gbase, long long timeout_ns, int max_level,
         const int* __restrict__ shared, int num_shared) {
    const PeerArgs& a = *pa;
    __shared__ Shared s;
    PeerThread t = start_thread(a, s, gbase, timeout_ns);
    // this run's state: nobody else touches it before the first cross-device barrier
    for (long long v = t.tid; v < t.n_local; v += t.nthreads) a.dist[v] = INT_INF;
    for (long long w = t.tid; w < ((long long)a.n_total + 31) >> 5; w += t.nthreads) a.sent[w] = 0u;
    // the global sums need no reset: the last level of every run adds only zeros, and each
    // level clears the slot of the level after next (device 0 clears it before the first
    // cross-device barrier of a run could let a peer add to it)
    begin_run(a, t.tid, t.bar, num_seeds, false);
    for (long long i = t.tid; i < num_seeds; i += t.nthreads) {
        a.dist[seeds[i]] = 0;
        a.queue0[i] = seeds[i];
    }
    protocol_barrier(a.ctl, t.bar);
    long long explored = 0;
    bool pulling = false;
    int L = 0;
    for (;; ++L) {
        // C of the last level has passed: frontier L is complete everywhere
        const int slot = L % 3, nslot = (L + 1) % 3;
        const bool stamp = t.tid == 0 && L < TRACE_LEVELS && a.trace != nullptr;
        if (stamp) a.trace[4 * L] = global_timer();
        const int nf = __ldcg(&own(a.ctl)[CNT + slot]);
        int* cur = (L & 1) ? a.queue1 : a.queue0;
        int* next = (L & 1) ? a.queue0 : a.queue1;
        if (t.tid == 0) {
            // slots of level L + 2, last read during level L - 1 (device 0 is past C of
            // level L - 1, so every device has read the sums of A of level L - 1; after a
            // shared level 0 no level has used slot 0 yet when level 1 clears it)
            own(a.ctl)[CNT + (L + 2) % 3] = 0;
            a.counters[BIGRES + (L + 2) % 3] = 0;
            reset_sums(a, (L + 2) % 3, true);
            a.counters[LSUM + NSUM * slot + SVERTS] = (unsigned long long)nf;
        }
        if (L == 0 && num_shared > 0) {
            // level 0 shared: a push (the direction rule's level-0 sums are the seeds' arcs,
            // which every device knows), its appends complete at the grid barrier
            if (stamp) a.trace[1] = a.trace[2] = global_timer();
            explored = expand_shared_seeds(a, s, t, shared, num_shared, next, nslot);
            protocol_barrier(a.ctl, t.bar);
            if (stamp) a.trace[3] = global_timer();
            continue;
        }
        // A. the frontier's arcs, for the push -> pull rule (pull -> push needs only its size;
        // without pull levels, nothing)
        if (a.pull_ok && !pulling)
            count_frontier_arcs(a, cur, nf, t.tid, t.nthreads, t.lane, a.counters,
                                LSUM + NSUM * slot + SARCS);
        cross_sync(a, t, 1, slot);
        if (protocol_aborted(a.ctl)) break;
        const long long g_verts = (long long)__ldcg(&a.counters[TOTALS + SVERTS]);
        if (stamp) a.trace[4 * L + 1] = global_timer();
        if (g_verts == 0 || L >= max_level) break;
        if (pulling) {
            pulling = direction_stay_pulling(g_verts, a.n_total);
        } else if (a.pull_ok) {
            const long long g_arcs = (long long)__ldcg(&a.counters[TOTALS + SARCS]);
            pulling = direction_push_to_pull(g_arcs, a.num_arcs - explored);
            if (!pulling) explored += g_arcs;
        }
        const int c = L + 1;
        if (pulling) {
            // B. this device's frontier as bits, into its region of every device's bitmap
            // a large frontier's bits from the depths (frontier L: depth L), read in order; a
            // small one's by an atomic per queued vertex
            unsigned int* mine = a.rep + s.rep_base[t.me];
            if (FRONTIER_SCAN_SHARE > 0 && FRONTIER_SCAN_SHARE * (long long)nf >= t.n_local) {
                values_to_bitmap(a.dist, L, t.n_local, mine, t.warp, t.nwarps, t.lane);
            } else {
                for (long long w = t.tid; w < t.words_me; w += t.nthreads) mine[w] = 0u;
                protocol_barrier(a.ctl, t.bar);
                queue_to_bitmap(cur, nf, mine, t.tid, t.nthreads);
            }
            protocol_barrier(a.ctl, t.bar);
            for (long long w = t.tid; w < t.words_me; w += t.nthreads) {
                const unsigned int bits = __ldcg(&mine[w]);
                for (int j = 0; j < a.k; ++j)
                    if (j != t.me) a.peer_rep[j][s.rep_base[t.me] + w] = bits;
            }
            if (t.tid == 0) a.counters[BITMAP_WORDS] += (unsigned long long)t.words_me * (a.k - 1);
            cross_sync(a, t, 0, 0);
            if (protocol_aborted(a.ctl)) break;
            if (stamp) a.trace[4 * L + 2] = global_timer();
            // every unreached own vertex looks for a parent in the frontier
            PullBitmap f{a, s, c, next, &own(a.ctl)[CNT + nslot]};
            advance_pull(a, f, t.n_local, t.tid, t.nthreads, t.processed, t.edges);
            if (t.tid == 0) a.counters[PULL_ROUNDS] += 1;
        } else {
            if (stamp) a.trace[4 * L + 2] = global_timer();
            expand_push(a, t, cur, nf, slot, [](int) { return 0; },
                        [&](long long e, int) {
                            offer(a, s, a.indices[e], c, nslot, next, t.offers);
                        });
            // raise RECEIVED at every device this block offered vertices to
            __syncthreads();
            if (threadIdx.x < a.k && s.offered[threadIdx.x]) {
                own(a.peer_ctl[threadIdx.x])[PRECV] = 1;
                s.offered[threadIdx.x] = 0;
            }
        }
        // C. every device's appends into the next queues have landed
        if (a.trace != nullptr && L < TRACE_LEVELS) {     // uniform: every block or none
            protocol_barrier(a.ctl, t.bar);
            if (stamp) a.trace[4 * L + 3] = global_timer();
        }
        cross_sync(a, t, 0, 0);
        if (protocol_aborted(a.ctl)) break;
        if (__ldcg(&own(a.ctl)[PRECV])) {
            // claim what the peers offered: unreached vertices get depth L + 1
            for (long long w = t.tid; w < t.words_me; w += t.nthreads) {
                unsigned int bits = __ldcg(&a.inbox[w]);
                if (!bits) continue;
                a.inbox[w] = 0u;
                while (bits) {
                    const int v = (int)(w << 5) + __ffs(bits) - 1;
                    bits &= bits - 1;
                    if (*(volatile int*)&a.dist[v] != INT_INF) continue;
                    a.dist[v] = c;
                    ++t.received;
                    queue_push(next, &own(a.ctl)[CNT + nslot], v);
                }
            }
            protocol_barrier(a.ctl, t.bar);
            // peers raise it again only after the next cross-device barrier, which this
            // device reaches after this
            if (t.tid == 0) own(a.ctl)[PRECV] = 0;
        }
    }
    finish(a, t, L, gbase);
}

// ----------------------------------------------------------------------------------- SSSP
// Relax arc e (target v, a global id) from a frontier vertex whose value is d in round `round`.
__device__ __forceinline__ void relax(const PeerArgs& a, const Shared& s, long long e, int d,
                                      int round, unsigned long long& improved, int& least,
                                      unsigned long long& offers) {
    const int v = a.indices[e];
    const int c = arc_value(d, a.weights, e);
    const int j = owner_of(s.off, a.k, v);
    const int lv = v - s.off[j];
    if (j == a.me) {
        if (c >= *(volatile int*)&a.dist[lv]) return;          // most offers lose: skip the atomic
        if (c >= atomicMin(&a.dist[lv], c)) return;
        bitmap_set(a.active, lv);
    } else {
        if (c >= *(volatile int*)&a.sent_best[v]) return;      // vertex refinement (sent before)
        if (c >= atomicMin(&a.sent_best[v], c)) return;
        red_min_sys(&s.peer_dist[j][lv], c);
        red_or_sys(&s.peer_inbox[j][(round & 1) * s.inbox_words[j] + (lv >> 5)], 1u << (lv & 31));
        ++offers;
    }
    ++improved;
    least = c < least ? c : least;
}

// Lower this device's sent_best of every peer's vertex to the value its owner holds now (coalesced
// reads of each peer's whole distance array, four per thread in flight). sent_best only filters
// offers: one that is not below the owner's value cannot improve it, and an owner's value only
// falls, so any value read is safe to filter with, however stale. Without it a device offers
// every remote target it has not offered a better value before, though its owner may have
// reached it long ago: on one device those offers lose at the distance's own check, across
// devices each costs a random atomic on sent_best and two reductions over NVLink.
__device__ __forceinline__ void refresh_sent(const PeerArgs& a, const Shared& s,
                                             const PeerThread& t) {
    for (int j = 0; j < a.k; ++j) {
        if (j == t.me) continue;
        const int* __restrict__ far = s.peer_dist[j];
        int* best = a.sent_best + s.off[j];
        const long long n = s.off[j + 1] - s.off[j];
        for (long long base = t.tid; base < n; base += 4 * t.nthreads) {
            int d[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const long long v = base + u * t.nthreads;
                d[u] = v < n ? __ldcg(&far[v]) : VALUE_INF;
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const long long v = base + u * t.nthreads;
                if (v < n && d[u] < *(volatile int*)&best[v]) atomicMin(&best[v], d[u]);
            }
        }
    }
}

// delta: the soft-priority step (value bits; VALUE_INF: priority off), also the first threshold;
// max_rounds: give up (ABORT 2) after that many rounds, all devices alike; refresh_at: after a
// round that improved at least this many values anywhere, refresh_sent (negative: never).
extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
peer_sssp(const PeerArgs* __restrict__ pa, const int* __restrict__ seeds, int num_seeds,
          unsigned long long gbase, long long timeout_ns, int delta, int max_rounds,
          long long refresh_at) {
    const PeerArgs& a = *pa;
    __shared__ Shared s;
    PeerThread t = start_thread(a, s, gbase, timeout_ns);
    int thr = delta;                 // the first threshold: the sources have value 0
    // this run's state: nobody else touches it before the first cross-device barrier
    for (long long v = t.tid; v < t.n_local; v += t.nthreads) a.dist[v] = VALUE_INF;
    for (long long w = t.tid; w < t.words_me; w += t.nthreads) {
        a.active[w] = 0u;
        a.inbox[w] = 0u;
        a.inbox[t.words_me + w] = 0u;
    }
    if (a.k > 1)
        for (long long v = t.tid; v < a.n_total; v += t.nthreads) a.sent_best[v] = VALUE_INF;
    begin_run(a, t.tid, t.bar, 0, true);
    for (long long i = t.tid; i < num_seeds; i += t.nthreads) {
        a.dist[seeds[i]] = 0;
        atomicOr(&a.active[seeds[i] >> 5], 1u << (seeds[i] & 31));
    }
    // round 0 already sends offers (and sums): every device must have reset its state first
    cross_sync(a, t, 0, 0);
    int advances = 0;
    int R = 0;
    for (;; ++R) {
        if (protocol_aborted(a.ctl)) break;
        if (R >= max_rounds) {
            if (t.tid == 0) a.ctl[PROTO_ABORT] = ABORT_ROUNDS;
            break;
        }
        // the meeting of round R - 1 has passed: every offer of round R - 1 is in inbox[(R-1) & 1]
        const int slot = R % 3;
        const bool stamp = t.tid == 0 && R < TRACE_LEVELS && a.trace != nullptr;
        if (stamp) a.trace[4 * R] = global_timer();
        if (t.tid == 0) {
            // slots of round R + 1, last read at the meeting of round R - 2 (device 0 is past
            // the meeting of round R - 1, so every device has read the totals of R - 2)
            own(a.ctl)[CNT + (R + 1) % 3] = 0;
            a.counters[BIGRES + (R + 1) % 3] = 0;
            reset_sums(a, (R + 1) % 3, true);
        }
        // scan: the frontier is every active own vertex below the threshold, in vertex order
        unsigned int* in = a.inbox + ((R - 1) & 1) * t.words_me;
        unsigned long long far = 0;
        int least = VALUE_INF;
        for (long long base = t.warp * 32; base < t.words_me; base += t.nwarps * 32) {
            const long long w = base + t.lane;
            unsigned int take = 0;
            if (w < t.words_me) {
                const unsigned int peers = __ldcg(&in[w]);
                if (peers) in[w] = 0u;
                const unsigned int mine = __ldcg(&a.active[w]);
                unsigned int bits = mine | peers, keep = 0;
                while (bits) {
                    const int b = __ffs(bits) - 1;
                    bits &= bits - 1;
                    const int d = *(volatile int*)&a.dist[(w << 5) + b];
                    if (d < thr) {
                        take |= 1u << b;
                    } else {
                        keep |= 1u << b;
                        ++far;
                        least = d < least ? d : least;
                    }
                }
                if (keep != mine) a.active[w] = keep;
            }
            int slot_at = warp_reserve(&own(a.ctl)[CNT + slot], __popc(take), t.lane);
            while (take) {
                const int b = __ffs(take) - 1;
                take &= take - 1;
                a.queue0[slot_at++] = (int)(w << 5) + b;
            }
        }
        protocol_barrier(a.ctl, t.bar);
        const int nf = __ldcg(&own(a.ctl)[CNT + slot]);
        if (stamp) a.trace[4 * R + 1] = a.trace[4 * R + 2] = global_timer();
        // expand: the frontier's arcs, with the value each vertex has now
        unsigned long long improved = 0;
        expand_push(a, t, a.queue0, nf, slot,
                    [&](int u) { return *(volatile int*)&a.dist[u]; },
                    [&](long long e, int d) { relax(a, s, e, d, R, improved, least, t.offers); });
        t.deferred += far;
        // this device's share of the round's sums: one atomic per warp
        for (int o = 16; o > 0; o >>= 1) {
            improved += __shfl_down_sync(0xffffffffu, improved, o);
            far += __shfl_down_sync(0xffffffffu, far, o);
            least = min(least, __shfl_down_sync(0xffffffffu, least, o));
        }
        if (t.lane == 0) {
            unsigned long long* mine = &a.counters[LSUM + NSUM * slot];
            if (improved) atomicAdd(&mine[SIMPROVED], improved);
            if (far) atomicAdd(&mine[SFAR], far);
            if (least != VALUE_INF) atomicMin(&mine[SMIN], (unsigned long long)least);
        }
        if (t.tid == 0) a.counters[LSUM + NSUM * slot + SVERTS] = (unsigned long long)nf;
        if (stamp) a.trace[4 * R + 3] = global_timer();
        cross_sync(a, t, 1, slot);
        if (protocol_aborted(a.ctl)) break;
        if (__ldcg(&a.counters[TOTALS + SIMPROVED]) == 0 && __ldcg(&a.counters[TOTALS + SFAR]) == 0)
            break;
        // the least active value: every active bit was deferred at this scan or set by an
        // improvement of this round, so the totals hold it (or less: an offer that lost)
        const unsigned long long m64 = __ldcg(&a.counters[TOTALS + SMIN]);
        const int m = (int)m64;
        if (m64 != NO_MIN && m >= thr) {
            thr = next_threshold(thr, m, delta);
            ++advances;
        }
        // every device reads the same totals: all refresh or none. No barrier after it: an
        // expansion that reads sent_best before its refresh only offers more
        if (refresh_at >= 0 && a.k > 1 &&
            __ldcg(&a.counters[TOTALS + SIMPROVED]) >= (unsigned long long)refresh_at) {
            refresh_sent(a, s, t);
            if (t.tid == 0) a.counters[REFRESHES] += 1;
        }
    }
    if (t.tid == 0) own(a.ctl)[PADVANCES] = advances;
    finish(a, t, protocol_aborted(a.ctl) ? R : R + 1, gbase);
}

// The host builds PeerArgs as a NumPy record; this lets it check the layout matches.
extern "C" __global__ void peer_args_layout(long long* out) {
    out[0] = sizeof(PeerArgs);
    out[1] = offsetof(PeerArgs, off);
    out[2] = offsetof(PeerArgs, peer_ctl);
    out[3] = offsetof(PeerArgs, peer_dist);
}
