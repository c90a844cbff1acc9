"""Device-initiated Links: kernels send packets into receive slots in the receiver's memory.

``Link(src, dst, packet_size, num_buffers, initiated="device")`` makes a :class:`DeviceLink`.
Nothing on the host moves a packet: a sending kernel on ``src`` reserves a packet number,
waits for that packet's slot to be free, writes the data straight into the slot in ``dst``'s
memory (NVLink, or one GPU's own memory for logical devices) and publishes it with a flag; the
receiver, a kernel on ``dst`` (``receiver="device"``) or the host (``receiver="host"``:
:meth:`DeviceLink.receive`), waits on the flag, reads, and hands the slot back by writing a word
in the sender's memory. Back-pressure is the same as a host-initiated Link's: a sender waits
for a slot its receiver has released. The protocol (slots, flags, counters, the end and the
stop) is written out in ``groute/runtime/link.cuh``, the header CUDA kernels include. A large
packet is written by a group of blocks, each a share, and published once by the last of them
(``groute_link_send_part``; ``groute_link_send_grid`` moves a whole buffer so), since one block
writes a fraction of what NVLink carries; :meth:`DeviceLink.grid_shape` sizes the grid.

The CPU backend runs the same protocol on NumPy arrays: a "kernel" is a function on a device's
stream thread, which sends and receives through :attr:`DeviceLink.tx` and
:attr:`DeviceLink.rx` (:class:`LinkSender`, :class:`LinkReceiver`, the device functions of the
header as methods), so CI runs the protocol, races included. On CUDA ``tx`` and ``rx`` are the
link's description in the sender's and the receiver's memory, the argument a kernel takes as
``const groute_link*``. Load a link's sending and receiving kernels before the first of them
runs (:func:`groute.kernels.preload`): CUDA loads a kernel at its first launch and may wait for
the running kernels to end first, so a receiver already waiting on one GPU would keep its
sender from ever starting. For the same reason the first device link made on a GPU (which loads
the link's own kernels) may wait for the kernels running there; later ones do not.

Closing (:meth:`DeviceLink.close`, after the sending kernels in stream order) tells the
receivers how many packets there were. The link watches its context (through the pump of its
device, :mod:`groute.runtime.pump`): a stop makes every waiting kernel give up, and a kernel
whose wait outlasted the timeout stops the context with a :class:`~groute.errors.WaitTimeout`
naming the link.
"""
from __future__ import annotations

import functools
import itertools
import math
import threading
from pathlib import Path

import numpy as np

from ..config import resolve_timeout
from ..device.base import Stream
from ..errors import WaitTimeout, again
from ..waiting import stopped, wait_for
from .copy_events import finished
from .endpoint import Endpoint
from .pump import _Pump
from ..ints import is_int
from .segment import (PendingSegment, SegmentReceiver, buffer_count, check_buffers_fit,
                      item_dtype, item_shape_of, positive_int)

#: the host's own kernels on the link (close; the layout check)
KERNELS = Path(__file__).with_name("link_kernels.cu")
#: the fields of ``struct groute_link`` (link.cuh), in order, each 8 bytes
FIELDS = ("slots", "ready", "count", "tag", "freed", "head", "tail", "end", "status", "written",
          "taken", "packet_bytes", "item_bytes", "num_buffers", "timeout_ns")
#: the least of a packet's bytes that one block of a group writes or reads, where packets go
#: in groups (sixteen 16-byte vectors for each thread of a 256-thread block; a packet of more
#: than GROUP_PARTS shares is split over the whole grid): packets up to it go one block each,
#: with a packet per slot in flight; over NVLink, blocks given less wait on the group's meeting
#: and on fewer packets in flight more than they gain by writing together (docs/TOPOLOGY.md)
PART_BYTES = 64 << 10
#: the most blocks in a group that writes (reads) its packet while other groups write theirs: a
#: packet of more shares gets the whole grid, one packet at a time, since several large groups
#: at once slow one another down over NVLink more than one packet at a time costs in latency
#: (docs/TOPOLOGY.md)
GROUP_PARTS = 16
#: the most groups of a grid, each its own packet at once: past it, sender and receiver blocks
#: each waiting on one slot of their own pass the slots back and forth in lock step, and the
#: link slows down many times over (docs/TOPOLOGY.md)
MAX_GROUPS = 64
RECEIVERS = ("device", "host")
OPEN, STOPPED, TIMED_OUT = 0, 1, 2        # the status word
_IDS = itertools.count()
_layout_checked: set = set()


