"""How much GPU memory the linear iteration engines need for a graph: their estimate for
:func:`groute.memory.check_fits` (the machinery, and what an estimate counts, is there)."""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import IN_ARC_STEP_BYTES, in_arc_step
from groute.graph.arrays import arc_dtype
from groute.memory import DeviceBytes, share


def iteration_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                    devices: int = 1, processes: bool = False) -> DeviceBytes:
    """The BSP pull (:mod:`groute.engines.iterate.device`): the in-arc rows (offsets int64 once
    a device's in-arcs pass 2**31, else int32), the per-source share (PageRank's 1/outdeg) and
    the values of the owned vertices, and three vectors over all vertices (float32: the two
    contribution vectors and the start's); on several devices a byte per owned vertex saying
    which peers read it and the lists of those it stores into them (at most every owned vertex
    for every peer). ``weighted``: every in-arc carries its factor beside its source (8 bytes).
    At the end of a run the answer of the owned vertices (float64, and its normalised copy)
    is made on the device before it lands on the host.

    The set-up's peak is the in-arcs' build in the device's memory
    (:func:`groute.engines.iterate.layout.shard_in_arcs`): the in-arcs, each owned row's next
    slot (int64), every vertex's new id (the degree order's relabelling, int32) and one step's
    temporaries (:data:`groute.graph.arcs.IN_ARC_STEP_BYTES` per arc of a step of
    :func:`groute.graph.arcs.in_arc_step` arcs of the graph; a row longer than a step is sorted
    alone and its temporaries are not counted, nor the pool's cache of at most two steps).
    Across ``processes`` each rank sorts every one of its in-arcs at once as a 64-bit key
    (:func:`groute.graph.rank_graph.arcs_to_owners`): the keys, the sort's buffer and the keys
    received, and with factors the order, the factors sent and received and their merge."""
    k = max(int(devices), 1)
    nl, ml = share(n, k), share(m, k)
    offset = np.dtype(arc_dtype(ml)).itemsize
    arcs = ("in-arcs (int32 source, float32 factor)", 8) if weighted else \
        ("in-arc sources (int32)", 4)
    parts = {"in-arc offsets": offset * (nl + 1), arcs[0]: arcs[1] * ml,
             "shares (1/outdeg)": 4 * nl, "values": 4 * nl, "contributions (2)": 8 * int(n),
             "start contributions": 4 * int(n), "answer (float64, normalised)": 16 * nl}
    if k > 1:
        parts["peer masks"] = nl
        parts["export lists (int32)"] = 4 * nl * (k - 1)
    step = min(in_arc_step(m), int(m))
    setup = {arcs[0]: arcs[1] * ml, "next slot per row (int64)": 8 * nl,
             "new ids (int32)": 4 * int(n), "build step": IN_ARC_STEP_BYTES * step}
    if processes:
        setup = {arcs[0]: arcs[1] * ml, "new ids (int32)": 4 * int(n),
                 "the ranks' in-arc keys, their sort and the keys received (uint64)": 24 * ml}
        if weighted:
            setup["their order and factors, sent, received and merged"] = 32 * ml
    return DeviceBytes(parts, setup)
