"""Centrality: degree, closeness, betweenness (vertices and edges, by hops and by lengths),
eigenvector and Katz centrality, with NetworkX's arguments, answers and errors, on groute's
algorithms (``groute.closeness_centrality``, ``groute.betweenness_centrality``,
``groute.edge_betweenness_centrality``, ``groute.eigenvector_centrality``,
``groute.katz_centrality``) and, for the degrees, the engine's rows and one advance of the
operator API (:func:`~.support.degree_state`)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry
from groute.engines import make_engine

from ..devices import devices_for
from .support import degree_state, rule, weight_is_attribute, weights_of

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.centrality.tests.test_betweenness_centrality',
                   'networkx.algorithms.centrality.tests.test_closeness_centrality',
                   'networkx.algorithms.centrality.tests.test_degree_centrality',
                   'networkx.algorithms.centrality.tests.test_eigenvector_centrality',
                   'networkx.algorithms.centrality.tests.test_katz_centrality']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


# ----------------------------------------------------------------------------------------------
# what the rules share
def _simple(args):
    if args["G"].is_multigraph():
        return ("a multigraph's parallel edges count in NetworkX's degree; groute's "
                "conversion keeps one arc per pair of nodes")
    return True


#: below this share of the lengths' sum a length may vanish when added to a distance (float64's
#: half ulp is 2**-53 of a number; the margin covers the rounding of the sums themselves)
VANISHING_SHARE = 2.0 ** -50


def _exact_weights(G, weight, *, positive: bool):
    """The weights NetworkX reads (``weight``) in ``G.csr``'s arc order, float64 (None: hops);
    NotImplementedError (NetworkX runs the call) for weights that are not finite or, as
    ``positive`` asks, > 0 (else >= 0). Lengths > 0 are also declined where the least of them
    could vanish when added to a distance (no more than their sum): such lengths act as 0, and
    groute's betweenness refuses the ties they make, where NetworkX answers by its search
    order, as for lengths of 0."""
    w = weights_of(G, weight)
    if w is None:
        return None
    w = np.asarray(w, dtype=np.float64)[G.csr_arcs]
    bad = ~np.isfinite(w) | ((w <= 0) if positive else (w < 0))
    if bad.any():
        kind = "> 0" if positive else ">= 0"
        raise NotImplementedError(f"weights that are not finite and {kind} (e.g. {w[bad][0]!r}): "
                                  f"NetworkX runs the call")
    if positive and w.size and w.min() <= w.sum() * VANISHING_SHARE:
        raise NotImplementedError(f"a length of {float(w.min())!r} may vanish when added to a "
                                  f"distance of up to {float(w.sum())!r} in float64: NetworkX "
                                  f"runs the call")
    return w


def _sources(G, k, seed, *, draws_every_node: bool = False):
    """The sources NetworkX's betweenness draws, as the CSR's ids (None: every node). With
    ``k == len(G)`` NetworkX's vertex betweenness takes every node and leaves the generator
    alone; its edge betweenness (``draws_every_node``) still draws them all, which moves the
    caller's random state: drawn here too."""
    if k == len(G) and not draws_every_node:
        k = None
    sources = None if k is None else seed.sample(list(G.nodes), k)
    if sources is None or len(sources) == len(G):
        return None
    return [G.csr.file_id_of(G.position(u)) for u in sources]


def _by_node(G, values):
    return dict(zip(G.nodes, np.asarray(values, dtype=np.float64).tolist()))


# ----------------------------------------------------------------------------------------------
# degrees
def _degrees(G, *, out: bool, into: bool) -> np.ndarray:
    """Every node's out-degree (``out``) plus its in-degree (``into``), by position, counted on
    the devices (:func:`~.support.degree_state`); an undirected graph's self-loop, listed once
    in its row, counts twice in NetworkX's degree."""
    g = G.csr
    with devices_for(g, "operators") as (ctx, partition):
        with make_engine(g, "bsp", ctx=ctx, partition=partition) as eng:
            degree_state(eng, out=out, into=into)
            degree = eng.gather("count").astype(np.int64)
    if not G.is_directed() and G.has_self_loops:
        loops = G.arc_rows[G.arc_rows == G.adjacency_indices]
        degree += np.bincount(loops, minlength=len(G))
    return degree


