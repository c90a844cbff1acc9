"""PageRank across devices: BSP power iteration (``mode="auto"``, the default) or asynchronous
residual push.

Both modes compute the "leaky" PageRank ``y = (1-d)/n + d P^T y`` (P: the out-arc transition
matrix; a dangling vertex's mass is dropped) and return ``y / sum(y)``. With uniform teleport
and dangling mass spread uniformly (the standard definition, ``groute.graph.reference.pagerank``)
the PageRank vector is exactly proportional to ``y``, so no device ever needs the global dangling
sum during the run.

* ``mode="async"`` (Whang et al.'s data-driven push, the variant Groute evaluates): every vertex
  holds a rank and a residual; one whose residual exceeds ``eps = tol (1-d) / n`` adds it to its
  rank and pushes ``d r / outdeg`` to its out-neighbours. Contributions to vertices of other
  devices are summed into a dense per-device accumulator and sent, one ``(vertex, value)`` item
  per destination vertex, through the distributed worklist (:mod:`groute.worklist`), which also
  detects termination. Each vertex ends with residual <= eps, so the L1 error of ``y`` is at
  most ``tol`` times its mass.
* ``mode="bsp"``: topology-driven, pull-based power iteration over the transposed graph (every
  vertex every iteration, no host sync per iteration: convergence
  ``sum |y' - y| <= tol * sum y'`` is checked every few iterations). Each device owns a range
  of vertices; after each iteration its kernel stores the new ``y / outdeg`` of the vertices a
  peer's in-arcs read straight into that peer's copy (peer access), or copies its whole slice.
  The degree-binned kernel (``"bins"``, power-law graphs) renumbers the vertices by in-degree,
  hubs first, and cuts that order into one contiguous range per device balanced by arcs
  (:func:`degree_split`) instead of partitioning; every device keeps the whole contribution
  vector and gets the peers' new values as above.

  With ``persistent=True`` (CUDA, peer access with native atomics) the fused kernels run a
  whole BSP run in one cooperative launch per device: iterations meet at a cross-device barrier
  in device 0's memory that also takes the stopping decision (:func:`choose_persistent`).

``mode="auto"`` (default) is ``"bsp"``: it was faster in every measurement (one H200, same
runs: kron:21 4.97 against 152.9 ms, grid:4900 13.0 against 70.7 ms, kron:25 147 ms against
2.14 s; two H200s likewise, docs/PERFORMANCE.md) and stops on a global L1 rule; ``"async"`` is
the variant the Groute paper evaluates, kept for comparison.

CUDA kernels are in ``pr.cu``; the CPU backend runs vectorised NumPy on the devices' streams.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from apps.common import AppResult, DeviceTimer, Solver
from groute.graph.arcs import arc_rows
from groute.graph.csr import kept_on

log = logging.getLogger(__name__)
KERNEL = Path(__file__).with_name("pr.cu")
MODES = ("async", "bsp")
#: what ``mode="auto"`` runs (module docstring: faster everywhere measured)
AUTO_MODE = "bsp"
BSP_KERNELS = ("auto", "csc", "bins", "coo")
#: in-degree above which a vertex counts as big for choose_bsp_kernel
HEAVY_DEGREE = 32
PARTITIONS = ("metis", "contiguous", "random")
BLOCK = 256
#: rows of one "bins" task at most (a multiple of 64: two rows per group of lanes at a time)
BINS_MAX_ROWS = 1024
#: "bins" kernel: threads per block (one block per SM) and the contributions of the first
#: BINS_HOT vertices (the hubs) each block copies into shared memory (224 KiB of the 227 a
#: block may opt into on an H100/H200; less where the device allows less)
BINS_BLOCK = 1024
BINS_HOT = 57344
#: ``persistent=`` values; pr.cu PersistCtl: the control words of a persistent launch
PERSISTENT_CHOICES = (True, False, "auto")
P_ABORT, P_ITERS, P_CROSS, P_CTL = 1, 2, 5, 8
#: ``persistent="auto"`` turns the persistent kernels on where they can run on at least this
#: many devices. Measured at 0fb2df5+ on two H200s with the gathers through L2 (pr.cu
#: ``pr_load``; ``tests/gpu_check_pr_cc.py --pr-scaling grid:4900,kron:21,kron:25 --pr-kernels
#: auto,auto:persistent --devices 1,2 --repeat 3``, two calls): on two GPUs grid:4900 7.84-7.85
#: against 8.34-8.39 ms per iteration launched, kron:21 3.14-3.35 against 3.19-3.35 ms, kron:25
#: 70.3-70.6 against 69.7-77.7 ms; on one GPU equal within noise (grid:4900 12.46-12.53 against
#: 12.33-12.45 ms), where the per-iteration path has no cross-device waits to save.
PERSISTENT_AUTO_MIN_DEVICES = 2


def _call(stream, fn, *args):
    """Run ``fn(*args)`` in stream order and return its result (waits on the CPU backend)."""
    out = []
    stream.submit(lambda: out.append(fn(*args)))
    if not out:
        stream.record().synchronize()
    return out[0]


#: seconds a BSP convergence check polls its CUDA event without back-off before the normal
#: wait: the general wait sleeps up to 2 ms between polls, which left the GPU idle for about
#: 1-3 ms at every check (measured on one H200)
SPIN_S = 0.25


def _sync_host(device, array, spin=False):
    """A host copy of ``array`` after everything queued on the compute stream has finished
    (``spin``: poll the event without back-off first, see :data:`SPIN_S`; the BSP checks use
    it, the async mode keeps the general wait)."""
    device.compute_stream.record().synchronize(spin=SPIN_S if spin else 0.0)
    return device.to_host(array)


# ------------------------------------------------------------------------------------------------
# the graph, cut into per-device shards
# ------------------------------------------------------------------------------------------------
class Shard:
    """Device ``i``'s part of a graph whose vertices are renumbered so it owns ``[lo, hi)``.

    ``out_indptr``/``out_indices``: the out-arcs of the owned vertices (targets are global ids;
    the asynchronous mode's, None for BSP); ``in_indptr``/``in_cols``: the in-arcs of the owned
    vertices as CSC (local arc offsets per owned vertex, global sources), only for BSP;
    ``in_cols`` is a host array, or already on the device that gets the shard (the CUDA "bins"
    set-up builds it there); ``in_rows``: the same arcs' local targets (the COO form, sorted by
    row; made on first use: the fused CUDA kernels never ask); ``inv_outdeg``: 1/outdeg of
    owned vertices (0 if dangling).
    """

    def __init__(self, lo, hi, out_indptr, out_indices, inv_outdeg, in_cols=None,
                 in_indptr=None):
        self.lo, self.hi = int(lo), int(hi)
        self.out_indptr, self.out_indices = out_indptr, out_indices
        self.inv_outdeg = inv_outdeg
        self._in_rows, self.in_cols, self.in_indptr = None, in_cols, in_indptr

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
    over its arcs (``np.add.at``: 2.7x faster than ``np.bincount`` on kron:22's 128M arcs)."""
    def compute():
        if not graph.directed:
            return np.diff(np.asarray(graph.indptr, dtype=np.int64))
        counts = np.zeros(int(graph.num_vertices), np.int64)
        np.add.at(counts, np.asarray(graph.indices), 1)
        return counts
    return kept_on(graph, "_in_degrees", compute)


