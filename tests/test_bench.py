"""``groute bench`` end to end: the CPU preset, wrong answers reported as FAIL, errors, bad options.

Wrong answers are injected through test-double solvers (answers from the reference, then
corrupted), never through the real apps.
"""
from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

from groute.results import AppResult
from groute.bench import make_config, run_suite
from groute.bench.report import markdown
from groute.bench.references import reference_result

pytestmark = pytest.mark.timeout(120)


def double(app, *, wrong_from=None, raise_on_devices=None, seconds=1e-3):
    """A solver class for ``app`` answering from the reference; wrong from run ``wrong_from`` on."""

    class Double:
        def __init__(self, graph, *, ctx, partition=None, mode=None, **spec_options):
            if raise_on_devices == ctx.num_devices:
                raise RuntimeError(f"injected failure on {ctx.num_devices} devices")
            self.graph, self.runs, self.closed = graph, 0, False

        def run(self, source=None):
            self.runs += 1
            values = reference_result(app, self.graph, source).copy()
            if wrong_from is not None and self.runs >= wrong_from:
                values[-1] = values[-1] + 1  # one vertex off by one: must still be caught
            return AppResult(values, seconds, {"bytes_moved": 123, "rounds": np.int64(self.runs)})

        def close(self):
            self.closed = True

    Double.__name__ = f"Double_{app}"
    return Double


def small_config(**kw):
    base = dict(apps=["bfs"], graphs=["grid:6"], devices=[1], modes=["async"], repeat=2,
                peers=["scipy"], backend="cpu", timeout=20)
    base.update(kw)
    return make_config(**base)


