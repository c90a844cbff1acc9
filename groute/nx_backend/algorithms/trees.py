"""Spanning trees: NetworkX's minimum (and maximum) spanning tree and its edges, Kruskal's
answer, found by Borůvka's algorithm on the devices (:mod:`.boruvka`).

Kruskal's algorithm takes the edges by weight, equal weights in the order ``G.edges`` lists
them, and keeps an edge unless it closes a cycle. Ranking the edges in that order makes every
weight distinct, so the forest of least total rank is unique, and Borůvka's algorithm on the
ranks finds exactly Kruskal's forest; its edges are then yielded in rank order, Kruskal's.
The ranking is one NumPy sort on the host; a multigraph's parallel edges count as their first
lightest key (the first heaviest for the maximum tree: Kruskal meets it first and then skips
the others). Self-loops never join.
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np

from .boruvka import spanning_forest
from .support import rule

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tree.tests.test_mst']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}

#: the algorithms NetworkX's spanning tree functions take (``ALGORITHMS`` of networkx's mst)
ALGORITHMS = ("boruvka", "borůvka", "kruskal", "prim")


def _kruskal(args):
    if args["algorithm"] in ALGORITHMS and args["algorithm"] != "kruskal":
        return (f"algorithm={args['algorithm']!r}: its choice among equal weights, and its "
                f"order of edges, are its own (groute answers as Kruskal's)")
    if callable(args["weight"]):
        return "a weight function has no groute form"
    return True


def _edges(G, weight, ignore_nan: bool, minimum: bool):
    """The edges Kruskal's algorithm ranks, in ``G.edges`` order: the arcs that name them
    (each undirected edge's arc from its earlier node; a multigraph's pair of nodes once), the
    key of each (a multigraph's first lightest, or with ``minimum`` False its first heaviest;
    None otherwise) and its weight. A NaN weight
    is skipped with ``ignore_nan``, else NotImplementedError: NetworkX runs the call and names
    the edge in its ValueError."""
    rows, heads = G.arc_rows, G.adjacency_indices
    arcs = np.flatnonzero(rows <= heads)
    if G.is_multigraph():
        keys, weights, kept = [], [], []
        for arc, keydict in zip(arcs.tolist(), map(G.edge_data.__getitem__, arcs.tolist())):
            best = None
            for key, data in keydict.items():
                w = _weight(data, weight, ignore_nan)
                if w is not None and (best is None or (w < best[1] if minimum
                                                       else w > best[1])):
                    best = (key, w)
            if best is not None:
                kept.append(arc)
                keys.append(best[0])
                weights.append(best[1])
        arcs, w = np.asarray(kept, dtype=np.int64), np.asarray(weights)
    else:
        keys = None
        arcs, w = _plain_weights(G, arcs, weight, ignore_nan)
    loop = rows[arcs] == heads[arcs]
    if keys is not None:
        keys = [k for k, skip in zip(keys, loop.tolist()) if not skip]
    return arcs[~loop], keys, w[~loop]


def _plain_weights(G, arcs, weight, ignore_nan):
    """The edges of ``arcs`` (a graph's, not a multigraph's) with a weight, and their weights:
    the conversion's where it read ``weight``, else each edge's data."""
    if weight is None:
        return arcs, np.ones(arcs.shape[0], dtype=np.int64)
    if G.weight == weight:
        w = np.ones(arcs.shape[0], dtype=np.int64) if G.weights is None else G.weights[arcs]
        nan = np.isnan(w) if w.dtype.kind == "f" else np.zeros(w.shape, bool)
        if nan.any() and not ignore_nan:
            raise NotImplementedError("a NaN weight: NetworkX runs the call and names the edge")
        return arcs[~nan], w[~nan]
    if G.edge_data is None:
        raise NotImplementedError(f"the graph was converted with weight={G.weight!r}, the call "
                                  f"reads {weight!r}")
    w = [_weight(G.edge_data[a], weight, ignore_nan) for a in arcs.tolist()]
    found = np.array([x is not None for x in w], dtype=bool)
    return arcs[found], np.asarray([x for x in w if x is not None])


def _weight(data, weight, ignore_nan):
    """``data``'s weight as Kruskal reads it (1 without one); None for a NaN with
    ``ignore_nan``; NotImplementedError for a NaN without it, or a weight that is not a real
    number (NetworkX runs the call and raises its own error)."""
    w = data.get(weight, 1)
    if not isinstance(w, (int, float, np.integer, np.floating, np.bool_)):
        raise NotImplementedError(f"weight {w!r} is not a real number: NetworkX runs the call")
    if math.isnan(w):
        if ignore_nan:
            return None
        raise NotImplementedError("a NaN weight: NetworkX runs the call and names the edge")
    return w


def _spanning_edges(G, algorithm, weight, keys, data, ignore_nan, minimum: bool) -> list:
    """Kruskal's spanning forest edges in its order, each as NetworkX's minimum (or maximum)
    spanning edges yield it: ``(u, v)``, with the key of a multigraph's edge when ``keys``,
    with its data dict when ``data``."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{algorithm} is not a valid choice for an algorithm.")
    if G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for directed type")
    arcs, edge_keys, w = _edges(G, weight, ignore_nan, minimum)
    w = w.astype(np.int64) if w.dtype.kind == "b" else w
    order = np.argsort(w if minimum else -w, kind="stable")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0])
    u, v = G.arc_rows[arcs], G.adjacency_indices[arcs]
    forest = np.flatnonzero(spanning_forest(len(G), u, v, rank))
    forest = forest[np.argsort(rank[forest])]
    ends = zip(G.labels_of(u[forest]), G.labels_of(v[forest]))
    multi = G.is_multigraph()
    out = []
    for (a, b), k, arc in zip(ends, forest.tolist(), arcs[forest].tolist()):
        edge = (a, b)
        if multi and keys:
            edge += (edge_keys[k],)
        if data:
            edge += (G.edge_data[arc][edge_keys[k]] if multi else G.edge_data[arc],)
        out.append(edge)
    return out


@rule(_kruskal)
def minimum_spanning_edges(G, algorithm="kruskal", weight="weight", keys=True, data=True,
                           ignore_nan=False):
    """Kruskal's minimum spanning edges, found by Borůvka's algorithm on the devices."""
    return iter(_spanning_edges(G, algorithm, weight, keys, data, ignore_nan, True))


@rule(_kruskal)
def maximum_spanning_edges(G, algorithm="kruskal", weight="weight", keys=True, data=True,
                           ignore_nan=False):
    """Kruskal's maximum spanning edges (the weights taken from the greatest down)."""
    return iter(_spanning_edges(G, algorithm, weight, keys, data, ignore_nan, False))


def _tree(G, edges):
    T = G.networkx_class()
    T.graph.update(G.graph)
    T.add_nodes_from(zip(G.nodes, G.node_data))
    T.add_edges_from(edges)
    return T


@rule(_kruskal)
def minimum_spanning_tree(G, weight="weight", algorithm="kruskal", ignore_nan=False):
    """NetworkX's minimum spanning forest as a graph of ``G``'s class, with ``G``'s graph,
    node and edge attributes."""
    return _tree(G, _spanning_edges(G, algorithm, weight, True, True, ignore_nan, True))


@rule(_kruskal)
def maximum_spanning_tree(G, weight="weight", algorithm="kruskal", ignore_nan=False):
    """NetworkX's maximum spanning forest as a graph of ``G``'s class."""
    return _tree(G, _spanning_edges(G, algorithm, weight, True, True, ignore_nan, False))
