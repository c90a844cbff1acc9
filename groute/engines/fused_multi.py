"""A loop of operator steps, a sweep over the levels it kept, and rounds of them, on several CUDA
devices as one persistent launch per device, all launched at once, exchanging through writes
the devices make into each other's memory.

The BSP engine runs ``run_loop`` (its levels kept or not), ``sweep`` and ``run_rounds`` so on
K >= 2 CUDA devices that write into each other's
memory (:data:`~groute.engines.fused.LOOP_RULE`; where they cannot,
:func:`~groute.engines.peer_barrier.unavailable` says why). Every device runs
``groute_loop_multi`` (:func:`groute.operators.loop_source.multi_source`): per level and step
the level code of the one-device fused loop on its own part of the frontier, every step kind
of it: compute, filter, push, first-accept pull, gathering push and pull, each among
``candidates``, and ``"auto"`` between push and pull per level. A push visits the targets the
device owns at once and appends the others, with their messages, into their owner's inbox in
the owner's memory (``inbox.cuh``); the devices then meet at the cross-device barrier, and
each visits its inbox with the visit of an owned target (the operators' ``apply_k``'s). A pull
reads every device's frontier, which each device publishes to all of them first ("Pulls"
below). After a level each adds its frontier's size to a sum in device 0's memory and they
meet again, so every device reads the same size and takes the same decision: another level,
or stop (the frontier is empty on every device, or ``max_levels`` ran). No host step runs
between levels: the host launches once per device and reads each device's control blocks
once.

Kept levels (``keep=True``): each device writes its own part of every level into a store of
its own with the levels' offsets, the one-device loop's store and template
(:meth:`FusedLoops._new_store <groute.engines.fused.FusedLoops._new_store>`). A store that
fills must stop every device, not just its own, or the others would wait for it at the next
meeting: so each device adds to the level's sum whether its store has room for another level,
every device reads the same sum and stops at the same level, and the host grows every store
(``FusedLoops._grow``) and launches them all again from there. The result's
:class:`~groute.engines.fused.DeviceLevels` hold every device's store; a level's frontier has
a part per device. A sweep over them (``groute_sweep_multi``) runs per level the steps on each
device's part of it, with the loop's exchange, and a meeting after each level: no device
publishes or sends a level's frontier while another still reads the one before.

Rounds (``run_rounds``: :meth:`MultiFusedLoops.run_rounds`) are ``groute_rounds_multi``
(:func:`groute.operators.loop_source.rounds_source` with ``multi``): the one-device rounds'
templates and items with this level code, every round in one launch per device. Why the same
kernel and not a loop launch per item: a round of betweenness is a few levels, so a launch
per item would cost the host more than the levels. A seed is one device's vertex: level 0 of
that device's store, empty on the others; every Loop's level sizes start from its one vertex,
every level meets as the loop's do (the ring of level sums counts meetings per launch, since
each Loop starts again at level 0), and a kept Loop's total is its kept vertices summed over
the devices at a meeting, so every device sets the same ``total``. A store that fills stops
every device at the same level; the host grows every store and relaunches every device from
that round, item and level, with the resumed level's size over the devices.

Why one launch per device, not the host between levels: the BSP engine's operator calls cost
a host step per device per operator (launches, a count read back, a Router's packets), which
a loop of many small levels pays at every level; here a level costs the devices a meeting per
advance (two for an ``"auto"`` one: its direction, then its exchange or pull) and one for the
count, a few microseconds each.

Inboxes: device ``j``'s holds every arc that can reach it in one step from the other devices'
rows (:func:`inbox_capacity`: out-arcs, or in-arcs for ``over="in"``, counted once from the
partition, :func:`arc_matrix`), so a frontier without repeats never overflows it (a device
that found one full raises its flag, and the host raises). Each device has two, by the
advance steps' parity (why: ``loop_source``'s ``_RESET``), their messages beside them, and
every device holds a table of every device's inboxes and counts (``InboxTable``).

Pulls, as the operator calls pull across devices (:meth:`BSPEngine._pull
<groute.engines.bsp.BSPEngine._pull>`), but written by the devices: every device holds, per
step that may pull, a copy of the pulled frontier over every global id, a bitmap (n / 8 bytes)
and for a gathering step a table of the members' messages (n messages), :class:`Published`.
Where a step pulls, each device sets its members' bits (and writes their messages, computed
on their own device) in every device's copy through peer pointers (the pull table on each
device holds them), the devices meet, and each runs the one-device pull over its own
candidates' rows (``advance_pull``, ``advance_gather``), whose arcs hold global ids, testing its
own copy: no inbox, since the accepted vertices are the device's own. Each then zeroes its
copy's bitmap, before the level's meeting after which the devices publish into it again.
``"auto"`` decides by Beamer's rule on the frontier's vertices and arcs summed over the devices
at a meeting (device 0's ring of sums, as the levels'), so every device takes the same
direction; on a directed graph it pushes, as the operator calls (the engine gives the launches
its steps so: :func:`groute.engines.bsp.steps_as_run`).
The levels an advance pulled count in the engine's ``pull_advances``, once per advance as the
operator calls count them. The inboxes, the published frontiers and a kept loop's stores are
counted against the devices' free memory before the loop is chosen
(:meth:`MultiFusedLoops.inboxes_fit`), and for rounds the stores, the seeds and the tally.
"""
from __future__ import annotations

