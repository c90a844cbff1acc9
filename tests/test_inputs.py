"""Graphs in: every algorithm and load_graph take a path or spec, a CSRGraph, a scipy sparse
matrix, a NetworkX graph (labels of any hashable type, a chosen weight attribute) and edge
arrays; ``source`` is one of the graph's own ids. Answers keyed by labels are checked against
NetworkX itself."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from groute.apps.bfs import bfs
from groute.apps.cc import connected_components, weakly_connected_components
from groute.apps.pr import pagerank
from groute.apps.sssp import sssp
from groute.graph import as_graph, load_graph, reference, shipped_graph_path
from groute.graph.ids import VertexIds, label_array

CPU = dict(backend="cpu", devices=2, partition="random", timeout=30)


def karate_with_names():
    """Zachary's karate club with string labels and its integer 'weight' attribute."""
    G = nx.karate_club_graph()
    return nx.relabel_nodes(G, {v: f"member-{v}" for v in G})


def with_isolated_nodes():
    G = nx.Graph()
    G.add_nodes_from(["lonely", ("tuple", 1), 7, "x"])
    G.add_edges_from([("a", "b"), ("b", "c"), ("c", "a"), ("c", 7), ("x", "y")])
    return G


def random_digraph(seed=3):
    G = nx.gnp_random_graph(40, 0.06, seed=seed, directed=True)
    return nx.relabel_nodes(G, {v: f"v{v}" for v in G})


def weighted_by_cost(seed=5):
    rng = np.random.default_rng(seed)
    G = nx.gnm_random_graph(60, 150, seed=seed)
    for u, v in G.edges:
        G.edges[u, v]["cost"] = int(rng.integers(1, 20))
        G.edges[u, v]["weight"] = 1000            # not the attribute asked for
    return nx.relabel_nodes(G, {v: (v % 7, v) for v in G})       # tuple labels


def _components_as_sets(result):
    groups = {}
    for vertex, label in result.to_dict().items():
        groups.setdefault(label, set()).add(vertex)
    return _sets(groups.values())


def _sets(components):
    """Components as a sorted list of frozensets (labels of mixed types sorted as text)."""
    return sorted(map(frozenset, components), key=lambda s: sorted(map(str, s)))


# ------------------------------------------------------------------ against NetworkX
@pytest.mark.timeout(120)
@pytest.mark.parametrize("make", [karate_with_names, with_isolated_nodes, random_digraph],
                         ids=["karate-names", "isolated-nodes", "digraph"])
def test_bfs_and_cc_match_networkx(make):
    G = make()
    for source in list(G.nodes)[:4]:
        got = bfs(G, source, **CPU).to_dict()
        assert got == dict(nx.single_source_shortest_path_length(G, source)), source
    components = weakly_connected_components if G.is_directed() else connected_components
    cc = components(G, backend="cpu", devices=2)
    want = nx.weakly_connected_components(G) if G.is_directed() else nx.connected_components(G)
    assert _components_as_sets(cc) == _sets(want)
    # every label is the id of a vertex of its own component
    for vertex, label in cc.to_dict().items():
        assert nx.has_path(G.to_undirected(), vertex, label)


@pytest.mark.timeout(120)
def test_sssp_matches_networkx_on_karate_weights():
    G = karate_with_names()
    for source in ("member-0", "member-33", "member-16"):
        got = sssp(G, source, **CPU).to_dict()
        assert got == nx.single_source_dijkstra_path_length(G, source, weight="weight")


@pytest.mark.timeout(120)
def test_sssp_reads_the_weight_attribute_asked_for():
    G = weighted_by_cost()
    source = next(iter(G.nodes))
    got = sssp(G, source, weight="cost", **CPU).to_dict()
    assert got == nx.single_source_dijkstra_path_length(G, source, weight="cost")
    unit = sssp(G, source, weight=None, **CPU).to_dict()
    assert unit == dict(nx.single_source_shortest_path_length(G, source))


