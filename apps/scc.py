"""Strongly connected components of a directed graph, written on groute's public operators
(``groute.strongly_connected_components``, ``groute scc``).

Colouring with trimming (Orzan's colouring; Slota, Rajamanickam and Madduri, "BFS and
coloring-based parallel algorithms for strongly connected components", IPDPS 2014). Every
vertex has a unique ``key`` (a fixed random permutation of the positions). While vertices
remain, one *iteration*:

1. **count**: every remaining vertex counts its arcs from and to other remaining vertices
   (``indeg``, ``outdeg``; self-loops do not count: a vertex is not its own neighbour here).
2. **trim**: a vertex with no remaining in-arc is an SCC of its own; so is one with no remaining
   out-arc. Removing a vertex with no in-arc takes one in-arc from each of its out-neighbours,
   which may leave them none: a peel to a fixpoint along out-arcs, one advance per step
   (k-core's peel with a threshold of zero). Then the same along in-arcs for the vertices with
   no out-arc. The two peels do not feed each other: a vertex with no remaining in-arc is no
   remaining vertex's out-neighbour, so removing it changes no ``outdeg``, and the other way
   round. Chains and trees hanging off cycles leave here, cheaply.
3. **colour**: ``colour[v] = key[v]``, and the largest colour spreads forward along out-arcs
   among the remaining vertices (advance with the source's colour as the message and an atomic
   max) until nothing changes: then ``colour[v]`` is the largest key of a vertex that reaches
   ``v``.
4. **claim**: a vertex whose colour is its own key is a *root*. Its SCC is the set of vertices
   of its colour that reach it (they are reached by the root, which has the largest key among
   their reachers, and reach it back), found by one backward search from all roots at once:
   advance over in-arcs, the root's colour as the message, claiming the remaining vertices of
   that colour. Each iteration claims at least the SCC of the largest key left.

On the host, the components are then labelled as CC labels them: by the smallest position in
the component, so ``result.to_dict()`` maps every id to its component's representative's id,
and ``result.components()`` lists the components as sets of ids, as NetworkX's
``strongly_connected_components`` yields them (in another order).

Why random keys rather than positions: the number of iterations depends on how keys are ordered
along paths between SCCs; a path of SCCs whose keys fall along it is claimed one SCC per
iteration, and inputs numbered in traversal order produce exactly that.

An undirected graph is refused with :class:`groute.GraphNotSupported` (NetworkX raises
``NetworkXNotImplemented``): its strongly connected components are its connected components,
``groute.connected_components``.
"""
from __future__ import annotations

import time

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, load_graph, reference
from groute.operators import AdvanceStep, Functor, Message, advance, compute, filter, run_loop
from groute.registry import algorithm

#: ``comp`` of a vertex not yet in a component
REMAINING = -1
#: the seed of the keys' permutation (fixed: the same graph takes the same iterations)
KEY_SEED = 0x5CC

#: the source's key: its visits tell a self-loop (the key is the target's own) from other arcs
SOURCE_KEY = Message("int", cuda="key[u]", numpy=lambda s, u: s["key"][u])

#: still remaining: what ``alive`` keeps
STILL_IN = Functor(
    name="scc_still_in", params="const int* comp",
    cuda="return comp[v] < 0;",
    numpy=lambda s, v: s["comp"][v] < 0)


def _clear(s, v):
    s["indeg"][v] = 0
    s["outdeg"][v] = 0


CLEAR_DEGREES = Functor(name="scc_clear_degrees", params="int* indeg, int* outdeg",
                        cuda="indeg[v] = 0; outdeg[v] = 0;", numpy=_clear)


def _count_arcs(degree):
    """The arc step that counts, in ``degree``, the arcs reaching a remaining vertex from
    another one (``indeg`` along out-arcs; ``outdeg`` along in-arcs, whose visit is the arc's
    source). Two functors because state is bound by name."""
    def count(s, v, m):
        mine = (s["comp"][v] < 0) & (m != s["key"][v])
        np.add.at(s[degree], v[mine], 1)
        return v[:0]
    return Functor(
        name=f"scc_count_{degree}", message=SOURCE_KEY,
        params=f"int* {degree}, const int* comp, const int* key",
        cuda=f"if (comp[v] < 0 && m != key[v]) atomicAdd(&{degree}[v], 1); return false;",
        numpy=count)


COUNT_INDEG = _count_arcs("indeg")
COUNT_OUTDEG = _count_arcs("outdeg")