import weakref

import logging
from itertools import zip_longest

import numpy as np

from groute.memory import DeviceBytes, GraphTooLarge, check_fits
from groute.operators import loop_source
from groute.operators.frontier import Frontier, words_for
from groute.operators.loop import AdvanceStep, LoopResult, frontier_list
from groute.operators.rounds import RoundsResult, body_steps

from .fused import TALLY_WORDS, DeviceLevels, FusedLoops, LaunchEnd
from .protocol import MEETING_WORDS, LaunchStop

log = logging.getLogger(__name__)

#: the kernels of a loop's module on several devices: the loop's and the sweep's
KERNEL, SWEEP_KERNEL = "groute_loop_multi", "groute_sweep_multi"
KERNELS = (KERNEL, SWEEP_KERNEL)
#: the kernel of a rounds module on several devices (loop_source.rounds_source's multi)
ROUNDS_KERNEL = "groute_rounds_multi"
#: uint64 words of a device's peer control block; what the host reads of it (loop_source's
#: ``GROUTE_P_*``: an inbox was full; whether a meeting timed out and the meetings passed are
#: the control block's protocol words)
PCTL_WORDS = 7
P_FULL = 2
#: uint64 words of an ``InboxTable`` (``inbox.cuh``, which checks this layout when compiled):
#: ``off`` at 0, ``cap`` at 9, ``ids`` at 17, ``msgs`` at 33, ``count`` at 49, ``k`` at 57
TABLE_WORDS = 58
T_OFF, T_CAP, T_IDS, T_MSGS, T_COUNT, T_K = 0, 9, 17, 33, 49, 57
#: the devices an ``InboxTable`` holds (``inbox.cuh``'s ``INBOX_MAX_DEVICES``; the persistent
#: kernels' limit, :data:`groute.engines.peer_barrier.MAX_DEVICES`)
MAX_DEVICES = 8
#: uint64 words of device 0's meeting block: the protocol's (the counter), the ring of three
#: pairs of level sums (the frontier, the stores that fill), the ring of three pairs of sums an
#: ``"auto"`` advance decides by (loop_source's ``GROUTE_G_*``: ``groute_meet_level``,
#: ``groute_meet_sums``)
GLOBAL_WORDS = MEETING_WORDS + 12
#: arcs counted at once by :func:`arc_matrix` (bounded temporaries on big graphs)
CHUNK_ARCS = 1 << 22


