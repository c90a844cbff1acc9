"""The ``groute`` command line: one entry point, one subcommand per module.

Each module listed in :data:`COMMANDS` defines ``register(subparsers, common)``, which adds its
subparser(s) with ``parents=[common]`` (so every subcommand takes ``--backend``, ``--devices``,
``--timeout`` and ``-v``) and sets ``func=handler``. A handler takes the parsed ``args`` and
returns an exit code. Errors that are the user's (bad file, bad option) are printed as one line
without a traceback; ``-v`` shows the traceback too.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .errors import GrouteError

#: Modules that contribute subcommands, in the order ``groute --help`` lists them.
COMMANDS = [
    "groute.commands.info",
    "groute.commands.demo",
    "groute.apps.pbf",
    "groute.apps.bfs",
    "groute.apps.sssp",
    "groute.apps.pr",
    "groute.apps.cc",
    "groute.graph.cli",
    "groute.topology.cli",
    "groute.bench.cli",
]


def common_parser() -> argparse.ArgumentParser:
    """Options every subcommand takes."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("devices")
    g.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto",
                   help="cuda: CuPy GPUs; cpu: NumPy virtual devices; auto: GPUs if CuPy finds any")
    g.add_argument("--devices", type=positive_int, default=None, metavar="K",
                   help="number of devices (default: all GPUs, or 4 CPU virtual devices)")
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


def positive_int(text: str) -> int:
    return positive_number(text, int, "expected a whole number, got {text!r}",
                           "expected a number >= 1, got {value}")


def context_from_args(args, **kwargs):
    """Build the :class:`~groute.Context` that ``--backend/--devices/--timeout`` ask for."""
    from .context import Context
    return Context(devices=args.devices, backend=args.backend, timeout=args.timeout, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groute",
        description="Asynchronous multi-GPU graph analytics (BFS, SSSP, PageRank, CC) and "
                    "dataflow primitives, on CUDA GPUs or CPU virtual devices.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = common_parser()
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a subcommand still being built: skip, don't break the rest
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise
        module.register(sub, common)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.timeout is not None:
        from .config import set_default_timeout
        set_default_timeout(args.timeout)
    try:
        return int(args.func(args) or 0)
    except (GrouteError, ValueError, OSError, RuntimeError) as exc:
        if args.verbose:
            raise
        print(f"groute {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
