"""SNAP edge lists (``.txt``, ``.el``, ``.edges``, ``.snap``, optionally ``.gz``).

``#`` (or ``%``) lines are comments, anywhere and indented or not. Each data line is
``<src> <dst>`` (whitespace separated) or ``<src> <dst> <weight>``. When every id is an
integer, ids are arbitrary non-negative 64-bit integers, often sparse; they are renumbered to
``0..n-1`` in increasing id order and the original ids are kept in ``g.file_ids`` (so
``g.file_id_of(v)`` answers in the file's ids). When some id is not an integer (``A``, ``1.5``),
every id is its text (``str``, ``"7"`` too), numbered in the order the file first names them
(:mod:`.text_ids`), as NetworkX's ``read_edgelist`` does. Weights are numbers: int32 when every
weight is written as an integer, else float32. Repeated arcs are merged (smallest weight kept);
self loops are kept.

SNAP's header comments are honoured: ``# Undirected graph ...`` stores every edge in both
directions (as ``symmetric=True`` does); ``# Nodes: N Edges: E`` is checked (exactly ``E`` edge
lines, at most ``N`` distinct ids) and, when every id is an integer below ``N``, the graph has
the vertices ``0..N-1``, so vertices in no edge (isolated) are kept. Otherwise edge lists are
directed and hold the vertices that occur.
"""
from __future__ import annotations

import logging
import os
import re

import numpy as np

from ..ints import is_int

from .budget import check_vertices
from .csr import CSRGraph
from .errors import GraphFormatError
from .text_ids import text_ids
from .textio import (Table, Text, blank_comment_lines, first_data_line, line_head, reader,
                     split_header)
from ._writeutil import open_text_out, write_rows
from .weights import check_weights, graph_name

log = logging.getLogger(__name__)

_COMMENT = (b"#", b"%")
#: a text id the reader reads back as itself: no blanks nor control characters, and not a
#: comment's start
_TEXT_ID = re.compile(r"[^\x00-\x20\x7f#%][^\x00-\x20\x7f]*")
EDGE_NAMES = ("source id", "target id", "weight")


@reader
def read_snap(path, *, symmetric: bool = False, allow_negative: bool = False, columns=None,
              text: Text) -> CSRGraph:
    """Read a SNAP edge list into a CSRGraph (see the module docstring). ``columns``: the
    0-based source, target and optional weight columns of a wider file (``(0, 1, 3)``);
    ``text``: the file's :class:`~.textio.Text` when the caller has read it."""
    header, body, body_line = split_header(text, lambda l: line_head(l) in _COMMENT, path=path)
    head = parse_header(path, header)
    body = blank_comment_lines(body, b"#%")
    ncols = len(first_data_line(body)) or 2
    cols = resolve_columns(path, columns, ncols, None, line=body_line) if columns is not None \
        else range(ncols)
    if columns is None and ncols not in (2, 3):
        first = first_data_line(body)
        raise GraphFormatError(path, f"an edge line must be '<src> <dst>' or '<src> <dst> <weight>', "
                                     f"found {ncols} fields: {b' '.join(first).decode('latin-1')[:60]!r}",
                               line=body_line + body[:body.find(first[0])].count(b"\n"))
    table = Table(body, ncols, path=path, first_line=body_line, expect_rows=head.edges,
                  names=column_names(ncols, cols, None))
    del text, body
    return edge_list_graph(table, cols, symmetric=symmetric or head.undirected,
                           allow_negative=allow_negative, nodes=head.nodes, nodes_line=head.nodes_line)


