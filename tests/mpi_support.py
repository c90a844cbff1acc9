"""Running a test program as several MPI processes (``mpiexec -n K``), under a timeout.

The ``mpiexec`` is the one ``groute launch`` uses (the mpich wheel's, installed by the test
extras, or a site's on ``PATH``); where there is none, or this Python has no mpi4py, the
multi-process tests are skipped saying so.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from groute.commands.launch import find_mpiexec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MPIEXEC = find_mpiexec()
WHY_NOT = (None if MPIEXEC is not None and importlib.util.find_spec("mpi4py") is not None else
           "no mpiexec and mpi4py here (pip install -e '.[test]' brings the mpich wheel and "
           "mpi4py)")
# Open MPI's mpiexec refuses to start as root unless told twice; test machines (containers) run
# as root, and MPICH's ignores these variables
ROOT_OVERRIDE = ({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
                 if hasattr(os, "geteuid") and os.geteuid() == 0 else {})
needs_mpi = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def rank_environment(env=None) -> dict:
    """This process's environment for ranks: this checkout first on ``PYTHONPATH`` (ahead of
    what was there: a GPU machine's staged wheels), Open MPI's root override, then ``env``."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **ROOT_OVERRIDE, **(env or {})}


def run_ranks(n: int, args, *, timeout: float = 90, env=None) -> subprocess.CompletedProcess:
    """``mpiexec -n n PYTHON args...`` from the repository root, its output captured; the whole
    process group is killed if it runs past ``timeout`` (the test then fails naming it)."""
    line = [MPIEXEC, "-n", str(n), sys.executable, *map(str, args)]
    environment = rank_environment(env)
    proc = subprocess.Popen(line, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=environment, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(line)} ran past {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    return subprocess.CompletedProcess(line, proc.returncode, out, err)


def program(name: str) -> Path:
    """A program of ``tests/ranks/`` that the tests run as several processes."""
    return HERE / "ranks" / name
