"""The NetworkX backend's centrality and link analysis (groute/nx_backend/algorithms/centrality.py,
link_analysis.py): degree, closeness, betweenness by lengths, edge betweenness, eigenvector,
Katz and HITS against NetworkX's own calls (keys, order, values, errors) on graphs of several
kinds, each on one and two CPU devices and one GPU; what the backend declines; and the
kernels' CUDA compiled with nvcc. NetworkX's own tests of these functions run through the
backend in tests/test_nx_suite.py."""
from __future__ import annotations

import copy
import math
import random
import shutil

import networkx as nx
import numpy as np
import pytest

from nx_support import on_cpu_devices, on_devices, registered  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(300)


def graphs():
    """Undirected with a self-loop, an isolated node and string labels; directed with tuple
    labels, a self-loop and an isolated node; a path; a graph of two components."""
    g1 = nx.relabel_nodes(nx.gnm_random_graph(40, 70, seed=1), lambda i: f"n{i}")
    g1.add_edge("n3", "n3")
    g1.add_node("alone")
    g2 = nx.relabel_nodes(nx.gnm_random_graph(35, 80, seed=2, directed=True),
                          lambda i: (i % 3, i))
    g2.add_edge((1, 1), (1, 1))
    g2.add_node(("x", 0))
    g3 = nx.path_graph(7)
    g4 = nx.disjoint_union(nx.cycle_graph(5), nx.star_graph(4))
    return [("undirected", g1), ("directed", g2), ("path", g3), ("two-parts", g4)]


GRAPHS = graphs()
IDS = [name for name, _ in GRAPHS]


def small_graphs():
    """Smaller graphs of the same kinds, for the searches from every source by lengths (on CPU
    devices each level of each search is a host step)."""
    g1 = nx.relabel_nodes(nx.gnm_random_graph(13, 20, seed=1), lambda i: f"n{i}")
    g1.add_edge("n3", "n3")
    g1.add_node("alone")
    g2 = nx.relabel_nodes(nx.gnm_random_graph(11, 24, seed=2, directed=True),
                          lambda i: (i % 3, i))
    g2.add_edge((1, 1), (1, 1))
    g2.add_node(("x", 0))
    return [("undirected", g1), ("directed", g2)]


SMALL = small_graphs()
SMALL_IDS = [name for name, _ in SMALL]


def weighted(G, kind, seed=0, attr="w"):
    """``G`` with ``attr`` on every edge: integers 1..5 or reals in (0.1, 3)."""
    H = G.copy()
    rng = random.Random(seed)
    for u, v in H.edges():
        H[u][v][attr] = rng.randint(1, 5) if kind == "int" else rng.uniform(0.1, 3.0)
    return H


def close(got, want, tol):
    """Same keys in the same order, values within ``tol``."""
    assert list(got) == list(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=tol, rel=tol), key


def tol_for(devices_kind, cpu=1e-12, cuda=1e-9):
    return cuda if devices_kind == "cuda" else cpu


def backend_kind():
    return nx.config.backends.groute["backend"]


# ------------------------------------------------------------------------------------------------
# degrees
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
def test_degree_centralities_equal_networkx(on_devices, name, G):
    got = nx.degree_centrality(G, backend="groute")
    want = nx.degree_centrality(G)
    assert list(got.items()) == list(want.items())
    if G.is_directed():
        for fn in (nx.in_degree_centrality, nx.out_degree_centrality):
            assert list(fn(G, backend="groute").items()) == list(fn(G).items())


def test_degree_centrality_of_tiny_graphs_and_multigraphs(on_devices):
    for G in (nx.Graph(), nx.empty_graph(1), nx.DiGraph([(0, 0)])):
        assert nx.degree_centrality(G, backend="groute") == nx.degree_centrality(G)
    M = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        nx.degree_centrality(M, backend="groute")
    with nx.config.backend_priority(algos=["groute"]):
        assert nx.degree_centrality(M) == nx.degree_centrality(M, backend="networkx")


# ------------------------------------------------------------------------------------------------
# closeness
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("wf_improved", [True, False])
def test_closeness_equals_networkx(on_devices, name, G, wf_improved):
    close(nx.closeness_centrality(G, wf_improved=wf_improved, backend="groute"),
          nx.closeness_centrality(G, wf_improved=wf_improved), 1e-12)


@pytest.mark.parametrize("name,G,kind", [(*SMALL[0], "int"), (*SMALL[1], "float")],
                         ids=SMALL_IDS)
