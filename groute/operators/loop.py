"""Loops of operator steps: a whole ``while frontier:`` loop in one call, so an engine can run it
without the host between levels.

A *level* is a short fixed sequence of steps applied to the current frontier
(:class:`ComputeStep`, :class:`FilterStep`, :class:`AdvanceStep`: the operators of
:mod:`groute.operators.api` with their arguments fixed); the output of its last filter or
advance is the next level's frontier. :func:`run_loop` runs levels until the frontier is empty
(or ``max_levels`` ran) and returns a :class:`LoopResult`: how many levels ran, the frontier
left, and with ``keep=True`` every level's frontier (:class:`Levels`). :func:`sweep` runs steps
over kept levels, one level at a time (betweenness' backward pass, deepest level first).

Scalars are given once for the loop (``k=3``), each step taking those its functor declares;
``level="d"`` names the scalar that takes the level's number (``start`` for the first level).

``order="any"`` declares that the loop's answer does not depend on the order in which its
vertices are processed (:data:`ORDERS`; the contract is in docs/OPERATORS_REFERENCE.md,
"Order-free loops"): every visit changes the state monotonically and accepts a vertex only when it changed
it, and visiting a vertex again is harmless. An engine may then run the loop without levels
(:class:`groute.engines.AsyncEngine`); the default, ``"levels"``, keeps them.

The engine chooses how a loop runs (``engine.run_loop``, ``engine.sweep``): every engine can
run it as the operator calls below (:func:`python_loop`, :func:`python_sweep`: what an
algorithm would write by hand); the BSP engine runs it on one CUDA device as one persistent
kernel (:mod:`groute.engines.fused`), and a loop (its levels kept or not) and a sweep over the
levels it kept on several CUDA devices as one per device, pushes and pulls
(:mod:`groute.engines.fused_multi`). The answers are the same either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .api import ARCS, advance, compute, filter
from .frontier import Frontier
from .functor import Functor
from ..ints import is_int

#: what ``run_loop(order=)`` takes: ``"levels"`` (level after level, the default) or ``"any"``
#: (the answer does not depend on the order of visits: module docstring)
ORDERS = ("levels", "any")
#: the directions a loop's advance takes (``"auto"``: Beamer's rule, which the engine applies
#: per call and the fused kernel per level, its state carried from level to level)
LOOP_DIRECTIONS = ("push", "pull", "auto")


def _check_functor(step) -> None:
    if not isinstance(step.functor, Functor):
        raise TypeError(f"{type(step).__name__}: functor must be a Functor, got "
                        f"{type(step.functor).__name__}")


@dataclass(frozen=True)
class ComputeStep:
    """Run ``functor`` on every vertex of the frontier; the frontier stays."""
    functor: Functor

    produces = False

    def __post_init__(self):
        _check_functor(self)

    def run(self, frontier, scalars):
        compute(frontier, self.functor, **scalars)
        return frontier


@dataclass(frozen=True)
class FilterStep:
    """The vertices of the frontier ``functor`` keeps become the frontier."""
    functor: Functor

    produces = True

    def __post_init__(self):
        _check_functor(self)

    def run(self, frontier, scalars):
        return filter(frontier, self.functor, **scalars)


@dataclass(frozen=True)
class AdvanceStep:
    """The vertices ``functor`` accepts along the frontier's arcs become the frontier, as
    :func:`~groute.operators.advance` with these arguments (``candidates``: a frontier fixed
    for the whole loop). A gathering functor (``Functor(gather=...)``) may pull, over either
    arcs, and ``"auto"`` chooses per level."""
    functor: Functor
    direction: str = "push"
    over: str = "out"
    candidates: Frontier | None = field(default=None, compare=False)

    produces = True

    def __post_init__(self):
        _check_functor(self)
        gathering = self.functor.gather is not None
        if self.functor.message is not None and self.direction == "pull" and not gathering:
            raise ValueError(f"AdvanceStep: {self.functor.name} carries a message from each "
                             f"source, which a pull cannot send; use direction='push'")
        if self.direction not in LOOP_DIRECTIONS:
            raise ValueError(f"AdvanceStep: direction must be one of "
                             f"{', '.join(LOOP_DIRECTIONS)}; got {self.direction!r}")
        if self.over not in ARCS:
            raise ValueError(f"AdvanceStep: over must be one of {', '.join(ARCS)}; got "
                             f"{self.over!r}")
        pushes = gathering or self.direction == "push" or (self.direction == "auto"
                                                           and self.functor.message is not None)
        if self.over == "in" and not pushes:
            raise ValueError("AdvanceStep: over='in' pushes along the frontier's in-arcs; "
                             "direction must be 'push'")

    def run(self, frontier, scalars):
        return advance(frontier, self.functor, self.direction, over=self.over,
                       candidates=self.candidates, **scalars)


STEPS = (ComputeStep, FilterStep, AdvanceStep)


class Levels:
    """The frontiers of the levels a loop ran (``keep=True``), a sequence of
    :class:`~groute.operators.Frontier`: ``levels[i]`` is the frontier level ``i`` started
    from. A slice keeps each level's number (``levels[1:][0]`` is level 1), which is what
    :func:`sweep`'s level scalar takes. ``total``: the vertices of every level together.
    An engine may hold them its own way (``store``: the fused loop's queues, back to back on
    the device) and make each frontier when it is asked for."""

    def __init__(self, engine, count: int, frontier_of, *, numbers=None, store=None):
        self.engine = engine
        self.numbers = range(count) if numbers is None else numbers
        self._frontier_of = frontier_of
        self.store = store

    def __len__(self):
        return len(self.numbers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Levels(self.engine, 0, self._frontier_of, numbers=self.numbers[i],
                          store=self.store)
        return self._frontier_of(self.numbers[i])

    def __iter__(self):
        return (self._frontier_of(n) for n in self.numbers)

    def frontier_of(self, number: int) -> Frontier:
        """The frontier of level ``number`` (its number in the loop, not in this slice)."""
        return self._frontier_of(number)

    @property
    def total(self) -> int:
        """Vertices over the levels (a vertex in two levels counts twice)."""
        if self.store is not None:
            return self.store.total(self.numbers)
        return sum(len(f) for f in self)

    def __repr__(self):
        return f"<Levels {len(self)} levels ({self.numbers.start}..{self.numbers.stop - 1})>"


def frontier_list(engine, frontiers) -> Levels:
    """:class:`Levels` over a list of frontiers (what the Python loop keeps)."""
    frontiers = list(frontiers)
    return Levels(engine, len(frontiers), frontiers.__getitem__)


@dataclass
class LoopResult:
    """What :func:`run_loop` returns: ``levels`` run, the ``frontier`` left (empty unless
    ``max_levels`` stopped the loop), ``frontiers`` (:class:`Levels`, with ``keep=True``), and
    ``implementation``: how the engine ran it (``"fused"``, ``"python"``, ``"async"``: then
    ``levels`` counts the chunks of its worklist the busiest device took, not levels)."""
    levels: int
    frontier: Frontier
    frontiers: Levels | None = None
    implementation: str = "python"


def as_tuple(items, kinds: tuple, what: str, arg: str, must: str, give: str) -> tuple:
    """``items`` (one of ``kinds``, or an iterable of them) as a non-empty tuple; TypeError/
    ValueError naming ``arg``, saying what each item ``must`` be and what to ``give``."""
    if isinstance(items, kinds):
        items = (items,)
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"{what}: {arg} must be {must}; got {type(items).__name__}") from None
    if not items:
        raise ValueError(f"{what}: {arg} is empty; give {give}")
    for item in items:
        if not isinstance(item, kinds):
            raise TypeError(f"{what}: {arg} holds {type(item).__name__}; each item is {give}")
    return items


def check_steps(steps, what: str) -> tuple:
    """The steps as a tuple of step objects, a message only on an AdvanceStep. TypeError/
    ValueError naming the argument."""
    if isinstance(steps, Functor):
        raise TypeError(f"{what}: steps holds the Functor {steps.name}; wrap it in a step "
                        f"(ComputeStep, FilterStep or AdvanceStep)")
    steps = as_tuple(steps, STEPS, what, "steps", "a step or a list of steps",
                     "a ComputeStep, FilterStep or AdvanceStep")
    for s in steps:
        if not isinstance(s, AdvanceStep) and s.functor.message is not None:
            raise TypeError(f"{what}: {s.functor.name} carries a message along arcs; only an "
                            f"AdvanceStep sends one")
    return steps


#: the arguments of ``run_loop`` and ``sweep``: a scalar of that name cannot be passed to them
LOOP_KEYWORDS = frozenset({"frontier", "levels", "steps", "level", "start", "max_levels", "keep",
                           "order", "reverse"})


def loop_params(steps, where: str) -> list:
    """Every parameter of the steps' functors once, in order of appearance; ValueError naming
    both functors when two declare one name differently (the steps of a loop, or of a body of
    rounds, share their parameters by name: a fused kernel holds one of each)."""
    seen, out = {}, []
    for step in steps:
        for p in step.functor.parsed:
            other = seen.get(p.name)
            if other is None:
                seen[p.name] = (p, step.functor.name)
                out.append(p)
            elif (other[0].ctype, other[0].array) != (p.ctype, p.array):
                raise ValueError(f"{where}: {step.functor.name} declares {p.declaration()!r} "
                                 f"but {other[1]} declares {other[0].declaration()!r}; the "
                                 f"steps of one loop share their parameters by name")
    return out


def declared_scalars(steps) -> dict:
    """The scalar parameters the steps' functors declare, by name (the first declaration)."""
    declared = {}
    for s in steps:
        for p in s.functor.parsed:
            if not p.array:
                declared.setdefault(p.name, p)
    return declared


