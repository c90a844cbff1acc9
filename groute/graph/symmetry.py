"""Whether a CSR is symmetric, cheaply enough to check every undirected graph on construction.

``directed=False`` promises that every arc u->v is stored with v->u of the same weight; the
undirected algorithms (components, the pull directions, the NetworkX conversions) read one
direction for the other. An edge list with each undirected edge once breaks that promise and
gives wrong answers without an error, so :meth:`CSRGraph.validate` checks it.

The check is one linear pass with no sort: the arc set equals its reverse exactly when the
multisets {(u, v, w)} and {(v, u, w)} are equal, and it compares a 64-bit sum of a hash of
each (the SplitMix64 finaliser of the packed pair, the weight's bits mixed into that and
finalised again). Equal sets always give equal sums; unequal ones give equal sums only by a
collision of the hashes, a chance of about 2**-64. Only
when the sums differ does a second pass (a sort of the arcs and of their reverses) find an arc
to name in the error.
"""
from __future__ import annotations

import numpy as np

from .arcs import arc_rows, row_chunks
from .arrays import array_module
from .rng import mix64

#: arcs hashed per step (bounded temporaries on a billion-arc graph)
CHUNK_ARCS = 1 << 22

_WEIGHT_MIX = 0x9E3779B97F4A7C15


def _bits(weights, xp):
    """A weight's bit pattern as uint64 (the same for both directions of a symmetric edge)."""
    w = xp.ascontiguousarray(weights)
    if w.dtype.kind == "f":
        w = w + w.dtype.type(0)         # -0.0 becomes 0.0: one weight, one bit pattern
    width = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[w.dtype.itemsize]
    return w.view(width).astype(xp.uint64)


def _pair_sums(indptr, indices, weights, n: int, xp):
    """``(forward, reverse)``: the wrapping uint64 sums of the hashes of every arc's
    ``(u, v, w)`` and of its reverse ``(v, u, w)``."""
    host_ip = indptr if xp is np else indptr.get()
    forward = reverse = 0
    nn = xp.uint64(max(n, 1))
    for r, e in row_chunks(host_ip, 0, int(host_ip.shape[0]) - 1, CHUNK_ARCS):
        a, b = int(host_ip[r]), int(host_ip[e])
        if a == b:
            continue
        src = arc_rows(indptr[r:e + 1] - a, b - a, xp=xp, dtype=np.int64).astype(xp.uint64)
        src += xp.uint64(r)
        dst = indices[a:b].astype(xp.uint64)
        salt = xp.uint64(0) if weights is None else \
            _bits(weights[a:b], xp) * xp.uint64(_WEIGHT_MIX)
        with np.errstate(over="ignore"):
            forward += int(mix64(mix64(src * nn + dst, xp) ^ salt, xp).sum(dtype=xp.uint64))
            reverse += int(mix64(mix64(dst * nn + src, xp) ^ salt, xp).sum(dtype=xp.uint64))
    return forward % 2**64, reverse % 2**64


def _first_unmatched(indptr, indices, weights, n: int, xp):
    """An arc ``(u, v)`` with fewer arcs ``v -> u`` of its weight than arcs ``u -> v``, found by
    ordering the arcs and their reverses by (key, weight) and comparing; None where the two
    agree. The arcs' keys ``u * n + v`` are in order already (rows are sorted): only their
    repeats need the weights ordered, and only the reverses need a sort."""
    nn = np.uint64(max(n, 1))
    ip = np.asarray(indptr if xp is np else indptr.get())
    ix = np.asarray(indices if xp is np else indices.get()).astype(np.uint64)
    src = arc_rows(ip, int(ip[-1]), xp=np, dtype=np.int64).astype(np.uint64)
    forward, reverse = src * nn + ix, ix * nn + src
    del src
    if weights is None:
        bits = np.zeros(ix.shape[0], dtype=np.uint64)
        f, r = np.arange(ix.shape[0]), np.argsort(reverse)
    else:
        bits = _bits(np.asarray(weights if xp is np else weights.get()), np)
        repeats = bool((forward[1:] == forward[:-1]).any())
        f = np.lexsort((bits, forward)) if repeats else np.arange(ix.shape[0])
        r = np.lexsort((bits, reverse))
    differ = np.flatnonzero((forward[f] != reverse[r]) | (bits[f] != bits[r]))
    if differ.shape[0] == 0:
        return None
    i = int(differ[0])
    if (forward[f[i]], bits[f[i]]) < (reverse[r[i]], bits[r[i]]):
        key = int(forward[f[i]])             # an arc with too few reverses
        return key // int(nn), key % int(nn)
    key = int(reverse[r[i]])                 # the reverse of an arc that is missing
    return key % int(nn), key // int(nn)


def unmatched_arc(indptr, indices, weights=None, num_vertices: int | None = None):
    """An arc whose reverse (with the same weight) is missing, or None when the CSR is
    symmetric.

    Parameters
    ----------
    indptr, indices : array
        A CSR with sorted rows (NumPy or CuPy).
    weights : array, optional
        Aligned with ``indices``; a reverse must carry the same weight.
    num_vertices : int, optional
        Default ``len(indptr) - 1``.

    Returns
    -------
    tuple of int or None
        ``(u, v)``, positions of an arc ``u -> v`` with no ``v -> u`` of its weight.
    """
    xp = array_module(indices)
    n = int(indptr.shape[0]) - 1 if num_vertices is None else int(num_vertices)
    forward, reverse = _pair_sums(indptr, indices, weights, n, xp)
    if forward == reverse:
        return None
    return _first_unmatched(indptr, indices, weights, n, xp)