def test_closeness_by_distance_equals_networkx(on_devices, name, G, kind):
    H = weighted(G, kind)
    close(nx.closeness_centrality(H, distance="w", backend="groute"),
          nx.closeness_centrality(H, distance="w"), 1e-12)
    for u in list(H)[:3]:
        got = nx.closeness_centrality(H, u=u, distance="w", backend="groute")
        assert got == pytest.approx(nx.closeness_centrality(H, u=u, distance="w"), rel=1e-12)
        got = nx.closeness_centrality(H, u=u, backend="groute")
        assert got == pytest.approx(nx.closeness_centrality(H, u=u), rel=1e-12)


def test_closeness_errors_and_small_graphs(on_devices):
    for distance, message in ((None, "Source 9 is not in G"), ("w", "Node 9 not found")):
        with pytest.raises(nx.NodeNotFound, match=message):
            nx.closeness_centrality(nx.path_graph(3), u=9, distance=distance, backend="groute")
    for G in (nx.Graph(), nx.empty_graph(1), nx.empty_graph(3), nx.DiGraph([(0, 1)])):
        assert nx.closeness_centrality(G, backend="groute") == nx.closeness_centrality(G)
    M = nx.MultiGraph([(0, 1, {"w": 3}), (0, 1, {"w": 1}), (1, 2, {"w": 2})])
    close(nx.closeness_centrality(M, distance="w", backend="groute"),
          nx.closeness_centrality(M, distance="w"), 1e-12)


def test_closeness_of_u_takes_one_vertex():
    """A list was looked up as several vertices and gave one float no vertex has."""
    import groute
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3)])
    for u in ([0, 3], np.array([3])):
        with pytest.raises(TypeError, match="u must be one vertex id"):
            groute.closeness_centrality(G, u=u, backend="cpu", devices=1)
    assert groute.closeness_centrality(G, u=3, backend="cpu", devices=1) == \
        pytest.approx(nx.closeness_centrality(G, u=3))


def test_closeness_negative_lengths_fall_back():
    G = weighted(nx.path_graph(5), "int")
    G[1][2]["w"] = -1
    with pytest.raises(NotImplementedError):
        nx.closeness_centrality(G, distance="w", backend="groute")


def test_closeness_runs_one_loop_per_batch_of_64_sources():
    """The host steps of the breadth-first searches grow with the batches of 64 sources, not
    with the sources: a loop (one launch on one GPU) and two computes per batch."""
    import groute
    g = nx.gnm_random_graph(200, 600, seed=5)
    result = groute.closeness_centrality(g, backend="cpu", devices=1)
    batches = math.ceil(200 / 64)
    assert result.stats["loops"] == batches
    assert result.stats["computes"] == 2 * batches + result.stats["advances"]
    assert result.stats["batch"] == 64


# ------------------------------------------------------------------------------------------------
# betweenness by lengths, edge betweenness
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G,kind", [(*SMALL[0], "float"), (*SMALL[1], "int")],
                         ids=SMALL_IDS)
def test_betweenness_by_lengths_equals_networkx(on_devices, name, G, kind):
    H = weighted(G, kind, seed=1)
    for kwargs in ({}, {"normalized": False, "endpoints": True}, {"k": 5, "seed": 3}):
        close(nx.betweenness_centrality(H, weight="w", backend="groute", **kwargs),
              nx.betweenness_centrality(H, weight="w", **kwargs), 1e-10)


def test_betweenness_ties_by_lengths_and_multigraphs(on_devices):
    """Equal-length paths (a grid with unit and 2 lengths) count as NetworkX counts them; a
    multigraph's parallel edges as their shortest."""
    G = nx.grid_2d_graph(3, 4)
    for i, (u, v) in enumerate(G.edges()):
        G[u][v]["w"] = 2.0 if i % 3 == 0 else 1.0
    close(nx.betweenness_centrality(G, weight="w", backend="groute"),
          nx.betweenness_centrality(G, weight="w"), 1e-12)
    M = nx.MultiDiGraph([(0, 1, {"w": 5}), (0, 1, {"w": 1}), (1, 2, {"w": 1}), (0, 2, {"w": 2})])
    close(nx.betweenness_centrality(M, weight="w", backend="groute"),
          nx.betweenness_centrality(M, weight="w"), 1e-12)


