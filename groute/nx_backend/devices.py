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

from groute.engines.device_rule import choose_devices
from groute.graph.partition import METHODS
from groute.runtime.context import BACKENDS, Context, resolve_backend

_contexts: dict[tuple[str, int], tuple[Context, threading.Lock]] = {}
_guard = threading.Lock()


def device_count(backend: str, devices: int | None, graph, engine: str) -> int:
    """The devices a call of an ``engine``-family algorithm (a key of
    :data:`groute.engines.device_rule.BREAK_EVEN_ARCS`) on ``graph`` uses: ``devices`` (None:
    as the algorithms' own ``devices="auto"`` decides), at most one per node and at least
    one."""
    count = choose_devices(devices, backend=backend, engine=engine,
                           num_vertices=graph.num_vertices, num_arcs=graph.num_edges,
                           directed=bool(graph.directed)).devices
    return max(1, min(int(count), int(graph.num_vertices)))


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
def devices_for(graph, engine: str):
    """``(ctx, partition)`` for one call of an ``engine``-family algorithm on ``graph`` (the
    call's CSR graph), as ``nx.config.backends.groute`` says; the context is held for the
    call."""
    backend, devices, partition = settings()
    backend = resolve_backend(backend)
    key = (backend, device_count(backend, devices, graph, engine))
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
