"""Readers and writers: round trips through every format, and every kind of malformed input."""
import gzip
import os

import numpy as np
import pytest

from groute.graph import (CSRGraph, GraphFormatError, load_graph, read_graph, write_dimacs,
                          write_mtx, write_snap)
from groute.graph import cache as gcache
from groute.graph import load as gload
from groute.errors import GrouteError


def same_graph(a, b, weights=True):
    assert a.num_vertices == b.num_vertices
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.indices, b.indices)
    if weights:
        if a.weights is None:
            assert b.weights is None
        else:
            assert np.array_equal(a.weights, b.weights)


def sample(directed=True, weights=None):
    g = load_graph("er:60:4:seed=2", cache=False)
    if directed:
        src, dst = g.edges()
        keep = src < dst                       # make it genuinely directed
        g = CSRGraph.from_edges(src[keep], dst[keep].astype(np.int64), g.num_vertices)
    if weights == "int":
        g = g.with_weights(seed=1)
    elif weights == "real":
        w = g.with_weights(seed=1).weights.astype(np.float32) / 8
        g = CSRGraph(g.indptr, g.indices, w, directed=g.directed)
    return g


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("weights", [None, "int", "real"])
def test_mtx_round_trip(tmp_path, suffix, directed, weights):
    g = sample(directed, weights)
    p = tmp_path / f"g{suffix}"
    write_mtx(g, p)
    h = read_graph(p)
    same_graph(g, h)
    assert h.directed == directed and h.id_base == 1 and h.name == "g"
    head = gzip.open(p).readline() if suffix.endswith(".gz") else open(p, "rb").readline()
    assert (b"symmetric" in head) == (not directed)


def test_mtx_symmetric_expands_and_merges(tmp_path):
    p = tmp_path / "s.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n% comment\n\n"
                 "4 4 5\n2 1\n3 1\n3 3\n1 2\n4 2\n")
    g = read_graph(p)
    assert not g.directed
    # {1,2} listed twice (both triangles) is merged; the self loop 3-3 is kept once
    assert sorted(zip(*[a.tolist() for a in g.edges()])) == \
        [(0, 1), (0, 2), (1, 0), (1, 3), (2, 0), (2, 2), (3, 1)]
    import scipy.io
    assert g.num_edges == scipy.io.mmread(p).tocsr().nnz


@pytest.mark.parametrize("suffix", [".gr", ".gr.gz"])
def test_dimacs_round_trip(tmp_path, suffix):
    g = sample(True, "int")
    p = tmp_path / f"road{suffix}"
    write_dimacs(g, p)
    h = read_graph(p)
    same_graph(g, h)
    assert h.directed and h.id_base == 1
    s = sample(False, "int")
    write_dimacs(s, p)
    assert not read_graph(p).directed     # symmetric arc set detected


def test_dimacs_comments_anywhere_and_duplicates(tmp_path):
    p = tmp_path / "x.gr"
    p.write_text("c hello\np sp 3 4\nc between\na 1 2 7\nc again\na 1 2 3\na 2 3 0\n\na 3 1 9\n")
    g = read_graph(p)
    assert g.indices.tolist() == [1, 2, 0] and g.weights.tolist() == [3, 0, 9]
    assert g.weights.dtype == np.int32


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".el"])
def test_snap_round_trip_sparse_ids(tmp_path, suffix):
    g = sample(True)
    g.file_ids = np.sort(np.random.default_rng(1).choice(10**9, g.num_vertices, replace=False))
    p = tmp_path / f"e{suffix}"
    write_snap(g, p)
    h = read_graph(p)
    # isolated vertices cannot appear in an edge list: compare on the vertices that do
    used = np.unique(np.concatenate([g.edges()[0], g.indices]))
    assert h.num_vertices == used.size and h.num_edges == g.num_edges
    assert np.array_equal(h.file_ids, g.file_ids[used])
    src, dst = h.edges()
    got = set(zip(h.file_id_of(src).tolist(), h.file_id_of(dst.astype(np.int64)).tolist()))
    gs, gd = g.edges()
    want = set(zip(g.file_id_of(gs).tolist(), g.file_id_of(gd.astype(np.int64)).tolist()))
    assert got == want and h.directed
    assert h.vertex_of(int(g.file_ids[used[3]])) == 3


