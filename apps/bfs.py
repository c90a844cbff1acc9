"""Breadth-first search across devices: asynchronous, data-driven, on the distributed worklist.

``bfs(graph, source)`` returns an :class:`~groute.apps.common.AppResult` whose ``values`` are int32
depths (hops from ``source``; -1 for unreachable vertices) in the caller's vertex ids.
:class:`BFS` partitions and uploads once and can run from many sources. Also the ``groute bfs``
subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import math

import numpy as np

from .traversal import TraversalSolver, graph_is_low_diameter, unreached_mask


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
        rounds are cheap, and re-expanding what a late offer lowers cost less than the window's
        far-queue splits (grid:4900 on two H200s: 65.2 ms without, 87.6 ms with a window of 4;
        docs/TRAVERSAL.md)."""
        return not (self.use_peer and self.mode == "async")

    def auto_mode(self, graph):
        """Where the kernels that keep the host out of the loop can run (:meth:`peer_unavailable`:
        CUDA, NVLink between all devices, no worklist asked for): BSP, the persistent
        level-synchronous kernel (:mod:`groute.apps.traversal_peer`), for a low-diameter graph (on one
        device a symmetric one, where the kernel pulls; kron:25 on one H200: 3.95 ms against
        9.53 ms for the fused asynchronous worker), async for a
        road-like one: one device's fused worker (grid:4900: 40.5 ms against 176 ms), on several
        the fused workers with device-initiated links (:mod:`groute.apps.traversal_linked`; grid:4900
        on two H200s: 65 ms against 203 ms for the peer kernel). Without them: BSP across
        devices of a symmetric low-diameter graph (the worklist pulls across devices), async
        everywhere else. docs/PERFORMANCE.md, docs/TRAVERSAL.md."""
        k = self.ctx.num_devices
        peer = self.peer_unavailable() is None
        if not peer and k == 1:         # the fused worker whatever the diameter: skip the test
            return "async"
        symmetric = not getattr(graph, "directed", True)
        if peer:    # one device: only where the kernel can pull (symmetric), as measured
            low = (k > 1 or symmetric) and graph_is_low_diameter(graph)
            return "bsp" if low else "async"
        return "bsp" if symmetric and graph_is_low_diameter(graph) else "async"

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
