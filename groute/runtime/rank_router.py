"""RankRouter: a Router whose devices are the ranks of a RankContext; data moves at its flush.

A :class:`~groute.runtime.router.Router` made over a
:class:`~groute.runtime.rank_context.RankContext` is one of these: the same ports, policies
and counters, so an engine written against a Router runs across processes unchanged. This
rank has one input and one output (its own device's); a segment sent into the input is routed
by the policy, as always, and waits in this rank's outbox for its destination's rank (this
one's own too).

Delivery is bulk-synchronous: :meth:`RankRouter.flush` (which every rank calls at the same
step; on a Router of one process it is a no-op, its links deliver as they go) sends every
outbox: one ``alltoall`` of their headers (destination, rows and metadata per segment), then
the rows through the context's transport (:mod:`~groute.runtime.rank_transport`: MPI, staged
through the host on CUDA, or NCCL between GPUs), after which every segment routed to this
rank, itself included, is at its output, in the order of the sending ranks and, from each, of
the sends. A send's handle is done once its segment has left (at the flush).

Segments are arrays of this rank's device (NumPy on the CPU backend, CuPy on CUDA), as a
Router's are: a received segment's ``event`` is the one after which its rows are in place
(None on the CPU backend), so a receiver orders its work after it (``wait_on`` its stream);
its release gives its receive buffer back to the router's pool (nothing on the CPU backend,
where the rows are MPI's own buffer).
"""
from __future__ import annotations

import collections
import math
import threading

import numpy as np

from ..config import resolve_timeout
from ..errors import LinkClosed, WaitTimeout
from ..waiting import wait_for
from .policies import BROADCAST, as_route
from .router_output import RouterOutput
from .router_ports import InputPorts, router_ports
from .segment import (PendingSegment, Segment, check_send_extras, item_shape_of,
                      route_pairs)


class _Sent:
    """The handle of a send on a RankRouter: done once the segment left at a flush."""

    def __init__(self):
        self._done = threading.Event()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout=None, stop=None) -> None:
        wait_for(self._done.is_set, what="a send to leave at the RankRouter's flush",
                 timeout=timeout, stop=stop)


class _Input:
    """Input port ``index``: this rank's sends (another rank's input is that rank's)."""

    def __init__(self, router, index):
        self.router = router
        self.index = index
        self.endpoint = router.input_endpoints[index]

    def send(self, data, *, event=None, metadata=None):
        """Route ``data`` (rows of this rank's device, written before ``event``, if given);
        it leaves at the router's next flush."""
        return self.router._route(self.index, data, event, metadata)

    def close(self):
        self.router.close()


class _Output(RouterOutput):
    """Output port ``index``: the segments routed to this rank's device, delivered at each
    flush; the stream ends when the router closes (``closed``, the router's flag: the port
    holds no reference to the router, see :class:`RouterOutput`)."""

    def __init__(self, name, index, endpoint, *, timeout, stop, closed):
        super().__init__(name, index, endpoint, timeout=timeout, stop=stop)
        self._closed = closed

    def _finished(self):
        return self._closed.is_set()

    def _waiting_for(self) -> str:
        return f"{super()._waiting_for()} (delivered at its flush)"

    def _held_by_receiver(self) -> str:
        return ""       # no receive buffers here: every rank's segments arrive at a flush

    def _end(self):
        return None


class _LinkState:
    """What a Router's callers ask of each link (ended, closed): one rank pair's state, which
    is the router's ``closed`` flag."""

    def __init__(self, closed: threading.Event):
        self._closed = closed

    @property
    def finished(self) -> bool:
        return self._closed.is_set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def join(self, timeout=None) -> bool:
        return True


