"""The connected components engine: weak components by union-find across devices, Afforest
sampling, then in place or through segments.

**Default (``rest="auto"``): every device samples, votes and links the rest of its own rows;
one merge.** Afforest (Sutton et al., IPDPS 2018) over the symmetric CSR (directed graphs are
symmetrised once, at set-up, which gives the *weak* components), spread over ``K`` devices:

0. *Layout.* The vertices are cut into one contiguous range per device (balanced by a visit
   plus one link per sampling round). Each device holds its rows' slice of the CSR, which of
   them have arcs after the sampled ones (a bit each), its own voters (random vertices of its
   rows) and a full-size parent array (``parent[v] <= v``; a CAS links the larger root under
   the smaller). The parent array is the one array of every vertex a device holds: its rows
   link to any vertex. With several devices each also holds two bitmaps of every vertex (what
   it publishes, step 4).
1. *Reset and sampling.* Each device resets its array, then links each of its vertices to its
   first ``sample_rounds`` neighbours (a round each, its rows compressed after each): no
   communication.
2. *Vote.* Each device's voters vote for the most frequent root in its own array: its *giant*
   ``g_d``.
3. *Rest.* Each device links the arcs from slot ``sample_rounds`` on of its rows whose vertex
   is not in ``g_d``'s tree. That is Afforest's saving: on power-law and mesh graphs almost
   every row is in the giant's tree after two rounds.
4. *Publish* (``K > 1``). Each device compresses its whole array and marks every vertex in
   one of two bitmaps: in its giant's tree (root ``rho_d``; the root too, so the bitmap holds
   every row the rest skipped), or in another tree and not its root.
5. *Merge* (the first device, one kernel, after the others' publish events, no host round
   trip): for every other device ``j`` at once, each giant bit ``v`` hooks ``(v, rho_j)`` and
   each other bit hooks ``(v, parent_j[v])``, read over NVLink; a hook walks both ends to their
   roots in the first device's array and links only where they differ (a CAS, so the senders'
   hooks interleave safely: one level, not a tree). Only what differs moves: two bits per
   vertex and sender, plus a parent per vertex outside the sender's giant. The kernel's last
   block then finds each device's ``rho_d`` in the merged forest: the root most devices share
   is the reference giant, and a device whose giant lies elsewhere is marked for the repair.
6. *Repair* (the first device). The arcs from slot ``sample_rounds`` on of the rows the marked
   devices skipped (their published giant trees), read over NVLink, linked. Where the graph has
   a giant no device is marked and the kernel returns at once.
7. *Final compression* (the first device, every vertex): ``parent[v]`` is then the smallest
   vertex id of ``v``'s component, the canonical label, equal to
   ``groute.graph.reference.connected_components``; it also counts the giant's component. The
   labels are converted to int64 on the device and downloaded after the timer.

With one device, steps 1-3 and 7 are the single-GPU Afforest in place. The host only queues
kernels and events on the devices' streams and waits once at the end.

*Why the merged forest gives the components.* Every link joins two vertices of one component
(the two ends of an arc, or a vertex and its root in some device's forest), so no two components
are ever joined. Conversely the merge gives the first device every device's forest (each tree
arrives as its non-root members, each hooked to that tree's root), so the merged forest holds
every sampled arc, every arc a rest linked and every arc the repair linked. An arc ``(u, v)``
left out was skipped by ``u``'s device ``d`` (``u`` in ``g_d``'s tree, so ``u ~ rho_d``) and,
the adjacency being symmetric, its twin ``(v, u)`` by ``v``'s device ``e`` (``v ~ rho_e``). If
``d`` and ``e`` are both in the reference group, ``rho_d`` and ``rho_e`` have one root in the
merged forest, so ``u ~ v``; if not, the repair linked every late arc of the rows one of them
skipped, ``(u, v)`` or ``(v, u)``. So the ends of every arc are joined, the trees are the
components, and since a hook puts the larger root under the smaller each root is its
component's smallest vertex. The check in step 5 is what keeps this sound with one giant per
device: two devices' giants can be different trees of one component joined only by arcs both
skipped (a path 0-1-2-3 cut ``{0, 1} | {2, 3}`` with no sampling round and giants 1 and 2), and
the merged forest, holding every device's sampled links, is the strongest evidence that they
are one tree. Afforest's premise (the sampled links already put most of the giant component in
one tree) makes that the rule on the graphs this path is for.

Costs per run (figures for kron and grid graphs on H200s: ``docs/notes/cc_one_level_merge.md``):
each device two passes over every vertex (reset, publish) and its own share of the links and
the rest; the first device also the merge (two bitmap words per 32 vertices and sender, read
over NVLink, and a hook per vertex the others changed) and the final compression. Why this is
the default: sampling and the rest divide by the devices and the merge is one level of
coalesced, mostly local work, while Groute's segment path below spends most of its time on the
first device compacting every arc left after sampling. It needs the first device to read every
other's memory (every CUDA pair on an NVLink machine; the CPU backend's virtual devices read
each other's arrays after the same events); ``"auto"`` falls back to segments without it.

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

This module holds which path can run and the solver; which path ``auto`` picks is
:data:`~groute.engines.components.rules.COMPONENTS_RULES`. The host-side layout (edge list,
symmetric CSR, late arcs, the cut of the rows, the voters, bitmaps, the edges left after
sampling) is :mod:`groute.engines.components.layout`; each device's arrays and operations, the
only backend-specific code, are :mod:`groute.engines.components.device` (CUDA kernels in
``union_find.cu``; the CPU backend hooks with vectorised NumPy: ``np.minimum.at`` on roots, then
pointer jumping).
"""
from __future__ import annotations