def test_betweenness_zero_lengths_fall_back():
    G = weighted(nx.path_graph(5), "int")
    G[1][2]["w"] = 0
    with pytest.raises(NotImplementedError):
        nx.betweenness_centrality(G, weight="w", backend="groute")
    with nx.config.backend_priority(algos=["groute"]):
        assert nx.betweenness_centrality(G, weight="w") == \
            nx.betweenness_centrality(G, weight="w", backend="networkx")
    # declined before the sample is drawn: NetworkX draws from the seed as it came
    for scores in (nx.betweenness_centrality, nx.edge_betweenness_centrality):
        for seed in (1, random.Random(7)):
            want = scores(G, k=2, weight="w", seed=copy.deepcopy(seed), backend="networkx")
            with nx.config.backend_priority(algos=["groute"]):
                assert scores(G, k=2, weight="w", seed=copy.deepcopy(seed)) == want


def test_betweenness_lengths_that_may_vanish_in_sums_fall_back():
    """A length that adding to a distance may not change (1 + 1e-17 == 1) acts as 0: groute's
    own call refuses the tie it makes (test_betweenness.py); the backend lets NetworkX answer,
    as for lengths of 0."""
    G = nx.DiGraph()
    G.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 1e-17), (2, 1, 1e-17), (2, 3, 1.0)],
                              weight="w")
    for scores in (nx.betweenness_centrality, nx.edge_betweenness_centrality):
        with pytest.raises(NotImplementedError) as declined:
            scores(G, weight="w", backend="groute")
        assert "1e-17 may vanish" in str(declined.value.__cause__)
        with nx.config.backend_priority(algos=["groute"]):
            assert scores(G, weight="w") == scores(G, weight="w", backend="networkx")
    H = weighted(nx.path_graph(5), "float")     # lengths far apart, but adding them counts
    H[1][2]["w"] = 1e-12
    close(nx.betweenness_centrality(H, weight="w", backend="groute"),
          nx.betweenness_centrality(H, weight="w"), 1e-12)


@pytest.mark.parametrize("name,G,kind", [(*SMALL[0], None), (*SMALL[1], "float"),
                                          ("path", nx.path_graph(5), "int")],
                         ids=[*SMALL_IDS, "path"])
def test_edge_betweenness_equals_networkx(on_devices, name, G, kind):
    H = G if kind is None else weighted(G, kind, seed=2)
    weight = None if kind is None else "w"
    for kwargs in ({}, {"normalized": False, "k": 4, "seed": 7}):
        close(nx.edge_betweenness_centrality(H, weight=weight, backend="groute", **kwargs),
              nx.edge_betweenness_centrality(H, weight=weight, **kwargs), 1e-10)


def test_edge_betweenness_small_graphs_and_declines(on_devices):
    for G in (nx.Graph(), nx.empty_graph(3), nx.Graph([(0, 0)]), nx.DiGraph([(0, 1)])):
        assert nx.edge_betweenness_centrality(G, backend="groute") == \
            nx.edge_betweenness_centrality(G)
    with pytest.raises(ValueError):
        nx.edge_betweenness_centrality(nx.path_graph(3), k=5, backend="groute")
    # no source drawn: NetworkX's rescaling divides by zero, with edges or without
    for G in (nx.empty_graph(3), nx.path_graph(3)):
        for backend in (None, "groute"):
            with pytest.raises(ZeroDivisionError):
                nx.edge_betweenness_centrality(G, k=0, seed=1, backend=backend)
    assert nx.edge_betweenness_centrality(nx.empty_graph(1), k=0, seed=1, backend="groute") == {}
    M = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        nx.edge_betweenness_centrality(M, backend="groute")


# ------------------------------------------------------------------------------------------------
# eigenvector and Katz
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("weight", [None, "w"])
def test_eigenvector_equals_networkx(on_devices, name, G, weight):
    H = weighted(G, "float", seed=3)
    if name == "directed":           # NetworkX's iteration converges on the strong part only
        H = H.subgraph(max(nx.strongly_connected_components(H), key=len)).copy()
    close(nx.eigenvector_centrality(H, weight=weight, max_iter=500, backend="groute"),
          nx.eigenvector_centrality(H, weight=weight, max_iter=500), 1e-12)
    start = {u: 1.0 + i % 3 for i, u in enumerate(H)}
    close(nx.eigenvector_centrality(H, nstart=start, max_iter=500, backend="groute"),
          nx.eigenvector_centrality(H, nstart=start, max_iter=500), 1e-12)


def test_eigenvector_errors_as_networkx(on_devices):
    G = nx.path_graph(4)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.eigenvector_centrality(G, max_iter=2, backend="groute")
    with pytest.raises(nx.NetworkXPointlessConcept):
        nx.eigenvector_centrality(nx.Graph(), backend="groute")
    with pytest.raises(nx.NetworkXError, match="initial vector cannot have all zero"):
        nx.eigenvector_centrality(G, nstart=dict.fromkeys(G, 0), backend="groute")
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        nx.eigenvector_centrality(G, nstart={0: 1}, backend="groute")


