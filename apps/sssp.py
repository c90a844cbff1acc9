"""Single-source shortest paths across devices, with soft priority (near-far, delta-stepping).

SSSP is the relaxation :data:`DISTANCE`: every arc offers its tail's distance plus the arc's
weight, and a vertex keeps the least offer; the relaxation engines
(:class:`groute.engines.RelaxSolver`) run it, keeping a soft-priority window of ``delta``.

``sssp(graph, source)`` returns an :class:`~groute.results.AppResult` whose ``values`` are float64
distances (``inf`` for unreachable vertices), with the graph's ids alongside. The weights are the
graph's, and must be >= 0; integer weights are summed exactly in int32, float weights in float32;
an unweighted graph gets weight 1 on every arc (the command line too; random weights only when
asked for). A shortest distance past int32 (or float32's range) raises OverflowError after the
run; sums that overflow only on paths that are not shortest do not
(:mod:`groute.engines.relax.values` has the rule). Also the ``groute sssp`` subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from groute.engines import Relaxation, RelaxSolver, value_add
from groute.engines.relax.memory import traversal_bytes
from groute.registry import algorithm, command, public
from groute.graph import input_graph
from groute.solver import source_position

#: distance: every arc adds its weight
DISTANCE = Relaxation(name="distance", cuda="value_add(d, w)", numpy=value_add, weighted=True)


class SSSP(RelaxSolver):
    """SSSP solver; options as :class:`~groute.engines.RelaxSolver`."""

    relaxation = DISTANCE
    app = "sssp"
    answer_dtype = np.float64
    unreached = np.inf
    checks_overflow = True

    def default_delta(self, graph):
        """Near-far's rule of thumb, ``mean weight * C / mean degree`` (at least one mean
        weight), with C = 64: a smaller C processes fewer items but runs more, shorter rounds,
        which cost more than they save (docs/TRAVERSAL.md)."""
        w = graph.weights
        mean_w = float(np.mean(w, dtype=np.float64)) if w is not None and len(w) else 1.0
        mean_deg = graph.num_edges / max(graph.num_vertices, 1)
        delta = max(mean_w, mean_w * 64 / max(mean_deg, 1.0))
        return max(1, int(round(delta))) if self.kind == "int" else delta

    def run(self, source=None, *, sources=None, cutoff=None, predecessors=False):
        """As :meth:`RelaxSolver.run <groute.engines.RelaxSolver.run>`, with NetworkX's
        ``cutoff``: only distances at most ``cutoff`` are kept (the rest unreached, inf), and
        a vertex past it is not expanded (the engine's ``ceiling``: the first value above
        ``cutoff``)."""
        ceiling = self._ceiling_above(cutoff)
        result = super().run(source, sources=sources, predecessors=predecessors,
                             ceiling=ceiling)
        if ceiling is None:
            return result
        # the ceiling, not the cutoff: float32 sums compare with the float32 cutoff, as in the
        # run (0.1 + 0.1 in float32 is above the float64 0.2, and is the float32 0.2)
        beyond = np.asarray(result.values) >= ceiling
        if not beyond.any():
            return result
        values = np.where(beyond, self.unreached, result.values)
        parents = result.predecessors
        if parents is not None:
            parents = np.where(beyond, -1, parents)
        return dataclasses.replace(result, values=values, predecessors=parents,
                                   device_values=None)

    def _ceiling_above(self, cutoff):
        """The least run value above ``cutoff`` (a number >= 0), or None."""
        if cutoff is None:
            return None
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float, np.integer,
                                                               np.floating)) \
                or not cutoff >= 0:
            raise ValueError(f"{self.app}: cutoff must be a number >= 0 (a distance), got "
                             f"{cutoff!r}")
        if float(cutoff) > float(np.finfo(np.float32).max):     # inf, or past every distance
            return None
        if self.kind == "int":
            return int(np.floor(cutoff)) + 1
        return float(np.nextafter(np.float32(cutoff), np.float32(np.inf)))


@algorithm("sssp", solver=SSSP, label="SSSP", needs_source=True, weighted=True,
           modes=("async", "bsp"), memory=traversal_bytes)
def sssp(G, source=None, cutoff=None, weight="weight", *, sources=None, predecessors=False,
         num_vertices=None, symmetric=False, **options):
    """Shortest-path distances from ``source``, as NetworkX's
    ``single_source_dijkstra_path_length(G, source, cutoff, weight)``.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix (its values the weights), ``(src, dst[,
        weights])`` edge arrays, a file, a graph spec or a :class:`~groute.graph.CSRGraph`
        (:func:`groute.graph.load_graph`). Weights are >= 0; a graph without weights weighs 1
        per arc.
    source : vertex id
        One of the graph's own ids (a NetworkX label, a file's id).
    cutoff : number, optional
        Keep only distances at most ``cutoff`` (and do not expand past it).
    weight : str or None, optional
        The edge attribute holding the weights (an edge without it weighs 1); None: 1 per arc.
    sources : list of vertex ids, optional
        Start from all of them at once instead of ``source`` (distance to the nearest, as
        NetworkX's ``multi_source_dijkstra_path_length``).
    predecessors : bool, optional
        Also a parent per reached vertex (``result.to_predecessors()``,
        ``result.path_to(t)``).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as every groute algorithm: ``backend``, ``devices``, ``ctx``,
        ``timeout``, ``mode`` (``"auto"``, ``"bsp"``, ``"async"``), ``partition``, ``seed``,
        and the traversal's own (``priority``, ``delta``, ``exchange``, ``tuning``,
        ``worklist_tuning``: :class:`~groute.engines.RelaxSolver`).

    Returns
    -------
    AppResult
        Float64 distances by position (inf: not reached); ``result.to_dict()`` is ``{id:
        distance}`` over the vertices reached, as NetworkX's.

    Raises
    ------
    NodeNotFound
        NetworkX's (and a ValueError): ``source`` is not a vertex of ``G``.
    ValueError
        A negative weight or ``cutoff``.
    OverflowError
        A shortest distance past what the weights' type holds (int32 or float32).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.Graph([(0, 1, {"weight": 4}), (1, 2, {"weight": 1}), (0, 2, {"weight": 2})])
    >>> groute.sssp(G, 0, backend="cpu", devices=1).to_dict()
    {0: 0.0, 1: 3.0, 2: 2.0}
    >>> groute.sssp(G, 0, cutoff=2, backend="cpu", devices=1).to_dict()
    {0: 0.0, 2: 2.0}
    """
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric)
    if weight is None and g.weights is not None:    # a matrix's, arrays' or file's own: 1 per
        g = g.without_weights()                     # arc, as the argument says
    with SSSP(g, **options) as solver:
        return solver.run(source, sources=sources, cutoff=cutoff, predecessors=predecessors)


@public(solver=SSSP)
def shortest_path(G, source, target=None, weight=None, method="dijkstra", *,
                  num_vertices=None, symmetric=False, **options):
    """The ids on a shortest path from ``source`` to ``target``, source first, as NetworkX's
    ``shortest_path(G, source, target, weight, method)``; without ``target``, such a path to
    every vertex ``source`` reaches.

    Parameters
    ----------
    G : graph input
        As :func:`sssp`.
    source : vertex id
        The graph's own id.
    target : vertex id, optional
        The graph's own id; None: every vertex reached.
    weight : str or None, optional
        None: hops (BFS); else the edge attribute whose sum is minimised (SSSP).
    method : {"dijkstra", "bellman-ford"}, optional
        NetworkX's; with the weights >= 0 that groute takes, both find the same lengths.
    num_vertices : int, optional
        The vertex count of edge arrays.
    symmetric : bool, optional
        Read every arc of the input both ways.
    **options
        How it runs, as :func:`sssp`.

    Returns
    -------
    list or dict
        The ids on one shortest path (which of several equal ones is groute's choice); without
        ``target``, ``{id: path}`` over the vertices reached (:meth:`~groute.results.AppResult.paths`).

    Raises
    ------
    NodeNotFound
        NetworkX's: ``source`` or ``target`` is not a vertex of ``G``.
    NetworkXNoPath
        NetworkX's: ``target`` is not reachable from ``source``.
    ValueError
        An unknown ``method``.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> groute.shortest_path(nx.path_graph(4), 0, 3, backend="cpu", devices=1)
    [0, 1, 2, 3]
    >>> groute.shortest_path(nx.path_graph(3), 0, backend="cpu", devices=1)
    {0: [0], 1: [0, 1], 2: [0, 1, 2]}
    """
    from .bfs import BFS
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    g = input_graph(G, weight=weight, num_vertices=num_vertices, symmetric=symmetric)
    solver_class = BFS if weight is None else SSSP
    if target is not None:
        source_position(g, target, "target")        # a bad target fails before the run
    with solver_class(g, **options) as solver:
        result = solver.run(source, predecessors=True)
    return result.paths() if target is None else result.path_to(target)


@command
def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "sssp", SSSP)
