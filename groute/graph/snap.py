"""SNAP edge lists (``.txt``, ``.el``, ``.edges``, optionally ``.gz``).

``#`` (or ``%``) lines are comments, anywhere; a SNAP header line ``# Nodes: N Edges: E`` is
checked: the file must have exactly ``E`` edge lines. Each data line is ``<src> <dst>`` (whitespace
separated) or ``<src> <dst> <weight>``. Ids are arbitrary non-negative integers, often sparse;
they are renumbered to ``0..n-1`` in increasing id order and the original ids are kept in
``g.file_ids`` (so ``g.file_id_of(v)`` answers in the file's ids). Edge lists are taken as
directed unless ``symmetric=True``, which stores every edge in both directions. Repeated arcs
are merged (smallest weight kept); self loops are kept.
"""
from __future__ import annotations

import os
import re

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .textio import blank_out_lines, parse_table, read_bytes, split_header
from ._writeutil import open_text_out, write_rows
from .weights import check_weights, graph_name

_COMMENT = (b"#", b"%")


def read_snap(path, *, symmetric: bool = False, allow_negative: bool = False,
              data: bytes | None = None) -> CSRGraph:
    """Read a SNAP edge list into a CSRGraph (see the module docstring)."""
    data = read_bytes(path) if data is None else data
    header, body, body_line = split_header(data, lambda l: l.lstrip()[:1] in _COMMENT)
    body, _ = blank_out_lines(body, lambda f: (f == ord("#")) | (f == ord("%")), marks=b"#%")
    end = body.find(b"\n")
    first = (body if end < 0 else body[:end]).split()
    ncols = len(first) if first else 2
    if ncols not in (2, 3):
        raise GraphFormatError(path, f"an edge line must be '<src> <dst>' or '<src> <dst> <weight>', "
                                     f"found {ncols} fields", line=body_line)
    floats = ncols == 3 and any(c in first[2] for c in b".eE")
    announced = _announced_edges(header)
    table, lines, starts = parse_table(body, ncols, path=path, first_line=body_line, floats=floats,
                                       expect_rows=announced)

    def line_of_row(r):
        return int(lines.line_of(starts[int(r) * ncols]))

    ids = table[:, :2]
    if floats:
        frac = ids != np.floor(ids)
        if frac.any():
            r = int(np.argmax(frac.any(axis=1)))
            raise GraphFormatError(path, "vertex ids must be integers", line=line_of_row(r))
        ids = ids.astype(np.int64)
    neg = ids < 0
    if neg.any():
        r = int(np.argmax(neg.any(axis=1)))
        raise GraphFormatError(path, f"vertex ids must be >= 0, got {ids[r].tolist()}", line=line_of_row(r))
    weights = None
    if ncols == 3:
        weights = check_weights(table[:, 2], np.float32 if floats else np.int32, path=path,
                                line_of_row=line_of_row, allow_negative=allow_negative)
    file_ids, local = _compact_ids(ids)
    del table, ids
    n = int(file_ids.size)
    src, dst = local[:, 0], local[:, 1]
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        if weights is not None:
            weights = np.concatenate([weights, weights])
    return CSRGraph.from_edges(src, dst, n, weights, directed=not symmetric, name=graph_name(path),
                               source=os.fspath(path), file_ids=file_ids)


_COUNTS = re.compile(rb"Nodes:\s*(\d+)\s+Edges:\s*(\d+)", re.IGNORECASE)


def _announced_edges(header) -> int | None:
    """The edge count of a SNAP ``# Nodes: N Edges: E`` header line (E = number of data lines)."""
    for line in header:
        m = _COUNTS.search(line)
        if m:
            return int(m.group(2))
    return None


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
    """Write ``g`` as a SNAP edge list, every stored arc once (``file_ids`` writes the file's ids)."""
    g = g.to_host()
    src, dst = g.edges()
    dst = dst.astype(np.int64)
    if file_ids:
        src, dst = g.file_id_of(src), g.file_id_of(dst)
    with open_text_out(path) as f:
        f.write(f"# {'Directed' if g.directed else 'Undirected'} graph: {g.name}\n".encode())
        for c in comment.splitlines():
            f.write(f"# {c}\n".encode())
        f.write(f"# Nodes: {g.num_vertices} Edges: {g.num_edges}\n# FromNodeId\tToNodeId\n".encode())
        cols = [src, dst] + ([] if g.weights is None else [g.weights])
        fmts = ["%d", "%d"] + ([] if g.weights is None else
                               ["%d" if g.weights.dtype.kind in "iu" else "%.9g"])
        write_rows(f, cols, fmts, sep="\t")
