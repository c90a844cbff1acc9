"""k-core (``groute.core_number``): a NumPy peeling reference and the NetworkX and igraph peers.

The core number is NetworkX's: a directed graph counts every arc at both of its ends. The
reference peels level by level with whole-frontier NumPy steps (a vertex leaves at level ``k``
once at most ``k`` neighbours are left), so it is O(arcs) plus a small cost per round; NetworkX
(pure Python) would take minutes on the benchmark graphs' tens of millions of arcs and stays a
peer, run only on graphs small enough for it. scipy has no k-core, so it is no peer here.
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arcs_of_rows

from ..peers import PreparedPeer, adjacency, as_array, igraph_graph
from .common import csr_bytes


def reference(graph, source=None) -> np.ndarray:
    """The core number of every vertex (int64), by peeling."""
    a = adjacency(graph)
    a.sum_duplicates()          # a repeated arc: one neighbour counted with its multiplicity
    if graph.directed:          # both ends of every arc: a pair of opposite arcs counts twice
        a = (a + a.T).tocsr()
    n = int(graph.num_vertices)
    indptr, indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    mult = a.data.astype(np.int64)
    degree = np.asarray(a.sum(axis=1)).ravel().astype(np.int64)
    core = np.full(n, -1, dtype=np.int64)
    alive = np.arange(n, dtype=np.int64)
    k = 0
    while alive.size:
        k = max(k, int(degree[alive].min()))    # levels where nothing leaves are skipped
        frontier = alive[degree[alive] <= k]
        while frontier.size:
            core[frontier] = k
            arcs = arcs_of_rows(indptr, frontier)
            nbr, times = indices[arcs], mult[arcs]
            keep = core[nbr] < 0
            nbr, times = nbr[keep], times[keep]
            np.subtract.at(degree, nbr, times)
            touched = np.unique(nbr)
            frontier = touched[degree[touched] <= k]
        alive = alive[core[alive] < 0]
    return core


def floor_bytes(graph) -> int:
    """Peeling reads the CSR about once and writes a 4-byte core number per vertex."""
    return csr_bytes(graph) + 4 * int(graph.num_vertices)


def networkx_peer(graph, source=None) -> PreparedPeer:
    import networkx as nx
    g = graph.to_networkx()
    n = int(graph.num_vertices)
    return PreparedPeer("networkx", "networkx.core_number", "cpu", lambda: nx.core_number(g),
                        lambda raw: ("values", as_array(raw, n, -1, np.int64)))


def igraph_peer(graph, source=None) -> PreparedPeer:
    g = igraph_graph(graph, directed=None)
    return PreparedPeer("igraph", "igraph.Graph.coreness (mode all)", "cpu",
                        lambda: g.coreness(mode="all"),
                        lambda raw: ("values", np.asarray(raw, dtype=np.int64)))

