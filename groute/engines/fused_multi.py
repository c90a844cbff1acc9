"""A loop of operator steps on several CUDA devices as one persistent launch per device, all
launched at once, exchanging through writes the devices make into each other's memory.

The BSP engine runs ``run_loop`` so on K >= 2 CUDA devices that write into each other's
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
direction; on a directed graph it pushes, as the operator calls (:meth:`MultiFusedLoops.as_run`).
The levels an advance pulled count in the engine's ``pull_advances``, once per advance as the
operator calls count them. The inboxes and the published frontiers are counted against the
devices' free memory before the loop is chosen (:meth:`MultiFusedLoops.inboxes_fit`).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from itertools import zip_longest

import numpy as np

from groute.memory import DeviceBytes, GraphTooLarge, check_fits
from groute.operators import loop_source
from groute.operators.direction import auto_may_pull
from groute.operators.frontier import Frontier
from groute.operators.loop import AdvanceStep, LoopResult

from .fused import FusedLoops

log = logging.getLogger(__name__)

#: the kernel of a loop's module on several devices
KERNEL = "groute_loop_multi"
#: uint64 words of a device's peer control block; what the host reads of it (loop_source's
#: ``GROUTE_P_*``: a meeting timed out, the meetings passed, an inbox was full)
PCTL_WORDS = 8
P_ABORT, P_CROSSED, P_FULL = 2, 3, 5
#: uint64 words of an ``InboxTable`` (``inbox.cuh``, which checks this layout when compiled):
#: ``off`` at 0, ``cap`` at 9, ``ids`` at 17, ``msgs`` at 33, ``count`` at 49, ``k`` at 57
TABLE_WORDS = 58
T_OFF, T_CAP, T_IDS, T_MSGS, T_COUNT, T_K = 0, 9, 17, 33, 49, 57
#: the devices an ``InboxTable`` holds (``inbox.cuh``'s ``INBOX_MAX_DEVICES``; the persistent
#: kernels' limit, :data:`groute.engines.peer_barrier.MAX_DEVICES`)
MAX_DEVICES = 8
#: uint64 words of device 0's block: the cross-device barrier's counter, the ring of three level
#: sums, the ring of three pairs of sums an ``"auto"`` advance decides by (loop_source's
#: ``GROUTE_G_*``: ``groute_meet``, ``groute_meet_sums``)
GLOBAL_WORDS = 10
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
            size = max(int(cap), 1)
            with dev.use(), dev.compute_stream.raw:     # before the launches that use them
                self.ids.append([dev.xp.empty(size, np.int32) for _ in range(2)])
                self.msgs.append([dev.xp.empty(size * words, np.uint32) for _ in range(2)]
                                 if words else None)
                self.pctl.append(dev.xp.zeros(PCTL_WORDS, np.uint64))
        table = self.table(offsets, self.caps, self.ids, self.msgs, self.pctl)
        self.tables = [dev.asarray(table) for dev in devices]       # waits for the upload

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


def published_bytes(n: int, words) -> int:
    """One device's bytes of the published frontiers of pulls of ``words`` (:func:`pull_words`)
    on a graph of ``n`` vertices: per pulling step a bitmap over every vertex (n / 8 bytes) and
    a table of ``words`` int32 words per vertex."""
    return sum(4 * sum(Published.sizes(n, w)) for w in words)


class Published:
    """Every device's copies of the frontiers its pulls read (module docstring, "Pulls"): per
    step that may pull, a bitmap over every global id (``bits[j][r]``) and, for a gathering
    step, a table of messages by global id (``msgs[j][r]``, int32 words; None: a first-accept
    pull); and on each device the pull table of their addresses (``tables``)."""

    def __init__(self, devices, n: int, words):
        self.devices, self.words = devices, [int(w) for w in words]
        self.bits, self.msgs = [], []
        for dev in devices:
            with dev.use(), dev.compute_stream.raw:     # before the launches that use them
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
        return (n + 31) // 32, n * int(words)

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
        with dev.use(), dev.compute_stream.raw:
            for bits in self.bits[i]:
                bits.fill(0)


class MultiFusedLoops:
    """The fused loops of one BSP engine across its CUDA devices (module docstring): each
    device's compiling, arguments and last frontier are its :class:`FusedLoops`'; the
    inboxes, the published frontiers (:class:`Published`), the tables of them and the
    cross-device barrier are made on the first loop that needs them."""

    def __init__(self, engine):
        self.engine = engine
        self.devices = [part.device for part in engine.parts]
        self.loops = [FusedLoops(engine, part, lambda i=i: engine._in_arc_parts()[i])
                      for i, part in enumerate(engine.parts)]
        self._matrix = None
        self._inboxes = None
        self._published = None
        self._barrier = None

    # what the launches share -----------------------------------------------------------------
    def as_run(self, steps) -> list:
        """``steps`` as the launches run them: where ``"auto"`` may not pull
        (:func:`~groute.operators.direction.auto_may_pull`) an ``"auto"`` advance pushes, as
        the operator calls decide, so both take the same directions."""
        if auto_may_pull(self.engine.directed):
            return list(steps)
        return [replace(s, direction="push")
                if isinstance(s, AdvanceStep) and s.direction == "auto" else s for s in steps]

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

    def inboxes_fit(self, steps) -> bool:
        """Whether the inboxes and published frontiers ``steps`` need fit the devices' free
        memory (those made for an earlier loop that already hold them count as there). The
        inboxes have room for every arc that crosses into a device, twice, and a pull's
        frontier costs every device a bitmap and a table of messages over every vertex of the
        graph, which on a big graph cut many ways can outgrow what the graph left free: such a
        loop runs as operator calls (LOOP_RULE's ``inboxes_fit``) rather than running out of
        memory in the middle of an algorithm."""
        steps = self.as_run(steps)
        caps, words = self.capacities(steps), self.message_words(steps)
        pulls = pull_words(steps)
        need = {}
        if self._inboxes is None or not self._inboxes.holds(caps, words):
            need["inboxes (two per device: ids and messages)"] = \
                2 * int(caps.max(initial=0)) * 4 * (1 + words)
        if pulls and (self._published is None or not self._published.holds(pulls)):
            need["published frontiers (per pulling step: a bitmap and messages over every "
                 "vertex)"] = published_bytes(self.engine.num_vertices, pulls)
        if not need:
            return True
        try:
            check_fits(self.devices, DeviceBytes(need),
                       "the fused loop's inboxes and published frontiers")
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

    def _cross_barrier(self):
        """The :class:`~groute.engines.peer_barrier.CrossDeviceBarrier` of the launches: its
        counter and the rings of sums in device 0's memory (made on the first loop)."""
        from .peer_barrier import CrossDeviceBarrier     # reads the environment: on first use
        if self._barrier is None:
            dev = self.devices[0]
            with dev.use(), dev.compute_stream.raw:
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

    # the loop -----------------------------------------------------------------------------------
    def run_loop(self, frontier, steps, *, level, start, max_levels, scalars) -> LoopResult:
        """``run_loop`` without ``keep`` (the engine's rule sends only such loops here), one
        launch per device at once, its steps as :meth:`as_run` says; see the module
        docstring."""
        from .peer_barrier import timeout_ns
        where = "run_loop(fused)"
        eng, k = self.engine, len(self.devices)
        left = np.iinfo(np.int32).max if max_levels is None else max_levels
        total = len(frontier)
        if total == 0 or left == 0:         # no level runs: nothing to launch
            return LoopResult(0, frontier, None, "fused")
        steps = self.as_run(steps)
        text = loop_source.multi_source(steps, level, where)
        params = [fl._params(steps, (level,), scalars, where) + fl._candidates(steps)
                  for fl in self.loops]
        inbox = self._inbox(steps)
        published = self._publish_room(steps)
        barrier = self._cross_barrier()

        # every device compiles and makes its arguments first: a device that launched waits
        # for the others at the first meeting, no longer than the barrier's timeout
        def prepare(device, i, fl, part):
            fl._kernels(text, (KERNEL,))
            common, ctl = fl._common(steps)
            published.zero(i)
            queue = part.to_queue().queue
            return common, ctl, queue, part.count

        prepared = eng._each(prepare, range(k), self.loops, frontier.parts)
        timeout, base = timeout_ns(), barrier.base     # the timeout read per run
        barrier.wake_links()

        def launch(device, i, fl, ready, values):
            common, ctl, queue, count = ready
            try:
                fl._launch(text, (KERNEL,), KERNEL, common + (
                    queue, np.int64(count), np.int64(total), np.int32(left), np.int64(start),
                    inbox.tables[i], inbox.pctl[i], np.int32(i), np.uint64(barrier.ptr),
                    np.uint64(base), np.int64(timeout), published.tables[i],
                    np.int64(eng.num_arcs), *values))
            finally:
                barrier.after_launch(i)

        def read_back(device, i, ready):
            with device.use(), device.compute_stream.raw:     # after the launch
                return ready[1].get(), inbox.pctl[i].get()

        # every launch is queued before any host thread waits for one: a device's grid waits
        # at the meetings for the others', which must not wait for a host thread to come back
        try:
            eng._each(launch, range(k), self.loops, prepared, params)
            done = eng._each(read_back, range(k), prepared)
        except BaseException:
            # a launch failed (the others give up at a meeting) or a device did: where the
            # counter stands is unknown, so every device is waited for and it is zeroed
            self._settle_failed(barrier)
            raise
        ctls, flags = [c for c, _ in done], [f for _, f in done]
        names = [dev.name for dev in self.devices]
        aborted = [name for name, f in zip(names, flags) if f[P_ABORT]]
        full = [name for name, f in zip(names, flags) if f[P_FULL]]
        ran = {int(c[6:7].view(np.int32)[0]) for c in ctls}
        barrier.finish([int(f[P_CROSSED]) for f in flags], aborted=aborted,
                       ok=not full and len(ran) == 1, what=f"{where} on {k} devices",
                       instead="loop='python'")
        if full:
            raise RuntimeError(f"{where}: {', '.join(full)} found another device's inbox full "
                               f"(sized for every arc into it from the other devices: a "
                               f"frontier with repeated vertices?); items were dropped")
        if len(ran) != 1:
            raise RuntimeError(f"{where}: the devices ran different numbers of levels "
                               f"{[int(c[6:7].view(np.int32)[0]) for c in ctls]}")
        levels = ran.pop()
        self.loops[0]._count(steps, levels)
        self.loops[0]._pulled(ctls[0])      # every device pulled at the same advances
        parts = [fl._left(ready[0], steps, levels, int(c[7]))
                 for fl, ready, c in zip(self.loops, prepared, ctls)]
        return LoopResult(levels, Frontier(eng, parts), None, "fused")
