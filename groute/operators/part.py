"""One device's share of a graph algorithm: its vertices' arcs and its per-vertex state.

The engines build one :class:`DevicePart` per device from a partitioned graph
(:func:`groute.graph.partition_graph`: device ``i`` owns the global ids ``[first, end)``);
the per-device operators (:mod:`groute.operators.cpu_ops`, :mod:`groute.operators.cuda_ops`)
read it. ``state`` maps a name to an array over the owned vertices, indexed by local position
(``global id - first``): what functors get by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class DevicePart:
    device: object
    index: int
    indptr: object            # int64, size + 1, on the device
    indices: object           # int32 global ids, on the device
    first: int
    end: int
    num_global: int
    offsets: np.ndarray       # int64, devices + 1: every device's first global id (host)
    state: dict = field(default_factory=dict)
    scratch: dict = field(default_factory=dict)   # buffers a backend keeps between calls

    @property
    def size(self) -> int:
        return self.end - self.first

    @property
    def num_arcs(self) -> int:
        return int(self.indices.shape[0])

    def owner_of(self, ids, xp):
        """The device owning each global id."""
        offsets = self.scratch.get("offsets")
        if offsets is None:
            offsets = self.scratch["offsets"] = xp.asarray(self.offsets)
        return xp.searchsorted(offsets, ids, side="right") - 1

    def with_arcs(self, indptr, indices) -> "DevicePart":
        """The same vertices, state and scratch buffers over other rows (their in-arcs)."""
        return replace(self, indptr=indptr, indices=indices)

    def split_by_owner(self, ids, xp, msgs=None) -> list:
        """``[(device, what it gets)]`` for the devices other than this one that own some of
        ``ids`` (global ids): the ids it owns, or with ``msgs`` (one message per id) rows of
        an id and its message's int32 words (:meth:`unpack_rows` reads them)."""
        if ids.shape[0] == 0:
            return []
        owner = self.owner_of(ids, xp)
        order = xp.argsort(owner, kind="stable")
        ids, owner = ids[order], owner[order]
        if msgs is not None:
            ids = self.pack_rows(ids, msgs[order], xp)
        counts = np.asarray(xp.bincount(owner, minlength=self.offsets.shape[0] - 1).tolist())
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return [(j, ids[bounds[j]:bounds[j + 1]]) for j in range(counts.shape[0])
                if counts[j] and j != self.index]

    @staticmethod
    def pack_rows(ids, msgs, xp):
        """Rows of an id and its message's int32 words (what :meth:`unpack_rows` reads)."""
        words = msgs.dtype.itemsize // 4
        rows = xp.empty((ids.shape[0], 1 + words), np.int32)
        rows[:, 0] = ids
        rows[:, 1:] = xp.ascontiguousarray(msgs).view(np.int32).reshape(-1, words)
        return rows

    @staticmethod
    def unpack_rows(data, message, xp):
        """The ids and messages of a received packet (``message``: the functor's, or None for
        a packet of ids alone)."""
        if message is None:
            return data, None
        # a copy, not ascontiguousarray: a one-row packet's slice counts as contiguous and
        # would be viewed as 8-byte messages 4 bytes past an aligned address
        msgs = data[:, 1:].copy().view(message.dtype).reshape(-1)
        return data[:, 0], msgs
