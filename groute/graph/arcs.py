"""Whole-graph arc transforms that solvers run at set-up, written once for NumPy and CuPy.

On a billion-arc graph these passes are most of what a multi-device solver's set-up costs, so
each is one linear pass or one sort of packed 64-bit keys, with no per-arc int64 temporaries it
can do without (docs/GRAPHS.md, "Set-up passes"). The same code runs on the host (NumPy, the
CPU backend and CI) and on a CUDA device (CuPy, where a sort of a billion keys takes a fraction
of a second); both give identical arrays. The transpose (:func:`in_arcs`) builds one range of
rows at a time from steps of the arcs, so a device holds its own share and no more.
:func:`arc_named` says one arc in the graph's own ids, for errors.
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


#: arcs per step when :func:`relabelled_arcs` ORs the targets into the keys on the host (cache-sized
#: temporaries: a fresh billion-entry one costs more in page faults than the gather itself)
KEY_CHUNK_ARCS = 1 << 18


#: arcs one step of :func:`in_arcs` reads, per array module, the least and the most: cache-sized
#: steps on the host; on a GPU steps large enough that their launches and waits cost little beside
#: their work, and no larger than :func:`in_arc_step` allows for the graph.
IN_ARC_STEP_ARCS = {"numpy": (1 << 16, 1 << 16), "cupy": (1 << 18, 1 << 22)}
#: the most bytes per arc one step of :func:`in_arcs` holds beside its result (the step's
#: targets and the positions kept, its packed keys and their sort, the rows and slots they give)
IN_ARC_STEP_BYTES = 48


def in_arc_step(graph_arcs: int, module: str = "cupy") -> int:
    """How many arcs one step of :func:`in_arcs` reads from a graph of ``graph_arcs`` arcs.

    One arc for every :data:`IN_ARC_STEP_BYTES` of the graph, within the module's
    :data:`IN_ARC_STEP_ARCS`, so that a step's temporaries are at most a byte per arc of the
    graph, a quarter of its arcs' own (above the least step): a graph of a few hundred MB is
    not built beside a fixed few hundred MB of temporaries. Every device reads all the arcs to
    keep its share, so the step follows the graph, not the share.

    Parameters
    ----------
    graph_arcs : int
        The arcs of the graph the in-arcs are built from.
    module : str
        The array module that builds them: ``"numpy"`` or ``"cupy"``.

    Returns
    -------
    int
        Arcs per step.

    Examples
    --------
    >>> in_arc_step(10**9), in_arc_step(48_000_000), in_arc_step(1000)
    (4194304, 1000000, 262144)
    >>> in_arc_step(10**9, "numpy")
    65536
    """
    least, most = IN_ARC_STEP_ARCS.get(module, IN_ARC_STEP_ARCS["cupy"])
    return int(min(most, max(least, int(graph_arcs) // IN_ARC_STEP_BYTES)))


def in_arcs(indptr, indices, rank=None, *, rows=None, in_degrees=None, payload=None,
            out=None, xp=None, step_arcs=None, after_step=None):
    """The in-arcs of the vertices ``rows = (lo, hi)`` (default: all) of a graph, optionally
    relabelled, built in the memory of their result: ``(in_indptr, sources[, carried])``.

    ``indptr``/``indices``: the graph's CSR, host (NumPy) arrays; ``rank`` (host, old id ->
    new id, or None): the result is the transpose of the graph whose vertex ``v`` is renamed
    ``rank[v]``, row ``rank[v]`` listing ``rank[u]`` for every arc ``u -> v``; ``rows`` are new
    ids. ``in_indptr`` (int64, host) are the rows' arc offsets from 0; ``sources`` (int32,
    ``xp``'s: built where the caller runs it, e.g. on the device that keeps them) list each
    row's sources ascending (repeated arcs repeat). ``in_degrees`` (host, every new id's):
    when the caller has them (else one pass over the arcs counts them). ``payload`` (host,
    one value per arc of ``indices``) is carried along: ``carried[i]`` is the payload of the
    arc that became in-arc ``i``, repeated arcs in their order among the out-arcs. ``out``:
    ``(sources, carried)`` arrays (or views, e.g. the two columns of an interleaved array) to
    fill instead of new ones.

    A stable counting sort: the graph's arcs are read in steps of about ``step_arcs`` arcs
    (default :func:`in_arc_step` of the graph's), those entering ``rows`` sorted by
    (row, source) within the step and placed at their rows' next free slots; with ``rank``, each
    row is then sorted by source in steps of rows (a row comes from several steps, which
    relabelling leaves out of order). Beside the result the memory is the rows' next slots (8
    bytes per row), ``rank`` on ``xp`` (4 bytes per vertex) and one step's temporaries
    (:data:`IN_ARC_STEP_BYTES` per arc of a step, or of the longest row): no array of the whole
    graph's arcs, so that each device builds its own share. ``after_step`` (no arguments) is
    called after each step once its temporaries are let go: a CUDA device gives its memory
    pool's cached blocks back there, since steps keep different numbers of arcs and a pool
    that keeps the blocks of one step's sizes grows for the next's. Raises ValueError past
    2**31 vertices (int32 sources).
    """
    xp = xp or np
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    n = int(indptr.shape[0]) - 1
    if n >= 2**31:
        raise ValueError(f"in_arcs: {n} vertices; int32 sources need fewer than 2**31")
    lo, hi = (0, n) if rows is None else (int(rows[0]), int(rows[1]))
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"in_arcs: rows [{lo}, {hi}) are not rows of a graph of {n} vertices")
    if in_degrees is None:
        in_degrees = _in_degrees(indices, n, rank)
    in_indptr = np.zeros(hi - lo + 1, np.int64)
    np.cumsum(np.asarray(in_degrees[lo:hi], np.int64), out=in_indptr[1:])
    total = int(in_indptr[-1])
    if out is None:
        sources = xp.empty(total, np.int32)
        carried = None if payload is None else xp.empty(total, np.asarray(payload).dtype)
    else:
        sources, carried = out
    step = int(step_arcs or in_arc_step(indices.shape[0], xp.__name__))
    after_step = after_step or _nothing
    ranks = None if rank is None else xp.asarray(rank)
    slot = xp.array(in_indptr[:-1])            # each row's next free slot (a copy)
    for a, b, first, local in _arc_steps(indptr, step):
        targets = xp.asarray(indices[a:b])
        if ranks is not None:
            targets = ranks[targets]
        kept = xp.flatnonzero((targets >= lo) & (targets < hi))     # waits for the count
        if not kept.shape[0]:
            del targets, kept
            after_step()
            continue
        # keys (row << 32) | source, built in place: no temporary of the step's 8-byte keys
        keys = targets[kept].astype(xp.uint64)
        del targets
        keys -= xp.uint64(lo)
        keys <<= xp.uint64(32)
        src = arc_rows(xp.asarray(local), b - a, xp=xp, dtype=np.int32)[kept]
        src += np.int32(first)
        if ranks is not None:
            src = ranks[src]
        keys |= src.astype(xp.uint64)
        del src
        pay = None if payload is None else xp.asarray(payload[a:b])[kept]
        del kept
        if pay is not None:
            order = xp.argsort(keys, kind="stable")
            keys, pay = keys[order], pay[order]
            del order
        else:
            keys.sort()
        row = (keys >> xp.uint64(32)).view(xp.int64)
        # the k-th arc of a row in this step goes k slots after the row's next free slot
        pos = xp.arange(row.shape[0], dtype=xp.int64)
        pos -= xp.searchsorted(row, row, side="left")
        pos += slot[row]
        sources[pos] = _low_halves(keys, xp)
        del keys
        if pay is not None:
            carried[pos] = pay
        last = xp.flatnonzero(xp.concatenate((row[1:] != row[:-1], xp.ones(1, dtype=bool))))
        slot[row[last]] = pos[last] + 1
        del row, pos, pay, last
        after_step()
    del slot, ranks
    if rank is not None:
        _sort_rows(in_indptr, sources, carried, step, xp, after_step)
    return (in_indptr, sources) if payload is None else (in_indptr, sources, carried)


def _nothing() -> None:
    """The default ``after_step`` of :func:`in_arcs`."""


def _in_degrees(indices, n: int, rank):
    """The in-degree of every new id (host): a scatter over the targets, no per-arc
    temporary (``np.add.at``, where a bincount would first widen the ids to 64 bits)."""
    counts = np.zeros(n, np.int64)
    np.add.at(counts, indices, 1)
    if rank is None:
        return counts
    new = np.empty(n, np.int64)
    new[np.asarray(rank)] = counts
    return new


def _arc_steps(indptr, step: int):
    """Arcs ``[a, b)`` of a host CSR in steps of at most ``step`` (a long row spans several):
    ``(a, b, first row, its rows' offsets from a, clipped to the step)``."""
    m = int(indptr[-1])
    for a in range(0, m, step):
        b = min(a + step, m)
        first = int(np.searchsorted(indptr, a, side="right")) - 1
        end = int(np.searchsorted(indptr, b, side="left"))
        yield a, b, first, np.clip(indptr[first:end + 1], a, b) - a


def _low_halves(keys, xp):
    """The low 32 bits of uint64 ``keys`` as int32 (no 64-bit temporary on little-endian
    machines)."""
    if sys.byteorder == "little":
        return keys.view(xp.uint32)[0::2].astype(xp.int32)
    return (keys & xp.uint64(0xFFFFFFFF)).astype(xp.int32)


def _sort_rows(in_indptr, sources, carried, step: int, xp, after_step) -> None:
    """Sort each row of ``sources`` (offsets ``in_indptr``, host) ascending, in place, in
    steps of rows of about ``step`` arcs (a longer row alone), carrying ``carried`` along
    (stable: equal sources keep their order); ``after_step()`` after each step."""
    n = int(in_indptr.shape[0]) - 1
    for r, e in row_chunks(in_indptr, 0, n, step):
        a, b = int(in_indptr[r]), int(in_indptr[e])
        if b - a >= 2:
            _sort_row_step(in_indptr[r:e + 1] - a, sources[a:b],
                           None if carried is None else carried[a:b], xp)
        after_step()


def _sort_row_step(offsets, sources, carried, xp) -> None:
    """Sort the rows of one step of :func:`_sort_rows` in place: ``sources`` (a view) with
    row offsets ``offsets`` (host, from 0), ``carried`` (a view, or None) moved alike."""
    if offsets.shape[0] == 2:               # one row: its sources are the keys
        if carried is None:
            sources[...] = xp.sort(sources)
            return
        order = xp.argsort(sources, kind="stable")
    else:
        keys = arc_rows(xp.asarray(offsets), sources.shape[0], xp=xp,
                        dtype=np.int32).astype(xp.uint64)
        keys <<= xp.uint64(32)
        keys |= sources.astype(xp.uint64)
        if carried is None:
            # stable: the keys are in row order already, only each row's sources out of it,
            # and NumPy's stable sort merges such runs faster than its quicksort sorts them
            keys.sort(kind="stable")
            sources[...] = _low_halves(keys, xp)
            return
        order = xp.argsort(keys, kind="stable")
        del keys
    sources[...] = sources[order]
    carried[...] = carried[order]


def relabelled_arcs(indptr, indices, rank, weights=None, *, xp=None):
    """The out-arcs of the graph whose vertex ``v`` is renamed ``rank[v]``: ``(indptr int64,
    targets, weights)`` with each row's targets ascending (repeated arcs stay, lightest first),
    the CSR that ``CSRGraph.relabel`` builds; ``weights`` (int32 / float32 as the graph stores
    them, or None) come back aligned. None when a vertex id twice plus the weights' bits do not
    fit the 64-bit keys (then the caller sorts another way)."""
    return _sorted_arcs(indptr, indices, rank, xp=xp, weights=weights)


def _sorted_arcs(indptr, indices, rank, *, xp, weights=None):
    """Arcs ``u -> v`` of a CSR as keys ``new source | new target | weight code``, sorted:
    each row's targets come out ascending, equal arcs by weight. Returns ``(row offsets,
    targets[, weights])``.

    One sort of packed 64-bit keys: equal keys are equal arcs, so the result does not depend on
    the sort algorithm or the backend. On the host the per-arc row is a repeat of the rank by
    out-degree and the targets are ORed in by cache-sized chunks, so the keys (and a
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
    if xp is np:
        keys = np.repeat(row_part, np.diff(indptr))
    else:
        keys = row_part[arc_rows(indptr, m, xp=xp, dtype=index_dtype(n))]
    step = KEY_CHUNK_ARCS if xp is np else max(m, 1)
    for s in range(0, m, step):
        keys[s:s + step] |= end_part[indices[s:s + step]]
    del row_part, end_part
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
    counts = xp.zeros(n, xp.int64)      # row rank[v] has v's out-degree
    counts[r.astype(xp.int64)] = xp.diff(indptr)
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


def arc_named(graph, arc: int) -> str:
    """Arc ``arc`` (its position in the CSR arrays; of a graph loaded by ranks, in this rank's
    rows) as ``u -> v`` in the graph's own ids, for an error the caller can trace back to their
    edge list or NetworkX graph."""
    rows, first = (graph.part, graph.first) if hasattr(graph, "split_by_ranges") else (graph, 0)
    rows = rows.to_host()
    u = first + int(np.searchsorted(rows.indptr, arc, side="right")) - 1
    ends = graph.vertex_ids.id_of(np.array([u, int(rows.indices[arc])])).tolist()
    return " -> ".join(repr(e) for e in ends)
