"""Declared sizes checked against what the process can hold, before anything is allocated.

A header may declare any vertex count (a 60-byte Matrix Market file can announce a billion
vertices); the CSR arrays for ``n`` vertices are ``n``-sized whatever the file holds. Readers call
:func:`check_vertices` with the declared count first, so an impossible declaration is a
:class:`GraphFormatError` naming the file and line, not a ``MemoryError`` (or the process being
killed) somewhere inside NumPy.
"""
from __future__ import annotations

try:
    import resource
except ImportError:                      # not on Windows
    resource = None

import numpy as np

from .arrays import index_dtype
from .errors import GraphFormatError

#: the largest vertex count the CSR type supports (targets are at most uint32-sized)
MAX_VERTICES = 2**32 - 1
#: peak bytes per vertex of building a CSR graph (indptr, the searchsorted result and its
#: int64 copy, and the id arrays of the readers), rounded up
BYTES_PER_VERTEX = 40


def csr_bytes(num_vertices: int, num_arcs: int, *, weighted: bool = False) -> int:
    """Bytes of a CSR graph's own arrays as groute stores it: int64 ``indptr`` (arc offsets
    pass 2**31 on big graphs), 4-byte ``indices`` (vertex ids, int32 below 2**31 vertices; int64
    above) and, when ``weighted``, 4-byte weights (int32 or float32)."""
    n, m = int(num_vertices), int(num_arcs)
    index = np.dtype(index_dtype(n)).itemsize
    return 8 * (n + 1) + index * m + (4 * m if weighted else 0)


def proc_status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``...); None where unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def available_bytes() -> int | None:
    """Bytes this process can still allocate: the system's available memory, lowered by the
    headroom under an address-space or data-size limit (``ulimit -v``/``-d``); ``None`` when
    none of these can be read."""
    limits = [_mem_available()]
    checks = () if resource is None else (
        (resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData"))
    for rlimit, field in checks:
        soft, _ = resource.getrlimit(rlimit)
        used = proc_status_kib(field)
        if soft != resource.RLIM_INFINITY and used is not None:
            limits.append(max(soft - used * 1024, 0))
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def check_vertices(path, n: int, *, line: int | None, what: str = "declares") -> None:
    """Raise GraphFormatError unless a graph of ``n`` vertices fits the CSR type and memory."""
    if n > MAX_VERTICES:
        raise GraphFormatError(path, f"the file {what} {n:,} vertices; groute graphs hold at most "
                                     f"2^32 - 1", line=line)
    need = (n + 1) * BYTES_PER_VERTEX
    avail = available_bytes()
    if avail is not None and need > avail:
        raise GraphFormatError(path, f"the file {what} {n:,} vertices, which need about "
                                     f"{need / 2**30:.2f} GiB of memory; {avail / 2**30:.2f} GiB is "
                                     "available", line=line)
