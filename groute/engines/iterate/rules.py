"""What ``auto`` means on the linear iteration engines: mode, BSP kernel, push sweeps and the
persistent kernels, as :class:`~groute.engines.rules.Rule` tables the solver decides by and the
command line prints (PageRank's and Katz's help alike).

The facts they ask beyond the library's (:data:`groute.engines.rules.FACTS`) are about the graph
and the options, not about any one iteration: whether most arcs enter vertices of large
in-degree, whether a small graph has hubs, whether in-place sweeps were asked for, whether the
persistent kernels can run. Each choice was the fastest measured on its kind of graph and
device count (docs/PR_CC.md).
"""
from __future__ import annotations

from groute.engines.rules import FACTS as ENGINE_FACTS
from groute.engines.rules import Case, Rule
from groute.engines.rules import said as said_in

#: the library's facts and the engines' own
FACTS = {
    **ENGINE_FACTS,
    "inplace": ("in-place sweeps asked for", "Jacobi sweeps", None),
    "heavy_in_arcs": ("a power-law graph", "a graph of small in-degrees",
                      "power-law: most arcs enter vertices of in-degree > 32"),
    "small_with_hubs": ("a small graph with hubs", "a large graph or one without hubs",
                        "small: fewer than 2^22 arcs; hubs: some in-degree > 32"),
    "persistent_can_run": ("the persistent kernels can run", "the persistent kernels cannot run",
                           "the persistent kernels: on CUDA devices with peer access and native "
                           "atomics; BSP: csc or bins, device_check on, Jacobi sweeps; async: "
                           "the push kernel"),
}


def said(when) -> str:
    """The facts of a case in words, the engines' facts among them."""
    return said_in(when, FACTS)


ITERATE_RULES = {
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
        Case(("processes", "shared_gpus"), False,
             "ranks sharing a GPU: their persistent kernels would take turns on it; "
             "persistent=True asks for it"),
        Case(("not persistent_can_run",), False, "see stats['persistent_reason']"),
        Case((), True, "one launch per run saves the launches, event waits and (on several "
                       "devices) cross-device waits between iterations, and across processes "
                       "the ranks' exchange of slices (the kernel stores into the other ranks' "
                       "vectors over CUDA IPC): most of a small graph's time"),
    ), FACTS),
}