def resolve_columns(path, columns, ncols: int, names, *, line: int) -> list[int]:
    """0-based ``[source, target]`` or ``[source, target, weight]`` column positions.

    ``columns`` holds positions or header ``names`` (case-insensitive); None picks the two or
    three columns of a file that has exactly that many.
    """
    shown = f"columns {names}" if names else f"{ncols} columns"
    if columns is None:
        if ncols in (2, 3):
            return list(range(ncols))
        raise GraphFormatError(path, f"the file has {shown}: say which hold the source, the "
                                     "target and the weight (columns=(source, target[, weight]))",
                               line=line)
    cols = list(columns)
    if len(cols) not in (2, 3):
        raise ValueError(f"columns must name 2 or 3 columns (source, target[, weight]), got {columns!r}")
    out = []
    lower = [n.lower() for n in names] if names else None
    for c in cols:
        if isinstance(c, str):
            if lower is None or c.lower() not in lower:
                raise GraphFormatError(path, f"no column named {c!r}: the file has {shown}", line=line)
            out.append(lower.index(c.lower()))
        elif isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < ncols:
            out.append(int(c))
        else:
            raise GraphFormatError(path, f"column {c!r} is not one of the file's {shown} "
                                         "(0-based positions or header names)", line=line)
    if len(set(out)) != len(out):
        raise ValueError(f"columns must be distinct, got {columns!r}")
    return out


def column_names(ncols: int, cols, names) -> list[str]:
    """Names of a table's columns for messages: the role of each chosen one ("weight"), with
    the header's name of it where there is a header."""
    out = list(names) if names else [f"column {i}" for i in range(ncols)]
    for role, c in zip(EDGE_NAMES, cols):
        out[c] = f"{role} ({out[c]})" if names else role
    return out


class Header:
    """What a SNAP comment header says: ``undirected``, ``nodes``/``edges`` counts (or None)."""

    def __init__(self):
        self.undirected = False
        self.nodes = self.edges = self.nodes_line = None


_COUNTS = re.compile(rb"Nodes:\s*(\d+)\s+Edges:\s*(\d+)", re.IGNORECASE)
_UNDIRECTED = re.compile(rb"^\s*[#%]\s*undirected\b", re.IGNORECASE)


def parse_header(path, header_lines) -> Header:
    """Read the ``# Undirected`` and ``# Nodes: N Edges: E`` lines of a SNAP header
    (``(line number, line)`` pairs)."""
    h = Header()
    for number, line in header_lines:
        if _UNDIRECTED.match(line):
            h.undirected = True
        m = _COUNTS.search(line)
        if m and h.edges is None:
            h.nodes, h.edges, h.nodes_line = int(m.group(1)), int(m.group(2)), number
    if h.nodes is not None:
        check_vertices(path, h.nodes, line=h.nodes_line, what="announces")
    return h


def edge_list_graph(table: Table, cols, *, symmetric: bool, allow_negative: bool,
                    nodes: int | None = None, nodes_line: int | None = None) -> CSRGraph:
    """The graph of an edge-list table: columns ``cols`` are source id, target id and, if
    there is a third, the weight. Shared by the SNAP and CSV readers. Ids are integers when
    every id field is one, else text (:mod:`.text_ids`)."""
    path = table.path
    cols = list(cols)
    ids, weights = _ids_and_weights(table, cols, allow_negative)
    if ids is None:
        file_ids, local = text_ids(table, cols)
    elif ids.size and ids.min() < 0:
        neg = ids < 0
        r = int(np.argmax(neg.any(axis=1)))
        c = cols[int(np.argmax(neg[r]))]
        raise GraphFormatError(path, f"vertex ids must be >= 0, got {table.field(r, c)}",
                               line=table.line_of_row(r))
    else:
        file_ids, local = _compact_ids(ids)
    table.free()
    del ids
    if nodes is not None:
        file_ids, local = _announced_vertices(path, file_ids, local, nodes, nodes_line)
    n = int(file_ids.size)
    src, dst = local[:, 0], local[:, 1]
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        if weights is not None:
            weights = np.concatenate([weights, weights])
    return CSRGraph.from_edges(src, dst, n, weights, directed=not symmetric, name=graph_name(path),
                               source=os.fspath(path), file_ids=file_ids)


