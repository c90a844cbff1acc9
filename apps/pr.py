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

``mode="auto"`` (default) is the ``mode`` rule of :mod:`groute.apps.auto_rules` (``"bsp"``);
``"async"`` is the variant the Groute paper evaluates, kept for comparison.

This module holds the rules (which kernel, how many sweeps, whether persistent), the solver and
the CLI. The host-side layout of the in-arcs (shards, the ``"bins"`` degree order, its cut and
task list) is :mod:`groute.apps.pr_layout`; each device's arrays and operations, the only
backend-specific code, are :mod:`groute.apps.pr_device` (CUDA kernels in ``pr.cu``; the CPU backend
runs vectorised NumPy on the devices' streams).
"""
from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np

from groute.apps.auto_rules import PR_RULES, said
from groute.results import AppResult, complete_stats
from groute.solver import DeviceTimer, Solver, input_graph
from groute.apps.memory import pagerank_bytes
from groute.apps.pr_device import MAX_OUTPUTS, P_ABORT, P_CROSS, P_ITERS, DevicePR, PushWorker
from groute.apps.pr_layout import (bins_layout, bins_shards, degree_split, in_degrees, make_shards,
                            transpose_arcs)
from groute.graph.csr import kept_on
from groute.tuning import BSP_KERNELS, PageRankTuning

log = logging.getLogger(__name__)
MODES = ("async", "bsp")
#: in-degree above which a vertex counts as big for choose_bsp_kernel
HEAVY_DEGREE = 32
#: below this many arcs a graph is small for the ``bsp_kernel`` rule (``small_with_hubs``)
SMALL_ARCS = 1 << 22
PARTITIONS = ("metis", "contiguous", "random")
#: the keys of a PageRank result's ``stats``, in both modes (None where a key does not apply to
#: the mode or kernel that ran). Both: mode, devices, partition (None when none ran), layout,
#: vertices_per_device, damping, tol, bytes_sent between devices. BSP: iterations,
#: converged_at, converged, kernel (as run), bsp_kernel (as chosen), inplace, device_check,
#: check_every, persistent and persistent_reason (why it is off), exchange (peer stores or
#: copies; None on one device), l1_change (the last iteration's), arcs_per_device,
#: iteration_trace (persistent runs with ``PageRankTuning.trace``). Async: rounds,
#: sweeps_per_round, vertices_pushed_per_device, arcs_pushed_per_device, items_sent, eps.
STATS_KEYS = ("mode", "devices", "partition", "layout", "vertices_per_device", "damping", "tol",
              "bytes_sent", "iterations", "converged_at", "converged", "kernel", "bsp_kernel",
              "inplace", "device_check", "check_every", "persistent", "persistent_reason",
              "exchange", "l1_change", "arcs_per_device", "iteration_trace", "rounds",
              "sweeps_per_round", "vertices_pushed_per_device", "arcs_pushed_per_device",
              "items_sent", "eps")


def choose_bsp_kernel(graph, k: int, inplace: bool = False) -> str:
    """The BSP kernel ``bsp_kernel="auto"`` picks: the ``bsp_kernel`` rule of
    :mod:`groute.apps.auto_rules` (the CPU backend runs NumPy whatever the kernel, but follows
    the ``"bins"`` layout when it is picked; ``inplace`` counts on one device only)."""
    return PR_RULES["bsp_kernel"].decide({
        "one_device": lambda: k == 1, "inplace": lambda: bool(inplace),
        "heavy_in_arcs": lambda: heavy_in_arcs(graph),
        "small_with_hubs": lambda: small_with_hubs(graph)}).choice


def small_with_hubs(graph) -> bool:
    """Whether ``graph`` has fewer than :data:`SMALL_ARCS` arcs and some vertex of in-degree >
    :data:`HEAVY_DEGREE`: a sweep short enough that its longest in-row, not the bandwidth,
    sets its time."""
    m = int(graph.num_edges)
    if m == 0 or m >= SMALL_ARCS:
        return False
    return int(in_degrees(graph).max()) > HEAVY_DEGREE


def heavy_in_arcs(graph) -> bool:
    """Whether most arcs enter vertices of in-degree > HEAVY_DEGREE (power-law graphs)."""
    m = int(graph.num_edges)
    if m == 0:
        return False
    indeg = in_degrees(graph)
    return int(indeg[indeg > HEAVY_DEGREE].sum()) * 2 > m


def default_sweeps(graph, k: int, backend: str) -> int:
    """Async push sweeps per worklist round when ``sweeps`` is not given: the ``sweeps`` rule
    of :mod:`groute.apps.auto_rules`."""
    return PR_RULES["sweeps"].decide({
        "cuda": lambda: backend == "cuda", "one_device": lambda: k == 1,
        "heavy_in_arcs": lambda: heavy_in_arcs(graph)}).choice


def persistent_unavailable(ctx, mode: str, kernel: str, inplace: bool, device_check: bool,
                           peer_writes=None) -> str | None:
    """Why the persistent BSP kernels cannot run with these options on ``ctx`` (None when they
    can): they are the fused CUDA kernels ("csc", "bins") in Jacobi form, checking the stopping
    rule on the device and storing the values the peers read into the peers' vectors, on
    devices that reach each other's memory with native atomics (the cross-device barrier of
    :mod:`groute.engines.peer_barrier`)."""
    if mode != "bsp":
        return f"it runs mode='bsp' (got mode={mode!r})"
    from groute.engines.peer_barrier import unavailable
    why = unavailable(ctx)
    if why is not None:
        return why
    if kernel not in ("csc", "bins"):
        return f"bsp_kernel={kernel!r} has no persistent form (use 'csc' or 'bins')"
    if inplace:
        return "inplace=True (Gauss-Seidel) has no persistent form"
    if not device_check:
        return "it checks the stopping rule on the device: device_check=False contradicts it"
    if peer_writes is False and len(ctx.devices) > 1:
        return ("peer_writes=False (slices copied by the host between iterations) has no "
                "persistent form: its kernels store into the peers")
    return None


def choose_persistent(requested, ctx, mode: str, kernel: str, inplace: bool,
                      device_check: bool, peer_writes=None) -> tuple[bool, str | None]:
    """``PageRankTuning.persistent`` resolved (True, False or ``"auto"``): (on, why not).
    ``True`` where it cannot run is a ValueError naming the reason; ``"auto"`` follows the
    ``persistent`` rule of :mod:`groute.apps.auto_rules`."""
    if requested is False:
        return False, "persistent=False"
    why = persistent_unavailable(ctx, mode, kernel, inplace, device_check, peer_writes)
    if requested is True:
        if why is not None:
            raise ValueError(f"persistent=True cannot run here: {why}")
        return True, None
    case = PR_RULES["persistent"].decide({"persistent_can_run": lambda: why is None,
                                          "one_device": lambda: len(ctx.devices) == 1})
    if case.choice:
        return True, None
    if why is not None:
        return False, why
    return False, f"auto: off on {said(case.when)} ({case.why}); opt in with persistent=True"


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class PageRank(Solver):
    """PageRank of ``graph`` on the devices of a context; partition and upload once, run many times.

    ``mode``: ``"auto"`` (default: ``"bsp"``, see the module docstring), ``"bsp"`` or ``"async"``.
    ``damping``: the damping factor d. ``tol``: async: residual threshold ``tol (1-d) / n`` per
    vertex (L1 error <= tol of the mass); BSP: stop when the L1 change of an iteration is <= tol
    (of the mass). ``max_iterations``: BSP's bound on iterations (async on one device: on
    sweeps, ten times it). ``partition`` and ``seed``: how vertices are split over several devices.
    ``run`` returns the stats keys of :data:`STATS_KEYS` in both modes. ``personalization``:
    personalized PageRank, the teleport distribution (a dict keyed by the graph's ids, missing
    ids 0, or an array by position; normalised; :func:`teleport_vector`): the random surfer
    restarts, and dangling vertices' mass goes, in proportion to it (NetworkX's
    ``personalization`` with its default ``dangling``). None: uniform.

    ``tuning``: a :class:`~groute.tuning.PageRankTuning` (None:
    ``PageRankTuning.from_environment()``); its fields change how fast the answer comes:

    * ``sweeps``: push sweeps per worklist round (async; default :func:`default_sweeps`);
      ``check_every``: iterations between convergence checks by the host (BSP; default 8 with
      ``device_check``, else 4); ``peer_writes``: BSP stores each device's slice straight into
      the peers' vectors from the kernel (default: when every pair has peer access) instead of
      copying.
    * ``bsp_kernel`` (CUDA): ``"auto"`` (default: :func:`choose_bsp_kernel`), ``"csc"`` (one
      fused pull kernel per iteration over the in-arcs as CSC), ``"bins"`` (a fused pull over
      the vertices relabelled by in-degree, for skewed degrees; the relabelling is internal,
      results come back in the graph's order) or ``"coo"`` (the edge-balanced COO pull +
      finalize pair). On several devices ``"bins"`` does not use ``partition``: the degree
      order is cut into contiguous ranges of about equal arcs (:func:`degree_split`;
      ``stats["layout"] == "degree-split"``, ``stats["partition"] is None``), each device pulls
      its range from the whole contribution vector and stores the new values each peer reads
      into that peer's copy (or copies its slice); the hub prefix the kernel keeps in shared
      memory is then the global hubs on every device.
    * ``small_degree``: in-degree up to which one thread of the csc kernel sums a vertex's
      in-arcs (bigger: the whole warp); ``vertices_per_lane`` (1, 2 = default, 4): vertices a
      lane of the csc kernel handles at once (independent load chains); ``task_arcs``,
      ``hub_degree``, ``lane_arcs`` (powers of two): the bins kernel's arcs per task, the
      in-degree from which a vertex's arcs are cut into chunks of at most that many arcs (one
      warp each), and the arcs per lane that set how many lanes share a vertex
      (:func:`groute.apps.pr_layout.bins_tasks`); ``waves``: the fused grids in multiples of the
      blocks resident at once.
    * ``device_check`` (default True; "csc" and "bins", on any number of devices and both
      backends): iteration t of each device's kernel first adds up every device's stats of
      iteration t - 1 (peer reads: its stream already waited for all of them) and returns at
      once if the stopping rule held, so the host queues ``check_every`` iterations between
      reads and the run stops exactly at ``converged_at`` (same iterations and answer as host
      checks after every iteration).
    * ``inplace=True`` (one device only; ignored for several; an error with ``"bins"``, whose
      sweeps are Jacobi): Gauss-Seidel sweeps that update the contribution vector in place
      (fewer sweeps on slowly mixing graphs such as grids, more on kron-like ones; on a GPU the
      result depends on thread timing in its last digits, so runs are not bit-identical).
    * ``persistent`` (BSP, "csc" and "bins" on CUDA devices with peer access and native
      atomics; True, False, "auto" = default): one cooperative launch per device per run, whose
      iterations meet at a cross-device barrier that also takes the stopping decision (pr.cu
      ``bsp_persistent``), instead of one launch per device per iteration with events between
      the devices; same iterations and answer as the per-iteration kernels. A device that waits
      longer than :data:`groute.engines.peer_barrier.BARRIER_TIMEOUT_S` at the barrier makes the run
      raise. "auto" turns it on only where :func:`choose_persistent` allows
      (``stats["persistent"]``, and ``stats["persistent_reason"]`` when it is off); ``trace``
      times its iterations (``stats["iteration_trace"]``).
    """

    def __init__(self, graph, *, ctx=None, backend="auto", devices=None, partition="metis",
                 mode="auto", damping=0.85, tol=1e-6, seed=0, max_iterations=1000, tuning=None,
                 personalization=None):
        if mode not in MODES + ("auto",):
            raise ValueError(f"mode must be one of {', '.join(MODES + ('auto',))}; got {mode!r}")
        if mode == "auto":
            mode = PR_RULES["mode"].decide({}).choice
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}; got {partition!r}")
        if not 0.0 < float(damping) < 1.0:
            raise ValueError(f"damping must be in (0, 1), got {damping!r}")
        if not float(tol) > 0.0:
            raise ValueError(f"tol must be > 0, got {tol!r}")
        if int(max_iterations) < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations!r}")
        tuning = self.tuning = tuning if tuning is not None else PageRankTuning.from_environment()
        bsp_kernel, inplace = tuning.bsp_kernel, tuning.inplace
        peer_writes, device_check = tuning.peer_writes, tuning.device_check
        self.graph = graph
        self.mode, self.damping, self.tol = mode, float(damping), float(tol)
        self.max_iterations = int(max_iterations)
        self.partition_method = partition
        n = self.n = int(graph.num_vertices)
        #: the teleport distribution by position (None: uniform)
        self.teleport = None if personalization is None else teleport_vector(graph, personalization)
        self._open_context(ctx, devices=devices, backend=backend, max_devices=n)
        self._worklist = None
        try:
            k = self.k = len(self.ctx.devices)
            if n and k > n:
                raise ValueError(f"{k} devices for a graph of {n} vertices: use {n} devices or fewer")
            self._check_memory(pagerank_bytes, graph)
            t0 = time.perf_counter()
            if mode == "bsp" and bsp_kernel == "bins" and inplace:
                raise ValueError("bsp_kernel='bins' runs Jacobi sweeps: use 'auto' or 'csc' "
                                 "with inplace=True")
            if mode == "bsp" and bsp_kernel == "auto":
                bsp_kernel = choose_bsp_kernel(graph, k, inplace)
            self.bsp_kernel = bsp_kernel
            self.persistent, self.persistent_reason = choose_persistent(
                tuning.persistent, self.ctx, mode, bsp_kernel, bool(inplace) and k == 1, bool(device_check),
                None if peer_writes is None else bool(peer_writes))
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
                                             lambda: transpose_arcs(indptr, indices,
                                                                    symmetric=not graph.directed))
                else:
                    from groute.graph import partition_graph
                    self.partition = partition_graph(graph, k, method=partition, seed=seed)
                    offsets = np.asarray(self.partition.offsets, np.int64)
                    indptr, indices = self.partition.graph.indptr, self.partition.graph.indices
                    self.layout = f"{partition} partition"
                shards = make_shards(np.asarray(indptr), np.asarray(indices), offsets,
                                     with_in_arcs=mode == "bsp", transposed=transposed)
            self.offsets = offsets
            # every device reaches every other's memory and has a bit in the need masks: the
            # peer stores, and the device-side check (it reads every peer's stats), can run
            can = (mode == "bsp" and k <= MAX_OUTPUTS
                   and bool(np.all(self.ctx.peer_matrix() | np.eye(k, dtype=bool))))
            teleports = self._teleport_shares(offsets)
            self.devs = [DevicePR(d, s, n, mode, self.damping, k, tuning, kernel=bsp_kernel,
                                  device_check=bool(device_check) and can, tol=self.tol,
                                  persistent=self.persistent, teleport=t)
                         for d, s, t in zip(self.ctx.devices, shards, teleports)]
            if mode == "bsp":
                inv = np.concatenate([s.inv_outdeg for s in shards]) if n else np.zeros(0)
                for d in self.devs:     # every run starts from these (DevicePR.bsp_reset)
                    d.contrib0 = d.device.asarray((inv / max(n, 1)).astype(d.fdt))
                self.peer_writes = can if peer_writes is None else bool(peer_writes) and can
                for i, dev in enumerate(self.devs):
                    others = [p for j, p in enumerate(self.devs) if j != i]
                    dev.set_outputs([dev] + (others if self.peer_writes else []))
                for dev in self.devs:
                    dev.set_copies(self.devs)
                    dev.alloc_stats(self.max_iterations)
                for dev in self.devs:
                    dev.set_check_group(self.devs)
            if self.persistent:     # device 0's cross-device barrier counter, where it stands
                from groute.engines.peer_barrier import CrossDeviceBarrier
                with self.devs[0].device.use():
                    self._barrier = CrossDeviceBarrier(self.ctx.devices,
                                                       self.devs[0].device.zeros(1, np.uint64))
            check_every = tuning.check_every
            if check_every is None:
                check_every = 8 if getattr(self.devs[0], "device_check", False) else 4
            self.check_every = int(check_every)
            if mode == "async":
                self.sweeps = (int(tuning.sweeps) if tuning.sweeps
                               else default_sweeps(graph, k, self.ctx.backend))
                self.workers = [PushWorker(d, i, offsets, self.sweeps) for i, d in enumerate(self.devs)]
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

    def _teleport_shares(self, offsets):
        """Per device, the teleport term ``(1-d) p`` of its vertices in the solver's order (the
        degree order, the partition's, or the graph's), or None each without personalization."""
        if self.teleport is None:
            return [None] * (len(offsets) - 1)
        p = self.teleport
        if self._order is not None:
            p = p[self._order]
        elif self.partition is not None:
            p = np.asarray(self.partition.to_new(p))
        p = (1.0 - self.damping) * p
        return [p[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]

    # running ------------------------------------------------------------------------------------
    def run(self) -> AppResult:
        if self.n == 0:
            return self._result(np.zeros(0), 0.0, complete_stats(STATS_KEYS, {
                "mode": self.mode, "devices": [d.device.name for d in self.devs],
                "damping": self.damping, "tol": self.tol, "bytes_sent": 0,
                "iterations": 0 if self.mode == "bsp" else None}))
        with DeviceTimer(self.ctx) as timer:
            stats = self._run_bsp() if self.mode == "bsp" else self._run_async()
        if self.mode == "bsp" and self.persistent:
            stats["iteration_trace"] = self._trace_summary(stats["iterations"])
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
        return self._result(values, timer.seconds, complete_stats(STATS_KEYS, stats))

    def _run_bsp(self) -> dict:
        n, d, k = self.n, self.damping, self.k
        base = (1.0 - d) / n
        t = 0
        done_events = [None] * k
        converged_at = None
        history = []
        if self.persistent:     # the kernels start with bsp_reset's work themselves
            t, rows = self._run_persistent(base, 1.0 / n)
            converged_at = self._check_stats(0, t, history, converged_at, rows)
            if converged_at not in (t, None) or (converged_at is None and t < self.max_iterations):
                raise RuntimeError(f"persistent PageRank: the kernels stopped after {t} iterations "
                                   f"but the host finds the stopping rule first met at "
                                   f"{converged_at} (stats of every device, device order)")
        else:
            for dev in self.devs:
                dev.bsp_reset()
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

    def _check_stats(self, t0, t1, history, converged_at, rows=None):
        """Iterations [t0, t1) by every device's stats rows (added in device order, as the
        kernels add them; ``rows``: each device's rows already on the host, else read here):
        their relative changes appended to ``history``; returns the first iteration count
        that met the stopping rule (``converged_at`` if already known)."""
        if t1 <= t0:
            return converged_at
        if rows is None:
            rows = [dev.bsp_stats(t0, t1) for dev in self.devs]
        else:
            rows = [r[t0:t1] for r in rows]
        parts = rows[0].copy()
        for r in rows[1:]:      # device order, as the kernels add them
            parts += r
        diff, mass = parts[:, 0], parts[:, 1]
        history.extend(np.where(mass > 0, diff / np.where(mass > 0, mass, 1.0), 0.0).tolist())
        met = np.flatnonzero(diff <= self.tol * mass)
        if converged_at is None and met.size:
            converged_at = t0 + int(met[0]) + 1
        return converged_at

    def _run_persistent(self, base, y0) -> tuple[int, list]:
        """One persistent launch per device for the whole run (pr.cu ``bsp_persistent``);
        returns the iterations run and each device's stats rows (host). Raises when a device
        gave up at the cross-device barrier (a peer stopped or never started) or the devices
        disagree; the barrier counter is then reset (after every device has finished), so the
        next run starts clean."""
        from groute.engines.peer_barrier import timeout_ns
        bar = self._barrier
        launched, failure = bar.launch_each(
            lambda i, _: self.devs[i].persistent_launch(self.max_iterations, base, y0, bar.ptr,
                                                        bar.base, self.k, timeout_ns()))
        for i in launched:
            self.devs[i].persistent_fetch()
        results = [self.devs[i].persistent_result() for i in launched]
        ctl = [c for c, _ in results]
        aborted = [self.devs[i].device.name for i, c in zip(launched, ctl) if c[P_ABORT] == 1]
        iterations = {int(c[P_ITERS]) for c in ctl}
        bar.finish([c[P_CROSS] for c in ctl], failure=failure, aborted=aborted,
                   ok=len(iterations) == 1, what="persistent PageRank", instead="persistent=False")
        if len(iterations) != 1:
            raise RuntimeError(f"persistent PageRank: the devices ran different iteration counts "
                               f"{[int(c[P_ITERS]) for c in ctl]}")
        t = iterations.pop()
        return t, [rows for _, rows in results]

    def _trace_summary(self, iterations: int) -> dict | None:
        """PageRankTuning.trace: where a persistent iteration's time goes, in microseconds, median
        over the traced iterations per device (sweep and grid barrier, cross-device wait, the
        rule and second grid barrier, the whole iteration), and each device's start after the
        first device's (the launch skew) and its end before the last device's."""
        rows = [d.persistent_trace(iterations) for d in self.devs]
        if rows[0] is None or not len(rows[0]):
            return None
        t0 = min(int(r[0, 0]) for r in rows)
        t1 = max(int(r[-1, 3]) for r in rows)
        per = []
        for r in rows:
            ph = np.stack([r[:, 1] - r[:, 0], r[:, 2] - r[:, 1], r[:, 3] - r[:, 2],
                           r[:, 3] - r[:, 0]], axis=1) / 1e3
            per.append({"sweep": round(float(np.median(ph[:, 0])), 2),
                        "cross_wait": round(float(np.median(ph[:, 1])), 2),
                        "decide": round(float(np.median(ph[:, 2])), 2),
                        "iteration": round(float(np.median(ph[:, 3])), 2),
                        "start_after_first": round((int(r[0, 0]) - t0) / 1e3, 2),
                        "end_before_last": round((t1 - int(r[-1, 3])) / 1e3, 2)})
        return {"per_device_us": per, "kernels_us": round((t1 - t0) / 1e3, 1)}

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


def teleport_vector(graph, personalization) -> np.ndarray:
    """``personalization`` (a dict keyed by the graph's ids, missing ids 0; or an array by
    position) as a float64 distribution by position. Errors name the argument: an id that is
    not a vertex, a negative or non-finite weight, a wrong length; all zero is a
    ZeroDivisionError, as NetworkX raises."""
    n = int(graph.num_vertices)
    if isinstance(personalization, dict):
        p = np.zeros(n, dtype=np.float64)
        if personalization:
            ids = list(personalization)
            try:
                positions = [graph.vertex_of(i, "personalization key") for i in ids]
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            p[np.asarray(positions, dtype=np.int64)] = [float(personalization[i]) for i in ids]
    else:
        p = np.asarray(personalization, dtype=np.float64)
        if p.shape != (n,):
            raise ValueError(f"personalization: an array needs one weight per vertex ({n}), got "
                             f"shape {p.shape}")
        p = p.copy()
    if n == 0:
        return p
    if not np.isfinite(p).all() or (p < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(p) | (p < 0))[0])
        raise ValueError(f"personalization: weights must be finite and >= 0 (vertex at "
                         f"position {bad} has {p[bad]})")
    total = p.sum()
    if total == 0 and n:
        raise ZeroDivisionError("personalization: the weights sum to zero; give at least one "
                                "vertex a positive weight")
    return p / total


def _unpermute(values, order):
    out = np.empty_like(values)
    out[order] = values
    return out


def pagerank(graph, *, num_vertices=None, **kwargs) -> AppResult:
    """One-shot :class:`PageRank`: build, run once, close (``personalization=`` and the other
    options as :class:`PageRank`).

    ``graph``: anything :func:`~groute.solver.input_graph` takes (a path or spec, a CSRGraph, a
    NetworkX graph, a scipy sparse matrix, ``(src, dst)`` arrays with an optional
    ``num_vertices``); weights are ignored (NetworkX: ``nx.pagerank(G, weight=None)``). Keyword
    options as :class:`PageRank`. ``result.to_dict()`` is ``{id: rank}``.
    """
    g = input_graph(graph, weight=None, num_vertices=num_vertices)
    with PageRank(g, **kwargs) as solver:
        return solver.run()


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------
def register(subparsers, common):
    from groute.apps.app_cli import add_graph_options, auto_help
    p = subparsers.add_parser("pr", parents=[common], help="PageRank across devices (async push or BSP)")
    add_graph_options(p)
    p.add_argument("--mode", choices=MODES + ("auto",), default="auto",
                   help="bsp power iteration, async residual push (the Groute paper's "
                        f"variant), or auto (default): {auto_help(PR_RULES['mode'])}")
    p.add_argument("--partition", choices=PARTITIONS, default="metis",
                   help="vertex partitioner (default metis; bsp with the bins kernel cuts its "
                        "degree order by arcs instead)")
    p.add_argument("--damping", type=float, default=0.85, help="damping factor (default 0.85)")
    p.add_argument("--tol", type=float, default=1e-6,
                   help="async: residual bound tol*(1-d)/n per vertex; bsp: L1 change (default 1e-6)")
    p.add_argument("--max-iterations", type=int, default=1000, metavar="N",
                   help="bsp: stop after N iterations if not converged (async on one device: "
                        "after 10*N sweeps; default 1000)")
    p.add_argument("--sweeps", type=int, default=None,
                   help="async: push sweeps per worklist round (default: "
                        f"{auto_help(PR_RULES['sweeps'])})")
    p.add_argument("--bsp-kernel", choices=BSP_KERNELS, default=None,
                   help="bsp on CUDA: csc, the fused CSC pull; bins, the degree-binned pull; "
                        "coo, the COO pull pair; or auto (default): "
                        f"{auto_help(PR_RULES['bsp_kernel'])}")
    p.add_argument("--inplace", action="store_true",
                   help="bsp on one device: Gauss-Seidel sweeps in place (fewer iterations)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from groute.apps.app_cli import gteps, load, report, run_solver, write_output
    g, load_s = load(args)
    given = {"sweeps": args.sweeps, "bsp_kernel": getattr(args, "bsp_kernel", None),
             "inplace": True if getattr(args, "inplace", False) else None}
    tuning = dataclasses.replace(PageRankTuning.from_environment(),
                                 **{k: v for k, v in given.items() if v is not None})
    runs = run_solver(args, g, lambda ctx: PageRank(
        g, ctx=ctx, partition=args.partition, mode=args.mode, damping=args.damping, tol=args.tol,
        seed=args.seed, max_iterations=args.max_iterations, tuning=tuning))
    res = runs.result
    stats = res.stats
    arcs = arcs_processed(stats, g.num_edges)
    layout = stats.get("layout") if runs.devices > 1 else None
    rounds = (f"{stats['iterations']} iterations" if stats.get("iterations") is not None
              else f"{sum(stats.get('rounds') or []):,} rounds")
    line = (f"pr {g.name}: {runs.median * 1e3:.3f} ms "
            f"({runs.where(stats['mode'] + (f', {layout}' if layout else ''))}), {rounds}, "
            f"{gteps(arcs, runs.median):.3f} GTEPS")
    facts = {"mode": stats["mode"], "iterations": stats.get("iterations"),
             "arcs_processed": arcs, "gteps": gteps(arcs, runs.median)}
    verified = None
    if args.verify:
        from groute.graph import reference
        ref = reference.pagerank(g, damping=args.damping, tol=min(args.tol, 1e-6) * 1e-2)
        l1, linf = reference.pagerank_error(res.values, ref)
        ok = l1 <= 1e-4
        verified = (ok, f"L1 {l1:.3e}, Linf {linf:.3e} vs reference power iteration "
                        f"-> {'OK (L1 <= 1e-4)' if ok else 'FAILED (L1 > 1e-4)'}")
    report(args, "pr", g, load_s, runs, line, facts, verified)
    if args.output:
        write_output(res, args.output, "rank")
    return 0 if verified is None or verified[0] else 1


def arcs_processed(stats: dict, num_arcs: int) -> int:
    """Arcs a PageRank run processed: every arc per iteration (BSP), or the arcs pushed (async)."""
    if stats.get("iterations") is not None:
        return int(stats["iterations"]) * int(num_arcs)
    return int(sum(stats.get("arcs_pushed_per_device") or []))
