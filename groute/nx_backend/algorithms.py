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
from groute.graph.arcs import arcs_of_rows
from groute.graph.reference import label_groups

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
    BFS = registry.algorithm_named("bfs").solver
    with devices_for(G.csr, "relax") as (ctx, partition):
        with BFS(G.csr, ctx=ctx, partition=partition) as solver:
            return np.asarray(solver.run(G.csr.file_id_of(source)).values, dtype=np.int64)


def _distances(G, source: int) -> np.ndarray:
    """Weighted distances from position ``source`` (groute's SSSP; inf: not reached)."""
    SSSP = registry.algorithm_named("sssp").solver
    with devices_for(G.csr, "relax") as (ctx, partition):
        with SSSP(G.csr, ctx=ctx, partition=partition) as solver:
            return np.asarray(solver.run(G.csr.file_id_of(source)).values, dtype=np.float64)


def _components(G) -> np.ndarray:
    """Every position's component label: the smallest position in its (weak) component (the
    library's connected components engine, imported on first use like the apps' solvers)."""
    from groute.engines.components import ComponentsSolver
    with devices_for(G.csr, "components") as (ctx, _):
        with ComponentsSolver(G.csr, ctx=ctx) as solver:
            return np.asarray(solver.run().values, dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# breadth-first
# ------------------------------------------------------------------------------------------------
def _layers(G, source: int, last=None, parents=None) -> list[np.ndarray]:
    return _layers_from(G, _depths(G, source), source, last, parents)


def _layers_from(G, depth, source: int, last=None, parents=None) -> list[np.ndarray]:
    return layers_in_order(depth, np.asarray(G.csr.indptr), G.adjacency_indices,
                           np.array([source]), last, parents)


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


def _not_a_node(G, node):
    """NetworkX's error for a BFS from ``node`` that is not in ``G`` (``G.neighbors``'s)."""
    hash(node)      # an unhashable node: TypeError, as NetworkX's set of seen nodes raises
    kind = "digraph" if G.is_directed() else "graph"
    return nx.NetworkXError(f"The node {node} is not in the {kind}.")


def _no_sorting(args):
    if args["sort_neighbors"] is not None:
        return "sort_neighbors (a function of NetworkX's neighbour lists) has no groute form"
    return True


@rule(_no_sorting)
def bfs_predecessors(G, source, depth_limit=None, sort_neighbors=None):
    """NetworkX's parents (the first node of the previous layer, in its visiting order, with
    an arc to the node) rebuilt from groute's depths, not groute's own parents: any
    neighbour one layer up is a valid BFS parent, NetworkX's is one in particular."""
    if source not in G:
        raise _not_a_node(G, source)
    parents = []
    layers = _layers(G, G.position(source), _levels_within(depth_limit), parents)
    for layer, parent in zip(layers[1:], parents):
        yield from zip(G.labels_of(layer), G.labels_of(parent))


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


def _dijkstra_method(args):
    """The ``method``/``weight`` check of NetworkX's shortest-path functions: an unknown
    method is NetworkX's ValueError (raised by the function), Bellman-Ford on weights is
    NetworkX's to run, else the weight must be an edge attribute."""
    if args["method"] not in ("dijkstra", "bellman-ford"):
        return True     # NetworkX's ValueError, raised by the function
    if args["weight"] is not None and args["method"] != "dijkstra":
        return "method='bellman-ford' (negative weights): NetworkX runs it"
    return _weight_is_attribute(args)


def _from_source(args):
    if args["source"] is None or args["target"] is not None:
        return "groute computes lengths from one source to every node"
    return _dijkstra_method(args)


@rule(_from_source)
def shortest_path_length(G, source=None, target=None, weight=None, method="dijkstra"):
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    if weight is None:
        return single_source_shortest_path_length(G, source)
    return single_source_dijkstra_path_length(G, source, weight=weight)


# ------------------------------------------------------------------------------------------------
# one shortest path
# ------------------------------------------------------------------------------------------------
def _between(args):
    if args["source"] is None or args["target"] is None:
        return "groute computes the path between a source and a target given both"
    return _dijkstra_method(args)


@rule(_between)
def shortest_path(G, source=None, target=None, weight=None, method="dijkstra"):
    """NetworkX's path, which among equally short paths is the one its search meets first:
    unweighted, its bidirectional BFS replayed on the two BFS trees groute computed (on an
    undirected graph, where both searches read the adjacency order the conversion keeps);
    otherwise (a directed graph, whose backward search reads ``G.pred``'s order; weights,
    where NetworkX runs a bidirectional Dijkstra) only when the shortest path is unique,
    else NotImplementedError and NetworkX runs the call."""
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} is not in G")
    if target not in G:
        raise nx.NodeNotFound(f"Target {target} is not in G")
    if source == target:
        return [source]
    s, t = G.position(source), G.position(target)
    if weight is None and not G.is_directed():
        path = _bidirectional_bfs(G, s, t)
    else:
        if weight is None or _exact_weights(G, weight) == "unit":
            dist, w = _depths(G, s).astype(np.float64), None
            dist[dist < 0] = np.inf
        else:
            dist, w = _distances(G, s), G.weights.astype(np.float64)
        path = _only_shortest_path(G, dist, w, s, t)
    if path is None:
        raise nx.NetworkXNoPath(f"No path between {source} and {target}.")
    return G.labels_of(path)


