"""The layout of a linear iteration's arcs (:mod:`groute.engines.iterate`): the per-device
:class:`Shard`, each device's in-arcs (:func:`shard_in_arcs`, built in that device's memory:
the only piece that touches a device), and the ``"bins"`` kernel's degree order, its cut
across devices and its static task list. No solver state, so each piece is testable on its
own.
"""
from __future__ import annotations

import functools
import logging

import numpy as np

from groute.graph.arcs import IN_ARC_STEP_BYTES, arc_rows, in_arc_step, in_arcs
from groute.graph.csr import kept_on

log = logging.getLogger(__name__)
#: rows of one "bins" task at most (a multiple of 64: two rows per group of lanes at a time)
BINS_MAX_ROWS = 1024


class Shard:
    """Device ``i``'s part of a graph whose vertices are renumbered so it owns ``[lo, hi)``.

    ``out_indptr``/``out_indices``: the out-arcs of the owned vertices (targets are global ids;
    the asynchronous mode's, None for BSP); ``in_indptr``/``in_cols``: the in-arcs of the owned
    vertices as CSC (local arc offsets per owned vertex, host; global sources), only for BSP;
    ``in_rows``: the same arcs' local targets (the COO form, sorted by row; made on first use:
    only the CUDA COO pull asks); ``inv_outdeg``: the per-source share of the owned vertices
    (:meth:`LinearIteration.scale <groute.engines.iterate.iteration.LinearIteration.scale>`:
    PageRank's 1/outdeg, 0 if dangling). On a weighted graph ``out_factors`` and
    ``in_factors`` are what each out-arc and in-arc multiplies its source's share by
    (:meth:`LinearIteration.arc_factors
    <groute.engines.iterate.iteration.LinearIteration.arc_factors>`, aligned with
    ``out_indices`` and ``in_cols``); None unweighted.

    ``in_cols`` and ``in_factors`` are host arrays, or with ``device`` already in that
    device's memory as its kernels read them (:func:`shard_in_arcs`: CUDA, int32 sources or
    the packed ``(source, factor)`` pairs, ``in_factors`` None; NumPy, int32 sources and
    float64 factors).
    """

    def __init__(self, lo, hi, out_indptr, out_indices, inv_outdeg, in_cols=None,
                 in_indptr=None, *, out_factors=None, in_factors=None, device=None,
                 weighted=None):
        self.lo, self.hi = int(lo), int(hi)
        self.out_indptr, self.out_indices = out_indptr, out_indices
        self.inv_outdeg = inv_outdeg
        self._in_rows, self.in_cols, self.in_indptr = None, in_cols, in_indptr
        self.out_factors, self.in_factors = out_factors, in_factors
        self.device = device
        self._weighted = weighted

    @property
    def weighted(self) -> bool:
        if self._weighted is not None:
            return self._weighted
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
    """The ``"bins"`` kernel's renumbering of a graph by :func:`degree_order` of its
    in-degrees ``in_degrees`` (one per vertex, the graph's order): ``order`` (new id -> the
    graph's id), ``rank`` (the inverse; int32 below 2**31 vertices), ``in_degrees`` and
    ``in_indptr`` (in-degrees and in-arc offsets in the new order) and, given
    ``out_degrees``, ``out_degrees`` (out-degree of each new id; else None): vertex-sized host
    arrays. The in-arcs themselves are built by each device for its own range
    (:func:`shard_in_arcs`), or across processes moved to their new owners. :meth:`of` lays out
    a whole graph (:func:`bins_layout` keeps it on the graph)."""

    def __init__(self, in_degrees, out_degrees=None):
        indeg = np.asarray(in_degrees)
        n = indeg.shape[0]
        self.order = degree_order(indeg)
        self.rank = np.empty(n, np.int32 if n < 2**31 else np.int64)
        self.rank[self.order] = np.arange(n, dtype=self.rank.dtype)
        self.in_degrees = indeg[self.order]
        self.in_indptr = np.zeros(n + 1, np.int64)
        np.cumsum(self.in_degrees, out=self.in_indptr[1:])
        self.out_degrees = None if out_degrees is None else np.asarray(out_degrees)[self.order]

    @classmethod
    def of(cls, graph) -> "BinsLayout":
        """The layout of a whole graph (its in-degrees, :func:`in_degrees`, and out-degrees)."""
        return cls(in_degrees(graph), np.diff(np.asarray(graph.indptr, dtype=np.int64)))


def bins_layout(graph) -> BinsLayout:
    """The ``"bins"`` kernel's renumbering of ``graph`` by :func:`degree_order` of the
    in-degrees, computed once and kept on the graph object (``graph._pr_bins``; solvers for 1 or
    several devices share it)."""
    return kept_on(graph, "_pr_bins", lambda: BinsLayout.of(graph))


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


