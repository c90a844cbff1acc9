"""BFS's pull levels on several devices, on the worklist's BSP loop (a level hook).

On one device the fused kernel switches direction by itself. On several devices in BSP the
host decides for all of them at once (Beamer's rule on the global frontier,
:class:`groute.operators.direction.DirectionState`): before a pull level each device flags its
frontier vertices and copies every other device's flags, so an unreached vertex can find a
parent owned by any device without an item being sent.

A worker takes part when ``can_pull`` is true (BFS on a symmetric graph): it has ``lo``/``hi``
(its vertex range), ``num_arcs`` (its out-arcs), ``frontier`` (one flag per vertex of the whole
graph, on its device) and the steps of :class:`PullSteps`.
"""
from __future__ import annotations

from groute.operators import direction
from groute.worklist import LevelHook, call_on_stream


class PullSteps:
    """A worker's side of pull levels, each step in its compute stream's order. The worker
    implements ``_frontier_arcs`` (the out-arcs of its queued vertices) and
    ``_publish_frontier`` (flag its queued vertices in its own range of ``frontier``), and its
    ``advance`` pulls while :attr:`pull_level` is set."""

    #: the depth the next ``advance`` pulls from, the flagged vertices' (None: push)
    pull_level = None

    def set_pull_level(self, level):
        self.pull_level = level

    def frontier_arcs(self):
        return call_on_stream(self.device.compute_stream, self._frontier_arcs)

    def publish_frontier(self):
        """Flag the queued vertices in stream order; the event marks its completion."""
        stream = self.device.compute_stream
        call_on_stream(stream, self._publish_frontier)
        return stream.record()


def pull_levels(mode, workers):
    """The level hook for a run of ``workers``: :class:`PullLevels` where every device can pull
    in a BSP run over several devices, else None; None too where a worker is another
    process's (None, a RankContext's: the flags are copied between the devices' memory, which
    processes do not share)."""
    if mode == "bsp" and len(workers) > 1 and all(w is not None and w.can_pull
                                                  for w in workers):
        return PullLevels(workers)
    return None


class PullLevels(LevelHook):
    """One run's direction across devices (see the module docstring); counts ``pull_levels``."""

    def __init__(self, workers):
        super().__init__()
        self.workers = workers
        self.direction = direction.DirectionState(sum(w.hi - w.lo for w in workers),
                                                  sum(w.num_arcs for w in workers))
        self.front_arcs = [0] * len(workers)
        self.events = [None] * len(workers)
        self.stats["pull_levels"] = 0

    def before_level(self, i, level, decision):
        self.workers[i].set_pull_level(level if decision else None)

    def after_exchange(self, i):
        w = self.workers[i]
        big = direction.scout(w.work.near, w.hi - w.lo)
        self.front_arcs[i] = w.frontier_arcs() if big else 0
        # a big or still-pulling frontier is likely to be pulled from next: flag it now, so the
        # common case needs no barrier of its own (see between_levels)
        self.events[i] = w.publish_frontier() if (big or self.direction.pulling) else None

    def decide(self, near):
        pulling = self.direction.next(sum(near), sum(self.front_arcs))
        self.stats["pull_levels"] += int(pulling)
        return pulling

    def between_levels(self, i, decision, barrier) -> int:
        """Before a pull level: every device flags its frontier (most did before the level's
        last barrier; if one did not, all meet once more after it has); then each copies the
        others' ranges. Returns the bytes copied."""
        if not decision:
            return 0
        workers = self.workers
        if not all(self.events):                  # the same answer on every device
            barrier()                             # everyone has read the list
            if self.events[i] is None:
                self.events[i] = workers[i].publish_frontier()
            barrier()
        mine, stream = workers[i].frontier, workers[i].device.compute_stream
        for j, other in enumerate(workers):
            if j != i:
                stream.wait_event(self.events[j])
                stream.copy(mine[other.lo:other.hi], other.frontier[other.lo:other.hi])
        return sum(w.frontier[w.lo:w.hi].nbytes for j, w in enumerate(workers) if j != i)
