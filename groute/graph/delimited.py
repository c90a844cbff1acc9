"""CSV and TSV edge lists (``.csv``, ``.tsv``, optionally ``.gz``).

The delimiter is sniffed from the first data line: a comma, else a tab, else spaces; every line
separates its fields with that one delimiter (blanks around a comma or a tab are allowed), and a
line that separates two fields otherwise (``3 4`` or ``3\t4`` in a file of commas) is an error
naming it. ``#`` and ``%`` lines are comments, and a line of blanks is blank (a TSV file's too).

The first data line is a header row (``src,dst,weight``), naming the columns, when one of its
fields is not a number, unless the file has a weight column and this line's weight is a number
(``A,B,3`` is an edge between the ids ``A`` and ``B``); ``header=True`` or ``False`` says so
instead, which a file of two columns of text ids without a header row needs (its first line
``A,B`` cannot be told from a header ``src,dst``). ``columns`` picks the source, target and
optional weight column, by 0-based position or by header name (``columns=("from", "to",
"cost")``); by default a file of two columns is unweighted and one of three has weights in the
third, and a wider file must say.

Ids and weights follow the SNAP reader's rules (:mod:`.snap`): integer ids renumbered in
increasing order, or text ids (:mod:`.text_ids`) when some id is not an integer, kept in
``g.file_ids``; int32 weights when all are integers, else float32. Fields are unquoted and
hold no blanks; an empty field is an error naming its line.
"""
from __future__ import annotations

import logging

import numpy as np

from .csr import CSRGraph
from .errors import GraphFormatError
from .snap import column_names, edge_list_graph, resolve_columns
from .textio import (BLANKS, Table, Text, blank_comment_lines, first_data_line, is_number,
                     line_head, reader, split_header)

log = logging.getLogger(__name__)


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


def check_one_delimiter(table: Table, body: bytes, delim: bytes | None, line: int) -> None:
    """Raise GraphFormatError naming the first line of ``table`` (read from ``body``, a
    delimited file's data, the header row blanked, whose first line is the file's ``line``)
    that separates two of its fields otherwise than by ``delim``, the delimiter sniffed from
    the first data line: a comma or a tab with blanks around it, or spaces without a tab
    (None). Whole-array passes; the usual file (one delimiter between each two fields of a
    row) costs one comparison per delimiter. (A comma where the delimiter is not one is found
    before the table is made: :func:`check_no_comma`.)"""
    rows, ncols = table.rows, table.ncols
    if not rows or ncols < 2:
        return
    buf = np.frombuffer(body, dtype=np.uint8)
    starts = table.starts[:rows * ncols].reshape(rows, ncols)
    if delim is None:
        if b"\t" not in body:
            return
        at = np.flatnonzero(buf == 9)
        inside = _separator_of(starts, at) >= 0
        if inside.any():
            _raise_other_delimiter(table.path, body, int(at[np.argmax(inside)]), delim, line)
        return
    at = np.flatnonzero(buf == delim[0])
    if at.size == rows * (ncols - 1):                  # the usual file: one in each gap
        between = at.reshape(rows, ncols - 1)
        if ((starts[:, :-1] < between) & (between < starts[:, 1:])).all():
            return
    gaps = _separator_of(starts, at)
    count = np.bincount(gaps[gaps >= 0], minlength=rows * (ncols - 1))
    if (count == 1).all():
        return
    r, c = divmod(int(np.argmax(count != 1)), ncols - 1)
    _raise_other_delimiter(table.path, body, int(starts[r, c + 1]) - 1, delim, line)


def check_no_comma(path, body: bytes, delim: bytes | None, line: int) -> None:
    """Raise GraphFormatError naming the first line of ``body`` (as
    :func:`check_one_delimiter`) with a comma, where the delimiter is not one."""
    if delim != b"," and b"," in body:
        _raise_other_delimiter(path, body, body.find(b","), delim, line)


def _separator_of(starts, at):
    """Per byte offset of ``at``, the number of the gap between two fields of one row it lies
    in (row-major over the ``rows * (ncols - 1)`` gaps), or -1 (before a row, after it, on a
    line of its own). ``starts``: the fields' offsets, ``(rows, ncols)``."""
    ncols = starts.shape[1]
    before = np.searchsorted(starts.ravel(), at, side="right") - 1    # the field it follows
    r, c = np.divmod(before, ncols)
    return np.where((before >= 0) & (c < ncols - 1), r * (ncols - 1) + c, -1)


#: how messages name each delimiter (None: spaces)
DELIMITER_NAMES = {b",": "a comma", b"\t": "a tab", None: "spaces"}
#: the bytes between two fields: blanks and commas
_SEPARATING = frozenset(range(33)) | {ord(",")}


