"""The CUDA source of a fused loop: a loop of operator steps (:mod:`groute.operators.loop`) as
one persistent kernel on one device.

Each step's functor is spliced as in the operators' own kernels
(:func:`groute.operators.generated.functor_functions`, a suffix per step); the steps of a level
become one device function, ``groute_level``, with a grid barrier after each step
(``barriers.cuh``), the push of ``advance.cuh`` (``advance_push`` or, for a frontier of at most
a vertex per warp, ``advance_push_warps``; then the hubs, ``advance_push_big``, after a
barrier) and the output deduplicated with ``bitmap_claim`` (``frontier.cuh``). Two kernels
call it:

- ``groute_loop``: levels until the frontier is empty (the count every block reads after the
  last barrier of a level), ``max_run`` levels ran, or (``keep``) the store of kept levels is
  full (the host grows it and launches again from that level);
- ``groute_sweep``: the kept levels ``[lo, hi)``, one after the other (``reverse``: the last
  first), their new frontiers dropped.

The loop and the sweep of a group of steps are templates spliced into the kernels that run
them, so :func:`rounds_source` (``groute_rounds``: a body of Loop, Sweep and Compute items of
:mod:`groute.operators.rounds` once per seed, each item's steps a group with a level function of
its own, ``groute_run_level_<item>``) runs the same level code as ``groute_loop`` and
``groute_sweep``.

An advance that does not gather may pull too (``"pull"``, or ``"auto"`` without a message):
the first-accept pull of ``advance.cuh`` (``advance_pull``, a thread per candidate over its
in-arcs: every candidate visits its arcs from the frontier until the body accepts it, as the
operator's ``advance_pull_k``). It builds the frontier's bitmap (the third bitmap), a barrier,
pulls, a barrier, and zeroes the words of the frontier's vertices in that bitmap again; its
output needs no bitmap (a candidate is one thread's), so it leaves nothing for the next phase
to clear.

A gathering advance (``Functor(gather=...)``) pushes or pulls per level. Its push deposits each
arc's message into the step's accumulators (``groute_gather_acc``: one region of ``n_local``
words per gathering step, filled with the combination's identity by the host) and marks the
target; its pull builds the frontier's bitmap (the third bitmap), a barrier, then
``advance_gather`` (small and medium candidates finish at once, without atomics), a barrier,
the hubs' chunks (``advance_gather_big``, deposited), a barrier; either way ``gather_finish``
then runs the body of every marked vertex (resetting its accumulator and mark) while the
pull's frontier bits are cleared.

An ``"auto"`` advance of either kind chooses per level by Beamer's rule of ``direction.cuh``,
its state carried from level to level in every thread (a round's Loop resets it), the
frontier's arcs counted when it is large enough to scout (``direction_next``, ``groute_scout``). A step's ``candidates`` frontier,
where its kernels read it (:func:`reads_candidates`: a gather's, a first-accept pull's), is a
bitmap the host passes as a kernel argument (``groute_cand_<step>``, after the functors'
parameters; null for every vertex).

The control block ``ctl`` (uint64 words, zeroed by the host for every launch) is every
persistent kernel's (``persistent.cuh``): the protocol's words first (the grid barrier's, and
what the host reads of every launch: the levels or rounds run, and the status,
:data:`EMPTIED`, :data:`MAX_LEVELS`, :data:`STORE_FULL` or :data:`ABORTED`), then the loop's own
(``groute_r.own()``, at the offsets :data:`RESERVE` ... :data:`PULLS`): the hub reservations of a
ring of three producing steps, their output counts (three int32), the last frontier's count,
(``keep``) where it starts in the store, a ring of two sums of a scouted frontier's arcs
(``"auto"``: the scout zeroes the other), where rounds stopped by a full store go on (the item,
the level, the vertices the kept Loop before it kept), the levels an advance pulled (thread 0
counts them; the host adds them to the engine's ``pull_advances``). A producing step writes
count and reservation slot ``ring % 3`` and zeroes slot ``(ring + 1) % 3``, which nobody reads
any more: its count was read before the previous step began. A push's bitmap (two, alternating from advance to advance) is cleaned
in the phase after it, by zeroing the words of the vertices it output (the frontier that phase
reads), so no phase clears a whole bitmap. That phase's threads write their own output while
others still read the buffer being cleared from, so it must not be that buffer: a loop's next
level writes the other of its two, but a sweep's next level reads the store, not the output
being cleared, and a round's next item starts from another frontier. So where a level ends
with such an advance (:func:`leaves_clear`), a sweep alternates its two dropped-output buffers
level by level, and a round's item clears before a barrier that ends it (a Loop's own last
barrier, a Sweep's added one), so the next item finds nothing left to clear.

On several devices (:func:`multi_source`, ``groute_loop_multi`` and ``groute_sweep_multi``;
:func:`rounds_source` with ``multi``, ``groute_rounds_multi``, the rounds' templates with hooks
for the peer arguments, the seed's owner, the meetings and their failures; the host is
:mod:`groute.engines.fused_multi`): every device runs the same level code on its own
part of the frontier, or of a kept level (local positions; its vertices are the global ids
``[first, end)``), with the exchange spliced into each advance. Its push visits an owned target at once and appends
another device's, with the message, into the owner's inbox in the owner's memory
(``inbox.cuh``: a slot reserved by a system-scope atomic on the owner's count); then the
devices meet (``groute_meet``: ``persistent.cuh``'s meeting, a grid barrier, one thread's
arrival and wait, a grid barrier) and each visits its inbox with the visit of an owned target (a gathering push:
deposits it), and after the step's last grid barrier empties it. Consecutive advance steps
use the two inboxes in turn (``groute_r.adv & 1``), so a peer's next step never appends to an
inbox its owner still reads or has not emptied yet. A pull (first-accept or gathering) reads
arcs from every device's vertices (the rows' arcs hold global ids), so the frontier is
published first (:func:`_pull_parts`): each device sets its members' bits, by global id, in
every device's copy of the step's bitmap over every vertex, and writes a gathering step's
messages into every device's table beside it (``groute_publish``, through the pull table's peer
pointers: a step's copies, :func:`pull_steps`); the devices meet; each pulls over its own
candidates, testing its own copy (``GroutePublished`` reads a gather's messages from the
table), and after a grid barrier zeroes its copy's bitmap (``groute_unpublish``). Its output
is its own vertices: no inbox. An ``"auto"`` advance meets before it decides, summing its
frontier's vertices and (pushing) arcs over the devices in a second ring in device 0's memory
(``groute_meet_sums``), so every device takes the same direction, by the same
``direction_next`` as on one device over the whole graph's vertices and arcs. After each level
the devices meet again, adding their frontier's size and whether their store of kept levels
has room for another level (``groute_store_full``) to a ring of three pairs of sums in device
0's memory (``groute_meet_level``); every device reads the same sums and so runs the same
levels and meetings, and stops at the same level when a store fills (the status
:data:`ABORTED`: a device did not come to a meeting in time; the control block's protocol
words say which, and the meetings passed). A sweep's devices meet after each level. The peer
control block (``GROUTE_P_*``) holds the inbox counts, the flag of a full inbox and the sums
read, which the host reads once.
"""
from __future__ import annotations

from .generated import candidate_test, functor_functions, pull_functor
from .loop import AdvanceStep, ComputeStep, FilterStep, loop_params
from .rounds import Compute, Loop, body_steps

#: threads per block of the fused kernels
BLOCK = 256
#: why ``groute_loop`` stopped (the status of the control block's RESULT, ``persistent.cuh``;
#: ``ABORTED``: on several devices, a device did not come to a meeting in time)
EMPTIED, MAX_LEVELS, STORE_FULL, ABORTED = 0, 1, 2, 3
#: the loop's own words of the control block (uint64, after the protocol's): the hub
#: reservations (3), the output counts (3 int32), the last frontier's count, where it starts in
#: the store, the scout's ring of two sums, where rounds stopped by a full store go on (item,
#: level, the kept total), the levels an advance pulled (the engine's ``pull_advances``)
RESERVE, COUNTS, COUNT, AT, SCOUT, ITEM, LEVEL, KEPT_TOTAL, PULLS = 0, 3, 5, 6, 7, 9, 10, 11, 12
#: uint64 words of the loop's own part of the control block
LOOP_WORDS = 13

