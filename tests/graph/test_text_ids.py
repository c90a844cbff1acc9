"""Edge lists whose ids are not all integers (issue 39): every id is its text, the vertices in
the order the file first names them (NetworkX's ``read_edgelist`` order), in CSV, TSV and SNAP
text, gzipped or not; weights stay numbers; the cache keeps the ids; integer files are as
before."""
from __future__ import annotations

import gzip
import json
import logging

import networkx as nx
import numpy as np
import pytest

from groute.graph import GraphFormatError, as_graph, load_graph, read_graph, write_graph
from groute.graph import cache as gcache

pytestmark = pytest.mark.timeout(60)


def write(tmp_path, name, text):
    p = tmp_path / name
    data = text.encode("utf-8") if isinstance(text, str) else text
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


def arcs(g):
    """{(source id, target id): weight} of a graph, in its own ids."""
    src, dst = g.edges()
    w = [None] * len(src) if g.weights is None else g.weights.tolist()
    return dict(zip(zip(g.file_id_of(src).tolist(), g.file_id_of(dst.astype(np.int64)).tolist()), w))


def nx_arcs(G):
    pairs = [(u, v, d.get("weight")) for u, v, d in G.edges(data=True)]
    if not G.is_directed():
        pairs += [(v, u, w) for u, v, w in pairs]
    return {(u, v): w for u, v, w in pairs}


# ---------------------------------------------------------------- the readers
@pytest.mark.parametrize("name,text,kwargs", [
    ("header.csv", "src,dst\nb,a\na,c\n", {}),
    ("noheader.csv", "b,a\na,c\n", {"header": False}),
    ("blanks.csv", "src , dst\nb , a\na , c\n", {}),
    ("g.tsv", "b\ta\na\tc\n", {"header": False}),
    ("header.tsv", "from\tto\nb\ta\na\tc\n", {"columns": ("from", "to")}),
    ("g.txt", "# a comment\nb a\n\n  a c\n", {}),
    ("g.el", "b a\n% note\na c\n", {}),
    ("g.csv.gz", "src,dst\nb,a\na,c\n", {}),
    ("g.txt.gz", "b a\na c\n", {}),
])
def test_text_ids_in_every_edge_list(tmp_path, name, text, kwargs):
    g = load_graph(write(tmp_path, name, text), cache=False, **kwargs)
    assert g.file_ids.dtype == object and g.ids.tolist() == ["b", "a", "c"]
    assert all(type(x) is str for x in g.ids)
    assert arcs(g) == {("b", "a"): None, ("a", "c"): None} and g.directed
    assert g.vertex_of("c") == 2 and g.file_id_of(0) == "b"
    assert g.vertex_of(["a", "b"]).tolist() == [1, 0]


def test_first_appearance_order_is_networkx_read_edgelist_order(tmp_path):
    """Positions and ids agree with the graph NetworkX's read_edgelist makes of the same file
    (converted keeping G.nodes' order), and so do the arcs, directed and undirected (a repeated
    arc keeps its least weight)."""
    rng = np.random.default_rng(5)
    names = [f"n{i}" for i in rng.permutation(40)]
    rows = list(zip(rng.integers(0, 40, 150).tolist(), rng.integers(0, 40, 150).tolist(),
                    rng.integers(1, 9, 150).tolist()))
    p = write(tmp_path, "r.txt", "".join(f"{names[a]} {names[b]} {w}\n" for a, b, w in rows))
    for symmetric, kind in ((False, nx.DiGraph), (True, nx.Graph)):
        g = load_graph(p, cache=False, symmetric=symmetric)
        G = nx.read_edgelist(p, create_using=kind, data=[("weight", int)])
        assert g.ids.tolist() == list(G.nodes) == as_graph(G).ids.tolist()
        assert g.directed == (not symmetric)
        want = {}
        for a, b, w in rows + ([(b, a, w) for a, b, w in rows] if symmetric else []):
            key = (names[a], names[b])
            want[key] = min(w, want.get(key, w))
        assert arcs(g) == want and set(want) == set(nx_arcs(G))


def test_symmetric_reading_and_the_undirected_header(tmp_path):
    p = write(tmp_path, "u.txt", "# Undirected graph\nx y 2\ny z 3\n")
    g = read_graph(p)
    assert not g.directed and g.ids.tolist() == ["x", "y", "z"]
    assert arcs(g) == {("x", "y"): 2, ("y", "x"): 2, ("y", "z"): 3, ("z", "y"): 3}
    q = write(tmp_path, "d.csv", "x,y,2\ny,z,3\n")
    assert read_graph(q).directed
    h = read_graph(q, symmetric=True)
    assert not h.directed and arcs(h) == arcs(g)


