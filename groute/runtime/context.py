"""Context: owns the devices, one host worker thread per device, and shutdown.

A computation is a function run on every device's worker thread (:meth:`Context.run`). If any of
them raises, or any stream fails, the context is *stopped*: every bounded wait in the runtime
notices within one poll interval and gives up (with a
:class:`~groute.errors.StoppedByFailure` naming the device that failed), the workers return,
and the caller gets a :class:`~groute.errors.DeviceError` naming the device that failed first.
Nothing waits forever: ``run(timeout=)`` bounds a run, the context's ``timeout`` bounds every
wait, :meth:`Context.reset` and shutdown.

A failure ends the run that saw it, not the context: once the failure has been raised to the
caller, the next :meth:`~Context.submit` or :meth:`~Context.run` resets the context first
(:meth:`Context.reset`). A device function still running after the timeout makes the context
unusable, and says so, naming the device; so does a GPU whose CUDA context a sticky error hit
(a kernel trapped or faulted: :attr:`Device.broken <groute.device.base.Device.broken>`), which
can run nothing more in this process. A failed run returns only once the work it queued on the
other devices' streams has ended (:meth:`Device.drain <groute.device.base.Device.drain>`,
within the timeout): the kernels of a persistent run that gave up at a meeting do not run on
into the next run.

Computations started from several threads on one context take turns
(:meth:`Context.exclusive`, :func:`taking_turns`): :meth:`Context.run`, every step of an
engine and every run of a solver is the context's only computation while it runs, and another
thread's waits for its turn. Their device functions wait for each other across devices (a
meeting, a counted termination), so two computations whose functions reached the devices'
host threads in different orders would each wait for the other until the timeout.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import math
import queue
import threading
import time
import weakref
from contextlib import contextmanager

import numpy as np

from ..config import logical_devices_requested, resolve_timeout
from ..device import CPUDevice, CUDADevice, cuda_device_count
from ..device import cuda as cuda_backend
from ..device.logical import place
from ..errors import (ContextStopped, DeviceError, GrouteError, WaitTimeout, again,
                      error_text, stalled_by_user_code, to_keep)
from ..ints import is_int
from ..waiting import POLL_INTERVAL, StopSignal
from .answer_landing import AnswerLanding
from .link import _Pump

log = logging.getLogger(__name__)

DEFAULT_CPU_DEVICES = 4
#: The most CPU virtual devices a context makes: they model one host's GPUs, and an all-to-all
#: router or worklist over K devices has K*(K-1) links, each with its own receive buffers.
MAX_CPU_DEVICES = 64
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


class _HostThread:
    """A device's host worker: one daemon thread running submitted functions in order. A daemon
    so that a device function that never returns cannot keep the process from exiting (a
    ``ThreadPoolExecutor``'s threads are joined at exit)."""

    def __init__(self, name):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._unfinished = 0
        self._ending = False          # told to end (stop, finish): later work is cancelled
        # set as the thread ends: Thread.join cut short by a KeyboardInterrupt leaves the
        # thread looking ended to every later join, on the Pythons this runs on
        self._ended = threading.Event()
        self.running = None           # the function running now, for error messages
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn) -> cf.Future:
        """A future of ``fn()`` run on this thread after what was submitted before; cancelled
        at once when the thread was told to end (work queued behind its end would never run,
        and a wait for it would last its whole timeout)."""
        future = cf.Future()
        with self._idle:
            if self._ending:
                _cancelled(future)
                return future
            self._unfinished += 1
            self._queue.put((future, fn))
        return future

    @property
    def busy(self) -> bool:
        """Whether a submitted function has not finished."""
        return self._unfinished > 0

    def _serve(self):
        try:
            self._serve_until_told()
        finally:
            self._ended.set()

    def _serve_until_told(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn = item
            item = None
            try:
                if future.set_running_or_notify_cancel():
                    self.running = fn
                    try:
                        outcome = [fn(), None]
                    except BaseException as exc:  # noqa: BLE001 - the caller gets it
                        outcome = [None, exc]
                    # what the function held (its arguments, its result) must not stay here
                    # until the next function: that can be long, and a result may be a
                    # device's arrays; so the caller gets the only reference this thread has
                    fn = self.running = None
                    if outcome[1] is None:
                        future.set_result(outcome.pop(0))
                    else:
                        future.set_exception(outcome.pop())
            finally:
                future = fn = outcome = None
                self.running = None
                with self._idle:
                    self._unfinished -= 1
                    self._idle.notify_all()

    def wait_idle(self, timeout) -> bool:
        """Wait until every submitted function has finished, at most ``timeout``; True if so."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._unfinished:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def finish(self) -> None:
        """The thread ends once it has run what was submitted so far."""
        with self._idle:
            self._ending = True
            self._queue.put(None)

    def stop(self) -> None:
        """Cancel what has not started; the thread ends after the function it runs."""
        with self._idle:
            self._ending = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _cancelled(item[0])
                with self._idle:
                    self._unfinished -= 1
                    self._idle.notify_all()
        self.finish()

    def join(self, timeout) -> bool:
        """Wait, at most ``timeout``, for the thread to end; True if it has."""
        return self._ended.wait(timeout)


def _cancelled(future: cf.Future) -> None:
    """Cancel ``future`` and wake whoever waits for it (``concurrent.futures.wait`` counts a
    cancelled future done only once told so)."""
    future.cancel()
    future.set_running_or_notify_cancel()


def _failure_reporter(ctx):
    """What reports a failure of a device of ``ctx`` (a stream's operation: the device's
    ``on_error``; a device function: :meth:`Context.submit`): the context records it and
    stops. It refers to the context weakly, since the context holds its devices and the
    failure's frames: a closed context must go when its last user lets go, not at a
    collection."""
    ref = weakref.ref(ctx)

    def stream_failed(device, exc, where=""):
        ctx = ref()
        if ctx is not None:
            ctx.fail(device.name, exc)
    return stream_failed


def _let_go(workers) -> None:
    """A context that nobody refers to and that was never closed: its devices' host threads
    end once they have run what was queued (nothing is waited for; a future still held gets
    its result). Its devices stay usable by whoever still holds them (a Link made on them);
    a CPU device's stream threads end when the device goes."""
    for worker in workers:
        worker.finish()


def _describe(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def checked_context(ctx):
    """``ctx`` where it is a :class:`Context` (a RankContext or any other subclass) or None
    (the kept one); else a TypeError naming ``ctx``, before anything reaches into it. Every
    registered algorithm and :func:`~groute.engines.device_rule.choose_devices` check theirs
    through it.

    Examples
    --------
    >>> checked_context(None) is None
    True
    >>> checked_context("x")
    Traceback (most recent call last):
    ...
    TypeError: ctx must be a groute Context (groute.Context(...), or None for the kept one), got str
    """
    if ctx is not None and not isinstance(ctx, Context):
        raise TypeError(f"ctx must be a groute Context (groute.Context(...), or None for the "
                        f"kept one), got {type(ctx).__name__}")
    return ctx


def requested_devices(devices):
    """``devices`` as a :class:`Context` (and every ``devices=`` option) takes it, checked:
    None or ``"auto"`` (returned as None), a count (an int >= 1, returned as an int) or device
    indices (a non-empty sequence of distinct ints >= 0, returned as a list of ints).

    Raises
    ------
    TypeError
        Neither a count nor a sequence of ints (a float, a bool, a list holding a string).
    ValueError
        Another string, a count below 1, an empty list, repeats or a negative index.

    Examples
    --------
    >>> requested_devices(2), requested_devices((0, 2)), requested_devices("auto")
    (2, [0, 2], None)
    >>> requested_devices(1.5)
    Traceback (most recent call last):
    TypeError: devices must be 'auto', a count or a list of device indices; got 1.5 (float)
    """
    if devices is None or (isinstance(devices, str) and devices == "auto"):
        return None
    what = "devices must be 'auto', a count or a list of device indices"
    if isinstance(devices, str):
        raise ValueError(f"{what}; got {devices!r}")
    if is_int(devices):
        if devices < 1:
            raise ValueError(f"devices must be >= 1, got {devices}")
        return int(devices)
    try:
        indices = list(devices)
    except TypeError:
        raise TypeError(f"{what}; got {devices!r} ({type(devices).__name__})") from None
    if not indices:
        raise ValueError("devices list is empty")
    for i in indices:
        if not is_int(i):
            raise TypeError(f"devices: a device index is an int, got {i!r} ({type(i).__name__})")
    indices = [int(i) for i in indices]
    if len(set(indices)) != len(indices):
        raise ValueError(f"devices list has repeats: {indices}")
    if min(indices) < 0:
        raise ValueError(f"device index {min(indices)} does not exist (indices are >= 0)")
    return indices


def default_device_count(backend: str) -> int:
    """How many devices a :class:`Context`'s ``devices=None`` means on ``backend``: every GPU,
    or :data:`DEFAULT_CPU_DEVICES` CPU virtual devices (the algorithms choose their own count:
    :mod:`groute.engines.device_rule`)."""
    backend = resolve_backend(backend)
    return max(1, cuda_device_count() if backend == "cuda" else DEFAULT_CPU_DEVICES)


def _check_delays(delays, count: int) -> None:
    """``cpu_delays``: one finite delay >= 0 (seconds per task) for each of ``count`` devices."""
    try:
        values = [float(d) for d in delays]
    except (TypeError, ValueError):
        raise ValueError(f"cpu_delays must be numbers of seconds, got {delays!r}") from None
    if len(values) != count:
        raise ValueError(f"cpu_delays: {len(values)} delay(s) for {count} device(s); give one "
                         f"per device")
    if not all(math.isfinite(d) and d >= 0 for d in values):
        raise ValueError(f"cpu_delays must be finite numbers of seconds >= 0, got {delays!r}")


class Context:
    """Devices plus their host threads.

    ``devices``: ``None`` or ``"auto"`` (every GPU, or 4 CPU virtual devices: a dataflow
    program's devices; the algorithms choose their own count, :mod:`groute.engines.device_rule`),
    a count ``K`` (the first K), or a list of device indices. ``cpu_delays``: per-device artificial slowdown (seconds per task) for
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
        self.stop_event = StopSignal()
        self._error: BaseException | None = None
        self._error_device: str | None = None
        self._reported = False      # the failure reached a caller (gather, run, check)
        self._lock = threading.Lock()
        self._closed = False        # shutdown has begun: no new work
        self._shut_down = False     # shutdown has ended (one interrupted is run again)
        self._unusable: str | None = None   # why reset could not bring the context back
        self._turn = threading.Condition()  # one computation at a time (exclusive)
        self._holder: threading.Thread | None = None   # the thread whose computation runs
        self._depth = 0                     # its exclusive blocks, nested
        self._turns = 0                     # turns taken so far: the current one's number
        self._ended_in_turn = None          # the turn whose left work was ended (once a turn)
        self._waiting = 0                   # threads waiting for their turn
        #: where answers land on the host (:mod:`groute.runtime.answer_landing`)
        self.answer_landing = AnswerLanding()
        logical = logical_devices_requested(logical)
        indices = self._device_indices(devices, logical)
        if cpu_delays is not None and self.backend == "cpu":    # CUDA devices take none
            _check_delays(cpu_delays, len(indices))
        placements = self._placements(indices, logical) if self.backend == "cuda" else None
        try:
            for n, i in enumerate(indices):
                if self.backend == "cuda":
                    dev = CUDADevice(i, placement=placements[n], stop_event=self.stop_event,
                                     on_error=_failure_reporter(self))
                else:
                    delay = cpu_delays[n] if cpu_delays else 0.0
                    dev = CPUDevice(i, delay=delay, stop_event=self.stop_event,
                                    on_error=_failure_reporter(self))
                dev.timeout = self.timeout
                self.devices.append(dev)
            for dev in self.devices:
                dev.siblings = tuple(self.devices)
            if self.backend == "cuda":
                self._enable_peer_access()
        except BaseException:
            for dev in self.devices:
                dev.close()
            raise
        self._workers = [_HostThread(f"groute-{d.name}-host") for d in self.devices]
        # a context dropped without close() ends its devices' host threads (each would wait
        # for work forever); a CPU device's stream threads end when the device goes
        self._dropped = weakref.finalize(self, _let_go, self._workers)
        self._dropped.atexit = False
        log.info("context: %s", ", ".join(d.name for d in self.devices))
        if self.logical:
            log.warning("logical devices (for testing, not timing): %s", ", ".join(
                f"{d.name} on GPU {d.gpu} ({d.multiprocessors} SMs)" for d in self.devices))

    # construction -------------------------------------------------------------------------------
    def _device_indices(self, devices, logical: bool):
        """The device indices asked for (on CUDA, past the last GPU only when ``logical``)."""
        devices = requested_devices(devices)
        if devices is None:
            devices = default_device_count(self.backend)
        if isinstance(devices, int):
            available = cuda_device_count() if self.backend == "cuda" else None
            if available is not None and devices > available and not logical:
                raise ValueError(f"asked for {devices} CUDA devices but this machine has {available}; "
                                 f"ask for {available} or fewer, the CPU backend, or logical devices "
                                 f"for testing (logical=True or GROUTE_LOGICAL_DEVICES=1)")
        count = devices if isinstance(devices, int) else len(devices)
        if self.backend == "cpu" and count > MAX_CPU_DEVICES:     # before a list of them
            raise ValueError(f"backend='cpu' runs at most {MAX_CPU_DEVICES} virtual devices "
                             f"(all-to-all exchange makes K*(K-1) links); got {count}")
        return list(range(devices)) if isinstance(devices, int) else devices

    def _placements(self, indices, logical: bool) -> list:
        """Where each CUDA device of ``indices`` runs (:func:`~groute.device.logical.place`);
        a context of one process per device places its one device by its rank
        (:class:`~groute.runtime.rank_context.RankContext`)."""
        return place(indices, cuda_device_count(), logical=logical)

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

    @property
    def gpu_count(self) -> int:
        """How many GPUs the devices run on (0 on the CPU backend; fewer than the devices
        where logical devices share them)."""
        return len({d.gpu for d in self.devices if getattr(d, "gpu", None) is not None})

    def __len__(self):
        return len(self.devices)

    def __getitem__(self, i):
        return self.devices[i]

    def __iter__(self):
        return iter(self.devices)

    #: the MPI ranks this context spans (:class:`~groute.runtime.rank_context.RankContext`);
    #: None: every device is this process's
    ranks = None

    def is_local(self, index: int) -> bool:
        """Whether device ``index`` is driven by this process (always, but on a
        :class:`~groute.runtime.rank_context.RankContext`)."""
        return True

    def share(self, values, what: str = "the devices' values") -> list:
        """Every device's entry of ``values`` (a list over the devices, as a run returns
        them). Here every device is this process's, so ``values`` itself; a
        :class:`~groute.runtime.rank_context.RankContext` fills in the other ranks' entries."""
        return list(values)

    def peer_matrix(self) -> np.ndarray:
        """``m[i, j]`` is True when device i can reach device j's memory directly."""
        n = len(self.devices)
        m = np.zeros((n, n), dtype=bool)
        for i, a in enumerate(self.devices):
            for j, b in enumerate(self.devices):
                m[i, j] = i != j and a.can_access_peer(b)
        return m

    # failure handling -----------------------------------------------------------------------
    def fail(self, device_name: str, exc: BaseException) -> None:
        """Record the first failure and stop everything. A wait that timed out while a device
        was running the user's code (:meth:`Device.running <groute.device.base.Device.running>`)
        for half the timeout or longer is recorded as that code's failure, on its device: the
        wait was for it (:meth:`_stalled_by`)."""
        for dev in self.devices:
            if dev.name == device_name:
                dev.note_failure(exc)
        with self._lock:
            if self._error is None and not isinstance(exc, ContextStopped):
                if isinstance(exc, WaitTimeout):
                    device_name, exc = self._stalled_by(device_name, exc)
                self._error, self._error_device = exc, device_name
                self._reported = False
                # a copy without the traceback: the stop flag is every device's, and the
                # traceback's frames hold devices (fn's argument)
                self.stop_event.failure = (device_name, to_keep(exc))
                log.info("%s failed: %r; stopping the context", device_name, exc)
        self.stop_event.set()

    def _stalled_by(self, device_name: str, exc: WaitTimeout):
        """``(device name, failure)`` for a wait on ``device_name`` that timed out (``exc``):
        where a device has been running the user's code for half the timeout or longer (the
        longest of them), that device and a WaitTimeout naming the code (``__cause__``: the
        wait's own), else the wait's. The devices are this process's and, for a wait across
        processes, those the other ranks said run the user's code (the wait's
        ``user_code_elsewhere``: :meth:`groute.runtime.ranks.Ranks.ask_the_others`)."""
        now = time.monotonic()
        busy = [(now - since, dev.name, what) for dev in self.devices
                for what, since in [dev.user_code or (None, now)]
                if what is not None and now - since >= self.timeout / 2]
        busy += [(took, name, what) for took, name, what
                 in getattr(exc, "user_code_elsewhere", ()) if took >= self.timeout / 2]
        if not busy:
            return device_name, exc
        took, name, what = max(busy)
        stalled = stalled_by_user_code(what, name, took, device_name, self.timeout)
        stalled.__cause__ = exc
        return name, stalled

    @property
    def stopped(self) -> bool:
        return self.stop_event.is_set()

    def check(self) -> None:
        """Raise if the context was stopped by a failure elsewhere."""
        if self.stop_event.is_set():
            self.raise_failure()
            self._mark_reported()
            raise ContextStopped("the context was shut down" if self._closed else "the context was stopped")

    def raise_failure(self):
        """Raise the first failure as a :class:`DeviceError` naming its device (``__cause__``:
        the original exception), if there is one."""
        if self._error is not None:
            self._mark_reported()
            if isinstance(self._error, DeviceError):
                raise again(self._error)
            note = "".join(dev.broken_note() for dev in self.devices
                           if dev.name == self._error_device and dev.broken)
            raise DeviceError(self._error_device,
                              f"{type(self._error).__name__}: {error_text(self._error)}{note}") \
                from self._error

    def _mark_reported(self):
        if self._own_worker() is None:
            self._reported = True     # it reaches the caller, not a worker unwinding

    def reset(self, timeout=None) -> None:
        """Make a stopped context run again; a no-op unless it is stopped.

        Within ``timeout`` (default: the context's): the host threads finish the functions of
        the stopped run, every link of that run ends (a link stopped with its context carries
        nothing more: make new ones; solvers do), failed streams drain and forget their
        failure, and the failure and the stop flag are cleared. Raises :class:`WaitTimeout`
        naming the devices still busy if that does not happen in time; the context is then
        unusable (every later call says so) and should be closed.
        """
        limit = resolve_timeout(timeout if timeout is not None else self.timeout)
        self._usable()
        if not self.stopped:
            return
        deadline = time.monotonic() + limit
        busy = [f"{d.name} (running {_describe(w.running)})" if w.running else d.name
                for d, w in zip(self.devices, self._workers)
                if not w.wait_idle(max(deadline - time.monotonic(), 0.0))]
        busy += [f"{d.name}'s streams" for d in self.devices
                 if not d.drain(max(deadline - time.monotonic(), 0.0))]
        links = _Pump.wait_idle(self.devices, max(deadline - time.monotonic(), 0.0))
        if not busy and not links:
            try:
                for dev in self.devices:
                    dev.clear_failure(max(deadline - time.monotonic(), 0.0))
            except WaitTimeout as exc:
                busy.append(str(exc))
        if busy or links:
            what = "; ".join(busy + ([f"links {', '.join(links)} have not ended"] if links else []))
            self._unusable = (f"the context could not be reset: after {limit:g} s {what} "
                              f"still busy; close it and create a new Context")
            raise WaitTimeout(self._unusable)
        with self._lock:
            self._error = self._error_device = None
            self._reported = False
            self._ended_in_turn = None      # work of the next run is ended if it is left
            self.stop_event.failure = None
            self.stop_event.clear()
        log.info("context reset")

    def _usable(self):
        if self._closed:
            raise RuntimeError("the context is shut down; create a new Context")
        if self._unusable:
            raise RuntimeError(self._unusable)
        for dev in self.devices:
            if dev.broken:
                raise RuntimeError(
                    f"{dev.name} {dev.broken}; its CUDA context can run nothing more in this "
                    f"process, so this Context cannot either: close it (a new Context on the "
                    f"other devices can run; {dev.name} again only in a new process)")

    def ensure_running(self):
        """Before new work: reset a context whose failure has reached the caller; raise one that
        has not (a failure between runs, e.g. in a stream), so that it is seen once."""
        self._usable()
        if self.stopped:
            if not self._reported:
                self.check()
            self.reset()

    def admit(self) -> None:
        """Make the context ready for new work queued or made on it.

        Called before a submit, a synchronize, and by a Link or Router given this context.
        From a device function (whose run is under way and must not be reset), only checks
        that the context is usable. From any other thread, a stopped context is reset
        (:meth:`ensure_running`) once it is this thread's turn (:meth:`exclusive`): work made
        after a failed run then belongs to the next run instead of ending with the failed
        one, and a computation another thread is running is not reset under it.

        Raises
        ------
        DeviceError
            A failure that has not reached a caller yet (it is raised once).
        RuntimeError
            The context is shut down or cannot run anything more.
        """
        if self._own_worker() is not None:
            self._usable()
        elif self.stopped:
            with self.exclusive():
                self.ensure_running()
        else:
            self._usable()

    def _own_worker(self):
        """The host thread slot (:class:`_HostThread`) whose thread is calling, with its
        device, as ``(worker, device)``; None for any other thread."""
        me = threading.current_thread()
        return next(((worker, dev) for dev, worker in zip(self.devices, self._workers)
                     if getattr(worker, "_thread", None) is me), None)

    def _in_device_function(self, what: str) -> None:
        """Raise if the calling thread is one of this context's device threads: ``what`` (a
        run, a shutdown) waits for those threads, so from one of them it would wait for
        itself."""
        own = self._own_worker()
        if own is not None:
            raise RuntimeError(
                f"{what} called from a device function of this context (on {own[1].name}'s "
                f"host thread), which would wait for that function to end: call it from the "
                f"caller's thread, or do the device's work in the function itself")

    # running work -----------------------------------------------------------------------------
    @contextmanager
    def exclusive(self):
        """Run the ``with`` block as the context's only computation: another thread's block
        waits until this one has ended (module docstring), then runs; the same thread may
        nest blocks, and a device function, whose caller has the turn, never waits. The wait
        lasts as long as the other computation, each of whose own waits is bounded by the
        timeout; a context shut down (or made unusable) meanwhile raises. A failure that
        leaves the block (a :class:`DeviceError`, or a wait the failure stopped) has reached
        the caller: the next computation resets the context instead of raising it again."""
        me = threading.current_thread()
        if self._own_worker() is not None:
            yield
            return
        with self._turn:
            if self._holder is not me:
                self._waiting += 1
                try:
                    while self._holder is not None:
                        self._usable()
                        self._turn.wait(POLL_INTERVAL)
                finally:
                    self._waiting -= 1
                self._holder = me
                self._turns += 1
            self._depth += 1
        try:
            yield
        except (DeviceError, ContextStopped):
            if self._error is not None:
                self._mark_reported()
            raise
        except BaseException:
            if self._depth == 1:
                self._end_left_work()
            raise
        finally:
            with self._turn:
                self._depth -= 1
                if not self._depth:
                    self._holder = None
                    self._turn.notify_all()

    def submit(self, device_index: int, fn, *args, **kwargs) -> cf.Future:
        """Run ``fn(device, *args, **kwargs)`` on that device's host worker thread.

        ``device_index`` is the device's position in the context (``ctx.devices.index(d)``),
        0 to ``len(ctx) - 1``: a negative one is an IndexError, not the position from the end.
        Called from outside a device function after a failure was raised, it resets the context
        first (:meth:`ensure_running`)."""
        if not is_int(device_index):
            raise TypeError(f"submit: device_index is a device's position in the context (an "
                            f"int), got {device_index!r} ({type(device_index).__name__})")
        if not 0 <= device_index < len(self.devices):
            raise IndexError(f"submit: device_index {device_index} is not a position in this "
                             f"context of {len(self.devices)} devices (0..{len(self.devices) - 1})")
        self.admit()
        device = self.devices[device_index]

        # weakly: the error's traceback holds this frame (fn's frames refer to their caller),
        # and the context keeps the error
        report = _failure_reporter(self)

        def call():
            try:
                with device.use():
                    return fn(device, *args, **kwargs)
            except BaseException as exc:
                report(device, exc)
                raise
        call.__qualname__ = _describe(fn)
        future = self._workers[device_index].submit(call)
        future.device = device.name
        future.worker = self._workers[device_index]
        return future

    def run(self, fn, *args, timeout=None, **kwargs) -> list:
        """Run ``fn(device, *args, **kwargs)`` on every device concurrently; return their results.

        Raises :class:`DeviceError` naming the first device that failed. ``timeout`` (default: no
        bound beyond the per-wait timeouts inside ``fn``) bounds the whole call, a failed run's
        wait for the other devices included: past it the run fails with a :class:`DeviceError`
        naming a device still running, whose ``__cause__`` is a :class:`WaitTimeout` naming
        them all. A run started from another thread meanwhile waits
        for its turn (:meth:`exclusive`).
        """
        if not callable(fn):
            raise TypeError(f"run: fn is called as fn(device, ...) on every device, got "
                            f"{type(fn).__name__} {fn!r}")
        if timeout is not None:
            timeout = resolve_timeout(timeout)      # checked before any device starts
        self._in_device_function("Context.run")
        with self.exclusive():
            futures = [self.submit(i, fn, *args, **kwargs) for i in range(len(self.devices))]
            return self.gather(futures, timeout=timeout)

    def gather(self, futures, timeout=None) -> list:
        """Wait for futures from :meth:`submit`; on any failure stop the rest and raise it (the
        first failure, as a :class:`DeviceError` naming the device). ``timeout`` bounds the
        wait: past it the run fails with a :class:`DeviceError` naming a device still running
        (``__cause__``: a :class:`WaitTimeout` naming them all), and the call returns within a
        few poll intervals. In a device function, work submitted to the calling device's own thread is refused (the thread runs it only
        after the function returns), and work on other devices must start within the
        context's timeout: their threads may be busy with functions that wait for this one."""
        futures = list(futures)
        for future in futures:
            if not isinstance(future, cf.Future):
                raise TypeError(f"gather takes the futures submit returned, got "
                                f"{type(future).__name__}")
        own = self._own_worker()
        unstarted_by = None     # in a device function: when work not yet started gives up
        if own is not None:
            worker, device = own
            if any(getattr(f, "worker", None) is worker and not f.done() for f in futures):
                raise RuntimeError(
                    f"gather called from a device function on {device.name}'s host thread for "
                    f"work submitted to {device.name}, which that thread runs only after this "
                    f"function returns: wait for it from the caller's thread")
            unstarted_by = time.monotonic() + self.timeout
        deadline = None if timeout is None else time.monotonic() + resolve_timeout(timeout)
        try:
            return self._gather(futures, own, unstarted_by, deadline, timeout)
        except (DeviceError, ContextStopped):
            raise
        except BaseException:
            if own is None:     # the caller's own exception (an interrupt)
                self._end_left_work()
            raise

    def _gather(self, futures, own, unstarted_by, deadline, timeout) -> list:
        """:meth:`gather`'s wait, its arguments checked."""
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=POLL_INTERVAL, return_when=cf.FIRST_EXCEPTION)
            failed = [f for f in done if not f.cancelled() and f.exception() is not None]
            if failed or self.stopped:
                self.stop_event.set()
                # the others notice the stop within a poll interval; give them the wait
                # timeout, but no more than the run has left
                grace = self.timeout if deadline is None else \
                    min(self.timeout, max(deadline - time.monotonic(), 4 * POLL_INTERVAL))
                end = time.monotonic() + grace
                cf.wait(pending, timeout=grace)
                self._drain(end, "the failed run's work")
                self._raise_stop(failed)
            if unstarted_by is not None and time.monotonic() > unstarted_by:
                waiting = sorted({getattr(f, "device", "?") for f in pending
                                  if not f.running() and not f.done()})
                if waiting:     # their threads are busy: with a function waiting for this one?
                    self.fail(own[1].name, WaitTimeout(
                        f"a gather in a device function on {own[1].name} waited {self.timeout:g} "
                        f"s for work submitted to {', '.join(waiting)} to start: their host "
                        f"threads are busy (a device function there waiting for {own[1].name}'s?)"))
                    self._raise_stop([])
                unstarted_by = None     # all started: what runs is waited for as long as it runs
            if pending and deadline is not None and time.monotonic() > deadline:
                running = sorted({getattr(f, "device", "?") for f in pending})
                self.stop_event.set()
                # those in a bounded wait unwind within a poll interval; name the others, or,
                # if all unwound, those that were still running at the deadline
                _, pending = cf.wait(pending, timeout=4 * POLL_INTERVAL)
                slow = sorted({getattr(f, "device", "?") for f in pending})
                what = (f"{', '.join(slow)} still running" if slow else
                        f"{', '.join(running)} still running at the deadline")
                self.fail((slow or running)[0], WaitTimeout(
                    f"the run did not finish within {timeout:g} s: {what}"))
                self._raise_stop([])
        return [f.result() for f in futures]

    def _drain(self, deadline: float, what: str) -> None:
        """After a failed run or at shutdown, until ``deadline`` at most (each device a few
        poll intervals at least, to say whether it is idle): wait for the work left on every
        device's streams (module docstring); a device that does not drain is logged with
        ``what`` (the work), the failure is what is raised."""
        for dev in self.devices:
            if not dev.drain(max(deadline - time.monotonic(), 4 * POLL_INTERVAL)):
                log.warning("%s: %s on its streams had not ended in time", dev.name, what)

    def _end_left_work(self) -> None:
        """A computation left by an exception of the caller's own thread (a KeyboardInterrupt,
        an error of host code between device calls) while its device functions or streams
        still run: stop them as a failure would, and wait (within the timeout) for them to end,
        so that what the caller's clean-up closes is no longer in use and the next computation
        starts clean (it resets the context) instead of queueing behind them and inheriting
        their errors. A second interrupt during the wait leaves the reset to the next call.
        Once a turn (:meth:`exclusive`): a gather left by the exception, then the block it
        leaves, would wait a second time for what did not end in the first."""
        turn = self._turns if self._holder is threading.current_thread() else None
        if turn is not None and self._ended_in_turn == turn:
            return
        try:
            if not any(w.busy for w in self._workers) and all(d.idle() for d in self.devices):
                return
        except Exception:  # noqa: BLE001 - a failed stream: the error leaving says why
            pass
        self._ended_in_turn = turn
        self.stop_event.set()
        if self._error is None:
            # the stop is the caller's: the next computation resets; a device's failure
            # recorded before it has not reached the caller, so the next one raises it
            self._mark_reported()
        deadline = time.monotonic() + self.timeout
        for w in self._workers:
            w.wait_idle(max(deadline - time.monotonic(), 0.0))
        self._drain(deadline, "the interrupted run's work")

    def _raise_stop(self, failed):
        self.raise_failure()
        self._mark_reported()
        for f in failed:
            raise again(f.exception())
        raise ContextStopped("the context was shut down" if self._closed
                             else "the context was stopped")

    def synchronize(self, timeout=None, *, spin: float = 0.0):
        """Wait for every device's streams (from outside a device function, after a failure
        was raised: reset first, as :meth:`submit`). ``spin``: seconds each wait polls without
        sleeping first (:meth:`groute.device.base.Event.synchronize`), for a caller that times
        the work."""
        limit = self.timeout if timeout is None else resolve_timeout(timeout)
        self.admit()
        # the usual case after a run that waited for its own read-backs: every stream is idle
        # already, which asking them says in a few microseconds per stream (recording an
        # event on each to wait on costs several times that, inside the timed region of a
        # run on several devices: groute.solver.DeviceTimer)
        if all(dev.idle() for dev in self.devices):
            return
        events = [event for dev in self.devices for event in dev.record_all()]
        if events:
            type(events[0]).wait_all(events, limit, spin=spin)

    # shutdown -----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the worker threads and device streams; safe to call twice.

        Functions still running get the context's timeout to notice the stop; past it shutdown
        raises :class:`WaitTimeout` naming the devices that are stuck (their threads are
        daemons, left to finish on their own)."""
        if self._shut_down:
            return
        self._in_device_function("Context.shutdown")
        self._closed = True
        self._dropped.detach()
        self.stop_event.set()
        self.answer_landing.release()
        for w in self._workers:
            w.stop()
        deadline = time.monotonic() + self.timeout
        stuck = []
        for dev, w in zip(self.devices, self._workers):
            running = w.running
            if not w.join(max(deadline - time.monotonic(), 4 * POLL_INTERVAL)):
                stuck.append(f"{dev.name} (running {_describe(running)})" if running else dev.name)
        self._drain(deadline, "the work queued")
        for dev in self.devices:
            dev.close()
        self._shut_down = True
        if stuck:
            raise WaitTimeout(f"shutdown gave up after {self.timeout:g} s: {', '.join(stuck)} still "
                              f"running a device function that does not notice the stop")

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.shutdown()
        except WaitTimeout as stuck:
            if exc is None:
                raise
            log.warning("%s", stuck)   # the error that ended the block matters more

    def __repr__(self):
        return f"<Context {self.backend} x{len(self.devices)}: {', '.join(d.name for d in self.devices)}>"


def taking_turns(method):
    """Decorate a method of an object with a ``ctx`` (a solver's ``run``, an engine's steps):
    each call is its context's only computation while it runs (:meth:`Context.exclusive`)."""
    @functools.wraps(method)
    def one_at_a_time(self, *args, **kwargs):
        with self.ctx.exclusive():
            return method(self, *args, **kwargs)
    return one_at_a_time

