"""Breadth-first traversal: NetworkX's layers and predecessors from groute's BFS depths."""
from __future__ import annotations

from collections.abc import Iterator

import networkx as nx

from .support import levels_within, not_a_node, rule, source_layers

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.traversal.tests.test_bfs']

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
    if source not in G:
        raise not_a_node(G, source)
    parents = []
    layers = source_layers(G, G.position(source), levels_within(depth_limit), parents)
    for layer, parent in zip(layers[1:], parents):
        yield from zip(G.labels_of(layer), G.labels_of(parent))
