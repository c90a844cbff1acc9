"""Link: a packetized, multi-buffered, asynchronous transfer channel between two endpoints.

``Link(src, dst, packet_size, num_buffers)`` owns ``num_buffers`` receive buffers of
``packet_size`` elements on ``dst``. A send is queued and returns at once; the link's pump thread
splits the segment into packets and copies each, on the link's own stream, into the next free
receive buffer, then hands the receiver a :class:`~groute.segment.PendingSegment`. A buffer
becomes free again only when the receiver releases it, so a slow receiver slows the sender down
(back-pressure) instead of growing memory. Packets arrive in send order. Closing a link lets the
queued sends finish, then ends the receiver's stream (``receive`` returns ``None``).
"""
from __future__ import annotations

import collections
import itertools
import logging
import threading

import numpy as np

from .config import resolve_timeout
from .endpoint import Endpoint
from .errors import ContextStopped, LinkClosed
from .segment import PendingSegment
from .waiting import POLL_INTERVAL, wait_for

log = logging.getLogger(__name__)
_LINK_IDS = itertools.count()


class SendHandle:
    """Completes when every packet of one send has been copied into a receive buffer."""

    def __init__(self, size: int):
        self.size = size
        self._issued = threading.Event()
        self._event = None
        self._error: BaseException | None = None

    def _finish(self, event):
        self._event = event
        self._issued.set()

    def _fail(self, exc):
        self._error = exc
        self._issued.set()

    def done(self) -> bool:
        if not self._issued.is_set():
            return False
        if self._error is not None:
            raise self._error
        return self._event is None or self._event.query()

    def wait(self, timeout=None, stop=None) -> None:
        """Block until the source data may be reused."""
        wait_for(self._issued.is_set, what=f"a send of {self.size} elements to be issued",
                 timeout=timeout, stop=stop)
        if self._error is not None:
            raise self._error
        if self._event is not None:
            self._event.synchronize(timeout)

    @property
    def event(self):
        """The copy event of the last packet (None for an empty send), once issued."""
        return self._event


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(value)


