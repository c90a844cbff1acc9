"""Relaxations (BFS, SSSP, any :class:`~.relaxation.Relaxation`) on CUDA devices in one
persistent launch per device (``exchange="peer"``).

The host-driven BSP loop (:class:`~groute.worklist.DistributedWorklist`) pays a few host
round trips per level on every device, and the GIL serialises the device threads: on big graphs
the host's time per level outweighs the kernels' (docs/TRAVERSAL.md). Here the
host launches ``peer.cu`` once per device and waits: a unit relaxation runs ``peer_bfs``, any
other ``peer_sssp`` (both kernels are named for their first relaxation; the relaxation's
``arc_value`` is the generated header's). The kernels offer remote
vertices to their owners by reductions in the owners' memory over NVLink (BFS: a bit in the
owner's inbox; SSSP: a min on the owner's distance and a bit in its inbox), BFS shares frontier
bitmaps by peer stores for pull levels, and the devices meet at a cross-device barrier in device
0's memory: kernels push remote work straight into a peer's memory (docs/ARCHITECTURE.md,
"Decisions and why").
Needs peer access with native atomics between every pair of devices (NVLink);
:func:`groute.engines.peer_barrier.unavailable` says why it cannot run elsewhere.

The per-device rows, weights, values and queues (SSSP: and ``sent_best``) are a
:class:`groute.engines.relax.cuda_worker.CUDATraversalArrays` the solver builds as :func:`arrays_needed`
says (no worklist, no worker: their queues and outboxes would go unused); this module adds the
bitmaps (BFS: replicated frontier, ``sent``; both: inbox; SSSP: ``active``), a small control
block per device and the global block on device 0.

Tuning (:class:`groute.tuning.TraversalTuning`): ``max_rounds`` (the bound on rounds),
``trace`` (per-level timestamps in ``stats["level_trace_us"]``), ``peer_blocks`` (the most
blocks per device; default every resident block) and ``peer_refresh`` (SSSP: after which
rounds each device reads its peers' distances into its ``sent_best``: ``refresh_sent``); a
device waits at a cross-device barrier for
:data:`groute.engines.peer_barrier.BARRIER_TIMEOUT_S` before the run raises.
"""
from __future__ import annotations

import functools
import logging
import math
from pathlib import Path

import numpy as np

from groute.device.ipc import PeerAddresses
from groute.engines import peer_barrier
from groute.engines.peer_barrier import (MAX_DEVICES, CrossDeviceBarrier, launch_resident,
                                         together)
from groute.engines.protocol import ABORT_OWN, PROTOCOL_WORDS, LaunchStop, own_words
from groute.kernel_launch import KernelArgs
from groute.kernels import check_struct_layout, load_module, pack_struct, resident_blocks_per_sm
from groute.tuning import TraversalTuning

from .seeds import SeedBuffer, owned_seeds

log = logging.getLogger(__name__)

KERNEL = Path(__file__).with_name("peer.cu")
BLOCK = 256
#: peer.cu: PeerWord (int32 words after the protocol's in the control block), ABORT_ROUNDS,
#: PeerCounter, Global
PADVANCES, PEER_WORDS = 4, 8
CTL_WORDS = PROTOCOL_WORDS + PEER_WORDS // 2
ABORT_ROUNDS = ABORT_OWN
PROCESSED, EDGES, DEFERRALS, TOTAL_ROUNDS, PULL_ROUNDS = 0, 1, 2, 3, 11
TOTALS, REMOTE_OFFERS, BITMAP_WORDS, RECEIVED, REFRESHES, SEED_ARCS = 27, 31, 32, 33, 34, 35
COUNTERS = 36
GLOBAL_SIZE = 16
TRACE_LEVELS = 64
#: BFS from at most this many seeds shares its first level: every device reads every seed's
#: row and claims its own targets (``expand_shared_seeds`` in peer.cu), so level 0 needs no
#: meeting and no offers; more seeds would make every device read every seed's arcs
SHARED_SEEDS = 64

#: seconds the host polls the launches' read-backs without sleeping: the run ends when they
#: land, and the back-off of a sleeping wait (groute.waiting.wait_for, whose sleeps grow to
#: milliseconds) would add that much to a run of a few milliseconds
READBACK_SPIN_S = 0.25


