"""Soft priority's threshold step, once for the host (the counter and the CPU worker).

When no device has near work left but deferred work remains, the threshold moves ``delta``
beyond the larger of the old threshold and the least deferred value: jumping to the deferred
work rather than stepping through empty windows. The kernels compute the same in
``groute/operators/values.cuh`` (``next_threshold``); there the threshold is an int32 and
saturates at "unreached", here it is a Python number, which compares the same against any
stored value without saturating.
"""
from __future__ import annotations

import math


def next_threshold(threshold, far_min, delta):
    """The threshold after the near work ran out: ``delta`` past ``max(threshold, far_min)``
    (``far_min`` infinite, no deferred value known: past ``threshold``)."""
    base = threshold if far_min == math.inf else max(threshold, far_min)
    return base + delta
