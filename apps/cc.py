"""Connected components across devices: edge-list hooking, first-available segments, tree merge.

As in Groute's CC (seed 004, 5.1.4), topology-driven and edge-list based:

1. The edge list (each undirected edge once; for a directed graph every arc, which gives the
   *weak* components) lives on the first device. It is cut into segments, and a
   :class:`~groute.Router` with the first-available policy hands each segment to whichever
   device frees a receive buffer first, so faster devices take more segments.
2. Each device hooks the edges of its segments into its own parent array (``parent[v] <= v``;
   a CAS links the larger root under the smaller one, Afforest-style) and compresses it.
3. The parent arrays are merged pairwise in a tree (device 1 into 0, 3 into 2, then 2 into 0,
   ...): the receiver treats each ``(v, other[v])`` as an edge, hooks and compresses.
4. After the last compression ``parent[v]`` is the smallest vertex id of v's component: the
   canonical label, equal to ``groute.graph.reference.connected_components``.

With one device the segments are processed in place (no copy). CUDA kernels are in ``cc.cu``;
the CPU backend hooks with vectorised NumPy (``np.minimum.at`` on roots, then pointer jumping).

Afforest (the default, Sutton et al., IPDPS 2018) puts a sampling phase before the routing, on
the first device, over the symmetric CSR (directed graphs are symmetrised once, at set-up):

0. every vertex links to its first ``sample_rounds`` neighbours (a round each, compressed after
   each), which on a grid or a power-law graph already joins almost all of the giant component;
   ``num_samples`` random vertices vote for the most frequent root, the *giant*;
1'. only the arcs from slot ``sample_rounds`` on of the vertices *not* in the giant's tree are
   left to hook (an arc both of whose ends are in the giant's tree joins nothing; any other arc
   is also an arc of its non-giant end, since the adjacency is symmetric). With one CUDA device a
   kernel does this in place (a vertex in the giant's tree skips its whole adjacency); otherwise
   the first device compacts those arcs (each undirected one once) into the edge list that
   steps 1-4 route, hook and merge, the first device starting from its sampled parent array.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from apps.common import AppResult, DeviceTimer, Solver
from groute import Link, Router, first_available

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
    sampling rounds did not link."""
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    src = np.repeat(np.arange(n, dtype=np.int32), deg)
    rank = np.arange(indices.shape[0], dtype=np.int64) - np.repeat(indptr[:-1], deg)
    keep = rank >= rounds
    return np.ascontiguousarray(src[keep]), np.ascontiguousarray(indices[keep])


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
    """A device's parent array and the hook / merge / compress operations on it."""

    def __init__(self, device, n: int):
        self.device = device
        self.n = n
        self.stream = device.compute_stream
        self.cuda = device.backend == "cuda"
        self.parent = device.empty(max(n, 1), np.int32)[:n]
        if self.cuda:
            from groute.kernels import get_kernel
            with device.use():
                self.kernels = {name: get_kernel(KERNEL, name)
                                for name in ("cc_init", "cc_hook", "cc_merge", "cc_compress",
                                             "cc_link_round", "cc_sample_mode", "cc_link_rest")}
            self.sms = int(device.properties()["multiprocessors"])

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
        """Merge another parent array (now on this device) into this one."""
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_merge"](
                self._grid(self.n), (BLOCK,), (other, np.int32(self.n), self.parent)))
        else:
            def merge_numpy():
                v = np.flatnonzero(other != np.arange(self.n, dtype=np.int32)).astype(np.int32)
                hook_numpy(self.parent, v, other[v])
            self.stream.submit(merge_numpy)

    def link_round(self, indptr, indices, r, light):
        """Afforest sampling round ``r``: link every vertex to its ``r``-th neighbour (the parent
        array is fully compressed on the CPU backend after this, not on CUDA)."""
        if self.cuda:
            self.stream.submit(lambda: self.n and self.kernels["cc_link_round"](
                self._grid(self.n), (BLOCK,), (indptr, indices, np.int32(self.n), np.int32(r),
                                               np.int32(light), self.parent)))
        else:
            def round_numpy():
                u = np.flatnonzero(np.diff(indptr) > r)
                hook_numpy(self.parent, u.astype(np.int32), indices[indptr[u] + r])
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

    def link_rest(self, indptr, indices, r, giant, light):
        """CUDA only: the arcs from slot ``r`` on of every vertex outside the giant's tree."""
        self.stream.submit(lambda: self.n and self.kernels["cc_link_rest"](
            self._grid(self.n), (BLOCK,), (indptr, indices, np.int32(self.n), np.int32(r), giant,
                                           np.int32(light), self.parent)))

    def compress(self):
        if self.cuda:
            if self.n:
                self.stream.submit(lambda: self.kernels["cc_compress"](
                    self._grid(self.n), (BLOCK,), (np.int32(self.n), self.parent)))
        # the NumPy hook leaves the array compressed already


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
class CC(Solver):
    """Weak connected components of ``graph``; upload once, :meth:`run` many times.

    ``segment_edges``: edges per segment the router hands out (default: the edge list in about
    4 segments per device); ``num_buffers``: receive buffers per device link. ``afforest``:
    sample first (module docstring; ``False``: hook the whole edge list, Groute's design);
    ``sample_rounds``: neighbours each vertex links to before the vote; ``num_samples``: voters
    (at most 1024); ``link`` (CUDA): ``"hook"`` walks both ends to their roots (path splitting)
    and CASes one under the other, ``"light"`` is GAPBS's step (CAS the larger parent's slot,
    else retry one level up), ``"mixed"`` hooks in the first round and links lightly after;
    ``rest``: ``"auto"`` (one CUDA device: the in-place kernel; else
    segments), ``"kernel"`` or ``"segments"`` (compact and route even on one device).
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
        self._open_context(ctx, devices=devices, backend=backend)
        try:
            self.k = len(self.ctx.devices)
            t0 = time.perf_counter()
            cuda = self.ctx.backend == "cuda"
            self.afforest = bool(afforest)
            self.rounds = int(sample_rounds)
            self.link = link
            if rest == "kernel" and not (cuda and self.k == 1):
                raise ValueError("rest='kernel' needs one CUDA device")
            self.in_place = self.afforest and cuda and self.k == 1 and rest != "segments"
            source = self.ctx.devices[0]
            if self.afforest:
                indptr, indices = symmetric_csr(graph)
                self.m = int(indices.shape[0]) if graph.directed else int(
                    np.count_nonzero(np.repeat(np.arange(self.n), np.diff(indptr)) < indices))
                self.arcs = int(indices.shape[0])
                rng = np.random.default_rng(0x5EED)
                self.indptr = source.asarray(indptr)
                self.indices = source.asarray(indices)
                self.samples = source.asarray(rng.integers(0, max(self.n, 1), int(num_samples),
                                                           dtype=np.int64).astype(np.int32))
                self.giant = source.asarray(np.zeros(1, np.int32))
                if not self.in_place:
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
            self.devs = [_DeviceCC(d, self.n) for d in self.ctx.devices]
            if cuda:  # uploads ran on the legacy stream
                with source.use():
                    source.xp.cuda.runtime.deviceSynchronize()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _sample(self):
        """Afforest's sampling phase on the first device: link rounds, compress, vote."""
        dev = self.devs[0]
        dev.reset()
        for r in range(self.rounds):
            dev.link_round(self.indptr, self.indices, r, self._light(r))
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
        ctx, k = self.ctx, self.k
        if self.n == 0:
            return AppResult(np.zeros(0, np.int64), 0.0, {"edges": 0})
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
        hooked = None
        try:
            with DeviceTimer(ctx) as timer:
                if self.afforest:
                    self._sample()
                if self.in_place:
                    dev = self.devs[0]
                    dev.link_rest(self.indptr, self.indices, self.rounds, self.giant,
                                  self._light(self.rounds))
                    dev.compress()
                    edges_per = [None]
                else:
                    edges = self._remaining() if self.afforest else self.edges
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
                        self._run_multi(router, merge_links, edges, segs, edges_per, segs_per)
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
                 "bytes_moved": int(seg_bytes + 4 * self.n * (k - 1))}
        if self.afforest:
            giant = int(self.devs[0].device.to_host(self.giant)[0])
            stats.update(mode="afforest", sample_rounds=self.rounds, giant_root=giant,
                         giant_size=int(np.count_nonzero(labels == labels[giant])),
                         rest="kernel" if self.in_place else "segments")
        else:
            stats["mode"] = "edge-list"
        return AppResult(labels, timer.seconds, stats)

    def _run_multi(self, router, merge_links, edges, segs, edges_per, segs_per):
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
            step = 1
            while step < k:                      # the merge tree: pairs, then pairs of pairs
                if j % (2 * step) == step:
                    handle = merge_links[j].send(dev.parent, event=stream.record())
                    handle.wait(timeout=ctx.timeout, stop=ctx.stop_event)
                    return
                if j % (2 * step) == 0 and j + step < k:
                    pending = merge_links[j + step].receive()
                    dev.merge(pending.wait_on(stream).data)
                    pending.release(after=stream.record())
                    dev.compress()
                step *= 2

        futures = [ctx.submit(j, worker) for j in range(k)]
        try:
            for a, b in segs:
                router.inputs[0].send(edges[a:b])
            router.close()
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
                                           sample_rounds=args.sample_rounds, link=args.link))
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