def check_level(declared: dict, level: str | None, what: str, name: str = "level") -> None:
    """``level`` (the argument ``name``) names an integer scalar of ``declared``, or is None."""
    if level is None:
        return
    if level not in declared:
        raise ValueError(f"{what}: {name}={level!r} names no scalar of the steps' functors "
                         f"(they declare {sorted(declared) or 'none'})")
    if declared[level].ctype not in ("int", "long long"):
        raise TypeError(f"{what}: {name}={level!r} is declared {declared[level].ctype}; the "
                        f"{name}'s number needs an int or long long")


def check_loop(steps, scalars: dict, level: str | None, what: str) -> tuple:
    """The steps as a tuple, checked: step objects, every scalar given declared by some step's
    functor and every one declared given (or ``level``), ``level`` an integer scalar of one.
    ValueError/TypeError naming the argument."""
    steps = check_steps(steps, what)
    loop_params(steps, what)
    declared = declared_scalars(steps)
    extra = sorted(set(scalars) - set(declared))
    if extra:
        raise TypeError(f"{what}: no step's functor declares the scalar(s) {extra}")
    check_level(declared, level, what)
    if level is not None and level in scalars:
        raise ValueError(f"{what}: {level!r} is the level scalar; do not give it as well")
    for s in steps:
        for p in s.functor.parsed:
            if not p.array and p.name not in scalars and p.name != level:
                own = p.name in LOOP_KEYWORDS      # taken by the loop call, never a scalar
                raise TypeError(f"{what}: {s.functor.name} needs the scalar {p.name!r} ("
                                + (f"{p.name}= is {what}'s own argument: rename the scalar, "
                                   f"or name it as the level" if own else
                                   f"pass {p.name}=... or level={p.name!r}") + ")")
    return steps


