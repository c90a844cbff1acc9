"""The NetworkX backend's traversal, path, distance and spanning tree functions
(groute.nx_backend.algorithms: traversal, shortest_paths, distance_measures, trees) against
NetworkX's own answers on the same calls: values, order, types, errors, and the calls NetworkX
runs instead.

NetworkX's own tests of them, through the backend, are tests/test_nx_suite.py.
"""
from __future__ import annotations

import math
import random
import shutil

import networkx as nx
import numpy as np
import pytest

from groute.nx_backend.algorithms import boruvka, shortest_paths, support
from groute.nx_backend.graph import from_networkx
from nx_support import on_devices, registered  # noqa: F401 (fixtures)


def graphs():
    """Small graphs of several kinds: labels of any hashable type, isolated nodes, several
    components, self-loops, directed, a multigraph."""
    g1 = nx.gnm_random_graph(40, 60, seed=3)
    g1.add_edge(5, 5)
    g2 = nx.relabel_nodes(nx.gnm_random_graph(30, 50, seed=4, directed=True),
                          lambda i: f"v{i}")
    g3 = nx.relabel_nodes(nx.grid_2d_graph(4, 5), {(0, 0): "corner"})   # tuples and a string
    g3.add_node(("lonely", 1))
    g4 = nx.path_graph(6, create_using=nx.DiGraph)
    g4.add_nodes_from([100, -1])
    g5 = nx.MultiGraph(nx.cycle_graph(7))
    g5.add_edges_from([(0, 1), (3, 3)])
    return [("gnm", g1), ("digraph-str", g2), ("grid-tuples", g3), ("path-isolated", g4),
            ("multi", g5)]


GRAPHS = graphs()
IDS = [name for name, _ in GRAPHS]


def outcome(fn, *args, **kwargs):
    """``fn``'s answer (a generator's items as a list, a graph's nodes and edges), or the type
    and text of what it raised."""
    try:
        out = fn(*args, **kwargs)
        if isinstance(out, nx.Graph):
            return list(out.nodes(data=True)), list(out.edges(data=True))
        return list(out) if hasattr(out, "__next__") else out
    except Exception as exc:
        return type(exc), str(exc)


# ------------------------------------------------------------------------------------------------
# breadth-first trees, descendants and ancestors
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("depth_limit", [None, 0, 1, 2.5])
def test_bfs_edges_tree_and_successors_in_networkx_order(on_devices, name, G, depth_limit):
    for source in list(G)[:3]:
        for fn in (nx.bfs_edges, nx.bfs_successors):
            assert list(fn(G, source, depth_limit=depth_limit, backend="groute")) == \
                list(fn(G, source, depth_limit=depth_limit))
        got = nx.bfs_tree(G, source, depth_limit=depth_limit, backend="groute")
        want = nx.bfs_tree(G, source, depth_limit=depth_limit)
        assert type(got) is nx.DiGraph
        assert list(got.nodes) == list(want.nodes) and list(got.edges) == list(want.edges)
    if not G.is_directed():     # reverse changes nothing there
        assert list(nx.bfs_edges(G, source, reverse=True, backend="groute")) == \
            list(nx.bfs_edges(G, source))


def test_bfs_edges_yield_the_source_as_the_caller_named_it(on_devices):
    G = nx.path_graph(4)
    got = list(nx.bfs_edges(G, 1.0, backend="groute"))
    assert got == list(nx.bfs_edges(G, 1.0)) == [(1, 0), (1, 2), (2, 3)]
    assert [type(u) for u, _ in got] == [float, float, int]
    got = list(nx.bfs_predecessors(G, 1.0, backend="groute"))
    assert got == list(nx.bfs_predecessors(G, 1.0)) and type(got[0][1]) is float
    assert list(nx.bfs_successors(nx.empty_graph(2), 0, backend="groute")) == [(0, [])]


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_descendants_and_ancestors(on_devices, name, G):
    for source in list(G)[:4]:
        assert nx.descendants(G, source, backend="groute") == nx.descendants(G, source)
        assert nx.ancestors(G, source, backend="groute") == nx.ancestors(G, source)


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_descendants_at_distance(on_devices, name, G):
    for source in list(G)[:2]:
        for distance in (0, 1, 2, 2.0, 2.5, -1, "2", math.inf, math.nan):
            assert nx.descendants_at_distance(G, source, distance, backend="groute") == \
                nx.descendants_at_distance(G, source, distance)
    assert outcome(nx.descendants_at_distance, G, "nope", 1, backend="groute") == \
        outcome(nx.descendants_at_distance, G, "nope", 1)


