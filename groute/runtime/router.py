"""Router: a virtual endpoint that picks a destination for each segment by a policy.

``Router(inputs, outputs, policy)`` connects every input endpoint to every output endpoint with
a :class:`~groute.runtime.link.Link` (created once, each with its own receive buffers), or only the
``pairs`` asked for (a ring needs one link per input, not one per output: see
:func:`groute.runtime.policies.reach`). A segment sent into input ``i`` is not copied to the router: the
policy picks output ``j`` and the link ``i -> j`` copies straight from the source memory to the
destination; a policy that picks an output input ``i`` has no link to is an error. With an availability
route the router waits until one of the allowed links has a free receive buffer and uses the
first such one, which is how "send to the first free device" load balancing works. A broadcast
sends on every allowed link before it returns, straight from the source: with a broadcasting
policy (:func:`~groute.runtime.policies.broadcasts`) the links of one input share a copy stream,
and a broadcast issues its copies there one after another with one event for all of them
(:func:`~groute.runtime.link.send_all`); the copies of other links go on their own streams.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..config import resolve_timeout
from ..errors import WaitTimeout
from ..waiting import wait_for
from .link import Link, SendHandle, send_checked
from .policies import AVAILABILITY, BROADCAST, Route, as_route, broadcasts, by_source
from .router_output import RouterOutput
from .router_ports import InputPorts, router_ports
from .segment import Segment, route_pairs


#: how long an owner's ``close`` waits, per link, for its routers' links to end and for their
#: last copies (:meth:`Router.join`): they end at once once drained, so a longer wait means a
#: receiver still holds buffers, and a close must not hang on that
CLOSE_JOIN_SECONDS = 5.0


class _Broadcast(Route):
    """A broadcast route with its links (the router's, input to each destination)."""

    def __init__(self, destinations, links):
        super().__init__(tuple(destinations), BROADCAST)
        object.__setattr__(self, "links", links)


class _MultiHandle:
    """Completion of a broadcast: every copy done."""

    def __init__(self, handles):
        self.handles = handles

    def done(self):
        return all(h.done() for h in self.handles)

    def wait(self, timeout=None, stop=None):
        for h in self.handles:
            h.wait(timeout, stop)


class RouterInput:
    """Input port ``index`` of a router: ``send`` routes a segment from this endpoint. It
    keeps its router alive; the router does not hold its inputs (:class:`InputPorts`)."""

    def __init__(self, router: "Router", index: int):
        self.router = router
        self.index = index
        self.endpoint = router.input_endpoints[index]

    def send(self, data, *, event=None, metadata=None):
        return self.router._route(self.index, data, event, metadata)

    def close(self):
        self.router._close_input(self.index)


class Router:
    """See the module docstring. ``policy`` is a function (see :mod:`groute.runtime.policies`);
    ``pairs``: the (input, output) index pairs to join with a link (None: every pair);
    ``batching``: the outputs' receivers take segments of several packets (see
    :class:`~groute.runtime.link.Link`). Over the devices of a
    :class:`~groute.runtime.rank_context.RankContext` (``ctx``) it is a
    :class:`~groute.runtime.rank_router.RankRouter`, whose data plane is MPI."""

    def __new__(cls, *args, ctx=None, **kwargs):
        if ctx is not None and ctx.ranks is not None:
            from .rank_router import RankRouter
            return RankRouter(*args, ctx=ctx, **kwargs)
        return super().__new__(cls)

    def __init__(self, inputs, outputs, policy, *, packet_size: int, num_buffers: int = 2,
                 dtype=np.int32, item_shape=(), ctx=None, name: str = "router", pairs=None,
                 batching: bool = False):
        self.input_endpoints, self.output_endpoints = router_ports(inputs, outputs, policy)
        if all(e.is_host for e in self.input_endpoints + self.output_endpoints):
            raise ValueError(f"{name}: a Router needs a device among its inputs or outputs "
                             f"(all of them are the host)")
        if ctx is not None:
            ctx.admit()     # a router made after a failed run carries the next run's
        self.policy = policy
        self.name = name
        self.ctx = ctx
        self.timeout = resolve_timeout(ctx.timeout if ctx is not None else None)
        any_device = next(e.device for e in self.input_endpoints + self.output_endpoints if not e.is_host)
        self.stop = ctx.stop_event if ctx is not None else any_device.stop_event
        self._room = threading.Condition()
        self.outputs = [RouterOutput(name, j, e, timeout=self.timeout, stop=self.stop)
                        for j, e in enumerate(self.output_endpoints)]
        shape = (len(self.input_endpoints), len(self.outputs))
        wanted = route_pairs(name, pairs, shape)
        for i, j in sorted(wanted):
            if not (0 <= i < shape[0] and 0 <= j < shape[1]):
                raise ValueError(f"{name}: pair ({i}, {j}) names no input and output "
                                 f"({shape[0]} inputs, {shape[1]} outputs)")
            if self.input_endpoints[i].is_host and self.output_endpoints[j].is_host:
                raise ValueError(f"{name}: input {i} and output {j} are both the host, which no "
                                 f"Link joins; leave the pair out (pairs=[...])")
        # a broadcasting policy's links from one input share a copy stream (see send_all)
        shares = [object() if broadcasts(policy) else None for _ in self.input_endpoints]
        #: ``links[i][j]``: the link from input i to output j (None where ``pairs`` has none)
        self.links = [[Link(src, dst, packet_size, num_buffers, dtype=dtype, item_shape=item_shape,
                            ctx=ctx, name=f"{name}[{i}->{j}]", deliver=self.outputs[j]._deliver,
                            batching=batching, share_stream=shares[i])
                       if (i, j) in wanted else None
                       for j, dst in enumerate(self.output_endpoints)]
                      for i, src in enumerate(self.input_endpoints)]
        for _, _, link in self.each_link():
            link.add_room_listener(self._room)
        for j, output in enumerate(self.outputs):
            output.links = self.links_to(j)
        self._first = [next((link for link in row if link is not None), None) for row in self.links]
        #: each input's route, where the policy answers by the source alone (``by_source``)
        self._routes = [None] * shape[0]
        self.routed = np.zeros(shape, dtype=np.int64)            # segments per (input, output)
        self.routed_elements = np.zeros(shape, dtype=np.int64)   # their elements (rows)

    @property
    def inputs(self) -> InputPorts:
        """The input ports: ``inputs[i].send(data)`` routes a segment from input ``i``."""
        return InputPorts(self, RouterInput)

    def each_link(self):
        """``(i, j, link)`` for every link, input by input."""
        return [(i, j, link) for i, row in enumerate(self.links)
                for j, link in enumerate(row) if link is not None]

    def links_to(self, j):
        return [row[j] for row in self.links if row[j] is not None]

    def _route(self, i, data, event, metadata):
        first = self._first[i]
        if first is not None:       # what any of its links would refuse, before the policy
            data = first._check_send(data, event, metadata)
        route = self._routes[i] or self._ask_policy(i, data, metadata)
        dests = route.destinations
        if route.strategy == BROADCAST:
            size = int(data.shape[0])
            for j in dests:
                self.routed[i, j] += 1
                self.routed_elements[i, j] += size
            return _MultiHandle(send_checked(route.links, data, event, metadata))
        if route.strategy == AVAILABILITY and len(dests) > 1:
            chosen = []

            def pick():
                for j in dests:
                    if self.links[i][j].has_room():
                        chosen.append(j)
                        return True
                return False
            with self._room:
                try:
                    wait_for(pick, cond=self._room, timeout=self.timeout, stop=self.stop,
                             what=f"{self.name}: a destination with room among outputs {list(dests)}")
                except WaitTimeout as exc:
                    if all(self.links[i][j].held() == self.links[i][j].num_buffers for j in dests):
                        raise WaitTimeout(f"{exc}: the receivers hold every receive buffer; "
                                          f"release() each PendingSegment after use") from None
                    raise
            return self._send(i, chosen[0], data, event, metadata)
        return self._send(i, dests[0], data, event, metadata)

    def _ask_policy(self, i, data, metadata) -> Route:
        """The policy's route for ``data`` from input ``i``, checked (outputs that exist and
        that input has links to), with the links of a broadcast; kept for the input's next
        sends where the policy's answer depends on the source alone (``by_source``)."""
        who = f"{self.name}: policy {getattr(self.policy, '__name__', self.policy)}"
        segment = Segment(data, dict(metadata or {}))
        try:
            answer = self.policy(segment, i, list(range(len(self.outputs))))
        except ValueError as exc:       # what the segment lacks (by_key's key): name the router
            if type(exc) is not ValueError:
                raise
            raise ValueError(f"{who}, a segment from input {i}: {exc}") from exc
        route = as_route(answer, who)
        dests = route.destinations
        if not dests:
            raise ValueError(f"{who} allowed no destination for a segment from input {i}")
        for j in dests:
            if not 0 <= j < len(self.outputs):
                raise ValueError(f"{self.name}: policy chose output {j}, but there are {len(self.outputs)}")
            if self.links[i][j] is None:
                raise ValueError(f"{self.name}: policy chose output {j} for input {i}, which has "
                                 f"no link there (the router's pairs)")
        if route.strategy == BROADCAST:
            route = _Broadcast(dests, [self.links[i][j] for j in dests])
        if by_source(self.policy):
            self._routes[i] = route
        return route

    def _send(self, i, j, data, event, metadata) -> SendHandle:
        self.routed[i, j] += 1
        self.routed_elements[i, j] += int(data.shape[0])
        return self.links[i][j].send(data, event=event, metadata=metadata)

    def _close_input(self, i):
        for link in self.links[i]:
            if link is not None:
                link.close()

    def flush(self) -> None:
        """Deliver the segments sent so far: here the links deliver as they go, so nothing;
        a :class:`~groute.runtime.rank_router.RankRouter` moves every rank's sends at its
        flush, which a bulk-synchronous step calls between its sends and its receives."""

    def close(self):
        """Close every input: queued segments still arrive, then outputs end."""
        for i in range(len(self.input_endpoints)):
            self._close_input(i)

    def join(self, timeout=None) -> bool:
        """Wait (at most ``timeout`` in all; default the router's, its context's) until every
        link has ended; True if all have."""
        deadline = time.monotonic() + resolve_timeout(self.timeout if timeout is None else timeout)
        # a link past the deadline is still asked (a timeout is > 0): one that ended says so
        return all([link.join(max(deadline - time.monotonic(), 1e-6))
                    for _, _, link in self.each_link()])
