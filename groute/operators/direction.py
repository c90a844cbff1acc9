"""Beamer's direction-optimising rule, defined once for the host and the kernels.

A traversal pushes (expands the frontier's out-arcs) while the frontier is small and pulls (every
unreached vertex looks for a parent in the frontier) once the frontier's arcs outnumber
1/``ALPHA`` of the arcs not yet explored; it pushes again once the frontier holds less than
1/``BETA`` of the vertices. The constants are GAP's. Counting the frontier's arcs costs a pass,
so it is done only for frontiers of more than 1/``SCOUT_MIN`` of the vertices.

The kernels (``direction.cuh``) get the same constants as ``-D`` options:
:func:`compile_options`. :class:`DirectionState` carries the rule from level to level on the
host, as the kernels carry it in their own state.
"""
from __future__ import annotations

ALPHA = 15
BETA = 24
SCOUT_MIN = 512


def push_to_pull(front_arcs: int, unexplored_arcs: int) -> bool:
    """While pushing: whether the next level pulls."""
    return front_arcs * ALPHA > unexplored_arcs


def stay_pulling(front_vertices: int, vertices: int) -> bool:
    """While pulling: whether the next level pulls too."""
    return front_vertices * BETA >= vertices


def scout(front_vertices: int, vertices: int) -> bool:
    """While pushing: whether the frontier is large enough for its arcs to be counted."""
    return front_vertices * SCOUT_MIN > vertices


def auto_may_pull(directed: bool) -> bool:
    """Whether ``direction="auto"`` may pull on a graph: not on a directed one, where the arcs a
    pull reads are in-arcs, which the rule's counts (of out-arcs) do not weigh."""
    return not directed


class DirectionState:
    """Beamer's rule over the levels of one traversal: whether the last level pulled, and the
    arcs push levels have explored.

    "Unexplored arcs", what :func:`push_to_pull` weighs the frontier's arcs against, are by
    default the total arcs minus the arcs of the frontiers pushed so far, as the kernels count
    them (``groute/engines/relax/fused.cu``, ``peer.cu``); a frontier too small to :func:`scout` is
    pushed without its arcs being counted, as there. A caller that knows the exact figure
    passes it instead: the BSP engine's ``advance`` is given the candidates of a pull (the
    unvisited vertices), whose arcs are exactly what a pull would search. The engine has no
    other choice either: one engine runs many traversals (betweenness, SCC) whose advances it
    cannot tell apart, so it keeps no count between them and starts a state per advance from
    the frontier's last direction.
    """

    def __init__(self, vertices: int, arcs: int, *, pulling: bool = False):
        self.vertices = int(vertices)
        self.arcs = int(arcs)
        self.pulling = bool(pulling)
        self.explored = 0

    def wants_arcs(self, front_vertices: int) -> bool:
        """Whether the next decision needs the frontier's arcs (pushing, and the frontier
        large enough to :func:`scout`); without them :meth:`next` pushes."""
        return not self.pulling and scout(front_vertices, self.vertices)

    def next(self, front_vertices: int, front_arcs: int = 0, unexplored: int | None = None) -> bool:
        """Whether the next level pulls, given the frontier's vertices and (pushing) its arcs;
        a push level's arcs count as explored from then on."""
        if self.pulling:
            self.pulling = stay_pulling(front_vertices, self.vertices)
            return self.pulling
        left = self.arcs - self.explored if unexplored is None else unexplored
        self.pulling = push_to_pull(front_arcs, left)
        if not self.pulling:
            self.explored += front_arcs           # the next level pushes them
        return self.pulling


def compile_options() -> tuple[str, ...]:
    """The ``-D`` options that give ``direction.cuh`` these constants."""
    return (f"-DPULL_ALPHA={ALPHA}", f"-DPULL_BETA={BETA}", f"-DSCOUT_MIN={SCOUT_MIN}")
