"""Fast, checked parsing of whitespace-separated numeric text, shared by all readers.

Every reader takes a file's :class:`Text` (:func:`read_text`; the :func:`reader` decorator
reads it and gives errors the file's line numbers): its bytes read in blocks, gunzipped, a
UTF-8 byte-order mark skipped, and blank lines before, after and (in long runs) between the
lines of text not kept, so a file of blanks costs no memory. Readers hand over the bytes of
a file's data section; :class:`Table` splits them into rows of
``ncols`` fields and parses chosen columns in a few whole-buffer NumPy passes (no Python loop per
line):

1. token starts (a non-blank byte after a blank one; blanks are the bytes up to space) give the
   token count, and grouping them ``ncols`` at a time checks that every non-empty line holds
   exactly ``ncols`` fields (fast path: the byte before a line's first token is a newline and
   before the others it is not; general path: each group sits on one line, consecutive groups on
   different lines);
2. ``np.fromstring(..., sep=" ")`` (C speed) parses the numbers and rejects anything that is not
   one (``x``, ``1.5`` where integers are required, ``1-2``, a control byte); the offending line is
   then found by bisection, so validation costs nothing on good files. Columns not asked for are
   blanked out first, so vertex ids are always parsed as exact 64-bit integers even when the
   weights are real numbers. ``np.fromstring`` saturates integers beyond 64 bits; a saturated
   value is compared with its text, so such a number is an error, never a different id.

Every failure raises :class:`GraphFormatError` with the file and the 1-based line number, and
quotes the file's own text.
"""
from __future__ import annotations

import functools
import math
import os
import re
import zlib
from typing import NamedTuple

import numpy as np

from .errors import GraphFormatError

_BLANK = np.zeros(256, dtype=bool)
_BLANK[:33] = True                       # space, tab, CR, LF and other control bytes
#: control bytes that are not whitespace to np.fromstring (space, \t, \n, \v, \f, \r are)
_CONTROL = np.zeros(256, dtype=bool)
_CONTROL[:32] = True
_CONTROL[list(b"\t\n\v\f\r")] = False
_CONTROL[127] = True
_TOKEN = re.compile(rb"[^\x00-\x20]+")
_INT = re.compile(rb"[+-]?[0-9]+\Z")
_FLOAT = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                    rb"|nan(?:\([0-9A-Za-z_]*\))?|inf(?:inity)?)\Z", re.IGNORECASE)
_I64 = np.iinfo(np.int64)


