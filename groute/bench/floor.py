"""The hardware floor: the fewest bytes an app must move on one device, and how fast they can move.

The model is one pass: an app has to read the graph's CSR once (row offsets, column indices and,
for SSSP, weights) and write its answer once (a 4-byte depth, distance, rank or label per vertex,
what the kernels keep on the device). Real algorithms move more (PageRank iterates, traversals
read neighbour state), so ``time / floor`` is always >= 1 and says how far from streaming the
graph once at full speed an app is. The speed is a large device-to-device copy measured in the
same run on the same device (read + write bytes over time), not a datasheet number.
"""
from __future__ import annotations

import time

import numpy as np

#: Bytes per vertex of an app's answer as kept on the device.
ANSWER_BYTES = 4

#: Copy sizes for the bandwidth measurement: big enough to leave the caches, small enough to fit.
GPU_COPY_BYTES = 1 << 30
CPU_COPY_BYTES = 1 << 26


def floor_bytes(app: str, graph) -> int:
    """The fewest bytes ``app`` must read and write on one device: its bench spec's ``floor``
    hook where it has one (``sources`` apps get their sample size), else the module docstring's
    one pass (weights read when the app is ``weighted``)."""
    from .specs import load, spec_for
    from .suite import APPS
    spec = spec_for(app)
    if spec.floor is not None:
        fn = load(spec.floor)
        return int(fn(graph, spec.sources) if spec.sources else fn(graph))
    indptr = np.asarray(graph.indptr)
    indices = np.asarray(graph.indices)
    nbytes = indptr.nbytes + indices.nbytes + ANSWER_BYTES * int(graph.num_vertices)
    if APPS[app].weighted:
        weights = getattr(graph, "weights", None)
        nbytes += np.asarray(weights).nbytes if weights is not None else 4 * int(graph.num_edges)
    return int(nbytes)


def measure_copy_bandwidth(device, nbytes: int | None = None, repeat: int = 5) -> dict:
    """Device-to-device copy speed of ``device`` in bytes/s, counting bytes read plus written.

    CUDA: a copy within the device's memory, timed with CUDA events, median of ``repeat`` after a
    warm-up. CPU virtual devices: a NumPy copy timed with ``perf_counter``.
    """
    if device.backend == "cuda":
        return _cuda_copy_bandwidth(device, nbytes, repeat)
    return _cpu_copy_bandwidth(nbytes or CPU_COPY_BYTES, repeat)


def _cpu_copy_bandwidth(nbytes: int, repeat: int) -> dict:
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    seconds = float(np.median(times))
    return {"bytes_per_s": 2 * src.nbytes / seconds, "copy_bytes": int(src.nbytes),
            "seconds": seconds, "method": "numpy copyto, perf_counter"}


def _cuda_copy_bandwidth(device, nbytes, repeat) -> dict:
    import cupy
    free, _ = device.memory_info()
    nbytes = int(min(nbytes or GPU_COPY_BYTES, free // 4))
    with device.use():
        src = cupy.ones(nbytes // 8, dtype=cupy.float64)
        dst = cupy.empty_like(src)
        stream = cupy.cuda.Stream(non_blocking=True)
        stream.wait_event(cupy.cuda.get_current_stream().record())  # the fill above first
        with stream:
            dst[...] = src
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            times = []
            for _ in range(repeat):
                start.record(stream)
                dst[...] = src
                stop.record(stream)
                stop.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        del src, dst
        cupy.get_default_memory_pool().free_all_blocks()
    seconds = float(np.median(times))
    return {"bytes_per_s": 2 * (nbytes // 8) * 8 / seconds, "copy_bytes": int(nbytes // 8 * 8),
            "seconds": seconds, "method": "cupy device copy, CUDA events"}
