"""The linear iteration engines' solver: any :class:`~.iteration.LinearIteration` by BSP pull
sweeps (``mode="auto"``, the default) or asynchronous residual push.

Both modes compute the fixed point ``y = base + alpha A^T (scale * y)`` (``scale``: the
iteration's per-source share, PageRank's ``1 / outdeg``; see :mod:`.iteration`) and return it
normalised as the solver's ``normalize`` says (PageRank: ``y / sum(y)``, which for the "leaky"
PageRank with uniform teleport is the standard PageRank, so no device ever needs the global
dangling sum during the run).

* ``mode="async"`` (Whang et al.'s data-driven push, the variant Groute evaluates): every vertex
  holds a value and a residual (``base`` at the start); one whose residual exceeds ``eps`` adds
  it to its value and pushes ``arc_share(alpha r, outdeg)`` to its out-neighbours.
  Contributions to vertices of other devices are summed into a dense per-device accumulator.
  On CUDA devices that reach each other's memory (:func:`choose_persistent`) one persistent
  kernel per device runs the whole solve (iterate.cu ``pr_async_persistent``): it adds the
  accumulator into the owners' residuals through peer memory every round, and every
  ``check_every`` rounds the devices stop together when the residuals' sum meets the stopping
  rule, BSP's measure (the residual is the L1 change of the Jacobi step from the values), with
  the threshold of :func:`~.thresholds.push_thresholds`. Otherwise the host drives rounds of
  ``sweeps`` sweeps and sends one ``(vertex, value)`` item per destination vertex through the
  distributed worklist (:mod:`groute.worklist`), which also detects termination; each vertex
  ends with its residual at most its threshold (:func:`~.thresholds.host_threshold`), the
  thresholds adding up to ``n * tol`` times the base's sum (relative stop; PageRank's ``n tol
  (1-d)``, so the L1 error of ``y`` is at most ``n * tol`` times its mass) or to ``n * tol``
  (absolute stop). Under ``PageRankTuning.push_rule="degree"`` a vertex's threshold is
  proportional to its out-degree rather than the same for all (:mod:`.thresholds`), with the
  same sum, so both paths keep their guarantee.
* ``mode="bsp"``: topology-driven, pull-based Jacobi sweeps over the transposed graph (every
  vertex every iteration, no host sync per iteration: the stopping rule, ``sum |y' - y| <= n *
  tol * sum y'`` (relative) or ``<= n * tol`` (absolute), ``tol`` per vertex as NetworkX's, is
  checked every few iterations). Each
  device owns a range of vertices; after each iteration its kernel stores the new ``scale * y``
  of the vertices a peer's in-arcs read straight into that peer's copy (peer access), or copies
  its whole slice. The degree-binned kernel (``"bins"``, power-law graphs) renumbers the
  vertices by in-degree, hubs first, and cuts that order into one contiguous range per device
  balanced by arcs (:func:`~.layout.degree_split`) instead of partitioning; every device keeps
  the whole contribution vector and gets the peers' new values as above.

  With ``persistent=True`` (CUDA, peer access with native atomics) the fused kernels run a
  whole BSP run in one cooperative launch per device: iterations meet at a cross-device barrier
  in device 0's memory that also takes the stopping decision (:func:`choose_persistent`).

``mode="auto"`` (default) is the ``mode`` rule of :mod:`groute.engines.iterate.rules`
(``"bsp"``); ``"async"`` is the variant the Groute paper evaluates, kept for comparison.

This module holds the rules' facts and choices (which kernel, how many sweeps, whether
persistent) and the solver. The host-side layout of the arcs (shards, the ``"bins"`` degree
order, its cut and task list) is :mod:`~.layout`; each device's arrays and operations, the only
backend-specific code, are :mod:`~.device` (CUDA kernels in ``iterate.cu``; the CPU backend runs
vectorised NumPy on the devices' streams).
"""
from __future__ import annotations

import functools
import math
import time

import numpy as np

from groute.graph.partition import DEFAULT_PARTITION
from groute.graph.partition import METHODS as PARTITIONS
from groute.ints import is_int
from groute.results import AppResult, complete_stats
from groute.runtime.answer_landing import land_answer
from groute.runtime.context import taking_turns
from groute.runtime.renumber import DeviceRenumbering, WholeAnswerRenumbering, gather_on_devices
from groute.solver import DeviceTimer, Solver, check_graph_for_ranks
from groute.tuning import PageRankTuning

from .device import (A_ARCS, A_PUSHED, A_SENT, A_TOTAL_MASS, A_TOTAL_RESID,
                     ASYNC_CONVERGED, ASYNC_MEETING_WORDS, ASYNC_ROUNDS, ASYNC_STUCK,
                     MAX_OUTPUTS, IterationDevice, PushWorker, kernel_arcs)
from .iteration import FixedPoint, LinearIteration
from .layout import (BinsLayout, Shard, bins_layout, bins_shards, degree_split, in_degrees,
                     inverse_degrees, make_shards, shard_in_arcs)
from .memory import iteration_bytes
from .rules import ITERATE_RULES, said
from .thresholds import host_threshold, push_thresholds, unit_scale

MODES = ("async", "bsp")
#: the most iterations a BSP run takes, whatever its ``max_iter``: each device keeps a row of
#: [change, mass] per iteration (256 MiB at this bound), which the device-side check reads
BSP_MAX_ITER = 1 << 24
#: what the answer is scaled to: ``"sum"`` (sum 1; all zero: uniform), ``"l2"`` (unit
#: Euclidean norm; all zero: as it is), None (as computed)
NORMALIZATIONS = ("sum", "l2", None)
#: in-degree above which a vertex counts as big for choose_bsp_kernel
HEAVY_DEGREE = 32
#: below this many arcs a graph is small for the ``bsp_kernel`` rule (``small_with_hubs``)
SMALL_ARCS = 1 << 22
#: the keys of a result's ``stats``, in both modes (None where a key does not apply to the mode
#: or kernel that ran); ``alpha`` is named as the iteration calls it (:func:`stats_keys`).
#: Both: mode, devices, partition (None when none ran), layout,
#: vertices_per_device, alpha, tol, bytes_sent between devices, converged (async: every
#: residual fell to eps within the sweep budget). BSP: iterations, converged_at, kernel (as
#: run), bsp_kernel (as chosen), inplace, device_check, check_every, persistent and
#: persistent_reason (why it is off), exchange (peer stores or copies; None on one device),
#: l1_change (the last iteration's), arcs_per_device, iteration_trace (persistent runs with
#: ``PageRankTuning.trace``). Async: rounds, sweeps_per_round, vertices_pushed_per_device,
#: arcs_pushed_per_device, items_sent, push_rule (PageRankTuning's), eps (the push threshold
#: per unit of weight, a vertex's being eps times its weight, see :mod:`.thresholds`; per
#: vertex under the uniform rule; the persistent kernel's at the start), persistent and
#: persistent_reason; the persistent kernel also check_every (rounds between its decisions)
#: l1_change (the residuals over the mass at the last one) and stop (why it stopped:
#: converged, stuck with no vertex above its threshold, or at the round cap).
STATS_KEYS = ("mode", "devices", "partition", "layout", "vertices_per_device", "alpha", "tol",
              "bytes_sent", "iterations", "converged_at", "converged", "kernel", "bsp_kernel",
              "inplace", "device_check", "check_every", "persistent", "persistent_reason",
              "exchange", "l1_change", "arcs_per_device", "iteration_trace", "rounds",
              "sweeps_per_round", "vertices_pushed_per_device", "arcs_pushed_per_device",
              "items_sent", "push_rule", "eps", "stop")


def stats_keys(iteration: LinearIteration) -> tuple:
    """:data:`STATS_KEYS` with ``alpha`` named as ``iteration`` calls it."""
    return tuple(iteration.alpha_name if key == "alpha" else key for key in STATS_KEYS)


