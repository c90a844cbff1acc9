"""Strongly connected components: the reference (scipy's strong components), and the scipy,
igraph and NetworkX peers. Answers are compared as partitions (``App.verify = "partition"``),
so any labelling that groups the vertices alike passes."""
from __future__ import annotations

import numpy as np

from ..peers import PreparedPeer, adjacency, igraph_graph
from .common import csr_bytes


def reference(graph, source=None) -> np.ndarray:
    """A component label per vertex (int64), from scipy's strong components."""
    from scipy.sparse import csgraph
    _, labels = csgraph.connected_components(adjacency(graph), directed=True, connection="strong")
    return labels.astype(np.int64)


def floor_bytes(graph) -> int:
    """Out-arcs and in-arcs each read once (forward and backward reachability), a 4-byte label
    per vertex written."""
    return 2 * csr_bytes(graph) + 4 * int(graph.num_vertices)


def scipy_peer(graph, source=None) -> PreparedPeer:
    from scipy.sparse import csgraph
    a = adjacency(graph)
    return PreparedPeer("scipy", "scipy.sparse.csgraph.connected_components (strong)", "cpu",
                        lambda: csgraph.connected_components(a, directed=True, connection="strong"),
                        lambda raw: ("values", np.asarray(raw[1], dtype=np.int64)),
                        note="the function that computed the reference, so its check is not "
                             "independent")


def igraph_peer(graph, source=None) -> PreparedPeer:
    g = igraph_graph(graph, directed=True)
    return PreparedPeer("igraph", "igraph.Graph.connected_components (strong)", "cpu",
                        lambda: g.connected_components(mode="strong").membership,
                        lambda raw: ("values", np.asarray(raw, dtype=np.int64)))


def networkx_peer(graph, source=None) -> PreparedPeer:
    import networkx as nx
    g = graph.to_networkx(directed=True)
    n = int(graph.num_vertices)

    def labels(components):
        out = np.empty(n, dtype=np.int64)
        for comp in components:
            members = np.fromiter(comp, dtype=np.int64)
            out[members] = members.min()
        return "values", out
    return PreparedPeer("networkx", "networkx.strongly_connected_components", "cpu",
                        lambda: list(nx.strongly_connected_components(g)), labels)

