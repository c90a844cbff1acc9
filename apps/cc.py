"""Connected components across devices: Afforest sampling, then in place or through segments.

**Default (``rest="auto"``): sampling split by rows, tree merge by peer reads, rest in place.**
Afforest (Sutton et al., IPDPS 2018) over the symmetric CSR (directed graphs are symmetrised once,
at set-up, which gives the *weak* components), spread over the devices:

0. The vertices are cut into one contiguous range per device (balanced by a visit plus one link
   per sampling round), and each device holds its rows' slice of the CSR and a full-size parent
   array (``parent[v] <= v``; a CAS links the larger root under the smaller one).
1. Every device links each of its vertices to its first ``sample_rounds`` neighbours (a round
   each, compressed after each) in its own parent array: no communication.
2. The parent arrays are merged in a tree (device 1 into 0, 3 into 2, then 2 into 0, ...): the
   receiver's kernel reads the sender's array directly over NVLink (peer access; ordered by an
   event, no host round trip) and hooks every ``(v, other[v])``, then compresses.
3. On the first device ``num_samples`` random vertices vote for the most frequent root, the
   *giant*, and one kernel links the arcs from slot ``sample_rounds`` on of every vertex *not* in
   the giant's tree (an arc both of whose ends are in the giant's tree joins nothing; any other
   arc is also an arc of its non-giant end, since the adjacency is symmetric), reading the other
   devices' rows over NVLink. That work is tiny on power-law and mesh graphs (kron:21: 36 edges
   after two rounds), so it is not routed anywhere: the stats say ``routed: False`` and count it
   (``rest_rows``, ``rest_arcs``).
4. After the last compression ``parent[v]`` is the smallest vertex id of v's component: the
   canonical label, equal to ``groute.graph.reference.connected_components``.

The host only queues kernels and events on every device's stream and waits once at the end. With
one device this is the single-GPU Afforest in place. Why this is the default: on kron:25 on two
H200s the segment path below took 79.4 ms, 67 ms of it compacting the 1.0G arcs left after
sampling on the first device down to the 1,031 edges that were then routed, against 8.7-9.0 ms
for one GPU in place; this path takes 7.7-7.9 ms on two (1.10-1.16x of one, same runs, exact).
Sampling is random access into the parent array and splits across devices, while a merge is one
coalesced pass over a peer's array (134 MB over NVLink) plus hooks that mostly find one root. It needs peer access between the devices
that read each other (every CUDA pair on an NVLink machine; the CPU backend's virtual devices
read each other's arrays after the same events); ``"auto"`` falls back to segments without it.

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

With one device the segments are processed in place (no copy). CUDA kernels are in ``cc.cu``;
the CPU backend hooks with vectorised NumPy (``np.minimum.at`` on roots, then pointer jumping).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from apps.common import AppResult, DeviceTimer, Solver
from groute import Link, Router, first_available
from groute.graph.csr import kept_on

log = logging.getLogger(__name__)
KERNEL = Path(__file__).with_name("cc.cu")
BLOCK = 256


def edge_list(graph) -> np.ndarray:
    """The edges CC must hook, as an ``(m, 2)`` int32 array: ``u < v`` of each undirected edge,
    or every non-loop arc of a directed graph (hooking ignores direction: weak components)."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices)
    n = indptr.shape[0] - 1
    src = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    keep = src != indices if graph.directed else src < indices
    edges = np.empty((int(keep.sum()), 2), np.int32)
    edges[:, 0] = src[keep]
    edges[:, 1] = indices[keep]
    return edges