def test_traversal_errors_are_networkx(on_devices):
    D = nx.DiGraph([(0, 1)])
    for fn in (nx.descendants, nx.ancestors):
        assert outcome(fn, D, 9, backend="groute") == outcome(fn, D, 9) == \
            (nx.NetworkXError, "The node 9 is not in the digraph.")
    for fn in (nx.bfs_edges, nx.bfs_successors, nx.bfs_tree):
        assert outcome(fn, nx.path_graph(3), "x", backend="groute") == \
            outcome(fn, nx.path_graph(3), "x")
        assert outcome(fn, nx.path_graph(3), [0], backend="groute")[0] is TypeError


# ------------------------------------------------------------------------------------------------
# paths and lengths
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_has_path(on_devices, name, G):
    nodes = list(G)
    rng = random.Random(1)
    for s, t in [(rng.choice(nodes), rng.choice(nodes)) for _ in range(6)] + [(nodes[0],) * 2]:
        assert nx.has_path(G, s, t, backend="groute") is nx.has_path(G, s, t)
    for s, t in [(nodes[0], "nope"), ("nope", nodes[0])]:
        assert outcome(nx.has_path, G, s, t, backend="groute") == outcome(nx.has_path, G, s, t)


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("cutoff", [None, 1, 2.5])
def test_single_source_paths_are_networkx_s(on_devices, name, G, cutoff):
    for source in list(G)[:3]:
        got = nx.single_source_shortest_path(G, source, cutoff=cutoff, backend="groute")
        assert list(got.items()) == \
            list(nx.single_source_shortest_path(G, source, cutoff=cutoff).items())
    assert outcome(nx.single_source_shortest_path, G, "nope", backend="groute") == \
        outcome(nx.single_source_shortest_path, G, "nope")


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_shortest_path_from_a_source_alone_is_networkx_s(on_devices, name, G):
    """Unweighted, NetworkX answers with single_source_shortest_path, which the backend
    replays (it declined every call without a target)."""
    for source in list(G)[:3]:
        for method in ("dijkstra", "bellman-ford"):
            got = nx.shortest_path(G, source, method=method, backend="groute")
            assert list(got.items()) == list(nx.shortest_path(G, source, method=method).items())
    assert outcome(nx.shortest_path, G, "nope", backend="groute") == \
        outcome(nx.shortest_path, G, "nope")


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("kind", [None, "int", "float"])
def test_path_lengths_between_two_nodes(on_devices, name, G, kind):
    H = G if kind is None else weighted(G, kind)
    nodes = list(H)
    rng = random.Random(2)
    pairs = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(5)]
    pairs += [(nodes[0], nodes[0]), (nodes[0], "nope"), ("nope", nodes[0]), ("nope", "nope"),
              (nodes[0], [1])]
    for fn in (nx.dijkstra_path_length, nx.bellman_ford_path_length):
        for s, t in pairs:
            got, want = outcome(fn, H, s, t, backend="groute"), outcome(fn, H, s, t)
            assert got == want and type(got) is type(want), (fn, s, t)


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("cutoff", [None, 1, 2.5])
def test_single_target_lengths(on_devices, name, G, cutoff):
    for target in list(G)[:3]:
        got = nx.single_target_shortest_path_length(G, target, cutoff=cutoff, backend="groute")
        want = nx.single_target_shortest_path_length(G, target, cutoff=cutoff)
        assert got == want and all(type(v) is int for v in got.values())
        if not G.is_directed():         # NetworkX's order (a directed graph's follows G.pred)
            assert list(got) == list(want)
    assert outcome(nx.single_target_shortest_path_length, G, "nope", backend="groute") == \
        outcome(nx.single_target_shortest_path_length, G, "nope")


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("cutoff", [None, 1, 2.5])
def test_all_pairs_lengths_in_networkx_order(on_devices, name, G, cutoff):
    got = nx.all_pairs_shortest_path_length(G, cutoff=cutoff, backend="groute")
    assert hasattr(got, "__next__")
    want = list(nx.all_pairs_shortest_path_length(G, cutoff=cutoff))
    assert [(s, list(d.items())) for s, d in got] == [(s, list(d.items())) for s, d in want]


