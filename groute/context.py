"""Context: owns the devices, one host worker thread per device, and shutdown.

A computation is a function run on every device's worker thread (:meth:`Context.run`). If any of
them raises, or any stream fails, the context is *stopped*: every bounded wait in the runtime
notices within one poll interval and gives up, the workers return, and the caller gets a
:class:`~groute.errors.DeviceError` naming the device that failed first. Nothing waits forever.
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time

import numpy as np

from .config import logical_devices_requested, resolve_timeout
from .device import CPUDevice, CUDADevice, cuda_device_count
from .device import cuda as cuda_backend
from .device.logical import place
from .errors import ContextStopped, DeviceError, GrouteError

log = logging.getLogger(__name__)

DEFAULT_CPU_DEVICES = 4
BACKENDS = ("auto", "cuda", "cpu")


def resolve_backend(backend: str) -> str:
    """'auto' becomes 'cuda' when CuPy finds a GPU, else 'cpu'."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend == "auto":
        return "cuda" if cuda_device_count() > 0 else "cpu"
    if backend == "cuda" and cuda_device_count() == 0:
        raise RuntimeError("backend='cuda' but CuPy finds no CUDA GPU (is cupy-cuda12x/13x installed "
                           "and a driver present?); use backend='cpu' for NumPy virtual devices")
    return backend