def symmetric_csr(graph):
    """``(indptr int64, indices int32)`` of the undirected version of ``graph``: the graph's own
    arrays when it is undirected; for a directed graph every non-loop arc in both directions,
    each row sorted by neighbour (so the first neighbours are the smallest)."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices)
    if not graph.directed:
        return indptr, indices.astype(np.int32, copy=False)
    n = indptr.shape[0] - 1
    src = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    keep = src != indices
    s2 = np.concatenate([src[keep], indices[keep].astype(np.int32)])
    d2 = np.concatenate([indices[keep].astype(np.int32), src[keep]])
    order = np.lexsort((d2, s2))
    sym_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(s2, minlength=n), out=sym_ptr[1:])
    return sym_ptr, np.ascontiguousarray(d2[order])


def late_arcs(indptr, indices, rounds):
    """The arcs ``(src, dst)`` (int32) at slot ``rounds`` or later of their row: those the
    sampling rounds did not link (each row's trailing ``degree - rounds`` arcs; the only
    per-arc temporary is a one-byte mask)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    keep = np.ones(indices.shape[0], bool)
    for r in range(int(rounds)):
        keep[indptr[:-1][deg > r] + r] = False
    src = np.repeat(np.arange(n, dtype=np.int32), np.maximum(deg - int(rounds), 0))
    return src, np.ascontiguousarray(indices[keep])


