"""How much GPU memory PageRank and CC need for a graph: their estimates for
:func:`groute.memory.check_fits` (the machinery, and what an estimate counts, is there)."""
from __future__ import annotations

import numpy as np

from groute.graph.arrays import arc_dtype
from groute.memory import DeviceBytes, rows_bytes, share


def pagerank_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                   devices: int = 1) -> DeviceBytes:
    """PageRank's BSP pull (:mod:`groute.apps.pr_device`): the in-arc rows (offsets int64 once
    a device's in-arcs pass 2**31, else int32), 1/outdeg and the ranks of the owned vertices,
    and two contribution vectors over all vertices (float32)."""
    k = max(int(devices), 1)
    nl, ml = share(n, k), share(m, k)
    offset = np.dtype(arc_dtype(ml)).itemsize
    parts = {"in-arc offsets": offset * (nl + 1), "in-arc sources (int32)": 4 * ml,
             "1/outdeg": 4 * nl, "ranks": 4 * nl, "contributions (2)": 8 * int(n)}
    return DeviceBytes(parts)


def cc_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
             devices: int = 1) -> DeviceBytes:
    """CC's Afforest in place (:mod:`groute.apps.cc_device`): each device's rows of the
    symmetric CSR (a directed graph's arcs both ways: up to ``2 m``) and a parent per vertex of
    the whole graph; the first device also the late-arc bitmap."""
    k = max(int(devices), 1)
    arcs = 2 * int(m) if directed else int(m)
    nl, ml = share(n, k), share(arcs, k)
    parts = rows_bytes(nl, ml)
    parts.update({"parents": 4 * int(n), "late-arc bitmap": 4 * share(n, 32)})
    return DeviceBytes(parts)
