"""Vertex ids as text: the ids of an edge list whose id fields are not all integers.

The edge-list readers (:mod:`.snap`, :mod:`.delimited`) parse their id columns as integers
when every field there is one: the fast path, and the big files. Otherwise every id is its
field's text (``"A"``, ``"1.5"``, and ``"7"`` as well in a file that also names ``"A"``),
decoded as UTF-8, and :func:`text_ids` numbers the distinct ids in the order the file first
names them, row by row and the source before the target. That is the order in which NetworkX's
``read_edgelist`` adds the nodes, so a file read here and the graph ``read_edgelist`` makes of
it (through :func:`~groute.graph.as_graph`, which keeps ``G.nodes``' order) have the same
positions, ``g.ids`` and results in the same order.

The fields are grouped by length; each group is cut out of the text buffer as fixed-width rows
and numbered by one sort of integer keys packed from their bytes (:func:`_distinct_fields`), so
the work is whole-array passes over the id fields' bytes; Python runs once per distinct length
and NumPy makes one ``str`` per distinct id, never a step per line.
"""
from __future__ import annotations

import numpy as np

from .errors import GraphFormatError
from .textio import Table


def text_ids(table: Table, cols) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ids of the id columns of an edge list, as text, in first-appearance order.

    Parameters
    ----------
    table : Table
        The edge list's rows, checked for their field count.
    cols : sequence of int
        The source and target columns.

    Returns
    -------
    labels : numpy.ndarray
        Object array of ``str``, every distinct id once, in the order the rows first name them.
    local : numpy.ndarray
        ``(rows, 2)`` int64: each row's source and target as positions in ``labels``.

    Raises
    ------
    GraphFormatError
        Naming the first line with a control byte, or an id that is not UTF-8 text.

    Examples
    --------
    A file ``b a`` / ``a c`` gives ``labels == ["b", "a", "c"]`` and ``local == [[0, 1],
    [1, 2]]``.
    """
    table.check_no_control()        # the tokenizer reads control bytes as blanks
    cols = list(cols)[:2]
    rows, ncols = table.rows, table.ncols
    n = rows * ncols
    begins = table.starts[:n].reshape(rows, ncols)[:, cols].ravel()   # src, dst, src, dst...
    lengths = table.ends[:n].reshape(rows, ncols)[:, cols].ravel() - begins
    code = np.empty(begins.size, dtype=np.int64)      # each field's distinct id, grouped
    firsts, labels, bad = [], [], []
    by_length = np.argsort(lengths, kind="stable")
    cuts = np.flatnonzero(np.diff(lengths[by_length])) + 1
    found = 0
    for group in np.split(by_length, cuts):
        if not group.size:
            continue
        width = int(lengths[group[0]])
        fields = np.lib.stride_tricks.sliding_window_view(table.buf, width)[begins[group]]
        first, inverse = _distinct_fields(fields)
        code[group] = found + inverse
        found += first.size
        firsts.append(group[first])
        text, undecodable = _decoded(fields[first].view(f"S{width}").ravel())
        labels.append(text)
        bad.extend(int(group[first[i]]) for i in undecodable)
    if bad:
        _raise_not_utf8(table, cols, begins, lengths, min(bad))
    if not firsts:
        return np.empty(0, dtype=object), np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(np.concatenate(firsts))       # distinct ids by first appearance
    rank = np.empty(found, dtype=np.int64)
    rank[order] = np.arange(found, dtype=np.int64)
    return np.concatenate(labels)[order], rank[code].reshape(rows, 2)


#: an odd 64-bit constant (2^64 / golden ratio) mixing the words of a field into one key
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _distinct_fields(fields: np.ndarray):
    """``(first, inverse)`` of the ``(k, width)`` byte rows ``fields``: the index of the first
    row of each distinct value, in no particular order, and each row's distinct value. The
    rows are packed into 64-bit words and the words mixed into one integer key (exact for up to
    8 bytes), because sorting integers is several times faster than sorting byte strings; a
    longer field's key is checked against the field itself, and a collision sorts the byte
    strings instead."""
    k, width = fields.shape
    words = -(-width // 8)
    packed = np.zeros((k, words * 8), dtype=np.uint8)
    packed[:, :width] = fields
    w = packed.view(np.uint64)
    key = w[:, 0].copy()
    for j in range(1, words):
        key = (key ^ (key >> np.uint64(29))) * _MIX + w[:, j]
    first, inverse = _distinct(key)
    if words > 1 and not np.array_equal(w, w[first][inverse]):
        first, inverse = _distinct(packed.view(f"S{words * 8}").ravel())
    return first, inverse


def _distinct(keys: np.ndarray):
    """``(first, inverse)`` of a 1-D array, as :func:`_distinct_fields` (``np.unique`` with
    ``return_index`` sorts stably, which is slower than this)."""
    order = np.argsort(keys)
    ordered = keys[order]
    new = np.ones(keys.size, dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    first = np.minimum.reduceat(order, np.flatnonzero(new))
    inverse = np.empty(keys.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return first, inverse


def _decoded(distinct: np.ndarray):
    """``distinct`` (byte strings) as an object array of ``str``, and the indices of those that
    are not UTF-8 (none, in a valid file)."""
    try:
        return distinct.astype("U").astype(object), []          # ASCII: one C pass
    except UnicodeDecodeError:
        pass
    try:
        return np.char.decode(distinct, "utf-8").astype(object), []
    except UnicodeDecodeError:
        pass
    out, bad = np.empty(distinct.size, dtype=object), []
    for i, raw in enumerate(distinct.tolist()):                  # the error path only
        try:
            out[i] = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(i)
    return out, bad


def _raise_not_utf8(table, cols, begins, lengths, at: int):
    """The error for the id field ``at`` (an index into the row-major id fields)."""
    row, role = divmod(at, 2)
    b = int(begins[at])
    raw = bytes(table.buf[b:b + int(lengths[at])])
    raise GraphFormatError(table.path, f"{table.names[cols[role]]} {raw.decode('latin-1')!r} is "
                                       "not UTF-8 text: graph files are ASCII or UTF-8",
                           line=table.line_of_row(row))
