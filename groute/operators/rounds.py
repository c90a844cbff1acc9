"""Rounds: the same short program of loops run once per seed, so an engine can run all of them
without the host between rounds (nested loops).

A *round* runs its ``body`` in order, an item at a time:

- :class:`Loop`: :func:`~groute.operators.run_loop` of its steps from the frontier ``{seed}``
  (every Loop of a round starts there), its level scalar, ``start``, ``max_levels`` and
  ``keep`` as ``run_loop`` takes them;
- :class:`Sweep`: :func:`~groute.operators.sweep` of its steps over the levels the nearest
  Loop before it kept (``keep=True``), from level ``skip`` on (``skip=1``: ``levels[1:]``);
- :class:`Compute`: :func:`~groute.operators.compute` of a functor on every vertex
  (``over="all"``) or on the seed alone (``over="seed"``).

:func:`run_rounds` runs one round per seed, in the order given (a seed may repeat). Scalars are
given once for every round, each item taking those its functors declare; besides the items'
level scalars two are set per round: ``index`` names the scalar that takes the round's number
(0, 1, ...), ``total`` the one that takes the vertices over the levels the last kept Loop
kept (:attr:`Levels.total <groute.operators.Levels.total>`; only items after a kept Loop may
read it, a Loop without keep between them changing nothing).

The engine chooses how the rounds run (``engine.run_rounds``): every engine can run them as
the operator calls above (:func:`python_rounds`); the BSP engine on one CUDA device runs every
round in one persistent launch (:mod:`groute.engines.fused`), and on several CUDA devices that
write into each other's memory one launch per device (:mod:`groute.engines.fused_multi`), the
same answers either way.
Betweenness centrality is the example: one round per source, a forward Loop, a backward
Sweep, a Sweep that accumulates (``apps/betweenness.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from groute.ints import is_int

from .api import compute
from .functor import Functor
from .loop import (ComputeStep, Levels, _check_count, as_tuple, check_level, check_steps,
                   declared_scalars, loop_params, run_loop, sweep)

#: where a round's :class:`Compute` runs
COMPUTE_OVER = ("all", "seed")


def _check_int(value, name, what):
    if not is_int(value):
        raise TypeError(f"{what}: {name} must be an int; got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Loop:
    """:func:`~groute.operators.run_loop` of ``steps`` from the round's seed."""
    steps: tuple
    level: str | None = None
    start: int = 0
    max_levels: int | None = None
    keep: bool = False

    def __post_init__(self):
        steps = check_steps(self.steps, "Loop")
        if not any(s.produces for s in steps):
            raise ValueError("Loop: no step makes a new frontier (a FilterStep or an "
                             "AdvanceStep), so the loop would never end")
        object.__setattr__(self, "steps", steps)
        check_level(declared_scalars(steps), self.level, "Loop")
        object.__setattr__(self, "start", _check_int(self.start, "start", "Loop"))
        _check_count(self.max_levels, "max_levels", "Loop", 0)
        object.__setattr__(self, "keep", bool(self.keep))


@dataclass(frozen=True)
class Sweep:
    """:func:`~groute.operators.sweep` of ``steps`` over the levels the Loop before it kept,
    from level ``skip`` on (``reverse``: the deepest first)."""
    steps: tuple
    level: str | None = None
    start: int = 0
    reverse: bool = False
    skip: int = 0

    def __post_init__(self):
        steps = check_steps(self.steps, "Sweep")
        object.__setattr__(self, "steps", steps)
        check_level(declared_scalars(steps), self.level, "Sweep")
        object.__setattr__(self, "start", _check_int(self.start, "start", "Sweep"))
        _check_count(self.skip, "skip", "Sweep", 0)
        object.__setattr__(self, "reverse", bool(self.reverse))


