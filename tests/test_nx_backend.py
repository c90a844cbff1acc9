"""The NetworkX backend (groute.nx_backend): dispatch, answers against NetworkX's own on the
same calls (values, order, types, errors), fallbacks, conversions and their cache, contexts.

NetworkX's own test suite through the backend is tests/test_nx_suite.py.
"""
from __future__ import annotations

import random
import re
import tomllib
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from groute.nx_backend import devices, info
from nx_support import on_cpu_devices, on_devices, registered  # noqa: F401 (fixtures)
from groute.runtime import kept
from groute.nx_backend.graph import GrouteGraph, from_networkx, to_networkx
from groute.nx_backend.interface import backend_interface

ROOT = Path(__file__).resolve().parents[1]


def graphs():
    """Small graphs of several kinds: labels of any hashable type, isolated nodes, several
    components, self-loops, directed."""
    g1 = nx.gnm_random_graph(60, 90, seed=3)
    g1.add_edge(5, 5)
    g2 = nx.relabel_nodes(nx.gnm_random_graph(50, 70, seed=4, directed=True),
                          lambda i: f"v{i}")
    g3 = nx.relabel_nodes(nx.grid_2d_graph(5, 6), {(0, 0): "corner"})   # tuples and a string
    g3.add_node(("lonely", 1))
    g4 = nx.path_graph(6, create_using=nx.DiGraph)
    g4.add_nodes_from([100, -1])
    return [("gnm", g1), ("digraph-str", g2), ("grid-tuples", g3), ("path-isolated", g4)]


GRAPHS = graphs()


def first(G):
    return next(iter(G))


# ------------------------------------------------------------------------------------------------
# registration and configuration
# ------------------------------------------------------------------------------------------------
def test_entry_points_name_the_interface_and_info():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["networkx.backends"]["groute"] == "groute.nx_backend.interface:backend_interface"
    assert eps["networkx.backend_info"]["groute"] == "groute.nx_backend.info:get_info"
    got = info.get_info()
    assert got["backend_name"] == "groute"
    assert set(got["functions"]) == set(info.FUNCTIONS)
    assert got["default_config"] == {"backend": "auto", "devices": None, "partition": "auto",
                                     "fallback_to_nx": True}


def test_interface_has_every_listed_function():
    from groute.nx_backend import algorithms
    for name in info.FUNCTIONS:
        assert getattr(backend_interface, name).__wrapped__ is algorithms.function(name)
        # a NetworkX function dispatched by that name (bipartite.color's is "color")
        assert name in nx.utils.backends._registered_algorithms


def test_registering_again_after_unregistering_works():
    """A checkout run from ``PYTHONPATH`` registers the backend by hand in every test module
    (nx_support) and unregisters it after: the second module's registration must find the
    first one's configuration and keep it, and dispatch must work again."""
    from groute.nx_backend import registration
    for _ in range(2):          # leaves it registered, as the module's fixture has it
        registration.unregister()
        assert registration.register() is True
        assert nx.single_source_shortest_path_length(nx.path_graph(3), 0,
                                                     backend="groute") == {0: 0, 1: 1, 2: 2}


