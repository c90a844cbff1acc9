"""Graphs from what callers already hold: a NetworkX graph, a scipy sparse matrix, edge arrays.

:func:`as_graph` is what every algorithm and :func:`~groute.graph.load_graph` call on an input
that is not a path or a spec. The result is a :class:`~groute.graph.CSRGraph` that keeps the
caller's vertex ids (:mod:`.ids`): NetworkX node labels of any hashable type; positions 0..n-1
for arrays and matrices. NetworkX is imported only when a NetworkX graph is passed.
"""
from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable

import numpy as np

from groute.ints import is_int

from .rank_graph import RankGraph
from .csr import PAST_INT32, CSRGraph, array_module, unstorable_weight

#: what :func:`as_graph` takes, for its TypeError
ACCEPTED = ("a CSRGraph, a NetworkX Graph/DiGraph, a scipy sparse matrix or array, or a tuple "
            "(src, dst) or (src, dst, weights) of edge arrays")


def as_graph(obj, *, weight: str | None = "weight", num_vertices: int | None = None,
             symmetric: bool = False) -> CSRGraph:
    """``obj`` as a CSRGraph (see :data:`ACCEPTED`; a CSRGraph is returned as it is).

    ``weight``: the NetworkX edge attribute holding the weights (``None``: unweighted; an edge
    without it weighs 1, as in NetworkX). ``num_vertices``: for edge arrays, the vertex count
    (default: the largest id plus one). ``symmetric``: store every arc in both directions.
    """
    if num_vertices is not None and not isinstance(obj, tuple):
        raise ValueError("num_vertices applies to (src, dst[, weights]) edge arrays only; "
                         f"got it with a {type(obj).__name__}")
    if isinstance(obj, CSRGraph):
        g = obj
    elif isinstance(obj, RankGraph):        # one rank's part: taken as it is
        if symmetric and obj.directed:
            raise ValueError(f"{obj.name} was loaded by ranks: write its part set from the "
                             f"symmetric graph (groute.graph.part_set.write_part_set)")
        return obj
    elif is_networkx(obj):
        g = cached_from_networkx(obj, weight=weight)
    elif _is_scipy_sparse(obj):
        g = from_scipy(obj)
    elif isinstance(obj, tuple):
        g = from_arrays(*_edge_arrays(obj), num_vertices=num_vertices)
    else:
        raise TypeError(f"cannot make a graph of a {type(obj).__name__}: expected {ACCEPTED}, "
                        "or a path or spec for load_graph")
    return g.symmetrize() if symmetric and g.directed else g


# ------------------------------------------------------------------ NetworkX
def is_networkx(obj) -> bool:
    """Whether ``obj`` is a NetworkX graph (checked without importing NetworkX)."""
    nx = sys.modules.get("networkx")
    return nx is not None and isinstance(obj, nx.Graph)


#: the key of the conversions :func:`cached_from_networkx` keeps in ``G.__networkx_cache__``
CACHE_KEY = "groute.graph"


def cached_from_networkx(G, *, weight: str | None = "weight") -> CSRGraph:
    """:func:`from_networkx`, kept in ``G.__networkx_cache__`` (by ``weight``) as NetworkX keeps
    its backends' conversions, under the same switch (``nx.config.cache_converted_graphs``) and
    with the same rule: NetworkX clears the cache when ``G`` changes through its methods, not
    when an attribute is set in place (``G[u][v]["weight"] = 2``; clear it then with
    ``G.__networkx_cache__.clear()``). A second call on the same graph skips the conversion, and
    what solvers keep on the graph (in-arcs, partitions)."""
    import networkx as nx
    check_weight_name(weight)
    cache = getattr(G, "__networkx_cache__", None)
    if cache is None or not nx.config.cache_converted_graphs:
        return from_networkx(G, weight=weight)
    kept = cache.setdefault(CACHE_KEY, {})
    g = kept.get(weight)
    if g is None:
        g = kept[weight] = from_networkx(G, weight=weight)
    return g


def from_networkx(G, *, weight: str | None = "weight") -> CSRGraph:
    """A NetworkX ``Graph``/``DiGraph`` (or multigraph: parallel edges keep their least weight)
    with its node labels as the vertex ids, in ``G.nodes`` order.

    ``weight`` names the edge attribute read as the weight; the graph is unweighted when it is
    ``None`` or no edge has that attribute, and an edge without it weighs 1 (NetworkX's rule).
    """
    adjacency = networkx_adjacency(G, weight=weight)
    kind = f"the NetworkX {type(G).__name__}"   # as errors name it: "... not a vertex of ..."
    return csr_from_adjacency(adjacency, directed=G.is_directed(),
                              name=f"{kind} {G.name!r}" if G.name else kind)


