"""Betweenness centrality (Brandes) of vertices and of edges, by hops and by lengths, written
only on groute's public operator API (docs/OPERATORS.md).

``betweenness_centrality(graph, k=None, normalized=True, weight=None, endpoints=False,
seed=None, *, sources=None)``: as NetworkX's ``betweenness_centrality``, the share of
shortest paths between other pairs of vertices that pass through each vertex.
``result.to_dict()`` is ``{id: float}``. ``edge_betweenness_centrality(graph, k=None,
normalized=True, weight=None, seed=None, *, sources=None)``: as NetworkX's, the share through
each edge, ``{(u, v): float}``.

**By hops** (:class:`Betweenness`, vertices only). Per source ``s``, one *round* of
:func:`run_rounds` (every source's round in one call; on one CUDA device every round in one
persistent launch, on several that write into each other's memory one launch per device, with
no host step between sources, ``groute.engines.LOOP_RULE``):

- start: ``s`` on level 0 with one shortest path (a ``Compute`` on the round's seed);
- forward, level by level (a ``Loop``, every level kept): a gathering ``advance`` from
  the level-``d`` frontier, whose candidates are the unvisited vertices: each sums the path
  counts ``sigma[u]`` of its arcs from level ``d`` (the message) and, with at least one such
  arc, joins level ``d + 1`` with that sum as its ``sigma``. ``"auto"``: small levels push (the
  sums deposited with atomics), big ones pull (every unvisited vertex reads its in-arcs, no
  atomics), by Beamer's rule.
- backward, from the deepest level up (a ``Sweep`` over the kept levels but the source's): a
  gathering pull over the *in*-arcs of level ``L``: each vertex ``v`` of level ``L - 1`` sums
  ``(1 + delta[u]) / sigma[u]`` over its arcs to level ``L`` and writes ``delta[v] = sigma[v] *
  sum`` once, with no atomics. A message reads level ``L``'s state while the bodies write
  level ``L - 1``'s, so one step per level is race-free.
- accumulate (a ``Sweep`` of a compute over every kept level: the vertices the source reached,
  which are the only ones whose state it changed, so a source that reaches few costs little):
  ``delta`` joins the scores (``endpoints``: NetworkX's ``_accumulate_endpoints``, with the
  round's ``reached``, the vertices over its levels) and the state is reset for the next source.

**By lengths, and edges** (:class:`ArcBetweenness`). Both need a value per arc (its length, its
score) and the operators keep state per vertex, so they run on the subdivided graph
(:mod:`groute.operators.arc_vertices`): arc ``e`` becomes an *arc vertex* ``n + e`` between its
tail and its head, holding the arc's length (1 for hops; paid on entering it) and collecting
the arc's score. Shortest paths, their lengths (float64, summed along each path as NetworkX's
Dijkstra sums them) and their counts are the input's. Per source ``s``, one round:

1. distances: Bellman-Ford from ``s`` (:data:`groute.operators.DISTANCE`), every level kept;
2. the shortest-path DAG: over those levels, each reached vertex tells its in-neighbours its
   distance (an advance over in-arcs), and an arc vertex whose distance equals its head's is
   *tight* (its out-arc is on a shortest path; an input vertex's out-arcs always are, its arc
   vertices' distance being its own plus their length); then each reached vertex, once (a
   filter marks it), counts itself into the *pending* count of its tight out-arcs' heads;
3. path counts in DAG order (Kahn's algorithm, a Loop whose levels are kept): from ``s``, each
   vertex sends its count ``sigma`` along its tight out-arcs; the head adds it (an atomic add)
   and, at its last pending arc (an atomic decrement to 0), joins the next level. Every arc of
   the DAG goes from a level to a later one;
4. dependencies, deepest level first (a Sweep over in-arcs): each vertex ``w`` sends ``(t[w] +
   delta[w]) / sigma[w]`` (``t`` 1 for an input vertex, 0 for an arc vertex: only the input's
   vertices are targets) to its tight in-arcs' tails, which add it up; ``delta = sigma`` times
   that sum. An arc vertex's ``delta`` is its arc's share of the paths from ``s``, an input
   vertex's its own (NetworkX's ``_accumulate_edges``);
5. a Sweep over the kept levels adds the ``delta`` to the scores (``endpoints``: the source's
   own ``delta`` is the number of targets it reached) and clears the state for the next source.

The lengths must be > 0 (NetworkX's note: zero-length edges make infinitely many shortest paths,
its answer then depending on its search order). Lengths so small beside a distance that adding
them changes nothing in float64 (``1 + 1e-17 == 1``) act as zero: a cycle of them ties (a
self-loop of such a length too), Kahn's order never reaches its vertices (their pending counts
stay above 0), and :meth:`ArcBetweenness.sums` raises a ValueError naming them rather than
return the wrong scores. An undirected edge's score is its two arcs' sum.
``betweenness_centrality`` with a ``weight`` whose values are not all 1 runs here, as does
every ``edge_betweenness_centrality``.

Rescaling is NetworkX's ``_rescale`` (3.6), including its rules for sampled sources: ``k``
sources drawn as NetworkX draws them (``seed.sample(list(G), k)``: with an integer ``seed`` a
NetworkX graph gets the same sources), or ``sources`` given by id, rescaled as a sample of that
many (edges: with endpoints, as NetworkX rescales them). A directed graph counts ordered pairs;
self-loops and isolated vertices change nothing (but a self-loop whose length vanishes, above).
"""
from __future__ import annotations

