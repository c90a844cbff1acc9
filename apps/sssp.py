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

import numpy as np

from groute.engines import Relaxation, RelaxSolver, value_add
from groute.engines.relax.memory import traversal_bytes
from groute.engines.relax.values import check_overflow
from groute.registry import algorithm, command, public
from groute.solver import input_graph

#: distance: every arc adds its weight
DISTANCE = Relaxation(name="distance", cuda="value_add(d, w)", numpy=value_add, weighted=True)


class SSSP(RelaxSolver):
    """SSSP solver; options as :class:`~groute.engines.RelaxSolver`."""

    relaxation = DISTANCE
    app = "sssp"
    answer_dtype = np.float64
    unreached = np.inf

    def default_delta(self, graph):
        """Near-far's rule of thumb, ``mean weight * C / mean degree`` (at least one mean
        weight), with C = 64: a smaller C processes fewer items but runs more, shorter rounds,
        which cost more than they save (docs/TRAVERSAL.md)."""
        w = graph.weights
        mean_w = float(np.mean(w, dtype=np.float64)) if w is not None and len(w) else 1.0
        mean_deg = graph.num_edges / max(graph.num_vertices, 1)
        delta = max(mean_w, mean_w * 64 / max(mean_deg, 1.0))
        return max(1, int(round(delta))) if self.kind == "int" else delta

    def _finish(self, values):
        if self.overflow_possible:
            check_overflow(self.graph, values, self.kind, self.app)
        return self._answer(values)


@algorithm("sssp", solver=SSSP, label="SSSP", needs_source=True, weighted=True,
           modes=("async", "bsp"), memory=traversal_bytes)
def sssp(graph, source=None, *, sources=None, predecessors=False, weight="weight",
         num_vertices=None, **kwargs):
    """One-shot SSSP from ``source``, one of the graph's own ids (a file's id, a NetworkX label),
    or from every id of ``sources`` at once (distance to the nearest one, as NetworkX's
    ``multi_source_dijkstra_path_length``).

    ``graph``: anything :func:`~groute.solver.input_graph` takes (a path or spec, a CSRGraph, a
    NetworkX graph whose ``weight`` edge attribute holds the weights, a scipy sparse matrix whose
    values are the weights, ``(src, dst[, weights])`` arrays with an optional ``num_vertices``).
    ``predecessors``: also a parent per reached vertex (``result.to_predecessors()``,
    ``result.path_to(t)``). Other keyword options as :class:`SSSP`. ``result.to_dict()`` is
    ``{id: distance}`` over the vertices reached, as NetworkX's
    ``single_source_dijkstra_path_length``.
    """
    g = input_graph(graph, weight=weight, num_vertices=num_vertices)
    with SSSP(g, **kwargs) as solver:
        return solver.run(source, sources=sources, predecessors=predecessors)


@public
def shortest_path(graph, source, target, *, weight=None, num_vertices=None, **kwargs):
    """The ids on a shortest path from ``source`` to ``target`` (both the graph's own ids),
    source first, as NetworkX's ``shortest_path(G, source, target, weight)``: hops with
    ``weight=None`` (BFS), else the ``weight`` edge attribute's sum (SSSP). NetworkX's
    ``NetworkXNoPath`` when ``target`` is not reachable. Other keyword options as
    :class:`SSSP` (or :class:`~groute.apps.bfs.BFS`)."""
    from .bfs import BFS
    g = input_graph(graph, weight=weight, num_vertices=num_vertices)
    solver_class = BFS if weight is None else SSSP
    try:
        g.vertex_of(target, "target")           # a bad target fails before the run
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    with solver_class(g, **kwargs) as solver:
        result = solver.run(source, predecessors=True)
    return result.path_to(target)


@command
def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "sssp", SSSP)