@pytest.mark.timeout(120)
def test_sssp_on_a_digraph_with_float_weights():
    G = random_digraph(seed=8)
    rng = np.random.default_rng(8)
    for u, v in G.edges:
        G.edges[u, v]["length"] = float(rng.uniform(0.5, 3.0))
    source = "v0"
    got = sssp(G, source, weight="length", **CPU).to_dict()
    want = nx.single_source_dijkstra_path_length(G, source, weight="length")
    assert got.keys() == want.keys()
    for v in want:                                  # float32 sums against float64
        assert got[v] == pytest.approx(want[v], rel=1e-6)


@pytest.mark.timeout(120)
def test_pagerank_matches_networkx_keyed_by_labels():
    """Keyed by the labels; weighted by the karate club's ``weight``, as NetworkX's default,
    and unweighted with ``weight=None``."""
    G = karate_with_names()
    for weight in ("weight", None):
        got = pagerank(G, backend="cpu", devices=2, tol=1e-9, weight=weight).to_dict()
        want = nx.pagerank(G, weight=weight, tol=1e-12)
        assert got.keys() == want.keys()
        assert max(abs(got[v] - want[v]) for v in want) < 1e-6, weight


def test_multigraph_parallel_edges_keep_the_least_weight():
    G = nx.MultiDiGraph()
    G.add_edge("a", "b", weight=5)
    G.add_edge("a", "b", weight=2)
    G.add_edge("b", "c")                            # no attribute: weight 1, as in NetworkX
    g = as_graph(G)
    assert g.num_edges == 2 and g.weights.tolist() == [2, 1]
    assert sssp(G, "a", backend="cpu", devices=1).to_dict() == {"a": 0, "b": 2, "c": 3}


def test_networkx_graph_conversion_keeps_labels_and_direction():
    G = with_isolated_nodes()
    g = as_graph(G)
    assert not g.directed and g.num_vertices == G.number_of_nodes()
    assert g.ids.tolist() == list(G.nodes)
    assert g.vertex_of(("tuple", 1)) == 1 and g.file_id_of(3) == "x"
    assert g.num_edges == 2 * G.number_of_edges()
    assert g.weights is None                         # no edge has a 'weight'
    plain = nx.path_graph(4)                         # labels 0..n-1 in order: no label array
    assert as_graph(plain).file_ids is None
    with pytest.raises(KeyError, match="not a vertex"):
        g.vertex_of("nobody")


def test_networkx_weights_must_be_numbers():
    G = nx.Graph()
    G.add_edge("a", "b", weight="heavy")
    with pytest.raises(ValueError, match="weight"):
        as_graph(G)
    assert as_graph(G, weight=None).weights is None


@pytest.mark.parametrize("value", [2**63, 2**64, -2**70, np.uint64(2**63)])
def test_an_integer_weight_past_64_bits_is_refused_as_one_past_int32(value):
    """2**64 raised a bare StopIteration (a map() or a generator then swallowed it and lost the
    answer); 2**63 became a float weight without a word."""
    G = nx.Graph()
    G.add_edge(0, 1, weight=value)
    G.add_edge(1, 2, weight=1)
    with pytest.raises(ValueError, match=r"edge \(0, 1\) has weight=.*, which does not fit in "
                                         r"int32"):
        as_graph(G)
    G[0][1]["weight"] = 2.5         # a float among them: float weights, as before
    assert as_graph(G).weights.dtype == np.float32


@pytest.mark.parametrize("value, what", [(float("nan"), "is NaN"), (float("inf"), "is infinite"),
                                         (-2.5, r"is negative \(-2.5\)")])
def test_sssp_names_a_bad_weight_and_its_edge_in_the_callers_ids(value, what):
    G = nx.DiGraph()
    G.add_edge("a", "b", cost=1.0)
    G.add_edge("b", "c", cost=value)
    with pytest.raises(ValueError, match=f"arc 'b' -> 'c' {what}"):
        sssp(G, "a", weight="cost", **CPU)
    src, dst = np.array([4, 5]), np.array([5, 6])
    with pytest.raises(ValueError, match=f"arc 5 -> 6 {what}"):
        sssp((src, dst, np.array([1.0, value])), 4, **CPU)


