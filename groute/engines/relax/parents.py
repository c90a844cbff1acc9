"""Parents of a finished BFS or SSSP run, from its values: the shortest-path tree without
touching the traversal kernels.

A vertex ``v`` reached at value ``dist[v]`` has a parent ``u`` wherever ``dist[u] + w(u, v) ==
dist[v]`` (``w = 1`` for BFS), computed as the kernels computed the values (int sums exactly,
float sums in float32), so the arc that gave ``v`` its final value passes the test. Among the
candidates the smallest ``u`` is taken, which is the first candidate in arc order: the rows are
sorted by tail. One vectorised pass over the arcs, in NumPy or CuPy (``xp``), where the values
are.

Zero-weight arcs make ``dist[u] == dist[v]`` candidates, and two of them could choose each
other. So the pass takes only candidates with ``dist[u] < dist[v]`` (a chain of those strictly
decreases, no cycle), and the vertices still without a parent then take, round by round, a
zero-weight parent that already has one or is a source.
"""
from __future__ import annotations

import numpy as np


def parents(indptr, indices, weights, dist, seeds, unreached, *, xp=np):
    """Per vertex, the position of its parent in a shortest-path tree from ``seeds``; -1 for the
    seeds and for vertices the run did not reach (``dist == unreached``).

    ``indptr``/``indices``/``weights``: the graph's rows in the positions of ``dist`` (weights
    None: one per arc); ``dist``: the run's values as the kernels left them (int32 or float32);
    ``seeds``: the sources' positions. Arrays of ``xp``; the answer too (int64).
    """
    n = int(dist.shape[0])
    out = xp.full(n, -1, dtype=xp.int64)
    m = int(indices.shape[0])
    if n == 0 or m == 0:
        return out
    heads = indices.astype(xp.int64)
    tails = xp.searchsorted(indptr.astype(xp.int64), xp.arange(m, dtype=xp.int64),
                            side="right") - 1
    float_values = dist.dtype.kind == "f"
    value = dist if float_values else dist.astype(xp.int64)
    if weights is None:
        step = 1
    else:
        step = weights.astype(xp.float32 if float_values else xp.int64)
    reached = dist != unreached
    is_seed = xp.zeros(n, dtype=bool)
    is_seed[seeds] = True
    cand = reached[tails] & reached[heads] & ~is_seed[heads]
    tail_value = value[tails]
    cand &= (tail_value + step) == value[heads]
    _take_first(out, heads, tails, cand & (tail_value < value[heads]), xp)
    # zero-weight arcs: parents that already hang on the tree, round by round
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


def path(parent, target: int) -> list[int]:
    """The positions from a source to ``target`` along ``parent`` (host array of
    :func:`parents`), source first; ``[target]`` for a source. The caller checks that
    ``target`` was reached."""
    steps = [int(target)]
    while parent[steps[-1]] >= 0:
        steps.append(int(parent[steps[-1]]))
        if len(steps) > parent.shape[0]:
            raise RuntimeError("the parents form a cycle; they are not from a finished run")
    return steps[::-1]
