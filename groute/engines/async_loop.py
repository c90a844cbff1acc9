"""An order-free loop of operator steps run without levels: Groute's asynchronous worklists on
the operators (docs/OPERATORS_REFERENCE.md, "Order-free loops").

Each device's host thread runs the same control loop (both backends; only the operators'
kernels differ, :mod:`groute.operators.cpu_ops` / :mod:`~groute.operators.cuda_ops`):

1. take in what other devices sent, whenever it arrived: each packet names the advance step
   its targets are for (``metadata["step"]``); the owner visits them with that step's functor
   (``apply``, as the BSP push's second half) and runs the steps after it on the vertices it
   accepted;
2. else take a chunk of its own worklist (at most ``chunk`` vertices, each once) and run the
   loop's steps on it: a compute or filter on the chunk, a push along its arcs whose owned
   targets are visited here and whose other targets go to their owner through the engine's
   :class:`~groute.Router` (policy ``by_owner``, packetized links) at once;
3. what the last step leaves joins the device's own worklist (split-send: local vertices never
   leave the device); with nothing to do, sleep until a packet arrives or the loop is over.

There is no barrier between levels, and a vertex may re-enter a worklist after it ran: what an
order-free functor allows (it accepts only when it changed the state monotonically, and a
second visit changes nothing that matters). The loop ends by counted termination
(:class:`groute.worklist.WorkCounter`): every device reports the vertices it holds after each
pass, a send adds its ids to the count in transit in the same report that drops the chunk that
made them, and an arrival leaves it in the report that adds what it produced; the count never
reads zero while work exists, so the loop ends exactly when no device holds work and nothing
is in flight. An idle device's wait is bounded by the timeout only while nothing progresses
(:meth:`WorkCounter.wait_idle`); a failure on one device stops the others through the context.
"""
from __future__ import annotations

import math

import numpy as np

from groute.operators.frontier import DeviceFrontier, Frontier
from groute.operators.loop import AdvanceStep, ComputeStep, FilterStep, scalars_of
from groute.worklist.counter import WorkCounter
from groute.worklist.worker import LocalWork

WHERE = "run_loop(async)"


class LocalWorklist:
    """One device's vertices still to run: arrays of local positions on the device, taken a
    chunk at a time; a vertex queued twice before its chunk is taken runs once."""

    def __init__(self, engine, part):
        self.engine, self.part = engine, part
        self.arrays, self.count = [], 0

    def __len__(self):
        return self.count

    def push(self, frontier: DeviceFrontier) -> None:
        if frontier.count:
            self.arrays.append(frontier.queue[:frontier.count])
            self.count += frontier.count

    def take(self, limit: int) -> DeviceFrontier:
        device, xp = self.part.device, self.part.device.xp
        with device.on_compute():
            whole = self.arrays[0] if len(self.arrays) == 1 else xp.concatenate(self.arrays)
            rest = whole[limit:]
            chunk = xp.unique(whole[:limit]).astype(np.int32)
        self.arrays = [rest] if rest.shape[0] else []
        self.count = int(rest.shape[0])
        return DeviceFrontier(device, self.part.size, queue=chunk)


