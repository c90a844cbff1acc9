"""Shortest path lengths and paths (unweighted and weighted) from groute's BFS and SSSP, in
NetworkX's order and with its choice of path."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np

from groute.graph.arcs import arcs_of_rows

from ..order import layers_in_order
from .support import (depths, distances, exact_weights, layers_from, lengths, levels_within,
                      reversed_csr, rule, source_layers, traversals, tree_edges,
                      weight_is_attribute)

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.shortest_paths.tests.test_unweighted', 'networkx.algorithms.shortest_paths.tests.test_weighted', 'networkx.algorithms.shortest_paths.tests.test_generic']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def single_source_shortest_path_length(G, source, cutoff=None):
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} is not in G")
    return lengths(G, source_layers(G, G.position(source), levels_within(cutoff)))


def _dijkstra_lengths(G, source, cutoff, weight):
    start = G.position(source)
    kind = exact_weights(G, weight)
    if kind == "unit":      # Dijkstra with unit weights visits in BFS order
        last = None if cutoff is None else _dijkstra_levels(cutoff)
        return lengths(G, source_layers(G, start, last))
    dist = distances(G, start)
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


@rule(weight_is_attribute)
def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
    hash(source)            # NetworkX's TypeError for an unhashable source
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
    return weight_is_attribute(args)


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


def _between(args):
    if args["source"] is None:
        return "groute computes paths from a source"
    if args["target"] is None and args["weight"] is not None:
        return ("groute's paths to every node are NetworkX's unweighted ones (NetworkX's "
                "Dijkstra chooses among equal paths by its heap order)")
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
    if target is None:          # NetworkX's own choice for weight=None, whatever the method
        return single_source_shortest_path(G, source)
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
        if weight is None or exact_weights(G, weight) == "unit":
            dist, w = depths(G, s).astype(np.float64), None
            dist[dist < 0] = np.inf
        else:
            dist, w = distances(G, s), G.weights.astype(np.float64)
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
        depth = depths(G, start)
        parents = []
        layers = layers_from(G, depth, start, None, parents)
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


def _both_ends(args):
    if args["source"] is None or args["target"] is None:
        return "without a source or a target NetworkX's shortest_path answers for every node"
    return True


@rule(_both_ends)
def has_path(G, source, target):
    """Whether groute's BFS from ``source`` reaches ``target``; NetworkX's errors (its
    ``shortest_path``'s) for a missing node."""
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} is not in G")
    if target not in G:
        raise nx.NodeNotFound(f"Target {target} is not in G")
    return bool(depths(G, G.position(source))[G.position(target)] >= 0)


def single_target_shortest_path_length(G, target, cutoff=None):
    """Hops to ``target``: groute's BFS over the reversed arcs, nodes in NetworkX's order on an
    undirected graph (on a directed one NetworkX reads G.pred, in the order its edges were
    added, which the conversion does not keep: there the order follows the nodes')."""
    if target not in G:
        raise nx.NodeNotFound(f"Target {target} is not in G")
    t = G.position(target)
    last = levels_within(cutoff)
    if not G.is_directed():
        return lengths(G, source_layers(G, t, last))
    with traversals(G, "bfs", reversed_csr(G)) as run:
        depth = run(t, last)
    indptr, arcs, rows = G.in_arcs
    return lengths(G, layers_in_order(depth, indptr, rows[arcs], np.array([t]), last))


#: how many values one batch of all_pairs_shortest_path_length's sources holds at most
#: (int64 depths over every node, per source)
PAIRS_BATCH_VALUES = 1 << 21


def all_pairs_shortest_path_length(G, cutoff=None):
    """Every node's ``single_source_shortest_path_length``, in NetworkX's order of nodes and of
    each dict. The sources run in batches on one BFS solver kept open across a batch (its
    kernels, no host step per level); a batch is answered before the next runs, so a caller
    that stops early pays for one batch more at most."""
    last = levels_within(cutoff)
    batch = max(1, PAIRS_BATCH_VALUES // max(1, len(G)))
    for first in range(0, len(G), batch):
        sources = range(first, min(len(G), first + batch))
        with traversals(G, "bfs") as run:
            found = [run(s, last) for s in sources]
        for s, depth in zip(sources, found):
            yield G.nodes[s], lengths(G, layers_from(G, depth, s, last))


@rule(weight_is_attribute)
def single_source_bellman_ford_path_length(G, source, weight="weight"):
    """Distances from ``source`` on groute's SSSP: weights >= 0 as
    :func:`single_source_dijkstra_path_length` (negative weights, where Bellman-Ford differs,
    and NetworkX runs the call). Unweighted, nodes in NetworkX's order (its queue then visits
    breadth-first); weighted, by distance."""
    hash(source)            # NetworkX's TypeError for an unhashable source
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} not in G")
    return _dijkstra_lengths(G, source, None, weight)


def single_source_shortest_path(G, source, cutoff=None):
    """NetworkX's paths: each node's is its BFS parent's (NetworkX's choice of parent) and
    itself, the nodes in NetworkX's order."""
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} not in G")
    paths = {source: [source]}
    for parent, child in tree_edges(G, source, cutoff):
        paths[child] = paths[parent] + [child]
    return paths


def _length_to(G, source, target, weight):
    """The length of a shortest path from ``source`` to ``target`` (both nodes, ``target``
    possibly not): hops where the weights are none, else the weighted distance as
    :func:`single_source_dijkstra_path_length` sums it; None where ``target`` is not reached."""
    hash(target)            # NetworkX's TypeError for an unhashable target
    kind = exact_weights(G, weight)
    if target not in G:
        return None
    s, t = G.position(source), G.position(target)
    if kind == "unit":
        depth = int(depths(G, s)[t])
        return None if depth < 0 else depth
    dist = float(distances(G, s)[t])
    if not math.isfinite(dist):
        return None
    return dist if kind == "float" else int(dist)


@rule(weight_is_attribute)
def dijkstra_path_length(G, source, target, weight="weight"):
    if source not in G:
        raise nx.NodeNotFound(f"Node {source} not found in graph")
    if source == target:
        return 0
    length = _length_to(G, source, target, weight)
    if length is None:
        raise nx.NetworkXNoPath(f"Node {target} not reachable from {source}")
    return length


@rule(weight_is_attribute)
def bellman_ford_path_length(G, source, target, weight="weight"):
    """Weights >= 0, as :func:`single_source_bellman_ford_path_length`."""
    if source == target:
        if source not in G:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        return 0
    hash(source)            # NetworkX's TypeError for an unhashable source
    if source not in G:
        raise nx.NodeNotFound(f"Source {source} not in G")
    length = _length_to(G, source, target, weight)
    if length is None:
        raise nx.NetworkXNoPath(f"node {target} not reachable from {source}")
    return length
