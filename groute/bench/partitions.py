"""METIS splits computed in worker processes while the suite times other cases.

METIS runs on one core and takes most of a minute on the benchmark graphs, longer than a whole
device count's cases. The suite starts one worker (:mod:`.processes`) per device count above one as
soon as a graph is loaded; each fills the graph layer's partition cache
(:func:`groute.graph.partition.warm_metis_cache`), and the cases' solvers read the split from
there. Before the first case on ``k`` devices the suite waits for worker ``k``, so the split is
never computed twice at once. The workers share the CPU with the peers timed meanwhile (scipy:
one core each), so the suite starts them only with cores to spare (runner).
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import time

from .processes import spawn_pool, stop_pool

log = logging.getLogger(__name__)

#: graphs with fewer arcs are split in the case itself (METIS is quick there; a worker costs
#: a second to start)
PARTITION_PREFETCH_MIN_ARCS = 1_000_000
#: the longest the suite waits for one split; after that the case splits the graph itself
PARTITION_TIMEOUT_S = 1800.0


class PartitionPrefetch:
    """The METIS workers of one graph: ``k in prefetch`` while split ``k`` is yet to be waited
    for. :meth:`close` when the graph is done, also after an exception (it terminates any
    worker still running). ``waited``: seconds spent in :meth:`wait` per k, for the results."""

    def __init__(self, pool=None, futures: dict | None = None):
        self.pool = pool
        self.futures = dict(futures or {})     # every split submitted, waited for or not
        self.pending = set(self.futures)       # those not waited for yet
        self.waited: dict[int, float] = {}
        self.started = time.perf_counter()

    @classmethod
    def start(cls, graph, ks) -> "PartitionPrefetch":
        from groute.graph.partition import warm_metis_cache
        graph.structure_hash()      # the cache key: hashed here once, pickled with the graph
        pool = spawn_pool(len(ks))
        try:
            return cls(pool, {k: pool.submit(warm_metis_cache, graph, k) for k in ks})
        except BaseException:
            stop_pool(pool, running=True)
            raise

    def __contains__(self, k) -> bool:
        return k in self.pending

    def wait(self, k: int, progress=None) -> bool:
        """Wait for split ``k``; True when the partition cache now holds it. On False (the
        worker failed, timed out, was stopped or could not write the cache; logged) the cases
        compute the split themselves, as without a worker."""
        self.pending.discard(k)
        fut = self.futures[k]
        if self.pool is None and not fut.done():
            log.warning("the METIS split into %d parts was stopped with its workers; the cases "
                        "split the graph themselves", k)
            return False
        if not fut.done() and progress is not None:
            progress.note(f"waiting for the METIS split into {k} parts (started "
                          f"{time.perf_counter() - self.started:.0f} s ago) ...")
        t0 = time.perf_counter()
        try:
            cached = bool(fut.result(timeout=PARTITION_TIMEOUT_S))
        except cf.TimeoutError:
            log.warning("the METIS split into %d parts took over %.0f s in its worker; every "
                        "worker of this graph is stopped and the cases split the graph "
                        "themselves", k, PARTITION_TIMEOUT_S)
            self.close()
            return False
        except Exception as exc:  # noqa: BLE001 - the cases meet (and report) it themselves
            log.warning("the METIS split into %d parts failed in its worker (%s: %s)", k,
                        type(exc).__name__, exc)
            return False
        finally:
            self.waited[k] = time.perf_counter() - t0
        if not cached:
            log.info("the METIS split into %d parts could not be cached; the cases compute it", k)
        return cached

    def close(self) -> None:
        """Shut the workers down: at once, terminating them, if any split is not done (an
        error or an interrupt ended the graph early)."""
        if self.pool is None:
            return
        stop_pool(self.pool, running=any(not f.done() for f in self.futures.values()))
        self.pool = None
