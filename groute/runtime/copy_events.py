"""The events a copy stream's host Links record their copies into, and the sources those copies
still read.

A host :class:`~groute.runtime.link.Link` records an event after each copy it issues; every
packet the copy fills arrives as a PendingSegment holding that event. Making a CUDA event costs
the host more than recording one, so events are kept and recorded again; but recording an event
again moves it to the later work, so it must not happen while anything still asks the event
about its own copy. A segment does, until it is released: a segment whose event moved would
wait for a copy that is not its own, a copy that may itself wait for that segment's release.
The stream's held sources do too: a send's source array must outlive the copies that read it
(a pooling allocator would hand its memory out again, on another stream, while a copy still
reads it), and only its copy's event says when that is. So an event is recorded again only
once every receive slot whose packet it completes has been released and its copy has been seen
done. Links that issue on one stream (a router input's broadcasting links, whose broadcast
completes every link's packets with one event) share that stream's :class:`CopyEvents`.
"""
from __future__ import annotations

import collections
import threading
import weakref

from ..errors import WaitTimeout
from ..waiting import wait_for

_MADE = threading.Lock()


def finished(event) -> bool:
    """Whether ``event``'s work is done; an event whose stream failed counts as done (the
    stream runs nothing more, and the link's failure is reported elsewhere)."""
    try:
        return event.query()
    except Exception:  # noqa: BLE001 - a failed stream runs nothing more
        return True


class CopyEvents:
    """The copy events and held sources of one stream (see the module docstring); take it with
    :meth:`of`, which keeps it on the stream."""

    __slots__ = ("_stream", "_free", "_slots", "_sources", "_forgotten", "_lock")

    def __init__(self, stream):
        # weakly: the stream keeps this object, which must not keep the stream (a cycle
        # that would hold a link's stream, and its events, for the garbage collector)
        self._stream = weakref.ref(stream)
        self._free = []                        # events nothing asks about: to record again
        self._slots = {}                       # a kept event -> its unreleased slots
        self._sources = collections.deque()    # (event, source) of copies not seen done
        self._forgotten = collections.deque()  # events of gone links' slots, to count (forget)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, stream) -> "CopyEvents":
        """The stream's CopyEvents, made on first use and kept on the stream (so it lives and
        goes with it)."""
        with _MADE:
            events = getattr(stream, "_copy_events", None)
            if events is None:
                events = stream._copy_events = cls(stream)
            return events

    def record(self, slots: int):
        """An event recorded on the stream now, after the copy that fills ``slots`` receive
        slots (0: one no segment holds); kept until :meth:`released` has counted them all and
        its copy is done."""
        with self._lock:     # recording is one runtime call: done under the lock, taken once
            if self._forgotten:
                self._count_forgotten()
            event = self._stream().record(self._free.pop() if self._free else None)
            if slots:
                self._slots[event] = slots
        return event

    def released(self, event, slots: int = 1) -> None:
        """``slots`` of the slots ``event`` completes were released (an event not recorded
        here, or None, is ignored)."""
        with self._lock:
            self._count_released(event, slots)

    def _count_released(self, event, slots) -> None:
        """:meth:`released`'s count, lock held."""
        left = self._slots.get(event)
        if left is None:
            return
        if left > slots:
            self._slots[event] = left - slots
            return
        del self._slots[event]
        if not any(held is event for held, _ in self._sources):
            self._free.append(event)

    def forget(self, events, free) -> None:
        """A link is gone: the slots it held (``events[i]`` where ``free[i]`` is 0), whose
        segments nobody will release, no longer hold their events. Takes no lock: it runs as
        the link's finalizer, which the garbage collector may call on a thread that holds this
        object's lock; the next :meth:`record` or :meth:`hold` counts them."""
        self._forgotten.extend(event for event, is_free in zip(events, free)
                               if event is not None and not is_free)

    def _count_forgotten(self) -> None:
        """The slots of gone links (:meth:`forget`) counted as released, lock held."""
        forgotten = self._forgotten
        while forgotten:
            self._count_released(forgotten.popleft(), 1)

    def hold(self, event, source) -> None:
        """Keep ``source`` alive until the copy ``event`` (recorded by :meth:`record`) is done,
        and let go of those whose copies are now done (from the oldest, up to the first still
        running)."""
        with self._lock:
            self._let_go()
            if event in self._free:     # an earlier copy's event (a send failing part-way)
                self._free.remove(event)
            self._sources.append((event, source))

    def let_go(self) -> None:
        """Let go of the sources whose copies are now done (a link that ends calls it: its
        stream's last sources would otherwise wait for the stream's next send)."""
        with self._lock:
            self._let_go()

    def let_go_when_done(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds (none at all for 0), for the copies of every
        source held now to be done, then let go of those that are; True if all were (a link's
        ``join``: without it, a link's last sources would live until its stream's next send,
        which may never come)."""
        with self._lock:
            last = self._sources[-1][0] if self._sources else None
        done = last is None or finished(last)
        if not done and timeout > 0:
            try:
                wait_for(lambda: finished(last), what="a link's last copies", timeout=timeout)
                done = True
            except WaitTimeout:
                pass
        self.let_go()
        return done

    def _let_go(self) -> None:
        """:meth:`let_go`'s work, lock held: the slots of gone links counted, then the held
        sources let go from the oldest, up to the first whose copy still runs."""
        if self._forgotten:
            self._count_forgotten()
        held = self._sources
        while held and finished(held[0][0]):
            done, _ = held.popleft()
            if done not in self._slots and not any(e is done for e, _ in held):
                self._free.append(done)
