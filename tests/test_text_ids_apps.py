"""Apps and the command line on an edge list with text ids (issue 39): answers keyed by the
file's strings (``to_dict()``, as NetworkX on the graph ``read_edgelist`` makes of the file),
``--source A`` and ``--output`` files naming the vertices by their text."""
import csv
import json

import networkx as nx
import numpy as np
import pytest

import groute
from groute.cli import main

pytestmark = pytest.mark.timeout(120)

RUN = ["--backend", "cpu", "--devices", "1", "--repeat", "1"]
EDGES = "src,dst,weight\nA,B,3\nB,C,1\nA,C,5\nC,D,2\nE,A,1\n"


@pytest.fixture
def edges(tmp_path, monkeypatch):
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "edges.csv"
    p.write_text(EDGES)
    return p


def networkx_graph(path):
    lines = path.read_text().splitlines()[1:]                 # read_edgelist reads no header
    return nx.parse_edgelist(lines, delimiter=",", create_using=nx.DiGraph, data=[("weight", int)])


def test_to_dict_is_keyed_by_the_text_ids(edges):
    G = networkx_graph(edges)
    assert groute.bfs(str(edges), "A").to_dict() == nx.single_source_shortest_path_length(G, "A")
    dist = groute.sssp(str(edges), "A").to_dict()
    assert dist == pytest.approx(nx.single_source_dijkstra_path_length(G, "A"))
    assert set(dist) == {"A", "B", "C", "D"} and all(type(k) is str for k in dist)
    with pytest.raises(ValueError, match="source 'Z' is not a vertex of edges"):
        groute.bfs(str(edges), "Z")


def test_cli_source_and_output_files_use_the_text_ids(edges, tmp_path, capsys):
    out_csv, out_json, out_txt = (tmp_path / f"d.{s}" for s in ("csv", "json", "txt"))
    assert main(["bfs", "--graph", str(edges), "--source", "A", *RUN, "--output", str(out_csv)]) == 0
    with open(out_csv, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["id", "depth"]
    assert {r[0]: int(r[1]) for r in rows[1:] if int(r[1]) >= 0} == {"A": 0, "B": 1, "C": 1, "D": 2}
    assert [r[0] for r in rows[1:]] == ["A", "B", "C", "D", "E"]      # first-appearance order
    assert main(["sssp", "--graph", str(edges), "--source", "B", *RUN, "--output", str(out_json)]) == 0
    record = json.loads(out_json.read_text())
    assert record["ids"] == ["A", "B", "C", "D", "E"] and record["values"][1:4] == [0, 1, 3]
    assert main(["cc", "--graph", str(edges), *RUN, "--output", str(out_txt)]) == 0
    assert out_txt.read_text().split("\n")[:2] == ["A A", "B A"]
    capsys.readouterr()
    assert main(["bfs", "--graph", str(edges), "--source", "Z", *RUN]) != 0
    assert "'Z' is not a vertex" in capsys.readouterr().err


def test_output_npz_holds_text_ids_without_pickles(edges, tmp_path):
    out = tmp_path / "d.npz"
    assert main(["bfs", "--graph", str(edges), "--source", "A", *RUN, "--output", str(out)]) == 0
    with np.load(out, allow_pickle=False) as z:
        assert z["ids"].tolist() == ["A", "B", "C", "D", "E"]