@pytest.mark.parametrize("text,weights", [
    ("A,B,3\nB,C,1\nA,C,5\n", [3, 1, 5]),
    ("A,B,0.5\nB,C,1\nA,C,2.25\n", [0.5, 1.0, 2.25]),
    ("src,dst,weight\nA,B,3\nB,C,1\nA,C,5\n", [3, 1, 5]),
])
def test_weighted_text_id_files(tmp_path, text, weights):
    """A first line whose weight is a number is an edge (``A,B,3``), with or without a header
    row; weights are int32 when all are integers, else float32."""
    g = read_graph(write(tmp_path, "w.csv", text))
    assert g.ids.tolist() == ["A", "B", "C"]
    assert arcs(g) == dict(zip([("A", "B"), ("B", "C"), ("A", "C")], weights))
    assert g.weights.dtype == (np.int32 if all(isinstance(w, int) for w in weights) else np.float32)


def test_mixed_ids_are_text_throughout(tmp_path):
    """Ids that look like integers are text when another id of the file is not one; an
    integer asked for names the text id it may mean."""
    g = read_graph(write(tmp_path, "m.txt", "10 2\n2 A\n1.5 10\n"))
    assert g.ids.tolist() == ["10", "2", "A", "1.5"]
    assert g.vertex_of("10") == 0
    with pytest.raises(KeyError, match=r"source 10 is not a vertex of m \(its ids are text: '10'"):
        g.vertex_of(10, "source")


def test_utf8_ids_and_a_byte_order_mark(tmp_path):
    g = read_graph(write(tmp_path, "u.csv", "\ufeffsrc,dst\nZürich,Genève\nGenève,東京\n"))
    assert g.ids.tolist() == ["Zürich", "Genève", "東京"]


def test_integer_files_keep_integer_ids_in_increasing_order(tmp_path):
    g = read_graph(write(tmp_path, "i.csv", "src,dst\n30,7\n7,12\n"))
    assert g.file_ids.dtype == np.int64 and g.ids.tolist() == [7, 12, 30]


def test_the_header_rule(tmp_path, caplog):
    """Two columns of text ids: the first line is a header row unless header=False (logged,
    since it could be an edge); header=True reads a line of numbers as the header."""
    p = write(tmp_path, "h.csv", "A,B\nB,C\n")
    with caplog.at_level(logging.INFO, logger="groute.graph.delimited"):
        g = read_graph(p)
    assert g.ids.tolist() == ["B", "C"] and "header=False" in caplog.text
    assert read_graph(p, header=False).ids.tolist() == ["A", "B", "C"]
    q = write(tmp_path, "n.csv", "1,2\n3,4\n")
    assert read_graph(q, header=True).ids.tolist() == [3, 4]
    with pytest.raises(ValueError, match="header=False"):
        read_graph(p, header=False, columns=("A", "B"))
    with pytest.raises(ValueError, match="header= applies to CSV"):
        read_graph(write(tmp_path, "s.txt", "A B\n"), header=True)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("name,text,line,fragment", [
    ("w.csv", "A,B,3\nB,C,x\n", 2, "not a number: weight 'x' in 'B,C,x'"),
    ("w.txt", "A B 3\nB C 1\nC D 2.5.1\n", 3, "not a number: weight '2.5.1'"),
    ("n.txt", "A B 3\nB C -1\n", 2, "negative weight -1"),
    ("nan.tsv", "A\tB\tnan\n", 1, "weight is NaN"),
    ("c.txt", b"A B\nB\x01C\n", 2, "control byte 0x01"),       # not a blank between B and C
    ("c3.txt", b"A B\nB\x01C D\n", 2, "found 3"),
    ("d.txt", b"A B\nB C\x7f\n", 2, "control byte 0x7f"),
    ("u.txt", b"A B\nB \xe9t\xe9\n", 2, "target id '\xe9t\xe9' is not UTF-8"),
    ("f.csv", "A,B,1\nB,C\n", 2, "found 2"),
    ("sp.csv", "src,dst\nNew York,Boston\n", 2, "found 3: 'New York,Boston'"),   # no blanks
    ("count.txt", "# Nodes: 2 Edges: 2\nA B\nB C\n", 1, "announces 2 nodes"),
])
def test_errors_name_the_line(tmp_path, name, text, line, fragment):
    p = write(tmp_path, name, text)
    with pytest.raises(GraphFormatError) as info:
        read_graph(p)
    err = info.value
    assert err.path == str(p) and err.line == line and f"line {line}" in str(err), str(err)
    assert fragment in str(err), str(err)


def test_nodes_header_with_fewer_text_ids(tmp_path):
    g = read_graph(write(tmp_path, "s.txt", "# Nodes: 5 Edges: 2\nA B\nB C\n"))
    assert g.ids.tolist() == ["A", "B", "C"]


# ---------------------------------------------------------------- cache and writers
def test_cache_round_trip(tmp_path, isolated_cache, caplog):
    p = write(tmp_path, "c.csv", "src,dst,w\nA,B,3\nB,é,1\n")
    g = load_graph(p)
    cached = gcache.cache_path(p)
    assert cached.is_file()
    with np.load(cached, allow_pickle=False) as z:       # no pickles in the cache
        assert "file_id_text" in z.files and "file_ids" not in z.files
    import groute.graph.load
    groute.graph.load._recent.clear()      # the graph kept in memory aside: read the cache
    with caplog.at_level(logging.INFO, logger="groute.graph.cache"):
        h = load_graph(p)
    assert "loaded" in caplog.text and "from cache" in caplog.text
    assert h.ids.tolist() == g.ids.tolist() == ["A", "B", "é"]
    assert all(type(x) is str for x in h.ids)
    assert arcs(h) == arcs(g) and h.vertex_of("é") == 2
    h.validate()


