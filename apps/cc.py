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
                                for name in ("cc_init", "cc_hook", "cc_merge", "cc_compress")}
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
    4 segments per device); ``num_buffers``: receive buffers per device link.
    """

    def __init__(self, graph, *, ctx=None, backend="auto", devices=None, segment_edges=None,
                 num_buffers=2):
        self.graph = graph
        self.n = int(graph.num_vertices)
        if self.n >= 2**31:
            raise ValueError(f"CC supports graphs of fewer than 2**31 vertices, got {self.n}")
        self._open_context(ctx, devices=devices, backend=backend)
        try:
            self.k = len(self.ctx.devices)
            t0 = time.perf_counter()
            edges = edge_list(graph)
            self.m = int(edges.shape[0])
            if segment_edges is None:
                segment_edges = max(1 << 16, -(-self.m // (4 * self.k)))
            if isinstance(segment_edges, bool) or int(segment_edges) < 1:
                raise ValueError(f"segment_edges must be >= 1, got {segment_edges!r}")
            self.segment_edges = int(segment_edges)
            self.num_buffers = int(num_buffers)
            self.devs = [_DeviceCC(d, self.n) for d in self.ctx.devices]
            source = self.ctx.devices[0]
            self.edges = source.asarray(edges)
            if self.ctx.backend == "cuda":  # uploads ran on the legacy stream
                with source.use():
                    source.xp.cuda.runtime.deviceSynchronize()
            self.setup_s = time.perf_counter() - t0
        except BaseException:
            self.close()
            raise

    def _segments(self):
        seg = self.segment_edges
        return [(a, min(a + seg, self.m)) for a in range(0, self.m, seg)]

    def run(self) -> AppResult:
        ctx, k = self.ctx, self.k
        if self.n == 0:
            return AppResult(np.zeros(0, np.int64), 0.0, {"edges": 0})
        segs = self._segments()
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
        try:
            with DeviceTimer(ctx) as timer:
                if k == 1:
                    dev = self.devs[0]
                    dev.reset()
                    for a, b in segs:
                        dev.hook(self.edges[a:b])
                        edges_per[0] += b - a
                        segs_per[0] += 1
                    dev.compress()
                else:
                    self._run_multi(router, merge_links, segs, edges_per, segs_per)
        finally:
            if router is not None:
                router.close()
            for link in merge_links.values():
                link.close()
        labels = self.devs[0].device.to_host(self.devs[0].parent).astype(np.int64)
        seg_bytes = 8 * sum(edges_per[1:]) if k > 1 else 0
        stats = {"devices": [d.device.name for d in self.devs], "edges": self.m,
                 "segments": len(segs), "segment_edges": self.segment_edges,
                 "edges_per_device": edges_per, "segments_per_device": segs_per,
                 "merge_rounds": int(np.ceil(np.log2(k))) if k > 1 else 0,
                 "bytes_moved": int(seg_bytes + 4 * self.n * (k - 1))}
        return AppResult(labels, timer.seconds, stats)

    def _run_multi(self, router, merge_links, segs, edges_per, segs_per):
        ctx, k = self.ctx, self.k

        def worker(device):
            j = ctx.devices.index(device)
            dev = self.devs[j]
            stream = device.compute_stream
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
                router.inputs[0].send(self.edges[a:b])
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
    from apps.pr_cc_cli import add_graph_options
    p = subparsers.add_parser("cc", parents=[common],
                              help="connected (weak) components across devices")
    add_graph_options(p)
    p.add_argument("--segment-edges", type=float, default=None, metavar="E",
                   help="edges per segment handed to devices (default: about 4 per device)")
    p.add_argument("--buffers", type=int, default=2, help="receive buffers per device link (default 2)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from apps.pr_cc_cli import load, print_stats, timed_runs, write_output
    from groute.cli import context_from_args
    g = load(args)
    ctx = context_from_args(args)
    try:
        t0 = time.perf_counter()
        seg = int(args.segment_edges) if args.segment_edges else None
        solver = CC(g, ctx=ctx, segment_edges=seg, num_buffers=args.buffers)
        print(f"cc on {solver.k} x {ctx.backend}: {solver.m:,} edges to hook, set up in "
              f"{time.perf_counter() - t0:.2f} s")
        try:
            res, median, times = timed_runs(solver, args.repeat)
        finally:
            solver.close()
    finally:
        ctx.shutdown()
    labels = res.values
    roots = np.flatnonzero(labels == np.arange(labels.size))
    sizes = np.bincount(labels, minlength=labels.size)[roots] if labels.size else np.zeros(0, np.int64)
    print(f"  time: median {median * 1e3:.3f} ms over {len(times)} runs "
          f"(min {min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f}) after one warm-up")
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
