"""The operators an algorithm is written with: ``advance``, ``filter``, ``compute``.

Each takes a :class:`~groute.operators.frontier.Frontier` (made by an engine, which runs the
operator on every device: :mod:`groute.engines`) and a :class:`~groute.operators.functor.Functor`;
keyword arguments are the functor's scalar parameters (``k=3``).

- ``advance(frontier, f, direction="push")``: for every arc ``u -> v`` with ``u`` in the
  frontier, ``f`` visits ``v`` on the device that owns it; the vertices a visit accepts (the
  CUDA body returns true, the NumPy callable returns their positions) form the output frontier,
  each once. ``"pull"``: every candidate ``v`` (the ``candidates`` frontier, else every vertex)
  visits its arcs from frontier members, stopping once a visit accepts it (the NumPy backend
  visits them all: a functor must give the same answer either way, as BFS and k-core do).
  ``"auto"``: Beamer's direction rule (:mod:`groute.operators.direction`).
- ``filter(frontier, f)``: the vertices of ``frontier`` ``f`` keeps (CUDA body returns true;
  NumPy callable returns a bool mask aligned with ``v``).
- ``compute(frontier, f)``: run ``f`` on each vertex of ``frontier`` (returns nothing).
"""
from __future__ import annotations

from .frontier import Frontier
from .functor import Functor

#: the values ``advance``'s ``direction`` takes
DIRECTIONS = ("push", "pull", "auto")


def _engine_of(frontier, functor, what):
    if not isinstance(frontier, Frontier):
        raise TypeError(f"{what} takes a Frontier (from an engine: engine.all_vertices(), "
                        f"engine.frontier(positions)), got {type(frontier).__name__}")
    if not isinstance(functor, Functor):
        raise TypeError(f"{what} takes a Functor, got {type(functor).__name__}")
    return frontier.engine


def advance(frontier, functor, direction: str = "push", *, candidates=None, **scalars):
    """The frontier of the vertices ``functor`` accepted along the arcs out of ``frontier``."""
    return _engine_of(frontier, functor, "advance").advance(frontier, functor, direction,
                                                            candidates, scalars)


def filter(frontier, functor, **scalars):  # noqa: A001 - the operator's name in the literature
    """The vertices of ``frontier`` that ``functor`` keeps."""
    return _engine_of(frontier, functor, "filter").filter(frontier, functor, scalars)


def compute(frontier, functor, **scalars) -> None:
    """Run ``functor`` on every vertex of ``frontier``."""
    _engine_of(frontier, functor, "compute").compute(frontier, functor, scalars)
