"""Breadth-first traversal: NetworkX's layers, tree edges, predecessors and successors from
groute's BFS depths, and the nodes a source reaches (descendants) or that reach it (ancestors,
a BFS over the reversed arcs)."""
from __future__ import annotations

from collections.abc import Iterator

import networkx as nx
import numpy as np

from .support import (depths, not_a_node, reversed_csr, rule, source_layers, traversals,
                      tree_edges)

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.traversal.tests.test_bfs',
                   'networkx.algorithms.tests.test_dag']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def _one_source(args):
    sources = args["sources"]
    G = args["G"]
    if sources in G:
        return True
    if isinstance(sources, Iterator):
        return "sources given as an iterator (looking would consume it)"
    try:
        many = set(sources)
    except TypeError:
        return True     # NetworkX raises for it; so do we
    return True if len(many) <= 1 else "groute's BFS runs from one source"


@rule(_one_source)
def bfs_layers(G, sources):
    if sources in G:
        sources = [sources]
    visited = set(sources)
    current = list(visited)
    for source in current:
        if source not in G:
            raise nx.NetworkXError(f"The node {source} is not in the graph.")
    if not current:
        return
    yield current            # the source as the caller named it, as NetworkX yields it
    for layer in source_layers(G, G.position(current[0]))[1:]:
        yield G.labels_of(layer)


def _no_sorting(args):
    if args["sort_neighbors"] is not None:
        return "sort_neighbors (a function of NetworkX's neighbour lists) has no groute form"
    return True


@rule(_no_sorting)
def bfs_predecessors(G, source, depth_limit=None, sort_neighbors=None):
    """NetworkX's parents (the first node of the previous layer, in its visiting order, with
    an arc to the node) rebuilt from groute's depths, not groute's own parents: any
    neighbour one layer up is a valid BFS parent, NetworkX's is one in particular."""
    yield from ((child, parent) for parent, child in tree_edges(G, source, depth_limit))


def _tree_rule(args):
    """The arguments groute's BFS honours for NetworkX's tree searches: no ``sort_neighbors``,
    and ``reverse`` only on an undirected graph (where it changes nothing)."""
    if args.get("reverse") and args["G"].is_directed():
        return ("reverse=True on a directed graph: NetworkX walks G.pred in the order its "
                "edges were added, which the conversion does not keep")
    return _no_sorting(args)


@rule(_tree_rule)
def bfs_edges(G, source, reverse=False, depth_limit=None, sort_neighbors=None):
    """NetworkX's edges of the breadth-first tree, in its order, from groute's depths."""
    yield from tree_edges(G, source, depth_limit)


@rule(_tree_rule)
def bfs_tree(G, source, reverse=False, depth_limit=None, sort_neighbors=None):
    T = nx.DiGraph()
    T.add_node(source)
    T.add_edges_from(tree_edges(G, source, depth_limit))
    return T


@rule(_no_sorting)
def bfs_successors(G, source, depth_limit=None, sort_neighbors=None):
    """NetworkX's ``(parent, children)`` pairs: its tree edges grouped by parent, as NetworkX
    groups them (the source's pair comes even when it has no child)."""
    parent, children = source, []
    for p, c in tree_edges(G, source, depth_limit):
        if p == parent:
            children.append(c)
            continue
        yield parent, children
        parent, children = p, [c]
    yield parent, children


def descendants_at_distance(G, source, distance):
    """The nodes ``distance`` hops from ``source``: groute's BFS, cut off there."""
    if source not in G:
        raise nx.NetworkXError(f"The node {source} is not in the graph.")
    try:
        d = int(distance)
    except (TypeError, ValueError, OverflowError):
        return set()
    if d != distance or d < 0:      # NetworkX compares each layer's number with it
        return set()
    if d == 0:
        return {source}             # as the caller named it, as NetworkX's first layer
    depth = depths(G, G.position(source), d)
    return set(G.labels_of(np.flatnonzero(depth == d)))


def descendants(G, source):
    """The nodes ``source`` reaches: groute's BFS."""
    if source not in G:
        raise not_a_node(G, source)
    return set(G.labels_of(np.flatnonzero(depths(G, G.position(source)) > 0)))


def ancestors(G, source):
    """The nodes that reach ``source``: groute's BFS over the reversed arcs."""
    if source not in G:
        raise not_a_node(G, source)
    with traversals(G, "bfs", reversed_csr(G)) as run:
        return set(G.labels_of(np.flatnonzero(run(G.position(source)) > 0)))
