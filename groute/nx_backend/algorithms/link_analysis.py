"""Link analysis: PageRank and HITS with NetworkX's parameters on groute's PageRank and HITS."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry
from groute.runtime.context import resolve_backend

from ..devices import devices_for, settings
from .support import rule, weights_of

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.link_analysis.tests.test_pagerank',
                   'networkx.algorithms.link_analysis.tests.test_hits']

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
    G = args["G"]
    for name in ("personalization", "dangling"):
        if args[name] is not None and not isinstance(args[name], dict):
            return f"{name} that is not a dict"
        if args[name] is not None and not all(
                _nonnegative(v) for u, v in args[name].items() if u in G):
            return (f"{name} with weights that are negative or not finite numbers (NetworkX "
                    f"takes them as they are)")
    if G.is_multigraph():
        return "parallel edges add up in NetworkX's PageRank; groute's counts one"
    return True


def _nonnegative(value) -> bool:
    """Whether a ``personalization`` or ``dangling`` weight is a finite number >= 0, what
    groute's PageRank takes."""
    try:
        return bool(np.isfinite(value) and value >= 0)
    except TypeError:
        return False


def _by_node(G, values):
    """A ``personalization`` or ``dangling`` dict as NetworkX reads it: the keys that
    are nodes of ``G`` (NetworkX reads only those; missing ones are 0)."""
    return None if values is None else {u: v for u, v in values.items() if u in G}


#: the least L1 change of the ranks (relative to their sum) that PageRank's float32 iteration on
#: a GPU can tell from its rounding (a few units in the last place of every rank together)
FLOAT32_L1 = 1e-6


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
    if N * float(tol) < FLOAT32_L1 and resolve_backend(settings().backend) == "cuda":
        raise NotImplementedError(
            f"tol={tol:g} asks for an L1 change of {N * float(tol):.3g}, below what PageRank in "
            f"float32 on a GPU reaches ({FLOAT32_L1:g}): NetworkX runs the call")
    dangling = _by_node(G, dangling)
    if dangling is not None and not sum(dangling.values()) > 0:
        # NetworkX divides the dangling weights by their sum: 0 / 0 makes every rank NaN,
        # and its iteration never converges (groute's PageRank refuses the zeros outright)
        raise nx.PowerIterationFailedConvergence(max_iter)
    with devices_for(G.csr, "iterate") as (ctx, partition):
        # NetworkX's power iteration is BSP; groute raises NetworkX's
        # PowerIterationFailedConvergence after max_iter iterations
        with PageRank(G.csr, ctx=ctx, partition=partition, mode="bsp", alpha=float(alpha),
                      personalization=_by_node(G, personalization), max_iter=int(max_iter),
                      tol=float(tol),
                      weight=None if w is None else weight,
                      dangling=dangling) as solver:
            result = solver.run()
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.float64).tolist()))


def _hits_rule(args):
    if args["nstart"] is not None:
        return ("nstart changes no answer, only the iterations, and groute's power iteration "
                "starts from every node alike")
    if args["normalized"] is not True:
        return ("unnormalised, NetworkX's vectors carry the sign ARPACK happens to give "
                "them")
    G = args["G"]
    if G.is_multigraph():
        return "parallel edges add up in NetworkX's HITS; groute's conversion keeps one arc"
    if len(G) == 1:
        return "NetworkX's ARPACK needs two nodes (it raises its own error)"
    max_iter, tol = args["max_iter"], args["tol"]
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)):
        return "max_iter that is not an int"
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)):
        return "tol that is not a number"
    return True


@rule(_hits_rule)
def hits(G, max_iter=100, tol=1.0e-8, nstart=None, normalized=True):
    """groute's HITS: NetworkX's own power iteration of ``A^T A`` (``_hits_scipy``'s rule and
    iteration count) where NetworkX asks ARPACK for the singular vector; the same vectors
    wherever the largest singular value is simple."""
    if len(G) == 0:
        return {}, {}
    if max_iter <= 0:
        raise nx.PowerIterationFailedConvergence(max_iter)
    w = weights_of(G, "weight")
    if w is not None:
        w = np.asarray(w, dtype=np.float64)[G.csr_arcs]
    if G.csr.num_edges == 0 or (w is not None and not (bool(np.all(np.isfinite(w)))
                                                       and w.min() >= 0 and w.max() > 0)):
        raise NotImplementedError("no arcs, or weights that are negative, not finite or all 0: "
                                  "NetworkX runs the call (and says what ARPACK finds)")
    run = registry.function("hits")
    with devices_for(G.csr, "operators") as (ctx, partition):
        hubs, authorities = run(G.csr, int(max_iter), float(tol), arc_weights=w, ctx=ctx,
                                partition=partition)
    return (dict(zip(G.nodes, np.asarray(hubs.values, np.float64).tolist())),
            dict(zip(G.nodes, np.asarray(authorities.values, np.float64).tolist())))
