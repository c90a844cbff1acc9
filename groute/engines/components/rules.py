"""What ``auto`` means on the connected components engine: which path hooks what Afforest's
sampling left, and across processes how the ranks' changes reach rank 0, as
:class:`~groute.engines.rules.Rule` tables the solver decides by and the command line prints
(``groute cc --help``).

It asks only the library's facts (:data:`groute.engines.rules.FACTS`): whether the devices
reach each other's memory, and whether they are several processes'. Each choice was the
fastest measured on its kind of graph and device count (docs/PR_CC.md, docs/DISTRIBUTED.md).
"""
from __future__ import annotations

from groute.engines.rules import FACTS, Case, Rule

COMPONENTS_RULES = {
    "rest": Rule("rest", (
        Case(("not peer_access",), "segments", "the edges left after sampling compacted and "
                                               "routed to the devices, Groute's path"),
        Case((), "kernel", "sampling split by rows, each device's changes merged by peer "
                           "reads, the rest linked in place"),
    ), FACTS),
    "exchange": Rule("exchange", (
        Case(("not processes",), "peer", "one process: its devices' memory is its own (the rest "
                                         "rule picks how it is read)"),
        Case(("not peer",), "host", "each rank's changes go to rank 0 as a message and rank "
                                    "0's come back, twice a run (MPI or NCCL Routers)"),
        Case((), "peer", "rank 0 reads every rank's changes and rows in place over CUDA IPC, as "
                         "the first device reads its peers' in one process: one meeting a run"),
    ), FACTS),
}
