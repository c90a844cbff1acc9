"""Distributed worklists: asynchronous data-driven work across the devices of a Context.

How an app plugs in (BFS and SSSP in ``groute/engines/relax/solver.py`` are the worked example):

1. Partition the problem so each device owns a contiguous range of vertices
   (``groute.graph.partition_graph``); remote work is an item sent to the owner.
2. Write a worker class per backend implementing :mod:`groute.worklist.worker`'s protocol
   (``start``/``advance``/``absorb``/``split`` and ``work``); work items are packed int64
   ``(value << 32) | vertex`` (:mod:`groute.worklist.items`). ``advance`` is the hot loop: on
   CUDA one fused persistent kernel that runs many rounds per launch; on CPU vectorised NumPy
   run in the device's compute stream (:func:`call_on_stream`).
3. Build one :class:`DistributedWorklist` per solver (it exchanges through a Router with the
   policy ``routing`` names: ``by_owner`` for all-to-all or ``ring``) and call ``run(workers, mode="async"|"bsp", threshold=..., delta=...)``; it returns the
   counters (rounds, items sent per link, forwarded items, bytes moved, threshold advances).
   The workers keep their own counters (items processed, deferrals) for the app to report.
   Steps of the app's own between BSP levels go in a level hook (:mod:`.levels`; BFS's pull
   levels in ``groute/engines/relax/pull.py`` are the example).

The run ends exactly when no device holds work and no item is in transit (counted, see
:mod:`groute.worklist.counter`); every wait is bounded by the context's timeout, and a failure on
one device stops the others and raises in the caller.
"""
from .counter import WorkCounter
from .distributed import MODES, ROUTINGS, DistributedWorklist
from .items import ITEM_DTYPE, FLOAT_INF, INT_INF, infinity, pack, unpack, value_dtype
from .levels import LevelHook
from .priority import next_threshold
from .queue import WorkQueue
from .worker import LocalWork, StreamWorker, call_on_stream

__all__ = ["DistributedWorklist", "WorkCounter", "WorkQueue", "LocalWork", "StreamWorker", "call_on_stream",
           "ITEM_DTYPE", "INT_INF", "FLOAT_INF", "infinity", "pack", "unpack", "value_dtype",
           "MODES", "ROUTINGS", "next_threshold", "LevelHook"]
