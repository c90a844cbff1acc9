"""The pump: one thread per copying device that serves every link of that device.

A link does its common work on its callers' threads (see :mod:`groute.runtime.link`); the pump
picks up what they leave, ends a link's stream once it is closed and drained, ends the link
when its context stops, and turns a receiver that holds every buffer for longer than the
timeout into a :class:`~groute.errors.WaitTimeout`. A device-initiated link
(:mod:`groute.runtime.device_link`) has it watch for the stop and for kernels that gave up.
A link served here has ``_copier`` (its device), ``name`` and ``_pump_turn()``.
"""
from __future__ import annotations

import logging
import threading
import time

from ..waiting import POLL_INTERVAL

log = logging.getLogger(__name__)


class _Pump:
    """The thread that serves every link whose copies one device issues (see the module
    docstring). A link wakes it (:meth:`wake`) when it leaves work for the pump or ends;
    besides, it visits each of its links every poll interval, to notice a stop and a receiver
    holding every buffer. It ends when its last link has ended; the next link starts another."""

    _pumps: dict = {}                 # device -> its running pump
    _pumps_lock = threading.Lock()

    def __init__(self, device):
        self.device = device
        self._cond = threading.Condition()
        self._links: set = set()
        self._woken: list = []
        self._ended = False           # the thread has returned: nothing will take a wake
        self.thread = threading.Thread(target=self._run, name=f"groute-pump-{device.name}",
                                       daemon=True)

    @classmethod
    def serve(cls, link) -> "_Pump":
        """The pump of ``link``'s copying device, started if none runs, now serving ``link``."""
        with cls._pumps_lock:
            pump = cls._pumps.get(link._copier)
            start = pump is None
            if start:
                pump = cls._pumps[link._copier] = cls(link._copier)
            with pump._cond:
                pump._links.add(link)
        if start:
            pump.thread.start()
        return pump

    @classmethod
    def wait_idle(cls, devices, timeout) -> list:
        """Wait until no pump of ``devices`` serves a link (every link has ended), at most
        ``timeout`` seconds; the names of the links still served."""
        deadline = time.monotonic() + timeout
        while True:
            with cls._pumps_lock:
                busy = [cls._pumps[d] for d in devices if d in cls._pumps]
            left = [link.name for pump in busy for link in list(pump._links)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(POLL_INTERVAL / 5)

    def wake(self, link) -> None:
        """Have the pump visit ``link`` now. A pump that has ended served its last link to
        the end, this one included (a link's own late wake, from a close or a release racing
        the pump's last turn): keeping it here would only keep it alive."""
        with self._cond:
            if self._ended:
                return
            self._woken.append(link)
            self._cond.notify()

    def _run(self):
        next_visit = 0.0
        while True:
            with self._cond:
                if not self._woken:
                    self._cond.wait(POLL_INTERVAL)
                turn, self._woken = self._woken, []
                now = time.monotonic()
                if now >= next_visit:
                    turn.extend(self._links)
                    next_visit = now + POLL_INTERVAL
            for link in dict.fromkeys(turn):      # each once, woken ones first
                try:
                    ended = link._pump_turn()
                except Exception as exc:  # noqa: BLE001 - one link must not stop the others'
                    log.error("%s: the pump could not end it: %s", link.name, exc)
                    ended = True
                if ended:
                    with self._cond:
                        self._links.discard(link)
            turn = link = None        # an ended link must not live on here until the next turn
            with self._pumps_lock, self._cond:
                if not self._links and not self._woken:
                    del self._pumps[self.device]
                    self._ended = True
                    return