class Context:
    """Devices plus their host threads.

    ``devices``: ``None`` (every GPU, or 4 CPU virtual devices), a count ``K`` (the first K), or a
    list of device indices. ``cpu_delays``: per-device artificial slowdown (seconds per task) for
    CPU virtual devices, to model unequal devices. ``timeout`` bounds every single wait.
    ``logical`` (default: ``GROUTE_LOGICAL_DEVICES`` in the environment): on CUDA, run more
    devices than there are GPUs as logical devices sharing them (:mod:`groute.device.logical`;
    for testing multi-device code on fewer GPUs, not for timing).
    """

    def __init__(self, devices=None, backend: str = "auto", *, timeout=None, cpu_delays=None,
                 logical=None):
        self.devices = []
        self.backend = resolve_backend(backend)
        self.timeout = resolve_timeout(timeout)
        self.stop_event = threading.Event()
        self._error: BaseException | None = None
        self._error_device: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        logical = logical_devices_requested(logical)
        indices = self._device_indices(devices, logical)
        placements = (place(indices, cuda_device_count(), logical=logical)
                      if self.backend == "cuda" else None)
        try:
            for n, i in enumerate(indices):
                if self.backend == "cuda":
                    dev = CUDADevice(i, placement=placements[n], stop_event=self.stop_event,
                                     on_error=self._stream_failed)
                else:
                    delay = cpu_delays[n] if cpu_delays else 0.0
                    dev = CPUDevice(i, delay=delay, stop_event=self.stop_event,
                                    on_error=self._stream_failed)
                dev.timeout = self.timeout
                self.devices.append(dev)
            if self.backend == "cuda":
                self._enable_peer_access()
        except BaseException:
            for dev in self.devices:
                dev.close()
            raise
        self._workers = [cf.ThreadPoolExecutor(1, thread_name_prefix=f"groute-{d.name}-host")
                         for d in self.devices]
        log.info("context: %s", ", ".join(d.name for d in self.devices))
        if self.logical:
            log.warning("logical devices (for testing, not timing): %s", ", ".join(
                f"{d.name} on GPU {d.gpu} ({d.multiprocessors} SMs)" for d in self.devices))

    # construction -------------------------------------------------------------------------------
    def _device_indices(self, devices, logical: bool):
        """The device indices asked for (on CUDA, past the last GPU only when ``logical``)."""
        available = cuda_device_count() if self.backend == "cuda" else None
        if devices is None:
            count = available if self.backend == "cuda" else DEFAULT_CPU_DEVICES
            indices = list(range(count))
        elif isinstance(devices, (int, np.integer)):
            if devices < 1:
                raise ValueError(f"devices must be >= 1, got {devices}")
            if available is not None and devices > available and not logical:
                raise ValueError(f"asked for {devices} CUDA devices but this machine has {available}; "
                                 f"ask for {available} or fewer, the CPU backend, or logical devices "
                                 f"for testing (logical=True or GROUTE_LOGICAL_DEVICES=1)")
            indices = list(range(int(devices)))
        else:
            indices = [int(i) for i in devices]
            if not indices:
                raise ValueError("devices list is empty")
            if len(set(indices)) != len(indices):
                raise ValueError(f"devices list has repeats: {indices}")
            if any(i < 0 for i in indices):
                raise ValueError(f"device index {min(indices)} does not exist (indices are >= 0)")
        return indices

    def _enable_peer_access(self):
        for a in self.devices:
            for b in self.devices:
                if a is not b and a.enable_peer_access(b) and a.gpu != b.gpu:
                    cuda_backend.register_peer(a.gpu, b.gpu)

    # facts ----------------------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @property
    def logical(self) -> bool:
        """True when some device is a logical device (:mod:`groute.device.logical`): times
        taken on this context say nothing about how the work scales."""
        return any(getattr(d, "logical", False) for d in self.devices)

    def __len__(self):
        return len(self.devices)

    def __getitem__(self, i):
        return self.devices[i]

    def __iter__(self):
        return iter(self.devices)

    def peer_matrix(self) -> np.ndarray:
        """``m[i, j]`` is True when device i can reach device j's memory directly."""
        n = len(self.devices)
        m = np.zeros((n, n), dtype=bool)
        for i, a in enumerate(self.devices):
            for j, b in enumerate(self.devices):
                m[i, j] = i != j and a.can_access_peer(b)
        return m

    # failure handling -----------------------------------------------------------------------
    def _stream_failed(self, device, exc, where=""):
        self.fail(device.name, exc)

    def fail(self, device_name: str, exc: BaseException) -> None:
        """Record the first failure and stop everything."""
        with self._lock:
            if self._error is None and not isinstance(exc, ContextStopped):
                self._error, self._error_device = exc, device_name
                log.info("%s failed: %r; stopping the context", device_name, exc)
        self.stop_event.set()

    @property
    def stopped(self) -> bool:
        return self.stop_event.is_set()

    def check(self) -> None:
        """Raise if the context was stopped by a failure elsewhere."""
        if self.stop_event.is_set():
            self.raise_failure()
            raise ContextStopped("the context was shut down")

    def raise_failure(self):
        if self._error is not None:
            if isinstance(self._error, DeviceError):
                raise self._error
            raise DeviceError(self._error_device, f"{type(self._error).__name__}: {self._error}") \
                from self._error

    def reset(self) -> None:
        """Clear a failure so the context can run again (devices and threads are kept)."""
        with self._lock:
            self._error = self._error_device = None
        self.stop_event.clear()

    # running work -----------------------------------------------------------------------------
    def submit(self, device_index: int, fn, *args, **kwargs) -> cf.Future:
        """Run ``fn(device, *args, **kwargs)`` on that device's host worker thread."""
        if self._closed:
            raise RuntimeError("the context is shut down; create a new Context")
        device = self.devices[device_index]

        def call():
            try:
                with device.use():
                    return fn(device, *args, **kwargs)
            except BaseException as exc:
                self.fail(device.name, exc)
                raise
        return self._workers[device_index].submit(call)

    def run(self, fn, *args, timeout=None, **kwargs) -> list:
        """Run ``fn(device, *args, **kwargs)`` on every device concurrently; return their results.

        Raises :class:`DeviceError` naming the first device that failed. ``timeout`` (default: no
        bound beyond the per-wait timeouts inside ``fn``) bounds the whole call.
        """
        self.check()
        futures = [self.submit(i, fn, *args, **kwargs) for i in range(len(self.devices))]
        return self.gather(futures, timeout=timeout)

    def gather(self, futures, timeout=None) -> list:
        """Wait for futures from :meth:`submit`; on any failure stop the rest and raise."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=0.05, return_when=cf.FIRST_EXCEPTION)
            if any(f.exception() is not None for f in done) or self.stopped:
                self.stop_event.set()
                # the others notice the stop within a poll interval; give them the wait timeout
                cf.wait(pending, timeout=self.timeout)
                self.raise_failure()
                for f in done:
                    if f.exception() is not None:
                        raise f.exception()
                raise ContextStopped("the context was stopped")
            if deadline is not None and time.monotonic() > deadline:
                self.fail("host", GrouteError(f"run did not finish within {timeout:g} s"))
                cf.wait(pending, timeout=self.timeout)
                self.raise_failure()
        return [f.result() for f in futures]

    def synchronize(self, timeout=None):
        for dev in self.devices:
            dev.synchronize(timeout or self.timeout)

    # shutdown -----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop worker threads and device streams. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.stop_event.set()
        for w in self._workers:
            w.shutdown(wait=True, cancel_futures=True)
        for dev in self.devices:
            dev.close()

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self):
        return f"<Context {self.backend} x{len(self.devices)}: {', '.join(d.name for d in self.devices)}>"


def ensure_context(ctx=None, *, devices=None, backend="auto", timeout=None):
    """Return ``(ctx, owned)``: the given context, or a new one the caller must shut down
    (logical devices as ``GROUTE_LOGICAL_DEVICES`` says)."""
    if ctx is not None:
        return ctx, False
    return Context(devices=devices, backend=backend, timeout=timeout), True
