"""A NetworkX user feels at home (issue 39): every ``groute.<function>`` takes NetworkX's
parameter names, meanings and defaults where NetworkX has the algorithm, groute's own options
keyword-only with one spelling, NetworkX's exceptions (also groute errors), weighted PageRank,
and the operator API taking what the algorithms take. CPU devices; weighted PageRank's CUDA
kernels on GPUs (marked)."""
import inspect
import random

import networkx as nx
import numpy as np
import pytest

import groute
from groute import registry
from groute.engines import make_engine
from groute.graph import DEFAULT_PARTITION
from groute.keywords import solver_options
from groute.tuning import PageRankTuning

from support import need_gpus

pytestmark = pytest.mark.timeout(120)

CPU = dict(backend="cpu", devices=1)


def weighted_digraph(seed=1, n=70, p=0.06):
    """A directed graph with real weights, dangling and isolated vertices, a zero-weight
    vertex (dangling by weight) and string labels."""
    G = nx.gnp_random_graph(n, p, seed=seed, directed=True)
    rng = random.Random(seed)
    for u, v in G.edges:
        G[u][v]["w"] = rng.uniform(0.1, 5.0)
    G.add_edge(3, 4, w=0.0)
    for u in list(G.successors(3)):
        G[3][u]["w"] = 0.0
    G.add_nodes_from([n, n + 1])
    return nx.relabel_nodes(G, {v: f"n{v}" for v in G})


def close(got: dict, want: dict, tol):
    assert got.keys() == want.keys()
    err = max(abs(got[v] - want[v]) for v in want)
    assert err <= tol, err


# ------------------------------------------------------------------------------------------------
# NetworkX's parameters, meanings and defaults
# ------------------------------------------------------------------------------------------------
NETWORKX_TWINS = {"bfs": nx.single_source_shortest_path_length,
                  "sssp": nx.single_source_dijkstra_path_length,
                  "shortest_path": nx.shortest_path, "pagerank": nx.pagerank,
                  "katz_centrality": nx.katz_centrality,
                  "connected_components": nx.connected_components,
                  "weakly_connected_components": nx.weakly_connected_components,
                  "strongly_connected_components": nx.strongly_connected_components,
                  "core_number": nx.core_number,
                  "betweenness_centrality": nx.betweenness_centrality}


@pytest.mark.parametrize("name", sorted(NETWORKX_TWINS))
def test_positional_parameters_are_networkx_s(name):
    """The parameters a caller may pass by position are NetworkX's, in its order, with its
    defaults (``G`` first); everything else is keyword-only."""
    ours = inspect.signature(getattr(groute, name)).parameters.values()
    theirs = [p for p in inspect.signature(NETWORKX_TWINS[name]).parameters.values()
              if p.name != "backend" and p.kind is not p.VAR_KEYWORD]
    positional = [p for p in ours if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == [p.name for p in theirs][:len(positional)]
    for p, q in zip(positional, theirs):
        # groute's source is optional (``sources=`` instead); its shortest_path needs both ends
        assert p.default == q.default or (p.default is None and q.default is inspect._empty) \
            or (p.default is inspect._empty and q.default is None), p
    if name != "shortest_path":         # groute's needs the source and the target
        assert len(positional) == len(theirs)


def test_pagerank_takes_networkx_s_arguments():
    """``alpha``, ``max_iter``, ``tol`` (per vertex), ``weight`` by attribute name,
    ``personalization``, ``nstart`` and ``dangling``: NetworkX's answers."""
    G = weighted_digraph()
    pers = {"n0": 1.0, "n5": 3.0}
    dangling = {"n7": 1.0, "n9": 2.0}
    nstart = {v: 1.0 + i % 3 for i, v in enumerate(G)}
    for options in ({}, {"personalization": pers}, {"dangling": dangling},
                    {"personalization": pers, "dangling": dangling}, {"nstart": nstart},
                    {"weight": None}, {"weight": None, "dangling": dangling}):
        weight = options.pop("weight", "w")
        want = nx.pagerank(G, alpha=0.9, weight=weight, tol=1e-12, max_iter=1000, **options)
        got = groute.pagerank(G, alpha=0.9, weight=weight, tol=1e-11, max_iter=1000,
                              **options, **CPU).to_dict()
        close(got, want, 1e-8)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["bsp", "async"])
