"""Closeness centrality, written only on groute's public operator API (docs/OPERATORS.md).

``closeness_centrality(G, u=None, distance=None, wf_improved=True)``: as NetworkX's, the
reciprocal of a vertex's mean distance *from* the vertices that reach it (on a directed graph
the incoming distance, as NetworkX reads ``G.reverse()``): ``(r - 1) / t`` with ``t`` the sum
of those distances and ``r`` the vertices counted (itself included), scaled by ``(r - 1) / (n -
1)`` (Wasserman and Faust) with ``wf_improved``; 0 where ``t`` is 0 or ``n`` is 1.

Every vertex's answer needs a search from every vertex. The sum ``t[v]`` is a sum over the
sources that reach ``v``, so each search adds its distance to the vertices it reaches, on their
own devices, and no search needs a sum of its own:

- hops (``distance=None``): breadth-first searches from 64 sources at once, one bit per
  source in an ``unsigned long long`` per vertex. A level pushes each frontier vertex's bits of
  the sources whose search reached it last level (the message) along its out-arcs; a target
  keeps the bits it has not seen (an atomic or) and joins the next level, where it adds the
  level times their count to ``t`` and their count to ``r``. A batch is the sources among 64
  consecutive positions (each its bit: its position mod 64); one ``run_loop`` per batch, one
  launch per batch on one CUDA device, no host step per source or per level.
- ``distance``: on the subdivided graph (:mod:`groute.operators.arc_vertices`: an arc's
  length is the state of a vertex on it, paid on entering it), a search per source as a round
  of :func:`~groute.operators.run_rounds` (every round one launch on one CUDA device): a
  Bellman-Ford relaxation from the source (:data:`groute.operators.DISTANCE`), every level
  kept, then a sweep over
  the kept levels that adds each reached input vertex's distance to its ``t`` and clears the
  state (a vertex a relaxation reached twice is added once, the second visit finding it
  cleared). The lengths are float64, summed along each path as NetworkX sums it.

With ``u``, one search from ``u`` over the in-arcs (the distances *to* ``u``), its sums
reduced over the devices.
"""
from __future__ import annotations

import time

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, load_graph
from groute.operators import (DISTANCE, DISTANCE_UNREACHED, AdvanceStep, Compute, ComputeStep,
                              Functor, Loop, Message, Sweep, arc_values, compute, reduce,
                              run_loop, run_rounds, subdivided_graph)
from groute.registry import public

#: sources per breadth-first pass: one bit each in an ``unsigned long long``
BATCH = 64


def popcount(bits: np.ndarray) -> np.ndarray:
    """The set bits of each ``uint64`` (``__popcll``'s NumPy twin), as int64."""
    bytes_ = np.ascontiguousarray(bits, dtype=np.uint64).view(np.uint8)
    return np.unpackbits(bytes_).reshape(-1, 64).sum(axis=1, dtype=np.int64)


def _spread(s, v, m):
    fresh = m & ~s["seen"][v]
    hit = fresh != 0
    np.bitwise_or.at(s["nxt"], v[hit], fresh[hit])
    return np.unique(v[hit])


#: a level of the searches: a vertex reached along an arc by searches that had not reached it
#: (the bits of the message it has not seen) keeps those bits and joins the next level
SPREAD = Functor(
    name="closeness_spread",
    params="const unsigned long long* seen, const unsigned long long* last, "
           "unsigned long long* nxt",
    message=Message("unsigned long long", cuda="last[u]", numpy=lambda s, u: s["last"][u]),
    cuda="const unsigned long long fresh = m & ~seen[v];\n"
         "if (fresh == 0ull) return false;\n"
         "atomicOr(&nxt[v], fresh);\n"
         "return true;",
    numpy=_spread)


def _settle(s, v):
    bits = s["nxt"][v]
    s["nxt"][v] = 0
    s["seen"][v] |= bits
    s["last"][v] = bits
    count = popcount(bits)
    s["reached"][v] += count
    s["total"][v] += count * s["d"]


#: on the vertices the level reached: the new bits become seen and next level's message, and
#: each adds the level (its distance) to the vertex's sum
SETTLE = Functor(
    name="closeness_settle",
    params="unsigned long long* seen, unsigned long long* last, unsigned long long* nxt, "
           "long long* total, long long* reached, int d",
    cuda="const unsigned long long bits = nxt[v];\n"
         "nxt[v] = 0ull;\n"
         "seen[v] |= bits;\n"
         "last[v] = bits;\n"
         "const long long count = __popcll(bits);\n"
         "reached[v] += count;\n"
         "total[v] += count * (long long)d;",
    numpy=_settle)


def _clear(s, v):
    s["seen"][v] = 0


#: before a batch: no search has seen anything
CLEAR = Functor(name="closeness_clear", params="unsigned long long* seen",
                cuda="seen[v] = 0ull;", numpy=_clear)


