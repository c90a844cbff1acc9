"""``groute launch -n K -- COMMAND ...``: run a groute command (or a Python program) as K MPI
processes, one device each, for people who have never used MPI.

It finds ``mpiexec`` (the one the ``mpich`` wheel put beside this Python, else the first on
``PATH``: a site's own MPI), checks that this Python can import ``mpi4py``, and runs
``mpiexec -n K [-hosts H1,H2] PYTHON -m groute COMMAND ...`` (Open MPI's ``--host`` where the
``mpiexec`` is Open MPI's; ``PYTHON PROGRAM.py ...`` when the command is a ``.py`` file) with
this environment, returning its exit code. A missing MPI is one line saying what to install; a
command that every process would refuse (an unknown one, its arguments, a missing program) is
refused once, before any starts (:func:`check_command`). A signal that ends this process
(SIGTERM, SIGHUP) is passed on to ``mpiexec``, which ends the ranks (:func:`run_mpiexec`).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from ..cli_support import positive_int
from ..runtime.ranks import INSTALL_HINT


def find_mpiexec() -> str | None:
    """The ``mpiexec`` to start ranks with: beside this Python (a virtual environment's, where
    ``pip install 'groute[mpi]'`` puts the mpich wheel's), else the first on ``PATH``; None if
    neither exists."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("mpiexec")


def is_open_mpi(mpiexec: str) -> bool:
    """Whether ``mpiexec`` is Open MPI's (its options differ from MPICH's: ``--host``, not
    ``-hosts``), told by what ``mpiexec --version`` prints; False where it says nothing."""
    try:
        done = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              errors="replace", stdin=subprocess.DEVNULL, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    said = (done.stdout + done.stderr).lower()
    return any(mark in said for mark in ("open mpi", "openrte", "open-mpi"))  # 5.x, 4.x, url


def host_options(ranks: int, hosts, *, open_mpi: bool) -> list[str]:
    """The options that spread ``ranks`` processes over ``hosts``: MPICH's Hydra (the mpich
    wheel's ``mpiexec``) deals them out round-robin (``-hosts a,b``); Open MPI gives a host one
    slot unless told more (``--host a:S,b:S``, S the ranks per host rounded up)."""
    if not open_mpi:
        return ["-hosts", ",".join(hosts)]
    slots = -(-int(ranks) // len(hosts))
    return ["--host", ",".join(f"{h}:{slots}" for h in hosts)]


def launch_command(ranks: int, command, *, hosts=None, mpiexec=None) -> list[str]:
    """The ``mpiexec`` command line that runs ``command`` (groute's arguments, or a ``.py``
    program and its arguments) as ``ranks`` processes (on ``hosts``, a list of host names).

    Raises
    ------
    FileNotFoundError
        When no ``mpiexec`` is found, or this Python cannot import ``mpi4py``: what to install.
    ValueError
        When ``command`` is empty.
    """
    if not command:
        raise ValueError("groute launch needs a command after --, e.g. groute launch -n 2 -- bfs "
                         "--graph kron:10 --verify")
    exe = mpiexec or find_mpiexec()
    if exe is None:
        raise FileNotFoundError(f"no mpiexec beside {sys.executable} or on PATH: {INSTALL_HINT}")
    if importlib.util.find_spec("mpi4py") is None:
        raise FileNotFoundError(f"{sys.executable} cannot import mpi4py: {INSTALL_HINT}")
    line = [exe, "-n", str(int(ranks))]
    if hosts:
        line += host_options(ranks, hosts, open_mpi=is_open_mpi(exe))
    if command[0].endswith(".py"):
        return line + [sys.executable, *command]
    return line + [sys.executable, "-m", "groute", *command]


def register(subparsers, common):
    p = subparsers.add_parser(
        "launch", help="run a command as K MPI processes, one device each (wraps mpiexec)",
        description="Run a groute command (bfs, sssp, pr, cc, kcore, ...) or a Python program "
                    "as K processes over MPI, each driving one device and loading only its part "
                    "of the graph: groute launch -n 4 -- bfs --graph kron:20 --verify. Needs "
                    f"an MPI: {INSTALL_HINT}.")
    # required, checked by run: an option of the command given before it starts the command
    # (argparse.REMAINDER), which then holds -n too
    p.add_argument("-n", "--ranks", type=positive_int, default=None, metavar="K",
                   help="processes to start (one device each; required)")
    p.add_argument("--hosts", default=None, metavar="H1,H2",
                   help="comma-separated hosts to spread the processes over (mpiexec -hosts, or Open "
                        "MPI's --host with the slots per host)")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the mpiexec command line instead of running it")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="[--] COMMAND",
                   help="a groute command and its options, or a .py program and its arguments "
                        "(everything after the options above; -- before it is optional)")
    # every command's parser (complete once the command line is parsed): check_command
    p.set_defaults(func=run, verbose=False, timeout=None, commands=subparsers.choices)


def check_command(command, commands, *, local: bool = True) -> None:
    """Refuse, before any process starts, a command that every process would refuse alike,
    so that it is said once: a ``.py`` program that is not a file (where every process runs
    on this host, ``local``: on other hosts it may be there only), a groute command that is
    not one of ``commands`` (name -> parser), or arguments the command's own parser refuses
    (it prints its usage and error and exits, as the command would in every process).

    Raises
    ------
    ValueError
        For a missing program or an unknown command, naming it.
    SystemExit
        From the command's parser, for its arguments (``--help`` too: printed once).
    """
    first = command[0]
    if first.startswith("-"):
        raise ValueError(f"{first} is not an option of groute launch (-n, --hosts, --print): "
                         f"a command's options go after the command, as in groute launch -n K "
                         f"-- bfs --graph G {first} ...")
    if first.endswith(".py"):
        if local and not Path(first).is_file():
            raise ValueError(f"there is no program {first}")
        return
    if first == "launch" or first not in commands:
        runs = ", ".join(sorted(name for name in commands if name != "launch"))
        raise ValueError(f"{first!r} is not a command groute launch runs: give one of {runs}, "
                         f"or a .py program")
    commands[first].parse_args(command[1:])


#: the signals that end ``groute launch`` which it passes on to ``mpiexec``
FORWARDED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                  if hasattr(signal, name))
#: seconds ``mpiexec`` gets to end its ranks after this process was interrupted
END_WAIT_S = 10


