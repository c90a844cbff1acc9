"""Plain-CuPy BFS and SSSP: the code a user would write without groute (benchmark peers).

* :func:`cupy_bfs`: level-synchronous frontier BFS. Each level gathers the frontier's arcs
  (degrees, ``cumsum``, ``searchsorted`` to find each arc's source), keeps unvisited targets,
  ``unique`` makes the next frontier. One host round trip per level (the frontier size).
* :func:`cupy_sssp`: frontier Bellman-Ford. Each round relaxes the arcs of the vertices whose
  distance changed, with ``cupyx.scatter_min`` into a copy of the distances; the next frontier is
  where the distance dropped.

Both take a graph whose arrays are on the current GPU (``graph.to_device``) or NumPy arrays
(uploaded each call), and return CuPy arrays in the graph's vertex ids: int32 depths with -1
unreachable / float64 distances with inf unreachable, the same conventions as the apps.
"""
from __future__ import annotations


def _arrays(graph, weights=False):
    import cupy
    indptr = cupy.asarray(graph.indptr).astype(cupy.int64, copy=False)
    indices = cupy.asarray(graph.indices)
    if not weights:
        return indptr, indices
    w = graph.weights
    w = cupy.ones(indices.shape[0], cupy.float64) if w is None else cupy.asarray(w).astype(cupy.float64)
    return indptr, indices, w


def _frontier_arcs(indptr, frontier):
    """Arc ids of every out-arc of ``frontier`` and, per arc, its position in the frontier."""
    import cupy
    starts = indptr[frontier]
    deg = indptr[frontier + 1] - starts
    ends = cupy.cumsum(deg)
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return None, None
    arc = cupy.arange(total, dtype=cupy.int64)
    pos = cupy.searchsorted(ends, arc, side="right")
    return starts[pos] + arc - (ends[pos] - deg[pos]), pos


def cupy_bfs(graph, source):
    """Depths from ``source`` (int32, -1 unreachable)."""
    import cupy
    indptr, indices = _arrays(graph)
    n = int(graph.num_vertices)
    depth = cupy.full(n, -1, dtype=cupy.int32)
    depth[source] = 0
    frontier = cupy.asarray([source], dtype=cupy.int64)
    level = 0
    while frontier.size:
        arcs, _ = _frontier_arcs(indptr, frontier)
        if arcs is None:
            break
        targets = indices[arcs]
        targets = cupy.unique(targets[depth[targets] < 0]).astype(cupy.int64)
        level += 1
        depth[targets] = level
        frontier = targets
    return depth


def cupy_sssp(graph, source):
    """Distances from ``source`` (float64, inf unreachable)."""
    import cupy
    import cupyx
    indptr, indices, w = _arrays(graph, weights=True)
    n = int(graph.num_vertices)
    dist = cupy.full(n, cupy.inf, dtype=cupy.float64)
    dist[source] = 0.0
    frontier = cupy.asarray([source], dtype=cupy.int64)
    while frontier.size:
        arcs, pos = _frontier_arcs(indptr, frontier)
        if arcs is None:
            break
        new = dist.copy()
        cupyx.scatter_min(new, indices[arcs], dist[frontier][pos] + w[arcs])
        frontier = cupy.flatnonzero(new < dist)
        dist = new
    return dist
