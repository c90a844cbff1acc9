"""Matrix Market coordinate files (``.mtx``, ``.mtx.gz``): reader and writer.

Supported: ``%%MatrixMarket matrix coordinate {pattern|integer|real|double} {general|symmetric}``.
Vertex ids in the file are 1-based (``g.id_base == 1``). A ``symmetric`` file lists each
undirected edge once; it is expanded to both arcs and gives ``directed=False``. Repeated entries
are merged (smallest weight kept), self loops kept, so the arc count equals
``scipy.io.mmread(path).tocsr().nnz``. Values become weights: ``integer`` as int32, ``real`` as
float32; a negative, NaN or infinite value, or one beyond the weight type, is an error unless
``allow_negative=True`` (negative only). Row and column indices are integers; the declared size
is checked against the memory available before anything is allocated.
"""
from __future__ import annotations

import os
import re

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .budget import check_vertices
from .textio import Table, Text, line_head, parse_int, reader, split_header
from ._writeutil import open_text_out, write_rows
from .weights import check_weights, graph_name, one_based_ends

#: a line whose first non-blank byte is '%': in the entries, a comment out of place
_COMMENT_LINE = re.compile(rb"^[ \t\r]*%", re.MULTILINE)


@reader
def read_mtx(path, *, allow_negative: bool = False, text: Text) -> CSRGraph:
    """Read a Matrix Market coordinate file into a CSRGraph (see the module docstring);
    ``text``: the file's :class:`~.textio.Text` when the caller has read it."""
    data = text.data
    end = data.find(b"\n")
    # the banner is the file's first line: after blank lines it is missing
    banner = (data if end < 0 else data[:end]).decode("latin-1").strip() \
        if text.first_line == 1 else ""
    tokens = banner.lower().split()
    if len(tokens) != 5 or tokens[0] != "%%matrixmarket":
        raise GraphFormatError(path, "not a Matrix Market file: the first line must be "
                                     "'%%MatrixMarket matrix coordinate <field> <symmetry>', "
                                     f"got {banner[:60]!r}", line=1)
    _, obj, fmt, field, symmetry = tokens
    if obj != "matrix" or fmt != "coordinate":
        raise GraphFormatError(path, f"only 'matrix coordinate' Matrix Market files hold graphs, "
                                     f"got '{obj} {fmt}'", line=1)
    if field not in ("pattern", "integer", "real", "double"):
        raise GraphFormatError(path, f"unsupported Matrix Market field {field!r} "
                                     "(use pattern, integer or real)", line=1)
    if symmetry not in ("general", "symmetric"):
        raise GraphFormatError(path, f"unsupported Matrix Market symmetry {symmetry!r} "
                                     "(use general or symmetric)", line=1)
    header, body, body_line = split_header(text, lambda l: line_head(l) == b"%", path=path)
    if not body:
        raise GraphFormatError(path, "no size line: the file ends after its banner and comments; "
                                     "they are followed by 'rows cols entries' (three integers) "
                                     "and the entries", line=header[-1][0])
    size_text = body.split(b"\n", 1)[0]
    size_fields = size_text.split()
    sizes = [parse_int(x) for x in size_fields]
    if len(sizes) != 3 or None in sizes:
        raise GraphFormatError(path, "bad size line: expected 'rows cols entries' (three integers), "
                                     f"got {size_text.decode('latin-1').strip()[:60]!r}",
                               line=body_line)
    rows, cols, nnz = sizes
    if rows != cols:
        raise GraphFormatError(path, f"an adjacency matrix must be square, got {rows} x {cols}",
                               line=body_line)
    if rows < 0 or nnz < 0:
        raise GraphFormatError(path, "negative sizes in the size line", line=body_line)
    n = rows
    check_vertices(path, n, line=body_line)
    nl = body.find(b"\n")
    entries = b"" if nl < 0 else body[nl + 1:]
    comment = _COMMENT_LINE.search(entries) if b"%" in entries else None
    if comment is not None:         # counted as an entry, it would blame the entry after it
        line = body_line + 1 + entries.count(b"\n", 0, comment.start())
        raise GraphFormatError(path, "a comment line among the entries: Matrix Market has "
                                     "comments only before the size line", line=line)
    ncols = 2 if field == "pattern" else 3
    table = Table(entries, ncols, path=path, first_line=body_line + 1, expect_rows=nnz,
                  what="entry", names=("row index", "column index", "weight"))
    if field in ("real", "double"):
        ids, values = table.ints([0, 1]), table.floats([2])
    else:
        values = table.ints()
        ids = values[:, :2]
    src, dst = one_based_ends(ids, n, table=table, col=0)
    weights = None
    if ncols == 3:
        weights = check_weights(values[:, -1], np.int32 if field == "integer" else np.float32,
                                table=table, col=2, allow_negative=allow_negative)
    del table, ids, values
    directed = symmetry == "general"
    if not directed:
        off = src != dst
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
        if weights is not None:
            weights = np.concatenate([weights, weights[off]])
    return CSRGraph.from_edges(src, dst, n, weights, directed=directed, name=graph_name(path),
                               source=os.fspath(path), id_base=1)


def write_mtx(g: CSRGraph, path, *, symmetric: bool | None = None, comment: str = "") -> None:
    """Write ``g`` as Matrix Market coordinate (1-based; ``.gz`` compresses).

    ``symmetric`` (default: ``not g.directed``) writes each undirected edge once (lower triangle).
    Integer weights give field ``integer``, float weights ``real``, none ``pattern``.
    """
    g = g.to_host()
    symmetric = (not g.directed) if symmetric is None else symmetric
    src, dst = g.edges()
    dst = dst.astype(np.int64)
    w = g.weights
    if symmetric:
        keep = src >= dst
        src, dst = src[keep], dst[keep]
        w = None if w is None else w[keep]
    field = "pattern" if w is None else ("integer" if w.dtype.kind in "iu" else "real")
    with open_text_out(path) as f:
        f.write(f"%%MatrixMarket matrix coordinate {field} {'symmetric' if symmetric else 'general'}\n"
                .encode())
        for c in comment.splitlines():
            f.write(f"% {c}\n".encode())
        f.write(f"{g.num_vertices} {g.num_vertices} {len(src)}\n".encode())
        cols = [src + 1, dst + 1] + ([] if w is None else [w])
        fmts = ["%d", "%d"] + ([] if w is None else ["%d" if field == "integer" else "%.9g"])
        write_rows(f, cols, fmts)
