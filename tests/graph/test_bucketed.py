"""Generated graphs built by source-vertex buckets: the same CSR for every bucket count, the
bucket count chosen from the memory budget, and load_graph's path for graphs past 2**31 arcs."""
import numpy as np
import pytest

import groute.graph.bucketed as bucketed
import groute.graph.generators as ggen
import groute.graph.load as gload
from groute.graph import CSRGraph, erdos_renyi, kronecker, load_graph, parse_spec, rmat

pytestmark = pytest.mark.timeout(120)


def _from_stream(stream, n, symmetric):
    """The graph of a generator's edge stream through the generic edge-list constructor: an
    independent construction to compare the bucketed one with."""
    pairs = list(stream())
    src = np.concatenate([s for s, _ in pairs]).astype(np.int64)
    dst = np.concatenate([d for _, d in pairs]).astype(np.int64)
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return CSRGraph.from_edges(src, dst, n, directed=not symmetric)


def _same(a, b):
    return (np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and a.indptr.dtype == np.int64 and a.indices.dtype == np.int32)


@pytest.mark.parametrize("scale, ef", [(12, 16), (14, 32)])
def test_kronecker_same_graph_for_every_bucket_count(scale, ef):
    stream = ggen._rmat_stream(scale, ef, 0.57, 0.19, 0.19, seed=0, xp=np, chunk=None,
                               permute=True)
    want = _from_stream(stream, 1 << scale, symmetric=True)
    for buckets in (None, 1, 2, 5, 16):
        g = kronecker(scale, ef, buckets=buckets)
        assert _same(g, want), buckets
        assert not g.directed and g.indices.flags.owndata


def test_rmat_and_er_same_graph_for_every_bucket_count():
    stream = ggen._rmat_stream(11, 16, 0.57, 0.19, 0.19, seed=3, xp=np, chunk=None, permute=False)
    want = _from_stream(stream, 1 << 11, symmetric=False)
    for buckets in (1, 3, 8):      # unpermuted R-MAT: skewed rows, so uneven vertex ranges
        assert _same(rmat(11, seed=3, buckets=buckets), want)
    er = erdos_renyi(5000, 6, seed=2)
    for buckets in (2, 7):
        assert _same(erdos_renyi(5000, 6, seed=2, buckets=buckets), er)


def test_bucket_count_follows_the_memory_budget(monkeypatch):
    want = kronecker(12, buckets=1)
    seen = []
    real = bucketed.bucket_keys

    def spy(stream, lo, hi, *args, **kwargs):
        seen.append((lo, hi))
        return real(stream, lo, hi, *args, **kwargs)
    monkeypatch.setattr(bucketed, "bucket_keys", spy)
    monkeypatch.setattr(bucketed, "MIN_BUCKET_CANDIDATES", 1)
    monkeypatch.setattr(bucketed, "bucket_budget", lambda *a, **k: 30_000)
    g = kronecker(12)
    assert _same(g, want)
    assert len(seen) >= 4 and seen[0][0] == 0 and seen[-1][1] == 4096
    assert all(a[1] == b[0] for a, b in zip(seen, seen[1:]))      # consecutive ranges


def test_bucket_budget_caps_host_buckets_at_the_csr_size(monkeypatch):
    monkeypatch.setattr(bucketed, "available_bytes", lambda: 100 << 30)
    monkeypatch.setattr(bucketed, "MIN_BUCKET_CANDIDATES", 1)
    assert bucketed.bucket_budget(np, 0, 24_000) == 24_000 // bucketed.BYTES_PER_CANDIDATE
    assert bucketed.bucket_budget(np, 0) == (50 << 30) // bucketed.BYTES_PER_CANDIDATE


def test_bucket_bounds():
    counts = np.array([5, 0, 3, 9, 1, 1, 0, 2])
    assert bucketed.bucket_bounds(counts, 8) == [0, 3, 4, 8]        # 8, 9 (one vertex), 4
    assert bucketed.bucket_bounds(counts, 100) == [0, 8]
    assert bucketed.bucket_bounds(np.zeros(0, np.int64), 5) == [0]


def test_unreplayable_stream_is_an_error():
    calls = []

    def stream():           # yields more on every replay
        calls.append(1)
        k = len(calls)
        yield np.arange(k, dtype=np.uint64), np.arange(k, dtype=np.uint64) + np.uint64(1)
    with pytest.raises(RuntimeError, match="replayable"):
        bucketed.csr_by_buckets(stream, 16, 100, symmetric=True, xp=np, buckets=2)


def test_big_spec_parses_and_loads_through_the_host_build(monkeypatch):
    s = parse_spec("kron:26:32")
    assert (s.params["scale"], s.params["ef"]) == (26, 32)
    calls = []

    def fake_kronecker(scale, ef, *args, **kwargs):
        calls.append((scale, ef, kwargs.get("on_host")))
        return kronecker(8, on_host=kwargs.get("on_host", False))
    monkeypatch.setattr(ggen, "kronecker", fake_kronecker)
    # the stand-in builds kron:8, whatever memory kron:26:32 would need here
    monkeypatch.setattr(ggen, "check_fits_host", lambda spec: None)
    load_graph("kron:26:32", cache=False)
    assert calls == [(26, 32, True)]


def test_big_generated_graphs_are_not_cached(isolated_cache, monkeypatch):
    monkeypatch.setattr(gload, "GENERATED_CACHE_MIN_ARCS", 10)
    monkeypatch.setattr(gload, "GENERATED_CACHE_MAX_BYTES", 1000)
    load_graph("kron:7")
    assert not list((isolated_cache / "generated").glob("kron_7*"))
    monkeypatch.setattr(gload, "GENERATED_CACHE_MAX_BYTES", 1 << 30)
    load_graph("kron:7")
    assert list((isolated_cache / "generated").glob("kron_7*"))


@pytest.mark.gpu
def test_gpu_buckets_into_host_memory():
    """Generated on the GPU in several buckets, written into host arrays: the CPU's graph; and
    the chunked weights hashed on the GPU for a host graph: the CPU's weights."""
    from tests.graph.conftest import cupy_or_skip
    cupy = cupy_or_skip()
    want = kronecker(13, 32)
    for buckets, on_host in ((None, True), (3, True), (3, False)):
        g = kronecker(13, 32, xp=cupy, buckets=buckets, on_host=on_host)
        assert (g.xp is np) == on_host
        assert _same(g.to_host(), want), (buckets, on_host)
    assert np.array_equal(want.with_weights(seed=4, xp=cupy).weights,
                          want.with_weights(seed=4).weights)
