"""The connected components engine: weak components by union-find across devices, Afforest
sampling, then in place or through segments.

**Default (``rest="auto"``): sampling split by rows, changes merged by peer reads, rest in place.**
Afforest (Sutton et al., IPDPS 2018) over the symmetric CSR (directed graphs are symmetrised once,
at set-up, which gives the *weak* components), spread over the devices:

0. The vertices are cut into one contiguous range per device (weighed by a visit plus one link
   per sampling round; in one process the first device takes more, as it would otherwise wait
   while the others describe their arrays: :func:`~.layout.first_extra`; across processes
   each rank's rows are the ones it loaded), and each device holds its rows'
   slice of the CSR and a full-size parent array (``parent[v] <= v``; a CAS links the larger
   root under the smaller one).
1. Every device links each of its vertices to its first ``sample_rounds`` neighbours (a round
   each, its own rows compressed after each: O(n / K), not O(n)) in its own parent array: no
   communication. Before that, every device links the same few arcs: the first
   ``sample_rounds`` arcs of up to ``CCTuning.hubs`` rows of highest degree, of
   ``HUB_DEGREE_FACTOR`` times the mean or more (why: :meth:`ComponentsSolver._keep_hubs`).
2. Every other device describes what its sampling changed: it compresses its array, votes for
   its own giant (its samples are its own rows) and writes one bit per vertex of that giant's
   tree plus a list of ``(vertex, root)`` pairs for the other vertices it moved
   (:meth:`DeviceCC.describe_changes`). The first device waits for all of them (events, no host
   round trip) and merges them in one kernel that reads them directly over NVLink: a hook per
   bit under the sender's giant, one per pair. That reads about n/8 bytes per sender (plus the
   pairs) where the whole array is 4n; a sender whose pairs do not fit their buffer
   (:data:`~groute.engines.components.device.CHANGES_LIST_SHARE`) is read whole instead. One
   level, not a tree of log2 K.
3. On the first device ``num_samples`` random vertices vote for the most frequent root, the
   *giant*, and one kernel links the arcs from slot ``sample_rounds`` on of every vertex *not* in
   the giant's tree (an arc both of whose ends are in the giant's tree joins nothing; any other
   arc is also an arc of its non-giant end, since the adjacency is symmetric), reading the other
   devices' rows over NVLink. That work is tiny on power-law and mesh graphs (a few dozen edges
   after two rounds), so it is not routed anywhere: the stats say ``routed: False`` and count it
   (``rest_rows``, ``rest_arcs``).
4. After the last compression ``parent[v]`` is the smallest vertex id of v's component: the
   canonical label, equal to ``groute.graph.reference.connected_components``.

The host only queues kernels and events on every device's stream and waits once at the end; each
device's part of a run is a few fixed phases (sampling; description; merge and rest), submitted
as they are at the first run and replayed after it (:meth:`DeviceCC.replay`: on CUDA one graph
launch per phase instead of a host call per kernel, which on small graphs set the pace; across
processes with ``exchange="host"`` only the sampling, the rest is steered by the messages).
With one device this is the single-GPU Afforest in place. Why this is the default: the segment path
below spends most of its time on the first device compacting every arc left after sampling, down
to the few edges then routed, so on two GPUs it is slower than one GPU in place; this path is
faster on two than on one where the graph is big enough (docs/PR_CC.md). Sampling is random
access into the parent array and splits across devices, while the merge reads a bit per vertex
from each peer (plus the pairs) and hooks vertices that mostly join one root. It needs peer
access between the devices that read each other (every CUDA pair on an NVLink machine; the CPU
backend's virtual devices read each other's arrays after the same events); ``"auto"`` falls back
to segments without it.

**Groute's design (``rest="segments"``; ``afforest=False`` hooks the whole edge list this way),
as in Groute's CC (seed 004, 5.1.4), topology-driven and edge-list based:**

1. The edge list lives on the first device (with Afforest: the first device samples the whole
   graph, then compacts the arcs from slot ``sample_rounds`` on of the vertices outside the
   giant's tree, each undirected edge once). It is cut into segments, and a
   :class:`~groute.Router` with the first-available policy hands each segment to whichever
   device frees a receive buffer first, so faster devices take more segments.
2. Each device hooks the edges of its segments into its own parent array and compresses it.
3. The parent arrays are merged pairwise in a tree over :class:`~groute.Link` copies: the
   receiver treats each ``(v, other[v])`` as an edge, hooks and compresses.

With one device the segments are processed in place (no copy).

This module holds which path can run (the peer reads) and the solver; which
path ``auto`` picks is :data:`~groute.engines.components.rules.COMPONENTS_RULES`. The host-side
layout (edge list, symmetric CSR, late arcs, the cut of the rows, the edges left after sampling)
is :mod:`groute.engines.components.layout`; each device's parent array and operations, the only
backend-specific code, are :mod:`groute.engines.components.device` (CUDA kernels in
``union_find.cu``; the CPU backend hooks with vectorised NumPy: ``np.minimum.at`` on roots, then
pointer jumping).
"""
from __future__ import annotations

import functools
import time

import numpy as np

from groute.runtime.link import Link
from groute.runtime.policies import first_available
from groute.results import AppResult, complete_stats
from groute.runtime.answer_landing import land_answer
from groute.runtime.context import taking_turns
from groute.runtime.router import Router
from groute.solver import DeviceTimer, Solver, check_graph_for_ranks
from groute.tuning import CCTuning

