"""Array helpers below the graph types: which array module (NumPy or CuPy) an array lives in,
the index dtype a vertex count needs, the dtype an arc position or count needs, where vertex
ids leave a graph's range, and order-preserving integer codes of weights for packed sort keys.
Shared by :mod:`.csr` and :mod:`.arcs`, which build on them.
"""
from __future__ import annotations

import numpy as np

#: indices are int32 while the vertex count fits, as CUDA kernels index with 32-bit ints.
INT32_LIMIT = 2**31 - 1


def index_dtype(num_vertices: int):
    """The dtype ``indices`` get for a graph of ``num_vertices`` vertices."""
    return np.int32 if num_vertices <= INT32_LIMIT else np.int64


#: the largest arc position or arc count an int32 may carry. Arc offsets (``indptr``) are
#: always int64; other arc-sized positions (a device's in-arc offsets, arc ids in edge
#: layouts) are int32 up to here and int64 past it. Tests lower it (monkeypatch) so that small
#: graphs run the int64 paths.
ARC_INT32_LIMIT = 2**31 - 1


def arc_dtype(num_arcs: int):
    """The dtype of arc positions, offsets and counts into ``num_arcs`` arcs: int32 while the
    positions ``0..num_arcs`` fit (:data:`ARC_INT32_LIMIT`), int64 beyond."""
    return np.int32 if int(num_arcs) <= ARC_INT32_LIMIT else np.int64


def array_module(a):
    """``numpy`` for host arrays, ``cupy`` for device arrays (imported only when one is seen)."""
    if isinstance(a, np.ndarray) or not hasattr(a, "__cuda_array_interface__"):
        return np
    import cupy
    return cupy


def vertex_outside(ids, n: int, what: str):
    """Where an array of vertex ids or positions (NumPy or CuPy, any shape) leaves ``0..n-1``:
    ``(flat position, value)`` of its least value below 0 or its greatest past ``n - 1``, None
    when every one is in range (or there are none). A TypeError for values that are not
    integers (a float would be cut, a bool read as 0 or 1), ``what`` naming them."""
    if not ids.size:
        return None
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{what} are integers, got an array of {ids.dtype}")
    low, high = int(ids.min()), int(ids.max())
    if low >= 0 and high < n:
        return None
    xp = array_module(ids)
    flat = ids.reshape(-1)
    return int(xp.argmin(flat) if low < 0 else xp.argmax(flat)), (low if low < 0 else high)


def weight_codes(w, xp):
    """Order-preserving non-negative uint64 codes of int32/float32 weights, and the inverse."""
    if w.dtype.kind == "f":
        u = w.astype(xp.float32).view(xp.uint32).astype(xp.uint64)
        neg = (u >> xp.uint64(31)) == 1
        codes = xp.where(neg, xp.uint64(0xFFFFFFFF) - u, u | xp.uint64(0x80000000))

        def decode(c):
            c = c.astype(xp.uint64)
            neg = (c >> xp.uint64(31)) == 0
            u = xp.where(neg, xp.uint64(0xFFFFFFFF) - c, c & xp.uint64(0x7FFFFFFF))
            return u.astype(xp.uint32).view(xp.float32)
        return codes, 32, decode
    lo = int(w.min()) if w.shape[0] else 0
    span = (int(w.max()) - lo) if w.shape[0] else 0
    codes = (w.astype(xp.int64) - lo).astype(xp.uint64)
    return codes, max(1, span.bit_length()), lambda c: (c.astype(xp.int64) + lo).astype(w.dtype)