def _bidirectional_bfs(G, s: int, t: int):
    """NetworkX's ``bidirectional_shortest_path`` on an undirected graph, replayed: it expands
    the smaller fringe (the forward one on a tie), a whole BFS layer at a time in NetworkX's
    order, and stops at the first arc of that layer reaching a node the other search has
    seen; each search's fringes are its BFS layers and its parents its BFS parents."""
    indptr = np.asarray(G.csr.indptr)
    sides = []
    for start in (s, t):
        depth = _depths(G, start)
        parents = []
        layers = _layers_from(G, depth, start, None, parents)
        parent = np.full(len(G), -1, dtype=np.int64)
        for layer, up in zip(layers[1:], parents):
            parent[layer] = up
        sides.append((layers, depth, parent))
    (f_layers, f_depth, f_parent), (r_layers, r_depth, r_parent) = sides
    fi = ri = 0     # the fringes: layer fi forward, layer ri backward
    while fi < len(f_layers) and ri < len(r_layers):
        forward = len(f_layers[fi]) <= len(r_layers[ri])
        fringe, other, seen = ((f_layers[fi], r_depth, ri) if forward
                               else (r_layers[ri], f_depth, fi))
        heads = G.adjacency_indices[arcs_of_rows(indptr, fringe)]
        met = np.flatnonzero((other[heads] >= 0) & (other[heads] <= seen))
        if met.size:
            w = int(heads[met[0]])
            return _chain(f_parent, w)[::-1] + _chain(r_parent, w)[1:]
        if forward:
            fi += 1
        else:
            ri += 1
    return None


def _chain(parent, v: int) -> list[int]:
    """``v``, its parent, its parent's parent... up to a root (parent -1)."""
    out = [v]
    while parent[out[-1]] >= 0:
        out.append(int(parent[out[-1]]))
    return out


def _only_shortest_path(G, dist, weights, s: int, t: int):
    """The shortest path from ``s`` to ``t`` (positions) when it is the only one, walking back
    from ``t`` along the in-arcs that are tight (``dist[v] + w == dist[u]``); None when ``t``
    is not reached; NotImplementedError where some node has two tight in-arcs (NetworkX's
    choice among them follows its search order)."""
    if not np.isfinite(dist[t]):
        return None
    indptr_in, arcs_in, rows = G.in_arcs
    path = [t]
    while path[-1] != s:
        u = path[-1]
        arcs = arcs_in[indptr_in[u]:indptr_in[u + 1]]
        v = rows[arcs]
        cost = 1.0 if weights is None else weights[arcs]
        v = v[(v != u) & (dist[v] + cost == dist[u])]
        if np.unique(v).size != 1:
            raise NotImplementedError("several shortest paths: NetworkX's choice among them "
                                      "follows its own search order, so NetworkX runs the call")
        path.append(int(v[0]))
    return path[::-1]


# ------------------------------------------------------------------------------------------------
# k-cores
# ------------------------------------------------------------------------------------------------
def core_number(G):
    if G.has_self_loops:
        raise nx.NetworkXNotImplemented(
            "Input graph has self loops which is not permitted; "
            "Consider using G.remove_edges_from(nx.selfloop_edges(G)).")
    if not len(G):
        return {}
    run = registry.function("core_number")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, ctx=ctx, partition=partition)
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.int64).tolist()))


# ------------------------------------------------------------------------------------------------
# components
# ------------------------------------------------------------------------------------------------
def _component_sets(G):
    """The components as sets, in NetworkX's order (by each one's first node in ``G``)."""
    for members in label_groups(_components(G)):
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


def _strong_labels(G) -> np.ndarray:
    """Every position's strongly connected component: the smallest position in it."""
    run = registry.function("strongly_connected_components")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, ctx=ctx, partition=partition)
    return np.asarray(result.values, dtype=np.int64)


def _tarjan_order(G, labels) -> list[int]:
    """The components (by label) in the order NetworkX's Tarjan yields them: a component when
    the first of its nodes that the depth-first search reached is finished, the search started
    from each node in ``G``'s order not yet reached and taking every node's neighbours in
    adjacency order. With the components known this is a plain depth-first search (no
    lowlinks), but a sequential one over every arc: depth-first order has no parallel form."""
    indptr = np.asarray(G.csr.indptr).tolist()
    nbrs = G.adjacency_indices.tolist()
    label = labels.tolist()
    n = len(label)
    visited = bytearray(n)
    is_root = bytearray(n)
    claimed = bytearray(n)        # by label: its root has been reached
    nxt = indptr[:-1]             # per node, the next arc to look at
    order = []
    for s in range(n):
        if visited[s]:
            continue
        visited[s] = 1
        if not claimed[label[s]]:
            claimed[label[s]] = is_root[s] = 1
        stack = [s]
        while stack:
            v = stack[-1]
            i, end = nxt[v], indptr[v + 1]
            while i < end and visited[nbrs[i]]:
                i += 1
            if i < end:
                w = nbrs[i]
                nxt[v] = i + 1
                visited[w] = 1
                if not claimed[label[w]]:
                    claimed[label[w]] = is_root[w] = 1
                stack.append(w)
            else:
                nxt[v] = end
                stack.pop()
                if is_root[v]:
                    order.append(label[v])
    return order


def strongly_connected_components(G):
    """groute's components, yielded in NetworkX's order (its Tarjan's: NetworkX's
    ``condensation`` numbers the components in that order, and functions built on it, such as
    ``write_network_text``, print by it): the order is replayed on the host from the
    components (:func:`_tarjan_order`) unless there is only one."""
    if not G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for undirected type")
    if not len(G):
        return
    labels = _strong_labels(G)
    if bool(np.all(labels == 0)):
        yield set(G.nodes)
        return
    groups = {int(m[0]): m for m in label_groups(labels)}     # a group's first: its label
    for lab in _tarjan_order(G, labels):
        yield set(G.labels_of(groups[lab]))


# ------------------------------------------------------------------------------------------------
# betweenness centrality
# ------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------
# PageRank
# ------------------------------------------------------------------------------------------------
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
    w = _weights(G, weight)
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
