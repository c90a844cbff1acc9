"""The intersect operator (groute.operators.Intersection): triangles by the forward algorithm,
common neighbours of pairs and of every arc, k-truss peeling rounds and reciprocated arcs,
against NetworkX and plain Python on graphs with hubs, self-loops and isolated vertices, on 1-3
CPU virtual devices and CUDA devices; the CUDA source compiles with nvcc."""
from __future__ import annotations

import itertools
import shutil
import subprocess

import networkx as nx
import numpy as np
import pytest

from groute import Context
from groute.graph import CSRGraph, load_graph
from groute.operators import Intersection, intersect_cpu
from groute.operators.intersect_cuda import KERNELS
from support import device_cases

pytestmark = pytest.mark.timeout(120)


def graphs():
    """A hub joined to a clique (orientation's case), a random graph with a self-loop and an
    isolated vertex, a graph without edges."""
    hub = nx.complete_graph(7)
    hub.add_edges_from((0, i) for i in range(7, 40))
    hub.add_edges_from((i, i + 1) for i in range(7, 39, 2))
    rnd = nx.gnm_random_graph(50, 220, seed=5)
    rnd.add_edge(3, 3)
    rnd.add_node(50)
    return {"hub": hub, "random": rnd, "edgeless": nx.empty_graph(4)}


GRAPHS = graphs()


@pytest.fixture(params=[pytest.param(case.values, marks=case.marks, id=case.id)
                        for case in device_cases([1, 2, 3])])
def ctx(request):
    backend, k = request.param
    with Context(devices=k, backend=backend) as context:
        yield context


def arcs_of(g):
    return np.repeat(np.arange(g.num_vertices), np.diff(g.indptr)), np.asarray(g.indices)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_triangles_counts_are_networkx(ctx, name):
    G = GRAPHS[name]
    got = Intersection(load_graph(G), ctx=ctx).triangles()
    assert got.dtype == np.int64
    assert got.tolist() == [nx.triangles(G)[v] for v in range(len(G))]


@pytest.mark.parametrize("name", ["hub", "random"])
def test_triangles_multiply_each_edge_value_once(ctx, name):
    """Per vertex, the sum over its triangles of the product of their edges' values."""
    G = GRAPHS[name]
    g = load_graph(G)
    rng = np.random.default_rng(1)
    value = {frozenset(e): float(rng.random()) for e in G.edges}
    src, dst = arcs_of(g)
    values = [value[frozenset((int(u), int(v)))] for u, v in zip(src, dst)]
    got = Intersection(g, ctx=ctx, values=values).triangles()
    want = np.zeros(len(G))
    for a, b, c in itertools.combinations(range(len(G)), 3):
        if G.has_edge(a, b) and G.has_edge(b, c) and G.has_edge(a, c):
            want[[a, b, c]] += value[frozenset((a, b))] * value[frozenset((b, c))] * \
                value[frozenset((a, c))]
    assert np.allclose(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["hub", "random"])
def test_common_neighbours_of_pairs(ctx, name):
    G = GRAPHS[name]
    rows = Intersection(load_graph(G), ctx=ctx)
    pairs = np.array(list(itertools.product(range(len(G)), repeat=2)))
    got = rows.common(pairs[:, 0], pairs[:, 1]).tolist()
    assert got == [len(nx.common_neighbors(G, int(u), int(v))) for u, v in pairs]
    full = rows.common(pairs[:, 0], pairs[:, 1], exclude_ends=False).tolist()
    assert full == [len(set(G[u]) & set(G[v])) for u, v in pairs.tolist()]


def test_common_neighbours_of_every_arc_of_a_directed_graph(ctx):
    """Common successors, the ends left out (NetworkX's transitive triples)."""
    G = nx.gnm_random_graph(40, 200, seed=2, directed=True)
    G.add_edge(1, 1)
    g = load_graph(G)
    got = Intersection(g, ctx=ctx).arc_common()
    src, dst = arcs_of(g)
    assert got.tolist() == [len((set(G[u]) & set(G[v])) - {u, v})
                            for u, v in zip(src.tolist(), dst.tolist())]


