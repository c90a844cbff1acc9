"""The host side of the persistent protocol (``groute/operators/persistent.cuh``): launching one
grid per device, reading where each launch stopped, keeping track of the meeting counter, and
raising with the device and the reason when a launch failed or a device gave up.

Where each launch stopped is read from its control block by
:class:`groute.engines.protocol.LaunchStop` (the block's layout: :mod:`groute.engines.protocol`),
which :meth:`CrossDeviceBarrier.finish` takes.

The meeting counter lives in device 0's memory (the first
:data:`~groute.engines.protocol.MEETING_WORDS` of the block :class:`CrossDeviceBarrier` holds; a
kernel's own device-0 words follow) and only grows: at every
meeting each of the ``k`` devices adds one, and a run that starts with the counter at ``base``
waits for ``base + k * b`` at its ``b``-th meeting. So the host never zeroes it between runs
(that would cost a launch and a sync per run); it adds what the run crossed to ``base``, read
from the devices' control blocks. Only when a run failed, or the devices disagree on how many
meetings they passed, does the counter stand somewhere unknown: then every device is waited for
and the block is zeroed.

Used by every persistent kernel on several devices: the relaxation engines'
(:mod:`groute.engines.relax.peer`, and the linked workers), the persistent BSP kernels of the
linear iteration engines (:mod:`groute.engines.iterate`) and the fused loops on several devices
(:mod:`groute.engines.fused_multi`, which launch on each device's host thread and call
:meth:`CrossDeviceBarrier.after_launch`), which also share :func:`unavailable` (where these
kernels can run), :data:`BARRIER_TIMEOUT_S` (``GROUTE_PEER_BARRIER_TIMEOUT``, through
:mod:`groute.tuning`) and the end of a run (:meth:`CrossDeviceBarrier.finish`: settle the counter, raise for a failed
launch or a device that gave up).

Before every launch of several devices, :meth:`CrossDeviceBarrier.launch_each` wakes NVLink
(:meth:`~CrossDeviceBarrier.wake_links`): the links drop to a low-power state when the GPUs
leave them idle for a few tens of milliseconds, and the first kernel traffic after that is many
times slower. The apps' host work between two runs (the answer's download and renumbering) is
longer than that, so every run would meet sleeping links and pay for it at its first
cross-device meetings. A copy-engine transfer of :data:`WAKE_BYTES` from each device to each
other, queued just before the launches, wakes them; a tiny one does not (docs/TOPOLOGY.md,
"Sleeping links"). The
copies are ordered before each device's later compute-stream work (an event wait queued after
its kernel), so it has finished whenever the run's read-back has. Within WAKE_AFTER_S of the
barrier's last run the links are still awake and nothing is copied (back to back the copy
would be pure cost).
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager

import numpy as np

from groute.kernel_launch import launch_kernel
from groute.tuning import setting

log = logging.getLogger(__name__)

#: the most devices the persistent kernels take (the peer traversal's argument struct holds
#: this many peer pointers)
MAX_DEVICES = 8
#: a device that waits this long at a cross-device barrier gives up (the host then raises);
#: the apps read it at each run (:func:`timeout_ns`), so a test may lower it
BARRIER_TIMEOUT_S = setting("GROUTE_PEER_BARRIER_TIMEOUT")
#: bytes each device copies to each other before a launch, to wake the links (module docstring)
WAKE_BYTES = 2 << 20
#: the links are woken only when the barrier's last run ended longer ago than this (seconds;
#: below the idleness after which the links were seen to fall asleep)
WAKE_AFTER_S = 0.01
def unavailable(ctx, *, across_processes: bool = False) -> str | None:
    """Why kernels that meet at the cross-device barrier cannot run on ``ctx`` (None when they
    can): they need CUDA devices, at most :data:`MAX_DEVICES`, each reaching every other's
    memory with native atomics (NVLink). Devices of other processes (a context spanning MPI
    ranks) are reached through CUDA IPC (:mod:`groute.device.ipc`) by the kernels built for it
    (``across_processes``: BFS's and SSSP's peer kernel, PageRank's persistent BSP kernel, and
    CC's reads in place, which ask the same of the ranks); for the others they are out of
    reach.
    Across processes every rank must ask at once (the ranks agree by an allgather)."""
    if ctx.backend != "cuda":
        return "it needs CUDA devices (this context has CPU virtual devices)"
    ranks = getattr(ctx, "ranks", None)
    if ranks is not None and ranks.size > 1:
        if not across_processes:
            return (f"the devices are {ranks.size} processes' (a context spanning MPI ranks), "
                    f"and of the kernels that meet across devices only BFS's and SSSP's peer "
                    f"kernel (exchange='peer') and PageRank's persistent BSP kernel map "
                    f"another process's memory (CUDA IPC)")
        from groute.device.ipc import ipc_unavailable
        return ipc_unavailable(ctx, MAX_DEVICES)
    devs = ctx.devices
    if not 1 <= len(devs) <= MAX_DEVICES:
        return f"it runs on 1 to {MAX_DEVICES} devices (got {len(devs)})"
    for a in devs:
        for b in devs:
            if a is b:
                continue
            if not a.can_access_peer(b):
                return f"{a.name} cannot access {b.name}'s memory (no peer access)"
            if a.native_peer_atomics(b) is False:
                return f"{a.name} has no native atomics on {b.name}'s memory (no NVLink)"
    return None


@contextmanager
def together(ctx, did: str, what: str, across: bool = True):
    """Run the block; across processes (``across``, and ``ctx`` a RankContext of several
    ranks) every rank then hears whether each of the others ``did`` it, so that all raise
    together (this rank its own error; the others a RuntimeError naming the first rank that
    failed, its device and error, ``what`` being the subject) instead of one rank leaving the
    others waiting at their next meeting, or worse, letting go of memory their kernels write
    into. In one process (or ``across`` False) an error is raised as it comes. Every rank must
    enter it at the same point, with the same ``across``."""
    ranks = getattr(ctx, "ranks", None)
    if not across or ranks is None or ranks.size < 2:
        yield
        return
    failure = None
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - every rank hears it, then all raise
        failure = exc
    told = ranks.allgather(None if failure is None else f"{type(failure).__name__}: {failure}",
                           what=f"whether every rank {did}")
    if failure is not None:
        try:
            raise failure
        finally:
            failure = None    # this frame must not keep it: its traceback holds the frame
    failed = [(r, why) for r, why in enumerate(told) if why]
    if failed:
        r, why = failed[0]
        raise RuntimeError(f"{what}: {ctx.devices[r].name} (rank {r}) has not {did}: {why}")


def timeout_ns() -> int:
    """:data:`BARRIER_TIMEOUT_S` in nanoseconds, as the kernels take it."""
    return int(BARRIER_TIMEOUT_S * 1e9)


#: the tag of an array sent as its bytes by :func:`_as_bytes`
_ARRAY = "array as bytes"


def _as_bytes(value):
    """``value`` (an end of a run: an array, None, or a tuple or list of such) with each array
    as ``(_ARRAY, dtype, shape, its bytes)``: pickling those is a few times cheaper than
    pickling arrays, and the ends cross the ranks at the end of every run."""
    if isinstance(value, np.ndarray):
        return (_ARRAY, value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (tuple, list)):
        return type(value)(_as_bytes(v) for v in value)
    return value


def _from_bytes(value):
    """What :func:`_as_bytes` made ``value`` from (its arrays writable, as they were)."""
    if isinstance(value, tuple) and len(value) == 4 and value[0] == _ARRAY:
        _, dtype, shape, data = value
        return np.frombuffer(bytearray(data), dtype).reshape(shape)
    if isinstance(value, (tuple, list)):
        return type(value)(_from_bytes(v) for v in value)
    return value


class CrossDeviceBarrier:
    """``block``: the device-0 array holding the counter (its first word) and anything else the
    kernels expect zeroed after a failure; ``devices``: the run's devices, device 0 first."""

    def __init__(self, devices, block, *, ranks=None, address=None):
        self.devices = list(devices)
        self.block = block
        #: across processes (a RankContext's ``ranks``): the launches and a reset meet the other
        #: ranks, and only this process's devices are launched, waited for and zeroed
        self.ranks = ranks if ranks is not None and ranks.size > 1 else None
        self.local = [i for i, dev in enumerate(self.devices) if getattr(dev, "local", True)]
        self._address = address     # the block's address where it is another process's
        self.base = 0       # where the counter stands before the next run
        self._wake = None   # per device, WAKE_BYTES to copy (allocated at the first launch;
                            # () once waking failed: not tried again)
        self._spent_wake = None     # the buffers of a wake that failed, kept while copies run
        self._woken = {}    # device index -> event after its wake copy, for launch_each
        self._last_end = -math.inf  # perf_counter when the last run was settled

    @property
    def ptr(self) -> int:
        """The counter's device address, for the kernels' arguments (across processes: as
        mapped into this one, :class:`groute.device.ipc.PeerAddresses`)."""
        return self._address if self._address is not None else self.block.data.ptr

    def wake_links(self) -> None:
        """Queue a WAKE_BYTES peer copy from each device to every other on its copy stream,
        which the kernels do not wait for; see the module docstring for why. (Behind an
        NVSwitch a ring would do, as any traffic crosses all of a GPU's links; GPUs wired to
        each other directly have links per pair, and a ring of four would leave the diagonals
        asleep.) Nothing on one device, nor on CPU devices (their tests share the barrier's
        bookkeeping), nor within WAKE_AFTER_S of the last run. A speed-up only: if it fails,
        it is logged and not tried again."""
        self._woken = {}
        if (len(self.devices) < 2 or self._wake == () or self.ranks is not None
                or time.perf_counter() - self._last_end < WAKE_AFTER_S
                or any(dev.backend != "cuda" for dev in self.devices)):
            return
        try:
            if self._wake is None:
                # written by other devices' copy streams (a receive buffer: not memory a
                # queued kernel still uses) and never read, so never filled
                self._wake = [dev.receive_buffer(WAKE_BYTES // 4, np.uint32)
                              for dev in self.devices]
            k = len(self.devices)
            for i, dev in enumerate(self.devices):
                for step in range(1, k):    # the next device first, as with two
                    dev.copy_stream.copy(self._wake[(i + step) % k], self._wake[i])
                self._woken[i] = dev.copy_stream.record()
        except Exception as exc:  # noqa: BLE001 - the launches go on without it
            log.warning("waking the links before the launches failed (%s); not tried again", exc)
            # the copies queued before the failure may still write into the buffers: kept
            self._spent_wake, self._wake, self._woken = self._wake, (), {}

    def launch_each(self, launch, order=None):
        """Wake the links (:meth:`wake_links`), across processes let the ranks meet (unless
        the timed run's start just met them: :meth:`~groute.runtime.ranks.Ranks.
        at_marked_meeting`), then call ``launch(i, device)`` for every device in ``order``
        (indices; default 0 to k - 1: benchmarks/probes/gpu_launch_probe.py times the
        reverse), stopping at the first that raises. Returns ``(launched indices, that
        exception or None)``: the caller still reads the launched ones back (they give up at
        the barrier after their timeout) before it raises, so nothing is left running. After
        each launch the device's compute stream waits for its wake copy: whatever it runs
        next (the read-back) also finds the copy done, and the buffers are never freed under
        a copy in flight."""
        self.wake_links()
        launched, failure = [], None
        try:
            # the launches of all processes within the kernels' timeout: the ranks meet, unless
            # the timer's meeting was their last (only the run's own host code came since)
            if self.ranks is not None and not self.ranks.at_marked_meeting():
                self.ranks.barrier("the ranks' launches of a kernel that meets across them")
            for i in (self.local if order is None else [i for i in order if i in self.local]):
                launch(i, self.devices[i])
                launched.append(i)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller after read-back
            failure = exc
        for i, event in self._woken.items():    # queued after the kernels: they do not wait
            self.devices[i].compute_stream.wait_event(event)
        self._woken = {}
        return sorted(launched), failure

    def share_ends(self, ends: dict, failure, phase: str, what: str):
        """Every device's end of a run, and the run's failure, the same on every rank.
        ``ends``: what this process read back after the run, by device index (its launched
        devices'); ``failure``: this process's (None: none), which ``phase`` says it failed
        at ("could not launch its kernel", "failed while its kernel ran"). In one process
        that is ``ends`` as a list over the devices (None where nothing was read back) and
        ``failure``; across processes one allgather gives every rank's, and a rank without a
        failure of its own gets another rank's as a RuntimeError naming its device, its rank,
        what it failed at and its error (``what``: the run's subject)."""
        if self.ranks is None:
            return [ends.get(i) for i in range(len(self.devices))], failure
        told = None if failure is None else f"{phase}: {type(failure).__name__}: {failure}"
        shared = self.ranks.allgather((_as_bytes(ends.get(self.local[0])), told),
                                      what=f"the ends of a run of {what}")
        shared = [(_from_bytes(end), why) for end, why in shared]
        if failure is None:
            failed = [(r, why) for r, (_, why) in enumerate(shared) if why]
            if failed:
                r, why = failed[0]
                failure = RuntimeError(f"{what}: {self.devices[r].name} (rank {r}) {why}")
        return [end for end, _ in shared], failure

    def after_launch(self, i: int) -> None:
        """For a caller that launches each device on that device's own host thread (after
        :meth:`wake_links`, instead of :meth:`launch_each`): device ``i``'s compute stream
        waits for its wake copy, as :meth:`launch_each` queues it after each launch."""
        event = self._woken.pop(i, None)
        if event is not None:
            self.devices[i].compute_stream.wait_event(event)

    def settle(self, crossed, ok: bool = True) -> None:
        """After a run: ``crossed`` holds each launched device's count of meetings passed.
        Advance ``base`` when the run was ``ok`` and they agree, else :meth:`reset`."""
        self._last_end = time.perf_counter()
        crossed = set(int(c) for c in crossed)
        if ok and len(crossed) == 1:
            self.base += len(self.devices) * crossed.pop()
        else:
            self.reset()

    def finish(self, stops, *, failure=None, ok: bool = True, what: str,
               instead: str) -> None:
        """End a run from where each launched device stopped (``stops``: a
        :class:`LaunchStop` per launched device): :meth:`settle` it as good only if no launch
        failed (``failure``: what :meth:`launch_each` returned), no device gave up waiting at
        a meeting and the app's own checks are ``ok``; then raise ``failure``, or a
        RuntimeError naming the devices that waited in vain (``what``: its subject;
        ``instead``: the option that runs without the meetings). The app raises for its own
        failed checks (its own abort reasons among them) after this."""
        waited = [stop.device for stop in stops if stop.timed_out]
        self.settle([stop.crossed for stop in stops], ok=ok and failure is None and not waited)
        if failure is not None:
            raise failure
        if waited:
            raise RuntimeError(
                f"{what}: {', '.join(waited)} waited more than {BARRIER_TIMEOUT_S:g} s at a "
                f"cross-device barrier (another device stopped or never started); set "
                f"GROUTE_PEER_BARRIER_TIMEOUT or use {instead}")

    def reset(self) -> None:
        """Wait for every device, then zero the block on device 0's compute stream (the
        non-blocking stream the kernels run on: a fill on CuPy's default stream would not be
        ordered before the next launch). Across processes each rank waits for its own device
        and the ranks meet before and after device 0's rank zeroes it."""
        failed = None
        for i in self.local:        # a failed device still lets the others' ranks meet
            try:
                self.devices[i].compute_stream.record().synchronize()
            except BaseException as exc:  # noqa: BLE001 - raised below
                failed = failed or exc
        if self.ranks is not None:      # whether every rank's device stopped cleanly
            told = self.ranks.allgather(None if failed is None else
                                        f"{type(failed).__name__}: {failed}",
                                        what="the ranks' devices stopped before the meeting "
                                             "block is zeroed")
            bad = [(r, why) for r, why in enumerate(told) if why]
            if bad and failed is None:
                r, why = bad[0]
                failed = RuntimeError(f"{self.devices[r].name} (rank {r}) failed after a run of "
                                      f"the kernels that meet across the ranks: {why}")
        if failed is not None:          # the counter stays unknown: no rank launches again
            try:
                raise failed
            finally:
                failed = None    # this frame must not keep it: its traceback holds the frame
        if 0 in self.local:
            self.devices[0].compute_stream.submit(self.block.fill, 0)
            self.devices[0].compute_stream.record().synchronize()
        if self.ranks is not None:
            self.ranks.barrier("the meeting block zeroed before the next launch")
        self.base = 0


#: (id of the kernel, block, shared memory, device index, GPU, multiprocessors) -> (the kernel,
#: its resident capacity): one occupancy query per kernel and device, not one per launch; the
#: kernel is kept so that its id is not reused by another
_capacity: dict = {}


def resident_capacity(fn, block: int, device, *, shared_mem: int = 0) -> int:
    """The blocks of ``fn`` (``block`` threads, ``shared_mem`` bytes of dynamic shared memory)
    that ``device`` can hold resident at once: the occupancy per multiprocessor times the
    device's ``multiprocessors``. On a logical device that is its share of the GPU's, so the
    grids of all the devices sharing a GPU, each within its capacity, are resident together;
    the driver's own check of a cooperative launch is against the whole GPU and cannot see
    the other devices' grids."""
    key = (id(fn), int(block), int(shared_mem), device.index, device.gpu,
           device.multiprocessors)
    known = _capacity.get(key)
    if known is not None and known[0] is fn:
        return known[1]
    from groute.kernels import resident_blocks_per_sm
    with device.use():
        per_sm = resident_blocks_per_sm(fn, block, device.gpu, shared_mem)
    capacity = int(per_sm) * int(device.multiprocessors)
    _capacity[key] = (fn, capacity)
    return capacity


def launch_resident(fn, blocks: int, block: int, args, *, device, kernel: str,
                    shared_mem: int = 0, min_blocks: int = 1) -> int:
    """Launch ``fn`` (named ``kernel`` in errors) on ``device`` as a grid of ``blocks``, every
    block resident (as a grid-wide or cross-device barrier needs), with ``args`` (a
    :class:`~groute.kernel_launch.KernelArgs` a caller keeps from run to run, or a sequence:
    :func:`~groute.kernel_launch.launch_kernel`). A grid larger than the
    device's :func:`resident_capacity` is cut to it; where the driver still says a cooperative
    grid is too large (the occupancy answer was optimistic) it is halved until it fits. Never
    below ``min_blocks``: raises a RuntimeError naming the device, the kernel, the blocks
    asked for and what the device holds when that many cannot be resident. Returns the blocks
    launched, for the next launch."""
    capacity = resident_capacity(fn, block, device, shared_mem=shared_mem)
    least = max(1, int(min_blocks))
    if capacity < least:
        raise RuntimeError(_not_resident(device, kernel, least, block, shared_mem, capacity))
    if blocks > capacity:
        log.info("%s: %s grid of %d blocks cut to the %d that can be resident", device.name,
                 kernel, blocks, capacity)
        blocks = capacity
    while True:
        try:
            launch_kernel(fn, blocks, block, args, shared_mem=shared_mem)
            return blocks
        except Exception as exc:
            # CuPy's CUDADriverError, told by name: the check above needs no CuPy
            if (type(exc).__name__ != "CUDADriverError" or "TOO_LARGE" not in str(exc)
                    or blocks <= least):
                raise
            blocks = max(least, blocks // 2)
            log.info("%s: cooperative %s grid too large, now %d blocks", device.name, kernel,
                     blocks)


def _not_resident(device, kernel, blocks, block, shared_mem, capacity) -> str:
    sharing = int(getattr(device, "sharing", 1) or 1)
    where = (f"its share of GPU {device.gpu} ({device.multiprocessors} multiprocessors; the GPU is "
             f"shared by {sharing} logical devices)" if sharing > 1
             else f"GPU {device.gpu} ({device.multiprocessors} multiprocessors)")
    shared = f" and {shared_mem} bytes of shared memory" if shared_mem else ""
    remedy = ("ask for fewer logical devices per GPU" if sharing > 1
              else "use a smaller block or fewer blocks")
    return (f"{device.name}: kernel {kernel} needs {blocks} blocks of {block} threads{shared} "
            f"resident at once, but {where} holds {capacity}; the kernels that wait for each "
            f"other would deadlock, so it is not launched: {remedy}")
