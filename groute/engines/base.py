"""The interface every engine implements: how an algorithm written on the operators runs.

An algorithm says *what* happens to a vertex or an arc (functors, :mod:`groute.operators`);
an engine says *how* it is scheduled across the devices of a :class:`~groute.Context`: where
each vertex lives (a partition of the graph), where its state is kept, how the operators run on
each device and how work that crosses devices reaches the owner. The operators
(``advance``, ``filter``, ``compute``) find the engine through the frontier they are given
and call the methods below; an algorithm calls the rest (state, frontiers, answers).

:class:`~groute.engines.bsp.BSPEngine` (host-driven bulk-synchronous) and
:class:`~groute.engines.async_engine.AsyncEngine` (the same, with order-free loops run without
levels) are the engines of this interface (functors on the operators). The
relaxation and linear iteration engines (:mod:`groute.engines.relax`,
:mod:`groute.engines.iterate`) run contracts of their own, not functors. A whole loop of operators
(:meth:`Engine.run_loop`, :meth:`Engine.sweep`) runs here as the operator calls; an engine that
can keep the host out of the loop overrides them (the BSP engine, on one CUDA device:
:mod:`groute.engines.fused`).
"""
from __future__ import annotations

import abc

import numpy as np

from groute.graph.ids import VertexIds
from groute.ints import is_int
from groute.operators.loop import python_loop, python_sweep
from groute.operators.rounds import python_rounds


def checked_positions(positions, num_vertices: int) -> np.ndarray:
    """``positions`` (vertex positions, 0..n-1) as a flat int64 array, checked as
    :meth:`Engine.frontier` checks ids: a TypeError for a scalar or for a position that is not
    an integer (1.7 would be truncated, ``True`` read as 1, ``"3"`` as 3), a ValueError for one
    out of range."""
    if isinstance(positions, (str, bytes)) or not hasattr(positions, "__iter__"):
        raise TypeError(f"frontier_at takes a list of vertex positions (one: [position]), got "
                        f"{type(positions).__name__} {positions!r}")
    if isinstance(positions, np.ndarray) and positions.dtype.kind in "iu":
        array = positions.reshape(-1)
        if array.dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
            array = array.astype(object)        # past int64: reported below as it is
    else:
        given = positions if isinstance(positions, np.ndarray) else list(positions)
        array = np.array(given, dtype=object).reshape(-1)
        bad = [x for x in array.tolist() if not is_int(x)]
        if bad:
            raise TypeError(f"frontier_at: vertex positions are integers, got {bad[0]!r}")
    outside = (array < 0) | (array >= num_vertices)
    if outside.any():
        raise ValueError(f"frontier_at: positions must be in [0, {num_vertices}); got "
                         f"{array[outside][0]}")
    return array.astype(np.int64, copy=False)


