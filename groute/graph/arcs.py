"""Whole-graph arc transforms that solvers run at set-up, written once for NumPy and CuPy.

On a billion-arc graph these passes are most of what a multi-device solver's set-up costs, so
each is one linear pass or one sort of packed 64-bit keys, with no per-arc int64 temporaries it
can do without (docs/GRAPHS.md, "Set-up passes"). The same code runs on the host (NumPy, the CPU backend and CI) and on a CUDA device
(CuPy, where a sort of a billion keys takes a fraction of a second); both give identical arrays.
"""
from __future__ import annotations

import sys

import numpy as np

from .arrays import array_module, index_dtype, weight_codes

#: vertex ids must fit in the 32 bits of half a packed key
MAX_VERTICES = 2**32


def arc_rows(indptr, num_arcs: int | None = None, *, xp=None, dtype=np.int32):
    """The row (source vertex) of every arc of a CSR with offsets ``indptr``: ``r`` repeated
    ``indptr[r+1] - indptr[r]`` times. ``dtype`` int32 halves the memory of the int64 that
    :meth:`CSRGraph.edges` returns (fine below 2**31 vertices)."""
    xp = xp or array_module(indptr)
    n = int(indptr.shape[0]) - 1
    if xp is np:
        return np.repeat(np.arange(n, dtype=dtype), np.diff(indptr))
    m = int(indptr[-1]) if num_arcs is None else int(num_arcs)
    return _rows_by_scan(indptr, m, dtype, xp)     # CuPy's repeat takes no per-element counts


