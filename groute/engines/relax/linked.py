"""Asynchronous relaxations (BFS, SSSP, any :class:`~.relaxation.Relaxation`) on several CUDA
devices through device-initiated links
(``mode="async"``, ``exchange="peer"``): one launch per device for the whole run.

On several devices the host-driven worklist returns to the host whenever a round produced items
for another device, so a road-like graph (thousands of levels) pays thousands of host round
trips, and the level-synchronous peer kernel (:mod:`groute.engines.relax.peer`) pays a cross-device
barrier or three per level (docs/TRAVERSAL.md). Here every device runs the fused worker's
rounds (``fused.cu``) in one cooperative launch of ``traverse_linked``
(``linked.cu``) and never waits for another:
offers to vertices a peer owns are stored straight into a ring in the owner's memory, one per
(sender, owner) pair, and published once per round by a counter; the owner applies them in its
next round. A single work counter in device 0's memory (queued items plus items in flight)
tells every device when the traversal is over. The file's header has the protocol.

The per-device state is the worklist path's :class:`~groute.engines.relax.cuda_worker.CUDATraversalWorker`
(rows, values, near and far queues, control block; its outboxes are left at one slot each,
unused); this module adds per device its inbox rings (``capacity`` items per sender: the
largest part's vertex count, at least 2^16 and at most 2^22, rounded up to a power of two; a
full ring only slows its sender), its control block (:mod:`groute.engines.protocol`) and two
small link-state arrays, and on device 0 the meeting block (the meeting counter and the "a
device gave up" flag of every persistent kernel, then the work counter). A
full ring is back-pressure, not loss: the sender keeps the vertex queued and offers it again
next round. A run resets every device's state by one launch of ``reset_linked`` each (values,
queues, counters, link state, control words: a wide grid, so the fills stream at the GPU's
bandwidth, where the persistent kernel's narrow grid would not), all queued before the first
persistent launch; each kernel then places the seeds :meth:`~LinkedTraversal.prepare` staged and
meets the others. A run is these launches (with the NVLink wake copies that
:meth:`~groute.engines.peer_barrier.CrossDeviceBarrier.launch_each` issues where none was staged)
and the read-backs: no host fills or copies of the state.

Tuning (:class:`groute.tuning.TraversalTuning`): ``max_rounds`` (rounds per device before the
run raises) and ``linked_blocks`` (blocks per device; default the fused worker's narrow grid);
an idle device waits for the others for :data:`groute.engines.peer_barrier.BARRIER_TIMEOUT_S` (shared
with the peer kernels) before the run raises.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from groute.engines import peer_barrier
from groute.engines.peer_barrier import CrossDeviceBarrier, launch_resident
from groute.engines.protocol import MEETING_WORDS, PROTOCOL_WORDS, LaunchStop
from groute.kernel_launch import launch_plain
from groute.kernels import check_struct_layout, load_module, pack_struct, resident_blocks_per_sm

from .cuda_worker import BLOCK, DEFERRALS, EDGES, PROCESSED, _bits, fill_blocks, traversal_options

log = logging.getLogger(__name__)

KERNEL = Path(__file__).with_name("linked.cu")
#: linked.cu: LINK_MAX, LinkU64, LinkInt, LinkStop (the status in the control block's RESULT)
LINK_MAX = 8
L_SENT, L_FULL, L_RECEIVED, L_IDLE, L_PUBLISHED, L_U64 = 99, 100, 101, 102, 103, 128
L_INT = 28
STOP_DONE, STOP_ROUNDS = 1, 3
#: device 0's meeting block: the protocol's words (the meeting counter, the gave-up flag), then
#: the work counter
WORK = MEETING_WORDS
GLOBAL_SIZE = MEETING_WORDS + 1
#: ring capacity per (sender, owner) pair, in items, unless given
MIN_CAPACITY, MAX_CAPACITY = 1 << 16, 1 << 22


def linked_options(kind: str, weighted: bool, unit: bool) -> tuple[str, ...]:
    """The compile options of ``traverse_linked`` (``linked.cu``): the relaxation kernels'
    (:func:`~groute.engines.relax.cuda_worker.traversal_options`), the linked workers' block and
    warps that batch small vertices' arcs (``BATCH``)."""
    return (f"-DBLOCK={BLOCK}", *traversal_options(kind, weighted, unit), "-DBATCH=1")