_PRELUDE = r"""// generated by groute.operators.loop_source: {title}
#include "advance.cuh"
#include "combine.cuh"
#include "direction.cuh"
#include "frontier.cuh"
#include "persistent.cuh"

// The loop's own words of the control block, after the protocol's (persistent.cuh).
enum GrouteWord {{ GROUTE_RESERVE = {RESERVE}, GROUTE_COUNTS = {COUNTS}, GROUTE_COUNT = {COUNT},
                  GROUTE_AT = {AT}, GROUTE_SCOUT = {SCOUT}, GROUTE_ITEM = {ITEM},
                  GROUTE_LEVEL = {LEVEL}, GROUTE_KEPT_TOTAL = {KEPT_TOTAL}, GROUTE_PULLS = {PULLS} }};

struct GrouteGraph {{
    const long long* indptr; const int* indices;
    long long* big_items; int* big_first_chunk; unsigned long long* counters;
}};

// Every parameter of the steps' functors, once (the level scalar's is set per level).
struct GrouteParams {{
{members}}};

// One thread's view of the launch: where it is in the grid, the barrier, the control block and
// its own words (the ring of output counts and hub reservations), the bitmaps, the steps'
// buffers, the arcs.
struct GrouteRun {{
    long long tid, nthreads, warp, nwarps; int lane;
    unsigned int* bar; unsigned int bar_target;
    unsigned long long* ctl; int* counts;
    unsigned int* bits; long long words; int ring, adv;
    const int* clear_q; long long clear_n; unsigned int* clear_bits;
    int* bufs; long long n_local;
    GrouteGraph out, in;
    unsigned long long* gather_acc; int scouts;
{run_members}    // the loop's own words of the control block (a member instead costs registers)
    __device__ __forceinline__ unsigned long long* own() const {{ return ctl + PROTOCOL_WORDS; }}
}};

#define GROUTE_RUN_ARGS const long long* groute_indptr, const int* groute_indices, \
    const long long* groute_in_indptr, const int* groute_in_indices, \
    long long* groute_big_items, int* groute_big_first_chunk, unsigned long long* groute_ctl, \
    unsigned int* groute_bits, int* groute_bufs, long long groute_n_local, \
    unsigned long long* groute_gather_acc
#define GROUTE_RUN_INIT GrouteRun groute_r; \
    groute_r.tid = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
    groute_r.nthreads = (long long)gridDim.x * blockDim.x; \
    groute_r.warp = groute_r.tid >> 5; \
    groute_r.nwarps = groute_r.nthreads >> 5; \
    groute_r.lane = threadIdx.x & 31; \
    groute_r.bar = (unsigned int*)(groute_ctl + PROTO_GRID); \
    groute_r.bar_target = 0; \
    groute_r.ctl = groute_ctl; \
    groute_r.counts = (int*)(groute_r.own() + GROUTE_COUNTS); \
    groute_r.bits = groute_bits; \
    groute_r.words = (groute_n_local + 31) / 32; \
    groute_r.ring = 0; \
    groute_r.adv = 0; \
    groute_r.clear_q = nullptr; \
    groute_r.clear_n = 0; \
    groute_r.clear_bits = nullptr; \
    groute_r.bufs = groute_bufs; \
    groute_r.n_local = groute_n_local; \
    groute_r.out = GrouteGraph{{groute_indptr, groute_indices, groute_big_items, \
                                groute_big_first_chunk, groute_r.own() + GROUTE_RESERVE}}; \
    groute_r.in = GrouteGraph{{groute_in_indptr, groute_in_indices, groute_big_items, \
                               groute_big_first_chunk, groute_r.own() + GROUTE_RESERVE}}; \
    groute_r.gather_acc = groute_gather_acc; \
    groute_r.scouts = 0;

// The bitmap words of the vertices of q (n of them; no other vertex has a bit in bits) zeroed,
// so the bitmap is clean again without a pass over all of it.
__device__ __forceinline__ void groute_zero_words(const GrouteRun& r, unsigned int* bits,
                                                  const int* q, long long n) {{
    for (long long i = r.tid; i < n; i += r.nthreads) bits[__ldcg(&q[i]) >> 5] = 0u;
}}
// The first phase after an advance zeroes the bitmap words of the vertices it output (the
// frontier that phase reads), so that bitmap is clean again for the advance after next.
__device__ __forceinline__ void groute_clear(GrouteRun& r) {{
    if (r.clear_n) {{
        groute_zero_words(r, r.clear_bits, r.clear_q, r.clear_n);
        r.clear_n = 0;
    }}
}}
// A producing step begins: its slot of the ring; the next slot is zeroed for the step after.
__device__ __forceinline__ int groute_produce_begin(GrouteRun& r) {{
    const int slot = r.ring % 3;
    if (r.tid == 0) {{
        r.counts[(r.ring + 1) % 3] = 0;
        r.own()[GROUTE_RESERVE + (r.ring + 1) % 3] = 0ull;
    }}
    groute_clear(r);
    return slot;
}}
// An advance step's push: a tiny frontier a warp per vertex, else the load-balanced advance;
// then, after a grid barrier, the hubs' chunks that the first part reserved.
template <class G, class F>
__device__ __forceinline__ void groute_push(GrouteRun& r, const G& g, const F& f, const int* q,
                                            long long n, int slot, unsigned long long& processed,
                                            unsigned long long& edges) {{
    if (n <= r.nwarps)
        advance_push_warps(g, f, q, n, slot, r.warp, r.nwarps, r.lane, processed, edges);
    else
        advance_push(g, f, q, n, slot, r.warp, r.nwarps, r.lane, processed, edges);
    grid_barrier(r.bar, r.bar_target);
    advance_push_big(g, f, __ldcg(&r.own()[GROUTE_RESERVE + slot]), r.warp, r.nwarps, r.lane);
}}
// Beamer's scout: the arcs of the frontier q (n vertices) in g, summed over the grid into a ring
// of two sums (GROUTE_SCOUT; the other zeroed for the next scout; its last readers read it
// before the barriers of the step since). groute_scout_add adds this thread's arcs and returns
// the sum's word, complete after the next grid barrier; groute_scout passes one and reads it.
template <class G>
__device__ __forceinline__ int groute_scout_add(GrouteRun& r, const G& g, const int* q,
                                                long long n) {{
    const int sum = GROUTE_SCOUT + (r.scouts & 1);
    if (r.tid == 0) r.own()[GROUTE_SCOUT + ((r.scouts + 1) & 1)] = 0ull;
    count_frontier_arcs(g, q, n, r.tid, r.nthreads, r.lane, r.own(), sum);
    ++r.scouts;
    return sum;
}}
template <class G>
__device__ __forceinline__ long long groute_scout(GrouteRun& r, const G& g, const int* q,
                                                  long long n) {{
    const int sum = groute_scout_add(r, g, q, n);
    grid_barrier(r.bar, r.bar_target);
    return (long long)__ldcg(&r.own()[sum]);
}}
// Whether a kept loop's store has no room for the level after `level`, which starts at `at`:
// its offset and at most every one of this device's vertices (the host launches with room for
// the first level, and grows the store when a launch stops here).
__device__ __forceinline__ bool groute_store_full(int keep, int level, long long at,
                                                  long long n_local, int offsets_capacity,
                                                  long long capacity) {{
    return keep && (level + 2 >= offsets_capacity || at + n_local > capacity);
}}
// ... and ends: after the barrier every block reads its output's count.
__device__ __forceinline__ long long groute_produce_end(GrouteRun& r, int slot) {{
    grid_barrier(r.bar, r.bar_target);
    ++r.ring;
    return (long long)__ldcg(&r.counts[slot]);
}}
"""

_VISITOR = r"""
// The visits of step {i}'s push: an accepted target joins the output once (bitmap_claim).
struct GrouteVisit{i} : SourceVisitor {{
    const int* indices; int* out; int* out_count; unsigned int* out_bits; const GrouteParams* p;
{peer_members}    // an owned target v (a local position): the body, and the output once
    __device__ __forceinline__ void accept(int v{msg_param}) const {{
        if (groute_fn_{i}(v{msg_arg}{args}) && bitmap_claim(out_bits, v))
            queue_push(out, out_count, v);
    }}
    __device__ __forceinline__ bool visit(long long e, int u) const {{
        const int v = indices[e];
{msg_local}{visit}        return true;
    }}
}};
"""

_GATHER_FUNCTOR = r"""
// Step {i}'s gathering advance: the push's visits (advance_push's functor: deposit and mark)
// and the pull's (advance_gather's), the same accumulators and marks. Its candidates: the
// gather's own test, within the step's candidates frontier (cand; null: every vertex), so a
// push deposits only into candidates and a pull runs only over them, as the operator's kernels.
struct GrouteGather{i} : SourceVisitor {{
    typedef groute_msg_t_{i} Acc;
    const int* indices; int* out; int* out_count; unsigned int* marks;
    const unsigned int* front_bits; const unsigned int* cand; Acc* acc; const GrouteParams* p;
{peer_members}    __device__ __forceinline__ bool visit(long long e, int u) const {{
        const int v = indices[e];
{visit}        return true;
    }}
    __device__ __forceinline__ bool wants(long long v) const {{
        return {candidate} && groute_wants_{i}((int)v{args});
    }}
    __device__ __forceinline__ bool in_frontier(int u) const {{ return bitmap_test(front_bits, u); }}
    __device__ __forceinline__ Acc message(int u) const {{ return groute_msg_{i}(u{args}); }}
    __device__ __forceinline__ Acc identity() const {{ return groute_combine_t_{i}::identity(); }}
    __device__ __forceinline__ Acc combine(Acc a, Acc b) const {{
        return groute_combine_t_{i}::apply(a, b);
    }}
    __device__ __forceinline__ void deposit(long long v, Acc x) const {{
        groute_combine_t_{i}::atomic(&acc[v], x);
        bitmap_claim(marks, (int)v);
    }}
    __device__ __forceinline__ void finish(long long v, Acc x) const {{
        if (groute_fn_{i}((int)v, x{args})) queue_push(out, out_count, (int)v);
    }}
}};
"""

# The direction of a gathering step's level: fixed, or Beamer's rule (state in groute_r).
_FIXED = "        const bool groute_pull = {pull};\n"
_AUTO = r"""        const bool groute_pull = direction_next(
            groute_r.pulling_{i}, groute_r.explored_{i}, groute_n, groute_r.n_local,
            groute_r.{push_graph}.indptr[groute_r.n_local],
            [&]() {{ return groute_scout(groute_r, groute_r.{push_graph}, groute_q, groute_n); }});
"""

# On several devices: the same rule on the frontier summed over the devices at a meeting (its
# arcs counted while pushing, before the meeting tells whether it is big enough to scout), so
# every device takes the same direction and comes to the same meetings. The scout's sum is
# complete after the meeting's first grid barrier, where the thread that adds it reads it.
_MULTI_AUTO = r"""        long long groute_all[2] = {{groute_n, 0}};
        const int groute_scouted = groute_r.pulling_{i} ? -1
            : groute_scout_add(groute_r, groute_r.{push_graph}, groute_q, groute_n);
        if (!groute_meet_sums(groute_r, groute_all, groute_scouted)) return -1;
        const bool groute_pull = direction_next(
            groute_r.pulling_{i}, groute_r.explored_{i}, groute_all[0], groute_r.vertices,
            groute_r.arcs, [&]() {{ return groute_all[1]; }});
"""

