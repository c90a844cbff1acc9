"""Termination detection and the soft-priority threshold, shared by the devices of one run.

Every device reports, after each thing it does, how much local work it holds: ``near`` (items
below the priority threshold, ready to process) and ``far`` (deferred items). Items on their way
between devices are counted in ``in_transit``: a sender adds them in the same locked update that
removes the work that produced them, a receiver subtracts them in the same update that reports
what absorbing them added. So the total never reads zero while work exists, and the run ends
exactly when every count is zero. Idle devices sleep on one condition variable, woken by
arriving items, a new threshold, or the end. The timeout bounds an idle wait without progress,
not a run: it starts again whenever a device reports, and runs out only while no device holds
near work (a device that does is busy and will report, however long its step).

Soft priority: when no device has near work and nothing is in transit but deferred work remains,
the threshold advances by ``delta`` from at least the smallest deferred priority
(:func:`~groute.worklist.priority.next_threshold`) and every
device must re-split its deferred items before the next advance is allowed.
"""
from __future__ import annotations

import math
import threading

from ..errors import WaitTimeout
from ..waiting import wait_for
from .priority import next_threshold


class WorkCounter:
    """Counted work in flight over ``k`` devices; see the module docstring."""

    def __init__(self, k: int, *, threshold, delta, stop: threading.Event, timeout: float):
        self.k = k
        self.cond = threading.Condition()
        self.near = [0] * k
        self.far = [0] * k
        self.far_min = [math.inf] * k
        self.in_transit = 0
        self.threshold = threshold
        self.delta = delta
        self.epoch = 0                  # bumped on every threshold advance
        self.split_epoch = [0] * k      # the epoch each device has split its far work for
        self.advances = 0
        self.reports = 0                # reports so far: an idle device's sign of progress
        self.stop = stop
        self.timeout = timeout
        self._barrier_count = 0
        self._barrier_gen = 0
        self._barrier_result = None

    # reports ----------------------------------------------------------------------------------
    def report(self, i: int, work, *, sent: int = 0, received: int = 0, epoch=None) -> None:
        """Device ``i`` now holds ``work`` (a LocalWork); it sent/absorbed that many items."""
        with self.cond:
            self.near[i], self.far[i] = int(work.near), int(work.far)
            self.far_min[i] = work.far_min if work.far else math.inf
            self.in_transit += sent - received
            self.reports += 1
            if epoch is not None:
                self.split_epoch[i] = epoch
            self._maybe_advance()
            self.cond.notify_all()

    def set_threshold(self, threshold) -> None:
        """A single device that advanced the threshold by itself (inside its fused kernel)."""
        with self.cond:
            self.threshold = threshold

    def _maybe_advance(self):
        if (self.in_transit == 0 and not any(self.near) and any(self.far)
                and all(e == self.epoch for e in self.split_epoch)):
            self.threshold = next_threshold(self.threshold, min(self.far_min), self.delta)
            self.epoch += 1
            self.advances += 1

    # queries ----------------------------------------------------------------------------------
    def finished(self) -> bool:
        return self.in_transit == 0 and not any(self.near) and not any(self.far)

    def wait_idle(self, i: int, has_input) -> tuple[bool, int, object]:
        """Sleep until device ``i`` has input (``has_input()``), a threshold to split for, or the
        run is over. Returns ``(finished, epoch, threshold)``. WaitTimeout once a whole timeout
        passed without a report while no device held near work (module docstring)."""
        what = f"work for device {i} or the end of the run"
        with self.cond:
            while True:
                seen = self.reports
                try:
                    wait_for(lambda: (self.finished() or has_input()
                                      or self.split_epoch[i] != self.epoch),
                             cond=self.cond, timeout=self.timeout, stop=self.stop, what=what)
                    return self.finished(), self.epoch, self.threshold
                except WaitTimeout:
                    if self.reports == seen and not any(self.near):
                        raise WaitTimeout(
                            f"timed out after {self.timeout:g} s without progress waiting for "
                            f"{what} (near={self.near}, far={self.far}, in transit="
                            f"{self.in_transit})") from None

    def snapshot(self) -> tuple[int, object]:
        with self.cond:
            return self.epoch, self.threshold

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    # BSP ------------------------------------------------------------------------------------------
    def barrier(self, action=None):
        """All ``k`` devices meet; the last to arrive runs ``action()`` under the lock and every
        device gets its result (so all decide the same thing). Bounded by the timeout."""
        with self.cond:
            gen = self._barrier_gen
            self._barrier_count += 1
            if self._barrier_count == self.k:
                self._barrier_result = action() if action is not None else None
                self._barrier_count = 0
                self._barrier_gen += 1
                self.cond.notify_all()
            else:
                wait_for(lambda: self._barrier_gen != gen, cond=self.cond, timeout=self.timeout,
                         stop=self.stop, what="the other devices at a BSP barrier")
            return self._barrier_result

    def wait_until(self, predicate, what: str):
        with self.cond:
            wait_for(predicate, cond=self.cond, timeout=self.timeout, stop=self.stop, what=what)