def test_all_pairs_runs_its_sources_in_batches_on_one_solver_each(on_devices, monkeypatch):
    G = nx.gnm_random_graph(23, 40, seed=5)
    leases = []
    lease = support.devices_for

    def counted(*args):
        leases.append(args)
        return lease(*args)
    monkeypatch.setattr(support, "devices_for", counted)
    want = list(nx.all_pairs_shortest_path_length(G))
    assert list(nx.all_pairs_shortest_path_length(G, backend="groute")) == want
    assert len(leases) == 1                             # every source on one solver
    monkeypatch.setattr(shortest_paths, "PAIRS_BATCH_VALUES", 5 * len(G))
    leases.clear()
    pairs = nx.all_pairs_shortest_path_length(G, backend="groute")
    assert next(pairs) == want[0] and len(leases) == 1    # a batch is answered before the next
    assert [next(pairs)] + list(pairs) == want[1:]
    assert len(leases) == 5                             # 23 sources, 5 a batch


def weighted(G, kind, seed=0, low=0, high=9, name="weight"):
    """``G`` with integer weights in [low, high), as ints or as floats ("float": integral
    floats; "real": halves)."""
    rng = np.random.default_rng(seed)
    H = G.copy()
    for e in H.edges(keys=True) if H.is_multigraph() else H.edges():
        w = int(rng.integers(low, high))
        H.edges[e][name] = {"int": w, "float": float(w), "real": w + 0.5}[kind]
    return H


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_bellman_ford_lengths(on_devices, name, G):
    source = next(iter(G))
    got = nx.single_source_bellman_ford_path_length(G, source, backend="groute")
    assert list(got.items()) == \
        list(nx.single_source_bellman_ford_path_length(G, source).items())  # unweighted: order
    for kind in ("int", "float"):
        H = weighted(G, kind)
        got = nx.single_source_bellman_ford_path_length(H, source, backend="groute")
        want = nx.single_source_bellman_ford_path_length(H, source)
        assert got == want and [type(v) for v in got.values()] == [type(want[k]) for k in got]
    assert outcome(nx.single_source_bellman_ford_path_length, G, "nope", backend="groute") == \
        outcome(nx.single_source_bellman_ford_path_length, G, "nope")


def test_an_unhashable_source_raises_what_networkx_raises(on_devices):
    """NetworkX's TypeError where its code hashes the source first, its NodeNotFound where it
    asks ``in G`` first: the backend answered NodeNotFound for the first three and TypeError
    for closeness without distance."""
    G = nx.path_graph(4)
    nx.set_edge_attributes(G, 1, "weight")
    calls = [(nx.single_source_dijkstra_path_length, (G, [1])),
             (nx.single_source_bellman_ford_path_length, (G, [1])),
             (nx.bellman_ford_path_length, (G, [1], 2)),
             (nx.bellman_ford_path_length, (G, [1], [1])),
             (nx.dijkstra_path_length, (G, [1], 2))]
    for fn, args in calls:
        assert outcome(fn, *args, backend="groute") == outcome(fn, *args, backend="networkx")
    for distance in (None, "weight"):
        assert outcome(nx.closeness_centrality, G, u=[1], distance=distance, backend="groute") \
            == outcome(nx.closeness_centrality, G, u=[1], distance=distance, backend="networkx")


def test_bellman_ford_negative_weights_run_on_networkx():
    G = nx.DiGraph([(0, 1, {"weight": 4}), (0, 2, {"weight": 1}), (2, 1, {"weight": -2})])
    with pytest.raises(NotImplementedError):
        nx.single_source_bellman_ford_path_length(G, 0, backend="groute")
    with nx.config.backend_priority(algos=["groute"]):     # NetworkX's answer
        assert nx.single_source_bellman_ford_path_length(G, 0) == {0: 0, 2: 1, 1: -1}
        G.add_edge(1, 0, weight=-5)
        with pytest.raises(nx.NetworkXUnbounded):
            nx.single_source_bellman_ford_path_length(G, 0)


