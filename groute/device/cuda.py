"""CUDA backend on CuPy: streams, events, peer and host-staged copies.

Work submitted to a :class:`CUDAStream` is enqueued at once on the calling thread with the
stream current; completion is observed through events, polled with a bounded wait so that no
host thread blocks forever on a GPU that will never answer.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from contextlib import contextmanager

import numpy as np

from ..errors import DeviceError, GrouteError
from ..waiting import wait_for
from .base import CopyPlan, Device, Event, Stream, Weakly
from .logical import Placement, sm_share
from .mapped_memory import mapped_host_array

# cudaMemcpyKind
_H2D, _D2H, _D2D, _DEFAULT = 1, 2, 3, 4

#: CUDA errors after which a GPU's CUDA context can run nothing more in this process ("sticky"
#: errors: the runtime and the driver give them the same numbers), by what caused them
STICKY_ERRORS = {
    700: "an illegal memory access", 702: "a kernel that ran past the watchdog",
    710: "a device-side assert", 714: "a hardware stack error", 715: "an illegal instruction",
    716: "a misaligned address", 717: "an invalid address space",
    718: "an invalid program counter", 719: "a kernel that failed (a trap: __trap())",
}


def _cuda_error(exc, statuses):
    """The CUDA error among ``exc`` and its causes whose status is in ``statuses``, or None.
    CuPy's errors, told by name and status: no CuPy needed."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in ("CUDARuntimeError", "CUDADriverError") \
                and getattr(exc, "status", None) in statuses:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def sticky_error(exc) -> str | None:
    """What the sticky CUDA error (:data:`STICKY_ERRORS`) among ``exc`` and its causes says,
    or None when there is none."""
    found = _cuda_error(exc, STICKY_ERRORS)
    return None if found is None else f"{STICKY_ERRORS[found.status]}: {found}"


log = logging.getLogger(__name__)


#: CUDA's errors of a stream capture (cudaErrorStreamCaptureUnsupported .. WrongThread): the
#: captured work did something a capture cannot hold; the work itself can still run
CAPTURE_ERRORS = range(900, 909)


def capture_error(exc) -> str | None:
    """The CUDA capture error (:data:`CAPTURE_ERRORS`) among ``exc`` and its causes, as text,
    or None when there is none."""
    found = _cuda_error(exc, CAPTURE_ERRORS)
    return None if found is None else f"{type(found).__name__} {found.status}: {found}"


def _cupy():
    import cupy
    return cupy


#: cudaErrorNotReady: what CUDA's query of an event or a stream returns while its work runs
NOT_READY = 600


def finished(query, ptr) -> bool:
    """Whether the CUDA event or stream at ``ptr`` has finished its work, by ``query`` (CuPy's
    ``runtime.eventQuery`` or ``runtime.streamQuery``, which return CUDA's status instead of
    raising it): True for cudaSuccess, False while the work runs, and any other status raised
    as CuPy's ``CUDARuntimeError``. CuPy's ``Event.done`` is ``status == 0``, so a GPU whose
    kernel trapped would read as forever busy; this tells the fault instead."""
    status = query(ptr)
    if status == 0:
        return True
    if status == NOT_READY:
        return False
    raise _cupy().cuda.runtime.CUDARuntimeError(status)


def cuda_device_count() -> int:
    """Number of CUDA devices CuPy can use (0 when CuPy or a driver is missing)."""
    try:
        cupy = _cupy()
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return 0


