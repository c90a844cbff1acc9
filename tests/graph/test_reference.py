"""Reference results against NetworkX on small graphs, and the comparison helpers."""
import networkx as nx
import numpy as np
import pytest

from groute.graph import CSRGraph, load_graph, reference, shipped_graph_path
from tests.graph.conftest import edges_graph


def small_graphs():
    gs = {
        "kron": load_graph("kron:8", cache=False),
        "grid": load_graph("grid:12x9", cache=False),
        "rmat_directed": load_graph("rmat:8", cache=False).with_weights(seed=3),
        "er_sparse": load_graph("er:300:1.2:seed=5", cache=False).with_weights(seed=1),
        "power": load_graph(shipped_graph_path(), cache=False),
        "dangling": edges_graph(6, [(0, 1), (1, 2), (2, 0), (3, 2), (4, 4)]),
    }
    return gs


GRAPHS = small_graphs()


def to_nx(g: CSRGraph):
    G = nx.DiGraph()
    G.add_nodes_from(range(g.num_vertices))
    src, dst = g.edges()
    w = g.weights if g.weights is not None else np.ones(g.num_edges)
    G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.tolist()))
    return G


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_bfs_matches_networkx(name):
    g = GRAPHS[name]
    G = to_nx(g)
    for s in (0, g.num_vertices // 2):
        depth = reference.bfs(g, s)
        assert depth.dtype == np.int32
        want = np.full(g.num_vertices, -1)
        for v, d in nx.single_source_shortest_path_length(G, s).items():
            want[v] = d
        assert np.array_equal(depth, want)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_sssp_matches_networkx(name):
    g = GRAPHS[name]
    G = to_nx(g)
    s = 1
    dist = reference.sssp(g, s)
    assert dist.dtype == np.float64
    want = np.full(g.num_vertices, np.inf)
    for v, d in nx.single_source_dijkstra_path_length(G, s).items():
        want[v] = d
    assert reference.compare_exact(dist, want)


def test_sssp_zero_and_negative_weights():
    g = edges_graph(3, [(0, 1), (1, 2)], weights=[0, 4])
    assert reference.sssp(g, 0).tolist() == [0, 0, 4]
    bad = edges_graph(3, [(0, 1), (1, 2)], weights=[1, -4])
    with pytest.raises(ValueError, match="negative"):
        reference.sssp(bad, 0)
    with pytest.raises(ValueError, match="out of range"):
        reference.bfs(g, 3)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_pagerank_matches_networkx(name):
    g = GRAPHS[name]
    G = to_nx(g)
    G_unweighted = nx.DiGraph(G.edges())
    G_unweighted.add_nodes_from(G.nodes())
    want = nx.pagerank(G_unweighted, alpha=0.85, tol=1e-13, max_iter=10_000)
    want = np.array([want[v] for v in range(g.num_vertices)])
    got = reference.pagerank(g, tol=1e-12)
    assert abs(got.sum() - 1) < 1e-12
    l1, linf = reference.pagerank_error(got, want)
    assert l1 < 1e-8 and linf < 1e-9


def test_pagerank_tolerance_is_l1_change():
    g = GRAPHS["kron"]
    loose, tight = reference.pagerank(g, tol=1e-3), reference.pagerank(g, tol=1e-12)
    l1, _ = reference.pagerank_error(loose, tight)
    assert 1e-7 < l1 < 1e-2            # stopped early, but close: the error is of order tol


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_connected_components_match_networkx(name):
    g = GRAPHS[name]
    labels = reference.connected_components(g)
    assert labels.dtype == np.int64
    want = np.empty(g.num_vertices, dtype=np.int64)
    for comp in nx.weakly_connected_components(to_nx(g)):
        want[list(comp)] = min(comp)
    assert np.array_equal(labels, want)


def test_comparison_helpers():
    a = np.array([0, 1, -1, 2])
    assert reference.compare_exact(a, a.copy())
    assert not reference.compare_exact(a, np.array([0, 1, 2, 2]))
    assert not reference.compare_exact(a, a[:3])
    f = np.array([0.0, np.inf, 3.0])
    assert reference.compare_exact(f, np.array([0.0, np.inf, 3.0], dtype=np.float32))
    assert not reference.compare_exact(f, np.array([0.0, 5.0, 3.0]))
    assert reference.compare_exact(f, f * (1 + 1e-7), rtol=1e-6)
    assert reference.compare_labels(np.array([5, 5, 9, 2]), np.array([0, 0, 1, 3]))
    assert not reference.compare_labels(np.array([5, 5, 9, 2]), np.array([0, 1, 1, 3]))
    assert not reference.compare_labels(np.array([1, 2, 1]), np.array([1, 2, 2]))
    l1, linf = reference.pagerank_error(np.array([0.5, 0.5]), np.array([0.4, 0.6]))
    assert l1 == pytest.approx(0.2) and linf == pytest.approx(0.1)
    assert "2 of 4" in reference.mismatch_report(a, np.array([9, 1, 9, 2]))
