"""How much GPU memory the linear iteration engines need for a graph: their estimate for
:func:`groute.memory.check_fits` (the machinery, and what an estimate counts, is there)."""
from __future__ import annotations

import numpy as np

from groute.graph.arrays import arc_dtype
from groute.memory import DeviceBytes, share


def iteration_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                    devices: int = 1) -> DeviceBytes:
    """The BSP pull (:mod:`groute.engines.iterate.device`): the in-arc rows (offsets int64 once
    a device's in-arcs pass 2**31, else int32), the per-source share (PageRank's 1/outdeg) and
    the values of the owned vertices, and two contribution vectors over all vertices
    (float32); ``weighted``: every in-arc carries its factor beside its source (8 bytes)."""
    k = max(int(devices), 1)
    nl, ml = share(n, k), share(m, k)
    offset = np.dtype(arc_dtype(ml)).itemsize
    arcs = ("in-arcs (int32 source, float32 factor)", 8) if weighted else \
        ("in-arc sources (int32)", 4)
    parts = {"in-arc offsets": offset * (nl + 1), arcs[0]: arcs[1] * ml,
             "shares (1/outdeg)": 4 * nl, "values": 4 * nl, "contributions (2)": 8 * int(n)}
    return DeviceBytes(parts)
