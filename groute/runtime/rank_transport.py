"""How a RankRouter's rows move between the ranks at a flush, and which way a RankContext uses.

A :class:`~groute.runtime.rank_router.RankRouter` does the routing: the policy, the outboxes,
the headers (every segment's destination, row count and metadata, one ``alltoall`` per flush),
the segments delivered. What moves the rows is a transport, one per router, with one method:
:meth:`MpiTransport.exchange` takes this rank's bytes for each rank and the byte counts of the
segments each rank sends here (known from the headers) and gives back, per sending rank, the
bytes that came, in the device's memory, with the event after which they may be read.

- :class:`MpiTransport`: ``MPI_Alltoallv`` of host bytes. On the CPU backend the rows are
  host memory already; on CUDA they are staged: copied to pinned host memory on the device's
  compute stream (which the host then waits for), exchanged, and uploaded into a receive
  buffer on the same stream, whose event the segments carry. Works everywhere, including
  ranks that share a GPU.
- :class:`NcclTransport`: NCCL's point-to-point sends and receives in one group, on the
  compute stream, straight between the GPUs' memories (NVLink within a host). NCCL refuses
  two ranks of one communicator on one GPU, so it runs only where every rank has its own.
  The host waits for the group by polling an event recorded after it, with the context's
  stop flag and timeout: a rank that gives up aborts the communicator, so that no kernel of
  it waits forever on a peer that died.

:func:`choose_transport` picks one per context from where the ranks run (hosts and GPUs, which
the ranks share at start-up, so every rank picks the same); ``GROUTE_RANK_TRANSPORT`` (or the
context's ``transport``) overrides ``auto``.

Received bytes land in buffers of a :class:`ReceivePool` (one per router; CUDA's staged and
NCCL receives): a flush's rows go into one buffer, which goes back to the pool once every
segment made from it has been released. Its buffers are grown, never shrunk.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..waiting import run_bounded, wait_for

#: ``GROUTE_RANK_TRANSPORT`` values
TRANSPORTS = ("auto", "mpi", "nccl")
#: the smallest buffer a pool or a staging area makes (bytes): flushes of a few rows reuse it
MIN_BUFFER_BYTES = 1 << 16


@dataclass(frozen=True)
class RankPlace:
    """Where one rank runs, as it tells the others at start-up: its ``backend``, its
    ``host``, its GPU (``gpu``: the PCI bus id, None on the CPU backend) and why it cannot use
    NCCL (``no_nccl``; None: it can)."""

    backend: str
    host: str
    gpu: str | None = None
    no_nccl: str | None = None


def choose_transport(asked: str, places: list) -> tuple[str, str]:
    """``(transport, why)``: the transport of a context whose ranks run at ``places`` (one
    :class:`RankPlace` per rank, in rank order), ``asked`` being ``"auto"``, ``"mpi"`` or
    ``"nccl"``. ``auto`` is NCCL where every rank has a GPU of its own and NCCL, else MPI.

    Raises
    ------
    ValueError
        For an ``asked`` that is not one of :data:`TRANSPORTS`, and for ``"nccl"`` where it
        cannot run (the CPU backend, ranks sharing a GPU, a rank without NCCL), saying why.

    Examples
    --------
    >>> places = [RankPlace("cuda", "a", "0000:1B:00.0"), RankPlace("cuda", "a", "0000:1B:00.0")]
    >>> choose_transport("auto", places)[0]
    'mpi'
    """
    if asked not in TRANSPORTS:
        raise ValueError(f"the ranks' transport must be one of {', '.join(TRANSPORTS)} "
                         f"(GROUTE_RANK_TRANSPORT), got {asked!r}")
    why_not = _why_not_nccl(places)
    if asked == "nccl" and why_not is not None:
        raise ValueError(f"GROUTE_RANK_TRANSPORT=nccl cannot run here: {why_not}; use mpi or "
                         f"auto")
    if asked == "mpi":
        return "mpi", "asked for (GROUTE_RANK_TRANSPORT=mpi)"
    if asked == "nccl":
        return "nccl", "asked for (GROUTE_RANK_TRANSPORT=nccl)"
    if why_not is not None:
        return "mpi", f"auto: {why_not}"
    return "nccl", "auto: every rank has a GPU of its own"


def _why_not_nccl(places) -> str | None:
    """Why NCCL cannot join these ranks (None: it can)."""
    if any(p.backend != "cuda" for p in places):
        return "NCCL joins GPUs, and the ranks run on the CPU backend"
    if len(places) < 2:
        return "one rank exchanges nothing"
    first = {}
    for rank, p in enumerate(places):
        key = (p.host, p.gpu)
        if key in first:
            return (f"ranks {first[key]} and {rank} share GPU {p.gpu} on host {p.host} (NCCL "
                    f"refuses two ranks on one GPU; the MPI transport stages through the host)")
        first[key] = rank
    for rank, p in enumerate(places):
        if p.no_nccl is not None:
            return f"rank {rank} cannot use NCCL: {p.no_nccl}"
    return None


def _grown(size: int) -> int:
    """The size of a buffer that holds ``size`` bytes: a power of two, at least
    :data:`MIN_BUFFER_BYTES`, so that a few growths cover any run."""
    return max(MIN_BUFFER_BYTES, 1 << max(int(size) - 1, 0).bit_length())


class _Lease:
    """A pool buffer one flush received into, shared by that flush's segments: back in the
    pool once each has been released (:meth:`release`, a PendingSegment's release)."""

    def __init__(self, pool, buffer):
        self.pool = pool
        self.buffer = buffer
        self._users = 0
        self._after = []
        self._lock = threading.Lock()

    def share(self, users: int) -> None:
        """``users`` segments hold the buffer now (none: it goes back at once)."""
        with self._lock:
            self._users = users
        if not users:
            self.pool._give_back(self.buffer, [])

    def release(self, after=None) -> None:
        """One segment is done with the buffer (``after``: once that event has completed)."""
        with self._lock:
            if after is not None:
                self._after.append(after)
            self._users -= 1
            last = self._users == 0
        if last:
            self.pool._give_back(self.buffer, self._after)


class ReceivePool:
    """Byte buffers of ``device`` that ``stream``'s receives write into (module docstring).
    :meth:`take` gives one of at least the bytes asked for; a buffer given back is reused by
    a later :meth:`take`, after ``stream`` waits for the events it was released after. A take
    larger than the pool's buffers makes a larger one, and buffers smaller than the largest
    made are dropped when given back: grown, never shrunk."""

    def __init__(self, device, stream):
        self.device = device
        self.stream = stream
        self.size = 0               # the largest buffer made
        self.made = 0               # buffers made (for tests and stats)
        self._free = []             # (buffer, events to wait for before reuse)
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> _Lease:
        """A buffer of at least ``nbytes`` bytes, as a lease its segments share."""
        with self._lock:
            found = None
            if nbytes <= self.size and self._free:
                found = self._free.pop()
        if found is not None:
            buffer, after = found
            for event in after:         # the last readers of its previous rows
                self.stream.wait_event(event)
            return _Lease(self, buffer)
        size = _grown(nbytes)
        buffer = self.device.empty(size, np.uint8)     # on the compute stream: CuPy's pool
        # reuses a dropped buffer's memory in that stream's order only
        dropped = []
        with self._lock:
            self.made += 1
            if size > self.size:
                self.size = size
                dropped, self._free = self._free, []    # smaller than a flush may need now
        for _, after in dropped:
            self._dropped(after)
        return _Lease(self, buffer)

    def _give_back(self, buffer, after) -> None:
        with self._lock:
            kept = buffer.size >= self.size
            if kept:
                self._free.append((buffer, list(after)))
        if not kept:
            self._dropped(after)

    def _dropped(self, after) -> None:
        """A buffer dropped after ``after`` (its last readers' events): its memory goes back
        to CuPy's pool in the stream's order, so the stream waits for those readers first
        (a reader on another stream could otherwise see it reused)."""
        for event in after:
            self.stream.wait_event(event)


@dataclass
class Received:
    """What a transport's exchange gives back: per sending rank, the bytes it sent here (in
    the device's memory, each segment's after the previous one's), the ``event`` after which
    they may be read (None: already there) and the pool ``lease`` their segments share (None:
    nothing to give back)."""

    per_rank: list
    event: object = None
    lease: _Lease | None = None


def _offsets(counts) -> list[int]:
    out, at = [], 0
    for n in counts:
        out.append(at)
        at += int(n)
    return out


class MpiTransport:
    """Rows through ``MPI_Alltoallv`` (module docstring). ``staged``: the device's memory is
    not the host's (CUDA), so rows are copied through pinned host buffers (grown, never
    shrunk) on ``device``'s compute stream; the host waits for each copy out, bounded by
    ``timeout`` and ``stop``."""

    name = "mpi"

    def __init__(self, ranks, device, *, staged: bool, timeout, stop):
        self.ranks = ranks
        self.device = device
        self.staged = bool(staged)
        self.timeout = timeout
        self.stop = stop
        self.stream = device.compute_stream
        self.pool = ReceivePool(device, self.stream) if self.staged else None
        self._host = {"send": None, "recv": None}

    def _host_buffer(self, which: str, nbytes: int):
        buffer = self._host[which]
        if buffer is None or buffer.size < nbytes:
            buffer = self._host[which] = self.device.host_buffer(_grown(nbytes), np.uint8)
        return buffer

    def exchange(self, blocks, incoming, after, what: str) -> Received:
        """``blocks[j]``: the byte arrays (uint8, C-contiguous, in the device's memory) for
        rank ``j``, in order; ``incoming[s]``: the byte counts of the segments rank ``s``
        sends here; ``after``: events the blocks were written before. Collective: every rank
        calls it at the same flush."""
        out = [sum(int(b.size) for b in box) for box in blocks]
        into = [sum(int(n) for n in sizes) for sizes in incoming]
        if not self.staged:             # host memory: straight to MPI
            for event in after:
                event.synchronize(self.timeout)
            flat = [b for box in blocks for b in box if b.size]
            send = np.concatenate(flat) if flat else np.zeros(0, np.uint8)
            recv = np.empty(sum(into), np.uint8)
            self.ranks.alltoallv_bytes(send, out, recv, into, what)
            return Received([recv[a:a + n] for a, n in zip(_offsets(into), into)])
        stream = self.stream
        for event in after:
            stream.wait_event(event)
        send = self._host_buffer("send", sum(out))
        at = 0
        for box in blocks:
            for b in box:
                if b.size:
                    stream.copy(send[at:at + b.size], b)
                    at += int(b.size)
        # the copies out have landed, and the last flush's upload from the receive buffer too
        stream.record().synchronize(self.timeout)
        recv = self._host_buffer("recv", sum(into))
        self.ranks.alltoallv_bytes(send, out, recv, into, what)
        lease = self.pool.take(sum(into))
        if sum(into):
            stream.copy(lease.buffer[:sum(into)], recv[:sum(into)])
        event = stream.record()
        return Received([lease.buffer[a:a + n] for a, n in zip(_offsets(into), into)], event,
                        lease)


class NcclTransport:
    """Rows through NCCL (module docstring): ``comm`` is this rank's
    :class:`~groute.device.nccl.Communicator` (or anything with its ``group``, ``send``,
    ``recv``, ``check``, ``abort`` and ``aborted``); a segment to this rank itself is copied on
    the device. ``timeout`` and ``stop`` bound the wait for every group."""

    name = "nccl"

    def __init__(self, ranks, device, comm, *, timeout, stop):
        self.ranks = ranks
        self.device = device
        self.comm = comm
        self.timeout = timeout
        self.stop = stop
        self.stream = device.compute_stream
        self.pool = ReceivePool(device, self.stream)

    def connect(self) -> None:
        """A byte to and from every other rank, waited for: NCCL connects a pair of ranks at
        their first send or receive, in a handshake between the two ranks' threads that no
        timeout bounds; made at start-up, while every rank is there (RankContext), it is never
        a later exchange's. The handshake runs on a thread of its own, so that a rank missing
        from it still ends in the context's timeout (the communicator is then aborted, which
        also frees that thread)."""
        k, me, device = self.ranks.size, self.ranks.rank, self.device
        if k < 2:
            return
        out, got = device.zeros(k, np.uint8), device.zeros(k, np.uint8)

        def handshake():
            if device.backend == "cuda":
                from ..device.cuda import make_current
                make_current(device.gpu)        # this thread's first CUDA work: not GPU 0
            with self.comm.group():
                for peer in range(k):
                    if peer != me:
                        self.comm.send(device.address(out[peer:peer + 1]), 1, peer, self.stream)
                        self.comm.recv(device.address(got[peer:peer + 1]), 1, peer, self.stream)
        what = "connecting every pair of ranks"
        try:
            run_bounded(handshake, timeout=self.timeout, stop=self.stop,
                        name=f"groute-nccl-connect-{me}",
                        what=f"{what}: NCCL's handshakes of rank {me} of {k}")
            self._wait(self.stream.record(), what)
        except BaseException:
            self.comm.abort()
            raise

    def exchange(self, blocks, incoming, after, what: str) -> Received:
        """As :meth:`MpiTransport.exchange`: the same arguments and answer."""
        if self.comm.aborted:
            raise RuntimeError(f"{what}: the NCCL communicator of rank {self.ranks.rank} was "
                               f"aborted after an earlier failure; the job cannot exchange "
                               f"again (end it)")
        me, stream, device = self.ranks.rank, self.stream, self.device
        into = [sum(int(n) for n in sizes) for sizes in incoming]
        starts = _offsets(into)
        for event in after:
            stream.wait_event(event)
        lease = self.pool.take(sum(into))
        buffer = lease.buffer
        try:
            with self.comm.group():
                for peer in range(self.ranks.size):
                    if peer == me:
                        continue
                    for b in blocks[peer]:
                        if b.size:
                            self.comm.send(device.address(b), int(b.size), peer, stream)
                    at = starts[peer]
                    for n in incoming[peer]:
                        if n:
                            self.comm.recv(device.address(buffer[at:at + n]), int(n), peer,
                                           stream)
                            at += int(n)
            at = starts[me]
            for b in blocks[me]:
                if b.size:
                    stream.copy(buffer[at:at + b.size], b)
                    at += int(b.size)
            event = stream.record()
            self._wait(event, what)
        except BaseException:
            self.comm.abort()       # no kernel of this rank waits on its peers any more
            raise
        return Received([buffer[a:a + n] for a, n in zip(starts, into)], event, lease)

    def _wait(self, event, what):
        """Until the group's event has completed, asking NCCL for errors found meanwhile (a
        peer that failed); the stop flag or the timeout end it (the caller aborts)."""
        comm = self.comm

        def landed() -> bool:
            comm.check()
            return event.query()
        wait_for(landed, timeout=self.timeout, stop=self.stop,
                 what=f"{what}: the NCCL sends and receives of rank {self.ranks.rank} of "
                      f"{self.ranks.size} (a rank that failed, died or runs another step)")