def our_apps_table(text):
    """The lines of the markdown's "Our apps" table (other tables have rows of the same cases)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("# Our apps"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("#"))
    return lines[start:end]


def by_key(results):
    return {(c["app"], c["graph"], c["devices"], c["mode"]): c for c in results["cases"]}


def test_correct_double_is_timed_and_verified():
    results = run_suite(small_config(apps=["bfs", "cc"]), solvers={"bfs": double("bfs"), "cc": double("cc")},
                        progress=False)
    cases = by_key(results)
    bfs = cases[("bfs", "grid:6", 1, "async")]
    assert bfs["status"] == "ok", bfs
    assert bfs["time_s"] == pytest.approx(1e-3) and bfs["repeats"] == 2
    assert bfs["verify"]["ok"] and bfs["bytes_moved"] == 123 and bfs["stats"]["rounds"] == 3
    assert bfs["speedup"]["scipy"] > 0 and bfs["time_over_floor"] > 0
    cc = cases[("cc", "grid:6", 1, None)]  # CC has no modes: one case per device count
    assert cc["status"] == "ok"
    assert all(p["status"] == "ok" for p in results["peers"]), results["peers"]


@pytest.mark.parametrize("app", ["bfs", "sssp", "pr", "cc"])
def test_wrong_answer_is_fail_and_not_timed(app):
    results = run_suite(small_config(apps=[app], peers=[]), solvers={app: double(app, wrong_from=1)},
                        progress=False)
    (case,) = results["cases"]
    assert case["status"] == "FAIL", case
    assert "time_s" not in case and "speedup" not in case
    assert not case["verify"]["ok"]
    assert "**FAIL**" in markdown(results)


def test_answer_that_goes_wrong_in_a_timed_run_is_fail():
    results = run_suite(small_config(warmup=1, repeat=3), solvers={"bfs": double("bfs", wrong_from=3)},
                        progress=False)
    (case,) = results["cases"]
    assert case["status"] == "FAIL" and "timed run" in case["note"]


def test_a_failing_case_is_recorded_and_the_suite_goes_on():
    results = run_suite(small_config(devices=[1, 2]),
                        solvers={"bfs": double("bfs", raise_on_devices=1)}, progress=False)
    cases = by_key(results)
    failed = cases[("bfs", "grid:6", 1, "async")]
    assert failed["status"] == "ERROR" and "injected failure" in failed["note"]
    assert cases[("bfs", "grid:6", 2, "async")]["status"] == "ok"


def test_partition_auto_records_what_it_chose_for_each_graph(monkeypatch):
    """The run says auto; each case on several devices names the method its graph was split
    by (the library's rule, per graph), and the report says what auto means."""
    from groute.graph import partition
    monkeypatch.setattr(partition, "auto_method",
                        lambda g: "random" if g.num_vertices > 30 else "contiguous")
    results = run_suite(small_config(graphs=["grid:5", "grid:6"], devices=[1, 2], peers=[]),
                        progress=False)
    assert results["partition"] == "auto"
    cases = by_key(results)
    assert cases[("bfs", "grid:5", 2, "async")]["partition"] == "contiguous"
    assert cases[("bfs", "grid:6", 2, "async")]["partition"] == "random"
    assert cases[("bfs", "grid:6", 1, "async")]["partition"] is None
    assert all(c["status"] == "ok" for c in results["cases"])
    assert f"partitioner for several devices: auto (per graph: {partition.AUTO_RULE}" \
        in markdown(results)


def test_a_graph_that_does_not_load_is_recorded(tmp_path):
    """A file that is there but is no graph (a missing one is refused up front)."""
    missing = str(tmp_path / "broken.mtx")
    (tmp_path / "broken.mtx").write_text("not a matrix market file\n")
    results = run_suite(small_config(graphs=[missing, "grid:5"]), solvers={"bfs": double("bfs")},
                        progress=False)
    cases = by_key(results)
    assert cases[("bfs", missing, 1, "async")]["status"] == "ERROR"
    assert "did not load" in cases[("bfs", missing, 1, "async")]["note"]
    assert cases[("bfs", "grid:5", 1, "async")]["status"] == "ok"
    assert "error" in results["graphs"][0]


def test_case_budget_cuts_repeats():
    results = run_suite(small_config(repeat=5, max_case_seconds=2.5),
                        solvers={"bfs": double("bfs", seconds=1.0)}, progress=False)
    (case,) = results["cases"]
    assert case["status"] == "ok" and case["repeats"] == 3 and "case budget" in case["note"]


def test_an_app_without_a_reference_is_reported_not_faked(monkeypatch):
    from groute.bench.specs import SPECS, BenchSpec
    monkeypatch.setitem(SPECS, "cc", BenchSpec())       # nothing to check cc against
    results = run_suite(small_config(apps=["cc"]), progress=False)
    (case,) = results["cases"]
    assert case["status"] == "n/a" and "time_s" not in case
    assert results["apps"]["cc"]["status"] == "n/a"
    assert "no reference" in markdown(results)


def test_partial_results_are_saved_after_every_step(tmp_path):
    from groute.bench.report import write_json, write_markdown
    snapshots = []

    def save(results):
        write_json(results, tmp_path / "partial.json")
        write_markdown(results, tmp_path / "partial.md")
        running = (results["running"] or {}).get("what")
        snapshots.append((len(results["cases"]), len(results["peers"]), results["finished"],
                          running))

    results = run_suite(small_config(devices=[1, 2]), solvers={"bfs": double("bfs")},
                        progress=False, on_update=save)
    spec = results["graphs"][0]["spec"]
    # each step is named when it begins (a run killed then says what it was doing), and
    # cleared once it is done and its results are saved
    assert [s for s in snapshots if s[3] is None] == [(0, 1, None, None), (1, 1, None, None),
                                                      (2, 1, None, None)]
    assert [s[3] for s in snapshots if s[3]] == [
        f"loading {spec}", f"bfs {spec} reference (groute.graph.reference.bfs (CPU))",
        f"bfs {spec} peer scipy", f"bfs {spec} 1 dev async", f"bfs {spec} 2 dev async"]
    assert "**not finished**" in (tmp_path / "partial.md").read_text()
    snapshots.clear()
    save({**results, "finished": None, "running": dict(what=f"bfs {spec} 2 dev async",
                                                        since="T", elapsed_s=3.0)})
    assert f"it was running bfs {spec} 2 dev async" in (tmp_path / "partial.md").read_text()
    assert len(json.loads((tmp_path / "partial.json").read_text())["cases"]) == 2
    assert results["finished"] is not None and "not finished" not in markdown(results)


def test_saved_runs_merge_into_one_report(tmp_path, capsys):
    from groute.bench.report import write_json
    from groute.cli import main
    first = run_suite(small_config(graphs=["grid:5"]), command="groute bench --graphs grid:5",
                      solvers={"bfs": double("bfs")}, progress=False)
    second = run_suite(small_config(graphs=["kron:6"]), command="groute bench --graphs kron:6",
                       solvers={"bfs": double("bfs", wrong_from=1)}, progress=False)
    write_json(first, tmp_path / "a.json")
    write_json(second, tmp_path / "b.json")
    code = main(["bench", "--from-json", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}",
                 "--json", str(tmp_path / "m.json"), "--markdown", str(tmp_path / "m.md"),
                 "--plot", str(tmp_path / "plots")])
    assert code == 3  # the second run has a FAIL
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [c["graph"] for c in merged["cases"]] == ["grid:5", "kron:6"]
    assert [r["command"] for r in merged["runs"]] == ["groute bench --graphs grid:5",
                                                     "groute bench --graphs kron:6"]
    text = (tmp_path / "m.md").read_text()
    assert "Run 2 of 2:" in text and "`groute bench --graphs kron:6`" in text and "**FAIL**" in text
    assert (tmp_path / "plots" / "strong_scaling.png").exists()
    assert (tmp_path / "plots" / "speedup_scipy.png").exists()
    # the same results without the scipy peer: no empty speedup plot, and the old one is gone
    from groute.bench.plots import write_plots
    for case in merged["cases"]:
        case["speedup"] = {}
    written = write_plots(merged, tmp_path / "plots")
    assert [p.name for p in written] == ["strong_scaling.png", "time_over_floor.png"]
    assert not (tmp_path / "plots" / "speedup_scipy.png").exists()
    capsys.readouterr()
    assert main(["bench", "--from-json", str(tmp_path / "a.json"), "--graphs", "grid:5"]) == 1
    assert "runs nothing; drop --graphs" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"x": 1}')
    assert main(["bench", "--from-json", str(tmp_path / "bad.json")]) == 1
    assert "not a groute bench results file" in capsys.readouterr().err


