// The fused relaxation worker on several GPUs with device-initiated links: BFS / SSSP rounds run
// asynchronously on every GPU, in one launch per GPU, and the host is out of the loop.
//
// Each GPU runs the rounds of fused.cu (expand the near queue into the next, soft priority
// with its own threshold, a grid barrier per round), but an offer to a vertex another GPU owns
// is written straight into that owner's memory: a ring of items per (sender, owner) pair that
// lives with the owner (Groute's Link, packetised per round and pushed by the device). No GPU
// waits for another; there is no cross-device barrier per round, only counters:
//
// - Sender: a round's items for owner j take consecutive positions, reserved with one atomic per
//   group of lanes (aggregated_reserve_labeled) on the round's count OUTR[r % 3][j], from the
//   round's first position BASE(r) on. Only positions below the round's limit LIM(r) (the
//   owner's consumption plus cap, as the bookkeeper last heard it; one value for the whole
//   round) are written (ring slot p % cap, cap a power of two); an offer beyond it restores
//   sent_best and queues its vertex again (back-pressure: nothing is lost). So a round writes a
//   prefix of its positions, and the next round starts where the writing stopped:
//   BASE(r + 1) = min(BASE(r) + OUTR(r), LIM(r)), which every thread computes from round r's
//   slots after barrier r (round_base). No position is skipped, so everything below a
//   published count is an item.
// - Bookkeeper (lane 0 of warp 0 of block 0; that warp does no expansion): during round r, with
//   round r - 1 final, it publishes every item written through round r - 1 to each owner
//   (COMMIT_IN[me] there, after a system-scope fence: the items land first), tells each sender
//   how far this GPU has applied its ring (CONSUMED; once a quarter ring is free, or when idle),
//   snapshots the senders' counts into round r + 1's inbox ranges (at most cap positions), and
//   sets round r + 1's limits. Everything it writes for round r + 1 is read after barrier r, from
//   slots nobody rewrites for three rounds.
// - Receiver: round r also applies the items of its inbox range (improve_local, as an absorb).
// - Termination: one signed counter W in GPU 0's memory holds all work: queued near and far
//   items plus items written and not yet applied. Each bookkeeper keeps its GPU's change since
//   it last added (next queue - this queue + far pushes + items written - items applied - far
//   items split, round by round) and adds it to W before it publishes items (so a receiver can
//   never subtract an item that was not added: the publication is a release after the add, and
//   the receiver's later add is ordered after the sender's on W) and whenever its GPU is idle.
//   W then counts each GPU as it stood at its last add, which never hides work: what a GPU
//   received since then is still counted by its senders. Each seed's owner adds its queued
//   seeds before the GPUs meet once at the start (the only meeting: persistent.cuh, whose
//   control block each GPU reports in). A GPU with no queued work, no far items and an empty
//   inbox range reads W; at 0 nothing is queued or in flight anywhere, and it stops after the
//   round. An idle GPU that sees W > 0 for longer than the meeting timeout (a peer stopped)
//   gives up and tells the others (persistent.cuh's GAVE_UP flag): the host raises.
// - Start: each GPU's state is reset by one wide launch of reset_linked (values, queues,
//   counters, link state, control words) queued on every GPU before any traverse_linked
//   starts; traverse_linked places its seeds, then meets the others. Peers write into a
//   GPU's memory (rings, COMMIT_IN) and read it (CONSUMED) only from round 0 on, after the
//   start meeting, which the GPU reaches after its reset; before it they touch only device
//   0's meeting block and W, which no kernel resets (the host settles them between runs).
// The grid barrier between rounds is the fused worker's (fused.cu's grid_sync on its own
// control words, which it shares with one GPU), so the protocol's GRID and EXIT words stay 0.
#include "fused.cuh"
#include "persistent.cuh"

#define LINK_MAX 8

