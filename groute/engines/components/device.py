"""The connected components engine's per-device state and operations
(:mod:`groute.engines.components.solver`): one :class:`DeviceCC` per device holds its parent
array and its rows of the CSR and runs the hook / merge / compress / sampling steps on them, as
CUDA kernels (``union_find.cu``) or vectorised NumPy on the device's stream (:func:`hook_numpy`,
:func:`rest_numpy`). The engine's only backend-specific code.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groute.graph.arcs import row_chunks

from .layout import late_arcs, remaining_edges

KERNEL = Path(__file__).with_name("union_find.cu")
BLOCK = 256
#: a merge sender's list holds up to n // CHANGES_LIST_SHARE pairs (8 bytes each: n bytes at 8,
#: against the 4n of its whole array); past it the first device reads the array whole
CHANGES_LIST_SHARE = 8


def changes_capacity(n: int) -> int:
    """The pairs a merge sender's list holds (:data:`CHANGES_LIST_SHARE`)."""
    return max(int(n) // CHANGES_LIST_SHARE, 1)


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


def merge_numpy(parent: np.ndarray, other: np.ndarray) -> None:
    """Merge another parent array into ``parent`` (compressed; in place): each ``(v,
    other[v])`` with ``other[v] != v`` is an edge."""
    v = np.flatnonzero(other != np.arange(parent.shape[0], dtype=np.int32)).astype(np.int32)
    hook_numpy(parent, v, other[v])


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
class DeviceCC:
    """A device's parent array, its rows of the CSR, and the hook / merge / compress operations."""

    def __init__(self, device, n: int):
        self.device = device
        self.n = n
        self.stream = device.compute_stream
        self.cuda = device.backend == "cuda"
        self.parent = device.empty(max(n, 1), np.int32)[:n]
        self.lo, self.rows, self.indptr, self.indices = 0, 0, None, None
        #: whether :meth:`replay` records its phases (``CCTuning.replay``), and those recorded
        self.replaying, self._phases = True, {}
        if self.cuda:
            from groute.kernels import get_kernel
            with device.use():
                self.kernels = {name: get_kernel(KERNEL, name)
                                for name in ("cc_init", "cc_hook", "cc_merge", "cc_compress",
                                             "cc_link_round", "cc_sample_mode", "cc_link_rest",
                                             "cc_changes", "cc_merge_changes",
                                             "cc_count_root")}
            self.sms = int(device.properties()["multiprocessors"])

    def replay(self, phase: str, work) -> None:
        """Submit ``work()``, the fixed sequence of this device's operations that makes
        ``phase`` of a run (the same every run: see :meth:`~groute.device.base.Stream.
        recorded`), the way its stream replays it fastest: submitted as it is on its first call,
        replayed after (on CUDA one graph launch instead of a host call per kernel, the
        graph captured at the first replay). A phase reads the arrays set up before the first
        run (:meth:`set_rows`, :meth:`make_changes` and the solver's are set-up steps, never
        called again), also other devices' through their addresses. With :attr:`replaying`
        off, ``work()`` every time."""
        if not self.replaying:
            work()
            return
        again = self._phases.get(phase)
        if again is None:
            self._phases[phase] = self.stream.recorded(work)
        else:
            again()

    def forget_phases(self) -> None:
        """Drop the recorded phases (and their CUDA graphs): the solver's close."""
        self._phases = {}

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
            self.stream.submit(merge_numpy, self.parent, other)

    # ------------------------------------------------------------ the merge by changes
    def make_changes(self, samples, cap: int):
        """Make this device a merge sender (:meth:`describe_changes`): ``samples`` (on this
        device) vote for its giant; its list holds up to ``cap`` (vertex, root) pairs."""
        dev = self.device
        self.own_samples = samples
        self.changes = Changes(bits=dev.empty(max(-(-self.n // 32), 1), np.uint32),
                               list=dev.empty((max(int(cap), 1), 2), np.int32),
                               info=dev.asarray(np.zeros(1, np.uint64)),
                               giant=dev.asarray(np.zeros(1, np.int32)), parent=self.parent,
                               cap=int(cap))

    def describe_changes(self):
        """Compress this (sender's) array and describe it against the identity in
        :attr:`changes` for a receiver's :meth:`merge_changes`: its giant's tree as one bit
        per vertex, the other moved vertices as (vertex, root) pairs (their count in
        ``info[0]``, also past ``cap``: then the receiver reads the array whole).
        ``union_find.cu``'s ``cc_changes`` says why. The array is compressed first: its last
        sampling round can leave long chains of roots (a grid's rows, linked lightly), which
        the vote's walks and the description's would each follow from every vertex."""
        c = self.changes
        self.compress()
        self.sample_mode(self.own_samples, c.giant)
        if self.cuda:
            def run():
                c.info.fill(0)
                if self.n:
                    self.kernels["cc_changes"](self._grid(self.n), (BLOCK,), (
                        np.int32(self.n), self.parent, c.giant, c.bits, c.list,
                        np.int64(c.cap), c.info))
            self.stream.submit(run)
        else:
            self.stream.submit(changes_numpy, self.parent, c)

    def merge_changes(self, senders, table, moved):
        """Merge every sender's :class:`Changes` (read where they lie: CUDA, over NVLink
        through ``table``, their addresses, :meth:`changes_table`) into this device's array.
        The caller orders this after every sender's description (events; across processes
        each rank waits for its GPU and the ranks meet). ``moved`` (zeroed
        here) receives the bytes read from the senders and how many were read whole. Every
        sender's list holds the same number of pairs (the kernel takes one ``cap``)."""
        if len({c.cap for c in senders}) > 1:
            raise ValueError(f"the senders' lists differ in size: {[c.cap for c in senders]}")
        if self.cuda:
            def run():
                moved.fill(0)
                if self.n:
                    self.kernels["cc_merge_changes"](self._grid(self.n), (BLOCK,), (
                        table, np.int32(len(senders)), np.int32(self.n),
                        np.int64(senders[0].cap), self.parent, moved))
            self.stream.submit(run)
        else:
            self.stream.submit(merge_changes_numpy, self.parent, senders, moved)

    def changes_table(self, senders):
        """The senders' :class:`Changes` as this device's kernel reaches them
        (``cc_merge_changes``'s ``Changes``: five addresses per sender)."""
        dev = self.device
        words = [dev.address(a) for c in senders
                 for a in (c.bits, c.list, c.info, c.giant, c.parent)]
        return dev.asarray(np.array(words, np.uint64))

    # -------------------------------------- the changes as a message to another process
    def changes_message(self, timeout):
        """This device's :attr:`changes` (after :meth:`describe_changes`) as one int32 array
        for a process that cannot read them in place: the giant's root, then the bits and the
        pairs, or the whole array where the pairs overflowed; and the pairs' count (-1: the
        array whole), which the receiver needs to read it (:meth:`changes_from_message`).
        Waits for this device (the count decides the message's length)."""
        c, dev = self.changes, self.device
        self.stream.record().synchronize(timeout)
        listed = int(dev.to_host(c.info)[0])
        with dev.on_compute():
            xp = dev.xp
            if listed > c.cap:
                return xp.concatenate([c.giant, self.parent]), -1
            return xp.concatenate([c.giant, c.bits.view(np.int32),
                                   c.list[:listed].reshape(-1)]), listed

    def labels_from_changes(self, c: "Changes"):
        """The labels (int64, on this device) that a compressed array described by ``c``
        holds: the giant's root for every marked vertex, the root of every pair, each other
        vertex its own (or the array itself where it came whole). Array work on the caller's
        thread (CUDA: queued on the compute stream): on the CPU backend the caller waits for
        what ``c`` is made of first."""
        listed = int(self.device.to_host(c.info)[0])
        with self.device.on_compute():
            xp = self.device.xp
            if listed > c.cap:
                return c.parent.astype(np.int64)
            labels = xp.arange(self.n, dtype=np.int64)
            marked = xp.unpackbits(c.bits.view(np.uint8), bitorder="little")[:self.n]
            labels[marked.view(bool)] = c.giant[0].astype(np.int64)
            labels[c.list[:listed, 0]] = c.list[:listed, 1]
            return labels

    def changes_from_message(self, message, listed, cap):
        """:class:`Changes` viewing a message of :meth:`changes_message` received on this
        device, ``listed`` its pairs' count (-1: a whole array), ``cap`` the sender's."""
        words = max(-(-self.n // 32), 1)
        count = cap + 1 if listed < 0 else listed
        rest = message[1:]
        return Changes(bits=rest[:words].view(np.uint32),
                       list=rest[words:words + 2 * max(listed, 0)].reshape(-1, 2),
                       info=self.device.asarray(np.array([count], np.uint64)),
                       giant=message[:1], parent=rest[:self.n], cap=int(cap))

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
        """``giant[0]`` = the most frequent root among ``parent[samples]`` (compressed parent),
        the smallest of equally frequent ones; at most 1024 samples (one block's vote)."""
        s = int(samples.shape[0])
        if s > 1024:
            raise ValueError(f"the giant's vote takes at most 1024 samples, got {s}")
        if self.cuda:
            self.stream.submit(lambda: self.kernels["cc_sample_mode"](
                (1,), (1024,), (self.parent, samples, np.int32(s), giant)))
        else:
            def mode_numpy():
                vals, counts = np.unique(self.parent[samples], return_counts=True)
                giant[0] = vals[np.argmax(counts)] if s else 0
            self.stream.submit(mode_numpy)

    def giant_size(self, giant):
        """How many vertices share the root of ``giant[0]``, counted after the work queued on
        this device's stream without an array of n flags.

        Parameters
        ----------
        giant : array
            One int32 on this device: a vertex of the giant (the vote's, ``sample_mode``).
            The parent array must be compressed.

        Returns
        -------
        array
            A 1-element int64 array of this device (the answer's facts read it back with the
            rest in one copy).
        """
        if not self.cuda:       # NumPy: counted on this thread once the stream's work is done
            self.stream.synchronize()
            return np.array([np.count_nonzero(self.parent == self.parent[giant[0]])
                             if self.n else 0], np.int64)
        out = self.device.zeros(1, np.uint64)
        self.stream.submit(lambda: self.n and self.kernels["cc_count_root"](
            self._grid(self.n), (BLOCK,), (np.int32(self.n), self.parent, giant, out)))
        with self.device.on_compute():
            return out.astype(np.int64)

    def link_rest(self, rest, r, giant, light, count):
        """The arcs from slot ``r`` on of every vertex outside the giant's tree, every device's
        rows (``rest``: CUDA, ``(pointer table, offsets, k, late bitmap)``; CPU, one
        ``(first vertex, indptr, indices)`` per device, its rows). ``count`` (zeroed here)
        receives rows, arcs, rows of other devices, their arcs."""
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
            self.stream.submit(rest_numpy, self.parent, rest, r, giant, count)

    def compress(self, rows_only: bool = False):
        """Point every vertex at its root; ``rows_only``: only this device's rows, the vertices
        its next sampling round starts from (O(n / K) instead of O(n) on K devices; the others
        keep valid, longer paths)."""
        lo, hi = (self.lo, self.lo + self.rows) if rows_only else (0, self.n)
        if self.cuda:
            if hi > lo:
                self.stream.submit(lambda: self.kernels["cc_compress"](
                    self._grid(hi - lo), (BLOCK,), (np.int32(lo), np.int32(hi), self.parent)))
        # the NumPy hook leaves the array compressed already


@dataclass
class Changes:
    """What a merge sender's sampling changed (:meth:`DeviceCC.describe_changes`), where a
    receiver reads it: ``bits`` (uint32 words) one bit per vertex of the sender's giant's tree,
    ``giant`` (1 int32) that giant's root, ``list`` up to ``cap`` (vertex, root) pairs of the
    other vertices it moved, ``info`` (1 uint64) their count (past ``cap``: the list is not
    used and ``parent``, the sender's compressed array, is read whole)."""
    bits: object
    list: object
    info: object
    giant: object
    parent: object
    cap: int


def changes_numpy(parent, c: Changes):
    """CPU :meth:`DeviceCC.describe_changes` (``parent`` is compressed already): ``c.bits`` one
    bit per vertex of the giant's tree (little-endian in each 32-bit word, as the kernel),
    the other moved vertices in ``c.list`` while they fit."""
    n = parent.shape[0]
    in_giant = parent == c.giant[0]
    packed = np.packbits(in_giant, bitorder="little")
    view = c.bits.view(np.uint8)
    view[:] = 0
    view[:packed.shape[0]] = packed
    moved = np.flatnonzero(~in_giant & (parent != np.arange(n, dtype=np.int32)))
    c.info[0] = moved.shape[0]
    if moved.shape[0] <= c.cap:
        c.list[:moved.shape[0], 0] = moved
        c.list[:moved.shape[0], 1] = parent[moved]


def merge_changes_numpy(parent, senders, moved):
    """CPU :meth:`DeviceCC.merge_changes`: the same hooks as ``cc_merge_changes``."""
    n = parent.shape[0]
    moved[:] = 0
    for c in senders:
        listed = int(c.info[0])
        if listed > c.cap:
            merge_numpy(parent, c.parent)
            moved[0] += 4 * n
            moved[1] += 1
            continue
        v = np.flatnonzero(np.unpackbits(c.bits.view(np.uint8), count=n,
                                         bitorder="little")).astype(np.int32)
        hook_numpy(parent, v, np.full(v.shape[0], c.giant[0], np.int32))
        hook_numpy(parent, c.list[:listed, 0], c.list[:listed, 1])
        moved[0] += 4 * c.bits.shape[0] + 8 * listed


#: arcs of the rows one step of :func:`rest_numpy` reads
REST_STEP_ARCS = 1 << 16


def rest_numpy(parent, rows, rounds, giant, count):
    """CPU rest: hook the arcs from slot ``rounds`` on of every device's rows (``rows``: one
    ``(first vertex, indptr, indices)`` per device) whose source is not in the giant's tree,
    read from the rows in steps of about :data:`REST_STEP_ARCS` arcs (as the CUDA kernel reads
    them in place: no list of the late arcs is kept). Which arcs to keep (each undirected
    edge once) is decided on one snapshot of ``parent`` for all devices' arcs, before any
    hooking: deciding device by device could drop an edge whose twin an earlier device left
    to it and whose end then joined the giant."""
    g = giant[0]
    count[:] = 0
    keep = []
    for d, (lo, indptr, indices) in enumerate(rows):
        for r, e in row_chunks(indptr, 0, int(indptr.shape[0]) - 1, REST_STEP_ARCS):
            a, b = int(indptr[r]), int(indptr[e])
            src, dst = late_arcs(indptr[r:e + 1] - a, indices[a:b], rounds)
            src += np.int32(lo + r)
            out = parent[src] != g
            arcs = int(np.count_nonzero(out))
            found = int(np.unique(src[out]).size) if arcs else 0
            count[0] += found
            count[1] += arcs
            if d:
                count[2] += found
                count[3] += arcs
            keep.append(remaining_edges(np, parent, src, dst, giant))
    edges = np.concatenate(keep) if keep else np.zeros((0, 2), np.int32)
    hook_numpy(parent, edges[:, 0], edges[:, 1])
