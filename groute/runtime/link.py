"""Link: a packetized, multi-buffered, asynchronous transfer channel between two endpoints.

``Link(src, dst, packet_size, num_buffers)`` owns ``num_buffers`` receive buffers of
``packet_size`` elements on ``dst``. A send splits the segment into packets and copies each, on
the link's own stream, into the next free receive buffer, then hands the receiver a
:class:`~groute.runtime.segment.PendingSegment`. A buffer becomes free again only when the receiver
releases it, so a slow receiver slows the sender down (back-pressure) instead of growing memory.
Packets arrive in send order. Closing a link lets the queued sends finish, then ends the
receiver's stream (``receive`` returns ``None``).

The host's cost per packet is what bounds a link at small packets, so the path a packet takes is
kept to what CUDA itself needs: the receive buffers are the slots of one allocation, and a copy
is one runtime call at addresses computed from the slot and the offset
(:meth:`groute.device.base.Stream.copy_plan`), recorded into an event kept for the copy stream
(:class:`~groute.runtime.copy_events.CopyEvents`), recorded again once every segment it
completed has been released and its copy is done, rather than made anew. For small packets (at
most :data:`COALESCE_PACKET_BYTES`) the queued packets of one send that find consecutive free
slots go as one copy of at most :data:`COALESCE_RUN_BYTES` (the ring's slots are consecutive
rows): each still arrives as a :class:`~groute.runtime.segment.PendingSegment` of its own, and
the packets of one copy share its event, so each is ready when the whole copy is. A receiver that takes segments longer
than one packet says so (``batching=True``): then the queued packets that find consecutive
free slots go as one copy, whatever their size, and arrive as one PendingSegment
(``metadata["packets"]`` of them), released at once. ``receive`` takes a segment that is there
without a lock, as ``poll`` does.

Who issues the copies: whichever thread makes progress possible, without waiting and without
waking another thread. ``send`` issues, on the caller's thread, as many queued packets as there
are free buffers; a receiver's ``release`` issues the next queued packet into the buffer it
frees. The copies stay asynchronous, so neither call blocks: ``send`` still returns at once and
never waits for back-pressure, and each call issues at most ``num_buffers`` packets. Small
packets are the exception to "at once" where the link's receiver is its own (not a router
output's queue): while the receiver still has segments to take, a release leaves the queued
packets; its release of the last segment handed to it, or its ``receive``/``poll`` finding
none (both may then issue copies), or the sender asking its :class:`SendHandle`, or at the
latest the pump's next visit, issues them into every buffer freed meanwhile, as few copies
(whole runs of the ring's slots). Over NVLink a small packet's copy takes the GPU less time
than its runtime call takes the host, so one copy per packet would make the host the bound,
and the receiver has work in hand while they wait. One thread
at a time issues (the ``_issuing`` token), which keeps packets in send order on the stream. The
pump only picks up what those calls leave (free buffers and queued packets after a caller used
up its share), ends the stream once the link is closed and drained, ends the link when its
context stops, and turns a receiver that holds every buffer for longer than the timeout into a
:class:`WaitTimeout`. Waking a thread costs a scheduler round trip and a GIL hand-off, so the
callers do the common work themselves.

A packet costs the host a copy call and an event record, no more: no device is made current
(the copy and the record name their stream), the buffers a release frees are taken in the same
lock hold as the release, and a copy plan is made once for consecutive sends of one array.
:func:`send_all` sends one array on several links (a Router's broadcast): the links that share
a copy stream (one router input's) and have room take it together, one wait for the producer,
their copies one after another and one event for all of them.

One pump thread serves every link whose copies a device issues (:class:`_Pump`), so host
threads grow with the number of devices, not with the number of links (a router or worklist
over K devices has K*(K-1) links). Each link keeps its own copy stream where streams are cheap
(CUDA); see :meth:`groute.device.base.Device.link_stream`.
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
import math
import threading
import time
import weakref

import numpy as np

from ..config import resolve_timeout
from ..errors import LinkClosed, WaitTimeout, again, to_keep
from ..waiting import POLL_INTERVAL, stopped, wait_for
from .copy_events import CopyEvents
from .endpoint import Endpoint
from .pump import _Pump
from .device_link import DeviceLink
from .segment import (PendingSegment, SegmentReceiver, buffer_count, check_buffers_fit,
                      check_send_extras, item_dtype, item_shape_of, positive_int)

log = logging.getLogger(__name__)
_LINK_IDS = itertools.count()

#: Packets of at most this many bytes, on a link whose receiver is its own, are coalesced: the
#: queued ones in consecutive free slots go as one copy, and after a release they wait until the
#: receiver releases the last segment handed to it (or finds none, or the sender asks its
#: handle, or the pump visits), so that the buffers freed meanwhile fill with few copies (module
#: docstring). Over NVLink such a copy takes the GPU less time than its runtime call takes the
#: host (docs/TOPOLOGY.md has both); larger packets each go into the buffer freed for it at once,
#: to overlap the receiver's work, and have a copy of their own, ready on its own.
COALESCE_PACKET_BYTES = 1 << 20
#: The most bytes one coalesced copy moves (a run of slots): its packets are ready only when all
#: of it is, so a long run would delay the first of them.
COALESCE_RUN_BYTES = 4 << 20


def _ended_output(batch) -> None:
    """Where a router's link delivers once its stream has ended: nowhere (a stopped link's
    late copies belong to the computation that failed)."""


def _release_into(link_ref, index, count, after=None) -> None:
    """A segment's release (``functools.partial`` of it, per segment): its slots go back to
    the link it refers to weakly (``link_ref``); once the link is gone nothing waits for
    them, and its buffers go with the last view of them."""
    link = link_ref()
    if link is not None:
        link._release(index, count, after)


class SendHandle:
    """Completes when every packet of one send has been copied into a receive buffer.

    Its event is the last copy's, which the stream records again for a later copy once that
    copy's segments are released and it is done: a handle first asked after that waits for the
    later copy too (never less than its own). ``nudge``: called while the send is not yet
    issued, before asking again (the link issues the small packets its receiver's releases
    left queued, so a sender waiting for its handle does not wait for the pump)."""

    __slots__ = ("size", "_issued", "_event", "_error", "_done", "_nudge")

    def __init__(self, size: int, nudge=None):
        self.size = size
        self._issued = False   # every packet's copy is on the stream, or the send failed
        self._event = None
        self._error: BaseException | None = None
        self._done = False     # seen done once: stays done
        self._nudge = nudge

    def _finish(self, event):
        self._event = event
        self._issued = True

    def _fail(self, exc):
        self._error = exc
        self._issued = True

    def _is_issued(self) -> bool:
        if not self._issued and self._nudge is not None:
            self._nudge()
        return self._issued

    def done(self) -> bool:
        if self._done:
            return True
        if not self._is_issued():
            return False
        if self._error is not None:
            raise again(self._error)
        self._done = self._event is None or self._event.query()
        return self._done

    def wait(self, timeout=None, stop=None) -> None:
        """Block until the source data may be reused."""
        wait_for(self._is_issued, what=f"a send of {self.size} elements to be issued",
                 timeout=timeout, stop=stop)
        if self._error is not None:
            raise again(self._error)
        if self._event is not None and not self._done:
            self._event.synchronize(timeout)
        self._done = True

    @property
    def event(self):
        """The copy event of the last packet, once issued; for an empty send, an event after the
        link's copies issued before it (None when it had issued none)."""
        return self._event


