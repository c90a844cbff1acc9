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
from groute.operators import Functor, Message, advance, arc_values, compute, filter, keyed
from groute.apps.louvain import first_members, independent_movers, level_graph, salt_of
from groute.registry import public
from groute.graph import input_graph
from groute.graph.arcs import arc_named

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


def _wake(s, v, m):
    s["mark"][v[s["label"][v] != m]] = 1
    return v[:0]


#: a neighbour of a vertex that took label ``m`` is weighed again unless it has that label
WAKE = Functor(name="lpa_wake", params="int* mark, const int* label",
               message=Message("int", cuda="label[u]", numpy=lambda s, u: s["label"][u]),
               cuda="if (label[v] != m) mark[v] = 1;\nreturn false;", numpy=_wake)


def _mark(s, v):
    s["mark"][v] = 1


def _unmark(s, v):
    s["mark"][v] = 0


MARK = Functor(name="lpa_mark", params="int* mark", cuda="mark[v] = 1;", numpy=_mark)
UNMARK = Functor(name="lpa_unmark", params="int* mark", cuda="mark[v] = 0;", numpy=_unmark)
MARKED = Functor(name="lpa_marked", params="const int* mark", cuda="return mark[v] != 0;",
                 numpy=lambda s, v: s["mark"][v] != 0)

#: a directed graph's mover that moves this round: one random bit of its priority (the lowest
#: of the 31 drawn), so that any one of the movers may move alone
COIN = Functor(name="lpa_coin", params="const long long* prio",
               cuda="return ((prio[v] >> 32) & 1) != 0;",
               numpy=lambda s, v: ((s["prio"][v] >> 32) & 1) != 0)

#: the most rounds of asynchronous updates: on an undirected graph each update raises the
#: weight of the arcs whose ends agree, so they end far sooner (a guard against a bug, not a
#: limit reached); a directed graph's updates end with probability 1 (``asynchronous``)
MAX_ROUNDS = 1_000_000


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


def asynchronous(engine, graph, *, weighted: bool, salt: int, queue: bool,
                 vertex_ids=None) -> AppResult:
    """Asynchronous label propagation on ``engine`` (over ``graph``, whose ids are
    ``vertex_ids``; its arc state ``w`` when ``weighted``): a vertex whose label is not among
    the most frequent of its neighbours' (by arc weight, or count) takes the smallest of those; the vertices that would change move in
    independent sets, by random priorities drawn from ``salt`` (each update sees its
    neighbours' latest labels, as updates one at a time in the priorities' order would).
    ``queue``: an update weighs again only the neighbours whose label differs from the new one
    (fast label propagation's queue), else every vertex is weighed every round.

    On a directed graph an update weighs a vertex's out-neighbours only, so it may lower the
    agreement along its in-arcs, and the independent set of a round can repeat itself forever
    (a directed 4-cycle labelled 0 0 2 2: both boundary vertices move, the labels rotate). Each
    of its movers therefore moves at random (:data:`COIN`), as NetworkX's random order lets
    one of them move first: every single update then has a chance each round, so the rounds
    end where NetworkX's do."""
    started = time.perf_counter()
    n = graph.num_vertices
    everyone = engine.all_vertices()
    engine.state("pos", np.int64, values=np.arange(n, dtype=np.int64))
    engine.state("label", np.int32, values=np.arange(n))
    for name in ("choice", "mark"):
        engine.state(name, np.int32)
    for name in ("prio", "top"):
        engine.state(name, np.int64, -1)
    keyed.share(everyone, "label", into="label_of")
    weighed, rounds = everyone, 0
    for rounds in range(MAX_ROUNDS):
        gaining = keyed.best_key(weighed, "label_of", own="label", into="choice",
                                 weight="w" if weighted else None)
        if not gaining:
            break
        # a directed graph's vertex: its neighbours along its in-arcs too
        movers = independent_movers(engine, gaining, salt, rounds, in_arcs=graph.directed)
        if graph.directed:
            movers = filter(movers, COIN)
        compute(movers, RELABEL)
        keyed.share(movers, "label", into="label_of")
        if queue:
            compute(gaining, MARK)
            compute(movers, UNMARK)
            advance(movers, WAKE)
            weighed = filter(everyone, MARKED)
            compute(weighed, UNMARK)
    else:
        raise RuntimeError(f"label propagation did not settle in {MAX_ROUNDS} rounds")
    return AppResult(first_members(engine.gather("label")), time.perf_counter() - started,
                     {"rounds": rounds}, vertex_ids=vertex_ids, values_are_vertices=True)


def _weights(graph, weight, arc_weights, what: str):
    """The weights a function reads, float64 per arc of ``graph`` (None: counts):
    ``arc_weights`` when given, else the graph's own where ``weight`` names them. A NaN
    weight is a ValueError naming ``what`` (the function): no label would be the most
    frequent where it counts, and the updates would never settle."""
    if arc_weights is None and weight is None:
        return None
    w = arc_values(graph, arc_weights)
    if w is None:       # no weights, or all 1 (bools too): counts are the sums
        return None
    bad = np.flatnonzero(np.isnan(w))
    if bad.size:
        raise ValueError(f"{what}: weight NaN on the arc {arc_named(graph, int(bad[0]))} "
                         f"({bad.size} arc(s) in all); a label's frequency needs a number")
    return w


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


