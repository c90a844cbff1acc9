"""A CSR built from a regenerable edge stream, one range of source vertices (a bucket) at a time.

The generators' edge streams are counter-based (:mod:`.rng`): the same edges come out however
often, and in whatever chunks, they are produced. So a graph too big to sort in one piece is
built by source-vertex buckets: for each bucket the stream is replayed, the arc keys whose
source falls in the bucket (both directions of a symmetric graph) are kept, sorted and
deduplicated, and the bucket's rows are written straight into the preallocated ``indices`` and
``indptr``. Arcs are sorted by (source, target), so rows come out exactly as one global sort
of all keys would give them: the graph does not depend on the bucket count.

Memory: the CSR itself plus one bucket's keys (:data:`BYTES_PER_CANDIDATE` per candidate arc),
instead of every arc's 8-byte key and its sorted copy. On the host a bucket's keys are held to
about the CSR's own size, so building peaks near twice the CSR; generated on a GPU, the buckets
use the GPU's memory and the host holds the CSR alone. Time: one replay of the stream per
bucket, plus a counting replay that sizes the buckets when there is more than one (cheap on a
GPU, where the stream is generated; see docs/GRAPHS.md, "Big graphs").
"""
from __future__ import annotations

import logging
import time

import numpy as np

from .budget import available_bytes
from .csr import sorted_unique

log = logging.getLogger(__name__)

#: peak bytes per candidate arc of one bucket: its uint64 keys (and the sort's buffer on a
#: GPU), the keep mask and the compacted keys
BYTES_PER_CANDIDATE = 24
#: fraction of the memory available after the CSR is allocated that one bucket may use
BUCKET_MEMORY_SHARE = 0.5
#: the smallest bucket budget, in candidate arcs (a bucket holds at least one vertex's arcs)
MIN_BUCKET_CANDIDATES = 1 << 20


def device_free_bytes(xp) -> int | None:
    """Bytes the current CUDA device can still give arrays (driver free plus CuPy's unused
    pool blocks); None for NumPy."""
    if xp is np:
        return None
    free, _ = xp.cuda.runtime.memGetInfo()
    return int(free) + int(xp.get_default_memory_pool().free_bytes())


