"""``groute launch``: mpiexec for people who have never used MPI; a missing MPI is one clear
line."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groute.cli import main
from groute.commands import launch

from mpi_support import ROOT, needs_mpi, program, rank_environment


def test_the_command_line_it_runs(capsys, monkeypatch):
    monkeypatch.setattr(launch, "is_open_mpi", lambda exe: False)   # the mpich wheel's
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    assert main(["launch", "-n", "3", "--hosts", "a,b", "--print", "--", "bfs", "--graph",
                 "kron:10"]) == 0
    line = capsys.readouterr().out.split()
    assert line[1:5] == ["-n", "3", "-hosts", "a,b"]
    assert line[5:] == [sys.executable, "-m", "groute", "bfs", "--graph", "kron:10"]
    assert launch.launch_command(2, ["prog.py", "x"], mpiexec="mpx") == \
        ["mpx", "-n", "2", sys.executable, "prog.py", "x"]


def test_hosts_are_host_names_and_the_printed_line_runs_as_it_reads(capsys, monkeypatch):
    """A host list with an empty or a shell-active name is refused (``''`` ran everything
    here, ``a;rm -rf x`` was printed for pasting as it is); the printed line is quoted."""
    monkeypatch.setattr(launch, "is_open_mpi", lambda exe: False)
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    for hosts in ("", ",,", "a,,b", "a;rm -rf x", "a b"):
        assert main(["launch", "-n", "2", "--hosts", hosts, "--print", "--", "bfs"]) == 1
        assert "is not a host name" in capsys.readouterr().err
    assert main(["launch", "-n", "2", "--hosts", "n1, n2.local,[fe80::1]", "--print", "--",
                 "bfs", "--graph", "my graph.txt"]) == 0
    line = capsys.readouterr().out.strip()
    assert "-hosts 'n1,n2.local,[fe80::1]'" in line and line.endswith("--graph 'my graph.txt'")


@pytest.mark.parametrize("says,open_mpi", [("mpiexec (OpenRTE) 4.1.6\nReport bugs to "
                                            "http://www.open-mpi.org/community/help/", True),
                                            ("mpiexec (Open MPI) 5.0.3", True),
                                            ("HYDRA build details:\n    Version: 4.2.0", False),
                                            (None, False)])
def test_the_mpiexec_found_is_told_by_what_it_prints(tmp_path, says, open_mpi):
    """Open MPI's mpiexec (the GPU image's) or MPICH's Hydra, by ``mpiexec --version`` (a
    launcher that cannot say is taken for MPICH's)."""
    exe = tmp_path / "mpiexec"
    exe.write_text("#!/bin/sh\n" + (f"printf '%s\\n' '{says}'\n" if says else "exit 1\n"))
    exe.chmod(0o755)
    assert launch.is_open_mpi(str(exe)) is open_mpi


def test_hosts_go_as_each_mpiexec_takes_them(monkeypatch):
    """Hydra deals the ranks out over -hosts; Open MPI needs each host's slots (--host a:S):
    one slot each would refuse 8 ranks on 2 hosts."""
    assert launch.host_options(8, ["a", "b"], open_mpi=False) == ["-hosts", "a,b"]
    assert launch.host_options(8, ["a", "b"], open_mpi=True) == ["--host", "a:4,b:4"]
    assert launch.host_options(5, ["a", "b"], open_mpi=True) == ["--host", "a:3,b:3"]
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(launch, "is_open_mpi", lambda exe: True)
    assert launch.launch_command(4, ["bfs"], hosts=["a", "b"], mpiexec="mpx")[:5] == \
        ["mpx", "-n", "4", "--host", "a:2,b:2"]


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