def split_rows(indptr, k, rounds) -> np.ndarray:
    """``k + 1`` vertex offsets cutting the rows into contiguous ranges of about equal work: a
    visit per vertex plus one link per sampling round it has a neighbour for."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    cum = np.cumsum(1 + np.minimum(np.diff(indptr), int(rounds)))
    total = int(cum[-1]) if n else 0
    cuts = np.searchsorted(cum, total * np.arange(1, k, dtype=np.float64) / k, side="right")
    return np.concatenate([[0], cuts, [n]]).astype(np.int64)


def late_bitmap(indptr, rounds) -> np.ndarray:
    """uint32 words, bit ``u % 32`` of word ``u // 32`` set when vertex ``u`` has arcs from slot
    ``rounds`` on (more than ``rounds`` neighbours)."""
    bits = np.packbits(np.diff(np.asarray(indptr, dtype=np.int64)) > rounds, bitorder="little")
    words = np.zeros(4 * max(1, -(-bits.shape[0] // 4)), np.uint8)
    words[:bits.shape[0]] = bits
    return words.view("<u4").astype(np.uint32)


def undirected_edge_count(indptr, indices, chunk=None) -> int:
    """Non-loop edges of a symmetric CSR (each stored as two arcs); the loops are counted in
    cache-sized row chunks (:func:`groute.graph.arcs.self_loop_count`)."""
    from groute.graph.arcs import LOOP_CHUNK_ARCS, self_loop_count
    loops = self_loop_count(indptr, indices, chunk or LOOP_CHUNK_ARCS)
    return (int(np.asarray(indptr)[-1]) - loops) // 2


def _edge_count(graph, indptr, indices) -> int:
    """:func:`undirected_edge_count` of an undirected graph, kept on the graph object
    (``graph._cc_edge_count``) so that CC solvers for other device counts skip the pass."""
    return kept_on(graph, "_cc_edge_count", lambda: undirected_edge_count(indptr, indices))


def remaining_edges(xp, parent, src, dst, giant):
    """The ``(m', 2)`` edges left after sampling: arcs ``(u, v)`` of ``src``/``dst`` whose ``u``
    is not in the giant's tree, each undirected edge once (``u < v``, or ``v`` in the giant's
    tree, where its twin arc is not kept). ``parent`` is fully compressed; ``giant`` an array of 1."""
    g = giant[0]
    pu = parent[src]
    keep = (pu != g) & ((src < dst) | (parent[dst] == g))
    return xp.ascontiguousarray(xp.stack([src[keep], dst[keep]], axis=1))


# ------------------------------------------------------------------------------------------------
# NumPy hooking (CPU backend)
# ------------------------------------------------------------------------------------------------
def compress_numpy(parent: np.ndarray) -> None:
    """Pointer jumping until every vertex points at its root (in place)."""
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return
        parent[:] = grand


def hook_numpy(parent: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """Join the trees of every ``(u[i], v[i])`` in a fully compressed ``parent`` (in place; it is
    fully compressed again on return). Each round hooks every larger root under the smallest
    root it meets (``np.minimum.at``), so the root count drops while any edge crosses trees."""
    while u.size:
        ru, rv = parent[u], parent[v]
        cross = ru != rv
        if not cross.any():
            return
        u, v, ru, rv = u[cross], v[cross], ru[cross], rv[cross]
        np.minimum.at(parent, np.maximum(ru, rv), np.minimum(ru, rv))
        compress_numpy(parent)


# ------------------------------------------------------------------------------------------------
# per-device operations: the only backend-specific code
# ------------------------------------------------------------------------------------------------
class _DeviceCC:
    """A device's parent array, its rows of the CSR, and the hook / merge / compress operations."""

    def __init__(self, device, n: int):
        self.device = device
        self.n = n
        self.stream = device.compute_stream
        self.cuda = device.backend == "cuda"
        self.parent = device.empty(max(n, 1), np.int32)[:n]
        self.lo, self.rows, self.indptr, self.indices = 0, 0, None, None
        if self.cuda:
            from groute.kernels import get_kernel
            with device.use():
                self.kernels = {name: get_kernel(KERNEL, name)
                                for name in ("cc_init", "cc_hook", "cc_merge", "cc_compress",
                                             "cc_link_round", "cc_sample_mode", "cc_link_rest")}
            self.sms = int(device.properties()["multiprocessors"])

    def set_rows(self, lo, indptr, indices):
        """Upload this device's rows ``lo .. lo + len(indptr) - 2`` (indptr rebased to 0)."""
        self.lo, self.rows = int(lo), int(indptr.shape[0]) - 1
        self.indptr = self.device.asarray(np.ascontiguousarray(indptr, dtype=np.int64))
        self.indices = self.device.asarray(np.ascontiguousarray(indices, dtype=np.int32))

    def _grid(self, items, waves=8):
        return (max(1, min(-(-items // BLOCK), self.sms * waves)),)

    def reset(self):
        if self.cuda:
            self.stream.submit(lambda: self.n and self.kernels["cc_init"](
                self._grid(self.n), (BLOCK,), (np.int32(self.n), self.parent)))
        else:
            self.stream.submit(lambda: self.parent.__setitem__(slice(None), np.arange(self.n, dtype=np.int32)))

    def hook(self, edges):
        """Hook an ``(m, 2)`` int32 segment (on this device) into the parent array."""
        m = int(edges.shape[0])
        if not m:
            return
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_hook"](
                self._grid(m, waves=16), (BLOCK,), (edges, np.int64(m), self.parent)))
        else:
            self.stream.submit(lambda: hook_numpy(self.parent, edges[:, 0], edges[:, 1]))

    def merge(self, other):
        """Merge another parent array (on this device) into this one."""
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_merge"](
                self._grid(self.n), (BLOCK,), (other, np.int32(self.n), self.parent)))
        else:
            def merge_numpy():
                v = np.flatnonzero(other != np.arange(self.n, dtype=np.int32)).astype(np.int32)
                hook_numpy(self.parent, v, other[v])
            self.stream.submit(merge_numpy)

    def merge_peer(self, peer: "_DeviceCC"):
        """Merge ``peer``'s parent array, read where it lies (CUDA: over NVLink). The caller
        orders this after the peer's last write (an event) and before its next reset."""
        if self.cuda:
            ptr = np.uint64(peer.parent.data.ptr)   # a peer's pointer: no same-device check
            self.stream.submit(lambda: self.kernels["cc_merge"](
                self._grid(self.n), (BLOCK,), (ptr, np.int32(self.n), self.parent)))
        else:
            self.merge(peer.parent)

    def link_round(self, r, light):
        """Afforest sampling round ``r`` over this device's rows: link every vertex to its
        ``r``-th neighbour (the parent array is fully compressed on the CPU backend after this,
        not on CUDA)."""
        if not self.rows:
            return
        indptr, indices, lo = self.indptr, self.indices, self.lo
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_link_round"](
                self._grid(self.rows), (BLOCK,), (indptr, indices, np.int32(lo),
                                                  np.int32(self.rows), np.int32(r),
                                                  np.int32(light), self.parent)))
        else:
            def round_numpy():
                u = np.flatnonzero(np.diff(indptr) > r)
                hook_numpy(self.parent, (u + lo).astype(np.int32), indices[indptr[u] + r])
            self.stream.submit(round_numpy)

    def sample_mode(self, samples, giant):
        """``giant[0]`` = the most frequent root among ``parent[samples]`` (compressed parent)."""
        s = int(samples.shape[0])
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_sample_mode"](
                (1,), (1024,), (self.parent, samples, np.int32(s), giant)))
        else:
            def mode_numpy():
                vals, counts = np.unique(self.parent[samples], return_counts=True)
                giant[0] = vals[np.argmax(counts)] if s else 0
            self.stream.submit(mode_numpy)

    def link_rest(self, rest, r, giant, light, count):
        """The arcs from slot ``r`` on of every vertex outside the giant's tree, every device's
        rows (``rest``: CUDA, ``(pointer table, offsets, k, late bitmap)``; CPU, one
        ``(src, dst)`` list of those arcs per device). ``count`` (zeroed here) receives rows,
        arcs, rows of other devices, their arcs."""
        if self.cuda:
            table, off, k, late = rest

            def run():
                count.fill(0)
                if self.n:
                    self.kernels["cc_link_rest"](
                        self._grid(self.n), (BLOCK,), (table, off, np.int32(k), np.int32(self.n),
                                                       np.int32(r), late, giant, np.int32(light),
                                                       self.parent, count))
            self.stream.submit(run)
        else:
            self.stream.submit(rest_numpy, self.parent, rest, giant, count)

    def compress(self):
        if self.cuda:
            if self.n:
                self.stream.submit(lambda: self.kernels["cc_compress"](
                    self._grid(self.n), (BLOCK,), (np.int32(self.n), self.parent)))
        # the NumPy hook leaves the array compressed already


