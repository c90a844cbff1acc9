"""Peak host memory of a piece of work: what :mod:`tracemalloc` traced, and the process's own.

Two figures, for two uses:

- :class:`TracedPeak`: the peak of the allocations :mod:`tracemalloc` traces (NumPy reports
  its arrays' data there, and Python's objects are traced) between :meth:`~TracedPeak.start`
  and :meth:`~TracedPeak.stop`, above what was traced at the start. It is the work's own
  arrays, whatever else the process holds, so a test can bound it; it misses memory that C
  code allocates past NumPy (an MPI library's buffers, a reader's C heap).
- :func:`max_rss_bytes`: the process's peak resident set size so far
  (``getrusage(RUSAGE_SELF).ru_maxrss``): everything, interpreter and libraries included,
  over the process's whole life.
"""
from __future__ import annotations

import sys
import tracemalloc

try:
    import resource
except ImportError:                      # not on Windows
    resource = None


class TracedPeak:
    """Peak bytes traced by :mod:`tracemalloc` while a piece of work runs (module docstring).

    Starts tracing if it is off (and stops it again at :meth:`stop`); if it is on already, the
    peak is measured from :meth:`start` on (tracemalloc's peak is reset there) above what was
    traced then.

    Examples
    --------
    >>> import numpy as np
    >>> with TracedPeak() as peak:
    ...     _ = np.ones(1 << 20)
    >>> peak.bytes >= 8 << 20
    True
    """

    def __init__(self):
        #: the peak, once :meth:`stop` ran (None before)
        self.bytes = None
        self._was_tracing = False
        self._base = 0

    def start(self) -> "TracedPeak":
        self._was_tracing = tracemalloc.is_tracing()
        if self._was_tracing:
            self._base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        else:
            tracemalloc.start()
        return self

    def stop(self) -> int:
        """The peak bytes since :meth:`start` (measured once: later calls give the same)."""
        if self.bytes is None:
            self.bytes = max(tracemalloc.get_traced_memory()[1] - self._base, 0)
            if not self._was_tracing:
                tracemalloc.stop()
        return self.bytes

    def __enter__(self) -> "TracedPeak":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def max_rss_bytes() -> int | None:
    """This process's peak resident set size so far, in bytes (``ru_maxrss``: KiB on Linux,
    bytes on macOS); None where :mod:`resource` is missing."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024