# ------------------------------------------------------------------ scipy, arrays, CSRGraph
def test_scipy_matrices_and_arrays():
    m = sp.csr_matrix((np.array([3.0, 1.0, 2.0]), (np.array([0, 1, 2]), np.array([1, 2, 0]))),
                      shape=(4, 4))
    for matrix in (m, sp.csr_array(m), m.tocoo()):
        g = as_graph(matrix)
        assert g.directed and g.num_vertices == 4 and g.weights.tolist() == [3.0, 1.0, 2.0]
        assert sssp(matrix, 0, backend="cpu", devices=1).values.tolist() == [0, 3, 4, np.inf]
    sym = m + m.T
    assert not as_graph(sym).directed
    # an explicit zero is an arc (of weight 0): one without its reverse makes the graph directed
    zero = sp.csr_matrix((np.array([1.0, 1.0, 0.0]), (np.array([0, 1, 2]), np.array([1, 0, 3]))),
                         shape=(4, 4))
    g = as_graph(zero)
    assert g.directed and g.num_edges == 3
    assert bfs(zero, 3, backend="cpu", devices=1).values.tolist() == [-1, -1, -1, 0]
    with pytest.raises(ValueError, match="square"):
        as_graph(sp.csr_matrix(np.ones((2, 3))))
    # a CSR matrix holding an entry twice: summed, as scipy does, before the symmetry is read
    twice = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([1, 1, 0]),
                           np.array([0, 2, 3])), shape=(2, 2))
    assert not twice.has_canonical_format
    g = as_graph(twice)
    assert not g.directed and g.num_edges == 2 and g.weights.tolist() == [3.0, 3.0]


def test_edge_arrays():
    src, dst = np.array([0, 1, 1]), np.array([1, 2, 3])
    g = as_graph((src, dst))
    assert g.num_vertices == 4 and g.directed and g.weights is None
    assert as_graph((src, dst), num_vertices=6).num_vertices == 6
    assert as_graph((src, dst), num_vertices=np.int64(6)).num_vertices == 6
    for bad in (4.9, 6.0, True):        # 4.9 was read as 4 (no error), True as 1
        with pytest.raises(TypeError, match=f"num_vertices must be an int, got "
                                            f"{type(bad).__name__} {bad!r}"):
            as_graph((src, dst), num_vertices=bad)
    w = as_graph((src, dst, np.array([1.5, 2.0, 0.5])))
    assert w.weights.dtype == np.float32
    assert not load_graph((src, dst), symmetric=True).directed
    res = bfs((src, dst), 0, num_vertices=6, backend="cpu", devices=2)
    assert res.values.tolist() == [0, 1, 2, 2, -1, -1]
    assert res.to_dict() == {0: 0, 1: 1, 2: 2, 3: 2}
    with pytest.raises(ValueError, match="num_vertices"):
        as_graph((src, dst), num_vertices=3)
    with pytest.raises(ValueError, match=">= 0"):
        as_graph((np.array([-1]), np.array([0])))
    with pytest.raises(TypeError, match="integer"):
        as_graph((np.array([0.5]), np.array([1.0])))
    with pytest.raises(ValueError, match="differ in length"):
        as_graph((np.array([0, 1]), np.array([1])))
    with pytest.raises(ValueError, match=r"weights must be a 1-D array of one weight per arc "
                                         r"\(\d+\), got shape \(2,\)"):
        as_graph((src, dst, np.ones(2)))
    with pytest.raises(ValueError, match=r"one weight per arc .*got shape \(1, "):
        as_graph((src, dst, np.ones((1, src.shape[0]))))    # 2-D, the message says so
    # values that are no real numbers: a TypeError naming them
    with pytest.raises(TypeError, match="weights must be real numbers, got dtype <U1"):
        as_graph((src, dst, np.array(["1"] * src.shape[0])))
    import scipy.sparse as sp
    with pytest.raises(TypeError, match="the matrix's values must be real numbers, got dtype "
                                        "complex128"):
        as_graph(sp.csr_matrix(np.array([[0, 1j], [1, 0]])))
    with pytest.raises(ValueError, match="tuple of 4"):
        as_graph((src, dst, None, 4))
    with pytest.raises(ValueError, match="edge arrays only"):
        as_graph(nx.path_graph(3), num_vertices=3)


