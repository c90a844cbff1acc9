"""A linear iteration's per-device state and operations (:mod:`groute.engines.iterate`): one
:class:`IterationDevice` per device holds its arrays and runs the BSP and asynchronous steps on
them, as CUDA kernels (``iterate.cu``, with the iteration's generated header) or
vectorised NumPy on the device's stream, or launches a whole run as one persistent kernel
(BSP's, and the asynchronous push's ``pr_async_persistent``); :class:`PushWorker` is what the
distributed worklist drives in the host-driven asynchronous mode. The only backend-specific
code of the engines.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .iteration import LinearIteration
from .layout import Shard, bins_tasks
from .thresholds import push_weights
from groute.device.ipc import MappedArray
from groute.engines.protocol import MEETING_WORDS, PROTOCOL_WORDS
from groute.graph.arcs import row_chunks
from groute.graph.arrays import arc_dtype, array_module
from groute.kernel_launch import KernelArgs
from groute.tuning import PageRankTuning
from groute.worklist import call_on_stream

KERNEL = Path(__file__).with_name("iterate.cu")
BLOCK = 256
#: "bins" kernel: threads per block (one block per SM) and the contributions of the first
#: BINS_HOT vertices (the hubs) each block copies into shared memory (224 KiB: nearly all a
#: block may opt into on Hopper GPUs; less where the device allows less)
BINS_BLOCK = 1024
BINS_HOT = 57344
#: uint64 words of a persistent launch's control block: the protocol's, then iterate.cu's P_STOP
CTL_WORDS = PROTOCOL_WORDS + 1
#: iterate.cu AsyncWord: the own words of the persistent push kernel's control block (the last
#: decision, the threshold, a device's sums at a decision, its counters over the run, the last
#: decision's sums over every device), and their count with the protocol's
(A_STOP, A_EPS, A_RESID, A_MASS, A_ACTIVE, A_PUSHED, A_ARCS, A_SENT, A_TOTAL_RESID,
 A_TOTAL_MASS) = range(PROTOCOL_WORDS, PROTOCOL_WORDS + 10)
ASYNC_CTL_WORDS = PROTOCOL_WORDS + 10
#: iterate.cu AsyncStatus: why the persistent push kernel stopped (RESULT's status)
ASYNC_CONVERGED, ASYNC_STUCK, ASYNC_ROUNDS = 1, 2, 3
#: iterate.cu ASYNC_MAX_DEVICES and AsyncMeeting: the devices whose sums device 0's meeting
#: block holds (three words each, after the protocol's)
ASYNC_MAX_DEVICES = 8
ASYNC_MEETING_WORDS = MEETING_WORDS + 3 * ASYNC_MAX_DEVICES
#: iterate.cu TRACE_ITERATIONS: iterations a persistent launch stamps when traced
#: (PageRankTuning.trace)
TRACE_ITERATIONS = 256
#: the most vectors one device's BSP step stores into, its own and its peers': ``need`` (see
#: :meth:`IterationDevice.set_outputs`) holds one uint8 bit mask per vertex
MAX_OUTPUTS = 8


#: in-arcs one step of a NumPy sweep reads (:meth:`IterationDevice._sums`)
SWEEP_STEP_ARCS = 1 << 16

#: seconds a BSP convergence check polls its CUDA event without back-off before the normal
#: wait: the general wait's back-off grows to sleeps long enough to leave the GPU idle at
#: every check
SPIN_S = 0.25


def packed_arcs(ends, factors):
    """Arcs as the CUDA kernels read them (iterate.cu ``arc_t``): the ends (int32) as they are,
    or with a weighted graph's ``factors`` an ``(m, 2)`` int32 array of each arc's end and its
    factor's float32 bits (iterate.cu ``ARC_WEIGHTS``: one 8-byte load per arc); in the ends'
    memory (host or device)."""
    if factors is None:
        return ends
    xp = array_module(ends)
    out = xp.empty((int(ends.shape[0]), 2), np.int32)
    out[:, 0] = ends
    out[:, 1] = xp.asarray(factors, dtype=np.float32).view(np.int32)
    return out


def kernel_arcs(device, ends, factors):
    """``(in_cols, in_factors)``: in-arcs' ``ends`` and ``factors`` (None unweighted) as
    ``device``'s kernels read them, in the memory they are in: a CUDA device's
    :func:`packed_arcs` and no factors apart, a NumPy device's ends and factors as they are."""
    if device.backend == "cuda":
        return packed_arcs(ends, factors), None
    return ends, factors


def _sync_host(device, array, spin=False):
    """A host copy of ``array`` after everything queued on the compute stream has finished
    (``spin``: poll the event without back-off first, see :data:`SPIN_S`; the BSP checks use
    it, the async mode keeps the general wait)."""
    device.compute_stream.record().synchronize(spin=SPIN_S if spin else 0.0)
    return device.to_host(array)


class RankPeer:
    """Another rank's device as a persistent kernel of this process sees it (across
    processes, :meth:`IterateSolver._rank_peers`): the vertices its in-arcs read (``reads``:
    host bool per global id), its contribution vectors (``contrib``, one address per parity)
    and its stats rows (``stats``), at addresses mapped into this process
    (:class:`groute.device.ipc.PeerAddresses`). What :meth:`IterationDevice.set_outputs`,
    ``set_copies`` and ``set_check_group`` ask of a device."""

    def __init__(self, reads, contrib_addresses, stats_address):
        self._reads = reads
        self.contrib = [MappedArray(a) for a in contrib_addresses]
        self.stats = MappedArray(stats_address)

    def reads(self):
        return self._reads


