"""The NetworkX functions groute runs, with NetworkX's signatures, answers and errors.

Each function takes a :class:`~.graph.GrouteGraph` (NetworkX converted the caller's graph) and
the caller's other arguments, and answers as NetworkX does: the same dict keys and value
types, the same order where NetworkX's order follows from the answer, the same exceptions.
Where groute cannot honour an argument, a function's ``can_run`` rule says why (NetworkX then
runs the call itself); where only the converted data shows it (a weighted PageRank, real
weights), the function raises NotImplementedError, which NetworkX's dispatcher also answers
by running the call itself. Which arguments are honoured is listed in :mod:`.info`.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import networkx as nx
import numpy as np

from groute import registry

from .devices import devices_for
from .order import layers_in_order

#: the largest sum of integral weights float32 distances hold exactly (2**24)
FLOAT32_EXACT = 1 << 24
#: the largest sum of integer weights int32 distances hold (2**31 - 1)
INT32_MAX = (1 << 31) - 1


def rule(check):
    """Attach ``check(arguments) -> True | reason`` as the function's ``can_run`` rule;
    ``arguments`` are the call's arguments by name, defaults filled in."""
    def attach(fn):
        fn.can_run = check
        return fn
    return attach


# ------------------------------------------------------------------------------------------------
# runs on the devices
# ------------------------------------------------------------------------------------------------
def _depths(G, source: int) -> np.ndarray:
    """Hops from position ``source`` (groute's BFS; -1: not reached)."""
    BFS = registry.app("bfs").solver_class()
    with devices_for(len(G)) as (ctx, partition):
        with BFS(G.csr, ctx=ctx, partition=partition) as solver:
            return np.asarray(solver.run(G.csr.file_id_of(source)).values, dtype=np.int64)


def _distances(G, source: int) -> np.ndarray:
    """Weighted distances from position ``source`` (groute's SSSP; inf: not reached)."""
    SSSP = registry.app("sssp").solver_class()
    with devices_for(len(G)) as (ctx, partition):
        with SSSP(G.csr, ctx=ctx, partition=partition) as solver:
            return np.asarray(solver.run(G.csr.file_id_of(source)).values, dtype=np.float64)


def _components(G) -> np.ndarray:
    """Every position's component label: the smallest position in its (weak) component."""
    CC = registry.app("cc").solver_class()
    with devices_for(len(G)) as (ctx, _):
        with CC(G.csr, ctx=ctx) as solver:
            return np.asarray(solver.run().values, dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# breadth-first
# ------------------------------------------------------------------------------------------------
def _layers(G, source: int, last=None) -> list[np.ndarray]:
    depth = _depths(G, source)
    return layers_in_order(depth, np.asarray(G.csr.indptr), G.adjacency_indices,
                           np.array([source]), last)


def _levels_within(cutoff) -> int | None:
    """The last BFS level NetworkX reaches with ``cutoff`` (it expands while cutoff > level)."""
    if cutoff is None:
        return None
    if cutoff != cutoff:        # NaN: no comparison holds, only the source
        return 0
    return max(0, math.ceil(cutoff)) if cutoff != math.inf else None


def _lengths(G, layers) -> dict:
    out = {}
    for d, layer in enumerate(layers):
        out.update(dict.fromkeys(G.labels_of(layer), d))
    return out


def single_source_shortest_path_length(G, source, cutoff=None):
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} is not in G")
    return _lengths(G, _layers(G, G.position(source), _levels_within(cutoff)))


def _one_source(args):
    sources = args["sources"]
    G = args["G"]
    if sources in G:
        return True
    if isinstance(sources, Iterator):
        return "sources given as an iterator (looking would consume it)"
    try:
        many = set(sources)
    except TypeError:
        return True     # NetworkX raises for it; so do we
    return True if len(many) <= 1 else "groute's BFS runs from one source"


@rule(_one_source)
def bfs_layers(G, sources):
    if sources in G:
        sources = [sources]
    visited = set(sources)
    current = list(visited)
    for source in current:
        if source not in G:
            raise nx.NetworkXError(f"The node {source} is not in the graph.")
    if not current:
        return
    yield current            # the source as the caller named it, as NetworkX yields it
    for layer in _layers(G, G.position(current[0]))[1:]:
        yield G.labels_of(layer)


# ------------------------------------------------------------------------------------------------
# shortest path lengths with weights
# ------------------------------------------------------------------------------------------------
def _weight_is_attribute(args):
    return "a weight function has no groute form" if callable(args["weight"]) else True


def _weights(G, weight):
    """The weights a call with ``weight`` reads from ``G``, None when unweighted. NetworkX may
    hand a call that reads no weight a graph converted with weights (its cache serves any
    conversion that holds what the call needs), so the call's ``weight`` decides."""
    if weight is None:
        return None
    if G.weight != weight:
        raise NotImplementedError(f"the graph was converted with weight={G.weight!r}, the call "
                                  f"reads {weight!r}")
    return G.weights


