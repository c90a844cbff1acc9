"""Breadth-first search across devices: asynchronous, data-driven, on the distributed worklist.

``bfs(graph, source)`` returns an :class:`~apps.common.AppResult` whose ``values`` are int32
depths (hops from ``source``; -1 for unreachable vertices) in the caller's vertex ids.
:class:`BFS` partitions and uploads once and can run from many sources. Also the ``groute bfs``
subcommand (see :mod:`apps.traversal_cli`).
"""
from __future__ import annotations

import math

import numpy as np

from .traversal import TraversalSolver, unreached_mask


class BFS(TraversalSolver):
    """BFS solver; options as :class:`~apps.traversal.TraversalSolver`."""

    app = "bfs"
    weighted = False

    def default_delta(self, graph):
        # One device expands level by level already; across devices a window of levels keeps
        # a device from running far ahead on depths that remote updates will still lower.
        return math.inf if self.ctx.num_devices == 1 else 4

    def auto_mode(self, graph):
        """BSP on several devices for a symmetric, low-diameter graph, where its levels pull
        across devices (kron:25 on 2 H200s: 10.9 ms against 34.7 ms async, docs/PERFORMANCE.md);
        async everywhere else (one device pulls inside its fused kernel; road-like graphs need
        the asynchronous exchange)."""
        from .traversal import low_diameter
        if self.ctx.num_devices > 1 and not getattr(graph, "directed", True) and low_diameter(graph):
            return "bsp"
        return "async"

    def _finish(self, values):
        out = values.astype(np.int32, copy=True)
        out[unreached_mask(values, "int")] = -1
        return out


def bfs(graph, source, **kwargs):
    """One-shot BFS from ``source``; keyword options as :class:`BFS`."""
    with BFS(graph, **kwargs) as solver:
        return solver.run(source)


def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "bfs", BFS)