#: the bytes every reader reads as blank: whitespace, as ``bytes.strip()`` without arguments
#: strips it (the fast way to skip it). Control bytes (0x00-0x1f but these, 0x7f) are not
#: blank: outside a comment they make their line an error, wherever it is.
WHITESPACE = b" \t\n\r\v\f"
UTF8_BOM = b"\xef\xbb\xbf"
#: byte-order marks of text a graph reader cannot read (UTF-16, UTF-32), by what they mean
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
               (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
#: bytes read (or decompressed) per step: what reading holds beyond the text it keeps
BLOCK = 16 << 20
#: a run of blanks longer than this is kept as what the readers can tell apart in it
#: (:class:`_Blanks`), not byte for byte
BLANKS_KEPT = 64 << 10


class Text(NamedTuple):
    """A graph file's text as the readers take it (:func:`read_text`): ``data`` from the first
    line that is not blank on (a UTF-8 byte-order mark skipped, the blanks after the last
    line's text dropped); ``first_line``, the file's line number of ``data``'s first byte; and
    ``skipped``, where long runs of blank lines in between were kept as one: ``(line, more)``
    pairs, a line of ``data`` (numbered from ``first_line``) after which the file has ``more``
    blank lines that ``data`` does not."""

    data: bytes
    first_line: int = 1
    skipped: tuple = ()

    def file_line(self, line: int) -> int:
        """The file's number of line ``line`` of ``data`` (numbered from ``first_line``)."""
        return line + sum(more for after, more in self.skipped if line > after)


def reader(read):
    """Decorate a graph reader ``read(path, ..., text=None)``: it gets the file's
    :class:`Text` (read here when the caller passes none), and the line numbers of its
    GraphFormatErrors, counted in ``text``, become the file's (:meth:`Text.file_line`)."""
    @functools.wraps(read)
    def read_file(path, *args, text: Text | None = None, **kwargs):
        text = read_text(path) if text is None else text
        try:
            return read(path, *args, text=text, **kwargs)
        except GraphFormatError as err:
            if not text.skipped or err.line is None:
                raise
            raise type(err)(err.path, err.reason, line=text.file_line(err.line)) from None
    return read_file


class _BadGzip(Exception):
    """A gzip stream that cannot be read to its end; the message has ``{lines}`` where the
    complete lines read before it go, which only the reader of the text knows."""


def read_text(path) -> Text:
    """The text of the file at ``path`` (gunzipped when it starts with the gzip magic number),
    read and decompressed :data:`BLOCK` bytes at a time so that blanks cost no memory: the
    blank lines before the first line with text are counted, not kept (``first_line``), those
    after the last are dropped, and a long run of blanks between two lines' text is kept as the
    newlines and tabs the readers tell apart (:class:`_Blanks`). A gzip file of nothing but
    blanks reads in time proportional to its size and in constant memory.

    A truncated or corrupt gzip stream raises GraphFormatError naming the line where the
    readable data stops (so a half-downloaded file never parses as a smaller graph), and
    UTF-16 or UTF-32 text one saying so.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        blocks = _gunzipped(f) if gzipped else iter(lambda: f.read(BLOCK), b"")
        return _compacted(path, blocks)


def _gunzipped(f):
    """The decompressed bytes of the gzip file ``f`` (one member or several), at most
    :data:`BLOCK` per step; zero padding after the last member is allowed (some tools write
    it). Raises :class:`_BadGzip`."""
    d = zlib.decompressobj(wbits=31)
    pending = b""
    while True:
        if not pending:
            pending = f.read(1 << 20)
            if not pending:
                tail = d.flush()
                if tail:
                    yield tail
                if not d.eof:
                    raise _BadGzip("truncated gzip file: the stream ends after {lines} complete "
                                   "lines; re-download the file")
                return
        try:
            out = d.decompress(pending, BLOCK)
        except zlib.error as exc:
            raise _BadGzip("corrupt gzip data after {lines} complete lines (" + str(exc) + "); "
                           "re-download or re-compress the file") from None
        if out:
            yield out
        if not d.eof:
            pending = d.unconsumed_tail
            continue
        rest = d.unused_data
        while len(rest) < 2 and (more := f.read(1 << 20)):
            rest += more
        if rest[:2] == b"\x1f\x8b":                    # the next member
            d, pending = zlib.decompressobj(wbits=31), rest
            continue
        while rest:                                     # padding to the end of the file
            if rest.strip(b"\0"):
                raise _BadGzip("garbage after the end of the gzip stream")
            rest = f.read(1 << 20)
        return


def _compacted(path, blocks) -> Text:
    """The :class:`Text` of the byte blocks ``blocks`` (see :func:`read_text`)."""
    parts, blanks, skipped = [], _Blanks(), []
    first_line = None       # None until the first byte of text
    lines = kept = 0        # newlines read, and kept in ``parts``
    try:
        for block in _from_start(path, blocks):
            lines += block.count(b"\n")
            lead = len(block) - len(block.lstrip())
            if lead == len(block):
                blanks.add(block)
                continue
            blanks.add(block[:lead])
            if first_line is None:
                first_line = 1 + blanks.newlines
                parts.append(blanks.indentation())
            else:
                run, more = blanks.between()
                parts.append(run)
                kept += run.count(b"\n")
                if more:
                    skipped.append((first_line + kept - 1, more))
            end = len(block.rstrip())
            parts.append(block[lead:end])
            kept += block.count(b"\n", lead, end)
            blanks = _Blanks()
            blanks.add(block[end:])
    except _BadGzip as exc:
        raise GraphFormatError(path, str(exc).replace("{lines}", str(lines)),
                               line=lines + 1) from None
    if first_line is None:
        return Text(b"", 1 + blanks.newlines)
    parts.append(blanks.line_end())
    return Text(b"".join(parts), first_line, tuple(skipped))


def _from_start(path, blocks):
    """``blocks`` with a UTF-8 byte-order mark at the start skipped (the first block made long
    enough to tell)."""
    blocks = iter(blocks)
    first = b""
    for block in blocks:
        first += block
        if len(first) >= 4:
            break
    if first:
        yield _without_bom(path, first)
    yield from blocks


def _without_bom(path, data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark; GraphFormatError for the mark of a
    text encoding the readers cannot read."""
    if data.startswith(UTF8_BOM):
        return data[len(UTF8_BOM):]
    for mark, encoding in _OTHER_BOMS:
        if data.startswith(mark):
            raise GraphFormatError(path, f"the file is {encoding} text; graph files are ASCII or "
                                         f"UTF-8: save it as UTF-8", line=1)
    return data


class _Blanks:
    """A run of blank bytes (:data:`WHITESPACE`) between two bytes of text, or before the first
    or after the last. Up to :data:`BLANKS_KEPT` bytes it is kept as it is; a longer run is kept
    as what the readers can tell apart in it: on the partial line before its first newline and
    after its last, whether there are blanks and how many tabs (a TSV file's delimiter; two
    are as wrong as more), and how many newlines it holds. The whole blank lines between them
    hold nothing a reader reads: one stands for them all (:meth:`between`)."""

    def __init__(self):
        self.raw = bytearray()         # the bytes, while they are few enough (else None)
        self.newlines = 0
        self.head = [False, 0]         # blanks before the first newline: any, tabs
        self.tail = [False, 0]         # blanks after the last newline: any, tabs

    def add(self, blanks: bytes) -> None:
        if not blanks:
            return
        nl = blanks.count(b"\n")
        if nl:
            first, last = blanks.find(b"\n"), blanks.rfind(b"\n")
            if not self.newlines:
                self.head[0] |= first > 0
                self.head[1] += blanks.count(b"\t", 0, first)
            self.tail = [last + 1 < len(blanks), blanks.count(b"\t", last + 1)]
        else:
            part = self.tail if self.newlines else self.head
            part[0] = True
            part[1] += blanks.count(b"\t")
        self.newlines += nl
        if self.raw is not None:
            self.raw += blanks
            if len(self.raw) > BLANKS_KEPT:
                self.raw = None

    @staticmethod
    def _line(part) -> bytes:
        return b"\t" * min(part[1], 2) or (b" " if part[0] else b"")

    def between(self) -> tuple[bytes, int]:
        """The run between two bytes of text, and how many of its newlines it leaves out (the
        whole blank lines of a long run but one)."""
        if self.raw is not None:
            return bytes(self.raw), 0
        if not self.newlines:
            return self._line([self.head[0] or self.tail[0], self.head[1] + self.tail[1]]), 0
        return self._line(self.head) + b"\n" + self._line(self.tail), self.newlines - 1

    def indentation(self) -> bytes:
        """The run before the first text: only its last line's part (the lines before are not
        kept: the text's ``first_line`` counts them)."""
        if self.raw is not None:
            return bytes(self.raw[self.raw.rfind(b"\n") + 1:])
        return self._line(self.tail if self.newlines else self.head)

    def line_end(self) -> bytes:
        """The run after the last text: only the blanks that end its line."""
        if self.raw is not None:
            cut = self.raw.find(b"\n")
            return bytes(self.raw if cut < 0 else self.raw[:cut])
        return self._line(self.head)


class Lines:
    """Newline positions of a buffer (computed on first use), to turn byte offsets into 1-based
    line numbers."""

    def __init__(self, buf: np.ndarray, first_line: int = 1):
        self.buf = buf
        self.first_line = first_line
        self._nl = None

    @property
    def nl(self):
        if self._nl is None:
            self._nl = np.flatnonzero(self.buf == 10)
        return self._nl

    def line_of(self, pos):
        """1-based line number(s) of byte offset(s) ``pos``."""
        return np.searchsorted(self.nl, pos, side="left") + self.first_line

    def text(self, data: bytes, line: int) -> bytes:
        """The raw bytes of ``line`` (without its newline)."""
        i = line - self.first_line
        begin = 0 if i == 0 else int(self.nl[i - 1]) + 1
        end = int(self.nl[i]) if i < self.nl.size else len(data)
        return data[begin:end]


def token_starts(buf: np.ndarray) -> np.ndarray:
    """Offsets of the first byte of every token (a run of bytes above space)."""
    blank = buf <= 32
    starts = np.flatnonzero(blank[:-1] & ~blank[1:]) + 1
    if buf.size and not blank[0]:
        starts = np.concatenate([[0], starts])
    return starts


def token_ends(buf: np.ndarray) -> np.ndarray:
    """Offsets just past the last byte of every token (aligned with :func:`token_starts`)."""
    blank = buf <= 32
    ends = np.flatnonzero(~blank[:-1] & blank[1:]) + 1
    if buf.size and not blank[-1]:
        ends = np.concatenate([ends, [buf.size]])
    return ends


def blank_ranges(buf: np.ndarray, begins, ends) -> np.ndarray:
    """A copy of ``buf`` with the disjoint, non-empty byte ranges ``[begins[i], ends[i])`` made
    spaces (offsets and line numbers stay the same)."""
    out = buf.copy()
    if len(begins):
        delta = np.zeros(buf.size + 1, dtype=np.int8)
        delta[begins] = 1
        delta[ends] -= 1
        out[np.cumsum(delta[:-1], dtype=np.int8).view(bool)] = 32
    return out


def line_heads(buf: np.ndarray):
    """``(line_starts, line_ends, heads)``: each line's span and its first non-blank byte
    (``heads[i] == line_ends[i]`` for a blank line). Indented lines are resolved through the
    token starts, so indentation costs whole-buffer passes, not a loop."""
    nl = np.flatnonzero(buf == 10)
    line_starts = np.concatenate([[0], nl + 1])
    line_ends = np.concatenate([nl, [buf.size]])
    keep = line_starts < buf.size
    line_starts, line_ends = line_starts[keep], line_ends[keep]
    heads = line_starts.copy()
    if heads.size:
        first = buf[heads]
        indented = np.flatnonzero((first <= 32) & (first != 10))
        if indented.size:
            tok = token_starts(buf)
            i = np.searchsorted(tok, heads[indented])
            pos = tok[np.minimum(i, max(tok.size - 1, 0))] if tok.size else np.full(i.size, buf.size)
            pos = np.where(i < tok.size, pos, buf.size)
            heads[indented] = np.minimum(pos, line_ends[indented])
    return line_starts, line_ends, heads


def head_bytes(buf: np.ndarray, line_ends, heads) -> np.ndarray:
    """The first non-blank byte of each line (newline, 10, for a blank line)."""
    if not heads.size:
        return np.zeros(0, np.uint8)
    b = buf[np.minimum(heads, buf.size - 1)]
    return np.where(heads < line_ends, b, np.uint8(10))


def blank_comment_lines(data: bytes, marks: bytes) -> bytes:
    """``data`` with every line whose first non-blank byte is one of ``marks`` made spaces.

    When no mark occurs anywhere (the usual case, a fast memchr) nothing else is done.
    """
    if not any(bytes([m]) in data for m in marks):
        return data
    buf = np.frombuffer(data, dtype=np.uint8)
    _, ends, heads = line_heads(buf)
    first = head_bytes(buf, ends, heads)
    flagged = np.isin(first, np.frombuffer(marks, np.uint8))
    if not flagged.any():
        return data
    return blank_ranges(buf, heads[flagged], ends[flagged]).tobytes()


def first_data_line(data: bytes) -> list[bytes]:
    """The fields of the first line that has any (``[]`` when there is none)."""
    m = _TOKEN.search(data)
    if m is None:
        return []
    begin = data.rfind(b"\n", 0, m.start()) + 1
    end = data.find(b"\n", m.start())
    return _TOKEN.findall(data, begin, len(data) if end < 0 else end)


class Table:
    """The data section ``data`` as rows of ``ncols`` fields, checked on construction.

    ``first_line`` is the file line number of the first byte of ``data``; ``what`` names a row in
    messages ("edge", "entry", "arc") and ``names`` each column ("source id", "weight"...).
    ``expect_rows`` (from a header) is checked. ``display``: the original bytes to quote in
    messages when ``data`` was rewritten in place (same length). Parse columns with
    :meth:`ints` and :meth:`floats`; :meth:`line_of_row` and :meth:`field` name the file's text.
    """

    def __init__(self, data: bytes, ncols: int, *, path, first_line: int = 1, what: str = "edge",
                 names=None, expect_rows: int | None = None, display: bytes | None = None):
        self.data = data
        self.shown = data if display is None else display
        self.ncols = ncols
        self.path = path
        self.what = what
        self.names = list(names) if names else [f"field {i + 1}" for i in range(ncols)]
        self.buf = np.frombuffer(data, dtype=np.uint8)
        self.lines = Lines(self.buf, first_line)
        self.starts = token_starts(self.buf)
        self._ends = None
        ntok = self.starts.size
        self.rows = rows = ntok // ncols
        if rows:
            self._check_fields()
        else:                                # nothing to parse, so nothing else finds these
            self.check_no_control()
        if ntok != rows * ncols:
            line = int(self.lines.line_of(self.starts[rows * ncols]))
            self._raise_field_count(line)
        if expect_rows is not None and rows != expect_rows:
            if rows > expect_rows:
                line = int(self.lines.line_of(self.starts[expect_rows * ncols]))
                raise GraphFormatError(path, f"the header announces {expect_rows} {what} lines but "
                                             f"there are more ({rows}); this is the first extra one",
                                       line=line)
            end_line = int(self.lines.line_of(len(data) - 1)) if len(data) else \
                max(first_line - 1, 1)          # nothing after the header: its last line
            raise GraphFormatError(path, f"the header announces {expect_rows} {what} lines but the "
                                         f"file has only {rows} (truncated?)", line=end_line)

    def check_no_control(self) -> None:
        """Raise GraphFormatError naming the first line with a control byte (not whitespace).
        The numeric parses reject control bytes themselves; a caller that takes fields as text
        (:mod:`.text_ids`) or parses nothing calls this: the tokenizer reads them as blanks."""
        control = np.flatnonzero(_CONTROL[self.buf])
        if control.size:
            line = int(self.lines.line_of(control[0]))
            raise GraphFormatError(self.path, self._describe(line, [], np.int64), line=line)

    def free(self) -> None:
        """Drop the text and token arrays once no message needs them (before the graph is
        built, which needs the memory)."""
        self.data = self.shown = self.buf = self.starts = self._ends = self.lines = None

    # ------------------------------------------------------------------ naming the file's text
    def line_of_row(self, r) -> int:
        return int(self.lines.line_of(self.starts[int(r) * self.ncols]))

    def field(self, r, c) -> str:
        """The text of field ``c`` of row ``r`` as the file has it. The field ends where the
        parsed text's token does: in a CSV file the displayed text keeps the delimiter, which
        does not end a token there."""
        begin = int(self.starts[int(r) * self.ncols + c])
        m = _TOKEN.match(self.data, begin)
        return self.shown[begin:m.end()].decode("latin-1") if m else ""

    def line_text(self, line: int) -> str:
        text = self.lines.text(self.shown, line).decode("latin-1").strip()
        return text if len(text) <= 60 else text[:57] + "..."

    # ------------------------------------------------------------------ parsing
    def ints(self, cols=None) -> np.ndarray:
        """Columns ``cols`` (default all) as exact int64, ``(rows, len(cols))``."""
        return self._parse(cols, np.int64, locate=True)

    def try_ints(self, cols=None):
        """Like :meth:`ints`, but ``None`` when some field is not an integer (no error located:
        the caller tries another reading)."""
        return self._parse(cols, np.int64, locate=False)

    def floats(self, cols=None) -> np.ndarray:
        """Columns ``cols`` (default all) as float64."""
        return self._parse(cols, np.float64, locate=True)

    def _parse(self, cols, dtype, *, locate):
        cols = list(range(self.ncols)) if cols is None else list(cols)
        k = len(cols)
        if self.rows == 0:
            return np.zeros((0, k), dtype=dtype)
        in_file = sorted(cols)              # the text keeps the columns in file order
        text = self.data if k == self.ncols else self._only(cols)
        try:
            values = np.fromstring(text, dtype=dtype, sep=" ")
        except ValueError:
            values = None
        if values is None or values.size != self.rows * k:
            if not locate:
                return None
            self._raise_bad_value(text, in_file, dtype)
        values = values.reshape(self.rows, k)
        if in_file != cols:
            values = values[:, [in_file.index(c) for c in cols]]
        if dtype is np.int64 and (values.max() == _I64.max or values.min() == _I64.min):
            self._check_saturated(values, cols)
        return values

    @property
    def ends(self):
        if self._ends is None:
            self._ends = token_ends(self.buf)
        return self._ends

    def _only(self, cols) -> bytes:
        """The data with every field outside ``cols`` made spaces."""
        drop = [c for c in range(self.ncols) if c not in cols]
        n = self.rows * self.ncols
        begins = self.starts[:n].reshape(self.rows, self.ncols)[:, drop].ravel()
        ends = self.ends[:n].reshape(self.rows, self.ncols)[:, drop].ravel()
        return blank_ranges(self.buf, begins, ends).tobytes()

    def _check_saturated(self, values, cols):
        """np.fromstring saturates integers outside int64: compare those values with their text."""
        for r, j in np.argwhere((values == _I64.max) | (values == _I64.min)):
            text = self.field(r, cols[j])
            if int(text) != int(values[r, j]):
                raise GraphFormatError(self.path, f"{self.names[cols[j]]} {text} does not fit in a "
                                                  "64-bit integer", line=self.line_of_row(r))

    def _check_fields(self):
        """Raise unless every non-blank line holds exactly ``ncols`` tokens (the first rows*ncols)."""
        data, buf, starts, rows, ncols = self.data, self.buf, self.starts, self.rows, self.ncols
        grouped = starts[: rows * ncols].reshape(rows, ncols)
        # Fast path: if every newline is followed directly by a token (no blank lines, no
        # indentation), a token starts a line exactly when the byte before it is a newline.
        nl_count = data.count(b"\n") - (1 if data.endswith(b"\n") else 0)
        before = buf[np.maximum(starts - 1, 0)] == 10
        if starts.size and starts[0] == 0:
            before[0] = True
        if int(np.count_nonzero(before[1:] if starts[0] == 0 else before)) == nl_count:
            if starts[0] != 0:               # data starts with blanks but no newline
                before[0] = True
            b = before[: rows * ncols].reshape(rows, ncols)
            ok = b[:, 0] & ~b[:, 1:].any(axis=1)
            if ok.all():
                return
        # General path (blank lines, indentation, or an error to locate): line of each token.
        first_line_of = self.lines.line_of(grouped[:, 0])
        last_line_of = self.lines.line_of(grouped[:, -1])
        bad = first_line_of != last_line_of
        bad[1:] |= first_line_of[1:] == first_line_of[:-1]
        if bad.any():
            self._raise_field_count(int(first_line_of[int(np.argmax(bad))]))

    def _raise_field_count(self, line):
        got = len(_TOKEN.findall(self.lines.text(self.data, line)))
        raise GraphFormatError(self.path, f"expected {self.ncols} fields on {_a(self.what)} line, "
                                          f"found {got}: {self.line_text(line)!r}", line=line)

    # ------------------------------------------------------------------ locating a bad number
    def _raise_bad_value(self, text: bytes, cols, dtype):
        """Find the first line np.fromstring rejects (a control byte between rows, or by
        bisecting over rows: log2(rows) parses) and say what is wrong with it."""
        buf = np.frombuffer(text, dtype=np.uint8)
        control = np.flatnonzero(_CONTROL[buf])
        ctrl_line = int(self.lines.line_of(control[0])) if control.size else None
        row = self._bisect_bad_row(text, len(cols), dtype)
        row_line = None if row is None else self.line_of_row(row)
        candidates = [x for x in (ctrl_line, row_line) if x is not None]
        line = min(candidates) if candidates else self.line_of_row(0)
        raise GraphFormatError(self.path, self._describe(line, cols, dtype), line=line)

    def _bisect_bad_row(self, text, k, dtype):
        """First row that np.fromstring rejects on its own span (first to last byte of its
        fields), or None."""
        def end_of_row(r):                       # just past the last field of row r
            m = _TOKEN.match(text, int(self.starts[r * self.ncols + self.ncols - 1]))
            return m.end() if m else int(self.starts[r * self.ncols + self.ncols - 1]) + 1

        def parses(a, b):
            chunk = text[int(self.starts[a * self.ncols]):end_of_row(b - 1)]
            try:
                v = np.fromstring(chunk, dtype=dtype, sep=" ")
            except ValueError:
                return False
            return v.size == (b - a) * k

        lo, hi = 0, self.rows
        if parses(lo, hi):
            return None
        while hi - lo > 1:                       # invariant: rows [lo, hi) hold a bad one
            mid = (lo + hi) // 2
            if not parses(lo, mid):
                hi = mid
            else:
                lo = mid
        return lo

    def _describe(self, line: int, cols, dtype) -> str:
        raw = self.lines.text(self.data, line)      # the parsed text: fields align with columns
        shown = self.line_text(line)
        control = [b for b in raw if _CONTROL[b]]
        if control:
            return f"control byte 0x{control[0]:02x} in {_a(self.what)} line: {shown!r}"
        fields = _TOKEN.findall(raw)
        for c in cols:
            if c >= len(fields):
                break
            tok, name = fields[c], self.names[c]
            text = tok.decode("latin-1")
            if dtype is np.int64:
                if _INT.match(tok):
                    continue
                if _FLOAT.match(tok):
                    value = float(tok.split(b"(")[0])       # "nan(123)" is NaN too
                    if math.isnan(value):
                        return f"{name} is NaN: {shown!r}"
                    if math.isinf(value) and tok.lstrip(b"+-")[:1].lower() == b"i":
                        return f"{name} is infinite: {shown!r}"
                    return f"{name} {text} is not an integer: {shown!r}"
                return f"not a number: {name} {text!r} in {shown!r}"
            if not _FLOAT.match(tok):
                return f"not a number: {name} {text!r} in {shown!r}"
        kind = "integers" if dtype is np.int64 else "numbers"
        return f"not a number: {self.what} lines must hold {self.ncols} {kind}, got {shown!r}"


def is_number(token: bytes) -> bool:
    """Whether a field reads as a number (an integer or a real)."""
    return bool(_FLOAT.match(token))


def parse_int(token: bytes) -> int | None:
    """A header field as an integer (sign and digits only), or None."""
    return int(token) if _INT.match(token) else None


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


BLANKS = bytes(range(33))


def line_head(line: bytes) -> bytes:
    """The first non-blank byte of a line (``b""`` for a blank line)."""
    return line.lstrip(BLANKS)[:1]


def split_header(text: Text, is_header_line, *, path, max_header_lines: int = 100_000):
    """Split off the leading lines of ``text`` for which ``is_header_line(line_bytes)`` is true
    or that are blank.

    Returns ``(header, body, body_first_line)``, ``header`` a list of ``(line number, line
    bytes)``. Only the header is looped over in Python. A control byte before the first
    non-blank byte of one of these lines, or of the first line after them, is a
    GraphFormatError naming the line, as it is in the body (a line of control bytes is not
    blank).
    """
    data, line_no = text.data, text.first_line
    header = []
    pos = 0
    n = len(data)
    while pos < n and len(header) < max_header_lines:
        end = data.find(b"\n", pos)
        end = n if end < 0 else end
        line = data[pos:end]
        lead = line[:len(line) - len(line.lstrip(BLANKS))]
        if lead.strip(WHITESPACE):
            bad = lead.strip(WHITESPACE)[0]
            shown = line.decode("latin-1").strip()
            raise GraphFormatError(path, f"control byte 0x{bad:02x} before the first data line: "
                                         f"{shown[:60]!r}", line=line_no)
        if line.strip(BLANKS) and not is_header_line(line):
            break
        header.append((line_no, line))
        line_no += 1
        pos = end + 1
    return header, data[pos:], line_no


def body_line_or_last(body: bytes, body_line: int) -> int:
    """The line to name for something missing from ``body``: its first line, or the file's
    last line when the body is empty (the file ends with its header)."""
    return body_line if body else max(body_line - 1, 1)