def transpose_arcs(indptr, indices):
    """The in-arcs of every vertex: ``(indptr int64, sources int32)`` of the transposed graph,
    each row's sources ascending (:func:`groute.graph.arcs.in_arcs`)."""
    from groute.graph.arcs import in_arcs
    return in_arcs(np.asarray(indptr, dtype=np.int64), np.asarray(indices))


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
#: and contribution stores, coalesced, plus its peer stores; an arc: a source id and a gather).
#: Fitted on kron:25, 2 H200s, at 96fbbb1 (row cost 2 then): sweeps of 4.36 ms for 557M arcs
#: and 0.18M rows, 4.73 ms for 490M arcs and 33.4M rows, 9.08 ms for both on one GPU: 7.8 ps
#: an arc, 27 ps a row, 3.4 arcs
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
    arc); on CUDA devices built on the first device (CuPy: upload the graph, one sort of a
    billion packed keys in a fraction of a second on an H200, against tens of seconds on the
    host) and copied to the others, so nothing billion-sized crosses PCIe twice."""
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


def make_shards(indptr, indices, offsets, *, with_in_arcs: bool, transposed=None):
    """Cut a CSR graph into one :class:`Shard` per range ``[offsets[i], offsets[i+1])``
    (``transposed``: :func:`transpose_arcs` of the same graph, when already computed)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    inv = inverse_degrees(np.diff(indptr))
    if with_in_arcs:
        t_indptr, t_sources = transposed if transposed is not None else transpose_arcs(indptr, indices)
    shards = []
    for i in range(len(offsets) - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        out_indptr = indptr[lo:hi + 1] - indptr[lo]
        out_indices = np.ascontiguousarray(indices[indptr[lo]:indptr[hi]], dtype=np.int32)
        cols = in_indptr = None
        if with_in_arcs:
            a, b = int(t_indptr[lo]), int(t_indptr[hi])
            in_indptr = t_indptr[lo:hi + 1] - a
            cols = np.ascontiguousarray(t_sources[a:b], dtype=np.int32)
        shards.append(Shard(lo, hi, out_indptr, out_indices, inv[lo:hi].copy(), cols,
                            in_indptr))
    return shards


def inverse_degrees(outdeg):
    """``1 / outdeg`` (float64), 0 for a dangling vertex."""
    inv = np.zeros(outdeg.shape[0], np.float64)
    np.divide(1.0, outdeg, out=inv, where=outdeg > 0)
    return inv


def bins_shards(graph, layout: BinsLayout, offsets, devices):
    """One BSP :class:`Shard` (in-arcs only) per device of the ``"bins"`` layout cut at
    ``offsets``; the sources come from :func:`bins_in_cols`."""
    cols = bins_in_cols(graph, layout, offsets, devices)
    inv = inverse_degrees(layout.out_degrees)
    ip = layout.in_indptr
    return [Shard(lo, hi, None, None, inv[lo:hi].copy(), c, ip[lo:hi + 1] - ip[lo])
            for lo, hi, c in zip(offsets[:-1], offsets[1:], cols)]


def choose_bsp_kernel(graph, k: int, inplace: bool = False) -> str:
    """The BSP kernel ``bsp_kernel="auto"`` picks (the CPU backend runs NumPy whatever the
    kernel, but follows the ``"bins"`` layout when it is picked):

    * one device and in-place sweeps asked for (``inplace`` is ignored on several):
      ``"csc"``, the only in-place kernel;
    * most arcs entering vertices of in-degree > HEAVY_DEGREE (power-law graphs), on any number
      of devices: ``"bins"``, the fused pull over vertices relabelled by degree with a static
      task list (share on kron:21: 0.89; one H200: 2.5x cuSPARSE on kron:21; on several devices
      the degree-split layout, see :class:`PageRank`);
    * otherwise (grids, roads, meshes) ``"csc"``, the fused pull kernel, on any number of
      devices (share of such arcs on grid:4900: 0; one H200: 12.4 ms vs 63-72 ms for the COO
      pull + finalize pair; two H200s: see docs/PR_CC.md). ``"coo"`` is never picked.
    """
    if k == 1 and inplace:
        return "csc"
    return "bins" if heavy_in_arcs(graph) else "csc"


def heavy_in_arcs(graph) -> bool:
    """Whether most arcs enter vertices of in-degree > HEAVY_DEGREE (power-law graphs)."""
    m = int(graph.num_edges)
    if m == 0:
        return False
    indeg = in_degrees(graph)
    return int(indeg[indeg > HEAVY_DEGREE].sum()) * 2 > m


def default_sweeps(graph, k: int, backend: str) -> int:
    """Async push sweeps per worklist round when ``sweeps`` is not given.

    CPU: 2. CUDA: 8 (few host round trips) except on several devices with a power-law graph
    (:func:`heavy_in_arcs`), where a sweep is costly and a hub's remote contributions should go
    out after every sweep: 1. Measured at 25e7ded on two H200s (tests/gpu_pr_async_probe.py,
    sweeps 8 / 2 / 1): kron:21 0.83 / 0.48 / 0.37 s, kron:25 18.3 / 7.2 / 5.0 s, grid:4900
    0.40 / 0.47 / 0.53 s; one H200 on grid:4900 0.36 / 0.35 / 0.43 s.
    """
    if backend != "cuda":
        return 2
    return 1 if k > 1 and heavy_in_arcs(graph) else 8


def persistent_unavailable(ctx, mode: str, kernel: str, inplace: bool, device_check: bool) -> str | None:
    """Why the persistent BSP kernels cannot run with these options on ``ctx`` (None when they
    can): they are the fused CUDA kernels ("csc", "bins") in Jacobi form, checking the stopping
    rule on the device, on devices that reach each other's memory with native atomics (the
    cross-device barrier of :mod:`apps.peer_barrier`)."""
    if mode != "bsp":
        return f"it runs mode='bsp' (got mode={mode!r})"
    from apps.peer_barrier import unavailable
    why = unavailable(ctx)
    if why is not None:
        return why
    if kernel not in ("csc", "bins"):
        return f"bsp_kernel={kernel!r} has no persistent form (use 'csc' or 'bins')"
    if inplace:
        return "inplace=True (Gauss-Seidel) has no persistent form"
    if not device_check:
        return "it checks the stopping rule on the device: device_check=False contradicts it"
    return None


def choose_persistent(requested, ctx, mode: str, kernel: str, inplace: bool,
                      device_check: bool) -> tuple[bool, str | None]:
    """``persistent=`` resolved: (on, why not). ``True`` where it cannot run is a ValueError
    naming the reason; ``"auto"`` is on where it can run on at least
    :data:`PERSISTENT_AUTO_MIN_DEVICES` devices."""
    if requested not in PERSISTENT_CHOICES or not isinstance(requested, (bool, str)):
        raise ValueError(f"persistent must be True, False or 'auto'; got {requested!r}")
    if requested is False:
        return False, "persistent=False"
    why = persistent_unavailable(ctx, mode, kernel, inplace, device_check)
    if requested is True:
        if why is not None:
            raise ValueError(f"persistent=True cannot run here: {why}")
        return True, None
    if why is not None:
        return False, why
    if len(ctx.devices) < PERSISTENT_AUTO_MIN_DEVICES:
        return False, (f"auto: off on fewer than {PERSISTENT_AUTO_MIN_DEVICES} devices (no "
                       f"faster there, docs/PR_CC.md); opt in with persistent=True")
    return True, None


# ------------------------------------------------------------------------------------------------
# per-device state and operations: the only backend-specific code
# ------------------------------------------------------------------------------------------------
class _DevicePR:
    """One device's arrays and the PageRank operations on them (CUDA kernels or NumPy)."""

    def __init__(self, device, shard: Shard, n: int, mode: str, damping: float, k: int,
                 bsp_opts=None):
        self.device = device
        self.n, self.lo, self.hi, self.n_local = n, shard.lo, shard.hi, shard.n_local
        self.damping = float(damping)
        self.cuda = device.backend == "cuda"
        self.fdt = np.float32 if self.cuda else np.float64
        self.stream = device.compute_stream
        if mode == "bsp":
            o = dict(bsp_opts or {})
            self.bins = o.get("kernel") == "bins"           # "auto" is resolved by PageRank
            self.fused = o.get("kernel", "csc") == "csc" or self.bins
            self.lanes_k = int(o.get("vertices_per_lane", 2))
            self.inplace = bool(o.get("inplace", False)) and k == 1
            # the fused kernels skip the iterations after the stopping rule held on all devices
            # together (bsp_converged in pr.cu; the NumPy sweeps of the CPU backend follow the
            # same protocol); the COO pair has no skip: the host checks
            self.device_check = bool(o.get("device_check", True)) and self.fused
            # one cooperative launch per run (PageRank resolved the option: choose_persistent)
            self.persistent = bool(o.get("persistent", False)) and self.cuda
            self.small_degree = int(o.get("small_degree", 8))
            self.tol = float(o.get("tol", 1e-6))
            self.num_in = int(shard.in_cols.shape[0])
            wide = self.num_in >= 2 ** 31
            csc = ("pr_csc64" if wide else "pr_csc32") + f"_k{self.lanes_k}"
            if self.bins:
                csc = "pr_bins64" if wide else "pr_bins32"
                self.hot_max = 0
                if self.cuda:   # the prefix that fits the shared memory a block may opt into
                    props = device.xp.cuda.runtime.getDeviceProperties(device.index)
                    optin = int(props.get("sharedMemPerBlockOptin", 0) or 48 * 1024)
                    self.hot_max = min(BINS_HOT, (optin - 1024) // 16 * 4)
                self.nhot = min(self.hot_max, n) // 4 * 4
                self.hub_degree = int(o.get("hub_degree", 4096))
                task_row, task_info, hub_rows = bins_tasks(
                    shard.in_indptr, task_arcs=int(o.get("task_arcs", 1024)),
                    hub_degree=self.hub_degree, lane_arcs=int(o.get("lane_arcs", 4)))
                self.num_tasks = int(task_row.shape[0])
        if self.cuda:
            from groute.kernels import get_kernel
            with device.use():
                if mode != "bsp":
                    names = {n: n for n in ("pr_push", "pr_apply", "pr_pack")}
                elif self.fused:
                    names = {"csc": csc}
                else:
                    names = {"pr_pull": "pr_pull", "pr_finalize": "pr_finalize"}
                self.kernels = {key: get_kernel(KERNEL, name) for key, name in names.items()}
            self.sms = int(device.properties()["multiprocessors"])
            if mode == "bsp":   # the main kernel's grid: exactly the blocks resident at once
                key = "csc" if self.fused else "pr_pull"
                regs = int(getattr(self.kernels[key], "num_regs", 0) or 64)
                per_sm = max(1, min(2048 // BLOCK, 65536 // (-(-regs // 8) * 8 * BLOCK)))
                if self.bins:
                    per_sm = 1
                    if self.nhot:   # the largest prefix (the kernel object is shared)
                        with device.use():
                            self.kernels[key].max_dynamic_shared_size_bytes = self.hot_max * 4
                self.resident = self.sms * per_sm * int(o.get("waves", 1))
                if self.persistent:
                    self._load_persistent(csc)
        up = device.asarray
        self.inv_outdeg = up(shard.inv_outdeg.astype(self.fdt))
        if mode == "bsp":
            self.in_cols = up(shard.in_cols)
            if self.cuda and self.fused:
                self.in_indptr = up(shard.in_indptr.astype(np.int64 if wide else np.int32))
                if self.bins:
                    self.task_row, self.task_info = up(task_row), up(task_info)
                    self.part = device.zeros(max(self.num_tasks, 1), np.float32)
                    self.hub_count = device.zeros(max(hub_rows, 1), np.int32)
            else:
                self.in_rows = up(shard.in_rows)
                self.in_indptr = shard.in_indptr if not self.cuda else None
                self.acc = device.zeros(self.n_local, self.fdt)
            self.y = device.zeros(self.n_local, self.fdt)
            # Jacobi: read one vector, write the other; in place (Gauss-Seidel): one vector
            self.contrib = [device.zeros(n, self.fdt) for _ in range(1 if self.inplace else 2)]
            self.outs = None        # per parity: the vectors finalize writes (see set_outputs)
            self.stats = None       # [iteration][diff, mass] (see alloc_stats)
            self.stats_of = None    # every device's stats, in device order (see set_check_group)
        else:
            self.out_indptr, self.out_indices = up(shard.out_indptr), up(shard.out_indices)
            self.rank = device.zeros(self.n_local, np.float64)
            self.residual = device.zeros(self.n_local, self.fdt)
            # float64 on both backends: a round's sums lost small late terms in float32 (pr.cu)
            self.remote_acc = device.zeros(n if k > 1 else 1, np.float64)
            self.counters = device.zeros(2, np.uint64)
            self.out_items = None

    def _load_persistent(self, name):
        """The persistent form of kernel ``name`` (pr.cu: ``<name>_persistent``; csc: before
        the ``_k`` suffix), compiled for cooperative launch, and its grid: every block resident
        (bins: one per SM, as the per-iteration kernel), no more blocks than there is work."""
        from groute.kernels import load_module, resident_blocks_per_sm
        pname = name + "_persistent" if self.bins else name.replace("_k", "_persistent_k")
        with self.device.use():
            fn = load_module(KERNEL, cooperative=True).get_function(pname)
            if self.bins:
                if self.nhot:
                    fn.max_dynamic_shared_size_bytes = self.hot_max * 4
                blocks = min(self.sms, -(-self.num_tasks * 32 // BINS_BLOCK))
            else:
                per_sm = resident_blocks_per_sm(fn, BLOCK, self.device.index)
                blocks = min(self.sms * per_sm, -(-self.n_local // BLOCK))
        self.kernels["persistent"] = fn
        self.persistent_blocks = max(1, blocks)
        self.ctl = self.device.zeros(P_CTL, np.int32)

    def _grid(self, work_items, per_block=BLOCK, waves=8):
        return (max(1, min(-(-work_items // per_block), self.sms * waves)),)

    # BSP ----------------------------------------------------------------------------------------
    def reads(self):
        """Which vertices this device's in-arcs read (host bool per global id), found once by a
        scatter over its own in-arcs where they live: one pass over the arcs in all, where
        filtering every peer's arcs for every device took about 18 s on kron:25."""
        if getattr(self, "_reads", None) is None:
            xp = self.device.xp
            with self.device.use():
                used = xp.zeros(max(self.n, 1), dtype=bool)[:self.n]
                if self.num_in:
                    used[self.in_cols] = True
                self._reads = np.asarray(self.device.to_host(used), dtype=bool)
        return self._reads

    def set_outputs(self, targets):
        """``targets``: the devices (self first, at most 8) whose copy of the contribution vector
        this device's finalize writes directly (peer stores); the others get copies. A peer gets
        only the vertices its in-arcs read (``need`` bit masks from the peers' :meth:`reads`),
        so a well-partitioned graph sends just its boundary."""
        self.out_targets = targets
        need = np.ones(self.n_local, np.uint8)
        self.peer_stores = 0        # elements stored into peers per iteration
        for bit, peer in enumerate(targets[1:], start=1):
            used = peer.reads()[self.lo:self.hi]
            need[used] |= np.uint8(1 << bit)
            self.peer_stores += int(np.count_nonzero(used))
        if self.cuda:
            ptrs = [[t.contrib[par % len(t.contrib)].data.ptr for t in targets] for par in range(2)]
            with self.device.use():
                self.outs = [self.device.asarray(np.array(p, dtype=np.uint64)) for p in ptrs]
                self.need = self.device.asarray(need)
                # the persistent kernels: both parities in one array, and the vectors read
                self.outs_both = self.device.asarray(np.array(ptrs[0] + ptrs[1], dtype=np.uint64))
                self.contribs = self.device.asarray(np.array(
                    [c.data.ptr for c in self.contrib] * (3 - len(self.contrib)), dtype=np.uint64)[:2])
        else:
            self.outs = [[t.contrib[par % len(t.contrib)] for t in targets] for par in range(2)]
            self.need_idx = [None] + [np.flatnonzero(need & np.uint8(1 << bit))
                                      for bit in range(1, len(targets))]

    def set_copies(self, devs):
        """The copies that follow each iteration's kernel, per parity of the vector written:
        ``(peer's slice, own slice)`` for every peer this device does not store into (all of
        them without peer stores), made once so an iteration only issues them."""
        mine = [c[self.lo:self.hi] for c in self.contrib]
        self.copies = [[(p.contrib[par % len(p.contrib)][self.lo:self.hi], mine[par % len(mine)])
                        for p in devs if self.n_local and not any(p is x for x in self.out_targets)]
                       for par in range(2)]

    def alloc_stats(self, max_iterations: int):
        """The per-iteration ``[diff, mass]`` rows, allocated once per solver (peers keep
        pointers to them, see :meth:`set_check_group`) and cleared by :meth:`bsp_reset`."""
        self.stats = self.device.zeros((max_iterations, 2), np.float64)

    def set_check_group(self, devs):
        """The devices whose stats the stopping check adds up, in device order (the host adds
        them in the same order): device pointers for the CUDA kernels, arrays for NumPy."""
        if self.cuda:
            with self.device.use():
                self.stats_of = self.device.asarray(
                    np.array([d.stats.data.ptr for d in devs], dtype=np.uint64))
        else:
            self.stats_of = [d.stats for d in devs]

    def converged_before(self, t: int) -> bool:
        """NumPy form of ``bsp_converged`` (pr.cu): whether iteration ``t - 1`` met the stopping
        rule on all devices together; runs in stream order after every device's iteration
        ``t - 1`` (the stream waited for their events)."""
        if not self.device_check or t == 0:
            return False
        diff = mass = 0.0
        for st in self.stats_of:
            diff += st[t - 1, 0]
            mass += st[t - 1, 1]
        return bool(diff <= self.tol * mass)

    def bsp_reset(self, y0: float, contrib0, max_iterations: int):
        def reset():
            self.y.fill(y0)
            if not (self.cuda and self.fused):
                self.acc.fill(0)
            elif self.bins:
                self.hub_count.fill(0)
                self.task_next.fill(0)
            self.contrib[0][...] = contrib0
            self.stats.fill(0)
        if self.stats is None or self.stats.shape[0] != max_iterations:
            raise ValueError(f"bsp_reset for {max_iterations} iterations: alloc_stats sized "
                             f"{None if self.stats is None else self.stats.shape[0]}")
        if self.cuda and self.bins:     # per iteration: the next task to take
            self.task_next = self.device.empty(max_iterations, np.int32)
        self.stream.submit(reset)

    def bsp_step(self, t: int, base: float):
        """Iteration ``t``: pull from contrib[t % 2], write own slice of contrib[(t+1) % 2] (in
        place: both are contrib[0])."""
        src, outs = self.contrib[t % len(self.contrib)], self.outs[(t + 1) % 2]
        stats = self.stats[t]
        # the device-side check of iteration t - 1 (all devices' stats), or none
        check = (self.stats_of, np.int32(len(self.stats_of)),
                 np.int32(t - 1 if self.device_check and t > 0 else -1), np.float64(self.tol))
        if self.cuda and self.bins:
            nxt = self.task_next[t:t + 1]

            def launch():
                self.kernels["csc"](
                    (max(1, min(self.resident, -(-self.num_tasks * 32 // BINS_BLOCK))),), (BINS_BLOCK,),
                    (np.int32(self.num_tasks), self.task_row, self.task_info, self.in_indptr,
                     self.in_cols, src, np.float32(base), np.float32(self.damping), self.y,
                     self.inv_outdeg, outs, np.int32(len(self.out_targets)), self.need,
                     np.int32(self.lo), self.part, self.hub_count, np.int32(self.hub_degree),
                     np.int32(self.nhot), nxt, stats, *check),
                    shared_mem=self.nhot * 4)
        elif self.cuda and self.fused:
            def launch():
                if self.n_local:
                    self.kernels["csc"](
                        (max(1, min(self.resident, -(-self.n_local // BLOCK))),), (BLOCK,),
                        (np.int32(self.n_local), np.int32(self.lo), self.in_indptr, self.in_cols, src,
                         np.float32(base), np.float32(self.damping), self.y, self.inv_outdeg, outs,
                         np.int32(len(self.out_targets)), self.need, stats, *check,
                         np.int32(self.small_degree)))
        elif self.inplace:      # CPU: Gauss-Seidel by blocks of vertices, in order
            def launch():
                if self.converged_before(t):
                    return
                ip, nl, lo = self.in_indptr, self.n_local, self.lo
                bounds = np.linspace(0, nl, min(nl, 8) + 1).astype(np.int64)
                ynew = np.empty(nl, self.fdt)
                for a, b in zip(bounds[:-1], bounds[1:]):
                    ra, rb = int(ip[a]), int(ip[b])
                    acc = np.bincount(self.in_rows[ra:rb] - a, weights=src[self.in_cols[ra:rb]],
                                      minlength=b - a)
                    ynew[a:b] = base + self.damping * acc
                    src[lo + a:lo + b] = ynew[a:b] * self.inv_outdeg[a:b]
                stats[0] = np.abs(ynew - self.y).sum()
                stats[1] = ynew.sum()
                self.y[:] = ynew
        elif self.cuda:
            k = self.kernels

            def launch():
                if self.num_in:
                    k["pr_pull"](self._grid(self.num_in, waves=16), (BLOCK,),
                                 (self.in_rows, self.in_cols, np.int64(self.num_in), src, self.acc))
                if self.n_local:
                    k["pr_finalize"](self._grid(self.n_local), (BLOCK,),
                                     (np.int32(self.n_local), np.int32(self.lo), np.float32(base),
                                      np.float32(self.damping), self.acc, self.y, self.inv_outdeg,
                                      outs, np.int32(len(self.out_targets)), self.need, stats))
        else:
            def launch():
                if self.converged_before(t):
                    return
                acc = np.bincount(self.in_rows, weights=src[self.in_cols], minlength=self.n_local)
                ynew = base + self.damping * acc
                stats[0] = np.abs(ynew - self.y).sum()
                stats[1] = ynew.sum()
                self.y[:] = ynew
                c = ynew * self.inv_outdeg
                outs[0][self.lo:self.hi] = c
                for out, idx in zip(outs[1:], self.need_idx[1:]):
                    out[self.lo + idx] = c[idx]
        self.stream.submit(launch)

    def persistent_launch(self, t_end: int, base: float, gbar_ptr: int, gbase: int, k: int,
                          timeout_ns: int):
        """Queue iterations [0, t_end) as one cooperative launch (pr.cu ``bsp_persistent``);
        ``gbar_ptr``: device 0's barrier counter, standing at ``gbase``. A grid the device
        cannot hold at once is halved until it fits (the occupancy answer was optimistic)."""
        from apps.peer_barrier import launch_resident
        fn = self.kernels["persistent"]
        persist = (np.int32(0), np.int32(t_end), self.ctl, np.uint64(gbar_ptr), np.uint64(gbase),
                   np.int32(k), np.int64(timeout_ns))
        check = (self.stats_of, np.int32(len(self.stats_of)), np.float64(self.tol))
        if self.bins:
            args = (np.int32(self.num_tasks), self.task_row, self.task_info, self.in_indptr,
                    self.in_cols, self.contribs, np.float32(base), np.float32(self.damping), self.y,
                    self.inv_outdeg, self.outs_both, np.int32(len(self.out_targets)), self.need,
                    np.int32(self.lo), self.part, self.hub_count, np.int32(self.hub_degree),
                    np.int32(self.nhot), self.task_next, self.stats, *check, *persist)
            block, shared = BINS_BLOCK, self.nhot * 4
        else:
            args = (np.int32(self.n_local), np.int32(self.lo), self.in_indptr, self.in_cols,
                    self.contribs, np.float32(base), np.float32(self.damping), self.y,
                    self.inv_outdeg, self.outs_both, np.int32(len(self.out_targets)), self.need,
                    self.stats, *check, np.int32(self.small_degree), *persist)
            block, shared = BLOCK, 0

        def launch():
            self.persistent_blocks = launch_resident(fn, self.persistent_blocks, block, args,
                                                     shared_mem=shared, name=self.device.name)
        self.stream.submit(launch)

    def persistent_result(self):
        """This device's control words after its persistent launch (waits for it)."""
        return _sync_host(self.device, self.ctl, spin=True)

    def bsp_stats(self, t0: int, t1: int):
        return _sync_host(self.device, self.stats[t0:t1], spin=True)

    def bsp_values(self):
        return self.device.to_host(self.y).astype(np.float64)

    # asynchronous push --------------------------------------------------------------------------
    def push_reset(self, r0: float):
        def reset():
            self.rank.fill(0)
            self.residual.fill(r0)
            self.remote_acc.fill(0)
        self.stream.submit(reset)

    def active(self, eps: float) -> int:
        """How many owned vertices have a residual above ``eps`` (synchronises)."""
        xp = self.device.xp
        count = _call(self.stream, lambda: xp.count_nonzero(self.residual > self.fdt(eps)))
        return int(_sync_host(self.device, count) if self.cuda else count)

    def push_sweeps(self, eps: float, sweeps: int, remote: bool):
        """``sweeps`` push sweeps over the owned vertices; returns (vertices, arcs) pushed."""
        if self.cuda:
            k = self.kernels

            def launch():
                self.counters.fill(0)
                for _ in range(sweeps):
                    k["pr_push"](self._grid(self.n_local), (BLOCK,),
                                 (np.int32(self.n_local), np.int32(self.lo), self.out_indptr,
                                  self.out_indices, np.float32(self.damping), np.float32(eps),
                                  self.residual, self.rank, self.remote_acc, self.counters))
            if self.n_local:
                self.stream.submit(launch)
                c = _sync_host(self.device, self.counters)
                return int(c[0]), int(c[1])
            return 0, 0
        return _call(self.stream, self._push_numpy, eps, sweeps, remote)

    def _push_numpy(self, eps, sweeps, remote):
        ip, ix, d, lo, nl = self.out_indptr, self.out_indices, self.damping, self.lo, self.n_local
        pushed = arcs = 0
        for _ in range(sweeps):
            act = np.flatnonzero(self.residual > eps)
            if not act.size:
                break
            r = self.residual[act]
            self.residual[act] = 0
            self.rank[act] += r
            starts, deg = ip[act], ip[act + 1] - ip[act]
            pushed += act.size
            total = int(deg.sum())
            if not total:
                continue
            arcs += total
            owner = np.repeat(np.arange(act.size), deg)
            eids = starts[owner] + (np.arange(total) - np.repeat(np.cumsum(deg) - deg, deg))
            targets = ix[eids].astype(np.int64)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(deg > 0, d * r / np.maximum(deg, 1), 0.0)
            vals = share[owner]
            lt = targets - lo
            local = (lt >= 0) & (lt < nl)
            self.residual += np.bincount(lt[local], weights=vals[local], minlength=nl)
            if remote and not local.all():
                np.add.at(self.remote_acc, targets[~local], vals[~local])
        return pushed, arcs

    def pack(self, ranges):
        """Move the remote accumulator's nonzeros into one item array per destination range
        (``None`` for an empty one or for ``None`` ranges) and clear them."""
        from groute.worklist import pack as pack_items
        if self.cuda:
            xp = self.device.xp
            with self.device.use():
                if self.out_items is None:
                    self.out_items = [None if r is None else xp.empty(max(r[1] - r[0], 1), np.int64)
                                      for r in ranges]
                    self.pack_counts = xp.empty(len(ranges), np.uint64)  # cleared in stream order

                def launch():
                    self.pack_counts.fill(0)
                    for j, r in enumerate(ranges):
                        if r is not None and r[1] > r[0]:
                            self.kernels["pr_pack"](self._grid(r[1] - r[0]), (BLOCK,),
                                                    (self.remote_acc, np.int32(r[0]), np.int32(r[1]),
                                                     self.out_items[j], self.pack_counts[j:j + 1]))
                self.stream.submit(launch)
                counts = _sync_host(self.device, self.pack_counts)
            return [None if r is None or not counts[j] else self.out_items[j][:int(counts[j])]
                    for j, r in enumerate(ranges)]

        def pack_numpy():
            out = []
            for r in ranges:
                if r is None:
                    out.append(None)
                    continue
                seg = self.remote_acc[r[0]:r[1]]
                nz = np.flatnonzero(seg)
                if not nz.size:
                    out.append(None)
                    continue
                vals = seg[nz].astype(np.float32)
                seg[nz] = 0
                out.append(pack_items((nz + r[0]).astype(np.int64), vals))
            return out
        return _call(self.stream, pack_numpy)

    def apply(self, item_arrays):
        """Add received (vertex, value) items into the residuals."""
        if self.cuda:
            def launch():
                for items in item_arrays:
                    m = int(items.shape[0])
                    if m:
                        self.kernels["pr_apply"](self._grid(m), (BLOCK,),
                                                 (items, np.int64(m), np.int32(self.lo), self.residual))
            self.stream.submit(launch)
            return

        def apply_numpy():
            from groute.worklist import unpack
            for items in item_arrays:
                v, vals = unpack(items, "float")
                np.add.at(self.residual, v.astype(np.int64) - self.lo, vals.astype(np.float64))
        self.stream.submit(apply_numpy)

    def push_values(self):
        return self.device.to_host(self.rank) + self.device.to_host(self.residual).astype(np.float64)


class _PushWorker:
    """The asynchronous PageRank worker the distributed worklist drives (one per device).

    Work = owned vertices whose residual exceeds ``eps``; an ``advance`` runs ``sweeps`` push
    sweeps and returns the combined remote contributions as per-destination item arrays.
    """

    def __init__(self, dev: _DevicePR, index: int, offsets, sweeps: int):
        from groute.worklist import LocalWork
        self.LocalWork = LocalWork
        self.dev, self.index, self.sweeps = dev, index, sweeps
        k = len(offsets) - 1
        self.ranges = [None if j == index else (int(offsets[j]), int(offsets[j + 1])) for j in range(k)]
        self.remote = k > 1
        self.eps = 0.0
        self.r0 = 0.0
        self.work = LocalWork()
        self.pushed = self.arcs = self.advances = self.items_out = 0

    def configure(self, eps, r0):
        # the kernels compare in float32: use the float32 value everywhere so that "active" agrees
        self.eps = float(self.dev.fdt(eps))
        self.r0 = r0

    def start(self, threshold):
        self.dev.push_reset(self.r0)
        self.pushed = self.arcs = self.advances = self.items_out = 0
        self.work = self.LocalWork(near=self.dev.active(self.eps))
        return self.work

    def advance(self, threshold, *, max_rounds=None, self_advance=False):
        sweeps = self.sweeps if max_rounds is None else max(1, min(self.sweeps, int(max_rounds)))
        pushed, arcs = self.dev.push_sweeps(self.eps, sweeps, self.remote)
        self.pushed += pushed
        self.arcs += arcs
        self.advances += 1
        outbox = self.dev.pack(self.ranges) if self.remote else [None]
        self.items_out += sum(int(a.shape[0]) for a in outbox if a is not None)
        self.work = self.LocalWork(near=self.dev.active(self.eps))
        return self.work, outbox

    def absorb(self, item_arrays, threshold):
        self.dev.apply(item_arrays)
        self.work = self.LocalWork(near=self.dev.active(self.eps))
        return self.work

    def split(self, threshold):
        return self.work


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class PageRank(Solver):
    """PageRank of ``graph`` on the devices of a context; partition and upload once, run many times.

    ``mode``: ``"auto"`` (default: ``"bsp"``, see the module docstring), ``"bsp"`` or ``"async"``.
    ``tol``: async: residual threshold ``tol (1-d) / n`` per vertex (L1 error <= tol of the
    mass); BSP: stop when the L1 change of an iteration is <= tol (of the mass).
    ``sweeps``: push sweeps per worklist round (async; default :func:`default_sweeps`); ``check_every``: iterations between
    convergence checks by the host (BSP; default 8 with ``device_check``, else 4);
    ``peer_writes``: BSP stores each device's slice
    straight into the peers' vectors from the kernel (default: when every pair has peer access)
    instead of copying.
    BSP kernel options (CUDA): ``bsp_kernel="auto"`` (default: :func:`choose_bsp_kernel`),
    ``"csc"`` (one fused pull kernel per iteration over the in-arcs as CSC), ``"bins"`` (a
    fused pull over the vertices relabelled by in-degree, for skewed degrees; the relabelling
    is internal, results come back in the graph's order) or ``"coo"`` (the edge-balanced COO
    pull + finalize pair). On several devices ``"bins"`` does not use ``partition``: the
    degree order is cut into contiguous ranges of about equal arcs (:func:`degree_split`;
    ``stats["layout"] == "degree-split"``, ``stats["partition"] is None``), each device pulls
    its range from the whole contribution vector and stores the new values each peer reads
    into that peer's copy (or copies its slice); the hub prefix the kernel keeps in shared
    memory is then the global hubs on every device. ``small_degree``: in-degree up to which one thread
    of the csc kernel sums a vertex's in-arcs (bigger: the whole warp); ``vertices_per_lane``
    (1, 2 = default, 4): vertices a lane of the csc kernel handles at once (independent load
    chains); ``task_arcs``, ``hub_degree``, ``lane_arcs`` (powers of two): the bins kernel's
    arcs per task, the in-degree from which a vertex's arcs are cut into chunks of at most
    that many arcs (one warp each), and the arcs per lane that set how many lanes share a
    vertex (:func:`bins_tasks`); ``waves``: the fused grids in multiples of the blocks
    resident at once; ``device_check`` (default True; "csc" and "bins", on any number of
    devices and both backends): iteration t of each device's kernel first adds up every
    device's stats of iteration t - 1 (peer reads: its stream already waited for all of them)
    and returns at once if the stopping rule held, so the host queues ``check_every``
    iterations between reads and the run stops exactly at ``converged_at`` (same iterations
    and answer as host checks after every iteration);
    ``inplace=True`` (one device only; ignored for several; an error with ``"bins"``, whose
    sweeps are Jacobi): Gauss-Seidel sweeps that update
    the contribution vector in place (fewer sweeps on slowly mixing graphs such as grids, more
    on kron-like ones; on a GPU the result depends on thread timing in its last digits, so runs
    are not bit-identical).
    ``persistent`` (BSP, "csc" and "bins" on CUDA devices with peer access and native atomics;
    True, False, "auto" = default): one cooperative launch per device per run, whose iterations
    meet at a cross-device barrier that also takes the stopping decision (pr.cu
    ``bsp_persistent``), instead of one launch per device per iteration with events between
    the devices; same iterations and answer as the per-iteration kernels. A device that waits
    longer than ``GROUTE_PEER_BARRIER_TIMEOUT`` seconds at the barrier makes the run raise.
    "auto" turns it on only where :func:`choose_persistent` allows (``stats["persistent"]``,
    and ``stats["persistent_reason"]`` when it is off).
    """

    def __init__(self, graph, *, ctx=None, backend="auto", devices=None, partition="metis",
                 mode="auto", damping=0.85, tol=1e-6, seed=0, max_iterations=1000,
                 sweeps=None, check_every=None, peer_writes=None, bsp_kernel="auto",
                 small_degree=8, inplace=False, device_check=True, vertices_per_lane=2, waves=1,
                 task_arcs=1024, hub_degree=4096, lane_arcs=4, persistent="auto"):
        if mode not in MODES + ("auto",):
            raise ValueError(f"mode must be one of {', '.join(MODES + ('auto',))}; got {mode!r}")
        if mode == "auto":
            mode = AUTO_MODE
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}; got {partition!r}")
        if not 0.0 < float(damping) < 1.0:
            raise ValueError(f"damping must be in (0, 1), got {damping!r}")
        if not float(tol) > 0.0:
            raise ValueError(f"tol must be > 0, got {tol!r}")
        if int(max_iterations) < 1 or (check_every is not None and int(check_every) < 1):
            raise ValueError("max_iterations and check_every must be >= 1")
        if bsp_kernel not in BSP_KERNELS:
            raise ValueError(f"bsp_kernel must be one of {', '.join(BSP_KERNELS)}; got {bsp_kernel!r}")
        if int(vertices_per_lane) not in (1, 2, 4):
            raise ValueError(f"vertices_per_lane must be 1, 2 or 4; got {vertices_per_lane!r}")
        for name, value in (("task_arcs", task_arcs), ("hub_degree", hub_degree),
                            ("lane_arcs", lane_arcs)):
            v = int(value)
            if v < 1 or v & (v - 1) or v > 1 << 20:
                raise ValueError(f"{name} must be a power of two in [1, 2^20]; got {value!r}")
        self.graph = graph
        self.mode, self.damping, self.tol = mode, float(damping), float(tol)
        self.max_iterations = int(max_iterations)
        self.partition_method = partition
        n = self.n = int(graph.num_vertices)
        self._open_context(ctx, devices=devices, backend=backend)
        self._worklist = None
        try:
            k = self.k = len(self.ctx.devices)
            if n and k > n:
                raise ValueError(f"{k} devices for a graph of {n} vertices: use --devices {n} or fewer")
            t0 = time.perf_counter()
            if mode == "bsp" and bsp_kernel == "bins" and inplace:
                raise ValueError("bsp_kernel='bins' runs Jacobi sweeps: use 'auto' or 'csc' "
                                 "with inplace=True")
            if mode == "bsp" and bsp_kernel == "auto":
                bsp_kernel = choose_bsp_kernel(graph, k, inplace)
            self.bsp_kernel = bsp_kernel
            self.persistent, self.persistent_reason = choose_persistent(
                persistent, self.ctx, mode, bsp_kernel, bool(inplace) and k == 1, bool(device_check))
            self._order = None      # "bins": new vertex id -> the graph's id
            self.partition = None
            transposed = None
            if mode == "bsp" and bsp_kernel == "bins":
                # renumbered by in-degree (cached on the graph), cut by cost: no partitioner
                layout = bins_layout(graph)
                self._order = layout.order
                offsets = degree_split(layout.in_indptr, k)
                self.layout = "degree order" if k == 1 else "degree-split"
                shards = bins_shards(graph, layout, offsets, self.ctx.devices)
            else:
                if k == 1:
                    offsets = np.array([0, n], np.int64)
                    indptr, indices = graph.indptr, graph.indices
                    self.layout = None
                    if mode == "bsp":           # kept on the graph: later solvers skip the work
                        transposed = kept_on(graph, "_pr_in_arcs",
                                             lambda: transpose_arcs(indptr, indices))
                else:
                    from groute.graph import partition_graph
                    self.partition = partition_graph(graph, k, method=partition, seed=seed)
                    offsets = np.asarray(self.partition.offsets, np.int64)
                    indptr, indices = self.partition.graph.indptr, self.partition.graph.indices
                    self.layout = f"{partition} partition"
                shards = make_shards(np.asarray(indptr), np.asarray(indices), offsets,
                                     with_in_arcs=mode == "bsp", transposed=transposed)
            self.offsets = offsets
            opts = {"kernel": bsp_kernel, "inplace": inplace, "device_check": device_check,
                    "small_degree": small_degree, "tol": self.tol,
                    "vertices_per_lane": int(vertices_per_lane), "waves": int(waves),
                    "task_arcs": int(task_arcs), "hub_degree": int(hub_degree),
                    "lane_arcs": int(lane_arcs), "persistent": self.persistent}
            self.devs = [_DevicePR(d, s, n, mode, self.damping, k, opts)
                         for d, s in zip(self.ctx.devices, shards)]
            if mode == "bsp":
                inv = np.concatenate([s.inv_outdeg for s in shards]) if n else np.zeros(0)
                self._contrib0 = [d.device.asarray((inv / max(n, 1)).astype(d.fdt)) for d in self.devs]
                peers = self.ctx.peer_matrix()
                can = bool(np.all(peers | np.eye(k, dtype=bool))) and k <= 8
                self.peer_writes = can if peer_writes is None else bool(peer_writes) and can
                for i, dev in enumerate(self.devs):
                    others = [p for j, p in enumerate(self.devs) if j != i]
                    dev.set_outputs([dev] + (others if self.peer_writes else []))
                for dev in self.devs:
                    dev.set_copies(self.devs)
                    dev.alloc_stats(self.max_iterations)
                for dev in self.devs:
                    dev.set_check_group(self.devs)
                    if not can:     # the device-side check reads every peer's stats
                        dev.device_check = False
            if self.persistent:     # device 0's cross-device barrier counter, where it stands
                from apps.peer_barrier import CrossDeviceBarrier
                with self.devs[0].device.use():
                    self._barrier = CrossDeviceBarrier(self.ctx.devices,
                                                       self.devs[0].device.zeros(1, np.uint64))
            if check_every is None:
                check_every = 8 if getattr(self.devs[0], "device_check", False) else 4
            self.check_every = int(check_every)
            if mode == "async":
                self.sweeps = int(sweeps) if sweeps else default_sweeps(graph, k, self.ctx.backend)
                self.workers = [_PushWorker(d, i, offsets, self.sweeps) for i, d in enumerate(self.devs)]
                if k > 1:
                    from groute.worklist import DistributedWorklist
                    self._worklist = DistributedWorklist(
                        self.ctx, packet_size=max(1024, min(1 << 20, n)))
            if self.ctx.backend == "cuda":  # uploads ran on the legacy stream: let them land
                for dev in self.ctx.devices:
                    with dev.use():
                        dev.xp.cuda.runtime.deviceSynchronize()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    # running ------------------------------------------------------------------------------------
    def run(self) -> AppResult:
        if self.n == 0:
            return AppResult(np.zeros(0), 0.0, {"mode": self.mode, "iterations": 0})
        with DeviceTimer(self.ctx) as timer:
            stats = self._run_bsp() if self.mode == "bsp" else self._run_async()
        if self.mode == "bsp":
            values = np.concatenate([d.bsp_values() for d in self.devs])
        else:
            values = np.concatenate([d.push_values() for d in self.devs])
        if self._order is not None:
            values = _unpermute(values, self._order)
        total = values.sum()
        values = values / total if total > 0 else np.full(self.n, 1.0 / self.n)
        if self.partition is not None:
            values = np.asarray(self.partition.to_original(values), dtype=np.float64)
        stats.update(devices=[d.device.name for d in self.devs], mode=self.mode,
                     partition=self.partition_method if self.partition is not None else None,
                     layout=self.layout,
                     vertices_per_device=[d.n_local for d in self.devs],
                     damping=self.damping, tol=self.tol)
        return AppResult(values, timer.seconds, stats)

    def _run_bsp(self) -> dict:
        n, d, k = self.n, self.damping, self.k
        base = (1.0 - d) / n
        for dev, c0 in zip(self.devs, self._contrib0):
            dev.bsp_reset(1.0 / n, c0, self.max_iterations)
        t = 0
        done_events = [None] * k
        converged_at = None
        history = []
        if self.persistent:
            t = self._run_persistent(base)
            converged_at = self._check_stats(0, t, history, converged_at)
            if converged_at not in (t, None) or (converged_at is None and t < self.max_iterations):
                raise RuntimeError(f"persistent PageRank: the kernels stopped after {t} iterations "
                                   f"but the host finds the stopping rule first met at "
                                   f"{converged_at} (stats of every device, device order)")
        while t < self.max_iterations and converged_at is None:
            batch_end = min(t + self.check_every, self.max_iterations)
            for it in range(t, batch_end):
                self._bsp_iteration(it, base, done_events)
            converged_at = self._check_stats(t, batch_end, history, converged_at)
            t = batch_end
        if converged_at is None:
            log.warning("PageRank (bsp) did not converge to tol %g in %d iterations (last change %g)",
                        self.tol, t, history[-1] if history else float("nan"))
        elif self.devs[0].device_check:     # the kernels skipped the iterations after convergence
            t = converged_at
            history = history[:t]
        if self.peer_writes:
            per_iteration = sum(dev.peer_stores * np.dtype(dev.fdt).itemsize for dev in self.devs)
        else:
            per_iteration = sum(dev.n_local * np.dtype(dev.fdt).itemsize for dev in self.devs) * (k - 1)
        dev0 = self.devs[0]
        kernel = ("bins" if dev0.bins else f"csc k{dev0.lanes_k}" if dev0.fused else "coo") \
            if dev0.cuda else "numpy"
        return {"iterations": t, "converged_at": converged_at, "converged": converged_at is not None,
                "kernel": kernel, "bsp_kernel": self.bsp_kernel, "inplace": dev0.inplace,
                "device_check": dev0.device_check, "check_every": self.check_every,
                "persistent": self.persistent, "persistent_reason": self.persistent_reason,
                "exchange": None if k == 1 else ("peer stores" if self.peer_writes else "peer copies"),
                "l1_change": history[-1] if history else None,
                "arcs_per_device": [dev.num_in for dev in self.devs],
                "bytes_sent": int(t * per_iteration) if k > 1 else 0}

    def _check_stats(self, t0, t1, history, converged_at):
        """Iterations [t0, t1) by every device's stats rows (added in device order, as the
        kernels add them): their relative changes appended to ``history``; returns the first
        iteration count that met the stopping rule (``converged_at`` if already known)."""
        if t1 <= t0:
            return converged_at
        parts = sum(dev.bsp_stats(t0, t1) for dev in self.devs)
        for it in range(t0, t1):
            diff, mass = float(parts[it - t0, 0]), float(parts[it - t0, 1])
            history.append(diff / mass if mass > 0 else 0.0)
            if converged_at is None and diff <= self.tol * mass:
                converged_at = it + 1
        return converged_at

    def _run_persistent(self, base) -> int:
        """One persistent launch per device for the whole run (pr.cu ``bsp_persistent``); returns
        the iterations run. Raises when a device gave up at the cross-device barrier (a peer
        stopped or never started) or the devices disagree; the barrier counter is then reset
        (after every device has finished), so the next run starts clean."""
        from apps import peer_barrier
        timeout_s = peer_barrier.BARRIER_TIMEOUT_S          # GROUTE_PEER_BARRIER_TIMEOUT
        bar = self._barrier
        launched, failure = bar.launch_each(
            lambda i, _: self.devs[i].persistent_launch(self.max_iterations, base, bar.ptr, bar.base,
                                                        self.k, int(timeout_s * 1e9)))
        ctl = [self.devs[i].persistent_result() for i in launched]
        aborted = [self.devs[i].device.name for i, c in zip(launched, ctl) if c[P_ABORT] == 1]
        iterations = {int(c[P_ITERS]) for c in ctl}
        bar.settle([c[P_CROSS] for c in ctl],
                   ok=failure is None and not aborted and len(iterations) == 1)
        if failure is not None:
            raise failure
        if aborted:
            raise RuntimeError(
                f"persistent PageRank: {', '.join(aborted)} waited more than {timeout_s:g} s at a "
                f"cross-device barrier (another device stopped or never started); set "
                f"GROUTE_PEER_BARRIER_TIMEOUT or use persistent=False")
        if len(iterations) != 1:
            raise RuntimeError(f"persistent PageRank: the devices ran different iteration counts "
                               f"{[int(c[P_ITERS]) for c in ctl]}")
        return iterations.pop()

    def _bsp_iteration(self, t, base, done_events):
        devs = self.devs
        for i, dev in enumerate(devs):
            for j, ev in enumerate(done_events):
                if j != i and ev is not None:
                    dev.stream.wait_event(ev)   # peers' slices of contrib[t % 2] have landed
        for i, dev in enumerate(devs):
            dev.bsp_step(t, base)
        if len(devs) > 1:
            par = (t + 1) % 2
            for i, dev in enumerate(devs):
                for dst, src in dev.copies[par]:
                    dev.stream.copy(dst, src)
                done_events[i] = dev.stream.record()

    def _run_async(self) -> dict:
        n, d = self.n, self.damping
        eps = self.tol * (1.0 - d) / n
        for w in self.workers:
            w.configure(eps, (1.0 - d) / n)
        if self._worklist is None:
            w = self.workers[0]
            w.start(None)
            rounds = 0
            while w.work.near:
                if rounds * self.sweeps >= self.max_iterations * 10:
                    raise RuntimeError(f"PageRank (async) did not finish in {rounds} rounds "
                                       f"of {self.sweeps} sweeps")
                self.ctx.check()
                w.advance(None)
                rounds += 1
            wl = {"rounds": [rounds], "items_sent": {}, "bytes_moved": 0}
        else:
            wl = self._worklist.run(self.workers, mode="async")
        return {"rounds": wl["rounds"], "sweeps_per_round": self.sweeps,
                "vertices_pushed_per_device": [w.pushed for w in self.workers],
                "arcs_pushed_per_device": [w.arcs for w in self.workers],
                "items_sent": wl.get("items_sent", {}), "bytes_sent": wl.get("bytes_moved", 0),
                "eps": eps}

    def _release(self):
        if self._worklist is not None:
            self._worklist.close()
            self._worklist = None


def _unpermute(values, order):
    out = np.empty_like(values)
    out[order] = values
    return out


def pagerank(graph, **kwargs) -> AppResult:
    """One-shot :class:`PageRank`: build, run once, close."""
    with PageRank(graph, **kwargs) as solver:
        return solver.run()


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------
def register(subparsers, common):
    from apps.app_cli import add_graph_options
    p = subparsers.add_parser("pr", parents=[common], help="PageRank across devices (async push or BSP)")
    add_graph_options(p)
    p.add_argument("--mode", choices=MODES + ("auto",), default="auto",
                   help="auto (default: bsp, the faster everywhere measured), bsp power "
                        "iteration, or async residual push (the Groute paper's variant)")
    p.add_argument("--partition", choices=PARTITIONS, default="metis",
                   help="vertex partitioner (default metis; bsp with the bins kernel cuts its "
                        "degree order by arcs instead)")
    p.add_argument("--damping", type=float, default=0.85, help="damping factor (default 0.85)")
    p.add_argument("--tol", type=float, default=1e-6,
                   help="async: residual bound tol*(1-d)/n per vertex; bsp: L1 change (default 1e-6)")
    p.add_argument("--sweeps", type=int, default=None, help="async: push sweeps per worklist round (default: 2 on CPU devices; on GPUs 8, "
                        "or 1 on several for power-law graphs)")
    p.add_argument("--bsp-kernel", choices=BSP_KERNELS, default="auto",
                   help="bsp on CUDA: fused CSC pull, degree-binned pull, COO pull pair, or "
                        "auto by in-degree (default)")
    p.add_argument("--inplace", action="store_true",
                   help="bsp on one device: Gauss-Seidel sweeps in place (fewer iterations)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from apps.app_cli import load, print_stats, run_solver, write_output
    g = load(args)
    runs = run_solver(args, lambda ctx: PageRank(
        g, ctx=ctx, partition=args.partition, mode=args.mode, damping=args.damping, tol=args.tol,
        seed=args.seed, sweeps=args.sweeps, inplace=getattr(args, "inplace", False),
        bsp_kernel=getattr(args, "bsp_kernel", "auto")))
    res = runs.result
    layout = res.stats.get("layout")
    print(f"pagerank {args.mode} on {runs.devices} x {runs.backend}"
          f"{f', {layout}' if runs.devices > 1 and layout else ''}: set up in "
          f"{runs.setup_s:.2f} s")
    print(runs.time_line())
    print_stats(res.stats, skip=("devices", "damping", "tol"))
    ok = True
    if args.verify:
        from groute.graph import reference
        ref = reference.pagerank(g, damping=args.damping, tol=min(args.tol, 1e-6) * 1e-2)
        l1, linf = reference.pagerank_error(res.values, ref)
        ok = l1 <= 1e-4
        print(f"  verify: L1 {l1:.3e}, Linf {linf:.3e} vs reference power iteration "
              f"-> {'OK (L1 <= 1e-4)' if ok else 'FAILED (L1 > 1e-4)'}")
    if args.output:
        write_output(g, res.values, args.output)
    return 0 if ok else 1
