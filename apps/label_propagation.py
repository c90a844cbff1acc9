"""Semi-synchronous label propagation across devices (Cordasco and Gargano, 2010), NetworkX's
``label_propagation_communities``, with NetworkX's answer: on the operator API and its
reductions by key (:mod:`groute.operators.keyed`).

Every vertex starts with its own label (its position). The vertices are coloured so that no two
neighbours share a colour, and a round updates the colours one after the other: every vertex of
the colour takes the label most frequent among its neighbours
(:func:`~groute.operators.keyed.best_key` over the neighbours' labels, counted), keeping its own
when that is among the most frequent and else taking the largest of them (Prec-Max). The
vertices of a colour have no neighbour in common with each other's updates, so updating them at
once is updating them one by one. Rounds run until every vertex's label is among its
neighbours' most frequent.

The colouring is NetworkX's, so the labels are too: ``greedy_color`` with its ``largest_first``
order (by degree, largest first, ties in the graph's order) gives each vertex the smallest
colour none of its earlier neighbours has. Jones and Plassmann's algorithm colours in parallel
and gives exactly that colouring: a vertex is coloured once every earlier neighbour is
(:func:`~groute.operators.keyed.smallest_missing_key` over them), counting them down with an
advance from each newly coloured set. Its rounds are the longest chain of neighbours in that
order, so a graph with long such chains (a path numbered along itself) takes as many rounds.
"""
from __future__ import annotations

import time

import numpy as np

from groute import AppResult
from groute.engines import make_engine
from groute.graph import DEFAULT_PARTITION
from groute.operators import Functor, Message, advance, compute, filter, keyed
from groute.apps.louvain import first_members
from groute.registry import public
from groute.solver import input_graph

#: NetworkX's degree counts a self-loop twice: the rows list it once
LOOP = "loop"


def _order(s, v):
    count = s["count"]
    s["prio"][v] = (s["degree"][v] + s[LOOP][v]).astype(np.int64) * count + (count - 1
                                                                              - s["pos"][v])


#: a vertex's place in ``largest_first``'s order as a priority: the larger, the earlier (by
#: degree, then the earlier position)
ORDER = Functor(
    name="lpa_order",
    params="long long* prio, const double* degree, const double* loop, const long long* pos, "
           "long long count",
    cuda="prio[v] = (long long)(degree[v] + loop[v]) * count + (count - 1 - pos[v]);",
    numpy=_order)


def earlier(s, v, u):
    """The arcs to neighbours earlier in the order."""
    return s["prio_of"][u] > s["prio"][v]


def _release(s, v, m):
    v = v[s["prio"][v] < m]
    hit, times = np.unique(v, return_counts=True)
    before = s["waiting"][hit]
    s["waiting"][hit] = before - times
    return hit[(before > 0) & (before <= times)]


#: a coloured vertex releases its later neighbours: the one whose last earlier neighbour it was
#: is coloured next
RELEASE = Functor(
    name="lpa_release", params="int* waiting, const long long* prio",
    message=Message("long long", cuda="prio[u]", numpy=lambda s, u: s["prio"][u]),
    cuda="return prio[v] < m && atomicSub(&waiting[v], 1) == 1;",
    numpy=_release)

#: every earlier neighbour coloured
READY = Functor(name="lpa_ready", params="const int* waiting", cuda="return waiting[v] == 0;",
                numpy=lambda s, v: s["waiting"][v] == 0)

#: of colour ``colour``
COLOURED = Functor(name="lpa_coloured", params="const int* colour, int which",
                   cuda="return colour[v] == which;",
                   numpy=lambda s, v: s["colour"][v] == s["which"])


def _relabel(s, v):
    s["label"][v] = s["choice"][v]


#: takes the label it chose
RELABEL = Functor(name="lpa_relabel", params="int* label, const int* choice",
                  cuda="label[v] = choice[v];", numpy=_relabel)


