"""What every ``groute`` subcommand's parser shares: the device options, positive-number
option types, and the :class:`~groute.Context` those options ask for.

The subcommands (in :mod:`groute.commands`, the algorithms, the graph and bench tools) import
these from here, below all of them; only the entry point imports :mod:`groute.cli`.
"""
from __future__ import annotations

import argparse
import os
import sys


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