def _ids_and_weights(table: Table, cols, allow_negative):
    """Exact int64 ids, or None when some id field is not an integer (the ids are text);
    weights int32 when all are integers, else float32 (ids stay exact)."""
    values = table.try_ints(cols)
    if len(cols) == 2:
        return values, None
    if values is not None:
        ids, w, dtype = values[:, :2], values[:, 2], np.int32
    else:
        ids = table.try_ints(cols[:2])
        w = None if ids is not None else table.try_ints(cols[2:])   # int ids: real weights
        w, dtype = (w[:, 0], np.int32) if w is not None else (table.floats(cols[2:])[:, 0],
                                                              np.float32)
    return ids, check_weights(w, dtype, table=table, col=cols[2], allow_negative=allow_negative)


def _announced_vertices(path, file_ids, local, nodes, line):
    """Apply a header's vertex count: integer ids all below it make the vertices ``0..nodes-1``."""
    if file_ids.size > nodes:
        raise GraphFormatError(path, f"the header announces {nodes} nodes but the edges name "
                                     f"{file_ids.size} distinct vertices", line=line)
    if file_ids.size == nodes:
        return file_ids, local
    if file_ids.dtype.kind == "i" and (file_ids.size == 0 or int(file_ids[-1]) < nodes):
        return np.arange(nodes, dtype=np.int64), file_ids[local]
    log.info("%s: the header announces %d nodes, the edges name %d%s; the vertices in no edge "
             "cannot be placed and are left out", path, nodes, file_ids.size,
             f" with ids up to {int(file_ids[-1])}" if file_ids.dtype.kind == "i" else
             " (text ids)")
    return file_ids, local


def _compact_ids(ids):
    """Sorted distinct ids and each id's rank: a presence bitmap when ids are dense enough, else a sort."""
    if ids.size == 0:
        return np.zeros(0, np.int64), ids.astype(np.int64)
    top = int(ids.max())
    if top < 8 * ids.size + 1024:
        present = np.zeros(top + 1, dtype=bool)
        present[ids.ravel()] = True
        file_ids = np.flatnonzero(present).astype(np.int64)
        rank = np.cumsum(present, dtype=np.int64) - 1
        return file_ids, rank[ids]
    flat = ids.ravel()
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    first = np.ones(s.size, dtype=bool)
    first[1:] = s[1:] != s[:-1]
    inverse = np.empty(s.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return s[first].astype(np.int64), inverse.reshape(ids.shape)


def write_snap(g: CSRGraph, path, *, file_ids: bool = True, comment: str = "") -> None:
    """Write ``g`` as a SNAP edge list, every stored arc once (``file_ids`` writes the graph's
    own ids: integers, or text ids as their text; ValueError for other labels, or text with
    blanks, which would not read back).

    The header says ``Directed``/``Undirected`` and ``# Nodes: N Edges: E``, which the reader
    honours, so a graph whose vertex ids are ``0..N-1`` comes back with its isolated vertices.
    """
    g = g.to_host()
    src, dst = g.edges()
    dst = dst.astype(np.int64)
    if file_ids:
        if g.file_ids is not None and g.file_ids.dtype == object:
            bad = next((x for x in g.file_ids.tolist()
                        if not isinstance(x, str) or not _TEXT_ID.fullmatch(x)), None)
            if bad is not None:
                what = ("an integer id past int64 or beside text ids" if is_int(bad) else
                        "the id")
                raise ValueError(f"write_snap writes integer (int64) or text ids without "
                                 f"blanks, and {g.name or 'the graph'} has {what} {bad!r}: "
                                 f"pass file_ids=False to write positions")
        src, dst = g.file_id_of(src), g.file_id_of(dst)
    with open_text_out(path) as f:
        f.write(f"# {'Directed' if g.directed else 'Undirected'} graph: {g.name}\n".encode())
        for c in comment.splitlines():
            f.write(f"# {c}\n".encode())
        f.write(f"# Nodes: {g.num_vertices} Edges: {g.num_edges}\n# FromNodeId\tToNodeId\n".encode())
        cols = [src, dst] + ([] if g.weights is None else [g.weights])
        fid = "%d" if np.asarray(src).dtype.kind in "iu" else "%s"      # text ids as written
        fmts = [fid, fid] + ([] if g.weights is None else
                             ["%d" if g.weights.dtype.kind in "iu" else "%.9g"])
        write_rows(f, cols, fmts, sep="\t")