class Adjacency:
    """A NetworkX graph's arcs in NetworkX's own order: ``nodes`` as ``list(G)``, and the
    neighbours of ``nodes[i]`` (positions) at ``indices[indptr[i]:indptr[i+1]]`` in the order
    ``G[nodes[i]]`` yields them, with ``weights`` aligned (None: unweighted).

    That order is what NetworkX's traversals follow, so a caller can rebuild the order in which
    NetworkX would visit vertices from a depth array (:mod:`groute.nx_backend`).
    """

    def __init__(self, nodes, indptr, indices, weights, labels_are_positions: bool):
        self.nodes, self.indptr, self.indices, self.weights = nodes, indptr, indices, weights
        #: the nodes are the ints 0..n-1 in that order (no label array needed)
        self.labels_are_positions = labels_are_positions


def networkx_adjacency(G, *, weight: str | None = "weight") -> Adjacency:
    """The arcs of NetworkX graph ``G`` read from its adjacency dicts (every undirected edge
    both ways, a self-loop once; a multigraph's parallel edges one arc of their least weight).

    ``weight``: as :func:`from_networkx` (unweighted when ``None`` or no edge has it, 1 where an
    edge lacks it); the weights keep their type: int64 when every one is an integer, float64
    when any is real. A weight that is not a number is a ValueError naming the edge.
    """
    check_weight_name(weight)
    adj = G._adj
    nodes = list(adj)
    n = len(nodes)
    rows = list(adj.values())
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.fromiter(map(len, rows), dtype=np.int64, count=n))
    m = int(indptr[-1])
    neighbours = itertools.chain.from_iterable(rows)
    positions = _labels_are_positions(nodes)
    if positions:
        indices = np.fromiter(neighbours, dtype=np.int64, count=m)
    else:
        index = {u: i for i, u in enumerate(nodes)}
        indices = np.fromiter(map(index.__getitem__, neighbours), dtype=np.int64, count=m)
    weights = None
    if weight is not None and m:
        weights = _adjacency_weights(rows, weight, G.is_multigraph(), nodes, indptr, indices)
    return Adjacency(nodes, indptr, indices, weights, positions)


#: an edge without the weight attribute (None is a value an edge can hold)
_MISSING = object()
#: what a weight attribute may hold
_NUMBERS = (int, float, np.integer, np.floating)


def check_weight_name(weight) -> None:
    """Refuse a ``weight`` that cannot name an edge attribute: a function (NetworkX calls one;
    read as a key no edge has, every edge would weigh 1) or what is not hashable (a list).
    Any other key is a name, as in NetworkX (``0``, ``""``: an attribute of that key)."""
    if callable(weight) or not isinstance(weight, Hashable):
        raise TypeError(f"weight must name an edge attribute (its key, such as 'weight') or "
                        f"be None; got {weight!r} (groute reads weights from an attribute, not "
                        f"through a function)")


def _adjacency_weights(rows, weight, multigraph, nodes, indptr, indices):
    """The ``weight`` of every arc in adjacency order (None when no edge has it)."""
    plain = all(type(r) is dict for r in rows)

    def datas():
        if plain:
            return itertools.chain.from_iterable(map(dict.values, rows))
        return itertools.chain.from_iterable(r.values() for r in rows)
    if not multigraph and not any(datas()):     # no edge has any attribute: a fast scan
        return None
    datas = datas()
    if multigraph:
        def least(keydict):
            found = [d[weight] for d in keydict.values() if weight in d]
            if not found:
                return _MISSING
            try:
                return min(found) if len(found) == len(keydict) else min(found + [1])
            except TypeError:           # a value that is not a number: the error below names it
                return next(x for x in found if not isinstance(x, _NUMBERS))
        values = list(map(least, datas))
    else:
        values = [d.get(weight, _MISSING) for d in datas]
    if all(v is _MISSING for v in values):
        return None
    # an edge without the attribute weighs 1; one whose value is None is refused below (NetworkX
    # hides such an edge from Dijkstra and fails elsewhere: no one weight stands for it)
    values = [1 if v is _MISSING else v for v in values]
    try:
        w = np.asarray(values)
    except (ValueError, TypeError):     # e.g. a list among the numbers
        w = None
    def edge(arc):
        u = nodes[int(np.searchsorted(indptr, arc, side="right")) - 1]
        return f"edge ({u!r}, {nodes[int(indices[arc])]!r}) has {weight}={values[arc]!r}"
    if w is not None and w.dtype.kind in "fO" and w.ndim == 1 and not any(
            isinstance(v, (float, np.floating)) for v in values):
        # integers all, which NumPy made floats or objects: one is past 64 bits
        bad = next((i for i, v in enumerate(values) if isinstance(v, (int, np.integer))
                    and not -2**63 <= v < 2**63), None)
        if bad is not None:
            raise ValueError(f"{edge(bad)}, which {PAST_INT32}")
    if w is None or w.ndim != 1 or w.dtype.kind not in "iufb":
        bad = next(i for i, v in enumerate(values) if not isinstance(v, _NUMBERS))
        raise ValueError(f"{edge(bad)}: the {weight!r} attribute must be a number "
                         "(or pass weight=None)")
    unstorable = unstorable_weight(w)
    if unstorable is not None:
        bad, why = unstorable
        raise ValueError(f"{edge(bad)}, which {why}")
    return w


