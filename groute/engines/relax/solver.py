"""The relaxation engines' solver: any :class:`~.relaxation.Relaxation` on the distributed
worklist, the persistent peer kernels or the linked workers.

A :class:`RelaxSolver` partitions the graph once (each device owns a contiguous range of
renumbered vertices), uploads every device's rows, and builds one worker per device (NumPy:
:mod:`~groute.engines.relax.cpu_worker`; CUDA: :mod:`~groute.engines.relax.cuda_worker`, a fused
persistent kernel) and one :class:`~groute.worklist.DistributedWorklist`. ``run(source)`` then
times only the relaxation: remote updates travel as ``(vertex, value)`` items to the owner, which
keeps the smaller value and enqueues the vertex if it improved. Where the devices reach each
other's memory (``exchange="peer"``, or ``"auto"`` on CUDA devices with NVLink) the host leaves
the loop: BSP runs the persistent level-synchronous kernels (:mod:`~groute.engines.relax.peer`:
the solver builds only the arrays they read, and the
:class:`~groute.engines.relax.peer.PeerTraversal` over them), and async on several devices runs
the fused workers with device-initiated links (:mod:`~groute.engines.relax.linked`: the
workers, no worklist, and the :class:`~groute.engines.relax.linked.LinkedTraversal` over them).

The relaxation says what an arc offers (its ``cuda`` expression becomes the kernels'
``arc_value``, its ``numpy`` the CPU worker's), whether it reads weights and whether every arc
adds one (``unit``: pull levels, the unique queue and the level-synchronous peer kernel; the
``auto`` rules of :mod:`~groute.engines.relax.rules`, unit-step or weighted). What the app adds
is a subclass: the relaxation, its ``default_delta``, its answer's dtype and "unreached"
value, and its own options mapped onto the engine's (BFS's ``cutoff`` is a
``ceiling``).

Values are int32 for int weights or none (exact), float32 for float weights; results come back
as :attr:`RelaxSolver.answer_dtype` with :attr:`RelaxSolver.unreached` where the run did not
reach, indexed by position, with the graph's ids alongside (:class:`~groute.results.AppResult`):
each device finishes its part (dtype, "unreached") and the parts land on the host in one copy
each (:func:`~groute.runtime.answer_landing.land_answer`); on one CUDA device the answer is also
kept there (``AppResult.to_cupy``). An app whose distances add the weights and could pass
their type (SSSP: ``checks_overflow``) is checked first
(:func:`~groute.engines.relax.values.check_overflow`, on the kernels' values).
"""
from __future__ import annotations

import logging
import math
import numbers
from dataclasses import fields

import numpy as np

from groute.graph.arcs import arc_named
from groute.graph.arrays import array_module
from groute.graph.csr import kept_on
from groute.graph.partition import DEFAULT_PARTITION
from groute.graph.partition import METHODS as PARTITIONS
from groute.graph.rank_graph import loading_ranks, whole_rows
from groute.tuning import TraversalTuning, WorklistTuning
from groute.worklist import MODES, ROUTINGS, DistributedWorklist, infinity

from groute.results import AppResult, complete_stats
from groute.runtime.answer_landing import land_answer
from groute.runtime.context import taking_turns
from groute.runtime.renumber import DeviceRenumbering, gather_on_devices
from groute.solver import DeviceTimer, Solver, source_position

from .memory import RECEIVE_BUFFERS, packet_items, traversal_bytes
from .pull import pull_levels
from .relaxation import Relaxation
from .rules import UNIT_STEP_RULES, WEIGHTED_RULES
from .values import check_overflow, overflow_possible

log = logging.getLogger(__name__)

EXCHANGES = ("auto", "host", "peer")
#: the keys of a relaxation result's ``stats``, on every engine: the run's choices (app, mode,
#: routing: None on the peer path, exchange: None on one device's worklist, priority, delta,
#: devices, backend), work counters (items processed per device, arcs traversed, items sent,
#: forwarded and absorbed, bytes moved, rounds in all and per device, levels per device, kernel
#: launches and grid reshapes, pull rounds and levels, deferrals, threshold advances) and, where
#: the engine measures them, host phase times and the kernels' level trace
STATS_KEYS = ("app", "mode", "routing", "exchange", "priority", "delta", "devices", "backend",
              "items_processed", "edges_traversed", "items_sent", "items_forwarded",
              "bytes_moved", "rounds", "rounds_per_device", "levels", "launches", "reshapes",
              "pull_rounds", "pull_levels", "deferrals", "threshold_advances", "phase_seconds",
              "advance_seconds", "items_absorbed", "level_trace_us")