@public(solver=LabelPropagation)
def asyn_lpa_communities(G, weight=None, seed=None, *, arc_weights=None, num_vertices=None,
                         **options):
    """Communities by asynchronous label propagation, as NetworkX's ``asyn_lpa_communities``
    (Raghavan, Albert and Kumara 2007): until every vertex's label is among the most frequent
    of its neighbours' (its out-neighbours', directed), a vertex whose label is not takes one
    that is. NetworkX updates the vertices one at a time in a random order and breaks ties at
    random; groute updates independent sets at once in an order drawn from ``seed`` and takes
    the smallest label of a tie, so the communities may differ from NetworkX's.

    Parameters
    ----------
    G : graph input
        A NetworkX graph (not a multigraph when ``weight`` is given), a scipy sparse matrix,
        edge arrays, a file, a graph spec or a :class:`~groute.graph.CSRGraph`.
    weight : str or None, optional
        The edge attribute whose values count a label's frequency; None: each edge counts 1.
    seed : int, random.Random or None, optional
        Where the order of the updates comes from (NetworkX's ``seed``).
    arc_weights : array, optional
        float64 weights per arc of the graph's CSR, instead of its own (float32) ones.
    num_vertices : int, optional
        The vertex count of edge arrays.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``partition``.

    Returns
    -------
    AppResult
        ``result.components()``: the communities as sets of ids.

    Raises
    ------
    GraphNotSupported
        A NetworkX multigraph with ``weight`` (its parallel edges add up in NetworkX).
    ValueError
        A NaN weight (named by its arc).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.Graph(["ab", "ac", "bc", "de", "df", "fe"])
    >>> found = groute.asyn_lpa_communities(G, seed=1, backend="cpu", devices=1)
    >>> sorted(sorted(c) for c in found.components())
    [['a', 'b', 'c'], ['d', 'e', 'f']]
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices,
                    multigraph=None if weight is None else MULTIGRAPH)
    w = _weights(g, weight, arc_weights, "asyn_lpa_communities")
    with LabelPropagation(g, **options) as solver:
        if w is not None:
            keyed.arc_state(solver.engine, "w", w)
        return asynchronous(solver.engine, g, weighted=w is not None, salt=salt_of(seed),
                            queue=False, vertex_ids=g.vertex_ids)


@public(solver=LabelPropagation)
def fast_label_propagation_communities(G, *, weight=None, seed=None, arc_weights=None,
                                       num_vertices=None, **options) -> AppResult:
    """Communities by fast label propagation, as NetworkX's
    ``fast_label_propagation_communities`` (Traag and Subelj 2023): label propagation over a
    queue, a vertex that changes its label queueing its neighbours of another label; a
    directed graph's neighbours both ways. groute processes independent sets of the queue at
    once, in an order drawn from ``seed``, and a vertex keeps its label when it is among the
    most frequent (else takes the smallest such): NetworkX draws among them, so the
    communities may differ from NetworkX's.

    Parameters
    ----------
    G : graph input
        A NetworkX graph (not a multigraph), a scipy sparse matrix, edge arrays, a file, a
        graph spec or a :class:`~groute.graph.CSRGraph`.
    weight : str or None, optional
        The edge attribute whose values count a label's frequency; None: each edge counts 1.
    seed : int, random.Random or None, optional
        Where the order of the updates comes from.
    arc_weights : array, optional
        float64 weights per arc of the graph's CSR, instead of its own (float32) ones.
    num_vertices : int, optional
        The vertex count of edge arrays.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``partition``.

    Returns
    -------
    AppResult
        ``result.components()``: the communities as sets of ids.

    Raises
    ------
    GraphNotSupported
        A NetworkX multigraph (NetworkX counts its parallel edges).
    ValueError
        A NaN weight (named by its arc).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.ring_of_cliques(4, 5)
    >>> found = groute.fast_label_propagation_communities(G, seed=3, backend="cpu", devices=1)
    >>> [sorted(c) for c in found.components()]
    [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices, multigraph=MULTIGRAPH)
    w = _weights(g, weight, arc_weights, "fast_label_propagation_communities")
    both = g
    if g.directed:      # every neighbour both ways: the arcs' graph, a reciprocal pair twice
        arcs = level_graph(g, np.ones(g.num_edges) if w is None else w)
        both, w = arcs.csr, arcs.w_out + arcs.w_in
    with LabelPropagation(both, **options) as solver:
        if w is not None:
            keyed.arc_state(solver.engine, "w", w)
        return asynchronous(solver.engine, both, weighted=w is not None, salt=salt_of(seed),
                            queue=True, vertex_ids=g.vertex_ids)

#: why the functions refuse a NetworkX multigraph
MULTIGRAPH = "NetworkX counts every parallel edge; groute's graphs keep one"