def rest_numpy(parent, lists, giant, count):
    """CPU rest: hook the arcs of ``lists`` (one ``(src, dst)`` per device) whose source is not in
    the giant's tree. Which arcs to keep (each undirected edge once) is decided on one snapshot
    of ``parent`` for all lists, before any hooking: deciding list by list could drop an edge
    whose twin an earlier list left to it and whose end then joined the giant."""
    g = giant[0]
    count[:] = 0
    keep = []
    for d, (src, dst) in enumerate(lists):
        out = parent[src] != g
        arcs = int(np.count_nonzero(out))
        rows = int(np.unique(src[out]).size) if arcs else 0
        count[0] += rows
        count[1] += arcs
        if d:
            count[2] += rows
            count[3] += arcs
        keep.append(remaining_edges(np, parent, src, dst, giant))
    edges = np.concatenate(keep) if keep else np.zeros((0, 2), np.int32)
    hook_numpy(parent, edges[:, 0], edges[:, 1])


def peer_path_unavailable(devices) -> str | None:
    """Why the in-place path (module docstring) cannot run on ``devices``: it needs the first
    device to read every other's rows and each merge receiver its sender's parent array."""
    k = len(devices)
    pairs = {(0, d) for d in range(1, k)}
    step = 1
    while step < k:
        pairs |= {(j, j + step) for j in range(0, k - step, 2 * step)}
        step *= 2
    for a, b in sorted(pairs):
        if not devices[a].can_access_peer(devices[b]):
            return f"{devices[a].name} cannot access {devices[b].name}'s memory (no peer access)"
    return None


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class CC(Solver):
    """Weak connected components of ``graph``; upload once, :meth:`run` many times.

    ``rest``: ``"auto"`` (default: ``"kernel"`` where the devices can read each other's memory,
    every pair of an NVLink machine and the CPU backend, else ``"segments"``); ``"kernel"``:
    sampling split by rows, tree merge by peer reads, the rest linked in place on the first
    device (module docstring; the fastest on one and two H200s); ``"segments"``: Groute's path,
    the first device samples, compacts what is left and routes it as segments.
    ``afforest``: sample first (``False``: hook the whole edge list through segments, Groute's
    design); ``sample_rounds``: neighbours each vertex links to before the vote; ``num_samples``:
    voters (at most 1024); ``link`` (CUDA): ``"hook"`` walks both ends to their roots (path
    splitting) and CASes one under the other, ``"light"`` is GAPBS's step (CAS the larger
    parent's slot, else retry one level up), ``"mixed"`` hooks in the first round and links
    lightly after. Segments only: ``segment_edges``, edges per segment the router hands out
    (default: the edge list in about 4 segments per device); ``num_buffers``, receive buffers per
    device link.
    """

    def __init__(self, graph, *, ctx=None, backend="auto", devices=None, segment_edges=None,
                 num_buffers=2, afforest=True, sample_rounds=2, num_samples=1024,
                 link="mixed", rest="auto"):
        self.graph = graph
        self.n = int(graph.num_vertices)
        if self.n >= 2**31:
            raise ValueError(f"CC supports graphs of fewer than 2**31 vertices, got {self.n}")
        if isinstance(segment_edges, bool) or (segment_edges is not None and int(segment_edges) < 1):
            raise ValueError(f"segment_edges must be >= 1, got {segment_edges!r}")
        if not 1 <= int(num_samples) <= 1024 or int(sample_rounds) < 0:
            raise ValueError(f"need 1 <= num_samples <= 1024 and sample_rounds >= 0, got "
                             f"{num_samples!r}, {sample_rounds!r}")
        if link not in ("hook", "light", "mixed"):
            raise ValueError(f"link must be 'hook', 'light' or 'mixed', got {link!r}")
        if rest not in ("auto", "kernel", "segments"):
            raise ValueError(f"rest must be 'auto', 'kernel' or 'segments', got {rest!r}")
        if rest == "kernel" and not afforest:
            raise ValueError("rest='kernel' hooks what Afforest sampling left: it needs afforest=True")
        self._open_context(ctx, devices=devices, backend=backend)
        try:
            self.k = len(self.ctx.devices)
            t0 = time.perf_counter()
            cuda = self.ctx.backend == "cuda"
            self.afforest = bool(afforest)
            self.rounds = int(sample_rounds)
            self.link = link
            why = peer_path_unavailable(self.ctx.devices)
            if rest == "kernel" and why:
                raise ValueError(f"rest='kernel' reads other devices' memory, but {why}; "
                                 f"use rest='segments'")
            if not self.afforest:
                self.path = "edge-list"
            elif rest == "segments" or why:
                self.path = "segments"
            else:
                self.path = "kernel"
            self.devs = [_DeviceCC(d, self.n) for d in self.ctx.devices]
            source = self.devs[0].device
            self.offsets = np.array([0, self.n], np.int64)
            if self.afforest:
                indptr, indices = symmetric_csr(graph)
                self.m = int(indices.shape[0]) if graph.directed else _edge_count(graph, indptr, indices)
                self.arcs = int(indices.shape[0])
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
            if cuda:  # uploads ran on the legacy stream
                for dev in self.devs:
                    with dev.device.use():
                        dev.device.xp.cuda.runtime.deviceSynchronize()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _setup_rows(self, indptr, indices, cuda):
        """The in-place path: each device's rows, and on the first device what its rest kernel
        needs to reach every device's rows."""
        self.offsets = split_rows(indptr, self.k, self.rounds)
        lists = []
        for d, dev in enumerate(self.devs):
            lo, hi = int(self.offsets[d]), int(self.offsets[d + 1])
            ip = indptr[lo:hi + 1] - indptr[lo]
            dev.set_rows(lo, ip, indices[indptr[lo]:indptr[hi]])
            if not cuda:   # CPU: the late arcs of this device's rows, kept in its memory
                src, dst = late_arcs(ip, dev.indices, self.rounds)
                lists.append((dev.device.asarray(src + np.int32(lo)), dev.device.asarray(dst)))
        first = self.devs[0].device
        if cuda:
            table = np.array([d.indptr.data.ptr for d in self.devs] +
                             [d.indices.data.ptr for d in self.devs], dtype=np.uint64)
            self.rest = (first.asarray(table), first.asarray(self.offsets.astype(np.int32)),
                         self.k, first.asarray(late_bitmap(indptr, self.rounds)))
            self.counters = first.asarray(np.zeros(4, np.uint64))
        else:
            self.rest = lists
            self.counters = first.asarray(np.zeros(4, np.int64))

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

    def run(self) -> AppResult:
        if self.n == 0:
            return AppResult(np.zeros(0, np.int64), 0.0, {"edges": 0})
        if self.path == "kernel":
            return self._run_in_place()
        return self._run_segments()

    # ---------------------------------------------------------------- default: in place
    def _run_in_place(self) -> AppResult:
        k, devs = self.k, self.devs

        def receives(j, step):
            return j % (2 * step) == 0 and j + step < k

        def compress_before_merge(j, step):
            # A merge hooks (v, other[v]) with any ancestor as other[v], so a sender need not
            # compress its array first (measured on kron:25: its last compression was on the
            # critical path); a receiver's compressed array makes its root walks one hop.
            return receives(j, step)

        with DeviceTimer(self.ctx) as timer:
            for dev in devs:
                dev.reset()
            for r in range(self.rounds):          # interleaved so every device starts at once
                for j, dev in enumerate(devs):
                    dev.link_round(r, self._light(r))
                    if r + 1 < self.rounds or k == 1 or compress_before_merge(j, 1):
                        dev.compress()
            if k > 1:
                events = [dev.stream.record() for dev in devs]
                step = 1
                while step < k:                   # the merge tree: pairs, then pairs of pairs
                    for j in range(0, k - step, 2 * step):
                        recv = devs[j]
                        recv.stream.wait_event(events[j + step])
                        recv.merge_peer(devs[j + step])
                        if 2 * step >= k or compress_before_merge(j, 2 * step):
                            recv.compress()       # the last merge: the vote needs roots
                        events[j] = recv.stream.record()
                    step *= 2
            first = devs[0]
            first.sample_mode(self.samples, self.giant)
            first.link_rest(self.rest, self.rounds, self.giant, self._light(self.rounds), self.counters)
            first.compress()
        labels = first.device.to_host(first.parent).astype(np.int64)
        rows, arcs, remote_rows, remote_arcs = (int(x) for x in first.device.to_host(self.counters))
        giant = int(first.device.to_host(self.giant)[0])
        stats = {"devices": [d.device.name for d in devs], "edges": None,
                 "graph_edges": self.m, "segments": 0, "segment_edges": None,
                 "edges_per_device": [None] * k, "segments_per_device": [0] * k,
                 "rows_per_device": np.diff(self.offsets).tolist(),
                 "merge_rounds": int(np.ceil(np.log2(k))) if k > 1 else 0,
                 # parent arrays read by the merges; indptr pairs and arcs of the rest read remotely
                 "bytes_moved": int(4 * self.n * (k - 1) + 16 * remote_rows + 4 * remote_arcs),
                 "mode": "afforest", "sample_rounds": self.rounds, "giant_root": giant,
                 "giant_size": int(np.count_nonzero(labels == labels[giant])),
                 "rest": "kernel", "routed": False, "rest_rows": rows, "rest_arcs": arcs,
                 "rest_remote_arcs": remote_arcs}
        return AppResult(labels, timer.seconds, stats)

    # ---------------------------------------------------------------- Groute's segments
    def _run_segments(self) -> AppResult:
        ctx, k = self.ctx, self.k
        router = None
        if k > 1:
            router = Router([ctx.devices[0]], ctx.devices, first_available,
                            packet_size=self.segment_edges, num_buffers=self.num_buffers,
                            dtype=np.int32, item_shape=(2,), ctx=ctx, name="cc-segments")
        merge_links = {}
        step = 1
        while step < k:
            for j in range(0, k, 2 * step):
                if j + step < k:
                    merge_links[j + step] = Link(ctx.devices[j + step], ctx.devices[j], max(self.n, 1), 1,
                                                 dtype=np.int32, ctx=ctx, name=f"cc-merge[{j + step}->{j}]")
            step *= 2
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
        labels = self.devs[0].device.to_host(self.devs[0].parent).astype(np.int64)
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
            giant = int(self.devs[0].device.to_host(self.giant)[0])
            stats.update(mode="afforest", sample_rounds=self.rounds, giant_root=giant,
                         giant_size=int(np.count_nonzero(labels == labels[giant])),
                         rest="segments")
        else:
            stats["mode"] = "edge-list"
        return AppResult(labels, timer.seconds, stats)

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
            step = 1
            while step < k:                      # the merge tree: pairs, then pairs of pairs
                if j % (2 * step) == step:
                    handle = merge_links[j].send(dev.parent, event=stream.record())
                    handle.wait(timeout=ctx.timeout, stop=ctx.stop_event)
                    phases[f"sent[{j}]"] = time.perf_counter() - t0
                    return
                if j % (2 * step) == 0 and j + step < k:
                    pending = merge_links[j + step].receive()
                    dev.merge(pending.wait_on(stream).data)
                    pending.release(after=stream.record())
                    dev.compress()
                step *= 2
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


