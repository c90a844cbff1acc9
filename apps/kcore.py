"""k-core decomposition, written only on groute's public operator API (docs/OPERATORS.md).

``core_number(graph)``: the core number of every vertex, as NetworkX's ``core_number``: the
largest ``k`` such that the vertex belongs to a subgraph in which every vertex has at least
``k`` neighbours. ``result.to_dict()`` is ``{id: core number}``.

Peeling, level by level: at level ``k`` the vertices still in the graph with at most ``k``
neighbours left get core number ``k`` and leave; each arc out of them costs its target one
neighbour (an atomic decrement on the target's owner), and a target whose count falls to ``k``
leaves at the same level, next round. When nothing is left to peel at ``k``, ``k`` jumps to
the least degree left (a ``reduce`` over the vertices still in): no level in between would
peel anything, so none runs.

The peel at a fixed ``k`` is order-free (``run_loop(..., order="any")``): a vertex's degree only
falls, the decrement from ``k + 1`` to ``k`` accepts it exactly once whichever arc comes first,
and a decrement reaching a vertex already peeled at ``k`` changes no answer. So the async engine
(``mode="async"``, or ``"auto"`` on several devices) may run each peel without levels (on CUDA
devices that write into each other's memory it leaves the peel, in any direction, to one fused
launch per device, which pays no host step per level), and every engine gives the same core
numbers.

The graph is undirected. A directed graph is read as NetworkX reads a ``DiGraph`` here: every
arc counts for both of its ends (a pair of opposite arcs counts twice). Self-loops are refused,
as NetworkX refuses them.
"""
from __future__ import annotations

import time

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, CSRGraph, input_graph
from groute.operators import AdvanceStep, ComputeStep, Functor, filter, reduce, run_loop
from groute.registry import algorithm

#: the core number of a vertex still in the graph
IN_GRAPH = -1

#: KCore's direction of the peel's advances unless told (and the command's default)
DEFAULT_DIRECTION = "push"

#: still in the graph: what ``alive`` keeps
STILL_IN = Functor(
    name="still_in", params="const int* core",
    cuda="return core[v] < 0;",
    numpy=lambda s, v: s["core"][v] < 0)

#: still in the graph with at most k neighbours left: leaves at level k
PEELABLE = Functor(
    name="peelable", params="const int* core, const int* degree, int k",
    cuda="return core[v] < 0 && degree[v] <= k;",
    numpy=lambda s, v: (s["core"][v] < 0) & (s["degree"][v] <= s["k"]))


def _remove(s, v):
    s["core"][v] = s["k"]


#: the vertex leaves with core number k
REMOVE = Functor(name="remove", params="int* core, int k", cuda="core[v] = k;", numpy=_remove)


def _lose_neighbour(s, v):
    """Vectorised: ``v`` repeats once per arc that reached it."""
    v = v[s["core"][v] < 0]
    hit, times = np.unique(v, return_counts=True)
    before = s["degree"][hit]
    s["degree"][hit] = before - times
    k = s["k"]
    return hit[(before > k) & (before - times <= k)]


#: an arc from a vertex that left: its target has one neighbour fewer, and leaves at this level
#: once it is down to k (the decrement from k + 1 to k says so, exactly once)
LOSE_NEIGHBOUR = Functor(
    name="lose_neighbour", params="int* degree, const int* core, int k",
    cuda="return core[v] < 0 && atomicSub(&degree[v], 1) == k + 1;",
    numpy=_lose_neighbour)