class AsyncLoop:
    """One order-free loop of ``steps`` (checked by the engine's rule: pushes, no gathering,
    no level scalar) with ``scalars`` on ``engine`` (an :class:`~groute.engines.AsyncEngine`);
    :meth:`run` runs it from a frontier. ``chunk``: the most vertices a pass takes."""

    def __init__(self, engine, steps, scalars, chunk: int):
        self.engine, self.steps, self.scalars, self.chunk = engine, tuple(steps), scalars, chunk
        ins = any(isinstance(s, AdvanceStep) and s.over == "in" for s in self.steps)
        in_parts = engine._in_arc_parts() if ins else None     # built here, not on a device
        #: per step, every device's part whose rows the step reads
        self.rows = [in_parts if isinstance(s, AdvanceStep) and s.over == "in" else engine.parts
                     for s in self.steps]
        #: per step, the Router its remote targets travel through (None: not an advance, or
        #: one device)
        self.routers = [engine._exchange_router(s.functor) if isinstance(s, AdvanceStep)
                        else None for s in self.steps]
        self.inboxes = list({id(r): r for r in self.routers if r is not None}.values())
        self.counter: WorkCounter | None = None

    def wake(self) -> None:
        """A packet arrived somewhere: idle devices look at their inboxes."""
        counter = self.counter
        if counter is not None:
            counter.notify()

    def run(self, frontier):
        """Run from ``frontier`` until no work is left; ``(per-device tallies, ids routed
        between each pair of devices)``."""
        eng = self.engine
        ctx = eng.ctx
        before = [r.routed_elements.copy() for r in self.inboxes]
        counter = WorkCounter(ctx.num_devices, threshold=math.inf, delta=math.inf,
                              stop=ctx.stop_event, timeout=ctx.timeout)

        def seed(device, part, fr):
            work = LocalWorklist(eng, part)
            work.push(fr.to_queue() if fr.everything else fr)
            return work
        # every device's first work is counted before any device may find none left
        worklists = eng._each(seed, eng.parts, frontier.parts)
        for i, work in enumerate(worklists):
            counter.report(i, LocalWork(near=len(work)))
        self.counter = counter
        try:
            tallies = eng._each(self._device_loop, eng.parts, worklists)
        finally:
            self.counter = None
        k = ctx.num_devices
        routed = np.zeros((k, k), np.int64)
        for r, b in zip(self.inboxes, before):
            routed += r.routed_elements - b
        return tallies, routed

    # one device -------------------------------------------------------------------------------
    def _device_loop(self, device, part, work):
        eng, i = self.engine, part.index
        ops = eng._ops(part)
        values = [s.functor.bind(part.state, scalars_of(s, self.scalars), WHERE)
                  for s in self.steps]
        tally = dict(chunks=0, computes=0, filters=0, advances=0, sent=0, received=0)
        sends = []

        def has_input():
            return any(r.outputs[i].pending() for r in self.inboxes)

        while True:
            self._absorb(part, ops, values, work, sends, tally)
            if len(work):
                out, outgoing = self._steps(part, ops, values, work.take(self.chunk), 0, tally)
                work.push(out)
                self._report_and_send(part, work, outgoing, sends, tally)
                tally["chunks"] += 1
                continue
            finished, _, _ = self.counter.wait_idle(i, has_input)
            if finished:
                break
        for handle, _ in sends:
            handle.wait(timeout=eng.ctx.timeout, stop=eng.ctx.stop_event)
        return tally

    def _steps(self, part, ops, values, front, first, tally):
        """Steps ``first..`` on ``front`` (local positions of ``part``); the frontier the last
        leaves and ``[(step, owner, ids)]``, the targets other devices own."""
        outgoing = []
        for j in range(first, len(self.steps)):
            if not front.count:
                break
            step, rows = self.steps[j], self.rows[j][part.index]
            if isinstance(step, ComputeStep):
                ops.compute(rows, front, step.functor, values[j], WHERE)
                tally["computes"] += 1
            elif isinstance(step, FilterStep):
                front = ops.filter(rows, front, step.functor, values[j], WHERE)
                tally["filters"] += 1
            else:
                out, remote, msgs = ops.push(rows, front, step.functor, values[j], WHERE)
                tally["advances"] += 1
                if self.routers[j] is not None and remote.shape[0]:
                    with part.device.on_compute():
                        groups = rows.split_by_owner(remote, part.device.xp, msgs)
                    outgoing += [(j, owner, ids) for owner, ids in groups]
                front = ops.finish(rows, out)
        return front, outgoing

    def _absorb(self, part, ops, values, work, sends, tally) -> bool:
        """Visit what other devices sent here (their packets so far, every packet of one advance
        step in one visit: one output and one count read-back per step, not per packet), run
        the steps after that advance on what it accepted; False if nothing had arrived."""
        eng, i = self.engine, part.index
        arrived = []
        for router in self.inboxes:
            while (pending := router.outputs[i].poll()) is not None:
                arrived.append(pending)
        if not arrived:
            return False
        received, outgoing = 0, []
        by_step = {}        # one visit per advance step for every packet of it that arrived
        for pending in arrived:
            by_step.setdefault(int(pending.metadata["step"]), []).append(pending)
        xp = part.device.xp
        for j, packets in sorted(by_step.items()):
            functor, rows = self.steps[j].functor, self.rows[j][i]
            ids, msgs = [], []
            for pending in packets:
                eng._arrived(part, pending)
                with part.device.on_compute():
                    a, m = rows.unpack_rows(pending.data, functor.message, xp)
                ids.append(a)
                msgs.append(m)
            with part.device.on_compute():
                ids = ids[0] if len(ids) == 1 else xp.concatenate(ids)
                msgs = None if functor.message is None else (
                    msgs[0] if len(msgs) == 1 else xp.concatenate(msgs))
                out = ops.output(rows, functor, values[j], WHERE)
                ops.apply(rows, out, ids, msgs, functor, values[j], WHERE)
            for pending in packets:
                eng._release(part, pending)
                received += pending.size
            front, more = self._steps(part, ops, values, ops.finish(rows, out), j + 1, tally)
            work.push(front)
            outgoing += more
        tally["received"] += received
        self._report_and_send(part, work, outgoing, sends, tally, received)
        return True

    def _report_and_send(self, part, work, outgoing, sends, tally, received=0):
        """Report what the device holds now, the ids it is about to send counted in transit
        before any can arrive, then send them to their owners."""
        i, device = part.index, part.device
        sent = sum(int(ids.shape[0]) for _, _, ids in outgoing)
        self.counter.report(i, LocalWork(near=len(work)), sent=sent, received=received)
        tally["sent"] += sent
        if not outgoing:
            return
        event = device.compute_stream.record() if device.backend == "cuda" else None
        for j, owner, ids in outgoing:
            handle = self.routers[j].inputs[i].send(ids, event=event,
                                                     metadata={"owner": owner, "step": j})
            sends.append((handle, ids))          # the ids stay alive until copied
        sends[:] = [s for s in sends if not s[0].done()]


def empty_frontier(engine) -> Frontier:
    """A frontier with no vertex on any of ``engine``'s devices (what an async loop leaves)."""
    return Frontier(engine, [DeviceFrontier.empty(p.device, p.size) for p in engine.parts])
