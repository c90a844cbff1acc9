"""The command line as a NetworkX user meets it (issue 39): ``--output -`` and bad outputs
refused before the run, the Python names as subcommands, the engine options in one "advanced"
group, every algorithm in ``groute --help``, what CPU virtual devices are."""
import json
import os

import numpy as np
import pytest

from groute import registry
from groute.cli import build_parser, main

pytestmark = pytest.mark.timeout(120)

RUN = ["--backend", "cpu", "--devices", "1", "--repeat", "1"]


def test_output_dash_writes_the_answer_to_stdout_and_the_summary_to_stderr(capsys):
    assert main(["bfs", "--graph", "grid:5", "--source", "0", "--output", "-", *RUN]) == 0
    out, err = capsys.readouterr()
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 25 and all(len(r) == 2 for r in rows)
    assert dict((int(v), int(d)) for v, d in rows)[24] == 8
    assert err.startswith("bfs grid:5 from 0:")
    assert main(["pr", "--graph", "grid:5", "--output", "-", "--json", *RUN]) == 0
    out, err = capsys.readouterr()
    assert sum(float(line.split()[1]) for line in out.splitlines()) == pytest.approx(1.0)
    assert json.loads(err)["app"] == "pr"
    assert main(["bfs", "--graph", "grid:5", "--output", "-", "--predecessors", "-",
                 *RUN]) == 1
    assert "both ask for standard output" in capsys.readouterr().err


@pytest.fixture
def no_run(monkeypatch):
    """Loading the graph (the first step of a run) fails the test: a refused output must be
    refused before it."""
    import groute.graph

    def loaded(*args, **kwargs):
        raise AssertionError("the graph was loaded before the output was checked")
    monkeypatch.setattr(groute.graph, "load_graph", loaded)


@pytest.mark.parametrize("command", ["bfs", "sssp", "pr", "katz", "cc", "kcore", "scc",
                                     "betweenness"])
def test_an_output_that_cannot_be_written_is_refused_before_the_run(command, tmp_path, no_run,
                                                                    capsys):
    missing = tmp_path / "no" / "such" / "dir" / "answer.csv"
    assert main([command, "--graph", "grid:5", "--output", str(missing), *RUN]) == 1
    err = capsys.readouterr().err
    assert f"groute {command}: error: --output {missing}: there is no directory" in err
    folder = tmp_path / "answer.csv"
    folder.mkdir()
    assert main([command, "--graph", "grid:5", "--output", str(folder), *RUN]) == 1
    assert f"--output {folder}: a directory, not a file" in capsys.readouterr().err


def test_an_output_that_would_overwrite_the_graph_or_the_other_output_is_refused(tmp_path,
                                                                                capsys,
                                                                                monkeypatch):
    """Paths are compared as files, not as spellings: ``sub/../o.csv`` is ``o.csv``, and a
    relative ``g.txt`` is the graph given by its absolute path."""
    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n2 3\n")
    assert main(["bfs", "--graph", str(graph), "--output", str(graph), *RUN]) == 1
    assert f"--output {graph}: the same file as --graph" in capsys.readouterr().err
    assert graph.read_text() == "0 1\n1 2\n2 3\n"
    out = tmp_path / "o.csv"
    (tmp_path / "sub").mkdir()
    assert main(["bfs", "--graph", str(graph), "--output", str(out),
                 "--predecessors", f"{tmp_path}/sub/../o.csv", *RUN]) == 1
    assert "--predecessors" in capsys.readouterr().err and not out.exists()
    monkeypatch.chdir(tmp_path)
    assert main(["bfs", "--graph", str(graph), "--output", "g.txt", *RUN]) == 1
    assert "--output g.txt: the same file as --graph" in capsys.readouterr().err
    assert main(["bfs", "--graph", str(graph), "--output", str(out),
                 "--predecessors", str(tmp_path / "p.csv"), *RUN]) == 0
    assert out.exists() and (tmp_path / "p.csv").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes into a read-only directory")