class RankRouter:
    """See the module docstring; made by ``Router(...)`` when ``ctx`` is a RankContext, with
    the Router's arguments (``packet_size``, ``num_buffers`` and ``batching`` do not apply: a
    flush moves whole segments)."""

    def __init__(self, inputs, outputs, policy, *, packet_size: int = 0, num_buffers: int = 2,
                 dtype=np.int32, item_shape=(), ctx=None, name: str = "router", pairs=None,
                 batching: bool = False):
        self.input_endpoints, self.output_endpoints = router_ports(inputs, outputs, policy)
        self.ctx = ctx
        self.ranks = ctx.ranks
        self.policy = policy
        self.name = name
        self.dtype = np.dtype(dtype)
        self.item_shape = item_shape_of(item_shape)
        self.timeout = resolve_timeout(ctx.timeout)
        self.stop = ctx.stop_event
        self._closed = threading.Event()
        shape = (len(self.input_endpoints), len(self.output_endpoints))
        self.pairs = route_pairs(self.name, pairs, shape)
        self.outputs = [_Output(name, j, e, timeout=self.timeout, stop=self.stop,
                                closed=self._closed)
                        for j, e in enumerate(self.output_endpoints)]
        self._rank_of_output = [self._rank(e) for e in self.output_endpoints]
        self._rank_of_input = [self._rank(e) for e in self.input_endpoints]
        self._outbox = [[] for _ in range(self.ranks.size)]   # (output, rows, meta, handle, event)
        self._row_bytes = self.dtype.itemsize * math.prod(self.item_shape)
        #: moves the rows at a flush (its receive buffers are this router's)
        self.transport = ctx.open_transport()
        self._lock = threading.Lock()
        self._state = _LinkState(self._closed)
        self.routed = np.zeros(shape, dtype=np.int64)
        self.routed_elements = np.zeros(shape, dtype=np.int64)

    def _rank(self, endpoint):
        if endpoint.is_host:
            raise ValueError(f"{self.name}: a RankRouter joins devices (ranks); the host of each "
                             f"rank is that rank's own")
        return int(endpoint.device.index)

    @property
    def inputs(self) -> InputPorts:
        """The input ports (this rank sends from its own): made when asked for, as a
        :class:`~groute.runtime.router.Router`'s are."""
        return InputPorts(self, _Input)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: no more sends."""
        return self._closed.is_set()

    def each_link(self):
        """``(i, j, state)`` for every pair with this rank at one end (the others' pairs are
        theirs)."""
        here = self.ranks.rank
        return [(i, j, self._state) for i, j in sorted(self.pairs)
                if here in (self._rank_of_input[i], self._rank_of_output[j])]

    def links_to(self, j):
        return [self._state for i, jj in self.pairs if jj == j]

    # sending ------------------------------------------------------------------------------------
    def _rows(self, data):
        """``data`` as contiguous rows in this rank's device memory (a host array sent from a
        CUDA device is uploaded; a strided CuPy view is refused: its copy would run on no
        stream of the device)."""
        device = self.ctx.local_device
        if isinstance(data, np.ndarray) or device.xp is np or not hasattr(data, "flags"):
            data = np.ascontiguousarray(data)
            return data if device.xp is np else device.asarray(data)
        if not data.flags.c_contiguous:
            raise ValueError(f"{self.name}: sends contiguous rows from {device.name}; got a "
                             f"strided view (send a contiguous copy, made on the device's "
                             f"compute stream)")
        return data

    def _route(self, i, data, event, metadata):
        if self._rank_of_input[i] != self.ranks.rank:
            raise ValueError(f"{self.name}: input {i} is rank {self._rank_of_input[i]}'s; rank "
                             f"{self.ranks.rank} sends from its own input")
        if self.closed:
            raise LinkClosed(f"{self.name} is closed; no more sends")
        check_send_extras(self.name, event, metadata)
        data = self._rows(data)
        if data.dtype != self.dtype or tuple(data.shape[1:]) != self.item_shape:
            raise ValueError(f"{self.name}: carries {self.dtype} rows of shape {self.item_shape}, "
                             f"got {data.dtype} rows of shape {tuple(data.shape[1:])}")
        segment = Segment(data, dict(metadata or {}))
        who = f"{self.name}: policy {getattr(self.policy, '__name__', self.policy)}"
        route = as_route(self.policy(segment, i, list(range(len(self.outputs)))), who)
        dests = route.destinations if route.strategy == BROADCAST else route.destinations[:1]
        if not dests:
            raise ValueError(f"{who} allowed no destination for a segment from input {i}")
        handle = _Sent()
        for j in dests:
            if not 0 <= j < len(self.outputs) or (i, j) not in self.pairs:
                raise ValueError(f"{self.name}: policy chose output {j} for input {i}, which "
                                 f"has no link there")
            self.routed[i, j] += 1
            self.routed_elements[i, j] += int(data.shape[0])
            with self._lock:
                self._outbox[self._rank_of_output[j]].append((j, data, segment.metadata, handle,
                                                               event))
        return handle

    def flush(self) -> None:
        """Deliver every rank's outbox (collective: every rank calls it at the same step; see
        the module docstring). A failure of this rank's own here, the first it knows of,
        stops the context and so tells the other ranks (a flush may run on the caller's
        thread, outside the context's device work, which would tell them itself); a wait that
        timed out is not told as this rank's failure: a peer that died silently makes every
        rank's wait time out."""
        try:
            self._flush()
        except WaitTimeout:
            raise
        except BaseException as exc:
            if not self.ctx.stop_event.is_set():
                self.ctx.fail(self.ctx.local_device.name, exc)
            raise

    def _flush(self) -> None:
        with self._lock:
            outbox, self._outbox = self._outbox, [[] for _ in range(self.ranks.size)]
        what = f"{self.name}'s exchange"
        headers = [[(j, int(rows.shape[0]), meta) for j, rows, meta, _, _ in box]
                   for box in outbox]
        got_headers = self.ranks.alltoall(headers, what=what)
        row = self._row_bytes
        blocks = [[rows.reshape(-1).view(np.uint8) for _, rows, _, _, _ in box] for box in outbox]
        incoming = [[n * row for _, n, _ in heads] for heads in got_headers]
        after = list({id(e): e for box in outbox for *_, e in box if e is not None}.values())
        got = self.transport.exchange(blocks, incoming, after, what)
        for box in outbox:
            for _, _, _, handle, _ in box:
                handle._done.set()
        arrived = collections.defaultdict(list)
        release = got.lease.release if got.lease is not None else None
        count = 0
        for source, heads in enumerate(got_headers):
            data, at = got.per_rank[source], 0
            for j, n, meta in heads:
                rows = data[at:at + n * row].view(self.dtype).reshape((n, *self.item_shape))
                arrived[j].append(PendingSegment(rows, got.event, meta, release=release,
                                                 source=self.input_endpoints[source]
                                                 if source < len(self.input_endpoints) else None))
                at += n * row
                count += 1
        if got.lease is not None:
            got.lease.share(count)
        for j, segments in arrived.items():
            self.outputs[j]._deliver(segments)

    # life ------------------------------------------------------------------------------------------
    def close(self):
        """No more sends; receivers see the end once they took what arrived."""
        self._closed.set()
        for out in self.outputs:
            with out._cond:
                out._cond.notify_all()

    def join(self, timeout=None) -> bool:
        return True

    def __repr__(self):
        return (f"<RankRouter {self.name} rank {self.ranks.rank} of {self.ranks.size} over "
                f"{self.transport.name}>")
