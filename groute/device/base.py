"""The device interface both backends implement.

The runtime above this layer (Context, Link, Router, worklists) uses only these methods, so the
same dataflow code runs on CUDA GPUs and on CPU virtual devices. Work is put on a stream with
:meth:`Stream.submit`: on CUDA the function runs at once on the calling thread with the stream
current and should only *enqueue* GPU work; on the CPU backend it runs later on the stream's own
thread, in order. Either way the caller must not assume the work is done until an event says so.
"""
from __future__ import annotations

import abc
import contextlib
import threading
import time
import weakref


class Weakly:
    """An attribute that refers to its value weakly, read and set as the value itself; reading
    it once the value has gone raises a RuntimeError, ``what`` (formatted with the holder)
    naming it. Streams and events hold their devices (and streams) this way: a device keeps
    its streams, and they keep their links' events for reuse, so strong references back would
    make cycles that keep a dropped context's devices until a garbage collection."""

    def __init__(self, what: str):
        self.what = what

    def __set_name__(self, owner, name):
        self.slot = f"_{name}_ref"

    def __get__(self, holder, owner=None):
        if holder is None:
            return self
        value = getattr(holder, self.slot)()
        if value is None:
            raise RuntimeError(f"{self.what.format(holder)} is gone (its Context was "
                               f"dropped)")
        return value

    def __set__(self, holder, value) -> None:
        setattr(holder, self.slot, weakref.ref(value))


class Event(abc.ABC):
    """Completion marker recorded on a stream."""

    @abc.abstractmethod
    def query(self) -> bool:
        """True once every piece of work submitted before the record has finished."""

    @abc.abstractmethod
    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        """Block until done; raises WaitTimeout, ContextStopped, or DeviceError if the stream failed.

        ``spin``: seconds to poll without sleeping before the normal back-off wait, for callers
        that wait on short GPU work often (a sleep of up to 2 ms would leave the GPU idle).
        Backends whose events signal the waiter directly ignore it."""

    @classmethod
    def wait_all(cls, events, timeout=None, *, spin: float = 0.0) -> None:
        """Block until every one of ``events`` (this backend's, of any devices) is done; raises
        as :meth:`synchronize` for the first that fails. This version waits for them one after
        the other, which is right where a failure on one device reaches every waiter (the CPU
        backend's stopped context); a backend where one device's failure can leave another's
        event pending forever polls them together (CUDA)."""
        for event in events:
            event.synchronize(timeout, spin=spin)


class Stream(abc.ABC):
    """An ordered queue of work on one device.

    A stream refers to its device weakly (:attr:`device`): the device holds its streams, and
    the two referring to each other would keep both (a CUDA stream, a CPU stream's queue)
    after their context is gone, until some garbage collection. A CPU stream's thread holds
    its device while it runs an operation."""

    #: the device whose work this stream queues
    device = Weakly("stream {0.name!r}'s device")

    @abc.abstractmethod
    def submit(self, fn, *args, **kwargs) -> None:
        """Run ``fn(*args, **kwargs)`` in stream order."""

    @abc.abstractmethod
    def record(self, event: Event | None = None) -> Event:
        """An event that completes when the work submitted so far has completed.

        ``event``: an event of this device recorded before, to record again instead of making a
        new one (a Link records one per copy, and making a CUDA event costs more than
        recording one). A backend whose events fire once (CPU) makes a new one anyway; either
        way use the returned event. Recording again moves the event: a waiter that queries it
        afterwards waits for the later work (never for less)."""

    @abc.abstractmethod
    def wait_event(self, event: Event) -> None:
        """Work submitted after this call starts only once ``event`` has completed."""

    @abc.abstractmethod
    def copy(self, dst, src) -> None:
        """Asynchronous copy of array ``src`` into array ``dst`` (same element count), in stream order.

        Either side may live on this device, another device of the same backend, or the host.
        """

    def copy_plan(self, dst, src) -> "CopyPlan":
        """A :class:`CopyPlan` copying rows (along axis 0) of ``src`` into rows of ``dst`` on
        this stream: what a Link issues its packets with, the arrays' addresses and the kind of
        copy found once rather than per packet."""
        return CopyPlan(self, dst, src)

    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        """Wait for the work submitted so far (``spin``: as :meth:`Event.synchronize`)."""
        self.record().synchronize(timeout, spin=spin)

    def idle(self) -> bool:
        """Whether the stream is known to have finished all its work, asked without waiting
        or recording anything; a failure of the device raises as a wait would. A backend
        that cannot tell cheaply answers False, and the caller waits on events as usual."""
        return False

    def recorded(self, work):
        """Submit the work that ``work()`` submits to this stream, and return a callable
        that submits the same work again.

        ``work`` must submit a fixed sequence to this stream alone: the same kernels on the
        same arrays with the same arguments every time, nothing read back and no decision
        taken on the host in between (what it computes on the host when called is fixed
        then). Its caller keeps the arrays it reads as long as the returned callable. A
        backend that can replay such a sequence in one step does so (CUDA: a graph captured
        from it at its first replay, one launch instead of one per kernel; a work never
        replayed is never captured); this one calls ``work`` again.

        Parameters
        ----------
        work : callable
            Called with no arguments; submits its work to this stream.

        Returns
        -------
        callable
            Called with no arguments, submits the same work again, in stream order.
        """
        work()
        return work