def csr_from_adjacency(adjacency: Adjacency, *, directed: bool, name: str) -> CSRGraph:
    """The CSRGraph of an :class:`Adjacency` (rows sorted, as every CSRGraph), its node labels
    as the vertex ids unless they are the positions 0..n-1 themselves."""
    nodes, indptr = adjacency.nodes, adjacency.indptr
    n = len(nodes)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    labels = None if adjacency.labels_are_positions else nodes
    return CSRGraph.from_edges(src, adjacency.indices, n, adjacency.weights, directed=directed,
                               name=name, file_ids=labels)


def _labels_are_positions(nodes) -> bool:
    """Nodes 0, 1, ..., n-1 in that order need no label array."""
    return all(type(u) is int and u == i for i, u in enumerate(nodes))


# ------------------------------------------------------------------ scipy
def _is_scipy_sparse(obj) -> bool:
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(obj)


def from_scipy(matrix) -> CSRGraph:
    """A square scipy sparse matrix or array: entry (i, j) is the arc i -> j, its value the
    weight (explicit zeros are arcs of weight 0; repeated entries are summed, as scipy does).
    Vertices are 0..n-1. Undirected when the matrix equals its transpose, explicit zeros
    included (they are arcs here; ``m != m.T`` compares values only)."""
    m = matrix.tocsr()
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"an adjacency matrix must be square, got shape {m.shape}")
    _real("the matrix's values", m.dtype)
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()               # also sorts the indices
    g = CSRGraph.from_scipy(m, directed=True, name="the scipy matrix")
    if g.is_symmetric():
        g.directed = False
    return g


def _real(what: str, dtype) -> None:
    """A TypeError naming ``what`` unless ``dtype`` holds real numbers (bools, integers,
    floats): complex values, strings or objects have no weight order."""
    if dtype.kind not in "biuf":
        raise TypeError(f"{what} must be real numbers, got dtype {dtype}")


# ------------------------------------------------------------------ edge arrays
def _edge_arrays(pair_or_triple):
    if len(pair_or_triple) not in (2, 3):
        raise ValueError(f"edge arrays are (src, dst) or (src, dst, weights); got a tuple of "
                         f"{len(pair_or_triple)}")
    src, dst = (_as_ids(a, name) for a, name in zip(pair_or_triple[:2], ("src", "dst")))
    weights = pair_or_triple[2] if len(pair_or_triple) == 3 else None
    return src, dst, weights


def _as_ids(a, name):
    xp = array_module(a)
    a = xp.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of vertex ids, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        if a.size == 0:
            return a.astype(xp.int64)
        raise TypeError(f"{name} must hold integer vertex ids, got dtype {a.dtype}")
    return a


def from_arrays(src, dst, weights=None, *, num_vertices: int | None = None,
                directed: bool = True) -> CSRGraph:
    """Arcs ``src[i] -> dst[i]`` (weighted by ``weights[i]``) on vertices 0..n-1, ``n`` being
    ``num_vertices`` or the largest id plus one. Repeated arcs keep their least weight."""
    xp = array_module(src)
    if src.shape != dst.shape:
        raise ValueError(f"src and dst differ in length: {src.shape[0]} and {dst.shape[0]}")
    if weights is not None:
        weights = xp.asarray(weights)
        if weights.shape != src.shape:
            raise ValueError(f"weights must be a 1-D array of one weight per arc ({src.shape[0]}), "
                             f"got shape {weights.shape}")
        _real("weights", weights.dtype)
    lo = min(int(src.min()), int(dst.min())) if src.size else 0
    hi = max(int(src.max()), int(dst.max())) if src.size else -1
    if lo < 0:
        raise ValueError(f"vertex ids must be >= 0, got {lo}")
    if num_vertices is None:
        n = hi + 1
    else:
        if not is_int(num_vertices):        # 3.9 would be 3, True 1
            raise TypeError(f"num_vertices must be an int, got {type(num_vertices).__name__} "
                            f"{num_vertices!r}")
        n = int(num_vertices)
        if n < 0:
            raise ValueError(f"num_vertices must be >= 0, got {num_vertices}")
        if n <= hi:
            raise ValueError(f"num_vertices={num_vertices} but the arrays name vertex {hi}")
    return CSRGraph.from_edges(src.astype(xp.int64), dst.astype(xp.int64), n, weights,
                               directed=directed, name="the edge arrays", xp=xp)
