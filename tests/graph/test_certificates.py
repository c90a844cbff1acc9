"""The linear-time answer checks for big graphs: they pass right answers (from the references)
and catch wrong ones, in small and in single-arc chunks."""
import numpy as np
import pytest

import groute.graph.certificates as cert
from groute.graph import kronecker, reference, rmat

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[None, 7], ids=["one-chunk", "tiny-chunks"])
def chunked(request, monkeypatch):
    if request.param:
        monkeypatch.setattr(cert, "CHUNK_ARCS", request.param)
    return request.param


def _graphs():
    return [kronecker(9), rmat(8, seed=2)]         # symmetric with isolated vertices; directed


def test_bfs_certificate(chunked):
    for g in _graphs():
        s = int(np.argmax(np.diff(g.indptr)))
        d = reference.bfs(g, s)
        found = cert.check_bfs(g, s, d)
        assert found["reached"] == int((d >= 0).sum())
        far = int(np.flatnonzero(d == d.max())[0])
        for wrong in (d + (np.arange(d.size) == far), d - (np.arange(d.size) == far)):
            with pytest.raises(AssertionError):
                cert.check_bfs(g, s, wrong)
        unreached = d.copy()
        unreached[far] = -1
        with pytest.raises(AssertionError, match="improves"):
            cert.check_bfs(g, s, unreached)


def test_sssp_certificate(chunked):
    for g in _graphs():
        g = g.with_weights(seed=1)
        s = int(np.argmax(np.diff(g.indptr)))
        d = reference.sssp(g, s)
        assert cert.check_sssp(g, s, d)["reached"] == int(np.isfinite(d).sum())
        v = int(np.flatnonzero(np.isfinite(d) & (d > 0))[-1])
        for delta in (1.0, -1.0):
            wrong = d.copy()
            wrong[v] += delta
            with pytest.raises(AssertionError):
                cert.check_sssp(g, s, wrong)


def test_components_certificate(chunked):
    g = kronecker(9)
    s = int(np.argmax(np.diff(g.indptr)))
    labels = reference.connected_components(g)
    depth = reference.bfs(g, s)
    found = cert.check_components(g, labels, s, depth)
    assert found["components"] == len(np.unique(labels))
    split = labels.copy()
    split[int(np.flatnonzero(depth == 1)[0])] = -5
    with pytest.raises(AssertionError, match="joins"):
        cert.check_components(g, split, s, depth)
    isolated = int(np.flatnonzero(np.diff(g.indptr) == 0)[0])
    merged = labels.copy()
    merged[isolated] = labels[s]
    with pytest.raises(AssertionError, match="BFS reached"):
        cert.check_components(g, merged, s, depth)


def test_pagerank_residual(chunked):
    for g in _graphs():
        r = reference.pagerank(g, tol=1e-10)
        assert cert.pagerank_residual(g, r) < 1e-8
        wrong = r.copy()
        wrong[0], wrong[1] = wrong[1] + 1e-3, wrong[0] - 1e-3
        assert cert.pagerank_residual(g, wrong) > 1e-4
