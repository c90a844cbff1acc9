"""Katz centrality across devices, as a linear iteration: the second instance of the engines
PageRank runs on, written on public names only.

Katz centrality is the fixed point ``x = alpha A^T x + beta``: a vertex's centrality is
``beta`` plus ``alpha`` times the sum of its in-neighbours' (NetworkX's
``katz_centrality``; an undirected graph's neighbours both ways). It is the linear iteration
:data:`KATZ`: a vertex sends its whole value along every out-arc (share 1), the base term is
``beta`` (one value, or one per vertex), the start is 0 and the stopping rule absolute, as
NetworkX's: the first iteration whose L1 change is below ``n * tol``. Normalised to unit
Euclidean norm unless ``normalized=False``. The iteration converges only for ``alpha`` below
``1 / lambda_max`` (the adjacency matrix's largest eigenvalue); past it the values grow
without bound and :class:`Katz` raises :class:`KatzDidNotConverge` (a NetworkX
``PowerIterationFailedConvergence``) after ``max_iterations``.

``katz_centrality(G)`` returns an :class:`~groute.results.AppResult` (``to_dict()``:
``{id: centrality}``, as NetworkX's); :class:`Katz` partitions and uploads once and runs many
times. Also the ``groute katz`` subcommand (:mod:`groute.apps.katz_cli`). On the engine's
options (``mode``, ``tuning``, ...) see :class:`groute.engines.IterateSolver`.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import AppResult
from groute.engines import IterateSolver, LinearIteration
from groute.graph import load_graph
from groute.registry import public

#: Katz: a vertex sends its whole value along every out-arc; NetworkX's absolute L1 rule
KATZ = LinearIteration(name="katz", share="x", share_numpy=lambda x, deg: x, stop="absolute",
                       alpha_name="alpha")


class KatzDidNotConverge(nx.PowerIterationFailedConvergence):
    """Katz's iteration did not meet its stopping rule within ``max_iterations``: NetworkX's
    ``PowerIterationFailedConvergence``, with what to do about it in the message."""

    def __init__(self, num_iterations: int, message: str):
        Exception.__init__(self, message)
        self.num_iterations = num_iterations


class Katz(IterateSolver):
    """Katz centrality of ``graph`` on the devices of a context. ``alpha``: the attenuation
    factor (>= 0; converges below ``1 / lambda_max``). ``beta``: the base term, one number, a
    dict keyed by the graph's ids with a value for every vertex, or an array by position.
    ``normalized``: scale the answer to unit Euclidean norm. ``tol``: stop at the first
    iteration whose L1 change is below ``n * tol`` (async: every residual at most ``tol``).
    ``max_iterations``: the iterations (async: ten times as many push sweeps per device)
    before :meth:`run` raises :class:`KatzDidNotConverge`. Other options as
    :class:`~groute.engines.IterateSolver`."""

    iteration = KATZ
    app = "katz"
    base_name = "beta"

    def __init__(self, graph, *, alpha=0.1, beta=1.0, normalized=True, **options):
        super().__init__(graph, alpha=alpha, base=base_vector(graph, beta), start=0.0,
                         normalize="l2" if normalized else None, **options)

    def run(self) -> AppResult:
        """As :meth:`IterateSolver.run <groute.engines.IterateSolver.run>`; raises
        :class:`KatzDidNotConverge` where the stopping rule was not met."""
        result = super().run()
        if result.stats["converged"] is False:
            stats = result.stats
            done = (f"{stats['iterations']} iterations" if stats["mode"] == "bsp"
                    else f"{10 * self.max_iterations} push sweeps per device")
            raise KatzDidNotConverge(self.max_iterations, (
                f"katz: no convergence to tol {self.tol:g} in {done} (mode {stats['mode']}); "
                f"the iteration converges only for alpha below 1 / lambda_max (the adjacency "
                f"matrix's largest eigenvalue): lower alpha (got {self.alpha:g}) or raise "
                f"max_iterations"))
        return result


def base_vector(graph, beta):
    """``beta`` as the solver's base: a dict keyed by the graph's ids (a value for every
    vertex, as NetworkX asks) as float64 by position; a number or an array by position as it
    is (the solver checks them, naming ``beta``). Errors name the argument."""
    if isinstance(beta, dict):
        n = int(graph.num_vertices)
        values = np.empty(n, dtype=np.float64)
        seen = np.zeros(n, dtype=bool)
        for key, value in beta.items():
            try:
                i = graph.vertex_of(key, "beta key")
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            values[i], seen[i] = float(value), True
        if not seen.all():
            missing = graph.ids[int(np.flatnonzero(~seen)[0])]
            missing = missing.item() if isinstance(missing, np.generic) else missing
            raise ValueError(f"beta: a dict needs a value for every vertex (missing "
                             f"{int((~seen).sum())}, e.g. {missing!r})")
        return values
    if isinstance(beta, (str, bytes)):
        raise TypeError(f"katz: beta must be a number, a dict or an array by position, got "
                        f"{beta!r}")
    return beta


@public
def katz_centrality(graph, alpha=0.1, beta=1.0, max_iter=1000, tol=1e-6, normalized=True, *,
                    num_vertices=None, **kwargs) -> AppResult:
    """Katz centrality as NetworkX's ``katz_centrality(G, alpha, beta, max_iter, tol,
    normalized=normalized)`` (unweighted): ``x = alpha A^T x + beta`` from ``x = 0`` until the
    L1 change is below ``n * tol``, raising :class:`KatzDidNotConverge` (a NetworkX
    ``PowerIterationFailedConvergence``) after ``max_iter`` iterations.

    ``graph``: anything :func:`groute.graph.load_graph` takes (a path or spec, a CSRGraph, a
    NetworkX graph, a scipy sparse matrix, ``(src, dst)`` arrays with an optional
    ``num_vertices``); weights are ignored. Other keyword options (``mode``, ``ctx``,
    ``backend``, ``devices``, ``partition``, ``tuning``) as :class:`Katz`.
    ``result.to_dict()`` is ``{id: centrality}``.
    """
    g = load_graph(graph, weight=None, num_vertices=num_vertices)
    with Katz(g, alpha=alpha, beta=beta, normalized=normalized, tol=tol,
              max_iterations=max_iter, **kwargs) as solver:
        return solver.run()