def _centrality(G, degree):
    if len(G) <= 1:
        return {u: 1 for u in G.nodes}
    return dict(zip(G.nodes, (degree * (1.0 / (len(G) - 1.0))).tolist()))


@rule(_simple)
def degree_centrality(G):
    """NetworkX's ``d / (n - 1)`` of every node's degree (a directed graph's in plus out)."""
    if len(G) <= 1:
        return _centrality(G, None)
    return _centrality(G, _degrees(G, out=True, into=G.is_directed()))


@rule(_simple)
def in_degree_centrality(G):
    if len(G) <= 1:
        return _centrality(G, None)
    return _centrality(G, _degrees(G, out=False, into=True))


@rule(_simple)
def out_degree_centrality(G):
    if len(G) <= 1:
        return _centrality(G, None)
    return _centrality(G, _degrees(G, out=True, into=False))


# ----------------------------------------------------------------------------------------------
# closeness
@rule(lambda args: weight_is_attribute({"weight": args["distance"]}))
def closeness_centrality(G, u=None, distance=None, wf_improved=True):
    """groute's closeness: 64-source breadth-first batches, or by lengths (>= 0, exact
    float64) Bellman-Ford rounds on the subdivided graph; with ``u``, one search over the
    in-arcs."""
    if u is not None and u not in G:
        if distance is not None:
            hash(u)         # NetworkX's TypeError for an unhashable u, where it reads lengths
        raise (nx.NodeNotFound(f"Source {u} is not in G") if distance is None else
               nx.NodeNotFound(f"Node {u} not found in graph"))
    if not len(G):
        return {}
    w = _exact_weights(G, distance, positive=False)
    run = registry.function("closeness_centrality")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, None if u is None else G.csr.file_id_of(G.position(u)),
                     None if w is None else distance, bool(wf_improved), arc_weights=w,
                     ctx=ctx, partition=partition)
    return result if u is not None else _by_node(G, result.values)


# ----------------------------------------------------------------------------------------------
# betweenness
@rule(weight_is_attribute)
def betweenness_centrality(G, k=None, normalized=True, weight=None, endpoints=False,
                           seed=None):
    """Brandes' scores from groute (by lengths > 0: on the subdivided graph), with NetworkX's
    sources: ``seed`` comes as NetworkX's ``py_random_state`` made it (a ``random.Random``, or
    its wrapper of a NumPy generator), and the sample is drawn by the very call NetworkX makes,
    ``seed.sample(list(G), k)``, so that the sources, the random state left behind and the
    errors of a bad ``k`` (ValueError) are NetworkX's. A sample is rescaled by NetworkX's rule
    (``k = 0``: its ZeroDivisionError). A multigraph's parallel edges are one edge here, as in
    NetworkX's searches (by lengths, the least)."""
    w = _exact_weights(G, weight, positive=True)    # declined before NetworkX's seed is drawn
    sources = _sources(G, k, seed)
    if not len(G):
        return {}
    run = registry.function("betweenness_centrality")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, None, normalized, None if w is None else weight, endpoints,
                     sources=sources, arc_weights=w, ctx=ctx, partition=partition)
    return _by_node(G, result.values)


def _edge_rule(args):
    if args["G"].is_multigraph():
        return ("NetworkX keys a multigraph's edge scores by edge key; groute's conversion "
                "keeps one arc per pair of nodes")
    return weight_is_attribute(args)


@rule(_edge_rule)
def edge_betweenness_centrality(G, k=None, normalized=True, weight=None, seed=None):
    """groute's edge betweenness (Brandes on the subdivided graph), NetworkX's sources as
    :func:`betweenness_centrality` draws them, keyed and ordered as ``G.edges()``."""
    w = _exact_weights(G, weight, positive=True)    # declined before NetworkX's seed is drawn
    sources = _sources(G, k, seed, draws_every_node=True)
    tails = G.arc_rows
    heads = G.adjacency_indices
    once = slice(None) if G.is_directed() else tails <= heads
    edges = list(zip(G.labels_of(tails[once]), G.labels_of(heads[once])))
    if not edges:
        if k == 0 and len(G) >= 2:      # NetworkX's rescaling divides by the k sources
            raise ZeroDivisionError("division by zero")
        return {}
    run = registry.function("edge_betweenness_centrality")
    with devices_for(G.csr, "operators") as (ctx, partition):
        scores = run(G.csr, None, normalized, None if w is None else weight, sources=sources,
                     arc_weights=w, ctx=ctx, partition=partition)
    return {e: scores[e] for e in edges}


