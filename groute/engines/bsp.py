"""The host-driven BSP engine: each operator is one bulk-synchronous step on every device.

The graph is partitioned (:func:`groute.graph.partition_graph`; ``"auto"`` by default, as every
solver: METIS on graphs small enough for it to be quick, else contiguous ranges) and each device keeps its vertices' out-arcs and state
(:class:`~groute.operators.part.DevicePart`). An operator runs on every device's host thread at
once (:meth:`groute.Context.submit`); the host waits for all of them, which is the step's
barrier, and reads the frontier's counts: an algorithm's loop ends when no device has work.

``advance`` crosses devices:

- push: each device visits the arcs of its frontier; the ids of targets another device owns
  are sent to the owner through one :class:`~groute.Router` (devices to devices, policy
  ``by_owner``: the Router is where the destination is chosen), and in a second step each
  device visits what it received (the same functor) and completes its output frontier. The
  receiver knows how many sends to wait for: the host counts them between the two steps. A
  functor's message travels in the same packet as its target's id (rows of id and message
  words, a Router per row width).
- ``over="in"``: the same push along the in-arcs of the frontier's vertices; each device keeps
  its vertices' in-arcs from the first such advance on (a directed graph's transpose, split as
  the out-arcs are; an undirected graph's are its out-arcs).
- pull: the frontier's global ids go to every other device through a second Router (policy:
  every device but the sender), each device builds a bitmap of the whole frontier and its
  candidates look for arcs from it. A gathering functor's frontier travels with its messages
  (rows of an id and the message's words, computed on the member's device), which each device
  lays out by global id next to the bitmap; its candidates read their in-arcs (``over="in"``:
  their out-arcs), on a directed graph too.
- ``direction="auto"``: Beamer's rule (:mod:`groute.operators.direction`), from the frontier's
  vertices and arcs, the candidates' arcs and the last direction; push on a directed graph
  (the arcs a pull would read there are in-arcs, which the rule's counts, of out-arcs, do not
  weigh). A first-accept pull, as a gathering one, reads the candidates' in-arcs (an
  undirected graph's out-arcs), on a directed graph too.

A loop of steps (:func:`groute.operators.run_loop`, :func:`~groute.operators.sweep`) runs as
the ``loop`` option says: ``"auto"`` by :data:`groute.engines.fused.LOOP_RULE` (one persistent
launch on one CUDA device, :mod:`groute.engines.fused`; a ``run_loop``, its levels kept or not,
and a ``sweep`` over the levels it kept as one launch per device on several CUDA devices that
write into each other's memory, pushing through their inboxes and pulling over frontiers each
device writes into every other's, :mod:`groute.engines.fused_multi`; the operator calls
otherwise),
``"fused"`` or ``"python"`` to insist. ``stats["loop"]`` names what the last loop ran. On a
directed graph a loop's ``"auto"`` advances push whatever runs them, as ``advance`` decides
(:func:`steps_as_run`, applied before the loop is chosen).
Rounds of loops (:func:`groute.operators.run_rounds`) follow the same rule over every step of
their body: every round in one launch on one CUDA device, and in one launch per device on
several that write into each other's memory (each device's part of every level, exchanging
and meeting as a loop does); the operator calls otherwise. ``stats["rounds"]`` names what ran
the last of them.
"""
from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from groute.graph.partition import DEFAULT_PARTITION, partition_graph
from groute.runtime.context import taking_turns
from groute.runtime.kept import lease
from groute.solver import check_device_count, check_graph_for_ranks
from groute.operators import cpu_ops, cuda_ops, direction as rule
from groute.operators.frontier import DeviceFrontier, Frontier
from groute.operators.loop import AdvanceStep, python_loop, python_sweep
from groute.operators.loop_source import needs_in_arcs
from groute.operators.rounds import Compute, body_steps, python_rounds
from groute.operators.part import DevicePart
from groute.runtime.policies import by_owner, to_the_others
from groute.runtime.router import CLOSE_JOIN_SECONDS, Router
from groute.tuning import BSPTuning

from .base import Engine, checked_positions, checked_state
from .device_rule import choose_devices
from .fused import LOOP_CHOICES, FusedLoops, decide_loop, not_fused_because
from .fused_multi import MultiFusedLoops

log = logging.getLogger(__name__)
DIRECTIONS = ("push", "pull", "auto")


