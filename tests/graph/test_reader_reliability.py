"""Readers return the right graph or a GraphFormatError naming file and line (issue 22 items 3-6),
and the file-input parts of issue 21: CSV/TSV, SNAP headers, NaN/inf named, `data get --url`."""
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from groute.graph import GraphFormatError, load_graph, read_graph, write_graph
from groute.graph import budget

MTX = "%%MatrixMarket matrix coordinate {field} general\n"


def error_of(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(GraphFormatError) as info:
        read_graph(p)
    err = info.value
    assert err.path == str(p) and err.line is not None and f"line {err.line}" in str(err)
    return err


# ---------------------------------------------------------------- item 3: wrong graphs
@pytest.mark.parametrize("text,quoted", [
    ("9223372036854775808 1\n9223372036854775807 1\n", "9223372036854775808"),
    ("1 2\n-9223372036854775809 1\n", "-9223372036854775809"),
    ("1 2\n3 99999999999999999999999\n", "99999999999999999999999"),
])
def test_snap_ids_beyond_64_bits_are_errors_quoting_the_file(tmp_path, text, quoted):
    err = error_of(tmp_path, "big.txt", text)
    assert quoted in str(err) and "64-bit" in str(err)
    assert err.line == text.count("\n", 0, text.index(quoted)) + 1


def test_int64_extremes_that_fit_are_ids(tmp_path):
    p = tmp_path / "edge.txt"
    p.write_text("9223372036854775807 0\n")
    assert read_graph(p).file_ids.tolist() == [0, 2**63 - 1]


@pytest.mark.parametrize("name,content,line", [
    ("w.txt", "1 2 1\n2 3 1e39\n", 2),
    ("w.mtx", MTX.format(field="real") + "3 3 2\n1 2 1\n2 3 1e39\n", 4),
    ("w400.txt", "1 2 0.5\n2 3 1e400\n", 2),
])
def test_weights_beyond_float32_are_errors(tmp_path, name, content, line):
    err = error_of(tmp_path, name, content)
    assert err.line == line and "past float32's range" in str(err)


@pytest.mark.parametrize("name,content,line", [
    ("u.txt", "1 2 1\n2 3 1e-50\n", 2),
    ("u.mtx", MTX.format(field="real") + "3 3 2\n1 2 1e-46\n2 3 1\n", 3),
])
def test_weights_that_float32_holds_as_zero_are_errors(tmp_path, name, content, line):
    """A positive weight below float32's smallest would be stored as 0: an error naming the
    line."""
    err = error_of(tmp_path, name, content)
    assert err.line == line and "below float32's smallest" in str(err) and "be 0" in str(err)


def test_dimacs_line_without_its_tag_is_an_error(tmp_path):
    err = error_of(tmp_path, "t.gr", "p sp 9 2\na 1 2 3\n  9 1 2 3\n")
    assert err.line == 3 and "'9 1 2 3'" in str(err)


@pytest.mark.parametrize("field, entries", [("pattern", "2 1\n% mid\n3 1\n"),
                                            ("real", "2 1 1.5\n  % a b\n3 1 2\n")])
def test_a_comment_among_matrix_market_entries_is_blamed_on_its_own_line(tmp_path, field,
                                                                         entries):
    """Of as many fields as an entry, it was counted as one: the error blamed the entry after
    it as the first past the header's count."""
    err = error_of(tmp_path, "m.mtx", f"%%MatrixMarket matrix coordinate {field} general\n"
                                      f"% before the size line: fine\n3 3 2\n{entries}")
    assert err.line == 5 and "a comment line among the entries" in str(err), str(err)


def test_snap_float_weights_keep_ids_above_2_53_apart(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("9007199254740993 1 1.5\n9007199254740992 1 2.5\n")
    g = read_graph(p)
    assert g.file_ids.tolist() == [1, 2**53, 2**53 + 1] and g.num_edges == 2
    assert g.weights.dtype == np.float32


# ---------------------------------------------------------------- item 4: messages
def test_control_byte_blamed_on_its_own_line(tmp_path):
    err = error_of(tmp_path, "c.txt", b"1 2\n\x01 3 4\n5 6\n")
    assert err.line == 2 and "control byte 0x01" in str(err)
    err = error_of(tmp_path, "c2.txt", b"1 2\n3 4\x01\n5 6\n")
    assert err.line == 2


def test_field_count_message_counts_as_the_reader_does(tmp_path):
    err = error_of(tmp_path, "n.txt", b"1 2\n3 4\x005\n")
    assert err.line == 2 and "found 3" in str(err)


# ---------------------------------------------------------------- item 5: the docs hold
def test_indented_dimacs_arcs_and_comments(tmp_path):
    p = tmp_path / "i.gr"
    p.write_text("c x\np sp 3 3\n a 1 2 3\n\ta 2 3 1\n   c indented comment\na 3 1 2\n")
    g = read_graph(p)
    assert g.indices.tolist() == [1, 2, 0] and g.weights.tolist() == [3, 1, 2]


def test_indented_snap_comment_after_the_first_edge(tmp_path):
    p = tmp_path / "i.txt"
    p.write_text("1 2\n   # a comment\n\t% another\n2 3\n")
    assert read_graph(p).num_edges == 2


def test_snap_mixed_integer_and_real_weights(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("1 2 1\n2 3 1.5\n3 1 2e1\n")
    g = read_graph(p)
    assert g.weights.dtype == np.float32 and g.weights.tolist() == [1.0, 1.5, 20.0]


# ---------------------------------------------------------------- item 6: declared sizes
def test_declared_sizes_checked_before_allocating(tmp_path):
    """Under a 1 GiB address-space cap, files declaring 1e8/1e9/2^32 vertices are
    GraphFormatErrors naming file and line, not MemoryError or a plain ValueError."""
    cases = {
        "e8.mtx": MTX.format(field="pattern") + "100000000 100000000 1\n1 2\n",
        "e9.mtx": MTX.format(field="pattern") + "1000000000 1000000000 1\n1 2\n",
        "big.mtx": MTX.format(field="pattern") + "4294967296 4294967296 1\n1 2\n",
        "e9.gr": "p sp 1000000000 1\na 1 2 3\n",
        "e9.txt": "# Nodes: 1000000000 Edges: 1\n1 2\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    script = textwrap.dedent(f"""
        import resource, sys, json
        import numpy  # noqa: F401 (loaded before the cap)
        from groute.graph import read_graph, GraphFormatError
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        out = {{}}
        for name in {sorted(cases)!r}:
            try:
                g = read_graph({str(tmp_path)!r} + "/" + name)
                out[name] = "loaded"
            except GraphFormatError as e:
                out[name] = [e.line, str(e)]
            except BaseException as e:
                out[name] = type(e).__name__ + ": " + str(e)
        print(json.dumps(out))
    """)
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env=env, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name in cases:
        assert isinstance(out[name], list), (name, out[name])
        line, message = out[name]
        assert name in message and line == (2 if name.endswith(".mtx") else 1), message
    assert "2^32" in out["big.mtx"][1]


def test_budget_reads_a_cap(monkeypatch):
    monkeypatch.setattr(budget, "_mem_available", lambda: 10 * 2**20)
    with pytest.raises(GraphFormatError, match="GiB"):
        budget.check_vertices("f.mtx", 10**6, line=2)
    budget.check_vertices("f.mtx", 1000, line=2)


# ---------------------------------------------------------------- issue 21: files in
def test_nan_and_inf_weights_named(tmp_path):
    assert "weight is NaN" in str(error_of(tmp_path, "a.txt", "1 2 1\n2 3 nan\n"))
    assert "weight is infinite" in str(error_of(tmp_path, "b.txt", "1 2 1.5\n2 3 -inf\n"))
    err = error_of(tmp_path, "c.gr", "p sp 3 2\na 1 2 3\na 2 3 NaN\n")
    assert err.line == 3 and "weight is NaN" in str(err)
    err = error_of(tmp_path, "d.mtx", MTX.format(field="integer") + "3 3 1\n1 2 inf\n")
    assert err.line == 3 and "weight is infinite" in str(err)


def test_snap_undirected_header_and_isolated_vertices(tmp_path):
    p = tmp_path / "u.txt"
    p.write_text("# Undirected graph: u\n# Nodes: 6 Edges: 2\n0 1\n1 4\n")
    g = read_graph(p)
    assert not g.directed and g.num_vertices == 6 and g.num_edges == 4
    assert g.file_ids.tolist() == list(range(6)) and g.degrees().tolist() == [1, 2, 0, 0, 1, 0]


def test_snap_nodes_header_with_sparse_ids(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("# Nodes: 3 Edges: 2\n10 20\n20 30\n")
    assert read_graph(p).file_ids.tolist() == [10, 20, 30]
    q = tmp_path / "t.txt"
    q.write_text("# Nodes: 2 Edges: 2\n10 20\n20 30\n")
    assert error_of(tmp_path, "t.txt", q.read_text()).line == 1


@pytest.mark.parametrize("spec", ["kron:12", "rmat:10"])
def test_write_graph_round_trip_keeps_isolated_vertices(tmp_path, spec):
    g = load_graph(spec, cache=False)
    assert g.degree_stats()["isolated"] > 0
    p = tmp_path / "g.txt"
    write_graph(g, p)
    h = read_graph(p)
    assert h.num_vertices == g.num_vertices and h.directed == g.directed
    assert np.array_equal(h.indptr, g.indptr) and np.array_equal(h.indices, g.indices)


@pytest.mark.parametrize("name,text,columns,want_w", [
    ("a.csv", "src,dst,weight\n1,2,3\n# note\n2,3,5\n", None, [3, 5]),
    ("b.csv", "1,2\n2,3\n", None, None),
    ("c.tsv", "from\tto\tt\tcost\n1\t2\t9\t3\n2\t3\t9\t5\n", ("from", "to", "cost"), [3, 5]),
    ("d.csv", "a,b,c,d\n9,1,2,3\n9,2,3,5\n", (1, 2, 3), [3, 5]),
    ("e.csv", "% c\n1 2 3\n2 3 5\n", None, [3, 5]),
    ("f.csv", "SRC , DST\n1 , 2\n2 , 3\n", ("src", "dst"), None),
    ("g.csv", "cost,from,to\n3,1,2\n5,2,3\n", ("from", "to", "cost"), [3, 5]),
    ("h.csv", "to,x,from\n2,0,1\n3,0,2\n", (2, 0), None),
])
def test_csv_and_tsv(tmp_path, name, text, columns, want_w):
    p = tmp_path / name
    p.write_text(text)
    g = load_graph(p, columns=columns, cache=False)
    assert g.file_ids.tolist() == [1, 2, 3] and g.num_edges == 2 and g.directed
    assert (g.weights is None) == (want_w is None)
    if want_w is not None:
        assert g.weights.tolist() == want_w


def test_csv_errors_name_line_and_column(tmp_path):
    err = error_of(tmp_path, "x.csv", "src,dst,weight\n1,2,3\n2,,5\n")
    assert err.line == 3 and "empty field" in str(err)
    err = error_of(tmp_path, "y.csv", "src,dst,weight\n1,2,3\n2,3,x\n")
    assert err.line == 3 and "weight (weight) 'x'" in str(err)
    p = tmp_path / "w.csv"
    p.write_text("a,b,c,d\n1,2,3,4\n")
    with pytest.raises(GraphFormatError, match="columns="):
        read_graph(p)
    with pytest.raises(GraphFormatError, match="no column named 'z'"):
        read_graph(p, columns=("a", "z"))


def test_csv_gz_and_sniffed(tmp_path):
    import gzip
    p = tmp_path / "e.csv.gz"
    p.write_bytes(gzip.compress(b"u,v\n5,6\n"))
    assert read_graph(p).file_ids.tolist() == [5, 6]
    q = tmp_path / "noext"
    q.write_text("5,6\n6,7\n")
    assert read_graph(q).num_edges == 2


def test_data_get_url_makes_the_name_loadable(tmp_path, isolated_cache):
    from groute.graph import datasets, write_snap
    g = load_graph("er:50:3:seed=1", cache=False)
    src = tmp_path / "mine.txt"
    write_snap(g, src)
    datasets.download("my-graph", url=src.as_uri(), dir=tmp_path / "elsewhere")
    h = load_graph("my-graph")
    assert h.num_edges == g.num_edges and not h.directed


def test_download_error_names_the_url(tmp_path):
    import socket
    from groute.graph import datasets
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                              # nothing listens there now
    url = f"http://127.0.0.1:{port}/graph.txt"
    with pytest.raises(OSError, match=f"127.0.0.1:{port}/graph.txt") as info:
        datasets.download("offline", url=url, dir=tmp_path)
    assert isinstance(info.value, datasets.DatasetError)


@pytest.mark.parametrize("text,line", [
    ("1,2\n3,,4\n", 2),                 # two columns: "3,,4" would read as the edge 3 -> 4
    ("src,dst\n1,2\n,3,4\n", 3),
    ("1,2\n3,4,\n", 2),
    ("1\t2\n3\t\t4\n", 2),
    ("1 , 2\n3 ,  , 4\n", 2),
])
def test_csv_empty_field_is_an_error(tmp_path, text, line):
    err = error_of(tmp_path, "empty.csv", text)
    assert err.line == line and "empty field" in str(err)


@pytest.mark.parametrize("text,line,quoted", [
    ("src,dst\n99999999999999999999,2\n", 2, "source id (src) 99999999999999999999 does not fit"),
    ("1,2\n3,-99999999999999999999\n", 2, "target id -99999999999999999999 does not fit"),
    ("1,2\n-1,3\n", 2, "vertex ids must be >= 0, got -1"),
])
def test_csv_hostile_ids_are_errors_quoting_the_field(tmp_path, text, line, quoted):
    """A CSV field is quoted alone, not with the delimiter and the fields after it (the quote
    of a saturated id was parsed as an int and raised a bare ValueError)."""
    err = error_of(tmp_path, "ids.csv", text)
    assert err.line == line and re.search(re.escape(quoted) + "( |$)", str(err)), str(err)


def test_csv_int64_extremes_that_fit_are_ids(tmp_path):
    p = tmp_path / "max.csv"
    p.write_text("a,b,c\n9223372036854775807,2,3\n")
    g = read_graph(p, columns=("a", "b", "c"))
    assert g.file_ids.tolist() == [2, 2**63 - 1] and g.weights.tolist() == [3]


# ---------------------------------------------------------------- issue 41: text before the data
#: one small graph in every text format: the arcs 1 -> 2 and 3 -> 4 in the file's ids
SAME_GRAPH = {
    "g.txt": "1 2\n3 4\n",
    "g.csv": "1,2\n3,4\n",
    "h.csv": "src,dst\n1,2\n3,4\n",
    "g.tsv": "1\t2\n3\t4\n",
    "g.mtx": MTX.format(field="pattern") + "4 4 2\n1 2\n3 4\n",
    "g.gr": "p sp 4 2\na 1 2 7\na 3 4 7\n",
}


def arcs_in_file_ids(g):
    src, dst = g.edges()
    if g.file_ids is not None:
        return sorted(zip(g.file_id_of(src).tolist(), g.file_id_of(dst.astype(np.int64)).tolist()))
    return sorted(zip((src + g.id_base).tolist(), (dst.astype(np.int64) + g.id_base).tolist()))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("name", sorted(SAME_GRAPH))
def test_utf8_byte_order_mark_is_skipped_by_every_reader(tmp_path, name, gz):
    """A file saved with a UTF-8 byte-order mark (Excel's CSV, Notepad) is the same graph: the
    first edge is not read as a header row, nor the header's first name as '\\ufeffsrc'."""
    import gzip
    data = SAME_GRAPH[name].encode("utf-8-sig")
    p = tmp_path / (name + (".gz" if gz else ""))
    p.write_bytes(gzip.compress(data) if gz else data)
    columns = ("src", "dst") if name == "h.csv" else None
    g = load_graph(p, cache=False, columns=columns)
    assert arcs_in_file_ids(g) == [(1, 2), (3, 4)]


@pytest.mark.parametrize("bom,encoding", [(b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
                                          (b"\xff\xfe\x00\x00", "UTF-32")])
def test_utf16_text_is_an_error_saying_so(tmp_path, bom, encoding):
    err = error_of(tmp_path, "w.txt", bom + "1 2\n".encode("utf-16-le"))
    assert err.line == 1 and f"{encoding} text" in str(err) and "UTF-8" in str(err)


@pytest.mark.parametrize("name,content,line", [
    ("nul.txt", b"\x00" * 16, 1),
    ("c.txt", b"\x01\x02\n1 2\n", 1),
    ("c.csv", b"\x00\n1,2\n", 1),
    ("c.tsv", b"# header\n \x1b \n1\t2\n", 2),
    ("c.gr", b"c x\n\x01\np sp 2 1\na 1 2 3\n", 2),
    ("p.gr", b"\x01p sp 2 1\na 1 2 3\n", 1),
    ("c.mtx", MTX.format(field="pattern").encode() + b"% x\n\x01\n2 2 1\n1 2\n", 3),
    ("m.mtx", MTX.format(field="pattern").encode() + b"\x01% x\n2 2 1\n1 2\n", 2),
    ("z.mtx", MTX.format(field="pattern").encode() + b"2 2 0\n\x01\n", 3),
    ("z.gr", b"p sp 2 0\n\x02\n", 2),
    ("h.txt", b"# comment\n\x7f\x01\n1 2\n", 2),
    ("late.txt", b"\n\n   \n\x01\n1 2\n", 4),
])
def test_control_bytes_before_the_first_data_line_are_errors(tmp_path, name, content, line):
    """A line of control bytes before the data (or in a data section with no rows) is an
    error naming its line, as the same line among the data is; it is not blank."""
    err = error_of(tmp_path, name, content)
    assert err.line == line and ("control byte" in str(err) or "0x7f" in str(err)
                                 or "fields" in str(err)), str(err)


def test_control_bytes_inside_a_comment_are_its_text(tmp_path):
    p = tmp_path / "k.txt"
    p.write_bytes(b"# made by \x01tool\x02\n1 2\n")
    assert read_graph(p).num_edges == 1


@pytest.mark.parametrize("name,text,line,found", [
    ("m.csv", "1,2\n3 4\n5\t6\n", 2, "spaces"),
    ("w.csv", "1,2,3\n4,5 6\n", 2, "spaces"),
    ("t.csv", "1,2\n3\t4\n", 2, "a tab"),
    ("c.tsv", "1\t2\n3,4\n", 2, "a comma"),
    ("s.tsv", "1\t2\n3\t4\n5 6\n", 3, "spaces"),
    ("w.tsv", "a\tb\tc\n1\t2\t3\n4\t5 6\n", 3, "spaces"),
    ("sp.csv", "1 2\n3 4\n5\t6\n", 3, "a tab"),
    ("cm.csv", "src dst\n1 2\n3,4\n", 3, "a comma"),
])
def test_a_delimited_file_uses_one_delimiter(tmp_path, name, text, line, found):
    """The delimiter is the first data line's; another between two fields of a line is an
    error naming the line (it used to be read as a blank, giving a graph)."""
    err = error_of(tmp_path, name, text)
    assert err.line == line and f"fields separated by {found}" in str(err), str(err)


@pytest.mark.parametrize("name,text", [
    ("b.csv", "1 , 2\n3,\t4\n\n5 ,6\n"),        # blanks around the delimiter
    ("b.tsv", "1\t2\n3 \t 4\n\t\n\t \t\n5\t6\n"),  # lines of blanks and tabs are blank
    ("i.tsv", "  1\t2\n\t\n3\t4  \n5\t6\n"),
    ("s.csv", "1  2\n  3 4\n5 6\t\n"),           # spaces; a tab outside the fields
])
def test_one_delimiter_with_blanks_around_it_is_fine(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    assert arcs_in_file_ids(read_graph(p)) == [(1, 2), (3, 4), (5, 6)]


def blank_gzip(path, *, before=b"", blank=b" ", after=b"", mib=256):
    """A gzip file of ``before``, ``mib`` MiB of ``blank`` and ``after``: members of 16 MiB
    of blanks compressed once and repeated (a gzip file may hold several members)."""
    import gzip
    member = gzip.compress(blank * ((16 << 20) // len(blank)), compresslevel=1)
    with open(path, "wb") as f:
        f.write(gzip.compress(before))
        for _ in range(mib // 16):
            f.write(member)
        f.write(gzip.compress(after))


def test_a_gzip_of_blanks_is_read_in_bounded_memory(tmp_path):
    """256 MiB of blanks around the text read under an address-space cap of 192 MiB beyond
    what the process holds (they used to be held whole, twice); line numbers count the blank
    lines all the same."""
    cases = {
        "spaces.txt.gz": dict(blank=b" "),
        "lines.txt.gz": dict(blank=b"\n"),
        "crlf.csv.gz": dict(blank=b" \t\r\n"),
        "trailing.txt.gz": dict(before=b"1 2\n3 4\n", blank=b"\n "),
        "middle.txt.gz": dict(before=b"1 2\n", blank=b" ", after=b"\n3 4\n"),
        "middle_lines.tsv.gz": dict(before=b"1\t2\n", blank=b"\t\n", after=b"3\t4\n"),
        "bad_after.txt.gz": dict(blank=b"\n", after=b"1 2 x\n"),
        "bad_between.txt.gz": dict(before=b"1 2 1\n", blank=b"\n", after=b"3 4 x\n"),
    }
    for name, parts in cases.items():
        blank_gzip(tmp_path / name, **parts)
    script = textwrap.dedent(f"""
        import json, resource
        import numpy  # noqa: F401 (loaded before the cap)
        from groute.graph import read_graph, GraphFormatError
        def vm():
            for line in open("/proc/self/status"):
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        cap = vm() + (192 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        out = {{}}
        for name in {sorted(cases)!r}:
            try:
                g = read_graph({str(tmp_path)!r} + "/" + name)
                out[name] = [g.num_vertices, g.num_edges]
            except GraphFormatError as e:
                out[name] = [e.line, str(e)]
            except BaseException as e:
                out[name] = type(e).__name__ + ": " + str(e)
        print(json.dumps(out))
    """)
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300, env=env,
                       cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    lines = 256 << 20
    assert out == {"spaces.txt.gz": [0, 0], "lines.txt.gz": [0, 0], "crlf.csv.gz": [0, 0],
                   "trailing.txt.gz": [4, 2], "middle.txt.gz": [4, 2],
                   "middle_lines.tsv.gz": [4, 2],
                   "bad_after.txt.gz": [lines + 1, out["bad_after.txt.gz"][1]],
                   "bad_between.txt.gz": [lines + 2, out["bad_between.txt.gz"][1]]}, out
    assert "'x'" in out["bad_after.txt.gz"][1] and "'3 4 x'" in out["bad_between.txt.gz"][1]


def test_a_matrix_market_file_that_ends_in_comments_says_it_has_no_size_line(tmp_path):
    """It said "bad size line ... got ''", naming the line after the last."""
    err = error_of(tmp_path, "c.mtx", MTX.format(field="pattern") + "% one\n% two\n")
    assert err.line == 3 and "no size line" in str(err) and "got ''" not in str(err)


def test_a_file_replaced_while_it_is_parsed_is_not_cached_as_its_new_bytes(tmp_path,
                                                                          isolated_cache,
                                                                          monkeypatch):
    """The key was hashed after the parse: a file replaced meanwhile had the old graph cached
    under the new file's bytes, for good. Now the key is taken first and nothing is cached
    when the file changed under the parse."""
    import groute.graph.load as gload
    from groute.graph import load_graph
    path = tmp_path / "race.txt"
    path.write_text("0 1\n1 2\n2 3\n3 4\n")
    parse = gload.read_graph

    def parse_then_replace(*args, **kwargs):
        g = parse(*args, **kwargs)
        fresh = tmp_path / "fresh.txt"
        fresh.write_text("0 1\n")
        fresh.replace(path)                         # as `mv` would, while the first load runs
        return g
    monkeypatch.setattr(gload, "read_graph", parse_then_replace)
    assert load_graph(path).num_vertices == 5       # what was there when it was read
    monkeypatch.setattr(gload, "read_graph", parse)
    monkeypatch.setattr(gload, "_recent", {})
    assert load_graph(path).num_vertices == 2       # the new file, not the old graph cached
