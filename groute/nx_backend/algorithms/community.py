"""Community detection: Louvain (and Leiden, which NetworkX leaves to backends), modularity and
label propagation, on groute's community algorithms (``groute.louvain_communities`` and its
kin, on the operator API's reductions by key).

NetworkX's ``seed`` reaches these functions as its ``py_random_state`` made it, and groute
draws what it needs from it (one number per call), so a seed gives the same communities on
every call and device count. Louvain's and Leiden's communities are not NetworkX's (NetworkX
moves one vertex at a time in a random order, groute moves independent sets of vertices at
once): they are a partition of every node, of the same modularity (docs/NETWORKX.md).
"""
from __future__ import annotations

import numbers

import numpy as np

from groute import registry
from groute.runtime.context import resolve_backend

from ..devices import settings
from .support import rule, weights_of

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES: list[str] = [
    "networkx.algorithms.community.tests.test_louvain",
    "networkx.algorithms.community.tests.test_quality",
    "networkx.algorithms.community.tests.test_leiden",
    "networkx.algorithms.community.tests.test_label_propagation",
]

#: the reason of the NetworkX tests that expect NetworkX's own sequence of moves
_NETWORKX_ORDER = ("expects the communities of NetworkX's sequential moves in its random order "
                   "(groute moves independent sets of vertices at once: other communities of "
                   "the same modularity)")

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {
    "test_louvain.py:test_karate_club_partition": _NETWORKX_ORDER,
    "test_louvain.py:test_undirected_selfloops": _NETWORKX_ORDER,
    "test_louvain.py:test_directed_partition": _NETWORKX_ORDER,
    "test_louvain.py:test_none_weight_param": _NETWORKX_ORDER,
    "test_louvain.py:test_multigraph": (
        "compares groute's communities of a Graph with NetworkX's of a MultiGraph, which "
        "groute leaves to NetworkX (its parallel edges' weights add up): communities from "
        "different orders of moves"),
}


def _options(G) -> dict:
    """How a call on ``G`` runs, as ``nx.config.backends.groute`` says (at most a device per
    node; each level of Louvain and Leiden leases its own devices, at most one per vertex of
    the level)."""
    chosen = settings()
    return {"backend": resolve_backend(chosen.backend),
            "devices": "auto" if chosen.devices is None else min(chosen.devices, max(len(G), 1)),
            "partition": chosen.partition}


def _level_options(G) -> dict:
    """:func:`_options` for Louvain, Leiden and modularity, the backend as configured: left at
    ``"auto"``, their levels of few arcs run on the host (``groute.apps.louvain.level_backend``)."""
    return {**_options(G), "backend": settings().backend}


def _arc_weights(G, weight):
    """``weight``'s values as float64 per arc of ``G.csr`` (its rows sorted), None for unit
    weights."""
    w = weights_of(G, weight)
    if w is None:
        return None
    return np.asarray(w, dtype=np.float64)[G.csr_arcs]       # adjacency order -> CSR order


def _weighted(G, weight) -> dict:
    w = _arc_weights(G, weight)
    return {"weight": None if w is None else weight, "arc_weights": w}


def _label_weights(G, weight) -> dict:
    """:func:`_weighted`, declining NaN weights: NetworkX's label propagation then finds no
    most frequent label and raises (its IndexError), where groute's refuses them."""
    given = _weighted(G, weight)
    w = given["arc_weights"]
    if w is not None and bool(np.isnan(w).any()):
        raise NotImplementedError("NaN weights: NetworkX runs the call")
    return given


def _sets(result) -> list[set]:
    return result.components()


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


#: why a multigraph is NetworkX's to run: its parallel edges' weights add up (or count), where
#: groute's conversion keeps one edge of their least weight
PARALLEL_EDGES_ADD_UP = ("NetworkX adds up the weights of parallel edges; groute's conversion "
                         "keeps one edge of their least weight")


def _arguments(multigraph: str = PARALLEL_EDGES_ADD_UP, *, weighted_only: bool = False):
    """A community function's ``can_run`` rule: a multigraph is NetworkX's (``multigraph``
    says why; ``weighted_only``: only when the call reads weights), and so are a weight
    function and a ``resolution`` or ``threshold`` (where the function takes them) that is not
    a real number."""
    def check(args):
        if args["G"].is_multigraph() and not (weighted_only and args["weight"] is None):
            return multigraph
        if callable(args.get("weight")):
            return "a weight function has no groute form"
        for name in ("resolution", "threshold"):
            if name in args and not _is_number(args[name]):
                return f"{name} that is not a real number"
        return True
    return check