import math
import time

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, input_graph, load_graph
from groute.operators import (DISTANCE, DISTANCE_UNREACHED, AdvanceStep, Compute, ComputeStep,
                              FilterStep, Functor, Gather, Loop, Message, Sweep, arc_values,
                              reduce, run_rounds, subdivided_graph)
from groute.registry import algorithm, public

#: depth of a vertex the current source has not reached
UNREACHED = -1


def _forward(s, v, m):
    """Vectorised: ``v`` the distinct unvisited vertices with an arc from level d, ``m`` the
    sum of those arcs' sources' path counts."""
    s["depth"][v] = s["d"] + 1
    s["sigma"][v] = m
    return v


#: forward step from level d: every unvisited vertex with arcs from level d joins level d + 1
#: (the next frontier) with the sum of their sources' shortest-path counts as its own
FORWARD = Functor(
    name="bc_forward", params="int* depth, double* sigma, int d",
    message=Message("double", cuda="sigma[u]", numpy=lambda s, u: s["sigma"][u]),
    gather=Gather("sum", cuda="depth[v] < 0", numpy=lambda s, v: s["depth"][v] < 0),
    cuda="depth[v] = d + 1;\nsigma[v] = m;\nreturn true;",
    numpy=_forward)


def _backward(s, v, m):
    s["delta"][v] = s["sigma"][v] * m
    return v[:0]


#: backward step at level ``level``: a vertex v one level up gets Brandes' dependency,
#: sigma[v] times the sum over its successors u on level ``level`` of (1 + delta[u]) / sigma[u]
BACKWARD = Functor(
    name="bc_backward", params="const int* depth, const double* sigma, double* delta, int level",
    message=Message("double", cuda="(1.0 + delta[u]) / sigma[u]",
                    numpy=lambda s, u: (1.0 + s["delta"][u]) / s["sigma"][u]),
    gather=Gather("sum", cuda="depth[v] == level - 1",
                  numpy=lambda s, v: s["depth"][v] == s["level"] - 1),
    cuda="delta[v] = sigma[v] * m;\nreturn false;",
    numpy=_backward)


#: the forward pass: level d claims level d + 1, pushing small levels and pulling big ones,
#: every level kept for the backward pass
FORWARD_PASS = [AdvanceStep(FORWARD, "auto")]
#: the backward pass: each level but the source's, deepest first, pulled over its in-arcs
#: (the level above reads its out-arcs)
BACKWARD_PASS = [AdvanceStep(BACKWARD, "pull", over="in")]


def _start(s, v):
    s["depth"][v] = 0
    s["sigma"][v] = 1.0


#: a source: level 0, one shortest path (to itself)
START = Functor(name="bc_start", params="int* depth, double* sigma",
                cuda="depth[v] = 0;\nsigma[v] = 1.0;", numpy=_start)