class Engine(abc.ABC):
    """See the module docstring. ``num_vertices``: the input graph's; vertex *positions* below
    are positions in the input graph (0..n-1, its own order), whatever the partition; its
    *ids* are the graph's own (``vertex_ids``: a NetworkX graph's labels, a file's ids), which
    :meth:`frontier` takes."""

    name: str = "engine"
    ctx = None
    num_vertices: int = 0
    #: the graph's :class:`~groute.graph.ids.VertexIds` (None: the ids are the positions)
    vertex_ids = None

    # state ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def state(self, name: str, dtype, fill=0, *, values=None) -> None:
        """Hold per-vertex state ``name`` on every device (replacing one of that name):
        ``fill`` everywhere, or ``values`` (an array by position); checked first
        (:func:`checked_state`)."""

    @abc.abstractmethod
    def out_degree_state(self, name: str, dtype=np.int32) -> None:
        """Hold state ``name``: each vertex's out-degree (its degree in an undirected graph);
        checked as :meth:`state` is, and ``dtype`` must hold the largest degree (a ValueError
        otherwise: a narrower integer would wrap it, a bool lose it)."""

    @abc.abstractmethod
    def gather(self, name: str) -> np.ndarray:
        """State ``name`` as one host array by position."""

    # frontiers -----------------------------------------------------------------------------
    @abc.abstractmethod
    def all_vertices(self):
        """A :class:`~groute.operators.Frontier` of every vertex."""

    def frontier(self, ids):
        """A :class:`~groute.operators.Frontier` of the vertices whose ids (the graph's own,
        as every algorithm takes them) are ``ids``; :class:`~groute.errors.NodeNotFound`
        naming the first that is not a vertex (ids that are positions are integers: 5.7, True
        or "1" are none)."""
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(f"frontier takes a list of the graph's ids (one id: [id]), got "
                            f"{type(ids).__name__} {ids!r}")
        known = self.vertex_ids if self.vertex_ids is not None else VertexIds(self.num_vertices)
        if not (isinstance(ids, np.ndarray) and ids.dtype.kind in "iu"):     # arrays as they are
            ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        try:
            return self.frontier_at(known.position_of(ids, "frontier id")
                                    if len(ids) else np.zeros(0, np.int64))
        except KeyError as exc:
            from groute.errors import NodeNotFound
            raise NodeNotFound(exc.args[0]) from None

    @abc.abstractmethod
    def frontier_at(self, positions):
        """A :class:`~groute.operators.Frontier` of the vertices at ``positions`` (checked
        first: :func:`checked_positions`)."""

    @abc.abstractmethod
    def positions_of(self, frontier) -> np.ndarray:
        """The vertices of ``frontier`` as sorted positions (host)."""

    # the operators (called by groute.operators.advance / filter / compute) ----------------
    @abc.abstractmethod
    def advance(self, frontier, functor, direction: str, candidates, scalars: dict, *,
                over: str = "out"):
        ...

    @abc.abstractmethod
    def filter(self, frontier, functor, scalars: dict):
        ...

    @abc.abstractmethod
    def compute(self, frontier, functor, scalars: dict) -> None:
        ...

    @abc.abstractmethod
    def reduce(self, frontier, state: str, op: str):
        """The ``op`` of state ``state`` over ``frontier`` (:func:`groute.operators.reduce`)."""

    # loops of steps (called by groute.operators.run_loop / sweep) ---------------------------
    def run_loop(self, frontier, steps, *, level, start, max_levels, keep, scalars,
                 order="levels"):
        """Run ``steps`` level after level (:func:`groute.operators.run_loop`); a
        :class:`~groute.operators.LoopResult`. Here: the operator calls, one per step and
        level (levels are one order of visits, so ``order="any"`` runs so too); an engine
        that can keep the host out of the loop, or the levels, overrides it."""
        return python_loop(frontier, steps, level=level, start=start, max_levels=max_levels,
                           keep=keep, scalars=scalars)

    def sweep(self, levels, steps, *, level, start, reverse, scalars) -> None:
        """Run ``steps`` over kept ``levels`` (:func:`groute.operators.sweep`); here: the
        operator calls."""
        python_sweep(levels, steps, level=level, start=start, reverse=reverse, scalars=scalars)

    def run_rounds(self, seeds, body, *, index, total, scalars):
        """One round of ``body`` per seed (:func:`groute.operators.run_rounds`); a
        :class:`~groute.operators.RoundsResult`. Here: the operator calls."""
        return python_rounds(self, seeds, body, index=index, total=total, scalars=scalars)

    # counters --------------------------------------------------------------------------------
    stats: dict = {}

    @abc.abstractmethod
    def reset_counters(self) -> None:
        """Zero the work counters in :attr:`stats` (operators run, ids exchanged)."""

    # life ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def close(self) -> None:
        """Free what the engine holds (its links; its context if it made it). Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class EngineSolver:
    """What a solver written on an engine shares: it builds its :attr:`engine` once (the
    partition and the upload, the costly part), runs many times on it, and frees it on
    :meth:`close` or at the end of a ``with`` block. A subclass sets ``self.engine`` in its
    constructor (``make_engine(...)``) and writes ``run``."""

    engine: Engine | None = None

    @property
    def ctx(self):
        """The engine's :class:`~groute.Context` (the devices it runs on)."""
        return self.engine.ctx

    @property
    def device_choice(self):
        """What the engine's ``devices`` became, and why
        (:class:`groute.engines.device_rule.DeviceChoice`)."""
        return self.engine.device_choice

    def close(self) -> None:
        """Free the engine (and its context if it made it). Idempotent."""
        if self.engine is not None:
            self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def checked_state(name, dtype, fill, values):
    """``(dtype, fill, values)`` of a state as :meth:`Engine.state` is asked for it, each
    checked: a non-empty string name, a numeric or bool dtype, and a fill and values the dtype
    holds exactly (an integer state takes whole numbers within its range: 1.7, NaN or 3e9
    into int32 would be stored as something else). ValueError or TypeError naming the
    state."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"a state's name is a non-empty string, got {name!r}")
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"state {name!r}: {exc}") from None
    if dtype.kind not in "biuf":
        raise TypeError(f"state {name!r}: a state holds numbers or bools, not {dtype}")
    if np.ndim(fill) != 0:     # each device fills its share with it: one number
        raise TypeError(f"state {name!r}: fill is one number for every vertex; values= takes "
                        f"an array by position")
    fill = _held_exactly(name, "fill", fill, dtype)
    if values is not None:
        values = _held_exactly(name, "values", values, dtype)
    return dtype, fill, values


def _held_exactly(name, what, x, dtype):
    """``x`` (a scalar or an array) as ``dtype`` holds it, or the error saying why not."""
    if isinstance(x, int) and not isinstance(x, bool) and not -2**63 <= x < 2**64:
        if dtype.kind in "iub":             # NumPy would make an object of it
            raise ValueError(f"state {name!r}: {what} {x} is outside the range of {dtype}")
        return x                            # a float state takes it, rounded as any float
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"state {name!r}: {what} must be numbers, got {a.dtype} ({x!r:.60})")
    if dtype.kind in "iub" and a.dtype.kind == "f" and a.size and not bool(
            np.all(np.isfinite(a) & (a == np.floor(a)))):
        raise ValueError(f"state {name!r}: {what} must be whole numbers for a state of {dtype}")
    if dtype.kind in "iu" and a.size:
        info = np.iinfo(dtype)
        low, high = a.min(), a.max()
        if low < info.min or high > info.max:
            raise ValueError(f"state {name!r}: {what} {low if low < info.min else high} is "
                             f"outside the range of {dtype}, [{info.min}, {info.max}]")
    if dtype.kind == "b" and a.size and not bool(np.all((a == 0) | (a == 1))):
        raise ValueError(f"state {name!r}: {what} of a bool state must be 0, 1 or bools")
    return x
