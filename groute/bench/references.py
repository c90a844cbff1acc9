"""The reference answers every case is checked against: the graph layer's CPU reference
(:mod:`groute.graph.reference`) or, for graphs too big for it, an app's plain-CuPy baseline on
GPU 0 (:func:`groute.bench.peers.gpu_reference`); big graphs' references cached on disk, and
several computed side by side in worker processes. :mod:`.verify` compares answers with them.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np

from .peers import PeerSkipped, baseline, gpu_reference
from .specs import PR_DAMPING, PR_TOL, hook_name, load, spec_for
from .suite import APPS

log = logging.getLogger(__name__)


#: References of graphs with at least this many arcs are kept on disk (they take seconds to
#: minutes on one CPU core, PageRank the longest); smaller ones are recomputed.
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
    compute = gpu_reference if where == "gpu" else reference_result
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
        try:
            return f"{hook_name(baseline(app))} (plain CuPy, GPU 0)"
        except PeerSkipped as exc:
            return f"plain CuPy on GPU 0: {exc}"
    hook = spec_for(app).reference
    return f"{hook_name(hook)} (CPU)" if hook is not None else "none"


def _reference_cache_path(app, graph, source, where="cpu") -> Path:
    import importlib.util
    from groute.graph import cache_root
    h = hashlib.sha1()
    hook = baseline(app) if where == "gpu" else _reference_hook(app)
    h.update(Path(importlib.util.find_spec(hook[0]).origin).read_bytes())
    if where == "gpu":
        h.update(b"gpu")
    if source is not None and np.ndim(source):    # a sample of sources
        source = ",".join(map(str, np.asarray(source).tolist()))
    h.update(f"{graph.content_hash()} {app} {source} {PR_DAMPING} {PR_TOL}".encode())
    prefix = app if where == "cpu" else f"{app}-gpu"
    return cache_root() / "references" / f"{prefix}-{h.hexdigest()[:24]}.npy"


def _reference_hook(app: str) -> tuple[str, str]:
    hook = spec_for(app).reference
    if hook is None:
        raise ValueError(f"{app} has no reference to check it against: give it a BenchSpec "
                         f"in groute/bench/specs.py")
    return hook


def reference_result(app: str, graph, source=None):
    """The reference answer of ``app`` on ``graph``: its bench spec's ``reference`` hook
    (:mod:`groute.bench.specs` says how it is called)."""
    spec = spec_for(app)
    fn = load(_reference_hook(app))
    if APPS[app].needs_source or spec.sources:
        return np.asarray(fn(graph, source, **spec.check_options))
    return np.asarray(fn(graph, **spec.check_options))
