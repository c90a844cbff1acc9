"""Parents of a finished relaxation run (BFS, SSSP, any :class:`~.relaxation.Relaxation`), from
its values: the shortest-path tree without touching the kernels.

A vertex ``v`` reached at value ``dist[v]`` has a parent ``u`` wherever the arc ``u -> v``
offers exactly that value (``offered(dist[u], w(u, v)) == dist[v]``: the relaxation's
``numpy``, so computed as the kernels computed the values: int sums saturating, float sums in
float32), so the arc that gave ``v`` its final value passes the test. Among the candidates the
smallest ``u`` is taken, which is the first candidate in arc order: the rows are sorted by
tail. One vectorised pass over the arcs, in NumPy or CuPy (``xp``), where the values are.

Arcs that offer a vertex its own tail's value (zero-weight arcs) make ``dist[u] == dist[v]``
candidates, and two of them could choose each other. So the pass takes only candidates with
``dist[u] < dist[v]`` (a chain of those strictly decreases, no cycle), and the vertices still
without a parent then take, round by round, such a parent that already has one or is a source.
"""
from __future__ import annotations

import numpy as np

from .relaxation import value_add


def parents(indptr, indices, weights, dist, seeds, unreached, *, offered=value_add, xp=np):
    """Per vertex, the position of its parent in a shortest-path tree from ``seeds``; -1 for the
    seeds and for vertices the run did not reach (``dist == unreached``).

    ``indptr``/``indices``/``weights``: the graph's rows in the positions of ``dist`` (weights
    None: the scalar 1 is passed for every arc); ``dist``: the run's values as the kernels left
    them (int32 or float32); ``seeds``: the sources' positions; ``offered(d, w)``: the value an
    arc from a vertex of value ``d`` with weight ``w`` offers (a relaxation's ``numpy``; by
    default their sum, :func:`~.relaxation.value_add`).
    Arrays of ``xp``; the answer too (int64).
    """
    n = int(dist.shape[0])
    out = xp.full(n, -1, dtype=xp.int64)
    m = int(indices.shape[0])
    if n == 0 or m == 0:
        return out
    heads = indices.astype(xp.int64)
    tails = xp.searchsorted(indptr.astype(xp.int64), xp.arange(m, dtype=xp.int64),
                            side="right") - 1
    value = dist
    reached = dist != unreached
    is_seed = xp.zeros(n, dtype=bool)
    is_seed[seeds] = True
    cand = reached[tails] & reached[heads] & ~is_seed[heads]
    tail_value = value[tails]
    cand &= offered(tail_value, 1 if weights is None else weights) == value[heads]
    _take_first(out, heads, tails, cand & (tail_value < value[heads]), xp)
    # arcs offering the tail's own value: parents that already hang on the tree, round by round
    level = cand & (tail_value == value[heads])
    while True:
        settled = (out >= 0) | is_seed
        ready = level & settled[tails] & ~settled[heads]
        if not bool(ready.any()):
            return out
        _take_first(out, heads, tails, ready, xp)


def _take_first(out, heads, tails, mask, xp):
    """``out[v] =`` the first tail in arc order among the masked arcs into ``v``."""
    h, t = heads[mask], tails[mask]
    if h.shape[0] == 0:
        return
    order = xp.argsort(h, kind="stable") if xp is np else xp.lexsort(xp.stack([t, h]))
    h, t = h[order], t[order]
    first = xp.ones(h.shape[0], dtype=bool)
    first[1:] = h[1:] != h[:-1]
    out[h[first]] = t[first]