import time

import numpy as np

from groute.runtime.link import Link
from groute.runtime.policies import first_available
from groute.results import AppResult, complete_stats
from groute.runtime.context import taking_turns
from groute.runtime.router import Router
from groute.solver import DeviceTimer, Solver
from groute.tuning import CCTuning

from .device import (MAX_DEVICES, STAT_GIANT_SIZE, STAT_OTHER_BITS, STAT_REDO, STAT_REMOTE_ARCS,
                     STAT_REMOTE_ROWS, STAT_REST_ARCS, STAT_REST_ROWS, DeviceCC)
from .layout import (edge_count, edge_list, late_arcs, remaining_edges, split_rows,
                     symmetric_csr, vote_samples)
from .memory import components_bytes
from .rules import COMPONENTS_RULES

#: the keys of a components result's ``stats``, on every path (None where a key does not apply
#: to the path that ran): devices, mode ("afforest" or "edge-list"), rest ("kernel", "segments";
#: None for the edge list), routed (whether edges went through the router), edges hooked from the
#: edge list or the compacted rest (None in place), graph_edges, segments and segment_edges,
#: edges_per_device, segments_per_device, rows_per_device (in place), merge_rounds (levels of
#: merges one after the other), bytes_moved between devices, sample_rounds, giant_root and
#: giant_size (Afforest), rest_rows, rest_arcs and rest_remote_arcs (in place: what the rests and
#: the repair linked, and of it what the first device read from another), repaired_devices (in
#: place: the devices whose skipped rows the repair linked), phase_seconds (segments: host
#: clock at the end of each phase)
STATS_KEYS = ("devices", "mode", "rest", "routed", "edges", "graph_edges", "segments",
              "segment_edges", "edges_per_device", "segments_per_device", "rows_per_device",
              "merge_rounds", "bytes_moved", "sample_rounds", "giant_root", "giant_size",
              "rest_rows", "rest_arcs", "rest_remote_arcs", "repaired_devices", "phase_seconds")


# ------------------------------------------------------------------------------------------------
# which path can run
# ------------------------------------------------------------------------------------------------
def merge_tree(k):
    """The segment path's merge tree of ``k`` devices' parent arrays, in order: ``(step,
    receiver, sender)`` for step 1, 2, 4, ... (pairs of devices, then pairs of pairs), each
    receiver ``j`` (a multiple of ``2 * step``) merging the array of sender ``j + step``; device
    0 merges last."""
    step = 1
    while step < k:
        for j in range(0, k - step, 2 * step):
            yield step, j, j + step
        step *= 2


