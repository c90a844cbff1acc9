"""Checking an app's (or a peer's) answer against the reference (:mod:`.references`).

A benchmark that times a wrong answer is worse than none, so every case is verified and a
mismatch makes the case FAIL. Each check returns a :class:`Verdict` saying what was compared
and, on failure, where the first difference is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .specs import spec_for
from .suite import PR_MAX_L1, SSSP_RTOL


@dataclass
class Verdict:
    ok: bool
    detail: str
    #: the app's error measure where it has one (PR: L1 distance; SSSP: max relative error)
    error: float | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "detail": self.detail, "error": self.error}


def verify(app: str, values, ref, graph=None) -> Verdict:
    """Compare ``values`` (indexed by the graph's vertex ids) with the reference ``ref``."""
    try:
        values = np.asarray(values)
    except Exception as exc:  # e.g. a device array: the app broke its contract
        return Verdict(False, f"result is not an array NumPy can read: {exc}")
    if values.shape != ref.shape:
        return Verdict(False, f"result has shape {values.shape}, expected {ref.shape}")
    spec = spec_for(app)
    if spec.verify == "allclose":
        return _allclose(values, ref, spec.rtol)
    try:
        check = KINDS[spec.verify]
    except KeyError:
        raise ValueError(f"the bench spec of {app!r} says verify={spec.verify!r}; known: allclose, "
                         f"{', '.join(KINDS)}") from None
    return check(values, ref, graph)


def _first_difference(mask, values, ref) -> str:
    bad = np.flatnonzero(mask)
    v = int(bad[0])
    return f"{bad.size} of {mask.size} vertices differ; first: vertex {v} has {values[v]!r}, expected {ref[v]!r}"


def _exact(values, ref, graph) -> Verdict:
    if not np.issubdtype(values.dtype, np.number):
        return Verdict(False, f"result dtype {values.dtype} is not numeric")
    diff = values.astype(np.int64) != ref.astype(np.int64)
    if diff.any():
        return Verdict(False, _first_difference(diff, values, ref))
    return Verdict(True, "equal to the reference")


def _distances(values, ref, graph) -> Verdict:
    values = values.astype(np.float64)
    ref = ref.astype(np.float64)
    if np.isnan(values).any():
        return Verdict(False, f"{int(np.isnan(values).sum())} distances are NaN")
    reach_diff = np.isinf(values) != np.isinf(ref)
    if reach_diff.any():
        return Verdict(False, "reachability differs: " + _first_difference(reach_diff, values, ref))
    fin = np.isfinite(ref)
    if not fin.any():
        return Verdict(True, "no vertex reachable, as in the reference", 0.0)
    rel = np.abs(values[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), np.finfo(np.float64).tiny)
    max_rel = float(rel.max())
    # Integer weights with distances below 2**24 are exact even in float32: demand equality then,
    # so an off-by-one-edge bug on a long path cannot hide inside a relative tolerance.
    exact = (graph is not None and getattr(graph, "weights", None) is not None
             and np.all(np.mod(np.asarray(graph.weights), 1) == 0) and float(ref[fin].max()) < 2**24)
    tol = 0.0 if exact else SSSP_RTOL
    if max_rel > tol:
        mask = np.zeros(ref.shape, bool)
        mask[np.flatnonzero(fin)[rel > tol]] = True
        how = "exact (integer weights)" if exact else f"rtol {tol:g}"
        return Verdict(False, f"distances differ beyond {how}: " + _first_difference(mask, values, ref),
                       max_rel)
    return Verdict(True, "distances equal the reference" if exact
                   else f"distances within rtol {tol:g} (max {max_rel:.2e})", max_rel)


def _ranks(values, ref, graph) -> Verdict:
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        return Verdict(False, f"{int((~np.isfinite(values)).sum())} ranks are not finite")
    from groute.graph.reference import pagerank_error
    l1, linf = pagerank_error(values, ref)
    if l1 > PR_MAX_L1:
        return Verdict(False, f"L1 distance to the reference {l1:.2e} > {PR_MAX_L1:g} "
                              f"(max per-vertex {linf:.2e}; sum of ranks {values.sum():.6f})", l1)
    return Verdict(True, f"L1 distance to the reference {l1:.2e} <= {PR_MAX_L1:g}", l1)


def _allclose(values, ref, rtol) -> Verdict:
    """Floats within ``rtol`` of the reference, with ``rtol`` times its largest magnitude as
    absolute slack (values near zero are sums of many small terms)."""
    if not np.issubdtype(values.dtype, np.number):
        return Verdict(False, f"result dtype {values.dtype} is not numeric")
    values, ref = values.astype(np.float64), ref.astype(np.float64)
    if not np.isfinite(values).all():
        return Verdict(False, f"{int((~np.isfinite(values)).sum())} values are not finite")
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    err = np.abs(values - ref)
    bad = err > rtol * np.abs(ref) + rtol * scale
    worst = float((err / max(scale, np.finfo(np.float64).tiny)).max()) if ref.size else 0.0
    if bad.any():
        return Verdict(False, f"beyond rtol {rtol:g}: " + _first_difference(bad, values, ref), worst)
    return Verdict(True, f"within rtol {rtol:g} of the reference (max error {worst:.2e} of the "
                         f"largest value)", worst)


def _components(values, ref, graph) -> Verdict:
    if not np.issubdtype(values.dtype, np.integer):
        return Verdict(False, f"labels have dtype {values.dtype}, expected integers")
    if np.array_equal(values.astype(np.int64), ref.astype(np.int64)):
        return Verdict(True, f"labels equal the reference ({np.unique(ref).size} components)")
    from groute.graph.reference import compare_labels
    if compare_labels(values, ref):
        return Verdict(True, "same components as the reference (labels not canonical)")
    n_ours, n_ref = np.unique(values).size, np.unique(ref).size
    return Verdict(False, f"components differ: {n_ours} found, {n_ref} in the reference")


#: ``App.verify`` -> its check (``allclose`` takes the app's ``rtol`` and is handled apart)
KINDS = {"exact": _exact, "distances": _distances, "ranks": _ranks, "partition": _components}