@dataclass(frozen=True)
class Compute:
    """:func:`~groute.operators.compute` of ``functor`` on every vertex (``over="all"``) or
    on the round's seed (``over="seed"``)."""
    functor: Functor
    over: str = "all"

    level = None

    def __post_init__(self):
        if not isinstance(self.functor, Functor):
            raise TypeError(f"Compute: functor must be a Functor, got "
                            f"{type(self.functor).__name__}")
        if self.functor.message is not None:
            raise TypeError(f"Compute: {self.functor.name} carries a message along arcs; only "
                            f"an AdvanceStep sends one")
        if self.over not in COMPUTE_OVER:
            raise ValueError(f"Compute: over must be one of {', '.join(COMPUTE_OVER)}; got "
                             f"{self.over!r}")

    @property
    def steps(self) -> tuple:
        return (ComputeStep(self.functor),)


ITEMS = (Loop, Sweep, Compute)


@dataclass
class RoundsResult:
    """What :func:`run_rounds` returns: ``rounds`` run, ``levels``: the levels every Loop of
    every round ran together, ``deepest``: the most levels one Loop ran, and
    ``implementation``: how the engine ran them (``"fused"``, ``"python"``)."""
    rounds: int
    levels: int
    deepest: int
    implementation: str = "python"


def body_steps(body) -> list:
    """Every step of the items, in order (what the engine's rule and the fused source read)."""
    return [s for item in body for s in item.steps]


def check_rounds(body, scalars: dict, index: str | None, total: str | None) -> tuple:
    """The body as a tuple, checked: items, a Sweep after a kept Loop, ``index`` an integer
    scalar, ``total`` read only after a kept Loop, every scalar given declared and every one
    declared given (or set per level or round). TypeError/ValueError naming the argument."""
    what = "run_rounds"
    body = as_tuple(body, ITEMS, what, "body", "a list of Loop, Sweep and Compute items",
                    "a Loop, Sweep or Compute")
    loop_params(body_steps(body), what)
    declared = declared_scalars(body_steps(body))
    extra = sorted(set(scalars) - set(declared))
    if extra:
        raise TypeError(f"{what}: no functor of the body declares the scalar(s) {extra}")
    check_level(declared, index, what, "index")
    if total is not None:
        if total not in declared:
            raise ValueError(f"{what}: total={total!r} names no scalar of the body's functors "
                             f"(they declare {sorted(declared) or 'none'})")
        if total == index:
            raise ValueError(f"{what}: index and total name the same scalar {total!r}")
    per_round = {n for n in (index, total) if n is not None}
    for name in sorted(per_round & set(scalars)):
        raise ValueError(f"{what}: {name!r} is set per round (index or total); do not give it "
                         f"as well")
    kept = any_kept = False       # the nearest Loop before the item kept; any Loop before it did
    for item in body:
        names = set(declared_scalars(item.steps))
        if item.level is not None and item.level in set(scalars) | per_round:
            raise ValueError(f"{what}: {item.level!r} is a {type(item).__name__}'s level "
                             f"scalar and given (or set per round) as well")
        if isinstance(item, Sweep) and not kept:
            raise ValueError(f"{what}: a Sweep sweeps the levels of the Loop before it, which "
                             f"must keep them; put a Loop(..., keep=True) before it")
        if total is not None and total in names and not any_kept:
            raise ValueError(f"{what}: total={total!r} is read before any Loop kept levels; "
                             f"read it after a Loop(..., keep=True)")
        for name in sorted(names - set(scalars) - per_round - {item.level}):
            raise TypeError(f"{what}: {type(item).__name__} needs the scalar {name!r} (pass "
                            f"{name}=..., or name it as the item's level, index or total)")
        if isinstance(item, Loop):
            kept = item.keep
            any_kept = any_kept or item.keep
    return body


