"""Checks shared by the readers: weight columns and graph names."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import GraphFormatError


def graph_name(path) -> str:
    """The file name without directory and without .gz/.mtx/.gr/.txt/... suffixes."""
    name = Path(os.fspath(path)).name
    for suffix in (".gz", ".mtx", ".gr", ".txt", ".el", ".edges", ".snap", ".tsv", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


def check_weights(values, dtype, *, path, line_of_row, allow_negative: bool = False):
    """Validate a parsed weight column and convert it to ``dtype`` (int32 or float32).

    NaN/inf, negative values (unless allowed) and integers beyond int32 are errors naming the line.
    """
    v = np.asarray(values)
    if v.dtype.kind == "f":
        bad = ~np.isfinite(v)
        if bad.any():
            r = int(np.argmax(bad))
            raise GraphFormatError(path, f"weight is not a finite number: {v[r]!r}", line=line_of_row(r))
    if not allow_negative:
        neg = v < 0
        if neg.any():
            r = int(np.argmax(neg))
            raise GraphFormatError(path, f"negative weight {v[r]}: weights must be >= 0 "
                                         "(pass allow_negative=True to keep them)", line=line_of_row(r))
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        big = (v < info.min) | (v > info.max)
        if big.any():
            r = int(np.argmax(big))
            raise GraphFormatError(path, f"weight {v[r]} does not fit in {np.dtype(dtype).name}",
                                   line=line_of_row(r))
    return v.astype(dtype)
