"""What every graph app's solver shares: timing, the solver base and the inputs.

Each app is a *solver* class that partitions and uploads the graph once (``__init__``) and can
then ``run`` many times (so benchmarks time the algorithm, not the setup), plus a one-shot
function (``bfs(graph, source, ...)``) that builds a solver, runs it once and shuts down; its
answer is an :class:`~groute.results.AppResult`.

Vertex ids: the one-shot functions take any graph input
:func:`groute.graph.input_graph` takes, and their
``source`` is one of the graph's own ids (a file's ids, NetworkX labels; :mod:`groute.graph.ids`).
"""
from __future__ import annotations

import functools
import inspect
import time

import numpy as np

from groute.keywords import check_keywords, solver_options
from groute.runtime.kept import lease
from groute.results import AppResult


#: seconds a host-clocked run's final wait polls the devices without sleeping, before the
#: usual back-off (:func:`groute.waiting.wait_for`): its sleeps double, so a short run would
#: be read at the next poll, up to twice its length, and its times would jump in steps as it
#: crossed from one poll to the next
END_SPIN_S = 0.05


class DeviceTimer:
    """Wall-clock time of work on all devices of a context: synchronise, start, ..., synchronise.

    On one CUDA device uses CUDA events on its compute stream (no host sync inside the timed
    region); otherwise a host clock between full synchronisations, the last of them polling
    without sleeping (:data:`END_SPIN_S`). Across processes the first is a meeting of the
    ranks, marked (:meth:`~groute.runtime.ranks.Ranks.mark_meeting`) so that the run's
    launches need not meet again.
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self._events = None
        self._t0 = None

    def __enter__(self):
        devs = self.ctx.devices
        if len(devs) == 1 and devs[0].backend == "cuda":
            import cupy
            with devs[0].use():
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(devs[0].compute_stream.raw)
            self._events = (start, stop)
        else:
            self.ctx.synchronize()
            ranks = getattr(self.ctx, "ranks", None)
            if ranks is not None:   # the run's launches may go on from this meeting
                ranks.mark_meeting()
            self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        if self._events is not None:
            import cupy
            start, stop = self._events
            dev = self.ctx.devices[0]
            with dev.use():
                stop.record(dev.compute_stream.raw)
                stop.synchronize()
            self.seconds = cupy.cuda.get_elapsed_time(start, stop) / 1e3
        else:
            self.ctx.synchronize(spin=END_SPIN_S)
            self.seconds = time.perf_counter() - self._t0
        return False


def check_device_count(what: str, devices: int, num_vertices: int) -> None:
    """Raise ValueError, in the same words for every app and engine (``what`` names it), when
    there are more ``devices`` than the graph has vertices (than one, for an empty graph): the
    vertices are shared out among the devices, at least one each."""
    fit = max(int(num_vertices), 1)
    if devices > fit:
        raise ValueError(f"{what}: {devices} devices for a graph of {num_vertices} "
                         f"{'vertex' if num_vertices == 1 else 'vertices'}: the vertices are "
                         f"shared out among the devices, at least one each; use {fit} "
                         f"device{'s' if fit > 1 else ''} or fewer")


def check_graph_for_ranks(ctx, graph, what: str) -> None:
    """Refuse a whole graph on a context spanning processes, where ``what`` (an engine or a
    solver, for the message) runs each process's rows of a graph loaded by ranks
    (:func:`groute.distributed.load_graph`).

    Raises
    ------
    ValueError
        Naming ``what`` and the graph's type, and how to load one by ranks.
    """
    if getattr(ctx, "ranks", None) is not None and not hasattr(graph, "split_by_ranges"):
        raise ValueError(f"{what} on a context spanning processes runs a graph loaded by ranks "
                         f"(groute.distributed.load_graph), each process holding its range; "
                         f"got {type(graph).__name__}")


class Solver:
    """Base of the app solvers: the context (the caller's, or one leased from the kept contexts,
    :mod:`groute.runtime.kept`, until :meth:`close`), and shutdown.

    Subclasses call :meth:`_open_context` in ``__init__`` and override :meth:`_release` to free
    what else they hold (worklists, links); ``close`` and ``with`` then do the right thing. A
    subclass whose ``__init__`` passes ``**options`` on to its base checks them first
    (:func:`groute.keywords.check_keywords`), so an unknown keyword names the class the caller
    built, not its base.
    """

    ctx = None
    _release_ctx = None
    _closed = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is not None:
            cls.run = _open_only(run)
        init = cls.__dict__.get("__init__")
        if init is None or not any(p.kind is p.VAR_KEYWORD
                                   for p in inspect.signature(init).parameters.values()):
            return

        @functools.wraps(init)
        def checked(self, *args, **options):
            check_keywords(type(self).__name__, options, solver_options(type(self)))
            init(self, *args, **options)
        cls.__init__ = checked

    #: what ``devices="auto"`` reads: the engine family of :data:`groute.engines.device_rule.
    #: BREAK_EVEN_ARCS` this solver belongs to
    engine_family = "operators"
    #: what the solver's ``devices`` became, and why (:class:`groute.engines.device_rule.
    #: DeviceChoice`): the command line and ``groute bench`` print it
    device_choice = None

    def _open_context(self, ctx=None, *, devices="auto", backend="auto", timeout=None,
                      graph, estimate=None, weighted=False):
        """The solver's context: ``ctx`` if given, else one of ``devices`` (``"auto"``: as
        :func:`groute.engines.device_rule.choose_devices` decides for :attr:`engine_family`
        from ``graph`` and the memory ``estimate``)."""
        from groute.engines.device_rule import choose_devices
        self.device_choice = choose_devices(
            devices, ctx=ctx, backend=backend, engine=self.engine_family,
            num_vertices=graph.num_vertices, num_arcs=graph.num_edges,
            directed=bool(getattr(graph, "directed", False)), estimate=estimate,
            weighted=weighted)
        self.ctx, self._release_ctx = lease(ctx, devices=self.device_choice.devices,
                                            backend=backend, timeout=timeout)
        return self.ctx

    def _check_device_count(self, app: str, num_vertices: int) -> None:
        """:func:`check_device_count` for this solver's context."""
        check_device_count(app, len(self.ctx.devices), num_vertices)

    def _check_memory(self, estimate, graph, *, weighted=False) -> None:
        """Raise :class:`~groute.memory.GraphTooLarge` before anything is uploaded when
        ``estimate`` (a function returning :class:`~groute.memory.DeviceBytes`) says ``graph``
        will not fit the context's devices (those of this process: on a context spanning
        processes each checks its own)."""
        from groute.memory import check_fits
        need = estimate(int(graph.num_vertices), int(graph.num_edges), weighted=weighted,
                        directed=bool(graph.directed), devices=len(self.ctx.devices))
        mine = [d for i, d in enumerate(self.ctx.devices) if self.ctx.is_local(i)]
        check_fits(mine, need, f"{type(self).__name__} on {graph.name or 'the graph'} "
                                           f"({int(graph.num_vertices):,} vertices, "
                                           f"{int(graph.num_edges):,} arcs)")

    def _result(self, values, time_s, stats, **facts) -> AppResult:
        """An :class:`AppResult` carrying the ids of the solver's ``graph``."""
        return AppResult(values, time_s, stats,
                         vertex_ids=getattr(self.graph, "vertex_ids", None), **facts)

    def _release(self) -> None:
        """Free resources other than the context (default: none)."""

    def close(self) -> None:
        """Release the solver and its lease of a kept context (the caller's context stays the
        caller's). Idempotent; a later :meth:`run` raises."""
        self._closed = True
        try:
            self._release()
        finally:            # a failed clean-up must not keep a kept context leased forever
            if self._release_ctx is not None:
                self._release_ctx()
                self._release_ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open_only(run):
    """A solver's ``run`` that refuses to run once the solver is closed: its arrays are freed
    and its lease of a kept context given back (another solver may hold that context now)."""
    @functools.wraps(run)
    def open_only(self, *args, **kwargs):
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed (close(), or the end of its "
                               f"with block): make a new one to run again")
        return run(self, *args, **kwargs)
    return open_only


def source_position(graph, source, what: str = "source") -> int:
    """The position of the caller's ``source``, one of the graph's own ids;
    :class:`~groute.errors.NodeNotFound` (NetworkX's, and a ValueError) naming it (as
    ``what``) and the graph when it is not a vertex."""
    if isinstance(source, (list, np.ndarray)):
        raise TypeError(f"{what} must be one vertex id, got {type(source).__name__}")
    position = vertex_position(graph, source, what)
    if np.ndim(position) != 0:      # a tuple of ids where the ids are numbers, not tuples
        from groute.errors import NodeNotFound
        raise NodeNotFound(f"{what} {source!r} is not a vertex of {graph.name}: its ids are "
                           f"single numbers")
    return position


def vertex_position(graph, ident, what: str):
    """``graph.vertex_of(ident, what)`` (one id, or an array of positions for a list), with a
    missing id as :class:`~groute.errors.NodeNotFound` rather than a KeyError."""
    try:
        return graph.vertex_of(ident, what)
    except KeyError as exc:
        from groute.errors import NodeNotFound
        raise NodeNotFound(exc.args[0]) from None