_GATHER = r"""    {{  // step {i}: gathering advance({name}) over the {over}-arcs, {direction}
        const int groute_slot = groute_produce_begin(groute_r);
        int* groute_to = {out};
        unsigned int* groute_marks = groute_r.bits + (groute_r.adv & 1) * groute_r.words;
        unsigned int* groute_front = {front};
        groute_msg_t_{i}* groute_acc =
            (groute_msg_t_{i}*)(groute_r.gather_acc + {region} * groute_r.n_local);
        const GrouteGather{i} groute_f{{{{}}, groute_r.{push_graph}.indices, groute_to,
                                       &groute_r.counts[groute_slot], groute_marks, groute_front,
                                       {cand}, groute_acc, &groute_p{peer_init}}};
        unsigned long long groute_processed = 0, groute_edges = 0;
{decide}        if (groute_pull) {{
{publish}            advance_gather(groute_r.{pull_graph}, {pf}, groute_r.n_local, groute_slot,
                           groute_r.warp, groute_r.nwarps, groute_r.lane, groute_processed,
                           groute_edges);
            grid_barrier(groute_r.bar, groute_r.bar_target);
            advance_gather_big(groute_r.{pull_graph}, {pf},
                               __ldcg(&groute_r.own()[GROUTE_RESERVE + groute_slot]),
                               groute_r.warp, groute_r.nwarps, groute_r.lane);
            grid_barrier(groute_r.bar, groute_r.bar_target);
{unpublish}            if (groute_r.tid == 0) ++groute_r.own()[GROUTE_PULLS];
        }} else {{
            groute_push(groute_r, groute_r.{push_graph}, groute_f, groute_q, groute_n, groute_slot,
                        groute_processed, groute_edges);
            grid_barrier(groute_r.bar, groute_r.bar_target);
{exchange}        }}
        gather_finish(groute_f, groute_marks, groute_acc, groute_r.n_local, groute_r.tid,
                      groute_r.nthreads);
        groute_n = groute_produce_end(groute_r, groute_slot);
        groute_q = groute_to;
        ++groute_r.adv;
    }}
"""

_COMPUTE = r"""    {{  // step {i}: compute({name})
        groute_clear(groute_r);
        for (long long groute_i = groute_r.tid; groute_i < groute_n; groute_i += groute_r.nthreads)
            groute_fn_{i}(__ldcg(&groute_q[groute_i]){args});
        grid_barrier(groute_r.bar, groute_r.bar_target);
    }}
"""

_COMPUTE_ALL = r"""    {{  // step {i}: compute({name}) on every vertex
        groute_clear(groute_r);
        for (long long groute_v = groute_r.tid; groute_v < groute_r.n_local; groute_v += groute_r.nthreads)
            groute_fn_{i}((int)groute_v{args});
        grid_barrier(groute_r.bar, groute_r.bar_target);
    }}
"""

_FILTER = r"""    {{  // step {i}: filter({name})
        const int groute_slot = groute_produce_begin(groute_r);
        int* groute_to = {out};
        for (long long groute_i = groute_r.tid; groute_i < groute_n; groute_i += groute_r.nthreads) {{
            const int v = __ldcg(&groute_q[groute_i]);
            if (groute_fn_{i}(v{args})) queue_push(groute_to, &groute_r.counts[groute_slot], v);
        }}
        groute_n = groute_produce_end(groute_r, groute_slot);
        groute_q = groute_to;
    }}
"""

# A push along the {graph}-arcs of the frontier (on several devices, the targets other devices
# own appended to their inboxes, then the exchange), and what it leaves once the level's output
# is produced: the words its bitmap set, for the next phase to clear (an inbox to empty).
_PUSH = r"""        const GrouteVisit{i} groute_f{{{{}}, groute_r.{graph}.indices, groute_to,
                                      &groute_r.counts[groute_slot], groute_bits, &groute_p{peer_init}}};
        groute_push(groute_r, groute_r.{graph}, groute_f, groute_q, groute_n, groute_slot,
                    groute_processed, groute_edges);
{exchange}"""
_AFTER_PUSH = r"""{reset}        groute_r.clear_q = groute_q;
        groute_r.clear_n = groute_n;
        groute_r.clear_bits = groute_bits;
"""

_ADVANCE = r"""    {{  // step {i}: advance({name}) over the {over}-arcs
        const int groute_slot = groute_produce_begin(groute_r);
        int* groute_to = {out};
        unsigned int* groute_bits = groute_r.bits + (groute_r.adv & 1) * groute_r.words;
        unsigned long long groute_processed = 0, groute_edges = 0;
{push}        groute_n = groute_produce_end(groute_r, groute_slot);
        groute_q = groute_to;
{after_push}        ++groute_r.adv;
    }}
"""

# A non-gathering advance that may pull (direction "pull", or "auto" without a message): the
# push above, or advance_pull over the in-arcs. The pull publishes the frontier (one device: its
# bits set in the third bitmap, a barrier before any candidate tests them; several: _pull_parts),
# pulls (a barrier: every test done) and clears what it published, before produce_end's
# barrier; its output is unique without a bitmap, so only a push leaves words for the next
# phase to clear (and, on several devices, an inbox to empty after that barrier).
_FIRST_ACCEPT = r"""    {{  // step {i}: advance({name}) over the out-arcs, {direction}: push or first-accept pull
        const int groute_slot = groute_produce_begin(groute_r);
        int* groute_to = {out};
        unsigned int* groute_bits = groute_r.bits + (groute_r.adv & 1) * groute_r.words;
        unsigned long long groute_processed = 0, groute_edges = 0;
{decide}        if (groute_pull) {{
            unsigned int* groute_front = {front};
            const GroutePull{i} groute_g{{groute_front, {cand}, groute_to,
                                         &groute_r.counts[groute_slot], &groute_p}};
{publish}            advance_pull(groute_r.in, groute_g, groute_r.n_local, groute_r.tid, groute_r.nthreads,
                         groute_processed, groute_edges);
            grid_barrier(groute_r.bar, groute_r.bar_target);
{unpublish}            if (groute_r.tid == 0) ++groute_r.own()[GROUTE_PULLS];
        }} else {{
{push}        }}
        groute_n = groute_produce_end(groute_r, groute_slot);
        groute_q = groute_to;
        if (!groute_pull) {{
{after_push}        }}
        ++groute_r.adv;
    }}
"""

# How a pull publishes its frontier and clears it again. On one device: the frontier's bits in
# the third bitmap, a grid barrier; after the pull, the words of its vertices zeroed.
_PUBLISH_LOCAL = r"""            queue_to_bitmap(groute_q, groute_n, groute_front, groute_r.tid, groute_r.nthreads);
            grid_barrier(groute_r.bar, groute_r.bar_target);
"""
_UNPUBLISH_LOCAL = r"""            groute_zero_words(groute_r, groute_front, groute_q, groute_n);
"""
# On several devices: every device's members set their bits (and a gather's messages) in every
# device's copy (groute_publish), the devices meet, and each pulls over its own copy; after the
# pull each zeroes its copy (groute_unpublish). A gathering pull reads the messages from the
# table (GroutePublished): a pulled arc's source may be another device's vertex.
_PUBLISH_MULTI = r"""            groute_publish<{message}, {msg_t}>(groute_r, {slot}, groute_q, groute_n,
                [&](int groute_u) {{ return {msg}; }});
            // the devices meet: every device's frontier is in this device's copy
            if (!groute_meet(groute_r)) return -1;
"""
_PUBLISHED = r"""            const GroutePublished<GrouteGather{i}> groute_pf{{
                groute_f, groute_pull_table<groute_msg_t_{i}>(groute_r, {slot}, groute_r.me)}};
"""
_UNPUBLISH_MULTI = r"""            groute_unpublish(groute_r, groute_front);
"""

# Every name in kernel scope begins with groute_, which no functor parameter may
# (groute.operators.functor.RESERVED): the parameters are the kernels' arguments too.
_LEVEL = r"""
// One level: the steps in order from the frontier groute_q (groute_n vertices); the last filter
// or advance writes into groute_out. Returns the count of the frontier the level ends with.
__device__ __forceinline__ long long groute_run_level{g}(GrouteRun& groute_r,
                                                      const GrouteParams& groute_p,
                                                      const int* groute_q, long long groute_n,
                                                      int* groute_out) {{
{steps}    return groute_n;
}}
"""

# The two ways a group of steps runs over levels, spliced into every kernel that runs them: a
# loop (groute_loop; a round's Loop) and a sweep over kept levels (groute_sweep; a round's
# Sweep). In scope: the kernel's GROUTE_RUN_ARGS, groute_r, groute_p and the names they read.
#
# The loop: levels from the frontier of level groute_level0 (groute_first_q; keep: the store's,
# at groute_offsets[groute_level0]) until it is empty, groute_max_run levels ran, or the store
# of kept levels is full. It leaves groute_level (the level reached), groute_n (the count of the
# frontier left), groute_at (where it starts; keep: in the store) and groute_status.
_LOOP_LEVELS = r"""    long long groute_n = groute_first_n;
    long long groute_at = groute_keep ? groute_offsets[groute_level0] : 0;
    const int* groute_q = groute_keep ? groute_levels + groute_at : groute_first_q;
    int* const groute_ping = groute_bufs + {ping} * groute_n_local;
    int* const groute_pong = groute_bufs + {pong} * groute_n_local;
    int groute_level = groute_level0, groute_status = {EMPTIED};
    while ({more} > 0) {{
        if (groute_level - groute_level0 >= groute_max_run) {{
            groute_status = {MAX_LEVELS};
            break;
        }}
        const long long groute_next_at = groute_at + groute_n;
        if ({full}) {{
            groute_status = {STORE_FULL};
            break;
        }}
        int* const groute_out = groute_keep ? groute_levels + groute_next_at
            : (((groute_level - groute_level0) & 1) ? groute_ping : groute_pong);
{set_level}        groute_n = groute_run_level{g}(groute_r, groute_p, groute_q, groute_n, groute_out);
{after_level}        groute_q = groute_out;
        groute_at = groute_next_at;
        ++groute_level;
        if (groute_keep && groute_r.tid == 0)
            groute_offsets[groute_level + 1] = groute_at + groute_n;
    }}
"""

