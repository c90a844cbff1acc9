"""Strongly connected components (groute.strongly_connected_components, apps/scc.py) against
networkx.strongly_connected_components, as sets of ids: polblogs, random directed graphs
(sparse: many small components; dense: a giant one), cycles, chains of cycles, isolated
vertices, self-loops and repeated arcs; 1-4 devices with random partitions, both backends;
undirected graphs refused; the command; the worked example of docs/OPERATORS_REFERENCE.md; the
CUDA bodies compile; and apps/scc.py imports only groute's public names."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import groute
from groute.cli import main
from groute.graph import load_graph
from support import (check_imports_only_public_names, compile_generated, device_cases,
                     operator_doc_blocks, shared_graph_path)

SCC_PY = Path(__file__).resolve().parents[1] / "apps" / "scc.py"


def digraph(n, src, dst):
    G = nx.MultiDiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(np.asarray(src).tolist(), np.asarray(dst).tolist()))
    return G


def as_sets(components):
    return sorted(map(sorted, components))


def check(G, **options):
    """groute's components of ``G`` are NetworkX's, and the labels follow CC's convention."""
    res = groute.strongly_connected_components(G, **options)
    want = as_sets(nx.strongly_connected_components(G))
    assert as_sets(res.components()) == want
    labels = res.to_dict()
    for members in want:
        assert {labels[v] for v in members} == {min(members, key=list(G).index)}
    assert res.stats["components"] == len(want)
    assert res.stats["largest"] == max(map(len, want))
    return res


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_polblogs_matches_networkx(backend, k):
    path = shared_graph_path("polblogs")
    g = load_graph(path)
    src, dst = g.edges()
    G = digraph(0, g.ids[src], g.ids[dst])
    G.add_nodes_from(g.ids.tolist())
    res = groute.strongly_connected_components(g, backend=backend, devices=k,
                                               partition="random")
    assert as_sets(res.components()) == as_sets(nx.strongly_connected_components(G))
    assert res.stats["largest"] == 793 and res.stats["components"] == 688


