"""The NetworkX backend's components, cores and structure (groute/nx_backend/algorithms/
components.py, cores.py and structure.py): k-cores and k-trusses as NetworkX's subgraphs
(attributes and orders), isolates, reciprocity, bipartite colouring and the counts and tests of
weak and strong components, each against NetworkX's own call on small graphs of several kinds,
on one and two CPU virtual devices and one GPU; and the conversion that keeps the NetworkX
graph for the functions returning subgraphs."""
from __future__ import annotations

import networkx as nx
import pytest
from networkx.algorithms import bipartite

from groute.nx_backend.graph import from_networkx
from nx_support import on_devices, registered  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(300)


def graphs():
    """With node, edge and graph attributes: undirected with string labels and an isolated
    node, tuple labels, directed with reciprocated arcs."""
    karate = nx.karate_club_graph()
    gnm = nx.relabel_nodes(nx.gnm_random_graph(40, 110, seed=3), lambda i: f"n{i}")
    gnm.add_node("alone", colour="grey")
    grid = nx.grid_2d_graph(4, 4)
    grid.add_edges_from([((0, 0), (1, 1)), ((1, 1), (2, 2)), ((0, 1), (1, 1))])
    directed = nx.gnm_random_graph(30, 100, seed=4, directed=True)
    directed.add_edges_from([(1, 2), (2, 1), (3, 4), (4, 3)])
    directed.add_node(77)
    out = {"karate": karate, "gnm-str": gnm, "grid-tuples": grid, "directed": directed}
    for i, G in enumerate(out.values()):
        G.graph["title"] = f"graph {i}"
        for j, v in enumerate(G):
            G.nodes[v]["order"] = j
        for u, v in G.edges:
            G[u][v]["cost"] = 1 + (hash((u, v)) % 5)
    return out


GRAPHS = graphs()
UNDIRECTED = [n for n, G in GRAPHS.items() if not G.is_directed()]


def same_graph(got, want):
    """NetworkX's own check of a returned graph (its tests' strict one) and the orders."""
    assert type(got) is type(want)
    assert got.graph == want.graph and got._node == want._node and got._adj == want._adj
    assert list(got) == list(want)
    assert [list(got._adj[v]) for v in got] == [list(want._adj[v]) for v in want]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_k_core_shell_crust_corona(on_devices, name):
    G = GRAPHS[name]
    top = max(nx.core_number(G).values())
    for k in (None, 0, 1, 2, top, top + 1):
        for f in (nx.k_core, nx.k_shell, nx.k_crust):
            same_graph(f(G, k, backend="groute"), f(G, k))
    for k in (None, *range(top + 2)):      # None: the largest core number
        same_graph(nx.k_corona(G, k, backend="groute"), nx.k_corona(G, k))


def test_core_subgraphs_from_given_core_numbers(on_devices):
    """A core_number dict is read as NetworkX reads it (keys that are not nodes ignored,
    k=None its largest value); k_corona takes one with an integer per node."""
    G = GRAPHS["karate"]
    core = nx.core_number(G)
    odd = dict(core, extra=99)
    for f in (nx.k_core, nx.k_shell, nx.k_crust):
        same_graph(f(G, core_number=odd, backend="groute"), f(G, core_number=odd))
        same_graph(f(G, 2, core_number=core, backend="groute"), f(G, 2, core_number=core))
    same_graph(nx.k_corona(G, 2, core_number=core, backend="groute"),
               nx.k_corona(G, 2, core_number=core))
    with pytest.raises(NotImplementedError):        # NetworkX runs such a call
        nx.k_corona(G, 2, core_number=odd, backend="groute")


@pytest.mark.parametrize("name", UNDIRECTED)
def test_k_truss(on_devices, name):
    G = GRAPHS[name]
    for k in (-1, 2, 3, 4, 5, 6):
        same_graph(nx.k_truss(G, k, backend="groute"), nx.k_truss(G, k))


