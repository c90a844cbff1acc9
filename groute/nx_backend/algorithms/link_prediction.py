"""Link prediction: Jaccard coefficients from the neighbours pairs of nodes share, counted on
the devices by the intersect operator (:meth:`groute.operators.Intersection.common`)."""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from groute.operators import Intersection

from ..devices import devices_for

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tests.test_link_prediction']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}

#: pairs sent to the devices at once (the answer is a generator, as NetworkX's: it is computed
#: a batch at a time, as it is read)
BATCH = 1 << 16


def _non_edges(G):
    """NetworkX's ``non_edges`` of an undirected graph, in its order (the same set
    operations on the same labels)."""
    indptr = np.asarray(G.csr.indptr)
    nodes = set(G.nodes)
    while nodes:
        u = nodes.pop()
        i = G.position(u)
        for v in nodes - set(G.labels_of(G.adjacency_indices[indptr[i]:indptr[i + 1]])):
            yield (u, v)


def _predictions(G, pairs, predict):
    """``(u, v, predict(shared, both, degree_u, degree_v))`` for each pair, a batch at a time:
    ``shared`` the neighbours ``u`` and ``v`` share but themselves (NetworkX's
    ``common_neighbors``), ``both`` all they share."""
    degree = np.diff(np.asarray(G.csr.indptr)).tolist()
    with devices_for(G.csr, "operators") as (ctx, _):
        with Intersection(G.csr, ctx=ctx) as rows:
            while batch := list(itertools.islice(pairs, BATCH)):
                a = np.fromiter((G.position(u) for u, _ in batch), np.int64, len(batch))
                b = np.fromiter((G.position(v) for _, v in batch), np.int64, len(batch))
                shared = rows.common(a, b, exclude_ends=True).tolist()
                both = rows.common(a, b, exclude_ends=False).tolist()
                for (u, v), x, y, i, j in zip(batch, shared, both, a.tolist(), b.tolist()):
                    yield u, v, predict(x, y, degree[i], degree[j])


def _jaccard(shared, both, du, dv):
    union = du + dv - both
    return 0 if union == 0 else shared / union


def jaccard_coefficient(G, ebunch=None):
    """NetworkX's generator: ``ebunch`` checked first (NodeNotFound), then read again for the
    pairs, as NetworkX reads it (an iterator given is spent by the check); by default every
    non-edge in NetworkX's order."""
    if ebunch is None:
        ebunch = _non_edges(G)
    else:
        for u, v in ebunch:
            if u not in G:
                raise nx.NodeNotFound(f"Node {u} not in G.")
            if v not in G:
                raise nx.NodeNotFound(f"Node {v} not in G.")
    return _predictions(G, iter(ebunch), _jaccard)