@pytest.mark.parametrize("kernel", ["auto", "bins"])
def test_weighted_pagerank_every_mode_layout_and_device_count(k, mode, kernel):
    """Weighted PageRank runs on PageRank's engine, every BSP layout and async, 1-3 devices."""
    G = weighted_digraph(seed=k)
    want = nx.pagerank(G, weight="w", tol=1e-12, max_iter=1000)
    got = groute.pagerank(G, weight="w", tol=1e-11, max_iter=1000, backend="cpu", devices=k,
                          mode=mode, partition="random" if k > 1 else DEFAULT_PARTITION,
                          tuning=PageRankTuning(bsp_kernel=kernel)).to_dict()
    close(got, want, 1e-8)
    U = G.to_undirected()
    for u, v in U.edges:
        U[u][v]["w"] = 1.0 + (hash((u, v)) % 5)
    close(groute.pagerank(U, weight="w", tol=1e-11, backend="cpu", devices=k,
                          mode=mode).to_dict(), nx.pagerank(U, weight="w", tol=1e-12), 1e-8)


def test_pagerank_default_weight_is_networkx_s():
    """NetworkX's default ``weight="weight"``: the karate club's weights count unless
    ``weight=None``; edges of one weight are unweighted."""
    G = nx.karate_club_graph()
    close(groute.pagerank(G, tol=1e-11, **CPU).to_dict(), nx.pagerank(G, tol=1e-12), 1e-8)
    close(groute.pagerank(G, weight=None, tol=1e-11, **CPU).to_dict(),
          nx.pagerank(G, weight=None, tol=1e-12), 1e-8)
    with pytest.raises(groute.GraphNotSupported, match="parallel edges add up"):
        groute.pagerank(nx.MultiDiGraph([(0, 1), (0, 1)]), **CPU)
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        groute.pagerank(nx.DiGraph([(0, 1, {"weight": -1.0}), (1, 2, {"weight": 2.0})]), **CPU)
    H = nx.Graph([("a", "b"), ("b", "c")])
    with pytest.raises(ValueError, match=r"personalization: weights must be finite and >= 0 "
                                         r"\(vertex 'c' has -1.0\)"):
        groute.pagerank(H, personalization={"c": -1, "a": 1}, **CPU)
    with pytest.raises(ValueError, match=r"dangling: .* \(position 1 has inf\)"):
        groute.pagerank(H, dangling=np.array([1, np.inf, 0]), **CPU)


def test_pagerank_tol_is_per_vertex_as_networkx_s():
    """NetworkX stops at an L1 change below ``len(G) * tol``: with the same ``tol`` groute stops
    where NetworkX does (give or take an iteration), not at ``tol`` itself."""
    G = nx.gnp_random_graph(300, 0.03, seed=4, directed=True)
    G.add_edges_from((v, (v + 1) % 300) for v in range(300))     # no dangling vertex
    ours = groute.pagerank(G, tol=1e-5, weight=None, **CPU).stats["iterations"]
    theirs = next(k for k in range(1, 100) if _converges(G, tol=1e-5, max_iter=k))
    assert abs(ours - theirs) <= 1, (ours, theirs)
    tight = groute.pagerank(G, tol=1e-5 / len(G), weight=None, **CPU).stats["iterations"]
    assert tight > ours + 1


def _converges(G, **options) -> bool:
    try:
        nx.pagerank(G, **options)
        return True
    except nx.PowerIterationFailedConvergence:
        return False