def _accumulate(s, v):
    depth, bc = s["depth"][v], s["bc"]
    extra = 1.0 if s["endpoints"] else 0.0
    on = depth > 0
    bc[v[on]] += s["delta"][v[on]] + extra
    if s["endpoints"]:
        bc[v[depth == 0]] += s["reached"] - 1.0
    s["depth"][v] = UNREACHED
    s["sigma"][v] = 0.0
    s["delta"][v] = 0.0


#: after a source, on each vertex it reached: its dependency joins the scores (the source
#: itself only with endpoints: the ``reached - 1`` paths it starts), and its state is reset
ACCUMULATE = Functor(
    name="bc_accumulate",
    params="int* depth, double* sigma, double* delta, double* bc, int endpoints, double reached",
    cuda="const int dv = depth[v];\n"
         "if (dv > 0) bc[v] += endpoints ? delta[v] + 1.0 : delta[v];\n"
         "else if (dv == 0 && endpoints) bc[v] += reached - 1.0;\n"
         "depth[v] = -1;\n"
         "sigma[v] = 0.0;\n"
         "delta[v] = 0.0;",
    numpy=_accumulate)


class Betweenness(EngineSolver):
    """Builds the engine once (partition, upload); :meth:`run` scores from a list of sources.
    Options: ``ctx`` or ``devices``/``backend``/``timeout``, ``partition`` (auto, metis, contiguous,
    random; ``seed``), ``mode``: the engine (auto, bsp, async: ``groute.engines.ENGINE_RULE``),
    ``loop``: how the forward and backward passes run (auto, fused, python:
    ``groute.engines.LOOP_RULE``). ``forward_pass`` and ``backward_pass``: the steps
    of each pass (a subclass may give other directions, as the benchmarks compare them);
    :meth:`rounds`: a source's round (module docstring)."""

    forward_pass = FORWARD_PASS
    backward_pass = BACKWARD_PASS

    def __init__(self, graph, *, ctx=None, devices="auto", backend="auto", timeout=None,
                 partition=DEFAULT_PARTITION, seed=0, mode="auto", loop="auto"):
        self.graph = graph
        self.engine = make_engine(graph, mode, ctx=ctx, devices=devices, backend=backend,
                                  timeout=timeout, partition=partition, seed=seed, loop=loop)

    def rounds(self) -> list:
        """What runs per source: start, forward, backward, accumulate (module docstring)."""
        return [Compute(START, over="seed"),
                Loop(self.forward_pass, level="d", keep=True),
                Sweep(self.backward_pass, level="level", reverse=True, skip=1),
                Sweep([ComputeStep(ACCUMULATE)])]

    def run(self, sources=None, *, normalized=True, endpoints=False,
            rescale=True) -> AppResult:
        """Scores from the shortest paths out of ``sources`` (distinct vertex ids, the graph's
        own, as every answer is keyed; ``None``: every vertex). Fewer sources than vertices
        are rescaled as NetworkX rescales a sample of that many; ``rescale=False``: the
        dependencies summed over ``sources`` as they are (Brandes' sum, neither normalised nor
        halved on undirected graphs), as a benchmark compares them."""
        eng, n = self.engine, self.engine.num_vertices
        order = np.arange(n) if sources is None else _source_positions(self.graph, sources)
        sampled = None if order.size == n else order
        eng.reset_counters()
        t0 = time.perf_counter()
        eng.state("depth", np.int32, UNREACHED)
        eng.state("sigma", np.float64, 0.0)
        eng.state("delta", np.float64, 0.0)
        eng.state("bc", np.float64, 0.0)
        done = run_rounds(eng, order, self.rounds(), total="reached",
                          endpoints=int(bool(endpoints)))
        bc = eng.gather("bc")
        if rescale:
            bc = _rescale(bc, n, normalized=normalized, directed=eng.directed,
                          endpoints=endpoints, sampled=sampled)
        seconds = time.perf_counter() - t0
        stats = dict(eng.stats, sources=done.rounds, levels=done.levels,
                     max_depth=max(done.deepest - 1, 0))
        return AppResult(bc, seconds, stats, vertex_ids=getattr(self.graph, "vertex_ids", None))




