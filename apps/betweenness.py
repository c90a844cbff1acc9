"""Betweenness centrality (Brandes), written only on groute's public operator API
(docs/OPERATORS.md).

``betweenness_centrality(graph, k=None, normalized=True, weight=None, endpoints=False,
seed=None, *, sources=None)``: as NetworkX's ``betweenness_centrality``, the share of
shortest paths between other pairs of vertices that pass through each vertex.
``result.to_dict()`` is ``{id: float}``.

Per source ``s`` (Brandes' algorithm, unweighted), one *round* of :func:`run_rounds` (every
source's round in one call; on one CUDA device every round in one persistent launch, on
several that write into each other's memory one launch per device, with no host step between
sources, ``groute.engines.LOOP_RULE``):

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

Rescaling is NetworkX's ``_rescale`` (3.6), including its rules for sampled sources: ``k``
sources drawn as NetworkX draws them (``seed.sample(list(G), k)``: with an integer ``seed`` a
NetworkX graph gets the same sources), or ``sources`` given by id, rescaled as a sample of that
many. A directed graph counts ordered pairs; self-loops and isolated vertices change nothing.
"""
from __future__ import annotations

import math
import time

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, load_graph
from groute.operators import (AdvanceStep, Compute, ComputeStep, Functor, Gather, Loop, Message,
                              Sweep, run_rounds)
from groute.registry import algorithm

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
    Options: ``ctx`` or ``devices``/``backend``/``timeout``, ``partition`` (metis, contiguous,
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
        order = np.arange(n) if sources is None else _distinct(self._positions(sources), n)
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

    def _positions(self, sources) -> list:
        if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
            raise TypeError(f"sources must be a list of vertex ids, got "
                            f"{type(sources).__name__}")
        ids = sources.tolist() if isinstance(sources, np.ndarray) else list(sources)
        try:
            return [self.graph.vertex_of(i, "source") for i in ids]
        except KeyError as exc:
            raise groute.NodeNotFound(f"sources: {exc.args[0]}") from None



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


@algorithm("betweenness", solver=Betweenness, label="BC")
def betweenness_centrality(G, k=None, normalized=True, weight=None, endpoints=False,
                           seed=None, *, sources=None, num_vertices=None, symmetric=False,
                           **options) -> AppResult:
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
    weight : None
        Hop counts only: weighted betweenness (Dijkstra) is not in groute.
    endpoints : bool, optional
        Count a path's ends among the vertices it passes through.
    seed : int, random.Random or NumPy generator, optional
        The sample's random state, as NetworkX's: an integer draws NetworkX's sources.
    sources : list of vertex ids, optional
        The sources themselves instead of a sample (rescaled as a sample of that many).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (the engine), ``partition``, ``loop`` (:class:`Betweenness`).

    Returns
    -------
    AppResult
        Float64 scores by position; ``result.to_dict()`` is ``{id: score}``.

    Raises
    ------
    NotImplementedError
        ``weight`` other than None.
    ValueError
        ``k`` out of range, or both ``k`` and ``sources``.
    NodeNotFound
        NetworkX's: a source that is not a vertex.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.path_graph(4)
    >>> groute.betweenness_centrality(G, backend="cpu", devices=1).to_dict()
    {0: 0.0, 1: 0.6666666666666666, 2: 0.6666666666666666, 3: 0.0}
    """
    if weight is not None:
        raise NotImplementedError(f"weight={weight!r}: weighted betweenness centrality is not "
                                  f"supported yet; pass weight=None (hop counts), or use "
                                  f"networkx.betweenness_centrality for weighted paths")
    if k is not None and sources is not None:
        raise ValueError("give k (a sample of sources) or sources (the sources themselves), "
                         "not both")
    g = load_graph(G, weight=None, num_vertices=num_vertices, symmetric=symmetric)
    n = g.num_vertices
    if sources is None and k is not None:
        sample = sample_sources(n, k, seed)
        sources = None if sample is None else [g.file_id_of(p) for p in sample]
    if n == 0:
        return AppResult(np.zeros(0), 0.0, {}, vertex_ids=g.vertex_ids)
    with Betweenness(g, **options) as solver:
        return solver.run(sources, normalized=normalized, endpoints=endpoints)
