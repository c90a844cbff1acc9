"""Reader fuzz test: mutated graph files give the right graph or a GraphFormatError naming the file
and a line, never a wrong graph, another exception, or memory beyond a cap.

Valid files of every format (Matrix Market, DIMACS, SNAP, CSV and TSV: commas, tabs or spaces,
with or without a header row; edge lists with integer or text ids) are written from small random
graphs, then mutated (byte flips, insertions, truncations, huge declared sizes, hostile ids and
weights, an id made text, a byte-order mark, blank and control-byte lines before the text;
seeded). Each case is read
in a subprocess under an address-space limit; a graph that comes back is compared with an
independent line-by-line parse of the documented grammar (below), which must accept the file and
give the same arcs, weights and vertices.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CASES = 700
SEED = 22
ADDRESS_SPACE_CAP = 2 << 30
#: declared vertex counts at least this large cannot fit under the cap: they must be errors
HUGE = 10**8

TOKEN = re.compile(rb"[^\x00-\x20]+")
INT = re.compile(rb"[+-]?[0-9]+\Z")
FLOAT = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                   rb"|nan(?:\([0-9A-Za-z_]*\))?|inf(?:inity)?)\Z", re.IGNORECASE)
CONTROL = set(range(32)) - set(b"\t\n\v\f\r") | {127}
F32_MAX = float(np.finfo(np.float32).max)


class Invalid(Exception):
    """The reference parse rejects the file."""


# ---------------------------------------------------------------- the reference parse
def _lines(data):
    if data.startswith(b"\xef\xbb\xbf"):                # a UTF-8 byte-order mark is skipped
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        raise Invalid("UTF-16 or UTF-32 text")
    return data.split(b"\n")


def _head(line):
    return line.lstrip(bytes(range(33)))[:1]


def _lead(line):
    """The blank bytes before the line's first other byte: a control byte there is an error
    wherever the line is (comment or not), and a line of blanks is blank only without one."""
    lead = line[:len(line) - len(line.lstrip(bytes(range(33))))]
    if any(b in CONTROL for b in lead):
        raise Invalid("control byte before the text")
    return lead


def _blank(line):
    """Whether the line is blank (:func:`_lead` raises for a control byte in it)."""
    return _lead(line) == line


def _split_header(lines, is_header):
    """The header lines (blank or ``is_header``) and the index of the first other line; a
    control byte before the text of one of them, or of that line, is an error."""
    i = 0
    while i < len(lines):
        if not (_blank(lines[i]) or is_header(lines[i])):
            break
        i += 1
    if i < len(lines):
        _lead(lines[i])
    return lines[:i], i


def _fields(line, n):
    if any(b in CONTROL for b in line):
        raise Invalid("control byte")
    toks = TOKEN.findall(line)
    if len(toks) != n:
        raise Invalid("field count")
    return toks


def _int(tok, lo=-(2**63), hi=2**63 - 1):
    if not INT.match(tok):
        raise Invalid(f"not an integer {tok!r}")
    v = int(tok)
    if not lo <= v <= hi:
        raise Invalid(f"out of range {v}")
    return v


def _weight(tok, real):
    if not real:
        return _int(tok, 0, 2**31 - 1)
    if not FLOAT.match(tok):
        raise Invalid(f"not a number {tok!r}")
    v = float(re.sub(rb"\(.*\)", b"", tok))
    if math.isnan(v) or math.isinf(v) or abs(v) > F32_MAX or v < 0:
        raise Invalid(f"bad weight {v}")
    return float(np.float32(v))


def _edge_ids(toks):
    """The vertex ids and each row's (source, target) of edge rows ``toks``: integers (>= 0,
    64-bit) when every id field is an integer, the vertices in increasing order; else every id
    its text (UTF-8), the vertices in the order the rows first name them."""
    if all(INT.match(t[0]) and INT.match(t[1]) for t in toks):
        pairs = [(_int(t[0], 0), _int(t[1], 0)) for t in toks]
        return sorted({a for p in pairs for a in p}), pairs
    try:
        pairs = [(t[0].decode("utf-8"), t[1].decode("utf-8")) for t in toks]
    except UnicodeDecodeError:
        raise Invalid("an id that is not UTF-8") from None
    return list(dict.fromkeys(a for p in pairs for a in p)), pairs


def _arcs_min(arcs):
    out = {}
    for u, v, w in arcs:
        if (u, v) not in out or (w is not None and w < out[(u, v)]):
            out[(u, v)] = w
    return out


def ref_snap(data):
    lines = _lines(data)
    header, start = _split_header(lines, lambda l: _head(l) in (b"#", b"%"))
    undirected = any(re.match(rb"^\s*[#%]\s*undirected\b", l, re.I) for l in header)
    nodes = edges = None
    for l in header:
        m = re.search(rb"Nodes:\s*(\d+)\s+Edges:\s*(\d+)", l, re.I)
        if m:
            nodes, edges = int(m.group(1)), int(m.group(2))
            break
    if nodes is not None and nodes >= HUGE:
        raise Invalid("huge")
    rows = [l for l in lines[start:] if not _blank(l) and _head(l) not in (b"#", b"%")]
    ncols = len(TOKEN.findall(rows[0])) if rows else 2
    if ncols not in (2, 3):
        raise Invalid("columns")
    toks = [_fields(l, ncols) for l in rows]
    if edges is not None and len(toks) != edges:
        raise Invalid("edge count")
    real = ncols == 3 and not all(INT.match(t[2]) for t in toks)
    ids, pairs = _edge_ids(toks)
    arcs = [(u, v, _weight(t[2], real) if ncols == 3 else None) for (u, v), t in zip(pairs, toks)]
    if undirected:
        arcs += [(v, u, w) for u, v, w in arcs]
    if nodes is not None:
        if len(ids) > nodes:
            raise Invalid("nodes")
        if len(ids) < nodes and (not ids or isinstance(ids[-1], int) and ids[-1] < nodes):
            ids = list(range(nodes))
    return ids, _arcs_min(arcs), not undirected


def ref_mtx(data):
    lines = _lines(data)
    tokens = lines[0].decode("latin-1").strip().lower().split()
    if len(tokens) != 5 or tokens[:3] != ["%%matrixmarket", "matrix", "coordinate"] or \
            tokens[3] not in ("pattern", "integer", "real", "double") or \
            tokens[4] not in ("general", "symmetric"):
        raise Invalid("banner")
    _, start = _split_header(lines, lambda l: _head(l) == b"%")
    if start >= len(lines):
        raise Invalid("no size line")
    size = lines[start].split()
    if len(size) != 3 or not all(INT.match(x) for x in size):
        raise Invalid("size line")
    n, cols, nnz = (int(x) for x in size)
    if n != cols or n < 0 or nnz < 0 or n >= HUGE:
        raise Invalid("sizes")
    ncols = 2 if tokens[3] == "pattern" else 3
    rows = [l for l in lines[start + 1:] if TOKEN.findall(l) or any(b in CONTROL for b in l)]
    toks = [_fields(l, ncols) for l in rows]
    if len(toks) != nnz:
        raise Invalid("entry count")
    arcs = []
    for t in toks:
        u, v = _int(t[0], 1, n), _int(t[1], 1, n)
        w = _weight(t[2], tokens[3] in ("real", "double")) if ncols == 3 else None
        arcs.append((u, v, w))
        if tokens[4] == "symmetric" and u != v:
            arcs.append((v, u, w))
    return list(range(1, n + 1)), _arcs_min(arcs), tokens[4] == "general"


def ref_dimacs(data):
    lines = _lines(data)
    header, start = _split_header(lines, lambda l: _head(l) in (b"c", b"p"))
    problem = [l for l in header if _head(l) == b"p"]
    if len(problem) != 1:
        raise Invalid("problem lines")
    f = problem[0].split()
    if len(f) != 4 or f[1] != b"sp" or not INT.match(f[2]) or not INT.match(f[3]):
        raise Invalid("problem line")
    n, m = int(f[2]), int(f[3])
    if n < 0 or m < 0 or n >= HUGE:
        raise Invalid("counts")
    arcs = []
    for l in lines[start:]:
        if _blank(l) or _head(l) == b"c":
            continue
        t = _fields(l, 4)
        if t[0] != b"a":
            raise Invalid("tag")
        arcs.append((_int(t[1], 1, n), _int(t[2], 1, n), _int(t[3], 0, 2**31 - 1)))
    if len(arcs) != m:
        raise Invalid("arc count")
    got = _arcs_min(arcs)
    symmetric = all(got.get((v, u), object()) == w for (u, v), w in got.items())
    return list(range(1, n + 1)), got, not symmetric


def _number(tok):
    return bool(FLOAT.match(tok))


def _delimited_fields(line, delim):
    """The fields of a data line of a file delimited by ``delim`` (None: spaces): the text
    between two delimiters, blanks around it stripped, never empty nor holding another
    separator."""
    if any(b in CONTROL for b in line):
        raise Invalid("control byte")
    if delim != b"," and b"," in line:
        raise Invalid("a comma where the delimiter is not one")
    if delim is None:
        toks = list(TOKEN.finditer(line))
        for a, b in zip(toks, toks[1:]):
            if b"\t" in line[a.end():b.start()]:
                raise Invalid("a tab where the delimiter is spaces")
        return [t.group() for t in toks]
    fields = [f.strip(bytes(range(33))) for f in line.split(delim)]
    for f in fields:
        if not f:
            raise Invalid("empty field")
        if TOKEN.fullmatch(f) is None:
            raise Invalid("two fields without the delimiter")
    return fields


def ref_delimited(data):
    lines = _lines(data)
    comment = lambda l: _head(l) in (b"#", b"%")          # noqa: E731
    _, start = _split_header(lines, comment)
    rows = [l for l in lines[start:] if not _blank(l) and not comment(l)]
    if not rows:
        return [], {}, True
    first = rows[0].rstrip(b"\r")
    delim = b"," if b"," in first else b"\t" if b"\t" in first else None
    names = [f.strip(bytes(range(33))) for f in (first.split(delim) if delim else first.split())]
    edge = len(names) == 3 and _number(names[2])          # a weight: text ids, not a header
    if names and not all(_number(f) for f in names) and not edge:
        if not all(names):
            raise Invalid("empty column name")
        rows, ncols = rows[1:], len(names)
    else:
        ncols = len(_delimited_fields(rows[0], delim))
    if ncols not in (2, 3):
        raise Invalid("columns")
    toks = [_delimited_fields(l, delim) for l in rows]
    if any(len(t) != ncols for t in toks):
        raise Invalid("field count")
    real = ncols == 3 and not all(INT.match(t[2]) for t in toks)
    ids, pairs = _edge_ids(toks)
    arcs = [(u, v, _weight(t[2], real) if ncols == 3 else None) for (u, v), t in zip(pairs, toks)]
    return ids, _arcs_min(arcs), True


REFERENCE = {".txt": ref_snap, ".mtx": ref_mtx, ".gr": ref_dimacs, ".csv": ref_delimited,
             ".tsv": ref_delimited}
#: the suffixes whose vertices are the ids the file names (renumbered), not 1..n
EDGE_LISTS = (".txt", ".csv", ".tsv")


def graph_view(g, suffix):
    """(vertex ids, {(u, v): weight}, directed) of a graph read from a file, in the file's ids."""
    src, dst = g.edges()
    if suffix in EDGE_LISTS:
        ids = g.file_ids.tolist() if g.file_ids is not None else list(range(g.num_vertices))
        su, dv = g.file_id_of(src).tolist(), g.file_id_of(dst.astype(np.int64)).tolist()
    else:
        ids = list(range(1, g.num_vertices + 1))
        su, dv = (src + 1).tolist(), (dst.astype(np.int64) + 1).tolist()
    w = [None] * len(su) if g.weights is None else [float(x) if g.weights.dtype.kind == "f"
                                                    else int(x) for x in g.weights.tolist()]
    return ids, dict(zip(zip(su, dv), w)), g.directed


