"""What an app may add to the level-synchronous (BSP) loop: a level hook.

The worklist's BSP loop runs, on every device's host thread, advance, exchange and a barrier per
level. An app whose levels need steps of their own between those (BFS switching every device to
pull at once, sharing frontier flags) passes a hook to
:meth:`~groute.worklist.DistributedWorklist.run` instead of the worklist knowing the algorithm.
The loop calls, per level:

``before_level(i, level, decision)``
    on device ``i``'s host thread, before its advance; ``decision`` is what :meth:`decide`
    returned at the last level's barrier (None before the first level).
``after_exchange(i)``
    on device ``i``'s thread once its level's items are exchanged, before the closing barrier.
``decide(near) -> decision``
    once per level, by the last device to reach the closing barrier, under the counter's lock,
    when the run goes on; ``near`` is every device's count of ready items. Every device gets the
    same answer.
``between_levels(i, decision, barrier) -> int``
    on device ``i``'s thread after that barrier; ``barrier()`` meets the other devices (each
    must call it as often). Returns the bytes it moved between devices, which count in the
    run's ``bytes_moved``.
``stats``
    a dict joined into the run's counters at its end.

A hook serves one run: the app makes a new one for each.
"""
from __future__ import annotations


class LevelHook:
    """A hook that does nothing at every step; subclass and override what a level needs."""

    def __init__(self):
        self.stats = {}

    def before_level(self, i, level, decision):
        pass

    def after_exchange(self, i):
        pass

    def decide(self, near):
        return None

    def between_levels(self, i, decision, barrier) -> int:
        return 0
