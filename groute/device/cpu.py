"""CPU backend: NumPy "virtual devices" with real asynchronous streams.

Each stream is an ordered queue served by its own thread, so work submitted to it runs later,
concurrently with the submitting thread: copies between virtual devices really are in flight
while the host moves on, and a race or a missing wait shows up in CI the way it would on a GPU.
A device can be slowed down artificially (``delay`` seconds per submitted task) to test load
balancing between unequal devices.
"""
from __future__ import annotations

import collections
import itertools
import os
import queue
import threading
import time
import weakref

import numpy as np

from ..config import resolve_timeout
from ..errors import DeviceError, WaitTimeout, again, to_keep
from ..waiting import POLL_INTERVAL, stopped
from .base import Device, Event, Stream, Weakly

_EVENT_IDS = itertools.count()


def _raise_stream_failure(stream, error):
    """A stream's failure ``error``, naming the device it happened on (``stream``: None once
    gone): a DeviceError that reached the stream from another device's (a wait for its event)
    is that device's, as it is."""
    if isinstance(error, DeviceError):
        raise again(error)
    where = stream.device_name if stream is not None else "a CPU device (gone)"
    raise DeviceError(where, f"stream failed: {error!r}") from error


class CPUEvent(Event):
    """Fires when its stream's thread reaches it. ``_gate`` is a lock held from creation until
    the event fires: waiters block on it and pass it on. (A lock is an order of magnitude cheaper
    to create and to signal than a ``threading.Event``, and a Link records one per packet.)"""

    stream = Weakly("event {0.id}'s stream")

    def __init__(self, stream: "CPUStream"):
        self.stream = stream
        self._fired = False
        self._error: BaseException | None = None
        self._gate = threading.Lock()
        self._gate.acquire()
        self.id = next(_EVENT_IDS)

    def _fire(self, error=None):
        self._error = error
        self._fired = True
        self._gate.release()

    def query(self) -> bool:
        if self._fired and self._error is not None:
            self._raise()
        return self._fired

    def _raise(self):
        _raise_stream_failure(self._stream_ref(), self._error)

    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        if not self._fired:
            stream = self.stream
            device = stream.device
            limit = resolve_timeout(timeout if timeout is not None else device.timeout)
            deadline = time.monotonic() + limit
            stop = device.stop_event
            while not self._gate.acquire(timeout=min(POLL_INTERVAL, max(deadline - time.monotonic(), 0))):
                if stop.is_set():
                    raise stopped(stop, f"stopped while waiting for event {self.id} on {stream}")
                if time.monotonic() >= deadline:
                    raise WaitTimeout(f"timed out after {limit:g} s waiting for event "
                                      f"{self.id} on {stream}")
            self._gate.release()  # the next waiter passes too
        if self._error is not None:
            self._raise()


class CPUStream(Stream):
    """An ordered work queue with its own thread."""

    def __init__(self, device: "CPUDevice", name: str):
        self.device = device
        self.name = name
        self.device_name = device.name    # for messages, also once the device is gone
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._closed = False
        # one token per operation put and not yet run, for :meth:`idle`: put before the
        # operation, taken after it has run (a deque's ends are thread-safe without a lock)
        self._unrun = collections.deque()
        self._thread = threading.Thread(target=self._serve, name=f"groute-{device.name}-{name}",
                                        daemon=True)
        self._thread.start()

    def __repr__(self):
        return f"<CPUStream {self.device_name}/{self.name}>"

    def _serve(self):
        """The thread's loop. It holds the device only while it runs an operation: the
        device's streams end when the device goes (:class:`CPUDevice`)."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, kwargs, marker = item
            # an operation's arguments (arrays, the objects its function closes over) must
            # not live on here until the stream's next operation
            item = None
            if marker is not None:
                marker._fire(self._error)
            elif self._error is None:   # a failed stream skips later work; its events report it
                device = self._device_ref()     # None: gone, with nobody left to tell
                try:
                    if device is not None and device.delay:     # cut short by a stop: the
                        device.stop_event.wait(device.delay)    # rest drains as at full speed
                    fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - reported to the context, raised there
                    # the stream keeps a copy without the traceback, whose frames hold this one
                    # and so the stream (the context keeps the error itself)
                    self._error = to_keep(exc)
                    if device is not None:
                        device.report_error(exc, where=f"stream {self.name}")
                device = None
            fn = args = kwargs = marker = None
            self._unrun.popleft()

    def _put(self, item):
        if self._closed:
            raise RuntimeError(f"{self!r} is closed (its device was shut down)")
        self._unrun.append(None)
        self._queue.put(item)

    def idle(self) -> bool:
        """Whether every operation put on the stream has run (see :meth:`Stream.idle`); a
        failed stream raises as a wait for its events would."""
        if self._error is not None:
            _raise_stream_failure(self, self._error)
        return not self._unrun

    def submit(self, fn, *args, **kwargs) -> None:
        self._put((fn, args, kwargs, None))

    def record(self, event: CPUEvent | None = None) -> CPUEvent:
        """A new event always: a CPU event fires once (``event`` is not recorded again)."""
        event = CPUEvent(self)
        self._put((None, (), {}, event))
        return event

    def wait_event(self, event: Event) -> None:
        if event.query():
            return
        self.submit(event.synchronize)

    def copy(self, dst, src) -> None:
        _check_copy(dst, src)
        self.submit(_copy, dst, src)

    def clear_failure(self, timeout) -> None:
        """Run work again after a failure: once the work queued so far has drained (within
        ``timeout``), forget the error. Later events report no failure."""
        if self._error is None:
            return
        marker = self.record()
        if not marker._gate.acquire(timeout=timeout):
            raise WaitTimeout(f"{self!r} is still busy after {timeout:g} s; its failure cannot be "
                              f"cleared while its work runs")
        marker._gate.release()
        self._error = None

    def close(self):
        """No more work; the thread ends once the work queued so far has run (not waited for:
        a task that never returns must not hold up shutdown; the thread is a daemon)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)


