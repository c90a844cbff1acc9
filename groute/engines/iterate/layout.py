"""Host-side layout of a linear iteration's arcs (:mod:`groute.engines.iterate`): the per-device
:class:`Shard`, the transposed arcs, and the ``"bins"`` kernel's degree order, its cut across
devices and its static task list. Pure NumPy (CuPy only to build the billion-sized sources on a device): no solver or
device state, so each piece is testable on its own.
"""
from __future__ import annotations

import logging

import numpy as np

from groute.graph.arcs import arc_rows
from groute.graph.csr import kept_on

log = logging.getLogger(__name__)
#: rows of one "bins" task at most (a multiple of 64: two rows per group of lanes at a time)
BINS_MAX_ROWS = 1024


class Shard:
    """Device ``i``'s part of a graph whose vertices are renumbered so it owns ``[lo, hi)``.

    ``out_indptr``/``out_indices``: the out-arcs of the owned vertices (targets are global ids;
    the asynchronous mode's, None for BSP); ``in_indptr``/``in_cols``: the in-arcs of the owned
    vertices as CSC (local arc offsets per owned vertex, global sources), only for BSP;
    ``in_cols`` is a host array, or already on the device that gets the shard (the CUDA "bins"
    set-up builds it there); ``in_rows``: the same arcs' local targets (the COO form, sorted by
    row; made on first use: the fused CUDA kernels never ask); ``inv_outdeg``: the per-source
    share of the owned vertices (:meth:`LinearIteration.scale
    <groute.engines.iterate.iteration.LinearIteration.scale>`: PageRank's 1/outdeg, 0 if
    dangling). On a weighted graph ``out_factors`` and ``in_factors`` are what each out-arc and
    in-arc multiplies its source's share by (:meth:`LinearIteration.arc_factors
    <groute.engines.iterate.iteration.LinearIteration.arc_factors>`, float64, aligned with
    ``out_indices`` and ``in_cols``); None unweighted.
    """

    def __init__(self, lo, hi, out_indptr, out_indices, inv_outdeg, in_cols=None,
                 in_indptr=None, *, out_factors=None, in_factors=None):
        self.lo, self.hi = int(lo), int(hi)
        self.out_indptr, self.out_indices = out_indptr, out_indices
        self.inv_outdeg = inv_outdeg
        self._in_rows, self.in_cols, self.in_indptr = None, in_cols, in_indptr
        self.out_factors, self.in_factors = out_factors, in_factors

    @property
    def weighted(self) -> bool:
        return self.in_factors is not None or self.out_factors is not None

    @property
    def n_local(self) -> int:
        return self.hi - self.lo

    @property
    def in_rows(self):
        if self._in_rows is None and self.in_indptr is not None:
            self._in_rows = arc_rows(self.in_indptr, dtype=np.int32)
        return self._in_rows


def in_degrees(graph):
    """In-degree of every vertex (int64, host), kept on the graph object (``graph._in_degrees``):
    :func:`choose_bsp_kernel` and :func:`bins_layout` both need it. An undirected graph stores
    every arc both ways, so its in-degrees are its out-degrees; a directed one needs a scatter
    over its arcs (``np.add.at``, faster than ``np.bincount`` on large graphs)."""
    def compute():
        if not graph.directed:
            return np.diff(np.asarray(graph.indptr, dtype=np.int64))
        counts = np.zeros(int(graph.num_vertices), np.int64)
        np.add.at(counts, np.asarray(graph.indices), 1)
        return counts
    return kept_on(graph, "_in_degrees", compute)


def transpose_arcs(indptr, indices, *, symmetric: bool = False):
    """The in-arcs of every vertex: ``(indptr int64, sources int32)`` of the transposed graph,
    each row's sources ascending (:func:`groute.graph.arcs.in_arcs`). A ``symmetric`` graph
    (undirected: rows sorted, every arc both ways) is its own transpose: its arrays, no copy."""
    indptr = np.asarray(indptr, dtype=np.int64)
    if symmetric:
        return indptr, np.asarray(indices).astype(np.int32, copy=False)
    from groute.graph.arcs import in_arcs
    return in_arcs(indptr, np.asarray(indices))


