"""What ``groute bench`` needs to check and compare each algorithm: its reference, how answers are
compared, its peers, its plain-CuPy baseline and its floor model.

An algorithm says what it *is* where it is defined (:mod:`groute.registry`); how the bench
checks it lives here, one :class:`BenchSpec` per algorithm name. An algorithm without one can
still be run by the harness, which then reports that it has no reference to check it against.

Hooks are named as ``(module, function)`` and imported when used, so that this table imports no
check, peer or baseline (they import the harness's own modules) and costs nothing to read.
Calling conventions (``source``: None, a vertex, or the sample of an algorithm run from
``sources``; ``options``: :attr:`BenchSpec.check_options`):

- ``reference(graph, source, **options)`` for an algorithm run from a source or sources, else
  ``reference(graph, **options)``; one value per vertex, on the CPU, sharing nothing with the
  kernels;
- ``baseline(graph, source)`` / ``baseline(graph, **options)`` likewise, on GPU 0 in plain CuPy
  (:mod:`groute.bench.baselines`), with an optional ``setup(graph)`` the harness calls untimed;
- ``peers``: peer name -> ``peer(graph, source)`` returning a
  :class:`groute.bench.peers.PreparedPeer`; None: the harness's built-in peers
  (:mod:`groute.bench.peers`);
- ``floor(graph)`` (``floor(graph, sources)`` with a sample): the fewest bytes one device
  must move; None: the CSR read once and a 4-byte answer per vertex written.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

#: PageRank settings shared by our algorithm, the reference and the peers (the same tolerance)
PR_DAMPING = 0.85
PR_TOL = 1e-6

_REFERENCE = "groute.graph.reference"
_BASELINES = "groute.bench.baselines"
_CHECKS = "groute.bench.checks"


@dataclass(frozen=True)
class BenchSpec:
    """How ``groute bench`` checks and compares one algorithm (module docstring)."""

    #: how an answer is compared with the reference: ``exact`` (equal integers), ``allclose``
    #: (floats within ``rtol``, and an absolute slack of ``rtol`` times the largest value),
    #: ``partition`` (the same grouping of vertices, whatever the labels), ``distances`` (SSSP:
    #: exact for integer weights, else a relative tolerance; unreachable must agree), ``ranks``
    #: (PageRank: L1 distance)
    verify: str = "exact"
    rtol: float = 0.0
    #: the CPU reference ``(module, function)``; None: the algorithm cannot be checked
    reference: tuple[str, str] | None = None
    #: keyword arguments the reference and the baseline both take (PageRank's damping and tol)
    check_options: dict = field(default_factory=dict)
    #: keyword arguments the harness gives the solver (PageRank's: unweighted, as the
    #: reference and the peers are)
    solver_options: dict = field(default_factory=dict)
    #: ``(module, function)``: ``options(graph)``, solver keyword arguments that depend on the
    #: graph (PageRank's tol, per vertex as NetworkX's); None: none
    graph_options: tuple[str, str] | None = None
    #: keyword arguments of every ``run`` (a sum over given sources rather than a rescaled
    #: estimate, say), so the answer is what the reference computes
    run_options: dict = field(default_factory=dict)
    #: run from this many sources, a fixed sample the harness derives from the graph (the
    #: highest out-degree vertices) and hands to the reference and the peers too; 0: none
    sources: int = 0
    #: the plain-CuPy baseline ``(module, function)``, or None
    baseline: tuple[str, str] | None = None
    #: the baseline's untimed per-graph set-up ``(module, function)``, or None
    baseline_setup: tuple[str, str] | None = None
    #: the reference's dtype, which a GPU reference (the baseline) is cast to
    dtype: str | None = None
    #: peer name -> ``(module, function)``; None: the built-in peers
    peers: dict | None = None
    #: the floor model ``(module, function)``; None: the one-pass model
    floor: tuple[str, str] | None = None

    def options_for(self, graph) -> dict:
        """The solver's keyword arguments on ``graph``: :attr:`solver_options` and what
        :attr:`graph_options` gives."""
        if self.graph_options is None:
            return dict(self.solver_options)
        return {**self.solver_options, **load(self.graph_options)(graph)}


def pagerank_options(graph) -> dict:
    """PageRank's tolerance as the reference and the peers stop: an L1 change of
    :data:`PR_TOL` (NetworkX's ``tol`` is per vertex) within 1000 iterations."""
    return {"tol": PR_TOL / max(int(graph.num_vertices), 1), "max_iter": 1000}


_PR = {"damping": PR_DAMPING, "tol": PR_TOL}

#: algorithm name -> how the bench checks it
SPECS: dict[str, BenchSpec] = {
    "bfs": BenchSpec(verify="exact", reference=(_REFERENCE, "bfs"), dtype="int32",
                     baseline=(_BASELINES, "cupy_bfs")),
    "sssp": BenchSpec(verify="distances", reference=(_REFERENCE, "sssp"), dtype="float64",
                      baseline=(_BASELINES, "cupy_sssp")),
    "pr": BenchSpec(verify="ranks", reference=(_REFERENCE, "pagerank"), check_options=_PR,
                    solver_options={"weight": None}, dtype="float64",
                    graph_options=("groute.bench.specs", "pagerank_options"),
                    baseline=(_BASELINES, "cupy_pagerank"),
                    baseline_setup=(_BASELINES, "cupy_pagerank_setup")),
    "cc": BenchSpec(verify="partition", reference=(_REFERENCE, "connected_components"),
                    dtype="int64", baseline=(_BASELINES, "cupy_cc"),
                    baseline_setup=(_BASELINES, "cupy_cc_setup")),
    "kcore": BenchSpec(verify="exact", reference=(f"{_CHECKS}.kcore", "reference"),
                       floor=(f"{_CHECKS}.kcore", "floor_bytes"),
                       peers={"networkx": (f"{_CHECKS}.kcore", "networkx_peer"),
                              "igraph": (f"{_CHECKS}.kcore", "igraph_peer")}),
    "betweenness": BenchSpec(verify="allclose", rtol=1e-6, sources=64,
                             run_options={"rescale": False},
                             reference=(f"{_CHECKS}.betweenness", "reference"),
                             floor=(f"{_CHECKS}.betweenness", "floor_bytes"),
                             peers={"networkx": (f"{_CHECKS}.betweenness", "networkx_peer"),
                                    "igraph": (f"{_CHECKS}.betweenness", "igraph_peer")}),
    "scc": BenchSpec(verify="partition", reference=(f"{_CHECKS}.scc", "reference"),
                     floor=(f"{_CHECKS}.scc", "floor_bytes"),
                     peers={"scipy": (f"{_CHECKS}.scc", "scipy_peer"),
                            "igraph": (f"{_CHECKS}.scc", "igraph_peer"),
                            "networkx": (f"{_CHECKS}.scc", "networkx_peer")}),
}

#: the spec of an algorithm the table does not name: nothing to check it against
UNCHECKED = BenchSpec()


def spec_for(name: str) -> BenchSpec:
    """How the bench checks the algorithm ``name`` (:data:`UNCHECKED` when the table has none)."""
    return SPECS.get(name, UNCHECKED)


def load(hook: tuple[str, str]):
    """The function a hook names, its module imported."""
    module, attr = hook
    return getattr(importlib.import_module(module), attr)


def hook_name(hook: tuple[str, str]) -> str:
    """``module.function``, as tables and results name a hook."""
    return ".".join(hook)
