"""Memory accounting of a benchmark run: each case's peak memory and the host peak of loading.

What is measured, and why this way:

* **GPU cases** (:class:`PoolPeak`): the bytes CuPy's default memory pool holds from the driver,
  on every device of the case, above what the pool held in live arrays before the case began.
  Every array groute's solvers make comes from that pool (uploads, per-app arrays, the sorts'
  temporaries), so this is the solver's own memory and nothing of another process (which
  ``cudaMemGetInfo`` would count too). The pool's cached blocks are given back first, so the
  pool then holds exactly the live arrays, and from then on it only grows until somebody frees
  its blocks again (a solver's set-up may, after a big sort): its held bytes are sampled by a
  background thread every :data:`SAMPLE_INTERVAL_S` during set-up and the first run, and once
  after every later run, where nothing gives blocks back and a sample after the run sees the
  run's high water. The thread is stopped before anything is timed. What it misses: memory
  taken outside the pool (CUDA's own context, kernel images, pinned host buffers) and a spike
  allocated and handed back to the driver between two samples.
* **CPU cases** (:class:`TracedPeak`): the CPU backend's arrays are host memory, so the same
  number there is the peak of NumPy's allocations, which NumPy reports to :mod:`tracemalloc`,
  across set-up and the first run. Tracing slows every allocation, so it is stopped before the
  warm-up and the timed runs; the later runs allocate what the first did.
* **Loading a graph** (:func:`host_peak_while`): the peak resident set size (``VmHWM``) of the
  process while loading, above the resident size before, after resetting the peak through
  ``/proc/self/clear_refs``. This counts every allocator (NumPy, scipy, the readers' C code),
  which tracemalloc would not; where the kernel offers no reset, tracemalloc's peak instead.

Each figure is stored with its method, and set against the CSR's own bytes
(:func:`groute.graph.budget.csr_bytes`) as bytes per arc and a multiple of the CSR.
"""
from __future__ import annotations

import gc

import logging
import threading

from groute import host_peak
from groute.graph.budget import csr_bytes, proc_status_kib

log = logging.getLogger(__name__)

#: seconds between two samples of the pool while a case sets up and runs its first run
SAMPLE_INTERVAL_S = 0.001


