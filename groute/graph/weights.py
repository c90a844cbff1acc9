"""Checks shared by the readers: weight columns, 1-based vertex ids and graph names."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .csr import PAST_FLOAT32, unstorable_weight
from .errors import GraphFormatError, NegativeWeightError


def graph_name(path) -> str:
    """The file name without directory and without .gz/.mtx/.gr/.txt/... suffixes."""
    name = Path(os.fspath(path)).name
    for suffix in (".gz", ".mtx", ".gr", ".txt", ".el", ".edges", ".snap", ".tsv", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


def check_weights(values, dtype, *, table, col: int, allow_negative: bool = False):
    """Validate column ``col`` of ``table`` (a :class:`~.textio.Table`), parsed as ``values``,
    and convert it to ``dtype`` (int32 or float32).

    NaN, infinity, negative values (unless allowed) and values that ``dtype`` cannot hold
    (:func:`~groute.graph.csr.unstorable_weight`: an integer beyond int32, a real beyond
    float32's range, which would become infinity, a nonzero real that would become 0) are
    errors naming the line and quoting the file's text.
    """
    v = np.asarray(values)
    path = table.path

    def fail(r, message):
        raise GraphFormatError(path, message, line=table.line_of_row(r))

    if v.dtype.kind == "f":
        nan = np.isnan(v)
        if nan.any():
            r = int(np.argmax(nan))
            fail(r, f"weight is NaN: {table.field(r, col)!r}")
        inf = np.isinf(v)
        if inf.any():
            r = int(np.argmax(inf))
            text = table.field(r, col)
            if text.lstrip("+-")[:1].lower() == "i":
                fail(r, f"weight is infinite: {text!r}")
            fail(r, f"weight {text} {PAST_FLOAT32}")      # parsed as inf: 1e400
    if not allow_negative:
        neg = v < 0
        if neg.any():
            r = int(np.argmax(neg))
            raise NegativeWeightError(path, table.field(r, col), line=table.line_of_row(r))
    if (v.dtype.kind == "f") != (np.dtype(dtype).kind == "f"):
        raise TypeError(f"check_weights: {v.dtype} values for {np.dtype(dtype).name} weights")
    with np.errstate(over="ignore"):           # what overflows is refused just below
        out = v.astype(dtype)
    bad = unstorable_weight(v, stored=out if out.dtype.kind == "f" else None)
    if bad is not None:
        r, why = bad
        fail(r, f"weight {table.field(r, col)} {why}")
    return out


def one_based_ends(ids, n: int, *, table, col: int):
    """The arcs' ends ``(src, dst)``, 0-based, from ``ids``: the columns ``col`` and ``col + 1``
    of ``table`` (a :class:`~.textio.Table`) parsed, each a vertex id in ``1..n`` (DIMACS and
    Matrix Market number the vertices from 1). An id outside is an error naming its line and
    quoting both ids as the file has them."""
    bad = (ids < 1) | (ids > n)
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise GraphFormatError(table.path, f"vertex id out of range 1..{n}: "
                                           f"{table.field(r, col)} {table.field(r, col + 1)}",
                               line=table.line_of_row(r))
    return ids[:, 0] - 1, ids[:, 1] - 1
