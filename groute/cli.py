"""The ``groute`` command line: one entry point, one subcommand per module.

The tools' modules are listed here (:data:`TOOLS`); the algorithms' commands register
themselves where they are defined (:func:`groute.registry.command`) and follow the tools, by
module name. Each is a ``register(subparsers, common)`` that adds its subparser(s) with
``parents=[common]`` (so every subcommand takes ``--backend``, ``--devices``, ``--timeout`` and
``-v``; see :mod:`groute.cli_support`) and sets ``func=handler``. A handler takes the parsed ``args`` and
returns an exit code. Errors that are the user's (bad file, bad option) are printed as one line
without a traceback; ``-v`` shows the traceback too. A reader that closes the output early
(``groute ... | head``) ends the command quietly.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from contextlib import nullcontext

from . import __version__, registry
from .cli_support import common_parser, drop_stdout
from .errors import GrouteError

#: the modules of groute's own tools, each with a ``register(subparsers, common)``, in the order
#: ``groute --help`` lists them (before the algorithms)
TOOLS = ("groute.commands.info", "groute.commands.demo", "groute.commands.launch",
         "groute.commands.partition", "groute.graph.cli",
         "groute.topology.cli", "groute.bench.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groute",
        description=f"Asynchronous multi-GPU graph analytics ({registry.labels()}) and "
                    f"dataflow primitives, on CUDA GPUs or CPU virtual devices.")
    parser.add_argument("--version", action="version", version=f"groute {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = common_parser()
    for name in TOOLS:
        importlib.import_module(name).register(sub, common)
    for name in sorted(registry.COMMANDS):
        registry.COMMANDS[name](sub, common)
    return parser


def _timeout_scope(args):
    """``--timeout``: the default timeout while the command runs (0, negative, NaN: a
    ValueError, said in one line)."""
    if args.timeout is None:
        return nullcontext()
    from .config import default_timeout_of
    return default_timeout_of(args.timeout, "--timeout")


def _cache_scope(args):
    """``--no-cache`` (commands that load graphs): the command's caches (parsed graphs, METIS
    splits, references) go to a temporary directory removed when it ends, so nothing is read
    from or written to the user cache directory, while the command's own processes still share
    what they compute."""
    if not getattr(args, "no_cache", False):
        return nullcontext()
    from .graph.cache import private_cache_root
    return private_cache_root()


def _chosen_parser(parser, args) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` names (``groute data list``: the ``list``
    one), whose usage an error about its own options shows."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name not in (subs[0].choices if subs else {}):
            return parser
        parser = subs[0].choices[name]


def main(argv=None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:     # said by the subcommand, with its usage (argparse says it at the top)
        _chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with _timeout_scope(args), _cache_scope(args):
            code = int(args.func(args) or 0)
        _close_job()
        return code
    except BrokenPipeError:                     # the reader went away (| head): not an error
        drop_stdout()
        return 0
    except (GrouteError, ValueError, OSError, RuntimeError, MemoryError, OverflowError) as exc:
        if args.verbose:
            _end_job(exc, f"groute {args.command}: error: {exc}", traceback=True)
            raise
        _end_job(exc, f"groute {args.command}: error: {exc}")
        return 1
    except Exception as exc:    # a bug: its traceback, and in a job every rank stops too
        _end_job(exc, f"groute {args.command}: error: {type(exc).__name__}: {exc}",
                 traceback=True)
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _close_job():
    """A command run as several processes (``mpiexec``) shuts its context down at its end."""
    if "groute.distributed" in sys.modules:
        sys.modules["groute.distributed"].close_job()


def _end_job(exc: BaseException, message: str, traceback: bool = False):
    """Print a command's error ``exc`` (each process of a job, naming its rank) and, in a job,
    tell the other ranks of it and end every process: ranks cannot meet again after one left a
    step (groute.distributed)."""
    dist = sys.modules.get("groute.distributed")
    rank = dist.job_rank() if dist is not None else None
    if rank is None:
        if not traceback:
            print(message, file=sys.stderr)
        return
    if traceback:
        import traceback as tb
        tb.print_exc()
    # one write: the ranks' lines merge into one stream, and print writes the line's end
    # apart, which another rank's line could join
    sys.stderr.write(f"[rank {rank}] {message}\n")
    sys.stderr.flush()
    dist.end_job(1, exc)


if __name__ == "__main__":
    sys.exit(main())
