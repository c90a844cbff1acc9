"""Graph structure: isolates (degrees on the devices), reciprocity (reversed arcs found by the
intersect operator) and bipartite colouring (groute's BFS from every component at once, its
depths' parity the colours, every arc checked on the devices)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry
from groute.engines import make_engine
from groute.operators import Functor, Intersection, Message, advance, filter

from ..devices import devices_for
from .support import component_labels, degree_state, nbunch_iter, rule

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tests.test_isolate',
                   'networkx.algorithms.tests.test_reciprocity',
                   'networkx.algorithms.bipartite.tests.test_basic']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


# --- isolates ---------------------------------------------------------------------------------
#: no arc at all
ALONE = Functor(name="nx_alone", params="const int* count", cuda="return count[v] == 0;",
                numpy=lambda s, v: s["count"][v] == 0)


def _isolated(G) -> np.ndarray:
    """The positions of the nodes of degree 0, in order: each node's out-arcs, and a directed
    graph's in-arcs counted by one advance, on the devices."""
    if not len(G):
        return np.zeros(0, np.int64)
    with devices_for(G.csr, "operators") as (ctx, partition):
        with make_engine(G.csr, "bsp", ctx=ctx, partition=partition) as engine:
            degree_state(engine, out=True, into=G.is_directed())
            return engine.positions_of(filter(engine.all_vertices(), ALONE))


def isolates(G):
    yield from G.labels_of(_isolated(G))


def number_of_isolates(G):
    return int(_isolated(G).shape[0])


def _in_degrees(G) -> np.ndarray:
    return np.diff(G.in_arcs[0])


def is_isolate(G, n):
    """One node's degree: its row's length, and a directed graph's in-arcs. For anything not a
    node of ``G``, NetworkX's ``G.degree(n)`` is a view of the nodes ``n`` holds (its errors
    where ``n`` is no container of nodes), which is not 0: False."""
    if n not in G:
        list(nbunch_iter(G, n))
        return False
    i = G.position(n)
    degree = int(G.csr.indptr[i + 1] - G.csr.indptr[i])
    if G.is_directed():
        degree += int(_in_degrees(G)[i])
    return degree == 0


# --- reciprocity --------------------------------------------------------------------------------
def _simple(args):
    G = args["G"]
    if G.is_multigraph():
        return "parallel edges count in NetworkX's reciprocity; groute's conversion keeps one"
    if not G.is_directed() and args.get("nodes") is not None:
        return "an undirected graph has no predecessors (NetworkX raises)"
    return True


def _reciprocated(G) -> np.ndarray:
    """Per position, the arcs ``u -> v`` whose reverse is an arc (a self-loop is its own)."""
    if not G.csr.num_edges:
        return np.zeros(len(G), np.int64)
    with devices_for(G.csr, "operators") as (ctx, _):
        with Intersection(G.csr, ctx=ctx) as rows:
            return rows.reciprocated()


@rule(_simple)
def overall_reciprocity(G):
    """``2 * pairs / arcs``: the arcs whose reverse is an arc, self-loops left out, over every
    arc (NetworkX counts them as the arcs less the undirected edges, twice)."""
    arcs = int(G.csr.num_edges)
    overlap = 0
    if G.is_directed() and arcs:
        loops = int(np.count_nonzero(G.arc_rows == G.adjacency_indices))
        overlap = int(_reciprocated(G).sum()) - loops
    if arcs == 0:
        raise nx.NetworkXError("Not defined for empty graphs")
    return overlap / arcs


@rule(_simple)
def reciprocity(G, nodes=None):
    if nodes is None:
        return overall_reciprocity(G)
    both = _reciprocated(G).tolist()
    total = (np.diff(np.asarray(G.csr.indptr)) + _in_degrees(G)).tolist()

    def of(node):
        i = G.position(node)
        return None if total[i] == 0 else 2 * both[i] / total[i]
    if nodes in G:
        found = of(nodes)
        if found is None:
            raise nx.NetworkXError("Not defined for isolated nodes.")
        return found
    return {node: of(node) for node in nbunch_iter(G, nodes)}


# --- bipartite colouring -------------------------------------------------------------------------
def _clash(s, v, m):
    return v[s["colour"][v] == m]


#: an arc between two nodes of one colour: the graph is not bipartite
CLASH = Functor(name="nx_colour_clash", params="const int* colour",
                message=Message("int", cuda="colour[u]", numpy=lambda s, u: s["colour"][u]),
                cuda="return colour[v] == m;", numpy=_clash)


def _colours(G) -> tuple[np.ndarray, np.ndarray]:
    """Per position, NetworkX's colour and whether the node is isolated. Colour 1 at each
    weakly connected component's first node (in ``G``'s order) with a neighbour in ``G[n]``,
    alternating with the hops from it (one BFS from all of them at once, over a directed
    graph's arcs both ways); 0 at an isolated node, the one kind of node no such BFS reaches.
    NetworkX's error when some arc joins two nodes of one colour (an advance over every arc,
    carrying its source's colour, on the devices)."""
    n = len(G)
    out_degree = np.diff(np.asarray(G.csr.indptr))
    labels = component_labels(G) if n else np.zeros(0, np.int64)
    starts = np.flatnonzero(out_degree > 0)
    _, first = np.unique(labels[starts], return_index=True)
    roots = starts[first]
    if not roots.size:
        return np.zeros(n, np.int64), np.ones(n, bool)
    csr = G.csr.symmetrize() if G.is_directed() else G.csr
    BFS = registry.algorithm_named("bfs").solver
    with devices_for(csr, "relax") as (ctx, _):
        with BFS(csr, ctx=ctx) as solver:
            depth = np.asarray(solver.run(sources=csr.file_id_of(roots).tolist()).values,
                               dtype=np.int64)
    alone = depth < 0
    colour = np.where(alone, 0, 1 - depth % 2)
    with devices_for(G.csr, "operators") as (ctx, partition):
        with make_engine(G.csr, "bsp", ctx=ctx, partition=partition) as engine:
            engine.state("colour", np.int32, values=colour)
            clash = bool(advance(engine.all_vertices(), CLASH))
    if clash:
        raise nx.NetworkXError("Graph is not bipartite.")
    return colour, alone


def color(G):
    """NetworkX's colours; the nodes with a neighbour first, in ``G``'s order (NetworkX's own
    order follows its traversal), then the isolated nodes, as NetworkX puts them last."""
    colour, alone = _colours(G)
    out = dict(zip(G.labels_of(np.flatnonzero(~alone)), colour[~alone].tolist()))
    out.update(dict.fromkeys(G.labels_of(np.flatnonzero(alone)), 0))
    return out


def is_bipartite(G):
    try:
        _colours(G)
        return True
    except nx.NetworkXError:
        return False