class CUDAEvent(Event):
    device = Weakly("a CUDA event's device")

    def __init__(self, device: "CUDADevice", raw):
        self.device = device
        self.raw = raw

    def query(self) -> bool:
        """Whether the event's work has finished; a fault on its GPU (:func:`finished`) raises
        a DeviceError naming the device."""
        runtime = _cupy().cuda.runtime
        try:
            return finished(runtime.eventQuery, self.raw.ptr)
        except runtime.CUDARuntimeError as exc:
            raise self._failure(exc) from exc

    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        try:
            if self.query():    # the usual read-back: done at once, no wait to set up
                return
            device = self.device
            watch = _SiblingWatch(device)
            wait_for(lambda: self.query() or watch(), what=f"a CUDA event on {device.name}",
                     timeout=timeout if timeout is not None else device.timeout,
                     stop=device.stop_event, spin=spin)
        except _cupy().cuda.runtime.CUDARuntimeError as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc) -> DeviceError:
        device = self.device
        device.note_failure(exc)
        return DeviceError(device.name, f"{exc}{device.broken_note()}")

    @classmethod
    def wait_all(cls, events, timeout=None, *, spin: float = 0.0) -> None:
        """Poll every event in one loop: a kernel fault on one GPU can leave another GPU's
        work waiting forever (on an event of the faulty GPU's stream, or at a meeting), so
        waiting for the devices in turn would time out on a healthy one instead of raising the
        faulty one's error at once."""
        pending = list(events)
        if not pending:
            return

        def all_done() -> bool:         # a faulty GPU's event raises its DeviceError
            pending[:] = [event for event in pending if not event.query()]
            return not pending

        if all_done():          # no wait to set up
            return
        first = pending[0].device
        names = ", ".join(sorted({event.device.name for event in pending}))
        watch = _SiblingWatch(first, itself=True)
        wait_for(lambda: all_done() or watch(), what=f"CUDA events on {names}",
                 timeout=timeout if timeout is not None else first.timeout, stop=first.stop_event,
                 spin=spin)


class _SiblingWatch:
    """Called while a wait on ``device`` polls: past :data:`SIBLING_CHECK_S`, and every as
    long again, asks the streams of the device's siblings whether they failed, and raises the
    failed one's DeviceError. A kernel that traps on one GPU can leave another GPU's work
    waiting forever (on an event of the faulty GPU's stream, at a meeting of the persistent
    kernels), so a wait on the healthy GPU would otherwise end only at the timeout, naming the
    wrong device. Returns False (the wait goes on) while every sibling is healthy.
    ``itself``: the device's own streams are asked too (a joint wait over several devices,
    whose event queries need not report a fault the stream queries do)."""

    def __init__(self, device, *, itself: bool = False):
        self.others = [d for d in device.siblings
                       if (itself or d is not device) and d.broken is None]
        self.next = time.perf_counter() + SIBLING_CHECK_S

    def __call__(self) -> bool:
        if not self.others or time.perf_counter() < self.next:
            return False
        self.next = time.perf_counter() + SIBLING_CHECK_S
        runtime = _cupy().cuda.runtime
        for dev in self.others:
            for stream in (dev.compute_stream, dev.copy_stream):
                try:
                    with dev.use():
                        finished(runtime.streamQuery, stream.raw.ptr)
                except runtime.CUDARuntimeError as exc:
                    if sticky_error(exc) is not None:
                        dev.note_failure(exc)
                        raise DeviceError(dev.name, f"{exc}{dev.broken_note()}") from exc
        return False


#: seconds :meth:`CUDADevice.to_host` polls for the compute stream's work without sleeping
#: before the back-off wait (read-backs are on every level's path; a back-off sleep would leave
#: the GPU idle after short work)
TO_HOST_SPIN_S = 0.05

#: seconds a wait on one GPU polls before it first checks the context's other GPUs for a
#: failure (:class:`_SiblingWatch`), and between checks
SIBLING_CHECK_S = 0.05


class _Replay:
    """What :meth:`CUDAStream.recorded` returns: called, it submits the work again, from its
    first call on as a launch of the CUDA graph captured then (or call by call where the
    capture failed)."""

    __slots__ = ("stream", "work", "launch")

    def __init__(self, stream: "CUDAStream", work):
        self.stream, self.work, self.launch = stream, work, None

    def __call__(self) -> None:
        if self.launch is None:
            graph = self.stream._capture(self.work)
            self.launch = (self.work if graph is None else
                           functools.partial(self.stream.submit, graph.launch, self.stream.raw))
        self.launch()


