"""Building blocks the per-app checks share: the host CSR and its size. The graph as the peers
take it (a scipy matrix, a python-igraph graph, answers as arrays) comes from
:mod:`groute.bench.peers`, as the built-in apps' peers build it; NetworkX graphs and the arcs
of rows from the graph layer (``CSRGraph.to_networkx``, ``groute.graph.arcs.arcs_of_rows``)."""
from __future__ import annotations

import numpy as np


def host_csr(graph):
    """``(indptr, indices)`` of ``graph`` as int64 NumPy arrays."""
    return (np.asarray(graph.indptr, dtype=np.int64), np.asarray(graph.indices, dtype=np.int64))


def csr_bytes(graph) -> int:
    """Bytes of the CSR's ``indptr`` and ``indices`` as the graph holds them."""
    return int(np.asarray(graph.indptr).nbytes + np.asarray(graph.indices).nbytes)
