"""Eigenvector centrality and HITS: power iterations of products with the adjacency matrix, on
groute's operators (docs/OPERATORS.md), written only on public names.

With ``A[u, v]`` the weight of the arc ``u -> v`` (1 without weights),
:meth:`AdjacencyProducts.times` computes ``y = A^T x`` (each vertex sums its in-arcs' sources'
values: a gathering pull, no atomics) or ``y = A x`` (the same pull over the other arcs), plus a
vector of the same vertices when asked. A message is one value per source, so an arc cannot
multiply it by its own weight: with weights the products run on the subdivided graph
(:mod:`groute.operators.arc_vertices`), where each arc's weight is the state of the vertex on
it, and a product is two pulls: each arc vertex takes its weight times its tail's value
(``A^T``; its head's for ``A``), then each input vertex sums its arc vertices'. Values are
float64 on every backend. An iteration's norm and change are reductions over the devices
(:func:`~groute.operators.reduce`): a few host steps per iteration, none per vertex.

``eigenvector_centrality(G, max_iter=100, tol=1e-06, nstart=None, weight=None)``: as
NetworkX's, the left eigenvector of ``A`` for its largest eigenvalue, by NetworkX's power
iteration of ``A^T + I`` (the identity makes it converge on bipartite graphs too): from
``nstart`` scaled to sum 1 (default: every vertex alike), each iteration takes ``x + A^T x``,
divides it by its Euclidean norm and stops when the L1 change is below ``n * tol``; after
``max_iter`` iterations without it, ``PowerIterationFailedConvergence``.

``hits(G, max_iter=100, tol=1e-08, nstart=None, normalized=True)``: as NetworkX's, the
authorities are the principal right singular vector of ``A`` (the principal eigenvector of
``A^T A``) and the hubs ``A`` times them. NetworkX computes the singular vector with ARPACK;
groute iterates as NetworkX's own power iteration
(``networkx.algorithms.link_analysis.hits_alg._hits_scipy``) does: from every vertex alike,
``x = A^T (A x)`` divided by its largest entry, until the L1 change is below ``tol``;
``max_iter`` bounds the iterations as there (``max_iter + 2``), after which
``PowerIterationFailedConvergence``. ``normalized``: both vectors sum to 1; otherwise the
authorities have unit Euclidean norm, as the singular vector NetworkX returns, and the hubs are
``A`` times them. Weights are the edges' ``weight`` attribute (1 without one), as NetworkX's.
Where the largest singular value is repeated the vectors are not unique: NetworkX's then follow
ARPACK's start, groute's the uniform start.
"""
from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np

import groute
from groute import AppResult
from groute.engines import EngineSolver, make_engine
from groute.graph import DEFAULT_PARTITION, input_graph
from groute.operators import (Functor, Gather, Message, advance, arc_values, compute, filter,
                              reduce, subdivided_graph)
from groute.registry import public


def _add_message(dst):
    def body(s, v, m):
        s[dst][v] += m
        return v[:0]
    return body


@lru_cache(maxsize=None)
def _sum_into(src: str, dst: str, arcs_only: bool) -> Functor:
    """Each candidate adds the sum of its arcs' sources' ``src`` to its ``dst`` (a gathering
    pull); ``arcs_only``: the candidates are the input vertices of a subdivided graph (their
    arcs come from arc vertices)."""
    test = "input[v] != 0" if arcs_only else ""
    return Functor(
        name=f"sum_{src}_into_{dst}",
        params=f"const double* {src}, double* {dst}" + (", const int* input" if arcs_only
                                                            else ""),
        message=Message("double", cuda=f"{src}[u]", numpy=lambda s, u: s[src][u]),
        gather=Gather("sum", cuda=test,
                      numpy=(lambda s, v: s["input"][v] != 0) if arcs_only else None),
        cuda=f"{dst}[v] += m;",
        numpy=_add_message(dst))