def _check_copy(dst, src):
    if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray):
        raise TypeError(f"CPU backend copies NumPy arrays, got {type(dst).__name__} <- {type(src).__name__}")
    if dst.size != src.size or dst.dtype != src.dtype:
        raise ValueError(f"copy needs equal size and dtype: dst {dst.size} x {dst.dtype}, "
                         f"src {src.size} x {src.dtype}")


def _copy(dst, src):
    np.copyto(dst, src.reshape(dst.shape))


def _close_streams(streams) -> None:
    """Close every stream of a CPU device that is gone (their threads end)."""
    for stream in list(streams):
        stream.close()


class CPUDevice(Device):
    """A NumPy virtual device with a compute stream and a copy stream."""

    backend = "cpu"
    xp = np

    def __init__(self, index: int, *, delay: float = 0.0, stop_event: threading.Event | None = None,
                 on_error=None):
        self.index = index
        self.delay = float(delay)
        self.stop_event = stop_event or threading.Event()
        self.on_error = on_error
        self._streams: list[CPUStream] = []
        self._lock = threading.Lock()
        self._closed = False
        # the streams' threads wait for work: they end when the device is closed, or gone
        # (its context dropped without close(), and nothing else using it)
        gone = weakref.finalize(self, _close_streams, self._streams)
        gone.atexit = False
        self.compute_stream = self.new_stream("compute")
        self.copy_stream = self.new_stream("copy")
        self._links_stream: CPUStream | None = None

    def report_error(self, exc, where=""):
        if self.on_error is not None:
            self.on_error(self, exc, where)

    def new_stream(self, name: str = "") -> CPUStream:
        with self._lock:
            self._check_open()
            stream = CPUStream(self, name or f"s{len(self._streams)}")
            self._streams.append(stream)
        return stream

    def release_stream(self, stream: CPUStream) -> None:
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
        stream.close()  # queued work still runs first; the thread then exits

    def link_stream(self, name: str = "", *, share=None) -> CPUStream:
        """One stream for every Link this device copies for, made on first use (so ``share``
        changes nothing): a stream is a thread here, and a stream per link would make threads
        grow with the square of the number of devices. Its thread plays the device's copy
        engine; packets of one link stay in order, and links only share its time."""
        with self._lock:
            self._check_open()
            if self._links_stream is None:
                self._links_stream = CPUStream(self, "links")
                self._streams.append(self._links_stream)
            return self._links_stream

    def release_link_stream(self, stream: CPUStream) -> None:
        """The shared links stream stays until the device closes."""

    def drain(self, timeout: float) -> bool:
        """Wait for the work queued on every stream of this device to end (see
        :meth:`Device.drain`), failed or not: a stream that has not failed may still hold a
        wait for another stream's event from the stopped run, which would fail it after its
        failure was cleared. False when that has not happened within ``timeout``."""
        deadline = time.monotonic() + max(float(timeout), 0.0)
        with self._lock:
            markers = [stream.record() for stream in self._streams if not stream._closed]
        for marker in markers:
            if not marker._gate.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
                return False
            marker._gate.release()
        return True

    def clear_failure(self, timeout=None) -> None:
        limit = resolve_timeout(timeout if timeout is not None else self.timeout)
        deadline = time.monotonic() + limit
        for stream in list(self._streams):
            stream.clear_failure(max(deadline - time.monotonic(), 0.0))

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def asarray(self, host_array):
        return np.array(host_array, copy=True)

    def to_host(self, array):
        return np.array(array, copy=True)

    def memory_info(self):
        try:
            pages = os.sysconf("SC_AVPHYS_PAGES")
            total = os.sysconf("SC_PHYS_PAGES")
            size = os.sysconf("SC_PAGE_SIZE")
            return pages * size, total * size
        except (ValueError, OSError):
            return 0, 0

    def properties(self) -> dict:
        free, total = self.memory_info()
        return {"name": "CPU virtual device (NumPy)", "memory_total": total, "memory_free": free,
                "cores": os.cpu_count(), "delay_s": self.delay}

    def can_access_peer(self, other) -> bool:
        return isinstance(other, CPUDevice)

    def close(self):
        with self._lock:
            self._closed = True
            streams = list(self._streams)
        for stream in streams:
            stream.close()

    def _check_open(self) -> None:
        """Under the lock: a closed device makes no stream (its thread would never end)."""
        if self._closed:
            raise RuntimeError(f"{self.name} is closed (its context was shut down): it makes no "
                               f"new streams or links; create a new Context")