def _source_positions(graph, sources) -> np.ndarray:
    """The positions of ``sources`` (the graph's own vertex ids, each once)."""
    if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
        raise TypeError(f"sources must be a list of vertex ids, got "
                        f"{type(sources).__name__}")
    ids = sources.tolist() if isinstance(sources, np.ndarray) else list(sources)
    try:
        positions = [graph.vertex_of(i, "source") for i in ids]
    except KeyError as exc:
        raise groute.NodeNotFound(f"sources: {exc.args[0]}") from None
    return _distinct(positions, int(graph.num_vertices))


def _distinct(sources, n) -> np.ndarray:
    order = np.asarray(sources, dtype=np.int64).reshape(-1)
    if order.size and (order.min() < 0 or order.max() >= n):
        raise ValueError(f"sources: positions must be in [0, {n}); got "
                         f"{order.min()}..{order.max()}")
    if np.unique(order).size != order.size:
        raise ValueError("sources: a vertex appears more than once; give each source once")
    return order


def _rescale(bc, n, *, normalized, directed, endpoints, sampled):
    """NetworkX's ``betweenness._rescale`` (3.6) on an array: ``sampled`` the source positions
    when they were a sample (``None``: every vertex was a source)."""
    k = None if sampled is None else len(sampled)
    N = n if endpoints else n - 1
    if N < 2:
        return bc
    K = N if k is None else k
    if K == 0:
        raise ZeroDivisionError("betweenness from no sources (sources=[], or NetworkX's k=0): "
                                "the rescaling divides by the number of sources, as NetworkX's")
    correction = 1 if directed else 2
    if k is None or endpoints:
        scale = 1 / (K * (N - 1)) if normalized else N / (K * correction)
        return bc * scale if scale != 1 else bc
    # a sampled source is not among its own targets when endpoints are excluded
    if normalized:
        source = 1 / ((K - 1) * (N - 1)) if K > 1 else math.nan
        other = 1 / (K * (N - 1))
    else:
        source = N / ((K - 1) * correction) if K > 1 else math.nan
        other = N / (K * correction)
    scale = np.full(n, other)
    scale[sampled] = source
    return bc * scale