#: mapped host words of links that ended by a stop or a timeout (DeviceLink._keep_mapped)
_KEPT_MAPPED: list = []


def _link_words(device, *, zeros: int | None = None, values=None):
    """A link's uint64 words on ``device``: ``zeros`` of them, or a copy of ``values``. On CUDA
    made on the device's copy stream and waited for there (bounded): the link's kernels and
    copies run on other streams, which would not wait for them, and a link may be made while
    a kernel that is to use it already runs on the compute stream, which must not be waited
    for."""
    if device.backend != "cuda":
        return device.zeros(zeros, np.uint64) if values is None else device.asarray(values)
    with device.use(), device.copy_stream.raw:
        words = (device.xp.zeros(zeros, np.uint64) if values is None
                 else device.xp.asarray(values))
    device.copy_stream.synchronize()
    return words


class DeviceLink(SegmentReceiver):
    """See the module docstring. ``receiver``: ``"device"`` (kernels on ``dst`` receive, through
    :attr:`rx`) or ``"host"`` (:meth:`receive` on the host; on CUDA the flags then live in
    mapped host memory, which the host reads in place)."""

    def __init__(self, src, dst, packet_size: int, num_buffers: int = 2, *, dtype=np.int32,
                 item_shape=(), ctx=None, name: str | None = None, receiver: str = "device"):
        if ctx is not None:
            ctx.admit()     # a link made after a failed run carries the next run's
        self.packet_size = positive_int("packet_size", packet_size)
        self.num_buffers = buffer_count(num_buffers)
        self.src, self.dst = Endpoint.of(src), Endpoint.of(dst)
        if self.src.is_host or self.dst.is_host:
            raise ValueError("a device-initiated Link runs between two devices (kernels send and "
                             f"the slots are in a device's memory); got {self.src} -> {self.dst}")
        if receiver not in RECEIVERS:
            raise ValueError(f"receiver must be 'device' or 'host', got {receiver!r}")
        a, b = self.src.device, self.dst.device
        if a is not b and not a.can_access_peer(b):
            raise ValueError(f"a device-initiated Link needs {a.name} to reach {b.name}'s memory "
                             f"(peer access); use a host-initiated Link between them")
        self.receiver = receiver
        self.dtype = item_dtype(dtype)
        self.item_shape = item_shape_of(item_shape)
        #: a slot's bytes (a packet's items times an item's bytes)
        self.packet_bytes = self.packet_size * self.dtype.itemsize * math.prod(self.item_shape)
        self.name = name or f"devlink{next(_IDS)}[{self.src}->{self.dst}]"
        check_buffers_fit(self.name, b, self.packet_bytes * self.num_buffers)
        self.ctx = ctx
        self.timeout = resolve_timeout(ctx.timeout if ctx is not None else None)
        self.stop = a.stop_event
        self._copier = a
        p, k = self.packet_size, self.num_buffers
        self._ring = b.receive_buffer((p * k, *self.item_shape), self.dtype)
        self._slots = [self._ring[i * p:(i + 1) * p] for i in range(k)]
        # ready, count, tag per slot and the end word: where the receiver polls
        self._flags = b.mapped_host_buffer(3 * k + 1, np.uint64) if receiver == "host" \
            else _link_words(b, zeros=3 * k + 1)
        self._sender_words = _link_words(a, zeros=2 * k + 1)    # freed and written per slot, head
        self._receiver_words = _link_words(b, zeros=k + 1)      # taken per slot, tail
        self._status = a.mapped_host_buffer(1, np.int32)
        self._ready, self._count, self._tag = (self._flags[i * k:(i + 1) * k] for i in range(3))
        self._end = self._flags[3 * k:]
        self._freed, self._written = self._sender_words[:k], self._sender_words[k:2 * k]
        self._head = self._sender_words[2 * k:]
        self._taken, self._tail = self._receiver_words[:k], self._receiver_words[k:]
        # the CPU ends' counters' locks: the ends are made when asked for (tx, rx), and
        # share these
        self._claim_locks = (threading.Lock(), threading.Lock())
        self._tx, self._rx = self._describe()
        # loaded now, not at close(): loading a kernel may wait for the GPU's running kernels,
        # among them, by then, a receiver that waits for this close
        self._close_kernel = self._load_close_kernel(a)
        # the host's releases: the slot's next number written into ``freed`` on a stream of the
        # sender, after what the release waits for
        self._release_stream = a.link_stream(f"{self.name}-release")
        self._release_words = a.host_buffer(k, np.uint64)
        self._release_copy = self._release_stream.copy_plan(self._freed, self._release_words)
        self._next = 0                      # the host receiver's next packet number
        self._receive_lock = threading.Lock()
        self._closed = False
        self._close_event = None
        self._done = False
        self._error: BaseException | None = None
        self.stats = {"packets": 0, "elements": 0}
        self._pump = _Pump.serve(self)

    def __repr__(self):
        return f"<DeviceLink {self.name} P={self.packet_size} B={self.num_buffers} receiver={self.receiver}>"

    def grid_shape(self, packets: int, blocks: int, *, part_bytes: int = PART_BYTES) -> tuple[int, int]:
        """The grid of a kernel that sends a message of ``packets`` packets with
        ``groute_link_send_grid`` (or receives it with ``groute_link_receive_grid``) in at most
        ``blocks`` blocks: ``(grid blocks, parts)``, ``parts`` the blocks that write (read) each
        packet.

        A packet is split into shares of at least ``part_bytes`` (one share per block, at most
        ``blocks``): one block alone reaches a fraction of NVLink, a grid the whole of it. A
        packet of more than ``GROUP_PARTS`` such shares is split over every block instead (in
        shares smaller than ``part_bytes``), one packet at a time; at most ``MAX_GROUPS`` groups
        write (read) packets at once. With
        one block per packet, one packet per slot is in flight (more blocks would wait for
        slots); with several, half the slots, so that a group's next slot is released while it
        writes the packet before. A receiver that only hands the slots back passes
        ``part_bytes=link.packet_bytes`` (one block per packet).

        Parameters
        ----------
        packets : int
            The message's packets.
        blocks : int
            The most blocks the kernel may have (what the device keeps resident beside the
            other kernels that run meanwhile: the receiver's, on one GPU).
        part_bytes : int
            The least share of a packet one block takes.

        Returns
        -------
        tuple of int
            The kernel's blocks and the ``parts`` argument of the grid functions.

        Examples
        --------
        >>> from groute import Context, Link
        >>> with Context(2, backend="cpu") as ctx:
        ...     link = Link(*ctx.devices, 1 << 18, 4, ctx=ctx, initiated="device")  # 1 MiB
        ...     shapes = link.grid_shape(64, 512), link.grid_shape(64, 512, part_bytes=1 << 20)
        ...     link.close()
        >>> shapes
        ((32, 16), (4, 1))
        """
        packets, blocks, part_bytes = (positive_int(n, v) for n, v in
                                       (("packets", packets), ("blocks", blocks), ("part_bytes", part_bytes)))
        parts = max(1, min(blocks, self.packet_bytes // part_bytes))
        if parts > GROUP_PARTS:
            parts = blocks
        in_flight = self.num_buffers if parts == 1 else max(1, self.num_buffers // 2)
        groups = max(1, min(packets, in_flight, blocks // parts, MAX_GROUPS))
        return groups * parts, parts

    @property
    def tx(self):
        """The sending end: CUDA, the ``groute_link`` struct in the sender's memory (a kernel's
        argument); CPU, a :class:`LinkSender`, made when asked for (it keeps the link alive;
        a link that kept its ends, each keeping it, would wait for the garbage collector)."""
        return self._tx if self._tx is not None else LinkSender(self)

    @property
    def rx(self):
        """The receiving end: the struct in the receiver's memory, or a :class:`LinkReceiver`
        (as :attr:`tx`)."""
        return self._rx if self._rx is not None else LinkReceiver(self)

    def _describe(self):
        """``(tx, rx)`` on CUDA: the ``groute_link`` struct in the sender's and the receiver's
        memory; ``(None, None)`` on CPU, whose ends are made when asked for."""
        a, b = self.src.device, self.dst.device
        if a.backend != "cuda":
            return None, None
        from ..kernels import pack_struct
        item_bytes = self.dtype.itemsize * math.prod(self.item_shape)
        values = {"slots": b.address(self._ring), "ready": b.address(self._ready),
                  "count": b.address(self._count), "tag": b.address(self._tag),
                  "freed": a.address(self._freed), "head": a.address(self._head),
                  "tail": b.address(self._tail), "end": b.address(self._end),
                  "status": a.address(self._status), "written": a.address(self._written),
                  "taken": b.address(self._taken),
                  "packet_bytes": self.packet_size * item_bytes, "item_bytes": item_bytes,
                  "num_buffers": self.num_buffers, "timeout_ns": int(self.timeout * 1e9)}
        rec = pack_struct([(f, np.uint64, values[f]) for f in FIELDS])
        self._check_layout(a, rec)
        words = np.frombuffer(rec.tobytes(), np.uint64)
        return _link_words(a, values=words), _link_words(b, values=words)

    @staticmethod
    def _load_close_kernel(device):
        """The close kernel on CUDA (None on the CPU backend), loaded onto ``device``."""
        if device.backend != "cuda":
            return None
        from ..kernels import get_kernel, preload
        with device.use():
            kernel = get_kernel(KERNELS, "groute_link_close")
            preload(kernel)
        return kernel

    @staticmethod
    def _check_layout(device, rec):
        if device.gpu in _layout_checked:
            return
        from ..kernels import check_struct_layout, get_kernel
        with device.use():
            check_struct_layout(get_kernel(KERNELS, "groute_link_layout"), rec,
                                ["ready", "status", "timeout_ns"], "struct groute_link (link.cuh)")
        _layout_checked.add(device.gpu)

    # the host's end ----------------------------------------------------------------------------
    def close(self, stream=None) -> None:
        """No more sends: once the work queued on ``stream`` (default: the sender's compute
        stream, where its kernels ran) is done, tell the receivers how many packets there were."""
        a = self.src.device
        stream = stream if stream is not None else a.compute_stream
        if not isinstance(stream, Stream) or stream.device is not a:
            raise TypeError(f"{self.name}: close takes a stream of the sender {a.name} (the "
                            f"one its kernels sent on), got {stream!r}")
        with a.use():
            if a.backend == "cuda":
                stream.submit(self._close_kernel, (1,), (1,), (self.tx,))
            else:
                stream.submit(self.tx.close)
            self._close_event = stream.record()
        self._closed = True
        self._pump.wake(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def finished(self) -> bool:
        """The link has ended: closed (and the close has run), stopped, or failed."""
        return self._done

    def check(self) -> None:
        """Raise what ended the link: a stop, or a kernel whose wait timed out."""
        if self._error is not None:
            raise again(self._error)
        status = int(self._status[0])
        if status == TIMED_OUT:
            raise self._timed_out()
        if status == STOPPED:
            raise stopped(self.stop, f"{self.name} stopped")

    def _timed_out(self) -> WaitTimeout:
        return WaitTimeout(f"a kernel waited longer than {self.timeout:g} s on {self.name} (for a "
                           f"free slot: the receiver releases none; or for a packet: the sender "
                           f"sends none and the link is not closed)")

    def join(self, timeout=None) -> bool:
        """Wait (at most ``timeout``; default the link's, its context's) until the link has
        ended; True if it has."""
        try:
            wait_for(lambda: self._done, what=f"{self.name} to end",
                     timeout=self.timeout if timeout is None else timeout)
        except WaitTimeout:
            return False
        return True

    def _pump_turn(self) -> bool:
        """The pump's visit: end the link once its close has run; on a stop, make every kernel
        waiting on it give up; report a kernel that timed out. True once ended."""
        if self._done:
            return True
        error = None
        if int(self._status[0]) == TIMED_OUT:
            error = self._timed_out()
        elif self.stop.is_set():
            self._status[0] = STOPPED
            error = stopped(self.stop, f"{self.name} stopped")
        elif self._close_event is None or not finished(self._close_event):
            return False
        if error is not None:
            self._error = error
            self._keep_mapped()
            if self.ctx is not None and not self.stop.is_set():
                self.ctx.fail(self.name, error)
        self._done = True
        if self._release_stream is not None:
            self.src.device.release_link_stream(self._release_stream)
            self._release_stream = None
        return True

    def _keep_mapped(self) -> None:
        """A link that ended by a stop or a timeout may still have kernels running that write
        its mapped host words (its status; a host receiver's flags): those words are kept
        for the process's life, never handed to another link (their pool reuses a block
        once its arrays are gone: :mod:`groute.device.mapped_memory`). A link whose close ran
        has no sender left to write them. A few hundred bytes per such link; its device
        words go back to CuPy's pool as before (no kernel may use a link once it is gone)."""
        if self.src.device.backend == "cuda":
            _KEPT_MAPPED.append((self._status, self._flags if self.receiver == "host" else None))

    # receiving on the host ------------------------------------------------------------------------
    def receive(self, timeout=None):
        """The next packet as a :class:`PendingSegment` (its data already in place: no event),
        with metadata ``packet`` (its number) and ``tag`` (the sender's); ``None`` once the link
        is closed and every packet was received. For ``receiver="host"`` links. Where the
        sender shares the receiver's GPU, copy out what you need with work this process has
        run before (a copy), release, then run new CuPy work on the copy: loading a kernel not
        yet loaded may wait for the sender, which waits for the release."""
        self._host_receiver()
        with self._receive_lock:
            n = self._next
            slot = n % self.num_buffers
            wait_for(lambda: self._ready[slot] == n + 1 or self._ended_before(n)
                     or self._status[0] != OPEN, what=f"packet {n} on {self.name}",
                     timeout=timeout if timeout is not None else self.timeout, stop=self.stop)
            if self._ready[slot] != n + 1:
                if self._status[0] != OPEN:
                    self.check()
                return None
            return self._take(n, slot)

    def poll(self):
        """The next packet if it has arrived, else None (never blocks: while another thread
        receives, None). For ``receiver="host"`` links, as :meth:`receive` (a RuntimeError
        otherwise)."""
        self._host_receiver()
        if not self._receive_lock.acquire(blocking=False):
            return None
        try:
            n = self._next
            slot = n % self.num_buffers
            return self._take(n, slot) if self._ready[slot] == n + 1 else None
        finally:
            self._receive_lock.release()

    def _host_receiver(self) -> None:
        if self.receiver != "host":
            raise RuntimeError(f"{self.name}: kernels receive on this link (receiver='device', "
                               f"through link.rx); make it with receiver='host' to receive on "
                               f"the host")

    def _take(self, n: int, slot: int) -> PendingSegment:
        """Packet ``n``, arrived in ``slot``, as the next segment (receive lock held)."""
        count, tag = int(self._count[slot]), int(self._tag[slot])
        self._next = n + 1
        self.stats["packets"] += 1
        self.stats["elements"] += count
        data = self._slots[slot] if count == self.packet_size else self._slots[slot][:count]
        return PendingSegment(data, None, {"packet": n, "tag": tag},
                              release=functools.partial(self._host_release, n), source=self.src)

    def _ended_before(self, n) -> bool:
        end = int(self._end[0])
        return end != 0 and n + 1 >= end

    def _host_release(self, n, after=None):
        """Hand packet ``n``'s slot back: ``freed[slot] = n + 1`` in the sender's memory, on
        the release stream once ``after`` is done."""
        slot = n % self.num_buffers
        stream = self._release_stream
        if stream is None:               # the link has ended: nobody waits for the slot
            return
        if after is not None:
            stream.wait_event(after)
        self._release_words[slot] = n + 1
        with self.src.device.use():
            self._release_copy(slot, slot, 1)


class LinkSender:
    """The sending end of a device-initiated link on the CPU backend: the device functions of
    ``link.cuh`` (``groute_link_reserve``, ``_acquire``, ``_publish``...) as methods, for
    functions that run on the sender's stream threads. A wait that the link gives up raises
    (a stop, or a WaitTimeout after the link's timeout), which fails the stream and stops the
    context, as a kernel's give-up does on CUDA."""

    def __init__(self, link: DeviceLink):
        self.link = link
        self._lock = link._claim_locks[0]    # the atomics of the counters

    def reserve(self) -> int:
        """The next packet number."""
        return self.claim(None)

    def claim(self, limit) -> int | None:
        """The next packet number below ``limit`` (None: no limit), or None once reached. A
        send after the link's close is refused here; a CUDA kernel cannot raise, so there it is
        the program's to avoid (:meth:`DeviceLink.close` after the sending kernels)."""
        _check_open(self.link)
        return _claim(self._lock, self.link._head, limit)

    def acquire(self, n: int) -> np.ndarray:
        """Wait until packet ``n``'s slot is free; the slot (``packet_size`` items)."""
        link = self.link
        slot = n % link.num_buffers
        if n >= link.num_buffers:
            need = n - link.num_buffers + 1
            _wait(link, lambda: link._freed[slot] >= need, f"a free slot for packet {n}")
        return link._slots[slot]

    def publish(self, n: int, count: int, tag: int = 0) -> None:
        """After writing ``count`` items into packet ``n``'s slot: publish it."""
        link = self.link
        if not 0 <= count <= link.packet_size:
            raise ValueError(f"{link.name}: a packet holds 0..{link.packet_size} items, got {count}")
        _check_tag(link, tag)
        slot = n % link.num_buffers
        link._count[slot] = count
        link._tag[slot] = tag
        link._ready[slot] = n + 1

    def send(self, data, tag: int = 0) -> int:
        """Reserve, fill with ``data`` (at most a packet) and publish; the packet's number."""
        _check_tag(self.link, tag)              # before a packet number is taken
        count = _packet_items(self.link, data)
        n = self.reserve()
        self.acquire(n)[:count] = data
        self.publish(n, count, tag)
        return n

    def send_part(self, n: int, data, tag: int, part: int, parts: int) -> None:
        """Block ``part`` of the ``parts`` that send packet ``n`` (``data``: its items)
        together (``groute_link_send_part``): write this part's share of the items into the
        slot, and the last part to finish publishes."""
        link = self.link
        _check_parts(link, parts, "send_part")
        count = _packet_items(link, data)
        lo, hi = _share(count, part, parts)
        self.acquire(n)[lo:hi] = data[lo:hi]
        if _arrive(self._lock, link._written, n % link.num_buffers, parts):
            self.publish(n, count, tag)

    def send_grid(self, first: int, data, parts: int) -> None:
        """The grid sends ``data`` as packets ``first``, ``first + 1``, ... (the i-th tagged
        i), each written by ``parts`` blocks (``groute_link_send_grid``; here the blocks run
        one after another, packet by packet)."""
        link = self.link
        _check_parts(link, parts, "send_grid")
        _check_first(link, first, "send_grid")
        _check_open(link)
        shape = _check_items(link, data)       # before any packet number is taken
        if not shape:
            raise ValueError(f"{link.name}: send_grid sends a 1-d or wider array of items, got "
                             f"a 0-d array")
        per = link.packet_size
        packets = -(-int(shape[0]) // per)
        with self._lock:
            link._head[0] = max(int(link._head[0]), first + packets)
        for i in range(packets):
            for part in range(parts):
                self.send_part(first + i, data[i * per:(i + 1) * per], i, part, parts)

    def close(self) -> None:
        """What the close kernel does: publish the number of packets sent."""
        self.link._end[0] = self.link._head[0] + 1


class LinkReceiver:
    """The receiving end for functions on the receiver's stream threads (CPU backend): the
    receiving device functions of ``link.cuh`` as methods; gives up as :class:`LinkSender`."""

    def __init__(self, link: DeviceLink):
        self.link = link
        self._lock = link._claim_locks[1]

    def next(self) -> int:
        """The next packet number to receive (for receivers that run until the link ends)."""
        return self.claim(None)

    def claim(self, limit) -> int | None:
        """The next packet number below ``limit`` (None: no limit), or None once reached."""
        return _claim(self._lock, self.link._tail, limit)

    def receive(self, n: int):
        """Wait for packet ``n``: ``(items, tag)``, or None when the link ended before it."""
        link = self.link
        slot = n % link.num_buffers
        _wait(link, lambda: link._ready[slot] == n + 1 or link._ended_before(n), f"packet {n}")
        if link._ready[slot] != n + 1:
            return None
        return link._slots[slot][:int(link._count[slot])], int(link._tag[slot])

    def release(self, n: int) -> None:
        """Done reading packet ``n``: its slot goes back to the sender."""
        self.link._freed[n % self.link.num_buffers] = n + 1

    def release_part(self, n: int, parts: int) -> None:
        """One of the ``parts`` blocks that read packet ``n`` is done
        (``groute_link_release_part``): the last of them releases the slot."""
        _check_parts(self.link, parts, "release_part")
        if _arrive(self._lock, self.link._taken, n % self.link.num_buffers, parts):
            self.release(n)

    def receive_grid(self, first: int, dst, count: int, parts: int) -> bool:
        """The grid receives the ``count`` items that :meth:`LinkSender.send_grid` sends from
        packet ``first`` on, each packet read by ``parts`` blocks, which place their shares in
        ``dst`` (None: only release); False when the link ended before the message did
        (``groute_link_receive_grid``)."""
        link = self.link
        _check_parts(link, parts, "receive_grid")
        _check_first(link, first, "receive_grid")
        if not is_int(count) or count < 0:
            raise ValueError(f"{link.name}: receive_grid takes an int count of items >= 0, got "
                             f"{count!r}")
        if dst is not None:
            shape = _check_items(link, dst)
            if not shape or shape[0] < count:
                raise ValueError(f"{link.name}: receive_grid places {count} items, into a dst "
                                 f"of shape {shape}")
        per = link.packet_size
        packets = -(-count // per)
        with self._lock:
            link._tail[0] = max(int(link._tail[0]), first + packets)
        for i in range(packets):
            got = self.receive(first + i)
            if got is None:
                return False
            items = got[0][:count - i * per]    # a longer message's rest is not placed
            for part in range(parts):
                if dst is not None:
                    lo, hi = _share(int(items.shape[0]), part, parts)
                    dst[i * per + lo:i * per + hi] = items[lo:hi]
                self.release_part(first + i, parts)
        return True


def _claim(lock, counter, limit) -> int | None:
    """The next number of ``counter[0]`` below ``limit`` (None: no limit), taken, or None once
    reached (``groute_link_claim``): the sender's packet numbers (``head``) and the receiver's
    (``tail``) alike."""
    with lock:
        n = int(counter[0])
        if limit is not None and n >= limit:
            return None
        counter[0] = n + 1
    return n


def _check_parts(link, parts, what: str) -> None:
    """``parts``: how many blocks share each packet, a whole number >= 1 (with none, a
    packet would be neither written nor read, and the other end would wait for it)."""
    positive_int(f"{link.name}: {what}'s parts (the blocks that share each packet)", parts)


def _check_open(link) -> None:
    """A send on the CPU backend after the link's close (which told the receivers how many
    packets there were): refused."""
    if int(link._end[0]):
        raise RuntimeError(f"{link.name}: a send after the link was closed")


def _check_first(link, first, what: str) -> None:
    """``first``: a message's first packet number, a whole number >= 0 (a packet numbered
    below 0 is never sent, and its receiver would wait out the timeout)."""
    if not is_int(first) or first < 0:
        raise ValueError(f"{link.name}: {what}'s first packet number is an int >= 0, got "
                         f"{first!r}")


def _check_tag(link, tag) -> None:
    """A packet's tag: a whole number the tag word (uint64) holds, as it is."""
    if not is_int(tag):
        raise TypeError(f"{link.name}: a packet's tag is an int, got {type(tag).__name__} "
                        f"{tag!r}")
    if not 0 <= int(tag) < 2**64:
        raise ValueError(f"{link.name}: a packet's tag is in [0, 2^64), got {tag}")


def _check_items(link, data) -> tuple:
    """``data``'s shape, where its items are ``link``'s: a ValueError naming the link for
    another dtype or item shape (a CUDA kernel would copy its bytes as the link's items; NumPy
    would cast them), a TypeError for what is not an array."""
    shape = getattr(data, "shape", None)
    if shape is None:
        raise TypeError(f"{link.name}: a packet is an array, got {type(data).__name__}")
    dtype = getattr(data, "dtype", link.dtype)      # an array-like without one: NumPy's to judge
    if dtype != link.dtype or tuple(shape[1:]) != link.item_shape:
        raise ValueError(f"{link.name}: carries {link.dtype} items of shape {link.item_shape}, got "
                         f"{dtype} items of shape {tuple(shape[1:])}")
    return tuple(shape)


def _packet_items(link, data) -> int:
    """How many items ``data`` sends as one packet of ``link``: its items checked
    (:func:`_check_items`), and a ValueError naming the link for more items than a packet
    holds, as a host-initiated Link refuses them."""
    shape = _check_items(link, data)
    count = int(shape[0]) if len(shape) else -1
    if not 0 <= count <= link.packet_size:
        raise ValueError(f"{link.name}: a packet holds 0..{link.packet_size} items, got "
                         f"{count if len(shape) else 'a 0-d array'}")
    return count


def _share(count: int, part: int, parts: int) -> tuple[int, int]:
    """The items ``[lo, hi)`` of a packet of ``count`` that part ``part`` of ``parts`` takes
    (``groute_link_share``, in items rather than 16-byte vectors)."""
    per = -(-count // parts)
    return min(count, part * per), min(count, (part + 1) * per)


def _arrive(lock, counter, slot: int, parts: int) -> bool:
    """A part arrives at ``counter[slot]`` (``groute_link_arrive``): True for the last of the
    ``parts``, which resets the counter for the slot's next packet."""
    with lock:
        done = int(counter[slot]) + 1
        counter[slot] = 0 if done == parts else done
    return done == parts


def _wait(link, predicate, what):
    """A wait of the protocol on the CPU backend: until ``predicate``, the link's stop or
    timeout (raised, as a kernel gives up)."""
    try:
        wait_for(lambda: predicate() or link._status[0] != OPEN, what=f"{what} on {link.name}",
                 timeout=link.timeout, stop=link.stop)
    except WaitTimeout:
        link._status[0] = TIMED_OUT
        raise link._timed_out() from None
    if not predicate():
        link.check()