class _Identity:
    """The partition of a single device: everything, ids unchanged."""

    def __init__(self, graph):
        self.num_parts = 1
        self.graph = graph
        self.offsets = np.array([0, graph.num_vertices], dtype=np.int64)

    def local(self, i):
        return self.graph

    #: nothing is renumbered
    renumbers = False

    def to_original(self, values):
        return values

    def to_new_id(self, v):
        return int(v)

    def to_new_ids(self, positions):
        return np.asarray(positions, dtype=np.int64)


class _Partitioned:
    def __init__(self, p):
        self.p = p
        self.num_parts = p.num_parts
        self.graph = p.graph
        self.offsets = np.asarray(p.offsets, dtype=np.int64)

    def local(self, i):
        return self.p.local(i)

    @property
    def renumbers(self) -> bool:
        """Whether the partition gave the vertices new ids (METIS, random)."""
        return self.p.renumbers

    def to_original(self, values):
        return self.p.to_original(values)

    def to_new_id(self, v):
        return int(self.to_new_ids([v])[0])

    def to_new_ids(self, positions):
        return np.asarray(self.p.perm[np.asarray(positions, dtype=np.int64)], dtype=np.int64)


def rules_for(relaxation: Relaxation) -> dict:
    """The ``auto`` rules a relaxation is decided by: unit-step or weighted
    (:mod:`~groute.engines.relax.rules`)."""
    return UNIT_STEP_RULES if relaxation.unit else WEIGHTED_RULES