def sample_sources(n: int, k: int, seed=None) -> list | None:
    """``k`` distinct positions of ``n``, drawn as NetworkX draws betweenness sources: ``seed``
    made a random state by NetworkX's own ``create_py_random_state`` (an int, ``None``, a
    ``random.Random``, a NumPy ``RandomState`` or ``Generator``), then ``seed.sample(list(G),
    k)``: for the same seed the positions of the nodes NetworkX picks, whatever the labels
    (``sample`` picks by index). ``None`` when ``k`` is every vertex: NetworkX then scores from
    all of them without drawing (the random state is left alone, the scores exact)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int (the number of sources to sample) or None; got "
                        f"{type(k).__name__}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of vertices ({n}); got {k}")
    if k == n:
        return None
    from networkx.utils import create_py_random_state
    try:
        rng = create_py_random_state(seed)
    except ValueError:
        raise TypeError(f"seed must be an int, None, a random.Random or a NumPy random "
                        f"generator; got {type(seed).__name__}") from None
    return rng.sample(range(n), int(k))


# ---------------------------------------------------- by lengths, and edges: the subdivided graph
def _path_start(s, v):
    s["dist"][v] = 0.0
    s["sigma"][v] = 1.0


#: a source: distance 0, one shortest path (to itself)
PATH_START = Functor(name="path_dag_start", params="double* dist, double* sigma",
                cuda="dist[v] = 0.0;\nsigma[v] = 1.0;", numpy=_path_start)


def _tighten(s, v, m):
    arc = s["arc"][v] != 0
    s["tight"][v] = np.where(arc, s["dist"][v] == m, True).astype(np.int32)
    return v[:0]


#: a reached vertex tells its in-neighbours its distance: an arc vertex is tight when its
#: distance is its head's; an input vertex (the tail of a reached arc vertex) always is
TIGHTEN = Functor(
    name="path_dag_tighten", params="const double* dist, const int* arc, int* tight",
    message=Message("double", cuda="dist[u]", numpy=lambda s, u: s["dist"][u]),
    cuda="tight[v] = arc[v] ? (dist[v] == m ? 1 : 0) : 1;",
    numpy=_tighten)


def _first(s, v):
    fresh = s["counted"][v] == 0
    s["counted"][v] = 1
    return fresh


#: a reached vertex the Bellman-Ford levels hold more than once counts its arcs once
FIRST = Functor(name="path_dag_first", params="int* counted",
                cuda="if (counted[v]) return false;\ncounted[v] = 1;\nreturn true;",
                numpy=_first)


def _count(s, v, m):
    np.add.at(s["pending"], v[m != 0], 1)
    return v[:0]


#: each tight arc adds one to its head's pending arcs
COUNT = Functor(
    name="path_dag_count", params="int* pending, const int* tight",
    message=Message("int", cuda="tight[u]", numpy=lambda s, u: s["tight"][u]),
    cuda="if (m) atomicAdd(&pending[v], 1);",
    numpy=_count)


def _paths(s, v, m):
    on = m >= 0
    v, m = v[on], m[on]
    np.add.at(s["sigma"], v, m)
    hit, times = np.unique(v, return_counts=True)
    s["pending"][hit] -= times.astype(np.int32)
    return hit[s["pending"][hit] == 0]


#: Kahn's step: a tight arc carries its tail's path count to its head (-1 on an arc that is not
#: tight), which joins the next level when its last pending arc arrived
PATHS = Functor(
    name="path_dag_paths", params="double* sigma, int* pending, const int* tight",
    message=Message("double", cuda="tight[u] ? sigma[u] : -1.0",
                    numpy=lambda s, u: np.where(s["tight"][u] != 0, s["sigma"][u], -1.0)),
    cuda="if (m < 0.0) return false;\n"
         "atomicAdd(&sigma[v], m);\n"
         "return atomicSub(&pending[v], 1) == 1;",
    numpy=_paths)


def _share(s, u):
    target = np.where(s["arc"][u] != 0, 0.0, 1.0)
    return (target + s["sigma"][u] * s["acc"][u]) / s["sigma"][u]


def _depend(s, v, m):
    on = s["tight"][v] != 0
    np.add.at(s["acc"], v[on], m[on])
    return v[:0]


#: a vertex whose dependency is final sends (t + delta) / sigma to the tails of its tight
#: in-arcs, which sum it (delta = sigma * acc)
DEPEND = Functor(
    name="path_dag_depend",
    params="const double* sigma, double* acc, const int* arc, const int* tight",
    message=Message("double", cuda="((arc[u] ? 0.0 : 1.0) + sigma[u] * acc[u]) / sigma[u]",
                    numpy=_share),
    cuda="if (tight[v]) atomicAdd(&acc[v], m);",
    numpy=_depend)


def _arc_accumulate(s, v):
    delta = s["sigma"][v] * s["acc"][v]
    arc = s["arc"][v] != 0
    if s["level"] > 0:
        delta = delta + np.where(arc, 0.0, float(s["endpoints"]))
    elif not s["endpoints"]:
        delta = np.where(arc, delta, 0.0)
    s["score"][v] += delta
    s["dist"][v] = DISTANCE_UNREACHED
    for name in ("sigma", "acc"):
        s[name][v] = 0.0
    for name in ("tight", "counted"):
        s[name][v] = 0


#: after a source, on each vertex it reached: the dependency joins the score (the source's own
#: only with endpoints: the targets it reached; with endpoints an input vertex counts the path
#: ending at it too), and the state is cleared for the next source
ARC_ACCUMULATE = Functor(
    name="path_dag_accumulate",
    params="double* dist, double* sigma, double* acc, int* tight, int* counted, double* score, "
           "const int* arc, int level, int endpoints",
    cuda="double delta = sigma[v] * acc[v];\n"
         "if (level > 0) { if (!arc[v] && endpoints) delta += 1.0; }\n"
         "else if (!endpoints) delta = 0.0;\n"
         "score[v] += delta;\n"
         "dist[v] = -1.0;\n"
         "sigma[v] = 0.0;\n"
         "acc[v] = 0.0;\n"
         "tight[v] = 0;\n"
         "counted[v] = 0;",
    numpy=_arc_accumulate)

#: one source's round on the subdivided graph (module docstring)
ARC_ROUND = [Compute(PATH_START, over="seed"),
             Loop([AdvanceStep(DISTANCE, "auto")], keep=True),
             Sweep([AdvanceStep(TIGHTEN, over="in")]),
             Sweep([FilterStep(FIRST), AdvanceStep(COUNT)]),
             Loop([AdvanceStep(PATHS)], keep=True),
             Sweep([AdvanceStep(DEPEND, over="in")], reverse=True, skip=1),
             Sweep([ComputeStep(ARC_ACCUMULATE)], level="level")]


class ArcBetweenness(EngineSolver):
    """Brandes' algorithm on the subdivided graph (module docstring). Builds the engine over it
    once (partition, upload); :meth:`sums` runs the rounds, :meth:`run` scores the vertices,
    :meth:`edge_scores` the edges. ``weights``:
    None (hops) or one length > 0 per arc of ``graph`` in its order (float64). Options:
    ``ctx`` or ``devices``/``backend``/``timeout``, ``partition`` (auto, metis, contiguous, random;
    ``seed``), ``mode``: the engine (auto, bsp, async: ``groute.engines.ENGINE_RULE``),
    ``loop``: how the rounds run (auto, fused, python: ``groute.engines.LOOP_RULE``)."""

    def __init__(self, graph, *, weights=None, ctx=None, devices="auto", backend="auto",
                 timeout=None, partition=DEFAULT_PARTITION, seed=0, mode="auto", loop="auto"):
        self.graph = graph
        self.n = n = int(graph.num_vertices)
        m = int(graph.num_edges)
        lengths = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
        if lengths.shape != (m,):
            raise ValueError(f"betweenness: weights must have one length per arc ({m}), got "
                             f"shape {lengths.shape}")
        if m and not (bool(np.all(np.isfinite(lengths))) and lengths.min() > 0):
            raise ValueError("betweenness: the lengths must be finite and > 0 (a zero length "
                             "makes infinitely many shortest paths)")
        run_on = subdivided_graph(graph, "weighted betweenness")
        self.engine = eng = make_engine(run_on, mode, ctx=ctx, devices=devices, backend=backend,
                                        timeout=timeout, partition=partition, seed=seed,
                                        loop=loop)
        arc = np.zeros(n + m, np.int32)
        arc[n:] = 1
        eng.state("arc", np.int32, values=arc)
        eng.state("cost", np.float64, values=np.concatenate([np.zeros(n), lengths]))

    def sums(self, sources=None, *, endpoints=False) -> tuple[np.ndarray, dict]:
        """Brandes' sums over the rounds from ``sources`` (positions; None: every vertex), by
        position in the subdivided graph (the input's vertices, then its arcs), and the stats."""
        eng = self.engine
        order = np.arange(self.n) if sources is None else np.asarray(sources, np.int64)
        eng.reset_counters()
        eng.state("dist", np.float64, DISTANCE_UNREACHED)
        for name in ("sigma", "acc", "score"):
            eng.state(name, np.float64, 0.0)
        for name in ("tight", "counted", "pending"):
            eng.state(name, np.int32, 0)
        done = run_rounds(eng, order, ARC_ROUND, endpoints=int(bool(endpoints)))
        if reduce(eng.all_vertices(), "pending", "max"):
            raise self._unordered(eng.gather("pending"))
        return eng.gather("score"), dict(eng.stats, sources=done.rounds, levels=done.levels)

    def _unordered(self, pending) -> ValueError:
        """The error for reached vertices Kahn's order never took (``pending`` above 0: a
        cycle of tight arcs, whose lengths vanish in the float64 sums), naming the input
        vertices among them or the ends of their arcs."""
        left = np.flatnonzero(pending)
        ids = np.asarray(self.graph.ids)
        tails, heads = self.graph.edges()
        arcs = left[left >= self.n] - self.n
        named = sorted(set(left[left < self.n].tolist())
                       | set(np.asarray(tails)[arcs].tolist())
                       | set(np.asarray(heads)[arcs].tolist()))
        shown = ", ".join(repr(v) for v in ids[named[:8]].tolist())
        return ValueError(
            f"betweenness: shortest paths tie around a cycle through vertices {shown}"
            f"{', ...' if len(named) > 8 else ''}: its lengths are too small to change the "
            f"float64 distances they are added to (as 1 + 1e-17 == 1), so they act as "
            f"zero-length edges")

    def run(self, sources=None, *, normalized=True, endpoints=False) -> AppResult:
        """The vertices' betweenness over the shortest paths from ``sources`` (distinct vertex
        ids; None: every vertex; fewer are rescaled as NetworkX rescales a sample of that
        many)."""
        t0 = time.perf_counter()
        order = None if sources is None else _source_positions(self.graph, sources)
        score, stats = self.sums(order, endpoints=endpoints)
        sampled = None if order is None or order.size == self.n else order
        bc = _rescale(score[:self.n], self.n, normalized=normalized,
                      directed=self.graph.directed, endpoints=endpoints, sampled=sampled)
        return AppResult(bc, time.perf_counter() - t0, stats,
                         vertex_ids=getattr(self.graph, "vertex_ids", None))

    def edge_scores(self, sources=None, *, normalized=True) -> np.ndarray:
        """Every arc's betweenness, in the graph's arc order (an undirected edge's score is
        its two arcs' sum: :func:`edge_sums`), rescaled as NetworkX's edge betweenness."""
        order = None if sources is None else _source_positions(self.graph, sources)
        score, _ = self.sums(order)
        k = None if order is None or order.size == self.n else order
        return _rescale(score[self.n:], self.n, normalized=normalized,
                        directed=self.graph.directed, endpoints=True, sampled=k)


def edge_sums(graph, arc_scores):
    """``(tails, heads, scores)`` of the graph's edges, from ``arc_scores`` (one per arc in the
    graph's order): every arc of a directed graph; an undirected graph's arcs ``u -> v`` with
    ``u <= v``, each scored with its reverse arc's score added."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    heads = np.asarray(graph.indices, dtype=np.int64)
    tails = np.repeat(np.arange(graph.num_vertices, dtype=np.int64), np.diff(indptr))
    scores = np.asarray(arc_scores, dtype=np.float64)
    if graph.directed:
        return tails, heads, scores
    # the reverse of arc (u, v) is the arc (v, u): match them by their (tail, head) keys
    n = max(int(graph.num_vertices), 1)
    keys = tails * n + heads
    order = np.argsort(keys, kind="stable")
    reverse = order[np.searchsorted(keys[order], heads * n + tails)]
    once = tails <= heads
    total = np.where(tails == heads, scores, scores + scores[reverse])
    return tails[once], heads[once], total[once]


@algorithm("betweenness", solver=Betweenness, label="BC")
def betweenness_centrality(G, k=None, normalized=True, weight=None, endpoints=False,
                           seed=None, *, sources=None, arc_weights=None, num_vertices=None,
                           symmetric=False, **options) -> AppResult:
    """The betweenness centrality of every vertex (module docstring), as NetworkX's
    ``betweenness_centrality`` with the same arguments.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst)`` edge arrays, a file, a graph
        spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    k : int, optional
        Score from ``k`` sources sampled as NetworkX samples them; None: every vertex.
    normalized : bool, optional
        Divide by the number of pairs of other vertices.
    weight : str or None, optional
        The edge attribute holding the edges' lengths (> 0; an edge without it: 1): shortest
        paths by length (:class:`ArcBetweenness`); None: hops.
    endpoints : bool, optional
        Count a path's ends among the vertices it passes through.
    seed : int, random.Random or NumPy generator, optional
        The sample's random state, as NetworkX's: an integer draws NetworkX's sources.
    sources : list of vertex ids, optional
        The sources themselves instead of a sample (rescaled as a sample of that many).
    arc_weights : array of float, optional
        With ``weight``: one length per arc of ``G``'s CSR graph in its order, read instead of
        the graph's weights (kept in float32 by a :class:`~groute.graph.CSRGraph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (the engine), ``partition``, ``loop`` (:class:`Betweenness`;
        by lengths :class:`ArcBetweenness`).

    Returns
    -------
    AppResult
        Float64 scores by position; ``result.to_dict()`` is ``{id: score}``.

    Raises
    ------
    ValueError
        ``k`` out of range, or both ``k`` and ``sources``; ``sources`` repeating a vertex; a
        length that is not > 0, or lengths too small to change a float64 distance around a
        cycle (module docstring).
    ZeroDivisionError
        ``sources`` empty on a graph of three vertices or more (NetworkX's ``k=0``: the
        rescaling divides by the number of sources).
    NodeNotFound
        NetworkX's: a source that is not a vertex.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.path_graph(4)
    >>> groute.betweenness_centrality(G, backend="cpu", devices=1).to_dict()
    {0: 0.0, 1: 0.6666666666666666, 2: 0.6666666666666666, 3: 0.0}
    >>> W = nx.Graph([(0, 1, {"weight": 1}), (1, 2, {"weight": 1}), (0, 2, {"weight": 3})])
    >>> groute.betweenness_centrality(W, weight="weight", backend="cpu", devices=1).to_dict()
    {0: 0.0, 1: 1.0, 2: 0.0}
    """
    if k is not None and sources is not None:
        raise ValueError("give k (a sample of sources) or sources (the sources themselves), "
                         "not both")
    g = load_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric)
    n = g.num_vertices
    if sources is None and k is not None:
        sample = sample_sources(n, k, seed)
        sources = None if sample is None else [g.file_id_of(p) for p in sample]
    if n == 0:
        return AppResult(np.zeros(0), 0.0, {}, vertex_ids=g.vertex_ids)
    weights = None if weight is None else arc_values(g, arc_weights)
    if weights is not None:
        with ArcBetweenness(g, weights=weights, **options) as solver:
            return solver.run(sources, normalized=normalized, endpoints=endpoints)
    with Betweenness(g, **options) as solver:
        return solver.run(sources, normalized=normalized, endpoints=endpoints)


@public(solver=ArcBetweenness)
def edge_betweenness_centrality(G, k=None, normalized=True, weight=None, seed=None, *,
                                sources=None, arc_weights=None, num_vertices=None,
                                symmetric=False, **options) -> dict:
    """The betweenness centrality of every edge (module docstring), as NetworkX's
    ``edge_betweenness_centrality`` with the same arguments.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    k : int, optional
        Score from ``k`` sources sampled as NetworkX samples them; None: every vertex.
    normalized : bool, optional
        Divide by the number of (source, target) pairs.
    weight : str or None, optional
        The edge attribute holding the edges' lengths (> 0; an edge without it: 1); None: hops.
    seed : int, random.Random or NumPy generator, optional
        The sample's random state, as NetworkX's.
    sources : list of vertex ids, optional
        The sources themselves instead of a sample (rescaled as a sample of that many).
    arc_weights : array of float, optional
        With ``weight``: one length per arc of ``G``'s CSR graph in its order, read instead of
        the graph's weights (kept in float32 by a :class:`~groute.graph.CSRGraph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``mode``, ``partition``,
        ``loop`` (:class:`ArcBetweenness`).

    Returns
    -------
    dict
        ``{(u, v): score}`` over the graph's edges (an undirected edge once, its ends in
        vertex order), as NetworkX's.

    Raises
    ------
    ValueError
        A length that is not > 0, or lengths too small to change a float64 distance around a
        cycle (module docstring); ``k`` out of range, or both ``k`` and ``sources``;
        ``sources`` repeating a vertex.
    ZeroDivisionError
        ``sources`` empty on a graph of three vertices or more, as NetworkX's ``k=0``.
    NodeNotFound
        NetworkX's: a source that is not a vertex.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> groute.edge_betweenness_centrality(nx.path_graph(3), normalized=False, backend="cpu",
    ...                                    devices=1)
    {(0, 1): 2.0, (1, 2): 2.0}
    """
    if k is not None and sources is not None:
        raise ValueError("give k (a sample of sources) or sources (the sources themselves), "
                         "not both")
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX gives each parallel edge its own value, keyed "
                               "(u, v, k), and groute's graphs keep one arc per pair")
    if sources is None and k is not None:
        sample = sample_sources(g.num_vertices, k, seed)
        sources = None if sample is None else [g.file_id_of(p) for p in sample]
    if g.num_edges == 0:
        return {}
    weights = None if weight is None else arc_values(g, arc_weights)
    with ArcBetweenness(g, weights=weights, **options) as solver:
        scores = solver.edge_scores(sources, normalized=normalized)
    tails, heads, values = edge_sums(g, scores)
    ids = g.ids
    return dict(zip(zip(ids[tails].tolist(), ids[heads].tolist()), values.tolist()))
