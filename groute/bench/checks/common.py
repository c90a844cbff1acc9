"""Building blocks the per-app checks share: the graph as a scipy matrix, a python-igraph or a
NetworkX graph (built untimed, as a user would before calling the library), and the arcs of a
set of rows (NetworkX graphs and the arcs of rows come from the graph layer:
``CSRGraph.to_networkx``, ``groute.graph.arcs.arcs_of_rows``)."""
from __future__ import annotations

import numpy as np

from ..peers import PeerSkipped


def host_csr(graph):
    """``(indptr, indices)`` of ``graph`` as int64 NumPy arrays."""
    return (np.asarray(graph.indptr, dtype=np.int64), np.asarray(graph.indices, dtype=np.int64))


def pattern(graph):
    """The adjacency pattern as a scipy CSR matrix of ones (a repeated arc sums)."""
    import scipy.sparse as sp
    indptr, indices = host_csr(graph)
    n = int(graph.num_vertices)
    a = sp.csr_matrix((np.ones(indices.size, dtype=np.int64), indices, indptr), shape=(n, n))
    a.sum_duplicates()
    return a


def source_list(graph):
    """The source vertex of every arc, in CSR order."""
    indptr, _ = host_csr(graph)
    return np.repeat(np.arange(graph.num_vertices, dtype=np.int64), np.diff(indptr))


def igraph_graph(graph, *, directed: bool | None = None):
    """A python-igraph graph: undirected with each edge once for an undirected ``graph`` (its
    CSR holds both arcs), directed with every arc otherwise; ``directed=True``: directed with
    every arc whatever the graph is (an undirected edge is then a pair of opposite arcs)."""
    import importlib.util
    if importlib.util.find_spec("igraph") is None:
        raise PeerSkipped("igraph is not installed (pip install python-igraph to add it as a peer)")
    import igraph as ig
    src, dst = source_list(graph), host_csr(graph)[1]
    directed = bool(graph.directed) if directed is None else directed
    if not directed:
        keep = src <= dst
        src, dst = src[keep], dst[keep]
    return ig.Graph(n=int(graph.num_vertices), edges=np.column_stack([src, dst]),
                    directed=directed)


def as_array(mapping, n, fill, dtype):
    """A ``{vertex: value}`` dict as an array over ``0..n-1``."""
    out = np.full(n, fill, dtype=dtype)
    if mapping:
        keys = np.fromiter(mapping.keys(), dtype=np.int64, count=len(mapping))
        out[keys] = np.fromiter(mapping.values(), dtype=dtype, count=len(mapping))
    return out


def csr_bytes(graph) -> int:
    """Bytes of the CSR's ``indptr`` and ``indices`` as the graph holds them."""
    return int(np.asarray(graph.indptr).nbytes + np.asarray(graph.indices).nbytes)