def random_edges(n, m, seed):
    """``m`` arcs among the first ``n - 10`` vertices (10 isolated), self-loops and repeats
    included."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
@pytest.mark.parametrize("partition", ["contiguous", "random"])
def test_random_graphs_match_networkx(backend, k, partition):
    for n, m, seed in ((300, 330, 1), (300, 1500, 2)):       # many small components; a giant
        src, dst = random_edges(n, m, seed)
        res = check(digraph(n, src, dst), backend=backend, devices=k, partition=partition)
        assert res.stats["trimmed"] > 10        # the isolated vertices at least


@pytest.mark.parametrize("backend, k", device_cases([1, 4]))
def test_solver_runs_again_on_the_same_engine(backend, k):
    from groute.apps.scc import SCC
    src, dst = random_edges(200, 600, 3)
    G = digraph(200, src, dst)
    with SCC(load_graph(G), backend=backend, devices=k, partition="random") as solver:
        first, second = solver.run(), solver.run()
    assert np.array_equal(first.values, second.values)
    assert as_sets(first.components()) == as_sets(nx.strongly_connected_components(G))


def chain_of_cycles(count, size, reverse):
    """``count`` cycles of ``size`` vertices, each with an arc into the next (``reverse``:
    into the previous, so that positions fall along the chain)."""
    src, dst = [], []
    for c in range(count):
        ring = np.arange(c * size, (c + 1) * size)
        src += ring.tolist()
        dst += np.roll(ring, -1).tolist()
        if c + 1 < count:
            a, b = (c * size, (c + 1) * size)
            src.append(b if reverse else a)
            dst.append(a if reverse else b)
    return src, dst


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_cycles_and_chains(backend, k):
    n = 120
    ring = np.arange(n)
    check(digraph(n, ring, np.roll(ring, -1)), backend=backend, devices=k, partition="random")
    for reverse in (False, True):
        check(digraph(n, ring[:-1] + reverse, ring[1:] - reverse), backend=backend, devices=k)
        src, dst = chain_of_cycles(30, 3, reverse)
        check(digraph(90, src, dst), backend=backend, devices=k, partition="random")
    src, dst = chain_of_cycles(20, 2, True)            # a reversed chain that also has a tail
    check(digraph(45, src + [39, 40, 41, 43], dst + [40, 41, 42, 1]), backend=backend,
          devices=k)


def test_string_labels_self_loops_isolated_vertices_and_arrays():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d"), ("d", "e"),
                    ("e", "d")])
    G.add_node("lonely")
    G.add_edge("loop", "loop")
    res = check(G, backend="cpu", devices=2)
    assert res.to_dict() == {"a": "a", "b": "a", "c": "a", "d": "d", "e": "d",
                             "lonely": "lonely", "loop": "loop"}
    assert res.components() == [{"a", "b", "c"}, {"d", "e"}, {"lonely"}, {"loop"}]
    arrays = groute.strongly_connected_components(([0, 1, 2, 2], [1, 0, 2, 3]),
                                                  num_vertices=5, backend="cpu")
    assert arrays.components() == [{0, 1}, {2}, {3}, {4}]
    empty = groute.strongly_connected_components(nx.DiGraph(), backend="cpu")
    assert empty.components() == [] and empty.to_dict() == {}


def test_undirected_graphs_are_refused_as_networkx_refuses_them():
    G = nx.Graph([(0, 1)])
    with pytest.raises(nx.NetworkXNotImplemented, match="undirected"):
        list(nx.strongly_connected_components(G))
    with pytest.raises(groute.GraphNotSupported,
                       match=r"undirected.*directed graph.*groute.connected_components"):
        groute.strongly_connected_components(G, backend="cpu")
    with pytest.raises(ValueError, match="undirected"):        # a ValueError of the input too
        groute.strongly_connected_components("kron:6", backend="cpu")


def test_the_command_prints_writes_and_verifies(tmp_path, capsys):
    out = tmp_path / "scc.csv"
    assert main(["scc", "--graph", "rmat:8", "--backend", "cpu", "--devices", "2",
                 "--repeat", "1", "--verify", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    g = load_graph("rmat:8")
    src, dst = g.edges()
    want = list(nx.strongly_connected_components(digraph(g.num_vertices, src, dst)))
    assert text.startswith("scc rmat:8: ")
    assert f"{len(want):,} components, largest {max(map(len, want)):,} vertices" in text
    assert "verify: OK" in text
    rows = out.read_text().splitlines()
    assert rows[0] == "id,component" and len(rows) == g.num_vertices + 1
    assert main(["scc", "--graph", "rmat:8", "--backend", "cpu", "--repeat", "1",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["app"] == "scc" and record["components"] == len(want)
    assert record["stats"]["iterations"] >= 1
    assert main(["scc", "--graph", "kron:6", "--backend", "cpu", "--repeat", "1"]) == 1
    assert "undirected" in capsys.readouterr().err


def test_scc_imports_only_groute_public_names():
    check_imports_only_public_names(SCC_PY)


def test_the_facade_and_the_command_list_scc(capsys):
    from groute.apps import scc
    assert groute.strongly_connected_components is scc.strongly_connected_components
    assert "strongly_connected_components" in groute.__all__
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "scc" in capsys.readouterr().out


def test_the_worked_example_in_operators_md_runs():
    example = [b for b in operator_doc_blocks() if "make_engine" in b and "strongly_connected" in b]
    assert len(example) == 1
    exec(compile(example[0], "OPERATORS_REFERENCE.md (SCC)", "exec"), {})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_cuda_bodies_compile(tmp_path):
    import groute.apps.scc as scc
    from groute.operators import Functor
    functors = [f for f in vars(scc).values() if isinstance(f, Functor)]
    assert len(functors) >= 10
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.gpu
def test_rmat_on_gpus_matches_the_cpu():
    from support import need_gpus
    g = load_graph("rmat:12")
    cpu = groute.strongly_connected_components(g, backend="cpu", devices=1)
    for k in (1, 2):
        need_gpus(k)
        gpu = groute.strongly_connected_components(g, backend="cuda", devices=k,
                                                   partition="random")
        assert np.array_equal(gpu.values, cpu.values)