@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("weight", [None, "w"])
def test_katz_equals_networkx(on_devices, name, G, weight):
    H = weighted(G, "float", seed=4)
    # groute's Katz reads the weights in float32, and iterates in float32 on CUDA devices
    tol = (1e-12 if weight is None else 1e-6) if backend_kind() == "cpu" else 1e-5
    for kwargs in ({"alpha": 0.05}, {"alpha": 0.02, "normalized": False},
                   {"alpha": 0.05, "beta": {u: 1.0 + (i % 2) for i, u in enumerate(H)}}):
        close(nx.katz_centrality(H, weight=weight, backend="groute", **kwargs),
              nx.katz_centrality(H, weight=weight, **kwargs), tol)
    start = {u: 0.5 for u in reversed(list(H))}         # NetworkX keys its answer so
    close(nx.katz_centrality(H, alpha=0.05, nstart=start, backend="groute"),
          nx.katz_centrality(H, alpha=0.05, nstart=start), tol)


def test_katz_errors_as_networkx(on_devices):
    G = nx.path_graph(3)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(G, max_iter=0, backend="groute")
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(nx.complete_graph(5), alpha=0.5, backend="groute")
    with pytest.raises(nx.NetworkXError, match="beta dictionary"):
        nx.katz_centrality(G, beta={0: 1}, backend="groute")
    assert nx.katz_centrality(nx.Graph(), backend="groute") == {}
    for declined in ({"beta": "foo"}, {"alpha": -0.1}, {"tol": 0}):
        with pytest.raises(NotImplementedError, match="for the given arguments"):
            nx.katz_centrality(G, backend="groute", **declined)


# ------------------------------------------------------------------------------------------------
# HITS
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,G", GRAPHS, ids=IDS)
@pytest.mark.parametrize("weights", [False, True])
def test_hits_equals_networkx(on_devices, name, G, weights):
    H = weighted(G, "float", seed=5, attr="weight") if weights else G
    if not H.is_directed():      # A^T A of an undirected graph: its top eigenvalue simple
        H = H.subgraph(max(nx.connected_components(H), key=len)).copy()
        if nx.is_bipartite(H):  # an odd cycle: its largest singular value simple
            a, b, c = list(H)[:3]
            H.add_edges_from([(a, b), (b, c), (a, c)])
    hubs, authorities = nx.hits(H, max_iter=2000, backend="groute")
    want_hubs, want_authorities = nx.hits(H, max_iter=2000)
    close(hubs, want_hubs, 1e-6)
    close(authorities, want_authorities, 1e-6)


def test_hits_errors_and_declines(on_devices):
    assert nx.hits(nx.DiGraph(), backend="groute") == ({}, {})
    G = nx.path_graph(50)
    for max_iter in (0, 1):
        with pytest.raises(nx.PowerIterationFailedConvergence):
            nx.hits(G, max_iter=max_iter, backend="groute")
    for declined in ({"nstart": dict.fromkeys(G, 1.0)}, {"normalized": False}):
        with pytest.raises(NotImplementedError, match="for the given arguments"):
            nx.hits(G, backend="groute", **declined)
    with pytest.raises(NotImplementedError):
        nx.hits(nx.empty_graph(3), backend="groute")        # NetworkX's ARPACK error then


