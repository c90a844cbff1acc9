"""The intersect operator's kernels on one CUDA device: launches of ``intersect.cu`` on the
device's compute stream (the caller holds it current), with the same arguments and results as
:mod:`groute.operators.intersect_cpu`."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .frontier import launch

KERNELS = Path(__file__).with_name("intersect.cu")


def _kernel(name):
    from groute.kernels import get_kernel
    return get_kernel(KERNELS, name)


def arc_rows(indptr, first: int, end: int):
    import cupy
    return cupy.searchsorted(indptr, cupy.arange(first, end, dtype=np.int64), side="right") - 1


def triangles(device, indptr, indices, values, first: int, end: int, n: int):
    import cupy
    acc = cupy.zeros(n, np.uint64 if values is None else np.float64)
    if end > first:
        if values is None:
            args = (indptr, indices, np.int64(first), np.int64(end), np.int64(n), acc)
            launch(device, _kernel("triangle_counts_k"), end - first, args)
        else:
            args = (indptr, indices, values, np.int64(first), np.int64(end), np.int64(n), acc)
            launch(device, _kernel("triangle_sums_k"), end - first, args)
    return acc if values is not None else acc.astype(np.int64)


def common(device, indptr, indices, a, b, exclude_ends: bool):
    import cupy
    a, b = cupy.asarray(a, np.int32), cupy.asarray(b, np.int32)
    out = cupy.zeros(a.shape[0], np.int64)
    if a.shape[0]:
        launch(device, _kernel("common_k"), a.shape[0],
               (indptr, indices, a, b, np.int64(a.shape[0]), np.int32(bool(exclude_ends)), out))
    return out


def reversed_arcs(device, indptr, indices, first: int, end: int, n: int):
    import cupy
    flags = cupy.zeros(max(end - first, 0), np.uint8)
    if end > first:
        launch(device, _kernel("reversed_k"), end - first,
               (indptr, indices, np.int64(first), np.int64(end), np.int64(n), flags))
    return flags