def _carried(s, v, m):
    s["carried"][v] = s["weight"][v] * m
    return v[:0]


@lru_cache(maxsize=None)
def _carry(src: str) -> Functor:
    """Each arc vertex of a subdivided graph takes its weight times its one neighbour's ``src``
    along the pulled arc."""
    return Functor(
        name=f"carry_{src}",
        params=f"const double* {src}, double* carried, const double* weight, const int* input",
        message=Message("double", cuda=f"{src}[u]", numpy=lambda s, u: s[src][u]),
        gather=Gather("sum", cuda="input[v] == 0", numpy=lambda s, v: s["input"][v] == 0),
        cuda="carried[v] = weight[v] * m;",
        numpy=_carried)


def _set_body(dst, plus):
    def body(s, v):
        s[dst][v] = 0.0 if plus is None else s[plus][v]
    return body


@lru_cache(maxsize=None)
def _start(dst: str, plus: str | None) -> Functor:
    """``dst = plus`` (or 0) before a product adds into it."""
    return Functor(
        name=f"start_{dst}_{plus or 'zero'}",
        params=f"double* {dst}" + (f", const double* {plus}" if plus else ""),
        cuda=f"{dst}[v] = {plus + '[v]' if plus else '0.0'};",
        numpy=_set_body(dst, plus))


#: an input vertex of a subdivided graph
INPUT = Functor(name="input_vertex", params="const int* input", cuda="return input[v] != 0;",
                numpy=lambda s, v: s["input"][v] != 0)
#: an arc vertex of a subdivided graph
ARC = Functor(name="arc_vertex", params="const int* input", cuda="return input[v] == 0;",
              numpy=lambda s, v: s["input"][v] == 0)


class AdjacencyProducts(EngineSolver):
    """The engine of :meth:`times` over ``graph`` (with ``weights``, one per arc of ``graph`` in
    its order, over its subdivided graph). ``inputs``: the frontier of the input's vertices,
    what the iterations compute, reduce and normalise over; ``arcs``: the arc vertices (the
    input's vertices without weights). Options: ``ctx`` or ``devices``/``backend``/
    ``timeout``, ``partition`` (auto, metis, contiguous, random; ``seed``), ``mode``: the engine
    (auto, bsp, async)."""

    def __init__(self, graph, *, weights=None, ctx=None, devices="auto", backend="auto",
                 timeout=None, partition=DEFAULT_PARTITION, seed=0, mode="auto"):
        self.graph = graph
        self.n = n = int(graph.num_vertices)
        self.weighted = weights is not None
        run_on = graph
        if self.weighted:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (graph.num_edges,) or not bool(np.all(np.isfinite(w))):
                raise ValueError(f"weights must be one finite number per arc "
                                 f"({graph.num_edges}); got shape {w.shape}")
            run_on = subdivided_graph(graph, "a weighted power iteration")
        self.engine = eng = make_engine(run_on, mode, ctx=ctx, devices=devices,
                                        backend=backend, timeout=timeout, partition=partition,
                                        seed=seed)
        self.size = int(run_on.num_vertices)
        self.everyone = eng.all_vertices()
        self.inputs = self.arcs = self.everyone
        if self.weighted:
            flag = np.zeros(self.size, np.int32)
            flag[:n] = 1
            eng.state("input", np.int32, values=flag)
            eng.state("weight", np.float64, values=np.concatenate([np.zeros(n), w]))
            eng.state("carried", np.float64, 0.0)
            self.inputs = filter(self.everyone, INPUT)
            self.arcs = filter(self.everyone, ARC)

    def state(self, name: str, values=None, fill: float = 0.0) -> None:
        """Float64 state ``name`` on every vertex: ``values`` by position in the input (the
        arc vertices 0), else ``fill``."""
        if values is None:
            self.engine.state(name, np.float64, fill)
            return
        full = np.zeros(self.size)
        full[:self.n] = values
        self.engine.state(name, np.float64, values=full)

    def gather(self, name: str) -> np.ndarray:
        """State ``name`` of the input's vertices, by position."""
        return self.engine.gather(name)[:self.n]

    def times(self, src: str, dst: str, *, transposed: bool = True, plus: str | None = None):
        """``dst = plus + A^T src`` (``transposed``; else ``A src``) on the input's vertices
        (``plus`` None: 0)."""
        over = "out" if transposed else "in"
        compute(self.inputs, _start(dst, plus))
        if self.weighted:
            advance(self.inputs, _carry(src), "pull", over=over)
            advance(self.arcs, _sum_into("carried", dst, True), "pull", over=over)
        else:
            advance(self.everyone, _sum_into(src, dst, False), "pull", over=over)