def _raise_other_delimiter(path, body, at, delim, line):
    """The error for the separator around byte ``at`` of ``body``, which is not ``delim``."""
    begin, end = body.rfind(b"\n", 0, at) + 1, body.find(b"\n", at)
    end = len(body) if end < 0 else end
    lo, hi = at, at + 1
    while lo > begin and body[lo - 1] in _SEPARATING:
        lo -= 1
    while hi < end and body[hi] in _SEPARATING:
        hi += 1
    gap = body[lo:hi]
    found = "a comma" if b"," in gap else "a tab" if b"\t" in gap else "spaces"
    shown = body[begin:end].decode("latin-1").strip()
    raise GraphFormatError(
        path, f"fields separated by {found} in {shown[:60]!r}, but this file's delimiter is "
              f"{DELIMITER_NAMES[delim]} (from its first data line): a delimited file uses "
              f"one delimiter", line=line + body.count(b"\n", 0, at))


def is_header_row(fields: list[bytes], columns, header: bool | None) -> bool:
    """Whether the first data line, split into ``fields``, names the columns (see the module
    docstring): ``header`` when it is given, else when a field is not a number, unless the
    file has a weight column (three columns, or a third in ``columns``) and this line's field
    there is a number: then it is an edge whose ids are text."""
    if header is not None:
        return bool(header) and bool(fields)
    if columns is not None and any(isinstance(c, str) for c in columns):
        return True
    if not fields or all(is_number(f) for f in fields):
        return False
    cols = list(columns) if columns is not None else range(len(fields))
    weight = cols[2] if len(cols) == 3 else None
    return not (isinstance(weight, (int, np.integer)) and 0 <= weight < len(fields)
                and is_number(fields[weight]))


@reader
def read_delimited(path, *, columns=None, symmetric: bool = False, allow_negative: bool = False,
                   header: bool | None = None, text: Text) -> CSRGraph:
    """Read a CSV/TSV edge list into a CSRGraph (see the module docstring).

    Parameters
    ----------
    path : str or path-like
        The file (optionally gzip-compressed).
    columns : sequence of int or str, optional
        The source, target and optional weight columns, by 0-based position or header name.
    symmetric : bool
        Store every edge in both directions (an undirected graph).
    allow_negative : bool
        Keep negative weights.
    header : bool, optional
        Whether the first data line names the columns; None decides by its fields
        (:func:`is_header_row`).
    text : Text, optional
        The file's :class:`~.textio.Text` when the caller has read it.

    Returns
    -------
    CSRGraph
        With the file's ids in ``file_ids``: integers, or ``str`` when some id is not one.

    Raises
    ------
    GraphFormatError
        Naming the file and line of what is malformed.
    ValueError
        For ``columns`` named by header names with ``header=False``.

    Examples
    --------
    >>> g = read_delimited("trips.csv", columns=("from", "to", "cost"))   # doctest: +SKIP
    """
    if header is False and columns is not None and any(isinstance(c, str) for c in columns):
        raise ValueError(f"columns={tuple(columns)!r} names header columns, but header=False "
                         "says the file has no header row: give 0-based positions")
    _, body, body_line = split_header(text, lambda l: line_head(l) in (b"#", b"%"), path=path)
    body = blank_comment_lines(body, b"#%")
    end = body.find(b"\n")
    first = (body if end < 0 else body[:end]).rstrip(b"\r")
    delim = sniff_delimiter(first)
    fields = [f.strip(BLANKS) for f in (first.split(delim) if delim else first.split())]
    names = None
    if is_header_row(fields, columns, header):
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
                                         f"a value", line=body_line + body.count(b"\n", 0, at))
    check_no_comma(path, body, delim, body_line)
    parsed = body.replace(delim, b" ") if delim and delim != b"\t" else body
    ncols = len(names) if names else len(first_data_line(parsed)) or 2
    cols = resolve_columns(path, columns, ncols, names, line=body_line)
    table = Table(parsed, ncols, path=path, first_line=body_line,
                  names=column_names(ncols, cols, names), display=shown)
    check_one_delimiter(table, body, delim, body_line)
    del body, text, parsed, shown
    g = edge_list_graph(table, cols, symmetric=symmetric, allow_negative=allow_negative)
    if names is not None and header is None and len(cols) == 2 and g.file_ids is not None \
            and g.file_ids.dtype == object:
        log.info("%s: its first line %r is read as a header row (the ids are text, so it "
                 "could be an edge: header=False reads it as one)", path,
                 first.decode("latin-1")[:60])
    return g