def test_a_cache_whose_text_ids_are_wrong_is_ignored(tmp_path, caplog):
    p = write(tmp_path, "c.txt", "A B\nB C\n")
    g = load_graph(p)
    path, key = gcache.cache_path(p), gcache.source_key(p, {"format": "snap", "symmetric": False,
                                                            "allow_negative": False})
    for labels in (["A", "B"], ["A", "A", "C"]):          # too few; repeated
        bad = load_graph(p, cache=False)
        bad.file_ids = np.array(labels, dtype=object)
        gcache.save_graph_npz(bad, path, key)
        with caplog.at_level(logging.WARNING, logger="groute.graph.cache"):
            assert gcache.load_graph_npz(path, key) is None
        assert "invalid graph cache" in caplog.text
        caplog.clear()
    import groute.graph.load
    groute.graph.load._recent.clear()      # the graph kept in memory aside: the cache is read
    assert load_graph(p).ids.tolist() == g.ids.tolist()


def test_labels_that_are_not_text_are_not_cached(tmp_path, caplog):
    g = as_graph(nx.path_graph([(0, 1), (1, 2), (2, 3)]))
    with pytest.raises(ValueError, match="not all text"):
        gcache.save_graph_npz(g, tmp_path / "x.npz", {})
    p = write(tmp_path, "p.txt", "1 2\n")
    with caplog.at_level(logging.INFO, logger="groute.graph.cache"):
        assert gcache.store_cached(p, {}, g) is None
    assert "not caching" in caplog.text and "not all text" in caplog.text


def test_write_snap_writes_text_ids(tmp_path):
    g = read_graph(write(tmp_path, "a.csv", "src,dst,w\nA,B,3\nB,Genève,1\n"))
    write_graph(g, tmp_path / "b.txt.gz")
    h = read_graph(tmp_path / "b.txt.gz")
    assert sorted(h.ids.tolist()) == sorted(g.ids.tolist()) and arcs(h) == arcs(g)
    t = as_graph(nx.path_graph(["a b", "c"]))
    with pytest.raises(ValueError, match="'a b'"):
        write_graph(t, tmp_path / "t.txt")


# ---------------------------------------------------------------- a big file, vectorised
def test_many_text_ids_of_many_lengths(tmp_path):
    """200,000 edges whose ids have 1 to 12 characters: the ids and arcs of a plain Python
    parse, in first-appearance order."""
    rng = np.random.default_rng(1)
    pool = np.array([f"{'v' * int(k)}{i}" for i, k in enumerate(rng.integers(0, 6, 30_000))])
    src, dst = rng.integers(0, pool.size, 200_000), rng.integers(0, pool.size, 200_000)
    lines = [f"{a},{b}" for a, b in zip(pool[src].tolist(), pool[dst].tolist())]
    p = write(tmp_path, "big.csv", "src,dst\n" + "\n".join(lines) + "\n")
    g = read_graph(p)
    want = list(dict.fromkeys(x for line in lines for x in line.split(",")))
    assert g.ids.tolist() == want
    assert g.num_edges == len(set(zip(src.tolist(), dst.tolist())))
    s, d = g.edges()
    got = set(zip(g.file_id_of(s).tolist(), g.file_id_of(d.astype(np.int64)).tolist()))
    assert got == {tuple(line.split(",")) for line in lines}
    json.dumps(g.ids.tolist())                              # plain str


def test_ids_whose_keys_collide_stay_apart(tmp_path, monkeypatch):
    """Ids longer than 8 bytes are numbered by a key mixed from their words and checked against
    their bytes: with a mixing that keeps only the last word, ids that share it collide, and
    the check sorts the byte strings instead."""
    from groute.graph import text_ids
    p = write(tmp_path, "k.txt", "aaaaaaaa_x bbbbbbbb_x\nbbbbbbbb_x cccccccc_x\n")
    monkeypatch.setattr(text_ids, "_MIX", np.uint64(0))
    g = read_graph(p)
    assert g.ids.tolist() == ["aaaaaaaa_x", "bbbbbbbb_x", "cccccccc_x"]
    assert arcs(g) == {("aaaaaaaa_x", "bbbbbbbb_x"): None, ("bbbbbbbb_x", "cccccccc_x"): None}


def test_labels_past_int64_are_kept_not_wrapped():
    """A uint64 label array with ids from 2**63 was cast to int64: 2**63 + 5 became a negative
    id, and a lookup of the id as given found nothing."""
    import numpy as np
    from groute.graph import CSRGraph
    big = 2**63 + 5
    g = CSRGraph.from_edges([0], [1], 2, file_ids=np.array([big, 1], dtype=np.uint64))
    assert g.file_id_of(0) == big
    assert g.vertex_of(big) == 0
