"""Fixtures for the graph-layer tests: an isolated cache directory and small graphs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: the repository's sibling ``shared/graphs`` (absent on machines without it: tests skip)
SHARED_GRAPHS = Path(__file__).resolve().parents[2] / ".." / "shared" / "graphs"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache dir, so nothing is written to ~/.cache, and no graph
    another test loaded is kept in memory (a load reads its file or the cache)."""
    import groute.graph.load
    monkeypatch.setattr(groute.graph.load, "_recent", {})
    d = tmp_path / "groute-cache"
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(d))
    monkeypatch.delenv("GROUTE_DATA_DIR", raising=False)
    monkeypatch.delenv("GROUTE_DATASETS", raising=False)
    return d


def cupy_or_skip():
    """CuPy with at least one device, or skip the test."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy finds no CUDA device")
    except Exception as exc:  # CUDA runtime without a driver
        pytest.skip(f"CuPy cannot use a GPU: {exc}")
    return cupy


def edges_graph(n, edges, *, directed=True, weights=None, name="hand"):
    from groute.graph import CSRGraph
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return CSRGraph.from_edges(e[:, 0], e[:, 1], n, weights, directed=directed, name=name)
