"""The groute Context a backend call runs on: the kept context (:mod:`groute.runtime.kept`)
for the device kind and count ``nx.config.backends.groute`` asks for, leased for the call.

A NetworkX program calls the backend many times, often on small graphs; starting devices (and,
on GPUs, peer access) for every call would cost more than many of the calls.
"""
from __future__ import annotations

from contextlib import contextmanager

import networkx as nx

from groute.runtime.context import BACKENDS, default_device_count, resolve_backend
from groute.runtime.kept import lease
from groute.graph.partition import METHODS


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
    ``nx.config.backends.groute`` says; the context is leased for the call."""
    backend, devices, partition = settings()
    backend = resolve_backend(backend)
    ctx, release = lease(devices=device_count(backend, devices, num_nodes), backend=backend)
    try:
        yield ctx, partition
    finally:
        release()
