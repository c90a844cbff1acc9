"""What every graph app shares: its result type, timing, and the CLI plumbing for graphs/ids.

Each app is a *solver* class that partitions and uploads the graph once (``__init__``) and can
then ``run`` many times (so benchmarks time the algorithm, not the setup), plus a one-shot
function (``bfs(graph, source, ...)``) that builds a solver, runs it once and shuts down.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from groute.context import ensure_context


@dataclass
class AppResult:
    """``values`` is indexed by the caller's (original, reader-order) vertex ids.

    ``time_s``: time of the algorithm alone (no partitioning, upload or download), measured with
    CUDA events / a synchronised clock. ``stats``: work counters (items processed per device,
    items sent per link, rounds, deferrals, bytes moved between devices, ...).
    """

    values: np.ndarray
    time_s: float
    stats: dict = field(default_factory=dict)


def complete_stats(keys, stats: dict) -> dict:
    """``stats`` over an app's documented key set ``keys``, in that order, whatever path ran:
    None where that path has no such counter. A key outside the set is a ValueError (an app
    that adds a counter documents it in its set)."""
    extra = set(stats) - set(keys)
    if extra:
        raise ValueError(f"stats keys {sorted(extra)} are not in the documented set {keys}")
    return {key: stats.get(key) for key in keys}


class DeviceTimer:
    """Wall-clock time of work on all devices of a context: synchronise, start, ..., synchronise.

    On one CUDA device uses CUDA events on its compute stream (no host sync inside the timed
    region); otherwise a host clock between full synchronisations.
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
            self.ctx.synchronize()
            self.seconds = time.perf_counter() - self._t0
        return False


class Solver:
    """Base of the app solvers: the context (borrowed, or created and owned), and shutdown.

    Subclasses call :meth:`_open_context` in ``__init__`` and override :meth:`_release` to free
    what else they hold (worklists, links); ``close`` and ``with`` then do the right thing.
    """

    ctx = None
    _owns_ctx = False

    def _open_context(self, ctx=None, *, devices=None, backend="auto", timeout=None):
        self.ctx, self._owns_ctx = ensure_context(ctx, devices=devices, backend=backend, timeout=timeout)
        return self.ctx

    def _release(self) -> None:
        """Free resources other than the context (default: none)."""

    def close(self) -> None:
        """Release the solver; shut its context down if it created it. Idempotent."""
        self._release()
        if self._owns_ctx and self.ctx is not None:
            self.ctx.shutdown()
        self._owns_ctx = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
