"""PageRank across devices, as a linear iteration, with NetworkX's parameters and meanings.

PageRank is the linear iteration :data:`PAGERANK`: a vertex sends its rank split over its
out-arcs (``1 / outdeg`` each; on a weighted graph in proportion to the arcs' weights, ``w /
W`` with ``W`` the vertex's out-weight; a dangling vertex, without out-arcs or out-weight, sends
nothing), so the engines (:class:`groute.engines.IterateSolver`: BSP pull sweeps, the default,
or asynchronous residual push) solve the "leaky" PageRank ``y = (1-alpha) p + alpha P^T y``
and :class:`PageRank` returns ``y / sum(y)``. With dangling mass spread as the teleport
distribution ``p`` (uniform, or ``personalization``: NetworkX's default ``dangling``) the
PageRank vector is exactly proportional to ``y``, so no device ever needs the global dangling
sum during the run. A ``dangling`` distribution ``g`` of its own takes a second solve on the
same set-up, ``z = g + alpha P^T z``: the PageRank vector is ``y + c z`` with ``c = alpha D(y)
/ (1 - alpha D(z))`` (``D``: the sum over the dangling vertices), which satisfies NetworkX's
equation exactly. The stopping rule is NetworkX's: an iteration's L1 change at most ``n * tol``
of the ranks' sum (async: the same L1 rule on the residuals' sum where the GPUs run the
persistent push kernel, else every residual at most ``tol (1-alpha)``).

``pagerank(G)`` returns an :class:`~groute.results.AppResult` of float64 ranks summing to 1,
with the graph's ids alongside. Also the ``groute pr`` subcommand (``groute pagerank``).
"""
from __future__ import annotations

import numbers

import numpy as np

from groute.engines import FixedPoint, IterateSolver, LinearIteration
from groute.engines.iterate.memory import iteration_bytes
from groute.engines.iterate.solver import stats_keys
from groute.graph.rank_graph import loading_ranks, whole_rows
from groute.registry import algorithm, command
from groute.results import AppResult
from groute.graph import input_graph

#: PageRank: a vertex's rank split evenly over its out-arcs
PAGERANK = LinearIteration(name="pagerank", share="x / (float)deg",
                           share_numpy=lambda x, deg: x / deg, stop="relative")
#: the keys of a PageRank result's ``stats`` (the engines')
STATS_KEYS = stats_keys(PAGERANK)


class PageRank(IterateSolver):
    """PageRank of ``graph`` on the devices of a context; partition and upload once, run many
    times. The parameters are NetworkX's ``pagerank``'s, with its meanings and defaults:

    ``alpha``: the damping factor, in (0, 1). ``personalization``: the teleport distribution
    (a dict keyed by the graph's ids, missing ids 0, or an array by position; normalised:
    :func:`distribution`); None: uniform. ``max_iter``: BSP iterations (async: ten times as
    many push sweeps or rounds per device) before :meth:`run` raises
    :class:`groute.errors.PowerIterationFailedConvergence`. ``tol``: stop when an iteration's
    L1 change is at most ``n * tol`` of the ranks' sum. ``nstart``: the start values (as
    ``personalization``; BSP only). ``weight``: None follows every out-arc alike; anything
    else runs on the graph's weights (a one-shot call reads them from that edge attribute),
    each >= 0; a graph whose arcs all weigh the same runs unweighted. ``dangling``: where the
    rank of a vertex without out-arcs goes (as ``personalization``); None: as the teleport.

    The engine's options (``mode``, ``partition``, ``tuning``, ``ctx``...) as
    :class:`~groute.engines.IterateSolver`."""

    iteration = PAGERANK
    app = "pagerank"

    def __init__(self, graph, *, alpha=0.85, personalization=None, max_iter=100, tol=1.0e-6,
                 nstart=None, weight="weight", dangling=None, **options):
        d = self._number("alpha", alpha)
        if not 0.0 < d < 1.0:
            raise ValueError(f"pagerank: alpha must be in (0, 1), got {alpha!r}")
        n = int(graph.num_vertices)
        #: the teleport distribution by position (None: uniform)
        self.teleport = (None if personalization is None
                         else distribution(graph, personalization, "personalization"))
        start = (1.0 / max(n, 1) if nstart is None
                 else distribution(graph, nstart, "nstart"))
        weighted = weight is not None and _differ(graph.weights, loading_ranks(graph))
        #: where a dangling vertex's rank goes, when not as the teleport (by position)
        self.dangling = None
        self._dangling_mask = None
        if dangling is not None:
            g = distribution(graph, dangling, "dangling")
            p = self.teleport if self.teleport is not None else np.full(n, 1.0 / max(n, 1))
            mask = _dangling_vertices(graph, weighted)
            if mask.any() and not np.allclose(g, p, rtol=0, atol=1e-15):
                self.dangling, self._dangling_mask = g, mask
        base = (1.0 - d) / max(n, 1) if self.teleport is None else (1.0 - d) * self.teleport
        if self.dangling is not None and np.ndim(base) == 0:   # two solves: a base vector
            base = np.full(n, base)
        super().__init__(graph, FixedPoint(alpha=d, base=base, start=start, normalize="sum",
                                           weighted=weighted),
                         max_iter=max_iter, tol=tol, **options)

    def run(self) -> AppResult:
        """As :meth:`IterateSolver.run <groute.engines.IterateSolver.run>`; with a ``dangling``
        distribution, the two solves of the module docstring (``stats`` of the first,
        ``iterations`` and the time of both)."""
        if self.dangling is None:
            return super().run()
        y, seconds, stats = self.solve()
        self.check_converged(stats)
        base = self.base_vector
        self.set_base(self.dangling)
        try:
            z, more, second = self.solve()
        finally:
            self.set_base(base)
        self.check_converged(second)
        mask, d = self._dangling_mask, self.alpha
        x = y + (d * y[mask].sum() / (1.0 - d * z[mask].sum())) * z
        if stats["iterations"] is not None:
            stats["iterations"] += second["iterations"]
        return self._result(x / x.sum(), seconds + more, stats)