def test_a_read_only_directory_is_refused_before_the_run(tmp_path, no_run, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert main(["cc", "--graph", "grid:5", "--output", str(folder / "c.csv"), *RUN]) == 1
        assert "cannot write into" in capsys.readouterr().err
    finally:
        folder.chmod(0o700)


def test_an_unknown_suffix_is_refused_listing_the_formats(tmp_path, no_run, capsys):
    for name in ("answer.dat", "answer"):
        assert main(["sssp", "--graph", "grid:5", "--output", str(tmp_path / name),
                     *RUN]) == 1
        err = capsys.readouterr().err
        for suffix in (".npy", ".npz", ".csv", ".json", ".txt", "--output -"):
            assert suffix in err, (name, suffix)
    assert main(["bfs", "--graph", "grid:5", "--predecessors", str(tmp_path / "p.out"),
                 *RUN]) == 1
    assert "--predecessors" in capsys.readouterr().err


def test_a_txt_output_is_the_text_lines(tmp_path):
    path = tmp_path / "depths.txt"
    assert main(["bfs", "--graph", "grid:4", "--source", "0", "--output", str(path), *RUN]) == 0
    rows = np.loadtxt(path, dtype=np.int64)
    assert rows.shape == (16, 2) and rows[15].tolist() == [15, 6]


@pytest.mark.parametrize("alias, name", [("pagerank", "pr"), ("core_number", "kcore"),
                                         ("betweenness_centrality", "betweenness")])
def test_the_python_names_are_subcommands(alias, name, capsys):
    assert main([alias, "--graph", "grid:5", "--json", *RUN]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert main([name, "--graph", "grid:5", "--json", *RUN]) == 0
    theirs = json.loads(capsys.readouterr().out)
    assert mine["app"] == theirs["app"] == name


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return parser, action.choices


#: the options that say how a run is scheduled, not what it computes
ADVANCED = {"--mode", "--partition", "--no-priority", "--delta", "--routing", "--exchange",
            "--sweeps", "--push-rule", "--bsp-kernel", "--inplace", "--direction", "--segment-edges",
            "--buffers", "--no-afforest", "--sample-rounds", "--rest", "--link", "--persistent"}


@pytest.mark.parametrize("command", ["bfs", "sssp", "pr", "katz", "cc", "kcore", "scc",
                                     "betweenness"])
def test_the_engine_options_are_in_one_advanced_group(command):
    _, commands = _subparsers()
    sub = commands[command]
    groups = {g.title: {s for a in g._group_actions for s in a.option_strings}
              for g in sub._action_groups}
    assert [g.title for g in sub._action_groups].count("advanced") == 1
    everywhere = set().union(*groups.values())
    assert everywhere & ADVANCED and everywhere & ADVANCED <= groups["advanced"], command
    assert groups["advanced"] <= ADVANCED, command


def test_the_help_lists_every_registered_algorithm(capsys):
    parser, commands = _subparsers()
    top = " ".join(parser.format_help().split())
    demo = " ".join(commands["demo"].format_help().split()) + top
    for entry in registry.ALGORITHMS.values():
        assert entry.label in top and entry.label in demo, entry.name


def test_info_says_what_cpu_virtual_devices_are(capsys):
    assert main(["info", "--backend", "cpu", "--devices", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"all 3 share this machine's {os.cpu_count()} cores" in out
    assert "run no faster than one" in out
    assert main(["info", "--backend", "cpu", "--devices", "2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cpu_cores"] == os.cpu_count() and "virtual devices" in info["note"]


@pytest.mark.parametrize("given, want", [("on", True), ("off", False), ("auto", "auto"),
                                         (None, "auto")])
def test_persistent_on_the_command_line_is_the_tuning_s(given, want, monkeypatch):
    """``--persistent on|off|auto`` becomes PageRankTuning.persistent (True, False, "auto");
    not given, the environment's tuning stands."""
    import argparse
    from apps.iterate_cli import tuning_from
    monkeypatch.delenv("GROUTE_PR_SWEEPS", raising=False)
    args = argparse.Namespace(sweeps=None, persistent=given)
    assert tuning_from(args).persistent == want


def test_persistent_on_where_it_cannot_run_is_an_error_naming_why(capsys):
    assert main(["pr", "--graph", "grid:6", "--backend", "cpu", "--persistent", "on"]) != 0
    assert "persistent=True cannot run here: it needs CUDA devices" in capsys.readouterr().err


def test_bench_and_topo_refuse_outputs_before_measuring(tmp_path, monkeypatch, capsys):
    """A --json or --markdown that is a folder, a --plot that is a file: the run measured for
    minutes, then failed to write (and --from-json of a folder or a binary file said neither
    the option nor what is wrong)."""
    import groute.bench.runner
    import groute.topology.runner

    def measured(*args, **kwargs):
        raise AssertionError("measured before the outputs were checked")
    monkeypatch.setattr(groute.bench.runner, "run_suite", measured)
    monkeypatch.setattr(groute.topology.runner, "run_benchmarks", measured)
    folder, a_file = tmp_path / "adir", tmp_path / "junk.mtx"
    folder.mkdir()
    a_file.write_bytes(b"\xae\x00binary")
    bench = ["bench", "--preset", "cpu"]
    topo = ["topo", "map", "--quick", "--backend", "cpu"]
    for command in (bench, topo):
        for option in ("--json", "--markdown"):
            assert main([*command, option, str(folder)]) == 1
            assert f"{option} {folder}: a directory, not a file" in capsys.readouterr().err
        assert main([*command, "--plot", str(a_file)]) == 1
        assert f"--plot {a_file}: a file, not a folder" in capsys.readouterr().err
    for command in (["bench"], ["topo", "map"]):
        assert main([*command, "--from-json", str(folder)]) == 1
        assert f"{folder}: a directory, not a" in capsys.readouterr().err
        assert main([*command, "--from-json", str(a_file)]) == 1
        err = capsys.readouterr().err
        assert f"{a_file}: not JSON" in err or f"{a_file}: not a JSON file" in err


def test_bench_and_topo_refuse_an_output_over_an_input_or_over_each_other(tmp_path,
                                                                           monkeypatch, capsys):
    """bench's --markdown over its --graphs file destroyed the graph, --markdown over
    --from-json's report replaced it (rc 0), --json and --markdown on one file kept only one;
    a saved report named twice listed its cases twice, a missing one said only [Errno 2];
    topo --from-json took --json and measuring options and did nothing with them, and a
    benchmark the report lacks printed nothing."""
    import groute.bench.runner
    import groute.topology.runner

    def measured(*args, **kwargs):
        raise AssertionError("measured before the outputs were checked")
    monkeypatch.setattr(groute.bench.runner, "run_suite", measured)
    monkeypatch.setattr(groute.topology.runner, "run_benchmarks", measured)
    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n")
    assert main(["bench", "--backend", "cpu", "--apps", "bfs", "--graphs", f"grid:4,{graph}",
                 "--devices", "1", "--markdown", str(graph)]) == 1
    assert f"--markdown {graph}: the same file as --graphs" in capsys.readouterr().err
    assert graph.read_text() == "0 1\n1 2\n"
    same = tmp_path / "same"
    for command in (["bench", "--preset", "cpu"], ["topo", "map", "--quick", "--backend", "cpu"]):
        assert main([*command, "--json", str(same), "--markdown", str(same)]) == 1
        assert f"--markdown {same}: the same file as --json" in capsys.readouterr().err
    bench_report, topo_report = tmp_path / "b.json", tmp_path / "t.json"
    bench_report.write_text(json.dumps({"schema": "groute-bench/1", "cases": []}))
    from groute.topology.report import SCHEMA
    topo_report.write_text(json.dumps({"schema": SCHEMA, "benchmarks": []}))
    for command, report in ((["bench"], bench_report), (["topo", "map"], topo_report)):
        assert main([*command, "--from-json", str(report), "--markdown", str(report)]) == 1
        assert f"--markdown {report}: the same file as --from-json" in capsys.readouterr().err
        assert main([*command, "--from-json", str(tmp_path / "none.json")]) == 1
        assert (f"--from-json {tmp_path / 'none.json'}: cannot read it (No such file"
                in capsys.readouterr().err)
    assert json.loads(bench_report.read_text())["schema"] == "groute-bench/1"
    assert main(["bench", "--from-json", f"{bench_report},{bench_report}"]) == 1
    assert f"--from-json names {bench_report} twice" in capsys.readouterr().err
    assert main(["topo", "--from-json", str(topo_report), "--quick", "--json",
                 str(tmp_path / "t3.json")]) == 1
    assert "measures nothing; drop --quick, --json" in capsys.readouterr().err
    assert main(["topo", "map", "--from-json", str(topo_report)]) == 1
    assert "the report holds no map (it has none)" in capsys.readouterr().err


def test_an_upper_case_numpy_suffix_writes_the_file_named(tmp_path):
    """np.save and np.savez add their suffix to a name they do not see as theirs: a.NPY was
    written as a.NPY.npy."""
    for name in ("a.NPY", "b.NPZ"):
        path = tmp_path / name
        assert main(["bfs", "--graph", "grid:4", "--source", "0", "--output", str(path),
                     *RUN]) == 0
        assert path.exists() and not list(tmp_path.glob(f"{name}.*"))
        loaded = np.load(path)
        depths = loaded["depth"] if name == "a.NPY" else loaded["values"]
        assert depths.tolist()[:2] == [0, 1]


def test_an_output_the_system_refuses_at_the_end_names_the_option(tmp_path, monkeypatch,
                                                                   capsys):
    """A place that passes the checks made before the run (``/proc``) but refuses the write:
    the error named neither the option nor the path's role."""
    import groute.apps.app_cli as app_cli

    def refused(*args):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(app_cli, "_write_output", refused)
    out = tmp_path / "d.csv"
    assert main(["bfs", "--graph", "grid:5", "--output", str(out), *RUN]) == 1
    assert f"--output {out}: cannot write it (Permission denied)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["pr", "--inplace", "--devices", "2"], "--inplace sweeps in place on one device; --devices 2"),
    (["pr", "--inplace", "--mode", "async"], "--inplace applies to --mode bsp; --mode async"),
    (["pr", "--bsp-kernel", "coo", "--mode", "async"], "--bsp-kernel applies to --mode bsp"),
    (["katz", "--sweeps", "3", "--mode", "bsp"], "--sweeps applies to --mode async; --mode bsp"),
    (["pr", "--push-rule", "degree", "--mode", "bsp"], "--push-rule applies to --mode async"),
    (["pr", "--sweeps", "3"], "--sweeps applies to --mode async; --mode auto, which runs bsp"),
    (["katz", "--push-rule", "degree"], "--push-rule applies to --mode async; --mode auto, "
                                        "which runs bsp"),
    (["cc", "--no-afforest", "--sample-rounds", "3"], "--sample-rounds counts Afforest's "
                                                      "sampling; --no-afforest leaves it unused"),
    (["bfs", "--delta", "3", "--no-priority"], "--delta is the soft priority's step; "
                                               "--no-priority leaves it unused")])
def test_an_option_the_run_would_leave_unused_is_refused_before_it(argv, message, no_run,
                                                                  capsys):
    """Each ran to the end with the option silently ignored (--mode auto's too, where the
    mode rule always runs the other mode)."""
    assert main([*argv, "--graph", "grid:5", "--backend", "cpu"]) == 1
    assert f"groute {argv[0]}: error: {message}" in capsys.readouterr().err


def test_a_delta_the_run_leaves_unused_is_said(caplog):
    """--delta beside a run whose priority rule turned soft priority off (bsp on CPU devices)
    was dropped without a word."""
    with caplog.at_level("WARNING"):
        assert main(["sssp", "--graph", "grid:5", "--mode", "bsp", "--delta", "5", *RUN]) == 0
    assert any("--delta 5 left unused: soft priority was off in this run" in r.getMessage()
               for r in caplog.records)


def test_an_integer_source_is_written_in_digits(capsys):
    """Python's int() read "1_0" as vertex 10: a typo ran from another vertex."""
    for text in ("1_0", "x", "1.0"):
        assert main(["bfs", "--graph", "grid:5", "--source", text, *RUN]) == 1
        assert f"--source {text!r}: the vertex ids of grid:5 are integers" in \
            capsys.readouterr().err
    assert main(["bfs", "--graph", "grid:5", "--sources", " 3, +4", *RUN]) == 0


def test_a_source_named_twice_counts_once(capsys):
    assert main(["bfs", "--graph", "grid:5", "--sources", "1,2,1", *RUN]) == 0
    assert "from 2 sources" in capsys.readouterr().out


@pytest.mark.parametrize("option, value, message", [
    ("--sample-rounds", "-1", "expected a number >= 0, got -1"),
    ("--segment-edges", "0", "expected a number >= 1, got 0"),
    ("--segment-edges", "-5", "expected a number >= 1, got -5"),
    ("--segment-edges", "inf", "expected a whole number (1e6 is one)"),
    ("--segment-edges", "1.5", "expected a whole number (1e6 is one)"),
    ("--buffers", "0", "expected a number >= 1, got 0")])
def test_cc_counts_are_checked_as_the_command_s_options(option, value, message, capsys):
    """Each a one-line error naming the option, not the tuning's fields or a traceback."""
    with pytest.raises(SystemExit):
        main(["cc", "--graph", "grid:5", option, value, *RUN])
    assert f"argument {option}: {message}" in capsys.readouterr().err
    assert main(["cc", "--graph", "grid:5", "--segment-edges", "1e3", "--sample-rounds", "0",
                 *RUN]) == 0


@pytest.mark.parametrize("argv, prefix", [
    (["katz", "--graph", "grid:5", "--unweighted"], "groute katz: error: "),
    (["data", "list", "--json"], "groute data list: error: "),
    (["--bogus"], "groute: error: ")])
def test_an_unknown_option_is_reported_by_its_subcommand(argv, prefix, capsys):
    """argparse reported a subcommand's unknown options under the top-level usage."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"{prefix}unrecognized arguments: {argv[-1]}" in err
    assert err.startswith(f"usage: {prefix.split(':')[0]} ")


def test_a_command_that_reads_no_weights_takes_a_file_with_negative_ones(tmp_path, capsys):
    """BFS, CC, k-core, SCC, betweenness by hops and unweighted PageRank never read the
    weights: a file's negative ones refused the whole graph, naming a Python argument."""
    graph = tmp_path / "neg.mtx"
    graph.write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 -1\n2 3 2\n")
    for argv in (["bfs"], ["cc"], ["kcore"], ["scc"], ["betweenness"], ["pr", "--unweighted"]):
        assert main([*argv, "--graph", str(graph), *RUN]) == 0, argv
    capsys.readouterr()
    # a command that reads them says how to do without, not load_graph's argument
    for argv, hint in ((["sssp"], " (groute bfs reads none)\n"),
                       (["pr"], " (--unweighted reads none)\n"), (["katz"], "\n")):
        assert main([*argv, "--graph", str(graph), *RUN]) == 1
        err = capsys.readouterr().err
        assert f"neg.mtx, line 3: negative weight -1: weights must be >= 0{hint}" in err, err