def arc_matrix(offsets, indptr, indices, chunk: int = CHUNK_ARCS) -> np.ndarray:
    """``m[i, j]``: the arcs of a renumbered CSR graph (``indptr``, ``indices``) from the rows
    device ``i`` owns to the vertices device ``j`` owns (device ``i`` owns the ids
    ``[offsets[i], offsets[i + 1])``)."""
    offsets = np.asarray(offsets, np.int64)
    k = offsets.shape[0] - 1
    out = np.zeros((k, k), np.int64)
    for i in range(k):
        a, b = int(indptr[offsets[i]]), int(indptr[offsets[i + 1]])
        for lo in range(a, b, chunk):
            owner = np.searchsorted(offsets, np.asarray(indices[lo:min(lo + chunk, b)]),
                                    side="right") - 1
            out[i] += np.bincount(owner, minlength=k)[:k]
    return out


def inbox_capacity(matrix, over: str) -> np.ndarray:
    """Per device ``j``, the most items one step can send to it (``matrix``:
    :func:`arc_matrix` of the out-arcs): a push over out-arcs sends the arcs from the other
    devices' rows into ``j``'s vertices (its column, but the diagonal); over in-arcs every
    device's rows are its own vertices' in-arcs, whose targets are their sources, so ``j`` gets
    the arcs from its own vertices to the other devices' (its row, but the diagonal)."""
    m = np.array(matrix, np.int64)
    np.fill_diagonal(m, 0)
    return m.sum(axis=0) if over == "out" else m.sum(axis=1)


class Inboxes:
    """Every device's two inboxes (``ids``, ``msgs``: per device a pair, by parity; ``msgs``
    None without messages), its peer control block (``pctl``) and the ``InboxTable`` of them
    all on each device (``tables``); room for ``caps`` items per device and messages of
    ``words`` int32 words."""

    def __init__(self, devices, offsets, caps, words: int):
        self.caps, self.words = np.asarray(caps, np.int64), int(words)
        self.ids, self.msgs, self.pctl = [], [], []
        for dev, cap in zip(devices, self.caps):
            ids, msgs = self.sizes(max(int(cap), 1), words)
            with dev.on_compute():     # before the launches that use them
                self.ids.append([dev.xp.empty(ids, np.int32) for _ in range(2)])
                self.msgs.append([dev.xp.empty(msgs, np.uint32) for _ in range(2)]
                                 if words else None)
                self.pctl.append(dev.xp.zeros(PCTL_WORDS, np.uint64))
        table = self.table(offsets, self.caps, self.ids, self.msgs, self.pctl)
        self.tables = [dev.asarray(table) for dev in devices]       # waits for the upload

    @staticmethod
    def sizes(cap: int, words: int) -> tuple:
        """The 4-byte words of one inbox with room for ``cap`` items: its ids', and its
        messages' of ``words`` words each (0: none)."""
        return int(cap), int(cap) * int(words)

    @staticmethod
    def table(offsets, caps, ids, msgs, pctl) -> np.ndarray:
        """The ``InboxTable`` as uint64 words (``inbox.cuh``): the partition's ``offsets``,
        each device's capacity, the device addresses of its inboxes (by parity), of their
        messages (0: none) and of its counts (the first two words of its ``pctl``)."""
        k = len(caps)
        if k > MAX_DEVICES:
            raise ValueError(f"the fused loop on several devices takes at most {MAX_DEVICES} "
                             f"devices; got {k}")
        words = np.zeros(TABLE_WORDS, np.int64)
        offsets = np.asarray(offsets, np.int64)
        words[T_OFF:T_OFF + MAX_DEVICES + 1] = offsets[-1]
        words[T_OFF:T_OFF + k + 1] = offsets
        words[T_CAP:T_CAP + k] = caps
        for j in range(k):
            for parity in range(2):
                words[T_IDS + MAX_DEVICES * parity + j] = ids[j][parity].data.ptr
                if msgs[j] is not None:
                    words[T_MSGS + MAX_DEVICES * parity + j] = msgs[j][parity].data.ptr
            words[T_COUNT + j] = pctl[j].data.ptr
        words[T_K] = k
        return words.view(np.uint64)

    def holds(self, caps, words: int) -> bool:
        return bool((self.caps >= caps).all()) and self.words >= words


def pull_words(steps) -> list:
    """Per step of ``steps`` that may pull (:func:`loop_source.pull_steps`' order), the int32
    words of the message its pull reads from the published table (0: a first-accept pull, a
    bitmap alone)."""
    return [steps[i].functor.message.words if steps[i].functor.gather is not None else 0
            for i in loop_source.pull_steps(steps)]


