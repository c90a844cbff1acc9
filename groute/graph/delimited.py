"""CSV and TSV edge lists (``.csv``, ``.tsv``, optionally ``.gz``).

The delimiter is sniffed from the first data line: a comma, else a tab, else any whitespace. A
first line with a field that is not a number is a header row (``src,dst,weight``) and names the
columns. ``#`` and ``%`` lines are comments, and a line of
blanks is blank (a TSV file's too). ``columns`` picks the source, target and optional
weight column, by 0-based position or by header name (``columns=("from", "to", "cost")``); by
default a file of two columns is unweighted and one of three has weights in the third, and a
wider file must say. Ids and weights follow the SNAP reader's rules (:mod:`.snap`): non-negative
integer ids renumbered in increasing order and kept in ``g.file_ids``; int32 weights when all are
integers, else float32. Fields are numbers without quotes or embedded blanks; an empty field is
an error naming its line.
"""
from __future__ import annotations

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .snap import column_names, edge_list_graph, resolve_columns
from .textio import (BLANKS, Table, Text, blank_comment_lines, first_data_line, is_number,
                     line_head, reader, split_header)


def sniff_delimiter(line: bytes) -> bytes | None:
    """``b","``, ``b"\\t"`` or None (any whitespace) for a data line."""
    for d in (b",", b"\t"):
        if d in line:
            return d
    return None


def empty_field_at(body: bytes, delim: bytes) -> int | None:
    """The offset in ``body`` of the first delimiter next to an empty field (a ``delim`` at the
    start or end of a line or next to another, blanks aside), or None. The tokenizer reads a
    delimiter as a blank, so without this check ``1,,2`` would be read as the edge 1 -> 2. A
    line of nothing but blanks and tab delimiters is a blank line, not empty fields."""
    if delim not in body:
        return None
    buf = np.frombuffer(body, dtype=np.uint8)
    blank = (buf <= 32) & (buf != 10) & (buf != delim[0])
    where = np.flatnonzero(~blank)                       # every byte but blanks, newlines kept
    sig = buf[where]
    d = sig == delim[0]
    edge = d | (sig == 10)                               # a field ends at a delimiter or a newline
    bad = np.zeros(sig.size, dtype=bool)
    bad[1:] = d[1:] & edge[:-1]                          # after a delimiter or a line's start
    bad[:-1] |= d[:-1] & (sig[1:] == 10)                 # before a line's end
    if sig.size:
        bad[0] |= d[0]
        bad[-1] |= d[-1]
    if delim[0] <= 32 and bad.any():                     # a tab: lines of blanks are blank
        bad &= ~_on_blank_lines(sig, d)
    if not bad.any():
        return None
    return int(where[int(np.argmax(bad))])


def _on_blank_lines(sig, d):
    """Per byte of ``sig`` (a text's newlines, delimiters ``d`` and other bytes), whether it is
    a delimiter on a line with nothing else."""
    idx = np.arange(sig.size)
    other = ~d
    before = np.maximum.accumulate(np.where(other, idx, -1))
    after = np.minimum.accumulate(np.where(other, idx, sig.size)[::-1])[::-1]
    ends = np.append(sig == 10, True)                     # sig.size: the text's end
    return d & ((before < 0) | (sig[np.maximum(before, 0)] == 10)) & ends[after]


#: how messages name each delimiter (None: spaces)
DELIMITER_NAMES = {b",": "a comma", b"\t": "a tab", None: "spaces"}


@reader
def read_delimited(path, *, columns=None, symmetric: bool = False, allow_negative: bool = False,
                   text: Text) -> CSRGraph:
    """Read a CSV/TSV edge list into a CSRGraph (see the module docstring); ``text``: the
    file's :class:`~.textio.Text` when the caller has read it."""
    _, body, body_line = split_header(text, lambda l: line_head(l) in (b"#", b"%"), path=path)
    body = blank_comment_lines(body, b"#%")
    end = body.find(b"\n")
    first = (body if end < 0 else body[:end]).rstrip(b"\r")
    delim = sniff_delimiter(first)
    fields = [f.strip(BLANKS) for f in (first.split(delim) if delim else first.split())]
    names = None
    if fields and not all(is_number(f) for f in fields):
        names = [f.decode("latin-1") for f in fields]
        if any(not n for n in names):
            raise GraphFormatError(path, f"empty column name in the header row {first.decode('latin-1')[:60]!r}",
                                   line=body_line)
        blanked = b" " * len(first) + body[len(first):]
        body = blanked
    shown = body
    if delim is not None:
        at = empty_field_at(body, delim)
        if at is not None:
            begin, end = body.rfind(b"\n", 0, at) + 1, body.find(b"\n", at)
            line = body[begin:len(body) if end < 0 else end].decode("latin-1").strip()
            raise GraphFormatError(path, f"empty field in {line[:60]!r}: every field must hold "
                                         f"a number", line=body_line + body.count(b"\n", 0, at))
    parsed = body.replace(delim, b" ") if delim and delim != b"\t" else body
    ncols = len(names) if names else len(first_data_line(parsed)) or 2
    cols = resolve_columns(path, columns, ncols, names, line=body_line)
    table = Table(parsed, ncols, path=path, first_line=body_line,
                  names=column_names(ncols, cols, names), display=shown)
    del body, text, parsed, shown
    return edge_list_graph(table, cols, symmetric=symmetric, allow_negative=allow_negative)