from .device import Changes, DeviceCC, changes_capacity
from .layout import (edge_count, edge_list, first_extra, highest_degree_first, hub_arcs,
                     hub_degree_bound, late_arcs, late_bitmap, remaining_edges, split_rows,
                     symmetric_csr)
from .memory import components_bytes
from .rules import COMPONENTS_RULES

#: the keys of a components result's ``stats``, on every path (None where a key does not apply
#: to the path that ran): devices, mode ("afforest" or "edge-list"), rest ("kernel", "segments";
#: None for the edge list), routed (whether edges went through the router), edges hooked from the
#: edge list or the compacted rest (None in place), graph_edges, segments and segment_edges,
#: edges_per_device, segments_per_device, rows_per_device (in place), merge_rounds,
#: merges_read_whole (in place on several devices or across processes: merged changes whose
#: pairs did not fit their list, so the receiver read the array whole; across processes rank
#: 0's changes count once per rank they went to), bytes_moved
#: between devices, sample_rounds, giant_root and giant_size (Afforest), rest_rows, rest_arcs
#: and rest_remote_arcs (in place: what the rest kernel linked), phase_seconds (segments: host
#: clock at the end of each phase)
STATS_KEYS = ("devices", "mode", "rest", "routed", "edges", "graph_edges", "segments",
              "segment_edges", "edges_per_device", "segments_per_device", "rows_per_device",
              "merge_rounds", "merges_read_whole", "bytes_moved", "sample_rounds", "giant_root",
              "giant_size", "rest_rows", "rest_arcs", "rest_remote_arcs", "phase_seconds")


# ------------------------------------------------------------------------------------------------
# which path can run
# ------------------------------------------------------------------------------------------------
def changes_held(ctx) -> int:
    """How many change messages this process holds at once (its memory estimate counts them)
    where the ranks exchange messages (``exchange="host"``): rank 0 one from every other
    rank, the others rank 0's; none in one process (the first device reads the others'
    memory) or a job of one rank."""
    k = len(ctx.devices)
    if ctx.ranks is None or k == 1:
        return 0
    return k - 1 if ctx.is_local(0) else 1


def merge_tree(k):
    """The merge tree of ``k`` devices' parent arrays, in order: ``(step, receiver, sender)``
    for step 1, 2, 4, ... (pairs of devices, then pairs of pairs), each receiver ``j`` (a
    multiple of ``2 * step``) merging the array of sender ``j + step``; device 0 merges last."""
    step = 1
    while step < k:
        for j in range(0, k - step, 2 * step):
            yield step, j, j + step
        step *= 2


class _Rows:
    """Another rank's rows as rank 0's rest kernel reaches them: the addresses of its
    ``indptr`` and ``indices`` mapped here (:class:`groute.device.ipc.MappedArray`)."""

    def __init__(self, indptr, indices):
        self.indptr, self.indices = indptr, indices