# ---------------------------------------------------------------- the cases
def valid_files(rng):
    """A few small valid files of each format (bytes, suffix)."""
    from groute.graph import CSRGraph, write_dimacs, write_mtx, write_snap
    out = []
    for i in range(3):
        n = int(rng.integers(3, 12))
        m = int(rng.integers(1, 20))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        for weights in (None, "int", "real"):
            w = None if weights is None else (rng.integers(0, 50, m).astype(np.int32) if weights == "int"
                                              else (rng.random(m) * 10).astype(np.float32))
            g = CSRGraph.from_edges(src, dst, n, w)
            tmp = Path(os.environ["FUZZ_DIR"]) / "valid"
            for suffix, writer in ((".txt", write_snap), (".mtx", write_mtx), (".gr", write_dimacs)):
                if suffix == ".gr" and weights == "real":
                    continue
                writer(g, tmp.with_suffix(suffix))
                out.append((tmp.with_suffix(suffix).read_bytes(), suffix))
            for delim, suffix in ((",", ".csv"), ("\t", ".tsv"), (" ", ".csv")):
                out.append((delimited_file(g, delim, rng), suffix))
            labels = text_labels(n, rng)
            out.append((delimited_file(g, ",", rng, labels), ".csv"))
            out.append((delimited_file(g, " ", rng, labels, header=False), ".txt"))
            if weights is None:
                u = CSRGraph.from_edges(src, dst, n).symmetrize()
                write_snap(u, tmp.with_suffix(".txt"))
                out.append((tmp.with_suffix(".txt").read_bytes(), ".txt"))
                write_mtx(u, tmp.with_suffix(".mtx"))
                out.append((tmp.with_suffix(".mtx").read_bytes(), ".mtx"))
    return out


