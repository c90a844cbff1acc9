"""A loop of operator steps on one CUDA device as one persistent launch (``run_loop``,
``sweep``: :mod:`groute.operators.loop`), and the rule that says when an engine runs it so.

The kernels (:mod:`groute.operators.loop_source`) are compiled once per loop (its steps and
level scalar; cached by the hash of the source, as the operators' own kernels) for a resident
grid: blocks per SM from :func:`groute.kernels.resident_blocks_per_sm` times the device's
multiprocessors, launched cooperatively, so the grid barrier between steps cannot deadlock.
The host launches once and reads the control block once (levels run, why it stopped, the
last frontier's count: the protocol's words of every persistent kernel,
:mod:`groute.engines.protocol`, and the loop's own). With ``keep`` the levels' queues stay on the device back to back with
their offsets (:class:`DeviceLevels`); when that store fills, the host grows it and launches
again from the level it reached. A step's candidates frontier, where the kernels read it, goes
to them as a bitmap made once per call. Rounds (``run_rounds``) are one launch of ``groute_rounds`` for
every seed, the store reused per round, the control block and a tally of levels per item read
once at the end.

:data:`LOOP_RULE` (a :class:`~groute.engines.rules.Rule`) says which implementation runs a
loop: on several CUDA devices that write into each other's memory a ``run_loop`` (its levels kept
or not), a ``sweep`` over the levels it kept and ``run_rounds`` are one launch per device, their
pulls too (:mod:`groute.engines.fused_multi`, a :class:`FusedLoops` per device compiling and
making its arguments and stores).
"""
from __future__ import annotations

import weakref

from typing import NamedTuple

import numpy as np

from groute.operators.frontier import DeviceFrontier, Frontier, words_for
from groute.operators.loop import Levels, LoopResult, loop_params
from groute.operators.rounds import Loop, RoundsResult, body_steps
from groute.operators import loop_source
from groute.operators.direction import compile_options
from groute.operators.generated import write_source

from .protocol import PROTOCOL_WORDS, LaunchStop, own_words
from .rules import FACTS, Case, Rule, said

#: the facts :data:`LOOP_RULE` asks besides the library's (``cuda``, ``one_device``,
#: ``peer_writes``)
LOOP_FACTS = {
    **FACTS,
    "levels_on_host": ("a sweep over levels kept on the host", "no levels kept on the host",
                       None),
    "inboxes_fit": ("the inboxes, published frontiers and stores fit the devices' free memory",
                    "the inboxes, published frontiers and stores would not fit the devices' "
                    "free memory",
                    "on several devices each device holds two inboxes, each with room for every "
                    "arc that crosses into it and its message, per step that may pull a copy "
                    "of the pulled frontier over every vertex of the graph: a bitmap and, for a "
                    "gathering step, a message per vertex, and for a loop that keeps its levels "
                    "or for rounds a store of its part of them (rounds: and the seeds)"),
}
#: what an engine's ``loop="auto"`` runs: the first case whose facts all hold. Every step has a
#: fused form, on one device and on several (push, first-accept pull, gathering push and pull,
#: each among candidates, and "auto" between them per level), so only where the levels are and
#: the memory decide.
LOOP_RULE = Rule("loop", (
    Case(("levels_on_host",), "python", "a sweep over levels kept as separate frontiers"),
    Case(("cuda", "one_device"), "fused", "one persistent launch per loop: steps inlined, grid "
                                          "barriers between them, the count read on the device"),
    Case(("not inboxes_fit",), "python",
         "on several devices the inboxes (room for every arc that crosses into a device, "
         "twice), a pull's copies of its frontier (a bitmap and messages over every vertex, "
         "on every device) and a kept loop's or rounds' stores would not fit the devices' "
         "free memory"),
    Case(("cuda", "peer_writes"), "fused",
         "one persistent launch per device, all at once: a push writes other devices' targets "
         "into their owners' inboxes, a pull first writes each device's frontier into every "
         "device's copy, and the devices meet at a cross-device barrier after each advance and "
         "each level, where each reads the level's size (and an 'auto' advance its frontier's) "
         "summed on device 0; a kept loop keeps each device's part of every level in a store "
         "of its own, which a sweep reads level by level; rounds run every round in that one "
         "launch per device"),
    Case((), "python", "the operators' own calls, one host step each"),
), LOOP_FACTS)
#: the values an engine's ``loop`` option takes
LOOP_CHOICES = ("auto", "fused", "python")
#: the kernels of a loop's module (loop_source.source)
_LOOP_KERNELS = ("groute_loop", "groute_sweep")
#: int64 words of the rounds' tally per item of the body (the rounds kernel's layout: the
#: levels the item ran over every round, then a Loop's deepest)
TALLY_WORDS = 2