def run_rounds(engine, seeds, body, *, index: str | None = None, total: str | None = None,
               **scalars) -> RoundsResult:
    """One round of ``body`` per seed, in order (module docstring): what an algorithm runs
    once per source (betweenness), which an engine may run without the host between rounds.

    Parameters
    ----------
    engine : Engine
        From :func:`groute.engines.make_engine`.
    seeds : array of int
        The seeds as positions in the input graph (``engine.vertex_ids`` maps a graph's ids
        to them).
    body : list
        :class:`Compute`, :class:`Loop` and :class:`Sweep` items, run in order for each seed.
    index : str, optional
        The scalar that takes the round's number.
    total : str, optional
        The scalar that takes the vertices the last kept Loop kept.
    **scalars
        The body's scalar parameters, by name.

    Returns
    -------
    RoundsResult
        ``rounds`` run, ``levels`` over all of them, the ``deepest`` round's levels.

    Raises
    ------
    TypeError
        Not an engine, seeds that are not positions, a body of other items.
    ValueError
        A seed outside the graph.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import AdvanceStep, Compute, Functor, Loop, run_rounds
    >>> def claim(s, v):
    ...     v = np.unique(v[s["seen"][v] != s["round"]])
    ...     s["seen"][v] = s["round"]
    ...     return v
    >>> CLAIM = Functor(name="claim_round", params="int* seen, int round",
    ...                 cuda="return atomicExch(&seen[v], round) != round;", numpy=claim)
    >>> def start(s, v):
    ...     s["seen"][v] = s["round"]
    >>> START = Functor(name="start_round", params="int* seen, int round",
    ...                 cuda="seen[v] = round;", numpy=start)
    >>> with make_engine(nx.path_graph(4), backend="cpu", devices=1) as engine:
    ...     engine.state("seen", np.int32, -1)
    ...     done = run_rounds(engine, [0, 3], [Compute(START, over="seed"),
    ...                                         Loop([AdvanceStep(CLAIM)])], index="round")
    ...     done.rounds, done.levels
    (2, 8)
    """
    if not callable(getattr(engine, "run_rounds", None)) or not hasattr(engine, "frontier"):
        raise TypeError(f"run_rounds: engine must be an engine (groute.engines.make_engine); "
                        f"got {type(engine).__name__}")
    body = check_rounds(body, scalars, index, total)
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (seeds.size and not np.issubdtype(seeds.dtype, np.integer)):
        raise TypeError(f"run_rounds: seeds must be a 1-D list of vertex positions; got "
                        f"{seeds.dtype} of shape {seeds.shape}")
    n = engine.num_vertices
    if seeds.size and (seeds.min() < 0 or seeds.max() >= n):
        raise ValueError(f"run_rounds: seeds must be positions in [0, {n}); got "
                         f"{seeds.min()}..{seeds.max()}")
    return engine.run_rounds(seeds.astype(np.int64), body, index=index, total=total,
                             scalars=scalars)


def _given(steps, at: dict, level) -> dict:
    names = set(declared_scalars(steps)) - {level}
    return {k: v for k, v in at.items() if k in names}


def python_rounds(engine, seeds, body, *, index, total, scalars) -> RoundsResult:
    """:func:`run_rounds` as the operator calls an algorithm would write (any engine)."""
    levels_run = deepest = 0
    at = dict(scalars)
    for number, seed in enumerate(seeds.tolist()):
        if index is not None:
            at[index] = number
        kept: Levels | None = None
        for item in body:
            given = _given(item.steps, at, item.level)
            if isinstance(item, Compute):
                where = engine.all_vertices() if item.over == "all" else engine.frontier_at([seed])
                compute(where, item.functor, **given)
            elif isinstance(item, Loop):
                result = run_loop(engine.frontier_at([seed]), item.steps, level=item.level,
                                  start=item.start, max_levels=item.max_levels, keep=item.keep,
                                  **given)
                levels_run += result.levels
                deepest = max(deepest, result.levels)
                if item.keep:
                    kept = result.frontiers
                    if total is not None:
                        at[total] = kept.total
            else:
                sweep(kept[item.skip:], item.steps, level=item.level, start=item.start,
                      reverse=item.reverse, **given)
    return RoundsResult(len(seeds), levels_run, deepest, "python")
