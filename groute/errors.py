"""Exceptions raised by groute.

Every error says what went wrong and, where it can, what to do about it. Device-thread failures
are wrapped in :class:`DeviceError` naming the device, so a caller of a multi-device computation
learns which device failed and why, instead of waiting forever.

Where NetworkX has an exception for the same failure, groute raises one that is both a
:class:`GrouteError` and NetworkX's (:data:`NETWORKX_TWINS`): ``except nx.NodeNotFound`` and
``except groute.GrouteError`` both catch a missing source. Those classes are made when first
asked for (``groute.errors.NodeNotFound``), since importing NetworkX costs a call that raises
none of them a quarter of a second.
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
        self.detail = message       # the message without the device


class WaitTimeout(GrouteError, TimeoutError):
    """A wait exceeded its timeout. The message says what was being waited on."""


def stalled_by_user_code(what: str, where: str, seconds: float, waiter: str,
                         timeout: float) -> WaitTimeout:
    """The error for a wait of ``waiter`` that timed out while the user's code ``what`` had
    been running on ``where`` (a device, or another rank's) for ``seconds``: that code is why,
    and what to do about it."""
    return WaitTimeout(f"{what} has been running on {where} for {seconds:.1f} s, and {waiter} "
                       f"timed out waiting for it: a functor slower than the timeout "
                       f"({timeout:g} s) stalls the devices that wait for its device; make it "
                       f"faster, or give the context a longer timeout")


def error_text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in saying it could not be made: a user's exception whose
    ``__str__`` raises must not replace the failure being reported (and lose its device)."""
    try:
        return str(exc)
    except Exception as failed:  # noqa: BLE001 - whatever the user's __str__ raised
        return f"<its message could not be made: {type(failed).__name__} in __str__>"


def again(kept: BaseException) -> BaseException:
    """A fresh copy of ``kept``, an error an object keeps to raise to every later caller (a
    link's failure, a context's first one), for one more raise.

    Raising the kept object itself would give it that raise's traceback, whose frames hold
    whatever raised it (the link, the router, the context): keeper and error would keep each
    other, with the buffers behind them, until a garbage collection. The copy has the same
    type, message, attributes and ``__cause__``; an error that cannot be made again from its
    arguments is raised as it is."""
    cls = type(kept)
    try:
        fresh = cls.__new__(cls, *kept.args)
        fresh.args = kept.args
        fresh.__dict__.update(getattr(kept, "__dict__", {}))
        fresh.__cause__ = kept.__cause__
        fresh.__suppress_context__ = kept.__suppress_context__
        return fresh if str(fresh) == str(kept) else kept
    except Exception:  # noqa: BLE001 - a user's class that a copy does not fit (its own
        return kept    # arguments, slots that its message reads): the error itself


def to_keep(exc: BaseException) -> BaseException:
    """What an object keeps of ``exc`` to tell later waiters (the context's stop flag, a
    failed CPU stream): a copy without the traceback (:func:`again`), whose frames would hold
    the keeper; ``exc`` itself, traceback and all, where no faithful copy can be made (the
    caller sees that one, and must see its frames)."""
    fresh = again(exc)
    return fresh.with_traceback(None) if fresh is not exc else exc


class ContextStopped(GrouteError):
    """The context was stopped (by an error elsewhere or by shutdown) while this operation waited."""


class StoppedByFailure(DeviceError, ContextStopped):
    """A wait given up because a device failed: both the :class:`DeviceError` of that failure
    (``device`` names it, ``__cause__`` is the original exception) and a
    :class:`ContextStopped` (what was waited for did not happen)."""


class RankFailed(DeviceError):
    """A failure on another rank of a distributed context (:mod:`groute.distributed`):
    ``device`` names that rank's device and rank (``"cpu:1 (rank 1)"``), ``rank`` the rank, ``error`` the original
    exception's type name; the message carries the original message."""

    def __init__(self, notice):
        super().__init__(notice.device, f"{notice.error}: {notice.message}")
        self.rank = notice.rank
        self.error = notice.error


class LinkClosed(GrouteError):
    """A send on a link that has been closed."""


class NotRunOnGroute(GrouteError, RuntimeError):
    """A NetworkX call that the backend (``backend="groute"``, or groute first in
    ``nx.config.backend_priority``) does not run with the arguments or graph it was given, while
    ``nx.config.backends.groute.fallback_to_nx`` is False, so NetworkX does not run it instead.

    ``function`` names the NetworkX function, ``reason`` says why groute declined. Not a
    NotImplementedError, which NetworkX's dispatcher answers by running the call itself (it is
    a RuntimeError, as NotImplementedError is).
    """

    def __init__(self, function: str, reason: str):
        super().__init__(f"groute does not run {function}() here: {reason} "
                         f"(nx.config.backends.groute.fallback_to_nx is False, so NetworkX does "
                         f"not run it instead; set it to True to let NetworkX run such calls)")
        self.function = function
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.function, self.reason)


class _PowerIterationMessage:
    """What :data:`NETWORKX_TWINS`' ``PowerIterationFailedConvergence`` adds to NetworkX's: a
    message that says what to do, beside NetworkX's ``num_iterations``."""

    def __init__(self, num_iterations: int, message: str | None = None):
        Exception.__init__(self, message or f"power iteration failed to converge within "
                                            f"{num_iterations} iterations")
        self.num_iterations = num_iterations


#: groute's name -> (NetworkX's exception it also is, the groute bases, what it means): the
#: classes :func:`__getattr__` makes
NETWORKX_TWINS = {
    "GraphNotSupported": (
        "NetworkXNotImplemented", (GrouteError, ValueError),
        "An algorithm does not accept this kind of graph (NetworkX's ``NetworkXNotImplemented``: "
        "``core_number`` on a graph with self-loops, ``connected_components`` on a directed "
        "graph). The message names the graph and says what to do."),
    "NodeNotFound": (
        "NodeNotFound", (GrouteError, ValueError),
        "A vertex id that is not a vertex of the graph (a source, a target): NetworkX's "
        "``NodeNotFound``, and a ValueError. The message names the id and the graph."),
    "PowerIterationFailedConvergence": (
        "PowerIterationFailedConvergence", (_PowerIterationMessage, GrouteError),
        "A power iteration (PageRank, Katz centrality) did not meet its stopping rule within "
        "``max_iter`` iterations: NetworkX's ``PowerIterationFailedConvergence`` "
        "(``num_iterations``), with what to do about it in the message."),
}


def __getattr__(name):
    """The classes of :data:`NETWORKX_TWINS`, made on first use (NetworkX imported then)."""
    if name not in NETWORKX_TWINS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import networkx as nx
    theirs, bases, doc = NETWORKX_TWINS[name]
    cls = type(name, (*bases, getattr(nx, theirs)),
               {"__doc__": doc, "__module__": __name__, "__qualname__": name})
    globals()[name] = cls
    return cls