def _begin(s, v):
    bits = np.left_shift(np.uint64(1), s["slot"][v].astype(np.uint64))
    s["seen"][v] = bits
    s["last"][v] = bits
    s["reached"][v] += 1


#: a batch's sources: each its own bit (its slot in the batch), reached at distance 0
BEGIN = Functor(
    name="closeness_begin",
    params="unsigned long long* seen, unsigned long long* last, const int* slot, "
           "long long* reached",
    cuda="const unsigned long long bit = 1ull << slot[v];\n"
         "seen[v] = bit;\n"
         "last[v] = bit;\n"
         "reached[v] += 1;",
    numpy=_begin)


def _start(s, v):
    s["dist"][v] = 0.0


#: a search's source: distance 0
START = Functor(name="closeness_start", params="double* dist", cuda="dist[v] = 0.0;",
                numpy=_start)


def _add(s, v):
    d = s["dist"][v]
    on = d >= 0
    mine = on & (s["arc"][v] == 0)
    s["dist"][v[on]] = DISTANCE_UNREACHED
    s["wtotal"][v[mine]] += d[mine]
    s["reached"][v[mine]] += 1


#: after a search, on each vertex it kept: an input vertex it reached adds its distance; the
#: state is cleared for the next search (so a vertex kept twice counts once)
ADD = Functor(
    name="closeness_add",
    params="double* dist, const int* arc, double* wtotal, long long* reached",
    cuda="const double d = dist[v];\n"
         "if (d < 0.0) return false;\n"
         "dist[v] = -1.0;\n"
         "if (arc[v] == 0) {\n"
         "    wtotal[v] += d;\n"
         "    reached[v] += 1;\n"
         "}\n"
         "return false;",
    numpy=_add)


