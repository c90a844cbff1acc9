"""One range of rows of a generated graph, built in host memory bounded by the range.

A rank of an MPI job holds only its range of a graph's rows (:mod:`.ranked`). Its loader asks
a row source two things, for ranges of vertices ``[lo, hi)``:

- :meth:`counts <StreamRows.counts>`: a table of int64 columns, one row per vertex, whose first
  column is the vertex's out-degree (the ranks cut the contiguous split from these) and whose
  other columns are what :meth:`rows <StreamRows.rows>` needs to build the rows (the ranks move
  each vertex's row of the table to the rank that will own it);
- :meth:`rows <StreamRows.rows>`: ``(indptr from 0, indices int32, weights or None)`` of the
  range, given its table.

:class:`StreamRows` (``kron``, ``rmat``, ``er``): the edge stream is counter-based, so it can
be replayed; an R-MAT edge's source is random, so every replay runs the whole stream and keeps
the arcs leaving the range. The counts take a replay that counts each vertex's candidate arcs
(repeats included), then a replay per bucket (consecutive vertices with at most
:attr:`StreamRows.budget` candidates: a rank's share of the stream's arcs with some slack, so
one bucket on a balanced graph) that places each candidate's target in its row's slots and
sorts and deduplicates the rows where they lie (:func:`fill_rows`): 4 bytes per candidate,
where a sortable key would take 8. The rows do the same over the range's buckets straight into
the range's ``indices``, which are allocated at the rows' size plus the slack the last bucket's
repeats need, and shrunk in place at the end. So the peak of a range is its ``indices`` with
that slack (at most its candidate arcs), a few int64 per vertex, and one chunk's and one sort
block's working arrays; docs/DISTRIBUTED.md ("Loading") states the bound.

:class:`GridRows`: every choice is a function of a vertex's id, so the rows are computed in
slices of :data:`GRID_SLICE` vertices, written into arrays of the range's size.

A stream may be replayed on a GPU (``xp`` CuPy, on the current device): the hashing that
generates the edges is most of a replay, and a GPU does it many times faster than one host
core. There the rows are built as a whole graph generated on a GPU is
(:func:`groute.graph.bucketed.csr_by_buckets`), where the GPU's memory takes 8-byte keys and
their sort: each bucket of the range (as many candidates as :data:`KEYS_MEMORY_SHARE` of the
GPU's free memory holds, at 24 bytes a candidate) keeps the keys ``(row, target)`` of its arcs,
sorts and deduplicates them on the GPU, and only the degrees (:meth:`counts
<StreamRows.counts>`) or the targets, written straight into the range's ``indices``
(:meth:`rows <StreamRows.rows>`), reach the host. The host holds the range's rows and its
table, nothing per candidate. ``by_keys`` picks this way on the host too.

The rows are exactly the whole graph's (:func:`groute.graph.bucketed.csr_by_buckets` and
:func:`groute.graph.generators.grid_rows` build the same): each row sorted, repeats dropped.
"""
from __future__ import annotations

import numpy as np

from .bucketed import (bucket_bounds, bucket_budget, bucket_keys, bucket_rows, candidate_counts,
                       prefix_bounds)
from .csr import sorted_unique
from .generators import grid_rows

#: candidate slots sorted together when a bucket's rows are sorted in place (rows with more
#: are sorted alone, as they lie)
SORT_BLOCK = 1 << 16
#: a bucket may hold a rank's share of the stream's candidate arcs and this fraction more, so
#: that a balanced graph's share is one bucket (one replay)
BUCKET_SLACK = 1 / 8
#: the share of the free memory where the stream runs that one bucket of keys may take: ranks
#: that share a GPU load at the same time
KEYS_MEMORY_SHARE = 0.25
#: vertices of a grid computed at a time
GRID_SLICE = 1 << 15
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


