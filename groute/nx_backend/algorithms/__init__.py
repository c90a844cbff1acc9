"""The NetworkX functions groute runs, with NetworkX's signatures, answers and errors, one
module per family of NetworkX's (``traversal``, ``shortest_paths``, ``components``...).

Each function takes a :class:`~groute.nx_backend.graph.GrouteGraph` (NetworkX converted the
caller's graph) and the caller's other arguments, and answers as NetworkX does: the same dict
keys and value types, the same order where NetworkX's order follows from the answer, the same
exceptions. Where groute cannot honour an argument, a function's ``can_run`` rule
(:func:`.support.rule`) says why (NetworkX then runs the call itself, or raises when
``nx.config.backends.groute`` forbids falling back); where only the converted data shows it (a
weighted PageRank, real weights), the function raises NotImplementedError, which NetworkX's
dispatcher also answers by running the call itself. Which functions are implemented, and with
what limits, is listed in :mod:`groute.nx_backend.info`.

Each family module also names the NetworkX test modules that exercise its functions
(``NX_TEST_MODULES``) and the tests of them expected to fail (``EXPECTED_FAILURES``), which
``tests/test_nx_suite.py`` runs through the backend.
"""
from __future__ import annotations

from . import (centrality, cluster, community, components, cores, distance_measures,
               link_analysis, link_prediction, shortest_paths, structure, traversal, trees)

FAMILIES = (traversal, shortest_paths, distance_measures, components, cores, structure, cluster,
            link_prediction, centrality, link_analysis, community, trees)


def function(name: str):
    """The implementation of NetworkX's function ``name``, None when the backend has none."""
    for family in FAMILIES:
        fn = getattr(family, name, None)
        if callable(fn) and not name.startswith("_"):
            return fn
    return None


def nx_test_modules() -> list[str]:
    """NetworkX's test modules that exercise the implemented functions."""
    return [m for family in FAMILIES for m in family.NX_TEST_MODULES]


def expected_failures() -> dict[str, str]:
    """Every family's NetworkX tests expected to fail through the backend, with the reason."""
    return {k: v for family in FAMILIES for k, v in family.EXPECTED_FAILURES.items()}
