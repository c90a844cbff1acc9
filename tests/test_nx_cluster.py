"""The NetworkX backend's triangles, clustering and similarity (groute/nx_backend/algorithms/
cluster.py and link_prediction.py): every answer against NetworkX's own call on small graphs of
several kinds (directed and undirected, self-loops, isolated nodes, string and tuple labels,
weighted, multigraphs), on one and two CPU virtual devices and one GPU; values, key order,
value types and errors."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from nx_support import on_devices, registered  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(300)


def graphs():
    """Undirected ones with a self-loop, an isolated node, string and tuple labels and hubs,
    directed ones with reciprocated arcs and a self-loop, each with float weights on "w"."""
    rng = np.random.default_rng(7)
    karate = nx.karate_club_graph()
    gnm = nx.relabel_nodes(nx.gnm_random_graph(40, 160, seed=1), lambda i: f"v{i}")
    gnm.add_edge("v3", "v3")
    gnm.add_node("alone")
    grid = nx.grid_2d_graph(4, 5)                      # tuple labels, no triangles
    grid.add_edges_from([((0, 0), (1, 1)), ((1, 1), (2, 2)), ((2, 2), (1, 2))])
    directed = nx.gnm_random_graph(35, 180, seed=2, directed=True)
    directed.add_edges_from([(4, 4), (5, 6), (6, 5)])
    directed.add_node(99)
    out = {"karate": karate, "gnm-str": gnm, "grid-tuples": grid, "directed": directed}
    for G in out.values():
        for u, v in G.edges:
            G[u][v]["w"] = float(rng.uniform(0.1, 3.0))
    return out


GRAPHS = graphs()
UNDIRECTED = [n for n, G in GRAPHS.items() if not G.is_directed()]


def same(got, want):
    """Equal keys in the same order, values of the same type, floats within rounding."""
    if isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            same(got[key], want[key])
        return
    assert type(got) is type(want), (got, want)
    if isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15), (got, want)
    else:
        assert got == want


@pytest.mark.parametrize("name", UNDIRECTED)
def test_triangles(on_devices, name):
    G = GRAPHS[name]
    same(nx.triangles(G, backend="groute"), nx.triangles(G))
    some = list(G)[::3] + ["not a node"]
    same(nx.triangles(G, some, backend="groute"), nx.triangles(G, some))
    node = list(G)[1]
    same(nx.triangles(G, node, backend="groute"), nx.triangles(G, node))


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("weight", [None, "w"])
def test_clustering(on_devices, name, weight):
    G = GRAPHS[name]
    same(nx.clustering(G, weight=weight, backend="groute"), nx.clustering(G, weight=weight))
    some = list(G)[1::4]
    same(nx.clustering(G, some, weight=weight, backend="groute"),
         nx.clustering(G, some, weight=weight))
    node = list(G)[0]
    same(nx.clustering(G, node, weight=weight, backend="groute"),
         nx.clustering(G, node, weight=weight))


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("weight", [None, "w"])
@pytest.mark.parametrize("count_zeros", [True, False])
def test_average_clustering(on_devices, name, weight, count_zeros):
    G = GRAPHS[name]
    same(nx.average_clustering(G, weight=weight, count_zeros=count_zeros, backend="groute"),
         nx.average_clustering(G, weight=weight, count_zeros=count_zeros))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_transitivity(on_devices, name):
    G = GRAPHS[name]
    same(nx.transitivity(G, backend="groute"), nx.transitivity(G))


def test_negative_and_integer_weights(on_devices):
    """Weighted clustering normalises by the largest weight and takes cube roots of
    negatives as NetworkX does; integer weights too."""
    G = nx.complete_graph(5)
    for i, (u, v) in enumerate(G.edges):
        G[u][v]["weight"] = i - 4
    for directed in (False, True):
        H = G.to_directed() if directed else G
        same(nx.clustering(H, weight="weight", backend="groute"),
             nx.clustering(H, weight="weight"))


def test_a_largest_weight_of_zero_is_networkx_s_to_divide_by(on_devices):
    G = nx.complete_graph(4)
    nx.set_edge_attributes(G, 0, "weight")
    with pytest.raises(NotImplementedError):        # NetworkX runs such a call
        nx.clustering(G, weight="weight", backend="groute")
    with pytest.raises(ZeroDivisionError):
        nx.clustering(G, weight="weight")


def test_graphs_without_triangles_or_nodes(on_devices):
    """Zero coefficients stay ints, as NetworkX's; the empty graph's errors are NetworkX's."""
    star = nx.star_graph(4)
    same(nx.clustering(star, backend="groute"), nx.clustering(star))
    assert nx.transitivity(star, backend="groute") == 0
    empty = nx.Graph()
    assert nx.triangles(empty, backend="groute") == {}
    assert nx.transitivity(empty, backend="groute") == 0
    with pytest.raises(ZeroDivisionError):
        nx.average_clustering(empty, backend="groute")
    with pytest.raises(ZeroDivisionError):
        nx.average_clustering(star, count_zeros=False, backend="groute")