def run_mpiexec(line) -> int:
    """Run ``line`` (an ``mpiexec`` command line) and return its exit code, passing on the
    signals that end this process (:data:`FORWARDED`): ``mpiexec`` then ends its ranks, where
    otherwise a launch ended by a scheduler, a supervisor or ``kill`` would leave ``mpiexec``
    and every rank running. Interrupted (Ctrl-C, which a terminal sends ``mpiexec`` too, or a
    SIGINT to this process alone), ``mpiexec`` is asked to end and given :data:`END_WAIT_S`
    seconds before it is killed."""
    proc = subprocess.Popen(line)
    before = {sig: signal.signal(sig, lambda sig, frame: proc.send_signal(sig))
              for sig in FORWARDED}
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(END_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 130
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _hosts(text):
    """``--hosts H1,H2``: the host names, each one word that a shell and mpiexec read as it
    is (no empty name: ``a,,b`` is a typo, and ``''`` would run everything here)."""
    if text is None:
        return None
    hosts = [h.strip() for h in text.split(",")]
    bad = [h for h in hosts if not re.fullmatch(r"[A-Za-z0-9_.:\[\]-]+", h)]
    if bad:
        raise ValueError(f"--hosts {text!r}: {bad[0]!r} is not a host name (letters, digits, "
                         f"'.', '-', '_', ':' and [] for IPv6, separated by commas)")
    return hosts


def run(args) -> int:
    hosts = _hosts(args.hosts)
    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.ranks is None:
        if command and command[0].startswith("-"):
            check_command(command, args.commands)           # says where the option goes
        raise ValueError("-n/--ranks is required: the processes to start")
    if command:
        check_command(command, args.commands, local=hosts is None)
    line = launch_command(args.ranks, command, hosts=hosts)
    if args.print_only:
        print(shlex.join(line))     # pasted into a shell, it runs what launch would
        return 0
    return run_mpiexec(line)