# The sweep: the kept levels [groute_lo, groute_hi) of a store, one after the other
# (groute_reverse: the last first); what the steps output is dropped into {discard}: one buffer,
# or (leaves_clear) ping and pong by turns, since the next level's first phase clears the bits
# of the last output, reading it, while its own output is written; {after_level}: on several
# devices, the meeting that ends the level (_SWEEP_MEET).
_SWEEP_LEVELS = r"""    int* const groute_discard = groute_bufs + {ping} * groute_n_local;
    for (int groute_i = 0; groute_i < groute_hi - groute_lo; ++groute_i) {{
        const int groute_level = groute_reverse ? groute_hi - 1 - groute_i : groute_lo + groute_i;
        const long long groute_a = groute_offsets[groute_level];
{set_level}        const long long groute_left = groute_run_level{g}(
            groute_r, groute_p, groute_levels + groute_a,
            groute_offsets[groute_level + 1] - groute_a, {discard});
{after_level}    }}
"""

# The kernels of a loop and of a sweep: groute_loop and groute_sweep on one device, and
# ({multi}: "_multi") groute_loop_multi and groute_sweep_multi on several, all launched at once,
# each device on its own part of the frontier or of every kept level; there every level's count
# is its sum over the devices, the same on every device, so every device runs the same levels
# and meetings. The hooks both kernels share, empty on one device: {peer_args}, the peer
# arguments (GROUTE_PEER_ARGS), and {peer_init}, what they set in groute_r (_kernel_hooks).
#
# The loop: levels from the frontier of level groute_level0 (groute_first_q; keep: the store's,
# at groute_offsets[groute_level0]) until it is empty (on several devices: on every device),
# groute_max_run levels ran, or the store of kept levels is full (on several devices: a device's
# store has no room for the next level; the host grows every device's store and launches them
# all again from there). Its hooks on several devices: {total0}, the argument groute_total0 (the
# first level's size over the devices); {begin}, the first meeting (_LOOP_BEGIN_MULTI); {status},
# the status it leaves (ABORTED where the first meeting failed); {crossed}, the meetings passed.
_LOOP_KERNEL = r"""
extern "C" __global__ void __launch_bounds__({block}) groute_loop{multi}(
        GROUTE_RUN_ARGS,{peer_args} const int* groute_first_q, long long groute_first_n,{total0}
        int* groute_levels, long long* groute_offsets, long long groute_capacity,
        int groute_offsets_capacity, int groute_keep, int groute_level0, int groute_max_run,
        long long groute_start{comma_decls}) {{
    GROUTE_RUN_INIT
{peer_init}    GrouteParams groute_p{{{param_names}}};
{begin}{loop_levels}    if (groute_r.tid == 0) {{
        protocol_result(groute_ctl, groute_level - groute_level0, {status});
        groute_r.own()[GROUTE_COUNT] = (unsigned long long)groute_n;
        groute_r.own()[GROUTE_AT] = (unsigned long long)groute_at;
{crossed}    }}
}}
"""

# The sweep: the kept levels [groute_lo, groute_hi) of a store (on several devices: the
# device's parts of them), one after the other (groute_reverse: the last first); what the steps
# output is dropped. {levels}: the sweep's levels (_SWEEP_LEVELS), on several devices within
# the first meeting and the result (_SWEEP_MULTI).
_SWEEP_KERNEL = r"""
extern "C" __global__ void __launch_bounds__({block}) groute_sweep{multi}(
        GROUTE_RUN_ARGS,{peer_args} const int* groute_levels, const long long* groute_offsets,
        int groute_lo, int groute_hi, int groute_reverse, long long groute_start{comma_decls}) {{
    GROUTE_RUN_INIT
{peer_init}    GrouteParams groute_p{{{param_names}}};
{levels}}}
"""

_INT_MAX = 2147483647

# One round per seed from groute_round0 (that round resumes at item groute_item0, a kept Loop
# whose store filled, from level groute_resume_level, past the seed's: a first launch passes
# level 0 and resumes nothing; groute_kept_total0: the vertices the kept
# Loop before it kept, which that round's skipped items set and the resumed Loop may read as
# total). A round begins with the advances' two bitmaps clean (whatever the last round's steps
# left) and its seed as level 0 of the store: store[0] and its offset, set per round, since on
# several devices the seed (a global id there, {first} its device's first) is one device's, the
# level empty on the others (groute_seed_n: 0). Every Loop of the round starts from it, a
# Compute on the seed runs on it. {multi}, {peer_args}, {peer_init}: the kernels' hooks
# (_kernel_hooks); {total0}: on several devices (rounds_source's multi), groute_total0, the
# resumed level's size over the devices; {begin}, {crossed}: there, the first meeting, the
# meetings passed for the host.
_ROUNDS = r"""
extern "C" __global__ void __launch_bounds__({block}) groute_rounds{multi}(
        GROUTE_RUN_ARGS,{peer_args}{total0} const int* groute_seeds, int groute_round0,
        int groute_rounds, int groute_item0, int groute_resume_level, int* groute_store,
        long long* groute_offsets, long long groute_capacity, int groute_offsets_capacity,
        long long groute_kept_total0, long long* groute_tally{comma_decls}) {{
    GROUTE_RUN_INIT
{peer_init}    GrouteParams groute_p{{{param_names}}};
    int groute_kept = 0;
    long long groute_kept_total = groute_kept_total0;
{set_total}{begin}    for (int groute_round = groute_round0; groute_round < groute_rounds; ++groute_round) {{
        const int groute_from = groute_round == groute_round0 ? groute_item0 : 0;
        const long long groute_seed = (long long)groute_seeds[groute_round] - {first};
        const int groute_seed_n = groute_seed >= 0 && groute_seed < groute_r.n_local;
        groute_r.clear_n = 0;
        for (long long groute_i = groute_r.tid; groute_i < 2 * groute_r.words; groute_i += groute_r.nthreads)
            groute_r.bits[groute_i] = 0u;
        if (groute_r.tid == 0) {{
            if (groute_seed_n) groute_store[0] = (int)groute_seed;
            groute_offsets[1] = groute_seed_n;
        }}
        grid_barrier(groute_r.bar, groute_r.bar_target);
{set_index}{items}    }}
    if (groute_r.tid == 0) {{
        protocol_result(groute_ctl, groute_rounds, {EMPTIED});
{crossed}    }}
}}
"""

# A Loop from the round's seed; its levels run and deepest level go to the tally. When the
# store fills, the launch ends there (the control block: the round and the status, the
# frontier's count, where it starts, the item, the level, the vertices the kept Loop before it
# kept) and the host launches again from that level with a bigger store. After it,
# a barrier: the store's offsets are read next, and ({flush}: leaves_clear) the bits of the
# last frontier are cleared before it. On several devices ({declare}: the level's size over
# the devices, 1 for the seed, and whether a store is full; {aborted}: a device that did not
# come to a meeting ends the launch) every device stops at the same level when a store fills.
_ROUND_LOOP = r"""        if (groute_from <= {j}) {{  // item {j}: Loop
{reset}            const bool groute_resume = groute_round == groute_round0 && groute_item0 == {j}
                && groute_resume_level > 0;
            const int* groute_first_q = groute_store;
            int* const groute_levels = groute_store;
            const int groute_keep = {keep};
            const int groute_level0 = groute_resume ? groute_resume_level : 0;
            // resumed: the frontier of the level reached, kept in the store (only a kept
            // Loop fills the store); else the seed
            const long long groute_first_n = groute_resume
                ? groute_offsets[groute_level0 + 1] - groute_offsets[groute_level0] : groute_seed_n;
            const int groute_max_run = {max_run} - groute_level0;
            const long long groute_start = {start};
            (void)groute_start;
{declare}{loop_levels}            if (groute_r.tid == 0) {{
                groute_tally[{tally}] += groute_level - groute_level0;
                if (groute_level > groute_tally[{tally} + 1]) groute_tally[{tally} + 1] = groute_level;
            }}
{aborted}            if (groute_status == {STORE_FULL}) {{
                if (groute_r.tid == 0) {{
                    protocol_result(groute_ctl, groute_round, {STORE_FULL});
                    groute_r.own()[GROUTE_COUNT] = (unsigned long long)groute_n;
                    groute_r.own()[GROUTE_AT] = (unsigned long long)groute_at;
                    groute_r.own()[GROUTE_ITEM] = {j};
                    groute_r.own()[GROUTE_LEVEL] = (unsigned long long)groute_level;
                    groute_r.own()[GROUTE_KEPT_TOTAL] = (unsigned long long)groute_kept_total;
{crossed}                }}
                return;
            }}
{kept}{flush}            grid_barrier(groute_r.bar, groute_r.bar_target);
        }}
"""

# A Sweep over the levels the last kept Loop kept, from level {skip}; ({flush}: leaves_clear)
# then the bits of its last dropped output cleared, and a barrier. On several devices
# ({declare}, {aborted}) a device that did not come to a level's meeting ends the launch.
_ROUND_SWEEP = r"""        if (groute_from <= {j}) {{  // item {j}: Sweep
{reset}            const int* groute_levels = groute_store;
            const int groute_lo = {skip}, groute_hi = groute_kept, groute_reverse = {reverse};
            const long long groute_start = {start};
            (void)groute_start;
{declare}{sweep_levels}{aborted}{flush}            if (groute_r.tid == 0 && groute_hi > groute_lo)
                groute_tally[{tally}] += groute_hi - groute_lo;
        }}
"""

