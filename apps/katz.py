"""Katz centrality across devices, as a linear iteration: the second instance of the engines
PageRank runs on, written on public names only.

Katz centrality is the fixed point ``x = alpha A^T x + beta``: a vertex's centrality is
``beta`` plus ``alpha`` times the sum of its in-neighbours' (NetworkX's
``katz_centrality``; an undirected graph's neighbours both ways; with ``weight``, each
in-neighbour's times the arc's weight). It is the linear iteration :data:`KATZ`: a vertex sends
its whole value along every out-arc (share 1), the base term is ``beta`` (one value, or one per
vertex), the start is 0 (or ``nstart``) and the stopping rule absolute, as NetworkX's: the
first iteration whose L1 change is below ``n * tol``. Normalised to unit Euclidean norm unless
``normalized=False``. The iteration converges only for ``alpha`` below ``1 / lambda_max`` (the
adjacency matrix's largest eigenvalue); past it the values grow without bound and :class:`Katz`
raises :class:`groute.errors.PowerIterationFailedConvergence` (NetworkX's) after ``max_iter``.

``katz_centrality(G)`` returns an :class:`~groute.results.AppResult` (``to_dict()``:
``{id: centrality}``, as NetworkX's); :class:`Katz` partitions and uploads once and runs many
times. Also the ``groute katz`` subcommand (:mod:`groute.apps.katz_cli`). On the engine's
options (``mode``, ``tuning``, ...) see :class:`groute.engines.IterateSolver`.
"""
from __future__ import annotations

import numpy as np

from groute import AppResult
from groute.engines import FixedPoint, IterateSolver, LinearIteration
from groute.graph import input_graph
from groute.registry import public

#: Katz: a vertex sends its whole value along every out-arc; NetworkX's absolute L1 rule
KATZ = LinearIteration(name="katz", share="x", share_numpy=lambda x, deg: x, stop="absolute")


class Katz(IterateSolver):
    """Katz centrality of ``graph`` on the devices of a context, with NetworkX's parameters.
    ``alpha``: the attenuation factor (>= 0; converges below ``1 / lambda_max``). ``beta``: the
    base term, one number, a dict keyed by the graph's ids with a value for every vertex, or an
    array by position. ``max_iter``: the iterations (async: ten times as many push sweeps or
    rounds per device) before :meth:`run` raises
    :class:`groute.errors.PowerIterationFailedConvergence`. ``tol``: stop at the first iteration
    whose L1 change is below ``n * tol`` (async: the residuals' sum below it where the GPUs run
    the persistent push kernel, host-driven every residual at most ``tol``). ``nstart``: start values (as ``beta``; default 0). ``normalized``:
    scale the answer to unit Euclidean norm. ``weight``: None counts every arc as 1; anything
    else runs on the graph's weights. Other options as :class:`~groute.engines.IterateSolver`."""

    iteration = KATZ
    app = "katz"
    base_name = "beta"

    def __init__(self, graph, *, alpha=0.1, beta=1.0, max_iter=1000, tol=1.0e-6, nstart=None,
                 normalized=True, weight=None, **options):
        start = 0.0 if nstart is None else base_vector(graph, nstart, "nstart")
        super().__init__(graph, FixedPoint(alpha=alpha, base=base_vector(graph, beta),
                                           start=start, normalize="l2" if normalized else None,
                                           weighted=weight is not None),
                         max_iter=max_iter, tol=tol, **options)

    def divergence_hint(self) -> str:
        return (f"; the iteration converges only for alpha below 1 / lambda_max (the adjacency "
                f"matrix's largest eigenvalue): lower alpha (got {self.alpha:g})")


def base_vector(graph, beta, name: str = "beta"):
    """``beta`` (or ``nstart``: ``name``) as the solver takes it: a dict keyed by the graph's
    ids (a value for every vertex, as NetworkX asks) as float64 by position; a number or an
    array by position as it is (the solver checks them, naming the argument). Errors name the
    argument."""
    if isinstance(beta, dict):
        n = int(graph.num_vertices)
        values = np.empty(n, dtype=np.float64)
        seen = np.zeros(n, dtype=bool)
        for key, value in beta.items():
            try:
                i = graph.vertex_of(key, f"{name} key")
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            values[i], seen[i] = float(value), True
        if not seen.all():
            missing = graph.ids[int(np.flatnonzero(~seen)[0])]
            missing = missing.item() if isinstance(missing, np.generic) else missing
            raise ValueError(f"{name}: a dict needs a value for every vertex (missing "
                             f"{int((~seen).sum())}, e.g. {missing!r})")
        return values
    if isinstance(beta, (str, bytes)):
        raise TypeError(f"katz: {name} must be a number, a dict or an array by position, "
                        f"got {beta!r}")
    return beta


@public(solver=Katz)
def katz_centrality(G, alpha=0.1, beta=1.0, max_iter=1000, tol=1.0e-6, nstart=None,
                    normalized=True, weight=None, *, num_vertices=None, symmetric=False,
                    **options) -> AppResult:
    """Katz centrality, as NetworkX's ``katz_centrality`` with the same arguments.

    ``x = alpha A^T x + beta`` from ``x = nstart`` (default 0) until the L1 change is below
    ``n * tol``.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst[, weights])`` edge arrays, a file,
        a graph spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`).
    alpha : float, optional
        The attenuation factor; the iteration converges below ``1 / lambda_max``.
    beta : float, dict or array, optional
        The base term: one number, a dict with a value for every vertex, or an array by
        position.
    max_iter : int, optional
        Iterations before :class:`~groute.errors.PowerIterationFailedConvergence` is raised.
    tol : float, optional
        Stop when an iteration's L1 change is below ``len(G) * tol``.
    nstart : dict or array, optional
        Start values (as ``beta``); default 0.
    normalized : bool, optional
        Scale the answer to unit Euclidean norm.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge counts 1.
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode``, ``partition``, ``seed``, ``tuning`` (:class:`Katz`).

    Returns
    -------
    AppResult
        Float64 centralities; ``result.to_dict()`` is ``{id: centrality}``.

    Raises
    ------
    PowerIterationFailedConvergence
        NetworkX's (and a :class:`groute.GrouteError`): ``alpha`` too big, or ``max_iter`` too
        small.
    ValueError
        A ``beta`` dict missing a vertex, a negative ``alpha``.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.path_graph(4)
    >>> x = groute.katz_centrality(G, alpha=0.2, backend="cpu", devices=1).to_dict()
    >>> ref = nx.katz_centrality(G, alpha=0.2)
    >>> all(abs(x[v] - ref[v]) < 1e-6 for v in G)
    True
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric,
                    multigraph="NetworkX's katz_centrality takes no multigraph")
    with Katz(g, alpha=alpha, beta=beta, max_iter=max_iter, tol=tol, nstart=nstart,
              normalized=normalized, weight=weight, **options) as solver:
        return solver.run()
