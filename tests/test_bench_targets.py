"""The targets table of ``groute bench`` reports: judged from the run's own verified cases."""
from __future__ import annotations

import pytest

from groute.bench.report import markdown, merge_results
from groute.bench.runner import NA, SKIP
from groute.bench.targets import NOT_RUN, TARGETS, Target, evaluate

pytestmark = pytest.mark.timeout(60)

H200 = {"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}


def case(app, graph, devices, mode, time_s, status="ok", exchange=None):
    return dict(app=app, graph=graph, devices=devices, mode=mode, status=status, time_s=time_s,
                min_s=time_s, max_s=time_s, repeats=1,
                stats={"exchange": exchange} if exchange else {})


def results(cases, peers=(), backend="cuda", machine=H200):
    return dict(schema="groute-bench/1", backend=backend, machine=machine, cases=list(cases),
                peers=list(peers), graphs=[], references=[])


def rows_by(rows):
    return {(r["target"]["kind"], r["target"]["app"], r["target"]["graph"]): r for r in rows}


def test_time_target_takes_the_fastest_verified_mode_and_says_by_how_much():
    rows = rows_by(evaluate(results([
        case("bfs", "kron:21", 1, "async", 1.5e-3),
        case("bfs", "kron:21", 1, "bsp", 0.5e-3, exchange="peer"),
        case("bfs", "kron:21", 2, "bsp", 0.1e-3),          # more devices: not the 1-GPU target
        case("bfs", "grid:4900", 1, "async", 90e-3),       # misses 60 ms by 1.5x
        case("bfs", "grid:4900", 1, "bsp", 1e-3, status="FAIL"),  # a wrong answer never counts
    ])))
    kron = rows[("time", "bfs", "kron:21")]
    assert kron["ours"] == pytest.approx(0.5e-3) and kron["detail"] == "bsp (peer)"
    assert kron["margin"] == pytest.approx(6.0) and kron["met"] is True
    grid = rows[("time", "bfs", "grid:4900")]
    assert grid["ours"] == pytest.approx(90e-3) and grid["met"] is False
    assert grid["margin"] == pytest.approx(60 / 90)
    # async 90 ms against a failed BSP case: the ratio cannot be judged, so it is not met
    modes = rows[("modes", "bfs", "grid:4900")]
    assert modes["ours"] is None and modes["met"] is False and "bsp" in modes["detail"]


def test_targets_without_cases_in_the_run_are_left_out():
    rows = evaluate(results([case("cc", "kron:21", 1, None, 1e-3)]))
    assert [(r["target"]["app"], r["target"]["graph"]) for r in rows] == [("cc", "kron:21")]
    assert rows[0]["detail"] == "its only mode"
    # a scaling target needs the device count it names in the run
    assert evaluate(results([case("pr", "kron:25", 1, "bsp", 0.1), case("pr", "kron:25", 2, "bsp", 0.05)])) == []
    # one-device targets need one-device cases; the async/BSP ratio needs both modes
    assert evaluate(results([case("bfs", "kron:21", 2, "bsp", 1e-3)])) == []
    only_async = evaluate(results([case("bfs", "grid:4900", 1, "async", 40e-3)]))
    assert [r["target"]["kind"] for r in only_async] == ["time"]
    # 4-device cases skipped on a machine with fewer GPUs: not run, so not a missed target
    skipped = evaluate(results([case("bfs", "kron:25", 1, "bsp", 4e-3),
                                case("bfs", "kron:25", 4, "bsp", None, status="skip")]))
    assert skipped == [] and set(NOT_RUN) == {SKIP, NA}


def test_peer_modes_and_scaling_ratios():
    rows = rows_by(evaluate(results(
        [case("pr", "grid:4900", 1, "bsp", 10e-3), case("pr", "grid:4900", 1, "async", 70e-3),
         case("pr", "grid:4900", 4, "bsp", 4e-3), case("pr", "grid:4900", 4, "async", 2e-3),
         case("sssp", "grid:4900", 1, "async", 50e-3), case("sssp", "grid:4900", 1, "bsp", 100e-3)],
        peers=[dict(app="pr", graph="grid:4900", peer="cupy", status="ok", time_s=30e-3),
               dict(app="pr", graph="grid:4900", peer="scipy", status="ok", time_s=20.0)])))
    peer = rows[("peer", "pr", "grid:4900")]
    assert peer["ours"] == pytest.approx(3.0) and peer["met"] is True      # cupy 30 / ours 10
    scaling = rows[("scaling", "pr", "grid:4900")]
    assert scaling["ours"] == pytest.approx(5.0)                            # best 10 ms / best 2 ms
    assert scaling["margin"] == pytest.approx(5.0 / 3.0) and scaling["met"] is True
    modes = rows[("modes", "sssp", "grid:4900")]
    assert modes["ours"] == pytest.approx(2.0) and modes["met"] is False    # asked: 3x


def test_a_missing_peer_is_not_met():
    rows = rows_by(evaluate(results([case("pr", "kron:21", 1, "bsp", 5e-3)])))
    row = rows[("peer", "pr", "kron:21")]
    assert row["ours"] is None and row["met"] is False and "cupy" in row["detail"]


@pytest.mark.parametrize("backend, machine", [("cpu", {}),
                                              ("cuda", {"gpus": [{"name": "NVIDIA H100"}]})])
def test_other_machines_show_the_figures_without_a_verdict(backend, machine):
    res = results([case("bfs", "kron:21", 1, "async", 1e-3)], backend=backend, machine=machine)
    (row,) = [r for r in evaluate(res) if r["target"]["kind"] == "time"]
    assert row["met"] is None and row["margin"] == pytest.approx(3.0)
    text = markdown(res)
    assert "### Against the targets" in text and "not judged" in text
    assert "| 7 | BFS | kron:21 | <= 3 ms on 1 GPU | 1.00 ms | async | 3x | - |" in text


def test_markdown_marks_a_miss_and_merged_results_are_judged_again():
    one = results([case("cc", "grid:4900", 1, None, 8e-3)])
    text = markdown(one)
    assert "| 8 | CC | grid:4900 | <= 5 ms on 1 GPU | 8.00 ms | its only mode | 0.625x | **no** |" in text
    other = results([case("cc", "kron:21", 1, None, 1e-3)])
    merged = merge_results([one, other])
    assert [r["target"]["graph"] for r in merged["targets"]] == ["kron:21", "grid:4900"]
    assert "Against the targets" not in markdown(results([case("bfs", "grid:6", 1, "async", 1e-3)]))


def test_a_merge_is_judged_only_when_every_run_was_on_the_target_gpus():
    h200 = results([case("cc", "kron:21", 1, None, 1e-3)])
    h100 = results([case("cc", "grid:4900", 1, None, 8e-3)], machine={"gpus": [{"name": "NVIDIA H100"}]})
    for parts in ([h200, h100], [h100, h200]):
        merged = merge_results(parts)
        assert [r["met"] for r in merged["targets"]] == [None, None]
        assert "not judged" in markdown(merged)
    h200_grid = results([case("cc", "grid:4900", 1, None, 8e-3)])
    assert [r["met"] for r in merge_results([h200, h200_grid])["targets"]] == [True, False]


def test_the_report_prints_the_targets_the_run_stored():
    res = results([case("cc", "kron:21", 1, None, 1e-3)])
    res["targets"] = evaluate(res)
    res["targets"][0]["detail"] = "as stored"
    assert "| its only mode |" not in markdown(res) and "| as stored |" in markdown(res)


def test_every_target_is_well_formed():
    for t in TARGETS:
        assert t.kind in ("time", "peer", "modes", "scaling", "auto") and t.bound > 0
        assert (t.graph == "*") == (t.kind == "auto")
        assert t.mode is None or t.kind == "scaling"
        assert (t.peer is not None) == (t.kind == "peer")
        assert (t.kind == "scaling") == (t.devices > 1)
        assert (t.kind == "modes") == (t.faster is not None and t.slower is not None)
        assert t.describe()
    assert Target(7, "scaling", "bfs", "kron:25", 2.0, devices=4).describe() == "4 GPUs >= 2x 1 GPU"
    assert Target(37, "scaling", "bfs", "grid:4900", 1.0, devices=4,
                  mode="async").describe() == "4 GPUs (async) >= 1x 1 GPU"
    assert Target(37, "auto", "bfs", "*", 1 / 1.1).describe() == \
        "devices=auto at most 10% slower than 1 GPU"


def test_auto_targets_judge_every_graph_with_auto_cases():
    """An ``auto`` target is one row per graph of the run with cases ``devices="auto"`` ran:
    the one-device time over the auto time, met within 10%."""
    from groute.bench.targets import evaluate
    cases = [dict(app="bfs", graph=g, devices=d, mode="bsp", status="ok", time_s=t, auto=auto)
             for g, d, t, auto in (("a", 1, 1.0, False), ("a", 1, 1.0, True),
                                   ("b", 1, 1.0, False), ("b", 4, 1.2, False),
                                   ("b", 4, 1.2, True))]
    results = {"cases": cases, "peers": [], "backend": "cuda",
               "machine": {"gpus": [{"name": "NVIDIA H200"}] * 4}}
    rows = {r["target"]["graph"]: r for r in evaluate(results)
            if r["target"]["kind"] == "auto" and r["target"]["app"] == "bfs"}
    assert set(rows) == {"a", "b"}
    assert rows["a"]["met"] is True and rows["a"]["ours"] == 1.0
    assert rows["b"]["met"] is False and abs(rows["b"]["ours"] - 1 / 1.2) < 1e-12


def test_a_mode_target_is_left_out_when_that_mode_did_not_run():
    """``--modes bsp``: the "4 GPUs (async)" targets of grid:4900 are not judged (no row),
    rather than reported as missed."""
    from groute.bench.targets import evaluate
    cases = [dict(app="bfs", graph="grid:4900", devices=d, mode="bsp", status="ok", time_s=t)
             for d, t in ((1, 0.04), (4, 0.05))]
    results = {"cases": cases, "peers": [], "backend": "cuda",
               "machine": {"gpus": [{"name": "NVIDIA H200"}] * 4}}
    rows = [r for r in evaluate(results) if r["target"]["issue"] == 37
            and r["target"]["graph"] == "grid:4900"]
    assert rows == []
    cases.append(dict(app="bfs", graph="grid:4900", devices=4, mode="async", status="ok",
                      time_s=0.03))
    (row,) = [r for r in evaluate(results) if r["target"]["issue"] == 37
              and r["target"]["graph"] == "grid:4900"]
    assert row["met"] is True and row["target"]["mode"] == "async"
