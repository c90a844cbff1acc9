"""Plain-CuPy BFS, SSSP, PageRank and CC: the code a user would write on one GPU without groute.

``groute bench`` runs them as the ``cupy`` peer and, for graphs too big for the CPU references, as
the reference (``--reference gpu``): they share nothing with groute's kernels.

* :func:`cupy_bfs`: level-synchronous frontier BFS. Each level gathers the frontier's arcs
  (degrees, ``cumsum``, ``searchsorted`` to find each arc's source), keeps unvisited targets,
  ``unique`` makes the next frontier. One host round trip per level (the frontier size).
* :func:`cupy_sssp`: frontier Bellman-Ford. Each round relaxes the arcs of the vertices whose
  distance changed, with ``cupyx.scatter_min`` into a copy of the distances; the next frontier is
  where the distance dropped.
* :func:`cupy_pagerank`: power iteration with one cuSPARSE SpMV (``csr_matrix @ x``) per
  iteration on the transposed adjacency, float64: the loop of ``groute.graph.reference.pagerank``
  (:func:`~groute.graph.reference.pagerank_iterations`: L1 change < tol, dangling mass spread
  uniformly) on CuPy arrays.
* :func:`cupy_cc`: min-label propagation over both directions of every arc with
  ``cupyx.scatter_min``, plus pointer jumping (``labels = labels[labels]``) each round.

Each takes a graph whose arrays are on the current GPU (``graph.to_device``) or NumPy arrays
(uploaded each call). BFS and SSSP return CuPy arrays in the graph's vertex ids: int32 depths
with -1 unreachable / float64 distances with inf unreachable, the same conventions as the apps.
PageRank and CC return ``(values, iterations)``; their per-graph matrix/edge arrays are built
once and cached on the graph object, like a user who runs the algorithm repeatedly would, by
public builders (``<function>_setup(graph)``) that ``groute bench`` calls before its warm-up: a
cold ``a.T.tocsr()`` can take longer than the timed runs themselves.
"""
from __future__ import annotations

from groute.graph.reference import pagerank_iterations


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

def _device_arrays(graph):
    import cupy
    return cupy.asarray(graph.indptr), cupy.asarray(graph.indices)


def cupy_pagerank_setup(graph):
    """``(Aᵀ as CSR, 1/outdeg, dangling mask)`` for :func:`cupy_pagerank`, built once per graph."""
    cached = getattr(graph, "_cupy_pr_setup", None)
    if cached is not None:
        return cached
    import cupy
    import cupyx.scipy.sparse as csp
    n = int(graph.num_vertices)
    indptr, indices = _device_arrays(graph)
    a = csp.csr_matrix((cupy.ones(indices.shape[0], cupy.float64), indices, indptr), shape=(n, n))
    if int(a.indptr[-1]) != int(indices.shape[0]):
        # CuPy releases whose sparse matrices hold 32-bit offsets wrap past 2**31 arcs
        raise RuntimeError(f"cupy_pagerank: {graph.name or 'the graph'} has {indices.shape[0]:,} "
                           f"arcs, more than this CuPy's sparse matrices index (32-bit offsets)")
    at = a.T.tocsr()
    outdeg = cupy.diff(indptr).astype(cupy.float64)
    dangling = outdeg == 0
    inv = cupy.where(dangling, 0.0, 1.0 / cupy.maximum(outdeg, 1.0))
    cached = (at, inv, dangling)
    graph._cupy_pr_setup = cached
    return cached


def cupy_pagerank(graph, *, damping=0.85, tol=1e-6, max_iter=1000):
    """Power iteration with cuSPARSE SpMV; returns ``(ranks summing to 1, iterations)``."""
    import cupy
    n = int(graph.num_vertices)
    if n == 0:
        return cupy.zeros(0), 0
    at, inv, dangling = cupy_pagerank_setup(graph)
    ranks, it, change = pagerank_iterations(at, inv, dangling, damping, tol, max_iter, xp=cupy)
    if change < tol:
        return ranks, it
    raise RuntimeError(f"cupy_pagerank: no convergence to L1 change {tol:g} in {max_iter} iterations")


def cupy_cc_setup(graph):
    """``(source, target)`` of every arc as int32 for :func:`cupy_cc`, built once per graph."""
    cached = getattr(graph, "_cupy_cc_setup", None)
    if cached is not None:
        return cached
    import cupy
    indptr, indices = _device_arrays(graph)
    n = int(graph.num_vertices)
    src = _expand_rows(indptr, n)
    cached = (src, indices.astype(cupy.int32))
    graph._cupy_cc_setup = cached
    return cached


def _expand_rows(indptr, n):
    """The source vertex of every arc (CSR row expansion) on the GPU."""
    import cupy
    m = int(indptr[-1])
    marks = cupy.zeros(m + 1, cupy.int32)
    starts = indptr[1:-1]
    if starts.size:
        cupy.add.at(marks, starts, 1)
    return cupy.cumsum(marks[:m], dtype=cupy.int32)


def cupy_cc(graph, *, max_iter=10_000):
    """Weak components by min-label propagation; returns ``(labels int64, rounds)`` with each
    label the smallest vertex id of its component."""
    import cupy
    import cupyx
    n = int(graph.num_vertices)
    if n == 0:
        return cupy.zeros(0, cupy.int64), 0
    src, dst = cupy_cc_setup(graph)
    labels = cupy.arange(n, dtype=cupy.int32)
    for it in range(1, max_iter + 1):
        before = labels.copy()
        cupyx.scatter_min(labels, dst, labels[src])
        cupyx.scatter_min(labels, src, labels[dst])
        while True:                                   # pointer jumping: labels are vertex ids <= v
            jumped = labels[labels]
            if bool((jumped == labels).all()):
                break
            labels = jumped
        if bool((labels == before).all()):
            return labels.astype(cupy.int64), it
    raise RuntimeError(f"cupy_cc: labels still changing after {max_iter} rounds")