def transpose_with_arcs(indptr, indices, rank=None):
    """The in-arcs of a graph (optionally relabelled by ``rank``, old id -> new id, as
    :func:`groute.graph.arcs.in_arcs`) with where each came from: ``(in_indptr int64, sources
    int32, arcs int64)``, each row's sources ascending, ``arcs[i]`` the position among the
    out-arcs of in-arc ``i``: what carries an arc's weight across the transpose (weighted
    iterations; a host sort, which the unweighted set-up does without)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    if rank is not None:
        rank = np.asarray(rank, dtype=np.int64)
        src, dst = rank[src], rank[dst]
    arcs = np.lexsort((src, dst))
    in_indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=in_indptr[1:])
    return in_indptr, src[arcs].astype(np.int32), arcs


def degree_buckets(deg):
    """``floor(log2 deg)`` per vertex, -1 for degree 0."""
    return np.frexp(np.asarray(deg, np.float64))[1].astype(np.int64) - 1


def degree_order(indeg):
    """The vertex order of the ``"bins"`` kernel (new id -> old id): non-increasing
    :func:`degree_buckets` of the in-degree, stable, so vertices of one bucket keep their order
    (a grid or road network keeps its locality) and the hubs get the smallest ids. (The bucket
    fits a byte, for which NumPy's stable sort is a linear radix sort.)"""
    return np.argsort((-degree_buckets(indeg)).astype(np.int8), kind="stable")


#: the cost of one row in :func:`degree_split`, in in-arcs (a row: indptr, y, 1/outdeg loads, y
#: and contribution stores, coalesced, plus its peer stores; an arc: a source id and a gather),
#: so that a range of few long rows and one of many short ones take about equal time
#: (docs/PR_CC.md, "Several devices", has how it was fitted)
BINS_ROW_COST = 4


def degree_split(in_indptr, k: int, row_cost: float = BINS_ROW_COST):
    """Offsets ``[0, ..., n]`` cutting rows ``[0, n)`` into ``k`` contiguous non-empty ranges of
    about equal cost (in-arcs + ``row_cost`` per row): the several-device layout of the
    ``"bins"`` kernel, whose rows are in :func:`degree_order`. A contiguous slice of
    degree-ordered rows is itself degree-ordered, so each device's task list is
    :func:`bins_tasks` of its slice, and every device gathers from the same hub prefix."""
    ip = np.asarray(in_indptr, np.int64)
    n = ip.shape[0] - 1
    if not 1 <= k <= max(n, 1):
        raise ValueError(f"degree_split: {k} ranges for {n} rows; use between 1 and {n} devices")
    cum = ip.astype(np.float64) + float(row_cost) * np.arange(n + 1)
    goal = cum[-1] * np.arange(1, k) / k
    hi = np.minimum(np.searchsorted(cum, goal), n)          # cum[hi - 1] < goal <= cum[hi]
    lo = np.maximum(hi - 1, 0)
    cut = np.where(goal - cum[lo] < cum[hi] - goal, lo, hi)  # the nearer row boundary
    offsets = np.concatenate([[0], cut, [n]]).astype(np.int64)
    for i in range(1, k):                   # at least one row each (k <= n)
        offsets[i] = max(offsets[i], offsets[i - 1] + 1)
    for i in range(k - 1, 0, -1):
        offsets[i] = min(offsets[i], offsets[i + 1] - 1)
    return offsets


class BinsLayout:
    """The ``"bins"`` kernel's renumbering of a graph (see :func:`bins_layout`): ``order`` (new
    id -> the graph's id), ``rank`` (the inverse; int32 below 2**31 vertices), ``in_indptr``
    (in-arc offsets in the new order) and ``out_degrees`` (out-degree of each new id). The
    in-arcs' sources (:meth:`sources`) are the one billion-entry array: built on the host once
    and kept here, or on a CUDA device for each solver (:func:`bins_in_cols`)."""

    def __init__(self, graph):
        n = int(graph.num_vertices)
        indeg = in_degrees(graph)
        self.order = degree_order(indeg)
        self.rank = np.empty(n, np.int32 if n < 2**31 else np.int64)
        self.rank[self.order] = np.arange(n, dtype=self.rank.dtype)
        self.in_degrees = indeg[self.order]
        self.in_indptr = np.zeros(n + 1, np.int64)
        np.cumsum(self.in_degrees, out=self.in_indptr[1:])
        self.out_degrees = np.diff(np.asarray(graph.indptr, dtype=np.int64))[self.order]
        self.host_sources = None

    def sources(self, graph, xp=np):
        """The in-arcs' sources in the new ids, every row ascending (int32), computed with
        ``xp`` (NumPy, or CuPy on the current device, where ``graph``'s arrays are uploaded
        for it); the host result is kept in :attr:`host_sources`."""
        if xp is np and self.host_sources is not None:
            return self.host_sources
        from groute.graph.arcs import in_arcs
        indptr = xp.asarray(np.asarray(graph.indptr, np.int64))
        indices = xp.asarray(np.asarray(graph.indices))
        _, src = in_arcs(indptr, indices, xp.asarray(self.rank),
                         in_degrees=xp.asarray(self.in_degrees), xp=xp)
        if xp is np:
            self.host_sources = src
        return src


def bins_layout(graph) -> BinsLayout:
    """The ``"bins"`` kernel's renumbering of ``graph`` by :func:`degree_order` of the
    in-degrees, computed once and kept on the graph object (``graph._pr_bins``; solvers for 1 or
    several devices share it)."""
    return kept_on(graph, "_pr_bins", lambda: BinsLayout(graph))


#: device memory the CuPy build of the "bins" in-arcs needs at its peak, in bytes per arc: the
#: int32 targets, the 8-byte keys and their sort buffer, the arcs' rows while they are made
BINS_BUILD_BYTES_PER_ARC = 32


def bins_in_cols(graph, layout: BinsLayout, offsets, devices):
    """Each device's slice of the in-arcs' sources for the ranges ``offsets`` of the new ids,
    ready for ``device.asarray``: host views on the CPU backend (or when the host already has
    them, or when the first device has less than :data:`BINS_BUILD_BYTES_PER_ARC` free per
    arc); on CUDA devices built on the first device (CuPy: upload the graph, then one sort of
    a billion packed keys, far faster on a GPU than on the host) and copied to the others, so
    nothing billion-sized crosses PCIe twice."""
    ip = layout.in_indptr
    bounds = [(int(ip[lo]), int(ip[hi])) for lo, hi in zip(offsets[:-1], offsets[1:])]
    first = devices[0]
    m = int(ip[-1])
    if first.backend != "cuda" or layout.host_sources is not None or \
            first.memory_info()[0] < BINS_BUILD_BYTES_PER_ARC * m:
        if first.backend == "cuda" and layout.host_sources is None:
            log.info("bins layout: %s has too little free memory for the in-arcs' sort "
                     "(%d arcs); building them on the host", first.name, m)
        src = layout.sources(graph)
        return [src[a:b] for a, b in bounds]
    with first.use():
        src = layout.sources(graph, first.xp)
    if len(devices) == 1:
        out = [src]
    else:
        out = []
        for dev, (a, b) in zip(devices, bounds):
            with dev.use():
                part = dev.xp.empty(b - a, src.dtype)
                if b > a:
                    part.data.copy_from_device(src[a:b].data, (b - a) * src.itemsize)
                dev.xp.cuda.runtime.deviceSynchronize()     # before src's memory is reused
            out.append(part)
    del src
    with first.use():       # the sort's temporaries (tens of GB on kron:25) back to the driver
        first.xp.get_default_memory_pool().free_all_blocks()
    return out


def bins_tasks(in_indptr, *, task_arcs=1024, hub_degree=4096, lane_arcs=4):
    """The static task list of the ``"bins"`` kernel for in-arc offsets ``in_indptr`` whose rows
    are in :func:`degree_order`: ``(task_row int32, task_info int32, hub_rows)``.

    Rows of in-degree >= ``hub_degree`` (the first ``hub_rows`` rows) become ``ceil(degree /
    hub_degree)`` chunk tasks each (``info = chunk << 3 | 7``); the rest of each degree bucket
    ``[2^b, 2^(b+1))`` is cut into runs of about ``task_arcs`` arcs (at most
    :data:`BINS_MAX_ROWS` rows) summed by ``G = 2^lg`` lanes per row, ``G`` about
    ``2^b / lane_arcs`` (1 to 32): ``info = rows << 3 | lg``.
    """
    for name, v in (("task_arcs", task_arcs), ("hub_degree", hub_degree), ("lane_arcs", lane_arcs)):
        if int(v) < 1 or int(v) & (int(v) - 1):
            raise ValueError(f"bins_tasks: {name} must be a power of two; got {v!r}")
    ip = np.asarray(in_indptr, np.int64)
    deg = np.diff(ip)
    b = degree_buckets(deg)
    if np.any(np.diff(b) > 0):
        raise ValueError("bins_tasks: rows must be in degree_order (non-increasing buckets)")
    hub_rows = int(np.count_nonzero(deg >= hub_degree))
    nch = -(-deg[:hub_rows] // hub_degree)
    rows = [np.repeat(np.arange(hub_rows, dtype=np.int64), nch)]
    chunk = np.arange(rows[0].shape[0], dtype=np.int64) - np.repeat(np.cumsum(nch) - nch, nch)
    infos = [chunk << 3 | 7]
    lg_lane = int(np.log2(lane_arcs))
    r = hub_rows
    n = deg.shape[0]
    neg_b = -b                              # non-decreasing: each bucket's end by bisection
    while r < n:
        bucket = int(b[r])
        end = int(np.searchsorted(neg_b, -bucket, side="right"))
        lg = min(max(bucket - lg_lane, 0), 5)
        step = 2 * (32 >> lg)                       # rows a warp takes at once
        per = BINS_MAX_ROWS if bucket < 0 else task_arcs >> bucket
        per = min(max(step, per // step * step), BINS_MAX_ROWS)
        starts = np.arange(r, end, per, dtype=np.int64)
        rows.append(starts)
        infos.append(np.minimum(per, end - starts) << 3 | lg)
        r = end
    return (np.concatenate(rows).astype(np.int32), np.concatenate(infos).astype(np.int32),
            hub_rows)


def make_shards(indptr, indices, offsets, *, with_in_arcs: bool, transposed=None,
                scale=None, factors=None):
    """Cut a CSR graph into one :class:`Shard` per range ``[offsets[i], offsets[i+1])``
    (``transposed``: :func:`transpose_arcs` of the same graph, when already computed;
    ``scale``: the per-source share by out-degree, :func:`inverse_degrees` when None;
    ``factors``: a weighted graph's arc factors, one per out-arc, which the shards carry on
    both sides of the transpose)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    inv = (scale or inverse_degrees)(np.diff(indptr))
    in_factors = None
    if with_in_arcs and factors is not None:
        t_indptr, t_sources, arcs = transpose_with_arcs(indptr, indices)
        in_factors = np.asarray(factors)[arcs]
    elif with_in_arcs:
        t_indptr, t_sources = transposed if transposed is not None else transpose_arcs(indptr, indices)
    shards = []
    for i in range(len(offsets) - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        out_indptr = indptr[lo:hi + 1] - indptr[lo]
        out_indices = np.ascontiguousarray(indices[indptr[lo]:indptr[hi]], dtype=np.int32)
        cols = in_indptr = in_part = None
        if with_in_arcs:
            a, b = int(t_indptr[lo]), int(t_indptr[hi])
            in_indptr = t_indptr[lo:hi + 1] - a
            cols = np.ascontiguousarray(t_sources[a:b], dtype=np.int32)
            in_part = None if in_factors is None else in_factors[a:b]
        out_part = None if factors is None else np.asarray(factors)[indptr[lo]:indptr[hi]]
        shards.append(Shard(lo, hi, out_indptr, out_indices, inv[lo:hi].copy(), cols,
                            in_indptr, out_factors=out_part, in_factors=in_part))
    return shards


def inverse_degrees(outdeg):
    """``1 / outdeg`` (float64), 0 for a dangling vertex."""
    inv = np.zeros(outdeg.shape[0], np.float64)
    np.divide(1.0, outdeg, out=inv, where=outdeg > 0)
    return inv


def bins_shards(graph, layout: BinsLayout, offsets, devices, scale=None, factors=None):
    """One BSP :class:`Shard` (in-arcs only) per device of the ``"bins"`` layout cut at
    ``offsets``; the sources come from :func:`bins_in_cols`, or with a weighted graph's
    ``factors`` (one per out-arc of ``graph``) from :func:`transpose_with_arcs` on the host
    (``scale`` as :func:`make_shards`)."""
    inv = (scale or inverse_degrees)(layout.out_degrees)
    ip = layout.in_indptr
    bounds = list(zip(offsets[:-1], offsets[1:]))
    if factors is None:
        cols = bins_in_cols(graph, layout, offsets, devices)
        parts = [None] * len(bounds)
    else:
        _, src, arcs = transpose_with_arcs(graph.indptr, graph.indices, layout.rank)
        in_factors = np.asarray(factors)[arcs]
        cols = [src[ip[lo]:ip[hi]] for lo, hi in bounds]
        parts = [in_factors[ip[lo]:ip[hi]] for lo, hi in bounds]
    return [Shard(lo, hi, None, None, inv[lo:hi].copy(), c, ip[lo:hi + 1] - ip[lo],
                  in_factors=f)
            for (lo, hi), c, f in zip(bounds, cols, parts)]
