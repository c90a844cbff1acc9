"""PageRank across devices, as a linear iteration.

PageRank is the linear iteration :data:`PAGERANK`: a vertex sends its rank split evenly over
its out-arcs (``1 / outdeg``; a dangling vertex sends nothing), so the engines
(:class:`groute.engines.IterateSolver`: BSP pull sweeps, the default, or asynchronous residual
push) solve the "leaky" PageRank ``y = (1-d)/n + d P^T y`` and :class:`PageRank` returns
``y / sum(y)``. With uniform teleport and dangling mass spread uniformly (the standard
definition, ``groute.graph.reference.pagerank``) the PageRank vector is exactly proportional to
``y``, so no device ever needs the global dangling sum during the run; with a personalization
vector ``p`` the base term is ``(1-d) p`` and dangling mass follows ``p`` (NetworkX's default
``dangling``), again proportional to ``y``. The stopping rule is relative: an iteration's L1
change at most ``tol`` times the ranks' sum (async: every residual at most ``tol (1-d) / n``).

``pagerank(graph)`` returns an :class:`~groute.results.AppResult` of float64 ranks summing to
1, with the graph's ids alongside. Also the ``groute pr`` subcommand.
"""
from __future__ import annotations

import numpy as np

from groute.engines import IterateSolver, LinearIteration
from groute.engines.iterate.memory import iteration_bytes
from groute.engines.iterate.solver import stats_keys
from groute.registry import algorithm, command
from groute.results import AppResult
from groute.solver import input_graph

#: PageRank: a vertex's rank split evenly over its out-arcs
PAGERANK = LinearIteration(name="pagerank", share="x / (float)deg",
                           share_numpy=lambda x, deg: x / np.maximum(deg, 1),
                           stop="relative", alpha_name="damping")
#: the keys of a PageRank result's ``stats`` (the engines', alpha named ``damping``)
STATS_KEYS = stats_keys(PAGERANK)


class PageRank(IterateSolver):
    """PageRank of ``graph`` on the devices of a context; partition and upload once, run many
    times. ``damping``: the damping factor d, in (0, 1). ``personalization``: personalized
    PageRank, the teleport distribution (a dict keyed by the graph's ids, missing ids 0, or an
    array by position; normalised; :func:`teleport_vector`): the random surfer restarts, and
    dangling vertices' mass goes, in proportion to it (NetworkX's ``personalization`` with its
    default ``dangling``); None: uniform. ``tol``: stop when an iteration's L1 change is at most
    ``tol`` of the mass (async: residual bound ``tol (1-d) / n`` per vertex, so the L1 error is
    at most ``tol`` of the mass). Other options (``mode``, ``partition``, ``max_iterations``,
    ``tuning``, ...) as :class:`~groute.engines.IterateSolver`."""

    iteration = PAGERANK
    app = "pr"

    def __init__(self, graph, *, damping=0.85, personalization=None, **options):
        d = self._number("damping", damping)
        if not 0.0 < d < 1.0:
            raise ValueError(f"damping must be in (0, 1), got {damping!r}")
        self.damping = d
        n = int(graph.num_vertices)
        #: the teleport distribution by position (None: uniform)
        self.teleport = None if personalization is None else teleport_vector(graph, personalization)
        base = (1.0 - d) / max(n, 1) if self.teleport is None else (1.0 - d) * self.teleport
        super().__init__(graph, alpha=d, base=base, start=1.0 / max(n, 1), normalize="sum",
                         **options)


def teleport_vector(graph, personalization) -> np.ndarray:
    """``personalization`` (a dict keyed by the graph's ids, missing ids 0; or an array by
    position) as a float64 distribution by position. Errors name the argument: an id that is
    not a vertex, a negative or non-finite weight, a wrong length; all zero is a
    ZeroDivisionError, as NetworkX raises."""
    n = int(graph.num_vertices)
    if isinstance(personalization, dict):
        p = np.zeros(n, dtype=np.float64)
        if personalization:
            ids = list(personalization)
            try:
                positions = [graph.vertex_of(i, "personalization key") for i in ids]
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            p[np.asarray(positions, dtype=np.int64)] = [float(personalization[i]) for i in ids]
    else:
        p = np.asarray(personalization, dtype=np.float64)
        if p.shape != (n,):
            raise ValueError(f"personalization: an array needs one weight per vertex ({n}), got "
                             f"shape {p.shape}")
        p = p.copy()
    if n == 0:
        return p
    if not np.isfinite(p).all() or (p < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(p) | (p < 0))[0])
        raise ValueError(f"personalization: weights must be finite and >= 0 (vertex at "
                         f"position {bad} has {p[bad]})")
    total = p.sum()
    if total == 0 and n:
        raise ZeroDivisionError("personalization: the weights sum to zero; give at least one "
                                "vertex a positive weight")
    return p / total


@algorithm("pr", solver=PageRank, label="PageRank", modes=("async", "bsp"),
           memory=iteration_bytes)
def pagerank(graph, *, num_vertices=None, **kwargs) -> AppResult:
    """One-shot :class:`PageRank`: build, run once, close (``personalization=`` and the other
    options as :class:`PageRank`).

    ``graph``: anything :func:`~groute.solver.input_graph` takes (a path or spec, a CSRGraph, a
    NetworkX graph, a scipy sparse matrix, ``(src, dst)`` arrays with an optional
    ``num_vertices``); weights are ignored (NetworkX: ``nx.pagerank(G, weight=None)``). Keyword
    options as :class:`PageRank`. ``result.to_dict()`` is ``{id: rank}``.
    """
    g = input_graph(graph, weight=None, num_vertices=num_vertices)
    with PageRank(g, **kwargs) as solver:
        return solver.run()


@command
def register(subparsers, common):
    from .app_cli import add_graph_options
    from .iterate_cli import add_iteration_options
    p = subparsers.add_parser("pr", parents=[common], help="PageRank across devices (async push or BSP)")
    add_graph_options(p)
    add_iteration_options(p, PageRank.rules, what="PageRank",
                          tol_help="async: residual bound tol*(1-d)/n per vertex; bsp: L1 "
                                   "change (default 1e-6)")
    p.add_argument("--damping", type=float, default=0.85, help="damping factor (default 0.85)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from .app_cli import load, run_solver
    from .iterate_cli import report_iteration, tuning_from
    g, load_s = load(args)
    tuning = tuning_from(args)
    runs = run_solver(args, g, lambda where: PageRank(
        g, **where, partition=args.partition, mode=args.mode, damping=args.damping, tol=args.tol,
        seed=args.seed, max_iterations=args.max_iterations, tuning=tuning))
    verified = None
    if args.verify:
        from groute.graph import reference
        ref = reference.pagerank(g, damping=args.damping, tol=min(args.tol, 1e-6) * 1e-2)
        l1, linf = reference.pagerank_error(runs.result.values, ref)
        ok = l1 <= 1e-4
        verified = (ok, f"L1 {l1:.3e}, Linf {linf:.3e} vs reference power iteration "
                        f"-> {'OK (L1 <= 1e-4)' if ok else 'FAILED (L1 > 1e-4)'}")
    return report_iteration(args, "pr", g, load_s, runs, verified, "rank")