# ------------------------------------------------------------------------------------------------
# eccentricity
# ------------------------------------------------------------------------------------------------
CONNECTED = [("grid-tuples", nx.relabel_nodes(nx.grid_2d_graph(4, 5), {(0, 0): "corner"})),
             ("cycle-digraph", nx.cycle_graph(9, create_using=nx.DiGraph)),
             ("gnm-loop", nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=2)),
             ("multi", GRAPHS[-1][1])]


@pytest.mark.parametrize("name,G", CONNECTED, ids=[n for n, _ in CONNECTED])
@pytest.mark.parametrize("kind", [None, "int", "float"])
def test_eccentricity(on_devices, name, G, kind):
    H = G if kind is None else weighted(G, kind, low=1)
    weight = None if kind is None else "weight"
    nodes = list(H)
    for v in (None, nodes[1], nodes[:3], [nodes[2], nodes[2], "nope"], [], "iterator"):
        want = nx.eccentricity(H, v=iter(nodes[-2:]) if v == "iterator" else v, weight=weight)
        got = nx.eccentricity(H, v=iter(nodes[-2:]) if v == "iterator" else v, weight=weight,
                              backend="groute")
        assert got == want and type(got) is type(want)
        if isinstance(got, dict):
            assert list(got) == list(want)
            assert [type(x) for x in got.values()] == [type(x) for x in want.values()]


def test_eccentricity_one_solver_for_every_node(on_devices, monkeypatch):
    G = nx.connected_watts_strogatz_graph(20, 4, 0.3, seed=1)
    leases = []
    lease = support.devices_for
    monkeypatch.setattr(support, "devices_for", lambda *a: leases.append(a) or lease(*a))
    assert nx.eccentricity(G, backend="groute") == nx.eccentricity(G)
    assert len(leases) == 1


def test_eccentricity_errors_are_networkx(on_devices):
    cases = [(nx.Graph([(0, 1), (2, 3)]), {}), (nx.DiGraph([(0, 1), (1, 2)]), {}),
             (nx.path_graph(3), {"v": 9}), (nx.path_graph(3), {"v": [0, [1]]}),
             (nx.path_graph(3), {"v": [0, 9]}), (nx.null_graph(), {}),
             (nx.null_graph(), {"v": 3})]
    for G, kwargs in cases:
        assert outcome(nx.eccentricity, G, **kwargs, backend="groute") == \
            outcome(nx.eccentricity, G, **kwargs)


# ------------------------------------------------------------------------------------------------
# spanning trees
# ------------------------------------------------------------------------------------------------
def mst_graphs():
    """Weighted graphs with many equal weights (Kruskal's order of edges decides), floats,
    several components, isolated nodes, self-loops, labels of several types, a multigraph
    with parallel edges of equal and unequal weights."""
    out = []
    for seed, (n, m) in enumerate([(30, 60), (45, 40), (12, 66)]):
        G = weighted(nx.gnm_random_graph(n, m, seed=seed), "int", seed, high=4)
        G.add_edge(3, 3, weight=0)
        out.append((f"ties-{seed}", G))
    R = weighted(nx.relabel_nodes(nx.grid_2d_graph(4, 5), {(1, 1): "x"}), "real", 3)
    R.add_node("alone")
    R.graph["name"] = "grid"
    nx.set_node_attributes(R, {"x": {"colour": "red"}})
    R.edges[(0, 0), (0, 1)]["label"] = "first"
    out.append(("real-labels", R))
    M = nx.MultiGraph()
    M.add_edges_from([(0, 1, "a", {"weight": 2}), (0, 1, "b", {"weight": 1}),
                      (0, 1, "c", {"weight": 1}), (1, 2, 7, {"weight": 3}),
                      (2, 0, "z", {"weight": 3}), (2, 3, 0, {}), (3, 3, 0, {"weight": 0})])
    out.append(("multi", M))
    return out


MST_GRAPHS = mst_graphs()


