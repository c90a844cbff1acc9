"""Exceptions raised by groute.

Every error says what went wrong and, where it can, what to do about it. Device-thread failures
are wrapped in :class:`DeviceError` naming the device, so a caller of a multi-device computation
learns which device failed and why, instead of waiting forever.
"""


class GrouteError(Exception):
    """Base class for groute errors."""


class DeviceError(GrouteError):
    """A failure inside a device's host thread or stream, re-raised in the caller.

    ``device`` names the device (e.g. ``"cpu:2"`` or ``"cuda:0"``); ``__cause__`` is the original
    exception.
    """

    def __init__(self, device, message):
        super().__init__(f"{device}: {message}")
        self.device = device


class WaitTimeout(GrouteError, TimeoutError):
    """A wait exceeded its timeout. The message says what was being waited on."""


class ContextStopped(GrouteError):
    """The context was stopped (by an error elsewhere or by shutdown) while this operation waited."""


class StoppedByFailure(DeviceError, ContextStopped):
    """A wait given up because a device failed: both the :class:`DeviceError` of that failure
    (``device`` names it, ``__cause__`` is the original exception) and a
    :class:`ContextStopped` (what was waited for did not happen)."""


class LinkClosed(GrouteError):
    """A send on a link that has been closed."""


class GraphNotSupported(GrouteError, ValueError):
    """An algorithm does not accept this kind of graph (where NetworkX raises
    ``NetworkXNotImplemented``: e.g. ``core_number`` on a graph with self-loops). The message
    names the graph and says what to do."""