# ----------------------------------------------------------------------- eigenvector centrality
def _square(s, v):
    s["sq"][v] = s["y"][v] * s["y"][v]


#: the squares whose sum is the norm
SQUARE = Functor(name="eigenvector_square", params="const double* y, double* sq",
                 cuda="sq[v] = y[v] * y[v];", numpy=_square)


def _scale(s, v):
    y = s["y"][v] / s["by"]
    s["diff"][v] = np.abs(y - s["x"][v])
    s["x"][v] = y


#: the next iterate: the product divided by ``by`` (eigenvector centrality: its norm; HITS: its
#: largest entry), and how far each vertex moved
SCALE = Functor(
    name="power_iteration_scale", params="double* x, const double* y, double* diff, double by",
    cuda="const double next = y[v] / by;\n"
         "diff[v] = fabs(next - x[v]);\n"
         "x[v] = next;",
    numpy=_scale)


class Eigenvector(AdjacencyProducts):
    """Eigenvector centrality of ``graph`` (with ``weights``: one per arc in its order) on the
    devices of a context; the engine is built once and :meth:`run` iterates. Options as
    :class:`AdjacencyProducts`."""

    def run(self, max_iter: int = 100, tol: float = 1.0e-6, nstart=None) -> AppResult:
        """NetworkX's power iteration from ``nstart`` (by position, scaled to sum 1; None:
        uniform) until the L1 change is below ``n * tol``; raises
        PowerIterationFailedConvergence after ``max_iter`` iterations without it."""
        t0 = time.perf_counter()
        n = self.n
        start = np.full(n, 1.0 / n) if nstart is None else np.asarray(nstart, np.float64)
        if nstart is not None:
            if start.shape != (n,):
                raise ValueError(f"eigenvector_centrality: nstart needs one value per vertex "
                                 f"({n}), got shape {start.shape}")
            if not np.any(start != 0):
                raise ValueError("eigenvector_centrality: nstart cannot have all zero values")
            start = start / start.sum()
        self.engine.reset_counters()
        self.state("x", start)
        for name in ("y", "sq", "diff"):
            self.state(name)
        bound = n * tol
        for iteration in range(1, int(max_iter) + 1):
            self.times("x", "y", plus="x")
            compute(self.inputs, SQUARE)
            norm = math.sqrt(reduce(self.inputs, "sq", "sum")) or 1.0
            compute(self.inputs, SCALE, by=norm)
            if reduce(self.inputs, "diff", "sum") < bound:
                stats = dict(self.engine.stats, iterations=iteration)
                return AppResult(self.gather("x"), time.perf_counter() - t0, stats,
                                 vertex_ids=getattr(self.graph, "vertex_ids", None))
        raise groute.PowerIterationFailedConvergence(
            int(max_iter), f"eigenvector_centrality: the power iteration did not converge "
                           f"within {max_iter} iterations (an L1 change below {bound:g})")


