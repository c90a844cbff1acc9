"""Values on arcs: the subdivided graph, where what an arc carries is a vertex's state.

The operators keep state per vertex and compute a message at an arc's source, one value for
all of its out-arcs. An algorithm that needs a value per arc (a weight that differs from arc to
arc, a score per edge) runs on the *subdivided* graph instead (:func:`subdivided`): arc ``e``
of the input, ``u -> w``, becomes two arcs ``u -> n + e -> w`` through a new *arc vertex*
``n + e`` (``n``: the input's vertex count), and the arc's value is that vertex's state
(:func:`arc_values` reads an input's as float64). Every arc of the input, both ways of an
undirected edge and each self-loop once, gets its own arc vertex, so the subdivided graph is
directed: ``n + m`` vertices, ``2 m`` arcs. Each arc vertex has exactly one in-arc (from its
arc's tail) and one out-arc (to its head); an input vertex's rows are its arcs' vertices, in the
input's arc order.

Shortest paths by length (:data:`DISTANCE`): a path pays an arc's length on entering the arc
vertex and nothing on entering an input vertex, so the distances of the input's vertices are
the input's, each summed from the source along its path exactly as a path of the input sums it,
and a path of the input is the path through its arcs' vertices, so shortest paths and their
counts are the input's too. Closeness and betweenness centrality by length
(``groute.closeness_centrality``, ``groute.betweenness_centrality``) run on it.
"""
from __future__ import annotations

import numpy as np

from groute.graph.csr import CSRGraph

from .functor import Functor, Gather, Message

#: the distance of a vertex a search has not reached (state ``dist``)
DISTANCE_UNREACHED = -1.0


def subdivided(indptr, heads, *, name: str = "") -> CSRGraph:
    """The subdivided graph (:mod:`groute.operators.arc_vertices`) of the CSR rows ``indptr``
    (int64, n + 1) with the heads ``heads`` (the arcs' targets, in any order within a row):
    vertex ``v < n`` is the input's vertex ``v``, vertex ``n + e`` the arc ``e`` of ``heads``.

    Parameters
    ----------
    indptr : array of int
        The input's row offsets (``n + 1`` of them).
    heads : array of int
        The target of every arc, row after row.
    name : str, optional
        For messages and caches.

    Returns
    -------
    CSRGraph
        Directed, ``n + m`` vertices, ``2 m`` arcs, its vertex ids the positions.

    Raises
    ------
    ValueError
        ``indptr`` and ``heads`` that are no CSR rows.

    Examples
    --------
    >>> import numpy as np
    >>> from groute.operators import subdivided
    >>> g = subdivided(np.array([0, 1, 2]), np.array([1, 0]))   # 0 <-> 1, both ways
    >>> g.num_vertices, g.indptr.tolist(), g.indices.tolist()
    (4, [0, 1, 2, 3, 4], [2, 3, 1, 0])
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    heads = np.asarray(heads, dtype=np.int64)
    n, m = indptr.shape[0] - 1, heads.shape[0]
    if n < 0 or int(indptr[-1]) != m:
        raise ValueError(f"subdivided: indptr ends at {int(indptr[-1]) if n >= 0 else None}, "
                         f"but there are {m} heads")
    total = n + m
    out_indptr = np.concatenate([indptr, m + np.arange(1, m + 1, dtype=np.int64)])
    dtype = np.int32 if total <= np.iinfo(np.int32).max else np.int64
    out_indices = np.concatenate([n + np.arange(m, dtype=np.int64), heads]).astype(dtype)
    return CSRGraph(out_indptr, out_indices, directed=True, name=f"{name} subdivided".strip())


def subdivided_graph(graph, what: str) -> CSRGraph:
    """:func:`subdivided` of ``graph``'s own rows, for ``what``: an algorithm that puts its
    arcs' values on vertices, which needs the whole graph in one process.

    Parameters
    ----------
    graph : CSRGraph
        The input graph.
    what : str
        The algorithm, for the error.

    Returns
    -------
    CSRGraph
        Its subdivided graph: ``n + m`` vertices, ``2 m`` arcs.

    Raises
    ------
    ValueError
        For a graph that holds only a rank's rows
        (:func:`~groute.graph.rank_graph.refuse_rank_graph`), naming ``what``.

    Examples
    --------
    >>> from groute.graph import load_graph
    >>> from groute.operators import subdivided_graph
    >>> g = load_graph("grid:3", cache=False)
    >>> s = subdivided_graph(g, "an example")
    >>> (s.num_vertices, s.num_edges) == (g.num_vertices + g.num_edges, 2 * g.num_edges)
    True
    """
    from groute.graph.rank_graph import refuse_rank_graph
    refuse_rank_graph(graph, what)
    return subdivided(graph.indptr, graph.indices, name=graph.name)


def arc_values(graph, given=None) -> np.ndarray | None:
    """One float64 per arc of ``graph`` (its CSR order): ``given`` when given (checked: one per
    arc), else the graph's weights; None when neither is there or every value is 1 (an
    algorithm then runs on ``graph`` itself, not subdivided).

    Parameters
    ----------
    graph : CSRGraph
        Whose arcs the values are for.
    given : array of float, optional
        The values themselves (a :class:`CSRGraph` keeps its weights in float32; a caller
        holding exact ones passes them here).

    Returns
    -------
    numpy.ndarray or None
        Float64, one per arc; None for unit weights.

    Raises
    ------
    ValueError
        ``given`` of another length.

    Examples
    --------
    >>> import numpy as np
    >>> from groute.graph import CSRGraph
    >>> from groute.operators import arc_values
    >>> g = CSRGraph(np.array([0, 1, 1]), np.array([1]), np.array([2.5]))
    >>> arc_values(g).tolist(), arc_values(g, [1.0])
    ([2.5], None)
    """
    values = graph.weights if given is None else given
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (graph.num_edges,):
        raise ValueError(f"arc values: one per arc ({graph.num_edges}) needed, got shape "
                         f"{values.shape}")
    return None if bool(np.all(values == 1.0)) else values


def _relax(s, v, m):
    d = m + s["cost"][v]
    old = s["dist"][v]
    better = (old < 0) | (d < old)
    s["dist"][v[better]] = d[better]
    return v[better]


#: Bellman-Ford's step on the subdivided graph, a gathering advance: a vertex takes the least
#: distance of its arcs' sources in the frontier (``dist``, float64, :data:`DISTANCE_UNREACHED` where a
#: search has not been) plus its own entry length (``cost``: an arc vertex's length, 0 for an
#: input vertex) when that is shorter than what it has, and joins the next frontier. A loop of
#: it from a source (``dist`` 0 there) ends with every reached vertex's distance; its message
#: reads what its bodies write, which only makes an offer come from a shorter path sooner
DISTANCE = Functor(
    name="arc_vertex_distance", params="double* dist, const double* cost",
    message=Message("double", cuda="dist[u]", numpy=lambda s, u: s["dist"][u]),
    gather=Gather("min"),
    cuda="const double d = m + cost[v];\n"
         "if (dist[v] >= 0.0 && dist[v] <= d) return false;\n"
         "dist[v] = d;\n"
         "return true;",
    numpy=_relax)