def test_core_and_truss_errors_are_networkx(on_devices):
    loop = nx.Graph([(0, 1), (1, 1)])
    for f in (nx.k_core, nx.k_shell, nx.k_crust):
        with pytest.raises(nx.NetworkXNotImplemented, match="self loops"):
            f(loop, backend="groute")
    with pytest.raises(nx.NetworkXNotImplemented, match="self loops"):
        nx.k_truss(loop, 3, backend="groute")
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.k_truss(GRAPHS["directed"], 3, backend="groute")
    with pytest.raises(ValueError):                 # max() of no core numbers, as NetworkX
        nx.k_core(nx.Graph(), backend="groute")
    same_graph(nx.k_truss(nx.empty_graph(3), 3, backend="groute"),
               nx.k_truss(nx.empty_graph(3), 3))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_isolates(on_devices, name):
    G = GRAPHS[name].copy()
    G.add_nodes_from(["x", ("y", 1)])
    G.add_edge("loop", "loop")                      # a self-loop is no isolate
    got = nx.isolates(G, backend="groute")
    assert not isinstance(got, (list, tuple))      # a generator, as NetworkX's
    assert list(got) == list(nx.isolates(G))
    assert nx.number_of_isolates(G, backend="groute") == nx.number_of_isolates(G)
    for n in list(G)[:3] + ["x", "loop", ("y", 1)]:
        assert nx.is_isolate(G, n, backend="groute") is nx.is_isolate(G, n)


def test_is_isolate_of_what_is_not_a_node(on_devices):
    """NetworkX's G.degree(n) == 0: a view for a container, its error for anything else."""
    G = nx.path_graph(3)
    assert nx.is_isolate(G, "ab", backend="groute") is nx.is_isolate(G, "ab") is False
    with pytest.raises(nx.NetworkXError, match="Node 9 is not in the graph"):
        nx.is_isolate(G, 9, backend="groute")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_reciprocity(on_devices, name):
    G = GRAPHS[name].copy()
    assert nx.overall_reciprocity(G, backend="groute") == nx.overall_reciprocity(G)
    assert nx.reciprocity(G, backend="groute") == nx.reciprocity(G)
    if not G.is_directed():
        return
    G.add_edge(5, 5)
    G.add_node("alone")
    some = list(G)[::2]
    assert list(nx.reciprocity(G, some, backend="groute").items()) == \
        list(nx.reciprocity(G, some).items())
    assert nx.reciprocity(G, 5, backend="groute") == nx.reciprocity(G, 5)
    with pytest.raises(nx.NetworkXError, match="isolated"):
        nx.reciprocity(G, "alone", backend="groute")


def test_reciprocity_errors_and_refusals(on_devices):
    with pytest.raises(nx.NetworkXError, match="empty"):
        nx.overall_reciprocity(nx.DiGraph([(0, 0)]).subgraph([]).copy(), backend="groute")
    multi = nx.MultiDiGraph([(0, 1), (0, 1), (1, 0)])
    with pytest.raises(NotImplementedError, match="for the given arguments"):
        nx.reciprocity(multi, backend="groute")     # parallel arcs count in NetworkX's
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.reciprocity(nx.MultiGraph([(0, 1)]), backend="groute")


@pytest.mark.parametrize("G", [nx.grid_2d_graph(3, 4), nx.path_graph(6, create_using=nx.DiGraph),
                               nx.complete_bipartite_graph(3, 4), nx.cycle_graph(5),
                               nx.DiGraph([(0, 1), (2, 1), (3, 2), (4, 4)]),
                               nx.relabel_nodes(nx.cycle_graph(8), str)],
                         ids=["grid", "dipath", "k34", "odd-cycle", "directed-loop", "str-cycle"])
def test_bipartite(on_devices, G):
    G = G.copy()
    G.add_nodes_from(["lonely", "also lonely"])
    assert nx.is_bipartite(G, backend="groute") is nx.is_bipartite(G)
    if not nx.is_bipartite(G):
        with pytest.raises(nx.NetworkXError, match="not bipartite"):
            bipartite.color(G, backend="groute")
        return
    got, want = bipartite.color(G, backend="groute"), bipartite.color(G)
    assert got == want
    assert list(got)[-2:] == ["lonely", "also lonely"]      # isolated nodes last, as NetworkX