def inbox_bytes(cap: int, words: int) -> int:
    """One device's bytes of its two inboxes (:class:`Inboxes`) with room for ``cap`` items
    and messages of ``words`` int32 words."""
    return 2 * 4 * sum(Inboxes.sizes(cap, words))


def published_bytes(n: int, words) -> int:
    """One device's bytes of the published frontiers of pulls of ``words`` (:func:`pull_words`)
    on a graph of ``n`` vertices: per pulling step a bitmap over every vertex (n / 8 bytes) and
    a table of ``words`` int32 words per vertex."""
    return sum(4 * sum(Published.sizes(n, w)) for w in words)


def store_bytes(n_local: int) -> int:
    """One device's bytes of a new store of kept levels (:meth:`FusedLoops._new_store
    <groute.engines.fused.FusedLoops._new_store>`) for a part of ``n_local`` vertices: at most
    all of them in the first frontier (:meth:`FusedLoops.store_room
    <groute.engines.fused.FusedLoops.store_room>`), and the levels' offsets."""
    return 4 * FusedLoops.store_room(n_local, n_local) + 8 * FusedLoops.OFFSETS


def rounds_bytes(seeds: int, items: int) -> int:
    """One device's bytes of rounds besides their store (:meth:`MultiFusedLoops.run_rounds`):
    the seeds (int32) and the tally (:data:`~groute.engines.fused.TALLY_WORDS` int64 per item
    of the body; at most one item per step, ``items``)."""
    return 4 * seeds + 8 * TALLY_WORDS * items


class Published:
    """Every device's copies of the frontiers its pulls read (module docstring, "Pulls"): per
    step that may pull, a bitmap over every global id (``bits[j][r]``) and, for a gathering
    step, a table of messages by global id (``msgs[j][r]``, int32 words; None: a first-accept
    pull); and on each device the pull table of their addresses (``tables``)."""

    def __init__(self, devices, n: int, words):
        self.devices, self.words = devices, [int(w) for w in words]
        self.bits, self.msgs = [], []
        for dev in devices:
            with dev.on_compute():     # before the launches that use them
                sizes = [self.sizes(n, w) for w in self.words]
                self.bits.append([dev.xp.zeros(max(b, 1), np.uint32) for b, _ in sizes])
                self.msgs.append([dev.xp.empty(max(m, 1), np.uint32) if m else None
                                  for _, m in sizes])
        table = self.table(self.bits, self.msgs)
        self.tables = [dev.asarray(table) for dev in devices]       # waits for the upload

    @staticmethod
    def sizes(n: int, words: int) -> tuple:
        """The uint32 words of one pulling step's copy on one device, over ``n`` vertices: its
        bitmap's, and its table's of ``words`` words per vertex (0: no table)."""
        return words_for(n), n * int(words)

    @staticmethod
    def table(bits, msgs) -> np.ndarray:
        """The pull table as uint64 words (loop_source's ``groute_pull_bits``,
        ``groute_pull_table``): row ``2 r`` the devices' bitmaps of pulling step ``r``, row
        ``2 r + 1`` their tables (0: none), a column of :data:`MAX_DEVICES` per row; one row of
        zeros where no step pulls (the kernel takes a pointer either way)."""
        slots = len(bits[0]) if bits else 0
        words = np.zeros(max(2 * slots, 1) * MAX_DEVICES, np.int64)
        for j, (mine, tables) in enumerate(zip(bits, msgs)):
            for r in range(slots):
                words[2 * r * MAX_DEVICES + j] = mine[r].data.ptr
                if tables[r] is not None:
                    words[(2 * r + 1) * MAX_DEVICES + j] = tables[r].data.ptr
        return words.view(np.uint64)

    def holds(self, words) -> bool:
        return len(self.words) >= len(words) and all(a >= b for a, b in zip(self.words, words))

    def zero(self, i: int) -> None:
        """Device ``i``'s bitmaps zeroed before its launch, on its compute stream (the others
        publish into them only after the launch's first meeting). A launch leaves them zeroed
        (each pull clears its copy) unless it failed half way, which this undoes."""
        dev = self.devices[i]
        with dev.on_compute():
            for bits in self.bits[i]:
                bits.fill(0)