# options ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    (dict(apps=["bfz"]), "--apps: unknown 'bfz'"),
    (dict(modes=["sync"]), "--modes: unknown 'sync'"),
    (dict(peers=["matlab"]), "--peers: unknown 'matlab'"),
    (dict(graphs=[]), "no graphs"),
    # every case of these failed, said only in the table after the whole run
    (dict(graphs=["grid:4", "kron:"]), "--graphs kron:: 'kron:': empty field"),
    (dict(graphs=["no/such.mtx"]), "--graphs no/such.mtx: neither a file, a graph spec"),
    (dict(devices=[0]), "device counts must be >= 1"),
    (dict(repeat=0), "--repeat must be >= 1"),
    (dict(warmup=-1), "--warmup must be >= 0"),
    (dict(partition="kl"), "--partition must be one of"),
    (dict(max_case_seconds=0), "--max-case-seconds must be positive"),
])
def test_bad_options_name_the_problem(options, message):
    base = dict(apps=["bfs"], graphs=["grid:4"], devices=[1])
    base.update(options)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make_config(**base)
    with pytest.raises(ValueError, match="--preset must be one of"):
        make_config("fast", **base)


def bench_parser():
    from groute.bench import cli
    from groute.cli_support import common_parser
    parser = argparse.ArgumentParser(prog="groute")
    cli.register(parser.add_subparsers(dest="command"), common_parser())
    return parser


def test_cli_rejects_malformed_lists(capsys):
    with pytest.raises(SystemExit) as exc:
        bench_parser().parse_args(["bench", "--devices", "1,two"])
    assert exc.value.code == 2
    assert "expected device counts like 1,2,4,auto; got 'two'" in capsys.readouterr().err


def test_cli_reports_bad_values_as_one_line(capsys):
    from groute.cli import main
    code = main(["bench", "--apps", "bfs,bfz", "--graphs", "grid:4", "--devices", "1"])
    assert code == 1
    err = capsys.readouterr().err
    assert "groute bench: error: --apps: unknown 'bfz'" in err and "Traceback" not in err
    for option in ("--apps", "--graphs", "--modes", "--peers"):
        with pytest.raises(SystemExit):         # argparse's refusal ('' ran every app)
            main(["bench", option, "", "--devices", "1"])
        assert f"argument {option}: no items in ''" in capsys.readouterr().err