// The link state of one GPU: 64-bit words (lu) and ints (li). [3] = by round % 3.
enum LinkU64 {
    L_COMMIT_IN = 0,        // [LINK_MAX] written by sender s: items it has written to this GPU
    L_CONSUMED = 8,         // [LINK_MAX] items of sender s's ring this GPU has applied
    L_BASE = 24,            // [3][LINK_MAX] first position of round r's items for owner j
    L_IN_BEGIN = 48,        // [3][LINK_MAX] the range of sender s's ring round r applies
    L_IN_END = 72,          // [3][LINK_MAX]
    L_DELTA = 96,           // [3] change of the work count in round r beyond the queue sizes
    L_SENT = 99,            // items written into the owners' rings
    L_FULL = 100,           // offers that found a ring full (their vertices queued again)
    L_RECEIVED = 101,       // items applied from the inbox
    L_IDLE = 102,           // rounds this GPU had nothing to do
    L_PUBLISHED = 103,      // rounds that published items (one system-scope fence each)
    L_LIM = 104,            // [3][LINK_MAX] round r's limit for owner j
    L_U64 = 128
};
enum LinkInt {
    L_OUTR = 0,             // [3][LINK_MAX] positions reserved in round r for owner j
    L_STOP = 24,            // [3] 0 go on, else why it stops (LinkStop)
    L_INT = 28
};
// Why a GPU stops (the status of its control block's RESULT): the work ran out everywhere, it
// gave up (it timed out, ABORT says so, or another GPU gave up), or it ran max_rounds rounds.
enum LinkStop { STOP_DONE = 1, STOP_GAVE_UP = 2, STOP_ROUNDS = 3 };
// ABORT's reason of the kernel's own: this GPU ran max_rounds rounds
#define ABORT_ROUNDS ABORT_OWN

struct Links {
    long long* ring_out[LINK_MAX];                    // owner j's ring for this GPU's items
    unsigned long long* commit_out[LINK_MAX];         // &owner j's lu[L_COMMIT_IN + me]
    const unsigned long long* consumed_at[LINK_MAX];  // &owner j's lu[L_CONSUMED + me]
    long long* ring_in;                               // this GPU's rings, sender s at s * cap
    unsigned long long* lu;
    int* li;
    unsigned long long* ctl;                          // this GPU's control block (persistent.cuh)
    unsigned long long* meeting;                      // GPU 0: the meeting block
    unsigned long long* work;                         // GPU 0: W (two's complement)
    long long cap;                                    // ring capacity (items, a power of two)
    int me;
    int k;
};

// The first position of round r's items for owner j (see the top of the file).
__device__ __forceinline__ unsigned long long round_base(const Links& lk, int r, int j) {
    const int prev = (r + 2) % 3;
    const unsigned long long b = __ldcg(&lk.lu[L_BASE + prev * LINK_MAX + j]);
    const unsigned long long n = (unsigned long long)__ldcg(&lk.li[L_OUTR + prev * LINK_MAX + j]);
    const unsigned long long lim = __ldcg(&lk.lu[L_LIM + prev * LINK_MAX + j]);
    return min(b + n, lim);
}

// Offer (v, c) to owner j in round r: false when j's ring has no room this round.
__device__ __forceinline__ bool linked_send(const Links& lk, int r, int j, int v, int c) {
    const int slot = aggregated_reserve_labeled(&lk.li[L_OUTR + (r % 3) * LINK_MAX], j);
    const unsigned long long pos = round_base(lk, r, j) + (unsigned long long)slot;
    if (pos >= __ldcg(&lk.lu[L_LIM + (r % 3) * LINK_MAX + j])) {
        atomicAdd(&lk.lu[L_FULL], 1ull);
        return false;
    }
    __stcg(&lk.ring_out[j][pos & (unsigned long long)(lk.cap - 1)], pack_item(v, c));
    return true;
}

#undef LINKED
#define LINKED 1
#include "fused.cu"

// What the bookkeeper keeps between rounds (registers of one thread).
struct Keeper {
    unsigned long long commit[LINK_MAX];     // items written into owner j's ring so far
    unsigned long long consumed[LINK_MAX];   // what this GPU last told sender s
    unsigned long long limit[LINK_MAX];      // owner j's consumption, as last heard, plus cap
    unsigned long long idle_since;
    long long unsent;                        // change of work not yet added to W
    int cur_prev;                            // the near queue of the last round
};

