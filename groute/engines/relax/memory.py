"""How much GPU memory a relaxation solver needs for a graph: its estimate for
:func:`groute.memory.check_fits` (the machinery, and what an estimate counts, is there)."""
from __future__ import annotations

from groute.memory import DeviceBytes, rows_bytes, share

#: packets of items each device can hold from each peer (the worklist's link buffers)
RECEIVE_BUFFERS = 3


def packet_items(n: int) -> int:
    """Items per packet of the relaxation solver's worklist for a graph of ``n`` vertices."""
    return int(min(max(int(n), 1024), 1 << 20))


def traversal_bytes(n: int, m: int, *, weighted: bool = False, directed: bool = True,
                    devices: int = 1) -> DeviceBytes:
    """The relaxation engines (:mod:`groute.engines.relax.cuda_worker`): the rows, weights
    where the arcs carry them, the values, two near queues, the hub slots, the near marks and
    two far queues of ``n_local`` each; on several devices the best value sent per vertex, the
    outboxes, the worklist's receive buffers (three packets of int64 items from each peer) and
    (symmetric, unweighted) every device's frontier flags; at the end of a run the answer of its
    vertices (8 bytes each, converted there before it lands on the host, and a flag each
    saying which were not reached)."""
    k = max(int(devices), 1)
    nl, ml = share(n, k), share(m, k)
    parts = rows_bytes(nl, ml)
    if weighted:
        parts["weights (4 bytes)"] = 4 * ml
    parts.update({"values": 4 * nl, "near queues (2)": 8 * nl, "hub slots": 12 * nl,
                  "near marks": 4 * nl, "far queues (2, int64)": 16 * max(nl, 1024),
                  "answer (8 bytes, unreached flags)": 9 * nl})
    if k > 1:
        parts["best value sent"] = 4 * int(n)
        parts["outboxes (int64)"] = 8 * k * nl
        parts["receive buffers (int64)"] = 8 * RECEIVE_BUFFERS * (k - 1) * packet_items(n)
        if not directed and not weighted:
            parts["frontier flags"] = int(n)
    return DeviceBytes(parts)
