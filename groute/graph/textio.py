"""Fast, checked parsing of whitespace-separated numeric text, shared by all readers.

Readers hand over the bytes of a file's data section; this module turns them into an
``(rows, ncols)`` array in a few whole-buffer NumPy passes (no Python loop per line):

1. token starts (a non-blank byte after a blank one) give the token count, and grouping them
   ``ncols`` at a time checks that every non-empty line holds exactly ``ncols`` fields (fast
   path: the byte before a line's first token is a newline and before the others it is not;
   general path: each group sits on one line, consecutive groups on different lines);
2. ``np.fromstring(..., sep=" ")`` (C speed) parses the numbers and rejects anything that is not
   one (``x``, ``1.5`` where integers are required, ``1-2``); the offending line is then found
   by bisection, so validation costs nothing on good files.

Every failure raises :class:`GraphFormatError` with the file and the 1-based line number.
"""
from __future__ import annotations

import os
import zlib

import numpy as np

from .errors import GraphFormatError

_BLANK = np.zeros(256, dtype=bool)
_BLANK[:33] = True                       # space, tab, CR, LF and other control bytes


def read_bytes(path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic number.

    A truncated or corrupt gzip stream raises GraphFormatError naming the line where the
    readable data stops (so a half-downloaded file never parses as a smaller graph).
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return raw
    parts = []
    data = raw
    while data:
        d = zlib.decompressobj(wbits=31)
        try:
            parts.append(d.decompress(data))
        except zlib.error as exc:
            lines = sum(p.count(b"\n") for p in parts)
            raise GraphFormatError(path, f"corrupt gzip data after {lines} complete lines ({exc}); "
                                         "re-download or re-compress the file", line=lines + 1) from None
        if not d.eof:
            parts.append(d.flush())
            lines = sum(p.count(b"\n") for p in parts)
            raise GraphFormatError(path, f"truncated gzip file: the stream ends after {lines} complete "
                                         "lines; re-download the file", line=lines + 1)
        data = d.unused_data
        if data[:2] != b"\x1f\x8b":      # trailing padding (some tools write zeros)
            if data.strip(b"\0"):
                lines = sum(p.count(b"\n") for p in parts)
                raise GraphFormatError(path, "garbage after the end of the gzip stream", line=lines + 1)
            break
    return b"".join(parts)


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


def parse_table(data: bytes, ncols: int, *, path, first_line: int = 1, floats: bool = False,
                expect_rows: int | None = None, what: str = "edge", display: bytes | None = None):
    """Parse ``data`` (only data lines and blank lines) into an ``(rows, ncols)`` array.

    ``floats`` parses as float64 (Matrix Market real values) instead of int64. ``first_line`` is
    the file line number of the first byte of ``data``. ``expect_rows`` (from a header) is checked.
    ``display``: the original bytes to quote in messages when ``data`` was rewritten in place
    (same length). Returns ``(table, lines, token_starts)``; the caller uses the last two to name
    lines.
    """
    shown = data if display is None else display
    buf = np.frombuffer(data, dtype=np.uint8)
    lines = Lines(buf, first_line)
    blank = buf <= 32                    # space, tab, CR, LF and other control bytes
    starts = np.flatnonzero(blank[:-1] & ~blank[1:]) + 1
    if buf.size and not blank[0]:
        starts = np.concatenate([[0], starts])
    del blank
    ntok = starts.size
    rows = ntok // ncols
    if rows:
        _check_fields(data, buf, lines, starts, rows, ncols, path, what, shown)
    if ntok != rows * ncols:
        line = int(lines.line_of(starts[rows * ncols]))
        raise GraphFormatError(path, _field_count_message(shown, lines, line, ncols, what), line=line)
    if expect_rows is not None and rows != expect_rows:
        if rows > expect_rows:
            line = int(lines.line_of(starts[expect_rows * ncols]))
            raise GraphFormatError(path, f"the header announces {expect_rows} {what} lines but there "
                                         f"are more ({rows}); this is the first extra one", line=line)
        end_line = int(lines.line_of(len(data) - 1)) if len(data) else first_line   # last line
        raise GraphFormatError(path, f"the header announces {expect_rows} {what} lines but the file "
                                     f"has only {rows} (truncated?)", line=end_line)
    dtype = np.float64 if floats else np.int64
    if ntok == 0:
        return np.zeros((0, ncols), dtype=dtype), lines, starts
    try:
        values = np.fromstring(data, dtype=dtype, sep=" ")
    except ValueError:
        values = None
    if values is None or values.size != ntok:
        line = _bisect_bad_line(data, lines, starts, ncols, dtype)
        kind = "numbers" if floats else "integers"
        raise GraphFormatError(path, f"not a number: {what} lines must hold {ncols} {kind}, got "
                                     f"{_line_text(shown, lines, line)!r}", line=line)
    return values.reshape(rows, ncols), lines, starts


def _check_fields(data, buf, lines, starts, rows, ncols, path, what, shown):
    """Raise unless every non-blank line holds exactly ``ncols`` tokens (the first rows*ncols)."""
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
    first_line_of = lines.line_of(grouped[:, 0])
    last_line_of = lines.line_of(grouped[:, -1])
    bad = first_line_of != last_line_of
    bad[1:] |= first_line_of[1:] == first_line_of[:-1]
    if bad.any():
        line = int(first_line_of[int(np.argmax(bad))])
        raise GraphFormatError(path, _field_count_message(shown, lines, line, ncols, what), line=line)


def _line_text(data: bytes, lines: Lines, line: int) -> str:
    i = line - lines.first_line
    begin = 0 if i == 0 else int(lines.nl[i - 1]) + 1
    end = int(lines.nl[i]) if i < lines.nl.size else len(data)
    text = data[begin:end].decode("latin-1").strip()
    return text if len(text) <= 60 else text[:57] + "..."


def _field_count_message(data, lines, line, ncols, what):
    text = _line_text(data, lines, line)
    got = len(text.split())
    return f"expected {ncols} fields on a {what} line, found {got}: {text!r}"


def _bisect_bad_line(data: bytes, lines: Lines, starts, ncols, dtype) -> int:
    """Find the first line that np.fromstring rejects by bisecting over rows (log2(rows) parses)."""
    lo, hi = 0, starts.size // ncols          # invariant: rows [lo, hi) contain the bad one
    ends = np.append(starts, len(data))

    def parses(a, b):
        chunk = data[int(starts[a * ncols]):int(ends[b * ncols])]
        try:
            v = np.fromstring(chunk, dtype=dtype, sep=" ")
        except ValueError:
            return False
        return v.size == (b - a) * ncols

    while hi - lo > 1:
        mid = (lo + hi) // 2
        if not parses(lo, mid):
            hi = mid
        else:
            lo = mid
    return int(lines.line_of(starts[lo * ncols]))


def split_header(data: bytes, is_header_line, *, max_header_lines: int = 100_000):
    """Split off the leading lines for which ``is_header_line(line_bytes)`` is true or that are blank.

    Returns ``(header_lines, body, body_first_line)``. Only the header is looped over in Python.
    """
    header = []
    pos = 0
    n = len(data)
    while pos < n and len(header) < max_header_lines:
        end = data.find(b"\n", pos)
        end = n if end < 0 else end
        line = data[pos:end]
        if line.strip() and not is_header_line(line):
            break
        header.append(line)
        pos = end + 1
    return header, data[pos:], len(header) + 1


def blank_out_lines(data: bytes, line_mask_fn, marks: bytes = b"") -> tuple[bytes, int]:
    """Replace with spaces every line whose first byte ``line_mask_fn`` flags.

    Used for comment lines in the middle of a data section; vectorised over lines. ``marks``:
    the comment bytes; when none occurs anywhere (the usual case, a fast memchr) nothing else is
    done. Returns the new bytes and how many lines were blanked.
    """
    if marks and not any(bytes([m]) in data for m in marks):
        return data, 0
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    line_starts = np.concatenate([[0], nl + 1])
    line_ends = np.concatenate([nl, [buf.size]])
    keep = line_starts < buf.size
    line_starts, line_ends = line_starts[keep], line_ends[keep]
    first = buf[np.minimum(line_starts, max(buf.size - 1, 0))] if buf.size else np.zeros(0, np.uint8)
    flagged = line_mask_fn(first)
    if not flagged.any():
        return data, 0
    delta = np.zeros(buf.size + 1, dtype=np.int32)
    np.add.at(delta, line_starts[flagged], 1)
    np.add.at(delta, line_ends[flagged], -1)
    full = np.cumsum(delta[:-1]) > 0
    out = buf.copy()
    out[full] = 32
    return out.tobytes(), int(flagged.sum())
