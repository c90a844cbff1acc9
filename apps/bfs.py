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

from groute.engines import Relaxation, RelaxSolver, value_add
from groute.engines.relax.memory import traversal_bytes
from groute.registry import algorithm, command
from groute.graph import input_graph

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

    def run(self, source=None, *, sources=None, cutoff=None, predecessors=False):
        """As :meth:`RelaxSolver.run <groute.engines.RelaxSolver.run>`, with NetworkX's
        ``cutoff``: vertices more than that many hops from the sources are left unreached
        (-1) and the frontier at that depth is not expanded, so the run does only the work
        inside it (the engine's ``ceiling``)."""
        return super().run(source, sources=sources, predecessors=predecessors,
                           ceiling=self.check_cutoff(cutoff))

    def check_cutoff(self, cutoff):
        """``cutoff`` as the last level a run reaches (an int >= 0), or None: NetworkX's
        meaning, whose search expands while the level is below ``cutoff``, so a fractional
        cutoff reaches the level above it and an infinite one every level."""
        if cutoff is None:
            return None
        number = isinstance(cutoff, (int, float)) or hasattr(cutoff, "__float__")
        if isinstance(cutoff, bool) or not number or not float(cutoff) >= 0:
            raise ValueError(f"{self.app}: cutoff must be a number >= 0 (hops), got {cutoff!r}")
        return None if math.isinf(float(cutoff)) else math.ceil(cutoff)


@algorithm("bfs", solver=BFS, label="BFS", needs_source=True, modes=("async", "bsp"),
           memory=traversal_bytes)
def bfs(G, source=None, cutoff=None, *, sources=None, predecessors=False, num_vertices=None,
        symmetric=False, **options):
    """Hops from ``source`` to every vertex it reaches, as NetworkX's
    ``single_source_shortest_path_length(G, source, cutoff)``.

    Parameters
    ----------
    G : graph input
        A NetworkX graph, a scipy sparse matrix, ``(src, dst)`` edge arrays, a file, a graph
        spec or a :class:`~groute.graph.CSRGraph` (:func:`groute.graph.load_graph`); weights
        are ignored.
    source : vertex id
        One of the graph's own ids (a NetworkX label, a file's id).
    cutoff : number, optional
        Leave vertices more than ``cutoff`` hops away unreached (and do not expand the
        frontier there).
    sources : list of vertex ids, optional
        Start from all of them at once instead of ``source`` (hops to the nearest).
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
        Int32 depths by position (-1: not reached); ``result.to_dict()`` is ``{id: depth}``
        over the vertices reached, as NetworkX's.

    Raises
    ------
    NodeNotFound
        NetworkX's (and a ValueError): ``source`` is not a vertex of ``G``.
    ValueError
        A negative ``cutoff``; both or neither of ``source`` and ``sources``.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.path_graph(5)
    >>> groute.bfs(G, 0, backend="cpu", devices=1).to_dict()
    {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}
    >>> groute.bfs(G, 0, cutoff=2, backend="cpu", devices=1).to_dict()
    {0: 0, 1: 1, 2: 2}
    """
    g = input_graph(G, weight=None, num_vertices=num_vertices, symmetric=symmetric)
    with BFS(g, **options) as solver:
        return solver.run(source, sources=sources, cutoff=cutoff, predecessors=predecessors)


@command
def register(subparsers, common):
    from .traversal_cli import register_app
    register_app(subparsers, common, "bfs", BFS)