def choose_bsp_kernel(graph, k: int, inplace: bool = False, *, facts=None) -> str:
    """The BSP kernel ``bsp_kernel="auto"`` picks: the ``bsp_kernel`` rule of
    :mod:`groute.engines.iterate.rules` (the CPU backend runs NumPy whatever the kernel, but follows
    the ``"bins"`` layout when it is picked; ``inplace`` counts on one device only).
    ``facts``: where the graph cannot count its :func:`in_degree_facts` itself (a graph held
    by ranks), a callable that returns them (the whole graph's: a collective, so the caller
    keeps its answer, ``functools.cache``), called only if the rule asks."""
    return ITERATE_RULES["bsp_kernel"].decide({
        "one_device": lambda: k == 1, "inplace": lambda: bool(inplace),
        "heavy_in_arcs": lambda: heavy_in_arcs(graph, facts),
        "small_with_hubs": lambda: small_with_hubs(graph, facts)}).choice


def in_degree_facts(indeg) -> tuple[int, int]:
    """What the rules ask of a graph's in-degrees (or of a part of them).

    Parameters
    ----------
    indeg : array of int
        In-degrees, one per vertex.

    Returns
    -------
    tuple of int
        The arcs that enter vertices of in-degree > :data:`HEAVY_DEGREE`, and the largest
        in-degree. Parts add up: the sums add, the maxima take the largest.

    Examples
    --------
    >>> in_degree_facts([40, 3, 0, 33])
    (73, 40)
    """
    indeg = np.asarray(indeg)
    return int(indeg[indeg > HEAVY_DEGREE].sum()), int(indeg.max(initial=0))


def small_with_hubs(graph, facts=None) -> bool:
    """Whether ``graph`` has fewer than :data:`SMALL_ARCS` arcs and some vertex of in-degree >
    :data:`HEAVY_DEGREE`: a sweep short enough that its longest in-row, not the bandwidth,
    sets its time. ``facts``: as :func:`choose_bsp_kernel`'s."""
    m = int(graph.num_edges)
    if m == 0 or m >= SMALL_ARCS:
        return False
    return _facts_of(graph, facts)[1] > HEAVY_DEGREE


def heavy_in_arcs(graph, facts=None) -> bool:
    """Whether most arcs enter vertices of in-degree > HEAVY_DEGREE (power-law graphs).
    ``facts``: as :func:`choose_bsp_kernel`'s."""
    m = int(graph.num_edges)
    if m == 0:
        return False
    return _facts_of(graph, facts)[0] * 2 > m


def _facts_of(graph, facts) -> tuple[int, int]:
    return facts() if facts is not None else in_degree_facts(in_degrees(graph))


def default_sweeps(graph, k: int, backend: str) -> int:
    """Async push sweeps per worklist round when ``sweeps`` is not given: the ``sweeps`` rule
    of :mod:`groute.engines.iterate.rules`."""
    return ITERATE_RULES["sweeps"].decide({
        "cuda": lambda: backend == "cuda", "one_device": lambda: k == 1,
        "heavy_in_arcs": lambda: heavy_in_arcs(graph)}).choice


def persistent_unavailable(ctx, mode: str, kernel: str, inplace: bool, device_check: bool,
                           peer_writes=None, start_vector: bool = False) -> str | None:
    """Why the persistent kernels cannot run with these options on ``ctx`` (None when they
    can). Both run on CUDA devices that reach each other's memory with native atomics (the
    cross-device meetings of :mod:`groute.engines.peer_barrier`) and write into the peers'
    memory, which ``peer_writes=False`` forbids on several devices. BSP's are the fused
    kernels ("csc", "bins") in Jacobi form, checking the stopping rule on the device; the
    asynchronous push kernel (iterate.cu ``pr_async_persistent``) needs nothing more."""
    from groute.engines.peer_barrier import unavailable
    why = unavailable(ctx, across_processes=mode == "bsp")
    if why is not None:
        return why
    if mode == "async":
        if peer_writes is False and len(ctx.devices) > 1:
            return ("peer_writes=False has no persistent form: its kernel adds the remote "
                    "contributions into the peers' residuals")
        return None
    if kernel not in ("csc", "bins"):
        return f"bsp_kernel={kernel!r} has no persistent form (use 'csc' or 'bins')"
    if inplace:
        return "inplace=True (Gauss-Seidel) has no persistent form"
    if not device_check:
        return "it checks the stopping rule on the device: device_check=False contradicts it"
    if peer_writes is False and len(ctx.devices) > 1:
        return ("peer_writes=False (slices copied by the host between iterations) has no "
                "persistent form: its kernels store into the peers")
    if start_vector:
        return ("start values per vertex (nstart) have no persistent form: its kernels start "
                "every vertex alike")
    return None