class RelaxSolver(Solver):
    """The solver of a :class:`~.relaxation.Relaxation` (BFS: :class:`groute.apps.bfs.BFS`,
    SSSP: :class:`groute.apps.sssp.SSSP`); see the module docstring. A subclass sets
    :attr:`relaxation` (and may set :attr:`app`, :attr:`answer_dtype`, :attr:`unreached`,
    :attr:`checks_overflow`, :meth:`default_delta`).

    ``mode``: ``"async"`` (fused workers, asynchronous exchange), ``"bsp"`` (one level per
    round, global barrier, all-to-all exchange; a unit relaxation on a symmetric graph also
    pulls across devices) or ``"auto"`` (the default: the ``mode`` rule, :attr:`rules`).
    ``priority`` with ``delta`` (value units; None: :meth:`default_delta`) defers items beyond
    the threshold; ``"auto"`` (the default) is the ``priority`` rule; it is reported off
    wherever no finite window applies. ``exchange``: ``"host"``
    (the distributed worklist: the host moves the items and, in BSP, steers every level),
    ``"peer"`` (one launch per device for the whole run, exchanging through peer memory; CUDA
    devices, NVLink between them: BSP is :mod:`~groute.engines.relax.peer`, where a relaxation
    that is not unit keeps ``priority`` too; async on several devices is
    :mod:`~groute.engines.relax.linked`) or ``"auto"``
    (the default: the app's ``exchange`` rule, peer where it can run). ``tuning``: how the CUDA
    kernels run, a :class:`~groute.tuning.TraversalTuning`; ``worklist_tuning``: how the
    distributed worklist runs (routing, rounds per launch, packets, outbox flushes), a
    :class:`~groute.tuning.WorklistTuning` whose fields other than the defaults select the
    worklist (the peer kernels have no routing, packets or outboxes and run in one launch);
    None: ``<Tuning>.from_environment()``.

    ``run`` returns the stats keys of :data:`STATS_KEYS` whatever engine ran (None where a
    counter does not apply to it).
    """

    #: what the solver relaxes (a subclass sets it)
    relaxation: Relaxation | None = None
    #: the name in ``stats["app"]`` and in errors (None: the relaxation's name)
    app: str | None = None
    #: the ``auto`` rules: mode, priority, exchange (a subclass gets :func:`rules_for` its
    #: relaxation unless it sets its own; the CLI prints them)
    rules: dict | None = None
    #: the answer's dtype, and its value at vertices the run did not reach
    answer_dtype = np.int32
    unreached = -1
    #: whether a run checks that no shortest distance passed the value type
    #: (:func:`~groute.engines.relax.values.check_overflow`: distances that add the arcs'
    #: weights, SSSP's; a relaxation of its own may offer "unreached" on purpose)
    checks_overflow = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.relaxation is not None and "rules" not in cls.__dict__:
            cls.rules = rules_for(cls.relaxation)

    engine_family = "relax"

    def __init__(self, graph, *, ctx=None, backend="auto", devices="auto", timeout=None,
                 partition=DEFAULT_PARTITION, mode="auto", seed=0, priority="auto", delta=None,
                 exchange="auto", tuning=None, worklist_tuning=None):
        relaxation = self.relaxation
        if not isinstance(relaxation, Relaxation):
            raise TypeError(f"{type(self).__name__}.relaxation must be a "
                            f"groute.engines.Relaxation (subclass RelaxSolver and set it), got "
                            f"{type(relaxation).__name__}")
        self.app = self.app or relaxation.name
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {', '.join(EXCHANGES)}; got {exchange!r}")
        if mode not in MODES and mode != "auto":
            raise ValueError(f"mode must be auto or one of {', '.join(MODES)}; got {mode!r}")
        wl = self.worklist_tuning = WorklistTuning.given(worklist_tuning, "worklist_tuning")
        if wl.routing not in ROUTINGS:
            raise ValueError(f"WorklistTuning.routing must be one of {', '.join(ROUTINGS)}; "
                             f"got {wl.routing!r}")
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}; got {partition!r}")
        graph = graph.to_host() if hasattr(graph, "to_host") else graph
        self.graph = graph
        self.peer = self.worklist = None
        self.exchange = exchange
        self.tuning = TraversalTuning.given(tuning)
        #: the worklist's knobs set to other than their defaults, as "name=value": they
        #: select the worklist (see :meth:`peer_unavailable`)
        self.worklist_options = [f"{f.name}={getattr(wl, f.name)!r}" for f in fields(wl)
                                 if getattr(wl, f.name) != f.default]
        self.kind, self.weighted_values = self._value_kind(graph)
        #: every arc adds one on this graph (the relaxation's unit, or a weighted one that adds
        #: one on a graph without weights): the workers' pull levels and unique queue
        self.unit_step = relaxation.adds_one(self.weighted_values)
        self._open_context(ctx, devices=devices, backend=backend, timeout=timeout, graph=graph,
                           estimate=traversal_bytes, weighted=self.weighted_values)
        try:
            self._check_memory(traversal_bytes, graph, weighted=self.weighted_values)
            self._setup(graph, partition, mode, priority, delta, seed)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ setup
    def _value_kind(self, graph):
        """``(kind, weighted)``: "int" or "float" values, and whether the arcs carry weights
        (checked here: >= 0 and finite); a relaxation without weights (BFS) has int values. Sets
        :attr:`overflow_possible` from the largest weight
        (:func:`~groute.engines.relax.values.overflow_possible`)."""
        self.overflow_possible = False
        if not self.relaxation.weighted:
            return "int", False
        w = graph.weights
        if w is None:
            log.info("%s: graph %s has no weights; using weight 1 on every arc", self.app, graph.name)
            return "int", False
        w = np.asarray(w)
        problem = None
        if w.size and not np.isfinite(w).all():
            bad = int(np.flatnonzero(~np.isfinite(w))[0])
            what = "NaN" if np.isnan(w[bad]) else "infinite"
            problem = (f"{self.app}: the weight of arc {arc_named(graph, bad)} is {what}; "
                       f"{self.app} needs finite weights >= 0")
        elif w.size and (w.min() < 0):
            bad = int(np.argmin(w))
            problem = (f"{self.app}: the weight of arc {arc_named(graph, bad)} is negative "
                       f"({w[bad]}); {self.app} needs weights >= 0")
        ranks = loading_ranks(graph)
        if ranks is not None:               # this rank's arcs: every rank raises the first's
            problem = next((p for p in ranks.allgather(problem, what="the weights' check")
                            if p is not None), None)
        if problem is not None:
            raise ValueError(problem)
        kind = "int" if w.dtype.kind in "iu" else "float"
        self.overflow_possible = bool(w.size) and overflow_possible(graph.num_vertices, w.max(), kind)
        return kind, True

    def _setup(self, graph, partition, mode, priority, delta, seed):
        k = self.ctx.num_devices
        n = graph.num_vertices
        self._check_device_count(self.app, n)
        self._device_renumbering = None     # made at the first answer that needs it
        if k == 1 and not hasattr(graph, "split_by_ranges"):   # a RankGraph: its own split
            self.part = _Identity(graph)
        else:
            from groute.graph import partition_graph
            self.part = _Partitioned(partition_graph(graph, k, method=partition, seed=seed))
        if self.ctx.ranks is not None:
            mode = self._across_ranks(mode, graph)
        if mode == "auto":
            mode = self.auto_mode(graph)
        self.mode = mode
        self.use_peer = self._use_peer(self.exchange)
        wl = self.worklist_tuning
        self.routing = None if self.use_peer else wl.routing
        facts = self._facts(graph, delta)
        if isinstance(priority, str):
            if priority != "auto":
                raise ValueError(f"priority must be True, False or 'auto'; got {priority!r}")
            priority = self.rules["priority"].decide(facts).choice
        # soft priority needs a window the exchange can keep, and a finite one
        self.priority = bool(priority) and facts["windowed"]()
        self.delta = self._pick_delta(graph, delta)
        self.priority = self.priority and not math.isinf(self.delta)
        #: per device: the worklist's worker, or on the peer path only the arrays its kernel reads
        self.workers = self._device_shares(graph, wl.flush_items)
        if self.use_peer:
            self.peer = self._peer_traversal(graph)
        else:
            self.worklist = DistributedWorklist(self.ctx, routing=wl.routing,
                                                packet_size=wl.packet_size or packet_items(n),
                                                num_buffers=RECEIVE_BUFFERS)

    def _across_ranks(self, mode, graph):
        """On a RankContext (one process per device) the worklist runs level by level
        (:mod:`groute.worklist.distributed`): ``mode`` "auto" is "bsp", "async" a ValueError.
        The overflow check of the values takes every rank's largest weight."""
        if mode == "async":
            raise ValueError(f"{self.app}: mode='async' does not run across processes yet (the "
                             f"worklist's exchange between ranks is level by level); use "
                             f"mode='bsp' or 'auto'")
        if self.weighted_values:
            w = np.asarray(graph.weights)
            # a rank without arcs sends a 0 of its weights' kind, as the others send theirs
            top = self.ctx.ranks.allreduce(w.max() if w.size else w.dtype.type(0), "max")
            self.overflow_possible = overflow_possible(graph.num_vertices, top, self.kind)
        return "bsp"

    def _device_shares(self, graph, flush_items):
        """Every device's part of the solver, built on the devices' threads at once: on the peer
        path the arrays its kernel reads (:func:`~groute.engines.relax.peer.arrays_needed`), else
        the worklist's worker (CUDA or NumPy)."""
        offsets = self.part.offsets
        args = dict(offsets=offsets, num_vertices=graph.num_vertices, kind=self.kind,
                    weighted=self.weighted_values)
        if self.ctx.backend == "cuda":
            args["tuning"] = self.tuning
        if self.use_peer and self.mode == "bsp":
            from .cuda_worker import CUDATraversalArrays as build
            from .peer import arrays_needed
            args.update(arrays_needed(self.relaxation.unit))
        elif self.use_peer:         # linked: the fused workers without outboxes
            from .cuda_worker import CUDATraversalWorker as build
            args.update(out_capacity=1, relaxation=self.relaxation, unit=self.unit_step)
        else:
            args.update(symmetric=not getattr(graph, "directed", True),
                        relaxation=self.relaxation, unit=self.unit_step)
            if flush_items:
                args["flush_items"] = flush_items
            if self.ctx.backend == "cuda":
                from .cuda_worker import CUDATraversalWorker as build
            else:
                from .cpu_worker import CPUTraversalWorker as build
        # the partition's local graphs on this thread, the uploads on the devices' threads
        with self.ctx.exclusive():
            shares = self.ctx.gather([
                self.ctx.submit(i, build, self.part.local(i) if self.ctx.is_local(i) else None,
                                lo=offsets[i], hi=offsets[i + 1], **args)
                for i in range(self.ctx.num_devices)])
        if not self.use_peer:
            for worker in shares:
                if worker is not None:          # None: another rank's device
                    worker.set_delta(self.delta if self.priority else math.inf)
        return shares

    def peer_unavailable(self):
        """Why the peer kernel cannot run this solver's traversal (None: it can): the solver asks
        for the worklist (``exchange="host"``, or a :class:`~groute.tuning.WorklistTuning` other
        than the defaults), or the devices
        cannot run it (the machine is asked once per solver). ``auto_mode`` asks too, so that it
        picks its mode for the exchange that will run."""
        if self.exchange == "host":
            return "exchange='host' asks for the host worklist"
        if self.worklist_options:
            return (f"WorklistTuning given ({', '.join(self.worklist_options)}): "
                    f"the peer kernel has no routing, packets or outboxes and runs in one launch; "
                    f"use the default WorklistTuning or exchange='host'")
        if not hasattr(self, "_peer_why"):
            from groute.engines.peer_barrier import unavailable
            self._peer_why = unavailable(self.ctx, across_processes=True)
        return self._peer_why

    def _use_peer(self, exchange):
        """Whether the peer kernel runs this solver (else the distributed worklist): as
        ``exchange`` asks, ``"auto"`` by the ``exchange`` rule (:attr:`rules`);
        exchange='peer' that cannot run is a ValueError naming
        the reason."""
        if exchange == "auto":
            return self.rules["exchange"].decide(self._facts(self.graph)).choice == "peer"
        if exchange == "host":
            return False
        if self.mode == "async" and self.ctx.num_devices == 1:
            why = "mode='async' on one device exchanges nothing (the fused worker runs alone)"
        else:
            why = self.peer_unavailable()
        if why is not None:
            raise ValueError(f"{self.app}: exchange='peer' cannot run here: {why}")
        return True

    def _facts(self, graph, delta=None):
        """What the facts of the ``auto`` rules (:data:`groute.engines.rules.FACTS`) are for
        ``graph`` on this solver's devices, each asked only when a rule needs it (mode, exchange
        and windows: as far as :meth:`_setup` has decided them)."""
        return {
            "one_device": lambda: self.ctx.num_devices == 1,
            "processes": lambda: self.ctx.ranks is not None and self.ctx.ranks.size > 1,
            "shared_gpus": lambda: self.ctx.logical,
            "peer": lambda: self.peer_unavailable() is None,
            "symmetric": lambda: not getattr(graph, "directed", True),
            "low_diameter": lambda: graph_is_low_diameter(graph),
            "async": lambda: self.mode == "async",
            # the weighted peer kernel keeps a window, the unit-step one does not
            "windowed": lambda: self.mode == "async" or (self.use_peer
                                                         and not self.relaxation.unit),
            "linked": lambda: self.use_peer and self.mode == "async",
            "delta_given": lambda: delta is not None,
        }

    def _peer_traversal(self, graph):
        """The :class:`~groute.engines.relax.peer.PeerTraversal` over this solver's arrays (BSP),
        or the :class:`~groute.engines.relax.linked.LinkedTraversal` over its workers (async)."""
        delta = self.delta if self.priority else math.inf
        if self.mode == "async":
            from .linked import LinkedTraversal
            return LinkedTraversal(self.ctx, self.workers, self.part.offsets, app=self.app,
                                   relaxation=self.relaxation, unit=self.unit_step,
                                   kind=self.kind, weighted=self.weighted_values, delta=delta)
        from .peer import PeerTraversal
        return PeerTraversal(self.ctx, self.workers, self.part.offsets,
                             num_vertices=graph.num_vertices, num_arcs=int(graph.num_edges),
                             symmetric=not getattr(graph, "directed", True), app=self.app,
                             relaxation=self.relaxation, kind=self.kind,
                             weighted=self.weighted_values, delta=delta, tuning=self.tuning)

    def _pick_delta(self, graph, delta):
        if delta is not None:           # checked whether or not a window is kept
            if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
                raise TypeError(f"delta must be a number > 0, got {delta!r}")
            if not delta > 0:
                raise ValueError(f"delta must be > 0, got {delta!r}")
        if not self.priority:
            return math.inf
        if delta is None:
            delta = self.default_delta(graph)
            if self.ctx.ranks is not None and not math.isinf(delta):
                # each rank's estimate reads its own part's weights: all take the smallest
                delta = self.ctx.ranks.allreduce(delta, "min")
            if not delta > 0:           # no estimate (all weights 0): no window
                return math.inf
        return self._window(delta)

    def _window(self, delta) -> float:
        """A window ``delta`` > 0 as the run keeps it: inf as it is; on integer distances
        rounded up, since a window narrower than 1 holds what a window of 1 does (and int() of
        it would be an empty window that never advances)."""
        if math.isinf(delta):
            return math.inf
        return math.ceil(delta) if self.kind == "int" else float(delta)

    def default_delta(self, graph):
        """The window ``priority=True`` keeps without a ``delta`` (value units); the apps say
        theirs (none here: priority then stays off)."""
        return math.inf

    def auto_mode(self, graph):
        """What ``mode="auto"`` runs on ``graph``: the ``mode`` rule (:attr:`rules`), which the
        CLI help prints."""
        return self.rules["mode"].decide(self._facts(graph)).choice

    # ------------------------------------------------------------------ running
    def check_source(self, source) -> int:
        """The position of ``source``, one of the graph's own ids (a file's id, a label)."""
        return source_position(self.graph, source)

    def check_sources(self, source=None, sources=None) -> np.ndarray:
        """The distinct positions of the run's seeds: ``source`` (one id) or ``sources`` (a
        non-empty iterable of ids), exactly one of the two; ValueError naming the argument."""
        if (source is None) == (sources is None):
            raise ValueError(f"{self.app}: give either source (one vertex id) or sources (a "
                             f"list of them), not {'both' if source is not None else 'neither'}")
        if source is not None:
            return np.array([self.check_source(source)], dtype=np.int64)
        if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
            raise TypeError(f"{self.app}: sources must be a list of vertex ids, got "
                            f"{type(sources).__name__}")
        positions = [source_position(self.graph, s) for s in sources]
        if not positions:
            raise ValueError(f"{self.app}: sources is empty; give at least one vertex id")
        return np.unique(np.asarray(positions, dtype=np.int64))

    def check_ceiling(self, ceiling):
        """``ceiling`` as a value >= 0 of the run's values (an int for int values), or None."""
        if ceiling is None:
            return None
        number = isinstance(ceiling, (int, float, np.integer, np.floating))
        if isinstance(ceiling, bool) or not number or not ceiling >= 0 \
                or (self.kind == "int" and ceiling != int(ceiling)):
            raise ValueError(f"{self.app}: ceiling must be a value >= 0"
                             f"{' (an int: the values are ints)' if self.kind == 'int' else ''}, "
                             f"got {ceiling!r}")
        return int(ceiling) if self.kind == "int" else float(ceiling)

    @taking_turns
    def run(self, source=None, *, sources=None, ceiling=None,
            predecessors=False) -> AppResult:
        """Relax from ``source``, one of the graph's own ids (as every answer is keyed; for a
        graph made from 0-based arrays or a generator, its position), or from every id of
        ``sources`` at once (each at value 0: the answer is the value from the nearest
        source). See :class:`AppResult`.

        ``ceiling``: a vertex whose value reaches it keeps the value but is not expanded, so
        the run does only the work below it (BFS's ``cutoff``). ``predecessors``: also
        compute a parent per reached vertex (``result.predecessors``, positions, -1 for the
        sources and unreached vertices; :func:`groute.engines.relax.parents.parents` says
        which parent)."""
        seeds = self.check_sources(source, sources)
        limit = self.check_ceiling(ceiling)
        new_seeds = self.part.to_new_ids(seeds)
        if self.peer is not None:
            self.peer.prepare(new_seeds, limit)
            with DeviceTimer(self.ctx) as timer:
                wl = self.peer.run()
            counters = self.peer.counters_host
        else:
            for w in self.workers:
                if w is not None:
                    w.set_source(new_seeds, limit)
            threshold = self.delta if self.priority else math.inf
            with DeviceTimer(self.ctx) as timer:
                wl = self.worklist.run(self.workers, mode=self.mode, threshold=threshold,
                                       delta=self.delta,
                                       max_rounds=self.worklist_tuning.rounds_per_launch,
                                       level_hook=pull_levels(self.mode, self.workers))
            counters = self.ctx.share([None if w is None else w.collect_counters() for w in self.workers],
                                      "the workers' counters")
        raw = [None if w is None else w.values() for w in self.workers]
        raw_host = None                 # the kernels' values on the host, where needed
        if self.checks_overflow and self.overflow_possible:     # no answer of a failed run
            raw_host = self._raw_on_host(raw)
            check_overflow(self.graph, raw_host, self.kind, self.app)
        parts = []
        for dev, r in zip(self.ctx.devices, raw):
            if r is None:
                parts.append(None)
                continue
            with dev.on_compute():
                parts.append(self._answer(r))
        renumbering = self._renumbering()
        if renumbering is not None:     # each device makes its slice in the graph's order
            answer = land_answer(self.ctx, renumbering.gather(parts), "the values")
        else:
            answer = np.asarray(self.part.to_original(land_answer(self.ctx, parts, "the values")))
        parents = self._parents(raw, seeds, raw_host) if predecessors else None
        return self._result(answer, timer.seconds, self._stats(wl, counters),
                            unreached=self.unreached, device_values=self._kept_answer(parts),
                            predecessors=parents)

    def _renumbering(self):
        """The gather that puts a renumbering partition's answer back into the graph's order on
        the devices (:class:`~groute.runtime.renumber.DeviceRenumbering`, made at the first
        answer), or None: nothing renumbered, or devices that cannot gather (the host does)."""
        if self._device_renumbering is None and self.part.renumbers \
                and gather_on_devices(self.ctx, self.answer_dtype):
            self._device_renumbering = DeviceRenumbering(self.ctx, self.part.p.perm,
                                                         self.part.offsets)
        return self._device_renumbering

    def _raw_on_host(self, raw):
        """The run's values as the kernels left them (``raw``: each device's), on the host
        and by position: what the overflow check and the parents on the host read."""
        values = np.concatenate(self.ctx.share(
            [r if r is None else dev.to_host(r) for dev, r in zip(self.ctx.devices, raw)],
            "the values"))
        return np.asarray(self.part.to_original(values))

    def _parents(self, raw, seeds, raw_host=None):
        """The parents of :func:`~groute.engines.relax.parents.parents` from the run's values
        (as the kernels computed them) and the relaxation's ``numpy``: on one CUDA device over
        its arrays there, else on the host over the graph; across processes over this rank's
        rows, the ranks' proposals met by an elementwise minimum (every rank gets the whole
        graph's parents, the ones one process finds). ``raw_host``: the values on the host
        where the run already brought them there (:meth:`_raw_on_host`)."""
        from .parents import parents
        unreached = infinity(self.kind)
        relax = self.relaxation
        offered = relax.numpy if relax.weighted else (lambda d, w: relax.numpy(d, None))
        if self.ctx.backend == "cuda" and self.ctx.num_devices == 1:
            w, dev = self.workers[0], self.ctx.devices[0]
            with dev.on_compute():
                weights = w.weights if self.weighted_values else None
                seeds_dev = dev.xp.asarray(seeds)
                out = parents(w.indptr, w.indices, weights, raw[0], seeds_dev, unreached,
                              offered=offered, xp=dev.xp)
                return dev.xp.asnumpy(out)
        g, first, combine = self.graph, 0, None
        if hasattr(g, "split_by_ranges"):   # a RankGraph: this rank's rows, global targets
            ranks = self.ctx.ranks
            g, first = g.part, g.first
            combine = lambda proposed: ranks.allreduce(proposed, "min",  # noqa: E731
                                                       what="the parents' proposals")
        weights = None
        if self.weighted_values:
            weights = np.asarray(g.weights).astype(np.int64 if self.kind == "int" else np.float32)
        values = self._raw_on_host(raw) if raw_host is None else raw_host
        return parents(np.asarray(g.indptr), np.asarray(g.indices), weights, values, seeds,
                       unreached, offered=offered, xp=np, first=first, combine=combine)

    def _answer(self, values):
        """``values`` as :attr:`answer_dtype`, :attr:`unreached` where the run did not reach
        (NumPy or CuPy, as ``values``: a device's part is finished on the device)."""
        with np.errstate(invalid="ignore"):     # an unreached inf cast to ints: replaced below
            out = values.astype(self.answer_dtype, copy=True)
        # copyto, not a masked assignment: on CuPy that counts the mask (a scan and a read-back)
        array_module(values).copyto(out, self.unreached, where=unreached_mask(values, self.kind))
        return out

    def _kept_answer(self, parts):
        """On one CUDA device, the answer left there for ``AppResult.to_cupy`` (no host copy:
        the part :func:`~groute.runtime.answer_landing.land_answer` copied, a new array the
        next run does not touch, finished since that copy was waited for), else None."""
        if self.ctx.backend != "cuda" or self.ctx.num_devices != 1:
            return None
        return parts[0]

    def _stats(self, wl, counters):
        total = lambda key: int(sum(c.get(key, 0) for c in counters))  # noqa: E731
        return complete_stats(STATS_KEYS, {
            "app": self.app, "mode": self.mode, "routing": self.routing,    # None: peer
            "exchange": (wl.get("exchange", "host")
                         if self.ctx.num_devices > 1 or self.peer is not None else None),
            "priority": self.priority, "delta": self.delta, "devices": self.ctx.num_devices,
            "backend": self.ctx.backend,
            "items_processed": [int(c.get("processed", 0)) for c in counters],
            "edges_traversed": total("edges"),
            "items_sent": wl["items_sent"], "items_forwarded": wl["items_forwarded"],
            "bytes_moved": wl["bytes_moved"],
            "rounds": sum(wl["rounds"]), "rounds_per_device": wl["rounds"],
            "levels": [int(c.get("rounds", 0)) for c in counters],
            "launches": total("launches"), "reshapes": total("reshapes"),
            "pull_rounds": total("pull_rounds"), "pull_levels": wl.get("pull_levels", 0),
            "deferrals": total("deferrals"),
            "threshold_advances": wl["threshold_advances"],
            "phase_seconds": wl.get("phase_seconds"), "advance_seconds": wl.get("advance_seconds"),
            "items_absorbed": total("absorbed"),
            "level_trace_us": wl.get("level_trace_us"),
        })

    # ------------------------------------------------------------------ shutdown
    def _release(self):
        self._device_renumbering = None     # its index slices on the devices
        if self.peer is not None:
            self.peer.close()               # across processes: the other ranks' memory
        if self.worklist is not None:      # None on the peer path, or if setup failed before it
            self.worklist.close()
            self.worklist = None