class CUDAStream(Stream):
    def __init__(self, device: "CUDADevice", name: str):
        self.device = device
        self.name = name
        with device.use():
            self.raw = _cupy().cuda.Stream(non_blocking=True)
        self._ptr = int(self.raw.ptr)
        self._event_record = _cupy().cuda.runtime.eventRecord   # a Link records per packet
        self._stream_wait = _cupy().cuda.runtime.streamWaitEvent  # and waits per send
        self._staging = None  # pinned buffer for host-staged copies without peer access
        self._staging_bytes = 0

    def __repr__(self):
        return f"<CUDAStream {self.device.name}/{self.name}>"

    @property
    def ptr(self) -> int:
        return self.raw.ptr

    def submit(self, fn, *args, **kwargs) -> None:
        """Run ``fn`` now, on the calling thread, with this stream current. What it raises is
        a failure on this device (:class:`_failures_on`), as on the CPU backend."""
        device = self._device_ref() or self.device     # the attribute raises when it is gone
        with _failures_on(device), device.use(), self.raw:
            fn(*args, **kwargs)

    def recorded(self, work):
        """Submit ``work()``'s work as it is; the returned callable captures the same calls
        into a CUDA graph the first time it is called and launches the graph, each time: one
        host call for the whole sequence (see :meth:`Stream.recorded` for what ``work`` may
        do). A work submitted once, as by a one-shot call, is never captured. Where the
        capture fails (``work`` did something a capture cannot hold), ``work`` is submitted
        call by call from then on, and a warning says why."""
        work()
        return _Replay(self, work)

    def _capture(self, work):
        """The CUDA graph of the calls ``work()`` makes on this stream, captured (not run);
        None, with a warning, where CUDA refused the capture (:func:`capture_error`: the work
        did something a capture cannot hold). Any other failure is the device's, raised as
        :meth:`submit` raises it."""
        device, raw = self.device, self.raw
        with _failures_on(device), device.use(), raw:
            raw.begin_capture()
            try:
                work()
            except BaseException as exc:
                try:
                    raw.end_capture()       # the capture is dropped; work()'s error told
                except Exception:  # noqa: BLE001 - an invalidated capture ends with one
                    pass
                if capture_error(exc) is None:
                    raise
                refused = exc
            else:
                try:
                    return raw.end_capture()
                except Exception as exc:  # noqa: BLE001 - told below, or raised
                    if capture_error(exc) is None:
                        raise
                    refused = exc
        log.warning("%s: its work could not be captured into a CUDA graph (%s); it is queued "
                    "call by call", self, capture_error(refused))
        return None

    def record(self, event: CUDAEvent | None = None) -> CUDAEvent:
        if event is not None:   # recording needs no current device: the stream names it
            self._runtime_call(self._event_record, event.raw.ptr, self._ptr)
            return event
        cupy, device = _cupy(), self._device_ref() or self.device
        with _failures_on(device), device.use():
            raw = cupy.cuda.Event(disable_timing=True)
            raw.record(self.raw)
        return CUDAEvent(device, raw)

    def idle(self) -> bool:
        """CUDA's query of the stream (:func:`finished`): a few microseconds, where recording
        an event to wait on costs several times that; a fault raises a DeviceError naming
        the device."""
        runtime = _cupy().cuda.runtime
        try:
            return finished(runtime.streamQuery, self._ptr)
        except runtime.CUDARuntimeError as exc:
            raise _failure(self.device, exc) from exc

    def _runtime_call(self, call, *args) -> None:
        """``call(*args)``, one CUDA runtime call that names its stream and event itself, as
        :class:`_failures_on` would run it (a broken device refused, a failure naming the
        device) but without a context manager or a device switch: a Link records and waits
        per packet."""
        device = self._device_ref() or self.device     # per packet: the weak reference itself
        if device.broken is not None:
            raise _refusal(device)
        try:
            call(*args)
        except Exception as exc:
            raise _failure(device, exc) from exc

    def copy_bytes(self, dst_ptr: int, src_ptr: int, nbytes: int) -> None:
        """Copy ``nbytes`` from device address ``src_ptr`` to ``dst_ptr`` in stream order.

        For memory that no array of this process describes (another rank's buffer mapped
        through CUDA IPC, :mod:`groute.device.ipc`); an array is copied with :meth:`copy`.

        Parameters
        ----------
        dst_ptr, src_ptr : int
            Device addresses this GPU can reach (its own memory or a peer mapping).
        nbytes : int
            Bytes to copy; zero copies nothing.

        Raises
        ------
        DeviceError
            Naming this stream's device, where it is broken or the runtime refuses the copy.
        """
        if nbytes:
            self._runtime_call(_cupy().cuda.runtime.memcpyAsync, int(dst_ptr), int(src_ptr),
                               int(nbytes), _cupy().cuda.runtime.memcpyDefault, self._ptr)

    def copy_plan(self, dst, src) -> CopyPlan:
        """Copies by address (:class:`_AddressCopyPlan`, :class:`_PeerCopyPlan`) where the
        copy is one runtime call;
        the generic plan (slices, :meth:`copy`) for host-to-host and host-staged copies."""
        _check_rows(dst, src)
        dst_dev, src_dev = _device_of(dst), _device_of(src)
        if dst_dev is None and src_dev is None:
            return CopyPlan(self, dst, src)
        if dst_dev is not None and src_dev is not None and dst_dev != src_dev:
            if not self.device.peer_enabled(src_dev, dst_dev):
                return CopyPlan(self, dst, src)
            return _PeerCopyPlan(self, dst, src, dst_dev, src_dev)
        return _AddressCopyPlan(self, dst, src, dst_dev, src_dev)

    def wait_event(self, event: Event) -> None:
        if isinstance(event, CUDAEvent):
            # like recording, waiting needs no current device: the stream and the event name
            # theirs
            self._runtime_call(self._stream_wait, self._ptr, event.raw.ptr, 0)
        else:  # an event of another backend: wait on the host (rare; mixed setups only)
            event.synchronize()

    def copy(self, dst, src) -> None:
        nbytes = _check_copy(dst, src)       # the caller's mistake, not the device's failure
        if nbytes:
            device = self._device_ref() or self.device
            with _failures_on(device):
                self._copy(device, dst, src, nbytes)

    def _copy(self, device, dst, src, nbytes) -> None:
        cupy = _cupy()
        runtime = cupy.cuda.runtime
        dst_dev, src_dev = _device_of(dst), _device_of(src)
        with device.use():
            if dst_dev is None and src_dev is None:     # host to host: on this thread, so
                self.synchronize()                      # after the stream's earlier work
                np.copyto(dst, src.reshape(dst.shape))
            elif dst_dev is None:
                runtime.memcpyAsync(dst.ctypes.data, src.data.ptr, nbytes, _D2H, self.ptr)
            elif src_dev is None:
                runtime.memcpyAsync(dst.data.ptr, src.ctypes.data, nbytes, _H2D, self.ptr)
            elif dst_dev == src_dev:
                runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, _D2D, self.ptr)
            elif device.peer_enabled(src_dev, dst_dev):
                runtime.memcpyPeerAsync(dst.data.ptr, dst_dev, src.data.ptr, src_dev, nbytes, self.ptr)
            else:
                self._staged_copy(dst, src, nbytes)

    def _staged_copy(self, dst, src, nbytes):
        """Device -> pinned host -> device on this one stream; stream order makes reuse safe."""
        cupy = _cupy()
        runtime = cupy.cuda.runtime
        if self._staging_bytes < nbytes:
            if self._staging is not None:
                self.synchronize()  # the old buffer may still be in use by queued copies
            self._staging_bytes = max(nbytes, 1 << 20)
            self._staging = cupy.cuda.alloc_pinned_memory(self._staging_bytes)
        ptr = self._staging.ptr
        runtime.memcpyAsync(ptr, src.data.ptr, nbytes, _D2H, self.ptr)
        runtime.memcpyAsync(dst.data.ptr, ptr, nbytes, _H2D, self.ptr)