def text_labels(n: int, rng) -> list[str]:
    """``n`` distinct text ids: names, UTF-8 text, and some that look like integers (a file
    that mixes them has text ids throughout)."""
    prefixes = ["v", "node_", "\u00e9", "", "x.", "\u20ac-", "1e"]
    return [f"{prefixes[int(rng.integers(0, len(prefixes)))]}{i}" for i in range(n)]


def delimited_file(g, delim: str, rng, labels=None, header=None) -> bytes:
    """``g`` as an edge list delimited by ``delim``: sparse integer ids (or ``labels``), a header
    row or not (``header``: at random), a comment, blanks around the delimiter (commas and
    tabs) at random."""
    src, dst = g.edges()
    ids = np.arange(g.num_vertices) * 3 + 7 if labels is None else labels
    rows = [[str(ids[a]), str(ids[b])] for a, b in zip(src.tolist(), dst.tolist())]
    if g.weights is not None:
        for row, w in zip(rows, g.weights.tolist()):
            row.append(str(w) if g.weights.dtype.kind == "i" else f"{w:.9g}")
    pad = " " if delim != " " and rng.random() < 0.5 else ""
    lines = [f"{pad}{delim}{pad}".join(row) for row in rows]
    with_header = rng.random() < 0.5 if header is None else header
    if with_header:
        names = ["src", "dst", "weight"][:len(rows[0]) if rows else 2]
        lines.insert(0, delim.join(names))
    if rng.random() < 0.5:
        lines.insert(int(rng.integers(0, len(lines) + 1)), "# a comment, with a comma")
    return ("\n".join(lines) + "\n").encode("utf-8")