def scalars_of(step, scalars: dict) -> dict:
    """The scalars ``step``'s functor declares, from the loop's."""
    names = {p.name for p in step.functor.parsed if not p.array}
    return {k: v for k, v in scalars.items() if k in names}


def _check_count(value, name, what, least):
    if value is None:
        return None
    if not is_int(value) or value < least:
        raise ValueError(f"{what}: {name} must be an int >= {least} or None; got {value!r}")
    return int(value)


def run_loop(frontier, steps, *, level: str | None = None, start: int = 0,
             max_levels: int | None = None, keep: bool = False, order: str = "levels",
             **scalars) -> LoopResult:
    """Run ``steps`` level after level from ``frontier`` until the frontier is empty or
    ``max_levels`` levels ran (module docstring): a whole ``while frontier:`` loop in one call,
    which an engine may run without the host between levels.

    Parameters
    ----------
    frontier : Frontier
        The first level's frontier.
    steps : list
        :class:`ComputeStep`, :class:`FilterStep` and :class:`AdvanceStep` in order; the
        frontier the last filter or advance of a level makes is the next level's.
    level : str, optional
        The scalar that takes each level's number plus ``start``.
    start : int, optional
        The first level's number.
    max_levels : int, optional
        Stop after this many levels (default: when the frontier is empty).
    keep : bool, optional
        Keep every level's frontier (``result.frontiers``, for :func:`sweep`).
    order : {"levels", "any"}, optional
        ``"any"``: the answer does not depend on the order of visits, so an engine may run
        the loop without levels.
    **scalars
        The steps' scalar parameters, by name.

    Returns
    -------
    LoopResult
        ``levels`` run, the ``frontier`` left, the kept ``frontiers`` (:class:`Levels`).

    Raises
    ------
    TypeError
        ``frontier`` not a Frontier, a step of another type.
    ValueError
        No step makes a frontier, a bad count or ``order``.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import AdvanceStep, Functor, run_loop
    >>> def claim(s, v):
    ...     v = np.unique(v[s["depth"][v] < 0])
    ...     s["depth"][v] = s["d"] + 1
    ...     return v
    >>> CLAIM = Functor(name="claim_level", params="int* depth, int d",
    ...                 cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;", numpy=claim)
    >>> with make_engine(nx.path_graph(4), backend="cpu", devices=1) as engine:
    ...     engine.state("depth", np.int32, values=np.array([0, -1, -1, -1]))
    ...     done = run_loop(engine.frontier([0]), [AdvanceStep(CLAIM)], level="d")
    ...     engine.gather("depth").tolist()
    [0, 1, 2, 3]
    """
    if not isinstance(frontier, Frontier):
        raise TypeError(f"run_loop: frontier must be a Frontier (from an engine: "
                        f"engine.all_vertices(), engine.frontier(ids)); got "
                        f"{type(frontier).__name__}")
    steps = check_loop(steps, scalars, level, "run_loop")
    if not any(s.produces for s in steps):
        raise ValueError("run_loop: no step makes a new frontier (a FilterStep or an "
                         "AdvanceStep), so the loop would never end")
    if not is_int(start):
        raise TypeError(f"run_loop: start must be an int; got {start!r}")
    start = int(start)
    max_levels = _check_count(max_levels, "max_levels", "run_loop", 0)
    if order not in ORDERS:
        raise ValueError(f"run_loop: order must be one of {', '.join(ORDERS)}; got {order!r}")
    return frontier.engine.run_loop(frontier, steps, level=level, start=start,
                                    max_levels=max_levels, keep=bool(keep), scalars=scalars,
                                    order=order)