def test_a_commands_option_before_the_command_is_named_not_a_missing_n(capsys, monkeypatch):
    """``launch --backend cpu -n 2 -- bfs`` said -n/--ranks was required: the option began the
    command, which took -n with it."""
    monkeypatch.setattr(launch.subprocess, "Popen", lambda *a, **k: pytest.fail("started"))
    for argv in (["--backend", "cpu", "-n", "2", "--", "bfs", "--graph", "kron:6"],
                 ["-n", "2", "--timeout", "5", "--", "bfs", "--graph", "kron:6"]):
        with pytest.raises(SystemExit) as ended:
            main(["launch", *argv])
        assert ended.value.code == 2
        assert f"unrecognized arguments: {argv[0] if argv[0] != '-n' else argv[2]}" in \
            capsys.readouterr().err
    assert main(["launch", "-n", "2", "--", "--backend", "cpu", "bfs"]) == 1
    assert "--backend is not an option of groute launch (-n, --hosts, --print): a command's " \
        "options go after the command" in capsys.readouterr().err
    assert main(["launch", "--", "bfs", "--graph", "kron:6"]) == 1
    assert "-n/--ranks is required" in capsys.readouterr().err


def test_the_command_may_follow_without_dashes(capsys, monkeypatch):
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    assert main(["launch", "-n", "2", "--print", "bfs", "--graph", "kron:10", "--timeout",
                 "5"]) == 0
    assert capsys.readouterr().out.split()[-6:] == ["groute", "bfs", "--graph", "kron:10",
                                                    "--timeout", "5"]


@pytest.mark.parametrize("command, code, error", [
    (["frobnicate"], 1, "groute launch: error: 'frobnicate' is not a command groute launch "
                        "runs: give one of bench, betweenness"),
    (["launch", "-n", "2", "--", "bfs"], 1, "'launch' is not a command groute launch runs"),
    (["no_such_program.py"], 1, "groute launch: error: there is no program no_such_program.py"),
    (["bfs"], 2, "groute bfs: error: the following arguments are required: --graph"),
    (["pr", "--graph", "kron:8", "--mode", "sideways"], 2,
     "groute pr: error: argument --mode: invalid choice: 'sideways'"),
])
def test_a_command_every_process_would_refuse_is_refused_once_before_any_starts(
        capsys, monkeypatch, command, code, error):
    """What each of K processes would print K times, the launch says once, starting none."""
    monkeypatch.setattr(launch.subprocess, "Popen", lambda *a, **k: pytest.fail("started"))
    if code == 2:
        with pytest.raises(SystemExit) as ended:
            main(["launch", "-n", "2", "--", *command])
        assert ended.value.code == 2
    else:
        assert main(["launch", "-n", "2", "--", *command]) == 1
    err = capsys.readouterr().err
    assert error in err and err.count("error:") == 1, err


def test_a_program_on_other_hosts_is_not_looked_for_here(capsys, monkeypatch):
    """With --hosts the program may exist only on those hosts: the launch leaves it to them
    (a groute command's arguments are still checked once here)."""
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    assert main(["launch", "-n", "2", "--hosts", "a,b", "--print", "--",
                 "only_there.py", "x"]) == 0
    assert capsys.readouterr().out.split()[-2:] == ["only_there.py", "x"]


@needs_mpi
def test_it_runs_a_program_as_ranks():
    done = subprocess.run([sys.executable, "-m", "groute", "launch", "-n", "2", "--",
                           str(program("runtime_checks.py")), "cpu", "collectives", "20"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=rank_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("collectives ok") == 2


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@needs_mpi
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_launch_ended_by_a_signal_ends_mpiexec_and_every_rank():
    """SIGTERM to groute launch alone (a scheduler's, a supervisor's, kill PID) ends mpiexec
    and the ranks too: none is left running without it."""
    proc = subprocess.Popen([sys.executable, "-m", "groute", "launch", "-n", "2", "--",
                             str(program("idle_checks.py")), "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=rank_environment(),
                            start_new_session=True)
    try:
        pids = [int(proc.stdout.readline().split()[-1]) for _ in range(2)]
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while not all(_gone(p) for p in pids + [int(c) for c in children]) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids + [int(c) for c in children] if not _gone(p)]
        assert not left, f"still running after groute launch ended: {left}"
    finally:                    # whatever is left of the job (nothing, once it passes)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