def _trimmable(degree):
    """Remaining with no arc left on the ``degree`` side (a filter)."""
    return Functor(
        name=f"scc_no_{degree}", params=f"const int* comp, const int* {degree}",
        cuda=f"return comp[v] < 0 && {degree}[v] == 0;",
        numpy=lambda s, v: (s["comp"][v] < 0) & (s[degree][v] == 0))


NO_INDEG = _trimmable("indeg")
NO_OUTDEG = _trimmable("outdeg")


def _alone(s, v):
    s["comp"][v] = s["key"][v]


#: the vertex is an SCC of its own (its label: its key)
ALONE = Functor(name="scc_alone", params="int* comp, const int* key",
                cuda="comp[v] = key[v];", numpy=_alone)


def _lose_arc(degree):
    """The arc step of the peel: a remaining target loses one arc on the ``degree`` side; the
    one visit that takes it from 1 to 0 makes it an SCC of its own and puts it in the next
    frontier (with repeats counted at once on the CPU, as k-core)."""
    def lose(s, v, m):
        mine = (s["comp"][v] < 0) & (m != s["key"][v])
        hit, times = np.unique(v[mine], return_counts=True)
        before = s[degree][hit]
        s[degree][hit] = before - times
        gone = hit[(before > 0) & (before <= times)]
        s["comp"][gone] = s["key"][gone]
        return gone
    return Functor(
        name=f"scc_lose_{degree}", message=SOURCE_KEY,
        params=f"int* {degree}, int* comp, const int* key",
        cuda=(f"if (comp[v] >= 0 || m == key[v] || atomicSub(&{degree}[v], 1) != 1) "
              f"return false;\ncomp[v] = key[v];\nreturn true;"),
        numpy=lose)


LOSE_INDEG = _lose_arc("indeg")
LOSE_OUTDEG = _lose_arc("outdeg")


def _own_colour(s, v):
    s["colour"][v] = s["key"][v]


OWN_COLOUR = Functor(name="scc_own_colour", params="int* colour, const int* key",
                     cuda="colour[v] = key[v];", numpy=_own_colour)


def _spread(s, v, m):
    mine = s["comp"][v] < 0
    v, m = v[mine], m[mine]
    before = s["colour"][v]
    np.maximum.at(s["colour"], v, m)
    return np.unique(v[m > before])


#: the source's colour spreads to a remaining target with a smaller one; the target rejoins the
#: frontier. A message may read a colour the same advance is raising: any value read is the key
#: of a vertex that reaches the source, and a raised source is in the next frontier anyway.
SPREAD = Functor(
    name="scc_spread", params="int* colour, const int* comp",
    message=Message("int", cuda="colour[u]", numpy=lambda s, u: s["colour"][u]),
    cuda="return comp[v] < 0 && atomicMax(&colour[v], m) < m;", numpy=_spread)

#: a remaining vertex whose colour is its own key: the root of an SCC
ROOT = Functor(
    name="scc_root", params="const int* comp, const int* colour, const int* key",
    cuda="return comp[v] < 0 && colour[v] == key[v];",
    numpy=lambda s, v: (s["comp"][v] < 0) & (s["colour"][v] == s["key"][v]))


def _take_colour(s, v):
    s["comp"][v] = s["colour"][v]


TAKE_COLOUR = Functor(name="scc_take_colour", params="int* comp, const int* colour",
                      cuda="comp[v] = colour[v];", numpy=_take_colour)


def _claim(s, v, m):
    mine = (s["comp"][v] < 0) & (s["colour"][v] == m)
    v = np.unique(v[mine])
    s["comp"][v] = s["colour"][v]
    return v


#: backward from the roots (over in-arcs, so ``v`` reaches ``u``): a remaining vertex of the
#: root's colour is in its SCC; the CAS claims it once
CLAIM = Functor(
    name="scc_claim", params="int* comp, const int* colour",
    message=Message("int", cuda="colour[u]", numpy=lambda s, u: s["colour"][u]),
    cuda="return colour[v] == m && atomicCAS(&comp[v], -1, m) == -1;", numpy=_claim)


#: the peels of the trim (to a fixpoint): along out-arcs from the vertices with no in-arc left,
#: along in-arcs from those with no out-arc left
TRIM_IN = [AdvanceStep(LOSE_INDEG)]
TRIM_OUT = [AdvanceStep(LOSE_OUTDEG, over="in")]
#: the colours spread forward until none changes
COLOUR = [AdvanceStep(SPREAD)]
#: the backward search from the roots claims their components
CLAIM_SCC = [AdvanceStep(CLAIM, over="in")]