HOSTILE_IDS = [b"9223372036854775808", b"-9223372036854775809", b"9223372036854775807",
               b"9007199254740993", b"100000000000000000000000", b"-1", b"0", b"+3", b"4294967296"]
HOSTILE_WEIGHTS = [b"1e39", b"nan", b"NaN(1)", b"inf", b"-inf", b"-1", b"2147483648", b"1e400",
                   b"0x10", b"1_0", b"3.5", b"-0", b"1e-50", b".5", b"5."]
#: ids that are not integers (an invalid UTF-8 byte and a control byte among them)
TEXT_IDS = [b"A", b"node_7", b"x.5", b"1.5", b"0x10", b"\xc3\xa9t\xc3\xa9", b"\xe9", b"\xe2\x82\xac",
            b"-", b"nan", b"a#b", b"1e3", b"\x7f"]
HUGE_SIZES = [b"1000000000", b"4294967296", b"1099511627776", b"100000000000000000000"]
FLIP_BYTES = list(b"0123456789-+.eE \t\n\r#%acpx,") + [0, 1, 11, 12, 127, 160, 255]
#: what a mutation puts before a file's text: a byte-order mark, blank and control-byte lines
PREFIXES = [b"\xef\xbb\xbf", b"\n\n", b"  \t\r\n", b"\x01\n", b"\x00" * 4, b"\x1b# c\n",
            b"\xef\xbb\xbf\n", b"\xff\xfe"]


