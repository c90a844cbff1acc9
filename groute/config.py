"""Process-wide defaults: the wait timeout every blocking call falls back to.

Nothing in groute waits without a bound. The default (60 s) can be changed with
``GROUTE_TIMEOUT`` in the environment (read on first use, :mod:`groute.tuning`) or
:func:`set_default_timeout`. Reading it on first use, not at import, keeps ``import groute``
working under a bad value: the first blocking call raises the ValueError naming the variable,
where a caller (the command line) can report it.
"""
import math

from .tuning import setting

_default_timeout = None             # None: not read from the environment yet


def default_timeout() -> float:
    global _default_timeout
    if _default_timeout is None:
        _default_timeout = setting("GROUTE_TIMEOUT")
    return _default_timeout


def set_default_timeout(seconds: float) -> None:
    global _default_timeout
    _default_timeout = _checked(seconds, "")


def resolve_timeout(timeout):
    """``None`` means the default; anything else must be a positive number of seconds."""
    if timeout is None:
        return default_timeout()
    return _checked(timeout, " or None")


def _checked(seconds, alternatives: str) -> float:
    """``seconds`` as a float: positive and finite (an infinite wait is what the bound is for)."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"timeout must be finite positive seconds{alternatives}, got {seconds!r}")
    return float(seconds)


def logical_devices_requested(option=None) -> bool:
    """Whether a CUDA context may run more devices than there are GPUs as logical devices
    (:mod:`groute.device.logical`): ``option`` when given (True/False), else the environment's
    ``GROUTE_LOGICAL_DEVICES`` (1/true/yes/on, or 0/false/no/off/unset), read now."""
    if option is not None:
        return bool(option)
    return setting("GROUTE_LOGICAL_DEVICES")