# ----------------------------------------------------------------------------------------------
# eigenvector and Katz
def _whole_dict(value, G) -> bool:
    """``value`` is a dict keyed by exactly the nodes of ``G`` (NetworkX's power iterations
    read it so; anything else fails there)."""
    return isinstance(value, dict) and value.keys() == set(G)


def _count(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0


def _number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, bool)


def _eigenvector_rule(args):
    if not _count(args["max_iter"]):
        return "max_iter that is not an int >= 0"
    if not _number(args["tol"]):
        return "tol that is not a number"
    if args["nstart"] is not None and not _whole_dict(args["nstart"], args["G"]):
        return "an nstart that is not a dict of every node"
    return weight_is_attribute(args)


@rule(_eigenvector_rule)
def eigenvector_centrality(G, max_iter=100, tol=1.0e-6, nstart=None, weight=None):
    """groute's eigenvector centrality: NetworkX's power iteration and stopping rule, in
    float64 (weights exact)."""
    if len(G) == 0:
        raise nx.NetworkXPointlessConcept("cannot compute centrality for the null graph")
    start = None
    if nstart is not None:
        if all(v == 0 for v in nstart.values()):
            raise nx.NetworkXError("initial vector cannot have all zero values")
        total = sum(nstart.values())
        start = np.array([nstart[u] / total for u in G.nodes], dtype=np.float64)
    w = weights_of(G, weight)
    if w is not None:
        w = np.asarray(w, dtype=np.float64)[G.csr_arcs]
        if not bool(np.all(np.isfinite(w))):
            raise NotImplementedError("weights that are not finite: NetworkX runs the call")
    run = registry.function("eigenvector_centrality")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, max_iter, tol, start, None if w is None else weight,
                     arc_weights=w, ctx=ctx, partition=partition)
    return _by_node(G, result.values)


def _katz_rule(args):
    G, alpha, beta = args["G"], args["alpha"], args["beta"]
    if not _number(alpha) or not alpha >= 0:
        return "groute's Katz takes alpha >= 0"
    if not isinstance(beta, dict):
        try:
            float(beta)
        except (TypeError, ValueError):
            return "a beta that is neither a number nor a dict (NetworkX says why)"
    if not _count(args["max_iter"]):
        return "max_iter that is not an int >= 0"
    if not _number(args["tol"]) or not args["tol"] > 0:
        return "groute's Katz takes tol > 0"
    if args["nstart"] is not None and not _whole_dict(args["nstart"], G):
        return "an nstart that is not a dict of every node"
    return weight_is_attribute(args)


@rule(_katz_rule)
def katz_centrality(G, alpha=0.1, beta=1.0, max_iter=1000, tol=1.0e-6, nstart=None,
                    normalized=True, weight=None):
    """groute's Katz centrality (the linear iteration engine, BSP sweeps as NetworkX's
    iteration), NetworkX's errors, and the answer keyed in ``nstart``'s order when given, as
    NetworkX keys it."""
    if len(G) == 0:
        return {}
    if isinstance(beta, dict):
        if beta.keys() != set(G):
            raise nx.NetworkXError("beta dictionary must have a value for every node")
        beta = np.array([beta[u] for u in G.nodes], dtype=np.float64)
    else:
        beta = float(beta)
    if max_iter == 0:
        raise nx.PowerIterationFailedConvergence(max_iter)
    start = None if nstart is None else np.array([nstart[u] for u in G.nodes],
                                                 dtype=np.float64)
    w = weights_of(G, weight)
    if w is not None and w.size and not (bool(np.all(np.isfinite(w))) and float(w.min()) >= 0):
        raise NotImplementedError("weights that are negative or not finite: NetworkX runs the "
                                  "call")
    run = registry.function("katz_centrality")
    with devices_for(G.csr, "iterate") as (ctx, partition):
        result = run(G.csr, float(alpha), beta, int(max_iter), float(tol), start,
                     bool(normalized), None if w is None else weight, ctx=ctx,
                     partition=partition, mode="bsp")
    x = _by_node(G, result.values)
    return x if nstart is None else {u: x[u] for u in nstart}
