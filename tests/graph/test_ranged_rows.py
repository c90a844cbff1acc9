"""A range of rows of a generated graph built alone (groute.graph.ranged_rows), and the
contiguous split cut from shares of the row pointers (groute.graph.partition), in one
process: the ranks' steps run one after the other, as the ranks of a job run them side by
side (the job itself: tests/test_distributed_loading.py)."""
import numpy as np
import pytest

import groute.graph.ranged_rows as ranged
from groute.graph import load_graph
from groute.graph.generators import edge_stream, spec_params
from groute.graph.partition import contiguous_cuts, contiguous_offsets, offsets_from_cuts
from groute.graph.spec import parse_spec
from groute.host_peak import TracedPeak

pytestmark = pytest.mark.timeout(120)


def row_source(spec, parts, xp=np):
    s = parse_spec(spec)
    p = spec_params(s)
    if s.kind == "grid":
        return ranged.GridRows(p), p["rows"] * p["cols"]
    stream, n, symmetric, edges = edge_stream(s.kind, p, xp=xp)
    return ranged.StreamRows(stream, n, symmetric=symmetric, edges=edges, parts=parts,
                             xp=xp), n


def cut(tables, shares, n, k):
    """What the ranks' cut gives (groute.graph.ranked._cut): the maximum of every share's
    searches."""
    totals = [int(t[:, 0].sum()) for t in tables]
    m = sum(totals)
    found = np.full(k - 1, -1, dtype=np.int64)
    for r, ((first, _), table) in enumerate(zip(shares, tables)):
        piece = np.concatenate([[0], np.cumsum(table[:, 0])]) + sum(totals[:r])
        found = np.maximum(found, contiguous_cuts(piece, first, m, k))
    return offsets_from_cuts(found, n, m, k)