def _same_graph_as(kind, g, path):
    """``g`` (0-based ids, unweighted) as the input ``kind``."""
    src, dst = (np.asarray(a) for a in g.edges())
    if kind == "path":
        return str(path)
    if kind == "csr":
        return g
    if kind == "networkx":
        G = nx.DiGraph() if g.directed else nx.Graph()
        G.add_nodes_from(range(g.num_vertices))
        G.add_edges_from(zip(src.tolist(), dst.tolist()))
        return G
    if kind == "scipy":
        return sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(g.num_vertices,) * 2)
    return (src, dst)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["path", "csr", "networkx", "scipy", "arrays"])
def test_every_app_takes_every_input(kind, tmp_path):
    """The same directed graph given five ways: the same answers from all four apps."""
    from groute.graph import write_snap
    g = load_graph("rmat:7", cache=False).without_weights()
    path = tmp_path / "g.el"
    write_snap(g, path)
    graph = _same_graph_as(kind, g, path)
    if kind == "path":                  # a SNAP file numbers only the vertices in some arc
        g = load_graph(path, cache=False)
    s = int(np.argmax(np.diff(g.indptr)))
    source = g.file_id_of(s)
    opts = dict(backend="cpu", devices=2)
    depth = reference.bfs(g, s)
    np.testing.assert_array_equal(bfs(graph, source, **opts).values, depth)
    np.testing.assert_array_equal(sssp(graph, source, **opts).values,     # weight 1 per arc
                                  np.where(depth < 0, np.inf, depth))
    np.testing.assert_array_equal(weakly_connected_components(graph, **opts).values,
                                  reference.connected_components(g))
    l1, _ = reference.pagerank_error(pagerank(graph, tol=1e-8, **opts).values,
                                     reference.pagerank(g))
    assert l1 <= 1e-4


def test_unknown_inputs_say_what_is_accepted():
    with pytest.raises(TypeError, match="NetworkX"):
        as_graph([(0, 1), (1, 2)])
    with pytest.raises(TypeError, match="NetworkX"):
        bfs({0: [1]}, 0, backend="cpu")


def test_a_csrgraph_passes_through_unchanged():
    g = load_graph("grid:4")
    assert as_graph(g) is g and load_graph(g) is g


# ------------------------------------------------------------------ the API's source is the graph's id
@pytest.mark.timeout(60)
def test_source_is_the_files_own_id():
    """On a 1-based Matrix Market file ``bfs(g, 1)`` starts at file id 1 (position 0), the same
    vertex ``groute bfs --source 1`` means; a path works as the graph too."""
    path = shipped_graph_path()
    g = load_graph(path)
    res = bfs(g, 1, backend="cpu", devices=2)
    np.testing.assert_array_equal(res.values, reference.bfs(g, 0))
    assert res.ids[0] == 1 and res.to_dict()[1] == 0
    by_path = bfs(str(path), 1, backend="cpu", devices=1)
    np.testing.assert_array_equal(by_path.values, res.values)
    with pytest.raises(ValueError, match="source 0 is not a vertex"):
        bfs(g, 0, backend="cpu", devices=1)
    with pytest.raises(ValueError, match="source 'a' is not a vertex"):
        sssp(g, "a", backend="cpu", devices=1)


