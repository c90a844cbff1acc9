"""``groute launch``: mpiexec for people who have never used MPI; a missing MPI is one clear
line."""
import subprocess
import sys

import pytest

from groute.cli import main
from groute.commands import launch

from mpi_support import ROOT, needs_mpi, program, rank_environment


def test_the_command_line_it_runs(capsys):
    assert main(["launch", "-n", "3", "--hosts", "a,b", "--print", "--", "bfs", "--graph",
                 "kron:10"]) == 0
    line = capsys.readouterr().out.split()
    assert line[1:5] == ["-n", "3", "-hosts", "a,b"]
    assert line[5:] == [sys.executable, "-m", "groute", "bfs", "--graph", "kron:10"]
    assert launch.launch_command(2, ["prog.py", "x"], mpiexec="mpx") == \
        ["mpx", "-n", "2", sys.executable, "prog.py", "x"]


@pytest.mark.parametrize("says,flag", [("mpiexec (OpenRTE) 4.1.6\nReport bugs to "
                                        "http://www.open-mpi.org/community/help/", "--host"),
                                       ("HYDRA build details:\n    Version: 4.2.0", "-hosts"),
                                       (None, "-hosts")])
def test_hosts_go_as_the_mpiexec_found_takes_them(tmp_path, says, flag):
    """Open MPI's mpiexec (the GPU image's) takes --host, MPICH's Hydra -hosts: told by what
    ``mpiexec --version`` prints (a launcher that cannot say is taken for MPICH's)."""
    exe = tmp_path / "mpiexec"
    exe.write_text("#!/bin/sh\n" + (f"printf '%s\\n' '{says}'\n" if says else "exit 1\n"))
    exe.chmod(0o755)
    line = launch.launch_command(2, ["bfs"], hosts=["a", "b"], mpiexec=str(exe))
    assert line[3:5] == [flag, "a,b"]
    assert launch.is_open_mpi(str(exe)) is (flag == "--host")


def test_a_missing_mpiexec_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert launch.find_mpiexec() is None
    assert main(["launch", "-n", "2", "--", "bfs", "--graph", "kron:10"]) == 1
    err = capsys.readouterr().err
    assert "groute launch: error: no mpiexec beside" in err and "groute[mpi]" in err


def test_a_command_is_needed(capsys):
    assert main(["launch", "-n", "2"]) == 1
    assert "needs a command after --" in capsys.readouterr().err


@needs_mpi
def test_it_runs_a_program_as_ranks():
    done = subprocess.run([sys.executable, "-m", "groute", "launch", "-n", "2", "--",
                           str(program("runtime_checks.py")), "cpu", "collectives", "20"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=rank_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("collectives ok") == 2
