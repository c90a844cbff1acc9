"""The groute Context a backend call runs on: the kept context (:mod:`groute.runtime.kept`)
for the device kind and count ``nx.config.backends.groute`` asks for, leased for the call.

A NetworkX program calls the backend many times, often on small graphs; starting devices (and,
on GPUs, peer access) for every call would cost more than many of the calls.
:func:`settings` reads and checks the whole of ``nx.config.backends.groute``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import networkx as nx

from groute.engines.device_rule import choose_devices
from groute.graph.partition import METHODS
from groute.runtime.context import BACKENDS, resolve_backend
from groute.runtime.kept import lease


def device_count(backend: str, devices: int | None, graph, engine: str) -> int:
    """The devices a call of an ``engine``-family algorithm (a key of
    :data:`groute.engines.device_rule.BREAK_EVEN_ARCS`) on ``graph`` uses: ``devices`` (None:
    as the algorithms' own ``devices="auto"`` decides), at most one per node and at least
    one."""
    count = choose_devices(devices, backend=backend, engine=engine,
                           num_vertices=graph.num_vertices, num_arcs=graph.num_edges,
                           directed=bool(graph.directed)).devices
    return max(1, min(int(count), int(graph.num_vertices)))


class Settings(NamedTuple):
    """``nx.config.backends.groute``, checked (:func:`settings`)."""

    backend: str
    devices: int | None
    partition: str
    fallback_to_nx: bool


def settings() -> Settings:
    """``nx.config.backends.groute``, checked (NetworkX stores what it is given; a bad value
    is a ValueError naming the setting)."""
    config = nx.config.backends.groute
    backend, devices, partition = config["backend"], config["devices"], config["partition"]
    fallback_to_nx = config["fallback_to_nx"]
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
    if not isinstance(fallback_to_nx, bool):
        raise ValueError(f"nx.config.backends.groute.fallback_to_nx must be True or False; "
                         f"got {fallback_to_nx!r}")
    return Settings(backend, devices, partition, fallback_to_nx)


@contextmanager
def devices_for(graph, engine: str):
    """``(ctx, partition)`` for one call of an ``engine``-family algorithm on ``graph`` (the
    call's CSR graph), as ``nx.config.backends.groute`` says; the context is leased for the
    call."""
    chosen = settings()
    backend = resolve_backend(chosen.backend)
    ctx, release = lease(devices=device_count(backend, chosen.devices, graph, engine),
                         backend=backend)
    try:
        yield ctx, chosen.partition
    finally:
        release()