@pytest.mark.parametrize("name,G", MST_GRAPHS, ids=[n for n, _ in MST_GRAPHS])
@pytest.mark.parametrize("edges", [nx.minimum_spanning_edges, nx.maximum_spanning_edges])
def test_spanning_edges_are_kruskal_s_in_its_order(on_devices, name, G, edges):
    for keys in (True, False):
        for data in (True, False):
            got = edges(G, keys=keys, data=data, backend="groute")
            assert hasattr(got, "__next__")
            assert list(got) == list(edges(G, keys=keys, data=data))


@pytest.mark.parametrize("name,G", MST_GRAPHS, ids=[n for n, _ in MST_GRAPHS])
@pytest.mark.parametrize("tree", [nx.minimum_spanning_tree, nx.maximum_spanning_tree])
def test_spanning_trees_keep_networkx_attributes(on_devices, name, G, tree):
    got, want = tree(G, backend="groute"), tree(G)
    assert type(got) is type(want) and got.graph == want.graph
    assert list(got.nodes(data=True)) == list(want.nodes(data=True))
    assert got._adj == want._adj and list(got.edges) == list(want.edges)


def test_spanning_tree_other_weights_and_nan(on_devices):
    G = weighted(nx.gnm_random_graph(25, 60, seed=9), "int", 9, high=3)
    nx.set_edge_attributes(G, {e: {"cost": i % 4} for i, e in enumerate(G.edges)})
    for weight in ("cost", "missing", None):
        assert list(nx.minimum_spanning_edges(G, weight=weight, backend="groute")) == \
            list(nx.minimum_spanning_edges(G, weight=weight))
        assert nx.minimum_spanning_tree(G, weight=weight, backend="groute")._adj == \
            nx.minimum_spanning_tree(G, weight=weight)._adj
    G.add_edge(0, 30, weight=math.nan)
    G.add_edge(4, 4, weight=math.nan)
    assert list(nx.minimum_spanning_edges(G, ignore_nan=True, backend="groute")) == \
        list(nx.minimum_spanning_edges(G, ignore_nan=True))
    with pytest.raises(NotImplementedError):        # NetworkX names the edge in its error
        nx.minimum_spanning_edges(G, backend="groute")
    with nx.config.backend_priority(algos=["groute"]):
        with pytest.raises(ValueError, match="NaN found as an edge weight"):
            list(nx.minimum_spanning_edges(G))


def test_spanning_tree_errors_and_declined_algorithms(on_devices):
    for G, kwargs in [(nx.DiGraph([(0, 1)]), {}), (nx.path_graph(3), {"algorithm": "random"})]:
        assert outcome(nx.minimum_spanning_tree, G, **kwargs, backend="groute") == \
            outcome(nx.minimum_spanning_tree, G, **kwargs)
    assert outcome(nx.maximum_spanning_edges, nx.path_graph(3), algorithm="random",
                   backend="groute") == (ValueError, "random is not a valid choice for an "
                                                     "algorithm.")
    for kwargs in ({"algorithm": "prim"}, {"algorithm": "boruvka"},
                   {"weight": lambda u, v, d: 1}):
        with pytest.raises(NotImplementedError, match="for the given arguments"):
            nx.minimum_spanning_edges(nx.path_graph(3), **kwargs, backend="groute")


def test_spanning_forest_of_a_long_path_and_a_star(on_devices):
    """Borůvka's deep trees: a path merges into one tree in the first round."""
    P = nx.path_graph(120)
    nx.set_edge_attributes(P, {(i, i + 1): {"weight": i % 3} for i in range(119)})
    S = nx.star_graph(50)
    for G in (P, S, nx.union(P, S, rename=("p", "s"))):
        assert list(nx.minimum_spanning_edges(G, backend="groute")) == \
            list(nx.minimum_spanning_edges(G))


def test_a_tree_call_leaves_weighted_calls_on_groute():
    """A spanning tree's conversion keeps every attribute, and NetworkX's cache then serves
    later calls from it: it reads "weight" as its weight, so weighted paths stay on groute."""
    G = weighted(nx.gnm_random_graph(20, 40, seed=2), "int", 2)
    nx.minimum_spanning_tree(G, backend="groute")
    want = nx.single_source_dijkstra_path_length(G, 0, backend="networkx")
    assert nx.single_source_dijkstra_path_length(G, 0, backend="groute") == want
    [converted] = G.__networkx_cache__["backends"]["groute"].values()
    assert converted.edge_data is not None and converted.weight == "weight"


