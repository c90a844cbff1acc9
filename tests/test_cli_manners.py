"""Command-line manners: bad --timeout values, a reader that closes the pipe, the quick bench
preset on CPU devices, default device counts that fit the graph, and library errors that never
name a command-line flag."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from groute.cli import main

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ --timeout
@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e300", "1e10"])
def test_bad_timeout_is_a_one_line_error(value):
    """No traceback: one line on stderr naming the option (it named the Python keyword),
    exit status 1."""
    proc = subprocess.run([sys.executable, "-m", "groute", "bfs", "--graph", "grid:3",
                           "--backend", "cpu", "--timeout", value],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--timeout must be" in lines[0] and "Traceback" not in proc.stderr, \
        proc.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["0", "nan", "soon", "1e300"])
def test_bad_timeout_in_the_environment_is_a_one_line_error(value):
    """``GROUTE_TIMEOUT`` as the flag: one line naming the variable; and ``import groute``
    still works under it (the value is read when a wait needs it)."""
    env = {**_env(), "GROUTE_TIMEOUT": value}
    proc = subprocess.run([sys.executable, "-m", "groute", "bfs", "--graph", "grid:3",
                           "--backend", "cpu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "GROUTE_TIMEOUT" in lines[0], proc.stderr
    imported = subprocess.run([sys.executable, "-c", "import groute"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr


# ------------------------------------------------------------------ closed pipe
class _ClosedPipe:
    """A stdout whose reader went away: every write fails as a closed pipe does."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise OSError("not a real file")


@pytest.mark.timeout(60)
def test_closed_stdout_still_writes_the_output_file(tmp_path, monkeypatch):
    out = tmp_path / "depths.npy"
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    rc = main(["bfs", "--graph", "grid:5", "--backend", "cpu", "--devices", "2", "--repeat", "1",
               "--stats", "--output", str(out)])
    assert rc == 0
    assert np.load(out)["depth"].shape == (25,)


