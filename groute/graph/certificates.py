"""Linear-time checks that an answer is right, for graphs too big for a reference solver.

On a graph of billions of arcs the CPU references (:mod:`.reference`) take too long and the
plain-CuPy baselines need per-arc int64/float64 temporaries that do not fit beside the graph.
These checks read every arc once, in row-aligned chunks (uploaded to a GPU chunk by chunk when
``xp`` is CuPy), and hold only per-vertex arrays:

* :func:`check_bfs`: depth 0 at the source only; no arc improves a depth (``d[v] <= d[u] + 1``
  and nothing reachable is left unreached); every other reached vertex has an in-arc from one
  level up. Together: the depths are the BFS depths.
* :func:`check_sssp`: the same with weights (``d[v] <= d[u] + w`` and a tight in-arc for every
  reached vertex): the shortest-path distances, for positive weights.
* :func:`check_components`: both ends of every arc share a label, and the vertices labelled as
  the BFS source are exactly those its BFS reached. (Labels could still merge two components
  that the source's is not; the component count is returned to compare with another solver.)
* :func:`pagerank_residual`: the L1 distance between the ranks and one power-iteration step
  applied to them.

Each raises AssertionError saying what is wrong, naming a vertex, or returns a small dict.
"""
from __future__ import annotations

import numpy as np

from .arcs import arc_rows, row_chunks

#: arcs per chunk on the host and, times 64, on a GPU
CHUNK_ARCS = 1 << 22


def arc_chunks(graph, xp=np, *, weights: bool = False, chunk_arcs: int | None = None):
    """``(src, dst[, w])`` of every arc of a host graph on ``xp`` (int64 ends), in row-aligned
    chunks of about ``chunk_arcs`` arcs."""
    g = graph.to_host()
    step = int(chunk_arcs or (CHUNK_ARCS if xp is np else CHUNK_ARCS * 64))
    ip = g.indptr
    for r, e in row_chunks(ip, 0, g.num_vertices, step):
        a, b = int(ip[r]), int(ip[e])
        if a == b:
            continue
        src = arc_rows(xp.asarray(ip[r:e + 1] - a), b - a, xp=xp, dtype=np.int64) + r
        dst = xp.asarray(g.indices[a:b]).astype(xp.int64)
        if weights:
            yield src, dst, xp.asarray(g.weights[a:b])
        else:
            yield src, dst


def _fail(what, v):
    raise AssertionError(f"{what} (vertex {int(v)})")


def _first(xp, mask):
    return xp.flatnonzero(mask)[0]


def check_bfs(graph, source: int, depth, xp=np) -> dict:
    """Check BFS depths (int, -1 unreached) from ``source``; returns reached count and depth."""
    d = xp.asarray(np.asarray(depth)).astype(xp.int64)
    n = graph.num_vertices
    if d.shape[0] != n:
        raise AssertionError(f"{d.shape[0]} depths for {n} vertices")
    if int(d[source]) != 0:
        _fail(f"the source has depth {int(d[source])}", source)
    has_parent = xp.zeros(n, dtype=bool)
    has_parent[source] = True
    for src, dst in arc_chunks(graph, xp):
        du, dv = d[src], d[dst]
        bad = (du >= 0) & ((dv < 0) | (dv > du + 1))
        if bool(bad.any()):
            i = _first(xp, bad)
            _fail(f"arc {int(src[i])}->{int(dst[i])} improves depth {int(dv[i])} "
                  f"(tail depth {int(du[i])})", dst[i])
        has_parent[dst[(du >= 0) & (dv == du + 1)]] = True
    orphan = (d >= 0) & ~has_parent
    if bool(orphan.any()):
        _fail("a reached vertex has no in-arc from the level above", _first(xp, orphan))
    if bool(((d == 0) & (xp.arange(n) != source)).any()):
        _fail("depth 0 away from the source", _first(xp, (d == 0) & (xp.arange(n) != source)))
    return {"reached": int((d >= 0).sum()), "max_depth": int(d.max()) if n else -1}


def check_sssp(graph, source: int, dist, xp=np) -> dict:
    """Check shortest-path distances (float, inf unreached) from ``source`` on a graph with
    positive weights; returns reached count and the largest distance."""
    if graph.weights is None:
        raise ValueError("check_sssp: graph has no weights")
    d = xp.asarray(np.asarray(dist, dtype=np.float64))
    n = graph.num_vertices
    if d.shape[0] != n:
        raise AssertionError(f"{d.shape[0]} distances for {n} vertices")
    if float(d[source]) != 0.0:
        _fail(f"the source has distance {float(d[source])}", source)
    tight = xp.zeros(n, dtype=bool)
    tight[source] = True
    for src, dst, w in arc_chunks(graph, xp, weights=True):
        reached = xp.isfinite(d[src])              # arcs from unreached tails constrain nothing
        src, dst, w = src[reached], dst[reached], w[reached]
        dv = d[dst]
        via = d[src] + w.astype(xp.float64)
        slack = 1e-6 * xp.maximum(via, 1.0)
        bad = ~(dv <= via + slack)
        if bool(bad.any()):
            i = _first(xp, bad)
            _fail(f"arc {int(src[i])}->{int(dst[i])} improves distance {float(dv[i])} "
                  f"to {float(via[i])}", dst[i])
        tight[dst[xp.abs(dv - via) <= slack]] = True
    loose = xp.isfinite(d) & ~tight
    if bool(loose.any()):
        _fail("a reached vertex has no tight in-arc", _first(xp, loose))
    finite = d[xp.isfinite(d)]
    return {"reached": int(finite.shape[0]), "max_distance": float(finite.max())}


def check_components(graph, labels, source: int, depth, xp=np) -> dict:
    """Check component labels against every arc and against BFS depths from ``source``
    (``depth``: checked by :func:`check_bfs`); returns the component count."""
    lab = xp.asarray(np.asarray(labels)).astype(xp.int64)
    for src, dst in arc_chunks(graph, xp):
        bad = lab[src] != lab[dst]
        if bool(bad.any()):
            i = _first(xp, bad)
            _fail(f"arc {int(src[i])}->{int(dst[i])} joins labels {int(lab[src[i]])} and "
                  f"{int(lab[dst[i]])}", src[i])
    same = lab == lab[source]
    reached = xp.asarray(np.asarray(depth)) >= 0
    if bool((same != reached).any()):
        _fail("the source's component differs from the vertices its BFS reached",
              _first(xp, same != reached))
    return {"components": int(xp.unique(lab).shape[0]), "source_component": int(same.sum())}


def pagerank_residual(graph, ranks, damping: float = 0.85, xp=np) -> float:
    """L1 distance between ``ranks`` (summing to 1) and one step of the power iteration applied
    to them (the definition of :func:`.reference.pagerank`: dangling mass spread uniformly)."""
    g = graph.to_host()
    n = g.num_vertices
    x = xp.asarray(np.asarray(ranks, dtype=np.float64))
    outdeg = xp.asarray(np.diff(g.indptr)).astype(xp.float64)
    dangling = outdeg == 0
    share = xp.where(dangling, 0.0, x / xp.maximum(outdeg, 1.0))
    y = xp.zeros(n, dtype=xp.float64)
    for src, dst in arc_chunks(g, xp):
        y += xp.bincount(dst, weights=share[src], minlength=n)
    y = (1.0 - damping) / n + damping * (y + float(x[dangling].sum()) / n)
    return float(xp.abs(y - x).sum())