def test_pagerank_not_converged_raises_networkx_s_error():
    G = nx.gnp_random_graph(50, 0.1, seed=2, directed=True)
    with pytest.raises(nx.PowerIterationFailedConvergence) as exc:
        groute.pagerank(G, max_iter=2, tol=1e-12, **CPU)
    assert isinstance(exc.value, groute.GrouteError) and exc.value.num_iterations == 2
    assert "raise max_iter" in str(exc.value)


def test_katz_takes_networkx_s_positions_weight_and_nstart():
    """``katz_centrality(G, alpha, beta, max_iter, tol, nstart, normalized, weight)`` as
    NetworkX's, by position too."""
    G = weighted_digraph(seed=3)
    want = nx.katz_centrality(G, 0.05, 1.0, 1000, 1e-12, None, False, "w")
    got = groute.katz_centrality(G, 0.05, 1.0, 1000, 1e-12, None, False, "w", **CPU)
    close(got.to_dict(), want, 1e-6)       # the graph keeps real weights in float32
    nstart = {v: 0.5 for v in G}
    close(groute.katz_centrality(G, alpha=0.05, nstart=nstart, tol=1e-12, **CPU).to_dict(),
          nx.katz_centrality(G, alpha=0.05, nstart=nstart, tol=1e-12), 1e-9)


def test_bfs_and_sssp_take_networkx_s_cutoff():
    G = nx.grid_2d_graph(6, 6)
    for u, v in G.edges:
        G[u][v]["weight"] = 1 + (u[0] * 7 + v[1]) % 4
    for cutoff in (0, 2, 2.5, 4):
        assert groute.bfs(G, (0, 0), cutoff, **CPU).to_dict() == \
            nx.single_source_shortest_path_length(G, (0, 0), cutoff)
        assert groute.sssp(G, (0, 0), cutoff, **CPU).to_dict() == \
            nx.single_source_dijkstra_path_length(G, (0, 0), cutoff)


def test_symmetric_reads_edge_arrays_both_ways_everywhere():
    """``symmetric=True`` (docs/GRAPHS.md) is an option of the functions too."""
    src, dst = np.array([0, 1, 3]), np.array([1, 2, 4])
    assert groute.bfs((src, dst), 2, symmetric=True, **CPU).to_dict() == {0: 2, 1: 1, 2: 0}
    assert groute.connected_components((src, dst), symmetric=True, **CPU).to_dict() == \
        {0: 0, 1: 0, 2: 0, 3: 3, 4: 3}
    assert groute.core_number((src, dst), symmetric=True, **CPU).to_dict() == \
        {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}


# ------------------------------------------------------------------------------------------------
# groute's own options: keyword-only, one spelling, errors that name the function
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(registry.ALGORITHMS))
def test_solvers_spell_their_options_one_way(name):
    """Every solver takes ``ctx``, ``backend``, ``devices``, ``timeout``; those that partition
    take ``partition`` (one default) and ``seed``; those with a mode call it ``mode``."""
    entry = registry.ALGORITHMS[name]
    options = solver_options(entry.solver)
    assert {"ctx", "backend", "devices", "timeout"} <= options, name
    for unwanted in {"engine", "max_iterations", "damping", "depth_limit"}:
        assert unwanted not in options, (name, unwanted)
    if entry.takes_partition:
        assert {"partition", "seed", "mode"} <= options, name
        defaults = [inspect.signature(cls.__dict__["__init__"]).parameters["partition"].default
                    for cls in entry.solver.__mro__
                    if "__init__" in cls.__dict__
                    and "partition" in inspect.signature(cls.__dict__["__init__"]).parameters]
        assert defaults and set(defaults) == {DEFAULT_PARTITION}, (name, defaults)


@pytest.mark.parametrize("name", list(registry.FUNCTIONS))
def test_an_unknown_keyword_names_the_function_and_the_closest_option(name):
    function = registry.FUNCTIONS[name]
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument "
                                         r"'devics'; did you mean 'devices'\?$"):
        function(nx.path_graph(3), devics=1)