class Closeness(EngineSolver):
    """Builds the engine once (partition, upload; with ``weights``, over the subdivided graph);
    :meth:`sums` runs the searches and :meth:`run` answers. ``weights``: None (hops) or one
    length >= 0 per arc of ``graph`` in its order (float64). Options: ``ctx`` or
    ``devices``/``backend``/``timeout``, ``partition`` (auto, metis, contiguous, random; ``seed``),
    ``mode``: the engine (auto, bsp, async: ``groute.engines.ENGINE_RULE``), ``loop``: how the
    searches' loops run (auto, fused, python: ``groute.engines.LOOP_RULE``)."""

    def __init__(self, graph, *, weights=None, ctx=None, devices="auto", backend="auto",
                 timeout=None, partition=DEFAULT_PARTITION, seed=0, mode="auto", loop="auto"):
        self.graph = graph
        self.n = n = int(graph.num_vertices)
        self.weighted = weights is not None
        run_on = graph
        if self.weighted:
            lengths = np.asarray(weights, dtype=np.float64)
            if lengths.shape != (graph.num_edges,):
                raise ValueError(f"closeness: weights must have one length per arc "
                                 f"({graph.num_edges}), got shape {lengths.shape}")
            if lengths.size and not (np.all(np.isfinite(lengths)) and lengths.min() >= 0):
                raise ValueError("closeness: the lengths must be finite and >= 0")
            run_on = subdivided_graph(graph, "weighted closeness")
        self.engine = make_engine(run_on, mode, ctx=ctx, devices=devices, backend=backend,
                                  timeout=timeout, partition=partition, seed=seed, loop=loop)
        eng = self.engine
        if self.weighted:
            arc = np.zeros(run_on.num_vertices, np.int32)
            arc[n:] = 1
            eng.state("arc", np.int32, values=arc)
            eng.state("cost", np.float64, values=np.concatenate([np.zeros(n), lengths]))
        else:
            eng.state("slot", np.int32, values=(np.arange(n) % BATCH).astype(np.int32))

    def sums(self, sources=None, *, over="out"):
        """``(t, r)`` by position: over the searches from ``sources`` (positions; None: every
        vertex) along ``over`` arcs, each vertex's sum of its distances from the sources that
        reach it and their count (itself included when it is one)."""
        eng = self.engine
        eng.state("reached", np.int64, 0)
        order = np.arange(self.n) if sources is None else np.asarray(sources, np.int64)
        if self.weighted:
            eng.state("dist", np.float64, DISTANCE_UNREACHED)
            eng.state("wtotal", np.float64, 0.0)
            run_rounds(eng, order, [Compute(START, over="seed"),
                                    Loop([AdvanceStep(DISTANCE, "auto", over=over)], keep=True),
                                    Sweep([ComputeStep(ADD)])])
            return eng.gather("wtotal")[:self.n], eng.gather("reached")[:self.n]
        for name in ("seen", "last", "nxt"):
            eng.state(name, np.uint64, 0)
        eng.state("total", np.int64, 0)
        everyone = eng.all_vertices()
        # a batch: the sources of one block of 64 positions, whose slots (position % 64) differ
        order = np.sort(order)
        starts = np.flatnonzero(np.diff(order // BATCH, prepend=-1))
        for batch in np.split(order, starts[1:]):
            batch = eng.frontier_at(batch)
            compute(everyone, CLEAR)
            compute(batch, BEGIN)
            run_loop(batch, [AdvanceStep(SPREAD, over=over), ComputeStep(SETTLE)], level="d",
                     start=1)
        return eng.gather("total"), eng.gather("reached")

    def run(self, u=None, *, wf_improved=True):
        """Every vertex's closeness (an :class:`~groute.results.AppResult`), or with ``u`` (a
        vertex id) that vertex's, a float."""
        t0 = time.perf_counter()
        self.engine.reset_counters()
        if u is not None:
            if isinstance(u, (list, np.ndarray)):   # the lookup takes several: one float of them
                raise TypeError(f"u must be one vertex id, got {type(u).__name__}")
            try:
                source = self.graph.vertex_of(u, "u")
            except KeyError as exc:
                raise groute.NodeNotFound(exc.args[0]) from None
            over = "in" if self.graph.directed else "out"
            self.sums([source], over=over)
            eng = self.engine
            keep = eng.all_vertices()
            name = "wtotal" if self.weighted else "total"
            total = reduce(keep, name, "sum")
            reached = reduce(keep, "reached", "sum")     # arc vertices never count
            return float(_closeness(np.array([total]), np.array([reached]), self.n,
                                    wf_improved)[0])
        total, reached = self.sums()
        values = _closeness(total, reached, self.n, wf_improved)
        stats = dict(self.engine.stats, sources=self.n, batch=None if self.weighted else BATCH)
        return AppResult(values, time.perf_counter() - t0, stats,
                         vertex_ids=getattr(self.graph, "vertex_ids", None))


def _closeness(total, reached, n: int, wf_improved: bool) -> np.ndarray:
    """NetworkX's closeness from the sums (float64, the same operations in the same order)."""
    total = np.asarray(total, dtype=np.float64)
    others = np.asarray(reached, dtype=np.float64) - 1.0
    out = np.zeros(total.shape[0])
    if n <= 1:
        return out
    some = total > 0.0
    out[some] = others[some] / total[some]
    if wf_improved:
        out[some] *= others[some] / (n - 1)
    return out


@public(solver=Closeness)
def closeness_centrality(G, u=None, distance=None, wf_improved=True, *, arc_weights=None,
                         num_vertices=None, symmetric=False, **options):
    """Closeness centrality, as NetworkX's ``closeness_centrality`` with the same arguments
    (module docstring): on a directed graph from the distances *to* each vertex.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    u : vertex id, optional
        Only this vertex's closeness (a float); None: every vertex's.
    distance : str, optional
        The edge attribute holding the arcs' lengths (an edge without it: 1); None: hops.
    wf_improved : bool, optional
        Scale by the share of the other vertices that reach the vertex (Wasserman and Faust),
        as NetworkX does by default.
    arc_weights : array of float, optional
        With ``distance``: one length per arc of ``G``'s CSR graph in its order, read instead
        of the graph's weights (which a :class:`~groute.graph.CSRGraph` keeps in float32): the
        NetworkX backend passes NetworkX's own.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode``, ``partition``, ``seed``, ``loop`` (:class:`Closeness`).

    Returns
    -------
    AppResult or float
        Float64 closeness by position (``result.to_dict()`` is ``{id: closeness}``), or with
        ``u`` that vertex's.

    Raises
    ------
    NodeNotFound
        NetworkX's: ``u`` is not a vertex.
    TypeError
        ``u`` a list or an array (one vertex id is asked for).
    ValueError
        A length that is negative or not finite.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.path_graph(4)
    >>> groute.closeness_centrality(G, backend="cpu", devices=1).to_dict()
    {0: 0.5, 1: 0.75, 2: 0.75, 3: 0.5}
    >>> groute.closeness_centrality(nx.DiGraph([(0, 1), (1, 2)]), u=2, backend="cpu",
    ...                             devices=1)
    0.6666666666666666
    """
    g = load_graph(G, weight=distance, num_vertices=num_vertices, symmetric=symmetric)
    weights = None if distance is None else arc_values(g, arc_weights)
    if g.num_vertices == 0:
        if u is not None:
            raise groute.NodeNotFound(f"u {u!r} is not a vertex of the empty graph")
        return AppResult(np.zeros(0), 0.0, {}, vertex_ids=g.vertex_ids)
    with Closeness(g, weights=weights, **options) as solver:
        return solver.run(u, wf_improved=wf_improved)