class MultiFusedLoops:
    """The fused loops of one BSP engine across its CUDA devices (module docstring): each
    device's compiling, arguments and last frontier are its :class:`FusedLoops`'; the
    inboxes, the published frontiers (:class:`Published`), the tables of them and the
    cross-device barrier are made on the first loop that needs them."""

    def __init__(self, engine):
        self._engine = weakref.ref(engine)     # the engine holds these loops (FusedLoops)
        self.devices = [part.device for part in engine.parts]
        self.loops = [FusedLoops(engine, i) for i in range(len(engine.parts))]
        self._matrix = None
        self._inboxes = None
        self._published = None
        self._barrier = None

    @property
    def engine(self):
        """The engine these loops belong to (alive while they run: it runs them)."""
        return self._engine()

    # what the launches share -----------------------------------------------------------------

    def capacities(self, steps) -> np.ndarray:
        """Per device, the room its inboxes need for ``steps``: the most over the arcs their
        advances push along (:func:`inbox_capacity`)."""
        caps = np.zeros(len(self.devices), np.int64)
        for over in sorted({s.over for s in steps if isinstance(s, AdvanceStep)}):
            if self._matrix is None:
                g = self.engine.partition.graph
                self._matrix = arc_matrix(self.engine.partition.offsets, g.indptr, g.indices)
            caps = np.maximum(caps, inbox_capacity(self._matrix, over))
        return caps

    @staticmethod
    def message_words(steps) -> int:
        """The int32 words of the widest message the advances of ``steps`` send (0: none)."""
        return max([s.functor.message.words for s in steps
                    if isinstance(s, AdvanceStep) and s.functor.message is not None], default=0)

    def inboxes_fit(self, steps, keep: bool = False, seeds: int | None = None) -> bool:
        """Whether the inboxes and published frontiers ``steps`` need, and (``keep``) the
        stores of the levels a loop keeps, fit the devices' free memory (inboxes and published
        frontiers made for an earlier loop that already hold them count as there). The
        inboxes have room for every arc that crosses into a device, twice, and a pull's
        frontier costs every device a bitmap and a table of messages over every vertex of the
        graph, which on a big graph cut many ways can outgrow what the graph left free: such a
        loop runs as operator calls (LOOP_RULE's ``inboxes_fit``) rather than running out of
        memory in the middle of an algorithm. A store starts with room for its device's part of
        the first frontier and two levels of its vertices (:func:`store_bytes`), and grows.
        ``seeds``: rounds of that many seeds (:meth:`run_rounds`), which hold a store on every
        device whether or not a Loop keeps its levels (level 0 is the seed) and the seeds and
        the tally of levels on every device (:func:`rounds_bytes`)."""
        caps, words = self.capacities(steps), self.message_words(steps)
        pulls = pull_words(steps)
        need = {}
        if self._inboxes is None or not self._inboxes.holds(caps, words):
            need["inboxes (two per device: ids and messages)"] = \
                inbox_bytes(int(caps.max(initial=0)), words)
        if pulls and (self._published is None or not self._published.holds(pulls)):
            need["published frontiers (per pulling step: a bitmap and messages over every "
                 "vertex)"] = published_bytes(self.engine.num_vertices, pulls)
        if keep or seeds is not None:
            need["kept levels (a store per device: its vertices three times, and the levels' "
                 "offsets)"] = store_bytes(max(p.size for p in self.engine.parts))
        if seeds is not None:
            need["rounds (the seeds and a tally of levels per item, on every device)"] = \
                rounds_bytes(seeds, len(steps))
        if not need:
            return True
        try:
            check_fits(self.devices, DeviceBytes(need),
                       "the fused loop's inboxes, published frontiers and level stores")
        except GraphTooLarge:
            return False
        return True

    def _inbox(self, steps) -> Inboxes:
        """Inboxes with room for ``steps`` (the last loop's, or bigger ones made now)."""
        caps, words = self.capacities(steps), self.message_words(steps)
        have = self._inboxes
        if have is None or not have.holds(caps, words):
            if have is not None:
                caps, words = np.maximum(caps, have.caps), max(words, have.words)
            self._inboxes = None            # the old buffers go back before the new are made
            self._inboxes = Inboxes(self.devices, self.engine.partition.offsets, caps, words)
        return self._inboxes

    def _publish_room(self, steps) -> Published:
        """Published frontiers for the pulls of ``steps`` (the last loop's, or bigger ones
        made now)."""
        words = pull_words(steps)
        have = self._published
        if have is None or not have.holds(words):
            if have is not None:
                words = [max(a, b) for a, b in zip_longest(words, have.words, fillvalue=0)]
            self._published = None          # the old buffers go back before the new are made
            self._published = Published(self.devices, self.engine.num_vertices, words)
        return self._published

    def _room(self, steps) -> tuple:
        """The inboxes and published frontiers the launches of a loop of ``steps`` use, made
        or found once per loop, whatever its relaunches."""
        return self._inbox(steps), self._publish_room(steps)

    def _cross_barrier(self):
        """The :class:`~groute.engines.peer_barrier.CrossDeviceBarrier` of the launches: its
        counter and the rings of sums in device 0's memory (made on the first loop)."""
        from .peer_barrier import CrossDeviceBarrier     # reads the environment: on first use
        if self._barrier is None:
            dev = self.devices[0]
            with dev.on_compute():
                block = dev.xp.zeros(GLOBAL_WORDS, np.uint64)
            dev.compute_stream.record().synchronize()  # zero before any device's launch
            self._barrier = CrossDeviceBarrier(self.devices, block)
        return self._barrier

    def _settle_failed(self, barrier) -> None:
        """After a run that raised: the barrier reset (every device waited for, its block
        zeroed); if even that fails, a new barrier for the next run."""
        try:
            barrier.reset()
        except Exception as exc:  # noqa: BLE001 - the run's own failure is what is raised
            log.warning("the cross-device barrier could not be reset after a failed loop (%s); "
                        "the next loop makes a new one", exc)
            self._barrier = None

    # the launches ------------------------------------------------------------------------------
    def _launch_all(self, text, kernel, steps, room, own, params, where,
                    names=KERNELS) -> tuple:
        """One launch of ``kernel`` (of the module ``text``, whose kernels are ``names``, for
        ``steps``, with the inboxes and published frontiers ``room``: :meth:`_room`) per
        device, all at once: the arguments every kernel on several devices begins with, then
        ``own[i]`` (device ``i``'s arguments of that kernel), then ``params[i]``. Raises where
        a device did not come to a meeting, found an inbox full, or the devices disagree on
        the levels they ran and why they stopped. Returns per device where its launch stopped
        (:class:`~groute.engines.fused.LaunchEnd`), and per device its common arguments
        (:meth:`FusedLoops._common`)."""
        from .peer_barrier import timeout_ns
        eng, k = self.engine, len(self.devices)
        inbox, published = room
        barrier = self._cross_barrier()

        # every device compiles and makes its arguments first: a device that launched waits
        # for the others at the first meeting, no longer than the barrier's timeout
        def prepare(device, i, fl):
            fl._kernels(text, names)
            published.zero(i)
            return fl._common(steps)

        prepared = eng._each(prepare, range(k), self.loops)
        timeout, base = timeout_ns(), barrier.base     # the timeout read per run
        barrier.wake_links()

        def launch(device, i, fl, ready, mine, values):
            try:
                fl._launch(text, names, kernel, ready[0] + (
                    inbox.tables[i], inbox.pctl[i], np.int32(i), np.uint64(barrier.ptr),
                    np.uint64(base), np.int64(timeout), published.tables[i],
                    np.int64(eng.num_arcs)) + tuple(mine) + tuple(values))
            finally:
                barrier.after_launch(i)

        def read_back(device, i, ready):
            with device.on_compute():     # after the launch
                return ready[1].get(), inbox.pctl[i].get()

        # every launch is queued before any host thread waits for one: a device's grid waits
        # at the meetings for the others', which must not wait for a host thread to come back
        try:
            eng._each(launch, range(k), self.loops, prepared, own, params)
            done = eng._each(read_back, range(k), prepared)
        except BaseException:
            # a launch failed (the others give up at a meeting) or a device did: where the
            # counter stands is unknown, so every device is waited for and it is zeroed
            self._settle_failed(barrier)
            raise
        ctls, flags = [c for c, _ in done], [f for _, f in done]
        names = [dev.name for dev in self.devices]
        full = [name for name, f in zip(names, flags) if f[P_FULL]]
        ends = [LaunchEnd.of(c) for c in ctls]
        agree = len({(e.ran, e.status) for e in ends}) == 1
        barrier.finish([LaunchStop.read(name, c) for name, c in zip(names, ctls)],
                       ok=not full and agree, what=f"{where} on {k} devices",
                       instead="loop='python'")
        if full:
            raise RuntimeError(f"{where}: {', '.join(full)} found another device's inbox full "
                               f"(sized for every arc into it from the other devices: a "
                               f"frontier with repeated vertices?); items were dropped")
        if not agree:
            raise RuntimeError(f"{where}: the devices ran different numbers of levels "
                               f"{[(e.ran, e.status) for e in ends]}")
        self.loops[0]._pulled(ctls[0])      # every device pulled at the same advances
        return ends, [ready[0] for ready in prepared]

    def _grow_all(self, stores, ends, level) -> list:
        """Every device's store grown after a launch that filled one (``ends``: where each
        device's stopped), each keeping what it holds up to its last level's end, for the
        next launch to go on from ``level`` (:meth:`FusedLoops._grow`)."""
        return self.engine._each(lambda device, fl, store, end: fl._grow(
            *store, end.at + end.count, level), self.loops, stores, ends)

    def _module(self, steps, level, scalars, where):
        """The module's text of ``steps`` and each device's values of their parameters."""
        text = loop_source.multi_source(steps, level, where)
        params = [fl._values(steps, (level,), scalars, where) for fl in self.loops]
        return text, params

    # the loop and the sweep ------------------------------------------------------------------
    def run_loop(self, frontier, steps, *, level, start, max_levels, keep,
                 scalars) -> LoopResult:
        """``run_loop``, one launch per device at once; see the module docstring. ``keep``:
        each device keeps its part of every level in a store of its own
        (:meth:`FusedLoops._new_store`); when a device's store has no room for the next level
        every device stops there (the level's meeting sums whether one is full), the host
        grows every store and launches them all again from that level."""
        where = "run_loop(fused)"
        eng = self.engine
        left = np.iinfo(np.int32).max if max_levels is None else max_levels
        total = len(frontier)
        if total == 0 or left == 0:         # no level runs: nothing to launch
            return LoopResult(0, frontier, frontier_list(eng, []) if keep else None, "fused")
        text, params = self._module(steps, level, scalars, where)

        def first(device, fl, part):
            queue = part.to_queue().queue
            return queue, part.count, fl._new_store(queue, part.count) if keep else None

        # the first stores only in `stores`, so a store replaced by a grown one is freed
        queues, counts, stores = (list(x) for x in zip(*eng._each(first, self.loops,
                                                                   frontier.parts)))
        room = self._room(steps)
        levels = 0
        while True:
            own = [(queue, np.int64(count), np.int64(total)) + _store_args(store, keep)
                   + (np.int32(levels), np.int32(left - levels), np.int64(start))
                   for queue, count, store in zip(queues, counts, stores)]
            ends, commons = self._launch_all(text, KERNEL, steps, room, own, params, where)
            levels += ends[0].ran
            counts = [end.count for end in ends]    # a relaunch goes on from this level
            if not ends[0].full:
                break
            stores = self._grow_all(stores, ends, levels)
            total = sum(counts)
        self.loops[0]._count(steps, levels)
        if keep:
            kept = DeviceLevels(eng, eng.parts, [s[0] for s in stores], [s[1] for s in stores],
                                levels, sum(end.at for end in ends))
            last = [fl._kept_last(store[0], end.at, end.count)
                    for fl, store, end in zip(self.loops, stores, ends)]
            return LoopResult(levels, Frontier(eng, last), kept.levels(), "fused")
        parts = [fl._left(common, steps, levels, end.count)
                 for fl, common, end in zip(self.loops, commons, ends)]
        return LoopResult(levels, Frontier(eng, parts), None, "fused")

    def sweep(self, levels, steps, *, level, start, reverse, scalars) -> None:
        """``sweep`` over the levels a fused loop kept on these devices
        (:class:`~groute.engines.fused.DeviceLevels`), one launch per device at once: per
        level the steps on each device's part of it, exchanging as the loop does, and a
        meeting after each level."""
        where = "sweep(fused)"
        text, params = self._module(steps, level, scalars, where)
        store, numbers = levels.store, levels.numbers
        own = [(buffer, offsets, np.int32(numbers.start), np.int32(numbers.stop),
                np.int32(reverse), np.int64(start))
               for buffer, offsets in zip(store.buffers, store.offsets)]
        self._launch_all(text, SWEEP_KERNEL, steps, self._room(steps), own, params, where)
        self.loops[0]._count(steps, len(numbers))


    def run_rounds(self, seeds, body, *, index, total, scalars) -> RoundsResult:
        """``run_rounds``, one launch per device at once (``seeds``: global ids, the
        partition's): every round in it, each device on its part of every level, exchanging
        and meeting as the loop and the sweep do. Every device keeps its part of a kept Loop's
        levels in a store of its own (the one-device rounds' store, level 0 the seed on its
        owner and empty elsewhere); when one has no room for the next level every device stops
        there, the host grows every store and launches them all again from that round, item
        and level, as :meth:`FusedLoops.run_rounds <groute.engines.fused.FusedLoops.run_rounds>`
        does on one device."""
        where = "run_rounds(fused)"
        eng, rounds = self.engine, len(seeds)
        if rounds == 0:
            return RoundsResult(0, 0, 0, "fused")
        steps = body_steps(body)
        text = loop_source.rounds_source(body, index, total, where, multi=True)
        on_device = [item.level for item in body] + [index, total]
        params = [fl._values(steps, on_device, scalars, where) for fl in self.loops]

        # the first stores only in `stores`, so a store replaced by a grown one is freed
        ids_of, stores, tallies = (list(x) for x in zip(*eng._each(
            lambda device, fl: fl._rounds_buffers(seeds, len(body)), self.loops)))
        room = self._room(steps)
        round0 = item0 = level0 = kept_total = total0 = 0
        while True:
            own = [(np.int64(total0), ids, np.int32(round0), np.int32(rounds), np.int32(item0),
                    np.int32(level0), store[0], store[1], np.int64(store[2]),
                    np.int32(store[3]), np.int64(kept_total), tally)
                   for ids, tally, store in zip(ids_of, tallies, stores)]
            ends, _ = self._launch_all(text, ROUNDS_KERNEL, steps, room, own, params, where,
                                       names=(ROUNDS_KERNEL,))
            end = ends[0]
            if not end.full:
                break
            round0, item0, level0 = end.ran, end.item, end.level
            kept_total = end.kept_total       # summed over the devices: the same on each
            total0 = sum(e.count for e in ends)   # the resumed level's size over the devices
            stores = self._grow_all(stores, ends, level0)
        # every device ran the same levels: device 0's tally counts them
        return self.loops[0]._rounds_result(body, rounds, tallies[0])


def _store_args(store, keep) -> tuple:
    """A loop kernel's arguments of a store of kept levels (:meth:`FusedLoops._new_store`'s
    tuple; null pointers where the loop keeps none)."""
    if not keep:
        return np.uint64(0), np.uint64(0), np.int64(0), np.int32(0), np.int32(0)
    buffer, offsets, capacity, offsets_capacity = store
    return buffer, offsets, np.int64(capacity), np.int32(offsets_capacity), np.int32(1)
