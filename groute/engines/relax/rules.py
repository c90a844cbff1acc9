"""What ``auto`` means on the relaxation engines: mode, priority and exchange, as
:class:`~groute.engines.rules.Rule` tables the solver decides by and the command line prints.

Two sets, picked by the relaxation (:attr:`~groute.engines.relax.relaxation.Relaxation.unit`):
:data:`UNIT_STEP_RULES` where every arc adds exactly one (BFS: the peer kernel is the
level-synchronous one, which pulls over in-arcs, and levels are the window's unit) and
:data:`WEIGHTED_RULES` otherwise (SSSP: the peer kernel keeps a soft-priority window). Each
choice was the fastest measured on its kind of graph and device count (docs/TRAVERSAL.md).
"""
from __future__ import annotations

from groute.engines.rules import Case, Rule

#: the exchange ``exchange="auto"`` runs, once the mode is known
EXCHANGE = Rule("exchange", (
    Case(("one_device", "async"), "host",
         "one device's fused worker runs alone: there is nothing to exchange"),
    Case(("processes", "not shared_gpus", "peer"), "peer",
         "the peer kernel across the ranks of one host over CUDA IPC: one launch per rank for "
         "the whole run, where the worklist's every level meets over MPI or NCCL"),
    Case(("processes",), "host",
         "across processes the worklist: the ranks share a GPU, whose persistent kernels "
         "would take turns, or the peer kernel cannot run; exchange='peer' asks for it"),
    Case(("not peer",), "host", "the distributed worklist: the host moves the items"),
    Case((), "peer", "one launch per device for the whole run, exchanging through peer memory: "
                     "BSP the level-synchronous peer kernel, async the linked workers"),
))

#: a relaxation whose every arc adds one (BFS)
UNIT_STEP_RULES = {
    "mode": Rule("mode", (
        Case(("one_device", "not peer"), "async", "one device's fused worker, whatever the "
                                                  "diameter: no diameter test"),
        Case(("peer", "not one_device", "low_diameter"), "bsp",
             "the persistent level-synchronous peer kernel"),
        Case(("peer", "symmetric", "low_diameter"), "bsp",
             "the peer kernel on one device, where it can pull over in-arcs"),
        Case(("peer",), "async", "one device's fused worker; on several the fused workers "
                                 "with device-initiated links"),
        Case(("symmetric", "low_diameter"), "bsp", "the worklist pulls across devices"),
        Case((), "async", "the fused workers on the worklist"),
    )),
    "priority": Rule("priority", (
        Case(("not windowed",), False, "no window to keep"),
        Case(("delta_given",), True, "a window of delta levels"),
        Case(("linked",), False, "their rounds are cheap: re-expanding what a late offer lowers "
                                 "costs less than the window's far-queue splits"),
        Case(("one_device",), False, "the fused worker expands level by level already"),
        Case((), True, "a window of 4 levels keeps a device from running ahead on depths that "
                       "remote updates will still lower"),
    )),
    "exchange": EXCHANGE,
}

#: any other relaxation (SSSP, and a user's weighted or non-unit one)
WEIGHTED_RULES = {
    "mode": Rule("mode", (
        Case(("not peer",), "async", "the fused workers on the worklist"),
        Case(("low_diameter",), "bsp", "the persistent peer kernel, on any number of devices"),
        Case((), "async", "one device's fused worker; on several the fused workers with "
                          "device-initiated links"),
    )),
    "priority": Rule("priority", (
        Case(("not windowed",), False, "no window to keep"),
        Case(("delta_given",), True, "a window of delta"),
        Case(("processes",), False, "each process holds only its part of the graph, so no "
                                    "diameter test: Bellman-Ford rounds (a delta asks for a "
                                    "window)"),
        Case(("low_diameter",), False, "Bellman-Ford rounds converge in a few levels; near-far "
                                       "rounds cost more than the re-expansions they save"),
        Case((), True, "near-far keeps the work near Dijkstra's on road-like graphs (delta: "
                       "the solver's default_delta; SSSP's is mean weight * 64 / mean degree)"),
    )),
    "exchange": EXCHANGE,
}
