"""Soft priority's threshold step, once for the host (the counter and the CPU worker).

When no device has near work left but deferred work remains, the threshold moves ``delta``
beyond the larger of the old threshold and the least deferred value: jumping to the deferred
work rather than stepping through empty windows. The kernels compute the same in
``groute/operators/values.cuh`` (``next_threshold``); there the threshold is an int32 and
saturates at "unreached", here it is a Python number, which compares the same against any
stored value without saturating.

Float distances are float32 on every backend, so a ``delta`` that float32 cannot tell apart
from the base (a window far narrower than the distances' spacing) would leave the threshold
where it was and the run waiting forever: the step then goes to the least float32 above the
base, as in the kernels.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def next_threshold(threshold, far_min, delta):
    """The threshold after the near work ran out.

    Parameters
    ----------
    threshold : int or float
        The threshold whose window ran out of near work.
    far_min : int or float
        The least deferred value, ``math.inf`` where none is known.
    delta : int or float
        The window's width.

    Returns
    -------
    int or float
        ``delta`` past ``max(threshold, far_min)`` (past ``threshold`` where ``far_min`` is
        infinite); for float values at least the least float32 above that base, so that every
        step admits a deferred float32 value the last one did not.
    """
    base = threshold if far_min == math.inf else max(threshold, far_min)
    step = base + delta
    if not isinstance(step, numbers.Integral) and base <= _FLOAT32_MAX:
        b32 = np.float32(base)
        with np.errstate(over="ignore"):        # float32's largest steps to infinity
            up = np.nextafter(b32, np.float32(np.inf))
        least = float(b32) if float(b32) > base else float(up)
        step = max(float(step), least)
    return step