class SCC(EngineSolver):
    """Builds the engine once (partition, upload, the keys); :meth:`run` finds the components.
    Options: ``ctx`` or ``devices``/``backend``/``timeout``, ``partition`` (auto, metis, contiguous,
    random; ``seed``), ``mode``: the engine (auto, bsp, async: ``groute.engines.ENGINE_RULE``),
    ``loop``: how the peels, the colouring and the claim run (auto, fused, python:
    ``groute.engines.LOOP_RULE``). ``graph``: a directed CSRGraph."""

    def __init__(self, graph, *, ctx=None, devices="auto", backend="auto", timeout=None,
                 partition=DEFAULT_PARTITION, seed=0, mode="auto", loop="auto"):
        _check_directed(graph)
        self.graph = graph
        self.engine = make_engine(graph, mode, ctx=ctx, devices=devices, backend=backend,
                                  timeout=timeout, partition=partition, seed=seed, loop=loop)
        n = graph.num_vertices
        self.engine.state("key", np.int32,
                          values=np.random.default_rng(KEY_SEED).permutation(n))

    def run(self) -> AppResult:
        eng = self.engine
        eng.reset_counters()
        t0 = time.perf_counter()
        for name in ("comp", "colour", "indeg", "outdeg"):
            eng.state(name, np.int32, REMAINING)
        alive = eng.all_vertices()
        iterations = trim_rounds = colour_rounds = claim_rounds = trimmed = 0
        while alive:
            iterations += 1
            compute(alive, CLEAR_DEGREES)
            advance(alive, COUNT_INDEG)
            advance(alive, COUNT_OUTDEG, over="in")
            before = len(alive)
            for no_arc, peel in ((NO_INDEG, TRIM_IN), (NO_OUTDEG, TRIM_OUT)):
                frontier = filter(alive, no_arc)
                compute(frontier, ALONE)
                trim_rounds += run_loop(frontier, peel).levels
            alive = filter(alive, STILL_IN)
            trimmed += before - len(alive)
            if not alive:
                break
            compute(alive, OWN_COLOUR)
            colour_rounds += run_loop(alive, COLOUR).levels
            frontier = filter(alive, ROOT)
            compute(frontier, TAKE_COLOUR)
            claim_rounds += run_loop(frontier, CLAIM_SCC).levels
            alive = filter(alive, STILL_IN)
        labels = reference.canonical_labels(eng.gather("comp"))
        seconds = time.perf_counter() - t0
        sizes = np.bincount(labels, minlength=labels.shape[0])
        stats = dict(eng.stats, iterations=iterations, trimmed=trimmed, trim_rounds=trim_rounds,
                     colour_rounds=colour_rounds, claim_rounds=claim_rounds,
                     components=int(np.count_nonzero(sizes)),
                     largest=int(sizes.max()) if sizes.size else 0)
        return AppResult(labels, seconds, stats, values_are_vertices=True,
                         vertex_ids=getattr(self.graph, "vertex_ids", None))



def _check_directed(graph):
    """A GraphNotSupported error naming ``graph`` if it is undirected."""
    if not graph.directed:
        raise groute.GraphNotSupported(
            f"graph {graph.name or '(unnamed)'} is undirected; strongly_connected_components "
            f"takes a directed graph, as NetworkX: the strongly connected components of an "
            f"undirected graph are its connected components (groute.connected_components)")


@algorithm("scc", solver=SCC, label="SCC", directed=True)
def strongly_connected_components(G, *, num_vertices=None, **options) -> AppResult:
    """The strongly connected components of the directed graph ``G``, as NetworkX's
    ``strongly_connected_components`` (module docstring).

    Parameters
    ----------
    G : graph input
        A directed graph: a NetworkX ``DiGraph``, a scipy sparse matrix, ``(src, dst)`` edge
        arrays, a file, a graph spec or a :class:`~groute.graph.CSRGraph`
        (:func:`groute.graph.load_graph`); weights are ignored.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (the engine), ``partition``, ``seed``, ``loop`` (:class:`SCC`).

    Returns
    -------
    AppResult
        ``values``: the smallest position in each vertex's component; ``result.to_dict()`` is
        ``{id: representative's id}``, ``result.components()`` the components as sets of ids.

    Raises
    ------
    GraphNotSupported
        NetworkX's ``NetworkXNotImplemented``: ``G`` is undirected.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> D = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3)])
    >>> groute.strongly_connected_components(D, backend="cpu", devices=1).components()
    [{0, 1, 2}, {3}]
    """
    g = load_graph(G, weight=None, num_vertices=num_vertices)
    _check_directed(g)
    if g.num_vertices == 0:
        return AppResult(np.zeros(0, np.int64), 0.0, {"components": 0, "largest": 0},
                         vertex_ids=g.vertex_ids, values_are_vertices=True)
    with SCC(g, **options) as solver:
        return solver.run()
