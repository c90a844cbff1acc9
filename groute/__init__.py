"""groute: asynchronous multi-GPU irregular computation from Python, after Groute (PPoPP 2017).

The dataflow API: a :class:`Context` owns devices (CUDA GPUs through CuPy, or NumPy CPU virtual
devices); :class:`Link` moves packetized segments between endpoints with bounded buffers;
:class:`Router` picks a destination per segment by a policy (:mod:`groute.runtime.policies`).

The algorithms as one-shot functions: ``groute.bfs``, ``groute.sssp``, ``groute.pagerank``,
``groute.connected_components``, ``groute.shortest_path``, ``groute.core_number``,
``groute.strongly_connected_components``, ``groute.betweenness_centrality``,
``groute.katz_centrality`` (and
``groute.pbf``, the dataflow example). They are imported on first use, so ``import groute``
loads neither the algorithms nor SciPy or CuPy.

This module is the facade: besides the dataflow API it registers what groute ships with
:mod:`groute.registry` (the algorithms, their one-shot functions and the CLI's subcommands),
the one place below the CLI that names the algorithms and tools.
"""
from ._checkout import add_checkout_finder as _add_checkout_finder

_add_checkout_finder()

from . import registry as _registry  # noqa: E402
from .errors import (ContextStopped, DeviceError, GraphNotSupported, GrouteError,  # noqa: E402
                     LinkClosed, WaitTimeout)
from .runtime import (HOST, Context, Endpoint, Link, PendingSegment, Route, Router,  # noqa: E402
                      Segment, SendHandle, broadcast, by_key, by_owner, first_available, ring)

__version__ = "0.1.0"

_ASYNC_BSP = ("async", "bsp")
_KCORE_CHECKS = "groute.bench.checks.kcore"
_SCC_CHECKS = "groute.bench.checks.scc"
_BC_CHECKS = "groute.bench.checks.betweenness"
for _app in (
    _registry.App("bfs", "BFS", "groute.apps.bfs", "BFS", "bfs", needs_source=True, weighted=False,
                  modes=_ASYNC_BSP, baseline=("groute.apps.baselines", "cupy_bfs"),
                  memory=("groute.engines.relax.memory", "traversal_bytes"), verify="exact"),
    _registry.App("sssp", "SSSP", "groute.apps.sssp", "SSSP", "sssp", needs_source=True,
                  weighted=True, modes=_ASYNC_BSP, baseline=("groute.apps.baselines", "cupy_sssp"),
                  memory=("groute.engines.relax.memory", "traversal_bytes"), verify="distances"),
    _registry.App("pr", "PageRank", "groute.apps.pr", "PageRank", "pagerank", needs_source=False,
                  weighted=False, modes=_ASYNC_BSP,
                  baseline=("groute.apps.baselines_pr_cc", "cupy_pagerank"),
                  memory=("groute.engines.iterate.memory", "iteration_bytes"), verify="ranks"),
    _registry.App("cc", "CC", "groute.apps.cc", "CC", "connected_components", needs_source=False,
                  weighted=False, takes_partition=False,
                  baseline=("groute.apps.baselines_pr_cc", "cupy_cc"),
                  memory=("groute.engines.components.memory", "components_bytes"),
                  verify="partition"),
    # the algorithms written on the operator API bring their checks from groute.bench.checks
    _registry.App("kcore", "k-core", "groute.apps.kcore", "KCore", "core_number",
                  needs_source=False, weighted=False, verify="exact", self_loops=False,
                  reference=(_KCORE_CHECKS, "reference"), floor=(_KCORE_CHECKS, "floor_bytes"),
                  peers={"networkx": (_KCORE_CHECKS, "networkx_peer"),
                         "igraph": (_KCORE_CHECKS, "igraph_peer")}),
    _registry.App("betweenness", "BC", "groute.apps.betweenness", "Betweenness", "betweenness_centrality",
                  needs_source=False, weighted=False, verify="allclose", rtol=1e-6, sources=64,
                  run_options={"rescale": False},
                  reference=(_BC_CHECKS, "reference"), floor=(_BC_CHECKS, "floor_bytes"),
                  peers={"networkx": (_BC_CHECKS, "networkx_peer"),
                         "igraph": (_BC_CHECKS, "igraph_peer")}),
    _registry.App("scc", "SCC", "groute.apps.scc", "SCC", "strongly_connected_components",
                  needs_source=False, weighted=False, verify="partition", directed=True,
                  reference=(_SCC_CHECKS, "reference"), floor=(_SCC_CHECKS, "floor_bytes"),
                  peers={"scipy": (_SCC_CHECKS, "scipy_peer"),
                         "igraph": (_SCC_CHECKS, "igraph_peer"),
                         "networkx": (_SCC_CHECKS, "networkx_peer")}),
):
    _registry.register_app(_app)
_registry.register_function("pbf", "groute.apps.pbf", "pbf")
_registry.register_function("shortest_path", "groute.apps.sssp", "shortest_path")
_registry.register_function("katz_centrality", "groute.apps.katz", "katz_centrality")
for _command in ("groute.commands.info", "groute.commands.demo", "groute.apps.pbf",
                 "groute.apps.bfs", "groute.apps.sssp", "groute.apps.pr", "groute.apps.katz_cli",
                 "groute.apps.cc", "groute.apps.kcore_cli", "groute.apps.scc_cli", "groute.apps.betweenness_cli",
                 "groute.graph.cli", "groute.topology.cli", "groute.bench.cli"):
    _registry.register_command(_command)   # in the order `groute --help` lists them
del _app, _command, _KCORE_CHECKS, _SCC_CHECKS, _BC_CHECKS


#: public names imported when first asked for: the result type the algorithms return (an
#: algorithm written on the operators returns one too)
_LAZY = {"AppResult": ("groute.results", "AppResult")}


def __getattr__(name):
    """The registered one-shot functions (:data:`groute.registry.FUNCTIONS`) and :data:`_LAZY`,
    imported when first asked for."""
    if name in _registry.FUNCTIONS or name in _LAZY:
        value = (_registry.function(name) if name in _registry.FUNCTIONS
                 else _registry.load(*_LAZY[name]))
        globals()[name] = value
        return value
    raise AttributeError(f"module 'groute' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_registry.FUNCTIONS) | set(_LAZY))


__all__ = ["Context", "Endpoint", "HOST", "Link", "SendHandle", "Router", "Route", "Segment",
           "PendingSegment", "broadcast", "by_key", "by_owner", "first_available", "ring",
           "GrouteError", "DeviceError", "WaitTimeout", "ContextStopped", "LinkClosed",
           "GraphNotSupported", "AppResult",
           "bfs", "sssp", "pagerank", "connected_components", "shortest_path", "core_number",
           "strongly_connected_components", "betweenness_centrality", "katz_centrality", "pbf"]