def test_bipartite_self_loop_and_components(on_devices):
    """A self-loop joins a node to its own colour; every component starts at colour 1 from
    its first node with a neighbour (a directed graph's successor)."""
    G = nx.DiGraph([(2, 1), (3, 1), (5, 6)])
    G.add_node(0)
    assert bipartite.color(G, backend="groute") == bipartite.color(G)
    assert nx.is_bipartite(nx.Graph([(0, 1), (1, 1)]), backend="groute") is False


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_weak_and_strong_counts(on_devices, name):
    G = GRAPHS[name]
    if not G.is_directed():
        with pytest.raises(nx.NetworkXNotImplemented):
            nx.is_weakly_connected(G, backend="groute")
        return
    for H in (G, nx.DiGraph(nx.complete_graph(4)), nx.path_graph(4, create_using=nx.DiGraph)):
        assert nx.is_weakly_connected(H, backend="groute") is nx.is_weakly_connected(H)
        assert nx.number_weakly_connected_components(H, backend="groute") == \
            nx.number_weakly_connected_components(H)
        assert nx.is_strongly_connected(H, backend="groute") is nx.is_strongly_connected(H)
        assert nx.number_strongly_connected_components(H, backend="groute") == \
            nx.number_strongly_connected_components(H)
    null = nx.DiGraph()
    for f in (nx.is_weakly_connected, nx.is_strongly_connected):
        with pytest.raises(nx.NetworkXPointlessConcept):
            f(null, backend="groute")
    assert nx.number_strongly_connected_components(null, backend="groute") == 0
    assert nx.number_weakly_connected_components(null, backend="groute") == 0


def test_a_conversion_preserving_every_attribute_keeps_the_graph():
    """NetworkX asks it of functions returning a subgraph: the graph itself is kept, the
    weights are "weight"'s where they are numbers, the structure alone where they are not."""
    G = nx.Graph([(0, 1, {"weight": 2.5, "label": "a"}), (1, 2)])
    kept = from_networkx(G, preserve_edge_attrs=True, preserve_node_attrs=True)
    assert kept.nx_graph is G and kept.weight == "weight"
    assert sorted(kept.weights.tolist()) == [1, 1, 2.5, 2.5]
    G[0][1]["weight"] = "heavy"
    assert from_networkx(G, preserve_edge_attrs=True).weights is None
    with pytest.raises(NotImplementedError):
        from_networkx(G, preserve_node_attrs=True, edge_attrs={"weight": 1})
    with pytest.raises(NotImplementedError):
        from_networkx(G, node_attrs={"x": None})


def test_calls_after_a_kept_conversion_read_their_weights(on_devices):
    """NetworkX's cache hands the conversion kept for k_core to later calls: one reading
    "weight" runs on groute with the weights; one reading another attribute finds them
    missing and NetworkX runs it (automatic dispatch), with NetworkX's answer."""
    G = nx.gnm_random_graph(30, 80, seed=5, directed=True)
    for i, (u, v) in enumerate(G.edges):
        G[u][v]["weight"] = 1 + i % 4
        G[u][v]["cost"] = 10 - i % 7
    nx.k_core(G, backend="groute")
    want = nx.single_source_dijkstra_path_length(G, 0)
    assert nx.single_source_dijkstra_path_length(G, 0, backend="groute") == want
    saved = nx.config.backend_priority.algos
    nx.config.backend_priority.algos = ["groute"]
    try:
        assert nx.single_source_dijkstra_path_length(G, 0, weight="cost") == \
            nx.single_source_dijkstra_path_length(G, 0, weight="cost", backend="networkx")
    finally:
        nx.config.backend_priority.algos = saved


@pytest.mark.timeout(200)
def test_the_functors_compile_for_cuda(tmp_path):
    """The advances' CUDA bodies (k_corona's count, the isolates' degrees, the colour clash)
    compile (nvcc, no GPU needed)."""
    import shutil
    from groute.nx_backend.algorithms import cores, structure, support as backend_support
    from support import compile_generated
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc to compile without a GPU")
    functors = [cores.IN_CORE, backend_support.COUNT_ARRIVAL, structure.ALONE,
                structure.CLASH]
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
