"""Which vertices the asynchronous push takes (``mode="async"`` of :mod:`groute.engines.iterate`):
the push rule and its thresholds, the one host-side definition both backends' launches use.

A vertex ``v`` is pushed when its residual ``r_v`` exceeds ``eps_unit * w_v``:

* ``push_rule="uniform"`` (:class:`groute.tuning.PageRankTuning`): ``w_v = 1``, one threshold
  for every vertex (Whang et al.'s push, the variant Groute runs);
* ``push_rule="degree"`` (Andersen, Chung and Lang 2006): ``w_v = max(outdeg(v), 1)``, the
  out-arcs in the vertex's row of its device's CSR (on a weighted graph too: the arc count,
  not the weights). A hub then waits until it holds mass worth its arcs, instead of pushing
  its whole adjacency with a small residual in nearly every round.

``eps_unit = eps * n / W`` with ``W = sum_v w_v`` over every vertex of every device
(:func:`unit_scale`), ``eps`` the threshold per vertex the stopping rule allows
(:func:`host_threshold`, :func:`push_thresholds`). The guarantee is the same under both rules:
the thresholds add up to what ``n`` copies of ``eps`` do, ``sum_v eps_unit * w_v = eps * n / W
* W = n * eps``, so when no vertex is above its threshold ``sum_v r_v <= sum_v eps_unit * w_v =
n * eps``, which is the stopping rule's bound (relative: ``<= n tol`` times the mass; absolute:
``<= n tol``). A finite run in which no vertex is above its threshold has therefore converged,
whichever rule it ran. Under the uniform rule ``W = n`` and ``n / W`` is exactly 1, so its
thresholds are those it had before there was a choice.

The kernels compare in float32 (``eps_unit * (float)w_v``, rounded to nearest: at most about
two float32 ulps, 1.2e-7 relative, above the exact product); :data:`THRESHOLD_MARGIN` keeps
the persistent kernel's thresholds far enough below the rule's share to absorb that, as it
absorbs the rounding of the residuals' sums.
"""
from __future__ import annotations

import numpy as np

from .iteration import LinearIteration

#: the margin below the stopping rule's bound per vertex that the persistent push kernel's
#: threshold keeps (:func:`push_thresholds`), so that float rounding never lets a run whose
#: every residual is at or below its threshold fail the rule
THRESHOLD_MARGIN = 1e-6


def push_weights(rule: str, outdeg) -> np.ndarray:
    """Each vertex's weight ``w_v`` in the push test ``r_v > eps_unit * w_v`` under push rule
    ``rule`` (:data:`groute.tuning.PUSH_RULES`), from its out-degree ``outdeg`` (int64): 1
    (``"uniform"``) or ``max(outdeg, 1)`` (``"degree"``; a dangling vertex weighs 1, so every
    threshold is at least ``eps_unit``, the one the kernels test first).

    Examples
    --------
    >>> push_weights("degree", np.array([0, 1, 5])).tolist()
    [1, 1, 5]
    >>> push_weights("uniform", np.array([0, 1, 5])).tolist()
    [1, 1, 1]
    """
    outdeg = np.asarray(outdeg, dtype=np.int64)
    if rule == "uniform":
        return np.ones(outdeg.shape, np.int64)
    if rule == "degree":
        return np.maximum(outdeg, 1)
    raise ValueError(f"push_rule must be 'uniform' or 'degree'; got {rule!r}")


def unit_scale(n: int, total_weight: int) -> float:
    """What the threshold per vertex ``eps`` is multiplied by to give ``eps_unit``, the
    threshold per unit of weight: ``n / W``, ``total_weight`` being ``W``, the sum of
    :func:`push_weights` over all ``n`` vertices (every device's), so that the thresholds add
    up to ``n * eps`` (exactly 1 under the uniform rule, where ``W = n``).

    Examples
    --------
    >>> unit_scale(4, 4), unit_scale(4, 10)
    (1.0, 0.4)
    """
    return int(n) / int(total_weight) if int(total_weight) > 0 else 1.0


def host_threshold(iteration: LinearIteration, tol: float, n: int, mean_base: float,
                   scale: float = 1.0) -> float:
    """The host-driven push's threshold per unit of weight (``PushWorker``): every vertex
    ends with its residual at most its threshold, so the residuals sum to at most ``n`` times
    the threshold per vertex: relative, ``n * tol`` times the mean base per vertex
    ``mean_base`` (PageRank's ``tol (1-d)``, so the L1 error of ``y`` is at most ``n * tol``
    times its mass, the least mass being the base's sum); absolute, ``tol``. ``scale``:
    :func:`unit_scale`.

    Examples
    --------
    >>> from groute.engines import LinearIteration
    >>> katz = LinearIteration(name="katz", share="x", share_numpy=lambda x, deg: x,
    ...                        stop="absolute")
    >>> host_threshold(katz, 1e-6, 100, 1.0), host_threshold(katz, 1e-6, 100, 1.0, scale=0.5)
    (1e-06, 5e-07)
    """
    if iteration.stop == "relative":
        eps = iteration.bound(tol, n) * mean_base
    else:
        eps = tol
    return eps * scale


def push_thresholds(iteration: LinearIteration, tol: float, n: int, base_sum: float,
                    scale: float = 1.0) -> tuple[float, float]:
    """The persistent push kernel's threshold per unit of weight (iterate.cu
    ``pr_async_persistent``): ``(eps0, eps_per_mass)``, the kernel pushing a vertex whose
    residual exceeds ``max(eps0, eps_per_mass * mass) * w_v`` with ``mass`` the sum of rank +
    residual at the devices' last decision and ``w_v`` its :func:`push_weights`. The stopping
    rule (``iteration``'s, with ``tol`` per vertex over ``n`` vertices) holds when the
    residuals sum to at most ``bound * mass`` (relative) or ``bound`` (absolute); thresholds
    adding up to at most that keep every run in which no vertex is above its threshold within
    the rule, and larger ones push less. Per vertex (``scale`` 1, the uniform rule): relative,
    ``eps_per_mass = bound / n`` (less :data:`THRESHOLD_MARGIN`) and ``eps0`` that times the
    base's sum ``base_sum``, the least mass there is (a push only adds to it); absolute,
    ``eps0 = bound / n`` (less the margin), ``eps_per_mass = 0``. Both are multiplied by
    ``scale`` (:func:`unit_scale`); ``eps0`` is a float32 value rounded down, as the kernel
    compares in float32.

    Examples
    --------
    >>> from groute.engines import LinearIteration
    >>> pagerank = LinearIteration(name="pagerank", share="x / (float)deg",
    ...                            share_numpy=lambda x, deg: x / deg)
    >>> eps0, per_mass = push_thresholds(pagerank, 1e-6, 100, 0.15)
    >>> bool(eps0 <= 1e-6 * 0.15) and bool(per_mass <= 1e-6)
    True
    """
    per_vertex = (iteration.bound(tol, n) / max(int(n), 1) * (1.0 - THRESHOLD_MARGIN)) * scale
    if iteration.stop == "relative":
        eps0, per_mass = per_vertex * float(base_sum), per_vertex
    else:
        eps0, per_mass = per_vertex, 0.0
    single = np.float32(eps0)
    if float(single) > eps0:
        single = np.nextafter(single, np.float32(0.0))
    return float(single), float(per_mass)
