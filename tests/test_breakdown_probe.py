"""benchmarks/probes/multi_gpu_breakdown.py on CPU virtual devices (its ``--dry-run``; the lead
runs it on GPUs): every case runs, BFS's fixed cost is measured, and every engine method the
probe times still exists (a renamed method or argument would otherwise turn into an error
field or a missing hook that nobody reads until a GPU run)."""
import json
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "multi_gpu_breakdown.py"


@pytest.mark.timeout(120)
def test_the_breakdown_probe_measures_every_case_it_names(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("multi_gpu_breakdown", PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert probe.main(["--dry-run", "--apps", "bfs,cc", "--devices", "1,2", "--modes", "bsp",
                       "--repeat", "2", "--instrumented", "1", "--out", str(tmp_path)]) == 0
    cases = [json.loads(line) for line in (tmp_path / "breakdown.jsonl").read_text().splitlines()]
    cases = [c for c in cases if c.get("kind") == "case"]
    assert {(c["app"], c["devices"]) for c in cases} == {
        (app, k) for app in ("bfs", "cc") for k in (1, 2)}
    for case in cases:
        assert case["status"] == "ok", case
        assert not [k for k in case if k.endswith("_error")], case
        assert case["instrumented"]["hooks_missing"] == [], case["instrumented"]["hooks_missing"]
        if case["app"] == "bfs":
            assert case["fixed_cost"]["time_ms"]["n"] == 2
