"""DIMACS shortest-path files (``.gr``, ``.gr.gz``, 9th DIMACS Implementation Challenge).

``c`` lines are comments (anywhere), one ``p sp <n> <m>`` line precedes the arcs, and each arc is
``a <u> <v> <w>`` with 1-based ids and a non-negative integer weight (int32). Repeated arcs are
merged keeping the smallest weight. The road networks list every edge in both directions; when
the arc set (with weights) turns out symmetric the graph is marked ``directed=False``.
"""
from __future__ import annotations

import os

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .textio import Lines, blank_out_lines, parse_table, read_bytes, split_header, _BLANK
from ._writeutil import open_text_out, write_rows
from .weights import check_weights, graph_name


def read_dimacs(path, *, allow_negative: bool = False, data: bytes | None = None) -> CSRGraph:
    """Read a DIMACS ``.gr`` shortest-path file into a CSRGraph (see the module docstring)."""
    data = read_bytes(path) if data is None else data
    header, body, body_line = split_header(
        data, lambda l: l.lstrip()[:1] in (b"c", b"p"))
    problem = [(i + 1, l) for i, l in enumerate(header) if l.lstrip()[:1] == b"p"]
    if not problem:
        raise GraphFormatError(path, "no problem line 'p sp <vertices> <arcs>' before the first arc",
                               line=body_line)
    if len(problem) > 1:
        raise GraphFormatError(path, "more than one problem line", line=problem[1][0])
    pline, ptext = problem[0]
    fields = ptext.split()
    if len(fields) != 4 or fields[1] != b"sp":
        raise GraphFormatError(path, "bad problem line: expected 'p sp <vertices> <arcs>', got "
                                     f"{ptext.decode('latin-1').strip()[:60]!r}", line=pline)
    try:
        n, m = int(fields[2]), int(fields[3])
    except ValueError:
        raise GraphFormatError(path, "bad problem line: vertex and arc counts must be integers",
                               line=pline) from None
    if n < 0 or m < 0:
        raise GraphFormatError(path, "negative counts in the problem line", line=pline)

    # Classify the body's lines by their first byte, all at once.
    buf = np.frombuffer(body, dtype=np.uint8)
    lines = Lines(buf, body_line)
    starts = np.concatenate([[0], lines.nl + 1])
    starts = starts[starts < buf.size]
    first = buf[starts] if buf.size else np.zeros(0, np.uint8)
    is_arc = first == ord("a")
    ok = is_arc | (first == ord("c")) | (first == 10) | (first == 13) | (first == 32) | (first == 9)
    if not ok.all():
        bad = int(starts[np.argmin(ok)])
        end = body.find(b"\n", bad)
        text = body[bad: end if end >= 0 else len(body)].decode("latin-1").strip()
        what = "a second problem line" if text.startswith("p") else f"{text[:60]!r}"
        raise GraphFormatError(path, f"expected an arc line 'a <u> <v> <w>' or a comment, got {what}",
                               line=int(lines.line_of(bad)))
    arc_starts = starts[is_arc]
    nxt = np.minimum(arc_starts + 1, max(buf.size - 1, 0))
    glued = ~_BLANK[buf[nxt]] | (arc_starts + 1 >= buf.size)
    if glued.any():
        bad = int(arc_starts[np.argmax(glued)])
        raise GraphFormatError(path, "arc lines must read 'a <u> <v> <w>'", line=int(lines.line_of(bad)))
    out = buf.copy()
    # The 'a' tag becomes a number (0), so each arc line is four numbers starting right after a
    # newline: the parser's fast field-count path applies and line offsets stay the same.
    out[arc_starts] = ord("0")
    text, _ = blank_out_lines(out.tobytes(), lambda f: f == ord("c"), marks=b"c")
    del out
    table, lines, starts = parse_table(text, 4, path=path, first_line=body_line, expect_rows=m,
                                       what="arc", display=body)
    table = table[:, 1:]

    def line_of_row(r):
        return int(lines.line_of(starts[int(r) * 4]))

    ids = table[:, :2]
    bad = (ids < 1) | (ids > n)
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise GraphFormatError(path, f"vertex id out of range 1..{n}: {ids[r].tolist()}",
                               line=line_of_row(r))
    w = check_weights(table[:, 2], np.int32, path=path, line_of_row=line_of_row,
                      allow_negative=allow_negative)
    g = CSRGraph.from_edges(table[:, 0] - 1, table[:, 1] - 1, n, w, directed=True,
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