def sweep(levels, steps, *, level: str | None = None, start: int = 0, reverse: bool = False,
          **scalars) -> None:
    """Run ``steps`` on each frontier of ``levels``, one level after the other: a backward
    pass over the levels a forward loop kept (betweenness's dependencies).

    Parameters
    ----------
    levels : Levels
        From ``run_loop(..., keep=True)``, or a slice of it (levels keep their numbers).
    steps : list
        As :func:`run_loop`'s; the frontiers they make are dropped.
    level : str, optional
        The scalar that takes each level's number plus ``start``.
    start : int, optional
        Added to each level's number.
    reverse : bool, optional
        The last level first.
    **scalars
        The steps' scalar parameters, by name.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        ``levels`` not kept levels, a step of another type.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import AdvanceStep, ComputeStep, Functor, run_loop, sweep
    >>> def claim(s, v):
    ...     v = np.unique(v[s["depth"][v] < 0])
    ...     s["depth"][v] = 0
    ...     return v
    >>> CLAIM = Functor(name="claim_kept", params="int* depth",
    ...                 cuda="return atomicCAS(&depth[v], -1, 0) == -1;", numpy=claim)
    >>> def order(s, v):
    ...     s["seen"][v] = s["seen"].max() + 1
    >>> ORDER = Functor(name="order", params="int* seen",
    ...                 cuda="seen[v] = 1;", numpy=order)
    >>> with make_engine(nx.path_graph(3), backend="cpu", devices=1) as engine:
    ...     engine.state("depth", np.int32, values=np.array([0, -1, -1]))
    ...     engine.state("seen", np.int32, 0)
    ...     kept = run_loop(engine.frontier([0]), [AdvanceStep(CLAIM)], keep=True).frontiers
    ...     sweep(kept, [ComputeStep(ORDER)], reverse=True)
    ...     engine.gather("seen").tolist()          # the deepest level first
    [3, 2, 1]
    """
    if not isinstance(levels, Levels):
        raise TypeError(f"sweep: levels must be the Levels of run_loop(..., keep=True); got "
                        f"{type(levels).__name__}")
    steps = check_loop(steps, scalars, level, "sweep")
    if not is_int(start):
        raise TypeError(f"sweep: start must be an int; got {start!r}")
    start = int(start)
    if len(levels):
        levels.engine.sweep(levels, steps, level=level, start=start, reverse=bool(reverse),
                            scalars=scalars)


def run_level(frontier, steps, scalars: dict):
    """One level: the steps in order; the frontier the last filter or advance made."""
    for step in steps:
        frontier = step.run(frontier, scalars_of(step, scalars))
    return frontier


def python_loop(frontier, steps, *, level, start, max_levels, keep, scalars) -> LoopResult:
    """:func:`run_loop` as the operator calls an algorithm would write (any engine)."""
    kept, count = [], 0
    while frontier and (max_levels is None or count < max_levels):
        if keep:
            kept.append(frontier)
        at = dict(scalars)
        if level is not None:
            at[level] = start + count
        frontier = run_level(frontier, steps, at)
        count += 1
    return LoopResult(count, frontier, frontier_list(frontier.engine, kept) if keep else None,
                      "python")


def python_sweep(levels, steps, *, level, start, reverse, scalars) -> None:
    """:func:`sweep` as operator calls, level by level (any engine)."""
    numbers = list(levels.numbers)
    for number in reversed(numbers) if reverse else numbers:
        at = dict(scalars)
        if level is not None:
            at[level] = start + number
        run_level(levels.frontier_of(number), steps, at)
