"""The intersect operator's kernels on one CPU virtual device: NumPy, vectorised over arcs.

The same results as the CUDA kernels (``intersect.cu``), found differently: every row is
sorted, so the arcs of a graph are sorted by the key ``row * n + target``, and an element ``w``
of one row is in row ``v`` exactly when ``v * n + w`` is one of those keys (a ``searchsorted``
over them). Each call walks chunks of at most :data:`CHUNK` probes, so its temporaries stay
bounded whatever the graph. The kernels take the device first, as the CUDA launches
(:mod:`.intersect_cuda`) need it, so :mod:`.intersect` calls either alike.
"""
from __future__ import annotations

import numpy as np

#: probes (one element of one row looked up in another) per vectorised step
CHUNK = 1 << 20


def arc_rows(indptr, first: int, end: int) -> np.ndarray:
    """The row of every arc in ``[first, end)``."""
    return np.searchsorted(indptr, np.arange(first, end, dtype=np.int64), side="right") - 1


def _keys(indptr, indices, n: int) -> np.ndarray:
    """Every arc's ``row * n + target`` (sorted, as the rows are)."""
    return arc_rows(indptr, 0, int(indptr[-1])) * n + indices


def _found(keys, probe):
    """Where each of ``probe`` sits in ``keys`` and whether it is there."""
    pos = np.searchsorted(keys, probe)
    pos = np.minimum(pos, keys.shape[0] - 1)
    return pos, keys[pos] == probe if keys.shape[0] else np.zeros(probe.shape, bool)


def _chunks(work):
    """``[lo, hi)`` ranges of items whose summed ``work`` stays near :data:`CHUNK`."""
    ends = np.cumsum(work)
    lo = 0
    while lo < work.shape[0]:
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + CHUNK, side="right")))
        yield lo, hi
        lo = hi


def _expand(indptr, rows):
    """For items whose rows are ``rows``: the item of every element of those rows, and the
    element's arc id."""
    deg = indptr[rows + 1] - indptr[rows]
    item = np.repeat(np.arange(rows.shape[0], dtype=np.int64), deg)
    starts = np.cumsum(deg) - deg
    arc = indptr[rows][item] + np.arange(item.shape[0], dtype=np.int64) - starts[item]
    return item, arc


def triangles(device, indptr, indices, values, first: int, end: int, n: int) -> np.ndarray:
    """Per vertex, over the oriented arcs ``[first, end)`` of rows ``indptr``/``indices``: each
    ``w`` common to the rows of an arc's ``u`` and ``v`` adds 1 (``values`` None) or the product
    of the three arcs' values to ``u``, ``v`` and ``w``."""
    acc = np.zeros(n, np.int64 if values is None else np.float64)
    if end <= first:
        return acc
    keys = _keys(indptr, indices, n)
    arcs = np.arange(first, end, dtype=np.int64)
    us = arc_rows(indptr, first, end)
    for lo, hi in _chunks(indptr[us + 1] - indptr[us]):
        u, e = us[lo:hi], arcs[lo:hi]
        item, i = _expand(indptr, u)
        w = indices[i]
        j, hit = _found(keys, indices[e][item] * n + w)
        item, i, j, w = item[hit], i[hit], j[hit], w[hit]
        x = None if values is None else values[e[item]] * values[i] * values[j]
        for ends in (u[item], indices[e[item]], w):
            acc += np.bincount(ends, weights=x, minlength=n).astype(acc.dtype, copy=False)
    return acc


def common(device, indptr, indices, a, b, exclude_ends: bool) -> np.ndarray:
    """For each pair ``(a[i], b[i])``, how many targets their rows share (with
    ``exclude_ends``, not counting ``a[i]`` or ``b[i]`` themselves)."""
    n = indptr.shape[0] - 1
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    out = np.zeros(a.shape[0], np.int64)
    if not a.shape[0]:
        return out
    keys = _keys(indptr, indices, n)
    deg = indptr[1:] - indptr[:-1]
    a_short = deg[a] <= deg[b]
    short, long_ = np.where(a_short, a, b), np.where(a_short, b, a)
    for lo, hi in _chunks(deg[short]):
        item, i = _expand(indptr, short[lo:hi])
        w = indices[i]
        _, hit = _found(keys, long_[lo:hi][item] * n + w)
        if exclude_ends:
            hit &= (w != a[lo:hi][item]) & (w != b[lo:hi][item])
        out[lo:hi] = np.bincount(item[hit], minlength=hi - lo)
    return out


def reversed_arcs(device, indptr, indices, first: int, end: int, n: int) -> np.ndarray:
    """For arcs ``[first, end)``: 1 where the reverse arc is an arc too, else 0 (uint8)."""
    if end <= first:
        return np.zeros(0, np.uint8)
    keys = _keys(indptr, indices, n)
    _, hit = _found(keys, indices[first:end].astype(np.int64) * n + arc_rows(indptr, first, end))
    return hit.astype(np.uint8)
