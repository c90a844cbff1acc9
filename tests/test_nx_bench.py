"""benchmarks/nx_backend.py, the NetworkX backend's speed against NetworkX: every dispatched
function has a recipe and is timed and checked (on CPU virtual devices, tiny graphs), a missing
recipe stops the script before any work, a call groute declines fails the run with its reason,
and NetworkX past its budget is stopped and the speed-up shown as a lower bound."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from groute.nx_backend.info import FUNCTIONS
from nx_support import registered  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "nx_backend.py"


def load_script():
    spec = importlib.util.spec_from_file_location("nx_backend_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(tmp_path, *args):
    out = tmp_path / "nx.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--backends", "cpu", "--repeat", "1",
                           "--json", str(out), "--markdown", str(tmp_path / "nx.md"), *args],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(out.read_text()), (tmp_path / "nx.md").read_text()


@pytest.mark.timeout(300)
def test_every_dispatched_function_timed_and_checked(tmp_path):
    done, doc, table = run_script(tmp_path, "--edges", "2000")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(r["function"] for r in doc["rows"]) == sorted(FUNCTIONS)
    for row in doc["rows"]:
        assert row["answer"] == "equal", row
        assert row["first_s"] > 0 and row["cached_s"] > 0
        if row["networkx_note"] == "NetworkX has none":     # Leiden: backends only
            assert row["networkx_s"] is None and "speedup_cached" not in row, row
            continue
        assert row["networkx_s"] > 0
        assert row["speedup_cached"] == pytest.approx(row["networkx_s"] / row["cached_s"])
        assert f"| `{row['function']}` | {row['graph']} | {row['edges']:,} | cpu |" in table
    assert doc["machine"]["cpu"] and "cpu" in doc["startup_s"]


@pytest.mark.timeout(300)
def test_networkx_past_its_budget_is_stopped_and_speedup_is_a_bound(tmp_path):
    done, doc, table = run_script(tmp_path, "--edges", "1e4,2e4", "--nx-budget", "0.001",
                                  "--functions", "betweenness_centrality")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first, second = doc["rows"]
    assert first["networkx_s"] is None and first["networkx_note"] == "stopped at 0.001 s"
    assert first["answer"] == "not checked"
    assert first["speedup_cached_over"] == pytest.approx(0.001 / first["cached_s"])
    assert second["networkx_note"].startswith("not run: over 0.001 s expected")
    assert "| stopped at 0.001 s |" in table and "| > " in table


def test_a_missing_or_stale_recipe_stops_the_script(monkeypatch, capsys):
    script = load_script()
    name = next(iter(FUNCTIONS))
    recipes = {k: v for k, v in script.RECIPES.items() if k != name}
    recipes["no_such_function"] = script.RECIPES[name]
    monkeypatch.setattr(script, "RECIPES", recipes)
    assert script.main(["--functions", "pagerank,nope"]) == 2
    err = capsys.readouterr().err
    [missing] = [line for line in err.splitlines() if "without a recipe in RECIPES" in line]
    assert repr(name) in missing
    assert "RECIPES names functions the backend does not dispatch: ['no_such_function']" in err
    assert "--functions names functions the backend does not dispatch: ['nope']" in err


@pytest.mark.timeout(120)
def test_a_declined_call_fails_the_run_with_its_reason(monkeypatch, tmp_path):
    script = load_script()
    declined = script.Recipe("directed", lambda G, **b: nx.pagerank(G, nstart={0: 1.0}, **b),
                             script.pagerank_close)
    monkeypatch.setitem(script.RECIPES, "pagerank", declined)
    out = tmp_path / "nx.json"
    with nx.config.backends.groute(backend="auto", devices=None, fallback_to_nx=True):
        code = script.main(["--functions", "pagerank", "--edges", "500", "--backends", "cpu",
                            "--repeat", "1", "--json", str(out)])
    assert code == 1
    [row] = json.loads(out.read_text())["rows"]
    assert row["answer"].startswith("declined: nstart") and row["failed"]


def test_close_answers_compare_numbers_within_tolerance_and_the_rest_exactly():
    close = load_script().close(1e-6)
    assert close({1: 1.0, 2: [(3, 4, 0.5)]}, {1: 1.0 + 1e-9, 2: [(3, 4, 0.5 - 1e-9)]})
    assert not close({1: 1.0}, {1: 1.01}) and not close({1: 1.0}, {2: 1.0})
    assert not close([(3, 4, 0.5)], [(3, 5, 0.5)]) and not close((1.0,), (1.0, 2.0))