@rule(_arguments())
def louvain_partitions(G, weight="weight", resolution=1, threshold=0.0000001, seed=None):
    """Every level's communities (groute's ``louvain_partitions``), as NetworkX's generator of
    lists of sets."""
    run = registry.function("louvain_partitions")
    options = {**_weighted(G, weight), **_level_options(G)}   # refused here, before any iteration
    levels = run(G.csr, resolution=resolution, threshold=threshold, seed=seed, **options)
    return (_sets(result) for result in levels)


@rule(_arguments())
def louvain_communities(G, weight="weight", resolution=1, threshold=0.0000001, max_level=None,
                        seed=None):
    """The last level of :func:`louvain_partitions` (at most ``max_level``)."""
    run = registry.function("louvain_communities")
    return _sets(run(G.csr, resolution=resolution, threshold=threshold, max_level=max_level,
                     seed=seed, **_weighted(G, weight), **_level_options(G)))


@rule(_arguments())
def leiden_partitions(G, weight="weight", resolution=1, seed=None):
    """Every level's communities by Leiden's algorithm (groute's ``leiden_partitions``), as a
    generator of lists of sets; NetworkX has no implementation of its own."""
    run = registry.function("leiden_partitions")
    options = {**_weighted(G, weight), **_level_options(G)}   # refused here, before any iteration
    return (_sets(result) for result in run(G.csr, resolution=resolution, seed=seed, **options))


@rule(_arguments())
def leiden_communities(G, weight="weight", resolution=1, max_level=None, seed=None):
    """The last level of :func:`leiden_partitions` (at most ``max_level``)."""
    run = registry.function("leiden_communities")
    return _sets(run(G.csr, resolution=resolution, max_level=max_level, seed=seed,
                     **_weighted(G, weight), **_level_options(G)))


@rule(_arguments("NetworkX counts every parallel edge; groute's conversion keeps one edge of "
                 "their least weight"))
def modularity(G, communities, weight="weight", resolution=1):
    """NetworkX's modularity (groute's ``modularity``), with its ``NotAPartition``."""
    from networkx.algorithms.community.quality import NotAPartition
    if not isinstance(communities, list):
        communities = list(communities)
    members = {u for c in communities for u in c if u in G}
    if not len(G) == len(members) == sum(len(c) for c in communities):     # NetworkX's test
        raise NotAPartition(G, communities)
    run = registry.function("modularity")
    return run(G.csr, communities, resolution=resolution, **_weighted(G, weight),
               **_level_options(G))


@rule(_arguments("NetworkX orders the nodes by degree, which counts every parallel edge; "
                 "groute's conversion keeps one edge"))
def label_propagation_communities(G):
    """NetworkX's communities (groute's ``label_propagation_communities``: the same colouring
    and updates), as NetworkX's ``dict_values`` of sets, in its order."""
    run = registry.function("label_propagation_communities")
    found = run(G.csr, **_options(G))
    return dict(enumerate(_sets(found))).values()


@rule(_arguments(weighted_only=True))
def asyn_lpa_communities(G, weight=None, seed=None):
    """Asynchronous label propagation (groute's ``asyn_lpa_communities``), as NetworkX's
    generator of sets."""
    run = registry.function("asyn_lpa_communities")
    communities = _sets(run(G.csr, seed=seed, **_label_weights(G, weight), **_options(G)))
    return (c for c in communities)     # NetworkX's generator, the work done (and refused) now


@rule(_arguments("NetworkX counts every parallel edge; groute's conversion keeps one edge"))
def fast_label_propagation_communities(G, *, weight=None, seed=None):
    """Fast label propagation (groute's ``fast_label_propagation_communities``), as NetworkX's
    generator of sets."""
    run = registry.function("fast_label_propagation_communities")
    communities = _sets(run(G.csr, seed=seed, **_label_weights(G, weight), **_options(G)))
    return (c for c in communities)     # NetworkX's generator, the work done (and refused) now
