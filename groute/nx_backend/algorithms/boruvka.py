"""The minimum spanning forest by Borůvka's algorithm, on groute's operator API.

The edges are ranked by the caller (every edge a distinct rank: the weight, ties broken by
an order of the edges), so the forest is the only one of least total rank, whichever
algorithm finds it: Borůvka's here, Kruskal's in NetworkX with the same order of edges.

The operators visit vertices and carry values along arcs; an edge's rank is a value of the
edge, not of a vertex. So the program runs on the graph's *incidence graph*: a vertex per
node and a vertex per edge, an arc between an edge and each of its two ends. An edge's rank,
the components at its two ends and whether it is in the forest are then state of its vertex.
Each Borůvka round, every step an operator over every device:

1. each node sends its component's label to its edges (``ENDS``: the least and the greatest
   label at each edge); the edges whose two labels differ still cross between components;
2. each crossing edge sends its rank to its two ends (``LIGHTEST``: a node keeps the least);
3. the least rank spreads over each component's tree (``spread("best")``: a loop to a fixpoint
   along the nodes and the forest's edges, order-free): every node then holds its component's
   lightest crossing edge;
4. each node offers that rank to its edges; an edge offered its own rank joins the forest
   (``CHOSEN``; an edge both of its components chose joins once);
5. the least label spreads over the grown forest (``spread("label")``): the merged components'
   new labels.

A round merges every component that has a crossing edge with another, so at most
log2(nodes) rounds run; steps 3 and 5 take as many levels as the trees are deep (twice: a
tree edge is two arcs of the incidence graph), which is where a long, thin forest costs.
"""
from __future__ import annotations

import numpy as np

from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import (AdvanceStep, Functor, Message, advance, compute, filter,
                              run_loop)

from ..devices import devices_for

#: no rank, no label: what the least of nothing is
NONE = np.iinfo(np.int32).max


def _message(state: str) -> Message:
    return Message("int", cuda=f"{state}[u]", numpy=lambda s, u: s[state][u])


def _ends(s, v, m):
    np.minimum.at(s["low"], v, m)
    np.maximum.at(s["high"], v, m)
    return v[:0]


#: a node's label to each of its edges: the least and the greatest label at each edge
ENDS = Functor(name="mst_ends", params="int* low, int* high, const int* label",
               message=_message("label"),
               cuda="atomicMin(&low[v], m);\natomicMax(&high[v], m);\nreturn false;",
               numpy=_ends)

#: an edge whose two ends lie in different components
CROSSING = Functor(name="mst_crossing", params="const int* low, const int* high",
                   cuda="return low[v] != high[v];",
                   numpy=lambda s, v: s["low"][v] != s["high"][v])


def _lightest(s, v, m):
    np.minimum.at(s["best"], v, m)
    return v[:0]


#: a crossing edge's rank to its two ends, each keeping the least
LIGHTEST = Functor(name="mst_lightest", params="int* best, const int* rank",
                   message=_message("rank"),
                   cuda="atomicMin(&best[v], m);\nreturn false;", numpy=_lightest)


def spread(state: str) -> Functor:
    """The least ``state`` along the forest: a node or a forest edge (``tree``) takes the
    least value offered, and is accepted (spreads it on) only where its value fell."""
    def numpy(s, v, m):
        keep = s["tree"][v] != 0
        v, m = v[keep], m[keep]
        before = s[state][v]
        np.minimum.at(s[state], v, m)
        return np.unique(v[m < before])
    return Functor(name=f"mst_spread_{state}", params=f"int* {state}, const int* tree",
                   message=_message(state),
                   cuda=f"return tree[v] != 0 && atomicMin(&{state}[v], m) > m;", numpy=numpy)


SPREAD_BEST = spread("best")
SPREAD_LABEL = spread("label")


def _chosen(s, v, m):
    return np.unique(v[(s["tree"][v] == 0) & (m == s["rank"][v])])


#: a node's component's lightest crossing rank to its edges: the edge of that rank is chosen
CHOSEN = Functor(name="mst_chosen", params="const int* tree, const int* rank, const int* best",
                 message=_message("best"),
                 cuda="return tree[v] == 0 && m == rank[v];", numpy=_chosen)


def _join(s, v):
    s["tree"][v] = 1


#: the chosen edges join the forest
JOIN = Functor(name="mst_join", params="int* tree", cuda="tree[v] = 1;", numpy=_join)


def _reset(s, v):
    s["low"][v], s["high"][v], s["best"][v] = NONE, -1, NONE


#: before a round: no labels seen at an edge, no rank at a node or an edge
RESET = Functor(name="mst_reset", params="int* low, int* high, int* best",
                cuda=f"low[v] = {NONE};\nhigh[v] = -1;\nbest[v] = {NONE};", numpy=_reset)


def incidence_graph(n: int, ends_u: np.ndarray, ends_v: np.ndarray) -> CSRGraph:
    """The nodes ``0..n-1`` and one vertex ``n + k`` per edge ``k`` (``ends_u[k]``,
    ``ends_v[k]``: its two ends, distinct), an undirected arc between an edge and each end."""
    edges = np.arange(n, n + ends_u.shape[0], dtype=np.int64)
    ends = np.concatenate([ends_u, ends_v]).astype(np.int64)
    around = np.concatenate([edges, edges])
    return CSRGraph.from_edges(np.concatenate([ends, around]), np.concatenate([around, ends]),
                               n + edges.shape[0], directed=False, dedupe=False,
                               name="incidence graph")


def spanning_forest(n: int, ends_u: np.ndarray, ends_v: np.ndarray,
                    rank: np.ndarray) -> np.ndarray:
    """Which edges (``ends_u[k]``, ``ends_v[k]``: positions of two distinct nodes among ``n``)
    the minimum spanning forest holds when edge ``k`` weighs ``rank[k]`` (distinct ints), as
    a bool per edge; on the devices ``nx.config.backends.groute`` names."""
    m = ends_u.shape[0]
    if m == 0:
        return np.zeros(0, bool)
    H = incidence_graph(n, ends_u, ends_v)
    nodes, edges = np.arange(n), np.arange(n, n + m)
    with devices_for(H, "operators") as (ctx, partition):
        with make_engine(H, "auto", ctx=ctx, partition=partition) as eng:
            eng.state("label", np.int32, values=np.concatenate(
                [nodes, np.full(m, NONE)]).astype(np.int32))
            eng.state("rank", np.int32, values=np.concatenate(
                [np.full(n, NONE), rank]).astype(np.int32))
            eng.state("tree", np.int32, values=np.concatenate(
                [np.ones(n), np.zeros(m)]).astype(np.int32))
            for name in ("low", "high", "best"):
                eng.state(name, np.int32, NONE)
            every, at_nodes, crossing = eng.all_vertices(), eng.frontier_at(nodes), \
                eng.frontier_at(edges)
            while True:
                compute(every, RESET)
                advance(at_nodes, ENDS)
                crossing = filter(crossing, CROSSING)
                if not crossing:
                    break
                advance(crossing, LIGHTEST)
                run_loop(at_nodes, [AdvanceStep(SPREAD_BEST)], order="any")
                compute(advance(at_nodes, CHOSEN), JOIN)
                run_loop(at_nodes, [AdvanceStep(SPREAD_LABEL)], order="any")
            return eng.gather("tree")[n:] != 0
