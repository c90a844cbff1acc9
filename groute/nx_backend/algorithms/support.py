"""What the backend's algorithm modules share: the ``can_run`` rule decorator, groute's BFS, SSSP
and components runs on a converted graph, BFS layers in NetworkX's order, and how weights are
read and summed exactly."""
from __future__ import annotations

import math
from contextlib import contextmanager

import networkx as nx
import numpy as np

from groute import registry
from groute.graph.csr import kept_on
from groute.operators import Functor, advance

from ..devices import devices_for
from ..order import layers_in_order

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


@contextmanager
def traversals(G, app: str = "bfs", csr=None):
    """``run(position, cutoff=None)``: groute's BFS (``app="bfs"``: hops as int64, -1 where
    not reached) or SSSP (``"sssp"``: distances as float64, inf where not reached) from one
    position of ``csr`` (default ``G.csr``; :func:`reversed_csr` searches along in-arcs),
    ``cutoff`` as the solver's. The solver is built once and kept open for every run inside
    the block: its partition, its devices' copy of the graph and its compiled kernels serve
    each source, and each run is the solver's whole traversal on the devices (on a GPU its
    kernels, no host step per level), read back once."""
    csr = G.csr if csr is None else csr
    Solver = registry.algorithm_named(app).solver
    dtype = np.int64 if app == "bfs" else np.float64
    with devices_for(csr, "relax") as (ctx, partition):
        with Solver(csr, ctx=ctx, partition=partition) as solver:
            def run(position: int, cutoff=None) -> np.ndarray:
                result = solver.run(csr.file_id_of(position), cutoff=cutoff)
                return np.asarray(result.values, dtype=dtype)
            yield run


def reversed_csr(G):
    """``G.csr`` with every arc turned around (a directed graph's in-arcs as rows; an
    undirected graph's own), made once per converted graph."""
    return kept_on(G.csr, "_nx_reversed", G.csr.transpose)


def depths(G, source: int, cutoff: int | None = None) -> np.ndarray:
    """Hops from position ``source`` (groute's BFS; -1: not reached, or past ``cutoff``)."""
    with traversals(G, "bfs") as run:
        return run(source, cutoff)


def distances(G, source: int) -> np.ndarray:
    """Weighted distances from position ``source`` (groute's SSSP; inf: not reached)."""
    with traversals(G, "sssp") as run:
        return run(source)


def component_labels(G) -> np.ndarray:
    """Every position's component label: the smallest position in its (weak) component (the
    library's connected components engine, imported on first use like the apps' solvers)."""
    from groute.engines.components import ComponentsSolver
    with devices_for(G.csr, "components") as (ctx, _):
        with ComponentsSolver(G.csr, ctx=ctx) as solver:
            return np.asarray(solver.run().values, dtype=np.int64)


def source_layers(G, source: int, last=None, parents=None) -> list[np.ndarray]:
    return layers_from(G, depths(G, source, last), source, last, parents)


def layers_from(G, depth, source: int, last=None, parents=None) -> list[np.ndarray]:
    return layers_in_order(depth, np.asarray(G.csr.indptr), G.adjacency_indices,
                           np.array([source]), last, parents)


def tree_edges(G, source, depth_limit) -> list[tuple]:
    """NetworkX's ``bfs_edges`` as a list: each layer's ``(parent, child)`` pairs in NetworkX's
    visiting order, the parent its (NetworkX's ``bfs_predecessors``); the first layer's parent is
    ``source`` as the caller named it, as NetworkX yields it."""
    if source not in G:
        raise not_a_node(G, source)
    parents = []
    layers = source_layers(G, G.position(source), levels_within(depth_limit), parents)
    edges = []
    for d, (layer, parent) in enumerate(zip(layers[1:], parents)):
        children = G.labels_of(layer)
        edges.extend(zip([source] * len(children) if d == 0 else G.labels_of(parent),
                         children))
    return edges


def levels_within(cutoff) -> int | None:
    """The last BFS level NetworkX reaches with ``cutoff`` (it expands while cutoff > level)."""
    if cutoff is None:
        return None
    if cutoff != cutoff:        # NaN: no comparison holds, only the source
        return 0
    return max(0, math.ceil(cutoff)) if cutoff != math.inf else None


def lengths(G, layers) -> dict:
    out = {}
    for d, layer in enumerate(layers):
        out.update(dict.fromkeys(G.labels_of(layer), d))
    return out


def not_a_node(G, node):
    """NetworkX's error for a BFS from ``node`` that is not in ``G`` (``G.neighbors``'s)."""
    hash(node)      # an unhashable node: TypeError, as NetworkX's set of seen nodes raises
    kind = "digraph" if G.is_directed() else "graph"
    return nx.NetworkXError(f"The node {node} is not in the {kind}.")


def nbunch_iter(G, nbunch=None):
    """NetworkX's ``G.nbunch_iter(nbunch)``: every node (None), the one node ``nbunch``, or the
    nodes of the container ``nbunch`` that are in ``G``, lazily, with NetworkX's errors."""
    if nbunch is None:
        return iter(G.nodes)
    if nbunch in G:
        return iter([nbunch])

    def bunch_iter(nlist):
        try:
            for n in nlist:
                if n in G.index:
                    yield n
        except TypeError as err:
            exc, message = err, err.args[0]
            if "iter" in message:
                exc = nx.NetworkXError("nbunch is not a node or a sequence of nodes.")
            if "object is not iterable" in message:
                exc = nx.NetworkXError(f"Node {nbunch} is not in the graph.")
            if "hashable" in message:
                exc = nx.NetworkXError(f"Node {n} in sequence nbunch is not a valid node.")
            raise exc
    return bunch_iter(nbunch)


def weight_is_attribute(args):
    return "a weight function has no groute form" if callable(args["weight"]) else True


def weights_of(G, weight):
    """The weights a call with ``weight`` reads from ``G``, None when unweighted. NetworkX may
    hand a call that reads no weight a graph converted with weights (its cache serves any
    conversion that holds what the call needs), so the call's ``weight`` decides."""
    if weight is None:
        return None
    if G.weight != weight:
        raise NotImplementedError(f"the graph was converted with weight={G.weight!r}, the call "
                                  f"reads {weight!r}")
    return G.weights


def exact_weights(G, weight) -> str:
    """How groute sums ``G``'s ``weight`` exactly: "int" (integers), "float" (integral
    reals), "unit" (no weights); raises NotImplementedError when it cannot (negative, real or
    too big weights: NetworkX runs the call, with its own errors for negative ones)."""
    w = weights_of(G, weight)
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


def _count_arrival(s, v):
    np.add.at(s["count"], v, 1)
    return v[:0]


#: an arc into ``v`` adds one to its int32 state ``count`` (in-degrees, neighbours in a core)
COUNT_ARRIVAL = Functor(name="nx_count_arrival", params="int* count",
                        cuda="atomicAdd(&count[v], 1); return false;", numpy=_count_arrival)


def degree_state(engine, *, out: bool, into: bool) -> None:
    """Int32 state ``count`` of ``engine``: each vertex's out-degree (``out``: the engine's
    ``out_degree_state``, its row's length) plus its in-degree (``into``: one advance of
    :data:`COUNT_ARRIVAL` over every arc), on the devices. The degrees the backend's
    algorithms read (isolates, the degree centralities), counted one way."""
    if out:
        engine.out_degree_state("count")
    else:
        engine.state("count", np.int32, 0)
    if into:
        advance(engine.all_vertices(), COUNT_ARRIVAL)
