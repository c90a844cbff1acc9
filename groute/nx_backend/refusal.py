"""A call groute implements but declines: the reason logged at INFO, and NetworkX's run of the
call instead, or, with ``nx.config.backends.groute.fallback_to_nx`` False, an error.

NetworkX's dispatcher answers a backend's refusal by running the call itself and logs the reason
at DEBUG only, so a program that meant to run on GPUs can spend its time in NetworkX without a
word. Three places decline a call: the function's ``can_run`` rule, on the arguments
(:func:`refuse`); the conversion, on the graph's attributes; and the function, on the converted
data, both by raising NotImplementedError (:func:`refusing` wraps them). Each logs the function
and the reason on this module's logger (``groute.nx_backend.refusal``, under ``groute``) and,
when the setting forbids falling back, raises :class:`~groute.errors.NotRunOnGroute`, which
NetworkX's dispatcher does not catch, in place of the refusal.
"""
from __future__ import annotations

import functools
import logging

from groute.errors import NotRunOnGroute

from .devices import settings

log = logging.getLogger(__name__)


def refuse(function: str, reason: str) -> str:
    """Decline a call of NetworkX's ``function`` because of ``reason``: log it, and raise
    :class:`~groute.errors.NotRunOnGroute` where falling back to NetworkX is off; returns
    ``reason`` (a ``can_run`` answer) otherwise.

    Raises
    ------
    NotRunOnGroute
        When ``nx.config.backends.groute.fallback_to_nx`` is False.
    ValueError
        When a setting of ``nx.config.backends.groute`` is not a valid value.

    Examples
    --------
    >>> refuse("pagerank", "nstart has no groute form")
    'nstart has no groute form'
    """
    log.info("groute does not run %s() here: %s", function, reason)
    if not settings().fallback_to_nx:
        raise NotRunOnGroute(function, reason)
    return reason


def refusing(fn, function: str | None = None):
    """``fn`` (a backend function, or the conversion) whose NotImplementedError declines the call
    through :func:`refuse`: re-raised for NetworkX to run the call, or NotRunOnGroute.
    ``function`` names the NetworkX function; None for the conversion, which is told the
    call's function by NetworkX (its ``name`` argument)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotImplementedError as exc:
            name = function or kwargs.get("name") or "a conversion"
            try:
                refuse(name, str(exc) or type(exc).__name__)
            except NotRunOnGroute as refused:
                raise refused from exc
            raise
    return call
