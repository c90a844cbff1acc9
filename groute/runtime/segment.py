"""Segments: a view of a buffer plus its element count and metadata.

A :class:`PendingSegment` is a segment still arriving through a Link: its data may be read only
after :meth:`~PendingSegment.wait` (host blocks) or :meth:`~PendingSegment.wait_on` (a stream
waits; the host does not). Releasing it hands the receive buffer back to the link, which is how
back-pressure works: an unreleased segment holds one of the link's ``num_buffers`` buffers.
"""
from __future__ import annotations

import collections.abc
from dataclasses import dataclass, field

import numpy as np

from ..ints import is_int


def positive_int(name, value) -> int:
    """``value`` as an int, or a ValueError naming ``name`` (packet sizes, buffer counts)."""
    if not is_int(value):       # 2.0 too: a count given as a float is a slip, not a count
        raise ValueError(f"{name} must be an int >= 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


#: the most receive buffers a link keeps: each is a slot it tracks on the host, and more than
#: this many buys no overlap that fewer, larger packets would not
MAX_BUFFERS = 1 << 16


def route_pairs(name: str, pairs, shape: tuple) -> set:
    """A router's ``pairs`` as a set of (input index, output index): every pair of a router
    of ``shape`` (inputs, outputs) for None, else each checked by :func:`route_pair`; a
    TypeError naming the router ``name`` for ``pairs`` that is no collection of pairs."""
    if pairs is None:
        return {(i, j) for i in range(shape[0]) for j in range(shape[1])}
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, collections.abc.Iterable):
        raise TypeError(f"{name}: pairs is a list of (input index, output index) pairs, got "
                        f"{pairs!r}")
    return {route_pair(name, pair) for pair in pairs}


def route_pair(name: str, pair) -> tuple:
    """One of a router's ``pairs``: (input index, output index), two ints (a row of an
    integer array too), or a TypeError naming the router ``name``."""
    items = list(pair) if isinstance(pair, (tuple, list, np.ndarray)) and np.ndim(pair) == 1 \
        else None
    if items is None or len(items) != 2 or not all(is_int(x) for x in items):
        raise TypeError(f"{name}: pairs are (input index, output index) pairs of ints, got "
                        f"{pair!r}")
    return int(items[0]), int(items[1])


def buffer_count(num_buffers) -> int:
    """A link's ``num_buffers``: a whole number in ``[1, MAX_BUFFERS]``, or a ValueError."""
    count = positive_int("num_buffers", num_buffers)
    if count > MAX_BUFFERS:
        raise ValueError(f"num_buffers must be at most {MAX_BUFFERS:,} (each is a slot the link "
                         f"tracks; send larger packets instead), got {count:,}")
    return count


def item_dtype(dtype) -> np.dtype:
    """A link's item ``dtype``: numbers or bools (the bytes a copy moves), or a TypeError."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype: {exc}") from None
    if dtype.kind not in "biufc":
        raise TypeError(f"a link carries numbers or bools, not {dtype} (a copy moves the items' "
                        f"bytes)")
    return dtype


def check_buffers_fit(name: str, device, nbytes: int) -> None:
    """Raise MemoryError naming link ``name`` when its receive buffers (``nbytes``) are more
    than ``device`` can still give (None: the host's memory), before they are allocated."""
    from groute.graph.budget import available_bytes
    from groute.memory import free_device_bytes
    free = free_device_bytes(device) if device is not None else None
    if free is None:                # the host's memory: a CPU device's, or pinned buffers
        free = available_bytes()
    if free is not None and nbytes > free:
        where = device.name if device is not None else "the host"
        raise MemoryError(f"{name}: its receive buffers take {nbytes / 2**30:.2f} GiB, more than "
                          f"the {free / 2**30:.2f} GiB {where} has free; use fewer or smaller "
                          f"packets")


def item_shape_of(item_shape) -> tuple:
    """``item_shape`` (a link's or a router's: ``()`` for scalar items, ``(2,)`` for pairs) as
    a tuple of ints >= 1, or a TypeError / ValueError naming it."""
    try:
        shape = tuple(item_shape)
    except TypeError:
        raise TypeError(f"item_shape must be a tuple of sizes (() for scalar items, (2,) for "
                        f"pairs), got {item_shape!r}") from None
    return tuple(positive_int("item_shape's sizes", n) for n in shape)


#: the metadata keys a link sets on every packet it delivers (PendingSegment.metadata)
PACKET_KEYS = ("offset", "packet", "packets", "last", "total")
_PACKET_KEY_SET = frozenset(PACKET_KEYS)


def check_event(what: str, event) -> None:
    """``event``: None or an event a stream recorded (it has ``query`` and ``synchronize``),
    else a TypeError naming ``what``, before anything waits on it: a send's event, a release's
    ``after``."""
    if event is not None and not (callable(getattr(event, "query", None))
                                  and callable(getattr(event, "synchronize", None))):
        raise TypeError(f"{what} must be an event a stream recorded (stream.record()), got "
                        f"{type(event).__name__}")


def check_send_extras(name: str, event=None, metadata=None) -> None:
    """What a send carries beside its items, checked: ``event`` a recorded event (or None) and
    ``metadata`` a dict (or None) without the link's own keys (:data:`PACKET_KEYS`); else a
    TypeError or ValueError naming ``name`` (the link or router), before anything is queued.
    Links and both kinds of Router check their sends through it."""
    check_event(f"{name}: event", event)
    if metadata is not None and not isinstance(metadata, collections.abc.Mapping):
        raise TypeError(f"{name}: metadata must be a dict, got {type(metadata).__name__}")
    if metadata and not _PACKET_KEY_SET.isdisjoint(metadata):
        taken = sorted(k for k in metadata if k in _PACKET_KEY_SET)
        raise ValueError(f"{name}: metadata keys {taken} are the link's own (each packet's "
                         f"place in its send: {', '.join(PACKET_KEYS)}); the receiver would "
                         f"see the link's values, not these: name them otherwise")


@dataclass
class Segment:
    """``data`` holds exactly ``size`` elements along axis 0; ``metadata`` is free-form."""

    data: object
    metadata: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.data.shape[0])

    def __len__(self):
        return self.size


