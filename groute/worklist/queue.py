"""A device-resident work queue: a buffer, a count, and growth instead of loss.

Host-driven appends (``push``) reserve ``n`` slots at the tail the way a kernel reserves with one
atomic add, and grow the buffer (doubling, logged) when it would overflow; nothing is ever
dropped. The CUDA kernels keep their own queues in device memory with warp-aggregated atomic
reservation and report overflow instead of writing past the end (see ``groute/operators/appends.cuh``);
this class serves the CPU backend's queues and the host-managed forwarding buffers on both.
"""
from __future__ import annotations

import logging

from .items import ITEM_DTYPE

log = logging.getLogger(__name__)


class WorkQueue:
    """Items on ``device`` (NumPy or CuPy array); ``push`` appends, ``take`` empties."""

    def __init__(self, device, capacity: int = 1024, dtype=ITEM_DTYPE, name: str = "queue"):
        self.device = device
        self.name = name
        self.dtype = dtype
        self.items = device.empty(max(int(capacity), 1), dtype)
        self.count = 0
        self.grown = 0

    @property
    def capacity(self) -> int:
        return int(self.items.shape[0])

    def __len__(self):
        return self.count

    def push(self, items) -> None:
        """Append ``items`` (an array on this device), growing the buffer if it would overflow."""
        n = int(items.shape[0])
        if n == 0:
            return
        need = self.count + n
        if need > self.capacity:
            new_cap = max(need, 2 * self.capacity)
            log.debug("%s: growing %d -> %d items", self.name, self.capacity, new_cap)
            grown = self.device.empty(new_cap, self.dtype)
            grown[:self.count] = self.items[:self.count]
            self.items = grown
            self.grown += 1
        self.items[self.count:need] = items
        self.count = need

    def view(self):
        """The queued items (valid until the next push or clear)."""
        return self.items[:self.count]

    def take(self):
        """A copy of the queued items; the queue is empty afterwards."""
        out = self.items[:self.count].copy()
        self.count = 0
        return out

    def clear(self) -> None:
        self.count = 0
