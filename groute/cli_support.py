"""What every ``groute`` subcommand's parser shares: the device options, positive-number
option types, the :class:`~groute.Context` those options ask for, and the checks of output
paths made before a command's work.

The subcommands (in :mod:`groute.commands`, the algorithms, the graph and bench tools) import
these from here, below all of them; only the entry point imports :mod:`groute.cli`.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path


def common_parser() -> argparse.ArgumentParser:
    """Options every subcommand takes."""
    from .engines.device_rule import summary
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("devices")
    g.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto",
                   help="cuda: CuPy GPUs; cpu: NumPy virtual devices; auto: GPUs if CuPy finds any")
    g.add_argument("--devices", type=device_count, default="auto", metavar="K|auto",
                   help=f"number of devices; auto (default), for an algorithm: {summary()}; "
                        f"for the other commands every GPU or 4 CPU virtual devices")
    g.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds any single wait may take before failing (default 60)")
    g.add_argument("-v", "--verbose", action="store_true", help="log progress and show tracebacks")
    return p


def positive_number(text: str, convert, not_a_number: str, not_positive: str):
    """``convert(text)`` when it parses and is > 0, else an ``ArgumentTypeError`` (which
    argparse reports against the option) from ``not_a_number`` (formatted with ``text``) or
    ``not_positive`` (formatted with ``value``). One parser for every positive-number option."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(not_a_number.format(text=text)) from None
    if not value > 0:                            # also refuses a float NaN
        raise argparse.ArgumentTypeError(not_positive.format(value=value))
    return value


def device_count(text: str):
    """``--devices``: ``auto`` or a whole number >= 1."""
    return "auto" if text == "auto" else positive_int(text)


def positive_int(text: str) -> int:
    return positive_number(text, int, "expected a whole number, got {text!r}",
                           "expected a number >= 1, got {value}")


def count_int(text: str) -> int:
    """A whole number >= 0 (a count that may be none)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def positive_float_count(text: str) -> int:
    """A count >= 1 written as a number (``1e6``; a whole one)."""
    def whole(t):
        value = float(t)
        if not math.isfinite(value) or value != int(value):
            raise ValueError(t)
        return int(value)
    return positive_number(text, whole, "expected a whole number (1e6 is one), got {text!r}",
                           "expected a number >= 1, got {value}")


def context_from_args(args, **kwargs):
    """Build the :class:`~groute.Context` that ``--backend/--devices/--timeout`` ask for;
    ``kwargs`` override them (e.g. ``devices`` capped at a graph's size) or add options."""
    from .runtime.context import Context
    options = {"devices": args.devices, "backend": args.backend, "timeout": args.timeout}
    return Context(**{**options, **kwargs})


def drop_stdout() -> None:
    """After a write to stdout failed because its reader went away: send the rest of the
    output to the null device, so that neither later prints nor the interpreter's final flush
    raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # not a real file (e.g. captured by a test)
        sys.stdout = open(os.devnull, "w")
    finally:
        os.close(devnull)


def check_writable_file(option: str, path, *, make_folders: bool = False) -> None:
    """Refuse, before the command's work, a file ``option`` names that could not be written:
    a folder, a read-only file, a missing directory (unless ``make_folders``: the command
    creates it, so the nearest existing one must be a writable folder) or one that cannot be
    written into (with ``make_folders`` also for an existing file: those commands write a
    temporary file beside it, then rename it). Commands check every output this way so that
    no result is lost at the end."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path}: a directory, not a file")
    folder = path.parent
    if make_folders:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: there is no directory {folder}" if not folder.exists()
                         else f"{option} {path}: {folder} is a file, not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {path}: cannot write the file")
    if (make_folders or not path.exists()) and not os.access(folder, os.W_OK):
        raise ValueError(f"{option} {path}: cannot write into {folder}")


def check_distinct_files(outputs, inputs=()) -> None:
    """Refuse, before the command's work, an output file named twice or naming one of its
    input files: writing it would lose the other output, or the input (a graph, a saved
    report being re-rendered).

    Parameters
    ----------
    outputs : iterable of (str, str or None)
        ``(option, path)`` of each output file (None: not asked for).
    inputs : iterable of (str, str)
        ``(option, path)`` of each input; those that are not files are passed over (a graph
        spec such as ``kron:21``).

    Raises
    ------
    ValueError
        Naming both options and the file.
    """
    named = {}
    for option, text in inputs:
        if text and Path(text).is_file():
            named.setdefault(Path(text).resolve(), option)
    for option, text in outputs:
        if not text:
            continue
        other = named.setdefault(Path(text).resolve(), option)
        if other != option:
            raise ValueError(f"{option} {text}: the same file as {other}, which writing it "
                             f"would overwrite; give {option} a file of its own")


def check_writable_folder(option: str, path) -> None:
    """Refuse, before the command's work, a folder ``option`` names (made if missing) that
    could not take files: a file of that name, or no writable folder to make it in."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path}: a file, not a folder")
    nearest = path
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise ValueError(f"{option} {path}: {nearest} is a file, not a folder")
    if not os.access(nearest, os.W_OK):
        raise ValueError(f"{option} {path}: cannot write into {nearest}")