def shard_in_arcs(device, indptr, indices, rows, *, rank=None, in_degrees=None, factors=None,
                  symmetric=False):
    """``device``'s in-arcs of the new ids ``rows = (lo, hi)`` of a graph (host CSR ``indptr``,
    ``indices``; ``rank``: old id -> new id, None when the ids are already new), built in the
    device's memory as its kernels read them (:func:`groute.graph.arcs.in_arcs`, on the
    device's array module: no whole-graph array on any device; after a step, the pool's
    cached memory past two steps' temporaries goes back to the driver, and all of it after
    the build, :meth:`~groute.device.base.Device.release_cached`): ``(in_indptr, cols,
    in_factors)``.

    ``in_indptr`` (int64, host): the rows' arc offsets from 0. Unweighted, ``cols`` are the
    int32 sources; with ``factors`` (one per out-arc; float32 for a CUDA device, float64 for
    NumPy) a CUDA device gets the ``(m, 2)`` int32 pairs of each in-arc's source and its
    factor's bits (iterate.cu ``ARC_WEIGHTS``) and ``in_factors`` None, a NumPy one the
    sources and the factors apart. ``in_degrees`` (host, every new id's) must be given unless
    the graph is ``symmetric`` and unweighted and not relabelled: its own transpose, whose
    in-arcs are its rows' out-arcs (copied as they are)."""
    lo, hi = int(rows[0]), int(rows[1])
    indptr = np.asarray(indptr, dtype=np.int64)
    cuda = device.backend == "cuda"
    with device.on_compute():      # built where the device's kernels will read them
        if symmetric and rank is None and factors is None:
            a, b = int(indptr[lo]), int(indptr[hi])
            cols = device.asarray(np.asarray(indices[a:b]).astype(np.int32, copy=False))
            return indptr[lo:hi + 1] - a, cols, None
        xp = device.xp
        # one step's temporaries are reused from the pool step after step; blocks past two
        # steps' worth (for each device building on this GPU at once: the pool is the GPU's)
        # are sizes the next steps did not use, and go back
        step = in_arc_step(int(np.asarray(indices).shape[0]), xp.__name__)
        builders = int(getattr(device, "sharing", 1))
        release = functools.partial(device.release_cached,
                                    above=2 * IN_ARC_STEP_BYTES * step * builders)
        if factors is None:
            in_indptr, cols = in_arcs(indptr, indices, rank, rows=(lo, hi), in_degrees=in_degrees,
                                      xp=xp, step_arcs=step, after_step=release)
            in_factors = None
        elif cuda:          # the pairs filled in place: no second copy of the arcs
            cols = xp.empty((int(np.sum(in_degrees[lo:hi])), 2), np.int32)
            bits = np.asarray(factors, np.float32).view(np.int32)
            in_indptr, _, _ = in_arcs(indptr, indices, rank, rows=(lo, hi),
                                      in_degrees=in_degrees, payload=bits,
                                      out=(cols[:, 0], cols[:, 1]), xp=xp, step_arcs=step,
                                      after_step=release)
            in_factors = None
        else:
            in_indptr, cols, in_factors = in_arcs(indptr, indices, rank, rows=(lo, hi),
                                                  in_degrees=in_degrees, payload=factors,
                                                  xp=xp, step_arcs=step, after_step=release)
        device.release_cached()         # the last step's temporaries too
    return in_indptr, cols, in_factors


def make_shards(indptr, indices, offsets, *, devices=None, in_arcs=None, scale=None,
                factors=None):
    """Cut a CSR graph into one :class:`Shard` per range ``[offsets[i], offsets[i+1])``: for
    BSP its in-arcs (``in_arcs``: per range, what :func:`shard_in_arcs` built on
    ``devices[i]``, the device that gets the shard), else (``in_arcs`` None, the asynchronous
    mode) its out-arcs, views of the graph's (with ``factors``' slices: a weighted graph's arc
    factors, one per out-arc). ``scale``: the per-source share by out-degree,
    :func:`inverse_degrees` when None."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    inv = (scale or inverse_degrees)(np.diff(indptr))
    shards = []
    for i in range(len(offsets) - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if in_arcs is not None:
            in_indptr, cols, in_factors = in_arcs[i]
            shards.append(Shard(lo, hi, None, None, inv[lo:hi].copy(), cols, in_indptr,
                                in_factors=in_factors, device=devices[i],
                                weighted=factors is not None))
            continue
        a, b = int(indptr[lo]), int(indptr[hi])
        shards.append(Shard(lo, hi, indptr[lo:hi + 1] - a,
                            np.asarray(indices[a:b]).astype(np.int32, copy=False),
                            inv[lo:hi].copy(),
                            out_factors=None if factors is None else np.asarray(factors)[a:b]))
    return shards


def inverse_degrees(outdeg):
    """``1 / outdeg`` (float64), 0 for a dangling vertex."""
    inv = np.zeros(outdeg.shape[0], np.float64)
    np.divide(1.0, outdeg, out=inv, where=outdeg > 0)
    return inv


def bins_shards(layout: BinsLayout, offsets, devices, in_arcs, scale=None, weighted=False):
    """One BSP :class:`Shard` per device of the ``"bins"`` layout cut at ``offsets``, its
    in-arcs what :func:`shard_in_arcs` built on it (``in_arcs``, per device; relabelled by
    ``layout.rank``); ``scale`` as :func:`make_shards`; ``weighted``: the arcs carry factors."""
    inv = (scale or inverse_degrees)(layout.out_degrees)
    return [Shard(lo, hi, None, None, inv[lo:hi].copy(), cols, in_indptr,
                  in_factors=in_factors, device=device, weighted=weighted)
            for lo, hi, device, (in_indptr, cols, in_factors)
            in zip(offsets[:-1], offsets[1:], devices, in_arcs)]
