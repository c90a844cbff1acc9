"""The CUDA worker of the relaxation engines: device buffers plus launches of ``fused.cu``.

:class:`CUDATraversalArrays` holds the arrays both CUDA traversals share (rows, values, frontier
queues, the hub reservation, ``sent_best``): all that the persistent peer kernels
(:mod:`groute.engines.relax.peer`) read. :class:`CUDATraversalWorker` adds the worklist path's
queues, outboxes and control block.

``advance`` is one cooperative launch of the fused ``traverse`` kernel (many rounds, grid-wide
barriers between them, the grid sized to be fully resident) followed by one small read-back of
the control block; ``absorb`` is one launch per received batch. Everything runs on the
device's compute stream. Queue capacities are chosen so the near queues cannot overflow (each
vertex is queued at most once); the far queue and the outboxes report overflow and the kernel
recovers without losing work (see ``fused.cu``). The relaxation's ``arc_value`` comes from its
generated header (:meth:`~groute.engines.relax.relaxation.Relaxation.header`), put on the
kernels' include path, so each relaxation compiles a module of its own.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from groute.engines.peer_barrier import launch_resident
from groute.kernel_launch import launch_plain
from groute.kernels import check_struct_layout, load_module, pack_struct, resident_blocks_per_sm
from groute.operators import direction
from groute.tuning import TraversalTuning
from groute.worklist import LocalWork, StreamWorker

from .pull import PullSteps
from .seeds import SeedBuffer, owned_seeds

log = logging.getLogger(__name__)


def traversal_options(kind: str, weighted: bool, unit: bool) -> tuple[str, ...]:
    """The compile options every relaxation kernel (fused.cuh) takes: the values it computes
    (int or float values; no weights, int weights or float weights: the operator header
    values.cuh), whether every arc adds one (``UNIT_STEP``: pull levels and the unique queue)
    and the direction rule's constants (:mod:`groute.operators.direction`)."""
    return (f"-DVALUE_FLOAT={int(kind == 'float')}",
            f"-DWEIGHTS={0 if not weighted else (1 if kind == 'int' else 2)}",
            f"-DUNIT_STEP={int(bool(unit))}", *direction.compile_options())


def fused_options(kind: str, weighted: bool, unit: bool, tuning, batch: bool) -> tuple[str, ...]:
    """The compile options of the fused worker's module (``fused.cu``): the relaxation
    kernels' (:func:`traversal_options`), then its block, whether warps batch small vertices'
    arcs (``BATCH``) and ``tuning``'s barrier and spin."""
    return (*traversal_options(kind, weighted, unit), f"-DBLOCK={int(tuning.block)}",
            f"-DBATCH={int(batch)}", f"-DBARRIER={int(tuning.acquire_release_barrier)}",
            f"-DSPIN_NS={int(tuning.spin_ns)}")


KERNEL = Path(__file__).with_name("fused.cu")
#: threads per block of the linked workers' kernel (the fused worker's: TraversalTuning.block)
BLOCK = 256

# control block slots, as fused.cuh
NEAR_COUNT, ROUND, FAR_COUNT, FAR_INDEX, FAR_MIN, FAR_OVERFLOW, THRESHOLD, ROUNDS, EXIT_REASON = \
    0, 3, 4, 6, 7, 8, 10, 11, 12
OUT_COUNT, CTL_SIZE = 24, 64
PROCESSED, EDGES, DEFERRALS, TOTAL_ROUNDS, PULL_ROUNDS, COUNTERS = 0, 1, 2, 3, 11, 12
#: frontier sizes (vertices) at which the kernel returns to be relaunched with the other grid
#: shape: narrow (one block per SM: cheap barriers for long thin traversals) below SHRINK,
#: wide (every resident block) above GROW
GROW, SHRINK = 1 << 14, 1 << 12
#: blocks of the narrow grid per SM: one block per two SMs, so a long thin traversal's barriers
#: wait for few blocks (docs/TRAVERSAL.md, "Grid shape"); :class:`groute.tuning.TraversalTuning`
#: may override
NARROW_PER_SM = 0.5
WARP_EDGES = 1024
MAX_DEVICES = CTL_SIZE - OUT_COUNT