@pytest.mark.parametrize("call, word, meant", [
    (lambda **kw: groute.pagerank(nx.path_graph(3), **kw), "damping", "alpha"),
    (lambda **kw: groute.pagerank(nx.path_graph(3), **kw), "max_iterations", "max_iter"),
    (lambda **kw: groute.bfs(nx.path_graph(3), 0, **kw), "depth_limit", "cutoff"),
    (lambda **kw: groute.core_number(nx.path_graph(3), **kw), "partiton", "partition"),
])
def test_other_words_for_an_option_name_groute_s(call, word, meant):
    with pytest.raises(TypeError, match=f"'{word}'; did you mean '{meant}'"):
        call(**{word: 1})


def test_a_solver_class_names_itself_not_its_base():
    from groute.apps.pr import PageRank
    from groute.graph import load_graph
    with pytest.raises(TypeError, match=r"^PageRank\(\) got an unexpected keyword argument "
                                         r"'damping'; did you mean 'alpha'\?$"):
        PageRank(load_graph("grid:3"), damping=0.9, **CPU)


# ------------------------------------------------------------------------------------------------
# NetworkX's exceptions
# ------------------------------------------------------------------------------------------------
def test_a_missing_source_is_networkx_s_node_not_found_naming_the_graph():
    G = nx.karate_club_graph()
    for call in (lambda: groute.bfs(G, 99, **CPU), lambda: groute.sssp(G, 99, **CPU),
                 lambda: groute.shortest_path(G, 0, 99, **CPU),
                 lambda: groute.bfs(G, sources=[0, 99], **CPU)):
        with pytest.raises(nx.NodeNotFound, match="99 is not a vertex of the NetworkX Graph") \
                as exc:
            call()
        assert isinstance(exc.value, (groute.GrouteError, ValueError))
    with pytest.raises(nx.NodeNotFound, match="'x' is not a vertex of the NetworkX DiGraph 'roads'"):
        groute.bfs(nx.DiGraph([(0, 1)], name="roads"), "x", **CPU)
    with pytest.raises(nx.NodeNotFound, match="7 is not a vertex of the edge arrays"):
        groute.bfs((np.array([0]), np.array([1])), 7, **CPU)


def test_a_tuple_source_of_a_graph_of_numbered_vertices_is_not_a_vertex():
    """A tuple of ids is no vertex where the ids are numbers (it used to run from the number
    inside it); where the vertices are tuples it is one."""
    G = nx.path_graph(5)
    for call in (lambda: groute.bfs(G, (3,), **CPU), lambda: groute.sssp(G, (3, 4), **CPU),
                 lambda: groute.shortest_path(G, (0,), 4, **CPU)):
        with pytest.raises(nx.NodeNotFound, match=r"\(3,\)|\(3, 4\)|\(0,\)"):
            call()
    assert groute.bfs(nx.grid_2d_graph(3, 3), (0, 0), **CPU).to_dict()[(2, 2)] == 4


def test_graph_not_supported_is_networkx_not_implemented():
    with pytest.raises(nx.NetworkXNotImplemented):
        groute.strongly_connected_components(nx.path_graph(3), **CPU)
    with pytest.raises(nx.NetworkXNotImplemented):
        groute.core_number(nx.Graph([(0, 0), (0, 1)]), **CPU)
    assert issubclass(groute.GraphNotSupported, groute.GrouteError)