// The bookkeeper's part of round r (see the top of the file). idle: round r has nothing to do.
__device__ void keep_books(const Links& lk, Keeper& kp, int r, int cur_n, bool idle,
                           int max_rounds, long long timeout_ns) {
    const int k = lk.k, me = lk.me;
    const int prev = (r + 2) % 3, now = r % 3, next = (r + 1) % 3;
    const unsigned long long cap = (unsigned long long)lk.cap;
    if (r > 0) {
        bool publish = false;
        long long delta = (long long)cur_n - kp.cur_prev + (long long)__ldcg(&lk.lu[L_DELTA + prev]);
        for (int j = 0; j < k; ++j) {
            if (j == me) continue;
            const unsigned long long base = round_base(lk, r, j);   // round r - 1 wrote up to it
            if (base != kp.commit[j]) {
                delta += (long long)(base - kp.commit[j]);
                lk.lu[L_SENT] += base - kp.commit[j];
                kp.commit[j] = base;
                publish = true;
            }
            // how far round r - 1 applied sender j's items: tell j once a quarter ring is free
            // (or when idle), so it may write on
            const unsigned long long done = __ldcg(&lk.lu[L_IN_END + prev * LINK_MAX + j]);
            if (done != kp.consumed[j] && (idle || done - kp.consumed[j] >= cap / 4)) {
                kp.consumed[j] = done;
                st_relaxed_sys64(&lk.lu[L_CONSUMED + j], done);
            }
        }
        kp.unsent += delta;
        if (kp.unsent && (publish || idle)) {
            red_add_sys64(lk.work, (unsigned long long)kp.unsent);
            kp.unsent = 0;
        }
        if (publish) {
            // the items of round r - 1 and the add above reach every GPU before the counts
            // that announce them
            __threadfence_system();
            lk.lu[L_PUBLISHED] += 1;
            for (int j = 0; j < k; ++j)
                if (j != me) st_relaxed_sys64(lk.commit_out[j], kp.commit[j]);
        }
    }
    kp.cur_prev = cur_n;
    // round r's first positions (read in round r + 1), round r + 1's limits and inbox ranges
    for (int j = 0; j < k; ++j) {
        if (j == me) continue;
        __stcg(&lk.lu[L_BASE + now * LINK_MAX + j], kp.commit[j]);
        // room in owner j's ring: ask how far it got once half of the last answer is used
        if (kp.commit[j] + cap / 2 >= kp.limit[j])
            kp.limit[j] = ld_acquire_sys(lk.consumed_at[j]) + cap;
        __stcg(&lk.lu[L_LIM + next * LINK_MAX + j], kp.limit[j]);
        const unsigned long long b = __ldcg(&lk.lu[L_IN_END + now * LINK_MAX + j]);
        unsigned long long e = ld_acquire_sys(&lk.lu[L_COMMIT_IN + j]);
        if (e > b + cap) e = b + cap;
        __stcg(&lk.lu[L_IN_BEGIN + next * LINK_MAX + j], b);
        __stcg(&lk.lu[L_IN_END + next * LINK_MAX + j], e);
    }
    int stop = r + 1 >= max_rounds ? STOP_ROUNDS : 0;
    if (idle) {
        lk.lu[L_IDLE] += 1;
        const unsigned long long now_ns = global_timer();
        if (kp.idle_since == 0) kp.idle_since = now_ns;
        if (ld_acquire_sys(lk.work) == 0) {
            stop = STOP_DONE;
        } else if (protocol_gave_up(lk.meeting)) {
            stop = STOP_GAVE_UP;                // another GPU stopped: W will not reach 0
        } else if (now_ns - kp.idle_since > (unsigned long long)timeout_ns) {
            stop = STOP_GAVE_UP;
            protocol_abort(lk.ctl, lk.meeting, ABORT_TIMEOUT);
        }
    } else {
        kp.idle_since = 0;
    }
    // a round cap is this GPU's alone (its rounds are its own): it tells the others
    if (stop == STOP_ROUNDS) protocol_abort(lk.ctl, lk.meeting, ABORT_ROUNDS);
    __stcg(&lk.li[L_STOP + next], stop);
}

// Sum a per-thread count over the warp and add it to *p (one atomic per warp, none if zero).
__device__ __forceinline__ void warp_add(unsigned long long* p, long long v, int lane) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0 && v) atomicAdd(p, (unsigned long long)v);
}