def _exact_weights(G, weight) -> str:
    """How groute sums ``G``'s ``weight`` exactly: "int" (integers), "float" (integral
    reals), "unit" (no weights); raises NotImplementedError when it cannot (negative, real or
    too big weights: NetworkX runs the call, with its own errors for negative ones)."""
    w = _weights(G, weight)
    if w is None:
        return "unit"
    if w.dtype.kind == "b":
        raise NotImplementedError("boolean weights: NetworkX runs the call")
    if w.size and not bool(np.all(np.isfinite(w))):
        raise NotImplementedError("weights that are not finite: NetworkX runs the call")
    if w.size and float(w.min()) < 0:
        raise NotImplementedError("negative weights: NetworkX runs the call (and says what it "
                                  "finds)")
    total = float(w.sum()) if w.dtype.kind == "f" else int(w.sum())
    if w.dtype.kind == "f":
        if not bool(np.all(w == np.floor(w))) or total >= FLOAT32_EXACT:
            raise NotImplementedError("real weights (groute sums them in float32): NetworkX "
                                      "runs the call")
        return "float"
    if total > INT32_MAX:
        raise NotImplementedError("integer weights whose sum passes int32: NetworkX runs the call")
    return "int"


def _dijkstra_lengths(G, source, cutoff, weight):
    start = G.position(source)
    kind = _exact_weights(G, weight)
    if kind == "unit":      # Dijkstra with unit weights visits in BFS order
        last = None if cutoff is None else _dijkstra_levels(cutoff)
        return _lengths(G, _layers(G, start, last))
    dist = _distances(G, start)
    within = np.isfinite(dist) if cutoff is None else np.isfinite(dist) & ~(dist > cutoff)
    reached = np.flatnonzero(within)
    reached = reached[reached != start]
    reached = reached[np.argsort(dist[reached], kind="stable")]
    values = dist[reached].astype(np.int64).tolist() if kind == "int" else dist[reached].tolist()
    out = {source: 0}
    out.update(zip(G.labels_of(reached), values))
    return out


def _dijkstra_levels(cutoff) -> int:
    """The last unit-weight level within a Dijkstra ``cutoff`` (NetworkX skips a distance
    greater than it, so a NaN cutoff skips none)."""
    if cutoff != cutoff:
        return None
    return max(0, math.floor(cutoff)) if cutoff != math.inf else None


@rule(_weight_is_attribute)
def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
    if source not in G:
        raise nx.NodeNotFound(f"Node {source} not found in graph")
    return _dijkstra_lengths(G, source, cutoff, weight)


def _from_source(args):
    if args["source"] is None or args["target"] is not None:
        return "groute computes lengths from one source to every node"
    if args["method"] not in ("dijkstra", "bellman-ford"):
        return True     # NetworkX's ValueError, raised below
    if args["weight"] is not None and args["method"] != "dijkstra":
        return "method='bellman-ford' (negative weights): NetworkX runs it"
    return _weight_is_attribute(args)


@rule(_from_source)
def shortest_path_length(G, source=None, target=None, weight=None, method="dijkstra"):
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    if weight is None:
        return single_source_shortest_path_length(G, source)
    return single_source_dijkstra_path_length(G, source, weight=weight)


# ------------------------------------------------------------------------------------------------
# components
# ------------------------------------------------------------------------------------------------
def _component_sets(G):
    """The components as sets, in NetworkX's order (by each one's first node in ``G``)."""
    labels = _components(G)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    for members in np.split(order, bounds):
        yield set(G.labels_of(members))


def connected_components(G):
    if len(G):
        yield from _component_sets(G)


def weakly_connected_components(G):
    if len(G):
        yield from _component_sets(G)


def number_connected_components(G):
    if not len(G):
        return 0
    labels = _components(G)
    return int(np.count_nonzero(labels == np.arange(labels.shape[0])))


def is_connected(G):
    if not len(G):
        raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    return bool(np.all(_components(G) == 0))


def node_connected_component(G, n):
    hash(n)         # an unhashable node: TypeError, as NetworkX's set of seen nodes raises
    if n not in G:
        raise KeyError(n)
    depth = _depths(G, G.position(n))
    return set(G.labels_of(np.flatnonzero(depth >= 0)))


# ------------------------------------------------------------------------------------------------
# PageRank
# ------------------------------------------------------------------------------------------------
def _plain_pagerank(args):
    for name in ("personalization", "nstart", "dangling"):
        if args[name] is not None:
            return f"{name} has no groute form"
    alpha, tol, max_iter = args["alpha"], args["tol"], args["max_iter"]
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        return "groute's PageRank takes alpha in (0, 1)"
    if not isinstance(tol, (int, float)) or not tol > 0:
        return "groute's PageRank takes tol > 0"
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        return "groute's PageRank takes max_iter >= 1"
    if callable(args["weight"]):
        return "a weight function has no groute form"
    G = args["G"]
    if G.is_multigraph():
        return "parallel edges add up in NetworkX's PageRank; groute's counts one"
    return True


@rule(_plain_pagerank)
def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1.0e-6, nstart=None,
             weight="weight", dangling=None):
    PageRank = registry.app("pr").solver_class()
    N = len(G)
    if N == 0:
        return {}
    w = _weights(G, weight)
    if w is not None and not (w.size == 0 or (float(w.min()) > 0 and bool(np.all(w == w[0])))):
        raise NotImplementedError("edges of different weights: NetworkX runs the call "
                                  "(groute's PageRank follows every out-edge alike)")
    with devices_for(N) as (ctx, partition):
        # NetworkX's power iteration is BSP: it stops when the L1 change of the (unit-sum)
        # vector is below N * tol, or fails after max_iter iterations
        with PageRank(G.csr, ctx=ctx, partition=partition, mode="bsp", damping=float(alpha),
                      tol=float(N * tol), max_iterations=int(max_iter)) as solver:
            result = solver.run()
    if not result.stats["converged"]:
        raise nx.PowerIterationFailedConvergence(max_iter)
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.float64).tolist()))
