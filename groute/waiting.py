"""Bounded waiting: every blocking call in groute goes through here.

A wait ends in one of three ways: the condition holds, the timeout passes (``WaitTimeout`` naming
what was awaited), or the owning context is stopped (``ContextStopped``; when a failure stopped
it, :class:`~groute.errors.StoppedByFailure`, which names the device that failed and has the
original exception as ``__cause__``, so whichever thread notices first reports the real cause).
This is what makes "a failure in one device thread stops the whole computation" true: blocked
threads notice the stop within one poll interval.
"""
from __future__ import annotations

import threading
import time

from .config import resolve_timeout
from .errors import ContextStopped, DeviceError, StoppedByFailure, WaitTimeout, error_text

#: Longest a waiter sleeps before re-checking the stop flag.
POLL_INTERVAL = 0.05


class StopSignal(threading.Event):
    """A context's stop flag, carrying the failure that set it (``None`` for a plain stop)."""

    def __init__(self):
        super().__init__()
        self.failure: tuple[str, BaseException] | None = None   # (device name, exception)


def stopped(stop, message: str) -> ContextStopped:
    """The error for an operation that ``stop`` ended (``message`` says which):
    :class:`StoppedByFailure` naming the device and the original exception when a failure set
    it, else :class:`ContextStopped`."""
    failure = getattr(stop, "failure", None)
    if failure is None:
        return ContextStopped(message)
    device, exc = failure
    # a DeviceError of that device names it already: its detail, not the device twice
    told = exc.detail if isinstance(exc, DeviceError) and exc.device == device \
        else f"{type(exc).__name__}: {error_text(exc)}"
    err = StoppedByFailure(device, f"{told} ({message})")
    err.__cause__ = exc
    return err


def wait_for(predicate, *, what: str, timeout=None, stop: threading.Event | None = None,
             cond: threading.Condition | None = None, spin: float = 0.0):
    """Block until ``predicate()`` is true.

    With ``cond`` (held by the caller), waits on the condition between checks; without it, polls
    with a short exponential back-off (starting at 20 µs, so GPU event polling stays cheap).
    ``spin``: seconds to poll without sleeping first (yielding the GIL between polls), for
    waits that are usually short and on a latency path: a sleep of 20 µs lasts several times
    that, and the back-off's later ones up to 2 ms, so a wait would otherwise end late by up to
    its own length. A wait on ``cond`` does not spin (the condition wakes it).
    """
    limit = resolve_timeout(timeout)
    deadline = time.monotonic() + limit
    spin_end = time.perf_counter() + spin if spin > 0 else 0.0
    delay = 20e-6
    while True:
        if predicate():
            return
        if stop is not None and stop.is_set():
            raise stopped(stop, f"stopped while waiting for {what}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(f"timed out after {limit:g} s waiting for {what}")
        if cond is not None:
            cond.wait(min(remaining, POLL_INTERVAL))
        elif spin_end and time.perf_counter() < spin_end:
            time.sleep(0)
        else:
            time.sleep(min(delay, remaining, POLL_INTERVAL))
            delay = min(delay * 2, 2e-3)


def run_bounded(fn, *, what: str, timeout=None, stop: threading.Event | None = None,
                name: str = "groute-bounded"):
    """``fn()`` for a call that waits without a limit of its own (a library's blocking call
    that releases the GIL, e.g. NCCL's): run on a daemon thread of its own, waited for as
    :func:`wait_for` waits; its result, or what it raised. Past ``timeout`` (or at ``stop``)
    the wait raises while the thread may stay blocked: the caller then ends what ``fn`` waits
    on (an abort) or the process."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread
            out["error"] = exc
    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    wait_for(lambda: not thread.is_alive(), what=what, timeout=timeout, stop=stop)
    if "error" in out:
        raise out["error"]
    return out["result"]