def _differ(weights, ranks=None) -> bool:
    """Whether ``weights`` (a graph's, or None) are not all the same: only then do they change
    PageRank (equal weights split a rank as arc counts do). With ``ranks``, ``weights`` are
    this rank's arcs' and the answer is the whole graph's, the same on every rank (each decides
    its kernels by it)."""
    w = np.asarray(weights) if weights is not None else np.zeros(0)
    if ranks is not None:
        lo = ranks.allreduce(float(w.min()) if w.size else np.inf, "min", what="the weights")
        hi = ranks.allreduce(float(w.max()) if w.size else -np.inf, "max", what="the weights")
        return bool(lo <= hi) and not (lo == hi and lo > 0)
    if w.size == 0:
        return False
    return not (bool(np.all(w == w[0])) and w[0] > 0)


def _dangling_vertices(graph, weighted: bool) -> np.ndarray:
    """By position: the vertices without out-arcs (weighted: without out-weight); of a graph
    loaded by ranks, every rank's rows gathered (a rank holding them all: its own)."""
    ranks = loading_ranks(graph)
    rows = whole_rows(graph) if ranks is None else graph.part
    deg = np.diff(np.asarray(rows.indptr, dtype=np.int64))
    if weighted:
        at = np.repeat(np.arange(deg.shape[0]), deg)
        mask = np.bincount(at, weights=np.asarray(rows.weights, np.float64),
                           minlength=deg.shape[0]) == 0
    else:
        mask = deg == 0
    if ranks is None:
        return mask
    return np.concatenate(ranks.allgatherv(mask, what="the dangling vertices"))


