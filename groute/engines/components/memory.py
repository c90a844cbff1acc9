"""How much GPU memory the connected components engine needs for a graph: its estimate for
:func:`groute.memory.check_fits` (the machinery, and what an estimate counts, is there)."""
from __future__ import annotations

import math

from groute.memory import DeviceBytes, rows_bytes, share

from .device import changes_capacity
from .layout import first_extra, first_share


def components_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                     devices: int = 1, received: int = 0) -> DeviceBytes:
    """Afforest in place (:mod:`groute.engines.components.device`): each device's rows of the
    symmetric CSR (a directed graph's arcs both ways: up to ``2 m``; the first device, the
    fullest, holds :func:`~.layout.first_share` of them) and a parent per vertex of
    the whole graph; the first device also the late-arc bitmap and, at the end of a run, the
    answer (the labels as int64, converted there before they land on the host); on several
    devices the others also what they hand the merge (a bit per vertex, a list of up to n / 8
    pairs). Across processes (``received``: the messages a rank holds at once, rank 0 one from
    each other rank, the others rank 0's) also those messages, each at most a sender's whole
    array (4 bytes a vertex: what a sender sends when its pairs do not fit its list)."""
    k = max(int(devices), 1)
    arcs = 2 * int(m) if directed else int(m)
    first = first_share(k, first_extra(k))
    nl, ml = (max(share(x, k), math.ceil(x * first)) for x in (int(n), arcs))
    parts = rows_bytes(nl, ml)
    parts.update({"parents": 4 * int(n), "late-arc bitmap": 4 * share(n, 32),
                  "answer (int64 labels)": 8 * int(n)})
    if k > 1:
        parts.update({"merge bitmap": 4 * share(n, 32), "merge list": 8 * changes_capacity(n)})
    if received:
        parts["changes received (whole arrays at most)"] = 4 * int(n) * int(received)
    return DeviceBytes(parts)
