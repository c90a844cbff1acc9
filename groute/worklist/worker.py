"""What an app implements to run on the distributed worklist: one worker per device.

A worker owns its device's share of the problem (the vertices in its partition range and their
state) and its local queues. The worklist calls, always on the device's host thread:

``start(threshold) -> LocalWork``
    reset state for a new run and seed the initial work (e.g. the source, on its owner).
``advance(threshold, *, max_rounds, self_advance) -> (LocalWork, outbox)``
    the fused worker: process near items (priority below ``threshold``) round after round, in
    as few launches as possible, until the near queue is empty, ``max_rounds`` rounds ran, or
    the outboxes are full enough to flush. Items produced for vertices owned by device ``j``
    are returned in ``outbox[j]`` (an item array on this device, or ``None``); items for local
    vertices stay in the local queues (split-send). With ``self_advance`` (a single device)
    the worker may move its own threshold forward by its ``delta`` when only deferred work is
    left, reporting the new one in ``LocalWork.threshold``. The outbox arrays must stay valid
    until the next ``advance`` (the worklist waits for their sends first).
``absorb(item_arrays, threshold) -> LocalWork``
    apply items that arrived from other devices (e.g. atomic-min into the state, enqueue the
    vertices that improved: near or deferred by ``threshold``).
``split(threshold) -> LocalWork``
    the global threshold advanced: move deferred items below it to the near queue.
``work``
    the latest ``LocalWork`` (what the worker holds now).

Steps an app needs between BSP levels (BFS's pull levels) belong to the app's level hook
(:mod:`groute.worklist.levels`), not to this protocol.

Items are packed int64 (see :mod:`groute.worklist.items`). Every method must leave the device
consistent when it returns: counts in ``LocalWork`` are exact, since termination depends on them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class LocalWork:
    """Work a device holds: ``near`` ready items, ``far`` deferred ones (lowest priority at
    least ``far_min``), and a ``threshold`` the worker moved to by itself (or None)."""

    near: int = 0
    far: int = 0
    far_min: float = math.inf
    threshold: object = None


def call_on_stream(stream, fn, *args):
    """Run ``fn(*args)`` in ``stream``'s order and return its result.

    On CUDA the function runs at once on this thread (it only enqueues GPU work); on a CPU
    virtual device it runs on the stream's thread, after the work queued before it, and this
    waits for it. Either way later work on the stream sees its effects.
    """
    out = []
    stream.submit(lambda: out.append(fn(*args)))
    if not out:
        stream.record().synchronize()
    return out[0]


class StreamWorker:
    """Base for workers whose steps run in their device's compute-stream order.

    A subclass implements ``_start``, ``_advance``, ``_absorb`` and ``_split`` (the protocol
    above, minus the keyword handling) and sets ``self.device``; this class runs each on the
    compute stream with :func:`call_on_stream`, so the same worker logic is stream-ordered on
    CUDA devices and on CPU virtual devices alike.
    """

    def start(self, threshold):
        return call_on_stream(self.device.compute_stream, self._start, threshold)

    def advance(self, threshold, *, max_rounds=None, self_advance=False):
        return call_on_stream(self.device.compute_stream, self._advance, threshold, max_rounds,
                              self_advance)

    def absorb(self, arrays, threshold):
        return call_on_stream(self.device.compute_stream, self._absorb, arrays, threshold)

    def split(self, threshold):
        return call_on_stream(self.device.compute_stream, self._split, threshold)
