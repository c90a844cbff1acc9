"""What the engines' contracts (:class:`~groute.engines.Relaxation`,
:class:`~groute.engines.LinearIteration`) share: the checks of what a user writes (a name, one C
expression, a NumPy twin) with errors that name the contract and the field, and the generated
header the engine's kernels include (written once per text, in a folder named by its hash, so
two contracts never share a compiled module)."""
from __future__ import annotations

import re
from pathlib import Path

from groute.kernels import write_generated

_NAME = re.compile(r"^[A-Za-z_][\w.<=>-]*$")


def check_name(kind: str, name) -> None:
    """``name`` names a ``kind`` (``"Relaxation"``) in kernels' comments and messages."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{kind} name must be an identifier-like string, got {name!r}")


def check_expression(kind: str, name: str, field: str, text) -> None:
    """``text`` is one C expression (what a generated header returns): no ``;``, no newline."""
    if not isinstance(text, str) or not text.strip() or ";" in text or "\n" in text:
        raise ValueError(f"{kind} {name}: {field} must be one C expression (no ';' or "
                         f"newline), got {text!r}")


def check_function(kind: str, name: str, field: str, fn, signature: str) -> None:
    """``fn`` is callable (the NumPy twin of an expression, ``signature`` as the error says)."""
    if not callable(fn):
        raise TypeError(f"{kind} {name}: {field} must be a function {signature}, "
                        f"got {type(fn).__name__}")


def header_folder(text: str, filename: str) -> Path:
    """The folder holding the generated header ``filename`` with ``text``, for
    :func:`groute.kernels.load_module`'s ``include``."""
    return write_generated(text, filename).parent
