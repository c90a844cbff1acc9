"""Reference results for verifying groute's kernels, computed independently on the CPU.

BFS and SSSP use ``scipy.sparse.csgraph`` (C implementations), connected components too; PageRank
is a plain power iteration written here with the definition below, which the apps must match.
All functions take a :class:`CSRGraph` (host or device; device graphs are copied back) and
follow the stored arcs (an undirected graph stores both directions).

PageRank definition (the one the apps implement)::

    r_0 = 1/n for every vertex
    r_{t+1}[v] = (1 - d)/n + d * ( sum_{u -> v} r_t[u] / outdeg(u)  +  D_t / n )
    D_t = sum of r_t[u] over dangling vertices u (outdeg(u) == 0)

i.e. dangling vertices spread their rank uniformly over all vertices. Iteration stops after the
first step whose L1 change ``sum |r_{t+1} - r_t|`` is below ``tol`` (default 1e-6), or after
``max_iter`` steps (default 1000, with a warning logged). Repeated arcs count with multiplicity
(graphs from load_graph have none); weights are ignored unless ``weighted``, when ``outdeg`` is
a vertex's out-weight and an arc carries ``r[u] * w / outdeg(u)`` (NetworkX's weighted
PageRank). The result sums to 1 (it is renormalised once at the end to remove rounding
drift).
"""
from __future__ import annotations

import logging

import numpy as np

from .csr import CSRGraph

log = logging.getLogger(__name__)


def _host(g: CSRGraph) -> CSRGraph:
    return g.to_host()


def _sparse():
    """scipy.sparse and its csgraph, imported when a reference is computed: every algorithm
    module imports this one (for its small helpers, :func:`canonical_labels`...), and SciPy's
    import would cost the first groute call a sixth of a second."""
    import scipy.sparse as sp
    from scipy.sparse import csgraph
    return sp, csgraph


def _pattern(g: CSRGraph):
    sp, _ = _sparse()
    n = g.num_vertices
    return sp.csr_matrix((np.ones(g.num_edges, dtype=np.float64), g.indices, g.indptr), shape=(n, n))


def _check_source(g, source):
    if not 0 <= int(source) < g.num_vertices:
        raise ValueError(f"source {source} out of range [0, {g.num_vertices})")
    return int(source)


def bfs(g: CSRGraph, source: int):
    """Hop distance from ``source`` along out-arcs (int32), -1 where unreachable."""
    g = _host(g)
    s = _check_source(g, source)
    _, csgraph = _sparse()
    dist = csgraph.dijkstra(_pattern(g), directed=True, indices=s, unweighted=True)
    depth = np.full(g.num_vertices, -1, dtype=np.int32)
    reached = np.isfinite(dist)
    depth[reached] = dist[reached].astype(np.int32)
    return depth


def sssp(g: CSRGraph, source: int):
    """Shortest-path distances from ``source`` (float64, inf unreachable), scipy Dijkstra.

    Uses ``g.weights`` (unit weights if the graph has none); zero weights are honoured (csgraph
    treats explicitly stored zeros as arcs). Raises ValueError on negative weights.
    """
    g = _host(g)
    s = _check_source(g, source)
    n = g.num_vertices
    w = np.ones(g.num_edges) if g.weights is None else g.weights.astype(np.float64)
    if w.size and float(w.min()) < 0:
        raise ValueError("sssp reference: negative edge weights are not allowed (Dijkstra)")
    sp, csgraph = _sparse()
    m = sp.csr_matrix((w, g.indices, g.indptr), shape=(n, n))
    return csgraph.dijkstra(m, directed=True, indices=s)


def pagerank(g: CSRGraph, damping: float = 0.85, tol: float = 1e-6, max_iter: int = 1000,
             weighted: bool = False):
    """PageRank by power iteration (float64, sums to 1); exact definition in the module
    docstring (``weighted``: on the graph's weights, if it has any)."""
    g = _host(g)
    n = g.num_vertices
    if n == 0:
        return np.zeros(0)
    if not 0 <= damping < 1:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if weighted and g.weights is not None:
        sp, _ = _sparse()
        a = sp.csr_matrix((g.weights.astype(np.float64), g.indices, g.indptr), shape=(n, n))
    else:
        a = _pattern(g)
    outdeg = np.asarray(a.sum(axis=1)).ravel()
    dangling = outdeg == 0
    inv = np.zeros(n)
    np.divide(1.0, outdeg, out=inv, where=~dangling)
    at = a.T.tocsr()                         # in-arcs: row v lists the u with u -> v
    r, it, delta = pagerank_iterations(at, inv, dangling, damping, tol, max_iter)
    if delta < tol:
        log.debug("pagerank converged after %d iterations (L1 change %.3g)", it, delta)
    else:
        log.warning("pagerank did not reach tol=%g in %d iterations", tol, max_iter)
    return r