def bucket_budget(xp, reserve: int, cap_bytes: int | None = None, *,
                  share: float = BUCKET_MEMORY_SHARE) -> int:
    """Candidate arcs one bucket may hold: ``share`` of what the generating backend has free
    (the GPU's memory for CuPy, the host's for NumPy) less ``reserve`` bytes (the CSR about
    to be allocated there), and at most ``cap_bytes`` of keys (on the host: the CSR's size, so
    that building a graph peaks at about twice its CSR)."""
    free = device_free_bytes(xp)
    if free is None:
        free = available_bytes()
    budget = 1 << 62 if free is None else int(max(free - int(reserve), 0) * share)
    if cap_bytes is not None:
        budget = min(budget, int(cap_bytes))
    return max(budget // BYTES_PER_CANDIDATE, MIN_BUCKET_CANDIDATES)


def bucket_bounds(counts, limit: int) -> list[int]:
    """Vertex bounds ``[0, b1, ..., n]`` of consecutive ranges whose candidate counts (host
    int64, one per vertex) sum to at most ``limit`` each, or a single vertex each where one
    vertex alone has more."""
    return prefix_bounds(np.cumsum(counts, dtype=np.int64), limit)


def prefix_bounds(ends, limit: int, base: int = 0) -> list[int]:
    """:func:`bucket_bounds` of the counts whose running sums are ``ends`` (ascending, host
    int64, ``ends[i]`` the sum up to and including vertex ``i``, counted from ``base``)."""
    n = int(ends.shape[0])
    bounds = [0]
    while bounds[-1] < n:
        lo = bounds[-1]
        start = int(ends[lo - 1]) if lo else base
        hi = lo + int(np.searchsorted(ends[lo:], start + limit, side="right"))
        bounds.append(min(max(hi, lo + 1), n))
    return bounds


def candidate_counts(stream, n, symmetric, xp, lo: int = 0, hi: int | None = None):
    """Candidate arcs (with repeats) per source vertex of ``[lo, hi)`` (default: every vertex),
    int64 on the host: one replay of the stream. Sources are counted in batches of at least
    the range's width (a bincount costs the width whatever it counts)."""
    hi = n if hi is None else hi
    width, whole = hi - lo, lo == 0 and hi == n
    ulo, uhi = xp.uint64(lo), xp.uint64(hi)
    counts = xp.zeros(width, dtype=xp.int64)
    batch, held = [], 0

    def flush():
        nonlocal counts
        if batch:
            counts += xp.bincount(xp.concatenate(batch).view(xp.int64), minlength=width)
            batch.clear()
    for src, dst in stream():
        for ends in ((src, dst) if symmetric else (src,)):
            if not whole:
                ends = ends[(ends >= ulo) & (ends < uhi)] - ulo
            batch.append(ends)
            held += int(ends.shape[0])
        if held >= width:
            flush()
            held = 0
    flush()
    return counts if xp is np else counts.get()


def bucket_keys(stream, lo, hi, n, capacity, symmetric, xp, whole, exact=False):
    """Sorted distinct keys ``(src - lo) * n + dst`` of the arcs whose source is in
    ``[lo, hi)`` (``whole``: every arc, no filtering), collected into one buffer of
    ``capacity`` keys (at least the candidates there are; ``exact``: as many as a counting
    replay found, so fewer is an error too) and sorted in place."""
    nn, ulo, uhi = xp.uint64(n), xp.uint64(lo), xp.uint64(hi)
    keys = xp.empty(capacity, dtype=xp.uint64)
    filled = 0
    for src, dst in stream():
        pairs = ((src, dst), (dst, src)) if symmetric else ((src, dst),)
        for s, d in pairs:
            if not whole:
                keep = (s >= ulo) & (s < uhi)
                s, d = s[keep], d[keep]
            k = int(s.shape[0])
            if filled + k > capacity:
                raise RuntimeError(f"bucket [{lo}, {hi}) has more than the {capacity} candidate "
                                   "arcs its stream was counted to have; the stream is not "
                                   "replayable")
            out = keys[filled:filled + k]
            xp.multiply(s - ulo, nn, out=out)
            out += d
            filled += k
    if exact and filled != capacity:
        raise RuntimeError(f"bucket [{lo}, {hi}) has fewer than the {capacity} candidate arcs "
                           f"its stream was counted to have; the stream is not replayable")
    return sorted_unique(keys[:filled], xp, overwrite=True)


#: keys turned into row counts and targets per step (bounded temporaries)
WRITE_STEP = 1 << 24


def csr_by_buckets(stream, n: int, max_candidates: int, *, symmetric: bool, xp,
                   out_xp=None, buckets: int | None = None):
    """``(indptr int64, indices int32)`` of the graph whose arcs are the distinct pairs of
    ``stream()`` (a callable yielding ``(src, dst)`` uint64 chunks, replayable, self loops
    already dropped), both directions when ``symmetric``, rows sorted.

    ``max_candidates``: an upper bound on the arcs ``stream`` yields (both directions counted).
    The stream is generated on ``xp``; the CSR arrays are allocated on ``out_xp`` (default
    ``xp``; NumPy to build a GPU-generated graph straight into host memory). ``buckets``:
    how many buckets, for tests (default: as few as the memory budget allows).
    """
    out_xp = out_xp or xp
    csr_bytes = 8 * (n + 1) + 4 * max_candidates
    indptr = out_xp.zeros(n + 1, dtype=out_xp.int64)
    if buckets is None:
        limit = bucket_budget(xp, csr_bytes if out_xp is xp else 0,
                              csr_bytes if xp is np else None)
        counts = None if max_candidates <= limit else candidate_counts(stream, n, symmetric, xp)
    else:
        counts = candidate_counts(stream, n, symmetric, xp) if buckets > 1 else None
        limit = -(-int(counts.sum()) // int(buckets)) if counts is not None else max_candidates
    if counts is None:
        bounds, sizes = [0, n], [max_candidates]
    else:
        bounds = bucket_bounds(counts, max(limit, 1))
        ends = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        sizes = [int(ends[hi] - ends[lo]) for lo, hi in zip(bounds[:-1], bounds[1:])]
        del ends
    del counts
    indices = out_xp.empty(sum(sizes), dtype=out_xp.int32)
    t0, filled = time.perf_counter(), 0
    for lo, hi, size in zip(bounds[:-1], bounds[1:], sizes):
        keys = bucket_keys(stream, lo, hi, n, size, symmetric, xp, whole=len(sizes) == 1,
                           exact=len(sizes) > 1)
        row_counts = bucket_rows(keys, lo, hi, n, xp, indices=indices, at=filled,
                                 out_xp=out_xp)
        ends = xp.cumsum(row_counts, dtype=xp.int64)
        ends += filled
        _write(indptr, lo + 1, hi + 1, ends, out_xp)
        filled += int(keys.shape[0])
        del keys, row_counts, ends
    if len(sizes) > 1:
        log.info("built %d vertices, %d arcs in %d buckets in %.2f s", n, filled,
                 len(sizes), time.perf_counter() - t0)
    return indptr, _shrink(indices, filled, out_xp)


def bucket_rows(keys, lo: int, hi: int, n: int, xp, *, indices=None, at: int = 0,
                out_xp=np):
    """The arcs of each row of a bucket, from its sorted distinct keys.

    Parameters
    ----------
    keys : array of uint64
        The bucket's keys from :func:`bucket_keys`; with ``indices``, used up (turned into
        targets in place).
    lo, hi : int
        The bucket's rows.
    n : int
        The graph's vertices (the keys are ``(row - lo) * n + target``).
    xp : module
        The keys' array module (NumPy or CuPy).
    indices : array of int32, optional
        Where the arcs' targets go, ``indices[at:at + len(keys)]`` (on ``out_xp``), written
        in steps of :data:`WRITE_STEP` keys; None: the counts only.
    at : int
        The bucket's first arc in ``indices``.
    out_xp : module
        ``indices``' array module.

    Returns
    -------
    array of int64
        The arcs of each row of ``[lo, hi)``, on ``xp``.
    """
    nn = xp.uint64(n)
    row_counts = xp.zeros(hi - lo, dtype=xp.int64)
    for s in range(0, int(keys.shape[0]), WRITE_STEP):
        part = keys[s:s + WRITE_STEP]
        rows = part // nn
        row_counts += xp.bincount(rows.view(xp.int64), minlength=hi - lo)
        if indices is not None:
            part -= rows * nn                               # the targets, in place
            del rows
            _write(indices, at + s, at + s + int(part.shape[0]), part.astype(xp.int32), out_xp)
    return row_counts


def _write(out, start, stop, values, out_xp):
    """``out[start:stop] = values``, copying device values into a host ``out`` in place."""
    if out_xp is np and not isinstance(values, np.ndarray):
        values.get(out=out[start:stop])
    else:
        out[start:stop] = values


def _shrink(indices, size, out_xp):
    """The first ``size`` entries of ``indices`` as an array of its own. A host array is
    resized in place (the allocator gives the tail back without copying the rest)."""
    if size == indices.shape[0]:
        return indices
    if out_xp is np:
        indices.resize(size, refcheck=False)
        return indices
    return indices[:size].copy()
