"""Groute's dataflow runtime: the model the rest of groute is built on.

A :class:`Context` owns the devices and one host worker thread per device; :class:`Endpoint`
names where data lives (a device, the host, a router port); a :class:`Link` moves packetized
:class:`Segment` s between two endpoints through a bounded set of receive buffers
(back-pressure by release); a :class:`Router` picks a destination for each segment by a routing
policy (:mod:`groute.runtime.policies`: by owner, by key, ring, first available, broadcast).
Every wait is bounded and stop-aware (:mod:`groute.waiting`, beneath the devices too), so a
failure on one device stops the whole computation.

Modules, one idea each: :mod:`.context`, :mod:`.endpoint`, :mod:`.segment`, :mod:`.link`,
:mod:`.router_output` (a router's output port), :mod:`.router_ports` (what a router joins),
:mod:`.device_link`, :mod:`.pump`, :mod:`.router`, :mod:`.policies`. The names below are also importable from ``groute``.
"""
from .context import Context
from .endpoint import HOST, Endpoint
from .device_link import DeviceLink, LinkReceiver, LinkSender
from .link import Link, SendHandle
from .policies import Route, broadcast, by_key, by_owner, first_available, ring
from .router import Router
from .segment import PendingSegment, Segment

__all__ = ["Context", "Endpoint", "HOST", "Link", "DeviceLink", "LinkSender", "LinkReceiver",
           "SendHandle", "Router", "Route", "Segment",
           "PendingSegment", "broadcast", "by_key", "by_owner", "first_available", "ring"]
