"""groute: asynchronous multi-GPU irregular computation from Python, after Groute (PPoPP 2017).

The dataflow API: a :class:`Context` owns devices (CUDA GPUs through CuPy, or NumPy CPU virtual
devices); :class:`Link` moves packetized segments between endpoints with bounded buffers;
:class:`Router` picks a destination per segment by a policy (:mod:`groute.policies`).
"""
from ._checkout import add_checkout_finder as _add_checkout_finder

_add_checkout_finder()

from .context import Context  # noqa: E402
from .endpoint import HOST, Endpoint
from .errors import ContextStopped, DeviceError, GrouteError, LinkClosed, WaitTimeout
from .link import Link, SendHandle
from .policies import Route, broadcast, by_key, by_owner, first_available, ring
from .router import Router
from .segment import PendingSegment, Segment

__version__ = "0.1.0"

__all__ = ["Context", "Endpoint", "HOST", "Link", "SendHandle", "Router", "Route", "Segment",
           "PendingSegment", "broadcast", "by_key", "by_owner", "first_available", "ring",
           "GrouteError", "DeviceError", "WaitTimeout", "ContextStopped", "LinkClosed"]