class Link:
    """A point-to-point transfer channel; see the module docstring."""

    def __init__(self, src, dst, packet_size: int, num_buffers: int = 2, *, dtype=np.int32,
                 item_shape=(), ctx=None, name: str | None = None, deliver=None, copy_on="src"):
        self.packet_size = _positive_int("packet_size", packet_size)
        self.num_buffers = _positive_int("num_buffers", num_buffers)
        self.src = Endpoint.of(src)
        self.dst = Endpoint.of(dst)
        if self.src.is_host and self.dst.is_host:
            raise ValueError("a Link needs a device at one end at least (both ends are the host)")
        if copy_on not in ("src", "dst"):
            raise ValueError(f"copy_on must be 'src' or 'dst', got {copy_on!r}")
        self.dtype = np.dtype(dtype)
        self.item_shape = tuple(item_shape)
        self.name = name or f"link{next(_LINK_IDS)}[{self.src}->{self.dst}]"
        self.ctx = ctx
        self.timeout = resolve_timeout(ctx.timeout if ctx is not None else None)
        self._copier = copier = self.src.device if (copy_on == "src" and not self.src.is_host) or self.dst.is_host \
            else self.dst.device
        self.stream = copier.new_stream(f"{self.name}")
        self.stop = copier.stop_event
        shape = (self.packet_size, *self.item_shape)
        if self.dst.is_host:
            self._buffers = [self.src.device.host_buffer(shape, self.dtype) for _ in range(self.num_buffers)]
        else:
            self._buffers = [self.dst.device.empty(shape, self.dtype) for _ in range(self.num_buffers)]

        self._lock = threading.Condition()
        self._free = collections.deque((i, None) for i in range(self.num_buffers))
        self._reserved = 0          # packets sent but not yet given a buffer
        self._sends = collections.deque()
        self._transferring = False  # a send is being copied (by the pump or inline by a sender)
        self._closed = False
        self._pump_done = False
        self._error: BaseException | None = None
        self._received = collections.deque()
        self._deliver = deliver
        self._room_listeners: list = []
        self.stats = {"segments": 0, "packets": 0, "elements": 0, "bytes": 0}
        self._pump = threading.Thread(target=self._run_pump, name=f"groute-{self.name}", daemon=True)
        self._pump.start()

    def __repr__(self):
        return f"<Link {self.name} P={self.packet_size} B={self.num_buffers}>"

    # sending ----------------------------------------------------------------------------------
    def send(self, data, *, event=None, metadata=None) -> SendHandle:
        """Queue ``data`` (an array on the source endpoint) for transfer; returns at once.

        ``event``: the copy waits for it (e.g. the kernel that produced ``data``). The caller
        must not overwrite ``data`` until the returned handle is done.
        """
        data = self._check_data(data)
        n = int(data.shape[0])
        packets = -(-n // self.packet_size)
        handle = SendHandle(n)
        with self._lock:
            if self._closed:
                raise LinkClosed(f"{self.name} is closed; no more sends")
            if self._error is not None:
                raise self._error
            self._reserved += packets
            # Fast path: nothing queued or in flight and a free buffer for every packet, so the
            # copies can be issued right here without waking the pump (they stay asynchronous).
            inline = not self._sends and not self._transferring and packets <= len(self._free)
            if inline:
                self._transferring = True
            else:
                self._sends.append((data, event, dict(metadata or {}), handle))
                self._lock.notify_all()
        if inline:
            try:
                self._transfer(data, event, dict(metadata or {}), handle)
            except BaseException as exc:
                handle._fail(exc)
                raise
            finally:
                with self._lock:
                    self._transferring = False
                    self._lock.notify_all()
        return handle

    def _check_data(self, data):
        if not hasattr(data, "shape") or not hasattr(data, "dtype"):
            raise TypeError(f"{self.name}: send takes an array, got {type(data).__name__}")
        if data.dtype != self.dtype:
            raise ValueError(f"{self.name}: carries {self.dtype}, got {data.dtype}")
        if tuple(data.shape[1:]) != self.item_shape:
            raise ValueError(f"{self.name}: items have shape {self.item_shape}, got {tuple(data.shape[1:])}")
        return data

    def has_room(self) -> bool:
        """True when a send now would find a free receive buffer (used by routers)."""
        with self._lock:
            return len(self._free) - self._reserved > 0

    def backlog(self) -> int:
        """Packets queued or held by the receiver; lower means more available."""
        with self._lock:
            return self.num_buffers - len(self._free) + self._reserved

    def add_room_listener(self, cond: threading.Condition) -> None:
        self._room_listeners.append(cond)

    def close(self) -> None:
        """No more sends; queued ones still arrive, then the receiver sees the end."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    # the pump -----------------------------------------------------------------------------------
    def _run_pump(self):
        try:
            while True:
                with self._lock:
                    while (not self._sends or self._transferring) and \
                            not (self._closed and not self._sends and not self._transferring):
                        if self.stop.is_set():
                            return
                        self._lock.wait(POLL_INTERVAL)
                    if not self._sends:
                        break
                    data, event, metadata, handle = self._sends.popleft()
                    self._transferring = True
                try:
                    self._transfer(data, event, metadata, handle)
                except BaseException as exc:
                    handle._fail(exc)
                    raise
                finally:
                    with self._lock:
                        self._transferring = False
        except BaseException as exc:  # noqa: BLE001 - surfaced to receivers and the context
            self._error = exc
            log.debug("%s failed: %r", self.name, exc)
            if self.ctx is not None:
                self.ctx.fail(self.name, exc)
        finally:
            if self._closed and self._error is None:
                self._copier.release_stream(self.stream)
            with self._lock:
                self._pump_done = True
                for h in (s[3] for s in self._sends):
                    h._fail(self._error or LinkClosed(f"{self.name} stopped"))
                self._lock.notify_all()
            self._notify_receivers()

    def _transfer(self, data, event, metadata, handle):
        n = int(data.shape[0])
        if event is not None:
            self.stream.wait_event(event)
        last = None
        for k, off in enumerate(range(0, n, self.packet_size)):
            m = min(self.packet_size, n - off)
            index, after = self._acquire()
            if after is not None:
                self.stream.wait_event(after)
            buf = self._buffers[index][:m]
            self.stream.copy(buf, data[off:off + m])
            last = self.stream.record()
            meta = dict(metadata, offset=off, packet=k, last=off + m >= n, total=n)
            pending = PendingSegment(buf, last, meta, release=self._make_release(index), source=self.src)
            self.stats["packets"] += 1
            self.stats["elements"] += m
            self.stats["bytes"] += buf.nbytes
            self._hand_over(pending)
        self.stats["segments"] += 1
        handle._finish(last)

    def _acquire(self):
        with self._lock:
            wait_for(lambda: bool(self._free), cond=self._lock, timeout=self.timeout, stop=self.stop,
                     what=f"a free receive buffer on {self.name} (all {self.num_buffers} are held "
                          f"by the receiver; release PendingSegments after use)")
            self._reserved -= 1
            return self._free.popleft()

    def _make_release(self, index):
        def release(after=None):
            with self._lock:
                self._free.append((index, after))
                self._lock.notify_all()
            for cond in self._room_listeners:
                with cond:
                    cond.notify_all()
        return release

    # receiving ----------------------------------------------------------------------------------
    def _hand_over(self, pending):
        if self._deliver is not None:
            self._deliver(pending)
            return
        with self._lock:
            self._received.append(pending)
            self._lock.notify_all()

    def _notify_receivers(self):
        if self._deliver is not None:
            self._deliver(None)

    def receive(self, timeout=None):
        """The next :class:`PendingSegment`, or ``None`` once the link is closed and drained."""
        if self._deliver is not None:
            raise RuntimeError(f"{self.name} delivers to a router output; receive from that instead")
        with self._lock:
            wait_for(lambda: self._received or self._pump_done, cond=self._lock,
                     timeout=timeout if timeout is not None else self.timeout, stop=self.stop,
                     what=f"a segment on {self.name}")
            if self._received:
                return self._received.popleft()
            if self._error is not None:
                raise self._error
            if not self._closed:
                raise ContextStopped(f"{self.name} stopped before it was closed")
            return None

    def poll(self):
        """The next PendingSegment if one has been handed over, else None (never blocks)."""
        with self._lock:
            return self._received.popleft() if self._received else None

    def __iter__(self):
        while True:
            pending = self.receive()
            if pending is None:
                return
            yield pending

    def join(self, timeout=None):
        """Wait for the pump thread to finish (after :meth:`close`)."""
        self._pump.join(resolve_timeout(timeout))