def test_snap_symmetric_weights_comments_crlf_blank_lines(tmp_path):
    p = tmp_path / "w.txt"
    p.write_bytes(b"# Directed graph\r\n# Nodes: 3\r\n10\t20\t5\r\n\r\n# mid comment\r\n"
                  b"  20 30 2\r\n30\t10\t1\r\n")
    g = read_graph(p)
    assert g.file_ids.tolist() == [10, 20, 30] and g.weights.tolist() == [5, 2, 1]
    s = read_graph(p, symmetric=True)
    assert not s.directed and s.num_edges == 6 and s.is_symmetric()


def test_snap_header_counts_accepted_when_right(tmp_path):
    p = tmp_path / "ok.txt"
    p.write_text("# Directed graph\n# Nodes: 3 Edges: 2\n# FromNodeId\tToNodeId\n5\t6\n6\t7\n")
    assert read_graph(p).num_edges == 2


def test_empty_and_headers_only(tmp_path):
    p = tmp_path / "e.txt"
    p.write_text("# nothing\n")
    g = read_graph(p)
    assert g.num_vertices == 0 and g.num_edges == 0
    q = tmp_path / "e.mtx"
    q.write_text("%%MatrixMarket matrix coordinate pattern general\n5 5 0\n")
    g = read_graph(q)
    assert g.num_vertices == 5 and g.num_edges == 0


def test_format_sniffed_without_extension(tmp_path):
    g = sample(True, "int")
    for fmt, writer in (("mtx", write_mtx), ("dimacs", write_dimacs), ("snap", write_snap)):
        p = tmp_path / f"graph.{fmt}data.txt"
        writer(g, p)
        q = tmp_path / f"noext-{fmt}"
        os.replace(p, q)
        assert read_graph(q).num_edges == g.num_edges


# ---------------------------------------------------------------- malformed input
MTX = "%%MatrixMarket matrix coordinate {field} {sym}\n"
BAD = [
    # (file name, content, line, message fragment)
    ("banner.mtx", "%%MatrixMarket matrix array real general\n3 3\n", 1, "coordinate"),
    ("nobanner.mtx", "3 3 1\n1 2\n", 1, "Matrix Market"),
    ("field.mtx", MTX.format(field="complex", sym="general") + "2 2 1\n1 2 1 0\n", 1, "complex"),
    ("size.mtx", MTX.format(field="pattern", sym="general") + "% c\n3 x 1\n1 2\n", 3, "size line"),
    ("square.mtx", MTX.format(field="pattern", sym="general") + "3 4 1\n1 2\n", 2, "square"),
    ("onefield.mtx", MTX.format(field="pattern", sym="general") + "3 3 2\n1 2\n3\n", 4, "found 1"),
    ("threefields.mtx", MTX.format(field="pattern", sym="general") + "3 3 2\n1 2 3\n2 3\n", 3, "found 3"),
    ("range.mtx", MTX.format(field="pattern", sym="general") + "3 3 2\n1 2\n4 1\n", 4, "out of range"),
    ("zero.mtx", MTX.format(field="pattern", sym="general") + "3 3 2\n1 2\n0 1\n", 4, "out of range"),
    ("negw.mtx", MTX.format(field="real", sym="general") + "3 3 2\n1 2 1.5\n2 3 -2\n", 4, "negative"),
    ("nanw.mtx", MTX.format(field="real", sym="general") + "3 3 2\n1 2 nan\n2 3 1\n", 3, "weight is NaN"),
    ("textw.mtx", MTX.format(field="integer", sym="general") + "3 3 2\n1 2 1\n2 3 abc\n", 4, "not a number"),
    ("floatw.mtx", MTX.format(field="integer", sym="general") + "3 3 2\n1 2 1.5\n2 3 1\n", 3, "weight 1.5 is not an integer"),
    ("fewer.mtx", MTX.format(field="pattern", sym="general") + "3 3 3\n1 2\n2 3\n", 4, "only 2"),
    ("more.mtx", MTX.format(field="pattern", sym="general") + "3 3 1\n1 2\n2 3\n", 4, "first extra"),
    ("nop.gr", "c x\na 1 2 3\n", 2, "problem line"),
    ("badp.gr", "p max 3 1\na 1 2 3\n", 1, "p sp"),
    ("twop.gr", "p sp 3 1\np sp 3 1\na 1 2 3\n", 2, "more than one"),
    ("short.gr", "p sp 3 2\na 1 2 3\na 2 3\n", 3, "found 3"),
    ("range.gr", "p sp 3 2\na 1 2 3\na 2 9 1\n", 3, "out of range"),
    ("negw.gr", "p sp 3 2\na 1 2 3\na 2 3 -1\n", 3, "negative"),
    ("textw.gr", "p sp 3 2\nc\na 1 2 x\na 2 3 1\n", 3, "not a number"),
    ("tag.gr", "p sp 3 2\na 1 2 3\ne 2 3 1\n", 3, "arc line"),
    ("count.gr", "p sp 3 3\na 1 2 3\na 2 3 1\n", 3, "only 2"),
    ("one.txt", "# c\n1 2\n3\n4 5\n", 3, "found 1"),
    ("four.txt", "1 2\n3 4 5 6\n", 2, "found 4"),
    ("neg.txt", "1 2\n-3 4\n", 2, ">= 0"),
    ("textw.txt", "1 2 1\n3 4 four\n", 2, "not a number: weight 'four'"),
    ("textidw.txt", "a b 1\nb c 2\nc d x\n", 3, "not a number: weight 'x'"),
    ("textidneg.txt", "a b 1\nb c -2\n", 2, "negative weight -2"),
    ("textidcount.txt", "a b\nb c d\n", 2, "found 3"),
    ("textidsnap.txt", "# Nodes: 2 Edges: 2\na b\nb c\n", 1, "announces 2 nodes"),
    ("negw.txt", "1 2 1\n3 4 -5\n", 2, "negative"),
    ("mixed.txt", "1 2 1\n3 4\n5 6 1\n", 2, "found 2"),
    ("snapcount.txt", "# Nodes: 4 Edges: 3\n1 2\n3 4\n", 3, "only 2"),
    ("snapmore.txt", "# Nodes: 4 Edges: 1\n1 2\n3 4\n", 3, "first extra"),
]