_SWEEP_FLUSH = r"""            if (groute_r.clear_n) {
                groute_clear(groute_r);
                grid_barrier(groute_r.bar, groute_r.bar_target);
            }
"""

# Where a meeting failed (a device did not come in time: {failed}), this device leaves the
# launch, the round it was in and the status ABORTED for the host, which raises.
_ROUND_STOP = r"""            if ({failed}) {{
                if (groute_r.tid == 0) {{
                    protocol_result(groute_ctl, {round}, {ABORTED});
                    groute_crossed(groute_r, groute_gbase);
                }}
                return;
            }}
"""
# A Loop's level sizes start from its first level's over the devices: the seed's one vertex, or
# the resumed level's (the host's); the stores have room for the first level (a new round's
# seed level is one vertex, and the host grows every store before it resumes a Loop).
_ROUND_LOOP_TOTAL = ("            long long groute_total = groute_resume ? groute_total0 : 1, "
                     "groute_full = 0;\n")
# A kept Loop's total: every device's kept vertices summed at a meeting (the ring of sums the
# "auto" advances use), so every device sets the same total scalar.
_ROUND_KEPT_SUM = "            long long groute_kept_sums[2] = {groute_at, 0};\n"

_ROUND_COMPUTE = r"""        if (groute_from <= {j}) {{  // item {j}: Compute on {over}
            groute_run_level_{j}(groute_r, groute_p, {q}, nullptr);
            if (groute_r.tid == 0) ++groute_tally[{tally}];
        }}
"""


# --- on several devices (multi_source): the same level code, with the exchange spliced in ----

# What every thread of a launch on several devices adds to GrouteRun (set by the kernel).
_PEER_RUN = r"""    // on several devices: every device's inboxes, this device's peer control block and
    // index, the devices, its vertices' global ids, device 0's meeting block (persistent.cuh's
    // counter, then the rings of sums: GROUTE_G_*), the counter's target, the wait limit;
    // the pull table (every device's copies of a pull's frontier), the graph's vertices and
    // arcs (Beamer's rule), the meetings that summed an "auto" advance's frontier
    const InboxTable* inbox = nullptr; unsigned long long* pctl = nullptr; int me = 0, k = 1;
    long long first = 0, end = 0;
    unsigned long long* gbar = nullptr; unsigned long long gtarget = 0; long long timeout_ns = 0;
    const unsigned long long* pulls = nullptr; long long vertices = 0, arcs = 0; int sums = 0;
    int levels_met = 0;
"""

_MULTI_PRELUDE = r"""
// The words of this device's peer control block (groute/engines/fused_multi.py reads them).
#define GROUTE_P_INBOX 0    // [0], [1]: this device's inbox counts by parity (InboxTable::count)
#define GROUTE_P_FULL 2     // 1: an inbox was full and an item was dropped
#define GROUTE_P_TOTAL 3    // [3], [4]: the last level's frontier and full stores, summed
#define GROUTE_P_SUMS 5     // [5], [6]: the last "auto" advance's frontier and arcs, summed
// The words of device 0's meeting block (groute_gbar): the protocol's (persistent.cuh), then a
// ring of three pairs of level sums, then a ring of three pairs of sums for the "auto" advances.
#define GROUTE_G_LEVELS MEETING_WORDS
#define GROUTE_G_SUMS (MEETING_WORDS + 6)
#define GROUTE_G_WORDS (MEETING_WORDS + 12)

// A push's target v (a global id) that another device owns: to its owner's inbox of `parity`
// with its message; a full inbox (which the host's sizing rules out) raises this device's flag.
template <bool kMessage, class T>
__device__ __forceinline__ void groute_send(const InboxTable& t, int parity,
                                            unsigned long long* pctl, int v, T m) {
    if (!inbox_send<kMessage>(t, parity, owner_of(t.off, (int)t.k, v), v, m))
        pctl[GROUTE_P_FULL] = 1ull;
}

// Meet every block of every device (persistent.cuh's protocol_meet: a grid barrier, by which
// this device's writes, its appends into the peers' inboxes and its published frontiers among
// them, are done; one thread's arrival and wait on device 0's counter; a grid barrier). With a
// `ring` (three slots of `width` words in device 0's memory): first add this device's values
// `v` into slot `seq % 3` and, after the meeting, every block reads the sums over the devices
// into `v` (through this device's peer control block, from word `at`). Device 0 zeroes slot
// `(seq + 1) % 3` there: its last readers read it two meetings of the ring ago, right after
// that meeting and before they came to the next one, which device 0 has passed; nobody adds to
// it before this meeting passes. `late` (>= 0): the last value is instead this device's word
// `late` of the loop's own words, complete only after the meeting's first grid barrier (a
// scout's sum), read there. False when a device did not come in time: every block of this
// device sees the flag after the same barrier, so all of them leave.
__device__ __forceinline__ bool groute_meet_ring(GrouteRun& r, unsigned long long* ring,
                                                 int width, int seq, long long* v, int at,
                                                 int late = -1) {
    unsigned long long* slot = ring ? ring + (seq % 3) * width : nullptr;
    protocol_meet(r.tid == 0, r.ctl, r.bar_target, r.gbar, r.gtarget, r.k, r.timeout_ns, [=]() {
        if (!ring) return;
        if (late >= 0) v[width - 1] = (long long)__ldcg(&r.own()[late]);
        for (int w = 0; w < width; ++w) {
            if (r.me == 0) ring[((seq + 1) % 3) * width + w] = 0ull;
            if (v[w] > 0) atomicAdd_system(&slot[w], (unsigned long long)v[w]);
        }
    }, [=](bool met) {
        if (met && ring)
            for (int w = 0; w < width; ++w) r.pctl[at + w] = ld_acquire_sys(&slot[w]);
    });
    if (protocol_aborted(r.ctl)) return false;
    if (ring)
        for (int w = 0; w < width; ++w) v[w] = (long long)__ldcg(&r.pctl[at + w]);
    return true;
}

// A meeting without sums. False: a device did not come in time.
__device__ __forceinline__ bool groute_meet(GrouteRun& r) {
    return groute_meet_ring(r, nullptr, 0, 0, nullptr, 0);
}

// The end of a level: this device's frontier and whether its store of kept levels has no room
// for another level (v[0], v[1]) summed over the devices into v, so every device runs the same
// levels and a store that fills stops them all at the same one. The ring's sequence is the
// launch's count of level meetings, not the level: rounds run many loops in one launch, each
// from level 0, and a slot must not be added to again before it is zeroed. False: a device did
// not come.
__device__ __forceinline__ bool groute_meet_level(GrouteRun& r, long long* v) {
    return groute_meet_ring(r, r.gbar + GROUTE_G_LEVELS, 2, r.levels_met++, v, GROUTE_P_TOTAL);
}

// An "auto" advance's meeting: this device's frontier and its arcs (v[0], v[1]; `scouted` >= 0:
// the arcs are that scout's sum, groute_scout_add's) summed over the devices into v, so every
// device decides the direction alike. False: a device did not come.
__device__ __forceinline__ bool groute_meet_sums(GrouteRun& r, long long* v, int scouted = -1) {
    return groute_meet_ring(r, r.gbar + GROUTE_G_SUMS, 2, r.sums++, v, GROUTE_P_SUMS, scouted);
}

// The arguments every kernel on several devices takes after GROUTE_RUN_ARGS (every device's
// inboxes, this device's peer control block and index, device 0's meeting block and where its
// counter stands, the wait limit, the pull table, the graph's arcs), and what they set in
// groute_r.
#define GROUTE_PEER_ARGS const InboxTable* groute_inbox, unsigned long long* groute_pctl, \
    int groute_me, unsigned long long* groute_gbar, unsigned long long groute_gbase, \
    long long groute_timeout_ns, const unsigned long long* groute_pulls, long long groute_arcs
#define GROUTE_PEER_INIT \
    groute_r.inbox = groute_inbox; \
    groute_r.pctl = groute_pctl; \
    groute_r.me = groute_me; \
    groute_r.k = (int)groute_inbox->k; \
    groute_r.first = groute_inbox->off[groute_me]; \
    groute_r.end = groute_inbox->off[groute_me + 1]; \
    groute_r.gbar = groute_gbar; \
    groute_r.gtarget = groute_gbase; \
    groute_r.timeout_ns = groute_timeout_ns; \
    groute_r.pulls = groute_pulls; \
    groute_r.vertices = groute_inbox->off[groute_r.k]; \
    groute_r.arcs = groute_arcs;

// The end of a launch (thread 0): the meetings it passed, for the host.
__device__ __forceinline__ void groute_crossed(const GrouteRun& r, unsigned long long base) {
    protocol_crossed(r.ctl, r.gtarget, base, r.k);
}

// The start of a launch: this device's inbox counts and flag zeroed (device 0: the rings of
// sums too) before the first meeting, after which the others may send to it and add (the host
// zeroed the control block). Returns the first frontier's size over the devices (the host's),
// or -1 when a device did not come.
__device__ __forceinline__ long long groute_begin(GrouteRun& r, long long total) {
    if (r.tid == 0) {
        r.pctl[GROUTE_P_INBOX] = r.pctl[GROUTE_P_INBOX + 1] = 0ull;
        r.pctl[GROUTE_P_FULL] = 0ull;
        if (r.me == 0)
            for (int w = GROUTE_G_LEVELS; w < GROUTE_G_WORDS; ++w) r.gbar[w] = 0ull;
    }
    return groute_meet(r) ? total : -1;
}

// Device j's copy of pulling step `slot`'s frontier: a bitmap over every global id and (a
// gathering step) the members' messages by global id. The pull table (the host's uint64 words,
// the same on every device) holds their addresses: row 2 * slot the bitmaps, row 2 * slot + 1
// the tables, a column per device.
__device__ __forceinline__ unsigned int* groute_pull_bits(const GrouteRun& r, int slot, int j) {
    return (unsigned int*)r.pulls[2 * slot * INBOX_MAX_DEVICES + j];
}
template <class T>
__device__ __forceinline__ T* groute_pull_table(const GrouteRun& r, int slot, int j) {
    return (T*)r.pulls[(2 * slot + 1) * INBOX_MAX_DEVICES + j];
}

// A pull's frontier, published before the devices meet and pull: each member u of this
// device's frontier q (n local positions) sets its bit, by global id, in every device's copy
// (a system-scope reduction: members of several devices share a word) and (kMessage) writes
// its message msg(u), computed here on its owner, into every device's table. Each device then
// pulls over its own copy, so no pulled arc reads another device's memory.
template <bool kMessage, class T, class Message>
__device__ __forceinline__ void groute_publish(const GrouteRun& r, int slot, const int* q,
                                               long long n, Message msg) {
    for (long long i = r.tid; i < n; i += r.nthreads) {
        const int u = __ldcg(&q[i]);
        const long long g = r.first + u;
        if constexpr (kMessage) {
            const T m = msg(u);
            for (int j = 0; j < r.k; ++j) groute_pull_table<T>(r, slot, j)[g] = m;
        }
        for (int j = 0; j < r.k; ++j)
            red_or_sys(groute_pull_bits(r, slot, j) + (g >> 5), 1u << (g & 31));
    }
}

// After a pull (a grid barrier after its last read): this device's copy of the frontier's
// bitmap zeroed, every word (its bits came from every device's members). The devices publish
// into it again only at this step's next pull, a later level, after the level's meeting, which
// this device reaches after zeroing; another pulling step has a copy of its own. The tables
// need no clearing: a pull reads the message of a member whose bit is set.
__device__ __forceinline__ void groute_unpublish(const GrouteRun& r, unsigned int* bits) {
    for (long long w = r.tid; w < (r.vertices + 31) / 32; w += r.nthreads) bits[w] = 0u;
}

// A gathering functor as its pull on several devices reads it: a pulled arc's source u is any
// device's vertex (a global id), so its message comes from the table its owner published,
// read from L2 (the peers wrote it since this device last read it).
template <class F>
struct GroutePublished : F {
    const typename F::Acc* table;
    __device__ __forceinline__ typename F::Acc message(int u) const { return __ldcg(&table[u]); }
};
"""

