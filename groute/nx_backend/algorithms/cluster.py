"""Triangles and clustering coefficients, from the triangles the intersect operator counts on
the devices (:class:`groute.operators.Intersection`: the forward algorithm, each triangle found
once at its degree-oriented arc and credited to its three nodes).

Every clustering NetworkX defines is a per-node sum over the triangles at the node of a
product of one value per edge: 1 (unweighted), ``cbrt(w / max w)`` (weighted: NetworkX's
geometric mean, as a product of cube roots), and on a directed graph the same over its
undirected form with ``S_ij = C_ij + C_ji`` per pair (``C``: an arc's 1 or cube root, 0 for no
arc): NetworkX's count over its four kinds of directed triangle is ``sum_jk S_ij S_jk S_ki``,
twice the sum over the triangles at ``i``. So one device count serves them all; the host
builds the values and the degrees (O(n + m) NumPy) and divides as NetworkX does.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute.graph import CSRGraph
from groute.operators import Intersection

from ..devices import devices_for
from .support import nbunch_iter, weights_of

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tests.test_cluster']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}

#: NetworkX's error for the functions whose triangle iterators refuse multigraphs
MULTIGRAPH = "not implemented for multigraph type"


def _per_triangle(csr, values=None) -> np.ndarray:
    """Per position, the sum over its triangles of the product of its edges' ``values`` (None:
    the count), on the devices."""
    if not csr.num_edges:
        return np.zeros(csr.num_vertices, np.int64 if values is None else np.float64)
    with devices_for(csr, "operators") as (ctx, _):
        with Intersection(csr, ctx=ctx, values=values) as rows:
            return rows.triangles()


def _loops(G) -> np.ndarray:
    """Per position, 1 where the node has a self-loop."""
    loops = np.zeros(len(G), np.int64)
    loops[G.arc_rows[G.arc_rows == G.adjacency_indices]] = 1
    return loops


def _cube_roots(G, weight, *, csr_order: bool = True) -> np.ndarray:
    """Per arc, in the CSR's order (``csr_order``; else ``G``'s adjacency order):
    ``cbrt(w / max w)``, NetworkX's normalised weight (1 where an edge has none, and for every
    edge when none has one)."""
    w = weights_of(G, weight)
    if w is None or not w.size:
        return np.ones(G.csr.num_edges)
    largest = max(w.tolist())
    if largest == 0:
        raise NotImplementedError("the largest weight is 0, which NetworkX divides by (and "
                                  "raises where it does): NetworkX runs the call")
    roots = np.cbrt(w.astype(np.float64) / largest)
    return roots[G.csr_arcs] if csr_order else roots


def _undirected_triangles(G, weight) -> np.ndarray:
    """Per position: NetworkX's ``t`` of an undirected node, twice the sum over its triangles
    (counts, or products of cube roots)."""
    values = None if weight is None else _cube_roots(G, weight)
    return 2 * _per_triangle(G.csr, values)


def _directed_triangles(G, weight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per position: NetworkX's directed ``t``, total degree and reciprocal degree (self-loops
    left out). The undirected form carries ``S_ij = C_ij + C_ji`` on both arcs of a pair."""
    n = len(G)
    src, dst = G.arc_rows, G.adjacency_indices
    c = np.ones(src.shape[0]) if weight is None else _cube_roots(G, weight, csr_order=False)
    keep = src != dst
    src, dst, c = src[keep], dst[keep], c[keep]
    pair = np.minimum(src, dst) * n + np.maximum(src, dst)
    pairs, which = np.unique(pair, return_inverse=True)
    s = np.bincount(which, weights=c, minlength=pairs.shape[0])
    lo, hi = pairs // n, pairs % n
    u, v = np.concatenate([lo, hi]), np.concatenate([hi, lo])
    order = np.lexsort((v, u))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    both = CSRGraph(indptr, v[order].astype(np.int32), directed=False, validate=False)
    t = 2 * _per_triangle(both, np.concatenate([s, s])[order])
    total = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    twice = np.bincount(which, minlength=pairs.shape[0]) == 2    # both arcs of the pair
    reciprocal = np.bincount(lo[twice], minlength=n) + np.bincount(hi[twice], minlength=n)
    return t, total, reciprocal


def triangles(G, nodes=None):
    if nodes is not None and G.is_multigraph():     # NetworkX's iterator of nodes refuses
        raise nx.NetworkXNotImplemented(MULTIGRAPH)
    count = _per_triangle(G.csr).tolist()
    if nodes is None:
        return dict(zip(G.nodes, count))
    if nodes in G:
        return count[G.position(nodes)]
    return {v: count[G.position(v)] for v in nbunch_iter(G, nodes)}


def clustering(G, nodes=None, weight=None):
    """NetworkX's coefficients from the device counts: ``0`` (an int, as NetworkX's) where a
    node is in no triangle, else ``t / (d * (d - 1))`` (directed: ``t / ((dt * (dt - 1) - 2 *
    db) * 2)``), divided in Python as NetworkX divides."""
    if G.is_multigraph():
        raise nx.NetworkXNotImplemented(MULTIGRAPH)
    if G.is_directed():
        t, total, reciprocal = _directed_triangles(G, weight)
        t = t.tolist() if weight is not None else np.rint(t).astype(np.int64).tolist()
        total, reciprocal = total.tolist(), reciprocal.tolist()

        def coefficient(i):
            return 0 if t[i] == 0 else \
                t[i] / ((total[i] * (total[i] - 1) - 2 * reciprocal[i]) * 2)
    else:
        t = _undirected_triangles(G, weight).tolist()
        degree = (np.diff(np.asarray(G.csr.indptr)) - _loops(G)).tolist()

        def coefficient(i):
            return 0 if t[i] == 0 else t[i] / (degree[i] * (degree[i] - 1))
    found = {v: coefficient(G.position(v)) for v in nbunch_iter(G, nodes)}
    if nodes in G:
        return found[nodes]
    return found


def average_clustering(G, nodes=None, weight=None, count_zeros=True):
    c = clustering(G, nodes, weight=weight).values()
    if not count_zeros:
        c = [v for v in c if abs(v) > 0]
    return sum(c) / len(c)


def transitivity(G):
    """``3 * triangles / triads`` as NetworkX sums it: over each node's ``t`` and ``d * (d -
    1)``, ``d`` its neighbours (a directed graph's successors) but itself; on a directed graph
    ``t`` counts, per arc ``v -> w``, the successors of ``v`` that are successors of ``w``
    (:meth:`~groute.operators.Intersection.arc_common` on the devices)."""
    if G.is_multigraph():
        raise nx.NetworkXNotImplemented(MULTIGRAPH)
    if not len(G):
        return 0
    degree = np.diff(np.asarray(G.csr.indptr)) - _loops(G)
    if G.is_directed():
        t = 0
        if G.csr.num_edges:
            with devices_for(G.csr, "operators") as (ctx, _):
                with Intersection(G.csr, ctx=ctx) as rows:
                    common = rows.arc_common(exclude_ends=True)
                    src, dst = rows.arcs()
            t = int(common[src != dst].sum())
    else:
        t = int(_undirected_triangles(G, None).sum())
    contri = int((degree * (degree - 1)).sum())
    return 0 if t == 0 else t / contri
