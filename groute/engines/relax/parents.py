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

The rows may be a range of the graph's (``first``, one process's of a distributed run, each
holding its vertices' out-arcs): each pass proposes, per head, the smallest candidate tail
among the rows it holds, and ``combine`` takes the elementwise minimum over every holder (an
allreduce across processes), so the answer is the whole graph's, the same in every process.
"""
from __future__ import annotations

import numpy as np

from .relaxation import value_add


def parents(indptr, indices, weights, dist, seeds, unreached, *, offered=value_add, xp=np,
            first: int = 0, combine=None):
    """Per vertex, the position of its parent in a shortest-path tree from ``seeds``; -1 for the
    seeds and for vertices the run did not reach (``dist == unreached``).

    ``indptr``/``indices``/``weights``: the graph's rows in the positions of ``dist`` (weights
    None: the scalar 1 is passed for every arc), or the rows of vertices ``first``,
    ``first + 1``, ... only (module docstring); ``dist``: the run's values as the kernels left
    them (int32 or float32), every vertex's; ``seeds``: the sources' positions;
    ``offered(d, w)``: the value an arc from a vertex of value ``d`` with weight ``w`` offers (a
    relaxation's ``numpy``; by default their sum, :func:`~.relaxation.value_add`);
    ``combine(proposals)``: the elementwise minimum of an int64 array over every holder of
    rows (None: these rows are all the graph's). Arrays of ``xp``; the answer too (int64).
    """
    n = int(dist.shape[0])
    out = xp.full(n, -1, dtype=xp.int64)
    m = int(indices.shape[0])
    if n == 0 or (m == 0 and combine is None):
        return out
    heads = indices.astype(xp.int64)
    tails = xp.searchsorted(indptr.astype(xp.int64), xp.arange(m, dtype=xp.int64),
                            side="right") - 1 + int(first)
    value = dist
    reached = dist != unreached
    is_seed = xp.zeros(n, dtype=bool)
    is_seed[seeds] = True
    cand = reached[tails] & reached[heads] & ~is_seed[heads]
    tail_value = value[tails]
    cand &= offered(tail_value, 1 if weights is None else weights) == value[heads]
    _take_first(out, _proposals(n, heads, tails, cand & (tail_value < value[heads]), xp),
                combine, xp)
    # arcs offering the tail's own value: parents that already hang on the tree, round by round
    level = cand & (tail_value == value[heads])
    if not _anywhere(bool(level.any()), combine):
        return out
    while True:
        settled = (out >= 0) | is_seed
        ready = level & settled[tails] & ~settled[heads]
        if not _take_first(out, _proposals(n, heads, tails, ready, xp), combine, xp):
            return out


#: a proposal array's "no candidate" (larger than any position)
NONE = np.iinfo(np.int64).max


def _proposals(n, heads, tails, mask, xp):
    """Per vertex ``v``, the first tail in arc order (the smallest: rows are sorted by tail)
    among the masked arcs into ``v``; :data:`NONE` where there is none."""
    proposed = xp.full(n, NONE, dtype=xp.int64)
    h, t = heads[mask], tails[mask]
    if h.shape[0]:
        order = xp.argsort(h, kind="stable") if xp is np else xp.lexsort(xp.stack([t, h]))
        h, t = h[order], t[order]
        first = xp.ones(h.shape[0], dtype=bool)
        first[1:] = h[1:] != h[:-1]
        proposed[h[first]] = t[first]
    return proposed


def _take_first(out, proposed, combine, xp) -> bool:
    """``out[v] =`` the proposal for ``v``, after ``combine`` (the minimum over every holder of
    rows); whether any vertex got one."""
    if combine is not None:
        proposed = combine(proposed)
    got = proposed != NONE
    if not bool(got.any()):
        return False
    xp.copyto(out, proposed, where=got)     # no count of the mask (a scan on CuPy)
    return True


def _anywhere(flag: bool, combine) -> bool:
    """Whether ``flag`` holds for any holder of rows (``combine``: their minimum)."""
    if combine is None:
        return flag
    return int(combine(np.array([0 if flag else 1], np.int64))[0]) == 0

