"""A run's seeds on a CUDA device, put there without the host waiting.

Every relaxation run starts from its seeds (one source, or several), and on a small graph the
whole run is short, so what the host does between the start of the timed region and the
kernel's launch would be a visible part of the run's time. Uploading a fresh NumPy array
(``cupy.asarray``) allocates from the pool and copies from pageable memory, which makes the host
wait for the stream and then for the staging copy. :class:`SeedBuffer` keeps a pinned host
buffer and a device buffer per device, grown when a run has more seeds, and queues the copy on
the current stream (pinned memory: a real asynchronous copy); the kernels put the seeds at
value 0, and on the queue of round 0, themselves (``place_seeds`` in ``fused.cu``).

Reusing the pinned buffer is safe because every run reads its counters back before it returns,
so the copy of one run has finished before the next writes the buffer.
"""
from __future__ import annotations

import numpy as np

#: the least seeds a buffer holds (room for a source and a few more without regrowing)
MIN_CAPACITY = 64


def owned_seeds(seeds, lo: int, hi: int) -> np.ndarray:
    """The seeds (renumbered ids) of the device that owns ids ``[lo, hi)``, as its local ids
    (int32): what every engine's start puts at value 0 on that device."""
    seeds = np.atleast_1d(np.asarray(seeds, dtype=np.int64))
    return (seeds[(seeds >= lo) & (seeds < hi)] - lo).astype(np.int32)


class SeedBuffer:
    """One device's seeds for the next launch: ``upload`` queues their copy and returns the
    device array (int32 local ids), or None for a device that owns no seed."""

    def __init__(self):
        self.capacity = 0
        self._pinned = None
        self.host = None
        self.device = None

    def upload(self, seeds):
        """Queue the copy of ``seeds`` (local ids) on the current CUDA stream of the current
        device; the device array of them, or None when there are none."""
        import cupy
        seeds = np.asarray(seeds)
        n = int(seeds.size)
        if n == 0:
            return None
        if n > self.capacity:
            capacity = max(n, 2 * self.capacity, MIN_CAPACITY)
            self._pinned = cupy.cuda.alloc_pinned_memory(capacity * 4)
            self.host = np.frombuffer(self._pinned, dtype=np.int32, count=capacity)
            self.device = cupy.empty(capacity, dtype=np.int32)
            self.capacity = capacity
        self.host[:n] = seeds
        out = self.device[:n]
        out.set(self.host[:n], stream=cupy.cuda.get_current_stream())
        return out

