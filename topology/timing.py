"""Timing asynchronous work the same way on both backends.

A :class:`Clock` brackets work that other streams (or Link pump threads) put on devices: on CUDA
the start and stop are CUDA events on the clock's own stream (the stop waits for every
completion event it is given, so the interval ends when the last piece of work on any device
ends); on CPU virtual devices they are ``perf_counter`` readings around the same calls.
:func:`measure` runs a benchmark step after warm-up and returns its repeated samples, from which
reports take the median.
"""
from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field

#: How long a gated start holds the clock stream (a GPU spin) so that the host can enqueue the
#: whole step before the clock starts: the interval then measures the devices, not Python.
GATE_SECONDS = 2e-3

log = logging.getLogger(__name__)


class Clock:
    """Start/stop timer for work on one or more devices; see the module docstring."""

    _can_gate = True

    def __init__(self, device, timeout=None):
        self.device = device
        self.timeout = timeout
        self.stream = device.new_stream("clock")
        self._start = None
        self._t0 = None

    @property
    def on_gpu(self) -> bool:
        return self.device.backend == "cuda"

    def start(self, gate: bool = False):
        """Start timing; returns an event that work on other streams should wait for.

        ``gate``: hold the clock stream briefly first (CUDA only) so that work enqueued after
        this call, waiting on the returned event, starts together when the clock starts.
        """
        if self.on_gpu:
            import cupy
            from groute.device.cuda import CUDAEvent
            from groute.kernels import KernelCompileError
            from .device_ops import spin
            if gate and self._can_gate:
                try:
                    spin(self.stream, GATE_SECONDS)
                except KernelCompileError as exc:  # time ungated rather than not at all
                    log.warning("cannot gate the clock (spin kernel failed to compile): %s", exc)
                    Clock._can_gate = False
            with self.device.use():
                raw = cupy.cuda.Event()
                raw.record(self.stream.raw)
            self._start = raw
            return CUDAEvent(self.device, raw)
        self._t0 = time.perf_counter()
        return self.stream.record()

    def stop(self, events=()) -> float:
        """Seconds from :meth:`start` until every event in ``events`` (and the clock stream) is done."""
        events = [e for e in events if e is not None]
        if self.on_gpu:
            import cupy
            from groute.device.cuda import CUDAEvent
            for event in events:
                self.stream.wait_event(event)
            with self.device.use():
                raw = cupy.cuda.Event()
                raw.record(self.stream.raw)
            CUDAEvent(self.device, raw).synchronize(self.timeout)
            return cupy.cuda.get_elapsed_time(self._start, raw) / 1e3
        for event in events:
            event.synchronize(self.timeout)
        self.stream.synchronize(self.timeout)
        return time.perf_counter() - self._t0

    def close(self):
        self.device.release_stream(self.stream)


@dataclass
class Samples:
    """Repeated timings of one benchmark step (seconds, after warm-up): ``seconds`` on the
    clock, ``host_seconds`` the host's own time in the step (from calling it until it returned:
    what issuing the step cost the host, the GPU work it queued not waited for)."""

    seconds: list
    host_seconds: list = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)


def measure(clock: Clock, step, *, repeat: int, warmup: int = 1, gate: bool = False,
            prepare=None) -> Samples:
    """Time ``step(start_event) -> completion events`` ``warmup + repeat`` times; keep the last ``repeat``.

    ``prepare(k)`` runs before each run, untimed (e.g. to clear destination buffers).
    """
    samples, hosts = [], []
    for k in range(warmup + repeat):
        if prepare is not None:
            prepare(k)
        start = clock.start(gate=gate)
        t0 = time.perf_counter()
        events = step(start) or ()
        host = time.perf_counter() - t0
        seconds = clock.stop(events)
        if k >= warmup:
            # a CUDA interval can read 0 for work shorter than the event resolution (0.5 us)
            samples.append(max(seconds, 1e-9))
            hosts.append(host)
    return Samples(samples, hosts)