def test_conversion_keeps_every_attribute_when_asked():
    G = nx.MultiGraph()
    G.add_edge("a", "b", key="k", weight=2, colour="red")
    G.add_node("c", size=3)
    R = from_networkx(G, preserve_edge_attrs=True, preserve_node_attrs=True,
                      preserve_graph_attrs=True)
    assert R.networkx_class is nx.MultiGraph and R.weight == "weight"
    assert R.edge_data[0] == {"k": {"weight": 2, "colour": "red"}}
    assert R.node_data == [{}, {}, {"size": 3}]
    H = nx.path_graph(3)
    H.edges[0, 1]["weight"] = "heavy"           # not a number: unweighted, data kept
    R = from_networkx(H, preserve_edge_attrs=True)
    assert R.weight is None and R.edge_data[0] == {"weight": "heavy"}
    assert from_networkx(H).edge_data is None   # a graph's data only when asked


@pytest.mark.parametrize("case", [
    (nx.bfs_edges, (nx.DiGraph([(0, 1)]), 1), {"reverse": True}),
    (nx.bfs_tree, (nx.DiGraph([(0, 1)]), 1), {"reverse": True}),
    (nx.bfs_edges, (nx.path_graph(3), 0), {"sort_neighbors": sorted}),
    (nx.bfs_successors, (nx.path_graph(3), 0), {"sort_neighbors": sorted}),
    (nx.eccentricity, (nx.path_graph(3),), {"sp": {0: {0: 0}}}),
    (nx.eccentricity, (nx.path_graph(3),), {"weight": lambda u, v, d: 1}),
    (nx.single_source_bellman_ford_path_length, (nx.path_graph(3), 0),
     {"weight": lambda u, v, d: 1}),
    (nx.has_path, (nx.path_graph(3), None, 1), {})],
    ids=["edges-reverse", "tree-reverse", "edges-sorted", "successors-sorted", "sp",
         "eccentricity-weight-fn", "bellman-ford-weight-fn", "has-path-no-source"])
def test_can_run_declines(case):
    fn, args, kwargs = case
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        fn(*args, **kwargs, backend="groute")
    with nx.config.backend_priority(algos=["groute"]):      # automatic dispatch falls back
        assert outcome(fn, *args, **kwargs) == outcome(fn, *args, **kwargs,
                                                       backend="networkx")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_boruvka_kernels_compile(tmp_path):
    from support import compile_generated
    functors = [boruvka.ENDS, boruvka.CROSSING, boruvka.LIGHTEST, boruvka.SPREAD_BEST,
                boruvka.SPREAD_LABEL, boruvka.CHOSEN, boruvka.JOIN, boruvka.RESET]
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.multigpu
@pytest.mark.parametrize("devices", [2, 4])
def test_on_several_gpus(devices):
    """Borůvka's rounds as one fused launch per GPU and loop, eccentricity and the BFS trees on
    the relaxation engines across GPUs: NetworkX's answers."""
    G = weighted(nx.connected_watts_strogatz_graph(300, 6, 0.2, seed=4), "int", 4, high=5)
    P = nx.path_graph(200)
    with nx.config.backends.groute(backend="cuda", devices=devices):
        for H in (G, P):
            assert list(nx.minimum_spanning_edges(H, backend="groute")) == \
                list(nx.minimum_spanning_edges(H))
        assert nx.eccentricity(G, v=list(G)[:20], backend="groute") == \
            nx.eccentricity(G, v=list(G)[:20])
        assert nx.eccentricity(G, v=list(G)[:5], weight="weight", backend="groute") == \
            nx.eccentricity(G, v=list(G)[:5], weight="weight")
        assert list(nx.bfs_edges(G, 0, backend="groute")) == list(nx.bfs_edges(G, 0))
        assert nx.ancestors(G, 7, backend="groute") == nx.ancestors(G, 7)