// This GPU's state at the start of a run, by every thread of the grid: the worker's
// (reset_worker, fused.cu: values, in_near, sent_best, counters, control words: `queued` seeds
// in round 0's queue, threshold `delta`, `ceiling`), the link state zero with every limit at
// cap (nothing applied yet: a ring of room) and the protocol's ABORT. Then the seeds can be
// placed (place_seeds).
__device__ __forceinline__ void reset_run(const Args& a, const Links& lk, long long tid,
                                          long long nthreads, int queued, int delta,
                                          int ceiling) {
    reset_worker(a, tid, nthreads, queued, delta, ceiling);
    for (long long w = tid; w < L_U64; w += nthreads)
        lk.lu[w] = w >= L_LIM && w < L_LIM + 3 * LINK_MAX ? (unsigned long long)lk.cap : 0ull;
    for (long long w = tid; w < L_INT; w += nthreads) lk.li[w] = 0;
    if (tid == 0) protocol_begin(lk.ctl);
}

// A run's reset of this GPU's state (reset_run), launched plainly (no barrier in it) on a wide
// grid of its own: the fills of the values and sent_best stream at the GPU's bandwidth instead
// of on traverse_linked's narrow grid. queued: the seeds round 0's queue holds (0 where the
// ceiling is 0 or it owns none).
extern "C" __global__ void reset_linked(const Args* __restrict__ pa, const Links* __restrict__ pl,
                                        int queued, int delta, int ceiling) {
    reset_run(*pa, *pl, global_rank(), global_size(), queued, delta, ceiling);
}