class PoolPeak:
    """Peak bytes CuPy's default memory pool holds on each GPU of a case (module docstring).

    ``gpus``: the CUDA ordinals of the case's devices. ``pool_of(gpu)`` is a context manager
    that makes ``gpu`` current on the calling thread and gives its pool, an object with
    ``used_bytes()``, ``total_bytes()`` and ``free_all_blocks()`` (CuPy's pool answers for the
    current device; tests pass a fake)."""

    where = "gpu"
    method = "CuPy memory pool, held bytes sampled"

    def __init__(self, gpus, pool_of=None):
        self.gpus = sorted(set(int(g) for g in gpus))
        self.pool_of = pool_of or _cupy_pool_of
        self.base = {}
        self.high = {}
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        # the case before may have left its solver in reference cycles: collected during this
        # case's set-up, its blocks would hold this case's arrays without the pool growing
        gc.collect()
        for g in self.gpus:
            with self.pool_of(g) as pool:
                pool.free_all_blocks()
                self.base[g] = int(pool.used_bytes())
                self.high[g] = int(pool.total_bytes())
        self._thread = threading.Thread(target=self._poll, name="groute-bench-memory", daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self.sample()

    def sample(self):
        for g in self.gpus:
            with self.pool_of(g) as pool:
                held = int(pool.total_bytes())
            if held > self.high[g]:
                self.high[g] = held

    def first_run_done(self):
        """Stop the sampling thread (the timed runs follow) after one last sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sample()

    def after_run(self):
        self.sample()

    def finish(self) -> dict:
        self.first_run_done()
        per = [max(self.high[g] - self.base[g], 0) for g in self.gpus]
        return {"where": self.where, "method": self.method, "peak_bytes": max(per),
                "total_bytes": sum(per), "per_device_bytes": per}


class ExactPoolPeaks:
    """The exact peaks, over a ``with`` block on the current GPU, of the bytes CuPy's default
    pool holds (``held``) and of those its live arrays use (``live``), above their values at
    the block's start, after the pool's cached blocks were given back: every allocation passes
    through a counting allocator, and the held bytes only grow at an allocation. For a probe or
    a test of one step of a set-up (held past live is cached blocks the pool could not reuse);
    ``groute bench`` samples (:class:`PoolPeak`), which adds no work to an allocation."""

    def __enter__(self):
        import cupy
        self._cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.pool.free_all_blocks()
        self._held0, self._live0 = self.pool.total_bytes(), self.pool.used_bytes()
        self.held = self.live = 0
        self._outer = cupy.cuda.get_allocator()
        cupy.cuda.set_allocator(self._malloc)
        return self

    def _malloc(self, size):
        mem = self.pool.malloc(size)
        self.held = max(self.held, self.pool.total_bytes() - self._held0)
        self.live = max(self.live, self.pool.used_bytes() - self._live0)
        return mem

    def __exit__(self, *exc):
        self._cupy.cuda.set_allocator(self._outer)

    def held_now(self) -> int:
        """What the pool holds now above the block's start."""
        return int(self.pool.total_bytes()) - self._held0


class TracedPeak(host_peak.TracedPeak):
    """Peak bytes of host allocations traced by :mod:`tracemalloc` (NumPy's arrays included)
    over set-up and the first run: the CPU backend's counterpart of :class:`PoolPeak`."""

    where = "host"
    method = "tracemalloc peak over set-up and the first run"

    @property
    def peak(self):
        return self.bytes

    def first_run_done(self):
        self.stop()

    def after_run(self):
        pass

    def finish(self) -> dict:
        peak = self.stop()
        return {"where": self.where, "method": self.method, "peak_bytes": int(peak),
                "total_bytes": int(peak), "per_device_bytes": None}


def case_probe(backend: str, devices):
    """The probe for a case on ``devices`` (a Context's): :class:`PoolPeak` on CUDA, else
    :class:`TracedPeak`."""
    if backend == "cuda":
        return PoolPeak([getattr(d, "gpu", getattr(d, "index", 0)) for d in devices])
    return TracedPeak()


def add_ratios(memory: dict, num_vertices: int, num_arcs: int, weighted: bool) -> dict:
    """``memory`` with the CSR's bytes, bytes per arc and the multiple of the CSR added (the
    largest device's peak: what must fit one device)."""
    csr = csr_bytes(num_vertices, num_arcs, weighted=weighted)
    peak = memory.get("peak_bytes")
    memory["csr_bytes"] = csr
    memory["bytes_per_arc"] = peak / num_arcs if peak is not None and num_arcs else None
    memory["over_csr"] = peak / csr if peak is not None and csr else None
    return memory


# ------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------
def _reset_rss_peak() -> bool:
    """Reset the process's peak resident size (``VmHWM``) to its current one; False where the
    kernel does not offer it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return proc_status_kib("VmHWM") is not None
    except OSError:
        return False


def host_peak_while(fn):
    """``(fn(), memory)``: ``memory`` is the process's peak host memory while ``fn`` ran, above
    what it held before, as ``{"peak_bytes", "method"}`` (module docstring: resident-set peak,
    else tracemalloc)."""
    # earlier garbage first: freed while fn runs, it would lower the resident size under the
    # peak fn reached and hide it
    gc.collect()
    if _reset_rss_peak():
        before = proc_status_kib("VmRSS")
        out = fn()
        peak = proc_status_kib("VmHWM")
        if before is not None and peak is not None:
            return out, {"peak_bytes": max(peak - before, 0) * 1024,
                         "method": "resident set peak (VmHWM) above the resident size before"}
        return out, {"peak_bytes": None, "method": "VmHWM unreadable"}
    probe = TracedPeak().start()
    try:
        out = fn()
    finally:
        probe.first_run_done()
    return out, {"peak_bytes": int(probe.peak), "method": "tracemalloc peak (NumPy and Python "
                                                          "allocations only)"}


class _PoolOnDevice:
    def __init__(self, gpu):
        import cupy
        self._device = cupy.cuda.Device(gpu)
        self._pool = cupy.get_default_memory_pool()

    def __enter__(self):
        self._device.__enter__()
        return self._pool

    def __exit__(self, *exc):
        return self._device.__exit__(*exc)


def _cupy_pool_of(gpu):
    return _PoolOnDevice(gpu)