def peer_path_unavailable(devices) -> str | None:
    """Why the in-place path (module docstring) cannot run on ``devices``: it needs the first
    device to read every other's rows and what each other device's sampling changed."""
    for d in devices[1:]:
        if not devices[0].can_access_peer(d):
            return f"{devices[0].name} cannot access {d.name}'s memory (no peer access)"
    return None


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class ComponentsSolver(Solver):
    """Weak connected components of ``graph``; upload once, :meth:`run` many times. An app
    subclasses it under its own name (:class:`groute.apps.cc.CC`).

    ``rest``: ``"auto"`` (default: ``"kernel"`` where the devices can read each other's memory,
    every pair of an NVLink machine and the CPU backend, else ``"segments"``); ``"kernel"``:
    sampling split by rows, changes merged by peer reads, the rest linked in place on the first
    device (module docstring; the fastest on one and two GPUs); ``"segments"``: Groute's path,
    the first device samples, compacts what is left and routes it as segments.
    ``exchange`` (across processes, the in-place path): ``"auto"`` (default: the
    ``exchange`` rule), ``"peer"``, rank 0 reads every rank's changes and rows in place over
    CUDA IPC as the first device of one process does (CUDA ranks of one host), ``"host"``,
    the changes go to rank 0 and back as messages through Routers, twice a run; no effect in
    one process. ``afforest``: sample first (``False``: hook the whole edge list through
    segments, Groute's design). ``run`` returns the stats keys of :data:`STATS_KEYS` whatever
    path ran.

    ``tuning``: a :class:`~groute.tuning.CCTuning` (None: ``CCTuning.from_environment()``):
    ``sample_rounds``: neighbours each vertex links to before the vote; ``num_samples``:
    voters (at most 1024); ``link`` (CUDA): ``"hook"`` walks both ends to their roots (path
    splitting) and CASes one under the other, ``"light"`` is GAPBS's step (CAS the larger
    parent's slot, else retry one level up), ``"mixed"`` hooks in the first round and links
    lightly after; ``hubs`` (several devices in place): the most rows of highest degree whose
    sampled arcs every device links before its rounds (:meth:`_keep_hubs`; 0: none); ``replay``
    (in place): each device's phases of a run replayed after the first (:meth:`DeviceCC.replay`;
    ``False``: every kernel launched from the host). Segments only: ``segment_edges``, edges
    per segment the router hands out (default: the edge list in about 4 segments per device);
    ``num_buffers``, receive buffers per device link.
    """

    #: the ``auto`` rules this solver decides by and the command line prints
    rules = COMPONENTS_RULES

    engine_family = "components"

    def __init__(self, graph, *, ctx=None, backend="auto", devices="auto", timeout=None,
                 afforest=True, rest="auto", exchange="auto", tuning=None):
        self.graph = graph
        self.n = int(graph.num_vertices)
        if self.n >= 2**31:
            raise ValueError(f"CC supports graphs of fewer than 2**31 vertices, got {self.n}")
        tuning = self.tuning = CCTuning.given(tuning)
        segment_edges, num_buffers = tuning.segment_edges, tuning.num_buffers
        sample_rounds, num_samples, link = tuning.sample_rounds, tuning.num_samples, tuning.link
        if rest not in ("auto", "kernel", "segments"):
            raise ValueError(f"rest must be 'auto', 'kernel' or 'segments', got {rest!r}")
        if rest == "kernel" and not afforest:
            raise ValueError("rest='kernel' hooks what Afforest sampling left: it needs afforest=True")
        if exchange not in ("auto", "peer", "host"):
            raise ValueError(f"exchange must be 'auto', 'peer' or 'host', got {exchange!r}")
        self._merges = self._spread = None   # across processes: the changes' Routers
        self._hub_edges = None      # on several devices in place: the hubs' arcs (_keep_hubs)
        self._addresses = None      # across processes over CUDA IPC: the other ranks' memory
        self._open_context(ctx, devices=devices, backend=backend, timeout=timeout, graph=graph,
                           estimate=components_bytes)
        try:
            self.k = len(self.ctx.devices)
            check_graph_for_ranks(self.ctx, graph, type(self).__name__)
            self.exchange = "peer"
            if self.ctx.ranks is not None:
                self.exchange = self._ranks_exchange(exchange)
            self._check_memory(functools.partial(
                components_bytes,
                received=changes_held(self.ctx) if self.exchange == "host" else 0), graph)
            t0 = time.perf_counter()
            cuda = self.ctx.backend == "cuda"
            self.afforest = bool(afforest)
            self.rounds = int(sample_rounds)
            self.link = link
            ranked = self.ctx.ranks is not None
            #: the indices of the devices this process drives (all, but on a RankContext)
            self._here = [i for i in range(self.k) if self.ctx.is_local(i)]
            if ranked and (rest == "segments" or not afforest):
                raise ValueError("across processes CC runs in place (rest='kernel' or 'auto', "
                                 "afforest=True): the segments path routes the edge list from "
                                 "one device, which no process of the job holds")
            why = None if ranked else peer_path_unavailable(self.ctx.devices)
            if rest == "kernel" and why:
                raise ValueError(f"rest='kernel' reads other devices' memory, but {why}; "
                                 f"use rest='segments'")
            if rest == "auto":
                rest = self.rules["rest"].decide({"peer_access": lambda: why is None}).choice
            self.path = rest if self.afforest else "edge-list"
            self.devs = [DeviceCC(self.ctx.devices[i], self.n) for i in self._here]
            for dev in self.devs:
                dev.replaying = bool(tuning.replay)
            source = self.devs[0].device
            self.offsets = np.array([0, self.n], np.int64)
            if ranked:
                self._setup_ranks(graph, num_samples)
            elif self.afforest:
                indptr, indices = symmetric_csr(graph)
                self.m = int(indices.shape[0]) if graph.directed else edge_count(graph, indptr, indices)
                rng = np.random.default_rng(0x5EED)
                self.samples = source.asarray(rng.integers(0, max(self.n, 1), int(num_samples),
                                                           dtype=np.int64).astype(np.int32))
                self.giant = source.asarray(np.zeros(1, np.int32))
                if self.path == "kernel":
                    self._setup_rows(indptr, indices, cuda)
                else:
                    self.devs[0].set_rows(0, indptr, indices)
                    src, dst = late_arcs(indptr, indices, self.rounds)
                    self.late_src, self.late_dst = source.asarray(src), source.asarray(dst)
            else:
                edges = edge_list(graph)
                self.m = int(edges.shape[0])
                self.edges = source.asarray(edges)
            if segment_edges is None:
                segment_edges = max(1 << 16, -(-self.m // (4 * self.k)))
            self.segment_edges = int(segment_edges)
            self.num_buffers = int(num_buffers)
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _setup_rows(self, indptr, indices, cuda):
        """The in-place path: each device's rows, and on the first device what its rest kernel
        needs to reach every device's rows."""
        self.offsets = split_rows(indptr, self.k, self.rounds, first_extra(self.k))
        for d, dev in enumerate(self.devs):
            lo, hi = int(self.offsets[d]), int(self.offsets[d + 1])
            dev.set_rows(lo, indptr[lo:hi + 1] - indptr[lo], indices[indptr[lo]:indptr[hi]])
        self._set_rest(self.devs, lambda: late_bitmap(indptr, self.rounds))
        if self.k > 1:
            self._keep_hubs(hub_arcs(indptr, indices, self.tuning.hubs, self.rounds,
                                     least_degree=hub_degree_bound(indptr[-1], self.n))[1])
            for d, dev in enumerate(self.devs[1:], start=1):
                self._make_changes(dev, d)
            first = self.devs[0]
            self._sender_changes = [d.changes for d in self.devs[1:]]
            #: the senders' changes as the first device's merge kernel reaches them (CUDA)
            self._senders = first.changes_table(self._sender_changes) if cuda else None

    def _keep_hubs(self, arcs) -> None:
        """On several devices, each device's copy of ``arcs`` (:func:`~.layout.hub_arcs`: the
        hubs' sampled arcs, the same on every device), which :meth:`_sample_rows` links first.

        Why: sampling links a vertex's arcs on the device holding its row only, so on every
        other device the hubs' trees stay apart until the merge. There a vertex of low degree,
        whose first neighbours are hubs, links two different hubs' roots in each round, and
        millions of them try at once to CAS the same few words (docs/PR_CC.md, "Connected
        components", measures it). Linked first, each hub is joined with its first neighbours
        on every device, as on its own: on power-law graphs most of the giant's core."""
        self._hub_edges = None
        if arcs.size:
            edges = np.ascontiguousarray(arcs.reshape(-1, 2))
            self._hub_edges = [dev.device.asarray(edges) for dev in self.devs]

    def _make_changes(self, dev, d):
        """Make device ``d`` (its :class:`DeviceCC` ``dev``) able to describe its changes: its
        voters are its own rows (its giant is what it sampled), as many as the first device's."""
        count = int(self.samples.shape[0])
        lo, hi = int(self.offsets[d]), int(self.offsets[d + 1])
        rng = np.random.default_rng((0x5EED, d))
        voters = rng.integers(lo, hi, count) if hi > lo else np.zeros(count, np.int64)
        dev.make_changes(dev.device.asarray(voters.astype(np.int32)), changes_capacity(self.n))

    def _set_rest(self, held, late):
        """What the first device's rest (:meth:`DeviceCC.link_rest`) reads, and its counters
        (and the merge's, :attr:`moved`):
        the rows of ``held`` (per device: its :class:`DeviceCC`, or across processes another
        rank's rows mapped here, a :class:`_Rows`, or None for rows it does not link). CUDA: a
        table of the rows' addresses (0 for None), the offsets and ``late()``, the bitmap of
        the vertices with arcs past the sampling rounds (only linked rows have any); CPU: the
        held rows."""
        first = self.devs[0].device
        if first.backend == "cuda":
            table = np.array([0 if d is None else first.address(d.indptr) for d in held] +
                             [0 if d is None else first.address(d.indices) for d in held],
                             dtype=np.uint64)
            self.rest = (first.asarray(table), first.asarray(self.offsets.astype(np.int32)),
                         len(held), first.asarray(late()))
            self.counters = first.asarray(np.zeros(4, np.uint64))
            self.moved = first.asarray(np.zeros(2, np.uint64))  # what a merge read (its kernel)
        else:
            self.rest = [(d.lo, d.indptr, d.indices) for d in held if d is not None]
            self.counters = first.asarray(np.zeros(4, np.int64))
            self.moved = first.asarray(np.zeros(2, np.int64))

    def _setup_ranks(self, graph, num_samples):
        """Across processes (a RankContext and a graph loaded by ranks): this rank's rows of
        the undirected graph (a directed graph's in-arcs come from every rank's out-arcs), the
        voters (the same on every rank), its changes, and by :attr:`exchange` either rank 0's
        tables of every rank's rows and changes (:meth:`_setup_peer_reads`) or the late arcs
        its own rest links and the Routers the changes go through as messages: to rank 0, and
        rank 0's to every rank."""
        from groute.graph.rank_graph import ranked_in_arcs
        from groute.runtime.policies import by_owner, to_the_others
        p = graph.part
        indptr = np.asarray(p.indptr, np.int64)
        indices = np.asarray(p.indices, np.int32)
        src = np.repeat(np.arange(p.first, p.end, dtype=np.int64), np.diff(indptr))
        if graph.directed:      # both ways, without loops, each row sorted by neighbour
            in_indptr, sources, _ = ranked_in_arcs(graph, self.ctx.ranks)
            in_src = np.repeat(np.arange(p.first, p.end, dtype=np.int64), np.diff(in_indptr))
            s2 = np.concatenate([src, in_src])
            d2 = np.concatenate([indices, sources]).astype(np.int64)
            keep = s2 != d2
            s2, d2 = s2[keep], d2[keep]
            order = np.lexsort((d2, s2))
            indptr = np.zeros(p.num_vertices + 1, np.int64)
            np.cumsum(np.bincount(s2 - p.first, minlength=p.num_vertices), out=indptr[1:])
            indices = d2[order].astype(np.int32)
            mine = 0
        else:                   # each edge stored twice, a loop once
            mine = int(np.count_nonzero(src < indices) + np.count_nonzero(src == indices))
        # one meeting for both sums: the undirected graph's edges, the arcs the hub rule reads
        edges, arc_count = (int(x) for x in self.ctx.ranks.allreduce(
            np.array([mine, indptr[-1]], np.int64), what="the CC rows' edges and arcs"))
        self.m = graph.num_edges if graph.directed else edges
        self.offsets = np.asarray(graph.offsets, np.int64)
        dev = self.devs[0]
        dev.set_rows(p.first, indptr, indices)
        self._keep_hubs(self._ranks_hub_arcs(indptr, indices, p.first, arc_count))
        late = functools.partial(late_bitmap, indptr, self.rounds, first=p.first, n=self.n)
        rng = np.random.default_rng(0x5EED)
        self.samples = dev.device.asarray(rng.integers(0, max(self.n, 1), int(num_samples),
                                                       dtype=np.int64).astype(np.int32))
        self.giant = dev.device.asarray(np.zeros(1, np.int32))
        self._make_changes(dev, self._here[0])
        if self.exchange == "peer":
            self._setup_peer_reads(dev, late)
            return
        self._set_rest([dev if i == self._here[0] else None for i in range(self.k)], late)
        devices = self.ctx.devices
        self._merges = Router(devices, devices, by_owner, packet_size=max(self.n, 1),
                              dtype=np.int32, ctx=self.ctx, name="cc-merge")
        self._spread = Router(devices, devices, to_the_others, packet_size=max(self.n, 1),
                              dtype=np.int32, ctx=self.ctx, name="cc-spread")

    def _ranks_hub_arcs(self, indptr, indices, first, arc_count):
        """Across processes, :func:`~.layout.hub_arcs` of the whole graph, the same on every
        rank: the graph's mean degree from ``arc_count`` (every rank's rows' arcs, summed),
        each rank's own candidates (its rows' hubs) gathered, the highest degrees kept (ties:
        the lower id), as one process chooses them."""
        hubs = int(self.tuning.hubs)
        if self.k == 1:
            return np.zeros((0, self.rounds, 2), np.int32)
        mine = hub_arcs(indptr, indices, hubs, self.rounds, first=first,
                        least_degree=hub_degree_bound(arc_count, self.n))
        shared = self.ctx.ranks.allgather(mine, "the CC hubs' arcs")
        degrees = np.concatenate([d for d, _ in shared])
        arcs = np.concatenate([a for _, a in shared])
        if not degrees.size:
            return arcs
        return arcs[highest_degree_first(arcs[:, 0, 0], degrees)[:hubs]]

    def _ranks_exchange(self, exchange: str) -> str:
        """How the ranks' changes reach rank 0 (the ``exchange`` rule of :attr:`rules`):
        ``"peer"``, rank 0 reads them, and every rank's rows, in place over CUDA IPC;
        ``"host"``, as messages through Routers. A job of one rank exchanges nothing. Every
        rank asks at once (whether CUDA IPC can run is agreed by an allgather)."""
        if self.k == 1:
            return "peer"
        why = None
        if exchange != "host":
            from groute.engines.peer_barrier import unavailable
            why = unavailable(self.ctx, across_processes=True)
        if exchange == "peer" and why:
            raise ValueError(f"exchange='peer' reads the other ranks' memory, but {why}; use "
                             f"exchange='host'")
        if exchange == "auto":
            return self.rules["exchange"].decide(
                {"processes": lambda: True, "peer": lambda: why is None}).choice
        return exchange

    def _setup_peer_reads(self, dev, late):
        """Across processes over CUDA IPC: rank 0's tables of every rank's rows (its rest
        links them all, as the first device of one process does) and of every other rank's
        :class:`~.device.Changes` (its merge reads them where they lie), from the arrays each
        rank maps for the others (:class:`groute.device.ipc.PeerAddresses`); the late bitmap
        of every row (each rank's bits, which lie in its range only, summed). Every rank at
        once."""
        from groute.device.ipc import MappedArray, PeerAddresses
        if self.k == 1:                     # a job of one rank holds every row
            self._set_rest([dev], late)
            return
        self._addresses = PeerAddresses(self.ctx)
        me = self._here[0]

        def mapped(array, what):
            arrays = [None] * self.k
            arrays[me] = array
            return [MappedArray(a) for a in self._addresses.table(arrays, what)]

        indptrs = mapped(dev.indptr, "the CC rows' offsets")
        indices = mapped(dev.indices, "the CC rows' neighbours")
        c = dev.changes
        parts = {name: mapped(getattr(c, name), f"the CC changes' {name}")
                 for name in ("bits", "list", "info", "giant", "parent")}
        bitmap = self.ctx.ranks.allreduce(late(), "sum", "the late bitmap")
        caps = self.ctx.ranks.allgather(c.cap, "the CC changes' list sizes")
        if len(set(caps)) > 1:      # rank 0's merge reads every list by its own size
            raise ValueError(f"the ranks' CC change lists differ in size ({caps}): every rank "
                             f"must make its solver with the same CHANGES_LIST_SHARE")
        rows = [dev if i == me else _Rows(indptrs[i], indices[i]) for i in range(self.k)]
        self._set_rest(rows, lambda: bitmap)
        if me == 0:
            self._sender_changes = [Changes(**{name: parts[name][i] for name in parts},
                                            cap=c.cap) for i in range(1, self.k)]
            self._senders = dev.changes_table(self._sender_changes)

    def _gather_changes(self) -> int:
        """Every other rank's changes (:meth:`DeviceCC.describe_changes`, one message each:
        :meth:`DeviceCC.changes_message`) into rank 0's array, through the Router (one flush,
        every rank); rank 0 merges them all in one kernel and compresses. The bytes this rank
        sent."""
        me, dev, router = self._here[0], self.devs[0], self._merges
        sent = 0
        if me != 0:
            dev.describe_changes()
            message, listed = dev.changes_message(self.ctx.timeout)
            router.inputs[me].send(message, metadata={"owner": 0, "listed": listed})
            sent = 4 * int(message.shape[0])
            self._whole += int(listed < 0)
        router.flush()
        received = []
        while (pending := router.outputs[me].poll()) is not None:
            received.append(pending)
        self._merge_messages(received)
        return sent

    def _changes_from_first_rank(self, *, labels=False):
        """Rank 0's changes (after a gather: the whole graph's so far) sent to every other
        rank, which merges them into a fresh array, or with ``labels`` makes the labels they
        describe (rank 0: its own array's). The bytes this rank sent, and with ``labels`` the
        labels (int64, on this rank's device)."""
        me, dev, router = self._here[0], self.devs[0], self._spread
        sent, out = 0, None
        if me == 0:
            dev.describe_changes()
            message, listed = dev.changes_message(self.ctx.timeout)
            router.inputs[0].send(message, metadata={"listed": listed})
            sent = 4 * int(message.shape[0]) * (self.k - 1)
            self._whole += (self.k - 1) * int(listed < 0)
            if labels:
                with dev.device.on_compute():
                    out = dev.parent.astype(np.int64)
        router.flush()
        pending = router.outputs[me].poll()
        if pending is not None:
            if labels:
                data = pending.wait_on(dev.stream).data
                # the labels are array work of the host's on the CPU backend: after the message
                dev.stream.record().synchronize(self.ctx.timeout)
                view = dev.changes_from_message(data, pending.metadata["listed"],
                                                dev.changes.cap)
                out = dev.labels_from_changes(view)
                pending.release(after=dev.stream.record())
            else:
                dev.reset()
                self._merge_messages([pending])
        return (sent, out) if labels else sent

    def _merge_messages(self, received):
        """Merge the changes that came as messages (:meth:`_gather_changes`) into this rank's
        array, compress it and release the messages after."""
        if not received:
            return
        dev = self.devs[0]
        cap = dev.changes.cap           # every rank's: made with the solver
        views = [dev.changes_from_message(p.wait_on(dev.stream).data, p.metadata["listed"], cap)
                 for p in received]
        dev.merge_changes(views, dev.changes_table(views) if dev.cuda else None, self.moved)
        dev.compress()
        after = dev.stream.record()
        for p in received:
            p.release(after=after)

    def _release(self):
        for dev in getattr(self, "devs", ()):
            dev.forget_phases()     # they hold this solver's methods: no cycle left to collect
        for router in (self._merges, self._spread):
            if router is not None:
                router.close()
        self._merges = self._spread = None
        if self._addresses is not None:     # every rank at once (PeerAddresses.close)
            self._addresses.close()
            self._addresses = None

    def _sample(self):
        """Afforest's sampling phase on the first device: link rounds, compress, vote."""
        dev = self.devs[0]
        dev.reset()
        for r in range(self.rounds):
            dev.link_round(r, self._light(r))
            dev.compress()
        dev.sample_mode(self.samples, self.giant)

    def _light(self, r):
        """Whether round ``r`` (``sample_rounds``: the rest) links lightly (CUDA only)."""
        return self.link == "light" or (self.link == "mixed" and r > 0)

    def _remaining(self):
        """The compacted edge list left after sampling (waits for the first device)."""
        dev = self.devs[0]
        out = {}
        dev.stream.submit(lambda: out.__setitem__("edges", remaining_edges(
            dev.device.xp, dev.parent, self.late_src, self.late_dst, self.giant)))
        dev.stream.record().synchronize(self.ctx.timeout)
        return out["edges"]

    @taking_turns
    def run(self) -> AppResult:
        if self.n == 0:
            return self._result(np.zeros(0, np.int64), 0.0, complete_stats(STATS_KEYS, {
                "devices": [d.device.name for d in self.devs], "edges": 0, "graph_edges": 0,
                "bytes_moved": 0}), values_are_vertices=True)
        if self.path == "kernel":
            return self._run_in_place()
        return self._run_segments()

    # ---------------------------------------------------------------- default: in place
    def _run_in_place(self) -> AppResult:
        """The in-place path (module docstring), in one process or across the ranks of one
        host over CUDA IPC: then each rank samples its own rows, and rank 0 is the first
        device, reading the other ranks' changes and rows where they lie."""
        if self.ctx.ranks is not None and self.exchange == "host":
            return self._run_across_ranks()
        k, first = self.k, self.devs[0]
        merger = self._here[0] == 0         # this process drives the first device
        with DeviceTimer(self.ctx) as timer:
            self._sample_rows()
            if k > 1:
                self._describe_changes()
            if merger:
                first.replay("merge and rest", self._merge_and_rest)
        # across processes no rank starts its next run (its reset rewrites what rank 0's
        # merge reads) before the timer's closing meeting, after rank 0's work
        labels, facts = self._answer(self.counters, moved=self.moved if k > 1 else None,
                                     holds=merger)
        rows, arcs, remote_rows, remote_arcs, giant, giant_size = facts[:6]
        merged_bytes, read_whole = facts[6:] if k > 1 else (0, 0)
        stats = {"devices": [d.name for d in self.ctx.devices], "edges": None,
                 "graph_edges": self.m, "segments": 0, "segment_edges": None,
                 "edges_per_device": [None] * k, "segments_per_device": [0] * k,
                 "rows_per_device": np.diff(self.offsets).tolist(),
                 "merge_rounds": 1 if k > 1 else 0, "merges_read_whole": read_whole,
                 # what the merge read of the senders; indptr pairs and arcs of the rest read
                 # remotely
                 "bytes_moved": int(merged_bytes + 16 * remote_rows + 4 * remote_arcs),
                 "mode": "afforest", "sample_rounds": self.rounds, "giant_root": giant,
                 "giant_size": giant_size,
                 "rest": "kernel", "routed": False, "rest_rows": rows, "rest_arcs": arcs,
                 "rest_remote_arcs": remote_arcs}
        return self._result(labels, timer.seconds, complete_stats(STATS_KEYS, stats),
                            values_are_vertices=True)

    def _sample_rows(self) -> None:
        """Afforest's sampling rounds, each device over its own rows (one phase of each
        device's run, :meth:`DeviceCC.replay`: the devices start within a launch of each
        other)."""
        hubs = self._hub_edges or [None] * len(self.devs)
        for j, dev, edges in zip(self._here, self.devs, hubs):
            dev.replay("sampling", functools.partial(self._sample_on, j, dev, edges))

    def _sample_on(self, j: int, dev: DeviceCC, hub_edges) -> None:
        """Device ``j``'s sampling: reset, the hubs' arcs (``hub_edges``, on this device;
        None: none), then each round over its rows."""
        dev.reset()
        if hub_edges is not None:
            dev.hook(hub_edges)
        for r in range(self.rounds):
            dev.link_round(r, self._light(r))
            if self.k == 1:
                dev.compress()
            elif r + 1 < self.rounds or j == 0:
                # only the rows: the next round starts from them, and the merge's hooks walk
                # to the roots from any vertex (a sender's description compresses its whole
                # array)
                dev.compress(rows_only=True)

    def _merge_and_rest(self) -> None:
        """The first device's end of a run in place: the senders' changes merged (several
        devices), the vote for the giant, the rest linked, the last compression."""
        first = self.devs[0]
        if self.k > 1:
            first.merge_changes(self._sender_changes, self._senders, self.moved)
            first.compress()              # the vote needs roots
        first.sample_mode(self.samples, self.giant)
        first.link_rest(self.rest, self.rounds, self.giant, self._light(self.rounds),
                        self.counters)
        first.compress()

    def _describe_changes(self) -> None:
        """Every device but the first describes what its sampling changed, and the first
        device's merge is ordered after them: by events in one process; across processes each
        rank waits for its GPU and the ranks meet (rank 0's merge then reads them)."""
        senders = [d for j, d in zip(self._here, self.devs) if j != 0]
        for dev in senders:
            dev.replay("description", dev.describe_changes)
        if self.ctx.ranks is None:
            for dev in senders:
                self.devs[0].stream.wait_event(dev.stream.record())
            return
        for dev in senders:
            dev.stream.record().synchronize(self.ctx.timeout)
        self.ctx.ranks.barrier("the ranks' CC changes described")

    def _answer(self, counters=None, *, giant=True, moved=None, holds=True):
        """The labels (int64 by position: the first device's parent array, converted there and
        downloaded once, :func:`~groute.runtime.answer_landing.land_answer`) and the run's facts,
        read back together in one copy: the rest kernel's ``counters`` where given, then, with
        ``giant`` (Afforest), the giant's root and its size counted on the device, then the
        merge's ``moved`` (bytes read from the senders, senders read whole) where given.
        ``holds``: whether this process drives the first device; across processes rank 0's
        labels and facts go to every rank."""
        first = self.devs[0]
        dev = first.device
        labels, facts = None, []
        if holds:
            with dev.on_compute():
                xp = dev.xp
                labels = first.parent.astype(np.int64)
                if counters is not None:
                    facts.append(counters[:4].astype(np.int64))
                if giant:
                    facts += [self.giant[:1].astype(np.int64), first.giant_size(self.giant)]
                if moved is not None:
                    facts.append(moved.astype(np.int64))
                facts = [int(x) for x in dev.to_host(xp.concatenate(facts))] if facts else []
        parts = [labels if d is dev else None for d in self.ctx.devices]
        landed = land_answer(self.ctx, parts, "the labels")
        if self.ctx.ranks is not None and self.k > 1:
            facts = self.ctx.ranks.bcast(facts, 0, "the CC run's facts")
        return landed, facts

    def _run_across_ranks(self) -> AppResult:
        """The in-place path across processes with the changes as messages
        (``exchange="host"``): every rank samples its rows into its parent array, every other
        rank's changes are merged into rank 0's, whose changes then go to
        every rank (each a message: a bit per vertex of a giant's tree and pairs for the rest,
        or the array whole); each votes for the same giant and links the rest of its own rows
        against that one snapshot (the same arcs a process of every row would keep), and a
        second gather collects those links into rank 0's array, the answer, whose changes
        every rank gets and makes its labels from."""
        dev, ranks = self.devs[0], self.ctx.ranks
        with DeviceTimer(self.ctx) as timer:
            self._sample_rows()
            self._whole = sent = 0
            if self.k > 1:              # a job of one rank holds every row already
                sent = self._gather_changes()
                sent += self._changes_from_first_rank()
            dev.sample_mode(self.samples, self.giant)
            dev.link_rest(self.rest, self.rounds, self.giant, self._light(self.rounds),
                          self.counters)
            dev.compress()
            if self.k > 1:
                sent += self._gather_changes()
                spread, labels = self._changes_from_first_rank(labels=True)
                sent += spread
            else:
                labels = dev.parent
            dev.stream.record().synchronize(self.ctx.timeout)
        labels = dev.device.to_host(labels).astype(np.int64, copy=False)
        # one meeting for the stats' sums: the rest's rows and arcs, bytes sent, whole reads
        rows, arcs, sent, whole = (int(x) for x in ranks.allreduce(np.concatenate(
            [dev.device.to_host(self.counters)[:2].astype(np.int64),
             np.array([sent, self._whole], np.int64)]), what="the CC stats' sums"))
        giant = int(dev.device.to_host(self.giant)[0])
        k = self.k
        stats = {"devices": [d.name for d in self.ctx.devices], "edges": None,
                 "graph_edges": self.m, "segments": 0, "segment_edges": None,
                 "edges_per_device": [None] * k, "segments_per_device": [0] * k,
                 "rows_per_device": np.diff(self.offsets).tolist(),
                 "merge_rounds": 2 if k > 1 else 0,
                 # the changes of two gathers into rank 0 and of rank 0's to every rank,
                 # twice (the snapshot, the answer)
                 "bytes_moved": sent,
                 "merges_read_whole": whole,
                 "mode": "afforest", "sample_rounds": self.rounds, "giant_root": giant,
                 "giant_size": int(np.count_nonzero(labels == labels[giant])),
                 "rest": "kernel", "routed": True, "rest_rows": rows, "rest_arcs": arcs,
                 "rest_remote_arcs": 0}
        return self._result(labels, timer.seconds, complete_stats(STATS_KEYS, stats),
                            values_are_vertices=True)

    # ---------------------------------------------------------------- Groute's segments
    def _run_segments(self) -> AppResult:
        ctx, k = self.ctx, self.k
        router = None
        if k > 1:
            router = Router([ctx.devices[0]], ctx.devices, first_available,
                            packet_size=self.segment_edges, num_buffers=self.num_buffers,
                            dtype=np.int32, item_shape=(2,), ctx=ctx, name="cc-segments")
        merge_links = {s: Link(ctx.devices[s], ctx.devices[r], max(self.n, 1), 1, dtype=np.int32,
                               ctx=ctx, name=f"cc-merge[{s}->{r}]")
                       for _, r, s in merge_tree(k)}
        edges_per = [0] * k
        segs_per = [0] * k
        phases = {}
        hooked = None
        try:
            with DeviceTimer(ctx) as timer:
                t0 = time.perf_counter()
                if self.afforest:
                    self._sample()
                    self.devs[0].stream.record().synchronize(ctx.timeout)
                    phases["sample"] = time.perf_counter() - t0
                edges = self._remaining() if self.afforest else self.edges
                phases["compact"] = time.perf_counter() - t0
                hooked = int(edges.shape[0])
                seg = self.segment_edges
                segs = [(a, min(a + seg, hooked)) for a in range(0, hooked, seg)]
                if k == 1:
                    dev = self.devs[0]
                    if not self.afforest:
                        dev.reset()
                    for a, b in segs:
                        dev.hook(edges[a:b])
                        edges_per[0] += b - a
                        segs_per[0] += 1
                    dev.compress()
                else:
                    self._run_multi(router, merge_links, edges, segs, edges_per, segs_per, phases, t0)
        finally:
            if router is not None:
                router.close()
            for link in merge_links.values():
                link.close()
        labels, facts = self._answer(giant=self.afforest)
        seg_bytes = 8 * sum(edges_per[1:]) if k > 1 else 0
        stats = {"devices": [d.device.name for d in self.devs], "edges": hooked,
                 "graph_edges": self.m, "segments": sum(segs_per),
                 "segment_edges": self.segment_edges,
                 "edges_per_device": edges_per, "segments_per_device": segs_per,
                 "merge_rounds": int(np.ceil(np.log2(k))) if k > 1 else 0,
                 "bytes_moved": int(seg_bytes + 4 * self.n * (k - 1)), "routed": True,
                 # host clock at the end of each phase, seconds from the start (the first device
                 # is synchronised there; per device: segments hooked, merges done)
                 "phase_seconds": phases}
        if self.afforest:
            giant, giant_size = facts
            stats.update(mode="afforest", sample_rounds=self.rounds, giant_root=giant,
                         giant_size=giant_size, rest="segments")
        else:
            stats["mode"] = "edge-list"
        return self._result(labels, timer.seconds, complete_stats(STATS_KEYS, stats),
                            values_are_vertices=True)

    def _run_multi(self, router, merge_links, edges, segs, edges_per, segs_per, phases, t0):
        ctx, k = self.ctx, self.k

        def worker(device):
            j = ctx.devices.index(device)
            dev = self.devs[j]
            stream = device.compute_stream
            if j or not self.afforest:   # the first device keeps its sampled parent array
                dev.reset()
            for pending in router.outputs[j]:
                data = pending.wait_on(stream).data
                dev.hook(data)
                # free the buffer only once the hook has consumed it: the router sees this
                # device as available when it really is, not when its host thread moved on
                stream.record().synchronize(ctx.timeout)
                pending.release()
                edges_per[j] += pending.size
                segs_per[j] += 1
            dev.compress()
            stream.record().synchronize(ctx.timeout)
            phases[f"hooked[{j}]"] = time.perf_counter() - t0
            for _, receiver, sender in merge_tree(k):
                if j == sender:
                    handle = merge_links[j].send(dev.parent, event=stream.record())
                    handle.wait(timeout=ctx.timeout, stop=ctx.stop_event)
                    phases[f"sent[{j}]"] = time.perf_counter() - t0
                    return
                if j == receiver:
                    pending = merge_links[sender].receive()
                    dev.merge(pending.wait_on(stream).data)
                    pending.release(after=stream.record())
                    dev.compress()
            stream.record().synchronize(ctx.timeout)
            phases[f"merged[{j}]"] = time.perf_counter() - t0

        futures = [ctx.submit(j, worker) for j in range(k)]
        try:
            for a, b in segs:
                router.inputs[0].send(edges[a:b])
            router.close()
            phases["routed"] = time.perf_counter() - t0
        except BaseException as exc:  # stop the devices; gather raises the first failure
            ctx.fail("host", exc)
        ctx.gather(futures)