def connected_components(graph, **kwargs) -> AppResult:
    """One-shot :class:`CC`: build, run once, close."""
    with CC(graph, **kwargs) as solver:
        return solver.run()


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------
def register(subparsers, common):
    from apps.app_cli import add_graph_options
    p = subparsers.add_parser("cc", parents=[common],
                              help="connected (weak) components across devices")
    add_graph_options(p)
    p.add_argument("--segment-edges", type=float, default=None, metavar="E",
                   help="edges per segment handed to devices (default: about 4 per device)")
    p.add_argument("--buffers", type=int, default=2, help="receive buffers per device link (default 2)")
    p.add_argument("--no-afforest", action="store_true",
                   help="hook the whole edge list (no sampling phase, Groute's design)")
    p.add_argument("--sample-rounds", type=int, default=2, metavar="R",
                   help="Afforest: neighbours each vertex links to before the vote (default 2)")
    p.add_argument("--rest", choices=("auto", "kernel", "segments"), default="auto",
                   help="after sampling: 'kernel' splits sampling by rows, merges parent arrays "
                        "by peer reads and links the rest in place; 'segments' compacts and routes "
                        "it (Groute's path); auto: kernel where devices reach each other's memory")
    p.add_argument("--link", choices=("hook", "light", "mixed"), default="mixed",
                   help="CUDA linking step (default mixed: hook in the first round, then "
                        "GAPBS's one-level CAS)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from apps.app_cli import load, print_stats, run_solver, write_output
    g = load(args)
    seg = int(args.segment_edges) if args.segment_edges else None
    runs = run_solver(args, lambda ctx: CC(g, ctx=ctx, segment_edges=seg, num_buffers=args.buffers,
                                           afforest=not args.no_afforest,
                                           sample_rounds=args.sample_rounds, link=args.link,
                                           rest=args.rest))
    res = runs.result
    print(f"cc on {runs.devices} x {runs.backend}: {runs.solver.m:,} edges, set up in "
          f"{runs.setup_s:.2f} s")
    labels = res.values
    roots = np.flatnonzero(labels == np.arange(labels.size))
    sizes = np.bincount(labels, minlength=labels.size)[roots] if labels.size else np.zeros(0, np.int64)
    print(runs.time_line())
    print(f"  components: {roots.size:,} (largest {int(sizes.max()) if sizes.size else 0:,} vertices)")
    print_stats(res.stats, skip=("devices",))
    ok = True
    if args.verify:
        from groute.graph import reference
        ref = reference.connected_components(g)
        ok = bool(np.array_equal(labels, ref))
        msg = "OK (exact match)" if ok else "FAILED: " + reference.mismatch_report(labels, ref)
        print(f"  verify vs reference (scipy weak components): {msg}")
    if args.output:
        write_output(g, labels, args.output, labels=True)
    return 0 if ok else 1
