"""Distance measures: eccentricity from groute's BFS (or SSSP) run from each node asked for, on
one solver kept open across them."""
from __future__ import annotations

import networkx as nx
import numpy as np

from .support import exact_weights, rule, traversals, weight_is_attribute

_MEASURES = "networkx.algorithms.tests.test_distance_measures"
#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py):
#: test_distance_measures but its sweep of 500 random graphs
#: (TestDistance.test_use_bounds_on_off_consistency), which asks for sixteen diameters, radii,
#: centers and peripheries per graph, each a groute run per node: minutes through the backend
#: (the solvers' fixed cost per call on two CPU virtual devices) for no case the tests below
#: leave out
NX_TEST_MODULES = [f"{_MEASURES}::{name}" for name in (
    "test__extrema_bounding_invalid_compute_kwarg", "TestWeightedDistance",
    "TestResistanceDistance", "TestEffectiveGraphResistance", "TestBarycenter",
    "TestKemenyConstant",
    *(f"TestDistance::{test}" for test in (
        "test_eccentricity", "test_diameter", "test_harmonic_diameter",
        "test_harmonic_diameter_empty", "test_harmonic_diameter_single_node",
        "test_harmonic_diameter_discrete", "test_harmonic_diameter_not_strongly_connected",
        "test_harmonic_diameter_weighted_paths", "test_radius", "test_periphery",
        "test_center_simple_tree", "test_center_balanced_tree", "test_center",
        "test_center_path_graphs", "test_bound_diameter", "test_bound_radius",
        "test_bound_periphery", "test_bound_center", "test_radius_exception",
        "test_eccentricity_infinite", "test_eccentricity_undirected_not_connected",
        "test_eccentricity_directed_weakly_connected")))]

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def _no_lengths_given(args):
    if args["sp"] is not None:
        return "sp given: NetworkX reads the eccentricities off the lengths it is handed"
    return weight_is_attribute(args)


class _Nodes:
    """What ``nx.Graph.nbunch_iter`` reads of a graph (``in`` and ``_adj``), so that a
    converted graph takes ``v`` exactly as NetworkX does: a node, a container of nodes (those
    not in the graph skipped), and NetworkX's errors for anything else."""

    def __init__(self, G):
        self._G, self._adj = G, G.index

    def __contains__(self, node) -> bool:
        return node in self._G


@rule(_no_lengths_given)
def eccentricity(G, v=None, sp=None, weight=None):
    """The greatest distance from each node of ``v`` (NetworkX's nbunch), NetworkX's
    NetworkXError when one does not reach every node; hops when ``weight`` is None, else
    weighted distances as ``single_source_dijkstra_path_length`` takes them."""
    kind = "unit" if weight is None else exact_weights(G, weight)
    order = len(G)
    e = {}
    if not order:           # no node to ask for; v's errors are still NetworkX's
        return dict.fromkeys(nx.Graph.nbunch_iter(_Nodes(G), v))
    with traversals(G, "bfs" if kind == "unit" else "sssp") as run:
        for n in nx.Graph.nbunch_iter(_Nodes(G), v):
            length = run(G.position(n))
            reached = length >= 0 if kind == "unit" else np.isfinite(length)
            if int(np.count_nonzero(reached)) != order:
                what = ("digraph is not strongly connected" if G.is_directed()
                        else "graph is not connected")
                raise nx.NetworkXError(f"Found infinite path length because the {what}")
            far = length[reached].max()
            e[n] = float(far) if kind == "float" else int(far)
    if v in G:
        return e[v]
    return e
