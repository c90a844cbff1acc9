"""A Router's output port: where the segments routed to one endpoint arrive, from any input
(:class:`~groute.runtime.router.Router`), or from any rank at a flush
(:class:`~groute.runtime.rank_router.RankRouter`, which ends its stream its own way)."""
from __future__ import annotations

import collections
import inspect
import threading
import weakref

from ..errors import ContextStopped, WaitTimeout, again
from ..waiting import wait_for
from .segment import SegmentReceiver


class RouterOutput(SegmentReceiver):
    """Output port ``index`` of the router named ``name``: receives the segments routed to
    ``endpoint``, from any input (its :attr:`links`, which the router gives it).

    It holds no reference to its router, and a listener that is a bound method does not keep
    its object alive: the router holds its outputs, and the object that listens (a worklist,
    an engine) holds the router, so either reference back would make a cycle that keeps every
    link's receive buffers until Python's garbage collector runs."""

    def __init__(self, name: str, index: int, endpoint, *, timeout: float, stop):
        self.name = name
        self.index = index
        self.endpoint = endpoint
        self.timeout = timeout
        self.stop = stop
        #: the links into this output, one per input that reaches it
        self.links: list = []
        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._ended = 0
        self._listeners = []
        self.received = 0

    def add_arrival_listener(self, fn) -> None:
        """Call ``fn()`` after each segment arrives here, outside this output's lock (for a
        receiver that sleeps on a condition of its own and polls). A bound method is held
        weakly where its object can be (the object that listens keeps the router): once that
        object is gone, it is not called."""
        try:
            ref = weakref.WeakMethod(fn) if inspect.ismethod(fn) else None
        except TypeError:       # an object without weak references (__slots__): held
            ref = None
        self._listeners.append(ref if ref is not None else lambda: fn)

    def _deliver(self, batch):
        """A link hands over ``batch`` (a list of PendingSegments), or ends (None)."""
        with self._cond:
            if batch is None:
                self._ended += 1
            else:
                self._queue.extend(batch)
                self.received += len(batch)
            self._cond.notify_all()
        if batch:
            for ref in self._listeners:
                fn = ref()
                if fn is not None:
                    fn()

    def pending(self) -> int:
        """Segments that arrived and are not taken yet (a snapshot, taken without the lock)."""
        return len(self._queue)

    def _finished(self):
        return self._ended >= len(self.links)

    def _waiting_for(self) -> str:
        return f"a segment at {self.name} output {self.index}"

    def _held_by_receiver(self) -> str:
        """Why a receive here waits in vain: the receiver holds every buffer of a link whose
        sends wait for one (:meth:`Link.held_by_receiver`), or ""."""
        held = (link.held_by_receiver() for link in self.links)
        return next((why for why in held if why), "")

    def receive(self, timeout=None):
        """Next PendingSegment routed here, or ``None`` when every input is closed and drained."""
        with self._cond:
            try:
                wait_for(lambda: self._queue or self._finished(), cond=self._cond,
                         timeout=timeout if timeout is not None else self.timeout,
                         stop=self.stop, what=self._waiting_for())
            except WaitTimeout as exc:
                raise WaitTimeout(f"{exc}{self._held_by_receiver()}") from None
            if self._queue:
                return self._queue.popleft()
        return self._end()

    def _end(self):
        """``receive``'s answer once the stream is over: None, or what ended a link."""
        errors = [l._error for l in self.links if l._error is not None]
        if errors:
            raise again(errors[0])
        if not all(l.closed for l in self.links):
            raise ContextStopped(f"{self.name} output {self.index} stopped before its inputs closed")
        return None

    def poll(self):
        with self._cond:
            return self._queue.popleft() if self._queue else None
