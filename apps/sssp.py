"""Single-source shortest paths across devices, with soft priority (near-far, delta-stepping).

``sssp(graph, source)`` returns an :class:`~groute.apps.common.AppResult` whose ``values`` are float64
distances (``inf`` for unreachable vertices) in the caller's vertex ids. Weights must be >= 0;
integer weights are summed exactly in int32, float weights in float32; an unweighted graph gets
weight 1 on every arc. Also the ``groute sssp`` subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import numpy as np

from .traversal import TraversalSolver, graph_is_low_diameter, unreached_mask


class SSSP(TraversalSolver):
    """SSSP solver; options as :class:`~groute.apps.traversal.TraversalSolver`."""

    app = "sssp"
    weighted = True
    peer_priority = True

    def default_delta(self, graph):
        """Near-far's rule of thumb, ``mean weight * C / mean degree`` (at least one mean
        weight), with C = 64: measured on one H100 (docs/PERFORMANCE.md), C = 32 processed
        fewer items but ran more, shorter rounds (grid:4900 141 ms vs 125 ms with delta 600;
        kron:21 9.8 ms vs 8.1 ms)."""
        w = graph.weights
        mean_w = float(np.mean(w)) if w is not None and len(w) else 1.0
        mean_deg = graph.num_edges / max(graph.num_vertices, 1)
        delta = max(mean_w, mean_w * 64 / max(mean_deg, 1.0))
        return max(1, int(round(delta))) if self.kind == "int" else delta

    def auto_priority(self, graph):
        """Soft priority unless the graph is low-diameter (:func:`~groute.apps.traversal.low_diameter`):
        there Bellman-Ford-style rounds converge in a few levels and the near-far rounds cost more
        than the re-expansions they save (kron:21 on one H200: 8.15 ms with priority, 7.22 ms
        without; 2.70M vs 2.87M vertices expanded), while on road-like graphs priority is what
        keeps the work near Dijkstra's (grid:4900: 123 ms vs 3.1 s). See docs/TRAVERSAL.md."""
        return not graph_is_low_diameter(graph)

    def auto_mode(self, graph):
        """Where the kernels that keep the host out of the loop can run (:meth:`peer_unavailable`:
        CUDA devices with NVLink between all of them, no worklist asked for): BSP, the
        persistent peer kernel (:mod:`groute.apps.traversal_peer`), for a low-diameter graph on any
        number of devices; async for a road-like graph: one device's fused worker, on several
        the fused workers with device-initiated links (:mod:`groute.apps.traversal_linked`). Elsewhere
        (CPU virtual devices, no NVLink) async. Measured on H200s (docs/PERFORMANCE.md,
        docs/TRAVERSAL.md): kron:21 2.44 ms on one GPU against 7.02 ms for the fused worker, 2.48
        ms on two against 15.18 ms through the host worklist; kron:25 38.8 ms on one against
        100.6 ms, 24.9 ms on two against 86.5 ms; grid:4900 68.6 ms on one with the fused worker
        against 286 ms for the peer kernel, and on two 102.8 ms linked against 306.1 ms for the
        peer kernel (``tests/gpu_linked_probe.py``)."""
        if self.peer_unavailable() is not None:
            return "async"
        return "bsp" if graph_is_low_diameter(graph) else "async"

    def _finish(self, values):
        out = values.astype(np.float64)
        out[unreached_mask(values, self.kind)] = np.inf
        return out


def sssp(graph, source, **kwargs):
    """One-shot SSSP from ``source``; keyword options as :class:`SSSP`."""
    with SSSP(graph, **kwargs) as solver:
        return solver.run(source)


def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "sssp", SSSP)