# An advance's visitor on several devices: the inboxes, this device's flags and vertices, and
# the inboxes' parity (the advance steps' count: consecutive advances alternate).
_PEER_MEMBERS = ("    const InboxTable* inbox; unsigned long long* pctl; long long first, end; "
                 "int parity;\n")
_PEER_INIT = (",\n            groute_r.inbox, groute_r.pctl, groute_r.first, groute_r.end, "
              "groute_r.adv & 1")
# The visit of an arc's target: an owned one here (take), another device's sent to its inbox.
_PEER_VISIT = r"""        if (v >= first && v < end) {{
            {take}
        }} else {{
            groute_send<{has}>(*inbox, parity, pctl, v, {msg});
        }}
"""
# After a push: the devices meet (every append into this device's inbox has landed), ...
_EXCHANGE = r"""        // the devices meet: every append into this device's inbox has landed
        if (!groute_meet(groute_r)) return -1;
"""
# ... then each visits its inbox with the visit of an owned target (apply_k's) ...
_RECEIVE = r"""        inbox_receive<{has}, groute_msg_t_{i}>(
            *groute_r.inbox, groute_r.me, groute_r.adv & 1, groute_r.tid, groute_r.nthreads,
            [&](int groute_v, groute_msg_t_{i} groute_m) {{
                (void)groute_m;
                {take}
            }});
"""
# ... and empties it after a grid barrier (every thread has read its count). Two inboxes
# alternate by parity: the peers append to this one again two advance steps on, after the
# meeting of the step between, which this device reaches only after this reset; with one
# inbox a peer's next step could append while this device still reads it.
_RESET = r"""        if (groute_r.tid == 0) inbox_reset(*groute_r.inbox, groute_r.me, groute_r.adv & 1);
"""

# After a level on several devices: its frontier, and whether this device's store of kept levels
# would have no room for the next one, summed over the devices at a meeting, which decides for
# every device alike whether another level runs and whether the stores stop the loop there
# (_MULTI_FULL: the loop's test of the store reads the sum).
_LEVEL_SUM = r"""        if (groute_n < 0) {{
            groute_status = {ABORTED};
            break;
        }}
        long long groute_sums[2] = {{groute_n, groute_store_full(
            groute_keep, groute_level + 1, groute_next_at + groute_n, groute_n_local,
            groute_offsets_capacity, groute_capacity)}};
        if (!groute_meet_level(groute_r, groute_sums)) {{
            groute_status = {ABORTED};
            break;
        }}
        groute_total = groute_sums[0];
        groute_full = groute_sums[1];
"""
# The loop's test of its store: on one device its own; on several the sum the level's meeting
# read (zero at a launch: the host launches with room for the first level on every device).
_LOCAL_FULL = ("groute_store_full(groute_keep, groute_level, groute_next_at, groute_n_local, "
               "groute_offsets_capacity, groute_capacity)")
_MULTI_FULL = "groute_full > 0"

# After a level of a sweep on several devices: the devices meet, so no device publishes or sends
# the next level's frontier while another still reads this one's.
_SWEEP_MEET = r"""        if (groute_left < 0 || !groute_meet(groute_r)) {{
            groute_status = {ABORTED};
            break;
        }}
"""

# A loop on several devices begins with a meeting, which gives the first level's size over the
# devices (groute_total; -1: a device did not come), and groute_full, the sum of full stores
# that the loop's test of its store reads (_MULTI_FULL).
_LOOP_BEGIN_MULTI = r"""    long long groute_full = 0;
    long long groute_total = groute_begin(groute_r, groute_total0);
"""
# A sweep on several devices: a first meeting, the levels (a meeting after each), and for the
# host the levels swept, the status (ABORTED: a device did not come to a meeting) and the
# meetings passed.
_SWEEP_MULTI = r"""    int groute_status = {EMPTIED};
    if (groute_begin(groute_r, 0) < 0) {{
        groute_status = {ABORTED};
    }} else {{
{sweep_levels}    }}
    if (groute_r.tid == 0) {{
        protocol_result(groute_ctl, groute_hi - groute_lo, groute_status);
        groute_crossed(groute_r, groute_gbase);
    }}
"""


def _kernel_decl(p) -> str:
    """A parameter as the kernel takes it: arrays writable (a step that only reads one gets
    it as ``const`` through its own function's signature)."""
    return f"{p.ctype}{'*' if p.array else ''} {p.name}"


def gathering(steps) -> list:
    """The gathering advance steps, in order: each has a region of the accumulators."""
    return [s for s in steps if isinstance(s, AdvanceStep) and s.functor.gather is not None]


def first_accept_pull(step) -> bool:
    """Whether ``step`` is an advance that does not gather and may pull, first-accept
    (``"pull"``, or ``"auto"`` without a message: one with a message pushes, as the operator)."""
    return (isinstance(step, AdvanceStep) and step.functor.gather is None
            and (step.direction == "pull"
                 or (step.direction == "auto" and step.functor.message is None)))


def chooses_direction(step) -> bool:
    """Whether the kernel chooses ``step``'s direction per level (Beamer's rule, its state in
    ``groute_r``): an ``"auto"`` advance that gathers or may pull."""
    return step.direction == "auto" and (step.functor.gather is not None
                                         or first_accept_pull(step))


def may_pull(step) -> bool:
    """Whether ``step`` may pull in the kernel (gathering or first-accept)."""
    return isinstance(step, AdvanceStep) and step.direction != "push" and (
        step.functor.gather is not None or first_accept_pull(step))


def reads_candidates(step) -> bool:
    """Whether the kernels read ``step``'s candidates frontier: a gathering advance's (its push
    deposits only into candidates, its pull runs over them) and a first-accept pull's (the
    vertices that look for an arc from the frontier). A push that does not gather visits every
    target whatever the candidates, as the operator does."""
    return (isinstance(step, AdvanceStep) and step.candidates is not None
            and (step.functor.gather is not None or first_accept_pull(step)))


def candidate_steps(steps) -> list:
    """The positions in ``steps`` (a module's steps, in order) of those whose candidates the
    kernels read (:func:`reads_candidates`): each is a kernel argument, after the functors'
    parameters and in this order, a bitmap of the candidates (null: every vertex)."""
    return [i for i, s in enumerate(steps) if reads_candidates(s)]


def needs_in_arcs(steps) -> bool:
    """Whether a step reads in-arcs: a push over them, or a pull over out-arcs (its candidates
    read their in-arcs), gathering or first-accept."""
    def reads_in(s):
        if not isinstance(s, AdvanceStep):
            return False
        if s.functor.gather is None:
            return s.over == "in" or first_accept_pull(s)
        if s.direction == "push":
            return s.over == "in"
        return s.over == "out" or s.direction == "auto"
    return any(reads_in(s) for s in steps)


def buffers(steps) -> int:
    """Vertex-sized int32 buffers the kernels use: two for the intermediate outputs of a
    level (a level's producing steps alternate between them) and two for the loop's own
    frontiers (``groute_loop`` without ``keep``; ``groute_sweep``'s dropped output, both when
    the levels alternate them: :func:`leaves_clear`)."""
    return 4 if sum(1 for s in steps if s.produces) > 1 else 2