def mutate(data: bytes, rng) -> bytes:
    kind = rng.integers(0, 8)
    b = bytearray(data)
    if kind == 6:                                         # something before the text
        return PREFIXES[int(rng.integers(0, len(PREFIXES)))] + data
    if kind == 0 and b:                                   # flip bytes
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = FLIP_BYTES[int(rng.integers(0, len(FLIP_BYTES)))]
        return bytes(b)
    if kind == 1:                                         # insert a byte
        pos = int(rng.integers(0, len(b) + 1))
        return bytes(b[:pos]) + bytes([FLIP_BYTES[int(rng.integers(0, len(FLIP_BYTES)))]]) + bytes(b[pos:])
    if kind == 2:                                         # truncate
        return bytes(b[: int(rng.integers(0, len(b) + 1))])
    toks = list(re.finditer(rb"[^\x00-\x20]+", data))
    if not toks:
        return data
    if kind == 3:                                         # a huge declared size
        nums = [t for t in toks if INT.match(t.group()) and data.rfind(b"\n", 0, t.start()) <
                data.find(b"\n", data.find(b"\n") + 1 + (data.find(b"\n") + 1 if data[:1] in b"%#c" else 0))]
        nums = nums or [t for t in toks if INT.match(t.group())][:3]
        if not nums:
            return data
        t = nums[int(rng.integers(0, len(nums)))]
        new = HUGE_SIZES[int(rng.integers(0, len(HUGE_SIZES)))]
    else:                                                 # a hostile id or weight, a text id
        t = toks[int(rng.integers(0, len(toks)))]
        pool = {4: HOSTILE_IDS, 5: HOSTILE_WEIGHTS, 7: TEXT_IDS}[int(kind)]
        new = pool[int(rng.integers(0, len(pool)))]
    return data[: t.start()] + new + data[t.end():]


def run_cases(directory: str, cases: int, seed: int) -> dict:
    """Read every case; return counts and the failures (run in a capped subprocess)."""
    from groute.graph import GraphFormatError, read_graph
    rng = np.random.default_rng(seed)
    os.environ["FUZZ_DIR"] = directory
    files = valid_files(rng)
    failures, counts = [], {"graph": 0, "error": 0, "valid_rejected": 0, "text_ids": 0}
    for i in range(cases):
        data, suffix = files[int(rng.integers(0, len(files)))]
        if i >= len(files):
            data = mutate(data, rng)
            if rng.random() < 0.3:
                data = mutate(data, rng)
        else:
            data, suffix = files[i]
        path = os.path.join(directory, f"case{i}{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        try:
            want = REFERENCE[suffix](data)
        except Invalid:
            want = None
        except Exception as exc:                          # the reference itself is wrong
            failures.append([i, suffix, data.decode("latin-1"), f"reference failed: {exc!r}"])
            continue
        try:
            g = read_graph(path)
        except GraphFormatError as err:
            counts["error"] += 1
            nlines = data.count(b"\n") + 1
            if err.path != path or err.line is None or not 1 <= err.line <= nlines or \
                    f"line {err.line}" not in str(err):
                failures.append([i, suffix, data.decode("latin-1"), f"error without file/line: {err}"])
            if want is not None:
                counts["valid_rejected"] += 1
                if i < len(files):
                    failures.append([i, suffix, data.decode("latin-1"), f"valid file rejected: {err}"])
            continue
        except BaseException as exc:
            failures.append([i, suffix, data.decode("latin-1"), f"{type(exc).__name__}: {exc}"])
            continue
        counts["graph"] += 1
        counts["text_ids"] += g.file_ids is not None and g.file_ids.dtype == object
        got = graph_view(g, suffix)
        if want is None:
            failures.append([i, suffix, data.decode("latin-1"), "accepted a file the grammar rejects"])
        elif got != want:
            failures.append([i, suffix, data.decode("latin-1"), f"wrong graph: {got} != {want}"])
    return {"counts": counts, "failures": failures[:10], "nfail": len(failures)}


def test_reader_fuzz(tmp_path):
    root = Path(__file__).resolve().parents[2]
    script = (
        "import json, resource, sys\n"
        "import numpy\n"
        f"sys.path[:0] = [{str(root)!r}, {str(Path(__file__).parent)!r}]\n"
        "import test_reader_fuzz as fuzz\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_CAP}, {ADDRESS_SPACE_CAP}))\n"
        f"print(json.dumps(fuzz.run_cases({str(tmp_path)!r}, {CASES}, {SEED})))\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=110,
                       env=env, cwd=str(root))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["nfail"] == 0, json.dumps(res["failures"], indent=1)[:6000]
    c = res["counts"]
    assert c["graph"] > CASES // 10 and c["error"] > CASES // 4, c      # both outcomes exercised
    assert c["text_ids"] > CASES // 10, c