def choose_persistent(requested, ctx, mode: str, kernel: str, inplace: bool,
                      device_check: bool, peer_writes=None,
                      start_vector: bool = False) -> tuple[bool, str | None]:
    """``PageRankTuning.persistent`` resolved (True, False or ``"auto"``) for ``mode``
    (``"bsp"`` or ``"async"``): (on, why not). ``True`` where it cannot run is a ValueError
    naming the reason; ``"auto"`` follows the ``persistent`` rule of
    :mod:`groute.engines.iterate.rules`."""
    if requested is False:
        return False, "persistent=False"
    asked = {}      # asked only where needed: across processes the question is collective

    def why():
        if "why" not in asked:
            asked["why"] = persistent_unavailable(ctx, mode, kernel, inplace, device_check,
                                                  peer_writes, start_vector)
        return asked["why"]
    if requested is True:
        if why() is not None:
            raise ValueError(f"persistent=True cannot run here: {why()}")
        return True, None
    ranks = getattr(ctx, "ranks", None)
    case = ITERATE_RULES["persistent"].decide({
        "persistent_can_run": lambda: why() is None, "one_device": lambda: len(ctx.devices) == 1,
        "processes": lambda: ranks is not None and ranks.size > 1,
        "shared_gpus": lambda: ctx.logical})
    if case.choice:
        return True, None
    if asked.get("why") is not None:
        return False, asked["why"]
    return False, f"auto: off on {said(case.when)} ({case.why}); opt in with persistent=True"


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class IterateSolver(Solver):
    """A :class:`~.iteration.LinearIteration` on ``graph`` over the devices of a context;
    partition and upload once, run many times. An app subclasses it with its
    :attr:`iteration`, and gives the engine the numbers of its fixed point as a
    :class:`~.iteration.FixedPoint` made from its own options (PageRank's ``alpha``,
    ``personalization``, ``nstart``, ``weight``; Katz's ``alpha``, ``beta``...); the keyword
    options below are how it runs, the same for every app.

    ``problem`` (a :class:`~.iteration.FixedPoint`): ``alpha`` >= 0; ``base`` (>= 0 for
    ``mode="async"``, whose residual test is one-sided); ``start`` (BSP; an array of start
    values has no persistent form, and async starts from the base); ``normalize``
    (:data:`NORMALIZATIONS`); ``weighted``: on the graph's weights. ``mode``: ``"auto"``
    (default: ``"bsp"``, see the module docstring), ``"bsp"`` or ``"async"``. ``tol``: the
    stopping rule's, per vertex as NetworkX's (the iteration's ``stop`` says relative or
    absolute; async: the residual bound per vertex it implies). ``max_iter``: BSP's bound on
    iterations, of which at most :data:`BSP_MAX_ITER` run (async: on each device's push sweeps
    or the persistent kernel's rounds, ten times it); a run that hits it raises
    :class:`groute.errors.PowerIterationFailedConvergence` (NetworkX's). ``partition`` and
    ``seed``: how vertices are split over several devices. ``run`` returns the stats keys of
    :func:`stats_keys` in both modes.

    ``tuning``: a :class:`~groute.tuning.PageRankTuning` (None:
    ``PageRankTuning.from_environment()``); its fields change how fast the answer comes:

    * ``sweeps``: push sweeps per worklist round (the host-driven async push; default
      :func:`default_sweeps`); ``check_every``: iterations between convergence checks by the
      host (BSP; default 8 with ``device_check``, else 4), rounds between the devices' stopping
      decisions (the persistent push kernel; default 4); ``peer_writes``: BSP stores each
      device's slice straight into the peers' vectors from the kernel (default: when every pair
      has peer access) instead of copying (False: the async push runs host-driven).
    * ``push_rule`` (async): ``"uniform"`` (default), one threshold for every vertex, or
      ``"degree"``, a threshold proportional to the vertex's out-degree, so that a hub is
      pushed only once it holds mass worth its arcs (Andersen, Chung and Lang); the
      thresholds add up to the same bound either way (:mod:`.thresholds`), so the answer's
      guarantee is the same; ``stats["push_rule"]``.
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
      (:func:`groute.engines.iterate.layout.bins_tasks`); ``waves``: the fused grids in
      multiples of the blocks resident at once.
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
      iterations meet at a cross-device barrier that also takes the stopping decision (iterate.cu
      ``bsp_persistent``), instead of one launch per device per iteration with events between
      the devices; same iterations and answer as the per-iteration kernels. A device that waits
      longer than :data:`groute.engines.peer_barrier.BARRIER_TIMEOUT_S` at the barrier makes the run
      raise. "auto" turns it on only where :func:`choose_persistent` allows
      (``stats["persistent"]``, and ``stats["persistent_reason"]`` when it is off); ``trace``
      times its iterations (``stats["iteration_trace"]``). In ``mode="async"`` the same option
      chooses the persistent push kernel (iterate.cu ``pr_async_persistent``: CUDA devices with
      peer access and native atomics, one device too), which "auto" runs wherever it can.
    """

    #: the iteration this solver runs (an app's subclass sets it)
    iteration: LinearIteration = None
    #: the app's name, for errors and logs
    app = "iterate"
    #: what the app calls ``base``, for its errors (Katz: ``"beta"``)
    base_name = "base"
    #: the ``auto`` rules it decides by (the command line prints them)
    rules = ITERATE_RULES

    engine_family = "iterate"

    def __init__(self, graph, problem: FixedPoint, /, *, ctx=None, backend="auto", devices="auto",
                 timeout=None, partition=DEFAULT_PARTITION, mode="auto", tol=1e-6,
                 max_iter=1000, seed=0, tuning=None):
        if not isinstance(self.iteration, LinearIteration):
            raise TypeError(f"{type(self).__name__}.iteration must be a LinearIteration, got "
                            f"{type(self.iteration).__name__}")
        if not isinstance(problem, FixedPoint):
            raise TypeError(f"{type(self).__name__}: the problem must be a FixedPoint, got "
                            f"{type(problem).__name__}")
        alpha, base, start, normalize = (problem.alpha, problem.base, problem.start,
                                         problem.normalize)
        if mode not in MODES + ("auto",):
            raise ValueError(f"mode must be one of {', '.join(MODES + ('auto',))}; got {mode!r}")
        if mode == "auto":
            mode = ITERATE_RULES["mode"].decide({}).choice
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}; got {partition!r}")
        if not (np.isfinite(self._number("tol", tol)) and tol > 0.0):
            raise ValueError(f"tol must be finite and > 0, got {tol!r}")
        if not is_int(max_iter):
            raise TypeError(f"{self.app}: max_iter must be an int, got {max_iter!r}")
        if max_iter < 1:
            raise ValueError(f"{self.app}: max_iter must be >= 1, got {max_iter!r}")
        name = self.iteration.alpha_name
        if not (np.isfinite(self._number(name, alpha)) and float(alpha) >= 0.0):
            raise ValueError(f"{self.app}: {name} must be finite and >= 0, got {alpha!r}")
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"{self.app}: normalize must be one of {NORMALIZATIONS}; got "
                             f"{normalize!r}")
        tuning = self.tuning = PageRankTuning.given(tuning)
        bsp_kernel, inplace = tuning.bsp_kernel, tuning.inplace
        peer_writes, device_check = tuning.peer_writes, tuning.device_check
        self.graph = graph
        self.mode, self.alpha, self.tol = mode, float(alpha), float(tol)
        self.normalize = normalize
        self.max_iter = int(max_iter)
        #: the most iterations a BSP run takes: ``max_iter``, up to :data:`BSP_MAX_ITER`
        self.bsp_iterations = min(self.max_iter, BSP_MAX_ITER)
        n = self.n = int(graph.num_vertices)
        #: the base term: one value (``base_vector`` None) or one per vertex by position
        self.base_value, self.base_vector = self._check_base(base, n, mode)
        #: the start values: one value (``start_vector`` None) or one per vertex by position
        self.start, self.start_vector = self._check_vector("start", start, n, False)
        if self.start_vector is not None and mode == "async":
            raise ValueError(f"{self.app}: start values per vertex (nstart) apply to "
                             f"mode='bsp'; the asynchronous push starts from the base")
        weights = graph.weights if problem.weighted else None
        self.weighted = weights is not None
        self._open_context(ctx, devices=devices, backend=backend, timeout=timeout, graph=graph,
                           estimate=iteration_bytes, weighted=self.weighted)
        self._worklist = None
        self._slices = None     # across processes: the Router the slices go through
        self._addresses = None  # across processes: the other ranks' memory mapped here
        try:
            k = self.k = len(self.ctx.devices)
            #: the indices of the devices this process drives (all, but on a RankContext)
            self._here = [i for i in range(k) if self.ctx.is_local(i)]
            if self.ctx.ranks is not None:
                check_graph_for_ranks(self.ctx, graph, type(self).__name__)
                bsp_kernel = self._across_ranks(mode, bsp_kernel, bool(inplace))
            self._check_device_count(self.app, n)
            ranks = self.ctx.ranks
            self._check_memory(functools.partial(
                iteration_bytes, processes=ranks is not None and ranks.size > 1), graph,
                weighted=self.weighted)
            t0 = time.perf_counter()
            if mode == "bsp" and bsp_kernel == "bins" and inplace:
                raise ValueError("bsp_kernel='bins' runs Jacobi sweeps: use 'auto' or 'csc' "
                                 "with inplace=True")
            # across processes "auto" asks the in-degree facts, "bins" every in-degree (each
            # a collective: asked at most once, and only where needed)
            own_in_degrees = (functools.cache(lambda: self._ranks_own_in_degrees(graph))
                              if self.ctx.ranks is not None else None)
            if mode == "bsp" and bsp_kernel == "auto":
                bsp_kernel = choose_bsp_kernel(
                    graph, k, inplace, facts=None if own_in_degrees is None
                    else functools.cache(lambda: self._ranks_in_degree_facts(own_in_degrees())))
            self.bsp_kernel = bsp_kernel
            self.persistent, self.persistent_reason = choose_persistent(
                tuning.persistent, self.ctx, mode, bsp_kernel, bool(inplace) and k == 1, bool(device_check),
                None if peer_writes is None else bool(peer_writes), self.start_vector is not None)
            self._order = None      # "bins": new vertex id -> the graph's id
            self._device_renumbering = None     # made at the first answer that needs it
            self._fixed_shared = {}             # what -> every device's value (_everyone_once)
            self._whole_renumbering = None      # where the devices cannot gather: likewise
            self.partition = None
            if self.ctx.ranks is not None:       # this process's range of a graph
                self.partition = graph.split_by_ranges(k, partition)
                offsets = np.asarray(graph.offsets, np.int64)
                self.layout = "ranges"
                if mode == "bsp" and bsp_kernel == "bins":
                    in_degrees_all = np.concatenate(self.ctx.ranks.allgatherv(
                        own_in_degrees(), "the in-degrees"))
                    shards, offsets, layout = self._ranks_degree_split(graph, weights,
                                                                       in_degrees_all)
                    self._order, self._rank = layout.order, layout.rank
                    self.partition = None       # the new ranges are not the loaded ones
                    self.layout = "degree order" if k == 1 else "degree-split"
                else:
                    shards = self._rank_shards(graph, mode, weights)
            elif mode == "bsp" and bsp_kernel == "bins":
                # renumbered by in-degree (cached on the graph), cut by cost: no partitioner
                layout = bins_layout(graph)
                self._order = layout.order
                self._rank = layout.rank    # the inverse: graph id -> new id
                offsets = degree_split(layout.in_indptr, k)
                self.layout = "degree order" if k == 1 else "degree-split"
                factors = (None if weights is None
                           else self.iteration.arc_factors(graph.indptr, weights))
                built = self._in_arcs_on_devices(graph, offsets, rank=layout.rank,
                                                 in_degrees=layout.in_degrees, factors=factors)
                shards = bins_shards(layout, offsets, self.ctx.devices, built,
                                     scale=self.iteration.scale, weighted=factors is not None)
            else:
                own = graph
                self.layout = None
                if k == 1:
                    offsets = np.array([0, n], np.int64)
                else:
                    from groute.graph import partition_graph
                    self.partition = partition_graph(graph, k, method=partition, seed=seed)
                    offsets = np.asarray(self.partition.offsets, np.int64)
                    own = self.partition.graph
                    if weights is not None:
                        weights = own.weights
                    self.layout = f"{self.partition.method} partition"
                factors = (None if weights is None
                           else self.iteration.arc_factors(own.indptr, weights))
                built = None
                if mode == "bsp":
                    symmetric = not own.directed and factors is None
                    built = self._in_arcs_on_devices(
                        own, offsets, in_degrees=None if symmetric else in_degrees(own),
                        factors=factors, symmetric=symmetric)
                shards = make_shards(own.indptr, own.indices, offsets,
                                     devices=self.ctx.devices, in_arcs=built,
                                     scale=self.iteration.scale, factors=factors)
            self.offsets = offsets
            # every device reaches every other's memory and has a bit in the need masks: the
            # peer stores, and the device-side check (it reads every peer's stats), can run
            # (across processes: the persistent kernel's, through CUDA IPC)
            ranked = self.ctx.ranks is not None and self.ctx.ranks.size > 1
            can = (mode == "bsp" and k <= MAX_OUTPUTS
                   and (self.persistent if ranked else
                        bool(np.all(self.ctx.peer_matrix() | np.eye(k, dtype=bool)))))
            bases = self._mine(self._base_shares(offsets))
            bound = self.iteration.bound(self.tol, n)
            self.devs = [IterationDevice(d, s, n, mode, self.alpha, k, tuning, self.iteration,
                                         kernel=bsp_kernel, device_check=bool(device_check) and can,
                                         tol=bound, persistent=self.persistent, base=b)
                         for d, s, b in zip(self._mine(self.ctx.devices), shards, bases)]
            if mode == "bsp":
                inv = (np.concatenate(self._everyone([s.inv_outdeg for s in shards],
                                                     "the vertices' shares")) if n
                       else np.zeros(0))
                every = self._in_order(self.start_vector, offsets)     # every device's
                starts = self._mine(every)
                whole = self.start if self.start_vector is None else np.concatenate(every)
                for d, own in zip(self.devs, starts):   # every run starts from these
                    d.y0 = self.start                   # (IterationDevice.bsp_reset)
                    d.contrib0 = d.device.asarray((inv * whole).astype(d.fdt))
                    if own is not None:
                        d.y_start = d.device.asarray(own.astype(d.fdt))
                self.peer_writes = can if peer_writes is None else bool(peer_writes) and can
                # across processes the persistent kernel writes into the other ranks' memory:
                # what they map is allocated first, then mapped (every rank at once), then
                # each rank sets up against the mapped addresses; every rank hears whether the
                # others' set-up went through before it goes on
                from groute.engines.peer_barrier import together
                ipc = ranked and self.peer_writes
                with together(self.ctx, "allocated its persistent kernel's memory", self.app,
                              ipc):
                    for dev in self.devs:
                        dev.alloc_stats(self.bsp_iterations)
                    block = self._meeting_block(mode) if self.persistent else None
                # every device in device order: this process's, and across processes the
                # others' as mapped here (their vectors and stats rows: CUDA IPC)
                peers, address = self._rank_peers(block) if ipc else (self.devs, None)
                with together(self.ctx, "set up its persistent kernel", self.app, ipc):
                    outputs = [[dev] + ([p for p in peers if p is not dev]
                                        if self.peer_writes else []) for dev in self.devs]
                    for dev, written in zip(self.devs, outputs):
                        dev.set_outputs(written)
                    for dev, written in zip(self.devs, outputs):
                        dev.set_copies(peers, written)
                    for dev in self.devs:
                        dev.set_check_group(peers)
                    if self.persistent:
                        self._barrier = self._cross_device_barrier(block, address, ipc)
                    if ipc:         # a failed upload is heard by every rank here
                        self._settle_uploads()
                if self.ctx.ranks is not None and not self.peer_writes:
                    from groute.runtime.policies import to_the_others
                    from groute.runtime.router import Router
                    self._slices = Router(self.ctx.devices, self.ctx.devices, to_the_others,
                                          packet_size=max(n, 1), dtype=self.devs[0].fdt,
                                          ctx=self.ctx, name=f"{self.app}-slices")
            if self.persistent and mode == "async":     # the push kernel's meeting block
                self._barrier = self._cross_device_barrier(self._meeting_block(mode))
            check_every = tuning.check_every
            if check_every is None:     # across processes: the host checks every iteration,
                # so the run stops where the devices' own check would have
                check_every = (1 if self.ctx.ranks is not None else
                               8 if getattr(self.devs[0], "device_check", False) else 4)
            self.check_every = int(check_every)
            if mode == "async":     # the thresholds per unit of weight: W over every device
                self.push_rule = tuning.push_rule
                self.push_scale = unit_scale(n, sum(d.push_weight_total for d in self.devs))
            if mode == "async" and self.persistent:     # one sweep per round, no host
                self.sweeps = 1
                for dev in self.devs:
                    dev.set_push_peers(self.devs, offsets)
            elif mode == "async":
                self.sweeps = (int(tuning.sweeps) if tuning.sweeps
                               else default_sweeps(graph, k, self.ctx.backend))
                self.workers = [PushWorker(d, i, offsets, self.sweeps, 10 * self.max_iter)
                                for i, d in enumerate(self.devs)]
                if k > 1:
                    from groute.worklist import DistributedWorklist
                    self._worklist = DistributedWorklist(
                        self.ctx, packet_size=max(1024, min(1 << 20, n)))
            self._settle_uploads()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _in_arcs_on_devices(self, graph, offsets, *, factors=None, **options) -> list:
        """Each device's in-arcs of its range of ``offsets`` (:func:`~.layout.shard_in_arcs`
        of ``graph``'s arcs, ``options`` its), each built in its device's memory, on the
        devices' threads at once. ``factors`` (float64, one per arc) go to a CUDA device as
        float32, as its kernels read them."""
        if factors is not None and self.ctx.backend == "cuda":
            factors = np.asarray(factors, np.float32)
        with self.ctx.exclusive():
            return self.ctx.gather([
                self.ctx.submit(i, shard_in_arcs, graph.indptr, graph.indices,
                                (int(offsets[i]), int(offsets[i + 1])), factors=factors,
                                **options)
                for i in range(self.k)])

    def _across_ranks(self, mode: str, bsp_kernel: str, inplace: bool) -> str:
        """On a RankContext (one process per device): the kernel asked for ("auto", "bins";
        "csc" for "csc" and the COO pull, which does not run there); ValueError for what does
        not run across processes (the asynchronous push, Gauss-Seidel sweeps)."""
        if mode != "bsp":
            raise ValueError(f"{self.app}: mode={mode!r} does not run across processes yet; "
                             f"use mode='bsp' or 'auto'")
        if inplace:
            raise ValueError(f"{self.app}: inplace=True does not run across processes (each "
                             f"holds only its range)")
        return bsp_kernel if bsp_kernel in ("auto", "bins") else "csc"

    def _ranks_own_in_degrees(self, graph) -> np.ndarray:
        """The in-degrees (int64) of this rank's vertices of a graph held by ranks (a
        collective): undirected, their out-degrees; directed, every rank's counts of its arcs'
        targets, summed into each rank's range (one reduce-scatter)."""
        p = graph.part
        if not graph.directed:          # symmetric: a vertex's in-arcs are its out-arcs
            return np.diff(np.asarray(p.indptr, dtype=np.int64))
        counts = np.bincount(np.asarray(p.indices), minlength=graph.num_vertices)
        return self.ctx.ranks.reduce_scatter(counts.astype(np.int64), np.diff(graph.offsets),
                                             "sum", "the in-degrees")

    def _ranks_in_degree_facts(self, own) -> tuple[int, int]:
        """:func:`in_degree_facts` of the whole graph held by ranks, from every rank's of its
        own vertices' in-degrees ``own``: the sums added, the maxima's largest."""
        every = self._everyone([in_degree_facts(own)], "the in-degree facts")
        return sum(f[0] for f in every), max((f[1] for f in every), default=0)

    def _ranks_degree_split(self, graph, weights, in_degrees):
        """The ``"bins"`` layout of a graph held by ranks, as one process lays it out over its
        devices: the whole graph's :class:`~.layout.BinsLayout` from its ``in_degrees`` (so
        the hubs come first, and each kernel keeps their values in shared memory), cut by cost
        (:func:`~.layout.degree_split`). Each of this rank's out-arcs ``u -> v`` becomes the
        in-arc key ``new(v) << KEY_SHIFT | new(u)``, made and sorted on the rank's device, and
        goes to the rank that owns ``new(v)`` (one alltoallv,
        :func:`groute.graph.rank_graph.arcs_to_owners`); the arcs stay in the device's memory.
        ``(shards, offsets, layout)``: this rank's new shard, the new ranges, and the layout
        (its ``order`` and ``rank``)."""
        from groute.graph.rank_graph import arcs_to_owners, in_arc_keys
        p = graph.part
        indptr = np.asarray(p.indptr, np.int64)
        layout = BinsLayout(in_degrees)
        offsets = degree_split(layout.in_indptr, self.k)
        layout.in_indptr = layout.in_degrees = None         # vertex-sized, not needed after
        factors = None if weights is None else self.iteration.arc_factors(indptr, weights)
        # every vertex's share, in the new order (the solver's start vector is made of them)
        share = (self.iteration.scale or inverse_degrees)(np.diff(indptr))
        inv = np.concatenate(self._everyone([share], "the vertices' shares"))
        (device,) = self._mine(self.ctx.devices)    # one device a rank
        with device.on_compute():
            xp = device.xp
            keys = in_arc_keys(p, xp, rank=xp.asarray(layout.rank))
            in_indptr, cols, in_factors = arcs_to_owners(
                keys, offsets, self.ctx.ranks,
                values=None if factors is None else xp.asarray(factors),
                what=f"{self.app}'s in-arcs in degree order")
            del keys
            cols, in_factors = kernel_arcs(device, cols, in_factors)
        device.release_cached()         # the sort's and the exchange's temporaries
        me = self.ctx.ranks.rank
        lo, hi = int(offsets[me]), int(offsets[me + 1])
        shard = Shard(lo, hi, None, None, inv[layout.order[lo:hi]], cols, in_indptr,
                      in_factors=in_factors, device=device, weighted=factors is not None)
        return [shard], offsets, layout

    def _rank_shards(self, graph, mode: str, weights):
        """This process's :class:`~.layout.Shard` of a graph loaded by ranks: its rows, and for
        BSP its vertices' in-arcs, from every rank's out-arcs where the graph is directed or
        the arcs carry factors (:func:`groute.graph.rank_graph.ranked_in_arcs`, sorted on the
        rank's device and kept there)."""
        from groute.graph.rank_graph import ranked_in_arcs
        p = graph.part
        indptr = np.asarray(p.indptr, np.int64)
        indices = np.ascontiguousarray(p.indices, dtype=np.int32)
        factors = None if weights is None else self.iteration.arc_factors(indptr, weights)
        inv = (self.iteration.scale or inverse_degrees)(np.diff(indptr))
        if mode == "bsp" and (graph.directed or factors is not None):
            (device,) = self._mine(self.ctx.devices)    # one device a rank
            in_indptr, cols, in_factors = ranked_in_arcs(graph, self.ctx.ranks, factors,
                                                         device=device)
            with device.on_compute():
                cols, in_factors = kernel_arcs(device, cols, in_factors)
            device.release_cached()
            return [Shard(p.first, p.end, indptr, indices, inv, cols, in_indptr,
                          out_factors=factors, in_factors=in_factors, device=device,
                          weighted=factors is not None)]
        cols = in_indptr = None
        if mode == "bsp":                       # symmetric: its in-arcs are its out-arcs
            in_indptr, cols = indptr, indices
        return [Shard(p.first, p.end, indptr, indices, inv, cols, in_indptr,
                      out_factors=factors)]

    def _mine(self, per_device: list) -> list:
        """The entries of ``per_device`` (one per device) of the devices this process drives,
        in the order of :attr:`devs`."""
        return [per_device[i] for i in self._here]

    def _rank_peers(self, block) -> tuple[list, int]:
        """Every device in device order for the persistent kernel across processes, and the
        meeting block's address (``block``: rank 0's, None elsewhere) as mapped here: this
        process's :class:`~.device.IterationDevice`, and for each other rank a
        :class:`~.device.RankPeer` holding what this device's kernel needs of it: the
        vertices its in-arcs read (shared, packed to bits), its two contribution vectors and
        its stats rows (the device-side stopping check reads every device's) as mapped here
        (:class:`groute.device.ipc.PeerAddresses`). Every rank at once, after
        :meth:`~.device.IterationDevice.alloc_stats`."""
        from groute.device.ipc import PeerAddresses
        from .device import RankPeer
        self._addresses = PeerAddresses(self.ctx)
        reads = self._everyone([np.packbits(d.reads()) for d in self.devs],
                               "the vertices each device's in-arcs read")
        table = lambda arrays, what: self._addresses.table(  # noqa: E731
            self._everyone_local(arrays), what)
        vectors = [table([d.contrib[par] for d in self.devs], f"the contribution vectors ({par})")
                   for par in range(2)]
        stats = table([d.stats for d in self.devs], "the stats rows")
        address = self._addresses.table([block] + [None] * (self.k - 1), "the meeting block")[0]
        mine = dict(zip(self._here, self.devs))
        return [mine[i] if i in mine else
                RankPeer(np.unpackbits(reads[i], count=self.n).astype(bool),
                         [vectors[0][i], vectors[1][i]], stats[i])
                for i in range(self.k)], address

    def _meeting_block(self, mode: str):
        """Device 0's meeting block of the persistent kernels (the counter, where it stands;
        the push kernel's: and every device's sums of a decision), zeroed; None on a rank
        that does not drive device 0."""
        from groute.engines.protocol import MEETING_WORDS
        if 0 not in self._here:
            return None
        words = MEETING_WORDS if mode == "bsp" else ASYNC_MEETING_WORDS
        with self.devs[0].device.use():
            return self.devs[0].device.zeros(words, np.uint64)

    def _cross_device_barrier(self, block, address=None, across: bool = False):
        """The persistent kernels' :class:`~groute.engines.peer_barrier.CrossDeviceBarrier`
        over ``block`` (``address``: where this process reaches it, across processes)."""
        from groute.engines.peer_barrier import CrossDeviceBarrier
        return CrossDeviceBarrier(self.ctx.devices, block, address=address,
                                  ranks=self.ctx.ranks if across else None)

    def _settle_uploads(self) -> None:
        """What set-up queued on each CUDA device's compute stream lands before any device's
        first launch: another device's kernels read some of it (the meeting block)."""
        if self.ctx.backend == "cuda":
            for dev in self._mine(self.ctx.devices):
                with dev.use():
                    dev.xp.cuda.runtime.deviceSynchronize()

    def _everyone_local(self, mine: list) -> list:
        """A list over every device holding ``mine`` (one per device of :attr:`devs`) at this
        process's devices and None at the others'."""
        entries = [None] * self.k
        for i, value in zip(self._here, mine):
            entries[i] = value
        return entries

    def _everyone(self, mine: list, what: str) -> list:
        """Every device's value, from ``mine`` (one per device of :attr:`devs`): the other
        processes' too on a RankContext (:meth:`~groute.runtime.context.Context.share`)."""
        if self.ctx.ranks is None:
            return list(mine)
        return self.ctx.share(self._everyone_local(mine), what)

    def _everyone_once(self, mine: list, what: str) -> list:
        """:meth:`_everyone` for values fixed at set-up (``what`` names them): shared across
        processes at the first run only, then kept, so that later runs meet the other ranks
        no more than the run itself needs."""
        known = self._fixed_shared.get(what)
        if known is None:
            known = self._fixed_shared[what] = self._everyone(mine, what)
        return list(known)

    def _number(self, name: str, value) -> float:
        """``value`` as a float; a TypeError naming the argument where it is no number."""
        if isinstance(value, (bool, str, bytes)) or np.ndim(value) != 0:
            raise TypeError(f"{self.app}: {name} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TypeError(f"{self.app}: {name} must be a number, got {value!r}") from None

    def _check_base(self, base, n: int, mode: str):
        """``base`` as (one value, None) or (None, float64 array by position); errors name the
        argument (:attr:`base_name`)."""
        return self._check_vector(self.base_name, base, n, mode == "async")

    def _check_vector(self, name: str, value, n: int, nonnegative: bool):
        """``value`` (one number, or one per vertex by position) as (value, None) or (0.0,
        float64 array); errors name the argument ``name``."""
        sign = " and >= 0 in async mode" if nonnegative else ""
        if np.ndim(value) == 0:
            number = self._number(name, value)
            if not np.isfinite(number) or (nonnegative and number < 0):
                raise ValueError(f"{self.app}: {name} must be finite{sign}, got {value!r}")
            return number, None
        try:
            vec = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{self.app}: {name} must be a number or one number per vertex, "
                            f"got {value!r}") from None
        if vec.shape != (n,):
            raise ValueError(f"{self.app}: {name} needs one value per vertex ({n}), got shape "
                             f"{vec.shape}")
        bad = ~np.isfinite(vec) | ((vec < 0) if nonnegative else False)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{self.app}: {name} must be finite{sign} (vertex at position {i} "
                             f"has {vec[i]})")
        return 0.0, vec

    def _base_shares(self, offsets):
        """Per device, the base vector's values of its vertices in the solver's order, or None
        each without a base vector."""
        return self._in_order(self.base_vector, offsets)

    def _in_order(self, by_position, offsets):
        """Per device, the values of its vertices of ``by_position`` (an array by position, or
        None: None each) in the solver's order (the degree order, the partition's, or the
        graph's)."""
        if by_position is None:
            return [None] * (len(offsets) - 1)
        p = by_position
        if self._order is not None:
            p = p[self._order]
        elif self.partition is not None:
            p = np.asarray(self.partition.to_new(p))
        return [p[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]

    def set_base(self, base) -> None:
        """Solve with another base vector from the next run on (an array by position, checked
        as ``base`` is): what a solver built with a base vector may change without its set-up
        (PageRank's second solve for a ``dangling`` distribution)."""
        if self.base_vector is None:
            raise ValueError(f"{self.app}: set_base needs a solver built with a base vector")
        _, self.base_vector = self._check_base(base, self.n, self.mode)
        for dev, share in zip(self.devs, self._mine(self._base_shares(self.offsets))):
            dev.set_base(share)

    # running ------------------------------------------------------------------------------------
    @taking_turns
    def run(self) -> AppResult:
        """One solve from the start values; the answer by position, normalised as asked, with
        the stats of :func:`stats_keys`. Raises
        :class:`groute.errors.PowerIterationFailedConvergence` (NetworkX's) when the stopping
        rule was not met within ``max_iter``."""
        values, seconds, stats = self.solve(self.normalize)
        self.check_converged(stats)
        return self._result(values, seconds, stats)

    def check_converged(self, stats) -> None:
        """Raise :class:`groute.errors.PowerIterationFailedConvergence` (NetworkX's, with
        ``max_iter``) where a solve's ``stats`` say it did not converge."""
        if stats["converged"] is not False:
            return
        from groute.errors import PowerIterationFailedConvergence
        rounds = max(stats["rounds"] or [0])
        if stats["mode"] == "bsp":
            done = f"{stats['iterations']} iterations" + (
                " (the most a BSP run takes)" if self.bsp_iterations < self.max_iter else "")
        elif stats.get("stop") == "stuck":
            done = (f"{rounds} push rounds (no vertex was above the push threshold, yet the "
                    f"residuals failed the rule: some are not finite)")
        elif stats["persistent"]:
            done = f"{rounds} push rounds"
        else:
            done = f"{10 * self.max_iter} push sweeps per device"
        raise PowerIterationFailedConvergence(self.max_iter, (
            f"{self.app}: no convergence to tol {self.tol:g} in {done} (mode {stats['mode']})"
            f"{self.divergence_hint()}; raise max_iter (got {self.max_iter}) or tol"))

    def divergence_hint(self) -> str:
        """What the app adds to a failed convergence's message (Katz: when alpha is too big)."""
        return ""

    def solve(self, normalize=None) -> tuple[np.ndarray, float, dict]:
        """One solve from the start values, scaled as ``normalize`` says
        (:data:`NORMALIZATIONS`: by the sum, the Euclidean norm, or None: as the kernels left
        them) and not checked: ``(values by position, seconds,
        stats)``. Each device finishes its part (float64, scaled by the sum or norm over every
        device's) and the parts land on the host in one copy each
        (:func:`~groute.runtime.answer_landing.land_answer`)."""
        keys = stats_keys(self.iteration)
        if self.n == 0:
            return np.zeros(0), 0.0, complete_stats(keys, {
                "mode": self.mode, "devices": [d.device.name for d in self.devs],
                self.iteration.alpha_name: self.alpha, "tol": self.tol, "bytes_sent": 0,
                "iterations": 0 if self.mode == "bsp" else None, "converged": True})
        with DeviceTimer(self.ctx) as timer:
            stats = self._run_bsp() if self.mode == "bsp" else self._run_async()
        if self.mode == "bsp" and self.persistent:
            stats["iteration_trace"] = self._trace_summary(stats["iterations"])
        parts = [d.bsp_answer() if self.mode == "bsp" else d.push_answer() for d in self.devs]
        parts = self._normalized_parts(parts, normalize)
        entries = self._everyone_local(parts)
        renumbering = self._renumbering()
        if renumbering is not None:     # each device makes its slice in the graph's order
            values = land_answer(self.ctx, renumbering.gather(entries), "the values")
        else:
            if self._order is not None and self._whole_renumbering is None:
                self._whole_renumbering = WholeAnswerRenumbering(self.ctx, self.devs[0].device,
                                                                 self._rank)
            values = land_answer(self.ctx, entries, "the values", self._whole_renumbering)
            if self.partition is not None:
                values = np.asarray(self.partition.to_original(values), dtype=np.float64)
        stats.update(devices=[d.name for d in self.ctx.devices], mode=self.mode,
                     partition=self.partition.method if self.partition is not None else None,
                     layout=self.layout,
                     vertices_per_device=np.diff(self.offsets).tolist(), tol=self.tol)
        stats[self.iteration.alpha_name] = self.alpha
        return values, timer.seconds, complete_stats(keys, stats)

    def _renumbering(self):
        """The gather that puts the answer back into the graph's order on the devices
        (:class:`~groute.runtime.renumber.DeviceRenumbering`, made at the first answer) where
        the devices hold it by new ids (a renumbering partition, or "bins"' degree order), or
        None: nothing renumbered, or devices that cannot gather part by part (several
        processes', or no peer access: "bins"' whole answer is then put in order on one
        device, :class:`~groute.runtime.renumber.WholeAnswerRenumbering`)."""
        if self._device_renumbering is None and gather_on_devices(self.ctx, np.float64):
            index = None
            if self.partition is not None and self.partition.renumbers:
                index = self.partition.perm
            elif self._order is not None:
                index = self._rank
            if index is not None:
                self._device_renumbering = DeviceRenumbering(self.ctx, index, self.offsets)
        return self._device_renumbering

    def _normalized_parts(self, parts, how):
        """This process's devices' ``parts`` (float64, on each device) scaled as ``how`` says
        (:data:`NORMALIZATIONS`) by the sum (or the norm) over every device's part, one
        read-back per device and the totals shared across processes: "sum" divides by the sum
        (uniform ``1/n`` when it is not positive), "l2" by the norm (unchanged when it is zero
        or not finite: a run that diverged)."""
        if how not in ("sum", "l2") or self.n == 0:
            return parts
        mine = []
        for dev, part in zip(self.devs, parts):
            with dev.device.on_compute(), np.errstate(over="ignore", invalid="ignore"):
                mine.append(float(part.sum() if how == "sum" else part @ part))
        sums = self._everyone(mine, "the values' sums")
        try:
            total = math.fsum(sums)
        except (OverflowError, ValueError):     # past float64's range, or inf - inf: as NumPy
            with np.errstate(over="ignore", invalid="ignore"):
                total = float(np.sum(sums))
        if how == "sum" and not total > 0:
            scaled = lambda xp, part: xp.full(part.shape[0], 1.0 / self.n)   # noqa: E731
        else:
            if how == "l2":
                total = math.sqrt(total)
                if not total > 0 or not math.isfinite(total):   # all zero, or it diverged
                    return parts
            scaled = lambda xp, part: part / total     # noqa: E731
        out = []
        for dev, part in zip(self.devs, parts):
            with dev.device.on_compute():
                out.append(scaled(dev.device.xp, part))
        return out

    def _run_bsp(self) -> dict:
        k = self.k
        base = self.base_value
        t = 0
        done_events = [None] * k
        converged_at = None
        history = []
        if self.persistent:     # the kernels start with bsp_reset's work themselves
            t, rows = self._run_persistent(base, self.start)
            converged_at = self._check_stats(0, t, history, converged_at, rows)
            if converged_at not in (t, None) or (converged_at is None
                                                 and t < self.bsp_iterations):
                raise RuntimeError(f"persistent {self.app}: the kernels stopped after {t} iterations "
                                   f"but the host finds the stopping rule first met at "
                                   f"{converged_at} (stats of every device, device order)")
        else:
            for dev in self.devs:
                dev.bsp_reset()
        while t < self.bsp_iterations and converged_at is None:
            batch_end = min(t + self.check_every, self.bsp_iterations)
            for it in range(t, batch_end):
                self._bsp_iteration(it, base, done_events)
            converged_at = self._check_stats(t, batch_end, history, converged_at)
            t = batch_end
        if converged_at is not None and self.devs[0].device_check:     # the kernels skipped the iterations after convergence
            t = converged_at
            history = history[:t]
        if self.peer_writes:
            per_iteration = sum(self._everyone_once(
                [dev.peer_stores * np.dtype(dev.fdt).itemsize for dev in self.devs],
                "the peer stores"))
        else:
            per_iteration = self.n * np.dtype(self.devs[0].fdt).itemsize * (k - 1)
        dev0 = self.devs[0]
        kernel = ("bins" if dev0.bins else f"csc k{dev0.lanes_k}" if dev0.fused else "coo") \
            if dev0.cuda else "numpy"
        return {"iterations": t, "converged_at": converged_at, "converged": converged_at is not None,
                "kernel": kernel, "bsp_kernel": self.bsp_kernel, "inplace": dev0.inplace,
                "device_check": dev0.device_check, "check_every": self.check_every,
                "persistent": self.persistent, "persistent_reason": self.persistent_reason,
                "exchange": None if k == 1 else ("peer stores" if self.peer_writes else "peer copies"),
                "l1_change": history[-1] if history else None,
                "arcs_per_device": self._everyone_once([dev.num_in for dev in self.devs],
                                                       "the arcs per device"),
                "bytes_sent": int(t * per_iteration) if k > 1 else 0}

    def _check_stats(self, t0, t1, history, converged_at, rows=None):
        """Iterations [t0, t1) by every device's stats rows (added in device order, as the
        kernels add them; ``rows``: each device's rows already on the host, else read here):
        their relative changes appended to ``history``; returns the first iteration count
        that met the stopping rule (``converged_at`` if already known)."""
        if t1 <= t0:
            return converged_at
        if rows is None:
            rows = self._everyone([dev.bsp_stats(t0, t1) for dev in self.devs],
                                  "the iterations' sums")
        else:
            rows = [r[t0:t1] for r in rows]
        parts = rows[0].copy()
        for r in rows[1:]:      # device order, as the kernels add them
            parts += r
        diff, mass = parts[:, 0], parts[:, 1]
        with np.errstate(invalid="ignore", over="ignore"):     # sums of a diverging run
            history.extend(np.where(mass > 0, diff / np.where(mass > 0, mass, 1.0), 0.0).tolist())
        met = np.flatnonzero(self.iteration.stopped(diff, mass,
                                                    self.iteration.bound(self.tol, self.n)))
        if converged_at is None and met.size:
            converged_at = t0 + int(met[0]) + 1
        return converged_at

    def _run_persistent(self, base, y0) -> tuple[int, list]:
        """One persistent launch per device for the whole run (iterate.cu ``bsp_persistent``);
        returns the iterations run and each device's stats rows (host). Raises when a device
        gave up at a meeting (a peer stopped or never started) or the devices disagree; the
        meeting counter is then reset (after every device has finished), so the next run
        starts clean."""
        from groute.engines.peer_barrier import timeout_ns
        from groute.engines.protocol import LaunchStop
        bar = self._barrier
        mine = dict(zip(self._here, self.devs))
        launched, failure = bar.launch_each(
            lambda i, _: mine[i].persistent_launch(self.bsp_iterations, base, y0, bar.ptr, bar.base,
                                                   self.k, timeout_ns()))
        phase = "could not launch its kernel"
        try:
            for i in launched:
                mine[i].persistent_fetch()
            results = {i: mine[i].persistent_result() for i in launched}
        except BaseException as exc:
            if bar.ranks is None:
                raise
            if failure is None:     # the other ranks hear it, then all raise
                failure, phase = exc, "failed while its kernel ran"
            results = {}
        if bar.ranks is not None:   # sent to every rank: the stats rows as far as it ran
            results = {i: (c, rows[:LaunchStop.read(self.ctx.devices[i].name, c).ran])
                       for i, (c, rows) in results.items()}
        ends, failure = bar.share_ends(results, failure, phase, f"persistent {self.app}")
        launched = [i for i, end in enumerate(ends) if end is not None]
        results = [ends[i] for i in launched]
        stops = [LaunchStop.read(self.ctx.devices[i].name, c)
                 for i, (c, _) in zip(launched, results)]
        iterations = {stop.ran for stop in stops}
        bar.finish(stops, failure=failure, ok=len(iterations) == 1,
                   what=f"persistent {self.app}", instead="persistent=False")
        if len(iterations) != 1:
            raise RuntimeError(f"persistent {self.app}: the devices ran different iteration counts "
                               f"{[stop.ran for stop in stops]}")
        t = iterations.pop()
        return t, [rows for _, rows in results]

    def _trace_summary(self, iterations: int) -> dict | None:
        """PageRankTuning.trace: where a persistent iteration's time goes, in microseconds, median
        over the traced iterations per device (sweep and grid barrier, cross-device wait, the
        rule and second grid barrier, the whole iteration), and each device's start after the
        first device's (the launch skew) and its end before the last device's.

        Each GPU stamps its own global timer, and those of two GPUs are not set to the same
        time and drift apart, so the devices' stamps are put on device 0's clock first: every
        device passes the first meeting within the meeting's release time of the others (one
        poll of one word), so each device's stamps are shifted by the difference between its
        passing of meeting 0 and device 0's."""
        rows = self._everyone([d.persistent_trace(iterations) for d in self.devs],
                              "the persistent kernels' traces")
        if rows[0] is None or not len(rows[0]):
            return None
        met = int(rows[0][0, 2])
        rows = [r - (int(r[0, 2]) - met) for r in rows]
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
        if self._slices is not None:
            self._exchange_slices((t + 1) % 2)

    def _exchange_slices(self, par: int) -> None:
        """Across processes, after an iteration: this process's slice of the contribution
        vector it wrote (parity ``par``) to every other, and theirs into its own (through the
        Router's flush), copied on the device's stream once they landed; the slices are the
        devices' copies of one process."""
        router, dev, me = self._slices, self.devs[0], self._here[0]
        stream = dev.stream
        vector = dev.contrib[par % len(dev.contrib)]
        router.inputs[me].send(vector[dev.lo:dev.hi], event=stream.record())
        router.flush()
        received = [router.outputs[me].poll() for _ in range(self.k - 1)]
        for pending in received:
            source = int(pending.source.device.index)
            pending.wait_on(stream)
            stream.copy(vector[self.offsets[source]:self.offsets[source + 1]], pending.data)
        done = stream.record()
        for pending in received:
            pending.release(after=done)

    def _run_async(self) -> dict:
        if self.persistent:
            return self._run_async_persistent()
        mean = self.base_value if self.base_vector is None else float(self.base_vector.mean())
        eps = host_threshold(self.iteration, self.tol, self.n, mean, self.push_scale)
        for w in self.workers:
            w.configure(eps, self.base_value)
        if self._worklist is None:
            w = self.workers[0]
            w.start(None)
            rounds = 0
            while w.work.near:
                self.ctx.check()
                w.advance(None)
                rounds += 1
            wl = {"rounds": [rounds], "items_sent": {}, "bytes_moved": 0}
        else:
            wl = self._worklist.run(self.workers, mode="async")
        converged = not any(w.exhausted for w in self.workers)
        return {"rounds": wl["rounds"], "sweeps_per_round": self.sweeps,
                "vertices_pushed_per_device": [w.pushed for w in self.workers],
                "arcs_pushed_per_device": [w.arcs for w in self.workers],
                "items_sent": wl.get("items_sent", {}), "bytes_sent": wl.get("bytes_moved", 0),
                "push_rule": self.push_rule, "eps": eps, "converged": converged,
                "persistent": False,
                "persistent_reason": self.persistent_reason}

    def _run_async_persistent(self) -> dict:
        """One launch per device for the whole asynchronous solve (iterate.cu
        ``pr_async_persistent``): every ``check_every`` rounds the devices decide together
        whether the stopping rule holds, for at most ten times ``max_iter`` rounds (the host
        path's budget of sweeps). Raises when a device gave up at a meeting (a peer stopped or
        never started) or the devices disagree; the meeting counter is then reset, as
        :meth:`_run_persistent` does."""
        from groute.engines.peer_barrier import timeout_ns
        from groute.engines.protocol import LaunchStop
        base_sum = (self.base_value * self.n if self.base_vector is None
                    else float(self.base_vector.sum()))
        eps0, per_mass = push_thresholds(self.iteration, self.tol, self.n, base_sum,
                                         self.push_scale)
        bound = self.iteration.bound(self.tol, self.n)
        max_rounds = min(10 * self.max_iter, 2**31 - 1)     # an int32 of the kernel
        bar = self._barrier
        launched, failure = bar.launch_each(
            lambda i, _: self.devs[i].push_persistent_launch(
                i, self.k, self.base_value, eps0, per_mass, bound, self.check_every, max_rounds,
                bar.ptr, bar.base, timeout_ns()))
        for i in launched:
            self.devs[i].persistent_fetch()
        blocks = [self.devs[i].persistent_result()[0] for i in launched]
        stops = [LaunchStop.read(self.devs[i].device.name, c) for i, c in zip(launched, blocks)]
        ends = {(stop.ran, stop.status) for stop in stops}
        bar.finish(stops, failure=failure, ok=len(ends) == 1,
                   what=f"persistent async {self.app}", instead="persistent=False")
        if len(ends) != 1:
            raise RuntimeError(f"persistent async {self.app}: the devices stopped at different "
                               f"rounds or for different reasons "
                               f"{[(stop.ran, stop.status) for stop in stops]}")
        rounds, status = ends.pop()
        if status not in (ASYNC_CONVERGED, ASYNC_STUCK, ASYNC_ROUNDS):
            raise RuntimeError(f"persistent async {self.app}: the kernels stopped after {rounds} "
                               f"rounds without a decision (status {status})")
        resid, mass = decided_sums(self.app, blocks, status, self.iteration, bound)
        return persistent_async_stats(blocks, rounds, status, resid, mass, push_rule=self.push_rule,
                                      eps=eps0, check_every=self.check_every)

    def _release(self):
        self._device_renumbering = None     # its index slices on the devices
        self._whole_renumbering = None      # its index on this process's first device
        if self._addresses is not None:     # every rank at once (PeerAddresses.close)
            self._addresses.close()
            self._addresses = None
        if self._slices is not None:
            self._slices.close()
            self._slices = None
        if self._worklist is not None:
            self._worklist.close()
            self._worklist = None


#: what the persistent push kernel's stop codes mean (``stats["stop"]``)
ASYNC_STOPS = {ASYNC_CONVERGED: "converged", ASYNC_STUCK: "stuck", ASYNC_ROUNDS: "rounds"}


def persistent_async_stats(blocks, rounds: int, status: int, resid: float, mass: float, *,
                           push_rule: str, eps: float, check_every: int) -> dict:
    """The stats of a persistent push solve (a subset of :data:`STATS_KEYS`) from the devices'
    control blocks ``blocks`` after the kernels stopped at ``rounds`` with ``status``, and the
    residual and mass sums of their last decision (:func:`decided_sums`)."""
    k = len(blocks)
    sent = [int(c[A_SENT]) for c in blocks]
    return {"rounds": [rounds] * k, "sweeps_per_round": 1,
            "vertices_pushed_per_device": [int(c[A_PUSHED]) for c in blocks],
            "arcs_pushed_per_device": [int(c[A_ARCS]) for c in blocks],
            # an entry is one float32 reduction into its owner's residual
            "items_sent": {f"{i}->peers": n for i, n in enumerate(sent)} if k > 1 else {},
            "bytes_sent": 4 * sum(sent), "push_rule": push_rule, "eps": eps,
            "check_every": check_every, "l1_change": resid / mass if mass > 0 else 0.0,
            "converged": status == ASYNC_CONVERGED, "persistent": True,
            "persistent_reason": None, "stop": ASYNC_STOPS[status]}


def decided_sums(app: str, blocks, status: int, iteration, bound: float) -> tuple:
    """The residual and mass sums of the persistent push kernel's last decision (each device's
    control block, ``blocks``, holds the sums it added up), checked as the host checks the BSP
    kernels' stops: every device must have added up the same sums, bit for bit, and the
    stopping rule on them must say what the kernels decided (``status``). A flush not yet
    visible at the decision's meeting would show here. Raises RuntimeError naming ``app``."""
    totals = {(int(c[A_TOTAL_RESID]), int(c[A_TOTAL_MASS])) for c in blocks}
    if len(totals) != 1:
        raise RuntimeError(f"persistent async {app}: the devices decided on different sums "
                           f"{sorted(totals)}")
    words = blocks[0].view(np.float64)
    resid, mass = float(words[A_TOTAL_RESID]), float(words[A_TOTAL_MASS])
    held = bool(iteration.stopped(np.array([resid]), np.array([mass]), bound)[0])
    if held != (status == ASYNC_CONVERGED):
        raise RuntimeError(f"persistent async {app}: the kernels stopped as "
                           f"{ASYNC_STOPS.get(status, status)!r} but the stopping rule on their "
                           f"sums (residuals {resid:.6g}, mass {mass:.6g}) says "
                           f"{'it holds' if held else 'it does not hold'}")
    return resid, mass