class _AddressCopyPlan(CopyPlan):
    """One ``cudaMemcpyAsync`` per call, at addresses computed from the rows: no array views,
    no checks and no device switch per call (the stream names the device)."""

    def __init__(self, stream, dst, src, dst_dev, src_dev):
        super().__init__(stream, dst, src)
        self.row_bytes = int(np.dtype(src.dtype).itemsize * int(np.prod(src.shape[1:], dtype=np.int64)))
        self.dst_ptr = int(dst.data.ptr) if dst_dev is not None else int(dst.ctypes.data)
        self.src_ptr = int(src.data.ptr) if src_dev is not None else int(src.ctypes.data)
        self.stream_ptr = int(stream.raw.ptr)
        self.kind = _D2H if dst_dev is None else _H2D if src_dev is None else _D2D
        self._memcpy = _cupy().cuda.runtime.memcpyAsync

    def __call__(self, dst_row: int, src_row: int, rows: int) -> None:
        rb = self.row_bytes
        self._memcpy(self.dst_ptr + dst_row * rb, self.src_ptr + src_row * rb, rows * rb,
                     self.kind, self.stream_ptr)


class _PeerCopyPlan(_AddressCopyPlan):
    """The same between two GPUs with peer access: one ``cudaMemcpyPeerAsync`` per call."""

    def __init__(self, stream, dst, src, dst_dev, src_dev):
        super().__init__(stream, dst, src, dst_dev, src_dev)
        self.dst_dev, self.src_dev = dst_dev, src_dev
        self._memcpy = _cupy().cuda.runtime.memcpyPeerAsync

    def __call__(self, dst_row: int, src_row: int, rows: int) -> None:
        rb = self.row_bytes
        self._memcpy(self.dst_ptr + dst_row * rb, self.dst_dev, self.src_ptr + src_row * rb,
                     self.src_dev, rows * rb, self.stream_ptr)