@pytest.mark.timeout(60)
def test_closed_pipe_ends_quietly_in_a_real_process(tmp_path):
    """``groute bfs ... | head`` with the reader gone before the first line: exit 0, nothing on
    stderr (no 'Broken pipe', no 'Exception ignored'), and the --output file written."""
    out = tmp_path / "d.csv"
    proc = subprocess.Popen([sys.executable, "-m", "groute", "bfs", "--graph", "grid:5",
                             "--backend", "cpu", "--devices", "1", "--repeat", "1", "--stats",
                             "--output", str(out)],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                     # the reader goes away before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""
    assert out.read_text().splitlines()[0] == "id,depth"


# ------------------------------------------------------------------ bench --preset quick
@pytest.mark.timeout(60)
def test_quick_preset_on_cpu_says_what_to_run(capsys):
    assert main(["bench", "--preset", "quick", "--backend", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "sized for GPUs" in err and "--preset cpu" in err


def test_quick_preset_with_own_graphs_or_on_gpus_is_allowed():
    from groute.bench.cli import check_preset_fits
    from groute.bench.suite import make_config
    check_preset_fits(make_config("quick", backend="cpu", graphs=["kron:8"]), graphs_given=True)
    check_preset_fits(make_config("cpu"), graphs_given=False)
    with pytest.raises(ValueError, match="sized for GPUs"):
        check_preset_fits(make_config("quick", backend="cpu"), graphs_given=False)


# ------------------------------------------------------------------ default device count
def test_a_contexts_default_device_count():
    from groute.runtime.context import DEFAULT_CPU_DEVICES, default_device_count
    assert default_device_count("cpu") == DEFAULT_CPU_DEVICES


@pytest.mark.timeout(60)
@pytest.mark.parametrize("app", ["bfs", "sssp", "pr", "cc"])
def test_default_devices_on_the_cpu_backend_is_one(app):
    """``devices="auto"`` (the default) runs the algorithms on one CPU virtual device: several
    share the host's cores, a testing mode asked for with devices=K."""
    from groute.apps.bfs import bfs
    from groute.apps.cc import connected_components
    from groute.apps.pr import pagerank
    from groute.apps.sssp import sssp
    edges = (np.array([0, 1]), np.array([1, 2]))
    run = {"bfs": lambda: bfs(edges, 0, backend="cpu"), "sssp": lambda: sssp(edges, 0, backend="cpu"),
           "pr": lambda: pagerank(edges, backend="cpu"),
           "cc": lambda: connected_components(edges, symmetric=True, backend="cpu")}[app]
    devices = run().stats["devices"]           # a count (BFS, SSSP) or the devices' names
    assert (devices if isinstance(devices, int) else len(devices)) == 1


@pytest.mark.timeout(60)
def test_cli_default_devices_run_a_tiny_graph(tmp_path, capsys):
    path = tmp_path / "tiny.mtx"
    path.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n")
    assert main(["bfs", "--graph", str(path), "--backend", "cpu", "--repeat", "1",
                 "--source", "1"]) == 0
    assert "1 cpu device (auto)" in capsys.readouterr().out


# ------------------------------------------------------------------ library errors
#: modules that are command lines: their errors may name flags
CLI_MODULES = {"groute/cli.py", "groute/__main__.py", "groute/graph/cli.py",
               "groute/bench/cli.py", "apps/app_cli.py", "apps/traversal_cli.py",
               "topology/cli.py",
               # the bench harness's configuration is its command line: make_config validates
               # the options of `groute bench` and its errors name them
               "groute/bench/suite.py"}
CLI_DIRS = ("groute/commands/",)
#: functions inside library modules that are command lines (the apps' handlers)
CLI_FUNCTIONS = {"_cli", "register", "run_cli", "register_app"}
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _library_files():
    for top in ("groute", "apps", "topology"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            # a module named *_cli.py is an app's command line (kcore_cli, scc_cli, ...)
            if (rel not in CLI_MODULES and not rel.startswith(CLI_DIRS)
                    and not path.name.endswith("_cli.py")):
                yield rel, path


def _raised_texts(tree):
    """(line, text) of every string literal inside a ``raise`` outside CLI functions."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in CLI_FUNCTIONS:
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None and id(node) not in skip:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    yield node.lineno, part.value


def test_library_errors_never_name_command_line_flags():
    found = [f"{rel}:{line}: {text!r}" for rel, path in _library_files()
             for line, text in _raised_texts(ast.parse(path.read_text(), rel))
             if FLAG.search(text)]
    assert not found, "library errors naming CLI flags:\n" + "\n".join(found)


def test_the_flag_scan_finds_a_flag():
    tree = ast.parse('def f():\n    raise ValueError(f"use --devices {n} or fewer")\n')
    assert any(FLAG.search(t) for _, t in _raised_texts(tree))
    handler = ast.parse('def _cli(args):\n    raise ValueError("--size must be >= 0")\n')
    assert not list(_raised_texts(handler))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ------------------------------------------------------------------ several processes
@pytest.mark.parametrize("error", [ValueError("a user's error"), TypeError("a bug")])
def test_an_error_in_a_job_is_told_to_the_other_ranks(monkeypatch, capsys, error):
    """A command run as one of several processes that fails, by the user's error or a bug,
    tells the other ranks (which may be waiting for it) before ending the job; a bug keeps its
    traceback."""
    from groute import distributed
    from groute.apps import traversal_cli
    ended = []
    monkeypatch.setattr(distributed, "job_rank", lambda: 1)
    monkeypatch.setattr(distributed, "end_job", lambda code, exc=None: ended.append((code, exc)))
    monkeypatch.setattr(traversal_cli, "load", lambda args: (_ for _ in ()).throw(error))
    if isinstance(error, ValueError):
        writes = []
        monkeypatch.setattr(sys, "stderr", type("Err", (), {"write": writes.append,
                                                           "flush": lambda self: None})())
        assert main(["bfs", "--graph", "grid:3", "--backend", "cpu"]) == 1
        # in one write: another rank's line cannot come between the text and its end
        assert writes == ["[rank 1] groute bfs: error: a user's error\n"]
    else:
        with pytest.raises(TypeError):
            main(["bfs", "--graph", "grid:3", "--backend", "cpu"])
        assert "Traceback" in capsys.readouterr().err
    assert ended == [(1, error)]


# ------------------------------------------------------------------ bad input, one line each
RUN = ["--backend", "cpu", "--devices", "1", "--repeat", "1"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["bfs", "sssp"])
@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_a_graph_of_no_vertices_and_no_source_is_one_line_naming_the_file(command, text,
                                                                          tmp_path, capsys):
    path = tmp_path / "empty.txt"
    path.write_text(text)
    assert main([command, "--graph", str(path), *RUN]) == 1
    err = capsys.readouterr().err
    assert f"--graph {path}: the graph has no vertices" in err and "Traceback" not in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("weights", ["2147483647", "3.0e38"])
def test_distances_past_their_type_are_one_line(weights, tmp_path, capsys):
    """The solver's OverflowError names the vertex and the bound; the command says it in one
    line (it took the path of a bug, with a traceback)."""
    path = tmp_path / "far.txt"
    path.write_text(f"0 1 {weights}\n1 2 {weights}\n")
    assert main(["sssp", "--graph", str(path), "--source", "0", *RUN]) == 1
    err = capsys.readouterr().err
    assert "groute sssp: error: sssp: the shortest distance to vertex" in err, err
    assert "Traceback" not in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["bfs", "sssp", "betweenness"])
def test_a_sources_list_with_no_id_or_an_empty_field_is_refused(command, capsys):
    for text, said in ((",", "no vertex ids given"), ("0,,1", "an empty field"),
                       ("0,1,", "an empty field")):
        assert main([command, "--graph", "grid:5", "--sources", text, *RUN]) == 1
        assert f"--sources {text!r}: {said}" in capsys.readouterr().err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("options, said", [
    (["--size", "nan"], "--size must be a whole number >= 0, got nan"),
    (["--size", "1.5"], "--size must be a whole number"),
    (["--segment", "0"], "--segment must be a whole number >= 1"),
    (["--size", "1e30"], "--size 1,000,000,000,000,000,019,884,624,838,656: about"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--size", "100", "--cpu-delays", "-1", "--devices", "1"],
     "cpu_delays must be finite numbers of seconds >= 0"),
    (["--size", "100", "--scale", "1,2", "--cpu-delays", "0"], "1 delay(s) for 2 device(s)"),
    (["--size", "100", "--cpu-delays", "x,0", "--devices", "2"], "--cpu-delays 'x,0'"),
    (["--size", "100", "--cpu-delays", "0.1,0.1", "--devices", "4"],
     "cpu_delays: 2 delay(s) for 4 device(s)"),
])
def test_pbf_options_that_cannot_run_are_one_line_naming_them(options, said, capsys):
    assert main(["pbf", "--backend", "cpu", *options]) == 1
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_a_context_takes_one_cpu_delay_per_device(capsys):
    from groute import Context
    # one device per delay unless --devices says how many
    assert main(["pbf", "--backend", "cpu", "--size", "1000", "--cpu-delays", "0,0.001"]) == 0
    assert "2 x cpu" in capsys.readouterr().out
    for delays, said in (([0.1], "1 delay"), ([0.0, -1.0], ">= 0"), ([0.0, float("nan")], ">= 0"),
                         (["x", 0], "numbers of seconds")):
        with pytest.raises(ValueError, match=said):
            Context(2, backend="cpu", cpu_delays=delays)
    with Context(2, backend="cpu", cpu_delays=[0.0, 0.001]) as ctx:
        assert len(ctx.devices) == 2


@pytest.mark.timeout(60)
def test_more_options_that_cannot_run_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for argv, said in ((["data", "info", "grid:4", "--parts", "0"],
                        "--parts: expected a number >= 1"),
                       (["demo", "--graph", str(empty), "--backend", "cpu"],
                        f"--graph {empty}: the graph has no vertices"),
                       (["pr", "--graph", "grid:3", "--tol", "inf", *RUN],
                        "tol must be finite and > 0, got inf"),
                       (["bfs", "--graph", "grid:3", "--columns", "0,1", *RUN],
                        "a graph spec has no columns")):
        try:
            code = main(argv)
        except SystemExit as exc:               # argparse's own refusal
            code = exc.code
        err = capsys.readouterr().err
        assert code in (1, 2) and said in err and "Traceback" not in err, (argv, err)


@pytest.mark.timeout(60)
def test_a_pbf_scaling_run_refuses_a_count_it_cannot_run_before_timing_any(capsys):
    assert main(["pbf", "--backend", "cpu", "--size", "1000", "--scale", "2,100"]) == 1
    out, err = capsys.readouterr()
    assert "at most 64 virtual devices" in err and "elements in" not in out


def test_a_graph_too_large_for_host_memory_is_a_one_line_error(monkeypatch, capsys):
    """Out of memory (GraphTooLarge, a MemoryError) is the user's problem, not a bug: one
    line naming the graph, no traceback."""
    from groute.graph import budget
    monkeypatch.setattr(budget, "available_bytes", lambda: 10 * 2**20)
    assert main(["bfs", "--graph", "kron:20", "--no-cache", *RUN]) == 1
    err = capsys.readouterr().err
    assert "groute bfs: error: kron:20: up to" in err and "Traceback" not in err, err