class PendingSegment:
    """A segment whose copy may still be in flight.

    Made per packet on a Link's hot path, so it holds what it was given and builds its
    :attr:`metadata` and :attr:`segment` only when asked. ``packet``: ``(offset, packet,
    packets, last, total)``, the place of a Link's packet in its send, which :attr:`metadata`
    adds to the sender's ``metadata`` (``packets`` only when it is not 0: a batching link's)."""

    __slots__ = ("data", "event", "source", "_base", "_packet", "_metadata", "_segment", "_release")

    def __init__(self, data, event, metadata=None, release=None, source=None, *, packet=None):
        self.data = data            # the received elements; valid after wait() or wait_on()
        self.event = event          # None when the data is already in place
        self.source = source        # the endpoint it came from
        self._base = metadata
        self._packet = packet
        self._metadata = None
        self._segment = None
        self._release = [release] if release is not None else []   # popped once: idempotent

    @property
    def size(self) -> int:
        return int(self.data.shape[0])

    @property
    def metadata(self) -> dict:
        meta = self._metadata
        if meta is None:
            meta = dict(self._base) if self._base else {}
            if self._packet is not None:
                offset, packet, packets, last, total = self._packet
                meta.update(offset=offset, packet=packet, last=last, total=total)
                if packets:
                    meta["packets"] = packets
            self._metadata = meta
        return meta

    @property
    def segment(self) -> Segment:
        if self._segment is None:
            self._segment = Segment(self.data, self.metadata)
        return self._segment

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def wait(self, timeout=None) -> Segment:
        """Block the host until the data has arrived; return the segment."""
        if self.event is not None:
            self.event.synchronize(timeout)
        return self.segment

    def wait_on(self, stream) -> Segment:
        """Make ``stream`` wait for the data (no host blocking); return the segment."""
        if self.event is not None:
            stream.wait_event(self.event)
        return self.segment

    def release(self, after=None) -> None:
        """Give the buffer back to the link; ``after``: an event that must complete first
        (e.g. the kernel that consumed it). Idempotent, from any thread. The segment's data
        and event belong to the link again once released."""
        if after is not None:           # a packet's path: no call for the usual release
            check_event("release: after", after)
        try:
            release = self._release.pop()     # atomic: a second release finds nothing
        except IndexError:
            return
        release(after)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"<PendingSegment size={self.size} ready={self.ready()} meta={self.metadata}>"


class SegmentReceiver:
    """``for pending in x``: :meth:`receive` until it returns ``None`` (closed and drained).
    One loop for every receiving end that has ``receive()``: a :class:`~groute.runtime.link.Link`, a
    :class:`~groute.runtime.device_link.DeviceLink` and a router's
    output (:class:`groute.runtime.router_output.RouterOutput`)."""

    def __iter__(self):
        while True:
            pending = self.receive()
            if pending is None:
                return
            yield pending