def peer_path_unavailable(devices) -> str | None:
    """Why the in-place path (module docstring) cannot run on ``devices``: its merge and repair
    need the first device to read every other's arrays and rows, and it takes at most
    :data:`~groute.engines.components.device.MAX_DEVICES` devices."""
    if len(devices) > MAX_DEVICES:
        return f"{len(devices)} devices are more than the in-place merge takes ({MAX_DEVICES})"
    for other in devices[1:]:
        if not devices[0].can_access_peer(other):
            return f"{devices[0].name} cannot access {other.name}'s memory (no peer access)"
    return None


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class ComponentsSolver(Solver):
    """Weak connected components of ``graph``; upload once, :meth:`run` many times. An app
    subclasses it under its own name (:class:`groute.apps.cc.CC`).

    ``rest``: ``"auto"`` (default: ``"kernel"`` where the first device can read the others'
    memory, every pair of an NVLink machine and the CPU backend, else ``"segments"``);
    ``"kernel"``: every device samples, votes and links the rest of its own rows in place, then
    one merge into the first device (module docstring); ``"segments"``: Groute's path, the first
    device samples, compacts what is left and routes it as segments.
    ``afforest``: sample first (``False``: hook the whole edge list through segments, Groute's
    design). ``run`` returns the stats keys of :data:`STATS_KEYS` whatever path ran.

    ``tuning``: a :class:`~groute.tuning.CCTuning` (None: ``CCTuning.from_environment()``):
    ``sample_rounds``: neighbours each vertex links to before the vote; ``num_samples``:
    voters (at most 1024); ``link`` (CUDA): ``"hook"`` walks both ends to their roots (path
    splitting) and CASes one under the other, ``"light"`` is GAPBS's step (CAS the larger
    parent's slot, else retry one level up), ``"mixed"`` hooks in the first round and links
    lightly after. Segments only: ``segment_edges``, edges per segment the router hands out
    (default: the edge list in about 4 segments per device); ``num_buffers``, receive buffers per
    device link.
    """

    #: the ``auto`` rules this solver decides by and the command line prints
    rules = COMPONENTS_RULES

    engine_family = "components"

    def __init__(self, graph, *, ctx=None, backend="auto", devices="auto", timeout=None,
                 afforest=True, rest="auto", tuning=None):
        self.graph = graph
        self.n = int(graph.num_vertices)
        if self.n >= 2**31:
            raise ValueError(f"CC supports graphs of fewer than 2**31 vertices, got {self.n}")
        tuning = self.tuning = tuning if tuning is not None else CCTuning.from_environment()
        segment_edges, num_buffers = tuning.segment_edges, tuning.num_buffers
        sample_rounds, num_samples, link = tuning.sample_rounds, tuning.num_samples, tuning.link
        if rest not in ("auto", "kernel", "segments"):
            raise ValueError(f"rest must be 'auto', 'kernel' or 'segments', got {rest!r}")
        if rest == "kernel" and not afforest:
            raise ValueError("rest='kernel' hooks what Afforest sampling left: it needs afforest=True")
        self._open_context(ctx, devices=devices, backend=backend, timeout=timeout, graph=graph,
                           estimate=components_bytes)
        try:
            self.k = len(self.ctx.devices)
            self._check_memory(components_bytes, graph)
            t0 = time.perf_counter()
            cuda = self.ctx.backend == "cuda"
            self.afforest = bool(afforest)
            self.rounds = int(sample_rounds)
            self.link = link
            why = peer_path_unavailable(self.ctx.devices)
            if rest == "kernel" and why:
                raise ValueError(f"rest='kernel' reads other devices' memory, but {why}; "
                                 f"use rest='segments'")
            if rest == "auto":
                rest = self.rules["rest"].decide({"peer_access": lambda: why is None}).choice
            self.path = rest if self.afforest else "edge-list"
            self.devs = [DeviceCC(d, self.n, labels=i == 0) for i, d in enumerate(self.ctx.devices)]
            source = self.devs[0].device
            self.offsets = np.array([0, self.n], np.int64)
            if self.afforest:
                indptr, indices = symmetric_csr(graph)
                self.m = int(indices.shape[0]) if graph.directed else edge_count(graph, indptr, indices)
                if self.path == "kernel":
                    self._setup_rows(indptr, indices, num_samples)
                else:
                    self.devs[0].set_rows(0, indptr, indices)
                    self.devs[0].set_samples(vote_samples(self.offsets, num_samples)[0])
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
            if cuda:  # uploads ran on the legacy stream
                for dev in self.devs:
                    with dev.device.use():
                        dev.device.xp.cuda.runtime.deviceSynchronize()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _setup_rows(self, indptr, indices, num_samples):
        """The in-place path: each device's rows (with what its rest reads) and voters; with
        several devices the bitmaps they publish, and on the first device the addresses of
        every device's arrays."""
        self.offsets = split_rows(indptr, self.k, self.rounds)
        samples = vote_samples(self.offsets, num_samples)
        for d, dev in enumerate(self.devs):
            lo, hi = int(self.offsets[d]), int(self.offsets[d + 1])
            dev.set_rows(lo, indptr[lo:hi + 1] - indptr[lo], indices[indptr[lo]:indptr[hi]],
                         late_from=self.rounds)
            dev.set_samples(samples[d])
        if self.k > 1:
            for dev in self.devs:
                dev.prepare_merge()
            self.devs[0].connect(self.devs)

    def _sample(self):
        """Afforest's sampling phase on the first device: link rounds, compress, vote."""
        dev = self.devs[0]
        dev.reset()
        for r in range(self.rounds):
            dev.link_round(r, self._light(r))
            dev.compress()
        dev.sample_mode()

    def _light(self, r):
        """Whether round ``r`` (``sample_rounds``: the rest) links lightly (CUDA only)."""
        return self.link == "light" or (self.link == "mixed" and r > 0)

    def _remaining(self):
        """The compacted edge list left after sampling (waits for the first device)."""
        dev = self.devs[0]
        out = {}
        dev.stream.submit(lambda: out.__setitem__("edges", remaining_edges(
            dev.device.xp, dev.parent, self.late_src, self.late_dst, dev.giant)))
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
        k, devs, first = self.k, self.devs, self.devs[0]
        late, light = self.rounds, self._light(self.rounds)
        with DeviceTimer(self.ctx) as timer:
            for dev in devs:
                dev.reset()
            for r in range(self.rounds):          # interleaved so every device starts at once
                for dev in devs:
                    dev.link_round(r, self._light(r))
                    dev.compress(rows_only=True)
            for dev in devs:
                dev.sample_mode()
                dev.link_rest(late, light)
                if k > 1:
                    dev.publish()
            if k > 1:
                for dev in devs[1:]:
                    first.stream.wait_event(dev.stream.record())
                first.merge_diffs()
                first.repair(late, light)
            first.compress(count=True)
        labels = first.labels()
        per = np.array([dev.read_stats() for dev in devs])
        total = per.sum(axis=0)
        redo = int(per[0, STAT_REDO])
        words = -(-self.n // 32)
        stats = {"devices": [d.device.name for d in devs], "edges": None,
                 "graph_edges": self.m, "segments": 0, "segment_edges": None,
                 "edges_per_device": [None] * k, "segments_per_device": [0] * k,
                 "rows_per_device": np.diff(self.offsets).tolist(),
                 "merge_rounds": int(k > 1),
                 # the first device's reads of the others: two bitmaps each, the parent of every
                 # vertex they publish outside their giant, the rows the repair linked
                 "bytes_moved": int((k - 1) * 8 * words + 4 * total[STAT_OTHER_BITS]
                                    - 4 * per[0, STAT_OTHER_BITS]
                                    + 16 * total[STAT_REMOTE_ROWS] + 4 * total[STAT_REMOTE_ARCS]),
                 "mode": "afforest", "sample_rounds": self.rounds,
                 "giant_root": int(first.device.to_host(first.giant)[0]),
                 "giant_size": int(per[0, STAT_GIANT_SIZE]),
                 "rest": "kernel", "routed": False, "rest_rows": int(total[STAT_REST_ROWS]),
                 "rest_arcs": int(total[STAT_REST_ARCS]),
                 "rest_remote_arcs": int(total[STAT_REMOTE_ARCS]),
                 "repaired_devices": [d for d in range(k) if (redo >> d) & 1]}
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
                if self.afforest:
                    self.devs[0].compress(count=True)
        finally:
            if router is not None:
                router.close()
            for link in merge_links.values():
                link.close()
        first = self.devs[0]
        labels = first.labels()
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
            stats.update(mode="afforest", sample_rounds=self.rounds,
                         giant_root=int(first.device.to_host(first.giant)[0]),
                         giant_size=int(first.read_stats()[STAT_GIANT_SIZE]), rest="segments")
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