def _check_rows(dst, src) -> None:
    if dst.dtype != src.dtype or tuple(dst.shape[1:]) != tuple(src.shape[1:]):
        raise ValueError(f"a copy plan needs equal dtypes and row shapes: dst {dst.dtype} "
                         f"{tuple(dst.shape[1:])}, src {src.dtype} {tuple(src.shape[1:])}")
    for name, a in (("dst", dst), ("src", src)):
        if not a.flags.c_contiguous:
            raise ValueError(f"a copy plan needs contiguous arrays; {name} is not")


class _failures_on:
    """What the block raises is a failure on ``device``: a DeviceError naming it, the original
    its ``__cause__`` (groute's own errors, which say where they come from, stay as they are);
    a sticky CUDA error marks the device broken (:meth:`CUDADevice.note_failure`), and a broken
    device refuses the block at once. A class, not a generator's context: every launch of a
    run enters one (:meth:`CUDAStream.submit`), and this costs the host a fraction of it."""

    __slots__ = ("device",)

    def __init__(self, device):
        self.device = device

    def __enter__(self) -> None:
        if self.device.broken is not None:
            raise _refusal(self.device)

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, GrouteError) or not isinstance(exc, Exception):
            return False
        raise _failure(self.device, exc) from exc


def _refusal(device) -> DeviceError:
    """What a broken ``device`` raises for any work (:class:`_failures_on`)."""
    return DeviceError(device.name, f"refused:{device.broken_note()}")


def _failure(device, exc) -> DeviceError:
    """``exc``, raised by work on ``device``, as the DeviceError naming the device
    (:class:`_failures_on`; per-packet paths call it from a plain ``except``)."""
    device.note_failure(exc)
    text = str(exc).removeprefix(f"{device.name}: ")      # named once
    return DeviceError(device.name, f"{type(exc).__name__}: {text}{device.broken_note()}")


def _device_of(array):
    """CUDA ordinal of the GPU holding a CuPy array, None for a host (NumPy) array. Arrays of
    two logical devices on one GPU share it: a copy between them is device-to-device."""
    if isinstance(array, np.ndarray):
        return None
    return int(array.device.id)