def steps_as_run(steps, directed: bool) -> tuple:
    """A loop's ``steps`` as the engine runs them, whatever runs the loop: where ``"auto"`` may
    not pull (:func:`~groute.operators.direction.auto_may_pull`) an ``"auto"`` advance pushes,
    as :meth:`BSPEngine._choose` decides for an operator call. Decided here, once, before the
    loop is chosen, so the operator calls and the fused loops (one device or several) take the
    same direction, and the rule's facts (in-arcs, a pull's published frontiers) are those of
    the steps that run."""
    if rule.auto_may_pull(directed):
        return tuple(steps)
    return tuple(replace(s, direction="push")
                 if isinstance(s, AdvanceStep) and s.direction == "auto" else s for s in steps)


def body_as_run(body, directed: bool) -> tuple:
    """A rounds ``body`` with every Loop's and Sweep's steps as :func:`steps_as_run` says."""
    if rule.auto_may_pull(directed):
        return tuple(body)
    return tuple(item if isinstance(item, Compute)
                 else replace(item, steps=steps_as_run(item.steps, directed)) for item in body)


class RemotePart:
    """A device's part of a frontier where another process drives that device (a
    RankContext): its vertex count, which every rank needs (a loop ends when no device has
    work), and nothing else."""

    everything = False

    def __init__(self, count: int):
        self.count = int(count)

    def to_bitmap(self):
        return self

    def to_queue(self):
        return self


