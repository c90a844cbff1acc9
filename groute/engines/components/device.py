"""The connected components engine's per-device state and operations
(:mod:`groute.engines.components.solver`): one :class:`DeviceCC` per device holds its parent
array, its rows of the CSR, its voters and its stats, and runs the reset / link / compress /
vote / rest / publish steps on them, and on the first device the one-level merge, the repair
and the labels' download: CUDA kernels (``union_find.cu``) or vectorised NumPy on the device's
stream (:func:`hook_numpy` and the ``*_numpy`` steps). The engine's only backend-specific code.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .layout import bitmap_has, bitmap_members, bitmap_words, late_arcs, late_bitmap

KERNEL = Path(__file__).with_name("union_find.cu")
BLOCK = 256

#: slots of a device's stats array (uint64; ``union_find.cu``'s ``STAT_*`` are the same): rows
#: whose late arcs were linked, their arcs, of those the rows and arcs read from another device;
#: the root of the device's giant tree, the vertices it publishes in that tree (its root too) and
#: in others;
#: the merge's finished blocks; the giant component's size; the devices whose skipped rows the
#: repair links (a bit each)
(STAT_REST_ROWS, STAT_REST_ARCS, STAT_REMOTE_ROWS, STAT_REMOTE_ARCS, STAT_GIANT,
 STAT_GIANT_BITS, STAT_OTHER_BITS, STAT_MERGED_BLOCKS, STAT_GIANT_SIZE, STAT_REDO) = range(10)
STATS = 16
#: the most devices the one-level merge takes (a bit each in ``STAT_REDO``)
MAX_DEVICES = 32
#: labels converted to int64 on the device per chunk of the download (a fixed staging buffer)
LABEL_CHUNK = 1 << 21


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


def reference_group(roots, sizes) -> tuple[int, int]:
    """``(reference root, redo mask)`` from the devices' giant roots in the merged forest and
    their giant trees' sizes: the root whose devices skipped the most (their trees' sizes plus
    one per device; the first such device's on a tie), and a bit for each device whose giant
    lies elsewhere, whose skipped rows the repair links (``cc_merge_diffs``'s last block decides
    the same way)."""
    roots = [int(r) for r in roots]
    weight = [int(s) + 1 for s in sizes]
    group = [sum(w for r, w in zip(roots, weight) if r == root) for root in roots]
    best = max(range(len(roots)), key=lambda a: (group[a], -a))
    ref = roots[best]
    return ref, sum(1 << a for a, r in enumerate(roots) if r != ref)


def rest_numpy(parent, late, giant, stats) -> None:
    """CPU rest: hook the late arcs ``late = (src, dst)`` whose source is not in the giant's
    tree (``giant[0]``'s root), counting rows and arcs (``STAT_REST_ROWS``, ``_ARCS``)."""
    src, dst = late
    keep = parent[src] != parent[giant[0]]
    _count_rows(stats, src[keep], remote=False)
    hook_numpy(parent, src[keep], dst[keep])


def publish_numpy(parent, giant, in_giant, other, stats) -> None:
    """CPU publish (``cc_publish``): the bitmaps of the vertices whose root is the giant's root
    (the root too), and of those in other trees (their roots left out); the giant's root and the
    counts in ``stats``."""
    compress_numpy(parent)
    g = int(parent[giant[0]])
    mine = parent == g
    theirs = ~mine & (parent != np.arange(parent.shape[0], dtype=parent.dtype))
    in_giant[:] = bitmap_words(mine)
    other[:] = bitmap_words(theirs)
    stats[STAT_GIANT] = g
    stats[STAT_GIANT_BITS] = int(np.count_nonzero(mine))
    stats[STAT_OTHER_BITS] = int(np.count_nonzero(theirs))


def merge_numpy(parent, peers, stats, giant) -> None:
    """CPU one-level merge (``cc_merge_diffs``): every peer's published trees hooked into
    ``parent``, then the devices' giants compared (:func:`reference_group`)."""
    n = parent.shape[0]
    for peer in peers:
        g = int(peer.stats[STAT_GIANT])
        mine = bitmap_members(peer.in_giant, n)
        hook_numpy(parent, mine, np.full(mine.shape, g, np.int32))
        others = bitmap_members(peer.other, n)
        hook_numpy(parent, others, peer.parent[others])
    devs = [stats] + [p.stats for p in peers]
    giant[0], stats[STAT_REDO] = reference_group(parent[[int(d[STAT_GIANT]) for d in devs]],
                                                 [d[STAT_GIANT_BITS] for d in devs])


def repair_numpy(parent, devs, stats) -> None:
    """CPU repair (``cc_repair``): the late arcs of the rows each device of ``STAT_REDO`` may have
    skipped (those in its published giant tree), hooked into ``parent`` (the first device's)."""
    redo = int(stats[STAT_REDO])
    for d, dev in enumerate(devs):
        if (redo >> d) & 1:
            src, dst = dev.late
            keep = bitmap_has(dev.in_giant, src)
            _count_rows(stats, src[keep], remote=d > 0)
            hook_numpy(parent, src[keep], dst[keep])


def _count_rows(stats, src, remote) -> None:
    rows, arcs = int(np.unique(src).size), int(src.size)
    for slot, add in ((STAT_REST_ROWS, rows), (STAT_REST_ARCS, arcs)) + (
            ((STAT_REMOTE_ROWS, rows), (STAT_REMOTE_ARCS, arcs)) if remote else ()):
        stats[slot] += add


# ------------------------------------------------------------------------------------------------
# per-device operations: the only backend-specific code
# ------------------------------------------------------------------------------------------------
class DeviceCC:
    """A device's parent array (every vertex of the graph), its rows of the CSR (``lo`` ..
    ``lo + rows - 1``), its voters and giant, its stats (``STAT_*``), and the operations on them.
    With several devices also its published bitmaps (:meth:`prepare_merge`) and, on the first,
    the addresses of every device's arrays (:meth:`connect`). ``labels``: this device downloads
    the answer (:meth:`labels`)."""

    def __init__(self, device, n: int, *, labels: bool = False):
        self.device = device
        self.n = n
        self.stream = device.compute_stream
        self.cuda = device.backend == "cuda"
        self.parent = device.empty(max(n, 1), np.int32)[:n]
        self.stats = device.asarray(np.zeros(STATS, np.uint64))
        self.giant = device.asarray(np.zeros(1, np.int32))
        self.samples = None
        self.lo, self.rows, self.indptr, self.indices = 0, 0, None, None
        self.late = None            # CUDA: the rows' late bitmap; CPU: their late arcs (src, dst)
        self.in_giant = self.other = None
        self.peers = []
        # the device that downloads the labels converts them through this (CUDA)
        self.staging = (device.empty(min(max(n, 1), LABEL_CHUNK), np.int64)
                        if labels and self.cuda else None)
        if self.cuda:
            from groute.kernels import get_kernel
            with device.use():
                self.kernels = {name: get_kernel(KERNEL, name)
                                for name in ("cc_init", "cc_hook", "cc_merge", "cc_compress",
                                             "cc_link_round", "cc_sample_mode", "cc_link_rest",
                                             "cc_publish", "cc_merge_diffs", "cc_repair")}
            self.sms = int(device.properties()["multiprocessors"])

    # -------------------------------------------------------------- set-up
    def set_rows(self, lo, indptr, indices, late_from=None):
        """Upload this device's rows ``lo .. lo + len(indptr) - 2`` (indptr rebased to 0) and,
        with ``late_from`` (the sampling rounds), what its rest reads: which rows have arcs from
        that slot on (CUDA, a bitmap; CPU, those arcs)."""
        self.lo, self.rows = int(lo), int(indptr.shape[0]) - 1
        self.indptr = self.device.asarray(np.ascontiguousarray(indptr, dtype=np.int64))
        self.indices = self.device.asarray(np.ascontiguousarray(indices, dtype=np.int32))
        if late_from is None:
            return
        if self.cuda:
            self.late = self.device.asarray(late_bitmap(indptr, late_from))
            self._own = self._table([self])
        else:
            src, dst = late_arcs(indptr, indices, late_from)
            self.late = (src + np.int32(self.lo), dst)

    def set_samples(self, samples):
        """This device's voters (int32 vertex ids, at most 1024)."""
        self.samples = self.device.asarray(np.ascontiguousarray(samples, dtype=np.int32))

    def prepare_merge(self):
        """The bitmaps :meth:`publish` writes (several devices only)."""
        words = max(1, -(-self.n // 32))
        self.in_giant = self.device.asarray(np.zeros(words, np.uint32))
        self.other = self.device.asarray(np.zeros(words, np.uint32))

    def connect(self, devs):
        """On the first device: every device's arrays, which :meth:`merge_diffs` and
        :meth:`repair` read (CUDA: their addresses, in tables on this device)."""
        self.peers = list(devs)
        if self.cuda:
            senders = np.array([[d.in_giant.data.ptr, d.other.data.ptr, d.parent.data.ptr,
                                 d.stats.data.ptr] for d in devs[1:]], np.uint64).reshape(-1)
            self._senders = self.device.asarray(senders)
            self._every = self._table(devs)
            self._bits = self.device.asarray(np.array([d.in_giant.data.ptr for d in devs],
                                                      np.uint64))

    def _table(self, devs):
        """CUDA: ``(rows table, offsets, k)`` of ``devs``' rows as ``link_rows`` reads them."""
        ptrs = ([d.indptr.data.ptr for d in devs] + [d.indices.data.ptr for d in devs] +
                [d.late.data.ptr for d in devs])
        off = [d.lo for d in devs] + [devs[-1].lo + devs[-1].rows]
        return (self.device.asarray(np.array(ptrs, np.uint64)),
                self.device.asarray(np.array(off, np.int32)), len(devs))

    def _grid(self, items, waves=8):
        return (max(1, min(-(-items // BLOCK), self.sms * waves)),)

    # -------------------------------------------------------------- every device
    def reset(self):
        """Every vertex its own tree; the stats zeroed."""
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_init"](
                self._grid(max(self.n, 1)), (BLOCK,), (np.int32(self.n), self.parent, self.stats)))
        else:
            def reset_numpy():
                self.parent[:] = np.arange(self.n, dtype=np.int32)
                self.stats[:] = 0
            self.stream.submit(reset_numpy)

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
        """Merge another whole parent array (on this device) into this one."""
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_merge"](
                self._grid(self.n), (BLOCK,), (other, np.int32(self.n), self.parent)))
        else:
            def merge_numpy():
                v = np.flatnonzero(other != np.arange(self.n, dtype=np.int32)).astype(np.int32)
                hook_numpy(self.parent, v, other[v])
            self.stream.submit(merge_numpy)

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

    def compress(self, rows_only=False, count=False):
        """Point every vertex (``rows_only``: every vertex of this device's rows) at its root;
        ``count``: also count the giant's component (the vertices whose root is ``giant[0]``'s)
        into ``STAT_GIANT_SIZE``."""
        lo, hi = (self.lo, self.lo + self.rows) if rows_only else (0, self.n)
        if self.cuda:
            if hi > lo:
                giant = self.giant if count else np.uint64(0)
                self.stream.submit(lambda: self.kernels["cc_compress"](
                    self._grid(hi - lo), (BLOCK,), (np.int32(lo), np.int32(hi), self.parent,
                                                    giant, self.stats)))
        elif count:     # the NumPy hook leaves the array compressed already
            def count_numpy():
                g = self.parent[self.giant[0]]
                self.stats[STAT_GIANT_SIZE] = int(np.count_nonzero(self.parent == g))
            self.stream.submit(count_numpy)

    def sample_mode(self):
        """``giant[0]`` = the most frequent root of this device's voters (after a compression
        of its rows)."""
        s = int(self.samples.shape[0])
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_sample_mode"](
                (1,), (1024,), (self.parent, self.samples, np.int32(s), self.giant)))
        else:
            def mode_numpy():
                vals, counts = np.unique(self.parent[self.samples], return_counts=True)
                self.giant[0] = vals[np.argmax(counts)]
            self.stream.submit(mode_numpy)

    def link_rest(self, r, light):
        """The arcs from slot ``r`` on of every row of this device whose vertex is not in the
        giant's tree (``giant[0]``, the vote), counted into ``STAT_REST_ROWS``, ``_ARCS``."""
        if self.cuda:
            if self.rows:
                rows, off, k = self._own
                self.stream.submit(lambda: self.kernels["cc_link_rest"](
                    self._grid(self.rows), (BLOCK,), (rows, off, np.int32(k), np.int32(r),
                                                      self.giant, np.int32(light), self.parent,
                                                      self.stats)))
        else:
            self.stream.submit(rest_numpy, self.parent, self.late, self.giant, self.stats)

    def publish(self):
        """Compress every vertex and mark each non-root in this device's giant tree
        (``in_giant``) or another (``other``): what the first device merges."""
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_publish"](
                self._grid(self.n), (BLOCK,), (np.int32(self.n), self.giant, self.parent,
                                               self.in_giant, self.other, self.stats)))
        else:
            self.stream.submit(publish_numpy, self.parent, self.giant, self.in_giant,
                               self.other, self.stats)

    # -------------------------------------------------------------- the first device
    def merge_diffs(self):
        """Hook every other device's published trees into this array, read where they lie, in
        one kernel; then name the reference giant (``giant[0]``) and the devices to repair
        (``STAT_REDO``). The caller orders it after the peers' publish (events)."""
        if self.cuda:
            s = len(self.peers) - 1
            self.stream.submit(lambda: self.kernels["cc_merge_diffs"](
                self._grid(-(-self.n // 32)), (BLOCK,), (self._senders, np.int32(s),
                                                         np.int32(self.n), self.parent,
                                                         self.stats, self.giant)))
        else:
            self.stream.submit(merge_numpy, self.parent, self.peers[1:], self.stats, self.giant)

    def repair(self, r, light):
        """Link here the late arcs of the rows skipped by the devices of ``STAT_REDO`` (read
        where they lie); nothing when every device's giant joined the reference."""
        if self.cuda:
            rows, off, k = self._every
            self.stream.submit(lambda: self.kernels["cc_repair"](
                self._grid(self.n), (BLOCK,), (rows, off, np.int32(k), np.int32(r), self._bits,
                                               np.int32(light), self.parent, self.stats)))
        else:
            self.stream.submit(repair_numpy, self.parent, self.peers, self.stats)

    def labels(self) -> np.ndarray:
        """The labels as a new int64 host array, converted on the device (CUDA: chunk by chunk
        through a fixed staging buffer, each downloaded into its place). Synchronous; call it
        after the device finished."""
        if not self.cuda:
            return self.parent.astype(np.int64)
        out = np.empty(self.n, np.int64)
        with self.device.use(), self.stream.raw:
            for a in range(0, self.n, LABEL_CHUNK):
                b = min(a + LABEL_CHUNK, self.n)
                chunk = self.staging[:b - a]
                chunk[...] = self.parent[a:b]
                chunk.get(out=out[a:b])
        return out

    def read_stats(self) -> np.ndarray:
        """The stats (``STAT_*``) on the host, as int64. Synchronous."""
        return self.device.to_host(self.stats).astype(np.int64)
