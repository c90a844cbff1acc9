"""Centrality: betweenness from groute's Brandes algorithm, with NetworkX's sources."""
from __future__ import annotations

import numpy as np

from groute import registry

from ..devices import devices_for
from .support import rule

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.centrality.tests.test_betweenness_centrality']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def _unweighted(args):
    if args["weight"] is not None:
        return "weighted betweenness (Dijkstra) has no groute form yet"
    return True


@rule(_unweighted)
def betweenness_centrality(G, k=None, normalized=True, weight=None, endpoints=False,
                           seed=None):
    """Brandes' scores from groute, with NetworkX's sources: ``seed`` comes as NetworkX's
    ``py_random_state`` made it (a ``random.Random``, or its wrapper of a NumPy generator),
    and the sample is drawn by the very call NetworkX makes, ``seed.sample(list(G), k)``, so
    that the sources, the random state left behind and the errors of a bad ``k`` (ValueError)
    are NetworkX's. A sample is rescaled by NetworkX's rule (``k = 0``: its ZeroDivisionError).
    A multigraph's parallel edges are one edge here, as in NetworkX's breadth-first search."""
    if k == len(G):     # NetworkX: every node, and the generator left alone
        k = None
    sources = None if k is None else seed.sample(list(G.nodes), k)
    if not len(G):
        return {}
    if sources is not None:
        sources = [G.csr.file_id_of(G.position(u)) for u in sources]
    Betweenness = registry.algorithm_named("betweenness").solver
    with devices_for(G.csr, "operators") as (ctx, partition):
        with Betweenness(G.csr, ctx=ctx, partition=partition) as solver:
            result = solver.run(sources, normalized=normalized, endpoints=endpoints)
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.float64).tolist()))
