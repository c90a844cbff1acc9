"""What ``auto`` means for PageRank and CC, and every app's rules by name (what the help prints).

The machinery (:class:`~groute.engines.rules.Rule`, :class:`~groute.engines.rules.Case`, the
library's facts) is :mod:`groute.engines.rules`; BFS and SSSP decide by the relaxation engines'
rules (:mod:`groute.engines.relax.rules`), unit-step and weighted. This module adds the facts
only PageRank asks and the two apps' tables.

This module is data: it imports no app, so every app (and a test) may read it.
"""
from __future__ import annotations

from groute.engines import rules
from groute.engines.relax.rules import UNIT_STEP_RULES, WEIGHTED_RULES
from groute.engines.rules import Case, Rule

#: the library's facts and PageRank's own
FACTS = {
    **rules.FACTS,
    "inplace": ("in-place sweeps asked for", "Jacobi sweeps", None),
    "heavy_in_arcs": ("a power-law graph", "a graph of small in-degrees",
                      "power-law: most arcs enter vertices of in-degree > 32"),
    "small_with_hubs": ("a small graph with hubs", "a large graph or one without hubs",
                        "small: fewer than 2^22 arcs; hubs: some in-degree > 32"),
    "persistent_can_run": ("the persistent kernels can run", "the persistent kernels cannot run",
                           "the persistent kernels: BSP, csc or bins, on CUDA devices with peer "
                           "access and native atomics, device_check on, Jacobi sweeps"),
}


def said(when) -> str:
    """The facts of a case in words, this module's facts among them."""
    return rules.said(when, FACTS)


#: BFS's and SSSP's: the relaxation engines' unit-step and weighted rules (the same objects)
BFS_RULES = UNIT_STEP_RULES
SSSP_RULES = WEIGHTED_RULES

# ------------------------------------------------------------------------------------------------
# PageRank (groute.apps.pr)
# ------------------------------------------------------------------------------------------------
PR_RULES = {
    "mode": Rule("mode", (
        Case((), "bsp", "faster than async on every graph and device count measured, and it "
                        "stops on a global L1 rule"),
    ), FACTS),
    "bsp_kernel": Rule("bsp_kernel", (
        Case(("one_device", "inplace"), "csc", "the only in-place kernel"),
        Case(("heavy_in_arcs",), "bins", "the fused pull over vertices relabelled by in-degree "
                                         "with a static task list"),
        Case(("one_device", "small_with_hubs"), "bins",
             "a small graph's sweep lasts as long as its longest in-row, which bins cuts into "
             "tasks"),
        Case((), "csc", "the fused pull over the in-arcs, faster on grids, roads and meshes "
                        "than the COO pull pair, which is never picked"),
    ), FACTS),
    "sweeps": Rule("sweeps", (
        Case(("not cuda",), 2, "vectorised NumPy sweeps"),
        Case(("not one_device", "heavy_in_arcs"), 1,
             "a sweep is costly and a hub's remote sums should go out at once"),
        Case((), 8, "few host round trips"),
    ), FACTS),
    "persistent": Rule("persistent", (
        Case(("not persistent_can_run",), False, "see stats['persistent_reason']"),
        Case((), True, "one launch per run saves the launches, event waits and (on several "
                       "devices) cross-device waits between iterations: most of a small graph's "
                       "time"),
    ), FACTS),
}

# ------------------------------------------------------------------------------------------------
# connected components (groute.apps.cc)
# ------------------------------------------------------------------------------------------------
CC_RULES = {
    "rest": Rule("rest", (
        Case(("not peer_access",), "segments", "the edges left after sampling compacted and "
                                               "routed to the devices, Groute's path"),
        Case((), "kernel", "sampling split by rows, parent arrays merged by peer reads, the "
                           "rest linked in place"),
    ), FACTS),
}

#: every app's rules, by the app's name
RULES = {"bfs": BFS_RULES, "sssp": SSSP_RULES, "pr": PR_RULES, "cc": CC_RULES}