// One launch per GPU for the whole run, from the seeds the host staged: seeds, num_seeds (this
// GPU's, local ids; null and 0 where it owns none), ceiling (values from which an improved
// vertex is not queued: BFS's depth limit; VALUE_INF: none), after reset_linked's launch.
// delta: soft-priority step and first threshold (VALUE_INF: none); filter: read before the
// atomicMin (wide grids).
extern "C" __global__ void RESIDENT_BOUNDS
traverse_linked(const Args* __restrict__ pa, const Links* __restrict__ pl,
                const int* __restrict__ seeds, int num_seeds, int delta, int ceiling,
                int max_rounds, int filter, int has_big, unsigned long long gbase,
                long long timeout_ns) {
    const Args a = *pa;
    int thr = delta;                    // this GPU's threshold (the seeds have value 0)
    const Links& lk = *pl;
    const long long tid = global_rank(), nthreads = global_size();
    const int lane = threadIdx.x & 31;
    const long long warp = tid >> 5, nwarps = nthreads >> 5;
    // warp 0 keeps the books; the others share the work
    const long long wwarp = warp - 1, nwwarps = nwarps - 1;
    const long long wtid = tid - 32, nwthreads = nthreads - 32;
    const bool keeper = tid == 0;
    unsigned long long processed = 0, edges = 0, deferrals = 0;
    unsigned int bar = 0;
    int r = 0, fc = 0;
    // a seed has value 0: queued below the ceiling (improve_local's rule)
    const bool queued = 0 < ceiling;
    place_seeds(a, seeds, num_seeds, queued, tid, nthreads);
    Keeper kp;
    if (keeper) {
        for (int j = 0; j < LINK_MAX; ++j) {
            kp.commit[j] = 0;
            kp.consumed[j] = 0;
            kp.limit[j] = (unsigned long long)lk.cap;
        }
        kp.idle_since = 0;
        kp.unsent = 0;
        kp.cur_prev = 0;
        // the queued seeds count before anyone can look at W
        if (queued && num_seeds) atomicAdd_system(lk.work, (unsigned long long)num_seeds);
        unsigned long long gtarget = gbase;
        if (!protocol_arrive(lk.ctl, lk.meeting, gtarget, lk.k, timeout_ns)) {
            lk.li[L_STOP] = STOP_GAVE_UP;
            protocol_abort(lk.ctl, lk.meeting, ABORT_TIMEOUT);      // the others stop too
        }
        protocol_crossed(lk.ctl, gtarget, gbase, lk.k);
    }
    // the seeds are placed and the meeting passed (or given up) before round 0
    grid_sync(a, bar);
    while (true) {
        if (__ldcg(&lk.li[L_STOP + r % 3])) break;
        const int s3 = r % 3, n3 = (r + 1) % 3;
        const int cur_n = __ldcg(&a.ctl[NEAR_COUNT + s3]);
        int* cur = (r & 1) ? a.near1 : a.near0;
        bool has_in = false;
        for (int s = 0; s < lk.k; ++s)
            has_in |= __ldcg(&lk.lu[L_IN_END + s3 * LINK_MAX + s]) >
                      __ldcg(&lk.lu[L_IN_BEGIN + s3 * LINK_MAX + s]);
        const int far_n = __ldcg(&a.ctl[FAR_COUNT + fc]);
        const bool far_any = far_n > 0 || __ldcg(&a.ctl[FAR_OVERFLOW + fc]);
        // nobody pushes far items in a round with neither queue nor inbox: all read alike
        const bool split = cur_n == 0 && !has_in && far_any && thr != VALUE_INF;
        if (keeper) {
            keep_books(lk, kp, r, cur_n, cur_n == 0 && !has_in && !split, max_rounds, timeout_ns);
            // round r + 1's slots, last read in round r - 1
            a.ctl[NEAR_COUNT + (r + 2) % 3] = 0;
            for (int j = 0; j < LINK_MAX; ++j) lk.li[L_OUTR + n3 * LINK_MAX + j] = 0;
            lk.lu[L_DELTA + n3] = 0;
            a.counters[BIG_RESERVE + n3] = 0;
        }
        Sink q = round_sink(a, r, fc, thr, filter);
        q.lk = pl;
        q.round = r;
        const unsigned long long deferrals_before = deferrals;
        long long applied = 0;
        if (split) {
            // the near work ran out here: move this GPU's threshold, split its far queue into
            // the next round's queue; the far items it held are consumed
            const int new_thr = next_threshold(thr, __ldcg(&a.ctl[FAR_MIN]), delta);
            if (keeper) atomicAdd(&lk.lu[L_DELTA + s3], (unsigned long long)(-(long long)far_n));
            split_far(a, bar, fc, thr, new_thr, q.next, q.next_count, r + 1, deferrals);
            thr = new_thr;
        } else if (warp > 0) {
            expand_near(a, q, cur, cur_n, wwarp, nwwarps, lane, s3, processed, edges, deferrals);
            for (int s = 0; s < lk.k; ++s) {
                const unsigned long long b = __ldcg(&lk.lu[L_IN_BEGIN + s3 * LINK_MAX + s]);
                const unsigned long long e = __ldcg(&lk.lu[L_IN_END + s3 * LINK_MAX + s]);
                long long* ring = lk.ring_in + (long long)s * lk.cap;
                for (unsigned long long p = b + (unsigned long long)wtid; p < e;
                     p += (unsigned long long)nwthreads) {
                    const long long item = __ldcg(&ring[p & (unsigned long long)(lk.cap - 1)]);
                    ++applied;
                    improve_local(a, q, item_vertex(item) - a.lo, item_value(item), deferrals);
                }
            }
        }
        if (!split && has_big) {
            grid_sync(a, bar);
            const unsigned long long reserve = __ldcg(&a.counters[BIG_RESERVE + s3]);
            if (big_count(reserve) > 0 && warp > 0)
                expand_big(a, q, reserve, wwarp, nwwarps, lane, deferrals);
        }
        // this round's change of the work count beyond the queue sizes: far pushes, items applied
        warp_add(&lk.lu[L_DELTA + s3], (long long)(deferrals - deferrals_before) - applied, lane);
        warp_add(&lk.lu[L_RECEIVED], applied, lane);
        grid_sync(a, bar);
        ++r;
    }
    fold_counters(a, processed, edges, deferrals, lane);
    if (keeper) protocol_result(lk.ctl, r, __ldcg(&lk.li[L_STOP + r % 3]));
    grid_exit(&a.ctl[BARRIER_COUNT], &a.ctl[EXIT_COUNT]);
}

// The host builds Links as a NumPy record; this lets it check the layout matches.
extern "C" __global__ void links_layout(long long* out) {
    out[0] = sizeof(Links);
    out[1] = offsetof(Links, ring_in);
    out[2] = offsetof(Links, cap);
    out[3] = offsetof(Links, k);
}
