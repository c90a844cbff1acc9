"""The frontier: the vertices active on each device, sparse or dense.

:class:`DeviceFrontier` is one device's share, in one of two forms:

- sparse (``"queue"``): an int32 array of local positions (the ``v``-th vertex the device
  owns), each once, in any order;
- dense (``"bitmap"``): one bit per owned vertex in uint32 words (bit ``v & 31`` of word
  ``v >> 5``), as ``frontier.cuh`` reads it;

with its ``count``, and :meth:`~DeviceFrontier.to_bitmap` / :meth:`~DeviceFrontier.to_queue`
between them (CuPy kernels on CUDA devices, NumPy on CPU devices). A frontier of *every*
owned vertex (``everything=True``) holds no array at all: the operators loop over ``0..n-1``.

:class:`Frontier` is what an algorithm holds: one DeviceFrontier per device of an engine, its
total ``len()``, and the direction of the advance that made it (Beamer's rule looks at the
last direction, :mod:`groute.operators.direction`).
"""
from __future__ import annotations

import numpy as np

from . import generated

QUEUE, BITMAP = "queue", "bitmap"


def words_for(n: int) -> int:
    """uint32 words of a bitmap over ``n`` vertices."""
    return (int(n) + 31) // 32


class DeviceFrontier:
    """One device's frontier (module docstring). ``size``: the vertices the device owns."""

    def __init__(self, device, size: int, *, queue=None, bitmap=None, count: int | None = None,
                 everything: bool = False):
        self.device = device
        self.size = int(size)
        self.everything = everything
        self._queue = queue
        self._bitmap = bitmap
        if everything:
            count = self.size
        elif count is None:
            if queue is None:
                raise ValueError("a bitmap frontier needs its count")
            count = int(queue.shape[0])
        self.count = int(count)

    @classmethod
    def empty(cls, device, size):
        return cls(device, size, queue=device.zeros(0, np.int32), count=0)

    @property
    def form(self) -> str:
        return QUEUE if self._queue is not None or self.everything else BITMAP

    @property
    def queue(self):
        """The local positions (int32 array of ``count``), converted from the bitmap if needed."""
        if self._queue is None:
            self._queue = self.to_queue()._queue
        return self._queue

    @property
    def bitmap(self):
        """The uint32 words, converted from the queue if needed."""
        if self._bitmap is None:
            self._bitmap = self.to_bitmap()._bitmap
        return self._bitmap

    def to_bitmap(self) -> "DeviceFrontier":
        """The same vertices as a bitmap."""
        if self._bitmap is not None:
            return DeviceFrontier(self.device, self.size, bitmap=self._bitmap, count=self.count)
        words = queue_to_bitmap(self.device, self.queue, self.size)
        return DeviceFrontier(self.device, self.size, bitmap=words, count=self.count)

    def to_queue(self) -> "DeviceFrontier":
        """The same vertices as a queue."""
        if self._queue is not None:
            return DeviceFrontier(self.device, self.size, queue=self._queue, count=self.count)
        if self.everything:
            return DeviceFrontier(self.device, self.size, queue=_arange(self.device, self.size))
        queue = bitmap_to_queue(self.device, self._bitmap, self.size)
        return DeviceFrontier(self.device, self.size, queue=queue)

    def positions(self) -> np.ndarray:
        """The local positions as a sorted NumPy array (a copy on the host)."""
        return np.sort(np.asarray(self.device.to_host(self.queue), dtype=np.int64))

    def __len__(self):
        return self.count

    def __repr__(self):
        form = "everything" if self.everything else self.form
        return f"<DeviceFrontier {self.device.name}: {self.count:,} of {self.size:,} ({form})>"


class Frontier:
    """The frontier across an engine's devices (module docstring)."""

    def __init__(self, engine, parts, direction: str = "push"):
        self.engine = engine
        self.parts = list(parts)
        self.direction = direction

    def __len__(self):
        return sum(p.count for p in self.parts)

    def __bool__(self):
        return any(p.count for p in self.parts)

    def to_bitmap(self) -> "Frontier":
        return Frontier(self.engine, [p.to_bitmap() for p in self.parts], self.direction)

    def to_queue(self) -> "Frontier":
        return Frontier(self.engine, [p.to_queue() for p in self.parts], self.direction)

    def vertices(self) -> np.ndarray:
        """The frontier's vertices as positions of the engine's input graph (sorted, host)."""
        return self.engine.positions_of(self)

    def __repr__(self):
        return f"<Frontier {len(self):,} vertices on {len(self.parts)} devices ({self.direction})>"


def queue_to_bitmap(device, queue, n: int):
    """uint32 words over ``n`` vertices with the bits of ``queue`` (positions < n) set."""
    if device.backend == "cpu":
        bits = np.zeros(words_for(n) * 32, dtype=bool)
        bits[queue] = True
        return np.packbits(bits, bitorder="little").view(np.uint32)
    words = device.zeros(words_for(n), np.uint32)
    if queue.shape[0]:
        launch(device, generated.frontier_kernels()["queue_to_bitmap_k"], queue.shape[0],
               (queue, np.int64(queue.shape[0]), words))
    return words


def bitmap_to_queue(device, words, n: int):
    """The positions (< n) whose bits are set in ``words``, as an int32 queue."""
    if device.backend == "cpu":
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:n]
        return np.flatnonzero(bits).astype(np.int32)
    with device.on_compute():
        queue = device.xp.empty(n, np.int32)
        count = device.xp.zeros(1, np.int32)
    launch(device, generated.frontier_kernels()["bitmap_to_queue_k"], n,
           (words, np.int64(n), queue, count))
    return queue[:read_count(device, count)]


def launch(device, kernel, threads: int, args, block: int = 256):
    """Launch ``kernel`` on ``device``'s compute stream with enough blocks of ``block`` threads
    for ``threads`` threads (the kernels loop, so the grid is capped at what the device holds
    at once)."""
    sms = device.multiprocessors
    blocks = max(1, min(-(-int(threads) // block), sms * (2048 // block)))
    with device.on_compute():
        kernel((blocks,), (block,), args)


def read_count(device, count) -> int:
    """A device counter's value (waits for the compute stream)."""
    with device.on_compute():
        return int(count.get()[0])


def _arange(device, n):
    if device.backend == "cpu":
        return np.arange(n, dtype=np.int32)
    with device.on_compute():
        return device.xp.arange(n, dtype=np.int32)

