"""Beamer's direction-optimising rule, defined once for the host and the kernels.

A traversal pushes (expands the frontier's out-arcs) while the frontier is small and pulls (every
unreached vertex looks for a parent in the frontier) once the frontier's arcs outnumber
1/``ALPHA`` of the arcs not yet explored; it pushes again once the frontier holds less than
1/``BETA`` of the vertices. The constants are GAP's. Counting the frontier's arcs costs a pass,
so it is done only for frontiers of more than 1/``SCOUT_MIN`` of the vertices.

The kernels (``direction.cuh``) get the same constants as ``-D`` options:
:func:`compile_options`.
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


def compile_options() -> tuple[str, ...]:
    """The ``-D`` options that give ``direction.cuh`` these constants."""
    return (f"-DPULL_ALPHA={ALPHA}", f"-DPULL_BETA={BETA}", f"-DSCOUT_MIN={SCOUT_MIN}")
