"""k-core (``groute.core_number``): a NumPy peeling reference and the NetworkX and igraph peers.

The core number is NetworkX's: a directed graph counts every arc at both of its ends. The
reference peels level by level with whole-frontier NumPy steps (a vertex leaves at level ``k``
once at most ``k`` neighbours are left), so it is O(arcs) plus a small cost per round, and
shares nothing with igraph's coreness, a peer (docs/BENCHMARKS.md says what it costs); NetworkX
(pure Python) would take minutes on the benchmark graphs' tens of millions of arcs and stays a
peer, run only on graphs small enough for it. scipy has no k-core, so it is no peer here.
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arc_rows, arcs_of_rows

from ..peers import PreparedPeer, adjacency, as_array, igraph_graph
from .common import csr_bytes, host_csr


def reference(graph, source=None) -> np.ndarray:
    """The core number of every vertex (int64), by peeling.

    Each round removes its whole frontier at once: every arc out of it costs its target one
    neighbour (``subtract.at``, repeated targets counted), and the targets now down to ``k``
    are the next round, made unique through a slot array rather than a sort, so a round costs
    the frontier's arcs and nothing per vertex of the graph (a grid peels in thousands of
    small rounds). Between levels only the vertices left are scanned."""
    n = int(graph.num_vertices)
    if graph.directed:          # both ends of every arc: a pair of opposite arcs counts twice
        a = adjacency(graph)
        a = (a + a.T).tocsr()
        a.sum_duplicates()
        indptr, indices = a.indptr.astype(np.int64), a.indices
        mult = a.data.astype(np.int64)     # arcs between the pair, counted with multiplicity
        degree = np.bincount(arc_rows(indptr, dtype=np.int64), weights=mult,
                             minlength=n).astype(np.int64)
    else:                       # each arc once per end already; a repeated arc counts again
        indptr, indices = host_csr(graph)
        mult = None
        degree = np.diff(indptr)
    core = np.full(n, -1, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    alive = np.arange(n, dtype=np.int64)
    k = 0
    while alive.size:
        k = max(k, int(degree[alive].min()))    # levels where nothing leaves are skipped
        frontier = alive[degree[alive] <= k]
        while frontier.size:
            core[frontier] = k
            arcs = arcs_of_rows(indptr, frontier)
            nbr = indices[arcs]
            keep = core[nbr] < 0
            nbr = nbr[keep]
            np.subtract.at(degree, nbr, 1 if mult is None else mult[arcs][keep])
            fallen = nbr[degree[nbr] <= k]
            order = np.arange(fallen.size)
            slot[fallen] = order    # whichever write wins, one occurrence of each matches
            frontier = fallen[slot[fallen] == order]
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

