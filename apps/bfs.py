"""Breadth-first search across devices: hops from the sources, as a relaxation.

BFS is the relaxation :data:`HOPS`: every arc offers its tail's depth plus one, and a vertex
keeps the least offer. The relaxation engines (:class:`groute.engines.RelaxSolver`) run it:
asynchronous and data-driven on the distributed worklist, or in one launch per GPU exchanging
through peer memory; ``unit=True`` lets them expand level by level (direction-optimising pull,
the level-synchronous peer kernel).

``bfs(graph, source)`` returns an :class:`~groute.results.AppResult` whose ``values`` are int32
depths (hops from ``source``; -1 for unreachable vertices), with the graph's ids alongside.
:class:`BFS` partitions and uploads once and can run from many sources. Also the ``groute bfs``
subcommand (see :mod:`groute.apps.traversal_cli`).
"""
from __future__ import annotations

import math

import numpy as np

from groute.engines import Relaxation, RelaxSolver, value_add
from groute.engines.relax.memory import traversal_bytes
from groute.registry import algorithm, command
from groute.solver import input_graph

#: hops: every arc adds one
HOPS = Relaxation(name="hops", cuda="value_add(d, 1)", numpy=lambda d, w: value_add(d, 1),
                  unit=True)


class BFS(RelaxSolver):
    """BFS solver; options as :class:`~groute.engines.RelaxSolver`."""

    relaxation = HOPS
    app = "bfs"

    def default_delta(self, graph):
        """The window a ``priority=True`` without ``delta`` keeps: 4 levels across devices
        (the ``priority`` rule of :mod:`groute.engines.relax.rules` says why); none on one
        device, whose fused worker expands level by level already."""
        return math.inf if self.ctx.num_devices == 1 else 4

    def run(self, source=None, *, sources=None, depth_limit=None, predecessors=False):
        """As :meth:`RelaxSolver.run <groute.engines.RelaxSolver.run>`, with ``depth_limit``:
        vertices more than that many hops from the sources are left unreached (-1) and the
        frontier at that depth is not expanded, so the run does only the work inside the
        limit (the engine's ``ceiling``)."""
        return super().run(source, sources=sources, predecessors=predecessors,
                           ceiling=self.check_depth_limit(depth_limit))

    def check_depth_limit(self, depth_limit):
        """``depth_limit`` as an int >= 0, or None."""
        if depth_limit is None:
            return None
        if isinstance(depth_limit, bool) or not isinstance(depth_limit, (int, np.integer)) \
                or depth_limit < 0:
            raise ValueError(f"{self.app}: depth_limit must be an int >= 0, got {depth_limit!r}")
        return int(depth_limit)


@algorithm("bfs", solver=BFS, label="BFS", needs_source=True, modes=("async", "bsp"),
           memory=traversal_bytes)
def bfs(graph, source=None, *, sources=None, depth_limit=None, predecessors=False,
        num_vertices=None, **kwargs):
    """One-shot BFS from ``source``, one of the graph's own ids (a file's id, a NetworkX label),
    or from every id of ``sources`` at once (depth to the nearest one).

    ``graph``: anything :func:`~groute.solver.input_graph` takes (a path or spec, a CSRGraph, a
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


@command
def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "bfs", BFS)
