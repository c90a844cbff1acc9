"""Answers brought to the host: every device's part copied once, at its final position, into
one host array, in host memory kept for the next answer of its size.

Why: after a run, what a caller waits for is mostly host passes over the answer, not the run.
Each pass over fresh host memory pays its page faults, and a pageable download is no faster;
converting, renumbering and normalising on the host made several such passes over a large
graph's answer (``docs/notes/multi_gpu_costs.md``, S5). So the solvers finish their answers on
the devices (dtype, "unreached", normalisation) and :func:`land_answer` does the one copy
left: each device's part queued on its compute stream into its slice of one host array, every
copy queued before the host waits for them together.

Where that array lives decides what the copy costs (:class:`AnswerLanding`): memory kept
from an earlier answer of the same size, once the caller no longer holds that answer, is
reached at the link's speed (on CUDA it is pinned: no staging, no page faults). A size asked
for the first time lands in fresh pageable memory instead, as before: pinning costs more than
one pageable download, so it is paid only by sizes asked for again. A kept buffer is handed
out again only when no array made from it is alive, so an answer a caller keeps is never
overwritten; two are kept per size, so a caller holding the previous answer while the next
one lands still reuses memory, and past them an answer lands in fresh memory. How much a
context keeps is ``GROUTE_ANSWER_KEEP_BYTES`` (0: nothing, every answer in fresh memory).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from groute.tuning import setting

#: buffers kept per answer size: a caller that holds the last answer while the next one lands
#: (``r = solver.run(s)`` in a loop) alternates between two
PER_SIZE = 2
#: seconds a wait for the downloads polls without sleeping first (a run's answer is due now)
DOWNLOAD_SPIN_S = 0.05


class _Kept:
    """One kept buffer: its size, its memory (a buffer object, not an ndarray: every view of
    an array made from it then keeps that array alive, which is what :meth:`free` watches)
    and a weak reference to the last array handed out over it."""

    __slots__ = ("nbytes", "memory", "handed")

    def __init__(self, nbytes, memory):
        self.nbytes = nbytes
        self.memory = memory
        self.handed = None

    def free(self) -> bool:
        """Whether no array made from this memory is alive (so it may be written again)."""
        return self.handed is None or self.handed() is None


class AnswerLanding:
    """The host arrays a context's answers land in (module docstring): per answer size in
    bytes, up to :data:`PER_SIZE` buffers kept and reused while no answer made from them is
    alive, at most ``keep_bytes`` in all (default ``GROUTE_ANSWER_KEEP_BYTES``; the least
    recently used free ones go first). Thread-safe: two runs finishing at once never get the
    same memory."""

    def __init__(self, keep_bytes: int | None = None):
        self.keep_bytes = int(setting("GROUTE_ANSWER_KEEP_BYTES") if keep_bytes is None
                              else keep_bytes)
        self._lock = threading.Lock()
        self._kept: list[_Kept] = []        # least recently handed out first
        self._asked: set[int] = set()
        self._spoiled: list = []            # memory a copy may still write into: never reused

    def take(self, n: int, dtype, device) -> np.ndarray:
        """A host array for an answer that ``device`` copies into.

        Parameters
        ----------
        n : int
            Its length.
        dtype : numpy dtype
            Its dtype.
        device : Device
            One of the context's devices: it allocates new kept memory
            (:meth:`~groute.device.base.Device.landing_memory`).

        Returns
        -------
        numpy.ndarray
            A kept buffer of this size that is free; else new memory, kept, for a size asked
            for before while there is room; else fresh pageable memory (also where the new
            memory cannot be had: the answer does not fail for it).
        """
        dtype = np.dtype(dtype)
        nbytes = int(n) * dtype.itemsize
        if nbytes == 0:
            return np.empty(n, dtype)
        with self._lock:
            same = [k for k in self._kept if k.nbytes == nbytes]
            kept = next((k for k in same if k.free()), None)
            if kept is None and nbytes in self._asked and len(same) < PER_SIZE \
                    and self._room_for(nbytes):
                try:
                    kept = _Kept(nbytes, device.landing_memory(nbytes))
                except Exception:       # noqa: BLE001 - no pinned memory: land as before
                    self.keep_bytes = min(self.keep_bytes, sum(k.nbytes for k in self._kept))
                else:
                    self._kept.append(kept)
            self._asked.add(nbytes)
            if kept is None:
                return np.empty(n, dtype)
            self._kept.remove(kept)
            self._kept.append(kept)
            out = np.frombuffer(kept.memory, dtype=dtype, count=n)
            kept.handed = weakref.ref(out)
            return out

    def _room_for(self, nbytes: int) -> bool:
        """Whether a new buffer of ``nbytes`` fits under :attr:`keep_bytes` once free buffers
        are let go, least recently used first; they are let go only when it then fits (the
        lock is held)."""
        held = sum(k.nbytes for k in self._kept)
        freeable = sum(k.nbytes for k in self._kept if k.free())
        if held - freeable + nbytes > self.keep_bytes:
            return False
        for kept in list(self._kept):
            if held + nbytes <= self.keep_bytes:
                break
            if kept.free():
                self._kept.remove(kept)
                held -= kept.nbytes
        return True

    def spoil(self, array) -> None:
        """Never hand out again the kept memory under ``array`` (an array :meth:`take`
        handed out, or a view of one: a copy into it may still be in flight after a failed
        wait); it is held until :meth:`release`."""
        under = [array, getattr(array, "base", None)]
        with self._lock:
            for kept in list(self._kept):
                handed = kept.handed() if kept.handed is not None else None
                if handed is not None and any(handed is a for a in under):
                    self._kept.remove(kept)
                    self._spoiled.append(kept.memory)

    def fill(self, out, held: list, timeout, start: int = 0) -> None:
        """Copy the parts of ``held`` into ``out`` from row ``start`` on (:func:`copy_parts`);
        where that fails, :meth:`spoil` ``out`` (a copy may still write into it) and raise.

        Parameters
        ----------
        out : numpy.ndarray
            An array this landing handed out (:meth:`take`), or a reshaped view of one.
        held : list of (Device, array)
            The parts, in the order they land.
        timeout : float or None
            How long the host waits for the copies.
        start : int
            The row of ``out`` the first part lands at.
        """
        try:
            copy_parts(out[start:], held, timeout)
        except BaseException:
            self.spoil(out)
            raise

    @property
    def kept_bytes(self) -> int:
        """Bytes of buffers kept now."""
        with self._lock:
            return sum(k.nbytes for k in self._kept)

    def release(self) -> None:
        """Let every kept buffer go (the context is shutting down); arrays still held keep
        their own memory alive."""
        with self._lock:
            self._kept.clear()
            self._asked.clear()
            self._spoiled.clear()


def _land_across_ranks(ctx, held: list, what: str, renumbering=None) -> np.ndarray:
    """Every rank's parts of an answer (``held``: this rank's ``(device, part)`` pairs, maybe
    none), one after another in rank order, on every rank, put in the graph's order by
    ``renumbering`` where one is given. The ranks agree on the dtype, row shape and rows of
    each rank's parts, and say how much memory their GPUs have free (one small allgather).
    Where the ranks map each other's memory and can afford it, each rank copies every rank's
    parts into one array on its GPU
    (:class:`~groute.runtime.answer_exchange.DeviceAnswerExchange`), renumbers it there and
    downloads it once (:func:`land_local`). Else each takes the whole answer's host array
    (:class:`AnswerLanding`), copies its own parts straight into their slice, and one
    allgatherv in place fills the others'. The answer is most of what the ranks move after a
    run, and each extra host copy of it (a staging download, a receive buffer, a
    concatenation) costs as much as the move."""
    from groute.runtime.answer_exchange import DeviceAnswerExchange
    ranks = ctx.ranks
    exchange = DeviceAnswerExchange.for_context(ctx)
    local, free, failure = None, None, None
    try:        # what fails here fails on every rank, after the meeting below
        if held:
            dtypes = {str(p.dtype) for _, p in held}
            shapes = {p.shape[1:] for _, p in held}
            if len(dtypes) > 1 or len(shapes) > 1:
                raise TypeError(f"{what}: the devices' parts differ in dtype or row shape "
                                f"({sorted(dtypes)}, {sorted(shapes)})")
            local = (held[0][1].dtype.str, held[0][1].shape[1:],
                     sum(int(p.shape[0]) for _, p in held))
        free = None if exchange is None else exchange.free()
    except Exception as exc:  # noqa: BLE001 - raised after every rank heard it
        failure = exc
    told = ranks.allgather((local, free, None if failure is None
                            else f"{type(failure).__name__}: {failure}"),
                           what=f"the dtype of {what}")
    if failure is not None:
        try:
            raise failure
        finally:
            failure = None    # this frame must not keep it: its traceback holds the frame
    failed = [(r, why) for r, (_, _, why) in enumerate(told) if why]
    if failed:
        r, why = failed[0]
        raise RuntimeError(f"{what}: {ctx.devices[r].name} (rank {r}) could not describe its "
                           f"part: {why}")
    kinds = [kind for kind, _, _ in told]
    agreed = {k[:2] for k in kinds if k is not None}
    if not agreed:
        raise ValueError(f"{what}: no device holds a part")
    if len(agreed) > 1:
        raise TypeError(f"{what}: the ranks' parts differ in dtype or row shape "
                        f"({sorted(agreed)})")
    dtype, row_shape = agreed.pop()
    dtype = np.dtype(dtype)
    per_row = int(np.prod(row_shape, dtype=np.int64))
    rows = [0 if k is None else k[2] for k in kinds]
    nbytes = [n * per_row * dtype.itemsize for n in rows]
    if exchange is not None and exchange.fits(nbytes, [free for _, free, _ in told],
                                              copies=1 if renumbering is None else 2):
        whole = exchange.gather(nbytes, held).view(dtype).reshape((sum(rows), *row_shape))
        if renumbering is not None:
            whole = renumbering.on_device(whole)
        return land_local(ctx, ctx.local_device, whole)
    flat = ctx.answer_landing.take(sum(rows) * per_row, dtype, ctx.local_device)
    out = flat.reshape((sum(rows), *row_shape))
    ctx.answer_landing.fill(out, held, ctx.timeout, start=sum(rows[:ranks.rank]))
    ranks.allgatherv_in_place(flat.view(np.uint8), nbytes, what=f"sharing {what}")
    return out if renumbering is None else renumbering.apply(out)


def land_local(ctx, device, array) -> np.ndarray:
    """``array`` (of ``device``, one of this process's) in a host array of ``ctx``'s landing
    (:class:`AnswerLanding`): copied once on its compute stream after the work queued there,
    into kept memory where the size came before. No meeting of ranks: this process's copy
    only.

    Parameters
    ----------
    ctx : Context
        Its ``answer_landing`` provides the array.
    device : Device
        The device holding ``array``.
    array : array
        A contiguous array of ``device`` (rows of any shape).

    Returns
    -------
    numpy.ndarray
        A host array equal to ``array``.
    """
    flat = ctx.answer_landing.take(int(np.prod(array.shape, dtype=np.int64)), array.dtype,
                                   device)
    out = flat.reshape(array.shape)
    ctx.answer_landing.fill(out, [(device, array)], ctx.timeout)
    return out


def copy_parts(out: np.ndarray, held: list, timeout) -> None:
    """Copy each ``(device, part)`` of ``held`` into ``out``, one after another from its
    start: each on its device's compute stream after the work queued there, every copy queued
    before the host waits for them together (every download of an answer goes this way).

    Parameters
    ----------
    out : numpy.ndarray
        Host memory at least as long as the parts together (rows along the first axis).
    held : list of (Device, array)
        The parts, in the order they land, each with the device whose stream copies it.
    timeout : float or None
        How long the host waits for the copies (the context's timeout).
    """
    copied, lo = [], 0
    for dev, part in held:
        size = int(part.shape[0])
        stream = dev.compute_stream
        stream.copy(out[lo:lo + size], part)
        copied.append(stream.record())
        lo += size
    if copied:
        type(copied[0]).wait_all(copied, timeout, spin=DOWNLOAD_SPIN_S)


def land_answer(ctx, parts, what: str = "the answer", renumbering=None) -> np.ndarray:
    """The host array of every device's part of an answer, in device order.

    Parameters
    ----------
    ctx : Context
        The run's context; its ``answer_landing`` (an :class:`AnswerLanding`) provides the
        array.
    parts : list
        Per device of ``ctx.devices``: its part (an array of that device, finished: the
        answer's dtype and values, contiguous), or None for a device holding none (across
        processes: every device of another rank).
    what : str
        What the parts are, for an error while sharing them across processes.
    renumbering : WholeAnswerRenumbering, optional
        Where the parts hold new ids in device order: puts the whole answer in the graph's
        order (:class:`~groute.runtime.renumber.WholeAnswerRenumbering`, on one device of
        this process) before it is returned.

    Returns
    -------
    numpy.ndarray
        The parts one after another (put in the graph's order by ``renumbering``). In one
        process each part is copied once into its slice, on its device's compute stream after
        the work queued there, and the host waits for every copy together (a failed device
        raises as any wait on it does). Across processes (a
        :class:`~groute.runtime.rank_context.RankContext`) every rank gets all of them
        (:func:`_land_across_ranks`).
    """
    held = [(dev, p) for dev, p in zip(ctx.devices, parts) if p is not None]
    if getattr(ctx, "ranks", None) is not None:
        return _land_across_ranks(ctx, held, what, renumbering)
    if not held:
        raise ValueError(f"{what}: no device holds a part")
    dtype = held[0][1].dtype
    if any(p.dtype != dtype for _, p in held):
        raise TypeError(f"{what}: the devices' parts differ in dtype "
                        f"({sorted({str(p.dtype) for _, p in held})})")
    out = ctx.answer_landing.take(sum(int(p.shape[0]) for _, p in held), dtype, held[0][0])
    ctx.answer_landing.fill(out, held, ctx.timeout)
    return out if renumbering is None else renumbering.apply(out)
