"""How much GPU memory each app needs for a graph, and a clear error before a graph that will not
fit is uploaded.

Each estimate is the arrays the app's default path keeps on its largest device for the solver's
life, by name, for a graph of ``n`` vertices and ``m`` arcs split over ``devices`` devices
(balanced parts: ``ceil(n / devices)`` vertices and ``ceil(m / devices)`` arcs each): the
CSR rows it uploads and its per-vertex arrays. Set-up temporaries that fall back to the host
when a device is short (PageRank's in-arc sort on the GPU) are left out; the bench
(``groute bench``) records the measured peak beside the estimate, so the two can be compared.
Arc offsets are 8 bytes (int64: they pass 2**31 on big graphs), vertex ids and per-vertex values
4 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from groute.graph.arrays import arc_dtype


@dataclass(frozen=True)
class DeviceBytes:
    """Bytes one device needs, by array (``parts``), and their sum (:attr:`total`)."""

    parts: dict

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))


class GraphTooLarge(MemoryError):
    """The graph's arrays will not fit a device's free memory (raised before allocating)."""


def _share(x: int, k: int) -> int:
    return -(-int(x) // max(int(k), 1))


def _rows(n_local: int, m_local: int) -> dict:
    return {"indptr (int64 arc offsets)": 8 * (n_local + 1), "indices (int32)": 4 * m_local}


def traversal_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                    devices: int = 1) -> DeviceBytes:
    """BFS / SSSP (:mod:`groute.apps.traversal_cuda`): the rows, weights for SSSP, the values,
    two near queues, the hub slots, the near marks and two far queues of ``n_local`` each; on
    several devices the best value sent per vertex, the outboxes and (symmetric, unweighted)
    every device's frontier flags."""
    k = max(int(devices), 1)
    nl, ml = _share(n, k), _share(m, k)
    parts = _rows(nl, ml)
    if weighted:
        parts["weights (4 bytes)"] = 4 * ml
    parts.update({"values": 4 * nl, "near queues (2)": 8 * nl, "hub slots": 12 * nl,
                  "near marks": 4 * nl, "far queues (2, int64)": 16 * max(nl, 1024)})
    if k > 1:
        parts["best value sent"] = 4 * int(n)
        parts["outboxes (int64)"] = 8 * k * nl
        if not directed and not weighted:
            parts["frontier flags"] = int(n)
    return DeviceBytes(parts)


def pagerank_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                   devices: int = 1) -> DeviceBytes:
    """PageRank's BSP pull (:mod:`groute.apps.pr_device`): the in-arc rows (offsets int64 once
    a device's in-arcs pass 2**31, else int32), 1/outdeg and the ranks of the owned vertices,
    and two contribution vectors over all vertices (float32)."""
    k = max(int(devices), 1)
    nl, ml = _share(n, k), _share(m, k)
    offset = np.dtype(arc_dtype(ml)).itemsize
    parts = {"in-arc offsets": offset * (nl + 1), "in-arc sources (int32)": 4 * ml,
             "1/outdeg": 4 * nl, "ranks": 4 * nl, "contributions (2)": 8 * int(n)}
    return DeviceBytes(parts)


def cc_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
             devices: int = 1) -> DeviceBytes:
    """CC's Afforest in place (:mod:`groute.apps.cc_device`): each device's rows of the
    symmetric CSR (a directed graph's arcs both ways: up to ``2 m``) and a parent per vertex of
    the whole graph; the first device also the late-arc bitmap."""
    k = max(int(devices), 1)
    arcs = 2 * int(m) if directed else int(m)
    nl, ml = _share(n, k), _share(arcs, k)
    parts = _rows(nl, ml)
    parts.update({"parents": 4 * int(n), "late-arc bitmap": 4 * _share(n, 32)})
    return DeviceBytes(parts)


def free_device_bytes(device) -> int | None:
    """Bytes ``device`` can still give arrays: the driver's free memory plus the blocks CuPy's
    pool holds unused. None for devices whose memory is the host's (the CPU backend)."""
    if getattr(device, "backend", None) != "cuda":
        return None
    free, _ = device.memory_info()
    with device.use():
        cached = int(device.xp.get_default_memory_pool().free_bytes())
    return int(free) + cached


def check_fits(devices, need: DeviceBytes, what: str) -> None:
    """Raise :class:`GraphTooLarge` naming ``what`` (the graph) and the largest arrays when
    ``need`` (one device's share) exceeds what one of ``devices`` may use.

    Logical devices (:mod:`groute.device.logical`) that share a GPU share its free memory and
    its CuPy pool, both counted per GPU: each may use the GPU's free bytes divided by how many
    of ``devices`` are on it, so that together they fit rather than the last to allocate
    running out of memory half way through the upload."""
    sharing: dict = {}
    for device in devices:
        sharing[_gpu_of(device)] = sharing.get(_gpu_of(device), 0) + 1
    for device in devices:
        free = free_device_bytes(device)
        if free is None:
            continue
        shared_by = sharing[_gpu_of(device)]
        allowed = free // shared_by
        if need.total <= allowed:
            continue
        biggest = sorted(need.parts.items(), key=lambda kv: -kv[1])[:3]
        listed = ", ".join(f"{name} {_gib(b)}" for name, b in biggest)
        name = getattr(device, "name", "a device")
        if shared_by > 1:
            has = (f"{name} is one of {shared_by} logical devices sharing GPU {device.gpu}, "
                   f"which has {_gib(free)} free ({_gib(allowed)} each)")
            remedy = "use fewer logical devices per GPU, more GPUs or a smaller graph"
        else:
            has = f"{name} has {_gib(free)} free"
            remedy = "use more devices or a smaller graph"
        raise GraphTooLarge(
            f"{what} needs about {_gib(need.total)} on each of {len(devices)} device(s) "
            f"({listed}, ...) but {has}: {remedy}")


def _gpu_of(device):
    """What ``device``'s memory belongs to: its GPU's ordinal on CUDA (shared by the logical
    devices placed there), else the device itself."""
    gpu = getattr(device, "gpu", None)
    return ("gpu", int(gpu)) if gpu is not None else ("device", id(device))


def _gib(b) -> str:
    return f"{b / 2**30:.2f} GiB"