@pytest.mark.parametrize("k", [3, 4, 5])
def test_peeling_to_the_end_leaves_networkx_k_truss(ctx, k):
    G = GRAPHS["hub"].copy()
    G.add_edges_from(nx.gnm_random_graph(40, 120, seed=3).edges)
    G.remove_edges_from(nx.selfloop_edges(G))
    G.add_edges_from([(0, 100), (100, 101)])     # in no triangle
    rows = Intersection(load_graph(G), ctx=ctx)
    rounds = 0
    while rows.peel(k - 2):
        rounds += 1
    src, dst = rows.arcs()
    left = {(u, v) for u, v in zip(src.tolist(), dst.tolist()) if u < v}
    assert left == {tuple(sorted(e)) for e in nx.k_truss(G, k).edges}
    assert rounds >= 1 and rows.peel(k - 2) == 0


def test_reciprocated_arcs(ctx):
    G = nx.gnm_random_graph(40, 300, seed=4, directed=True)
    G.add_edges_from([(2, 2), (5, 6), (6, 5)])
    g = load_graph(G)
    got = Intersection(g, ctx=ctx).reciprocated()
    assert got.tolist() == [len(set(G.successors(v)) & set(G.predecessors(v)))
                            for v in range(len(G))]


def test_small_chunks_give_the_same_answers(monkeypatch):
    """The NumPy kernels' batches (CHUNK probes at a time) join up."""
    G = GRAPHS["hub"]
    with Context(devices=2, backend="cpu") as ctx:
        rows = Intersection(load_graph(G), ctx=ctx)
        whole = rows.triangles(), rows.common(np.arange(40), np.arange(40)[::-1])
        monkeypatch.setattr(intersect_cpu, "CHUNK", 5)
        parts = rows.triangles(), rows.common(np.arange(40), np.arange(40)[::-1])
    assert all(np.array_equal(a, b) for a, b in zip(whole, parts))


def test_bad_requests_are_named():
    G = GRAPHS["random"]
    g = load_graph(G)
    with Context(devices=1, backend="cpu") as ctx:
        with pytest.raises(ValueError, match="values has shape"):
            Intersection(g, ctx=ctx, values=np.ones(3))
        rows = Intersection(g, ctx=ctx)
        with pytest.raises(ValueError, match="differ in length"):
            rows.common([0, 1], [2])
        with pytest.raises(ValueError, match=r"positions must be in \[0, 51\)"):
            rows.common([0], [51])
        directed = Intersection(load_graph(nx.DiGraph(G)), ctx=ctx)
        with pytest.raises(ValueError, match="directed"):
            directed.triangles()
        with pytest.raises(ValueError, match="directed"):
            directed.peel(1)


def test_a_failure_on_a_device_names_it(monkeypatch):
    """An error in one device's kernel stops the call and raises naming the device."""
    from groute.errors import DeviceError

    def broken(*args):
        raise RuntimeError("kernel trouble")
    monkeypatch.setattr(intersect_cpu, "triangles", broken)
    with Context(devices=2, backend="cpu") as ctx:
        rows = Intersection(load_graph(GRAPHS["hub"]), ctx=ctx)
        with pytest.raises(DeviceError, match="cpu:.*kernel trouble"):
            rows.triangles()


def test_the_example_in_the_docstring_runs():
    import doctest
    tests = doctest.DocTestFinder().find(Intersection, "Intersection", globs={})
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test)
    outcome = runner.summarize(verbose=False)
    assert outcome.failed == 0 and outcome.attempted


def test_a_graph_of_many_components_and_no_rows(ctx):
    """Vertex ranges without arcs, an empty graph."""
    g = CSRGraph(np.zeros(6, np.int64), np.zeros(0, np.int32), directed=False)
    rows = Intersection(g, ctx=ctx)
    assert rows.triangles().tolist() == [0] * 5
    assert rows.reciprocated().tolist() == [0] * 5
    assert rows.common([1], [2]).tolist() == [0] and rows.peel(1) == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_kernels_compile(tmp_path):
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(KERNELS), "-o",
                           str(tmp_path / "intersect.o")], capture_output=True, text=True,
                          timeout=200)
    assert done.returncode == 0, done.stderr