class BSPEngine(Engine):
    """See the module docstring. ``graph``: a :class:`~groute.graph.CSRGraph`; ``ctx`` a
    Context (else a kept one of ``devices``, ``"auto"`` by :mod:`groute.engines.device_rule`,
    ``backend`` and ``timeout`` is leased until :meth:`close`: :mod:`groute.runtime.kept`);
    ``partition``: ``"auto"`` (the default: :func:`groute.graph.partition.auto_method`),
    ``"metis"``, ``"contiguous"`` or ``"random"`` (``seed``);
    ``loop``: how :func:`groute.operators.run_loop` runs (module docstring)."""

    name = "bsp"
    #: ends the engine's lease of its context (:mod:`groute.runtime.kept`)
    _release_ctx = None

    def __init__(self, graph, *, ctx=None, devices="auto", backend="auto", timeout=None,
                 partition: str = DEFAULT_PARTITION, seed: int = 0,
                 tuning: BSPTuning | None = None,
                 loop: str = "auto"):
        if loop not in LOOP_CHOICES:
            raise ValueError(f"loop must be one of {', '.join(LOOP_CHOICES)}; got {loop!r}")
        self.loop = loop
        graph = graph.to_host()
        self.vertex_ids = None if graph.vertex_ids.is_positions else graph.vertex_ids
        self.tuning = BSPTuning.given(tuning)
        self.num_vertices = graph.num_vertices
        self.num_arcs = graph.num_edges
        self.directed = graph.directed
        #: what ``devices`` became, and why (:mod:`groute.engines.device_rule`)
        self.device_choice = choose_devices(devices, ctx=ctx, backend=backend, engine="operators",
                                            num_vertices=graph.num_vertices,
                                            num_arcs=graph.num_edges, directed=graph.directed)
        self.ctx, self._release_ctx = lease(ctx, devices=self.device_choice.devices,
                                            backend=backend, timeout=timeout)
        self._closed = False
        self._router = self._broadcast = None
        self._message_routers = {}          # words per message -> Router of (id, words) rows
        self._broadcast_rows = {}           # the same for a gathering pull's frontier
        self._in_parts = None
        try:
            k = self.ctx.num_devices
            check_device_count(f"the {self.name} engine", k, graph.num_vertices)
            check_graph_for_ranks(self.ctx, graph, f"the {self.name} engine")
            self.partition = partition_graph(graph, k, partition, seed=seed)
            self.parts = self._each(self._upload, range(k))
            if k > 1:
                self._open_routers()
            # why the devices cannot write into each other's memory (None: they can), which
            # the fused loop on several devices needs
            from .peer_barrier import unavailable    # reads the environment: on first use
            self._no_peer_writes = unavailable(self.ctx)
            self._fused = self._multi = None
            if self.ctx.backend == "cuda" and k == 1:
                self._fused = FusedLoops(self, 0)
            elif self.ctx.backend == "cuda" and self._no_peer_writes is None:
                self._multi = MultiFusedLoops(self)
            elif loop == "fused":
                why = (f"this engine has {k} {self.ctx.backend} device(s)"
                       if self.ctx.backend != "cuda" else
                       f"on these {k} devices {self._no_peer_writes}")
                raise ValueError(f"loop='fused' runs on one CUDA device, or on several that "
                                 f"write into each other's memory; {why} (loop='auto' or "
                                 f"'python')")
        except BaseException:
            self.close()
            raise
        self.reset_counters()

    def reset_counters(self):
        self.stats = {"engine": self.name, "devices": self.ctx.num_devices,
                      "partition": self.partition.method, "advances": 0, "pull_advances": 0,
                      "filters": 0, "computes": 0, "exchanged_ids": 0, "broadcast_ids": 0,
                      "loops": 0, "loop": None, "rounds": None}

    # running a step on every device ------------------------------------------------------------
    def _on_device(self, fn):
        """``fn()`` for the one device (the fused loops), its result here."""
        return self._each(lambda device: fn())[0]

    def _each(self, fn, *per_device):
        """``fn(device, *args_i)`` for every device, on its host thread; their results in
        order. The context's only computation while it runs (:meth:`~groute.Context.exclusive`):
        another thread's steps on the same devices take their turn, before or after. One
        device has no other to overlap with, so its step runs on the caller's thread: a
        hand-off to the host thread and back costs a step more than a small graph's work (an
        algorithm runs thousands of steps), and the caller would only wait for it. A failure is
        the same either way: the context stops and the caller gets a DeviceError naming the
        device."""
        with self.ctx.exclusive():
            if self.ctx.num_devices == 1:
                device = self.ctx.devices[0]
                self.ctx.ensure_running()
                try:
                    with device.use():
                        return [fn(device, *(a[0] for a in per_device))]
                except Exception as exc:
                    self.ctx.fail(device.name, exc)
                    self.ctx.raise_failure()
                    raise
            futures = [self.ctx.submit(i, fn, *(a[i] for a in per_device))
                       for i in range(self.ctx.num_devices)]
            return self.ctx.gather(futures)

    def _frontier(self, parts, direction="push") -> Frontier:
        """A Frontier of the devices' ``parts`` (on a RankContext this rank's, the others'
        None): the other processes' parts become :class:`RemotePart` s of their counts."""
        counts = self.ctx.share([None if p is None else p.count for p in parts],
                                "the frontier's counts")
        return Frontier(self, [RemotePart(c) if p is None else p for p, c in zip(parts, counts)],
                        direction)

    def _shared(self, values, what: str) -> list:
        """Every device's entry of ``values`` (:meth:`~groute.Context.share`)."""
        return self.ctx.share(values, what)

    def _upload(self, device, i):
        local = self.partition.local(i)
        with device.use():
            indptr = device.asarray(np.ascontiguousarray(local.indptr, dtype=np.int64))
            indices = device.asarray(np.ascontiguousarray(local.indices, dtype=np.int32))
        return DevicePart(device, i, indptr, indices, local.first, local.end,
                          self.num_vertices, np.asarray(self.partition.offsets, np.int64))

    @staticmethod
    def _ops(part):
        return cuda_ops if part.device.backend == "cuda" else cpu_ops

    def _check(self, frontier, what):
        if not isinstance(frontier, Frontier) or frontier.engine is not self:
            raise ValueError(f"{what}: the frontier belongs to another engine (or is not a "
                             f"Frontier); make it with this engine's frontier()/all_vertices()")
        self._open(what)

    def _open(self, what):
        """A RuntimeError naming ``what`` once the engine is closed (its context went back: a
        kept one may serve another engine by now, so nothing of it is to be used), or when
        called from inside a functor's NumPy callable
        (:meth:`~groute.device.base.Device.in_user_code`)."""
        if self._closed:
            raise RuntimeError(f"{what}: the engine is closed")
        for device in (part.device for part in getattr(self, "parts", ()) if part is not None):
            running = device.in_user_code()
            if running is not None:
                raise RuntimeError(f"{what} called from {running} on {device.name}: a functor "
                                   f"works on the state it is given; call the engine between "
                                   f"operator calls")

    # state -----------------------------------------------------------------------------------------
    def state(self, name, dtype, fill=0, *, values=None):
        self._open("state")
        dtype, fill, values = checked_state(name, dtype, fill, values)
        if values is not None:
            values = np.asarray(values)
            if values.shape != (self.num_vertices,):
                raise ValueError(f"state {name!r}: values has shape {values.shape}, the graph "
                                 f"has {self.num_vertices} vertices")
            new = self.partition.to_new(values).astype(dtype, copy=False)

        def make(device, part):     # both on the compute stream, before its kernels
            if values is None:
                part.state[name] = device.full(part.size, fill, dtype)
            else:
                part.state[name] = device.asarray(np.ascontiguousarray(new[part.first:part.end]))
        self._each(make, self.parts)

    def out_degree_state(self, name, dtype=np.int32):
        self._open("out_degree_state")
        dtype, _, _ = checked_state(name, dtype, 0, None)
        if dtype.kind in "biu":     # the largest degree, one read-back per device

            def largest(device, part):
                with device.on_compute():
                    return int((part.indptr[1:] - part.indptr[:-1]).max()) if part.size else 0
            most = max(self._shared(self._each(largest, self.parts), "the largest out-degrees"),
                       default=0)
            if dtype.kind == "b" or most > np.iinfo(dtype).max:
                raise ValueError(f"state {name!r}: {dtype} cannot hold the largest out-degree, "
                                 f"{most}")

        def make(device, part):
            with device.on_compute():
                part.state[name] = (part.indptr[1:] - part.indptr[:-1]).astype(dtype)
        self._each(make, self.parts)

    def gather(self, name):
        self._open("gather")
        self._holds(name, "gather")
        pieces = self._shared(self._each(lambda device, part: device.to_host(part.state[name]),
                                         self.parts), f"the state {name!r}")
        new = np.concatenate(pieces) if pieces else np.zeros(0)
        return self.partition.to_original(new)

    # frontiers ---------------------------------------------------------------------------------
    def all_vertices(self):
        self._open("all_vertices")
        return Frontier(self, [RemotePart(hi - lo) if p is None else
                               DeviceFrontier(p.device, p.size, everything=True)
                               for p, lo, hi in zip(self.parts, self.partition.offsets[:-1],
                                                    self.partition.offsets[1:])])

    def frontier_at(self, positions):
        self._open("frontier")
        positions = checked_positions(positions, self.num_vertices)
        new = np.unique(self.partition.perm[positions])

        def make(device, part):
            mine = new[(new >= part.first) & (new < part.end)] - part.first
            with device.use():
                return DeviceFrontier(device, part.size,
                                      queue=device.asarray(mine.astype(np.int32)))
        return self._frontier(self._each(make, self.parts))

    def positions_of(self, frontier):
        self._check(frontier, "positions_of")
        new = np.concatenate(self._shared([None if part is None else p.positions() + part.first
                                           for p, part in zip(frontier.parts, self.parts)],
                                          "the frontier's vertices"))
        return np.sort(self.partition.iperm[new])

    # the operators ----------------------------------------------------------------------------------
    def compute(self, frontier, functor, scalars):
        self._check(frontier, "compute")
        where = f"compute({functor.name})"

        def run(device, part, fr):
            values = functor.bind(part.state, scalars, where)
            self._ops(part).compute(part, fr, functor, values, where)
        self._each(run, self.parts, frontier.parts)
        self.stats["computes"] += 1

    def filter(self, frontier, functor, scalars):
        self._check(frontier, "filter")
        where = f"filter({functor.name})"

        def run(device, part, fr):
            values = functor.bind(part.state, scalars, where)
            return self._ops(part).filter(part, fr, functor, values, where)
        self.stats["filters"] += 1
        return self._frontier(self._each(run, self.parts, frontier.parts), frontier.direction)

    def _holds(self, state, what):
        """A ValueError naming ``what`` unless every device of this process holds ``state``."""
        held = [part for part in self.parts if part is not None]     # this process's
        if any(state not in part.state for part in held):
            raise ValueError(f"{what}: no state named {state!r} (the engine holds "
                             f"{sorted(held[0].state) or 'none'})")

    def reduce(self, frontier, state, op):
        self._check(frontier, "reduce")
        self._holds(state, "reduce")

        def run(device, part, fr):
            if not len(fr):
                return None
            values = part.state[state]
            with device.on_compute():
                picked = values if fr.everything else values[fr.queue[:fr.count]]
                one = getattr(device.xp, op)(picked)
                return one.item()                       # the device's share, to the host
        shares = [x for x in self._shared(self._each(run, self.parts, frontier.parts),
                                          f"the devices' {op}s") if x is not None]
        if not shares:
            return 0 if op == "sum" else None
        if op == "sum":
            return sum(shares)
        # NumPy's min and max over the shares, as over one device's values: a NaN share wins
        # (Python's min and max would keep or drop it by where it falls)
        return getattr(np, op)(np.asarray(shares)).item()

    @taking_turns       # its steps (a push, the owners' visits) are one computation
    def advance(self, frontier, functor, direction, candidates, scalars, *, over="out"):
        self._check(frontier, "advance")
        if candidates is not None:
            self._check(candidates, "advance candidates")
        if direction not in DIRECTIONS:
            raise ValueError(f"advance: direction must be one of {', '.join(DIRECTIONS)}; got "
                             f"{direction!r}")
        if direction == "auto":
            direction = self._choose(frontier, candidates)
        self.stats["advances"] += 1
        where = f"advance({functor.name})"
        if direction == "pull":
            self.stats["pull_advances"] += 1
            # the candidates read the arcs from the frontier: over out-arcs, their in-arcs
            rows = self._in_arc_parts() if over == "out" else self.parts
            return self._frontier(self._pull(rows, frontier, functor, candidates, scalars,
                                             where), "pull")
        parts = self.parts if over == "out" else self._in_arc_parts()
        return self._frontier(self._push(parts, frontier, functor, scalars, where, candidates),
                              "push")

    def _in_arc_parts(self):
        """Every device's part with its vertices' in-arcs as rows (built on first use)."""
        if self._in_parts is None:
            if not self.directed:
                self._in_parts = self.parts
            elif self.ctx.ranks is not None:     # from every rank's out-arcs
                from groute.graph.rank_graph import ranked_in_arcs
                rows, sources, _ = ranked_in_arcs(self.partition.graph, self.ctx.ranks)

                def upload(device, part):
                    with device.use():
                        return part.with_arcs(device.asarray(rows), device.asarray(sources))
                self._in_parts = self._each(upload, self.parts)
            else:
                transposed = self.partition.graph.transpose()

                def upload(device, part):
                    a, b = int(transposed.indptr[part.first]), int(transposed.indptr[part.end])
                    rows = np.asarray(transposed.indptr[part.first:part.end + 1]) - a
                    with device.use():
                        indptr = device.asarray(np.ascontiguousarray(rows, dtype=np.int64))
                        indices = device.asarray(np.ascontiguousarray(
                            transposed.indices[a:b], dtype=np.int32))
                    return part.with_arcs(indptr, indices)
                self._in_parts = self._each(upload, self.parts)
        return self._in_parts

    def _make_router(self, policy, name, item_shape=()):
        """A Router between every pair of the engine's devices (``item_shape``: a row's)."""
        return Router(self.ctx.devices, self.ctx.devices, policy, name=name,
                      packet_size=self.tuning.packet_size, num_buffers=self.tuning.num_buffers,
                      dtype=np.int32, item_shape=item_shape, ctx=self.ctx)

    def _open_routers(self):
        """The exchange's and the pull's Routers of ids; those of rows are made on first use."""
        self._router = self._make_router(by_owner, "bsp-exchange")
        self._broadcast = self._make_router(to_the_others, "bsp-frontier")
        self._message_routers, self._broadcast_rows = {}, {}

    def _routers_after_a_failure(self):
        """Before an exchange: a failure stopped the context, and every link of every Router
        ended with it (a stopped link carries nothing more, and what it delivered belongs to
        the failed call), so the context is reset (then every such link has ended) and the
        Routers are made anew."""
        if self._router is None:
            return
        self.ctx.ensure_running()
        if any(link.finished for _, _, link in self._router.each_link()):
            self._open_routers()

    def _exchange_router(self, functor):
        """The Router a push's remote visits travel through: ids alone, or rows of an id and
        the message's words (one Router per row width, made on first use)."""
        self._routers_after_a_failure()
        if functor.message is None:
            return self._router
        return self._router_of_rows(self._router, self._message_routers, by_owner,
                                    "bsp-exchange", functor.message.words)

    def _broadcast_router(self, functor):
        """The Router a pull's frontier travels through to every other device: ids alone, or
        for a gathering functor rows of an id and its message's words."""
        self._routers_after_a_failure()
        if functor.gather is None:
            return self._broadcast
        return self._router_of_rows(self._broadcast, self._broadcast_rows, to_the_others,
                                    "bsp-frontier", functor.message.words)

    def _router_of_rows(self, of_ids, rows: dict, policy, name: str, words: int):
        """The Router of rows of an id and ``words`` message words that goes beside the Router
        of ids ``of_ids`` (named ``name``, routing by ``policy``): kept in ``rows`` by width,
        made on first use; None where there is no Router of ids (one device)."""
        if of_ids is not None and words not in rows:
            rows[words] = self._make_router(policy, f"{name}-m{words}", (1 + words,))
        return rows.get(words)

    def _choose(self, frontier, candidates) -> str:
        """Beamer's rule (groute.operators.direction) for ``direction="auto"``."""
        if not rule.auto_may_pull(self.directed):
            return "push"
        front = len(frontier)
        # a state per advance, unexplored arcs from the candidates (see DirectionState)
        state = rule.DirectionState(self.num_vertices, self.num_arcs,
                                    pulling=frontier.direction == "pull")
        front_arcs, unexplored = 0, None
        if state.wants_arcs(front):
            cand = candidates.parts if candidates is not None else [None] * len(self.parts)

            def count(device, part, fr, cd):
                ops = self._ops(part)
                return ops.arcs(part, fr), part.num_arcs if cd is None else ops.arcs(part, cd)
            counts = self._shared(self._each(count, self.parts, frontier.parts, cand),
                                  "the frontier's arcs")
            front_arcs, unexplored = (int(x) for x in np.sum(counts, axis=0))
        return "pull" if state.next(front, front_arcs, unexplored) else "push"

    def _push(self, parts, frontier, functor, scalars, where, candidates=None):
        router = self._exchange_router(functor)
        cand = candidates.parts if candidates is not None else [None] * len(parts)

        def visit_and_send(device, part, fr, cd):
            ops = self._ops(part)
            values = functor.bind(part.state, scalars, where)
            acc, remote, msgs = ops.push(part, fr, functor, values, where, cd)
            sends = []
            if router is not None and remote.shape[0]:
                with device.on_compute():
                    groups = part.split_by_owner(remote, device.xp, msgs)
                event = device.compute_stream.record() if device.backend == "cuda" else None
                sends = [(j, router.inputs[part.index].send(data, event=event,
                                                             metadata={"owner": j}))
                         for j, data in groups]
            return acc, values, sends, int(remote.shape[0])

        first = self._each(visit_and_send, parts, frontier.parts, cand)
        if router is not None:
            router.flush()          # delivered (a RankRouter's exchange; else a no-op)
        sent = self._shared([None if r is None else (r[3], [j for j, _ in r[2]]) for r in first],
                            "the exchange's counts")
        self.stats["exchanged_ids"] += sum(ids for ids, _ in sent)
        expected = np.zeros(len(self.parts), np.int64)
        for _, owners in sent:
            for j in owners:
                expected[j] += 1

        def receive_and_visit(device, part, step, waiting):
            acc, values, sends, _ = step
            ops = self._ops(part)
            for pending in self._receive(router, part, waiting):
                with device.on_compute():
                    ids, msgs = part.unpack_rows(pending.data, functor.message, device.xp)
                    ops.apply(part, acc, ids, msgs, functor, values, where)
                self._release(part, pending)
            self._wait_sends(sends)
            return ops.finish(part, acc)
        return self._each(receive_and_visit, parts, first, expected)

    def _pull(self, rows, frontier, functor, candidates, scalars, where):
        """Every device's pull over its ``rows`` (parts whose rows are the arcs its candidates
        read), after the frontier (with a gathering functor's messages) reached every device."""
        router = self._broadcast_router(functor)
        message = functor.message if functor.gather is not None else None
        cand = candidates.parts if candidates is not None else [None] * len(rows)

        def send_frontier(device, part, fr):
            ops = self._ops(part)
            values = functor.bind(part.state, scalars, where)
            ids = ops.global_ids(part, fr)
            msgs = None if message is None else \
                ops.frontier_messages(part, fr, functor, values, where)
            sends = []
            if router is not None and fr.count:
                with device.on_compute():
                    data = ids if msgs is None else part.pack_rows(ids, msgs, device.xp)
                event = device.compute_stream.record() if device.backend == "cuda" else None
                sends = [router.inputs[part.index].send(data, event=event)]
            return ids, msgs, values, sends

        first = self._each(send_frontier, rows, frontier.parts)
        if router is not None:
            router.flush()          # delivered (a RankRouter's exchange; else a no-op)
            self.stats["broadcast_ids"] += len(frontier) * (len(rows) - 1)
        sent = self._shared([None if step is None else bool(step[3]) for step in first],
                            "who sent a frontier")
        expected = [sum(1 for j, did in enumerate(sent) if did and j != i)
                    for i in range(len(rows))]

        def gather_and_pull(device, part, step, waiting, cd):
            ids, msgs, values, sends = step
            ops = self._ops(part)
            arrays, tables = [ids], [msgs]
            for pending in self._receive(router, part, waiting):
                with device.on_compute():
                    got, got_msgs = part.unpack_rows(device.xp.array(pending.data, copy=True),
                                                     message, device.xp)
                arrays.append(got)
                tables.append(got_msgs)
                self._release(part, pending)
            front = ops.membership(part, arrays)
            if message is None:
                out, _ = ops.pull(part, front, cd, functor, values, where)
            else:
                table = ops.message_table(part, arrays, tables, message.dtype)
                out, _ = ops.gather_pull(part, front, table, cd, functor, values, where)
            self._wait_sends(sends)
            return out
        return self._each(gather_and_pull, rows, first, expected, cand)

    # loops of steps -----------------------------------------------------------------------------------
    def _loop_facts(self, steps=(), levels=None, kept=False, seeds=None) -> dict:
        """The facts of :data:`groute.engines.fused.LOOP_RULE` for a loop of ``steps`` (a sweep:
        over ``levels``; ``kept``: a loop that keeps its levels; ``seeds``: rounds of them, one
        per seed, whose seeds and stores the memory check counts)."""
        facts = {"cuda": self.ctx.backend == "cuda", "one_device": self.ctx.num_devices == 1,
                 "levels_on_host": levels is not None and (
                     getattr(levels.store, "engine", None) is not self
                     or levels.numbers.step != 1),
                 "peer_writes": self._no_peer_writes is None}
        # the inboxes are sized (a pass over the graph, once) only where they would be made
        several = (self._multi is not None and not facts["one_device"]
                   and not facts["levels_on_host"])
        facts["inboxes_fit"] = not several or self._multi.inboxes_fit(
            steps, keep=bool(kept) and levels is None, seeds=seeds)
        return facts

    def _loop_choice(self, steps, levels, what, kept=False, seeds=None) -> str:
        """What runs this loop (``loop`` option, else the rule); counted in the stats."""
        choice = "python"
        if self.loop != "python":       # the facts (a memory check on several devices) decide
            facts = self._loop_facts(steps, levels, kept, seeds)
            choice = decide_loop(facts)[0]
            if self.loop == "fused" and choice != "fused":
                raise ValueError(f"{what}: loop='fused' cannot run this loop "
                                 f"({not_fused_because(facts)}); make the engine with "
                                 f"loop='auto'")
        self.stats["loops"] += 1
        self.stats["loop"] = choice
        return choice

    def _fused_prepare(self, steps):
        """What a fused loop of ``steps`` needs that the engine builds through its devices'
        host threads: the in-arc parts. Built here, on the caller's thread: the fused loop runs
        on device 0's host thread, where building them (a submit to that thread, then a wait)
        would wait on itself."""
        if needs_in_arcs(steps):
            self._in_arc_parts()

    @taking_turns       # a loop is one computation, however many steps it takes
    def run_loop(self, frontier, steps, *, level, start, max_levels, keep, scalars,
                 order="levels"):
        # levels are one order of visits: an order-free loop runs as any other here
        self._check(frontier, "run_loop")
        steps = steps_as_run(steps, self.directed)
        for s in steps:
            if isinstance(s, AdvanceStep) and s.candidates is not None:
                self._check(s.candidates, "run_loop: an AdvanceStep's candidates")
        if self._loop_choice(steps, None, "run_loop", keep) == "fused":
            self._fused_prepare(steps)
            if self._multi is not None:     # every device's host thread at once
                return self._multi.run_loop(frontier, steps, level=level, start=start,
                                            max_levels=max_levels, keep=keep, scalars=scalars)
            # on the device's host thread, as every step: a failure stops the context and
            # raises here naming the device
            return self._on_device(lambda: self._fused.run_loop(
                frontier, steps, level=level, start=start, max_levels=max_levels, keep=keep,
                scalars=scalars))
        return python_loop(frontier, steps, level=level, start=start, max_levels=max_levels,
                           keep=keep, scalars=scalars)

    @taking_turns
    def sweep(self, levels, steps, *, level, start, reverse, scalars):
        if self._closed:
            raise RuntimeError("sweep: the engine is closed")
        if levels.engine is not self:
            raise ValueError("sweep: the levels belong to another engine")
        steps = steps_as_run(steps, self.directed)
        if self._loop_choice(steps, levels, "sweep", True) == "fused":
            self._fused_prepare(steps)
            if self._multi is not None:     # every device's host thread at once
                self._multi.sweep(levels, steps, level=level, start=start, reverse=reverse,
                                  scalars=scalars)
                return
            self._on_device(lambda: self._fused.sweep(levels, steps, level=level, start=start,
                                                      reverse=reverse, scalars=scalars))
        else:
            python_sweep(levels, steps, level=level, start=start, reverse=reverse,
                         scalars=scalars)

    @taking_turns
    def run_rounds(self, seeds, body, *, index, total, scalars):
        if self._closed:
            raise RuntimeError("run_rounds: the engine is closed")
        body = body_as_run(body, self.directed)
        steps = body_steps(body)
        for s in steps:
            if isinstance(s, AdvanceStep) and s.candidates is not None:
                self._check(s.candidates, "run_rounds: an AdvanceStep's candidates")
        choice = self._loop_choice(steps, None, "run_rounds", True, seeds=len(seeds))
        if choice == "fused":
            self._fused_prepare(steps)
            ids = self.partition.perm[seeds]
            if self._multi is not None:     # every device's host thread at once; global ids
                result = self._multi.run_rounds(ids, body, index=index, total=total,
                                                scalars=scalars)
            else:
                result = self._on_device(lambda: self._fused.run_rounds(
                    ids - self.parts[0].first, body, index=index, total=total,
                    scalars=scalars))
        else:
            result = python_rounds(self, seeds, body, index=index, total=total, scalars=scalars)
        self.stats["rounds"] = choice
        return result

    # exchange ---------------------------------------------------------------------------------------
    def _receive(self, router, part, sends: int):
        """The packets of ``sends`` sends routed to this device (each waited for)."""
        done = 0
        while done < sends:
            pending = router.outputs[part.index].receive()
            if pending is None:
                raise RuntimeError(f"{router.name}: output {part.index} ended with "
                                   f"{sends - done} sends still expected")
            self._arrived(part, pending)
            if pending.metadata.get("last", True):
                done += 1
            yield pending

    def _arrived(self, part, pending):
        """Order the device's work after ``pending``'s copy: its compute stream waits for it
        (CUDA), or this thread does (CPU)."""
        if part.device.backend == "cuda":
            pending.wait_on(part.device.compute_stream)
        else:
            pending.wait(self.ctx.timeout)

    @staticmethod
    def _release(part, pending):
        if part.device.backend == "cuda":
            pending.release(after=part.device.compute_stream.record())
        else:
            pending.release()

    def _wait_sends(self, sends):
        for item in sends:
            handle = item[1] if isinstance(item, tuple) else item
            handle.wait(timeout=self.ctx.timeout, stop=self.ctx.stop_event)

    # life --------------------------------------------------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            routers = [r for r in (self._router, self._broadcast,
                                   *self._message_routers.values(),
                                   *self._broadcast_rows.values()) if r is not None]
            for router in routers:
                router.close()
            for router in routers:      # ended: their receive buffers go with the engine
                router.join(timeout=CLOSE_JOIN_SECONDS)
        finally:            # a failed clean-up must not keep a kept context leased forever
            if self._release_ctx is not None:
                self._release_ctx()
                self._release_ctx = None

    def __repr__(self):
        return (f"<BSPEngine {self.num_vertices:,} vertices on {self.ctx.num_devices} "
                f"{self.ctx.backend} devices>")