def ranked_rows(spec, k, budget=None, xp=np):
    """Every rank's ``(lo, hi, indptr, indices, weights)`` as the ranks would build them."""
    source, n = row_source(spec, k, xp)
    if budget is not None:
        source.budget = budget
    shares = [(n * r // k, n * (r + 1) // k) for r in range(k)]
    tables = [source.counts(*share) for share in shares]
    offsets = cut(tables, shares, n, k)
    every = np.concatenate(tables)
    out = []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        out.append((int(lo), int(hi), *source.rows(int(lo), int(hi), every[lo:hi].copy())))
    return offsets, out


@pytest.mark.parametrize("spec", ["kron:10", "rmat:10", "rmat:9:sym=1", "er:700:6", "grid:23",
                                  "grid:5x40"])
@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_every_range_is_the_whole_graphs_rows(spec, k):
    whole = load_graph(spec, cache=False)
    offsets, parts = ranked_rows(spec, k)
    assert np.array_equal(offsets, contiguous_offsets(whole.indptr, k))
    for lo, hi, indptr, indices, weights in parts:
        a, b = int(whole.indptr[lo]), int(whole.indptr[hi])
        assert indptr.dtype == np.int64 and indices.dtype == np.int32
        assert np.array_equal(indptr, whole.indptr[lo:hi + 1] - a)
        assert np.array_equal(indices, whole.indices[a:b])
        assert indices.flags.owndata and indices.shape == (b - a,)
        if whole.weights is None:
            assert weights is None
        else:
            assert np.array_equal(weights, whole.weights[a:b])


@pytest.mark.parametrize("budget, block", [(1, 1), (300, 16), (5000, 64)])
def test_buckets_and_sort_blocks_do_not_change_the_rows(monkeypatch, budget, block):
    """Many buckets (the in-place slack between them), blocks of a few slots (rows sorted
    alone, in place) and unpermuted R-MAT's skewed rows give the same rows."""
    monkeypatch.setattr(ranged, "SORT_BLOCK", block)
    for spec in ("rmat:10", "kron:9"):
        whole = load_graph(spec, cache=False)
        _, parts = ranked_rows(spec, 3, budget=budget)
        assert np.array_equal(np.concatenate([p[3] for p in parts]), whole.indices), spec


def test_the_cut_from_shares_is_the_whole_graphs_split():
    """Degrees with runs of empty vertices, fewer arcs than ranks, no arcs, one big vertex:
    the maximum of the shares' searches is contiguous_offsets of the whole row pointers."""
    gen = np.random.default_rng(5)
    cases = [gen.integers(0, 4, 50) * (gen.random(50) < 0.3), np.array([0, 0, 1, 0, 0, 0]),
             np.zeros(9, np.int64), np.array([0, 0, 0, 500, 1, 1, 1, 1]),
             gen.integers(0, 40, 1000)]
    for degrees in cases:
        n = degrees.shape[0]
        indptr = np.concatenate([[0], np.cumsum(degrees)])
        for k in (1, 2, 3, 5):
            shares = [(n * r // k, n * (r + 1) // k) for r in range(k)]
            tables = [degrees[a:b, None] for a, b in shares]
            assert np.array_equal(cut(tables, shares, n, k), contiguous_offsets(indptr, k)), \
                (degrees, k)


def _stream_of(sizes):
    """A stream whose replays yield ``sizes[i]`` arcs 0 -> 1, 0 -> 2, ... on the ``i``-th
    replay."""
    calls = []

    def stream():
        k = sizes[min(len(calls), len(sizes) - 1)]
        calls.append(1)
        yield np.zeros(k, dtype=np.uint64), np.arange(1, k + 1, dtype=np.uint64)
    return stream


@pytest.mark.parametrize("by_keys", [False, True])
@pytest.mark.parametrize("sizes, what", [((2, 3), "more"), ((3, 2), "fewer")])
def test_a_stream_that_is_not_replayable_is_an_error(sizes, what, by_keys):
    rows = ranged.StreamRows(_stream_of(sizes), 4, symmetric=False, edges=8, parts=1,
                             by_keys=by_keys)
    with pytest.raises(RuntimeError, match=f"{what} (than the [0-9]+ )?candidate arcs.*not replayable"):
        rows.counts(0, 4)


@pytest.mark.parametrize("spec", ["kron:12", "rmat:11"])
def test_a_replay_holds_the_arcs_that_touch_its_range_and_no_others(spec):
    """A range's replay is cut where the stream runs (on a GPU, before the copy to the host):
    every arc with an end in the range (a source; a target too when both directions are
    stored), nothing else."""
    source, n = row_source(spec, 4)
    lo, hi = n // 4, n // 2
    whole = [np.concatenate(parts) for parts in zip(*source.stream())]
    kept = [np.concatenate(parts) for parts in zip(*source._replay(lo, hi)())]
    touch = (whole[0] >= lo) & (whole[0] < hi)
    if source.symmetric:
        touch |= (whole[1] >= lo) & (whole[1] < hi)
    assert 0 < kept[0].shape[0] < 0.75 * whole[0].shape[0]
    for got, want in zip(kept, whole):
        np.testing.assert_array_equal(got, want[touch])


def by_keys_source(spec, k):
    """The rows of ``spec`` built by keys on the host (the GPU's way, NumPy for CuPy)."""
    source, n = row_source(spec, k)
    keyed = ranged.StreamRows(source.stream, n, symmetric=source.symmetric, edges=1, parts=k,
                              by_keys=True)
    return source, keyed, n


@pytest.mark.parametrize("spec", ["kron:11", "rmat:10", "rmat:9:sym=1", "er:700:6"])
@pytest.mark.parametrize("budget", [None, 500])
def test_rows_built_by_keys_are_the_slots_rows(monkeypatch, spec, budget):
    """By keys (how a GPU replay builds a range: sorted keys where the stream runs, the
    degrees or targets copied to the host), in one bucket or several, the counts and rows
    are those of the host's row slots."""
    buckets = []
    if budget is not None:
        monkeypatch.setattr(ranged, "bucket_budget", lambda *a, **k: budget)
        real = ranged.bucket_keys

        def spy(stream, lo, hi, *args, **kwargs):
            buckets.append((lo, hi))
            return real(stream, lo, hi, *args, **kwargs)
        monkeypatch.setattr(ranged, "bucket_keys", spy)
    source, keyed, n = by_keys_source(spec, 3)
    for lo, hi in ((0, n // 3), (n // 3, n), (5, 5)):
        table = source.counts(lo, hi)
        got_table = keyed.counts(lo, hi)
        np.testing.assert_array_equal(got_table, table)
        got = keyed.rows(lo, hi, got_table)
        want = source.rows(lo, hi, table)
        for a, b in zip(got[:2], want[:2]):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    if budget is not None:
        assert len({b for b in buckets if b[0] >= n // 3}) > 2      # several buckets


def test_a_gpu_stream_is_not_built_in_host_slots():
    import types
    with pytest.raises(ValueError, match="by keys"):
        ranged.StreamRows(lambda: iter(()), 4, symmetric=False, edges=1, parts=1,
                          xp=types.SimpleNamespace(), by_keys=False)


def test_a_ranks_loader_is_given_its_device(monkeypatch):
    """distributed.load_graph and the command line's loader hand load_ranked the rank's own
    device, on whose GPU the stream is replayed."""
    import types
    import groute.distributed
    import groute.graph.ranked
    seen = []
    monkeypatch.setattr(groute.distributed, "load_ranked",
                        lambda *a, **k: seen.append(k["device"]))
    monkeypatch.setattr(groute.graph.ranked, "load_ranked",
                        lambda *a, **k: seen.append(k["device"]))
    ctx = types.SimpleNamespace(ranks=None, local_device="this rank's device")
    groute.distributed.load_graph("kron:8", ctx)
    from apps import app_cli
    args = types.SimpleNamespace(symmetric=False, columns=None, graph="kron:8", seed=None,
                                 stats=False)
    app_cli._load_part(args, ctx)
    assert seen == ["this rank's device"] * 2


@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["kron:12", "rmat:10", "er:700:6"])
def test_rows_replayed_on_a_gpu_are_the_hosts(spec):
    """The ranks of a CUDA job replay the stream on their GPU: the same rows as NumPy's."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no GPU")
    offsets, parts = ranked_rows(spec, 3)
    offsets_gpu, parts_gpu = ranked_rows(spec, 3, xp=cupy)
    np.testing.assert_array_equal(offsets_gpu, offsets)
    for got, want in zip(parts_gpu, parts):
        assert got[:2] == want[:2]
        for a, b in zip(got[2:4], want[2:4]):
            assert isinstance(a, np.ndarray)
            np.testing.assert_array_equal(a, b)


def test_a_range_peaks_at_its_candidates_not_their_keys():
    """Building one range's rows holds 4 bytes per candidate arc (its slots), not the 8-byte
    keys of every candidate and their sorted copy."""
    source, n = row_source("kron:18", 2)
    table = source.counts(0, n // 2)
    candidates = int(table[:, 1].sum())
    with TracedPeak() as peak:
        indptr, indices, _ = source.rows(0, n // 2, table)
    assert indices.shape[0] < candidates
    assert peak.bytes < 4 * candidates + 8 * indptr.shape[0] + (12 << 20)
    assert peak.bytes < 8 * candidates


def test_a_parts_weights_are_the_whole_graphs_hashed_in_chunks():
    """A rank's random weights are the whole graph's for its arcs, hashed in row-aligned
    chunks: no arc-sized int64 temporaries beside the part."""
    from groute.graph.partition import LocalGraph
    from groute.graph.rank_graph import RankGraph
    whole = load_graph("kron:12", cache=False)
    lo, hi = 1000, 3000
    a, b = int(whole.indptr[lo]), int(whole.indptr[hi])
    part = LocalGraph(1, lo, whole.indptr[lo:hi + 1] - a, whole.indices[a:b], None,
                      num_global_vertices=whole.num_vertices, directed=False, name="kron:12[1]")
    g = RankGraph(part, [0, lo, hi, whole.num_vertices], num_edges=whole.num_edges,
                  name="kron:12")
    assert np.array_equal(g.with_weights(seed=3).weights, whole.with_weights(seed=3).weights[a:b])
    n, arcs = 1 << 20, 6 << 20                   # a big part: 6M arcs from vertex 5000 on
    gen = np.random.default_rng(1)
    indptr = np.concatenate([[0], np.sort(gen.integers(0, arcs, n - 1)), [arcs]])
    big = RankGraph(LocalGraph(1, 5000, indptr, gen.integers(0, n, arcs, dtype=np.int32), None,
                               num_global_vertices=n + 5000, directed=True, name="big[1]"),
                    [0, 5000, n + 5000], num_edges=2 * arcs, name="big")
    with TracedPeak() as peak:
        weights = big.with_weights(seed=1).weights
    assert weights.shape == (arcs,) and weights.dtype == np.int32
    assert peak.bytes < 4 * arcs + (96 << 20)        # the weights and one chunk's arrays


@pytest.mark.parametrize("spec", ["kron:12", "grid:60", "rmat:10"])
def test_a_graph_of_one_rank_answers_the_rules_facts_as_the_whole(spec):
    """A job of one rank asks the ``auto`` rules' diameter test of its one part, which holds
    every row: the answer is the whole graph's."""
    from groute.engines.relax.solver import graph_is_low_diameter, low_diameter
    from groute.graph.partition import LocalGraph
    from groute.graph.rank_graph import RankGraph, whole_rows
    g = load_graph(spec, cache=False)
    n = g.num_vertices
    part = LocalGraph(0, 0, g.indptr, g.indices, g.weights, num_global_vertices=n,
                      directed=g.directed, name=spec)
    one = RankGraph(part, [0, n], num_edges=g.num_edges, name=spec)
    assert whole_rows(one) is part and whole_rows(g) is g
    assert graph_is_low_diameter(one) == low_diameter(g)


def test_algorithms_of_a_whole_graph_refuse_a_graph_of_a_ranks_rows():
    """Louvain and the weighted power iteration, closeness and betweenness run on a whole graph
    in one process: given a graph loaded by ranks (here one rank's, holding every row) they
    refuse it naming themselves and how to load it whole (they failed with AttributeErrors);
    unweighted closeness runs on it."""
    import groute
    from groute.graph.partition import LocalGraph
    from groute.graph.rank_graph import RankGraph
    g = load_graph("kron:8", weighted=True, cache=False)
    n = g.num_vertices
    part = LocalGraph(0, 0, g.indptr, g.indices, g.weights, num_global_vertices=n,
                      directed=g.directed, name="kron:8")
    one = RankGraph(part, [0, n], num_edges=g.num_edges, name="kron:8")
    cpu = {"backend": "cpu", "devices": 1}
    for what, call in (
            ("community detection", lambda: groute.louvain_communities(one, **cpu)),
            ("weighted closeness", lambda: groute.closeness_centrality(one, distance="weight",
                                                                       **cpu)),
            ("weighted betweenness", lambda: groute.betweenness_centrality(one, weight="weight",
                                                                           **cpu)),
            ("a weighted power iteration",
             lambda: groute.eigenvector_centrality(one, weight="weight", **cpu))):
        with pytest.raises(ValueError, match=rf"^{what}.* runs on a whole graph in one "
                                             rf"process, but kron:8 was loaded by ranks "
                                             rf".*groute.graph.load_graph"):
            call()
    assert groute.closeness_centrality(one, **cpu).values.shape == (n,)