def test_other_subcommands_keep_their_single_device_count():
    # bench replaces --devices K with a list; that must not leak into the shared common options
    from groute.cli import build_parser
    parser = build_parser()
    assert parser.parse_args(["info", "--devices", "2"]).devices == 2
    assert parser.parse_args(["bench", "--devices", "1,2"]).devices == [1, 2]
    (subcommands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    info_help = subcommands.choices["info"].format_help()
    assert "--devices K" in info_help and "\n  K " not in info_help  # an option, not a positional


def test_cli_takes_a_device_list_in_place_of_the_common_count():
    args = bench_parser().parse_args(["bench", "--preset", "cpu", "--devices", "4,1,2"])
    assert args.devices == [4, 1, 2] and args.backend is None
    from groute.bench.cli import config_from_args
    cfg = config_from_args(args)
    assert cfg.devices == [1, 2, 4] and cfg.backend == "cpu" and cfg.apps == ["bfs", "sssp", "pr", "cc"]


# the CPU preset, end to end through the real CLI ---------------------------------------------------
def test_cpu_preset_end_to_end(tmp_path, capsys):
    from groute.cli import main
    out_json, out_md, plots = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "plots"
    code = main(["bench", "--preset", "cpu", "--json", str(out_json), "--markdown", str(out_md),
                 "--plot", str(plots)])
    captured = capsys.readouterr()
    results = json.loads(out_json.read_text())
    statuses = {c["status"] for c in results["cases"]}
    bad = [c for c in results["cases"] if c["status"] in ("FAIL", "ERROR")]
    assert code == (3 if bad else 0)
    assert not bad, bad                          # the real apps answer correctly on CPU devices
    assert statuses <= {"ok", "n/a"}
    assert results["schema"] == "groute-bench/1" and results["backend"] == "cpu"
    assert results["bandwidth"]["bytes_per_s"] > 0
    assert results["elapsed_s"] < 60
    expected = sum((2 if app != "cc" else 1) * 2 for app in ("bfs", "sssp", "pr", "cc")) * 2
    assert len(results["cases"]) == expected
    for case in results["cases"]:
        if case["status"] == "ok":
            assert case["verify"]["ok"] and case["time_s"] > 0 and case["min_s"] <= case["time_s"]
            assert case["speedup"]["scipy"] > 0
    for app, info in results["apps"].items():
        if info["status"] == "available":
            scipy = [p for p in results["peers"] if p["app"] == app and p["peer"] == "scipy"]
            assert len(scipy) == 2 and all(p["status"] == "ok" for p in scipy), scipy
    text = out_md.read_text()
    assert text.startswith("## Benchmark results")
    assert "- Command: `groute bench --preset cpu" in text and "- Commit: `" in text
    assert "| app | graph | devices | mode | status |" in text
    assert "--reference auto" in text and "groute.graph.reference.bfs (CPU)" in text
    assert all(r["where"] == "cpu" for r in json.loads(out_json.read_text())["references"])
    for name in ("strong_scaling.png", "speedup_scipy.png", "time_over_floor.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[" in captured.err and "/" in captured.err  # progress lines
    assert "groute bench:" in captured.out


@pytest.mark.gpu
def test_gpu_bench_runs_and_verifies():
    results = run_suite(make_config(apps=["bfs", "sssp", "pr", "cc"], graphs=["kron:10"], devices=[1],
                                    modes=["async"], repeat=2, backend="cuda",
                                    peers=["scipy", "cupy"]), progress=False)
    assert results["bandwidth"]["method"].startswith("cupy")
    assert results["bandwidth"]["bytes_per_s"] > 1e11  # any datacenter GPU copies > 100 GB/s
    assert results["machine"]["gpu_count"] >= 1 and results["machine"]["gpus"][0]["name"]
    assert not [c for c in results["cases"] if c["status"] in ("FAIL", "ERROR")], results["cases"]
    cupy_peers = [p for p in results["peers"] if p["peer"] == "cupy"]
    assert len(cupy_peers) == 4 and all(p["status"] == "ok" for p in cupy_peers), cupy_peers


@pytest.mark.gpu
@pytest.mark.multigpu
def test_multigpu_bench_runs_and_verifies():
    """On two GPUs every case verifies; on one, the two-device cases are skipped, saying the
    bench does not time logical devices (the test suite asks for them: conftest.py)."""
    from groute.bench.suite import SKIP
    from groute.device import cuda_device_count
    results = run_suite(make_config(apps=["bfs", "cc"], graphs=["grid:64"], devices=[1, 2],
                                    modes=["async", "bsp"], repeat=2, backend="cuda",
                                    peers=["scipy"]), progress=False)
    assert not [c for c in results["cases"] if c["status"] in ("FAIL", "ERROR")], results["cases"]
    two = [c for c in results["cases"] if c["devices"] == 2]
    if cuda_device_count() < 2:
        assert two and all(c["status"] == SKIP and "logical devices" in c["note"] for c in two), two


def test_markdown_names_the_peer_exchange():
    """A BFS case run by the persistent peer kernel says so in the mode column."""
    base = double("bfs")

    class PeerDouble(base):
        def run(self, source=None):
            res = super().run(source)
            res.stats["exchange"] = "peer"
            return res

    results = run_suite(small_config(modes=["bsp"]), solvers={"bfs": PeerDouble}, progress=False)
    assert "| bsp (peer) |" in markdown(results)
    plain = run_suite(small_config(modes=["bsp"]), solvers={"bfs": base}, progress=False)
    assert "| bsp |" in markdown(plain) and "(peer)" not in markdown(plain)


def test_markdown_names_the_persistent_push():
    """An asynchronous case run by the persistent push kernel says so in the mode column, and
    one pushed by the degree rule too; a persistent BSP case keeps its plain name (persistent
    is BSP's default)."""
    from groute.bench.suite import mode_label
    assert mode_label({"mode": "async", "stats": {"persistent": True}}) == "async (persistent)"
    assert mode_label({"mode": "async", "stats": {"persistent": False}}) == "async"
    assert mode_label({"mode": "async", "stats": {"persistent": True, "push_rule": "degree"}}) \
        == "async (persistent, degree push)"
    assert mode_label({"mode": "async", "stats": {"persistent": False, "push_rule": "degree"}}) \
        == "async (degree push)"
    assert mode_label({"mode": "async", "stats": {"push_rule": "uniform"}}) == "async"
    assert mode_label({"mode": "bsp", "stats": {"persistent": True}}) == "bsp"
    assert mode_label({"mode": None}, none="its only mode") == "its only mode"


def test_markdown_shows_strong_scaling_against_one_device():
    """Each case on several devices gets the one-device time of the same app, graph and mode
    over its own; one-device rows, and cases whose one-device run failed, show none."""
    def timed(seconds_by_devices):
        base = double("bfs")

        class Timed(base):
            def __init__(self, graph, *, ctx, **kw):
                super().__init__(graph, ctx=ctx, **kw)
                self.seconds = seconds_by_devices[ctx.num_devices]

            def run(self, source=None):
                res = super().run(source)
                return AppResult(res.values, self.seconds, res.stats)
        return Timed

    results = run_suite(small_config(devices=[1, 2, 4], modes=["async", "bsp"]),
                        solvers={"bfs": timed({1: 0.008, 2: 0.005, 4: 0.002})}, progress=False)
    rows = [line for line in our_apps_table(markdown(results))
            if line.startswith("| BFS | grid:6 |") and line.split(" | ")[2].isdigit()]
    assert len(rows) == 6
    cells = {tuple(r.split(" | ")[2:4]): r.split(" | ")[10] for r in rows}
    assert cells[("1", "async")] == "-" and cells[("1", "bsp")] == "-"
    assert cells[("2", "async")] == "1.6x" and cells[("4", "bsp")] == "4x"
    failed = run_suite(small_config(devices=[1, 2]), progress=False,
                       solvers={"bfs": double("bfs", raise_on_devices=1)})
    two = [line for line in our_apps_table(markdown(failed)) if line.startswith("| BFS | grid:6 | 2 |")]
    assert two and two[0].split(" | ")[10] == "-"


def test_markdown_leaves_out_the_peer_table_when_no_peer_ran():
    """``--peers none``: no empty "Peers" table; with a peer that ran, the table is there."""
    without = run_suite(small_config(peers=[]), solvers={"bfs": double("bfs")}, progress=False)
    assert "Peers (same run" not in markdown(without)
    with_scipy = run_suite(small_config(), solvers={"bfs": double("bfs")}, progress=False)
    assert "Peers (same run" in markdown(with_scipy)


@pytest.mark.parametrize("seconds, runs", [(3.0, 1), (0.5, 2)])
def test_a_slow_gpu_peer_is_timed_by_its_warm_up(monkeypatch, seconds, runs):
    """A GPU peer whose warm-up takes over half the case budget is not run again: that run is
    its time (and the note says so); a fast one is warmed up and timed peer_repeat times."""
    from groute.bench import runner
    from groute.bench.peers import PreparedPeer
    calls = []

    def fake_peer(name, app, graph, source, **kw):
        def run():
            calls.append(1)
            return reference_result(app, graph, source)
        return PreparedPeer(name, "fake GPU peer", "gpu", run, lambda raw: ("values", raw))

    monkeypatch.setattr(runner, "prepare_peer", fake_peer)
    monkeypatch.setattr(runner, "_gpu_wall_time", lambda fn: (seconds, fn()))
    results = run_suite(small_config(peers=["cupy"], peer_repeat=2, max_case_seconds=5.0),
                        solvers={"bfs": double("bfs")}, progress=False)
    (peer,) = results["peers"]
    assert peer["status"] == "ok" and peer["repeats"] == runs and peer["time_s"] == seconds
    assert len(calls) == (1 if runs == 1 else 3)
    assert ("its warm-up took" in peer["note"]) == (runs == 1)


@pytest.mark.timeout(120)
def test_suite_computes_big_graph_references_side_by_side(monkeypatch):
    from groute.bench import references, runner
    monkeypatch.setattr(references, "REFERENCE_CACHE_MIN_ARCS", 0)  # "big" for this test
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 8)
    config = make_config(apps=["bfs", "cc"], graphs=["kron:8"], devices=[1], modes=["async"],
                         repeat=1, peers=["none"], backend="cpu", timeout=20)
    results = run_suite(config, solvers={"bfs": double("bfs"), "cc": double("cc")}, progress=False)
    assert [r["side_by_side"] for r in results["references"]] == [True, True]
    assert all(c["status"] == "ok" for c in results["cases"]), results["cases"]


def test_cases_run_by_device_count_with_metis_split_beforehand(tmp_path, monkeypatch):
    """A graph's METIS splits are computed in worker processes while the one-device cases of
    every app run; the results still list the cases by graph, app, device count and mode, a
    graph given twice included, and record how long the cases waited for each split."""
    pytest.importorskip("pymetis")
    import groute.bench.runner as runner
    monkeypatch.setenv("GROUTE_DATA_DIR", str(tmp_path))
    # the CPU backend never splits ahead (its cases would share the workers' cores)
    monkeypatch.setattr(runner.SuiteRun, "_prefetch_pays", lambda self, ks, graph, apps: True)
    ran = []

    def recording(app):
        base = double(app)

        class Recording(base):
            def __init__(self, graph, *, ctx, **kw):
                ran.append((app, ctx.num_devices, kw.get("mode")))
                super().__init__(graph, ctx=ctx, **kw)
        return Recording
    cfg = small_config(apps=["bfs", "pr", "cc"], graphs=["grid:12", "grid:12"], devices=[1, 2],
                       modes=["async", "bsp"], partition="metis", peers=[])
    results = run_suite(cfg, solvers={app: recording(app) for app in ("bfs", "pr", "cc")},
                        progress=False)
    one_graph = [(app, k, mode) for k in (1, 2) for app in ("bfs", "pr", "cc")
                 for mode in ((None,) if app == "cc" else ("async", "bsp"))]
    assert ran == one_graph * 2
    listed = [(c["app"], c["devices"], c["mode"]) for c in results["cases"]]
    assert listed == sorted(one_graph, key=lambda c: (["bfs", "pr", "cc"].index(c[0]), c[1])) * 2
    assert all(c["status"] == "ok" for c in results["cases"])
    assert list((tmp_path / "partitions").glob("grid_12.metis-degw-k2-*"))
    assert [set(g["metis_split_waits_s"]) for g in results["graphs"]] == [{"2"}, {"2"}]


def test_metis_workers_that_cannot_start_leave_the_split_to_the_cases(monkeypatch):
    """The splits ahead are only a speed-up: if the workers cannot start, the cases still run."""
    import groute.bench.runner as runner
    monkeypatch.setattr(runner.SuiteRun, "_prefetch_pays", lambda self, ks, graph, apps: True)

    def broken(graph, ks):
        raise OSError("no processes left")
    monkeypatch.setattr(runner.PartitionPrefetch, "start", staticmethod(broken))
    cfg = small_config(apps=["bfs"], graphs=["grid:12"], devices=[1, 2], modes=["bsp"],
                       partition="contiguous", peers=[])
    results = run_suite(cfg, solvers={"bfs": double("bfs")}, progress=False)
    assert [(c["devices"], c["status"]) for c in results["cases"]] == [(1, "ok"), (2, "ok")]
    assert "metis_split_waits_s" not in results["graphs"][0]


def test_metis_splits_ahead_only_where_they_pay(monkeypatch):
    from groute.bench.runner import SuiteRun
    run = SuiteRun(small_config(partition="metis", devices=[1, 2]), command="", solvers={},
                   progress=False, stream=None)
    big = SimpleNamespace(num_edges=1_400_000)
    assert not run._prefetch_pays([2], big, ["bfs"])            # CPU virtual devices
    run.backend = "cuda"
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert run._prefetch_pays([2, 4], big, ["bfs"])
    assert not run._prefetch_pays([2, 4], big, ["cc"])          # takes no partition
    assert not run._prefetch_pays([2], SimpleNamespace(num_edges=500), ["bfs"])  # METIS is quick
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert not run._prefetch_pays([2, 4], big, ["bfs"])         # no cores to spare
    run.partition = "contiguous"
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert not run._prefetch_pays([2], big, ["bfs"])
    # auto: METIS, so split ahead, only where the library's rule would split by METIS
    run.partition = "auto"
    monkeypatch.setattr("groute.graph.partition.auto_method",
                        lambda g: "metis" if g.num_edges <= 2_000_000 else "contiguous")
    assert run.split_method(big) == "metis" and run._prefetch_pays([2], big, ["bfs"])
    huge = SimpleNamespace(num_edges=9_000_000)
    assert run.split_method(huge) == "contiguous" and not run._prefetch_pays([2], huge, ["bfs"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("no_cache", [False, True])
def test_bench_no_cache_leaves_the_cache_directory_alone(tmp_path, monkeypatch, capsys, no_cache):
    """``--no-cache`` on the bench, as on every command that loads graphs: neither the graph
    cache nor the METIS splits of the run reach the user cache directory (the bench still
    shares its splits between processes, through a directory of its own it removes)."""
    from groute.cli import main
    from groute.graph.cache import cache_root
    cache = tmp_path / "cache"
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(cache))
    graph = tmp_path / "ring.txt"
    graph.write_text("".join(f"{i} {(i + 1) % 64}\n{(i + 1) % 64} {i}\n" for i in range(64)))
    words = ["bench", "--backend", "cpu", "--apps", "bfs", "--graphs", str(graph),
             "--devices", "1,2", "--modes", "async", "--partition", "metis", "--peers", "none",
             "--repeat", "1", "--quiet"]
    assert main(words + (["--no-cache"] if no_cache else [])) == 0, capsys.readouterr()
    written = sorted(p.relative_to(cache).parts[0] for p in cache.rglob("*") if p.is_file())
    if no_cache:
        assert written == []
    else:                                  # the same run without the option does write both
        assert "graphs" in written and "partitions" in written, written
    assert cache_root() == cache           # the private directory is given back


def test_auto_devices_run_the_count_the_rule_chooses_and_say_why():
    """``--devices 2,auto``: every app also runs as ``devices="auto"`` chooses (one CPU device
    here), timed as its own case when the run has no case of that count, reused when it has;
    the report prints it as ``1 (auto)`` with the rule's reason."""
    results = run_suite(small_config(devices=[2, "auto"]), progress=False)
    cases = results["cases"]
    auto = [c for c in cases if c.get("auto")]
    assert len(auto) == 1 and auto[0]["devices"] == 1 and auto[0]["status"] == "ok"
    assert auto[0]["devices_why"].startswith("auto: 1 CPU device")
    assert "1 (auto)" in markdown(results)
    results = run_suite(small_config(devices=[1, "auto"]), progress=False)
    one, auto = sorted(results["cases"], key=lambda c: bool(c.get("auto")))
    assert auto["auto"] and auto["times_s"] == one["times_s"]       # the same measured case
    assert make_config(graphs=["grid:4"], devices=["auto"]).auto_devices