def test_errors_are_networkx(on_devices):
    G = GRAPHS["karate"]
    multi = nx.MultiGraph(G)
    multi.add_edge(0, 1)
    assert nx.triangles(multi, backend="groute") == nx.triangles(multi)     # parallel: one
    with pytest.raises(nx.NetworkXNotImplemented, match="multigraph"):
        nx.triangles(multi, [0, 1], backend="groute")
    with pytest.raises(nx.NetworkXNotImplemented, match="multigraph"):
        nx.clustering(multi, backend="groute")
    with pytest.raises(nx.NetworkXNotImplemented, match="multigraph"):
        nx.transitivity(multi, backend="groute")
    with pytest.raises(nx.NetworkXNotImplemented, match="directed"):
        nx.triangles(GRAPHS["directed"], backend="groute")
    with pytest.raises(nx.NetworkXError, match="Node 1000 is not in the graph"):
        nx.clustering(G, 1000, backend="groute")
    with pytest.raises(nx.NetworkXError, match="not a valid node"):
        nx.triangles(G, [0, [1]], backend="groute")


@pytest.mark.parametrize("name", UNDIRECTED)
def test_jaccard_of_every_non_edge_in_networkx_order(on_devices, name):
    G = GRAPHS[name]
    got = nx.jaccard_coefficient(G, backend="groute")
    assert not isinstance(got, (list, tuple))          # a generator, as NetworkX's
    got, want = list(got), list(nx.jaccard_coefficient(G))
    assert [p[:2] for p in got] == [p[:2] for p in want]
    for (_, _, x), (_, _, y) in zip(got, want):
        same(x, y)


def test_jaccard_of_given_pairs(on_devices, monkeypatch):
    """Edges, self-pairs and pairs of an isolated node, in batches smaller than the pairs."""
    from groute.nx_backend.algorithms import link_prediction
    monkeypatch.setattr(link_prediction, "BATCH", 7)
    G = GRAPHS["gnm-str"]
    pairs = list(G.edges) + [(u, u) for u in list(G)[:5]] + [("alone", "v1"), ("alone", "alone")]
    got, want = list(nx.jaccard_coefficient(G, pairs, backend="groute")), \
        list(nx.jaccard_coefficient(G, pairs))
    assert [p[:2] for p in got] == [p[:2] for p in want]
    for (_, _, x), (_, _, y) in zip(got, want):
        same(x, y)


def test_jaccard_reads_ebunch_as_networkx(on_devices):
    """A missing node is NodeNotFound at the call; an iterator is spent by NetworkX's check,
    so nothing is left to yield."""
    G = GRAPHS["karate"]
    with pytest.raises(nx.NodeNotFound, match="Node 100 not in G"):
        nx.jaccard_coefficient(G, [(0, 1), (0, 100)], backend="groute")
    pairs = [(0, 1), (2, 3)]
    assert list(nx.jaccard_coefficient(G, iter(pairs), backend="groute")) == \
        list(nx.jaccard_coefficient(G, iter(pairs))) == []
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.jaccard_coefficient(GRAPHS["directed"], backend="groute")
