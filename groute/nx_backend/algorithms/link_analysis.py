"""Link analysis: PageRank with NetworkX's parameters on groute's PageRank."""
from __future__ import annotations

import numpy as np

from groute import registry

from ..devices import devices_for
from .support import rule, weights_of

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.link_analysis.tests.test_pagerank']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def _plain_pagerank(args):
    alpha, tol, max_iter = args["alpha"], args["tol"], args["max_iter"]
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        return "groute's PageRank takes alpha in (0, 1)"
    if not isinstance(tol, (int, float)) or not tol > 0:
        return "groute's PageRank takes tol > 0"
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        return "groute's PageRank takes max_iter >= 1"
    if callable(args["weight"]):
        return "a weight function has no groute form"
    if args["nstart"] is not None:
        return ("nstart changes no answer, only the iterations, and groute's iteration (the "
                "leaky PageRank, NETWORKX.md) does not take NetworkX's from a start vector")
    for name in ("personalization", "dangling"):
        if args[name] is not None and not isinstance(args[name], dict):
            return f"{name} that is not a dict"
    G = args["G"]
    if G.is_multigraph():
        return "parallel edges add up in NetworkX's PageRank; groute's counts one"
    return True


def _by_node(G, values):
    """A ``personalization`` or ``dangling`` dict as NetworkX reads it: the keys that
    are nodes of ``G`` (NetworkX reads only those; missing ones are 0)."""
    return None if values is None else {u: v for u, v in values.items() if u in G}


@rule(_plain_pagerank)
def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1.0e-6, nstart=None,
             weight="weight", dangling=None):
    """groute's PageRank, whose parameters are NetworkX's (the weights the conversion kept
    when ``weight`` names them; NetworkX's rule of ``N * tol``)."""
    PageRank = registry.algorithm_named("pr").solver
    N = len(G)
    if N == 0:
        return {}
    w = weights_of(G, weight)
    if w is not None and w.size and not (bool(np.all(np.isfinite(w))) and float(w.min()) >= 0):
        raise NotImplementedError("weights that are negative or not finite: NetworkX runs the "
                                  "call")
    with devices_for(G.csr, "iterate") as (ctx, partition):
        # NetworkX's power iteration is BSP; groute raises NetworkX's
        # PowerIterationFailedConvergence after max_iter iterations
        with PageRank(G.csr, ctx=ctx, partition=partition, mode="bsp", alpha=float(alpha),
                      personalization=_by_node(G, personalization), max_iter=int(max_iter),
                      tol=float(tol),
                      weight=None if w is None else weight,
                      dangling=_by_node(G, dangling)) as solver:
            result = solver.run()
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.float64).tolist()))