def fill_blocks(items: int, block: int, most: int) -> int:
    """The grid of a grid-stride loop over ``items``: a block of ``block`` threads per
    ``block`` items, at most ``most`` (the worker's resident grid), at least one."""
    return max(1, min(most, -(-int(items) // block)))


def _bits(value, kind) -> int:
    """The int32 bit pattern the kernels use for a threshold or delta."""
    if kind == "int":
        return int(min(value, np.iinfo(np.int32).max)) if value != math.inf else int(np.iinfo(np.int32).max)
    # past float32's range (a threshold stepped by delta on huge weights): infinity, as the
    # cast would give, without NumPy's overflow warning
    if value > float(np.finfo(np.float32).max):
        value = math.inf
    return int(np.array(value, dtype=np.float32).view(np.int32))


def _value_of_bits(bits, kind):
    """The threshold or value an int32 bit pattern stands for (inverse of :func:`_bits`)."""
    if kind == "int":
        return math.inf if bits == np.iinfo(np.int32).max else int(bits)
    return float(np.array(bits, dtype=np.int32).view(np.float32))


class CUDATraversalArrays:
    """One device's share of a relaxation as the CUDA kernels read it: its rows (and weights), its
    values (``dist``), ``queues`` frontier queues, the big-vertex reservation and, if
    ``sent_best``, the least value sent per global vertex (one slot on a single device).

    The persistent peer kernels (:mod:`groute.engines.relax.peer`) take only these, as many queues and
    ``sent_best`` as they read; :class:`CUDATraversalWorker` adds what the worklist path needs.
    Arrays come from ``device.xp``, so any device can hold them. ``tuning``: a
    :class:`~groute.tuning.TraversalTuning` (None: from the environment)."""

    def __init__(self, device, local, *, lo, hi, offsets, num_vertices, kind, weighted,
                 queues=2, sent_best=True, tuning=None):
        self.device = device
        self.kind = kind
        self.tuning = TraversalTuning.given(tuning)
        self.lo, self.hi = int(lo), int(hi)
        self.n_local = self.hi - self.lo
        self.k = len(offsets) - 1
        if self.k > MAX_DEVICES:
            raise ValueError(f"the CUDA traversal supports up to {MAX_DEVICES} devices")
        self.inf_bits = _bits(math.inf, kind)
        xp = device.xp
        with device.on_compute():      # uploads and allocations ordered before the kernels
            n = max(self.n_local, 1)
            indptr = np.asarray(local.indptr, dtype=np.int64)
            # any vertex above WARP_EDGES (fused.cuh) arcs: only then do rounds read the
            # big-vertex reservation
            self.has_big = int((indptr.size > 1 and int(np.max(np.diff(indptr))) > WARP_EDGES)
                               or self.tuning.big_check)
            self.indptr = xp.asarray(indptr)
            self.num_arcs = int(indptr[-1]) if indptr.size else 0
            self.indices = xp.asarray(np.asarray(local.indices, dtype=np.int32))
            if weighted:
                wdt = np.int32 if kind == "int" else np.float32
                self.weights = xp.asarray(np.asarray(local.weights).astype(wdt, copy=False))
            else:
                self.weights = xp.zeros(1, dtype=np.int32)
            self.dist = xp.empty(n, dtype=np.int32)
            self.near = [xp.empty(n, dtype=np.int32) for _ in range(queues)]
            self.sent_best = (xp.empty(num_vertices if self.k > 1 else 1, dtype=np.int32)
                              if sent_best else None)
            self.big_items = xp.empty(n, dtype=np.int64)
            self.big_first = xp.empty(n, dtype=np.int32)

    def values(self):
        return self.dist[:self.n_local].view(np.float32 if self.kind == "float" else np.int32)


class CUDATraversalWorker(CUDATraversalArrays, PullSteps, StreamWorker):
    """One GPU's share of a relaxation run on the worklist path (see the module docstring):
    ``relaxation`` (its header is compiled in), ``unit`` (every arc adds one on this graph:
    pull levels and the unique queue)."""

    def __init__(self, device, local, *, lo, hi, offsets, num_vertices, kind, weighted,
                 relaxation, unit, symmetric=False, flush_items=1 << 16, out_capacity=None,
                 far_capacity=None, tuning=None):
        import cupy
        super().__init__(device, local, lo=lo, hi=hi, offsets=offsets, num_vertices=num_vertices,
                         kind=kind, weighted=weighted, tuning=tuning)
        tuning = self.tuning
        self.flush_items = int(flush_items)
        # a unit relaxation may pull (scan in-arcs of unreached vertices) when in-arcs are
        # out-arcs and all vertices are local
        unit = bool(unit)
        self.pull = int(symmetric and unit and self.k == 1 and tuning.pull)
        self.unique = int(unit and self.k == 1)   # see improve_local
        # several devices, BSP: the host may ask for pull levels (it decides for all devices,
        # see pull.py); each device then reads every device's frontier flags
        self.can_pull = bool(symmetric and unit and self.k > 1 and tuning.pull)
        self.block = int(tuning.block)
        # batched small-degree arcs: by default on one device only, the configuration whose
        # speed was compared (docs/TRAVERSAL.md)
        batch = tuning.batch if tuning.batch is not None else self.k == 1
        self.include = (relaxation.include_dir,)
        options = fused_options(kind, weighted, unit, tuning, batch)
        with device.on_compute():
            module = self._load(options)
            self.traverse = module.get_function("traverse")
            self.absorb_kernel = module.get_function("absorb")
            # loaded now, with the module: a run never loads a kernel (a load waits for the
            # kernels running on the GPU, which other devices may share)
            self.reset_kernel = module.get_function("reset_fused")
            self.seeds_kernel = module.get_function("place_seeds_fused")
            n = max(self.n_local, 1)
            xp = cupy
            self.in_near = xp.zeros(n, dtype=np.int32)
            self.far_cap = int(far_capacity or max(n, 1024))
            self.far = [xp.empty(self.far_cap, dtype=np.int64) for _ in range(2)]
            # one slot per vertex of the largest part: BFS sends a remote vertex at most once per
            # launch (levels only decrease), so its outboxes cannot overflow; SSSP may (retried)
            self.out_cap = int(out_capacity or max(int(np.max(np.diff(np.asarray(offsets)))), 1))
            self.outbox = xp.empty(max(self.k, 1) * self.out_cap if self.k > 1 else 1, dtype=np.int64)
            self.offsets = xp.asarray(np.asarray(offsets, dtype=np.int64))
            self.ctl = xp.zeros(CTL_SIZE, dtype=np.int32)
            # the longest fill of a reset: the values, or sent_best over the peers' vertices
            self.reset_items = max(self.n_local, int(num_vertices) - self.n_local)
            self.frontier = xp.zeros(num_vertices if self.can_pull else 1, dtype=np.uint8)
            self.counters_dev = xp.zeros(COUNTERS, dtype=np.uint64)
            self.ctl_host = cupy.cuda.alloc_pinned_memory(CTL_SIZE * 4)
            self.ctl_view = np.frombuffer(self.ctl_host, dtype=np.int32, count=CTL_SIZE)
            sms = device.multiprocessors     # a logical device: its share
            self.blocks = sms * self._blocks_per_sm(tuning.blocks_per_sm)   # wide
            self.narrow_blocks = min(self.blocks, int(tuning.narrow_blocks
                                                      or max(1, int(sms * NARROW_PER_SM))))
            if not tuning.adaptive:
                self.narrow_blocks = self.blocks
            self.wide = False
        with device.on_compute():
            rec = self._pack_args()
            self._check_layout(module, rec)
            self.args = cupy.asarray(np.frombuffer(rec.tobytes(), dtype=np.uint8))
        self.seed_buffer = SeedBuffer()
        self.staged_seeds = None         # this worker's seeds on the device (set_source)
        self.ceiling_bits = self.inf_bits
        self.delta_bits = self.inf_bits
        self.work = LocalWork()
        self.counters = {}
        log.info("%s: %s worker, %d vertices, grid %d x %d", device.name, relaxation.name,
                 self.n_local, self.blocks, self.block)

    def _load(self, options):
        """The compiled module, launched cooperatively (residency guaranteed) if CuPy can."""
        try:
            module = load_module(KERNEL, options=options, cooperative=True, include=self.include)
            module.get_function("traverse")
            self.cooperative = True
            return module
        except Exception as exc:  # noqa: BLE001 - e.g. no libcudadevrt to link against
            log.warning("cooperative launch unavailable (%s); launching the resident-sized grid "
                        "normally", exc)
            self.cooperative = False
            return load_module(KERNEL, options=options, cooperative=False,
                               include=self.include)

    def _blocks_per_sm(self, wanted):
        """Resident blocks per SM for the cooperative kernel (all blocks must be resident)."""
        resident = resident_blocks_per_sm(self.traverse, self.block, self.device.gpu)
        return min(resident, wanted) if wanted else resident

    def _check_layout(self, module, rec):
        check_struct_layout(module.get_function("args_layout"), rec, ("far_cap", "k", "counters"),
                            "fused.cu Args")

    def _pack_args(self):
        """The kernels' ``Args`` struct, as a NumPy record CuPy passes by value."""
        a = self
        ptr = lambda x: x.data.ptr  # noqa: E731
        fields = [
            ("indptr", np.uint64, ptr(a.indptr)), ("indices", np.uint64, ptr(a.indices)),
            ("weights", np.uint64, ptr(a.weights)), ("dist", np.uint64, ptr(a.dist)),
            ("in_near", np.uint64, ptr(a.in_near)), ("near0", np.uint64, ptr(a.near[0])),
            ("near1", np.uint64, ptr(a.near[1])), ("far0", np.uint64, ptr(a.far[0])),
            ("far1", np.uint64, ptr(a.far[1])), ("far_cap", np.int32, a.far_cap),
            ("outbox", np.uint64, ptr(a.outbox)), ("out_cap", np.int32, a.out_cap),
            ("sent_best", np.uint64, ptr(a.sent_best)), ("offsets", np.uint64, ptr(a.offsets)),
            ("k", np.int32, a.k), ("lo", np.int32, a.lo), ("hi", np.int32, a.hi),
            ("big_items", np.uint64, ptr(a.big_items)), ("big_first_chunk", np.uint64, ptr(a.big_first)),
            ("ctl", np.uint64, ptr(a.ctl)), ("counters", np.uint64, ptr(a.counters_dev)),
            ("front", np.uint64, ptr(a.frontier)),
        ]
        return pack_struct(fields)

    # ------------------------------------------------------------------ protocol
    def set_source(self, seeds_new, ceiling=None):
        """The next run's seeds (renumbered ids, one or several; each starts at value 0) and
        its ceiling: a vertex whose value reaches it keeps the value but is not queued (BFS's
        depth limit; None: no limit)."""
        self.ceiling_bits = self.inf_bits if ceiling is None else _bits(ceiling, self.kind)
        # copied now, on the compute stream, so a timed run starts at its first launch
        self.device.compute_stream.submit(self._stage_seeds,
                                          owned_seeds(seeds_new, self.lo, self.hi))

    def _stage_seeds(self, mine):
        self.staged_seeds = self.seed_buffer.upload(mine)

    def set_delta(self, delta):
        self.delta_bits = _bits(delta, self.kind) if delta != math.inf else self.inf_bits

    # ------------------------------------------------------------------ launches
    def reset_state(self, threshold):
        """A run's starting state from the staged seeds with threshold ``threshold``, queued on
        the current stream (no wait) as two plain launches of ``fused.cu`` (neither has a grid
        barrier, so neither needs a cooperative launch): ``reset_fused`` (values unreached,
        nothing queued or sent, counters and control words zero but the threshold, the ceiling
        and the seeds round 0 queues; its ``reset_worker`` is also the linked workers' reset),
        then, where this device owns seeds, ``place_seeds_fused`` (the seeds at value 0 and,
        below the ceiling, queued for round 0)."""
        seeds = self.staged_seeds          # set_source's copy
        n = 0 if seeds is None else int(seeds.size)
        queue = self.ceiling_bits > 0      # a seed has value 0: queued below the ceiling
        launch_plain(self.reset_kernel, fill_blocks(self.reset_items, self.block, self.blocks),
                     self.block, (self.args, np.int32(n if queue else 0),
                                  np.int32(_bits(threshold, self.kind)),
                                  np.int32(self.ceiling_bits)))
        if n:
            launch_plain(self.seeds_kernel, fill_blocks(n, self.block, self.blocks), self.block,
                         (self.args, seeds, np.int32(n), np.int32(queue)))

    def _start(self, threshold):
        self.reset_state(threshold)
        self.counters = {}
        self.launches = self.reshapes = self.absorbed = 0
        self.wide = False
        return self._read_back()

    def _read_back(self, moved_threshold=False):
        self.ctl.get(out=self.ctl_view)      # on the compute stream, then waits for it
        c = self.ctl_view
        r = int(c[ROUND])
        fc = int(c[FAR_INDEX])
        far = int(c[FAR_COUNT + fc])
        if c[FAR_OVERFLOW + fc]:
            far = max(far, 1)
        far_min = _value_of_bits(int(c[FAR_MIN]), self.kind) if far else math.inf
        thr = _value_of_bits(int(c[THRESHOLD]), self.kind) if moved_threshold else None
        self.work = LocalWork(int(c[NEAR_COUNT + r % 3]), far, far_min, thr)
        return self.work

    def _launch_traverse(self, threshold, max_rounds, self_advance, op):
        """One launch; relaunched with the other grid shape while the kernel asks for it."""
        forced = self.pull_level is not None and op == 0
        while True:
            blocks = self.blocks if (self.wide or forced) else self.narrow_blocks
            adaptive = self.narrow_blocks != self.blocks
            shrink = SHRINK if (adaptive and self.wide) else 0
            grow = GROW if (adaptive and not self.wide) else 2**31 - 1
            args = (self.args, np.int32(_bits(threshold, self.kind)), np.int32(self.delta_bits),
                    np.int32(bool(self_advance)), np.int32(max_rounds if max_rounds else 2**31 - 1),
                    np.int32(self.flush_items if self.k > 1 else 0), np.int32(op),
                    np.int32(shrink), np.int32(grow), np.int32(self.pull),
                    np.int32(self.wide or forced or not adaptive), np.int32(self.unique),
                    np.int32(self.has_big), np.int32(self.pull_level if forced else -1))
            # a halved wide grid keeps this launch's shrink/grow arguments (the next launch
            # rebuilds them): at worst one reshape exit more
            launched = launch_resident(self.traverse, blocks, self.block, args,
                                       device=self.device, kernel="traverse",
                                       min_blocks=min(blocks, self.narrow_blocks))
            if blocks == self.blocks:
                self.blocks = launched     # the wide grid, halved where occupancy was optimistic
            self.launches += 1
            if op == 1:
                return self._read_back()
            work = self._read_back(moved_threshold=self_advance)
            if self.ctl_view[EXIT_REASON] == 1:
                self.wide = not self.wide
                self.reshapes += 1
                continue
            return work

    def _advance(self, threshold, max_rounds, self_advance):
        if self.k > 1:
            self.ctl[OUT_COUNT:OUT_COUNT + self.k] = 0
        work = self._launch_traverse(threshold, max_rounds, self_advance, op=0)
        outbox = [None] * self.k
        if self.k > 1:
            c = self.ctl_view
            for j in range(self.k):
                n = min(int(c[OUT_COUNT + j]), self.out_cap)
                if n:
                    outbox[j] = self.outbox[j * self.out_cap: j * self.out_cap + n]
        return work, outbox

    def _absorb(self, arrays, threshold):
        thr = np.int32(_bits(threshold, self.kind))
        for items in arrays:
            n = int(items.shape[0])
            if n:
                blocks = fill_blocks(n, self.block, self.blocks)   # module launches are cooperative
                self.absorb_kernel((blocks,), (self.block,), (self.args, items, np.int32(n), thr))
        self.absorbed += sum(int(a.shape[0]) for a in arrays)
        return self._read_back()

    def _split(self, threshold):
        return self._launch_traverse(threshold, 0, False, op=1)

    def _publish_frontier(self):
        """Flag this device's queued vertices (the next level) in its range of ``frontier``."""
        self.frontier[self.lo:self.hi] = 0
        n = int(self.work.near)
        if n:
            r = int(self.ctl_view[ROUND])
            self.frontier[self.near[r & 1][:n].astype(np.int64) + self.lo] = 1

    def _frontier_arcs(self):
        """Out-arcs of the queued vertices (Beamer's m_f), for the BSP direction switch."""
        n = int(self.work.near)
        if not n:
            return 0
        q = self.near[int(self.ctl_view[ROUND]) & 1][:n]
        return int((self.indptr[q + 1] - self.indptr[q]).sum())

    def collect_counters(self):
        c = self.device.to_host(self.counters_dev)
        self.counters = {"processed": int(c[PROCESSED]), "edges": int(c[EDGES]),
                         "deferrals": int(c[DEFERRALS]), "rounds": int(c[TOTAL_ROUNDS]),
                         "launches": self.launches, "reshapes": self.reshapes,
                         "pull_rounds": int(c[PULL_ROUNDS]),
                         "absorbed": self.absorbed}
        return self.counters