class KCore(EngineSolver):
    """Builds the engine once (partition, upload); :meth:`run` peels. Options: ``ctx`` or
    ``devices``/``backend``/``timeout``, ``partition`` (auto, metis, contiguous, random; ``seed``),
    ``direction`` of the advances (push, pull, auto; push by default: a peel's visit accepts a
    vertex only on the decrement that takes it down to k, so a pulling candidate reads nearly
    all its arcs, where Beamer's rule counts on a pull stopping at the first frontier arc; the
    push reads only the leaving vertices' arcs), ``mode``: the engine (auto, bsp, async:
    ``groute.engines.ENGINE_RULE``), ``loop``: how the peel loop runs (auto, fused, python:
    ``groute.engines.LOOP_RULE``; on the async engine also async:
    ``groute.engines.ASYNC_LOOP_RULE``)."""

    def __init__(self, graph, *, ctx=None, devices="auto", backend="auto", timeout=None,
                 partition=DEFAULT_PARTITION, seed=0, direction=DEFAULT_DIRECTION,
                 mode="auto", loop="auto"):
        self.graph = graph
        self.direction = direction
        undirected = _undirected(graph)
        self.engine = make_engine(undirected, mode, ctx=ctx, devices=devices,
                                  backend=backend, timeout=timeout, partition=partition,
                                  seed=seed, loop=loop)

    def run(self) -> AppResult:
        eng = self.engine
        eng.reset_counters()
        t0 = time.perf_counter()
        eng.out_degree_state("degree")
        eng.state("core", np.int32, IN_GRAPH)
        alive = eng.all_vertices()
        # the first level that peels anyone: the least degree
        k, levels, rounds = reduce(alive, "degree", "min") or 0, 0, 0
        while alive:
            frontier = filter(alive, PEELABLE, k=k)
            levels += 1
            # the peel at level k: who leaves takes a neighbour from each of its neighbours,
            # and who falls to k leaves next round, until nobody does
            peel = [ComputeStep(REMOVE),
                    AdvanceStep(LOSE_NEIGHBOUR, self.direction, candidates=alive)]
            rounds += run_loop(frontier, peel, order="any", k=k).levels
            alive = filter(alive, STILL_IN)
            if alive:   # the next level that peels anything: the least degree left
                k = max(k + 1, reduce(alive, "degree", "min"))
        core = eng.gather("core")
        seconds = time.perf_counter() - t0
        stats = dict(eng.stats, levels=levels, rounds=rounds,
                     max_core=int(core.max()) if core.size else 0)
        return AppResult(core, seconds, stats, vertex_ids=getattr(self.graph, "vertex_ids", None))



def _undirected(graph):
    """``graph`` with every arc counted at both ends (NetworkX's degree of a DiGraph); a
    GraphNotSupported error naming it if it has self-loops. A graph loaded by ranks is read
    so by every rank together (its loops counted over every rank's arcs, the arcs both ways
    from every rank's: :meth:`groute.graph.rank_graph.RankGraph.both_ways`)."""
    src, dst = graph.edges()
    loops = np.flatnonzero(np.asarray(src) == np.asarray(dst))
    count = int(loops.size)
    first = int(np.asarray(src)[loops[0]]) if count else int(graph.num_vertices)
    ranks = getattr(graph, "ranks", None)
    if ranks is not None:           # every rank raises, or none
        count = ranks.allreduce(count, what="the self-loops of every rank's arcs")
        first = ranks.allreduce(first, "min", what="the first self-loop")
    if count:
        raise groute.GraphNotSupported(
            f"graph {graph.name or '(unnamed)'} has {count} self-loop(s) (the first at "
            f"vertex {graph.file_id_of(first)!r}), which core_number does not permit, as "
            f"NetworkX: remove them first (NetworkX: G.remove_edges_from(nx.selfloop_edges(G)))")
    if not graph.directed:
        return graph
    if ranks is not None:
        return graph.both_ways()
    return CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                               graph.num_vertices, directed=False, dedupe=False,
                               name=graph.name)


@algorithm("kcore", solver=KCore, label="k-core", self_loops=False)
def core_number(G, *, num_vertices=None, symmetric=False, **options) -> AppResult:
    """The core number of every vertex, as NetworkX's ``core_number`` (module docstring).

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst)`` edge arrays, a file, a graph
        spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`); weights
        are ignored, and a directed graph's arcs count at both ends, as NetworkX's degree.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (the engine: ``"auto"``, ``"bsp"``, ``"async"``), ``partition``,
        ``seed``, and ``loop``, ``direction`` (:class:`KCore`).

    Returns
    -------
    AppResult
        Int32 core numbers by position; ``result.to_dict()`` is ``{id: core number}``.

    Raises
    ------
    GraphNotSupported
        NetworkX's ``NetworkXNotImplemented``: ``G`` has self-loops.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.Graph([(0, 1), (1, 2), (2, 0), (2, 3)])
    >>> groute.core_number(G, backend="cpu", devices=1).to_dict()
    {0: 2, 1: 2, 2: 2, 3: 1}
    """
    g = input_graph(G, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX's core_number takes no multigraph")
    if g.num_vertices == 0:
        return AppResult(np.zeros(0, np.int32), 0.0, {}, vertex_ids=g.vertex_ids)
    with KCore(g, **options) as solver:
        return solver.run()