@pytest.mark.timeout(60)
def test_labelled_graph_survives_partitioning():
    """A random partition renumbers the vertices; the answer still comes back by label."""
    G = karate_with_names()
    want = dict(nx.single_source_shortest_path_length(G, "member-5"))
    for k in (1, 3, 4):
        got = bfs(G, "member-5", backend="cpu", devices=k, partition="random")
        assert got.to_dict() == want
    g = as_graph(G)
    r = g.relabel(np.random.default_rng(0).permutation(g.num_vertices))
    assert sorted(r.ids.tolist()) == sorted(g.ids.tolist())
    assert r.file_id_of(r.vertex_of("member-7")) == "member-7"


# ------------------------------------------------------------------ ids
def test_label_arrays_keep_labels_whole():
    assert label_array([3, 1, 2]).dtype == np.int64
    tuples = label_array([(0, 1), (0, 2)])
    assert tuples.dtype == object and tuples.shape == (2,) and tuples[1] == (0, 2)
    assert label_array(np.array(["a", "b"])).dtype == object
    assert label_array([True, False]).dtype == object          # bools are not integer ids
    assert label_array([2**70, 1]).dtype == object             # past int64


def test_vertex_ids_map_both_ways_and_name_bad_ids():
    base = VertexIds(4, base=1, name="g")
    assert base.id_of(np.array([0, 3])).tolist() == [1, 4] and base.position_of(4) == 3
    with pytest.raises(KeyError, match=r"source 5 is not a vertex of g.*1\.\.4"):
        base.position_of(5, "source")
    with pytest.raises(KeyError, match="integers"):
        base.position_of(2.0)
    with pytest.raises(KeyError, match="integers"):
        base.position_of(True)
    sparse = VertexIds(3, labels=[30, 10, 20])
    assert sparse.position_of(np.array([10, 20, 30])).tolist() == [1, 2, 0]
    named = VertexIds(3, labels=["x", ("t", 1), 5])
    assert named.position_of(("t", 1)) == 1 and named.position_of(["x", 5]).tolist() == [0, 2]
    with pytest.raises(KeyError, match="not a vertex"):
        named.position_of([["unhashable"]])
    with pytest.raises(ValueError, match="repeat: 'a' names two vertices"):
        VertexIds(2, labels=["a", "a"]).position_of("a")


def test_text_labels_are_checked_unique_by_the_dict_their_lookups_use():
    """One pass over text labels: the uniqueness check builds the label -> position dict that
    every lookup then reads (validate's check and the first lookup each made their own)."""
    ids = VertexIds(4, labels=["d", ("t", 1), "b", 7])
    assert ids.repeated_label() is None
    index = ids._index
    assert index == {"d": 0, ("t", 1): 1, "b": 2, 7: 3}
    assert ids.position_of(["b", "d"]).tolist() == [2, 0] and ids._index is index
    assert VertexIds(3, labels=["x", "y", "x"]).repeated_label() == "x"


@pytest.mark.parametrize("n", [0, 1])
def test_more_devices_than_vertices_is_said_in_the_same_words_by_every_app(n):
    """BFS and PageRank used to word this differently (PageRank, an empty graph on 2 devices:
    'cannot split 0 vertices into 2 parts: k must be <= |V|'); the engine-based apps (k-core,
    betweenness) said the partitioner's words too."""
    import groute
    from groute.graph import CSRGraph
    g = CSRGraph.from_edges(np.zeros(0, int), np.zeros(0, int), n)
    calls = {"bfs": lambda: groute.bfs(g, 0, backend="cpu", devices=2),
             "sssp": lambda: groute.sssp(g, 0, backend="cpu", devices=2),
             "pagerank": lambda: groute.pagerank(g, backend="cpu", devices=2),
             "katz": lambda: groute.katz_centrality(g, backend="cpu", devices=2)}
    if n:           # k-core and betweenness answer an empty graph without a device
        calls["the async engine"] = lambda: groute.core_number(g, backend="cpu", devices=2)
    vertices = "vertex" if n == 1 else "vertices"
    for who, call in calls.items():
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == (f"{who}: 2 devices for a graph of {n} {vertices}: the "
                                   f"vertices are shared out among the devices, at least one "
                                   f"each; use 1 device or fewer"), str(info.value)
