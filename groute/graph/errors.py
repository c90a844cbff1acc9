"""The graph layer's exception: a file that is not the graph format it claims to be.

:class:`GraphFormatError` is both a :class:`~groute.errors.GrouteError` (so the CLI prints it as
one line) and a :class:`ValueError` (so generic callers that catch bad input catch it too). It
names the file and, where one line is at fault, the 1-based line number, because "fix line 7 of
graph.mtx" is what the user needs to hear.
"""
from __future__ import annotations

from ..errors import GrouteError


class GraphFormatError(GrouteError, ValueError):
    """Malformed graph input. ``path`` and ``line`` (1-based, or ``None``) say where."""

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = int(line) if line is not None else None
        self.reason = message
        where = self.path or "<input>"
        if self.line is not None:
            where = f"{where}, line {self.line}"
        super().__init__(f"{where}: {message}")


class NegativeWeightError(GraphFormatError):
    """A negative weight where weights must be >= 0. ``weight``: its text as the file has it;
    ``hint``: what keeps or avoids it, for the caller to say (load_graph's argument by default,
    a command its own options)."""

    def __init__(self, path, weight: str, line: int | None = None,
                 hint: str | None = "load_graph's allow_negative=True keeps them"):
        self.weight = weight
        super().__init__(path, f"negative weight {weight}: weights must be >= 0"
                         + (f" ({hint})" if hint else ""), line=line)

    def with_hint(self, hint: str | None) -> "NegativeWeightError":
        """The same error with another ``hint`` (a command says its own way around it)."""
        return NegativeWeightError(self.path, self.weight, self.line, hint=hint)