class _Send:
    """A send and how far its packets have been issued."""

    __slots__ = ("data", "event", "metadata", "handle", "size", "offset", "packet", "last", "plan")

    def __init__(self, data, event, metadata, handle):
        self.data = data
        self.event = event        # the first copy waits for it
        self.metadata = metadata
        self.handle = handle
        self.size = handle.size
        self.offset = 0           # the next element to copy
        self.packet = 0           # the index of the next packet
        self.last = None          # the copy event of the last packet issued
        self.plan = None          # the copy plan from ``data`` into the receive slots


#: the options of a host-initiated Link that a device-initiated one refuses
HOST_INITIATED_ONLY = ("batching", "copy_on", "deliver", "share_stream")


class Link(SegmentReceiver):
    """A point-to-point transfer channel; see the module docstring.

    ``batching``: the receiver takes segments of several packets (of one send, in consecutive
    receive slots; ``metadata["packets"]`` says how many), so that queued packets go as one
    copy. ``initiated="device"``: kernels send, not the host: the link is a
    :class:`~groute.runtime.device_link.DeviceLink` (see there; ``batching`` and ``copy_on``
    do not apply, and are refused).
    """

    def __new__(cls, *args, initiated: str = "host", **kwargs):
        if initiated == "device":
            host_only = [key for key in HOST_INITIATED_ONLY if key in kwargs]
            if host_only:
                raise TypeError(f"{', '.join(host_only)}: for host-initiated Links only (with "
                                f"initiated='device' kernels send, packet by packet, from the "
                                f"source device)")
            return DeviceLink(*args, **kwargs)
        if initiated != "host":
            raise ValueError(f"initiated must be 'host' or 'device', got {initiated!r}")
        return super().__new__(cls)

    def __init__(self, src, dst, packet_size: int, num_buffers: int = 2, *, dtype=np.int32,
                 item_shape=(), ctx=None, name: str | None = None, deliver=None, copy_on="src",
                 batching: bool = False, share_stream=None, initiated: str = "host"):
        if ctx is not None:
            ctx.admit()     # a link made after a failed run carries the next run's
        self.packet_size = positive_int("packet_size", packet_size)
        self.num_buffers = buffer_count(num_buffers)
        self.src = Endpoint.of(src)
        self.dst = Endpoint.of(dst)
        if self.src.is_host and self.dst.is_host:
            raise ValueError("a Link needs a device at one end at least (both ends are the host)")
        if copy_on not in ("src", "dst"):
            raise ValueError(f"copy_on must be 'src' or 'dst', got {copy_on!r}")
        self.dtype = item_dtype(dtype)
        self.item_shape = item_shape_of(item_shape)
        self.batching = bool(batching)
        self.name = name or f"link{next(_LINK_IDS)}[{self.src}->{self.dst}]"
        check_buffers_fit(self.name, None if self.dst.is_host else self.dst.device,
                          self.packet_size * self.num_buffers * self.dtype.itemsize
                          * math.prod(self.item_shape))
        self.ctx = ctx
        self.timeout = resolve_timeout(ctx.timeout if ctx is not None else None)
        self._copier = copier = self.src.device if (copy_on == "src" and not self.src.is_host) or self.dst.is_host \
            else self.dst.device
        self.stream = copier.link_stream(f"{self.name}", share=share_stream)
        self._events = CopyEvents.of(self.stream)
        self.stop = copier.stop_event
        p, b = self.packet_size, self.num_buffers
        shape = (p * b, *self.item_shape)
        # the receive slots: one allocation, slot i its rows [i * P, (i + 1) * P)
        self._ring = self.src.device.host_buffer(shape, self.dtype) if self.dst.is_host \
            else self.dst.device.receive_buffer(shape, self.dtype)
        self._slots = [self._ring[i * p:(i + 1) * p] for i in range(b)]
        self._copy_events = [None] * b   # the event of the copy that filled each slot
        self._after = [None] * b         # what the next copy into each slot must wait for
        self._row_bytes = self.dtype.itemsize * math.prod(self.item_shape)
        # a receiver of its own (not a router output's queue), small packets: coalesced
        packet_bytes = p * self._row_bytes
        self._coalesce = deliver is None and packet_bytes <= COALESCE_PACKET_BYTES
        # the most slots one copy fills
        self._run_slots = b if self.batching else \
            max(1, COALESCE_RUN_BYTES // max(packet_bytes, 1)) if self._coalesce else 1
        self._plan = None                # (the last array sent, its copy plan into the slots)

        # receivers wait on _arrival; the pump is woken through its own condition (_wake_pump)
        self._lock = threading.Lock()
        self._arrival = threading.Condition(self._lock)
        self._free = collections.deque(range(b))   # free slots, in the order they came back
        self._is_free = bytearray(b"\x01") * b
        # segments never released (a receiver that stopped, a failed link) hold their copies'
        # events until the link is gone
        finalizer = weakref.finalize(self, self._events.forget, self._copy_events, self._is_free)
        finalizer.atexit = False
        self._weakly = weakref.ref(self)    # what its segments' releases hold
        self._reserved = 0          # packets sent but not yet given a buffer
        self._sends = collections.deque()  # sends not fully issued, in send order; head first
        self._issuing = False       # the token: held by the one thread issuing copies
        self._released = 0          # releases so far (the pump's back-pressure watch)
        self._closed = False
        self._done = False          # no more packets: closed and drained, stopped, or failed
        self._error: BaseException | None = None
        self._received = collections.deque()
        self._deliver = deliver
        self._room_listeners: list = []
        self._watch = None   # (releases seen, since when) while every buffer is held and sends wait
        self.stats = {"segments": 0, "packets": 0, "copies": 0, "elements": 0, "bytes": 0}
        self._pump = _Pump.serve(self)

    def __repr__(self):
        return f"<Link {self.name} P={self.packet_size} B={self.num_buffers}>"

    # sending ----------------------------------------------------------------------------------
    def send(self, data, *, event=None, metadata=None) -> SendHandle:
        """Queue ``data`` (a C-contiguous array on the source endpoint) for transfer; returns
        at once.

        ``event``: the copy waits for it (e.g. the kernel that produced ``data``). The caller
        must not overwrite ``data`` until the returned handle is done. Packets that find a free
        buffer are issued (asynchronously) before this returns. An empty ``data`` is no packet:
        its handle is done once the sends before it are, and nothing reaches the receiver,
        ``metadata`` included (a signal with nothing to carry is an array of one item).
        """
        data = self._check_send(data, event, metadata)
        n = int(data.shape[0])
        packets = -(-n // self.packet_size)
        handle = SendHandle(n, self._issue_deferred if self._coalesce else None)
        entry = _Send(data, event, dict(metadata) if metadata else {}, handle)
        with self._lock:
            if self._closed:
                raise LinkClosed(f"{self.name} is closed; no more sends")
            if self._error is not None:
                raise again(self._error)
            if self._done:
                raise stopped(self.stop, f"{self.name} stopped; no more sends")
            self._reserved += packets
            self._sends.append(entry)
            if not self._can_issue():
                # Someone else is issuing (it looks for more work before it stops), or every
                # buffer is held (the release that frees one issues the next packet).
                return handle
            self._issuing = True
            work = self._take_next(None, None, self.num_buffers)
        self._issue_and_yield(self.num_buffers, raise_errors=True, work=work)
        return handle

    def _check_send(self, data, event=None, metadata=None):
        """``data`` if a send of it (with ``event`` and ``metadata``) is one this link carries;
        else a TypeError or ValueError naming the link (a router checks its sends so too,
        before its policy sees them)."""
        check_send_extras(self.name, event, metadata)
        if not hasattr(data, "shape") or not hasattr(data, "dtype"):
            raise TypeError(f"{self.name}: send takes an array, got {type(data).__name__}")
        if data.dtype != self.dtype:
            raise ValueError(f"{self.name}: carries {self.dtype}, got {data.dtype}")
        if data.ndim == 0:
            raise ValueError(f"{self.name}: send takes an array of items, got a 0-d array (one "
                             f"item is an array of one: x.reshape(1))")
        if tuple(data.shape[1:]) != self.item_shape:
            raise ValueError(f"{self.name}: items have shape {self.item_shape}, got {tuple(data.shape[1:])}")
        flags = getattr(data, "flags", None)
        if flags is not None and not flags.c_contiguous:
            raise ValueError(f"{self.name}: send takes a C-contiguous array (a packet's copy "
                             f"moves its rows as one block of memory); got a strided view: "
                             f"send a contiguous copy of it")
        return data

    def has_room(self) -> bool:
        """True when a send now would find a free receive buffer (used by routers)."""
        return len(self._free) - self._reserved > 0   # a snapshot: the router decides on it

    def backlog(self) -> int:
        """Packets queued or held by the receiver; lower means more available."""
        with self._lock:
            return self.num_buffers - len(self._free) + self._reserved

    def held(self) -> int:
        """Receive buffers holding a packet the receiver has not released."""
        with self._lock:
            return self.num_buffers - len(self._free)

    def held_by_receiver(self) -> str:
        """Why a receiver waits in vain when it holds every receive buffer while sends wait
        for one (a receive that timed out says so): that, or "" (lock held or not: a
        snapshot)."""
        if not (self._sends and not self._free):
            return ""
        return (f" (the receiver holds all {self.num_buffers} receive buffers of {self.name}, "
                f"which sends wait for: release() each PendingSegment after use)")

    def add_room_listener(self, cond: threading.Condition) -> None:
        self._room_listeners.append(cond)

    def close(self) -> None:
        """No more sends; queued ones still arrive, then the receiver sees the end."""
        with self._lock:
            self._closed = True
        self._pump.wake(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def finished(self) -> bool:
        """No more packets will arrive: closed and drained, stopped, or failed."""
        return self._done

    # issuing copies -----------------------------------------------------------------------------
    def _can_issue(self) -> bool:
        """A queued packet could be issued now by whoever takes the token (lock held)."""
        if self._issuing or not self._sends or self._done:
            return False
        head = self._sends[0]
        return bool(self._free) or head.offset >= head.size   # an empty send needs no buffer

    def _take_next(self, head, batch, budget):
        """The token holder's step, lock held: hand ``batch`` over, retire ``head`` once every
        packet of it is issued, and take the free buffers for the next (at most ``budget``)
        packets: ``(send, runs, packets)``. With nothing to issue now, give the token back:
        ``(None, wake, 0)``, ``wake`` true when work is left that nobody will pick up (the
        caller used its share) or a closed link is now drained: the pump's turn."""
        if batch and self._deliver is None:
            self._received.extend(batch)
            self._arrival.notify_all()
        if head is not None and head.offset >= head.size and self._sends and self._sends[0] is head:
            self._sends.popleft()
        head = self._sends[0] if self._sends and not self._done else None
        k = left = 0
        if head is not None and budget > 0:
            left = -(-(head.size - head.offset) // self.packet_size)
            k = min(left, budget, len(self._free))
        if head is None or budget <= 0 or (left and not k):
            self._issuing = False
            return None, self._can_issue() or (self._closed and not self._sends), 0
        self._reserved -= k
        return head, self._take(k), k

    def _issue_and_yield(self, budget, *, raise_errors, work=None):
        """Holding the token: issue up to ``budget`` queued packets in order, without waiting
        for a buffer, hand the packets over, then give the token back. ``work``: the first
        step (:meth:`_take_next`), taken in the caller's own hold of the lock."""
        head, batch = None, None
        try:
            while True:
                if work is None:
                    with self._lock:
                        work = self._take_next(head, batch, budget)
                head, runs, k = work
                work = None
                if head is None:
                    wake = runs
                    break
                budget -= k
                batch = self._issue(head, runs)
        except BaseException as exc:  # noqa: BLE001 - the link is broken; tell everyone
            self._fail(exc)
            if raise_errors:
                raise
            return
        if wake:
            self._pump.wake(self)

    def _take(self, k):
        """``k`` free slots as runs ``(first, count)`` (lock held), each run as long as the
        slots after its first are free too, up to the link's run length: one copy fills it."""
        free, is_free, runs = self._free, self._is_free, []
        while k > 0:
            first = free.popleft()
            end = min(first + min(k, self._run_slots), self.num_buffers)
            stop = is_free.find(0, first + 1, end)      # the run ends at the first taken slot
            n = (end if stop < 0 else stop) - first
            is_free[first:first + n] = bytes(n)
            if n > 1:
                rest = range(first + 1, first + n)
                if list(itertools.islice(free, n - 1)) == list(rest):   # back in order: usual
                    for _ in rest:
                        free.popleft()
                else:
                    for i in rest:
                        free.remove(i)
            runs.append((first, n))
            k -= n
        return runs

    def _issue(self, entry, runs):
        """Copy the next packets of ``entry`` into the slot ``runs`` (one copy each); return
        their PendingSegments for the caller to hand over (a ``deliver`` callback gets them
        here). Only the token holder calls this. No device is made current: a copy names its
        stream, and the stream calls that need their device select it themselves."""
        batch = []
        try:
            if runs:
                self._copy_runs(entry, runs, batch)
        except BaseException:
            if entry.last is not None:   # copies already on the stream still read the source
                self._events.hold(entry.last, entry.data)
            if batch:  # a failure part-way: what is already on the stream still arrives
                self._hand_over(batch)
            raise
        if entry.offset >= entry.size:
            self.stats["segments"] += 1
            if entry.last is not None:
                self._events.hold(entry.last, entry.data)
            elif self.stats["packets"]:
                # an empty send copies nothing, but its handle is a fence: done once the copies
                # issued before it (on this stream, in order) are
                entry.last = self._events.record(0)
            entry.handle._finish(entry.last)
        if self._deliver is not None:
            self._deliver(batch)
            return None
        return batch

    def _copy_runs(self, entry, runs, batch):
        """The copies of :meth:`_issue`, one per run, an event each (a kept one recorded
        again, :class:`~groute.runtime.copy_events.CopyEvents`); a run's PendingSegments go
        into ``batch`` as soon as its copy is on the stream."""
        stream, p, events = self.stream, self.packet_size, self._events
        if entry.packet == 0 and entry.event is not None:
            stream.wait_event(entry.event)
        if entry.plan is None:
            entry.plan = self._plan_for(entry.data)
        for first, n in runs:
            off = entry.offset
            m = min(n * p, entry.size - off)
            self._copy_run(entry.plan, first, n, off, m)
            event = entry.last = events.record(n)
            batch.extend(self._arrived(first, n, off, m, entry.packet, entry.size, entry.metadata, event))
            entry.offset = off + m
            entry.packet += n

    def _plan_for(self, data):
        """The copy plan from ``data`` into the receive slots, made once for consecutive sends
        of the same array (kept, with the array, until another is sent or the link ends).
        Token holder only."""
        cached = self._plan
        if cached is not None and cached[0] is data:
            return cached[1]
        plan = self.stream.copy_plan(self._ring, data)
        self._plan = (data, plan)
        return plan

    def _copy_run(self, plan, first, n, off, m):
        """Copy ``m`` rows of a send from row ``off`` into the slots ``first``.. ``first + n - 1``,
        once what their releases wait for is done. Token holder only."""
        after = self._after
        if after[first:first + n].count(None) != n:
            waited = None
            for i in range(first, first + n):
                if after[i] is not None and after[i] is not waited:
                    waited = after[i]        # a batch's slots share their release's event
                    self.stream.wait_event(waited)
            after[first:first + n] = [None] * n
        plan(first * self.packet_size, off, m)

    def _arrived(self, first, n, off, m, packet, size, metadata, event):
        """The PendingSegments of the rows ``off``.. ``off + m`` of a send of ``size`` (from its
        packet number ``packet``) that one copy, completed by ``event``, put in the slots
        ``first``..: one for the run where the receiver batches, else one per packet."""
        p = self.packet_size
        self._copy_events[first:first + n] = [event] * n
        stats = self.stats
        stats["copies"] += 1
        stats["packets"] += n
        stats["elements"] += m
        stats["bytes"] += m * self._row_bytes
        end, src = off + m, self.src
        if self.batching and n > 1:
            return [PendingSegment(self._ring[first * p:first * p + m], event, metadata,
                                   release=functools.partial(_release_into, self._weakly, first,
                                                             n),
                                   source=src, packet=(off, packet, n, end >= size, size))]
        # each segment's release made here, not kept by the link, and holding the link weakly:
        # the link's bound methods, kept by itself or by the segments it queues for a receiver,
        # would be a cycle, kept (receive buffers and all) until Python's garbage collector runs
        packets, slots, link, out = int(self.batching), self._slots, self._weakly, []
        for i in range(first, first + n):
            rows = min(p, end - off)
            out.append(PendingSegment(slots[i] if rows == p else slots[i][:rows], event, metadata,
                                      release=functools.partial(_release_into, link, i, 1),
                                      source=src,
                                      packet=(off, packet, packets, off + rows >= size, size)))
            off += rows
            packet += 1
        return out

    # sending with other links (send_all) ------------------------------------------------------
    def _take_all(self, packets):
        """For a send served together with other links' (:func:`send_all`): when this link is
        open and idle (no token holder, nothing queued) with a free buffer for each of
        ``packets``, take the token and the buffers: their runs; else None."""
        with self._lock:
            if self._closed or self._error is not None or self._done or self._issuing \
                    or self._sends or len(self._free) < packets:
                return None
            self._issuing = True
            return self._take(packets)

    def _hand_over_and_yield(self, batch):
        """After a send served together with other links': hand ``batch`` over and give the
        token back, issuing first what was queued meanwhile."""
        if self._deliver is not None:
            self._deliver(batch)
            batch = None
        with self._lock:
            work = self._take_next(None, batch, self.num_buffers)
        if work[0] is not None:
            self._issue_and_yield(self.num_buffers, raise_errors=False, work=work)
        elif work[1]:
            self._pump.wake(self)

    def _release(self, index, count, after=None):
        """Slots ``index``.. (``count`` of them) free again for the next copy (a segment's
        release, through :func:`_release_into`), once ``after`` (an event) has fired."""
        # The next copy into these slots goes on the same stream as the copy that filled them,
        # so waiting for that copy's own event (the usual ``release(after=pending.event)``) is free.
        if after is not None and after is self._copy_events[index]:
            after = None
        end = index + count
        with self._lock:
            self._after[index:end] = [after] * count
            self._is_free[index:end] = b"\x01" * count
            # the slots' events: a batch's share one (one count for all of them)
            copy_events = self._copy_events
            held = copy_events[index:end]
            event = held[0]
            if held.count(event) == count:
                self._events.released(event, count)
            else:
                n = 0
                for each in held:
                    if each is not event:
                        self._events.released(event, n)
                        event, n = each, 0
                    n += 1
                self._events.released(event, n)
            copy_events[index:end] = [None] * count
            self._free.extend(range(index, end))
            self._released += 1
            work = None
            # the next queued packet goes into this buffer, from here; small ones wait while
            # the receiver has segments to take (its release of the last, its finding none,
            # the sender asking its handle, or the pump's visit issues them)
            if self._can_issue() and not (self._coalesce and self._received):
                self._issuing = True
                work = self._take_next(None, None, self.num_buffers)
        if work is not None:
            self._issue_and_yield(self.num_buffers, raise_errors=False, work=work)
        for cond in self._room_listeners:
            with cond:
                cond.notify_all()

    def _fail(self, exc):
        """Issuing failed: the link is broken. Fail every queued send; the pump ends the stream."""
        with self._lock:
            if self._error is None:     # without the frames, which hold this link
                self._error = to_keep(exc)
            self._issuing = False
            for entry in self._sends:
                entry.handle._fail(self._error)
            self._sends.clear()
            self._arrival.notify_all()
        self._pump.wake(self)
        log.debug("%s failed: %r", self.name, exc)
        if self.ctx is not None:        # the kept copy: the context refers to this link
            self.ctx.fail(self.name, self._error)

    # the pump's turn ------------------------------------------------------------------------------
    def _pump_turn(self) -> bool:
        """What the pump does for this link when woken or on its periodic visit; True once the
        link has ended (closed and drained, failed or stopped) and needs the pump no more."""
        drained = False
        try:
            with self._lock:
                if self._done:
                    return True
                if self._error is None:
                    drained = self._closed and not self._sends and not self._issuing
                    if not drained:
                        if self.stop.is_set():   # receivers must not take this for the end
                            raise stopped(self.stop, f"{self.name} stopped with sends still queued"
                                          if self._sends else f"{self.name} stopped")
                        if not self._can_issue():
                            self._watch_back_pressure()
                            return False
                        self._issuing = True
            if not drained and self._error is None:
                # a failed issue is reported once, by _fail inside: its _error ends the link
                self._issue_and_yield(float("inf"), raise_errors=False)
                return False
        except BaseException as exc:  # noqa: BLE001 - the pump's own (stop, timeout): to all,
            self._fail(exc)           # as a failed issue is
        self._end(drained)
        return True

    def _watch_back_pressure(self):
        """Raise WaitTimeout once sends have waited for a free buffer, with every buffer held
        and none released, for longer than the timeout (lock held)."""
        if not (self._sends and not self._free and not self._issuing):
            self._watch = None
            return
        now = time.monotonic()
        if self._watch is None or self._watch[0] != self._released:
            self._watch = (self._released, now)
        elif now - self._watch[1] > self.timeout:
            raise WaitTimeout(
                f"timed out after {self.timeout:g} s waiting for a free receive buffer on "
                f"{self.name} (all {self.num_buffers} are held by the receiver; release "
                f"PendingSegments after use)")

    def _end(self, drained):
        """No more packets: give the stream back (drained), fail what is still queued and tell
        the receivers."""
        self._events.let_go()
        if drained:
            try:
                self._copier.release_link_stream(self.stream)
            except Exception as exc:  # noqa: BLE001 - every packet arrived: the link still ends
                log.error("%s: giving its stream back failed: %s", self.name, exc)
        with self._lock:
            self._done = True
            self._plan = None
            for entry in self._sends:
                entry.handle._fail(self._error or LinkClosed(f"{self.name} stopped"))
            self._sends.clear()
            self._arrival.notify_all()
        self._notify_receivers()

    # receiving ----------------------------------------------------------------------------------
    def _hand_over(self, batch):
        if self._deliver is not None:
            self._deliver(batch)
            return
        with self._lock:
            self._received.extend(batch)
            self._arrival.notify_all()

    def _notify_receivers(self):
        if self._deliver is not None:
            self._deliver(None)
            # the output holds its links: let go of it, so that neither keeps the other (and
            # these receive buffers) for Python's garbage collector once the stream is over
            self._deliver = _ended_output

    def receive(self, timeout=None):
        """The next :class:`PendingSegment`, or ``None`` once the link is closed and drained."""
        if self._deliver is not None:
            raise RuntimeError(f"{self.name} delivers to a router output; receive from that instead")
        pending = self.poll()
        if pending is not None:
            return pending
        with self._lock:
            if not self._received and not self._done and self._error is None:
                try:
                    wait_for(lambda: self._received or self._done or self._error is not None,
                             cond=self._arrival,
                             timeout=timeout if timeout is not None else self.timeout,
                             stop=self.stop, what=f"a segment on {self.name}")
                except WaitTimeout as exc:
                    raise WaitTimeout(f"{exc}{self.held_by_receiver()}") from None
            if self._received:
                return self._received.popleft()
            if self._error is not None:
                raise again(self._error)
            if not self._closed:
                raise stopped(self.stop, f"{self.name} stopped before it was closed")
            return None

    def poll(self):
        """The next PendingSegment if one has been handed over, else None (never blocks). A
        receiver that finds none first issues the small packets its releases left queued
        (:meth:`_release`)."""
        for _ in range(2):
            try:
                return self._received.popleft()    # one there: no lock (deque ends are atomic)
            except IndexError:
                if not (self._coalesce and self._issue_deferred()):
                    return None
        return None

    def _issue_deferred(self) -> bool:
        """A receiver has taken every segment: issue the small packets its releases left
        queued (see :meth:`_release`) before it waits; True if there were any (never once
        the link is stopping: the pump ends it)."""
        with self._lock:
            if not self._can_issue() or self.stop.is_set():
                return False
            self._issuing = True
            work = self._take_next(None, None, self.num_buffers)
        self._issue_and_yield(self.num_buffers, raise_errors=False, work=work)
        return True

    def join(self, timeout=None):
        """Wait (at most ``timeout``; default the link's, its context's) until the link has
        ended (after :meth:`close`: queued sends delivered); True if it has. Within the same
        time it waits for the copies still reading its sends' sources and lets go of the
        sources they are done with."""
        deadline = time.monotonic() + resolve_timeout(self.timeout if timeout is None else timeout)
        with self._lock:
            while not self._done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._arrival.wait(min(remaining, POLL_INTERVAL))
        self._events.let_go_when_done(max(deadline - time.monotonic(), 0.0))
        return True


def send_all(links, data, *, event=None, metadata=None) -> list:
    """Send ``data`` on every link of ``links`` (a broadcast: links of one dtype and item shape).

    What :meth:`Link.send` on each does, with less host work per destination: the links that
    issue on one stream (those of a router input, :meth:`~groute.device.base.Device.link_stream`'s
    ``share``) and are idle with a free buffer for every packet take their buffers at once;
    their copies go on that stream one after another, after one wait for ``event``, and one
    event recorded after the last completes every packet of them (never less than its own
    copy). Every other link gets :meth:`Link.send`.

    Parameters
    ----------
    links : list of Link
        The destinations' links, all from one source.
    data : array
        The elements to send (on the source endpoint).
    event : Event, optional
        The copies wait for it (the work that produced ``data``).
    metadata : dict, optional
        What every receiver's PendingSegments carry.

    Returns
    -------
    list of SendHandle
        One for the links served together (first, when there are any), then one per other
        link; ``data`` may be overwritten once all are done.

    Raises
    ------
    LinkClosed
        A link is closed (the links before it in ``links`` have sent).

    Examples
    --------
    >>> import numpy as np
    >>> from groute import Context, Link
    >>> from groute.runtime.link import send_all
    >>> with Context(3, backend="cpu") as ctx:
    ...     a, b, c = ctx.devices
    ...     links = [Link(a, d, 4, ctx=ctx) for d in (b, c)]
    ...     handles = send_all(links, a.asarray(np.arange(3, dtype=np.int32)))
    ...     got = [link.receive(timeout=5).wait().data.tolist() for link in links]
    ...     for link in links:
    ...         link.close()
    >>> len(handles), got
    (1, [[0, 1, 2], [0, 1, 2]])
    """
    links = list(links)
    if not links:
        return []
    return send_checked(links, links[0]._check_send(data, event, metadata), event, metadata)


def send_checked(links, data, event, metadata) -> list:
    """:func:`send_all` of ``data`` that the first of ``links`` (a list) has checked
    (:meth:`Link._check_send`): a router checks a send before its policy sees it."""
    lead = links[0]
    size = int(data.shape[0])
    packets = -(-size // lead.packet_size)
    meta = dict(metadata) if metadata else {}
    together, alone = [], []
    for link in links:
        runs = None
        if packets and link.stream is lead.stream and link.packet_size == lead.packet_size:
            runs = link._take_all(packets)
        if runs is None:
            alone.append(link)
        else:
            together.append((link, runs))
    handles = [_send_together(together, data, size, event, meta)] if together else []
    handles.extend(link.send(data, event=event, metadata=meta) for link in alone)
    return handles


def _send_together(together, data, size, event, metadata) -> SendHandle:
    """The copies of :func:`send_all` for ``together``, ``(link, runs)`` pairs whose tokens and
    buffers are taken: one wait, the copies, one event; then each link hands its packets over
    and gives its token back."""
    first_link = together[0][0]
    stream, p = first_link.stream, first_link.packet_size
    try:
        if event is not None:
            stream.wait_event(event)
        for link, runs in together:
            plan, off = link._plan_for(data), 0
            for first, n in runs:
                m = min(n * p, size - off)
                link._copy_run(plan, first, n, off, m)
                off += m
        done = first_link._events.record(sum(n for _, runs in together for _, n in runs))
    except BaseException as exc:  # noqa: BLE001 - the links are broken; tell everyone
        try:    # the copies already issued still read the source
            first_link._events.hold(first_link._events.record(0), data)
        except Exception:  # noqa: BLE001 - a stream that cannot record runs nothing more
            pass
        for link, _ in together:
            link._fail(exc)
        raise
    handle = SendHandle(size)
    handle._finish(done)
    first_link._events.hold(done, data)
    for link, runs in together:
        batch, off, packet = [], 0, 0
        for first, n in runs:
            m = min(n * p, size - off)
            batch.extend(link._arrived(first, n, off, m, packet, size, metadata, done))
            off += m
            packet += n
        link.stats["segments"] += 1
        link._hand_over_and_yield(batch)
    return handle
