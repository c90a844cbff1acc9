"""Graphs past 2**31 arcs, without one: the int32/int64 choice for arc positions goes through
groute.graph.arrays.arc_dtype, whose limit the tests lower so small graphs take the int64
paths; the CUDA sources keep arc positions 64-bit; the big-graph device script runs end to end
at tiny scale on the CPU backend."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import groute.graph.arrays as arrays
from groute.graph import kronecker, reference
from groute.graph.arrays import arc_dtype

ROOT = Path(__file__).resolve().parents[1]
BIG_GRAPH_PROBE = ROOT / "benchmarks" / "probes" / "gpu_big_graph.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def tiny_arc_limit(monkeypatch):
    """Arc positions past 100 need int64: every graph below takes the wide paths."""
    monkeypatch.setattr(arrays, "ARC_INT32_LIMIT", 100)


def test_arc_dtype_limit(monkeypatch):
    assert arc_dtype(2**31 - 1) == np.int32 and arc_dtype(2**31) == np.int64
    monkeypatch.setattr(arrays, "ARC_INT32_LIMIT", 100)
    assert arc_dtype(100) == np.int32 and arc_dtype(101) == np.int64


def test_pagerank_memory_estimate_follows_arc_dtype(tiny_arc_limit):
    from groute.engines.iterate.memory import iteration_bytes
    assert iteration_bytes(1000, 5000).parts["in-arc offsets"] == 8 * 1001
    assert iteration_bytes(10, 50).parts["in-arc offsets"] == 4 * 11


@pytest.mark.parametrize("devices", [1, 2])
def test_pagerank_wide_offsets_cpu(tiny_arc_limit, devices):
    from groute.apps.pr import PageRank
    g = kronecker(9)
    with PageRank(g, backend="cpu", devices=devices, partition="contiguous",
                  tol=1e-6 / g.num_vertices) as solver:
        assert all("64" in d.csc_kernel for d in solver.devs)
        ranks = np.asarray(solver.run().values, np.float64)
    assert np.abs(ranks / ranks.sum() - reference.pagerank(g)).sum() < 1e-4


@pytest.mark.gpu
def test_wide_paths_on_a_gpu(tiny_arc_limit):
    """The 64-bit PageRank kernels (chosen by arc_dtype) and the always-64-bit traversal and CC
    kernels against the references on one GPU."""
    from groute.apps.bfs import bfs
    from groute.apps.cc import connected_components
    from groute.apps.pr import PageRank
    from groute.apps.sssp import sssp
    g = kronecker(10)
    s = int(np.argmax(np.diff(g.indptr)))
    for kernel in ("csc", "bins"):
        import dataclasses
        from groute.tuning import PageRankTuning
        tuning = dataclasses.replace(PageRankTuning.from_environment(), bsp_kernel=kernel)
        with PageRank(g, backend="cuda", devices=1, tuning=tuning,
                      tol=1e-6 / g.num_vertices) as solver:
            assert "64" in solver.devs[0].csc_kernel
            ranks = np.asarray(solver.run().values, np.float64)
        assert np.abs(ranks / ranks.sum() - reference.pagerank(g)).sum() < 1e-4, kernel
    assert np.array_equal(bfs(g, s, backend="cuda", devices=1).values, reference.bfs(g, s))
    w = g.with_weights(seed=1)
    assert np.allclose(sssp(w, s, backend="cuda", devices=1).values, reference.sssp(w, s))
    labels = connected_components(g, backend="cuda", devices=1).values
    assert np.array_equal(reference.canonical_labels(labels), reference.connected_components(g))


#: a declaration of a 32-bit variable from an arc offset (indptr / a slice's ip / offsets)
_NARROW_ARC = re.compile(r"\b(?:int|unsigned|unsigned int|float)\s+\w+\s*=\s*[^;]*"
                         r"\b(?:indptr|ip|in_indptr)\s*\[")
_NARROW_LOOP = re.compile(r"for\s*\(\s*(?:int|unsigned)\s+\w+\s*=[^;]*;[^;]*"
                          r"\b(?:indptr|ip|num_arcs|num_in|m)\b")


def test_cuda_arc_positions_are_64_bit():
    sources = [p for p in ROOT.rglob("*.cu*") if ".venv" not in p.parts and p.suffix in (".cu", ".cuh")]
    assert len(sources) >= 5
    bad = []
    for path in sources:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _NARROW_ARC.search(line) or _NARROW_LOOP.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "arc positions held in 32 bits:\n" + "\n".join(bad)


def test_the_narrow_arc_pattern_can_fail():
    assert _NARROW_ARC.search("const int s = indptr[v];")
    assert _NARROW_LOOP.search("for (int e = s; e < indptr[v + 1]; ++e)")
    assert not _NARROW_ARC.search("const long long s = indptr[v];")


def test_big_graph_script_tiny_cpu(tmp_path):
    out = tmp_path / "big.json"
    proc = subprocess.run([sys.executable, str(BIG_GRAPH_PROBE),
                           "--backend", "cpu", "--graph", "kron:9", "--json", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = json.loads(out.read_text())
    assert [c["case"] for c in cases] == ["load", "bfs", "sssp", "pr", "cc"]
    assert all(c["ok"] for c in cases)
    assert all(c["check"]["baseline"] == "match" for c in cases[1:])
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines[-1]["summary"] and lines[-1]["failed"] == []


def test_big_graph_script_reports_a_failing_case(tmp_path, monkeypatch):
    """One case failing (here CC's certificate without BFS depths) is reported, the others
    still run, and the exit status says so."""
    proc = subprocess.run([sys.executable, str(BIG_GRAPH_PROBE),
                           "--backend", "cpu", "--graph", "kron:8", "--apps", "cc,pr"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    by_case = {x.get("case"): x for x in lines}
    assert proc.returncode == 1
    assert not by_case["cc"]["ok"] and "BFS depths" in by_case["cc"]["error"]
    assert by_case["pr"]["ok"]


def test_metis_refuses_a_graph_past_its_indices_before_hashing(monkeypatch):
    """pymetis indexes arcs with its own integer type: a graph past it is a clear ValueError,
    raised before the graph is hashed or symmetrised (hours and tens of GB at 4G arcs)."""
    import types
    from groute.graph import partition_graph
    fake = types.SimpleNamespace(zero_copy_dtype=lambda: np.int8)
    monkeypatch.setitem(sys.modules, "pymetis", fake)
    g = kronecker(8)
    monkeypatch.setattr(type(g), "structure_hash",
                        lambda self: pytest.fail("hashed before the size check"))
    with pytest.raises(ValueError, match="METIS here takes at most 127 arcs.*contiguous"):
        partition_graph(g, 2, method="metis", cache=True)