class IterationDevice:
    """One device's arrays and the operations of ``iteration`` on them (CUDA kernels or NumPy).

    ``tuning``: the solver's :class:`~groute.tuning.PageRankTuning`; what the solver resolved
    from it and the machine comes as ``kernel`` (never ``"auto"``), ``device_check`` (False
    where a device cannot read every peer's stats) and ``persistent``; ``tol`` is the stopping
    rule's bound (:meth:`LinearIteration.bound
    <groute.engines.iterate.iteration.LinearIteration.bound>`). ``base``: the base term of this
    device's vertices in its order (host array, personalized PageRank's ``(1-d) p[v]``; None:
    the uniform value the steps are given), compiled into its own kernels (iterate.cu
    ``BASE_VECTOR``). A weighted shard (``shard.weighted``) compiles the kernels whose arcs carry
    their factors (iterate.cu ``ARC_WEIGHTS``). The solver sets :attr:`y0` and :attr:`contrib0`,
    the start of a BSP run, before the first (and :attr:`y_start`, this device's start values,
    when they are not all :attr:`y0`)."""

    def __init__(self, device, shard: Shard, n: int, mode: str, alpha: float, k: int,
                 tuning: PageRankTuning, iteration: LinearIteration, *, kernel: str = "csc",
                 device_check: bool = True, tol: float = 1e-6, persistent: bool = False,
                 base=None):
        self.device = device
        self.n, self.lo, self.hi, self.n_local = n, shard.lo, shard.hi, shard.n_local
        self.alpha = float(alpha)
        self.iteration = iteration
        self.cuda = device.backend == "cuda"
        self.fdt = np.float32 if self.cuda else np.float64
        self.stream = device.compute_stream
        self.trace = None
        self.weighted = shard.weighted
        self.y_start = None
        # one cooperative launch per run (the solver resolved the option: choose_persistent)
        self.persistent = bool(persistent) and self.cuda
        if mode == "bsp":
            self.bins = kernel == "bins"
            self.fused = kernel == "csc" or self.bins
            self.lanes_k = int(tuning.vertices_per_lane)
            self.inplace = bool(tuning.inplace) and k == 1
            # the fused kernels skip the iterations after the stopping rule held on all devices
            # together (bsp_converged in iterate.cu; the NumPy sweeps of the CPU backend follow the
            # same protocol); the COO pair has no skip: the host checks. The solver turns it off
            # where a device cannot read every peer's stats
            self.device_check = bool(device_check) and self.fused
            self.small_degree = int(tuning.small_degree)
            self.tol = float(tol)
            self.num_in = int(shard.in_cols.shape[0])
            wide = arc_dtype(self.num_in) == np.int64
            csc = ("pr_csc64" if wide else "pr_csc32") + f"_k{self.lanes_k}"
            if self.bins:
                csc = "pr_bins64" if wide else "pr_bins32"
                self.hot_max = 0
                if self.cuda:   # the prefix that fits the shared memory a block may opt into
                    props = device.xp.cuda.runtime.getDeviceProperties(device.gpu)
                    optin = int(props.get("sharedMemPerBlockOptin", 0) or 48 * 1024)
                    self.hot_max = min(BINS_HOT, (optin - 1024) // 16 * 4)
                self.nhot = min(self.hot_max, n) // 4 * 4
                self.hub_degree = int(tuning.hub_degree)
                task_row, task_info, hub_rows = bins_tasks(
                    shard.in_indptr, task_arcs=int(tuning.task_arcs),
                    hub_degree=self.hub_degree, lane_arcs=int(tuning.lane_arcs))
                self.num_tasks = int(task_row.shape[0])
            self.csc_kernel = csc       # the fused kernel's name (64: int64 in-arc offsets)
        #: iterate.cu's compile options: the base vector's kernels where there is one, the
        #: weighted arcs' on a weighted graph
        self.options = ((("-DBASE_VECTOR=1",) if base is not None else ())
                        + (("-DARC_WEIGHTS=1",) if self.weighted else ()))
        #: the generated header's folder (the iteration's arc_share and STOP_RULE)
        self.include = (iteration.include_dir,) if self.cuda else ()
        if self.cuda:
            from groute.kernels import get_kernel, resident_blocks_per_sm
            with device.use():
                if mode != "bsp" and self.persistent:
                    names = {}      # _load_async_persistent
                elif mode != "bsp":
                    names = {n: n for n in ("pr_push", "pr_apply", "pr_pack")}
                elif self.fused:
                    names = {"csc": csc, "reset": "pr_bsp_reset"}
                else:
                    names = {"pr_pull": "pr_pull", "pr_finalize": "pr_finalize",
                             "reset": "pr_bsp_reset"}
                self.kernels = {key: get_kernel(KERNEL, name, options=self.options,
                                                  include=self.include)
                                for key, name in names.items()}
            self.sms = int(device.properties()["multiprocessors"])
            # the BSP grids, fixed for the solver's life: the fused kernels' is ``waves`` times
            # the blocks resident at once (bins: one per SM), no more than there is work
            if mode == "bsp" and self.bins:
                if self.nhot:   # the largest prefix (the kernel object is shared)
                    with device.use():
                        self.kernels["csc"].max_dynamic_shared_size_bytes = self.hot_max * 4
                resident = self.sms * int(tuning.waves)
                self.grid = (max(1, min(resident, -(-self.num_tasks * 32 // BINS_BLOCK))),)
            elif mode == "bsp" and self.fused:
                with device.use():
                    per_sm = resident_blocks_per_sm(self.kernels["csc"], BLOCK, device.gpu)
                resident = self.sms * per_sm * int(tuning.waves)
                self.grid = (max(1, min(resident, -(-self.n_local // BLOCK))),)
            elif mode == "bsp":     # the COO pair: grid-stride loops over arcs, then vertices
                self.grid = self._grid(self.num_in, waves=16)
                self.finalize_grid = self._grid(self.n_local)
            if mode == "bsp" and self.persistent:
                self._load_persistent(csc, tuning.trace)
            elif self.persistent:
                self._load_async_persistent(k)
        up = device.asarray
        self.inv_outdeg = up(shard.inv_outdeg.astype(self.fdt))
        self.base = None if base is None else up(np.asarray(base).astype(self.fdt))
        if mode == "bsp":
            # CUDA: the arcs as iterate.cu reads them; NumPy: the sources, and the factors
            if shard.device is device:      # built in this device's memory in that form
                self.in_cols, self.in_factors = shard.in_cols, shard.in_factors
            else:
                cols, self.in_factors = kernel_arcs(device, shard.in_cols, shard.in_factors)
                self.in_cols = up(cols)
            if self.cuda and self.fused:
                self.in_indptr = up(shard.in_indptr.astype(np.int64 if wide else np.int32))
                if self.bins:
                    self.task_row, self.task_info = up(task_row), up(task_info)
                    self.part = device.zeros(max(self.num_tasks, 1), np.float32)
                    self.hub_count = device.zeros(max(hub_rows, 1), np.int32)
            else:
                # CUDA: pr_pull reads each arc's row and sums into acc; the NumPy sweeps sum
                # row by row from the offsets (_sums)
                self.in_rows = up(shard.in_rows) if self.cuda else None
                self.in_indptr = shard.in_indptr if not self.cuda else None
                self.acc = device.zeros(self.n_local, self.fdt) if self.cuda else None
            self.y = device.zeros(self.n_local, self.fdt)
            # Jacobi: read one vector, write the other; in place (Gauss-Seidel): one vector
            self.contrib = [device.zeros(n, self.fdt) for _ in range(1 if self.inplace else 2)]
            self.outs = None        # per parity: the vectors finalize writes (see set_outputs)
            self.stats = None       # [iteration][diff, mass] (see alloc_stats)
            self.stats_of = None    # every device's stats, in device order (see set_check_group)
        else:
            self.out_indptr = up(shard.out_indptr)
            self.out_indices = up(packed_arcs(shard.out_indices, shard.out_factors) if self.cuda
                                  else shard.out_indices)
            self.out_factors = None if self.cuda else shard.out_factors
            self.rank = device.zeros(self.n_local, np.float64)
            self.residual = device.zeros(self.n_local, self.fdt)
            # float64 on both backends: a round's sums lost small late terms in float32 (iterate.cu)
            self.remote_acc = device.zeros(n if k > 1 else 1, np.float64)
            self.counters = device.zeros(2, np.uint64)
            # the push rule (thresholds.py): the kernels take the rule as a flag and read a
            # vertex's weight from out_indptr; the host-driven steps that test every residual
            # (NumPy's sweep, active) read the weights; the solver adds up every device's
            self.degree_rule = tuning.push_rule == "degree"
            weights = push_weights(tuning.push_rule, np.diff(shard.out_indptr))
            self.push_weight_total = int(weights.sum())
            self.push_weight = (up(weights.astype(self.fdt))
                                if self.degree_rule and not self.persistent else None)
            self.out_items = None
            self.residual_of = self.offsets_of = None   # see set_push_peers

    def _load_persistent(self, name, trace):
        """The persistent form of kernel ``name`` (iterate.cu: ``<name>_persistent``; csc: before
        the ``_k`` suffix), compiled for cooperative launch, and its grid: every block resident
        (bins: one per SM, as the per-iteration kernel), no more blocks than there is work."""
        from groute.kernels import load_module, preload, resident_blocks_per_sm
        pname = name + "_persistent" if self.bins else name.replace("_k", "_persistent_k")
        with self.device.use():
            fn = load_module(KERNEL, options=self.options, cooperative=True,
                             include=self.include).get_function(pname)
            # loaded here, at set-up: at the launch, devices sharing a GPU (logical devices)
            # may launch different forms, and loading one may wait for a running one
            preload(fn)
            if self.bins:
                if self.nhot:
                    fn.max_dynamic_shared_size_bytes = self.hot_max * 4
                blocks = min(self.sms, -(-self.num_tasks * 32 // BINS_BLOCK))
            else:
                per_sm = resident_blocks_per_sm(fn, BLOCK, self.device.gpu)
                blocks = min(self.sms * per_sm, -(-self.n_local // BLOCK))
        self.kernels["persistent"] = fn
        self.persistent_name = pname
        self.persistent_blocks = max(1, blocks)
        self.ctl = self.device.zeros(CTL_WORDS, np.uint64)
        self._persist_args = self._persist_key = self._persist_done = self._persist_gbar = None
        # PageRankTuning.trace: 4 global-timer stamps per iteration (iterate.cu bsp_persistent)
        self.trace = self.device.zeros(4 * TRACE_ITERATIONS, np.uint64) if trace else None

    def _load_async_persistent(self, k: int):
        """iterate.cu ``pr_async_persistent``, compiled for cooperative launch, and its grid:
        every block resident, no more blocks than the larger of its sweep (its vertices) and
        its flush (the other devices' vertices) has work for; its control block and the host
        buffer it is read back into."""
        from groute.kernels import load_module, preload, resident_blocks_per_sm
        with self.device.use():
            fn = load_module(KERNEL, options=self.options, cooperative=True,
                             include=self.include).get_function("pr_async_persistent")
            preload(fn)     # at set-up, as _load_persistent says why
            per_sm = resident_blocks_per_sm(fn, BLOCK, self.device.gpu)
        work = max(self.n_local, self.n - self.n_local if k > 1 else 0, 1)
        self.kernels["persistent"] = fn
        self.persistent_name = "pr_async_persistent"
        self.persistent_blocks = max(1, min(self.sms * per_sm, -(-work // BLOCK)))
        self.ctl = self.device.zeros(ASYNC_CTL_WORDS, np.uint64)
        self._persist_host = (self.device.host_buffer(ASYNC_CTL_WORDS, np.uint64), None)
        self._persist_done = None

    def _grid(self, work_items, per_block=BLOCK, waves=8):
        return (max(1, min(-(-work_items // per_block), self.sms * waves)),)

    # BSP ----------------------------------------------------------------------------------------
    def reads(self):
        """Which vertices this device's in-arcs read (host bool per global id), found once by a
        scatter over its own in-arcs where they live: one pass over the arcs in all, where
        filtering every peer's arcs for every device would pass over them k times."""
        if getattr(self, "_reads", None) is None:
            xp = self.device.xp
            with self.device.on_compute():      # after the kernels that built the arcs
                used = xp.zeros(max(self.n, 1), dtype=bool)[:self.n]
                if self.num_in:     # the sources (a weighted CUDA shard's first column)
                    used[self.in_cols[:, 0] if self.in_cols.ndim == 2 else self.in_cols] = True
                self._reads = np.asarray(self.device.to_host(used), dtype=bool)
        return self._reads

    def set_outputs(self, targets):
        """``targets``: the devices (self first, at most :data:`MAX_OUTPUTS`) whose copy of the
        contribution vector this device's finalize writes directly (peer stores); the others get
        copies. A peer gets only the vertices its in-arcs read (``need`` bit masks from the
        peers' :meth:`reads`), so a well-partitioned graph sends just its boundary."""
        if len(targets) > MAX_OUTPUTS:
            raise ValueError(f"{len(targets)} output vectors: need holds {MAX_OUTPUTS} bits")
        # how many, not the devices: a device holding its peers (and itself) would keep their
        # arrays from being freed until the garbage collector runs
        self.num_outputs = len(targets)
        # per peer output j >= 1, the local vertices it reads: what the NumPy sweeps and the
        # persistent csc kernels store into it (exports, below); the other CUDA kernels test
        # need[v] and go without
        listed = not self.cuda or (self.persistent and not self.bins)
        need = np.ones(self.n_local, np.uint8)
        lists = []
        self.peer_stores = 0        # elements stored into peers per iteration
        for bit, peer in enumerate(targets[1:], start=1):
            used = peer.reads()[self.lo:self.hi]
            need[used] |= np.uint8(1 << bit)
            self.peer_stores += int(np.count_nonzero(used))
            if listed:
                lists.append(np.flatnonzero(used).astype(np.int32))
        if self.cuda:
            ptrs = [t.contrib[par % len(t.contrib)].data.ptr for par in range(2) for t in targets]
            with self.device.use():
                # one upload of both parities: the persistent kernels take the whole array, an
                # iteration of the others the half of the parity it writes (a view)
                self.outs_both = self.device.asarray(np.array(ptrs, dtype=np.uint64))
                self.outs = [self.outs_both[:len(targets)], self.outs_both[len(targets):]]
                self.need = self.device.asarray(need)
                # the persistent csc kernels store into the peers from these export lists
                # after the sweep (iterate.cu pr_export), not by testing need[v] for every vertex:
                # output j's vertices are exports[export_off[j]:export_off[j + 1]] (nothing
                # listed for the kernels that test need[v]; the per-iteration csc kernels take
                # the arguments unused)
                off = np.zeros(len(targets) + 1, np.int32)
                if listed:
                    off[2:] = np.cumsum([x.size for x in lists])
                self.nexports = int(off[-1])
                self.exports = self.device.asarray(
                    np.concatenate(lists) if self.nexports else np.zeros(1, np.int32))
                self.export_off = self.device.asarray(off)
                if self.persistent:     # the vectors its iterations read, by parity (Jacobi)
                    self.contribs = self.device.asarray(
                        np.array([c.data.ptr for c in self.contrib], dtype=np.uint64))
        else:
            self.outs = [[t.contrib[par % len(t.contrib)] for t in targets] for par in range(2)]
            self.need_idx = [None] + lists

    def set_copies(self, devs, outputs):
        """The copies that follow each iteration's kernel, per parity of the vector written:
        ``(peer's slice, own slice)`` for every peer of ``devs`` this device does not store
        into (not in ``outputs``, what :meth:`set_outputs` was given; all of them without
        peer stores), made once so an iteration only issues them."""
        mine = [c[self.lo:self.hi] for c in self.contrib]
        self.copies = [[(p.contrib[par % len(p.contrib)][self.lo:self.hi], mine[par % len(mine)])
                        for p in devs if self.n_local and not any(p is x for x in outputs)]
                       for par in range(2)]

    def alloc_stats(self, max_iterations: int):
        """The per-iteration ``[diff, mass]`` rows (and, "bins" on CUDA, the per-iteration task
        counters), allocated once per solver (peers keep pointers to the rows, see
        :meth:`set_check_group`) and cleared by :meth:`bsp_reset`."""
        self.stats = self.device.zeros((max_iterations, 2), np.float64)
        self._reset_launch = None   # bsp_reset's launch holds the arrays: rebuilt with them
        if self.cuda and self.bins:     # per iteration: the next task to take
            self.task_next = self.device.empty(max_iterations, np.int32)
        if self.persistent:     # where a persistent run's control words and stats land
            self._persist_host = (self.device.host_buffer(CTL_WORDS, np.uint64),
                                  self.device.host_buffer((max_iterations, 2), np.float64))

    def set_check_group(self, devs):
        """The devices whose stats the stopping check adds up, in device order (the host adds
        them in the same order): device pointers for the CUDA kernels, arrays for NumPy. The
        last set-up step (after :meth:`set_outputs` and :meth:`alloc_stats`): the fused
        kernels' fixed arguments are bound here."""
        if self.cuda:
            with self.device.use():
                self.stats_of = self.device.asarray(
                    np.array([d.stats.data.ptr for d in devs], dtype=np.uint64))
            if self.fused:
                self._bind_fused_args()
        else:
            self.stats_of = [d.stats for d in devs]

    def _bind_fused_args(self):
        """The arguments of the fused kernels (iterate.cu ``pr_csc*``, ``pr_bins*`` and their
        persistent forms, which share the order) that stay the same for the solver's life,
        in the pieces between the items :meth:`_fused_args` adds per launch."""
        targets = (np.int32(self.num_outputs), self.need)
        if self.bins:
            head = (np.int32(self.num_tasks), self.task_row, self.task_info, self.in_indptr,
                    self.in_cols)
            targets += (np.int32(self.lo), self.part, self.hub_count, np.int32(self.hub_degree),
                        np.int32(self.nhot))
            tail = ()
        else:
            head = (np.int32(self.n_local), np.int32(self.lo), self.in_indptr, self.in_cols)
            targets += (self.exports, self.export_off, np.int32(self.nexports))
            tail = (np.int32(self.small_degree),)
        self._fixed_args = (head, (np.float32(self.alpha), self.y, self.inv_outdeg), targets,
                            (self.stats_of, np.int32(len(self.stats_of))), np.float64(self.tol),
                            tail)

    def _fused_args(self, read, base, outs, nxt, stats, prev=None):
        """A fused kernel's arguments: ``read`` the vector (per-iteration) or both vectors'
        pointers (persistent) it reads, ``outs`` the pointer table of the vectors it writes,
        ``nxt`` ("bins") its task counter(s), ``stats`` its row(s); ``prev`` the iteration the
        per-iteration kernel's stopping check reads (-1: none; None: persistent, which checks
        at its barrier)."""
        head, values, targets, group, tol, tail = self._fixed_args
        check = (*group, tol) if prev is None else (*group, np.int32(prev), tol)
        return (*head, read, self._base_arg(base), *values, outs, *targets,
                *(() if nxt is None else (nxt,)), stats, *check, *tail)

    def _base_arg(self, base):
        """The kernels' base argument: the uniform ``base`` (float32), or the device's base
        vector (iterate.cu ``base_t``)."""
        return np.float32(base) if self.base is None else self.base

    def _base_value(self, base):
        """The base term of the NumPy steps: ``base``, or the base vector."""
        return base if self.base is None else self.base

    def converged_before(self, t: int) -> bool:
        """NumPy form of ``bsp_converged`` (iterate.cu): whether iteration ``t - 1`` met the stopping
        rule on all devices together; runs in stream order after every device's iteration
        ``t - 1`` (the stream waited for their events)."""
        if not self.device_check or t == 0:
            return False
        diff = mass = 0.0
        for st in self.stats_of:
            diff += st[t - 1, 0]
            mass += st[t - 1, 1]
        return bool(self.iteration.stopped(diff, mass, self.tol))

    def bsp_reset(self):
        """The start of a per-iteration run: y = :attr:`y0`, vector 0 = :attr:`contrib0`, stats and
        counters zeroed (CUDA: one launch of iterate.cu ``pr_bsp_reset``, its arguments built at the
        first run; the persistent kernels do the same themselves, see :meth:`persistent_launch`)."""
        y0 = self.y0
        if self.cuda:
            if self._reset_launch is None:
                bins = self.bins
                args = (np.int32(self.n_local), np.float32(y0), self.y, np.int32(self.n),
                        self.contrib0, self.contrib[0], self.stats, np.int32(self.stats.size),
                        self.hub_count if bins else np.uint64(0),
                        np.int32(self.hub_count.size if bins else 0),
                        self.task_next if bins else np.uint64(0),
                        np.int32(self.task_next.size if bins else 0),
                        np.uint64(0) if self.fused else self.acc)
                grid = self._grid(max(self.n // 4, self.n_local, 1))
                fn = self.kernels["reset"]
                self._reset_launch = lambda: fn(grid, (BLOCK,), args)
            self.stream.submit(self._reset_launch)
            if self.y_start is not None:
                self.stream.copy(self.y, self.y_start)
            return

        def reset():
            if self.y_start is None:
                self.y.fill(y0)
            else:
                self.y[...] = self.y_start
            self.contrib[0][...] = self.contrib0
            self.stats.fill(0)
        self.stream.submit(reset)

    def set_base(self, base):
        """Replace this device's base vector (host values in its order) before the next run;
        the kernels read it where it is (a solver built with a base vector)."""
        upload = self.device.asarray(np.asarray(base).astype(self.fdt))
        self.stream.copy(self.base, upload)
        self._base_upload = upload      # held until the copy has run

    def bsp_step(self, t: int, base: float):
        """Iteration ``t``: pull from contrib[t % 2], write own slice of contrib[(t+1) % 2] (in
        place: both are contrib[0])."""
        src, outs = self.contrib[t % len(self.contrib)], self.outs[(t + 1) % 2]
        stats = self.stats[t]
        if self.cuda and self.fused:
            # the device-side check of iteration t - 1 (all devices' stats), or none
            args = self._fused_args(src, base, outs, self.task_next[t:t + 1] if self.bins else None,
                                    stats, t - 1 if self.device_check and t > 0 else -1)
        if self.cuda and self.bins:
            def launch():
                self.kernels["csc"](self.grid, (BINS_BLOCK,), args, shared_mem=self.nhot * 4)
        elif self.cuda and self.fused:
            def launch():
                if self.n_local:
                    self.kernels["csc"](self.grid, (BLOCK,), args)
        elif self.inplace:      # CPU: Gauss-Seidel by blocks of vertices, in order
            def launch():
                if self.converged_before(t):
                    return
                nl, lo = self.n_local, self.lo
                base_v = np.broadcast_to(self._base_value(base), (nl,))
                bounds = np.linspace(0, nl, min(nl, 8) + 1).astype(np.int64)
                ynew = np.empty(nl, self.fdt)
                for a, b in zip(bounds[:-1], bounds[1:]):
                    ynew[a:b] = base_v[a:b] + self.alpha * self._sums(src, a, b)
                    src[lo + a:lo + b] = ynew[a:b] * self.inv_outdeg[a:b]
                stats[0] = np.abs(ynew - self.y).sum()
                stats[1] = ynew.sum()
                self.y[:] = ynew
        elif self.cuda:
            k = self.kernels

            def launch():
                if self.num_in:
                    k["pr_pull"](self.grid, (BLOCK,),
                                 (self.in_rows, self.in_cols, np.int64(self.num_in), src, self.acc))
                if self.n_local:
                    k["pr_finalize"](self.finalize_grid, (BLOCK,),
                                     (np.int32(self.n_local), np.int32(self.lo),
                                      self._base_arg(base),
                                      np.float32(self.alpha), self.acc, self.y, self.inv_outdeg,
                                      outs, np.int32(self.num_outputs), self.need, stats))
        else:
            def launch():
                if self.converged_before(t):
                    return
                # a diverging iteration (Katz's alpha past 1 / lambda_max) overflows: the
                # solver's convergence error says so, not NumPy warnings per sweep
                with np.errstate(over="ignore", invalid="ignore"):
                    ynew = self._base_value(base) + self.alpha * self._sums(src, 0, self.n_local)
                    stats[0] = np.abs(ynew - self.y).sum()
                    stats[1] = ynew.sum()
                self.y[:] = ynew
                c = ynew * self.inv_outdeg
                outs[0][self.lo:self.hi] = c
                for out, idx in zip(outs[1:], self.need_idx[1:]):
                    out[self.lo + idx] = c[idx]
        self.stream.submit(launch)

    def _sums(self, src, a: int, b: int):
        """NumPy: for each local row of ``[a, b)`` the sum of what its in-arcs bring from the
        contribution vector ``src``, in arc order, taken in steps of whole rows of about
        :data:`SWEEP_STEP_ARCS` arcs so that a sweep's temporaries stay that small whatever
        the graph."""
        ip = self.in_indptr
        acc = np.empty(b - a, np.float64)
        for r, e in row_chunks(ip, a, b, SWEEP_STEP_ARCS):
            rows = np.repeat(np.arange(e - r, dtype=np.int32), np.diff(ip[r:e + 1]))
            acc[r - a:e - a] = np.bincount(rows, weights=self._pulled(src, int(ip[r]), int(ip[e])),
                                           minlength=e - r)
        return acc

    def _pulled(self, src, a: int, b: int):
        """NumPy: what in-arcs ``[a, b)`` bring from the contribution vector ``src``."""
        got = src[self.in_cols[a:b]]
        return got if self.in_factors is None else got * self.in_factors[a:b]

    def persistent_launch(self, t_end: int, base: float, y0: float, gbar_ptr: int, gbase: int,
                          k: int, timeout_ns: int):
        """Queue a whole run, iterations [0, t_end), as one cooperative launch (iterate.cu
        ``bsp_persistent``, which starts with :meth:`bsp_reset`'s work). ``gbar_ptr``: device
        0's barrier counter, standing at ``gbase``. A grid the device cannot hold at once is
        halved until it fits (the occupancy answer was optimistic)."""
        from groute.engines.peer_barrier import launch_resident
        fn = self.kernels["persistent"]
        key = (t_end, base, y0, k, timeout_ns)
        if self._persist_key != key:    # packed once: the same for every run of the solver
            head = (*self._fused_args(self.contribs, base, self.outs_both,
                                      self.task_next if self.bins else None, self.stats),
                    np.int32(0), np.int32(t_end), self.ctl)  # t_begin 0: iterate.cu PERSIST_PARAMS
            self._persist_args = KernelArgs((
                *head, np.uint64(gbar_ptr), np.uint64(gbase), np.int32(k), np.int64(timeout_ns),
                np.uint64(0) if self.trace is None else self.trace, np.float32(y0),
                self.contrib0, np.int32(self.n), np.int32(self.n_local),
                np.int32(self.hub_count.size if self.bins else 0)))
            self._persist_gbar = len(head)      # where the meeting's pointer and base go
            self._persist_key = key
        args, at = self._persist_args, self._persist_gbar
        block, shared = (BINS_BLOCK, self.nhot * 4) if self.bins else (BLOCK, 0)

        def launch():
            args.set(at, np.uint64(gbar_ptr))
            args.set(at + 1, np.uint64(gbase))
            self.persistent_blocks = launch_resident(fn, self.persistent_blocks, block, args,
                                                     shared_mem=shared, device=self.device,
                                                     kernel=self.persistent_name)
        self.stream.submit(launch)

    def persistent_fetch(self):
        """Queue the copies of the launch's control words (and BSP's stats rows) into pinned host
        memory (after every device's launch: the next device starts sooner), so that
        :meth:`persistent_result` only waits."""
        ctl_host, stats_host = self._persist_host
        self.stream.copy(ctl_host, self.ctl)
        if stats_host is not None:      # BSP: the stats rows (the push kernel has none)
            self.stream.copy(stats_host, self.stats)
        self._persist_done = self.stream.record()

    def persistent_result(self):
        """This device's control words and stats rows (host arrays, see
        :meth:`persistent_fetch`; None for the push kernel's rows) once its launch has
        finished."""
        self._persist_done.synchronize(spin=SPIN_S)
        return self._persist_host

    def persistent_trace(self, iterations: int):
        """The traced launch's stamps (ns, global timer): ``[iteration][sweep start, grid
        barrier passed, cross-device wait passed, decision handed on]``; None when untraced."""
        if self.trace is None:
            return None
        rows = self.device.to_host(self.trace).astype(np.int64).reshape(TRACE_ITERATIONS, 4)
        return rows[:min(iterations, TRACE_ITERATIONS)]

    def bsp_stats(self, t0: int, t1: int):
        return _sync_host(self.device, self.stats[t0:t1], spin=True)

    def bsp_answer(self):
        """This device's values after a BSP run, as float64, on the device."""
        with self.device.on_compute():
            return self.y.astype(np.float64)

    # asynchronous push --------------------------------------------------------------------------
    def push_reset(self, r0: float):
        """The start of an async run: ranks 0, every residual ``r0`` (or the base vector)."""
        def reset():
            self.rank.fill(0)
            if self.base is None:
                self.residual.fill(r0)
            else:
                self.residual[...] = self.base
            self.remote_acc.fill(0)
        self.stream.submit(reset)

    def thresholds(self, eps: float):
        """The owned vertices' push thresholds for ``eps`` per unit of weight
        (:mod:`.thresholds`): ``eps`` itself (uniform rule), or ``eps`` times each vertex's
        weight, rounded as the kernels' ``above_threshold`` rounds (one product in
        :attr:`fdt`)."""
        eps = self.fdt(eps)
        return eps if self.push_weight is None else self.push_weight * eps

    def active(self, eps: float) -> int:
        """How many owned vertices have a residual above their threshold for ``eps``
        (:meth:`thresholds`; synchronises)."""
        xp = self.device.xp
        count = call_on_stream(self.stream,
                               lambda: xp.count_nonzero(self.residual > self.thresholds(eps)))
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
                                  self.out_indices, np.float32(self.alpha), np.float32(eps),
                                  np.int32(self.degree_rule), self.residual, self.rank,
                                  self.remote_acc, self.counters))
            if self.n_local:
                self.stream.submit(launch)
                c = _sync_host(self.device, self.counters)
                return int(c[0]), int(c[1])
            return 0, 0
        return call_on_stream(self.stream, self._push_numpy, eps, sweeps, remote)

    def _push_numpy(self, eps, sweeps, remote):
        ip, ix, d, lo, nl = self.out_indptr, self.out_indices, self.alpha, self.lo, self.n_local
        pushed = arcs = 0
        above = self.thresholds(eps)
        for _ in range(sweeps):
            act = np.flatnonzero(self.residual > above)
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
                share = np.where(deg > 0, self.iteration.share_numpy(d * r, deg), 0.0)
            vals = share[owner] if self.out_factors is None else share[owner] * self.out_factors[eids]
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
            with self.device.on_compute():
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
                with np.errstate(over="ignore"):    # a diverging run (Katz, alpha too big):
                    vals = seg[nz].astype(np.float32)   # inf, and the solver says so
                seg[nz] = 0
                out.append(pack_items((nz + r[0]).astype(np.int64), vals))
            return out
        return call_on_stream(self.stream, pack_numpy)

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

    def push_answer(self):
        """This device's values after a push run (ranks plus what is left of the residuals),
        as float64, on the device."""
        with self.device.on_compute():
            return self.rank + self.residual.astype(np.float64)

    def set_push_peers(self, devs, offsets):
        """The persistent push kernel's view of the other devices: every device's residual
        array (device pointers, in device order), where this device's flushes add, and the
        vertex ``offsets`` of their ranges (k + 1)."""
        with self.device.use():
            self.residual_of = self.device.asarray(
                np.array([d.residual.data.ptr for d in devs], dtype=np.uint64))
            self.offsets_of = self.device.asarray(np.asarray(offsets, dtype=np.int32))

    def push_persistent_launch(self, index: int, k: int, base: float, eps0: float,
                               eps_per_mass: float, bound: float, check_every: int,
                               max_rounds: int, gbar_ptr: int, gbase: int, timeout_ns: int):
        """Queue a whole asynchronous solve as one cooperative launch of iterate.cu
        ``pr_async_persistent`` (device ``index`` of ``k``): it starts from ``base`` (the
        uniform value, or this device's base vector) itself, pushes a vertex above the
        threshold ``max(eps0, eps_per_mass * mass)`` per unit of its weight (the push rule,
        :mod:`.thresholds`) and decides with the other devices every
        ``check_every`` rounds whether the stopping rule (its ``bound``) holds, for at most
        ``max_rounds`` rounds. ``gbar_ptr``: device 0's meeting block, its counter standing at
        ``gbase``."""
        from groute.engines.peer_barrier import launch_resident
        fn = self.kernels["persistent"]
        args = (np.int32(self.n_local), np.int32(self.lo), np.int32(self.n), self.out_indptr,
                self.out_indices, self._base_arg(base), np.float32(self.alpha),
                np.float32(eps0), np.float64(eps_per_mass), np.int32(self.degree_rule),
                np.float64(bound), self.residual,
                self.rank, self.remote_acc, self.residual_of, self.offsets_of,
                np.int32(check_every), np.int32(max_rounds), self.ctl, np.uint64(gbar_ptr),
                np.uint64(gbase), np.int32(k), np.int32(index), np.int64(timeout_ns))

        def launch():
            self.persistent_blocks = launch_resident(fn, self.persistent_blocks, BLOCK, args,
                                                     device=self.device,
                                                     kernel=self.persistent_name)
        self.stream.submit(launch)


class PushWorker:
    """The asynchronous worker the distributed worklist drives (one per device).

    Work = owned vertices whose residual exceeds their threshold for ``eps`` (the push rule:
    :meth:`IterationDevice.thresholds`); an ``advance`` runs ``sweeps`` push
    sweeps and returns the combined remote contributions as per-destination item arrays. After
    ``budget`` sweeps the worker gives up (:attr:`exhausted`) and reports no work, so a run
    whose residuals never fall below ``eps`` (an iteration that diverges) ends.
    """

    def __init__(self, dev: IterationDevice, index: int, offsets, sweeps: int, budget: int):
        from groute.worklist import LocalWork
        self.LocalWork = LocalWork
        self.dev, self.index, self.sweeps, self.budget = dev, index, sweeps, int(budget)
        k = len(offsets) - 1
        self.ranges = [None if j == index else (int(offsets[j]), int(offsets[j + 1])) for j in range(k)]
        self.remote = k > 1
        self.eps = 0.0
        self.r0 = 0.0
        self.work = LocalWork()
        self.pushed = self.arcs = self.advances = self.items_out = self.swept = 0
        self.exhausted = False

    def configure(self, eps, r0):
        # the kernels compare in float32: use the float32 value everywhere so that "active" agrees
        self.eps = float(self.dev.fdt(eps))
        self.r0 = r0

    def start(self, threshold):
        self.dev.push_reset(self.r0)
        self.pushed = self.arcs = self.advances = self.items_out = self.swept = 0
        self.exhausted = False
        self.work = self._local_work()
        return self.work

    def _local_work(self):
        """The owned vertices still above ``eps`` (none once exhausted)."""
        near = 0 if self.exhausted else self.dev.active(self.eps)
        if near and self.swept >= self.budget:
            self.exhausted, near = True, 0
        return self.LocalWork(near=near)

    def advance(self, threshold, *, max_rounds=None, self_advance=False):
        sweeps = self.sweeps if max_rounds is None else max(1, min(self.sweeps, int(max_rounds)))
        pushed, arcs = self.dev.push_sweeps(self.eps, sweeps, self.remote)
        self.pushed += pushed
        self.arcs += arcs
        self.advances += 1
        self.swept += sweeps
        outbox = self.dev.pack(self.ranges) if self.remote else [None]
        self.items_out += sum(int(a.shape[0]) for a in outbox if a is not None)
        self.work = self._local_work()
        return self.work, outbox

    def absorb(self, item_arrays, threshold):
        self.dev.apply(item_arrays)
        self.work = self._local_work()
        return self.work

    def split(self, threshold):
        return self.work