def arrays_needed(unit: bool) -> dict:
    """The :class:`~groute.engines.relax.cuda_worker.CUDATraversalArrays` options the kernel of
    a ``unit`` relaxation (``peer_bfs``) or another (``peer_sssp``) needs: the first alternates
    two frontier queues and remembers its offers in its own ``sent`` bitmap; the second
    rebuilds one queue every round and keeps ``sent_best`` (read with several devices)."""
    if not isinstance(unit, bool):
        raise ValueError(f"arrays_needed takes unit, whether every arc adds one (a bool), "
                         f"got {unit!r}")
    return {"queues": 2, "sent_best": False} if unit else {"queues": 1, "sent_best": True}


class PeerTraversal:
    """One run = one cooperative launch of ``peer_bfs`` or ``peer_sssp`` per device; see the
    module docstring.

    ``arrays``: per device, the :class:`~groute.engines.relax.cuda_worker.CUDATraversalArrays` that
    :func:`arrays_needed` asks for (shared, not copied: values land in their ``dist``);
    ``offsets``: the partition's vertex ranges; ``num_arcs``: out-arcs of the whole graph;
    ``symmetric``: BFS pull levels are allowed (in-arcs = out-arcs); ``app``: the name in
    messages; ``relaxation``: what runs (a unit one on ``peer_bfs``, any other on
    ``peer_sssp``); the latter: ``kind`` ("int" or "float" values), ``weighted`` (else weight 1
    per arc),
    ``delta`` (soft-priority step in value units, also the first threshold; ``math.inf``:
    priority off, Bellman-Ford rounds); ``tuning``: a :class:`~groute.tuning.TraversalTuning`
    (None: from the environment), whose ``trace`` times each level's phases on the GPU
    (``level_trace_us``), ``max_rounds`` bounds SSSP's rounds (the host then raises with the
    last round's sums), ``peer_blocks`` caps the grid and ``peer_refresh`` sets after which
    SSSP rounds each device refreshes its ``sent_best`` from the owners' distances.
    """

    def __init__(self, ctx, arrays, offsets, *, num_vertices: int, num_arcs: int, symmetric: bool,
                 app: str, relaxation, kind: str = "int", weighted: bool = False,
                 delta: float = math.inf, tuning: TraversalTuning | None = None):
        self.unit = bool(relaxation.unit)
        if self.unit and (weighted or kind != "int"):
            raise ValueError(f"peer {app}: a unit relaxation counts hops: no weights, int values")
        if not delta > 0:
            raise ValueError(f"delta must be > 0, got {delta!r}")
        from .cuda_worker import _bits, traversal_options
        self.app, self.kind = app, kind
        self.kernel = "peer_bfs" if self.unit else "peer_sssp"
        self.include = (relaxation.include_dir,)
        # SSSP's first threshold is delta (the source has value 0); inf bits: no priority
        self.delta_bits = _bits(delta, kind)
        tuning = TraversalTuning.given(tuning)
        self.max_rounds = int(tuning.max_rounds)
        # SSSP: refresh_sent after a round that improved this many values (-1: never)
        self.refresh_at = (-1 if tuning.peer_refresh is None
                           else math.ceil(float(tuning.peer_refresh) * max(int(num_vertices), 1)))
        self.options = (f"-DBLOCK={BLOCK}", *traversal_options(kind, weighted, self.unit))
        self.ctx = ctx
        self.devices = list(ctx.devices)
        self.arrays = list(arrays)
        self.k = len(self.devices)
        self.n = int(num_vertices)
        offsets = self.offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offsets)
        words = (sizes + 31) // 32
        rep_base = np.zeros(MAX_DEVICES, np.int32)
        rep_base[:self.k] = np.concatenate([[0], np.cumsum(words)[:-1]])
        #: the devices this process drives: all of them, or across processes its rank's
        self.local = [i for i in range(self.k) if ctx.is_local(i)]
        none = lambda: [None] * self.k  # noqa: E731
        self.state, self.ctl, self.counters, self.fns, self.blocks = (none() for _ in range(5))
        self.rep, self.sent, self.inbox, self.active, self.trace = (none() for _ in range(5))
        self.state_host, self.args = none(), none()
        #: per device, the kernel's launch arguments, packed at its first launch (_launch)
        self.launch_args = none()
        with together(ctx, "set up its peer kernel", f"peer {app}"):
            block = self._allocate(words, tuning)
        #: what the peers write, at addresses this process's kernels can use (across
        #: processes: mapped through CUDA IPC)
        self.addresses = PeerAddresses(ctx)
        try:
            peers = {name: self.addresses.table(arrays, name) for name, arrays in (
                ("the control blocks", self.ctl), ("the frontier copies", self.rep),
                ("the inboxes", self.inbox),
                ("the values", [None if x is None else x.dist for x in self.arrays]),
                # BFS's shared first level reads the seeds' rows where they lie
                ("the rows", [None if x is None or not self.unit else x.indptr
                              for x in self.arrays]),
                # (none for a device without arcs: an empty array has no allocation to map)
                ("the arcs", [None if x is None or not self.unit or not x.indices.size
                              else x.indices for x in self.arrays]),
                ("the meeting block", [block] + [None] * (self.k - 1)))}
            meeting = peers.pop("the meeting block")[0]
            self.barrier = CrossDeviceBarrier(self.devices, block, address=meeting,
                                              ranks=getattr(ctx, "ranks", None))
            with together(ctx, "uploaded its peer kernel's arguments", f"peer {app}"):
                for i in self.local:
                    self.args[i] = self._upload_args(i, offsets, rep_base, num_arcs, symmetric,
                                                     list(peers.values()))
        except BaseException:
            self.addresses.close()
            raise
        self.counters_host = [{} for _ in self.devices]
        self.seed_buffers = [SeedBuffer() for _ in range(self.k)]
        self.shared_buffers = [SeedBuffer() for _ in range(self.k)]   # BFS: every seed
        self._staged = None         # per device, the seeds' pointer and count (prepare)
        self._shared_rows = 0       # remote seed rows a shared level 0 reads (prepare)
        log.info("peer %s (%s) on %d devices, grids %s x %d", app, self.kernel, self.k,
                 self.blocks, BLOCK)

    # ------------------------------------------------------------------ setup
    def _allocate(self, words, tuning):
        """This process's devices' kernels, control blocks, bitmaps and read-back rows, and
        device 0's meeting block where this process drives device 0 (returned; else None),
        zeroed and in place before anything reads them."""
        import cupy
        sssp = not self.unit
        for i in self.local:
            dev = self.devices[i]
            with dev.on_compute():
                module = load_module(KERNEL, options=self.options, cooperative=True,
                                     include=self.include)
                fn = self.fns[i] = module.get_function(self.kernel)
                # counters and control block in one buffer: one read-back per run
                state = self.state[i] = cupy.zeros(COUNTERS + CTL_WORDS, np.uint64)
                self.counters[i], self.ctl[i] = state[:COUNTERS], state[COUNTERS:]
                self.rep[i] = cupy.zeros(max(int(words.sum()), 1) if not sssp else 1, np.uint32)
                self.sent[i] = cupy.zeros(max((self.n + 31) // 32, 1) if not sssp else 1, np.uint32)
                # SSSP: two halves, offers of even and odd rounds
                self.inbox[i] = cupy.zeros(max((1 + sssp) * int(words[i]), 1), np.uint32)
                self.active[i] = cupy.zeros(max(int(words[i]), 1) if sssp else 1, np.uint32)
                self.trace[i] = cupy.zeros(4 * TRACE_LEVELS, np.uint64) if tuning.trace else None
                sms = int(dev.properties()["multiprocessors"])
                blocks = resident_blocks_per_sm(fn, BLOCK, dev.gpu) * sms
                cap = tuning.peer_blocks
                self.blocks[i] = min(blocks, cap) if cap else blocks
            mem = cupy.cuda.alloc_pinned_memory((COUNTERS + CTL_WORDS) * 8)
            self.state_host[i] = np.frombuffer(mem, np.uint64, COUNTERS + CTL_WORDS)
        block = None
        if 0 in self.local:
            with self.devices[0].on_compute():  # the meeting block: counter, global sums
                block = cupy.zeros(GLOBAL_SIZE, np.uint64)
        for i in self.local:                # the zeroed buffers are in place before any launch
            with self.devices[i].use():
                cupy.cuda.runtime.deviceSynchronize()
        return block

    def _upload_args(self, i, offsets, rep_base, num_arcs, symmetric, peers):
        """Device ``i``'s ``PeerArgs`` (:meth:`_pack`) in its memory, the upload ordered
        before the launches that read it; the struct's layout checked against the compiler's
        once per process (the module is cached)."""
        import cupy
        rec = self._pack(i, offsets, rep_base, num_arcs, symmetric, peers)
        with self.devices[i].on_compute():
            if i == self.local[0]:
                layout = load_module(KERNEL, options=self.options, cooperative=True,
                                     include=self.include)
                check_struct_layout(layout.get_function("peer_args_layout"), rec,
                                    ("off", "peer_ctl", "peer_dist"), "peer.cu PeerArgs")
            return cupy.asarray(np.frombuffer(rec.tobytes(), dtype=np.uint8))

    def _pack(self, i, offsets, rep_base, num_arcs, symmetric, peers):
        """``PeerArgs`` of device ``i`` as a NumPy record (C layout: align=True); ``peers``:
        every device's control block, frontier copy, inbox and values, as addresses device
        ``i`` can use (:class:`~groute.device.ipc.PeerAddresses`)."""
        w = self.arrays[i]
        # null for what arrays_needed left out (BFS: sent_best; SSSP: the second queue), which
        # that kernel never reads, and for the trace when off
        ptr = lambda x: x.data.ptr if x is not None else 0  # noqa: E731
        queue1 = w.near[1] if len(w.near) > 1 else None
        ptrs = lambda table: np.array(list(table) + [0] * (MAX_DEVICES - self.k),  # noqa: E731
                                      dtype=np.uint64)
        peer_ctl, peer_rep, peer_inbox, peer_dist, peer_indptr, peer_indices = peers
        off = np.full(MAX_DEVICES + 1, offsets[-1], np.int32)
        off[:self.k + 1] = offsets
        fields = [
            ("indptr", np.uint64, ptr(w.indptr)), ("indices", np.uint64, ptr(w.indices)),
            ("weights", np.uint64, ptr(w.weights)),
            ("dist", np.uint64, ptr(w.dist)), ("queue0", np.uint64, ptr(w.near[0])),
            ("queue1", np.uint64, ptr(queue1)), ("ctl", np.uint64, ptr(self.ctl[i])),
            ("counters", np.uint64, ptr(self.counters[i])), ("rep", np.uint64, ptr(self.rep[i])),
            ("sent", np.uint64, ptr(self.sent[i])), ("inbox", np.uint64, ptr(self.inbox[i])),
            ("active", np.uint64, ptr(self.active[i])), ("sent_best", np.uint64, ptr(w.sent_best)),
            ("global", np.uint64, self.barrier.ptr),
            ("big_items", np.uint64, ptr(w.big_items)), ("big_first_chunk", np.uint64, ptr(w.big_first)),
            ("trace", np.uint64, ptr(self.trace[i])),
            ("num_arcs", np.int64, int(num_arcs)),
            ("n_total", np.int32, self.n), ("me", np.int32, i), ("k", np.int32, self.k),
            ("pull_ok", np.int32, int(symmetric)), ("has_big", np.int32, int(w.has_big)),
            ("off", (np.int32, MAX_DEVICES + 1), off), ("rep_base", (np.int32, MAX_DEVICES), rep_base),
            ("peer_ctl", (np.uint64, MAX_DEVICES), ptrs(peer_ctl)),
            ("peer_rep", (np.uint64, MAX_DEVICES), ptrs(peer_rep)),
            ("peer_inbox", (np.uint64, MAX_DEVICES), ptrs(peer_inbox)),
            ("peer_dist", (np.uint64, MAX_DEVICES), ptrs(peer_dist)),
            ("peer_indptr", (np.uint64, MAX_DEVICES), ptrs(peer_indptr)),
            ("peer_indices", (np.uint64, MAX_DEVICES), ptrs(peer_indices)),
        ]
        return pack_struct(fields)

    @functools.cached_property
    def remote_vertices(self) -> list:
        """Per device, the vertices it does not own (what a refresh of ``sent_best`` reads),
        as Python ints: counted into every run's ``bytes_moved``."""
        total = int(self.offsets[-1])
        return [total - int(hi - lo) for lo, hi in zip(self.offsets[:-1], self.offsets[1:])]

    # ------------------------------------------------------------------ running
    def prepare(self, sources_new, max_level: int | None = None) -> None:
        """Stage the next :meth:`run` from ``sources_new`` (renumbered ids: one, or several
        distinct ones, each at value 0); ``max_level`` (a unit relaxation's ceiling): the
        frontier of that level is not expanded (None: no limit).

        The host's part of a run's start (which device owns which seed, the seeds' copy to
        their devices, queued on each compute stream) happens here, so a timed run begins at
        its launches: on a small graph the run itself is short enough for host work to show."""
        self._staged = None         # a prepare that fails leaves nothing staged
        if max_level is not None and not self.unit:
            raise ValueError(f"peer {self.app}: a ceiling needs a unit relaxation on the peer "
                             f"kernel ({self.kernel} has none); use exchange='host'")
        seeds = self._seeds(sources_new)
        self._level = np.int32(np.iinfo(np.int32).max if max_level is None else int(max_level))
        self._timeout_ns = np.int64(peer_barrier.timeout_ns())     # read per run, as PageRank does
        everyone = np.unique(np.atleast_1d(np.asarray(sources_new, dtype=np.int64)))
        # BFS from a few seeds: every device expands all of them at level 0 (expand_shared_seeds)
        shared = (everyone.astype(np.int32) if self.unit and 0 < everyone.size <= SHARED_SEEDS
                  and self._level > 0 else np.zeros(0, np.int32))
        # the row bounds every device reads of each seed another device owns (bytes_moved)
        self._shared_rows = (self.k - 1) * int(shared.size)
        staged = [None] * self.k
        for i in self.local:
            self.devices[i].compute_stream.submit(self._stage, staged, i, seeds[i], shared)
        self._staged = staged       # only once every device has its seeds

    def run(self, sources_new=None, max_level: int | None = None) -> dict:
        """Traverse from what :meth:`prepare` staged, or from ``sources_new`` (then staged
        here first, with ``max_level``); values land in the arrays' ``dist``.

        One launch per device (each kernel resets its own state first), then each device's
        counters copied back into pinned memory, every copy queued before the host waits for
        them together; nothing else runs on the host in between."""
        if sources_new is not None:
            self.prepare(sources_new, max_level)
        if self._staged is None:
            raise RuntimeError(f"peer {self.app}: run() without prepare(): no seeds staged")
        launched, failure = self.barrier.launch_each(
            lambda i, dev: dev.compute_stream.submit(self._launch, i, dev))
        phase = "could not launch its kernel"
        self._staged = None
        copied = []
        for i in launched:
            stream = self.devices[i].compute_stream
            stream.submit(lambda i=i: self.state[i].get(out=self.state_host[i], blocking=False))
            copied.append(stream.record())
        try:
            if copied:
                type(copied[0]).wait_all(copied, spin=READBACK_SPIN_S)
        except BaseException as exc:
            if len(self.local) == self.k:
                raise
            if failure is None:
                failure, phase = exc, "failed while its kernel ran"
            launched = []       # the other ranks hear it, then all raise
        rows, failure = self.barrier.share_ends({i: self.state_host[i] for i in launched},
                                                failure, phase, f"peer {self.app}")
        stops = [LaunchStop.read(self.devices[i].name, rows[i][COUNTERS:])
                 for i in range(self.k) if rows[i] is not None]
        capped = any(stop.abort == ABORT_ROUNDS for stop in stops)
        self.barrier.finish(stops, failure=failure, ok=not capped, what=f"peer {self.app}",
                            instead="exchange='host'")
        if capped:
            t = [int(x) for x in rows[0][TOTALS:TOTALS + 4]]
            raise RuntimeError(
                f"peer {self.app}: no result after {self.max_rounds} rounds "
                f"(TraversalTuning.max_rounds); "
                f"last round: frontier {t[0]}, improvements {t[1]}, deferred {t[2]}, least value "
                f"bits {t[3]:#x}")
        levels = [stop.ran for stop in stops]
        offers, words, received, refreshes, seed_arcs = [], [], [], [], []
        for i, row in enumerate(rows):
            c = row[:COUNTERS].tolist()     # Python ints, converted once per device
            seed_arcs.append(c[SEED_ARCS])
            offers.append(c[REMOTE_OFFERS])
            words.append(c[BITMAP_WORDS])
            received.append(c[RECEIVED])
            refreshes.append(c[REFRESHES])
            self.counters_host[i] = {"processed": c[PROCESSED] + received[i],
                                     "edges": c[EDGES], "rounds": c[TOTAL_ROUNDS],
                                     "pull_rounds": c[PULL_ROUNDS],
                                     "launches": 1, "reshapes": 0, "deferrals": c[DEFERRALS],
                                     "absorbed": 0}
        out = {"rounds": levels, "items_sent": {f"{i}->peers": n for i, n in enumerate(offers)},
               "items_forwarded": [0] * self.k,
               # BFS: an offer is one bit set by a 4-byte reduction in the owner's inbox, a
               # bitmap word is 4 bytes stored into each peer's copy; SSSP: an offer is two
               # 4-byte reductions (min on the distance, or of the inbox bit)
               # a refresh reads every peer's distances: 4 bytes per vertex it does not own;
               # a shared level 0 reads each other device's seed's row: its two 8-byte bounds
               # and 4 bytes per arc
               "bytes_moved": (4 if self.unit else 8) * sum(offers) + 4 * sum(words)
               + sum(4 * remote * r for remote, r in zip(self.remote_vertices, refreshes))
               + 16 * self._shared_rows + 4 * sum(seed_arcs),
               "threshold_advances": 0 if self.unit else int(
                   own_words(rows[0][COUNTERS:]).view(np.int32)[PADVANCES]),
               "pull_levels": self.counters_host[0]["pull_rounds"],
               "bsp_levels": max(levels), "exchange": "peer", "items_received": received}
        if self.trace[self.local[0]] is not None:
            out["level_trace_us"] = self.ctx.share(
                [self._trace_of(i, levels[i]) if i in self.local else None
                 for i in range(self.k)], "the peer kernels' level traces")
        return out

    def close(self) -> None:
        """Let the other ranks' memory go (across processes, every rank at once:
        :meth:`groute.device.ipc.PeerAddresses.close`); nothing to do in one process."""
        self.addresses.close()

    def _trace_of(self, i, levels):
        """Per level of device ``i``: microseconds in A (BFS: sums and decision; SSSP: the
        scan of the active bits), B (BFS: bitmap exchange; 0 on push levels and in SSSP), the
        expansion, and C (waiting for the others; SSSP: with the sums and decision, and the
        refresh of ``sent_best`` after the rounds that have one)."""
        t = self.devices[i].to_host(self.trace[i]).astype(np.int64).reshape(TRACE_LEVELS, 4)
        rows = []
        for L in range(min(levels, TRACE_LEVELS)):
            # the last level's end: the next level's start where one was stamped
            end = t[L + 1, 0] if L + 1 < TRACE_LEVELS and t[L + 1, 0] >= t[L, 3] else t[L, 3]
            a, b, x = t[L, 1] - t[L, 0], t[L, 2] - t[L, 1], t[L, 3] - t[L, 2]
            rows.append([round(v / 1e3, 1) for v in (a, b, x, end - t[L, 3])])
        return rows

    def _seeds(self, sources_new):
        """Per device, the sources it owns as local ids (int32, host)."""
        return [owned_seeds(sources_new, lo, hi)
                for lo, hi in zip(self.offsets[:-1], self.offsets[1:])]

    def _stage(self, staged, i, seeds, shared):
        """On device ``i``'s compute stream: queue the copy of its ``seeds`` (local ids on the
        host) and of the ``shared`` seeds (global ids; none: level 0 is not shared) and keep
        the kernel's arguments for them in ``staged[i]``."""
        on_device = self.seed_buffers[i].upload(seeds)
        everyone = self.shared_buffers[i].upload(shared)
        staged[i] = (np.uint64(on_device.data.ptr if on_device is not None else 0),
                     np.int32(seeds.size),
                     np.uint64(everyone.data.ptr if everyone is not None else 0),
                     np.int32(shared.size))

    def _launch(self, i, dev):
        """Launch device ``i``'s kernel (cooperative: every block resident) from the seeds
        :meth:`_stage` put there. The arguments are packed once per device
        (:class:`~groute.kernel_launch.KernelArgs`) and their values rewritten in place each
        run: the devices start one after another, each waiting at its first meeting for the
        last, so a launch's host cost is paid once per device per run."""
        ptr, count, shared_ptr, shared_count = self._staged[i]
        values = (ptr, count, np.uint64(self.barrier.base), self._timeout_ns)
        if self.unit:
            values += (self._level, shared_ptr, shared_count)
        else:
            values += (np.int32(self.delta_bits), np.int32(self.max_rounds),
                       np.int64(self.refresh_at))
        args = self.launch_args[i]
        if args is None:
            args = self.launch_args[i] = KernelArgs((self.args[i], *values))
        else:
            for slot, value in enumerate(values, 1):
                args.set(slot, value)
        self.blocks[i] = launch_resident(self.fns[i], self.blocks[i], BLOCK, args, device=dev,
                                         kernel=self.kernel)
