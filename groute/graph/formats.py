"""Which reader a file needs, by name or, failing that, by content; and the one read entry point.

``GraphFormatError`` is re-exported here as the issue asks (it is defined in :mod:`.errors`).
"""
from __future__ import annotations

import os

from .csr import CSRGraph
from .delimited import read_delimited
from .dimacs import read_dimacs, write_dimacs
from .errors import GraphFormatError
from .mtx import read_mtx, write_mtx
from .snap import read_snap, write_snap
from .textio import Text, read_text

__all__ = ["GraphFormatError", "detect_format", "read_graph", "write_graph", "FORMATS"]

#: format name -> file name endings (without a trailing .gz)
FORMATS = {
    "mtx": (".mtx", ".mm"),
    "dimacs": (".gr",),
    "snap": (".txt", ".el", ".edges", ".snap"),
    "csv": (".csv", ".tsv"),
}


def detect_format(path, text: Text | None = None) -> str:
    """``"mtx"``, ``"dimacs"``, ``"snap"`` or ``"csv"`` from the file name, else by sniffing the
    first line (Matrix Market banner, DIMACS ``c``/``p`` lines, else an edge list: CSV when it
    holds a comma, SNAP otherwise)."""
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for fmt, endings in FORMATS.items():
        if name.endswith(endings):
            return fmt
    if text is None:
        text = read_text(path)
    return _sniff(path, text.data[:4096])


def _sniff(path, head: bytes) -> str:
    first = head.lstrip()[:16].lower()
    if first.startswith(b"%%matrixmarket"):
        return "mtx"
    for line in head.splitlines():
        s = line.strip()
        if not s:
            continue
        if s[:1] == b"p" or s[:2] == b"c ":
            return "dimacs"
        if s[:1] in (b"#", b"%"):
            continue
        return "csv" if b"," in s else "snap"
    return "snap"


def read_graph(path, *, format: str | None = None, symmetric: bool = False,
               allow_negative: bool = False, columns=None, header: bool | None = None) -> CSRGraph:
    """Parse a graph file (no cache; see :func:`groute.graph.load_graph` for the cached path).

    ``symmetric`` stores edge lists in both directions (Matrix Market says its own symmetry and
    DIMACS is detected). ``columns``: the source, target and optional weight columns of an edge
    list (CSV/TSV: positions or header names; SNAP: positions). ``header``: whether a CSV/TSV
    file's first data line is a header row (None: decided by its fields, see :mod:`.delimited`).
    """
    text = read_text(path)
    fmt = format or detect_format(path, text)
    if columns is not None and fmt not in ("snap", "csv"):
        raise ValueError(f"columns= applies to edge lists (CSV, TSV, SNAP), not {fmt} files")
    if header is not None and fmt != "csv":
        raise ValueError(f"header= applies to CSV and TSV files, not {fmt} files")
    if fmt == "mtx":
        g = read_mtx(path, allow_negative=allow_negative, text=text)
    elif fmt == "dimacs":
        g = read_dimacs(path, allow_negative=allow_negative, text=text)
    elif fmt == "snap":
        g = read_snap(path, symmetric=symmetric, allow_negative=allow_negative, columns=columns,
                      text=text)
    elif fmt == "csv":
        g = read_delimited(path, symmetric=symmetric, allow_negative=allow_negative,
                           columns=columns, header=header, text=text)
    else:
        raise ValueError(f"unknown graph format {fmt!r}: use one of {sorted(FORMATS)}")
    if symmetric and g.directed:
        g = g.symmetrize()
    return g


def write_graph(g: CSRGraph, path, *, format: str | None = None) -> None:
    """Write ``g`` in the format the file name asks for (or ``format``)."""
    fmt = format or detect_format(path, Text(b""))
    if fmt == "csv":
        raise ValueError("write_graph writes .mtx, .gr and SNAP edge lists (.txt/.el/.edges), "
                         f"not CSV: {os.fspath(path)}")
    {"mtx": write_mtx, "dimacs": write_dimacs, "snap": write_snap}[fmt](g, path)