def leaves_clear(steps) -> bool:
    """Whether a level of ``steps`` may end with bitmap words still to clear: its last step is an
    advance that does not gather and may push, whose output's words the next phase zeroes
    while reading that output (``groute_clear``), so nothing may write that buffer until a
    barrier. (A first-accept pull clears its own bits; where ``"auto"`` pulled, nothing is
    left: ``clear_n`` is zero.)"""
    last = steps[-1]
    return (isinstance(last, AdvanceStep) and last.functor.gather is None
            and last.direction != "pull")


def _group(steps, first, all_steps, where, parts, run_members, everything=False,
           multi=False) -> str:
    """The code of one level of ``steps`` (numbered from ``first`` in ``all_steps``, the
    module's steps: functor suffixes, gathering regions and candidates are the module's); their
    functor functions and visitors go to ``parts``. ``everything``: the one compute step runs
    on every vertex, not on a frontier. ``multi``: on several devices (:func:`multi_source`), an
    advance's targets that other devices own go to their inboxes and its own are visited
    after the devices meet, and a pull reads every device's frontier, published to it
    (:func:`_pull_parts`)."""
    producing = [i for i, s in enumerate(steps) if s.produces]
    cands, pulls = candidate_steps(all_steps), pull_steps(all_steps)
    body = []
    for k_step, step in enumerate(steps):
        i = first + k_step
        f = step.functor
        parts.append(functor_functions(f, where, f"_{i}"))
        args = "".join(f", groute_p.{p.name}" for p in f.parsed)
        if isinstance(step, ComputeStep):
            body.append((_COMPUTE_ALL if everything else _COMPUTE).format(i=i, name=f.name,
                                                                         args=args))
            continue
        k = producing.index(k_step)
        out = ("groute_out" if k == len(producing) - 1
               else f"groute_r.bufs + {k & 1} * groute_r.n_local")
        if isinstance(step, FilterStep):
            body.append(_FILTER.format(i=i, name=f.name, args=args, out=out))
            continue
        assert isinstance(step, AdvanceStep)
        cand = f"groute_p.groute_cand_{i}" if i in cands else "nullptr"
        peer = _peer_parts(i, f, multi)
        pull = _pull_parts(i, f, pulls.index(i) if i in pulls else None, multi)
        if f.gather is not None:
            parts.append(_GATHER_FUNCTOR.format(i=i, args="".join(f", p->{p.name}"
                                                                 for p in f.parsed),
                                                peer_members=peer["members"],
                                                visit=peer["gather_visit"],
                                                candidate=candidate_test("cand", "(int)v")))
            body.append(_gather_step(step, i, out, gathering(all_steps).index(step), cand,
                                     run_members, peer, pull, multi))
            continue
        pargs = "".join(f", p->{p.name}" for p in f.parsed)
        msg_local = "" if f.message is None else \
            f"        const groute_msg_t_{i} groute_m = groute_msg_{i}(u{pargs});\n"
        parts.append(_VISITOR.format(
            i=i, msg_local=msg_local, args=pargs, peer_members=peer["members"],
            visit=peer["visit"], msg_arg="" if f.message is None else ", groute_m",
            msg_param="" if f.message is None else f", const groute_msg_t_{i} groute_m"))
        if first_accept_pull(step):
            parts.append("\n" + pull_functor(f"GroutePull{i}", "    const GrouteParams* p;\n",
                                              f"groute_fn_{i}((int)v{pargs})"))
            body.append(_FIRST_ACCEPT.format(
                i=i, name=f.name, out=out, cand=cand, direction=step.direction, PULLS=PULLS,
                decide=_decide(step, i, "out", run_members, multi),
                push=_indent(_push(i, "out", peer)), after_push=_indent(_after_push(peer)),
                **pull))
            continue
        graph = "in" if step.over == "in" else "out"
        body.append(_ADVANCE.format(i=i, name=f.name, out=out, over=step.over,
                                    push=_push(i, graph, peer), after_push=_after_push(peer)))
    return "".join(body)


def _peer_parts(i, f, multi) -> dict:
    """What advance step ``i`` (functor ``f``) adds on several devices (``multi``), or leaves
    out on one: its visitor's members and their initial values, the visit of an arc's target
    (an owned one: the body, or a gathering functor's deposit; another device's: sent to
    that device's inbox), and after the push the exchange (the devices meet, then each visits
    its inbox with the same code) and the inbox's reset."""
    msg_arg = "" if f.message is None else ", groute_m"
    if not multi:
        return dict(members="", init="", exchange="", reset="",
                    visit=f"        accept(v{msg_arg});\n",
                    gather_visit="        if (wants(v)) deposit(v, message(u));\n")
    has = "true" if f.message is not None else "false"
    receive = _RECEIVE.format(i=i, has=has, take=(
        "if (groute_f.wants(groute_v)) groute_f.deposit(groute_v, groute_m);"
        if f.gather is not None else f"groute_f.accept(groute_v{msg_arg});"))
    return dict(
        members=_PEER_MEMBERS, init=_PEER_INIT,
        visit=_PEER_VISIT.format(has=has, take=f"accept((int)(v - first){msg_arg});",
                                 msg="groute_m" if f.message is not None
                                 else f"(groute_msg_t_{i})0"),
        gather_visit=_PEER_VISIT.format(
            has="true", msg="message(u)", take="const int groute_lv = (int)(v - first);\n"
            "            if (wants(groute_lv)) deposit(groute_lv, message(u));"),
        exchange=_EXCHANGE + receive, reset=_RESET,
        gather_exchange=_indent(_EXCHANGE + receive
                                + "        grid_barrier(groute_r.bar, groute_r.bar_target);\n"
                                + _RESET))


def _pull_parts(i, f, slot, multi) -> dict:
    """How advance step ``i`` (functor ``f``), where it pulls, publishes its frontier to the
    candidates and clears it again: ``front``, the bitmap the candidates test (a C expression);
    ``publish``, the code that fills it (then a barrier or a meeting: after it every candidate
    may test); ``unpublish``, the code that clears it after the pull's last barrier; ``pf``, the
    functor the gathering pull reads messages through. On one device the frontier's bits in the
    third bitmap, the words of its vertices zeroed again. On several devices (``slot``: the
    step's place among :func:`pull_steps`) every device's members in every device's copy
    (``groute_publish``: a pulled arc's source may be any device's vertex), the devices meet,
    and each zeroes its own copy; a gather's messages go into the copy's table beside it."""
    if not multi or slot is None:
        return dict(front="groute_r.bits + 2 * groute_r.words", publish=_PUBLISH_LOCAL,
                    unpublish=_UNPUBLISH_LOCAL, pf="groute_f")
    gathers = f.gather is not None
    publish = _PUBLISH_MULTI.format(
        slot=slot, message="true" if gathers else "false",
        msg_t=f"groute_msg_t_{i}" if gathers else "int",
        msg="groute_f.message(groute_u)" if gathers else "0")
    return dict(front=f"groute_pull_bits(groute_r, {slot}, groute_r.me)",
                publish=publish + (_PUBLISHED.format(i=i, slot=slot) if gathers else ""),
                unpublish=_UNPUBLISH_MULTI, pf="groute_pf" if gathers else "groute_f")


def _push(i, graph, peer) -> str:
    """Advance step ``i``'s push along its ``graph``-arcs (:data:`_PUSH`)."""
    return _PUSH.format(i=i, graph=graph, peer_init=peer["init"], exchange=peer["exchange"])


def _after_push(peer) -> str:
    """What a push leaves for the next phase (:data:`_AFTER_PUSH`)."""
    return _AFTER_PUSH.format(reset=peer["reset"])


def _indent(code, by="    ") -> str:
    return "".join(by + line if line.strip() else line for line in code.splitlines(True))


def _set(params, name, value) -> str:
    """The statement that sets scalar ``name`` on the device (nothing without a name)."""
    if name is None:
        return ""
    return f"        groute_p.{name} = ({_ctype_of(params, name)})({value});\n"


def _module(groups, all_steps, where, title, multi=False) -> tuple[str, dict]:
    """A module's text up to its kernels: the prelude, the functors, a level function
    ``groute_run_level<suffix>`` for each group ``(steps, level, suffix, everything)``; and the
    fields its kernels are formatted with, among them per group ``loop_levels<suffix>`` and
    ``sweep_levels<suffix>``: the loop and the sweep of that group's levels, to splice.
    ``multi``: the module of a loop on several devices (:func:`multi_source`)."""
    params = loop_params(all_steps, where)
    intermediate = buffers(all_steps) - 2     # groute_bufs[0], [1]: a level's intermediates
    parts, run_members, code, first, fields = [], [], [], 0, {}
    if multi:
        run_members.append(_PEER_RUN)
    for steps, level, suffix, everything in groups:
        body = _group(steps, first, all_steps, where, parts, run_members, everything, multi)
        first += len(steps)
        code.append(_LEVEL.format(g=suffix, steps=body))
        at = dict(g=suffix, ping=intermediate, pong=intermediate + 1,
                  set_level=_set(params, level, "groute_start + groute_level"))
        fields[f"loop_levels{suffix}"] = _LOOP_LEVELS.format(
            **at, EMPTIED=EMPTIED, MAX_LEVELS=MAX_LEVELS, STORE_FULL=STORE_FULL,
            more="groute_total" if multi else "groute_n",
            full=_MULTI_FULL if multi else _LOCAL_FULL,
            after_level=_LEVEL_SUM.format(ABORTED=ABORTED) if multi else "")
        fields[f"sweep_levels{suffix}"] = _SWEEP_LEVELS.format(**at, discard=(
            "groute_discard + (groute_i & 1) * groute_n_local" if leaves_clear(steps)
            else "groute_discard"), after_level=_SWEEP_MEET.format(ABORTED=ABORTED) if multi
            else "        (void)groute_left;\n")
    # the kernels' arguments after the launch's own: the functors' parameters, then the
    # candidates' bitmaps (candidate_steps), all of them members of GrouteParams
    cands = [f"const unsigned int* groute_cand_{i}" for i in candidate_steps(all_steps)]
    members = "".join(f"    {d};\n" for d in [_kernel_decl(p) for p in params] + cands)
    decls = ", ".join([_kernel_decl(p) for p in params] + cands)
    names = [p.name for p in params] + [f"groute_cand_{i}" for i in candidate_steps(all_steps)]
    fields.update(block=BLOCK, comma_decls=f", {decls}" if decls else "",
                  param_names=", ".join(names), params=params)
    head = (('#include "inbox.cuh"\n' if multi else "")
            + _PRELUDE.format(title=title, members=members, run_members="".join(run_members),
                              RESERVE=RESERVE, COUNTS=COUNTS, COUNT=COUNT, AT=AT, SCOUT=SCOUT,
                              ITEM=ITEM, LEVEL=LEVEL, KEPT_TOTAL=KEPT_TOTAL, PULLS=PULLS)
            + (_MULTI_PRELUDE if multi else "") + "".join(parts) + "".join(code))
    return head, fields