def test_import_groute_and_a_call_without_an_error_load_no_networkx():
    """The exceptions that are NetworkX's too are made when asked for: a call that raises none
    of them never imports NetworkX (a quarter of a second of a small call's fixed cost)."""
    import subprocess
    import sys
    script = ("import sys, numpy as np, groute\n"
              "groute.bfs((np.array([0, 1]), np.array([1, 2])), 0, backend='cpu', devices=1)\n"
              "print('networkx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "False", done.stderr


# ------------------------------------------------------------------------------------------------
# the operator API takes what the algorithms take
# ------------------------------------------------------------------------------------------------
def test_make_engine_takes_any_graph_input_and_frontiers_take_ids():
    from groute.operators import reduce
    G = nx.Graph([("n0", "n1"), ("n1", "n2"), ("n2", "n3")])
    with make_engine(G, **CPU) as engine:
        engine.out_degree_state("degree")
        assert len(engine.frontier(["n0", "n3"])) == 2
        assert reduce(engine.frontier(["n1", "n2"]), "degree", "min") == 2
        with pytest.raises(nx.NodeNotFound, match="'n9'"):
            engine.frontier(["n9"])
    with make_engine((np.array([0, 1]), np.array([1, 2])), "bsp", backend="cpu",
                     devices=2) as engine:
        assert len(engine.frontier([0, 2])) == 2
    with pytest.raises(TypeError, match=r"^make_engine\(\) got an unexpected keyword argument "
                                         r"'partiton'; did you mean 'partition'\?$"):
        make_engine(G, partiton="metis", **CPU)


# ------------------------------------------------------------------------------------------------
# weighted PageRank's CUDA kernels
# ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.multigpu),
                               pytest.param(3, marks=pytest.mark.multigpu)])
@pytest.mark.parametrize("setup", [dict(mode="bsp"), dict(mode="async"),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="bins")),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="coo")),
                                   dict(mode="bsp", tuning=dict(persistent=True))], ids=str)
def test_weighted_pagerank_cuda(k, setup):
    """Every kernel's weighted form (iterate.cu ARC_WEIGHTS: the pulls, their persistent forms,
    the push) against NetworkX, twice on one solver."""
    import dataclasses
    from groute.apps.pr import PageRank
    from groute.graph import load_graph
    need_gpus(k)
    setup = dict(setup)
    tuning = dataclasses.replace(PageRankTuning(), **setup.pop("tuning", {}))
    G = weighted_digraph(seed=20 + k, n=600, p=0.01)
    want = nx.pagerank(G, weight="w", tol=1e-12, max_iter=2000)
    with PageRank(load_graph(G, weight="w"), backend="cuda", devices=k, weight="w",
                  partition="contiguous", tol=1e-10, max_iter=1000, tuning=tuning,
                  **setup) as solver:
        for _ in range(2):
            close(solver.run().to_dict(), want, 1e-4)


@pytest.mark.parametrize("weight", [lambda u, v, d: d["weight"] * 10, ["weight"]])
def test_a_weight_that_is_no_attribute_name_is_refused(weight):
    """A weight function (NetworkX calls one) or a list read as an attribute no edge has, and
    every edge weighed 1: a wrong answer without a word. Any other key names an attribute, as
    in NetworkX (0 here)."""
    G = nx.Graph([(0, 1, {"weight": 5}), (1, 2, {"weight": 5}), (0, 2, {"weight": 1})])
    for call in (lambda: groute.sssp(G, 0, weight=weight, backend="cpu"),
                 lambda: groute.pagerank(G, weight=weight, backend="cpu")):
        with pytest.raises(TypeError, match="weight must name an edge attribute"):
            call()
    K = nx.Graph([(0, 1, {0: 5}), (1, 2, {0: 5}), (0, 2, {0: 1})])
    assert groute.sssp(K, 0, weight=0, backend="cpu").to_dict() == \
        nx.single_source_dijkstra_path_length(K, 0, weight=0)