def pagerank_iterations(at, inv, dangling, damping: float, tol: float, max_iter: int, xp=np):
    """The power iteration of the module docstring's PageRank on its prepared arrays: the
    reference's (:func:`pagerank`) and the plain-CuPy baseline's
    (:func:`groute.bench.baselines.cupy_pagerank`) one loop, so that the two cannot drift apart.

    Parameters
    ----------
    at : sparse matrix
        The transposed adjacency as CSR (row ``v`` lists the ``u`` with ``u -> v``): SciPy's,
        or CuPy's with ``xp`` CuPy.
    inv : array of float64
        Each vertex's 1 / out-degree (out-weight), 0 where it dangles.
    dangling : array of bool
        The vertices without out-arcs.
    damping, tol, max_iter
        As :func:`pagerank`'s.
    xp : module, optional
        The array module of ``inv`` (NumPy or CuPy).

    Returns
    -------
    tuple
        ``(ranks, iterations, change)``: the ranks renormalised to sum 1, the steps taken and
        the last step's L1 change (below ``tol`` where it converged; inf where no step ran).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> at = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))   # 0 <-> 1
    >>> r, steps, change = pagerank_iterations(at, np.ones(2), np.zeros(2, bool), 0.85, 1e-6, 100)
    >>> r.tolist(), steps
    ([0.5, 0.5], 1)
    """
    n = inv.shape[0]
    r = xp.full(n, 1.0 / n)
    it, change = 0, float("inf")
    for it in range(1, max_iter + 1):
        new = at @ (r * inv)
        new *= damping
        new += (1.0 - damping) / n + damping * r[dangling].sum() / n
        change = float(xp.abs(new - r).sum())
        r = new
        if change < tol:
            break
    return r / r.sum(), it, change


def katz(g: CSRGraph, alpha: float = 0.1, beta: float = 1.0, tol: float = 1e-6,
         max_iter: int = 1000, normalized: bool = True):
    """Katz centrality by power iteration (float64), NetworkX's definition: ``x_0 = 0``,
    ``x_{t+1}[v] = alpha * sum_{u -> v} x_t[u] + beta``, stopping after the first step whose
    L1 change is below ``n * tol`` (a ValueError after ``max_iter`` steps: ``alpha`` is not
    below ``1 / lambda_max``); unit Euclidean norm when ``normalized``."""
    g = _host(g)
    n = g.num_vertices
    if n == 0:
        return np.zeros(0)
    at = _pattern(g).T.tocsr()               # in-arcs: row v lists the u with u -> v
    x = np.zeros(n)
    for _ in range(max_iter):
        new = alpha * (at @ x) + beta
        delta = float(np.abs(new - x).sum())
        x = new
        if delta < n * tol:
            break
    else:
        raise ValueError(f"katz reference: no convergence in {max_iter} iterations (alpha "
                         f"{alpha} not below 1 / lambda_max?)")
    norm = float(np.linalg.norm(x)) if normalized else 0.0
    return x / norm if norm > 0 else x


def connected_components(g: CSRGraph):
    """Weakly connected components (int64 labels): a vertex's label is the smallest vertex id
    in its component, so equal partitions give equal arrays."""
    g = _host(g)
    n = g.num_vertices
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, csgraph = _sparse()
    _, labels = csgraph.connected_components(_pattern(g), directed=True, connection="weak")
    return canonical_labels(labels)


def label_groups(labels) -> list:
    """The positions of each class of ``labels``, one int64 array per class, the classes in
    the order of their labels (CC's and SCC's representatives: the order of their smallest
    member): how components become NetworkX's sets."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return []
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(order, bounds)


def canonical_labels(labels):
    """Relabel so each class is named by its smallest index (first occurrence)."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return labels.astype(np.int64)
    order = np.argsort(labels, kind="stable")
    s = labels[order]
    first = np.ones(s.size, dtype=bool)
    first[1:] = s[1:] != s[:-1]
    group_min = order[first]                  # stable sort: first of each group is its min index
    group = np.cumsum(first) - 1
    out = np.empty(labels.size, dtype=np.int64)
    out[order] = group_min[group]
    return out


def _to_numpy(a):
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def compare_exact(a, b, *, rtol: float = 0.0) -> bool:
    """Whether two results are equal elementwise (inf == inf; ``rtol`` for float32 sums)."""
    a, b = _to_numpy(a), _to_numpy(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        both_inf = np.isinf(a64) & np.isinf(b64) & (np.sign(a64) == np.sign(b64))
        close = np.isclose(a64, b64, rtol=rtol, atol=0.0) if rtol else (a64 == b64)
        return bool(np.all(close | both_inf))
    return bool(np.array_equal(a, b))


def compare_labels(a, b) -> bool:
    """Whether two labelings describe the same partition of the vertices (names may differ)."""
    a, b = _to_numpy(a), _to_numpy(b)
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(canonical_labels(a), canonical_labels(b)))


def pagerank_error(a, b) -> tuple[float, float]:
    """``(L1, Linf)`` difference of two rank vectors."""
    a, b = _to_numpy(a).astype(np.float64), _to_numpy(b).astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"rank vectors differ in shape: {a.shape} vs {b.shape}")
    d = np.abs(a - b)
    return float(d.sum()), float(d.max() if d.size else 0.0)


def mismatch_report(a, b, limit: int = 5) -> str:
    """A short description of where two results differ (for assertion messages)."""
    a, b = _to_numpy(a), _to_numpy(b)
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    diff = np.flatnonzero(~((a == b) | (np.isnan(a.astype(float)) & np.isnan(b.astype(float)))))
    if diff.size == 0:
        return "identical"
    pairs = ", ".join(f"[{i}] {a[i]} vs {b[i]}" for i in diff[:limit])
    return f"{diff.size} of {a.size} entries differ: {pairs}"
