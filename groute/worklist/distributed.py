"""The distributed worklist: per-device workers, split-send through a Router, counted termination.

Each device's host thread runs one control loop (:meth:`DistributedWorklist.run`), the same on
both backends; only the worker's hot loops differ. A round on device ``i``:

1. absorb the item batches that arrived (a ring forwards the ones owned elsewhere);
2. if the global threshold advanced, re-split deferred work (soft priority);
3. if it holds near work, call the worker's fused ``advance`` (many levels in one launch); the
   items it produced for other devices come back as per-destination outboxes (split-send: local
   items never leave the device) and go out through one :class:`~groute.runtime.router.Router` over
   the devices, whose policy picks the link (:data:`ROUTINGS`), packetized and multi-buffered;
4. otherwise sleep until items arrive, the threshold moves, or the run is over.

Termination and priority bookkeeping live in :class:`~groute.worklist.counter.WorkCounter`.
BSP mode runs the same workers level-synchronously: one round each, barrier, exchange, barrier.
Over the ranks of a :class:`~groute.runtime.rank_context.RankContext` (one process per device)
the same BSP loop runs on each rank's device: the Router is a
:class:`~groute.runtime.rank_router.RankRouter`, whose flush after the level's sends delivers
them, and the counter a :class:`~groute.worklist.rank_counter.RankWorkCounter`, whose barriers
share the devices' counts; the asynchronous loop and the ring need items in flight between
processes, which this exchange does not have (docs/DISTRIBUTED.md).
An app whose levels need steps of their own (BFS switching every device to pull at once) passes
a level hook (:mod:`groute.worklist.levels`); the worklist itself knows no algorithm.
"""
from __future__ import annotations

import logging
import math
import threading
import time

from ..errors import WaitTimeout
from ..runtime.policies import by_owner, reach, ring
from ..runtime.router import CLOSE_JOIN_SECONDS, Router
from .counter import WorkCounter
from .rank_counter import RankWorkCounter
from .items import ITEM_DTYPE
from .queue import WorkQueue
from .worker import call_on_stream

log = logging.getLogger(__name__)

#: routing name -> the Router policy that picks each batch's next link. Every batch carries its
#: owner (``metadata["owner"]``); a ring's hop may not be the owner, which passes it on.
ROUTINGS = {"all2all": by_owner, "ring": ring}
MODES = ("async", "bsp")