# ------------------------------------------------------------------------------------------------
# the kernels' CUDA, compiled without a GPU
# ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_centrality_kernels_compile(tmp_path):
    """Every functor into the operators' kernels; the closeness searches' loops and the rounds
    by lengths (closeness, betweenness) as fused loops and rounds on one and several
    devices."""
    from support import compile_generated
    from test_operators_loop import compile_sources

    from groute.apps import betweenness as B
    from groute.apps import closeness as C
    from groute.apps import power_iteration as P
    from groute.operators import DISTANCE, AdvanceStep, Compute, ComputeStep, Loop, Sweep
    from groute.operators.loop_source import multi_source, rounds_source, source

    functors = [C.SPREAD, C.SETTLE, C.CLEAR, C.BEGIN, C.ADD, C.START, DISTANCE,
                B.PATH_START, B.TIGHTEN, B.FIRST, B.COUNT, B.PATHS, B.DEPEND, B.ARC_ACCUMULATE,
                P.SQUARE, P.SCALE, P.AUTHORITY_SQUARE, P.INPUT, P.ARC,
                P._sum_into("x", "y", False), P._sum_into("carried", "y", True),
                P._carry("x"), P._start("y", "x"), P._start("h", None)]
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    searches = [[AdvanceStep(C.SPREAD, over=over), ComputeStep(C.SETTLE)] for over in ("out", "in")]
    done = compile_sources([source(steps, "d", "test") for steps in searches],
                           ["groute_loop", "groute_sweep"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = compile_sources([multi_source(searches[1], "d", "test")],
                           ["groute_loop_multi", "groute_sweep_multi"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    bodies = [B.ARC_ROUND, [Compute(C.START, over="seed"),
                            Loop([AdvanceStep(DISTANCE, "auto", over="in")], keep=True),
                            Sweep([ComputeStep(C.ADD)])]]
    for multi, name in ((False, "groute_rounds"), (True, "groute_rounds_multi")):
        done = compile_sources([rounds_source(body, None, None, "test", multi=multi)
                                for body in bodies], [name], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("app", ["closeness.py", "power_iteration.py"])
def test_the_apps_import_only_groute_public_names(app):
    from pathlib import Path

    from support import check_imports_only_public_names
    check_imports_only_public_names(Path(__file__).resolve().parents[1] / "apps" / app)


def test_the_groute_functions_on_three_devices_and_their_errors():
    """The groute functions the backend calls, directly: on three CPU devices of the async
    engine with a random partition, ``sources=`` instead of a sample, and errors that name the
    argument."""
    import groute
    G = weighted(nx.gnm_random_graph(30, 60, seed=6), "int")
    run = dict(backend="cpu", devices=3, mode="async", partition="random")
    got = groute.edge_betweenness_centrality(G, weight="w", sources=[0, 3], **run)
    want = nx.edge_betweenness_centrality(G, weight="w", k=2, seed=FixedSample([0, 3]))
    close(dict(sorted(got.items())), dict(sorted(want.items())), 1e-9)   # in the CSR's order
    got = groute.betweenness_centrality(G, weight="w", sources=[0, 3], normalized=False,
                                        **run).to_dict()
    want = nx.betweenness_centrality(G, weight="w", k=2, normalized=False,
                                     seed=FixedSample([0, 3]))
    close(got, want, 1e-9)
    close(groute.closeness_centrality(G, distance="w", **run).to_dict(),
          nx.closeness_centrality(G, distance="w"), 1e-12)
    with pytest.raises(ValueError, match="one per arc"):
        groute.closeness_centrality(G, distance="w", arc_weights=[1.0], **run)
    with pytest.raises(ValueError, match="lengths must be finite and >= 0"):
        groute.closeness_centrality(G, distance="w", arc_weights=-np.ones(120), **run)
    with pytest.raises(ValueError, match="lengths must be finite and > 0"):
        groute.edge_betweenness_centrality(G, weight="w", arc_weights=np.zeros(120), **run)
    with pytest.raises(groute.NodeNotFound, match="sources: source 99"):
        groute.edge_betweenness_centrality(G, sources=[99], **run)
    with pytest.raises(ValueError, match="nstart"):
        groute.hits(G, nstart={0: 1}, **run)
    with pytest.raises(ValueError, match="null graph"):
        groute.eigenvector_centrality(nx.Graph(), **run)
    with pytest.raises(ValueError, match="nstart: a dict needs a value for every vertex"):
        groute.eigenvector_centrality(G, nstart={0: 1.0}, **run)


class FixedSample(random.Random):
    """A random state whose sample is the given nodes (NetworkX's betweenness draws
    ``seed.sample(list(G), k)``)."""

    def __init__(self, nodes):
        super().__init__(0)
        self.nodes = nodes

    def sample(self, population, k):
        return list(self.nodes)


def test_edge_betweenness_of_every_node_leaves_networkx_random_state(on_cpu_devices):
    """k == len(G): NetworkX's edge betweenness still draws its sample (its vertex betweenness
    does not), so the caller's generator moves the same on both."""
    import random
    G = nx.karate_club_graph()
    ours, theirs = random.Random(5), random.Random(5)
    got = nx.edge_betweenness_centrality(G, k=len(G), seed=ours, backend="groute")
    want = nx.edge_betweenness_centrality(G, k=len(G), seed=theirs, backend="networkx")
    assert ours.random() == theirs.random()
    assert got.keys() == want.keys()
    assert all(abs(got[e] - want[e]) < 1e-9 for e in want)
