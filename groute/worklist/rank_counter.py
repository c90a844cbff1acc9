"""The WorkCounter of a RankContext's level-synchronous runs: counts shared at the barriers.

On a :class:`~groute.runtime.rank_context.RankContext` each rank holds only its own device's
counts. Items are never in transit between two barriers of a BSP level: the worklist's
:class:`~groute.runtime.rank_router.RankRouter` delivers a level's items at its flush, which
the level calls after its sends. So the counter needs no count of items in flight; each
:meth:`RankWorkCounter.barrier` shares every device's counts (an allgather) before the action
runs, and every rank runs the action on the same counts, so all decide the same thing.
"""
from __future__ import annotations

from .counter import WorkCounter


class RankWorkCounter(WorkCounter):
    """See the module docstring: ``ranks`` is the context's :class:`~groute.runtime.ranks.Ranks`."""

    def __init__(self, k: int, *, ranks, **options):
        super().__init__(k, **options)
        self.ranks = ranks

    def report(self, i: int, work, *, sent: int = 0, received: int = 0, epoch=None) -> None:
        """Device ``i`` (this rank's) now holds ``work``; what it sent arrives at the flush."""
        super().report(i, work, epoch=epoch)

    def barrier(self, action=None):
        """Every rank meets and learns every device's counts; then ``action()`` runs here, as
        on every rank, and its result is returned."""
        i = self.ranks.rank
        with self.cond:
            mine = (self.near[i], self.far[i], self.far_min[i])
        everyone = self.ranks.allgather(mine, what="the devices' work at a BSP barrier")
        with self.cond:
            for j, (near, far, far_min) in enumerate(everyone):
                self.near[j], self.far[j], self.far_min[j] = near, far, far_min
            return action() if action is not None else None