def _kernel_hooks(multi) -> dict:
    """What the hooks every kernel template has (:data:`_LOOP_KERNEL`, :data:`_SWEEP_KERNEL`,
    :data:`_ROUNDS`) hold: nothing on one device; on several (``multi``) the suffix of the
    kernel's name, the peer arguments, what they set in ``groute_r``, and the argument
    ``groute_total0``: the size over the devices of the level the launch starts from (a loop's
    first, a resumed Loop's), the host's sum of every device's part of it."""
    if not multi:
        return dict(multi="", peer_args="", peer_init="", total0="")
    return dict(multi="_multi", peer_args=" GROUTE_PEER_ARGS,",
                peer_init="    GROUTE_PEER_INIT\n", total0=" long long groute_total0,")


def _crossed(multi, by) -> str:
    """On several devices (``multi``), thread 0's report of the meetings a launch passed, as it
    leaves (a statement indented ``by``); nothing on one device."""
    return f"{by}groute_crossed(groute_r, groute_gbase);\n" if multi else ""


def _kernels(fields, multi) -> str:
    """The loop and the sweep kernels (:data:`_LOOP_KERNEL`, :data:`_SWEEP_KERNEL`) of a module
    of one group (``fields``: :func:`_module`'s); ``multi``: on several devices, with the first
    meeting and the result of a sweep around its levels."""
    hooks = {**fields, **_kernel_hooks(multi)}
    loop = dict(begin="", status="groute_status", crossed="")
    levels = fields["sweep_levels"]
    if multi:
        loop = dict(begin=_LOOP_BEGIN_MULTI, crossed=_crossed(multi, " " * 8),
                    status=f"groute_total < 0 ? {ABORTED} : groute_status")
        levels = _SWEEP_MULTI.format(sweep_levels=levels, EMPTIED=EMPTIED, ABORTED=ABORTED)
    return _LOOP_KERNEL.format(**hooks, **loop) + _SWEEP_KERNEL.format(**hooks, levels=levels)


def source(steps, level: str | None, where: str) -> str:
    """The CUDA source of the fused loop of ``steps`` (module docstring): ``groute_loop`` and
    ``groute_sweep``; ``level``: the scalar set to ``start`` plus the level's number."""
    title = ", ".join(f"{type(s).__name__}({s.functor.name})" for s in steps)
    head, fields = _module([(steps, level, "", False)], list(steps), where, title)
    return head + _kernels(fields, multi=False)


def multi_source(steps, level: str | None, where: str) -> str:
    """The CUDA source of the fused loop of ``steps`` on several devices, one launch per device
    (module docstring, "On several devices"): ``groute_loop_multi`` (a loop, its levels kept or
    not) and ``groute_sweep_multi`` (a sweep over kept levels), every step kind the one-device
    loop has."""
    title = "on several devices: " + ", ".join(f"{type(s).__name__}({s.functor.name})"
                                               for s in steps)
    head, fields = _module([(steps, level, "", False)], list(steps), where, title, multi=True)
    return head + _kernels(fields, multi=True)


def pull_steps(steps) -> list:
    """The positions in ``steps`` (a module's steps, in order) of those that may pull
    (:func:`may_pull`): on several devices each has its own copy of its frontier on every device
    (:func:`_pull_parts`), in this order in the pull table."""
    return [i for i, s in enumerate(steps) if may_pull(s)]


def rounds_source(body, index: str | None, total: str | None, where: str,
                  multi: bool = False) -> str:
    """The CUDA source of ``groute_rounds``: one round of ``body`` (the items of
    :mod:`groute.operators.rounds`) per seed (module docstring); ``index``: the scalar set to
    the round's number, ``total``: the one set to the vertices a kept Loop kept. ``multi``:
    ``groute_rounds_multi``, the same rounds on several devices, one launch per device (module
    docstring, "On several devices"): the seeds are global ids, each item's levels exchange
    and meet as a loop's and a sweep's on several devices, and a kept Loop's total is summed
    over the devices at a meeting."""
    all_steps = body_steps(body)
    groups = [(item.steps, item.level, f"_{j}",
               isinstance(item, Compute) and item.over == "all") for j, item in enumerate(body)]
    title = ("on several devices: " if multi else "") + "rounds of " + ", ".join(
        f"{type(item).__name__}({', '.join(s.functor.name for s in item.steps)})"
        for item in body)
    head, fields = _module(groups, all_steps, where, title, multi=multi)
    params, items, first = fields["params"], [], 0

    def stop(failed, round_="groute_round"):
        return _ROUND_STOP.format(failed=failed, round=round_, ABORTED=ABORTED) if multi else ""
    aborted = stop(f"groute_status == {ABORTED}")
    for j, item in enumerate(body):
        reset = "".join(f"            groute_r.pulling_{first + i} = 0; "
                        f"groute_r.explored_{first + i} = 0;\n"
                        for i, s in enumerate(item.steps)
                        if isinstance(s, AdvanceStep) and chooses_direction(s))
        first += len(item.steps)
        clears = leaves_clear(item.steps)
        if isinstance(item, Compute):
            items.append(_ROUND_COMPUTE.format(
                j=j, over=item.over, tally=2 * j,
                q="nullptr, 0" if item.over == "all" else "groute_store, groute_seed_n"))
        elif isinstance(item, Loop):
            kept = ""
            if item.keep:
                kept = ("            groute_kept = groute_level;\n"
                        + ("" if not multi else _ROUND_KEPT_SUM + stop(
                            "!groute_meet_sums(groute_r, groute_kept_sums)"))
                        + "            groute_kept_total = "
                        + ("groute_kept_sums[0];\n" if multi else "groute_at;\n")
                        + _set(params, total, "groute_kept_total"))
            items.append(_ROUND_LOOP.format(
                j=j, reset=reset, keep=int(item.keep), start=item.start, tally=2 * j,
                max_run=_INT_MAX if item.max_levels is None else item.max_levels,
                loop_levels=fields[f"loop_levels_{j}"], STORE_FULL=STORE_FULL,
                flush="            groute_clear(groute_r);\n" if clears else "",
                declare=_ROUND_LOOP_TOTAL if multi else "", aborted=aborted,
                crossed=_crossed(multi, " " * 20),
                kept=kept))
        else:
            items.append(_ROUND_SWEEP.format(
                j=j, reset=reset, skip=item.skip, reverse=int(item.reverse), start=item.start,
                tally=2 * j, sweep_levels=fields[f"sweep_levels_{j}"],
                flush=_SWEEP_FLUSH if clears else "", aborted=aborted,
                declare=f"            int groute_status = {EMPTIED};\n" if multi else ""))
    return head + _ROUNDS.format(
        items="".join(items), EMPTIED=EMPTIED, set_index=_set(params, index, "groute_round"),
        set_total=_set(params, total, "groute_kept_total"),
        begin=stop("groute_begin(groute_r, 0) < 0", "groute_round0"),
        first="groute_r.first" if multi else "0", crossed=_crossed(multi, " " * 8),
        **_kernel_hooks(multi), **fields)


def _decide(step, i, push_graph, run_members, multi=False) -> str:
    """The code that sets ``groute_pull`` for advance step ``i``: fixed, or (``"auto"``)
    Beamer's rule, whose state goes to ``run_members``; ``multi``: the rule on the frontier
    summed over the devices at a meeting."""
    if chooses_direction(step):
        run_members.append(f"    int pulling_{i} = 0; long long explored_{i} = 0;\n")
        return (_MULTI_AUTO if multi else _AUTO).format(i=i, push_graph=push_graph)
    return _FIXED.format(pull="true" if step.direction == "pull" else "false")


def _gather_step(step, i, out, region, cand, run_members, peer, pull, multi) -> str:
    """The code of gathering step ``i`` (``region``: its accumulators'; ``cand``: its
    candidates' bitmap, a C expression); an ``"auto"`` step adds its direction state to
    ``run_members``. ``peer``: :func:`_peer_parts`' (the push's exchange on several devices),
    ``pull``: :func:`_pull_parts`' (how the pull publishes its frontier)."""
    push_graph = "in" if step.over == "in" else "out"
    pull_graph = "out" if step.over == "in" else "in"
    return _GATHER.format(i=i, name=step.functor.name, over=step.over, direction=step.direction,
                          out=out, region=region, cand=cand, PULLS=PULLS,
                          decide=_decide(step, i, push_graph, run_members, multi),
                          push_graph=push_graph, pull_graph=pull_graph, peer_init=peer["init"],
                          exchange=peer.get("gather_exchange", ""), **pull)


def _ctype_of(params, name) -> str:
    return next(p.ctype for p in params if p.name == name)