class LinkedTraversal:
    """One run = one cooperative launch of ``traverse_linked`` per device; see the module
    docstring. ``app``: the name in messages; ``relaxation``: what runs (its header is compiled
    in); ``unit``: every arc adds one on this graph. ``workers``: per device, a
    :class:`~groute.engines.relax.cuda_worker.CUDATraversalWorker` (shared: values land in its
    ``dist``); ``offsets``: the partition's vertex ranges;
    ``delta``: soft-priority step (also the first threshold), ``math.inf`` for none; each
    device moves its own threshold when its near work runs out. A ring holds the largest
    part's vertex count of items per (sender, owner) pair, within MIN_CAPACITY..MAX_CAPACITY,
    rounded up to a power of two. The workers' :class:`~groute.tuning.TraversalTuning` also
    tunes this kernel (``max_rounds``, ``linked_blocks``)."""

    def __init__(self, ctx, workers, offsets, *, app: str, relaxation, unit: bool, kind: str,
                 weighted: bool, delta: float = math.inf):
        import cupy
        self.app, self.kind = app, kind
        self.devices = list(ctx.devices)
        self.workers = list(workers)
        self._staged = None         # per device, the kernel's seed arguments (prepare)
        tuning = self.workers[0].tuning
        self.k = len(self.devices)
        if not 2 <= self.k <= LINK_MAX:
            raise ValueError(f"the linked traversal runs on 2 to {LINK_MAX} devices (got {self.k})")
        if not delta > 0:
            raise ValueError(f"delta must be > 0, got {delta!r}")
        sizes = np.diff(np.asarray(offsets, dtype=np.int64))
        want = min(max(int(sizes.max()), MIN_CAPACITY), MAX_CAPACITY)
        self.cap = 1 << (want - 1).bit_length()    # a power of two: ring slot = p & (cap - 1)
        self.delta_bits = _bits(delta, kind)       # also the first threshold: the seeds have 0
        self.max_rounds = int(tuning.max_rounds)
        self.options = linked_options(kind, weighted, unit)
        self.include = (relaxation.include_dir,)
        self.fns, self.blocks, self.rings, self.lu, self.li, self.ctl = [], [], [], [], [], []
        self.resets, self.reset_blocks = [], []
        # per device: its control block (persistent.cuh) and link words (lu, li) as views of
        # one buffer, read back with the worker's counters into pinned memory once per run
        self.state, self.state_host, self.counters_pinned = [], [], []
        cap_blocks = tuning.linked_blocks
        for w, dev in zip(self.workers, self.devices):
            with dev.use():
                module = load_module(KERNEL, options=self.options, cooperative=True,
                                     include=self.include)
                fn = module.get_function("traverse_linked")
                self.fns.append(fn)
                # loaded now, with the module: a reset never loads a kernel during a run
                self.resets.append(module.get_function("reset_linked"))
                self.reset_blocks.append(fill_blocks(w.reset_items, BLOCK, w.blocks))
                sms = int(dev.properties()["multiprocessors"])
                resident = resident_blocks_per_sm(fn, BLOCK, dev.gpu) * sms
                want = cap_blocks or w.narrow_blocks
                self.blocks.append(max(1, min(want, resident)))  # block 0's warp 0: the books
                self.rings.append(cupy.empty(self.k * self.cap, dtype=np.int64))
                state = cupy.zeros(PROTOCOL_WORDS + L_U64 + L_INT // 2, dtype=np.uint64)
                self.state.append(state)
                self.ctl.append(state[:PROTOCOL_WORDS])
                self.lu.append(state[PROTOCOL_WORDS:PROTOCOL_WORDS + L_U64])
                self.li.append(state[PROTOCOL_WORDS + L_U64:].view(np.int32))
                self.state_host.append(dev.host_buffer(state.shape, np.uint64))
                self.counters_pinned.append(dev.host_buffer(w.counters_dev.shape,
                                                            w.counters_dev.dtype))
        with self.devices[0].use():
            self.barrier = CrossDeviceBarrier(self.devices, cupy.zeros(GLOBAL_SIZE, np.uint64))
        self.links = []
        for i, dev in enumerate(self.devices):
            rec = self._pack(i)
            with dev.use():
                if i == 0:
                    module = load_module(KERNEL, options=self.options, cooperative=True,
                                         include=self.include)
                    check_struct_layout(module.get_function("links_layout"), rec,
                                        ("ring_in", "cap", "k"), "linked.cu Links")
                self.links.append(cupy.asarray(np.frombuffer(rec.tobytes(), dtype=np.uint8)))
        for dev in self.devices:            # every buffer in place before any launch
            with dev.use():
                cupy.cuda.runtime.deviceSynchronize()
        self.counters_host = [{} for _ in self.devices]
        log.info("linked %s on %d devices, grids %s x %d, rings of %d items", app, self.k,
                 self.blocks, BLOCK, self.cap)

    def _pack(self, i):
        """``Links`` of device ``i`` as a NumPy record (C layout)."""
        u64 = np.dtype(np.uint64).itemsize
        pad = [0] * (LINK_MAX - self.k)
        ring_out = [self.rings[j].data.ptr + i * self.cap * 8 for j in range(self.k)] + pad
        commit_out = [self.lu[j].data.ptr + i * u64 for j in range(self.k)] + pad  # L_COMMIT_IN
        consumed_at = [self.lu[j].data.ptr + (LINK_MAX + i) * u64 for j in range(self.k)] + pad
        g = self.barrier.ptr
        fields = [
            ("ring_out", (np.uint64, LINK_MAX), np.array(ring_out, np.uint64)),
            ("commit_out", (np.uint64, LINK_MAX), np.array(commit_out, np.uint64)),
            ("consumed_at", (np.uint64, LINK_MAX), np.array(consumed_at, np.uint64)),
            ("ring_in", np.uint64, self.rings[i].data.ptr), ("lu", np.uint64, self.lu[i].data.ptr),
            ("li", np.uint64, self.li[i].data.ptr), ("ctl", np.uint64, self.ctl[i].data.ptr),
            ("meeting", np.uint64, g), ("work", np.uint64, g + WORK * u64),
            ("cap", np.int64, self.cap), ("me", np.int32, i), ("k", np.int32, self.k),
        ]
        return pack_struct(fields)

    # ------------------------------------------------------------------ running
    def _reset(self, i):
        """Queue device ``i``'s reset for the staged run (``reset_linked``, one plain launch: no
        barrier in it) on its compute stream, before its persistent launch."""
        w = self.workers[i]
        seeds, count, ceiling = self._staged[i]
        queued = count if int(ceiling) > 0 else np.int32(0)     # a seed has value 0
        launch_plain(self.resets[i], self.reset_blocks[i], BLOCK,
                     (w.args, self.links[i], queued, np.int32(self.delta_bits), ceiling))

    def _launch(self, i, timeout_ns):
        """Launch device ``i``'s kernel (cooperative: every block resident) from the seeds
        :meth:`prepare` staged, after its reset."""
        w = self.workers[i]
        seeds, count, ceiling = self._staged[i]
        # read before the atomicMin on wide grids only, as the fused worker does
        wide = self.blocks[i] > w.narrow_blocks
        args = (w.args, self.links[i], seeds, count, np.int32(self.delta_bits), ceiling,
                np.int32(self.max_rounds), np.int32(wide), np.int32(w.has_big),
                np.uint64(self.barrier.base), np.int64(timeout_ns))
        self.blocks[i] = launch_resident(self.fns[i], self.blocks[i], BLOCK, args,
                                         device=self.devices[i], kernel="traverse_linked")

    def prepare(self, sources_new, ceiling=None) -> None:
        """Stage the next :meth:`run` from ``sources_new`` (renumbered ids: one, or several
        distinct ones) under ``ceiling`` (values from which a vertex is not expanded: BFS's
        depth limit; None: none): each worker's seeds are copied to its device now, as
        :meth:`PeerTraversal.prepare <groute.engines.relax.peer.PeerTraversal.prepare>` does,
        and the kernels' seed arguments kept, so a timed run begins at its launches."""
        self._staged = None         # a prepare that fails leaves nothing staged
        sources_new = np.atleast_1d(np.asarray(sources_new, dtype=np.int64))
        for w in self.workers:
            w.set_source(sources_new, ceiling)
        self._timeout_ns = peer_barrier.timeout_ns()
        self._staged = [_seed_arguments(w) for w in self.workers]

    def run(self, sources_new=None, ceiling=None) -> dict:
        """Traverse from what :meth:`prepare` staged, or from ``sources_new`` (staged here
        first, with ``ceiling``); values land in the workers' ``dist``.

        Per device a reset launch, then (every reset queued) its persistent launch, then its
        control block and counters read back; besides the launches' wake copies
        (:meth:`~groute.engines.peer_barrier.CrossDeviceBarrier.launch_each`) nothing else is
        queued on the devices."""
        if sources_new is not None:
            self.prepare(sources_new, ceiling)
        if self._staged is None:
            raise RuntimeError(f"linked {self.app}: run() without prepare(): no seeds staged")
        timeout_ns = self._timeout_ns
        # every device's reset queued before any persistent launch: on a GPU that several
        # devices share, a reset queued behind a launched kernel waiting for this device at
        # the start meeting would find no room to run
        for i, dev in enumerate(self.devices):
            dev.compute_stream.submit(self._reset, i)
        launched, failure = self.barrier.launch_each(
            lambda i, dev: dev.compute_stream.submit(self._launch, i, timeout_ns))
        self._staged = None
        for i in launched:
            def read(i=i):      # one stream synchronisation (the second copy's), as peer.py
                self.state[i].get(out=self.state_host[i], blocking=False)
                self.workers[i].counters_dev.get(out=self.counters_pinned[i])
            self.devices[i].compute_stream.submit(read)
        # copies out of the pinned buffers, which the next run reuses
        stops = [LaunchStop.read(self.devices[i].name, self.state_host[i]) for i in launched]
        lu = [self.state_host[i][PROTOCOL_WORDS:PROTOCOL_WORDS + L_U64].copy() for i in launched]
        counters = [self.counters_pinned[i].copy() for i in launched]
        capped = any(stop.status == STOP_ROUNDS for stop in stops)
        done = not capped and all(stop.status == STOP_DONE for stop in stops)
        self.barrier.finish(stops, failure=failure, ok=done, what=f"linked {self.app}",
                            instead="exchange='host'")
        if capped:
            raise RuntimeError(f"linked {self.app}: no result after {self.max_rounds} rounds on a "
                               f"device (TraversalTuning.max_rounds)")
        if not done:
            raise RuntimeError(f"linked {self.app}: a device stopped before the others finished "
                               f"(stop words {[stop.status for stop in stops]})")
        rounds = [stop.ran for stop in stops]
        for i, c in enumerate(counters):
            self.counters_host[i] = {"processed": int(c[PROCESSED]), "edges": int(c[EDGES]),
                                     "rounds": rounds[i], "pull_rounds": 0, "launches": 1,
                                     "reshapes": 0, "deferrals": int(c[DEFERRALS]),
                                     "absorbed": int(lu[i][L_RECEIVED])}
        sent = [int(x[L_SENT]) for x in lu]
        return {"rounds": rounds, "items_sent": {f"{i}->peers": n for i, n in enumerate(sent)},
                "items_forwarded": [0] * self.k,
                "items_received": [int(x[L_RECEIVED]) for x in lu],
                "ring_full": [int(x[L_FULL]) for x in lu],
                "idle_rounds": [int(x[L_IDLE]) for x in lu],
                "publishing_rounds": [int(x[L_PUBLISHED]) for x in lu],
                "bytes_moved": 8 * sum(sent), "threshold_advances": 0, "pull_levels": 0,
                "bsp_levels": 0, "exchange": "peer", "ring_capacity": self.cap}

    def close(self) -> None:
        """Nothing to let go beyond the arrays (one process: the peers' own memory)."""


def _seed_arguments(worker):
    """``traverse_linked``'s seed arguments from what ``worker``'s ``set_source`` staged: its
    seeds on its device (local ids; a null pointer where it owns none), their count and the
    ceiling's bits."""
    seeds = worker.staged_seeds
    return (np.uint64(0 if seeds is None else seeds.data.ptr),
            np.int32(0 if seeds is None else seeds.size), np.int32(worker.ceiling_bits))
