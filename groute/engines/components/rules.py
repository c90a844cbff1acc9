"""What ``auto`` means on the connected components engine: which path hooks what Afforest's
sampling left, as a :class:`~groute.engines.rules.Rule` table the solver decides by and the
command line prints (``groute cc --help``).

It asks only the library's facts (:data:`groute.engines.rules.FACTS`): whether the devices
reach each other's memory. Each choice was the fastest measured on its kind of graph and
device count (docs/PR_CC.md).
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
}
