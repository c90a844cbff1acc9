"""The algorithms, one-shot functions and subcommands groute offers, registered by name.

The layers import downward only: the algorithms (``groute.apps``) sit above the runtime, graph,
operator and benchmark modules. Library code that needs "every app" (``groute bench``,
``groute demo``) or every subcommand (the CLI) looks them up here instead of importing them by
name; the facade (``groute/__init__.py``) is what fills the registry. Entries name their code by
module and attribute, imported on first use, so registering costs nothing and ``import groute``
stays cheap. An algorithm from another package registers itself the same way::

    from groute.registry import App, register_app
    register_app(App("kcore2", "k-core", "mypkg.kcore", solver="KCore", function="kcore2",
                     needs_source=False, weighted=False,
                     reference=("mypkg.kcore_checks", "reference"),
                     peers={"networkx": ("mypkg.kcore_checks", "networkx_peer")}))
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


def load(module: str, attr: str):
    """``module.attr``, importing ``module``."""
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class App:
    """A graph algorithm as the facade, ``groute demo`` and ``groute bench`` see it."""

    name: str              # its key and CLI name: bfs, sssp, pr, cc
    label: str             # how tables print it
    module: str            # the module that holds its solver class and one-shot function
    #: the solver class: ``solver(graph, ctx=, [partition=, mode=, ...]).run([source])``
    solver: str
    #: the one-shot function ``function(graph, [source], **options)``, also ``groute.<function>``
    function: str
    needs_source: bool     # run(source) rather than run()
    weighted: bool         # needs edge weights
    modes: tuple = ()      # the modes it takes; () means the solver has no mode argument
    takes_partition: bool = True
    #: ``(module, function)`` of its plain-CuPy implementation on one GPU (a benchmark peer and
    #: the GPU reference), or None
    baseline: tuple[str, str] | None = None
    #: ``(module, function)`` of its device memory estimate, ``function(n, m, *, weighted,
    #: directed, devices)`` returning an object with a ``total`` in bytes and named ``parts``
    #: (``groute bench`` reports it beside the measured peak), or None
    memory: tuple[str, str] | None = None

    # How ``groute bench`` checks and compares it (docs/BENCHMARKS.md, "Adding an app"). An app
    # brings these through the registry so the harness never names an app.
    #: how an answer is compared with the reference: ``exact`` (equal integers), ``allclose``
    #: (floats within ``rtol``, and an absolute slack of ``rtol`` times the largest value),
    #: ``partition`` (the same grouping of vertices, whatever the labels), ``distances`` (SSSP:
    #: exact for integer weights, else ``rtol``; unreachable must agree), ``ranks`` (PageRank:
    #: L1 distance)
    verify: str = "exact"
    rtol: float = 0.0
    #: ``run(sources)`` with this many sources, a fixed sample the harness derives from the graph
    #: (the highest out-degree vertices) and hands to the reference and the peers too; 0: none
    sources: int = 0
    #: keyword arguments the harness passes to every ``run`` (a sum over given sources rather
    #: than a rescaled estimate, say), so the answer is what its reference computes
    run_options: dict | None = None
    #: False: the app refuses self-loops, and the harness runs it on the graph without them
    self_loops: bool = True
    #: True: the app takes directed graphs only, and the harness gives it an undirected graph
    #: as the directed graph of its arcs (each edge both ways: ``CSRGraph.as_directed``)
    directed: bool = False
    #: ``(module, function)`` of its CPU reference, ``function(graph, source)`` -> one value per
    #: vertex (``source``: None, a vertex or an array of them, internal ids); None: the built-in
    #: references of ``groute.bench.references`` (the first four apps)
    reference: tuple[str, str] | None = None
    #: peer name (``groute.bench.suite.PEERS``) -> ``(module, function)``, ``function(graph,
    #: source)`` -> a ``groute.bench.peers.PreparedPeer`` (raising ``PeerSkipped`` where it
    #: cannot run); peers not named are reported as not applicable. None: the built-in peers
    peers: dict | None = None
    #: ``(module, function)`` of its bandwidth floor, ``function(graph)`` -> the fewest bytes one
    #: device must move; None: the CSR read once and a 4-byte answer per vertex written (weights
    #: too when ``weighted``)
    floor: tuple[str, str] | None = None

    def solver_class(self):
        return load(self.module, self.solver)


#: name -> App, in the order they were registered (the order tables and ``--help`` list them)
APPS: dict[str, App] = {}
#: public name -> (module, attribute) of the one-shot functions the facade offers
FUNCTIONS: dict[str, tuple[str, str]] = {}
#: modules that add subcommands to ``groute`` (each defines ``register(subparsers, common)``)
COMMANDS: list[str] = []


def register_app(app: App) -> App:
    """Add ``app`` (replacing one of the same name) and its one-shot function."""
    APPS[app.name] = app
    register_function(app.function, app.module, app.function)
    return app


def register_function(name: str, module: str, attr: str) -> None:
    """Offer ``module.attr`` as ``groute.<name>``."""
    FUNCTIONS[name] = (module, attr)


def register_command(module: str) -> None:
    """Add the subcommands of ``module`` to the command line (once, in registration order)."""
    if module not in COMMANDS:
        COMMANDS.append(module)


def app(name: str) -> App:
    try:
        return APPS[name]
    except KeyError:
        raise KeyError(f"no app {name!r} is registered; known: {', '.join(APPS)}") from None


def function(name: str):
    """The one-shot function registered as ``name``, imported."""
    try:
        module, attr = FUNCTIONS[name]
    except KeyError:
        raise KeyError(f"no function {name!r} is registered; "
                       f"known: {', '.join(FUNCTIONS)}") from None
    return load(module, attr)
