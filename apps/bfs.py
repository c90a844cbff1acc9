"""Breadth-first search across devices: asynchronous, data-driven, on the distributed worklist.

``bfs(graph, source)`` returns an :class:`~groute.apps.common.AppResult` whose ``values`` are int32
depths (hops from ``source``; -1 for unreachable vertices), with the graph's ids alongside.
:class:`BFS` partitions and uploads once and can run from many sources. Also the ``groute bfs``
subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import math

from .common import input_graph
from .auto_rules import BFS_RULES
from .traversal import TraversalSolver


class BFS(TraversalSolver):
    """BFS solver; options as :class:`~groute.apps.traversal.TraversalSolver`."""

    app = "bfs"
    weighted = False
    rules = BFS_RULES

    def default_delta(self, graph):
        """The window a ``priority=True`` without ``delta`` keeps: 4 levels across devices
        (the ``priority`` rule of :mod:`groute.apps.auto_rules` says why); none on one device,
        whose fused worker expands level by level already."""
        return math.inf if self.ctx.num_devices == 1 else 4


def bfs(graph, source=None, *, sources=None, depth_limit=None, predecessors=False,
        num_vertices=None, **kwargs):
    """One-shot BFS from ``source``, one of the graph's own ids (a file's id, a NetworkX label),
    or from every id of ``sources`` at once (depth to the nearest one).

    ``graph``: anything :func:`~groute.apps.common.input_graph` takes (a path or spec, a CSRGraph, a
    NetworkX graph, a scipy sparse matrix, ``(src, dst)`` arrays with an optional
    ``num_vertices``); weights are ignored. ``depth_limit``: leave vertices farther than that
    many hops unreached (and do not expand the frontier at that depth), as NetworkX's
    ``cutoff``; ``predecessors``: also a parent per reached vertex
    (``result.to_predecessors()``, ``result.path_to(t)``). Other keyword options as
    :class:`BFS`. ``result.to_dict()`` is ``{id: depth}`` over the vertices reached, as
    NetworkX's ``single_source_shortest_path_length``.
    """
    g = input_graph(graph, weight=None, num_vertices=num_vertices)
    with BFS(g, **kwargs) as solver:
        return solver.run(source, sources=sources, depth_limit=depth_limit,
                          predecessors=predecessors)


def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "bfs", BFS)