#: the sampled BFS of :func:`low_diameter`: vertices to reach, levels allowed, sources
GROWTH_BUDGET, GROWTH_LEVELS, GROWTH_SAMPLES = 1 << 16, 16, 5


def graph_is_low_diameter(graph) -> bool:
    """:func:`low_diameter` with its defaults, kept on the graph object: the ``auto`` rules
    ask it for every solver of a graph (the weighted rules twice: mode and priority)."""
    return kept_on(graph, "_low_diameter", lambda: low_diameter(whole_rows(graph)))


def low_diameter(graph, *, budget=GROWTH_BUDGET, levels=GROWTH_LEVELS, samples=GROWTH_SAMPLES,
                 seed=0):
    """Whether ``graph`` looks low-diameter: BFS from a few sampled vertices reach ``budget``
    vertices (or a quarter of the graph) within ``levels`` levels.

    Sources are the tails of uniformly sampled arcs (so they lie in the big component, weighted
    by degree); every search stops after ``levels`` levels, so the test costs at most that many
    levels of frontier expansion per sample. An expanding graph (Kronecker, social, random) reaches
    2^16 vertices in about log(2^16)/log(branching) levels: 3-4 on kron:21, at most 16 with a
    branching factor of 2. A d-dimensional lattice or road network needs about 2^(16/d) levels
    (181 on a 2D grid, 40 in 3D). Samples whose component is smaller than the budget do not
    vote; the majority of the rest decides (no vote: False).
    """
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices)
    n, m = int(graph.num_vertices), int(indices.size)
    if m == 0:
        return False
    goal = max(1, min(budget, n // 4))
    rng = np.random.default_rng(seed)
    tails = np.searchsorted(indptr, rng.integers(0, m, size=samples), side="right") - 1
    seen = np.zeros(n, dtype=bool)
    slot = np.empty(n, dtype=np.int64)
    votes = []
    for s in tails:
        seen[:] = False
        seen[s] = True
        frontier = np.array([s], dtype=np.int64)
        reached, count = False, 1
        for _ in range(levels):
            found = []
            # the level's arcs in pieces of about 4 * goal, stopping once the goal is reached (a
            # hub's level would otherwise scan most of the graph)
            ends = np.cumsum(indptr[frontier + 1] - indptr[frontier])
            cuts = np.searchsorted(ends, np.arange(4 * goal, int(ends[-1]), 4 * goal), side="right")
            for piece in np.split(frontier, np.unique(cuts)):
                starts = indptr[piece]
                lens = indptr[piece + 1] - starts
                total = int(lens.sum())
                if total == 0:
                    continue
                # the arcs of every vertex of the piece, as one index array
                offs = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
                cand = indices[offs]
                cand = cand[~seen[cand]]
                # one of each: the last write of a repeated vertex wins
                order = np.arange(cand.size, dtype=np.int64)
                slot[cand] = order
                nxt = cand[slot[cand] == order]
                seen[nxt] = True
                count += nxt.size
                found.append(nxt)
                if count >= goal:
                    break
            if count >= goal:
                reached = True
                break
            frontier = np.concatenate(found).astype(np.int64) if found else frontier[:0]
            if frontier.size == 0:
                break
        if reached or frontier.size:     # exhausted components below the goal do not vote
            votes.append(reached)
    return bool(votes) and 2 * sum(votes) > len(votes)


def unreached_mask(values, kind):
    return values == infinity(kind)