class DistributedWorklist:
    """A Router between the devices of ``ctx`` plus the control loop that drives per-device
    workers.

    ``routing``: ``"all2all"`` (policy ``by_owner``: a link from every device to every other)
    or ``"ring"`` (policy ``ring``: device i sends only to i+1; items owned further on hop).
    ``packet_size`` items per packet and ``num_buffers`` receive buffers per link bound the
    memory in flight (back-pressure). Create once per solver, :meth:`run` many times,
    :meth:`close` at the end.
    """

    def __init__(self, ctx, *, routing: str = "all2all", packet_size: int = 1 << 20,
                 num_buffers: int = 3):
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}; got {routing!r}")
        self.ctx = ctx
        self.k = len(ctx.devices)
        self.routing = routing
        self._counter: WorkCounter | None = None
        self._link_shape = (packet_size, num_buffers)
        self.router: Router | None = None
        self._open_router()

    def _open_router(self):
        """The devices' Router, linking each device to the others its policy may choose (a
        device never sends to itself: split-send); again after a failure ended its links (the
        context stops every link), which drops what the stopped run left in its outputs."""
        if self.k == 1:
            return
        packet_size, num_buffers = self._link_shape
        policy = ROUTINGS[self.routing]
        devices = range(self.k)
        pairs = [(i, j) for i in devices for j in reach(policy, i, list(devices)) if j != i]
        self.router = Router(self.ctx.devices, self.ctx.devices, policy, pairs=pairs,
                             packet_size=packet_size, num_buffers=num_buffers, dtype=ITEM_DTYPE,
                             ctx=self.ctx, name="worklist")
        for output in self.router.outputs:
            output.add_arrival_listener(self._wake)

    def _wake(self):
        counter = self._counter
        if counter is not None:
            counter.notify()

    def _has_input(self, i) -> bool:
        return self.router is not None and self.router.outputs[i].pending() > 0

    def close(self):
        if self.router is not None:
            self.router.close()
            self.router.join(timeout=CLOSE_JOIN_SECONDS)

    # --------------------------------------------------------------------------------------------
    def run(self, workers, *, mode: str = "async", threshold=math.inf, delta=math.inf,
            max_rounds: int | None = None, timeout=None, level_hook=None) -> dict:
        """Drive ``workers[i]`` (one per device, the protocol of :mod:`groute.worklist.worker`)
        until no work is left anywhere; return the run's counters.

        ``threshold``/``delta``: the soft-priority start and step (``inf`` switches priority
        off). ``max_rounds``: fused rounds per ``advance`` call (None: until the local work is
        done or the outboxes fill; BSP always uses 1). ``level_hook``: the app's steps around
        each BSP level (:mod:`groute.worklist.levels`; BSP only).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if len(workers) != self.k:
            raise ValueError(f"need one worker per device ({self.k}), got {len(workers)}")
        if level_hook is not None and mode != "bsp":
            raise ValueError(f"level_hook runs between the levels of mode='bsp'; got mode={mode!r}")
        ranks = self.ctx.ranks
        if ranks is not None and (mode != "bsp" or self.routing != "all2all" or level_hook):
            raise ValueError(f"across processes the worklist runs mode='bsp' with routing "
                             f"'all2all' and no level hook; got mode={mode!r}, routing="
                             f"{self.routing!r}{', a level hook' if level_hook else ''}")
        router = self.router
        if router is not None and any(link.finished for _, _, link in router.each_link()):
            self.ctx.ensure_running()   # a failed run ended them: reset the context first
            self._open_router()
            router = self.router
        if any(self._has_input(i) for i in range(self.k)):
            raise RuntimeError("worklist inboxes are not empty from a previous run")
        if mode == "bsp":
            threshold = delta = math.inf
        counting = dict(threshold=threshold, delta=delta, stop=self.ctx.stop_event,
                        timeout=self.ctx.timeout)
        counter = (WorkCounter(self.k, **counting) if ranks is None
                   else RankWorkCounter(self.k, ranks=ranks, **counting))
        self._counter = counter
        self.stats = {"mode": mode, "routing": self.routing, "rounds": [0] * self.k,
                      "items_sent": {}, "items_forwarded": [0] * self.k, "bytes_moved": 0,
                      "bsp_levels": 0}
        routed = router.routed_elements.copy() if router is not None else None
        self._stats_lock = threading.Lock()
        # every device reports its initial work before any loop may conclude that none is left
        starts = self.ctx.gather([self.ctx.submit(i, lambda dev, w=w: w.start(threshold))
                                  for i, w in enumerate(workers)])
        for i, work in enumerate(starts):
            if work is not None:           # None: a device another rank drives
                counter.report(i, work)
        # host seconds per device in each phase of the BSP loop (advance includes the kernels:
        # its read-back waits for them; share: the level hook's steps between levels)
        self.stats["phase_seconds"] = [dict.fromkeys(("advance", "send", "barrier", "exchange", "share"), 0.0)
                                       for _ in range(self.k)]
        self.stats["advance_seconds"] = [[] for _ in range(self.k)]   # BSP: per level
        loop = self._async_loop if mode == "async" else self._bsp_loop
        t0 = time.perf_counter()
        try:
            self.ctx.gather([self.ctx.submit(i, loop, i, workers, counter, max_rounds, level_hook)
                             for i in range(self.k)], timeout=timeout)
        finally:
            self._counter = None
        self.stats["host_seconds"] = time.perf_counter() - t0
        self.stats["threshold_advances"] = counter.advances
        self.stats["final_threshold"] = counter.threshold
        if router is not None:          # items per link: what the router routed in this run
            for i, j, _ in router.each_link():
                n = int(router.routed_elements[i, j] - routed[i, j])
                self.stats["items_sent"][f"{i}->{j}"] = n
                self.stats["bytes_moved"] += n * ITEM_DTYPE.itemsize
        if level_hook is not None:
            self.stats.update(level_hook.stats)
        if ranks is not None:
            self._share_stats()
        return self.stats

    def _share_stats(self):
        """On a RankContext: every rank's counts of its own device, on every rank."""
        mine = self.ctx.rank
        everyone = self.ctx.share([self.stats if i == mine else None for i in range(self.k)],
                                  "the worklist's counts")
        self.stats["rounds"] = [s["rounds"][i] for i, s in enumerate(everyone)]
        self.stats["items_forwarded"] = [s["items_forwarded"][i] for i, s in enumerate(everyone)]
        self.stats["items_sent"] = {link: n for i, s in enumerate(everyone)     # by the sender
                                    for link, n in s["items_sent"].items()
                                    if link.startswith(f"{i}->")}
        self.stats["bytes_moved"] = sum(s["bytes_moved"] for s in everyone)
        for key in ("phase_seconds", "advance_seconds"):
            self.stats[key] = [s[key][i] for i, s in enumerate(everyone)]
        self.stats["bsp_levels"] = everyone[0]["bsp_levels"]

    # the asynchronous loop ------------------------------------------------------------------
    def _async_loop(self, device, i, workers, counter: WorkCounter, max_rounds, hook):
        k = self.k
        worker = workers[i]
        forward, sends, absorb = self._loop_state(device, i, worker, counter)
        epoch_seen = 0
        self_advance = k == 1
        while True:
            self.ctx.check()
            absorb()
            epoch, thr = counter.snapshot()
            if epoch != epoch_seen:
                epoch_seen = epoch
                counter.report(i, worker.split(thr), epoch=epoch)
            has_forward = any(len(q) for q in forward)
            if worker.work.near > 0:
                self._wait_sends(sends, absorb)
                work, outbox = worker.advance(thr, max_rounds=max_rounds, self_advance=self_advance)
                self._count_round(i)
                if work.threshold is not None:
                    counter.set_threshold(work.threshold)
                self._send(device, i, counter, work, outbox, forward, sends)
                continue
            if has_forward:
                self._wait_sends(sends, absorb)
                self._send(device, i, counter, None, [None] * k, forward, sends)
                continue
            finished, _, _ = counter.wait_idle(i, lambda: self._has_input(i))
            if finished:
                self._wait_sends(sends, absorb)
                return

    # the level-synchronous loop ---------------------------------------------------------------
    def _bsp_loop(self, device, i, workers, counter: WorkCounter, max_rounds, hook):
        k = self.k
        worker = workers[i]
        forward, sends, absorb = self._loop_state(device, i, worker, counter)
        level, decision = 0, None
        spent = self.stats["phase_seconds"][i]
        clock = time.perf_counter
        while True:
            self.ctx.check()
            if hook is not None:
                hook.before_level(i, level, decision)
            t0 = clock()
            work, outbox = worker.advance(math.inf, max_rounds=1, self_advance=False)
            self._count_round(i)
            t1 = clock()
            self._send(device, i, counter, work, outbox, forward, sends)
            t2 = clock()
            counter.barrier()                         # everything of this level has been sent
            if self.router is not None:
                self.router.flush()                   # delivered (a RankRouter's exchange)
            t3 = clock()
            while True:                               # exchange until nothing is in transit
                counter.wait_until(lambda: self._has_input(i) or counter.in_transit == 0,
                                   what=f"BSP exchange on device {i}")
                if not self._has_input(i):
                    break
                absorb()
                if any(len(q) for q in forward):
                    self._send(device, i, counter, None, [None] * k, forward, sends)
            self._wait_sends(sends, absorb)
            if hook is not None:
                hook.after_exchange(i)
            t4 = clock()
            finished, decision = counter.barrier(action=lambda: self._level_done(counter, hook))
            t5 = clock()
            self.stats["advance_seconds"][i].append(t1 - t0)
            for phase, dt in (("advance", t1 - t0), ("send", t2 - t1), ("barrier", t3 - t2 + t5 - t4),
                              ("exchange", t4 - t3)):
                spent[phase] += dt
            if finished:
                if i == 0:
                    self.stats["bsp_levels"] = self.stats["rounds"][0]
                return
            level += 1
            if hook is not None:
                moved = hook.between_levels(i, decision, counter.barrier)
                if moved:
                    with self._stats_lock:
                        self.stats["bytes_moved"] += moved
                spent["share"] += clock() - t5

    def _level_done(self, counter, hook):
        """At the barrier after a level (run once, under the counter's lock): whether the run
        is over, and the level hook's decision for the next level."""
        finished = counter.finished()
        if finished or hook is None:
            return finished, None
        return False, hook.decide(list(counter.near))

    # helpers ------------------------------------------------------------------------------------
    def _loop_state(self, device, i, worker, counter):
        """What either loop keeps on device ``i``: a queue per destination for the items it
        passes on (a ring's hops), the list of its sends still using their buffers, and
        ``absorb()``, which takes in the batches that arrived (True if there were any)."""
        forward = [WorkQueue(device, 1024, name=f"forward{i}->{j}") for j in range(self.k)]
        return forward, [], lambda: self._absorb_inbox(device, i, worker, counter, forward)

    def _count_round(self, i):
        self.stats["rounds"][i] += 1

    def _absorb_inbox(self, device, i, worker, counter, forward):
        batch = []
        if self.router is not None:
            output = self.router.outputs[i]
            while (pending := output.poll()) is not None:
                batch.append(pending)
        if not batch:
            return False
        mine, received = [], 0
        for pending in batch:
            seg = pending.wait_on(device.compute_stream)
            dest = seg.metadata.get("owner", i)
            if dest == i:
                mine.append(pending)
                received += pending.size
            else:
                call_on_stream(device.compute_stream, forward[dest].push, seg.data)
                self.stats["items_forwarded"][i] += pending.size
        work = worker.absorb([p.data for p in mine], counter.threshold) if mine else worker.work
        done = device.compute_stream.record()
        for pending in batch:
            pending.release(after=done)
        counter.report(i, work, received=received)
        return True

    def _send(self, device, i, counter, work, outbox, forward, sends):
        """Split-send: the worker's per-destination outboxes plus forwarded items go out."""
        batches = []
        for dest in range(self.k):
            parts = [a for a in (outbox[dest],) if a is not None and a.shape[0]]
            fwd = call_on_stream(device.compute_stream, forward[dest].take) \
                if len(forward[dest]) else None
            if fwd is not None:
                parts.append(fwd)
            if parts:
                batches.append((dest, parts))
        new = sum(int(outbox[d].shape[0]) for d in range(self.k) if outbox[d] is not None)
        if work is not None:
            counter.report(i, work, sent=new)  # before the items can arrive anywhere
        if not batches:
            return
        ready = device.compute_stream.record()
        port = self.router.inputs[i]       # the policy picks the link: the owner's or the next hop
        for dest, parts in batches:
            for p in parts:
                sends.append(port.send(p, event=ready, metadata={"owner": dest}))

    def _wait_sends(self, sends, absorb=None):
        """Wait until earlier sends no longer need their source buffers. ``absorb`` keeps taking
        in arriving items meanwhile: a device that only waited could hold receive buffers its
        senders need, and with a ring every device could wait on the next (a cycle)."""
        deadline = time.monotonic() + self.ctx.timeout
        delay = 20e-6
        while sends:
            sends[:] = [h for h in sends if not h.done()]
            if not sends:
                return
            self.ctx.check()
            if absorb is not None and absorb():
                continue
            if time.monotonic() > deadline:
                raise WaitTimeout(f"timed out after {self.ctx.timeout:g} s waiting for "
                                  f"{len(sends)} worklist sends to complete")
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)