#: uint64 words of a fused loop's control block: the protocol's, then the loop's own
CTL_WORDS = PROTOCOL_WORDS + loop_source.LOOP_WORDS


class LaunchEnd(NamedTuple):
    """Where a launch stopped, as the host reads it from its control block's words
    (loop_source's ``ctl``: the protocol's, :class:`~groute.engines.protocol.LaunchStop`, and
    the loop's own), on one device or on each of several."""
    ran: int            # levels run (rounds: the round it reached)
    status: int         # why it stopped: loop_source.EMPTIED, MAX_LEVELS, STORE_FULL, ABORTED
    count: int          # the last level's vertices
    at: int             # where that level starts in the store (kept levels, rounds)
    item: int           # rounds stopped by a full store: the item and level to go on from,
    level: int
    kept_total: int     # and the total as that round's earlier items set it

    @classmethod
    def of(cls, words) -> "LaunchEnd":
        stop, own = LaunchStop.read("", words), own_words(words)
        return cls(stop.ran, stop.status, *(int(own[i]) for i in (
            loop_source.COUNT, loop_source.AT, loop_source.ITEM, loop_source.LEVEL,
            loop_source.KEPT_TOTAL)))

    @property
    def full(self) -> bool:
        """Whether it stopped because a store had no room for the next level: the host grows
        the store and launches again from there."""
        return self.status == loop_source.STORE_FULL


def decide_loop(facts: dict) -> tuple[str, str]:
    """The ``(choice, why)`` of :data:`LOOP_RULE` for ``facts`` (name -> bool)."""
    case = loop_case(facts)
    return case.choice, case.why


def loop_case(facts: dict) -> Case:
    """The case of :data:`LOOP_RULE` that applies to ``facts`` (name -> bool)."""
    return LOOP_RULE.decide({name: (lambda value=value: value) for name, value in facts.items()})


def not_fused_because(facts: dict) -> str:
    """Why :data:`LOOP_RULE` does not run a loop of ``facts`` fused, in words: the facts of
    the case that decided, and its reason."""
    case = loop_case(facts)
    return f"{said(case.when, LOOP_FACTS)}: {case.why}" if case.when else case.why


def loop_rule_help() -> str:
    """:data:`LOOP_RULE` in words: what ``loop="auto"`` runs a loop as, as a command's help
    prints it.

    Returns
    -------
    str
        The rule's cases, in order, and why each.

    Examples
    --------
    >>> from groute.engines import loop_rule_help
    >>> "fused" in loop_rule_help() and "python" in loop_rule_help()
    True
    """
    return LOOP_RULE.help()


class DeviceLevels:
    """Kept levels on the devices: on each device (``parts``) its part of every level, its
    queues back to back in its ``buffers`` entry, level ``i`` at ``offsets[i]:offsets[i + 1]``
    of that device's ``offsets`` (int64 on the device; read to the host when a frontier or a
    partial total is asked for). ``total_all``: the vertices of every level on every device
    (the launches report it)."""

    def __init__(self, engine, parts, buffers, offsets, count: int, total_all: int):
        self.engine, self.parts = engine, list(parts)
        self.buffers, self.offsets = list(buffers), list(offsets)
        self.count, self.total_all = count, total_all
        self._host = None

    def host_offsets(self) -> list:
        """Per device, its offsets of every level as a host array."""
        if self._host is None:
            self._host = []
            for part, offsets in zip(self.parts, self.offsets):
                with part.device.on_compute():  # after the launches
                    self._host.append(offsets[:self.count + 1].get())
        return self._host

    def frontier(self, number: int) -> Frontier:
        parts = []
        for part, buffer, off in zip(self.parts, self.buffers, self.host_offsets()):
            a, b = int(off[number]), int(off[number + 1])
            parts.append(DeviceFrontier(part.device, part.size, queue=buffer[a:b], count=b - a))
        return Frontier(self.engine, parts)

    def total(self, numbers) -> int:
        if numbers.step == 1 and numbers.start == 0 and numbers.stop == self.count:
            return self.total_all
        return int(sum(off[i + 1] - off[i] for off in self.host_offsets() for i in numbers))

    def levels(self) -> Levels:
        return Levels(self.engine, self.count, self.frontier, store=self)