class CopyPlan:
    """``plan(dst_row, src_row, rows)`` copies ``src[src_row:src_row + rows]`` into
    ``dst[dst_row:dst_row + rows]`` asynchronously on the plan's stream. The arrays must be
    C-contiguous with equal dtypes and row shapes. This generic plan slices and calls
    :meth:`Stream.copy`; a backend overrides it where slicing costs more than the copy (CUDA)."""

    def __init__(self, stream: Stream, dst, src):
        if dst.dtype != src.dtype or tuple(dst.shape[1:]) != tuple(src.shape[1:]):
            raise ValueError(f"a copy plan needs equal dtypes and row shapes: dst {dst.dtype} "
                             f"{tuple(dst.shape[1:])}, src {src.dtype} {tuple(src.shape[1:])}")
        self.stream, self.dst, self.src = stream, dst, src

    def __call__(self, dst_row: int, src_row: int, rows: int) -> None:
        self.stream.copy(self.dst[dst_row:dst_row + rows], self.src[src_row:src_row + rows])


#: guards every device's shared link streams (taken when a link is made or ends, not per packet)
_SHARED_LOCK = threading.Lock()


class Device(abc.ABC):
    """One compute device: a GPU, or a CPU virtual device."""

    backend: str   # "cuda" or "cpu"
    index: int     # position within its backend
    xp = None      # the array module: cupy or numpy
    timeout = None  # default for waits on this device's events (None: groute.config default)

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.index}"

    def __repr__(self) -> str:
        return f"<Device {self.name}>"

    # streams -------------------------------------------------------------------------------
    compute_stream: Stream
    copy_stream: Stream

    @abc.abstractmethod
    def new_stream(self, name: str = "") -> Stream:
        """A fresh stream on this device (closed with the device)."""

    def release_stream(self, stream: Stream) -> None:
        """Give back a stream from :meth:`new_stream` once its queued work is done."""

    #: the streams of :meth:`link_stream` that links share: ``{share: [stream, users]}``
    _shared_link_streams: dict | None = None

    def link_stream(self, name: str = "", *, share=None) -> Stream:
        """The stream a :class:`~groute.runtime.link.Link` issues its copies on. Here a fresh one per
        link, so that transfers on different links overlap (CUDA); a backend whose streams are
        threads shares one (CPU). ``share``: a key (any hashable); the links that pass the same
        key issue on one stream, given back when the last of them gives it back (a router
        input's links, so that a broadcast issues its copies one after another, with one event
        for them all)."""
        if share is None:
            return self.new_stream(name)
        with _SHARED_LOCK:
            if self._shared_link_streams is None:
                self._shared_link_streams = {}
            entry = self._shared_link_streams.get(share)
            if entry is None:
                entry = self._shared_link_streams[share] = [self.new_stream(name), 0]
            entry[1] += 1
            return entry[0]

    def release_link_stream(self, stream: Stream) -> None:
        """Give back a stream from :meth:`link_stream` once its link has drained (a shared one
        goes back with its last link)."""
        with _SHARED_LOCK:
            shared = self._shared_link_streams or {}
            for key, entry in shared.items():
                if entry[0] is stream:
                    entry[1] -= 1
                    if entry[1] > 0:
                        return
                    del shared[key]
                    break
        self.release_stream(stream)

    def clear_failure(self, timeout=None) -> None:
        """Let this device run work again after a failure stopped its context (called by
        :meth:`groute.Context.reset`). A backend whose streams remember a failure (CPU) forgets
        it once the queued work has drained; on CUDA a failed call raised in its caller and
        there is nothing to clear."""

    _siblings: tuple = ()

    @property
    def siblings(self) -> tuple:
        """The devices of this device's context, itself included (set by the context): a wait
        on this device that another one's failure can block forever watches them (CUDA).
        Held weakly: each device is the others' sibling, and a cycle would keep them all."""
        return tuple(d for ref in self._siblings if (d := ref()) is not None)

    @siblings.setter
    def siblings(self, devices) -> None:
        self._siblings = tuple(weakref.ref(d) for d in devices)

    #: why this device can run nothing more in this process (a CUDA context hit by a sticky
    #: error: a kernel trapped or faulted), or None while it can
    broken = None

    def note_failure(self, exc) -> None:
        """Look at a failure seen on this device: one that leaves it unable to run anything
        more sets :attr:`broken` (CUDA); nothing else does."""

    def drain(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds and whether or not the context is stopped, for
        the work queued on this device's streams to end: after a failed run, what the other
        devices left running (kernels giving up at a meeting) must not run into the next one.
        True once drained (nothing to wait for here; CUDA waits for its streams)."""
        return True

    def use(self):
        """Context manager making this the current device for array allocation (CUDA only)."""
        return contextlib.nullcontext()

    def on_compute(self):
        """Context manager for array work (allocation, copies, arithmetic, read-backs through
        the array module) on arrays that this device's kernels write or read: this device
        current and, on CUDA, its compute stream the array module's current stream, so the
        work is ordered with the kernels queued there (and freed memory goes back to the
        stream that used it). A no-op on the CPU backend, whose arrays are NumPy's."""
        return self.use()

    #: ``(what, since)``: the user's code the device's host thread runs now (``what`` names
    #: it), since ``time.monotonic()`` ``since``; None while it runs groute's own
    user_code = None
    #: the thread that runs :attr:`user_code` (None while there is none)
    user_thread = None

    @contextlib.contextmanager
    def running(self, what: str):
        """Mark the ``with`` block as the device's host thread running the user's code
        (``what``, e.g. a functor's NumPy callable), whose time groute does not bound: a wait
        elsewhere that times out while it runs names it as the cause
        (:meth:`groute.Context.fail`), and an engine refuses calls from it
        (:meth:`in_user_code`)."""
        outer = self.user_code, self.user_thread
        self.user_code, self.user_thread = (what, time.monotonic()), threading.get_ident()
        try:
            yield
        finally:
            self.user_code, self.user_thread = outer

    def in_user_code(self) -> str | None:
        """What user code of this device the calling thread is running (``what`` of
        :meth:`running`), or None: an engine call from inside a functor would run the device's
        work from the middle of it (one device runs it on the caller's thread) or wait for the
        thread that runs it (several)."""
        code = self.user_code
        return code[0] if code is not None and self.user_thread == threading.get_ident() \
            else None

    # memory --------------------------------------------------------------------------------
    @abc.abstractmethod
    def empty(self, shape, dtype): ...

    def receive_buffer(self, shape, dtype):
        """An uninitialised array of this device that other streams or devices write into (a
        Link's receive slots). Unlike :meth:`empty`, never memory that work still queued on
        this device's streams uses: CUDA's pool hands a block freed on a stream straight to that
        stream's next allocation, which is ordered after the stream's queued work but another
        stream's writes are not, so there it comes from the pool of a stream that runs nothing.
        Elsewhere it is :meth:`empty`."""
        return self.empty(shape, dtype)

    def zeros(self, shape, dtype):
        with self.on_compute():
            return self.xp.zeros(shape, dtype)

    def full(self, shape, value, dtype):
        with self.on_compute():
            return self.xp.full(shape, value, dtype)

    @abc.abstractmethod
    def asarray(self, host_array):
        """A copy of a host (NumPy) array in this device's memory (synchronous)."""

    @abc.abstractmethod
    def to_host(self, array):
        """A NumPy copy of an array of this device (synchronous)."""

    def host_buffer(self, shape, dtype):
        """Host memory suited to fast transfers with this device (pinned on CUDA)."""
        import numpy as np
        return np.empty(shape, dtype)

    def landing_memory(self, nbytes: int):
        """``nbytes`` of host memory, kept to receive answers again and again
        (:class:`~groute.runtime.answer_landing.AnswerLanding`): a buffer object, not an
        ndarray (CPU: anonymous memory; CUDA: pinned, portable to every GPU, outside CuPy's
        pool so that letting it go frees it)."""
        import mmap
        # private: a forked process writing its copy of an answer must not change this one's
        return mmap.mmap(-1, int(nbytes), flags=mmap.MAP_PRIVATE)

    def mapped_host_buffer(self, shape, dtype):
        """Zeroed host memory this device's kernels read and write in place, at
        :meth:`address` (CUDA: pinned, portable and mapped, so every GPU reaches it, from a pool
        that is never given back while kernels may run, :mod:`groute.device.mapped_memory`;
        CPU: a NumPy array)."""
        import numpy as np
        return np.zeros(shape, dtype)

    def address(self, array) -> int:
        """The address a kernel of this device uses for ``array`` (device memory, or memory
        from :meth:`mapped_host_buffer`)."""
        import numpy as np
        return int(array.ctypes.data) if isinstance(array, np.ndarray) else int(array.data.ptr)

    def release_cached(self, above: int = 0) -> None:
        """Give the memory this device's array library keeps for reuse back to the system once
        it passes ``above`` bytes (CUDA: the free blocks of CuPy's pool for this device's GPU,
        which the logical devices sharing it share; nothing on the CPU backend), where a
        set-up's temporaries of changing sizes would otherwise leave the pool holding blocks it
        cannot reuse. Memory in use is untouched; giving blocks back waits for the GPU, hence
        the threshold for a caller in a loop."""

    @abc.abstractmethod
    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes."""

    @abc.abstractmethod
    def properties(self) -> dict:
        """Model name, memory, multiprocessors and other facts for ``groute info``."""

    def can_access_peer(self, other: "Device") -> bool:
        return False

    def record_all(self) -> list:
        """An event on each of the device's streams, for a caller that waits for several
        devices at once (:meth:`Event.wait_all`)."""
        return [self.compute_stream.record(), self.copy_stream.record()]

    def idle(self) -> bool:
        """Whether both streams are known to have finished their work (:meth:`Stream.idle`),
        asked without waiting: a caller that would wait for the device can skip the wait."""
        return self.compute_stream.idle() and self.copy_stream.idle()

    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        """Wait for both streams (``spin``: as :meth:`Event.synchronize`)."""
        self.compute_stream.synchronize(timeout, spin=spin)
        self.copy_stream.synchronize(timeout, spin=spin)

    def close(self) -> None:
        """Stop the device's stream threads (CPU) / release streams. Idempotent."""
