"""Breadth-first search across devices: asynchronous, data-driven, on the distributed worklist.

``bfs(graph, source)`` returns an :class:`~groute.apps.common.AppResult` whose ``values`` are int32
depths (hops from ``source``; -1 for unreachable vertices), with the graph's ids alongside.
:class:`BFS` partitions and uploads once and can run from many sources. Also the ``groute bfs``
subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import math

from .common import input_graph
from .traversal import TraversalSolver, graph_is_low_diameter


class BFS(TraversalSolver):
    """BFS solver; options as :class:`~groute.apps.traversal.TraversalSolver`."""

    app = "bfs"
    weighted = False

    def default_delta(self, graph):
        # One device expands level by level already; across devices a window of levels keeps
        # a device from running far ahead on depths that remote updates will still lower.
        return math.inf if self.ctx.num_devices == 1 else 4

    def auto_priority(self, graph):
        """On, except for the linked workers (async across GPUs through peer memory): their
        rounds are cheap, and re-expanding what a late offer lowers costs less than the window's
        far-queue splits (docs/TRAVERSAL.md)."""
        return not (self.use_peer and self.mode == "async")

    def auto_mode(self, graph):
        """Where the kernels that keep the host out of the loop can run (:meth:`peer_unavailable`:
        CUDA, NVLink between all devices, no worklist asked for): BSP, the persistent
        level-synchronous kernel (:mod:`groute.apps.traversal_peer`), for a low-diameter graph (on one
        device a symmetric one, where the kernel pulls), async for a road-like one: one
        device's fused worker, on several the fused workers with device-initiated links
        (:mod:`groute.apps.traversal_linked`). Without them: BSP across devices of a symmetric
        low-diameter graph (the worklist pulls across devices), async everywhere else. Each
        choice was the fastest measured on its kind of graph and device count
        (docs/TRAVERSAL.md)."""
        k = self.ctx.num_devices
        peer = self.peer_unavailable() is None
        if not peer and k == 1:         # the fused worker whatever the diameter: skip the test
            return "async"
        symmetric = not getattr(graph, "directed", True)
        if peer:    # one device: only where the kernel can pull (symmetric)
            low = (k > 1 or symmetric) and graph_is_low_diameter(graph)
            return "bsp" if low else "async"
        return "bsp" if symmetric and graph_is_low_diameter(graph) else "async"


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