def test_an_edge_whose_weight_is_none_is_named_not_weighed_one():
    """Missing, an edge weighs 1 (NetworkX's rule); an explicit None is no weight: NetworkX's
    Dijkstra hides the edge, other functions fail, so groute names it (a multigraph's too)."""
    for G in (nx.DiGraph([(0, 1, {"weight": None}), (1, 2, {"weight": 1}), (0, 2)]),
              nx.MultiDiGraph([(0, 1, {"weight": 2}), (0, 1, {"weight": None}), (1, 2)])):
        with pytest.raises(ValueError, match=r"edge \(0, 1\) has weight=None"):
            groute.sssp(G, 0, backend="cpu")
    G = nx.DiGraph([(0, 1), (1, 2, {"weight": 4})])
    assert groute.sssp(G, 0, backend="cpu").to_dict() == {0: 0, 1: 1, 2: 5}
    M = nx.MultiDiGraph([(0, 1, {"weight": 3}), (0, 1), (0, 1, {"weight": "x"})])
    with pytest.raises(ValueError, match=r"edge \(0, 1\) has weight='x'"):
        groute.sssp(M, 0, backend="cpu")


@pytest.mark.parametrize("fn", ["core_number", "katz_centrality", "eigenvector_centrality",
                                "hits", "edge_betweenness_centrality"])
def test_a_multigraph_is_refused_where_networkx_refuses_it_or_counts_parallel_edges(fn):
    """core_number, Katz and eigenvector centrality are not implemented for multigraphs in
    NetworkX; its HITS adds parallel edges up and its edge betweenness keys each one: groute,
    which keeps one arc per pair, answered all five as if the graph were simple."""
    G = nx.MultiGraph([(0, 1), (0, 1), (1, 2), (2, 3), (3, 0)])
    with pytest.raises(nx.NetworkXNotImplemented, match="MultiGraph"):
        getattr(groute, fn)(G, backend="cpu")
    getattr(groute, fn)(nx.Graph(G), backend="cpu")         # the simple graph answers


def test_weights_past_what_groute_stores_name_the_weight():
    """A weight float32 or int32 cannot hold (1e300, 2**40) is refused naming the edge (a
    NetworkX user cannot map an arc's position to one), with no overflow warning on the way;
    an infinite weight stays what it is; edge arrays name the arc."""
    import warnings
    G = nx.Graph([(0, 1, {"weight": 1.0}), (1, 2, {"weight": 1e300})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"edge \(1, 2\) has weight=1e\+300, which is past "
                                             r"float32"):
            groute.sssp(G, 0, backend="cpu")
    with pytest.raises(ValueError, match=r"edge \(0, 1\) has weight=1099511627776, which does "
                                         r"not fit in int32"):
        groute.sssp(nx.Graph([(0, 1, {"weight": 2**40})]), 0, backend="cpu")
    G = nx.Graph([(0, 1, {"weight": float("inf")}), (1, 2, {"weight": 1e300})])
    with pytest.raises(ValueError, match="past float32"):
        groute.pagerank(G, backend="cpu")
    assert groute.pagerank(nx.Graph([(0, 1, {"weight": 1e30})]), backend="cpu").values.size == 2
    arrays = (np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1e300]))
    with pytest.raises(ValueError, match=r"the weight 1e\+300 of arc 1 is past float32"):
        groute.sssp(arrays, 0, backend="cpu")


def test_a_weight_that_float32_holds_as_zero_is_named():
    """A positive weight below float32's smallest would be stored as 0 (betweenness would
    say every length must be > 0, SSSP would sum zeros): it is refused by name; the smallest
    float32 (a subnormal) is kept."""
    G = nx.Graph([(0, 1, {"weight": 1e-50}), (1, 2, {"weight": 1.0})])
    for call in (lambda: groute.betweenness_centrality(G, weight="weight", backend="cpu"),
                 lambda: groute.sssp(G, 0, backend="cpu")):
        with pytest.raises(ValueError, match=r"edge \(0, 1\) has weight=1e-50, which is below"):
            call()
    tiny = float(np.nextafter(np.float32(0), np.float32(1)))
    res = groute.sssp(nx.Graph([(0, 1, {"weight": tiny})]), 0, backend="cpu")
    assert res.values.tolist() == [0.0, tiny]
