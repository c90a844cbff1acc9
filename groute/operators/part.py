"""One device's share of a graph algorithm: its vertices' arcs and its per-vertex state.

The engines build one :class:`DevicePart` per device from a partitioned graph
(:func:`groute.graph.partition_graph`: device ``i`` owns the global ids ``[first, end)``);
the per-device operators (:mod:`groute.operators.cpu_ops`, :mod:`groute.operators.cuda_ops`)
read it. ``state`` maps a name to an array over the owned vertices, indexed by local position
(``global id - first``): what functors get by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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

    def split_by_owner(self, ids, xp) -> list:
        """``[(device, ids it owns)]`` for the devices other than this one that own some of
        ``ids`` (global ids)."""
        if ids.shape[0] == 0:
            return []
        owner = self.owner_of(ids, xp)
        order = xp.argsort(owner, kind="stable")
        ids, owner = ids[order], owner[order]
        counts = np.asarray(xp.bincount(owner, minlength=self.offsets.shape[0] - 1).tolist())
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return [(j, ids[bounds[j]:bounds[j + 1]]) for j in range(counts.shape[0])
                if counts[j] and j != self.index]