def _weight(value, name: str) -> float:
    """One value of a ``distribution`` dict, a number (a TypeError naming ``name`` if not;
    a bool is 0 or 1, as NetworkX's float array makes it)."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: the values must be numbers, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def distribution(graph, values, name: str) -> np.ndarray:
    """``values`` (a dict keyed by the graph's ids, missing ids 0; or an array by position) as
    a float64 distribution by position, as NetworkX reads ``personalization``, ``nstart`` and
    ``dangling``. Errors name the argument ``name``: an id that is not a vertex, a negative or
    non-finite weight, a wrong length; all zero is a ZeroDivisionError, as NetworkX raises."""
    n = int(graph.num_vertices)
    if isinstance(values, dict):
        p = np.zeros(n, dtype=np.float64)
        if values:
            ids = list(values)
            try:
                positions = [graph.vertex_of(i, f"{name} key") for i in ids]
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            p[np.asarray(positions, dtype=np.int64)] = [_weight(values[i], name) for i in ids]
    else:
        try:
            p = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a dict of numbers by id or an array of them by "
                            f"position, got {type(values).__name__}") from None
        if p.shape != (n,):
            raise ValueError(f"{name}: an array needs one weight per vertex ({n}), got "
                             f"shape {p.shape}")
        p = p.copy()
    if n == 0:
        return p
    if not np.isfinite(p).all() or (p < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(p) | (p < 0))[0])
        where = (f"vertex {graph.file_id_of(bad)!r}" if isinstance(values, dict)
                 else f"position {bad}")
        raise ValueError(f"{name}: weights must be finite and >= 0 ({where} has {p[bad]})")
    total = p.sum()
    if total == 0 and n:
        raise ZeroDivisionError(f"{name}: the weights sum to zero; give at least one "
                                "vertex a positive weight")
    return p / total


@algorithm("pr", solver=PageRank, label="PageRank", modes=("async", "bsp"),
           memory=iteration_bytes)
def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1.0e-6, nstart=None,
             weight="weight", dangling=None, *, num_vertices=None, symmetric=False,
             **options) -> AppResult:
    """The PageRank of every vertex, as NetworkX's ``pagerank`` with the same arguments.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    alpha : float, optional
        The damping factor, in (0, 1).
    personalization : dict or array, optional
        The teleport distribution: a dict keyed by vertex id (missing ids 0) or an array by
        position; None: uniform.
    max_iter : int, optional
        Iterations before :class:`~groute.errors.PowerIterationFailedConvergence` is raised.
    tol : float, optional
        Stop when an iteration's L1 change is below ``len(G) * tol`` of the ranks' sum.
    nstart : dict or array, optional
        Start values (as ``personalization``).
    weight : str or None, optional
        The edge attribute holding the weights (an edge without it weighs 1); None:
        unweighted. A file's or a matrix's values are its weights.
    dangling : dict or array, optional
        Where the rank of a vertex without out-edges goes (as ``personalization``); None: as
        the teleport.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (``"auto"``, ``"bsp"``, ``"async"``), ``partition``, ``seed``,
        ``tuning`` (:class:`PageRank`).

    Returns
    -------
    AppResult
        Float64 ranks summing to 1; ``result.to_dict()`` is ``{id: rank}``.

    Raises
    ------
    PowerIterationFailedConvergence
        NetworkX's (and a :class:`groute.GrouteError`): no convergence within ``max_iter``.
    GraphNotSupported
        A NetworkX multigraph (NetworkX adds parallel edges up; groute keeps one arc).
    ValueError
        ``alpha`` outside (0, 1), a negative weight, a distribution naming no vertex.
    ZeroDivisionError
        A distribution whose weights sum to zero, as NetworkX.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3)])
    >>> ranks = groute.pagerank(G, alpha=0.9, backend="cpu", devices=1).to_dict()
    >>> ref = nx.pagerank(G, alpha=0.9)
    >>> all(abs(ranks[v] - ref[v]) < 1e-4 for v in G)
    True
    >>> W = nx.Graph([("a", "b", {"weight": 3.0}), ("b", "c", {"weight": 1.0})])
    >>> round(groute.pagerank(W, backend="cpu", devices=1).to_dict()["b"], 3)
    0.486
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="parallel edges add up in NetworkX's PageRank; groute keeps one "
                               "arc per pair of vertices: pass nx.DiGraph(G) or nx.Graph(G) "
                               "with the weights summed")
    with PageRank(g, alpha=alpha, personalization=personalization, max_iter=max_iter,
                  tol=tol, nstart=nstart, weight=weight, dangling=dangling,
                  **options) as solver:
        return solver.run()


@command
def register(subparsers, common):
    from .app_cli import add_graph_options
    from .iterate_cli import add_iteration_options
    p = subparsers.add_parser("pr", aliases=["pagerank"], parents=[common],
                              help="PageRank across devices (async push or BSP)")
    add_graph_options(p, negative_hint="--unweighted reads none")
    add_iteration_options(p, PageRank.rules, what="PageRank",
                          tol_help="stop when an iteration's L1 change is at most n*tol of the "
                                   "ranks' sum (NetworkX's tol; async: the same bound on the "
                                   "residuals' sum, or host-driven a residual bound "
                                   "tol*(1-alpha) per vertex; default: 1e-6/n, an L1 change of "
                                   "1e-6, where NetworkX's 1e-6 allows n*1e-6)",
                          tol_default=None)
    p.add_argument("--alpha", type=float, default=0.85, help="damping factor (default 0.85)")
    p.add_argument("--unweighted", action="store_true",
                   help="follow every out-arc alike (default: the graph's weights, if any, as "
                        "NetworkX's weight='weight')")
    p.set_defaults(func=_cli)


def _verify(g, values, alpha, weighted, tol):
    from groute.graph import reference
    ref = reference.pagerank(g, damping=alpha, weighted=weighted,
                             tol=min(tol * g.num_vertices, 1e-6) * 1e-2)
    l1, linf = reference.pagerank_error(values, ref)
    ok = l1 <= 1e-4
    return ok, (f"L1 {l1:.3e}, Linf {linf:.3e} vs reference power iteration "
                f"-> {'OK (L1 <= 1e-4)' if ok else 'FAILED (L1 > 1e-4)'}")


def _cli(args) -> int:
    from .app_cli import checked, load, run_solver
    from .iterate_cli import report_iteration, tol_for, tuning_from
    tuning = tuning_from(args, PageRank.rules["mode"])   # checked before the graph loads
    g, load_s = load(args)
    tol = tol_for(args, g)
    weight = None if args.unweighted else "weight"
    runs = run_solver(args, g, lambda where: PageRank(
        g, **where, partition=args.partition, mode=args.mode, alpha=args.alpha, tol=tol,
        seed=args.seed, max_iter=args.max_iter, weight=weight, tuning=tuning))
    verified = None
    if args.verify:
        verified = checked(args, g, lambda whole: _verify(whole, runs.result.values, args.alpha,
                                                          weight is not None, tol))
    return report_iteration(args, "pr", g, load_s, runs, verified, "rank")