def _check_copy(dst, src) -> int:
    if dst.size != src.size or dst.dtype != src.dtype:
        raise ValueError(f"copy needs equal size and dtype: dst {dst.size} x {dst.dtype}, "
                         f"src {src.size} x {src.dtype}")
    for name, a in (("dst", dst), ("src", src)):
        flags = a.flags
        if not flags.c_contiguous:
            raise ValueError(f"copy needs contiguous arrays; {name} is not (use a slice along axis 0)")
    return int(src.nbytes)


class CUDADevice(Device):
    """One device of a CUDA context: a whole GPU, or a logical device sharing one
    (:mod:`.logical`). ``index`` is the device's own number (its name, the runtime's view);
    ``gpu`` the CUDA ordinal it runs on, which every CUDA call selects; ``multiprocessors``
    its share of the GPU's, what resident grids are sized from."""

    backend = "cuda"

    def __init__(self, index: int, *, placement: Placement | None = None,
                 stop_event: threading.Event | None = None, on_error=None):
        cupy = _cupy()
        count = cuda_device_count()
        placement = placement or Placement(index, index, 1)
        if not 0 <= placement.gpu < count:
            raise ValueError(f"CUDA device {placement.gpu} does not exist: this machine has {count} "
                             f"(valid indices 0..{count - 1})")
        self.xp = cupy
        self.index = index
        self.gpu = placement.gpu
        self.sharing = placement.sharing
        self.logical = placement.logical
        gpu_sms = int(cupy.cuda.runtime.getDeviceProperties(self.gpu)["multiProcessorCount"])
        self.multiprocessors = sm_share(gpu_sms, placement)
        self.stop_event = stop_event or threading.Event()
        self.on_error = on_error
        self._peers: set[int] = set()
        try:
            self.compute_stream = CUDAStream(self, "compute")
            self.copy_stream = CUDAStream(self, "copy")
            with self.use():    # allocates receive buffers, runs nothing (receive_buffer)
                self._quiet_stream = cupy.cuda.Stream(non_blocking=True)
        except Exception as exc:
            why = sticky_error(exc)
            if why is None:
                raise
            # a kernel fault earlier in this process (on this GPU, or one a kernel of this
            # GPU read through peer memory) left the CUDA runtime in a sticky error
            raise DeviceError(self.name, f"cannot start: {why}; a kernel fault earlier in this "
                                         f"process left its CUDA runtime unusable: start a new "
                                         f"process") from exc

    def use(self):
        return _cupy().cuda.Device(self.gpu)

    @contextmanager
    def on_compute(self):
        """This GPU current and its compute stream CuPy's current stream (see
        :meth:`Device.on_compute`): the compute stream is non-blocking, so CuPy work left on
        the default stream is not ordered with its kernels in either direction, and memory
        CuPy allocated on the default stream goes back to that stream's pool, to be reused
        there while a compute kernel may still read it."""
        with _cupy().cuda.Device(self.gpu), self.compute_stream.raw:
            yield

    def new_stream(self, name: str = "") -> CUDAStream:
        return CUDAStream(self, name or "stream")

    def empty(self, shape, dtype):
        with self.on_compute():
            return self.xp.empty(shape, dtype)

    def receive_buffer(self, shape, dtype):
        with _cupy().cuda.Device(self.gpu), self._quiet_stream:
            return self.xp.empty(shape, dtype)

    def asarray(self, host_array):
        """The upload is queued on the compute stream, so the kernels queued after it read the
        data and its memory belongs to that stream's pool; then waited for, with the work
        queued before it (synchronous, as the interface promises): CuPy uploads pageable
        memory asynchronously, and a copy on another non-blocking stream, e.g. a Link's, would
        not wait for it. A bounded wait: a kernel queued before that waits for something this
        thread has yet to do times out instead of hanging."""
        with self.on_compute():
            out = self.xp.asarray(host_array)
        self.compute_stream.synchronize()
        return out

    def to_host(self, array):
        """A NumPy copy, made after the work queued on the compute stream: CuPy's default
        stream does not wait for a non-blocking stream, so a copy issued there could read an
        array before the kernel that writes it has run. That work is waited for first by the
        bounded, fault-aware wait (:meth:`Stream.synchronize`: a kernel that waits for this
        thread times out, and a fault names this device); the copy then waits for itself."""
        if isinstance(array, np.ndarray):   # host memory already (mapped buffers too)
            return array
        with _failures_on(self):
            self.compute_stream.synchronize(spin=TO_HOST_SPIN_S)
            with self.on_compute():
                return self.xp.asnumpy(array)

    def host_buffer(self, shape, dtype):
        import cupyx
        return cupyx.empty_pinned(shape, dtype)

    def landing_memory(self, nbytes: int):
        cupy = _cupy()
        portable = getattr(cupy.cuda.runtime, "hostAllocPortable", 1)
        with _failures_on(self), self.use():
            return cupy.cuda.PinnedMemoryPointer(cupy.cuda.PinnedMemory(int(nbytes), portable), 0)

    def mapped_host_buffer(self, shape, dtype):
        return mapped_host_array(shape, dtype)

    def address(self, array) -> int:
        return device_address(array)

    def release_cached(self, above: int = 0) -> None:
        with self.use():
            pool = _cupy().get_default_memory_pool()
            if pool.total_bytes() - pool.used_bytes() > above:
                pool.free_all_blocks()

    def memory_info(self):
        with self.use():
            free, total = _cupy().cuda.runtime.memGetInfo()
        return int(free), int(total)

    def properties(self) -> dict:
        """``multiprocessors`` is this device's share; a logical device also names its ``gpu``,
        how many devices share it and the GPU's own count (``gpu_multiprocessors``)."""
        props = _cupy().cuda.runtime.getDeviceProperties(self.gpu)
        name = props["name"]
        if isinstance(name, bytes):
            name = name.decode()
        free, total = self.memory_info()
        out = {"name": name, "memory_total": total, "memory_free": free,
               "multiprocessors": self.multiprocessors,
               "compute_capability": f"{props['major']}.{props['minor']}",
               "l2_bytes": props.get("l2CacheSize")}
        if self.logical:
            out.update(logical=True, gpu=self.gpu, sharing=self.sharing,
                       gpu_multiprocessors=int(props["multiProcessorCount"]))
        return out

    def pci_bus_id(self) -> str:
        """The PCI bus id of this device's GPU (:func:`pci_bus_id`)."""
        return pci_bus_id(self.gpu)

    def same_gpu(self, other) -> bool:
        """True for another device of this context on this one's GPU (logical devices)."""
        return isinstance(other, CUDADevice) and other is not self and other.gpu == self.gpu

    def can_access_peer(self, other) -> bool:
        if self.same_gpu(other):
            return True         # one GPU's memory: reachable as the device's own
        if not isinstance(other, CUDADevice) or other.gpu == self.gpu:
            return False
        return bool(_cupy().cuda.runtime.deviceCanAccessPeer(self.gpu, other.gpu))

    def enable_peer_access(self, other: "CUDADevice") -> bool:
        """Let this device's kernels and copies reach ``other``'s memory directly (nothing to
        enable for a device on the same GPU)."""
        if not self.can_access_peer(other):
            return False
        if self.same_gpu(other):
            return True
        runtime = _cupy().cuda.runtime
        with self.use():
            try:
                runtime.deviceEnablePeerAccess(other.gpu)
            except runtime.CUDARuntimeError as exc:
                if "AlreadyEnabled" not in str(exc) and "already" not in str(exc).lower():
                    raise
        self._peers.add(other.gpu)
        return True

    def native_peer_atomics(self, other) -> bool | None:
        """Whether this device's kernels can run atomics on ``other``'s memory natively (NVLink,
        or the same GPU; over PCIe they are not supported). None when the driver cannot be
        asked."""
        if self.same_gpu(other):
            return True
        if not isinstance(other, CUDADevice) or other.gpu == self.gpu:
            return False
        return native_atomics_between(self.gpu, other.gpu)

    def peer_enabled(self, src: int, dst: int) -> bool:
        """True when a copy between GPUs ``src`` and ``dst`` (CUDA ordinals) can go directly
        (no staging)."""
        registry = _PEERS
        return (src, dst) in registry or (dst, src) in registry

    def note_failure(self, exc) -> None:
        why = sticky_error(exc)
        if why is not None and self.broken is None:
            self.broken = f"hit a sticky CUDA error, {why}"

    def broken_note(self) -> str:
        """What a message of a failure on this device adds when it is :attr:`broken`."""
        if self.broken is None:
            return ""
        return (f" ({self.name} {self.broken}: its CUDA context can run nothing more in this "
                f"process; the faulting kernel may have run on another GPU of this process, "
                f"whose fault CUDA also reports on the GPUs that share memory with it; close "
                f"the Context)")

    def drain(self, timeout: float) -> bool:
        """Wait for the compute and copy streams (see :meth:`Device.drain`); a broken device
        is not waited for (nothing runs on it any more). False when the work has not ended
        within ``timeout`` or the wait itself failed."""
        if self.broken is not None:
            return True
        deadline = time.monotonic() + timeout
        try:
            for stream in (self.compute_stream, self.copy_stream):
                event = stream.record()
                wait_for(event.query, what=f"{self.name}'s {stream.name} stream",
                         timeout=max(deadline - time.monotonic(), 1e-3))
        except Exception as exc:  # noqa: BLE001 - told to the caller as False
            self.note_failure(exc)
            return False
        return True

    def close(self):
        pass