class FusedLoops:
    """The fused loops of one engine on its device ``index`` (its part of the graph, all of it
    on one device; the part over in-arcs is the engine's, built on first use). The engine
    holds these loops, so they refer to it weakly: a reference back would be a cycle that
    keeps the engine's device arrays until Python's garbage collector runs."""

    def __init__(self, engine, index: int = 0):
        self._engine = weakref.ref(engine)
        self._index = index
        self.part = engine.parts[index]
        self._compiled = {}      # module text -> (kernels, blocks)

    @property
    def engine(self):
        """The engine these loops belong to (alive while they run: it runs them)."""
        return self._engine()

    def _in_part(self):
        return self.engine._in_arc_parts()[self._index]

    # compiling ------------------------------------------------------------------------------
    def _kernels(self, text, names):
        """The kernels ``names`` of the module ``text`` and their grids, compiled on its first
        launch; looked up by the text itself after that, since a launch asks for them each time
        (writing the source file, which hashes and rereads it, is for the first)."""
        got = self._compiled.get(text)
        if got is None:
            from groute.kernels import load_module, resident_blocks_per_sm
            path = write_source(text)
            device = self.part.device
            with device.use():
                module = load_module(path, options=compile_options(), cooperative=True)
                fns = {name: module.get_function(name) for name in names}
                # every block resident, as the grid barrier needs: launch_resident holds the
                # grid to what the device (a logical device: its share of the GPU) keeps at once
                blocks = {name: resident_blocks_per_sm(fn, loop_source.BLOCK, device.gpu)
                          * device.multiprocessors for name, fn in fns.items()}
            got = self._compiled[text] = (fns, blocks)
        return got

    def _launch(self, text, names, name, args):
        fns, blocks = self._kernels(text, names)
        device = self.part.device
        from .peer_barrier import launch_resident     # reads the environment: on first use
        with device.on_compute():
            blocks[name] = launch_resident(fns[name], blocks[name], loop_source.BLOCK, args,
                                           device=device, kernel=name)

    # arguments -------------------------------------------------------------------------------
    def _scratch(self, name, size, dtype):
        part = self.part
        buf = part.scratch.get(name)
        if buf is None or buf.shape[0] < size:
            with part.device.on_compute():
                buf = part.scratch[name] = part.device.xp.empty(max(int(size), 1), dtype)
        return buf

    def _common(self, steps):
        """The arguments both kernels begin with, and the control block (zeroed)."""
        part, xp = self.part, self.part.device.xp
        n = part.size
        arcs_in = self._in_part() if loop_source.needs_in_arcs(steps) else part
        gathering = loop_source.gathering(steps)
        with part.device.on_compute():
            ctl = xp.zeros(CTL_WORDS, np.uint64)
            bits = xp.zeros(3 * words_for(n) + 1, np.uint32)
            # each gathering step's accumulators, at its identity (its finish resets them)
            acc = self._scratch("loop_gather_acc", max(len(gathering), 1) * max(n, 1), np.uint64)
            for k, step in enumerate(gathering):
                dtype = step.functor.message.dtype
                acc[k * n:(k + 1) * n].view(dtype)[:n] = step.functor.gather.identity(dtype)
        args = (part.indptr, part.indices, arcs_in.indptr, arcs_in.indices,
                self._scratch("loop_big_items", n, np.int64),
                self._scratch("loop_big_first_chunk", n, np.int32), ctl, bits,
                self._scratch("loop_buffers", loop_source.buffers(steps) * max(n, 1), np.int32),
                np.int64(n), acc)
        return args, ctl

    def _values(self, steps, on_device, scalars, where) -> tuple:
        """What the kernels take after their own arguments: the values of the steps'
        parameters (:meth:`_params`), then the candidates' bitmaps (:meth:`_candidates`)."""
        return self._params(steps, on_device, scalars, where) + self._candidates(steps)

    def _params(self, steps, on_device, scalars, where):
        """The values of every parameter of the steps (:func:`~groute.operators.loop.loop_params`' order), each
        bound and checked as the operators bind them (``on_device``: the names of the scalars
        the kernel sets, such as a level's)."""
        params = loop_params(steps, where)
        given = dict(scalars)
        for name in on_device:
            if name is not None:
                given[name] = 0
        values = {}
        for step in steps:
            names = {p.name for p in step.functor.parsed if not p.array}
            values.update(step.functor.bind(self.part.state,
                                            {k: v for k, v in given.items() if k in names},
                                            where))
        return tuple(values[p.name] for p in params)

    def _candidates(self, steps) -> tuple:
        """The candidates' bitmaps the kernels take after the parameters
        (:func:`loop_source.candidate_steps`'s order): each made once per call (the frontier
        is fixed for the whole loop), a null pointer for every vertex, as the operators'
        kernels take them."""
        out = []
        for i in loop_source.candidate_steps(steps):
            part = steps[i].candidates.parts[self.part.index]
            out.append(np.uint64(0) if part.everything else part.to_bitmap().bitmap)
        return tuple(out)

    def _pulled(self, words) -> None:
        """The levels a launch's advances pulled (its control block ``words``), counted as the
        operator calls count them."""
        self.engine.stats["pull_advances"] += int(own_words(words)[loop_source.PULLS])

    def _end(self, ctl) -> LaunchEnd:
        """Where the launch that wrote the control block ``ctl`` stopped (read once, after
        it), its pulls counted."""
        device = self.part.device
        with device.on_compute():
            words = ctl.get()
        self._pulled(words)
        return LaunchEnd.of(words)

    # the loop ----------------------------------------------------------------------------------
    def run_loop(self, frontier, steps, *, level, start, max_levels, keep, scalars) -> LoopResult:
        where = "run_loop(fused)"
        part = self.part
        params = self._values(steps, (level,), scalars, where)
        text = loop_source.source(steps, level, where)
        first = frontier.parts[0]
        queue = first.queue if not first.everything else first.to_queue().queue
        count = first.count
        left = np.iinfo(np.int32).max if max_levels is None else max_levels
        store, offsets, capacity, offsets_capacity = (self._new_store(queue, count) if keep
                                                       else (None, None, 0, 0))
        levels = 0
        while True:
            common, ctl = self._common(steps)
            self._launch(text, _LOOP_KERNELS, "groute_loop", common + (
                queue, np.int64(count), store if keep else queue,
                offsets if keep else ctl, np.int64(capacity), np.int32(offsets_capacity),
                np.int32(keep), np.int32(levels), np.int32(left - levels), np.int64(start),
                *params))
            end = self._end(ctl)
            levels += end.ran
            count, at = end.count, end.at
            if not end.full:
                break
            # grow the store (and its offsets) and go on from level `levels`
            store, offsets, capacity, offsets_capacity = self._grow(
                store, offsets, capacity, offsets_capacity, at + count, levels)
        self._count(steps, levels)
        if levels == 0 and not keep:
            return LoopResult(0, frontier, None, "fused")
        if keep:
            kept = DeviceLevels(self.engine, [part], [store], [offsets], levels, at)
            return LoopResult(levels, Frontier(self.engine, [self._kept_last(store, at, count)]),
                              kept.levels(), "fused")
        return LoopResult(levels, Frontier(self.engine, [self._left(common, steps, levels,
                                                                     count)]), None, "fused")

    def _left(self, common, steps, levels, count) -> DeviceFrontier:
        """The frontier a loop of ``levels`` levels left (``count`` vertices), from a launch
        with the arguments ``common`` (:meth:`_common`) that kept no levels: it is in one of
        the loop's own buffers, so a copy, which outlives the next loop."""
        part, device = self.part, self.part.device
        if count == 0:
            return DeviceFrontier.empty(device, part.size)
        buffers = common[8]
        which = loop_source.buffers(steps) - 2 + (1 if levels % 2 else 0)
        with device.on_compute():
            last = buffers[which * part.size: which * part.size + count].copy()
        return DeviceFrontier(device, part.size, queue=last, count=count)

    def sweep(self, levels: Levels, steps, *, level, start, reverse, scalars) -> None:
        where = "sweep(fused)"
        store = levels.store
        params = self._values(steps, (level,), scalars, where)
        common, ctl = self._common(steps)
        numbers = levels.numbers
        self._launch(loop_source.source(steps, level, where), _LOOP_KERNELS, "groute_sweep",
                     common + (
            store.buffers[0], store.offsets[0], np.int32(numbers.start), np.int32(numbers.stop),
            np.int32(reverse), np.int64(start), *params))
        self._count(steps, len(numbers))
        if any(loop_source.may_pull(s) for s in steps):
            # the only read-back of a sweep, and only where a step may pull: how many did
            device = self.part.device
            with device.on_compute():
                self._pulled(ctl.get())

    def run_rounds(self, seeds, body, *, index, total, scalars) -> RoundsResult:
        """Every round in one launch (``seeds``: local positions); when a kept Loop fills the
        store, the host grows it and launches again from that round, item and level."""
        where = "run_rounds(fused)"
        steps = body_steps(body)
        params = self._values(steps, [item.level for item in body] + [index, total], scalars, where)
        text = loop_source.rounds_source(body, index, total, where)
        rounds = len(seeds)
        if rounds == 0:
            return RoundsResult(0, 0, 0, "fused")
        on_device, store, tally = self._rounds_buffers(seeds, len(body))
        round0 = item0 = level0 = kept_total = 0
        while True:
            common, ctl = self._common(steps)
            self._launch(text, ("groute_rounds",), "groute_rounds", common + (
                on_device, np.int32(round0), np.int32(rounds), np.int32(item0), np.int32(level0),
                store[0], store[1], np.int64(store[2]), np.int32(store[3]),
                np.int64(kept_total), tally, *params))
            end = self._end(ctl)
            if not end.full:
                break
            round0, item0, level0, kept_total = end.ran, end.item, end.level, end.kept_total
            store = self._grow(*store, end.at + end.count, level0)
        return self._rounds_result(body, rounds, tally)

    def _rounds_buffers(self, seeds, items: int) -> tuple:
        """What rounds of ``seeds`` (this device's ids) and a body of ``items`` items hold on
        the device: the seeds, a store (:meth:`_empty_store`'s tuple; the kernel writes level
        0, the seed, and its offset per round) and the tally of levels per item (zeroed)."""
        device = self.part.device
        with device.on_compute():
            ids = device.xp.asarray(np.asarray(seeds, np.int32))
            store = self._empty_store(1)
            tally = device.xp.zeros(TALLY_WORDS * items, np.int64)
        return ids, store, tally

    def _rounds_result(self, body, rounds: int, tally) -> RoundsResult:
        """The result of ``rounds`` rounds of ``body`` from the tally of levels per item (read
        once, at the end), and the operator counters as if each level had called the steps."""
        device = self.part.device
        with device.on_compute():
            counts = tally.get()
        levels = deepest = 0
        for j, item in enumerate(body):
            ran = int(counts[TALLY_WORDS * j])
            self._count(item.steps, ran)
            if isinstance(item, Loop):
                levels += ran
                deepest = max(deepest, int(counts[TALLY_WORDS * j + 1]))
        return RoundsResult(rounds, levels, deepest, "fused")

    #: level offsets a new store has room for (it grows when a loop runs deeper)
    OFFSETS = 64

    @staticmethod
    def store_room(count: int, size: int) -> int:
        """The vertices a new store of kept levels has room for: its first level (``count``
        vertices) and two more levels of every vertex of a part of ``size`` (the one formula
        of the stores made here and of the memory they are counted for before a loop is
        chosen on several devices)."""
        return count + 2 * size + 1

    def _empty_store(self, count: int) -> tuple:
        """A store of kept levels with room for a first level of ``count`` vertices
        (:meth:`store_room`), and its offsets (zeroed): ``(store, offsets, capacity,
        offsets_capacity)``."""
        device = self.part.device
        capacity = self.store_room(count, self.part.size)
        with device.on_compute():
            store = device.xp.empty(capacity, np.int32)
            offsets = device.xp.zeros(self.OFFSETS, np.int64)
        return store, offsets, capacity, self.OFFSETS

    def _new_store(self, queue, count):
        """A store of kept levels holding the first frontier (``queue``, ``count`` vertices) as
        level 0, and its offsets (:meth:`_empty_store`'s tuple)."""
        device = self.part.device
        store = self._empty_store(count)
        with device.on_compute():
            store[0][:count] = queue[:count]
            store[1][1] = count
        return store

    def _kept_last(self, store, at, count) -> DeviceFrontier:
        """The frontier a kept loop left: ``count`` vertices at ``at`` in its store."""
        part = self.part
        if count == 0:
            return DeviceFrontier.empty(part.device, part.size)
        return DeviceFrontier(part.device, part.size, queue=store[at:at + count], count=count)

    def _grow(self, store, offsets, capacity, offsets_capacity, used, level):
        """A bigger store of kept levels (its first ``used`` entries kept) and offsets (those of
        levels up to ``level + 1`` kept), for a launch that filled them at ``level`` to go on:
        room for at least one more level of every vertex, twice as much where that is more."""
        device = self.part.device
        xp = device.xp
        with device.on_compute():
            capacity = max(2 * capacity, used + 2 * self.part.size + 1)
            bigger = xp.empty(capacity, np.int32)
            bigger[:used] = store[:used]
            offsets_capacity = max(2 * offsets_capacity, level + 3)
            more = xp.zeros(offsets_capacity, np.int64)
            more[:level + 2] = offsets[:level + 2]
        return bigger, more, capacity, offsets_capacity

    def _count(self, steps, levels):
        """The operator counters, as if the steps had run one call each per level."""
        stats = self.engine.stats
        for step in steps:
            key = {"ComputeStep": "computes", "FilterStep": "filters",
                   "AdvanceStep": "advances"}[type(step).__name__]
            stats[key] += levels
