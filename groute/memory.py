"""How much GPU memory a solver needs for a graph, and a clear error before a graph that will not
fit is uploaded.

An estimate (the engines' and apps' own: the relaxation engines'
:func:`groute.engines.relax.memory.traversal_bytes`, the linear iteration engines'
:func:`groute.engines.iterate.memory.iteration_bytes`, the connected components engine's
:func:`groute.engines.components.memory.components_bytes`) is
the arrays the solver's default path keeps on its largest device for the solver's life, by
name, for a graph of ``n`` vertices and ``m`` arcs split over ``devices`` devices (balanced
parts: :func:`share` of each): the CSR rows it uploads (:func:`rows_bytes`) and its per-vertex
arrays, and where a set-up builds something in the device's memory (PageRank's in-arcs) the
arrays live at that set-up's peak; :func:`check_fits` raises :class:`GraphTooLarge` when the
larger of the two will not fit. The bench (``groute bench``) records the measured peak beside
the estimate, so the two can be compared (docs/PERFORMANCE.md, "Memory"). Arc offsets are 8
bytes (int64: they pass 2**31 on big graphs), vertex ids and per-vertex values 4 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceBytes:
    """Bytes one device needs, by array: ``parts``, what it keeps for the solver's life;
    ``setup``, every array live at the peak of its set-up, where the set-up builds something
    in the device's memory (empty where it only uploads). :attr:`total` is the larger sum,
    what must fit, and :attr:`peak_parts` the arrays of that moment."""

    parts: dict
    setup: dict = field(default_factory=dict)

    @property
    def peak_parts(self) -> dict:
        return self.setup if sum(self.setup.values()) > sum(self.parts.values()) else self.parts

    @property
    def total(self) -> int:
        return int(sum(self.peak_parts.values()))


class GraphTooLarge(MemoryError):
    """The graph's arrays will not fit a device's free memory (raised before allocating)."""


def share(x: int, k: int) -> int:
    """One device's part of ``x`` items over ``k`` devices (the largest of balanced parts)."""
    return -(-int(x) // max(int(k), 1))


def rows_bytes(n_local: int, m_local: int) -> dict:
    """The bytes of a device's CSR rows: ``n_local`` vertices and ``m_local`` arcs."""
    return {"indptr (int64 arc offsets)": 8 * (n_local + 1), "indices (int32)": 4 * m_local}


def free_device_bytes(device) -> int | None:
    """Bytes ``device`` can still give arrays: the driver's free memory plus the blocks CuPy's
    pool holds unused. None for devices whose memory is the host's (the CPU backend)."""
    if getattr(device, "backend", None) != "cuda":
        return None
    free, _ = device.memory_info()
    with device.use():
        cached = int(device.xp.get_default_memory_pool().free_bytes())
    return int(free) + cached


def free_gpu_bytes(gpu: int) -> int | None:
    """:func:`free_device_bytes` of CUDA GPU ``gpu`` before any device of a context exists
    (``devices="auto"`` decides before the context is made). None when CuPy cannot reach a
    GPU."""
    try:
        import cupy
        with cupy.cuda.Device(gpu):
            free, _ = cupy.cuda.runtime.memGetInfo()
            cached = int(cupy.get_default_memory_pool().free_bytes())
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no such GPU: nothing to tell
        return None
    return int(free) + cached


def check_fits(devices, need: DeviceBytes, what: str) -> None:
    """Raise :class:`GraphTooLarge` naming ``what`` (the graph) and the largest arrays when
    ``need`` (one device's share) exceeds what one of ``devices`` may use.

    Logical devices (:mod:`groute.device.logical`) that share a GPU share its free memory and
    its CuPy pool, both counted per GPU: each may use the GPU's free bytes divided by how many
    devices are on it (of ``devices``, or of the processes whose devices share it: a device's
    ``sharing``), so that together they fit rather than the last to allocate running out of
    memory half way through the upload."""
    sharing: dict = {}
    for device in devices:
        sharing[_gpu_of(device)] = sharing.get(_gpu_of(device), 0) + 1
    for device in devices:
        free = free_device_bytes(device)
        if free is None:
            continue
        shared_by = max(sharing[_gpu_of(device)], int(getattr(device, "sharing", 1)))
        allowed = free // shared_by
        if need.total <= allowed:
            continue
        biggest = sorted(need.peak_parts.items(), key=lambda kv: -kv[1])[:3]
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
