"""Process-wide defaults: the wait timeout every blocking call falls back to, and what a
timeout may be.

Nothing in groute waits without a bound. The default (60 s) can be changed with
``GROUTE_TIMEOUT`` in the environment (read on first use, :mod:`groute.tuning`) or
:func:`set_default_timeout`. Reading it on first use, not at import, keeps ``import groute``
working under a bad value: the first blocking call raises the ValueError naming the variable,
where a caller (the command line) can report it.

Every timeout, given or from the environment, is resolved here: positive, finite and at most
:data:`MAX_TIMEOUT` seconds. An infinite wait is what the bound is for, and a longer one than
that stands for one: its deadline is beyond what the platform's waits take
(``threading.TIMEOUT_MAX``, a ``time_t``), so it would fail in a wait or at shutdown.
"""
import math
import numbers
from contextlib import contextmanager

from .tuning import setting

#: the longest timeout groute accepts, in seconds (a week): no single wait of a run takes
#: longer, and every deadline the runtime derives from a timeout stays within the platform's
MAX_TIMEOUT = 7 * 24 * 3600.0

_default_timeout = None             # None: not read from the environment yet


def default_timeout() -> float:
    global _default_timeout
    if _default_timeout is None:
        _default_timeout = _checked(setting("GROUTE_TIMEOUT"), "GROUTE_TIMEOUT", "")
    return _default_timeout


def set_default_timeout(seconds: float) -> None:
    global _default_timeout
    _default_timeout = _checked(seconds, "timeout", "")


@contextmanager
def default_timeout_of(seconds: float, name: str = "timeout"):
    """:func:`set_default_timeout` for the ``with`` block only (the command line's
    ``--timeout``: a program that runs a command through ``groute.cli.main`` keeps its own
    default afterwards); a bad ``seconds`` is an error naming ``name``."""
    global _default_timeout
    before = _default_timeout
    _default_timeout = _checked(seconds, name, "")
    try:
        yield
    finally:
        _default_timeout = before


def resolve_timeout(timeout):
    """``None`` means the default; anything else must be a positive number of seconds, at
    most :data:`MAX_TIMEOUT`."""
    if timeout is None:
        return default_timeout()
    return _checked(timeout, "timeout", " or None")


def _checked(seconds, name: str, alternatives: str) -> float:
    """``seconds`` as a float: positive, finite and at most :data:`MAX_TIMEOUT` (module
    docstring); a TypeError naming ``name`` for what is not a number of seconds (a string, a
    bool), a ValueError for a number out of range."""
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds{alternatives}, got {seconds!r} "
                        f"({type(seconds).__name__})")
    # an int is finite however large (math.isfinite would overflow on 10**400)
    if not (seconds > 0 and (isinstance(seconds, numbers.Integral) or math.isfinite(seconds))):
        raise ValueError(f"{name} must be finite positive seconds{alternatives}, got "
                         f"{seconds!r}")
    if seconds > MAX_TIMEOUT:
        raise ValueError(f"{name} must be at most {MAX_TIMEOUT:g} s (a week: no wait of a run "
                         f"takes longer, and a longer one is beyond what the platform's clocks "
                         f"wait for){alternatives}, got {seconds!r}")
    return float(seconds)


def logical_devices_requested(option=None) -> bool:
    """Whether a CUDA context may run more devices than there are GPUs as logical devices
    (:mod:`groute.device.logical`): ``option`` when given (True/False), else the environment's
    ``GROUTE_LOGICAL_DEVICES`` (1/true/yes/on, or 0/false/no/off/unset), read now."""
    if option is not None:
        return bool(option)
    return setting("GROUTE_LOGICAL_DEVICES")