class LabelPropagation:
    """Semi-synchronous label propagation on ``graph`` (a :class:`~groute.graph.CSRGraph`,
    undirected) over the engine's devices (``ctx``, ``devices``, ``backend``, ``timeout``,
    ``partition``: as every engine takes them), which it builds once."""

    def __init__(self, graph, *, ctx=None, devices="auto", backend="auto", timeout=None,
                 partition: str = DEFAULT_PARTITION):
        self.graph = graph
        self.engine = make_engine(graph, "bsp", ctx=ctx, devices=devices, backend=backend,
                                  timeout=timeout, partition=partition)

    def close(self):
        self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def colours(self) -> list:
        """NetworkX's ``greedy_color`` (``largest_first``) in parallel (module docstring): the
        frontier of every colour, in order."""
        eng = self.engine
        n = self.graph.num_vertices
        everyone = eng.all_vertices()
        eng.state("pos", np.int64, values=np.arange(n, dtype=np.int64))
        for name in ("degree", LOOP):
            eng.state(name, np.float64)
        keyed.arc_sums(everyone, into="degree")
        keyed.arc_sums(everyone, into=LOOP, where=lambda s, v, u: u == v + s["first"])
        eng.state("prio", np.int64)
        compute(everyone, ORDER, count=n)
        keyed.share(everyone, "prio", into="prio_of")
        eng.state("waiting", np.int32)
        keyed.arc_sums(everyone, into="waiting", where=earlier, loops=False)
        eng.state("colour", np.int32, -1)
        keyed.share(everyone, "colour", into="colour_of")
        ready = filter(everyone, READY)
        while ready:
            keyed.smallest_missing_key(ready, "colour_of", into="colour", where=earlier,
                                       loops=False)
            keyed.share(ready, "colour", into="colour_of")
            ready = advance(ready, RELEASE)
        count = int(max(self.engine.gather("colour").max(initial=-1) + 1, 0))
        return [filter(everyone, COLOURED, which=c) for c in range(count)]

    def run(self) -> AppResult:
        """The communities, each vertex's value the first vertex of its community
        (``values_are_vertices``)."""
        started = time.perf_counter()
        eng = self.engine
        n = self.graph.num_vertices
        everyone = eng.all_vertices()
        colours = self.colours()
        eng.state("label", np.int32, values=np.arange(n))
        eng.state("choice", np.int32)
        keyed.share(everyone, "label", into="label_of")
        rounds = 0
        while keyed.best_key(everyone, "label_of", own="label", into="choice", ties="largest"):
            for frontier in colours:
                changed = keyed.best_key(frontier, "label_of", own="label", into="choice",
                                         ties="largest")
                compute(changed, RELABEL)
                keyed.share(changed, "label", into="label_of")
            rounds += 1
        labels = first_members(eng.gather("label"))
        return AppResult(labels, time.perf_counter() - started,
                         {"colours": len(colours), "rounds": rounds},
                         vertex_ids=getattr(self.graph, "vertex_ids", None),
                         values_are_vertices=True)


@public(solver=LabelPropagation)
def label_propagation_communities(G, *, num_vertices=None, symmetric=False,
                                  **options) -> AppResult:
    """Communities by semi-synchronous label propagation, as NetworkX's
    ``label_propagation_communities``: the same communities.

    Parameters
    ----------
    G : graph input
        An undirected NetworkX graph (not a multigraph), a scipy sparse matrix,
        ``(src, dst)`` edge arrays with ``symmetric=True``, a file, a graph spec or a
        :class:`~groute.graph.CSRGraph`.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``partition``.

    Returns
    -------
    AppResult
        Each vertex's label (a vertex of its community); ``result.components()``: the
        communities as sets of ids, in the order NetworkX lists them.

    Raises
    ------
    GraphNotSupported
        A directed graph, or a NetworkX multigraph (NetworkX's ``NetworkXNotImplemented``).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.Graph([("a", "b"), ("b", "c"), ("c", "a"), ("d", "e"), ("e", "f"), ("f", "d")])
    >>> found = groute.label_propagation_communities(G, backend="cpu", devices=1)
    >>> [sorted(c) for c in found.components()]
    [['a', 'b', 'c'], ['d', 'e', 'f']]
    """
    from groute.errors import GraphNotSupported
    g = input_graph(G, weight=None, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX orders the vertices by degree, which counts every "
                               "parallel edge; groute's graphs keep one")
    if g.directed:
        raise GraphNotSupported(f"label propagation takes an undirected graph, as NetworkX's; "
                                f"got {g.name or 'a directed graph'} (symmetric=True reads "
                                f"every arc both ways)")
    with LabelPropagation(g, **options) as solver:
        return solver.run()