@pytest.mark.parametrize("name,content,line,fragment", BAD, ids=[b[0] for b in BAD])
def test_malformed_input_names_file_and_line(tmp_path, name, content, line, fragment):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(GraphFormatError) as info:
        read_graph(p)
    err = info.value
    assert isinstance(err, GrouteError) and isinstance(err, ValueError)
    assert err.path == str(p) and name in str(err)
    assert err.line == line, str(err)
    assert f"line {line}" in str(err)
    assert fragment in str(err), str(err)


def test_malformed_line_found_deep_in_a_big_file(tmp_path):
    rows = np.arange(200_000)
    text = "\n".join(f"{a} {a + 1}" for a in rows).split("\n")
    text[123_456] = "7 8 x"          # a weight where the lines have none
    p = tmp_path / "big.txt"
    p.write_text("# header\n" + "\n".join(text) + "\n")
    with pytest.raises(GraphFormatError) as info:
        read_graph(p)
    assert info.value.line == 123_456 + 2


@pytest.mark.parametrize("cut", [0.3, 0.9])
def test_truncated_gzip(tmp_path, cut):
    g = sample(True)
    p = tmp_path / "t.mtx.gz"
    write_mtx(g, p)
    raw = p.read_bytes()
    p.write_bytes(raw[: int(len(raw) * cut)])
    with pytest.raises(GraphFormatError, match="truncated|corrupt") as info:
        read_graph(p)
    assert info.value.line is not None and info.value.line >= 1
    assert "t.mtx.gz" in str(info.value)


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "c.txt.gz"
    raw = bytearray(gzip.compress(b"1 2\n" * 5000))
    raw[len(raw) // 2] ^= 0xFF
    raw[len(raw) // 2 + 1] ^= 0xFF
    p.write_bytes(bytes(raw))
    with pytest.raises(GraphFormatError, match="gzip"):
        read_graph(p)


def test_negative_weights_allowed_on_request(tmp_path):
    p = tmp_path / "n.gr"
    p.write_text("p sp 2 1\na 1 2 -4\n")
    assert read_graph(p, allow_negative=True).weights.tolist() == [-4]


# ---------------------------------------------------------------- cache
def test_cache_in_cache_dir_never_beside_the_source(tmp_path, isolated_cache, monkeypatch):
    g = sample(True, "int")
    src = tmp_path / "src"
    src.mkdir()
    p = src / "c.mtx"
    write_mtx(g, p)
    a = load_graph(p)
    assert list(src.iterdir()) == [p]                       # nothing written beside the file
    assert gcache.cache_path(p).is_file() and gcache.cache_path(p).parent == isolated_cache / "graphs"
    monkeypatch.setattr(gload, "read_graph", lambda *a, **k: pytest.fail("parsed again"))
    monkeypatch.setattr(gload, "_recent", {})       # the graph kept in memory aside: the cache
    b = load_graph(p)
    assert b is not a
    same_graph(a, b)
    assert b.directed == a.directed and b.id_base == 1 and b.source == str(p)


def test_cache_disabled(tmp_path, isolated_cache):
    p = tmp_path / "c.txt"
    p.write_text("1 2\n2 3\n")
    assert load_graph(p, cache=False).num_edges == 2
    assert not isolated_cache.exists() or not list(isolated_cache.rglob("*" + gcache.CACHE_SUFFIX))


def test_cache_env_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(tmp_path / "mine"))
    p = tmp_path / "c.txt"
    p.write_text("1 2\n")
    load_graph(p)
    assert list((tmp_path / "mine" / "graphs").glob("c.txt-*" + gcache.CACHE_SUFFIX))


def test_cache_invalidated_when_source_changes(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("1 2\n2 3\n")
    assert load_graph(p).num_edges == 2
    p.write_text("1 2\n2 3\n3 1\n")
    os.utime(p, ns=(10**18, 10**18))
    assert load_graph(p).num_edges == 3
    assert load_graph(p, symmetric=True).num_edges == 6   # options are part of the key


def test_cache_sees_a_rewrite_with_the_same_size_and_restored_mtime(tmp_path):
    """What `cp -p`, `rsync -t` and `tar x` do: new bytes, same size, old modification time."""
    p = tmp_path / "c.txt"
    p.write_text("1 2\n2 3\n")
    st = p.stat()
    assert load_graph(p).num_edges == 2
    p.write_text("1 2\n2 1\n")                            # same size, other graph
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size and p.stat().st_mtime_ns == st.st_mtime_ns
    g = load_graph(p)
    assert g.num_vertices == 2 and g.num_edges == 2


def test_corrupt_cache_is_ignored(tmp_path, caplog, monkeypatch):
    """(The graph the first load kept in memory is dropped, so that the cache is read.)"""
    p = tmp_path / "c.txt"
    p.write_text("1 2\n2 3\n")
    load_graph(p)
    gcache.cache_path(p).write_bytes(b"not a zip")
    monkeypatch.setattr(gload, "_recent", {})
    with caplog.at_level("WARNING", logger="groute.graph.cache"):
        assert load_graph(p).num_edges == 2
    assert "ignoring unreadable graph cache" in caplog.text, caplog.text


def test_read_only_source_dir_and_partitions_stay_untouched(tmp_path, isolated_cache):
    ro = tmp_path / "ro"
    ro.mkdir()
    p = ro / "ro.txt"
    p.write_text("1 2\n")
    ro.chmod(0o555)                      # read-only, which root must respect too
    try:
        load_graph(p)
        assert list(ro.iterdir()) == [p]
        cached = list((isolated_cache / "graphs").glob("ro.txt-*" + gcache.CACHE_SUFFIX))
        assert len(cached) == 1 and (cached[0].stat().st_mode & 0o777) == 0o644
        g = gcache.load_cached(p, {"format": "snap", "symmetric": False, "allow_negative": False})
        assert g is not None and g.num_edges == 1
    finally:
        ro.chmod(0o755)


def test_metis_cache_goes_to_the_cache_dir(tmp_path, isolated_cache):
    pytest.importorskip("pymetis")
    from groute.graph import partition_graph
    d = tmp_path / "w"
    d.mkdir()
    p = d / "two.txt"
    write_snap(load_graph("grid:6", cache=False), p)
    partition_graph(load_graph(p), 2, method="metis")
    assert list(d.iterdir()) == [p]
    assert list((isolated_cache / "partitions").glob("two.metis-degw-k2-*"))


def test_load_graph_errors_and_weight_options(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a file"):
        load_graph(tmp_path / "missing.mtx")
    g = load_graph("grid:6", cache=False)
    assert g.weights is not None
    assert load_graph("grid:6", weighted=False, cache=False).weights is None
    k = load_graph("kron:6", weighted=True, seed=5, cache=False)
    # seed picks the generator's seed (the spec names none) and the weights' seed
    same = load_graph("kron:6:seed=5", cache=False).with_weights(seed=5)
    assert k.weights is not None and np.array_equal(k.weights, same.weights)
    assert not np.array_equal(load_graph("kron:6", cache=False).indices[:50], k.indices[:50])


def test_to_networkx_keeps_positions_direction_and_isolated_vertices():
    import networkx as nx
    g = CSRGraph.from_edges(np.array([0, 1, 1, 3]), np.array([1, 2, 2, 3]), 5, directed=True)
    G = g.to_networkx()
    assert isinstance(G, nx.DiGraph) and sorted(G.nodes) == [0, 1, 2, 3, 4]
    assert sorted(G.edges) == [(0, 1), (1, 2), (3, 3)]
    assert not g.symmetrize().to_networkx().is_directed()
    assert g.symmetrize().to_networkx(directed=True).has_edge(2, 1)


@pytest.mark.parametrize("craft", ["index out of range", "negative index", "offsets decrease",
                                   "offsets short", "weights short", "int64 indices",
                                   "file ids short", "file ids repeat"])
def test_a_crafted_cache_with_the_right_key_is_not_trusted(tmp_path, craft, caplog,
                                                           monkeypatch):
    """A cache whose key matches its source but whose arrays a device would index out of
    bounds with (or whose file ids name one vertex twice) is ignored (logged) and the source
    read again: the key is not a guarantee, anyone who can write the cache directory can write
    it. (The graph the first load kept in memory is dropped, so that the cache is read.)"""
    p = tmp_path / "c.txt"
    p.write_text("1 2 5\n2 3 6\n3 1 7\n")
    good = load_graph(p)
    options = {"format": "snap", "symmetric": False, "allow_negative": False}
    indptr, indices = good.indptr.copy(), good.indices.copy()
    weights, file_ids = good.weights.copy(), good.file_ids.copy()
    if craft == "index out of range":
        indices[1] = 40
    elif craft == "negative index":
        indices[0] = -5
    elif craft == "offsets decrease":
        indptr[1], indptr[2] = 2, 1
    elif craft == "offsets short":
        indptr = indptr[:-1]
    elif craft == "weights short":
        weights = weights[:-1]
    elif craft == "int64 indices":
        indices = indices.astype(np.int64)
    elif craft == "file ids short":
        file_ids = file_ids[:-1]
    else:
        file_ids[2] = file_ids[0]
    bad = CSRGraph(indptr, indices, weights, file_ids=file_ids, name="c", validate=False)
    gcache.save_graph_npz(bad, gcache.cache_path(p), gcache.source_key(p, options))
    monkeypatch.setattr(gload, "_recent", {})
    with caplog.at_level("WARNING", logger="groute.graph.cache"):
        g = load_graph(p)
    same_graph(good, g)
    assert g.file_ids.tolist() == good.file_ids.tolist()
    assert "ignoring invalid graph cache" in caplog.text, caplog.text


def test_a_cache_with_the_right_key_is_what_a_load_reads(tmp_path, monkeypatch):
    """The control of the test above: a crafted cache that is a valid graph is read as it is
    (here weights the file does not hold), so a refused one was refused, not missed."""
    p = tmp_path / "c.txt"
    p.write_text("1 2 5\n2 3 6\n3 1 7\n")
    good = load_graph(p)
    options = {"format": "snap", "symmetric": False, "allow_negative": False}
    weights = good.weights.copy()
    weights[0] = 99
    other = CSRGraph(good.indptr, good.indices, weights, file_ids=good.file_ids, name="c")
    gcache.save_graph_npz(other, gcache.cache_path(p), gcache.source_key(p, options))
    monkeypatch.setattr(gload, "_recent", {})
    assert load_graph(p).weights.tolist() == [99, 6, 7]


@pytest.mark.parametrize("labels", [[7, 3, 7], ["a", "b", "a"], [10, 20, 20]])
def test_a_graph_whose_file_ids_repeat_is_refused(labels):
    """Two vertices of one id would make a lookup by that id answer for one of them only: the
    graph is refused, naming the id (sorted integer ids, unsorted ones, text labels)."""
    ip, ix = np.array([0, 1, 2, 2]), np.array([1, 2], dtype=np.int32)
    with pytest.raises(ValueError, match=f"file_ids repeat: {labels[2]!r} names two vertices"):
        CSRGraph(ip, ix, file_ids=labels, name="r")
    assert CSRGraph(ip, ix, file_ids=[7, 3, 9], name="r").vertex_of(9) == 2
