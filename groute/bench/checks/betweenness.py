"""Betweenness centrality from a given set of sources: a Brandes reference in NumPy and the
NetworkX and igraph peers, all handed the same sources.

The value of a vertex ``v`` is Brandes' dependency summed over the sources ``s`` (``v != s``):
``sum_s sum_t sigma_st(v) / sigma_st`` over shortest paths along the arcs, unweighted, neither
normalised nor halved (an undirected graph's CSR holds both arcs, so a path counts once per
source on it). Exact betweenness is this sum over every vertex; a benchmark of it would
be hours on the peers, so the harness passes a fixed sample of sources (``App.sources``).
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arcs_of_rows

from ..peers import PeerSkipped, PreparedPeer, as_array, igraph_graph
from .common import csr_bytes, host_csr

#: NetworkX does one pure-Python search per source: skipped above this many arcs x sources
#: (about a minute of it)
NETWORKX_MAX_ARC_SOURCES = 20_000_000


def reference(graph, source) -> np.ndarray:
    """Brandes' accumulation from each of ``source`` (an array of vertices), float64."""
    indptr, indices = host_csr(graph)
    n = int(graph.num_vertices)
    bc = np.zeros(n, dtype=np.float64)
    for s in np.unique(np.asarray(source, dtype=np.int64).reshape(-1)):
        bc += _dependency(indptr, indices, n, int(s))
    return bc


def _dependency(indptr, indices, n, s) -> np.ndarray:
    """``delta_s(v)`` for every ``v`` (0 at ``s``): a level-synchronous BFS counting shortest
    paths, then the dependencies accumulated back up its levels."""
    dist = np.full(n, -1, dtype=np.int64)
    sigma = np.zeros(n, dtype=np.float64)
    dist[s], sigma[s] = 0, 1.0
    frontier, depth, dag = np.array([s], dtype=np.int64), 0, []
    while frontier.size:
        arcs = arcs_of_rows(indptr, frontier)
        u = np.repeat(frontier, indptr[frontier + 1] - indptr[frontier])
        v = indices[arcs]
        fresh = np.unique(v[dist[v] < 0])
        dist[fresh] = depth + 1
        on_path = dist[v] == depth + 1
        u, v = u[on_path], v[on_path]
        np.add.at(sigma, v, sigma[u])
        dag.append((u, v))
        frontier, depth = fresh, depth + 1
    delta = np.zeros(n, dtype=np.float64)
    for u, v in reversed(dag):
        np.add.at(delta, u, sigma[u] / sigma[v] * (1.0 + delta[v]))
    delta[s] = 0.0
    return delta


def floor_bytes(graph, sources: int = 1) -> int:
    """Per source a forward search and a backward accumulation each read the CSR once; one
    8-byte value per vertex is written."""
    return 2 * max(1, sources) * csr_bytes(graph) + 8 * int(graph.num_vertices)


def networkx_peer(graph, source) -> PreparedPeer:
    import networkx as nx
    sources = np.unique(np.asarray(source, dtype=np.int64)).tolist()
    if graph.num_edges * len(sources) > NETWORKX_MAX_ARC_SOURCES:
        raise PeerSkipped(f"NetworkX searches in pure Python: skipped above "
                          f"{NETWORKX_MAX_ARC_SOURCES:,} arcs x sources (this run: "
                          f"{graph.num_edges:,} x {len(sources)})")
    g = graph.to_networkx()
    n = int(graph.num_vertices)
    scale = 1.0 if graph.directed else 2.0      # NetworkX halves an undirected graph's sums

    def answer(raw):
        return "values", as_array(raw, n, 0.0, np.float64) * scale
    return PreparedPeer("networkx", "networkx.betweenness_centrality_subset (given sources)", "cpu",
                        lambda: nx.betweenness_centrality_subset(g, sources, list(g),
                                                                 normalized=False), answer)


def igraph_peer(graph, source) -> PreparedPeer:
    sources = np.unique(np.asarray(source, dtype=np.int64)).tolist()
    g = igraph_graph(graph, directed=True)
    return PreparedPeer("igraph", "igraph.Graph.betweenness (given sources)", "cpu",
                        lambda: g.betweenness(directed=True, sources=sources),
                        lambda raw: ("values", np.asarray(raw, dtype=np.float64)))

