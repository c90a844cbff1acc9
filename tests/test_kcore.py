"""k-core (groute.core_number, apps/kcore.py) against networkx.core_number: the shared real
graphs, random graphs with isolated vertices (undirected and directed), string labels,
self-loops refused; 1-4 devices, both backends; the command; and the rule that apps/kcore.py
imports only groute's public names."""
from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import groute
from groute.cli import build_parser, main
from groute.graph import CSRGraph, load_graph
from support import (check_imports_only_public_names, device_cases, operator_doc_blocks,
                     shared_graph_path)

KCORE = Path(__file__).resolve().parents[1] / "apps" / "kcore.py"



def expect(g):
    ref = nx.core_number(g.to_networkx())
    return np.array([ref[v] for v in range(g.num_vertices)])


@pytest.mark.parametrize("name", ["karate", "netscience", "power", "hep-th"])
@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_shared_graphs_match_networkx(name, backend, k):
    path = shared_graph_path(name)
    g = load_graph(path)
    res = groute.core_number(g, backend=backend, devices=k)
    assert np.array_equal(res.values, expect(g))
    assert res.to_dict() == dict(zip(g.ids.tolist(), expect(g).tolist()))


def random_edges(n, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)    # 10 isolated
    keep = src != dst
    return src[keep], dst[keep]


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
@pytest.mark.parametrize("direction", ["push", "pull", "auto"])
@pytest.mark.parametrize("partition", ["contiguous", "random"])
def test_random_undirected_graphs_match_networkx(backend, k, direction, partition):
    for seed in range(3):
        src, dst = random_edges(400, 2500, seed)
        G = nx.Graph()
        G.add_nodes_from(range(400))
        G.add_edges_from(zip(src.tolist(), dst.tolist()))
        res = groute.core_number(G, backend=backend, devices=k, direction=direction,
                                 partition=partition)
        assert res.to_dict() == nx.core_number(G)
        assert res.stats["max_core"] == max(nx.core_number(G).values())


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_directed_graphs_count_both_ends_as_networkx(backend, k):
    src, dst = random_edges(300, 1500, 7)
    D = nx.DiGraph()
    D.add_nodes_from(range(300))
    D.add_edges_from(zip(src.tolist(), dst.tolist()))
    res = groute.core_number(D, backend=backend, devices=k)
    assert res.to_dict() == nx.core_number(D)
    arrays = groute.core_number((src, dst), num_vertices=300, backend=backend, devices=k)
    assert arrays.to_dict() == nx.core_number(D)


def test_string_labels_and_isolated_vertices():
    G = nx.Graph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")])
    G.add_node("lonely")
    res = groute.core_number(G, backend="cpu", devices=2)
    assert res.to_dict() == nx.core_number(G) == {"a": 2, "b": 2, "c": 2, "d": 1, "e": 1,
                                                  "lonely": 0}
    assert groute.core_number(nx.Graph(), backend="cpu").to_dict() == {}


def test_self_loops_are_refused_as_networkx_refuses_them():
    G = nx.Graph([("x", "y"), ("y", "y")])
    with pytest.raises(nx.NetworkXNotImplemented, match="self loops"):
        nx.core_number(G)
    with pytest.raises(groute.GraphNotSupported, match=r"self-loop.*'y'.*selfloop_edges"):
        groute.core_number(G, backend="cpu")
    with pytest.raises(ValueError, match="1 self-loop"):      # a ValueError of the input too
        groute.core_number(([0, 1, 2], [1, 1, 0]), backend="cpu")


def test_the_command_prints_writes_and_verifies(tmp_path, capsys):
    path = shared_graph_path("karate")
    out = tmp_path / "core.csv"
    assert main(["kcore", "--graph", str(path), "--backend", "cpu", "--devices", "2",
                 "--repeat", "1", "--verify", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("kcore karate: ") and "max core 4 (10 vertices)" in text
    assert "verify: OK" in text
    rows = out.read_text().splitlines()
    assert rows[0] == "id,core" and len(rows) == 35
    assert main(["kcore", "--graph", "grid:12", "--backend", "cpu", "--repeat", "1",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["app"] == "kcore" and record["max_core"] == 2
    # every vertex of a grid has core number 2: one level, the least degree, runs
    assert record["stats"]["levels"] == 1


def test_the_command_runs_kcores_default_direction_and_its_help_says_so(capsys):
    """The command's --direction defaults to the constant KCore's own default is, and its help
    names it."""
    import inspect

    from groute.apps.kcore import DEFAULT_DIRECTION, KCore
    assert inspect.signature(KCore).parameters["direction"].default == DEFAULT_DIRECTION
    assert build_parser().parse_args(["kcore", "--graph", "grid:4"]).direction == \
        DEFAULT_DIRECTION
    with pytest.raises(SystemExit):
        build_parser().parse_args(["kcore", "--help"])
    assert f"(default {DEFAULT_DIRECTION}:" in " ".join(capsys.readouterr().out.split())


def test_kcore_imports_only_groute_public_names():
    check_imports_only_public_names(KCORE)


@pytest.mark.gpu
@pytest.mark.parametrize("direction", ["push", "pull", "auto"])
def test_every_peel_runs_fused_on_one_gpu_in_every_direction(direction):
    """The peel's advance among the vertices still in (candidates=alive) runs in the fused
    loop whatever its direction (the pull first-accept: a vertex stops losing neighbours once
    it falls to k): NetworkX's core numbers; every peel round pulled, or none."""
    g = load_graph("kron:12")
    res = groute.core_number(g, backend="cuda", devices=1, direction=direction)
    assert np.array_equal(res.values, expect(g))
    assert res.stats["loop"] == "fused" and res.stats["loops"] == res.stats["levels"]
    pulled = res.stats["pull_advances"]
    want = {"push": (0, 0), "pull": (res.stats["rounds"],) * 2, "auto": (0, res.stats["rounds"])}
    assert want[direction][0] <= pulled <= want[direction][1], (direction, pulled)
    assert res.stats["advances"] == res.stats["rounds"] > 0


@pytest.mark.gpu
def test_kron_on_one_gpu_matches_the_cpu():
    g = load_graph("kron:12")
    gpu = groute.core_number(g, backend="cuda", devices=1)
    cpu = groute.core_number(g, backend="cpu", devices=1)
    assert np.array_equal(gpu.values, cpu.values)
    assert np.array_equal(gpu.values, expect(g))


def test_the_worked_example_in_operators_md_runs():
    example = [b for b in operator_doc_blocks() if "make_engine" in b and "core_number" in b]
    assert len(example) == 1
    exec(compile(example[0], "OPERATORS.md (k-core)", "exec"), {})
