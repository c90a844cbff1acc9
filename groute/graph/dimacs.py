"""DIMACS shortest-path files (``.gr``, ``.gr.gz``, 9th DIMACS Implementation Challenge).

``c`` lines are comments (anywhere), one ``p sp <n> <m>`` line precedes the arcs, and each arc is
``a <u> <v> <w>`` with 1-based ids and a non-negative integer weight (int32); lines may be
indented, and every other line is an error. Repeated arcs are
merged keeping the smallest weight. The road networks list every edge in both directions; when
the arc set (with weights) turns out symmetric the graph is marked ``directed=False``.
"""
from __future__ import annotations

import os

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .budget import check_vertices
from .textio import (Lines, Table, Text, blank_ranges, head_bytes, line_heads, line_head,
                     parse_int, reader, split_header, body_line_or_last)
from ._writeutil import open_text_out, write_rows
from .weights import check_weights, graph_name, one_based_ends


@reader
def read_dimacs(path, *, allow_negative: bool = False, text: Text) -> CSRGraph:
    """Read a DIMACS ``.gr`` shortest-path file into a CSRGraph (see the module docstring);
    ``text``: the file's :class:`~.textio.Text` when the caller has read it."""
    header, body, body_line = split_header(text, lambda l: line_head(l) in (b"c", b"p"),
                                           path=path)
    problem = [(number, l) for number, l in header if line_head(l) == b"p"]
    if not problem:
        raise GraphFormatError(path, "no problem line 'p sp <vertices> <arcs>' before the first arc",
                               line=body_line_or_last(body, body_line))
    if len(problem) > 1:
        raise GraphFormatError(path, "more than one problem line", line=problem[1][0])
    pline, ptext = problem[0]
    fields = ptext.split()
    if len(fields) != 4 or fields[1] != b"sp":
        raise GraphFormatError(path, "bad problem line: expected 'p sp <vertices> <arcs>', got "
                                     f"{ptext.decode('latin-1').strip()[:60]!r}", line=pline)
    n, m = parse_int(fields[2]), parse_int(fields[3])
    if n is None or m is None:
        raise GraphFormatError(path, "bad problem line: vertex and arc counts must be integers",
                               line=pline)
    if n < 0 or m < 0:
        raise GraphFormatError(path, "negative counts in the problem line", line=pline)
    check_vertices(path, n, line=pline)

    # Classify the body's lines by their first non-blank byte, all at once.
    buf = np.frombuffer(body, dtype=np.uint8)
    lines = Lines(buf, body_line)
    _, line_ends, heads = line_heads(buf)
    first = head_bytes(buf, line_ends, heads)
    is_arc = first == ord("a")
    is_comment = first == ord("c")
    ok = is_arc | is_comment | (first == 10)
    if not ok.all():
        bad = int(np.argmin(ok))
        text = body[int(heads[bad]):int(line_ends[bad])].decode("latin-1").strip()
        what = "a second problem line" if text.startswith("p") else f"{text[:60]!r}"
        raise GraphFormatError(path, f"expected an arc line 'a <u> <v> <w>' or a comment, got {what}",
                               line=int(lines.line_of(heads[bad])))
    tags = heads[is_arc]
    nxt = np.minimum(tags + 1, max(buf.size - 1, 0))
    glued = (buf[nxt] > 32) | (tags + 1 >= buf.size)
    if glued.any():
        bad = int(tags[np.argmax(glued)])
        raise GraphFormatError(path, "arc lines must read 'a <u> <v> <w>'", line=int(lines.line_of(bad)))
    # Comment lines become blanks and each 'a' tag a number (0), so an arc line is four numbers
    # (where lines are not indented, starting right after a newline: the parser's fast
    # field-count path) and byte offsets, so line numbers, stay the same.
    out = blank_ranges(buf, heads[is_comment], line_ends[is_comment])
    out[tags] = ord("0")
    table = Table(out.tobytes(), 4, path=path, first_line=body_line, expect_rows=m, what="arc",
                  display=body, names=("tag", "source id", "target id", "weight"))
    del out
    values = table.ints()
    ids = values[:, 1:3]
    src, dst = one_based_ends(ids, n, table=table, col=1)
    w = check_weights(values[:, 3], np.int32, table=table, col=3, allow_negative=allow_negative)
    del values, ids, table
    g = CSRGraph.from_edges(src, dst, n, w, directed=True,
                            name=graph_name(path), source=os.fspath(path), id_base=1)
    if g.is_symmetric():
        g.directed = False
    return g


def write_dimacs(g: CSRGraph, path, *, comment: str = "") -> None:
    """Write ``g`` as a DIMACS ``.gr`` file (all arcs; weight 1 where the graph has none)."""
    g = g.to_host()
    src, dst = g.edges()
    w = g.weights if g.weights is not None else np.ones(g.num_edges, dtype=np.int64)
    if w.dtype.kind == "f":
        if not np.all(w == np.round(w)):
            raise ValueError("DIMACS .gr weights are integers; this graph has fractional weights")
        w = w.astype(np.int64)
    with open_text_out(path) as f:
        for c in (comment or f"written by groute from {g.name}").splitlines():
            f.write(f"c {c}\n".encode())
        f.write(f"p sp {g.num_vertices} {g.num_edges}\n".encode())
        write_rows(f, [src + 1, dst.astype(np.int64) + 1, w], ["a %d", "%d", "%d"])
