"""Checking an app's (or a peer's) answer against the graph layer's CPU reference.

A benchmark that times a wrong answer is worse than none, so every case is verified and a
mismatch makes the case FAIL. Each check returns a :class:`Verdict` saying what was compared
and, on failure, where the first difference is.
"""
from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .suite import PR_MAX_L1, SSSP_RTOL

log = logging.getLogger(__name__)


@dataclass
class Verdict:
    ok: bool
    detail: str
    #: the app's error measure where it has one (PR: L1 distance; SSSP: max relative error)
    error: float | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "detail": self.detail, "error": self.error}


#: References of graphs with at least this many arcs are kept on disk (they take seconds to
#: minutes on one CPU core: PageRank on grid:4900 ~1 min); smaller ones are recomputed.
REFERENCE_CACHE_MIN_ARCS = 1_000_000


def cached_reference(app: str, graph, source=None, where: str = "cpu") -> tuple[np.ndarray, bool]:
    """``(reference answer, whether it came from the disk cache)``.

    ``where`` is ``"cpu"`` (:func:`reference_result`, the graph layer's reference) or ``"gpu"``
    (:func:`groute.bench.peers.gpu_reference`, the plain-CuPy baseline on GPU 0). The cache lives
    in ``<groute cache dir>/references/`` and is keyed by the graph's content hash, the app, the
    source, the PageRank settings, ``where`` and the text of the code that computes it, so a
    changed graph or reference is never answered from a stale file. Writes are atomic; an
    unreadable file is recomputed.
    """
    if where not in ("cpu", "gpu"):
        raise ValueError(f"reference 'where' must be cpu or gpu, got {where!r}")
    compute = reference_result
    if where == "gpu":
        from .peers import gpu_reference
        compute = gpu_reference
    if graph.num_edges < REFERENCE_CACHE_MIN_ARCS:
        return compute(app, graph, source), False
    path = _reference_cache_path(app, graph, source, where)
    try:
        return np.load(path, allow_pickle=False), True
    except (OSError, ValueError):
        pass
    values = compute(app, graph, source)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.partial.npy")
        np.save(tmp, values)
        tmp.replace(path)
    except OSError as exc:
        log.info("could not cache the %s reference at %s: %s", app, path, exc)
    return values, False


#: Longest the side-by-side references may take, all of them together (they run at once, so
#: this bounds the slowest): past it the suite gives up on those not done.
REFERENCE_TIMEOUT_S = 3600.0


def parallel_references(jobs: dict) -> dict:
    """``{key: (app, graph, source)}`` -> ``{key: (values, cached, wall_s)}`` or ``{key:
    exception}``: the CPU references (:func:`cached_reference`) computed in one worker process
    each (:mod:`.processes`), side by side (scipy uses one core). The waits share one deadline,
    :data:`REFERENCE_TIMEOUT_S` from the start (not that much per job, one after another)."""
    import concurrent.futures as cf
    import time

    from .processes import spawn_pool, stop_pool
    out = {}
    pool = spawn_pool(len(jobs))
    clean = False
    try:
        deadline = time.monotonic() + REFERENCE_TIMEOUT_S
        futures = {key: pool.submit(_timed_reference, *job) for key, job in jobs.items()}
        for key, fut in futures.items():
            try:
                out[key] = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                out[key] = TimeoutError(f"the references were not all done within "
                                        f"{REFERENCE_TIMEOUT_S:g} s")
            except Exception as exc:  # noqa: BLE001 - reported per app by the caller
                out[key] = exc
        clean = not any(isinstance(v, TimeoutError) for v in out.values())
    finally:
        stop_pool(pool, running=not clean)  # a stuck or interrupted worker: do not wait for it
    return out


def _timed_reference(app, graph, source):
    import time
    t0 = time.perf_counter()
    values, cached = cached_reference(app, graph, source, "cpu")
    return values, cached, time.perf_counter() - t0


def reference_label(app: str, where: str) -> str:
    """What computed a reference, as the results and tables name it."""
    if where == "gpu":
        from .suite import CUPY_BASELINES
        module, func = CUPY_BASELINES[app]
        return f"{module}.{func} (plain CuPy, GPU 0)"
    return f"groute.graph.reference.{REFERENCE_FUNCTIONS[app]} (CPU)"


#: app -> the function of groute.graph.reference that answers it
REFERENCE_FUNCTIONS = {"bfs": "bfs", "sssp": "sssp", "pr": "pagerank", "cc": "connected_components"}


def _reference_cache_path(app, graph, source, where="cpu") -> Path:
    import importlib.util
    from groute.graph import cache_root, reference
    from .suite import CUPY_BASELINES, PR_DAMPING, PR_TOL
    h = hashlib.sha1()
    if where == "gpu":
        origin = importlib.util.find_spec(CUPY_BASELINES[app][0]).origin
        h.update(Path(origin).read_bytes())
        h.update(b"gpu")
    else:
        h.update(Path(reference.__file__).read_bytes())
    h.update(f"{graph.content_hash()} {app} {source} {PR_DAMPING} {PR_TOL}".encode())
    prefix = app if where == "cpu" else f"{app}-gpu"
    return cache_root() / "references" / f"{prefix}-{h.hexdigest()[:24]}.npy"


def reference_result(app: str, graph, source=None):
    """The reference answer of ``app`` on ``graph`` (from :mod:`groute.graph.reference`)."""
    from groute.graph import reference
    from .suite import PR_DAMPING, PR_TOL
    name = REFERENCE_FUNCTIONS.get(app)
    if name is None:
        raise ValueError(f"no reference for app {app!r}")
    fn = getattr(reference, name)   # the function reference_label names
    if app in ("bfs", "sssp"):
        return np.asarray(fn(graph, source))
    if app == "pr":
        return np.asarray(fn(graph, damping=PR_DAMPING, tol=PR_TOL))
    return np.asarray(fn(graph))


def verify(app: str, values, ref, graph=None) -> Verdict:
    """Compare ``values`` (indexed by the graph's vertex ids) with the reference ``ref``."""
    try:
        values = np.asarray(values)
    except Exception as exc:  # e.g. a device array: the app broke its contract
        return Verdict(False, f"result is not an array NumPy can read: {exc}")
    if values.shape != ref.shape:
        return Verdict(False, f"result has shape {values.shape}, expected {ref.shape}")
    check = {"bfs": _exact, "sssp": _distances, "pr": _ranks, "cc": _components}[app]
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
    return Verdict(True, "depths equal the reference")


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