def arcs_of_rows(indptr, rows) -> np.ndarray:
    """The arc ids of every out-arc of ``rows`` (host arrays), row after row in the order of
    ``rows``: one vectorised pass, the start of each row plus ``0..count-1``."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def _rows_by_scan(indptr, m: int, dtype, xp):
    """:func:`arc_rows` without a repeat: a 1 at each row start, then a running sum.

    The row of arc ``j`` is the number of rows ``1..n-1`` that start at or before ``j``, so the
    marks at ``indptr[1:-1]`` summed up give it; trailing empty rows start at ``m`` and mark a
    spare last slot. Empty rows share their start with the next row and must each count, hence
    ``add.at`` (unbuffered). Peak: the marks plus the sum, 8 bytes per arc for int32 rows, half
    of what a searchsorted of an int64 ``arange`` holds. The marks are int32 while
    they fit (one slot counts at most n-1 rows), else uint64: CuPy's ``add.at`` takes no int64.
    """
    n = int(indptr.shape[0]) - 1
    marks = xp.zeros(m + 1, dtype=xp.int32 if index_dtype(n) == np.int32 else xp.uint64)
    if n > 1:
        xp.add.at(marks, indptr[1:-1], 1)
    return xp.cumsum(marks[:m], dtype=dtype)


#: arcs per step when :func:`in_arcs` ORs the targets into the keys on the host (cache-sized
#: temporaries: a fresh billion-entry one costs more in page faults than the gather itself)
KEY_CHUNK_ARCS = 1 << 18


def in_arcs(indptr, indices, rank=None, *, in_degrees=None, xp=None):
    """The in-arcs of a graph, optionally relabelled: ``(in_indptr int64, sources int32)`` with
    each row's sources ascending (a CSR -> CSC transpose).

    With ``rank`` (int, old id -> new id) the result is the transpose of the graph whose
    vertex ``v`` is renamed ``rank[v]``: row ``rank[v]`` lists ``rank[u]`` for every arc
    ``u -> v``. ``in_degrees``: the in-degree of every NEW id when the caller already has it
    (saves a scatter over the arcs). Arrays may be NumPy or CuPy (``xp``); see
    :func:`_sorted_arcs` for how. A plain transpose on the host (NumPy, no ``rank``) is
    scipy's linear-time CSR -> CSC instead: the same arrays, several times faster than the sort.
    """
    xp = xp or array_module(indices)
    if xp is np and rank is None:
        import scipy.sparse as sp
        n, m = int(indptr.shape[0]) - 1, int(indices.shape[0])
        if n >= 2**31:
            raise ValueError(f"in_arcs: {n} vertices; the host transpose needs fewer than 2**31")
        csc = sp.csr_matrix((np.ones(m, np.bool_), indices, indptr), shape=(n, n)).tocsc()
        return csc.indptr.astype(np.int64), csc.indices.astype(np.int32, copy=False)
    return _sorted_arcs(indptr, indices, rank, by_target=True, counts=in_degrees, xp=xp)


def relabelled_arcs(indptr, indices, rank, weights=None, *, xp=None):
    """The out-arcs of the graph whose vertex ``v`` is renamed ``rank[v]``: ``(indptr int64,
    targets, weights)`` with each row's targets ascending (repeated arcs stay, lightest first),
    the CSR that ``CSRGraph.relabel`` builds; ``weights`` (int32 / float32 as the graph stores
    them, or None) come back aligned. None when a vertex id twice plus the weights' bits do not
    fit the 64-bit keys (then the caller sorts another way)."""
    return _sorted_arcs(indptr, indices, rank, by_target=False, counts=None, xp=xp,
                        weights=weights)


def _sorted_arcs(indptr, indices, rank, *, by_target, counts, xp, weights=None):
    """Arcs ``u -> v`` of a CSR as keys ``row | other end | weight code`` (row: the new target
    when ``by_target``, else the new source), sorted: each row's other ends come out ascending,
    equal arcs by weight. Returns ``(row offsets, other ends[, weights])``.

    One sort of packed 64-bit keys: equal keys are equal arcs, so the result does not depend on
    the sort algorithm or the backend. On the host the per-arc row is a repeat of the rank by
    out-degree and the other ends are ORed in by cache-sized chunks, so the keys (and a
    weighted graph's weight codes) are the only arc-sized temporaries.
    """
    xp = xp or array_module(indices)
    n = int(indptr.shape[0]) - 1
    if n >= MAX_VERTICES:
        raise ValueError(f"{n} vertices: packed arc keys need fewer than 2**32")
    m = int(indices.shape[0])
    if weights is None:
        codes, wbits, end_bits = None, 0, 32
    else:
        codes, wbits, decode = weight_codes(weights, xp)
        end_bits = max(1, (n - 1).bit_length())
        if 2 * end_bits + wbits > 64:
            return None
    r = xp.arange(n, dtype=xp.uint64) if rank is None else rank.astype(xp.uint64)
    row_part = r << xp.uint64(end_bits + wbits)
    end_part = r << xp.uint64(wbits) if wbits else r
    src_part, dst_part = (end_part, row_part) if by_target else (row_part, end_part)
    if xp is np:
        keys = np.repeat(src_part, np.diff(indptr))
    else:
        keys = src_part[arc_rows(indptr, m, xp=xp, dtype=index_dtype(n))]
    step = KEY_CHUNK_ARCS if xp is np else max(m, 1)
    for s in range(0, m, step):
        keys[s:s + step] |= dst_part[indices[s:s + step]]
    del row_part, end_part, src_part, dst_part
    if codes is not None:
        keys |= codes
        del codes
    keys.sort()
    out_dtype = index_dtype(n)
    if end_bits == 32 and sys.byteorder == "little":    # the low halves, no 64-bit temporary
        ends = keys.view(xp.uint32)[0::2].astype(out_dtype)
    else:
        ends = ((keys >> xp.uint64(wbits)) & xp.uint64((1 << end_bits) - 1)).astype(out_dtype)
    w = None if weights is None else decode(keys & xp.uint64((1 << wbits) - 1))
    if counts is not None:
        counts = xp.asarray(counts)
    elif not by_target:                 # row rank[v] has v's out-degree
        counts = xp.zeros(n, xp.int64)
        counts[r.astype(xp.int64)] = xp.diff(indptr)
    elif m:
        counts = xp.bincount((keys >> xp.uint64(end_bits + wbits)).astype(xp.int64), minlength=n)
    else:
        counts = xp.zeros(n, xp.int64)
    del keys
    row_ptr = xp.zeros(n + 1, dtype=xp.int64)
    row_ptr[1:] = xp.cumsum(counts)
    return (row_ptr, ends) if weights is None else (row_ptr, ends, w)


#: arcs one step of :func:`self_loop_count` compares (cache-sized: far faster than huge steps)
LOOP_CHUNK_ARCS = 1 << 16


def row_chunks(indptr, lo: int, hi: int, chunk_arcs: int):
    """Row ranges ``(r, e)`` covering rows ``[lo, hi)`` of a host CSR (``indptr`` NumPy int64)
    in order, each the most rows whose arcs number at most ``chunk_arcs`` from row ``r`` on,
    and at least one row (a row with more arcs is a chunk of its own)."""
    r = int(lo)
    while r < hi:
        e = int(np.searchsorted(indptr, indptr[r] + chunk_arcs, side="right")) - 1
        e = min(max(e, r + 1), hi)
        yield r, e
        r = e


def self_loop_count(indptr, indices, chunk_arcs: int = LOOP_CHUNK_ARCS) -> int:
    """How many arcs ``v -> v`` a CSR has (NumPy), counted in row-aligned chunks of about
    ``chunk_arcs`` arcs so a billion-arc graph needs no billion-entry temporary."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    dtype = index_dtype(n)
    loops = 0
    for u, v in row_chunks(indptr, 0, n, chunk_arcs):
        src = np.repeat(np.arange(u, v, dtype=dtype), np.diff(indptr[u:v + 1]))
        loops += int(np.count_nonzero(src == indices[indptr[u]:indptr[v]]))
    return loops