def _by_position(graph, values) -> np.ndarray:
    """``nstart`` (a dict with a value for every vertex id, or an array by position) as a
    float64 array by position; ValueError naming a missing or unknown vertex."""
    if not isinstance(values, dict):
        return np.asarray(values, dtype=np.float64)
    out = np.full(graph.num_vertices, np.nan)
    for key, value in values.items():
        try:
            out[graph.vertex_of(key, "nstart key")] = float(value)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    if np.isnan(out).any():
        missing = graph.file_id_of(int(np.flatnonzero(np.isnan(out))[0]))
        raise ValueError(f"nstart: a dict needs a value for every vertex (e.g. {missing!r})")
    return out


@public(solver=Eigenvector)
def eigenvector_centrality(G, max_iter=100, tol=1.0e-6, nstart=None, weight=None, *,
                           arc_weights=None, num_vertices=None, symmetric=False,
                           **options) -> AppResult:
    """Eigenvector centrality, as NetworkX's ``eigenvector_centrality`` with the same
    arguments (module docstring).

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    max_iter : int, optional
        Iterations before :class:`~groute.errors.PowerIterationFailedConvergence` is raised.
    tol : float, optional
        Stop when an iteration's L1 change is below ``len(G) * tol``.
    nstart : dict or array, optional
        The start values (a dict with a value for every vertex, or an array by position),
        scaled to sum 1; default: every vertex alike.
    weight : str or None, optional
        The edge attribute holding the weights (an edge without it: 1); None: every edge 1.
    arc_weights : array of float, optional
        With ``weight``: one weight per arc of ``G``'s CSR graph in its order, read instead of
        the graph's weights (kept in float32 by a :class:`~groute.graph.CSRGraph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``mode``, ``partition``,
        ``seed`` (:class:`Eigenvector`).

    Returns
    -------
    AppResult
        Float64 centralities of unit Euclidean norm; ``result.to_dict()`` is
        ``{id: centrality}``.

    Raises
    ------
    PowerIterationFailedConvergence
        NetworkX's: no convergence within ``max_iter`` iterations.
    ValueError
        The null graph, an ``nstart`` of zeros or missing a vertex.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> x = groute.eigenvector_centrality(nx.path_graph(3), backend="cpu", devices=1).to_dict()
    >>> [round(x[v], 4) for v in range(3)]
    [0.5, 0.7071, 0.5]
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX's eigenvector_centrality takes no multigraph")
    if g.num_vertices == 0:
        raise ValueError("eigenvector_centrality: the null graph has no centrality")
    weights = None if weight is None else arc_values(g, arc_weights)
    start = None if nstart is None else _by_position(g, nstart)
    with Eigenvector(g, weights=weights, **options) as solver:
        return solver.run(max_iter, tol, start)


# ----------------------------------------------------------------------------------------- HITS
def _authority_square(s, v):
    s["diff"][v] = s["x"][v] * s["x"][v]


#: the squares of the authorities (their Euclidean norm), into ``diff``
AUTHORITY_SQUARE = Functor(name="hits_square", params="const double* x, double* diff",
                           cuda="diff[v] = x[v] * x[v];", numpy=_authority_square)


class Hits(AdjacencyProducts):
    """HITS of ``graph`` (with ``weights``: one per arc in its order) on the devices of a
    context; the engine is built once and :meth:`run` iterates. Options as
    :class:`AdjacencyProducts`."""

    def run(self, max_iter: int = 100, tol: float = 1.0e-8,
            normalized: bool = True) -> tuple[AppResult, AppResult]:
        """``(hubs, authorities)`` (module docstring); raises PowerIterationFailedConvergence
        after ``max_iter + 2`` iterations without an L1 change below ``tol`` (at once for
        ``max_iter <= 0``, as NetworkX)."""
        if max_iter <= 0:
            raise groute.PowerIterationFailedConvergence(int(max_iter))
        t0 = time.perf_counter()
        self.engine.reset_counters()
        self.state("x", np.full(self.n, 1.0 / self.n))
        for name in ("h", "y", "diff"):
            self.state(name)
        iteration = 0
        while True:
            self.times("x", "h", transposed=False)
            self.times("h", "y")
            compute(self.inputs, SCALE, by=reduce(self.inputs, "y", "max"))
            if reduce(self.inputs, "diff", "sum") < tol:
                break
            if iteration > max_iter:
                raise groute.PowerIterationFailedConvergence(
                    int(max_iter), f"hits: the power iteration did not converge within "
                                   f"{iteration + 1} iterations (max_iter={max_iter}: an L1 "
                                   f"change below {tol:g})")
            iteration += 1
        if not normalized:
            compute(self.inputs, AUTHORITY_SQUARE)
            self.state("x", self.gather("x") / math.sqrt(reduce(self.inputs, "diff", "sum")))
        self.times("x", "h", transposed=False)
        authorities, hubs = self.gather("x"), self.gather("h")
        if normalized:
            authorities, hubs = authorities / authorities.sum(), hubs / hubs.sum()
        seconds = time.perf_counter() - t0
        stats = dict(self.engine.stats, iterations=iteration + 1)
        ids = getattr(self.graph, "vertex_ids", None)
        return (AppResult(hubs, seconds, stats, vertex_ids=ids),
                AppResult(authorities, seconds, stats, vertex_ids=ids))


@public(solver=Hits)
def hits(G, max_iter=100, tol=1.0e-8, nstart=None, normalized=True, *, arc_weights=None,
         num_vertices=None, symmetric=False, **options) -> tuple[AppResult, AppResult]:
    """HITS hubs and authorities, as NetworkX's ``hits`` with the same arguments (module
    docstring).

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`);
        its ``weight`` edge attribute (1 where an edge has none) weighs the arcs.
    max_iter : int, optional
        Bounds the iterations (``max_iter + 2``) before
        :class:`~groute.errors.PowerIterationFailedConvergence` is raised.
    tol : float, optional
        Stop when an iteration's L1 change (of the authorities over their largest) is below
        it.
    nstart : None
        Must be None: a start vector changes only the iterations, and groute starts from
        every vertex alike.
    normalized : bool, optional
        Both vectors sum to 1; else the authorities have unit Euclidean norm.
    arc_weights : array of float, optional
        One weight per arc of ``G``'s CSR graph in its order, read instead of the graph's
        weights (kept in float32 by a :class:`~groute.graph.CSRGraph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``mode``, ``partition``,
        ``seed`` (:class:`Hits`).

    Returns
    -------
    tuple of AppResult
        ``(hubs, authorities)``, float64 by position (``to_dict()``: ``{id: value}``).

    Raises
    ------
    PowerIterationFailedConvergence
        NetworkX's: no convergence (``max_iter`` <= 0 at once).
    ValueError
        ``nstart`` given; a graph without arcs, or with a negative weight.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.DiGraph([(1, 3), (1, 5), (2, 1), (3, 5), (5, 4), (5, 3), (6, 5)])
    >>> hubs, authorities = groute.hits(G, backend="cpu", devices=1)
    >>> round(hubs.to_dict()[1], 4), round(authorities.to_dict()[5], 4)
    (0.366, 0.5)
    """
    if nstart is not None:
        raise ValueError("hits: nstart changes only the iterations, and groute starts from "
                         "every vertex alike; pass nstart=None")
    g = input_graph(G, weight="weight", num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX's hits adds up parallel edges, and groute's graphs "
                               "keep one arc of their least weight; pass nx.Graph(G) with the "
                               "weights summed")
    if g.num_vertices == 0:
        empty = AppResult(np.zeros(0), 0.0, {}, vertex_ids=g.vertex_ids)
        return empty, empty
    weights = arc_values(g, arc_weights)
    if g.num_edges == 0 or (weights is not None and not (weights.min() >= 0 and weights.max() > 0)):
        raise ValueError("hits: the graph needs arcs, of weights >= 0 and not all 0")
    with Hits(g, weights=weights, **options) as solver:
        return solver.run(max_iter, tol, normalized)
