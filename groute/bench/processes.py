"""Worker processes for the suite's CPU work done side by side (references, METIS splits).

They are spawned, not forked: the suite's process runs device threads, and a fork copies their
locks. A worker still running when its owner gives up on it (a timeout, an interrupt) is
terminated, so the suite's process can exit without waiting for it.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing


def spawn_pool(workers: int) -> cf.ProcessPoolExecutor:
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context("spawn"))


def stop_pool(pool: cf.ProcessPoolExecutor, *, running: bool) -> None:
    """Shut ``pool`` down; ``running``: some of its jobs may not be done, so terminate its
    processes rather than wait for them."""
    if running:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
    pool.shutdown(wait=not running, cancel_futures=True)
