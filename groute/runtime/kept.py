"""Contexts kept for the next call: what a call that is given no context runs on (a one-shot
``groute.bfs(G, s)``, a solver or engine built without ``ctx``, the NetworkX backend).

Starting devices costs more than a small graph's run: a host thread per device, the stream
threads of CPU virtual devices, peer access between GPUs. A call given no context therefore
leases one kept per (backend, devices, timeout, logical devices): the first call makes it, the
next ones reuse it, and the interpreter's exit shuts every kept context down. A lease holds the
context's lock until it is released (a solver's ``close``): two solvers on the same devices at
once would only slow each other down, and a failure in one would stop the other. A second
lease while the first is held gets a context of its own, shut down at its release, so nested
or concurrent solvers never wait for each other. A context that a failure stopped, or that its
user shut down, is shut down and replaced.
"""
from __future__ import annotations

import atexit
import logging
import threading
from typing import Callable

from ..config import logical_devices_requested, resolve_timeout
from .context import Context, default_device_count, requested_devices, resolve_backend

log = logging.getLogger(__name__)

_kept: dict[tuple, tuple[Context, threading.Lock]] = {}
_guard = threading.Lock()


def lease(ctx=None, *, devices=None, backend="auto", timeout=None
          ) -> tuple[Context, Callable[[], None]]:
    """``(ctx, release)``: the given context (``release`` does nothing), or the kept context
    for ``devices`` (a count or device indices; ``None`` or ``"auto"``: a :class:`Context`'s
    default) on ``backend`` with ``timeout``, held until ``release()`` (module docstring). The
    algorithms choose their count first (:mod:`groute.engines.device_rule`)."""
    if ctx is not None:
        return ctx, _nothing
    backend = resolve_backend(backend)
    devices = requested_devices(devices)
    if devices is None:
        devices = default_device_count(backend)
    which = devices if isinstance(devices, int) else tuple(devices)
    key = (backend, which, resolve_timeout(timeout), logical_devices_requested(None))
    while True:
        with _guard:
            entry = _kept.get(key)
            if entry is None or entry[0].stopped or entry[0]._closed:
                stale = entry
                entry = _kept[key] = (Context(devices=devices, backend=backend,
                                              timeout=timeout), threading.Lock())
                if stale is not None:
                    _retire(stale)
        kept, lock = entry
        if not lock.acquire(blocking=False):        # held by another solver: one of its own
            own = Context(devices=devices, backend=backend, timeout=timeout)
            return own, _once(own.shutdown)
        with _guard:        # still the kept one: another thread may have retired it meanwhile
            if _kept.get(key) is entry and not (kept.stopped or kept._closed):
                break
            retired = _kept.get(key) is not entry
        lock.release()
        if retired:         # its retirement found it leased (by this thread): shut it now
            _retire(entry)

    def release():
        try:
            if kept.stopped or kept._closed:    # a failure stopped it: the next call gets
                with _guard:                    # a fresh one
                    if _kept.get(key) is entry:
                        del _kept[key]
                kept.shutdown()
        finally:
            lock.release()
    return kept, _once(release)


def _nothing() -> None:
    """The release of a context the caller gave: it stays the caller's."""


def _once(release: Callable[[], None]) -> Callable[[], None]:
    """``release``, made idempotent (a solver's ``close`` may run twice)."""
    done = threading.Event()

    def once():
        if not done.is_set():
            done.set()
            release()
    return once


def _retire(entry) -> None:
    """Shut a replaced kept context down once no lease holds it (now, or at its release)."""
    ctx, lock = entry
    if lock.acquire(blocking=False):
        try:
            ctx.shutdown()
        finally:
            lock.release()


def shutdown_all() -> None:
    """Shut every kept context down (at exit; also for tests that count threads or change the
    device setup), each of them even when an earlier one fails to.

    Raises
    ------
    WaitTimeout
        The first context whose shutdown gave up (a device function that does not notice the
        stop: :meth:`Context.shutdown`), once every context has been shut down; the others'
        are logged.
    """
    with _guard:
        entries = list(_kept.values())
        _kept.clear()
    failures = []
    for ctx, _ in entries:      # a lease still held ends with the interpreter anyway
        try:
            ctx.shutdown()
        except Exception as exc:  # noqa: BLE001 - the next contexts are shut down all the same
            failures.append(exc)
    for exc in failures[1:]:
        log.warning("a kept context's shutdown: %s", exc)
    if failures:
        raise failures[0]


@atexit.register
def _shutdown_at_exit() -> None:
    """:func:`shutdown_all` as the interpreter exits: a device that did not stop is logged (its
    thread, a daemon, ends with the interpreter), not raised into a traceback nobody can catch."""
    try:
        shutdown_all()
    except Exception as exc:  # noqa: BLE001
        log.warning("at exit, a kept context's shutdown: %s", exc)
