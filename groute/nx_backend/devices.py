"""The groute Context a backend call runs on: one per (device kind, device count), kept for the
next call and shut down when the interpreter exits.

A NetworkX program calls the backend many times, often on small graphs; starting devices (and,
on GPUs, peer access) for every call would cost more than many of the calls. Calls on one
context take turns (a lock): two solvers on the same devices at once would only slow each
other down, and a failure on one would stop the other. A context that a failure stopped is
shut down and replaced at the next call.
"""
from __future__ import annotations

import atexit
import threading
from contextlib import contextmanager

import networkx as nx

from groute.runtime.context import BACKENDS, Context, default_device_count, resolve_backend
from groute.graph.partition import METHODS

_contexts: dict[tuple[str, int], tuple[Context, threading.Lock]] = {}
_guard = threading.Lock()


def device_count(backend: str, devices: int | None, num_nodes: int) -> int:
    """The devices a call on a graph of ``num_nodes`` nodes uses: ``devices`` (None: every GPU
    on CUDA, one CPU virtual device), at most one per node and at least one."""
    if devices is None:
        devices = default_device_count(backend) if backend == "cuda" else 1
    return max(1, min(int(devices), int(num_nodes)))


def settings() -> tuple[str, int | None, str]:
    """``nx.config.backends.groute`` as ``(backend, devices, partition)``, checked (NetworkX
    stores what it is given; a bad value is a ValueError naming the setting)."""
    config = nx.config.backends.groute
    backend, devices, partition = config["backend"], config["devices"], config["partition"]
    if backend not in BACKENDS:
        raise ValueError(f"nx.config.backends.groute.backend must be one of "
                         f"{', '.join(BACKENDS)}; got {backend!r}")
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int)
                                or devices < 1):
        raise ValueError(f"nx.config.backends.groute.devices must be None or an int >= 1; "
                         f"got {devices!r}")
    if partition not in METHODS:
        raise ValueError(f"nx.config.backends.groute.partition must be one of "
                         f"{', '.join(METHODS)}; got {partition!r}")
    return backend, devices, partition


@contextmanager
def devices_for(num_nodes: int):
    """``(ctx, partition)`` for one call on a graph of ``num_nodes`` nodes, as
    ``nx.config.backends.groute`` says; the context is held for the call."""
    backend, devices, partition = settings()
    backend = resolve_backend(backend)
    key = (backend, device_count(backend, devices, num_nodes))
    with _guard:
        entry = _contexts.get(key)
        if entry is None or entry[0].stopped:
            entry = _contexts[key] = (Context(devices=key[1], backend=backend), threading.Lock())
    ctx, lock = entry
    with lock:
        try:
            yield ctx, partition
        finally:
            if ctx.stopped:         # a failure stopped it: the next call gets a fresh one
                with _guard:
                    if _contexts.get(key) is entry:
                        del _contexts[key]
                ctx.shutdown()


@atexit.register
def shutdown_all() -> None:
    """Shut every kept context down (at exit; also for tests that change the device setup)."""
    with _guard:
        entries = list(_contexts.values())
        _contexts.clear()
    for ctx, lock in entries:
        with lock:
            ctx.shutdown()