def make_current(gpu: int) -> None:
    """Make CUDA ordinal ``gpu`` the calling thread's current device for good (not a scope):
    CuPy's device scope restores the thread's previous device on exit, GPU 0 for a thread that
    never chose, and making a device current opens its CUDA context (memory), so a process
    that runs on one GPU other than 0 sets it on each of its threads first."""
    _cupy().cuda.runtime.setDevice(int(gpu))


@functools.cache
def libcuda():
    """The CUDA driver library (``libcuda.so.1``) through ctypes, opened once: each
    ``ctypes.CDLL`` is a new handle with a class of its own, garbage for the collector when
    it goes. OSError where there is no driver."""
    import ctypes
    return ctypes.CDLL("libcuda.so.1")


@functools.cache
def native_atomics_between(gpu: int, other: int) -> bool | None:
    """Whether kernels on CUDA ordinal ``gpu`` can run atomics on ``other``'s memory natively
    (NVLink; over PCIe they are not supported), None when the driver cannot be asked. Asked
    once per pair: the links of a host do not change while it runs."""
    import ctypes
    try:
        driver = libcuda()
    except OSError:
        return None
    value = ctypes.c_int(0)
    # CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3; a CUdevice is its ordinal
    status = driver.cuDeviceGetP2PAttribute(ctypes.byref(value), 3, ctypes.c_int(int(gpu)),
                                             ctypes.c_int(int(other)))
    return bool(value.value) if status == 0 else None


def pci_bus_id(gpu: int) -> str:
    """The PCI bus id of CUDA ordinal ``gpu`` (``0000:3B:00.0``): what tells two processes of
    one host whether they run on the same GPU, whatever ``CUDA_VISIBLE_DEVICES`` numbered it
    in each."""
    return str(_cupy().cuda.runtime.deviceGetPCIBusId(int(gpu)))


def device_address(array) -> int:
    """The address a kernel uses for ``array``: a CuPy array's, or the device address of
    mapped host memory (:func:`groute.device.mapped_memory.mapped_host_array`)."""
    if isinstance(array, np.ndarray):
        ptr = int(array.ctypes.data)
        try:
            return int(_cupy().cuda.runtime.pointerGetAttributes(ptr).devicePointer) or ptr
        except Exception:  # noqa: BLE001 - with unified addressing the host address works as is
            return ptr
    return int(array.data.ptr)


#: Pairs (a, b) of GPUs (CUDA ordinals) with peer access enabled in at least one direction,
#: filled by Context.
_PEERS: set[tuple[int, int]] = set()


def register_peer(a: int, b: int) -> None:
    _PEERS.add((a, b))