class StreamRows:
    """The rows of a graph built from a replayable edge stream (module docstring).

    ``stream``: a callable yielding ``(src, dst)`` uint64 chunks (self loops dropped) of
    ``xp`` (NumPy, or CuPy on the current GPU), both directions stored when ``symmetric``;
    ``n`` vertices; ``edges``: how many edges the stream generates at most; ``parts``: how
    many ranges the graph is loaded in (the ranks). ``by_keys``: build the rows from sorted
    keys where the stream runs (default: on a GPU), not in the host's row slots.
    """

    def __init__(self, stream, n: int, *, symmetric: bool, edges: int, parts: int, xp=np,
                 by_keys: bool | None = None):
        if n > 2**31:
            raise ValueError(f"a graph loaded by ranges has at most 2^31 vertices (int32 "
                             f"targets), got {n:,}")
        self.stream, self.n, self.symmetric, self.xp = stream, int(n), bool(symmetric), xp
        self.by_keys = xp is not np if by_keys is None else bool(by_keys)
        if xp is not np and not self.by_keys:
            raise ValueError("the row slots are host memory: a stream replayed on a GPU builds "
                             "its rows by keys (by_keys=True)")
        candidates = int(edges) * (2 if symmetric else 1)
        #: candidate arcs one bucket holds at most (unless one vertex alone has more)
        self.budget = max(int(np.ceil(candidates * (1 + BUCKET_SLACK) / max(parts, 1))), 1)

    def counts(self, lo: int, hi: int) -> np.ndarray:
        """``(hi - lo, 2)`` int64: each vertex's out-degree and its candidate arcs."""
        if self.by_keys:
            return self._counts_by_keys(lo, hi)
        counted = candidate_counts(self._replay(lo, hi), self.n, self.symmetric, np, lo, hi)
        table = np.empty((hi - lo, 2), dtype=np.int64)
        table[:, 1] = counted
        del counted
        candidates, slots = table[:, 1], table[:, 0]
        bounds = bucket_bounds(candidates, self.budget)
        sizes = [int(candidates[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:])]
        scratch = np.empty(max(sizes, default=0), dtype=np.int32)
        for a, b, size in zip(bounds[:-1], bounds[1:], sizes):
            slots[a:b] = candidates[a:b]
            _starts(slots[a:b], 0)
            fill_rows(self._replay(lo + a, lo + b), lo + a, lo + b, slots[a:b], scratch, size,
                      symmetric=self.symmetric)          # slots now hold the degrees
        return table

    def rows(self, lo: int, hi: int, table: np.ndarray):
        """``(indptr, indices, None)`` of ``[lo, hi)`` from its :meth:`counts` table (whose
        candidate column is used up as the rows' slots)."""
        if self.by_keys:
            return self._rows_by_keys(lo, hi, table)
        degrees, slots = table[:, 0], table[:, 1]
        indptr = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(degrees, out=indptr[1:])
        arcs = int(indptr[-1])
        bounds = bucket_bounds(slots, self.budget)
        # a bucket's candidates lie from its rows' first arc on, past its rows' end by its
        # repeats: the last buckets' repeats may pass the range's arcs
        stops = [int(indptr[a]) + int(slots[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:])]
        indices = np.empty(max([arcs, *stops]), dtype=np.int32)
        for a, b, stop in zip(bounds[:-1], bounds[1:], stops):
            _starts(slots[a:b], int(indptr[a]))
            fill_rows(self._replay(lo + a, lo + b), lo + a, lo + b, slots[a:b], indices, stop,
                      symmetric=self.symmetric)
            if not np.array_equal(slots[a:b], degrees[a:b]):
                raise RuntimeError(f"rows [{lo + a}, {lo + b}) came out with other degrees than "
                                   f"counted; the stream is not replayable")
        if indices.shape[0] != arcs:
            indices.resize(arcs, refcheck=False)       # in place: the tail goes back
        return indptr, indices, None

    def _replay(self, lo: int, hi: int):
        """The NumPy stream as a callable yielding ``(src, dst)`` chunks cut to the arcs with
        an end in ``[lo, hi)`` (a source there; a target too when both directions are
        stored)."""
        symmetric = self.symmetric
        ulo, uhi = np.uint64(lo), np.uint64(hi)

        def replay():
            for src, dst in self.stream():
                keep = (src >= ulo) & (src < uhi)
                if symmetric:
                    keep |= (dst >= ulo) & (dst < uhi)
                yield src[keep], dst[keep]
        return replay

    # by keys, where the stream runs ---------------------------------------------------------
    def _key_buckets(self, lo: int, hi: int, candidates):
        """``(a, b, keys)`` for each bucket ``[lo + a, lo + b)`` of the range: its arcs' sorted
        distinct keys on ``xp`` (:func:`~groute.graph.bucketed.bucket_keys`). A bucket holds
        as many candidates as :data:`KEYS_MEMORY_SHARE` of ``xp``'s free memory allows (the
        host's, by keys on NumPy); one bucket's keys are alive at a time (the caller drops each
        before the next)."""
        bounds = bucket_bounds(candidates, bucket_budget(self.xp, 0, share=KEYS_MEMORY_SHARE))
        ends = np.concatenate([[0], np.cumsum(candidates, dtype=np.int64)])
        for a, b in zip(bounds[:-1], bounds[1:]):
            keys = bucket_keys(self.stream, lo + a, lo + b, self.n, int(ends[b] - ends[a]),
                               self.symmetric, self.xp, whole=False, exact=True)
            yield a, b, keys
            del keys

    def _counts_by_keys(self, lo: int, hi: int) -> np.ndarray:
        table = np.empty((hi - lo, 2), dtype=np.int64)
        table[:, 1] = candidate_counts(self.stream, self.n, self.symmetric, self.xp, lo, hi)
        for a, b, keys in self._key_buckets(lo, hi, table[:, 1]):
            table[a:b, 0] = _host(bucket_rows(keys, lo + a, lo + b, self.n, self.xp))
            del keys
        return table

    def _rows_by_keys(self, lo: int, hi: int, table: np.ndarray):
        degrees = table[:, 0]
        indptr = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(degrees, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        for a, b, keys in self._key_buckets(lo, hi, table[:, 1]):
            start, stop = int(indptr[a]), int(indptr[b])
            if int(keys.shape[0]) != stop - start:
                raise RuntimeError(f"rows [{lo + a}, {lo + b}) came out with {keys.shape[0]} "
                                   f"arcs, counted {stop - start}; the stream is not "
                                   f"replayable")
            got = _host(bucket_rows(keys, lo + a, lo + b, self.n, self.xp, indices=indices,
                                    at=start))
            del keys
            if not np.array_equal(got, degrees[a:b]):
                raise RuntimeError(f"rows [{lo + a}, {lo + b}) came out with other degrees "
                                   f"than counted; the stream is not replayable")
        return indptr, indices, None


def _host(array) -> np.ndarray:
    """``array`` in host memory (a CuPy array copied)."""
    return array if isinstance(array, np.ndarray) else array.get()


def _starts(counts, base: int) -> None:
    """``counts`` (int64, in place) to the first slot of each row: ``base`` plus the counts
    before it."""
    total = np.cumsum(counts)
    counts[1:] = total[:-1]
    counts[:1] = 0
    counts += base


def fill_rows(stream, lo: int, hi: int, slots, out, stop: int, *, symmetric: bool) -> None:
    """Place the targets of the arcs leaving ``[lo, hi)`` in ``out``, then sort and deduplicate
    each row where it lies: the rows' distinct targets end up packed from the first row's
    first slot on, in order.

    ``slots`` (int64, one per vertex, in place): on entry each row's first slot in ``out``
    (rows in order, each with one slot per candidate arc, the last ending at ``stop``); on
    return each row's distinct target count.

    Raises
    ------
    RuntimeError
        When the stream yields more or fewer candidate arcs than the slots were counted for
        (a stream that is not replayable).
    """
    first = int(slots[0]) if slots.shape[0] else stop
    ulo, uhi = np.uint64(lo), np.uint64(hi)
    placed = 0
    for src, dst in stream():
        for s, d in (((src, dst), (dst, src)) if symmetric else ((src, dst),)):
            keep = (s >= ulo) & (s < uhi)
            keys = (s[keep] - ulo) << _SHIFT32
            if not keys.shape[0]:
                continue
            keys |= d[keep]
            keys.sort()                                 # groups each row's arcs of the chunk
            rows = (keys >> _SHIFT32).astype(np.intp)
            heads = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
            sizes = np.diff(heads, append=rows.shape[0])
            at = slots[rows[heads]]
            if int((at + sizes).max()) > stop:
                raise RuntimeError(f"rows [{lo}, {hi}) have more candidate arcs than their "
                                   f"stream was counted to have; the stream is not replayable")
            out[np.arange(rows.shape[0]) + np.repeat(at - heads, sizes)] = (
                keys.astype(np.uint32).view(np.int32))
            slots[rows[heads]] = at + sizes
            placed += int(keys.shape[0])
    if placed != stop - first:
        raise RuntimeError(f"rows [{lo}, {hi}) have fewer candidate arcs than their stream was "
                           f"counted to have; the stream is not replayable")
    _dedupe_rows(slots, out, first)


def _dedupe_rows(ends, out, first: int) -> None:
    """Sort and deduplicate the rows whose slots are ``out[first:ends[0]]``,
    ``out[ends[0]:ends[1]]``, ...; the distinct targets are packed from ``first`` on and
    ``ends`` (in place) becomes each row's count of them. A block of rows with at most
    :data:`SORT_BLOCK` slots is sorted as keys (row, target), a longer row alone in place."""
    start = write = first
    bounds = prefix_bounds(ends, SORT_BLOCK, base=first)
    for a, b in zip(bounds[:-1], bounds[1:]):
        stop = int(ends[b - 1])
        if b - a == 1:
            kept = sorted_unique(out[start:stop], np, overwrite=True)
            counts = np.array([kept.shape[0]], dtype=np.int64)
        else:
            sizes = np.diff(ends[a:b], prepend=start)
            keys = np.repeat(np.arange(b - a, dtype=np.uint64), sizes) << _SHIFT32
            keys |= out[start:stop].astype(np.uint64)
            keys = sorted_unique(keys, np, overwrite=True)
            counts = np.bincount((keys >> _SHIFT32).astype(np.intp), minlength=b - a)
            kept = keys.astype(np.uint32).view(np.int32)
        out[write:write + kept.shape[0]] = kept
        write += int(kept.shape[0])
        ends[a:b] = counts
        start = stop


class GridRows:
    """The rows of :func:`groute.graph.generators.grid`'s graph (module docstring);
    ``params``: the keyword arguments of :func:`~groute.graph.generators.grid_rows` besides the
    range (``rows``, ``cols``, ``drop``, ``seed``, ``low``, ``high``)."""

    def __init__(self, params: dict):
        self.params = dict(params)

    def _slice(self, a: int, b: int):
        p = self.params
        return grid_rows(p["rows"], p["cols"], a, b, drop=p["drop"], seed=p["seed"],
                         low=p["low"], high=p["high"])

    def counts(self, lo: int, hi: int) -> np.ndarray:
        """``(hi - lo, 1)`` int64: each vertex's out-degree."""
        table = np.empty((hi - lo, 1), dtype=np.int64)
        for a in range(lo, hi, GRID_SLICE):
            b = min(a + GRID_SLICE, hi)
            table[a - lo:b - lo, 0] = np.diff(self._slice(a, b)[0])
        return table

    def rows(self, lo: int, hi: int, table: np.ndarray):
        """``(indptr, indices int32, weights int32)`` of ``[lo, hi)``."""
        indptr = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(table[:, 0], out=indptr[1:])
        arcs = int(indptr[-1])
        indices = np.empty(arcs, dtype=np.int32)
        weights = np.empty(arcs, dtype=np.int32)
        for a in range(lo, hi, GRID_SLICE):
            b = min(a + GRID_SLICE, hi)
            part, targets, values = self._slice(a, b)
            at = int(indptr[a - lo])
            if at + int(part[-1]) != int(indptr[b - lo]):
                raise RuntimeError(f"grid rows [{a}, {b}) came out with other degrees than "
                                   f"counted")
            indices[at:at + targets.shape[0]] = targets
            weights[at:at + values.shape[0]] = values
            del part, targets, values               # before the next slice is computed
        return indptr, indices, weights