def test_registering_where_networkx_found_no_backend_dispatches():
    """A GPU machine's copy of the tree (``PYTHONPATH``, nothing installed): NetworkX imported
    without any backend's entry point must still dispatch to groute once it is registered by
    hand (a subprocess, so its NetworkX finds no entry point)."""
    import subprocess
    import sys
    code = ("import importlib.metadata as m; m.entry_points = lambda **kw: ();"
            "import networkx as nx; from networkx.utils import backends as b;"
            "assert not b.backends, b.backends;"
            "from groute.nx_backend import registration; assert registration.register();"
            "print(nx.single_source_shortest_path_length(nx.path_graph(3), 0, backend='groute'))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "{0: 0, 1: 1, 2: 2}"


@pytest.mark.parametrize("key,value", [("backend", "gpu"), ("devices", 0), ("devices", 1.5),
                                       ("devices", True), ("partition", "hash")])
def test_config_bad_values_are_named(key, value):
    with nx.config.backends.groute(**{key: value}):
        with pytest.raises(ValueError, match=f"nx.config.backends.groute.{key}"):
            nx.single_source_shortest_path_length(nx.path_graph(3), 0, backend="groute")


def test_info_imports_nothing():
    """NetworkX calls get_info while it is being imported: importing groute's backend first
    must not leave info half-initialised (a subprocess, so NetworkX is not yet imported)."""
    import subprocess
    import sys
    code = ("import warnings; warnings.simplefilter('error');"
            "import groute.nx_backend.interface, networkx as nx;"
            "print(sorted(nx.utils.backends.backend_info.get('groute', {}).get('functions', [])))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    if "groute" in run.stdout:          # registered where this checkout is installed
        assert run.stdout.strip() == str(sorted(info.FUNCTIONS))


def test_device_count_rule():
    from groute.graph import load_graph
    from groute.graph import CSRGraph
    big, two = load_graph("grid:10"), load_graph("grid:1x2")
    empty = CSRGraph.from_edges([], [], 0)
    assert devices.device_count("cpu", None, big, "iterate") == 1     # the algorithms' auto
    assert devices.device_count("cpu", 3, big, "relax") == 3
    assert devices.device_count("cpu", 3, two, "relax") == 2
    assert devices.device_count("cpu", 4, empty, "operators") == 1


# ------------------------------------------------------------------------------------------------
# answers equal NetworkX's
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
@pytest.mark.parametrize("cutoff", [None, 0, 2, 2.5, -1])
def test_bfs_lengths_in_networkx_order(on_devices, name, G, cutoff):
    for source in list(G)[:3]:
        want = nx.single_source_shortest_path_length(G, source, cutoff=cutoff)
        got = nx.single_source_shortest_path_length(G, source, cutoff=cutoff, backend="groute")
        assert list(got.items()) == list(want.items())
        assert all(type(v) is int for v in got.values())


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
def test_bfs_layers_in_networkx_order(on_devices, name, G):
    for source in list(G)[:3]:
        assert list(nx.bfs_layers(G, source, backend="groute")) == list(nx.bfs_layers(G, source))
        assert list(nx.bfs_layers(G, [source], backend="groute")) == \
            list(nx.bfs_layers(G, [source]))


def weighted(G, kind, seed=0):
    rng = np.random.default_rng(seed)
    H = G.copy()
    for u, v in H.edges():
        w = int(rng.integers(0, 9))
        H[u][v]["weight"] = float(w) if kind == "float" else w
    return H


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
@pytest.mark.parametrize("kind", ["int", "float"])
@pytest.mark.parametrize("cutoff", [None, 5, 7.5])
def test_dijkstra_lengths_equal_networkx(on_devices, name, G, kind, cutoff):
    H = weighted(G, kind)
    source = first(H)
    want = nx.single_source_dijkstra_path_length(H, source, cutoff=cutoff)
    got = nx.single_source_dijkstra_path_length(H, source, cutoff=cutoff, backend="groute")
    assert got == want
    assert [type(v) for v in got.values()] == [type(want[k]) for k in got]
    assert list(got) == sorted(got, key=got.__getitem__)     # by distance, the source first
    assert next(iter(got)) == source
    also = nx.shortest_path_length(H, source, weight="weight", backend="groute")
    assert also == nx.shortest_path_length(H, source, weight="weight")


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
def test_unweighted_dijkstra_in_networkx_order(on_devices, name, G):
    source = first(G)
    want = nx.single_source_dijkstra_path_length(G, source, weight=None)
    got = nx.single_source_dijkstra_path_length(G, source, weight=None, backend="groute")
    assert list(got.items()) == list(want.items())
    got = nx.shortest_path_length(G, source, backend="groute")
    assert list(got.items()) == list(nx.shortest_path_length(G, source).items())


def test_multigraph_dijkstra_takes_the_lightest_parallel_edge(on_devices):
    G = nx.MultiGraph()
    G.add_edge("a", "b", weight=5)
    G.add_edge("a", "b", weight=2)
    G.add_edge("b", "c")                    # weighs 1
    G.add_edge("a", "c", weight=4)
    want = nx.single_source_dijkstra_path_length(G, "a")
    assert nx.single_source_dijkstra_path_length(G, "a", backend="groute") == want == \
        {"a": 0, "b": 2, "c": 3}


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
def test_components_in_networkx_order(on_devices, name, G):
    if G.is_directed():
        assert list(nx.weakly_connected_components(G, backend="groute")) == \
            list(nx.weakly_connected_components(G))
        with pytest.raises(nx.NetworkXNotImplemented):
            nx.connected_components(G, backend="groute")
        return
    assert list(nx.connected_components(G, backend="groute")) == list(nx.connected_components(G))
    assert nx.number_connected_components(G, backend="groute") == \
        nx.number_connected_components(G)
    assert nx.is_connected(G, backend="groute") is nx.is_connected(G)
    for node in list(G)[:5] + [("lonely", 1)] * (("lonely", 1) in G):
        assert nx.node_connected_component(G, node, backend="groute") == \
            nx.node_connected_component(G, node)
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.weakly_connected_components(G, backend="groute")


def test_connected_graph_and_null_graph(on_devices):
    G = nx.cycle_graph(7)
    assert nx.is_connected(G, backend="groute") is True
    with pytest.raises(nx.NetworkXPointlessConcept):
        nx.is_connected(nx.Graph(), backend="groute")
    assert list(nx.connected_components(nx.Graph(), backend="groute")) == []
    assert nx.number_connected_components(nx.Graph(), backend="groute") == 0


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
@pytest.mark.parametrize("alpha", [0.85, 0.5])
def test_pagerank_matches_networkx(on_cpu_devices, name, G, alpha):
    want = nx.pagerank(G, alpha=alpha, tol=1e-12, max_iter=1000)
    got = nx.pagerank(G, alpha=alpha, tol=1e-12, max_iter=1000, backend="groute")
    assert list(got) == list(want)
    assert all(type(v) is float for v in got.values())
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9


def test_pagerank_edges_of_one_weight_are_unweighted(on_cpu_devices):
    G = nx.gnm_random_graph(40, 100, seed=1, directed=True)
    nx.set_edge_attributes(G, 3.0, "weight")
    want = nx.pagerank(G, tol=1e-12)
    got = nx.pagerank(G, tol=1e-12, backend="groute")
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9


def test_pagerank_not_converged_raises_as_networkx(on_cpu_devices):
    G = nx.gnm_random_graph(40, 100, seed=1, directed=True)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(G, tol=1e-15, max_iter=2)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(G, tol=1e-15, max_iter=2, backend="groute")
    assert nx.pagerank(nx.DiGraph(), backend="groute") == {}


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
@pytest.mark.parametrize("depth_limit", [None, 0, 1, 2.5])
def test_bfs_predecessors_are_networkx_choice(on_devices, name, G, depth_limit):
    """NetworkX's predecessor is the first neighbour one layer up in its visiting order."""
    for source in list(G)[:3]:
        got = nx.bfs_predecessors(G, source, depth_limit=depth_limit, backend="groute")
        assert list(got) == list(nx.bfs_predecessors(G, source, depth_limit=depth_limit))


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
def test_core_number_equals_networkx(on_devices, name, G):
    H = G.copy()
    H.remove_edges_from(nx.selfloop_edges(H))
    got = nx.core_number(H, backend="groute")
    assert list(got.items()) == list(nx.core_number(H).items())
    assert all(type(v) is int for v in got.values())
    with pytest.raises(nx.NetworkXNotImplemented, match="self loops"):
        nx.core_number(nx.Graph([(1, 1), (1, 2)]), backend="groute")
    assert nx.core_number(nx.Graph(), backend="groute") == {}


def scc_graphs():
    """Directed graphs of many shapes of strongly connected components (chains, trees and
    crossings of them, self-loops, parallel arcs), labels not in position order."""
    out = []
    for seed in range(8):
        G = nx.gnm_random_graph(40, 50 + 4 * seed, seed=seed, directed=True)
        G.add_edge(3, 3)
        out.append(nx.relabel_nodes(G, {i: f"n{(i * 7) % 40}" for i in G}))
    M = nx.MultiDiGraph([(0, 1), (0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (0, 4)])
    return out + [M, nx.cycle_graph(6, create_using=nx.DiGraph)]


@pytest.mark.parametrize("G", [G for _, G in GRAPHS if G.is_directed()] + scc_graphs())
def test_strongly_connected_components_in_networkx_order(on_devices, G):
    """NetworkX's Tarjan order (condensation numbers the components by it)."""
    got = nx.strongly_connected_components(G, backend="groute")
    assert list(got) == list(nx.strongly_connected_components(G))
    with nx.config.backend_priority(algos=["groute"]):
        C = nx.condensation(G)
    assert C.graph["mapping"] == nx.condensation(G).graph["mapping"]


def test_strongly_connected_components_errors(on_devices):
    with pytest.raises(nx.NetworkXNotImplemented):
        next(nx.strongly_connected_components(nx.path_graph(3), backend="groute"))
    assert list(nx.strongly_connected_components(nx.DiGraph(), backend="groute")) == []


def bc_calls(seed):
    """Betweenness arguments, with a seed NetworkX's py_random_state takes (a fresh one per
    call, so that both runs start from the same state)."""
    return [{}, {"normalized": False}, {"endpoints": True},
            {"k": 7, "seed": seed}, {"k": 7, "seed": random.Random(seed), "endpoints": True},
            {"k": 5, "seed": np.random.RandomState(seed), "normalized": False},
            {"k": 1, "seed": seed}]


@pytest.mark.parametrize("name,G", GRAPHS + [("multi", nx.MultiGraph(nx.path_graph(5)))],
                         ids=[n for n, _ in GRAPHS] + ["multi"])
def test_betweenness_equals_networkx(on_devices, name, G):
    for want_kw, got_kw in zip(bc_calls(11), bc_calls(11)):
        try:
            want = nx.betweenness_centrality(G, **want_kw)
        except ValueError as exc:   # NetworkX's NumPy sample of tuple nodes: the same error
            with pytest.raises(ValueError, match=re.escape(str(exc))):
                nx.betweenness_centrality(G, backend="groute", **got_kw)
            continue
        got = nx.betweenness_centrality(G, backend="groute", **got_kw)
        assert list(got) == list(want)
        assert all(type(v) is float for v in got.values())
        assert max(abs(got[u] - want[u]) for u in want) < 1e-12, want_kw
        if "seed" in want_kw and not isinstance(want_kw["seed"], int):  # the state left behind
            assert got_kw["seed"].random() == want_kw["seed"].random()


def test_betweenness_k_as_networkx(on_devices):
    G = nx.cycle_graph(4)
    with pytest.raises(ValueError, match="larger"):
        nx.betweenness_centrality(G, k=5, backend="groute")
    with pytest.raises(ValueError, match="negative"):
        nx.betweenness_centrality(G, k=-1, backend="groute")
    with pytest.raises(ZeroDivisionError, match="no sources"):
        nx.betweenness_centrality(G, k=0, backend="groute")
    for tiny in (nx.empty_graph(1), nx.path_graph(2)):      # no rescaling: NetworkX's zeros
        assert nx.betweenness_centrality(tiny, k=0, backend="groute") == \
            nx.betweenness_centrality(tiny, k=0, backend="networkx")
    rng = random.Random(5)
    assert nx.betweenness_centrality(G, k=4, seed=rng, backend="groute") == \
        nx.betweenness_centrality(G, backend="groute")
    assert rng.random() == random.Random(5).random()       # k == len(G): no sample drawn
    assert nx.betweenness_centrality(nx.Graph(), backend="groute") == {}


def path_outcome(G, s, t, **kwargs):
    """NetworkX's path from groute, None where groute declined (NetworkX would run it)."""
    try:
        return nx.shortest_path(G, s, t, backend="groute", **kwargs)
    except NotImplementedError:
        return None
    except nx.NetworkXNoPath:
        return nx.NetworkXNoPath


@pytest.mark.parametrize("name,G", GRAPHS, ids=[n for n, _ in GRAPHS])
@pytest.mark.parametrize("kind", [None, "int", "float"])
def test_shortest_path_is_networkx_path_or_declined(on_devices, name, G, kind):
    H = G if kind is None else weighted(G, kind)
    weight = None if kind is None else "weight"
    nodes = list(H)
    answered = 0
    for s in nodes[:3]:
        for t in nodes[-6:]:
            got = path_outcome(H, s, t, weight=weight)
            try:
                want = nx.shortest_path(H, s, t, weight=weight)
            except nx.NetworkXNoPath:
                want = nx.NetworkXNoPath
            assert got is None or got == want, (s, t)
            answered += got is not None
    if kind is None and not H.is_directed():
        assert answered == 18       # NetworkX's bidirectional BFS replayed: never declined
    assert answered


def test_shortest_path_ties_undirected_unweighted(on_devices):
    """Among equally short paths, the one NetworkX's bidirectional BFS meets first."""
    G = nx.grid_2d_graph(6, 7)
    for s, t in [((0, 0), (5, 6)), ((5, 6), (0, 0)), ((2, 3), (0, 0)), ((0, 6), (5, 0))]:
        assert nx.shortest_path(G, s, t, backend="groute") == nx.shortest_path(G, s, t)
    with pytest.raises(NotImplementedError):            # weighted ties: NetworkX's to choose
        nx.shortest_path(G, (0, 0), (5, 6), weight="weight", backend="groute")
    with nx.config.backend_priority(algos=["groute"]):
        assert nx.shortest_path(G, (0, 0), (5, 6), weight="weight") == \
            nx.shortest_path(G, (0, 0), (5, 6), weight="weight", backend="networkx")


def test_shortest_path_errors(on_devices):
    G = nx.path_graph(4)
    G.add_node(9)
    with pytest.raises(nx.NodeNotFound, match="Source 7 is not in G"):
        nx.shortest_path(G, 7, 1, backend="groute")
    with pytest.raises(nx.NodeNotFound, match="Target 7 is not in G"):
        nx.shortest_path(G, 1, 7, weight="weight", backend="groute")
    for weight in (None, "weight"):
        with pytest.raises(nx.NetworkXNoPath, match="No path between 0 and 9"):
            nx.shortest_path(G, 0, 9, weight=weight, backend="groute")
        assert nx.shortest_path(G, 2, 2, weight=weight, backend="groute") == [2]
    with pytest.raises(ValueError, match="method not supported"):
        nx.shortest_path(G, 0, 3, method="astar", backend="groute")
    with pytest.raises(nx.NetworkXError, match="The node 7 is not in the digraph"):
        list(nx.bfs_predecessors(G.to_directed(), 7, backend="groute"))


# ------------------------------------------------------------------------------------------------
# errors as NetworkX's
# ------------------------------------------------------------------------------------------------
def test_missing_source_errors(on_devices):
    G = nx.path_graph(4)
    with pytest.raises(nx.NodeNotFound, match="Source 9 is not in G"):
        nx.single_source_shortest_path_length(G, 9, backend="groute")
    with pytest.raises(nx.NodeNotFound, match="Node 9 not found in graph"):
        nx.single_source_dijkstra_path_length(G, 9, backend="groute")
    with pytest.raises(nx.NodeNotFound):
        nx.shortest_path_length(G, [1], backend="groute")       # unhashable: not a node
    with pytest.raises(nx.NetworkXError, match="The node 9 is not in the graph"):
        list(nx.bfs_layers(G, [9], backend="groute"))
    with pytest.raises(KeyError):
        nx.node_connected_component(G, 9, backend="groute")
    with pytest.raises(ValueError, match="method not supported"):
        nx.shortest_path_length(G, 0, method="astar", backend="groute")


# ------------------------------------------------------------------------------------------------
# what groute cannot honour: NetworkX runs the call
# ------------------------------------------------------------------------------------------------
DECLINED = {
    "nstart": (nx.pagerank, (), {"nstart": {0: 1}}),
    "alpha=1": (nx.pagerank, (), {"alpha": 1.0}),
    "max_iter=0": (nx.pagerank, (), {"max_iter": 0}),
    "weight-fn": (nx.single_source_dijkstra_path_length, (0,), {"weight": lambda u, v, d: 2}),
    "bellman-ford": (nx.shortest_path_length, (0,), {"weight": "weight",
                                                     "method": "bellman-ford"}),
    "target": (nx.shortest_path_length, (), {"target": 3}),
    "two-sources": (nx.bfs_layers, ([0, 3],), {}),
    "sort_neighbors": (nx.bfs_predecessors, (0,), {"sort_neighbors": sorted}),
    "path-no-target-weighted": (nx.shortest_path, (0,), {"weight": "weight"}),
    "path-no-source": (nx.shortest_path, (), {"target": 3}),
    "path-bellman-ford": (nx.shortest_path, (0, 3), {"weight": "weight",
                                                   "method": "bellman-ford"}),
    "bc-weight-fn": (nx.betweenness_centrality, (), {"weight": lambda u, v, d: 2}),
}


@pytest.mark.parametrize("case", list(DECLINED))
def test_can_run_declines(case):
    fn, args, kwargs = DECLINED[case]
    G = nx.gnm_random_graph(12, 30, seed=2, directed=True)

    def answer(**backend):
        try:
            out = fn(G, *args, **kwargs, **backend)
            return list(out) if case in ("two-sources", "sort_neighbors") else out
        except nx.NetworkXException as exc:
            return type(exc)
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        fn(G, *args, **kwargs, backend="groute")
    with nx.config.backend_priority(algos=["groute"]):      # automatic dispatch falls back
        fallback = answer()
    assert fallback == answer(backend="networkx")


def test_multigraph_pagerank_and_iterator_sources_decline():
    G = nx.MultiDiGraph([(0, 1), (0, 1), (1, 0)])
    with pytest.raises(NotImplementedError):
        nx.pagerank(G, backend="groute")
    with pytest.raises(NotImplementedError):
        list(nx.bfs_layers(nx.path_graph(3), iter([0]), backend="groute"))


@pytest.mark.parametrize("weights,why", [
    ({"w": 0.5}, "real weights"), ({"w": -1}, "negative weights"),
    ({"w": 2**31}, "int32"), ({"w": "heavy"}, "cannot convert"),
    ({"w": None}, "w=None")])
def test_weights_groute_cannot_sum_exactly_fall_back(weights, why):
    """(An edge whose weight is None: NetworkX's Dijkstra hides it; groute gave it 1.)"""
    G = nx.path_graph(5)
    nx.set_edge_attributes(G, 1, "w")
    G[1][2]["w"] = weights["w"]
    with pytest.raises(NotImplementedError) as err:
        nx.single_source_dijkstra_path_length(G, 0, weight="w", backend="groute")
    assert why in str(err.value.__cause__)
    with nx.config.backend_priority(algos=["groute"]):     # NetworkX's answer or error
        fallback = outcome(nx.single_source_dijkstra_path_length, G, 0, weight="w")
    assert fallback == outcome(nx.single_source_dijkstra_path_length, G, 0, weight="w",
                               backend="networkx")


def outcome(fn, *args, **kwargs):
    """``fn``'s answer, or the type of the exception it raised."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return type(exc)


@pytest.mark.parametrize("options", [
    {}, {"personalization": {0: 1.0, 2: 3.0, "nope": 9.0}},
    {"dangling": {2: 1.0}}, {"personalization": {1: 1.0}, "dangling": {0: 2.0, 3: 1.0}},
    {"weight": None, "dangling": {3: 1.0}}], ids=str)
def test_weighted_and_personalized_pagerank_run_on_groute(on_cpu_devices, options):
    """Unequal weights, personalization and dangling are groute's now: the call runs on
    the backend (no fallback) and answers as NetworkX (keys that are not nodes are ignored,
    as NetworkX reads only the nodes')."""
    G = nx.DiGraph([(0, 1, {"weight": 1}), (1, 2, {"weight": 2}), (2, 0, {"weight": 1}),
                    (2, 1, {"weight": 0.5}), (1, 3, {"weight": 4})])
    want = nx.pagerank(G, tol=1e-12, max_iter=1000, **options)
    got = nx.pagerank(G, tol=1e-12, max_iter=1000, backend="groute", **options)
    assert list(got) == list(want)
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9


@pytest.mark.parametrize("dangling", [{2: 0}, {"not a node": 1.0}], ids=str)
def test_pagerank_with_dangling_weights_of_sum_zero_fails_to_converge_as_networkx(
        on_cpu_devices, dangling):
    """NetworkX divides the dangling weights by their sum: all of them zero (or none a node),
    every rank is NaN and its iteration fails to converge; groute's PageRank would refuse the
    zeros with a ZeroDivisionError, which is not NetworkX's error."""
    D = nx.DiGraph([(0, 1), (1, 2)])
    assert outcome(nx.pagerank, D, dangling=dangling) is nx.PowerIterationFailedConvergence
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(D, dangling=dangling, backend="groute")


def test_pagerank_with_negative_weights_falls_back():
    G = nx.DiGraph([(0, 1, {"weight": 1}), (1, 2, {"weight": -2}), (2, 0, {"weight": 1})])
    with pytest.raises(NotImplementedError):
        nx.pagerank(G, backend="groute")


# ------------------------------------------------------------------------------------------------
# conversions, their cache, the contexts
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [nx.Graph, nx.DiGraph, nx.MultiGraph])
def test_round_trip_through_groute_graph(cls):
    G = cls()
    G.add_nodes_from(["x", ("t", 1), 7])
    G.add_edge("x", ("t", 1), weight=3)
    G.add_edge(("t", 1), 7)
    G.add_edge(7, 7, weight=2)
    G.graph["title"] = "small"
    R = from_networkx(G, edge_attrs={"weight": 1}, preserve_graph_attrs=True)
    assert isinstance(R, GrouteGraph) and R.__networkx_backend__ == "groute"
    assert R.is_directed() is G.is_directed() and R.is_multigraph() is G.is_multigraph()
    assert list(R) == list(G) and len(R) == 3 and "x" in R and [1] not in R
    back = to_networkx(R)
    assert type(back) is cls and back.graph == {"title": "small"} and list(back) == list(G)
    assert sorted(map(str, back.edges(data="weight"))) == \
        sorted(map(str, G.edges(data="weight", default=1)))
    assert to_networkx({"a": 1}) == {"a": 1}


def test_conversions_ask_for_one_numeric_attribute():
    G = nx.path_graph(3)
    with pytest.raises(NotImplementedError):
        from_networkx(G, edge_attrs={"a": 1, "b": 1})
    with pytest.raises(NotImplementedError):
        from_networkx(G, edge_attrs={"a": 0})
    with pytest.raises(NotImplementedError):
        from_networkx(G, node_attrs={"x": None})


def test_conversion_is_cached_until_the_graph_changes(on_devices):
    G = nx.path_graph(5)
    assert nx.single_source_shortest_path_length(G, 0, backend="groute")[4] == 4
    cache = G.__networkx_cache__["backends"]["groute"]
    [converted] = cache.values()
    assert isinstance(converted, GrouteGraph)
    nx.single_source_shortest_path_length(G, 0, backend="groute")
    assert list(cache.values()) == [converted]          # reused, not converted again
    G.add_edge(0, 4)                                    # clears NetworkX's cache
    assert nx.single_source_shortest_path_length(G, 0, backend="groute")[4] == 1


def _kept_context(count):
    """The kept CPU context of ``count`` devices the backend leases (groute.runtime.kept: the
    default timeout)."""
    from groute.config import resolve_timeout
    [ctx] = [c for key, (c, _) in kept._kept.items()
             if key[:3] == ("cpu", count, resolve_timeout(None))]
    return ctx


def test_contexts_are_kept_and_replaced_after_a_failure(on_cpu_devices):
    G = nx.path_graph(5)
    nx.single_source_shortest_path_length(G, 0, backend="groute")
    ctx = _kept_context(on_cpu_devices)
    nx.pagerank(G, backend="groute")
    assert _kept_context(on_cpu_devices) is ctx
    ctx.fail("cpu0", RuntimeError("simulated failure"))
    assert nx.single_source_shortest_path_length(G, 0, backend="groute")[4] == 4
    assert _kept_context(on_cpu_devices) is not ctx


def test_a_weighted_conversion_serves_unweighted_calls_unweighted(on_devices):
    """NetworkX's cache hands a call that reads no weight the graph converted with weights."""
    G = nx.path_graph(4)
    nx.set_edge_attributes(G, 5, "weight")
    assert nx.single_source_dijkstra_path_length(G, 0, backend="groute")[3] == 15
    [converted] = G.__networkx_cache__["backends"]["groute"].values()
    assert converted.weights is not None
    assert nx.single_source_dijkstra_path_length(G, 0, weight=None, backend="groute")[3] == 3
    assert nx.shortest_path_length(G, 0, backend="groute")[3] == 3
    assert list(G.__networkx_cache__["backends"]["groute"].values()) == [converted]


@pytest.mark.parametrize("doc", ["README.md", "docs/NETWORKX.md"])
def test_documented_examples_run(doc, on_devices):
    import re
    text = (ROOT / doc).read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "groute" in b]
    assert blocks, f"{doc} lost its NetworkX example"
    saved = nx.config.backend_priority.algos
    namespace = {}                      # a later block uses what an earlier one defined
    try:
        for block in blocks:
            exec(compile(block, doc, "exec"), namespace)
    finally:
        nx.config.backend_priority.algos = saved


def test_pagerank_runs_networkx_power_iteration_whatever_pagerank_auto_picks(on_cpu_devices,
                                                                            monkeypatch):
    """NetworkX's max_iter and tol count power iterations: the backend asks for BSP itself."""
    from groute.apps.auto_rules import PR_RULES, Case, Rule
    monkeypatch.setitem(PR_RULES, "mode", Rule("mode", (Case((), "async", "as if"),)))
    G = nx.gnm_random_graph(40, 100, seed=1, directed=True)
    want = nx.pagerank(G, tol=1e-12)
    got = nx.pagerank(G, tol=1e-12, backend="groute")
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(G, tol=1e-15, max_iter=2, backend="groute")


@pytest.mark.gpu
def test_pagerank_on_a_gpu_in_float32():
    """On a GPU PageRank computes in float32: NetworkX's tolerance is met at the default tol
    (an L1 change of N * tol), and a tol below float32's reach is declined (NetworkX runs the
    call, or raises where the backend was named; NotRunOnGroute with fallback_to_nx off)
    rather than failing to converge."""
    from groute.errors import NotRunOnGroute
    G = nx.gnm_random_graph(60, 200, seed=2, directed=True)
    with nx.config.backends.groute(backend="cuda", devices=1):
        want = nx.pagerank(G)
        got = nx.pagerank(G, backend="groute")
        assert list(got) == list(want)
        assert sum(abs(got[k] - want[k]) for k in want) <= 2 * len(G) * 1e-6
        with pytest.raises(NotImplementedError):     # NetworkX's answer to a named backend
            nx.pagerank(G, tol=1e-12, backend="groute")
        with nx.config.backends.groute(fallback_to_nx=False):
            with pytest.raises(NotRunOnGroute, match="float32"):
                nx.pagerank(G, tol=1e-12, backend="groute")


def test_answers_are_keyed_by_the_nodes_themselves(on_cpu_devices):
    """Integer nodes of another type than int (an IntEnum, NumPy's ints) come back as the
    objects the graph holds, as NetworkX gives them (the CSR's int64 ids gave plain ints)."""
    import enum

    class Colour(enum.IntEnum):
        RED = 1
        BLUE = 2
        GREEN = 3

    for nodes in ([Colour.RED, Colour.BLUE, Colour.GREEN],
                  [np.int64(5), np.int64(3), np.int64(9)]):
        G = nx.path_graph(nodes)
        for call in (lambda **kw: nx.single_source_shortest_path_length(G, nodes[0], **kw),
                     lambda **kw: list(nx.connected_components(G, **kw))[0]):
            want, got = call(), call(backend="groute")
            assert [type(u) for u in got] == [type(u) for u in want], (got, want)
            assert list(got) == list(want)
