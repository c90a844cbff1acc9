"""Partition invariants for every method, METIS quality and caching, errors."""
import sys
import time

import numpy as np
import pytest

from groute.graph import CSRGraph, load_graph, partition_graph, reference
from tests.graph.conftest import edges_graph

GRAPHS = {
    "kron": lambda: load_graph("kron:10", cache=False),
    "grid_weighted": lambda: load_graph("grid:25x31", cache=False),
    "directed": lambda: load_graph("rmat:9", cache=False).with_weights(seed=1),
    "power": lambda: load_graph(__import__("groute.graph", fromlist=["x"]).shipped_graph_path(),
                                cache=False),
}


def check_invariants(g: CSRGraph, p, k):
    n = g.num_vertices
    assert p.num_parts == k and p.owner.dtype == np.int32 and p.owner.shape == (n,)
    assert p.owner.min() >= 0 and p.owner.max() < k
    assert sorted(p.perm.tolist()) == list(range(n))                     # a permutation
    assert np.array_equal(p.iperm[p.perm], np.arange(n))
    assert p.offsets.dtype == np.int64 and p.offsets[0] == 0 and p.offsets[-1] == n
    assert np.all(np.diff(p.offsets) >= 1)                               # nobody is empty
    # each part owns a contiguous new-id range, and its vertices keep their original order
    for i in range(k):
        lo, hi = p.part_range(i)
        members = p.iperm[lo:hi]
        assert np.all(p.owner[members] == i)
        assert np.all(np.diff(members) > 0)
    assert np.array_equal(p.owner_of_new(p.perm), p.owner)
    assert p.owner_of_new(int(p.offsets[-2])) == k - 1
    # per-part CSRs (global new ids) reassemble the renumbered graph, which is g relabelled
    locs = [p.local(i) for i in range(k)]
    indptr = np.concatenate([[0]] + [l.indptr[1:] + sum(x.num_edges for x in locs[:i])
                                     for i, l in enumerate(locs)])
    assert np.array_equal(indptr, p.graph.indptr)
    assert np.array_equal(np.concatenate([l.indices for l in locs]), p.graph.indices)
    for l in locs:
        assert l.num_vertices == l.end - l.first and l.indptr[0] == 0
        if g.weights is not None:
            assert l.weights.shape == l.indices.shape
    back = set()
    src, dst = p.graph.edges()
    w = p.graph.weights if p.graph.weights is not None else np.zeros(len(src))
    back = set(zip(p.iperm[src].tolist(), p.iperm[dst].tolist(), w.tolist()))
    s0, d0 = g.edges()
    w0 = g.weights if g.weights is not None else np.zeros(len(s0))
    assert back == set(zip(s0.tolist(), d0.tolist(), w0.tolist()))
    assert p.graph.directed == g.directed
    # stats agree with a direct count
    cut = int(np.count_nonzero(p.owner[s0] != p.owner[d0]))
    assert p.stats["edge_cut"] == cut
    assert p.stats["vertices_per_part"] == np.diff(p.offsets).tolist()
    assert p.stats["edges_per_part"] == [l.num_edges for l in locs]
    assert sum(p.stats["boundary_vertices_per_part"]) == np.unique(s0[p.owner[s0] != p.owner[d0]]).size
    # mapping values back and forth
    vals = np.arange(n) * 10
    assert np.array_equal(p.to_original(p.to_new(vals)), vals)
    assert np.array_equal(p.to_new(vals)[p.perm], vals)
    # file ids follow the vertices
    assert np.array_equal(p.graph.file_id_of(p.perm), g.file_id_of(np.arange(n)))


def needs_pymetis():
    """pymetis is a dependency (pyproject); skip only where it is absent, e.g. a GPU image."""
    pytest.importorskip("pymetis")


@pytest.mark.parametrize("method", ["metis", "contiguous", "random"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_partition_invariants(name, k, method):
    if method == "metis" and k > 1:
        needs_pymetis()
    g = GRAPHS[name]()
    p = partition_graph(g, k, method=method, progress=False)
    check_invariants(g, p, k)


def test_results_in_new_ids_map_back_to_reference():
    g = load_graph("grid:20x17", cache=False)
    p = partition_graph(g, 3, method="random", seed=2)
    depth_new = reference.bfs(p.graph, int(p.perm[5]))
    assert np.array_equal(p.to_original(depth_new), reference.bfs(g, 5))


def test_contiguous_balances_arcs():
    g = load_graph("kron:11", cache=False)
    p = partition_graph(g, 4, method="contiguous")
    e = np.array(p.stats["edges_per_part"])
    assert e.max() - e.min() <= 2 * g.degrees().max()
    assert np.array_equal(p.perm, np.arange(g.num_vertices))             # identity renumbering


def test_random_is_seeded_and_balanced():
    g = load_graph("kron:9", cache=False)
    a = partition_graph(g, 3, method="random", seed=1)
    b = partition_graph(g, 3, method="random", seed=1)
    c = partition_graph(g, 3, method="random", seed=2)
    assert np.array_equal(a.owner, b.owner) and not np.array_equal(a.owner, c.owner)
    sizes = a.stats["vertices_per_part"]
    assert max(sizes) - min(sizes) <= 1


def test_metis_cut_far_below_random_on_road_grid():
    needs_pymetis()
    g = load_graph("grid:40", cache=False)
    m = partition_graph(g, 4, method="metis")
    r = partition_graph(g, 4, method="random")
    assert m.stats["edge_cut"] * 5 < r.stats["edge_cut"]
    sizes = m.stats["vertices_per_part"]
    assert max(sizes) <= 1.1 * g.num_vertices / 4                        # balanced


@pytest.mark.parametrize("k", [2, 3, 4])
def test_metis_balances_arcs_on_a_power_law_graph(k):
    """Vertices weigh 1 + degree: each part holds about its share of the arcs (unweighted,
    METIS balanced vertex counts and one of two parts of kron:12 held 91% of the arcs)."""
    needs_pymetis()
    g = load_graph("kron:12", cache=False)
    p = partition_graph(g, k, method="metis", cache=False, progress=False)
    arcs = np.asarray(p.stats["edges_per_part"])
    assert arcs.sum() == g.num_edges and arcs.max() <= 1.1 * g.num_edges / k
    assert p.stats["edge_cut"] < partition_graph(g, k, method="random").stats["edge_cut"]


def test_k1_is_fast_identity():
    g = load_graph("grid:300", cache=False)
    t0 = time.perf_counter()
    p = partition_graph(g, 1, method="metis")
    assert time.perf_counter() - t0 < 1.0
    assert p.graph is g and p.stats["edge_cut"] == 0
    assert p.local(0).num_edges == g.num_edges


def test_errors():
    g = edges_graph(3, [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="k must be <= \\|V\\|"):
        partition_graph(g, 4)
    with pytest.raises(ValueError, match=">= 1"):
        partition_graph(g, 0)
    with pytest.raises(ValueError, match="unknown partition method"):
        partition_graph(g, 2, method="spectral")
    with pytest.raises(IndexError):
        partition_graph(g, 2, method="contiguous").local(2)


@pytest.mark.parametrize("method", ["random", "metis", "contiguous"])
def test_a_seed_that_is_not_one_is_named(method):
    """Every method says so at once, not int()'s 'invalid literal', '&' on a float, the
    generator's 'seed and stream' or pymetis's 'incompatible function arguments'."""
    g = edges_graph(3, [(0, 1), (1, 2)])
    for seed, exc in (("x", TypeError), (1.7, TypeError), (None, TypeError), (True, TypeError),
                      (-1, ValueError), (2 ** 70, ValueError)):
        with pytest.raises(exc, match=r"seed \(the partition's\) must be an int >= 0"):
            partition_graph(g, 2, method=method, seed=seed, cache=False)
    with pytest.raises(TypeError, match="seed must be an int >= 0, got 'x'"):
        load_graph("kron:4", seed="x", cache=False)


def test_missing_pymetis_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(ImportError, match="pip install pymetis"):
        partition_graph(load_graph("kron:6", cache=False), 2, method="metis")


def test_metis_partition_cached_in_cache_dir_not_beside_file(tmp_path, monkeypatch, isolated_cache):
    needs_pymetis()
    import shutil
    from groute.graph import shipped_graph_path
    src = tmp_path / "power.mtx.gz"
    shutil.copy(shipped_graph_path(), src)
    g = load_graph(src)
    a = partition_graph(g, 4, method="metis", progress=False)
    assert set(tmp_path.iterdir()) == {src, isolated_cache}     # nothing beside the file
    parts = isolated_cache / "partitions"
    cached = list(parts.glob("power.metis-degw-k4-*.groute-cache.npz"))
    assert len(cached) == 1
    import pymetis
    with monkeypatch.context() as m:
        m.setattr(pymetis, "part_graph", lambda *a, **k: pytest.fail("METIS ran again"))
        b = partition_graph(load_graph(src), 4, method="metis", progress=False)
        assert np.array_equal(a.owner, b.owner)
        # the same structure with weights reuses it (METIS ignores weights) ...
        c = partition_graph(load_graph(src).with_weights(seed=1), 4, method="metis", progress=False)
        assert np.array_equal(a.owner, c.owner)
    # ... a different structure does not pick it up
    other = load_graph("grid:70", cache=False)
    other.source = str(src)
    partition_graph(other, 4, method="metis", progress=False)
    assert len(list(parts.glob("*.metis-degw-k4-*.groute-cache.npz"))) == 2


def test_metis_cache_for_generated_graph_in_cache_dir(isolated_cache):
    needs_pymetis()
    g = load_graph("grid:12", cache=False)
    partition_graph(g, 2, method="metis")
    assert list((isolated_cache / "partitions").glob("grid_12.metis-degw-k2-*"))


def test_same_graph_same_split_is_built_once():
    from groute.graph import generate, partition_graph
    g = generate("grid:30", backend="cpu")
    a = partition_graph(g, 3, "contiguous")
    assert partition_graph(g, 3, "contiguous") is a
    assert partition_graph(g, 3, "random") is not a
    assert partition_graph(g, 3, "contiguous", cache=False) is not a


def direct_stats(g, owner, k):
    """The partition statistics by their definition: per-arc owners of both ends."""
    src, dst = g.edges()
    cut = owner[src] != owner[dst]
    boundary = np.zeros(g.num_vertices, dtype=bool)
    boundary[src[cut]] = True
    return {"edge_cut": int(np.count_nonzero(cut)),
            "edges_per_part": np.bincount(owner[src], minlength=k).tolist(),
            "boundary_vertices_per_part": np.bincount(owner[boundary], minlength=k).tolist(),
            "vertices_per_part": np.bincount(owner, minlength=k).tolist()}


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("chunk", [1, 7, 1 << 18])
@pytest.mark.parametrize("method", ["contiguous", "random"])
@pytest.mark.parametrize("name", ["kron", "grid_weighted", "directed", "power", "isolated"])
def test_chunked_statistics_equal_the_definition(name, method, chunk, threads, monkeypatch):
    """The chunked cut / boundary count on the renumbered graph (no per-arc source array)
    gives the per-arc definition's numbers, whatever the chunk size and the number of counting
    threads, for k = 1..4."""
    from groute.graph import partition as part_mod
    monkeypatch.setattr(part_mod, "CUT_CHUNK_ARCS", chunk)
    monkeypatch.setattr(part_mod, "CUT_THREADS", threads)
    g = (edges_graph(9, [(0, 1), (1, 0), (4, 4), (8, 2), (2, 8), (5, 3)])
         if name == "isolated" else GRAPHS[name]())
    for k in (1, 2, 3, 4):
        p = partition_graph(g, k, method=method, cache=False, progress=False)
        want = direct_stats(g, p.owner, k)
        assert {key: p.stats[key] for key in want} == want, (name, method, k)


def test_metis_cache_is_shared_by_weighted_copies(tmp_path, monkeypatch):
    """METIS ignores weights, so SSSP's weighted copy of a graph reuses the split cached for the
    unweighted graph (keyed by structure_hash), and the split is the same."""
    needs_pymetis()
    monkeypatch.setenv("GROUTE_CACHE_DIR", str(tmp_path))
    g = load_graph("kron:9", cache=False)
    w = g.with_weights(seed=3)
    assert g.structure_hash() == w.structure_hash() == g.content_hash() != w.content_hash()
    first = partition_graph(g, 2, method="metis")
    assert list((tmp_path / "partitions").glob("*metis-degw-k2*"))
    import pymetis
    monkeypatch.setattr(pymetis, "part_graph", lambda *a, **k: pytest.fail("METIS ran again"))
    again = partition_graph(w, 2, method="metis")
    assert np.array_equal(first.owner, again.owner)


def test_metis_vertex_weights_fit_32_bits():
    from groute.graph.partition import _metis_vertex_weights
    small = _metis_vertex_weights(np.array([3, 0, 7]), np.int32)
    assert small.tolist() == [4, 1, 8]
    degrees = np.array([2**31, 5, 2**32 - 5], dtype=np.int64)              # 6G arcs
    w = _metis_vertex_weights(degrees, np.int32)
    assert w.dtype == np.int32 and (w >= 1).all() and int(w.astype(np.int64).sum()) < 2**31
    assert w[0] > w[1] and w[2] > w[0]                                    # order kept


def test_metis_complaints_stay_off_the_terminal(capfd, caplog):
    """METIS prints from C to fds 1/2 when a part comes out empty; those lines go to the log,
    and output of the process around the call is kept."""
    import logging
    import os
    from groute.graph import load_graph, partition_graph
    g = load_graph("kron:6")
    os.write(1, b"before\n")
    with caplog.at_level(logging.INFO, logger="groute.graph.partition"):
        p = partition_graph(g, 64, method="metis", cache=False, progress=False)
    os.write(2, b"after\n")
    out, err = capfd.readouterr()
    assert "***" not in out + err and "before" in out and "after" in err
    assert p.num_parts == 64
    assert any("METIS:" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(30)
def test_metis_output_redirections_of_two_threads_leave_stdout_where_it_was():
    """Two METIS calls at once (two threads) must not restore fds 1 and 2 out of order."""
    import os
    import threading
    from groute.graph.partition import _c_output_to_log
    before = [os.fstat(fd).st_ino for fd in (1, 2)]
    keep = [os.dup(fd) for fd in (1, 2)]
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with _c_output_to_log():
            first_in.set()
            second_in.wait(0.5)        # the second waits for this one to finish
        first_out.set()

    def second():
        first_in.wait(5)
        with _c_output_to_log():
            second_in.set()
            first_out.wait(5)          # the first leaves before the second
    try:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert [os.fstat(fd).st_ino for fd in (1, 2)] == before
    finally:
        for fd, copy in zip((1, 2), keep):
            os.dup2(copy, fd)
            os.close(copy)


def test_to_original_skips_the_gather_when_nothing_was_renumbered():
    """A contiguous partition (and one part) keeps every vertex's id: the answer is returned
    as it is, no pass over it; a renumbering partition still gathers."""
    g = load_graph("kron:8")
    values = np.arange(g.num_vertices)
    same = partition_graph(g, 3, "contiguous")
    assert same.stats["identity"] and same.to_original(values) is values
    moved = partition_graph(g, 3, "random", seed=1)
    assert not moved.stats["identity"]
    out = moved.to_original(values)
    assert out is not values and np.array_equal(out, values[moved.perm])


def test_auto_splits_small_graphs_by_metis_and_big_ones_contiguously(monkeypatch):
    """The solvers' default: METIS where it is quick (and pymetis installed), contiguous
    ranges past METIS_AUTO_MAX_ARCS (a first call would otherwise wait minutes for METIS)."""
    import groute.graph.partition as partition
    needs_pymetis()
    g = load_graph("grid:30", cache=False)
    assert partition.DEFAULT_PARTITION == "auto"
    p = partition_graph(g, 2, method="auto", cache=False, progress=False)
    assert p.method == partition.auto_method(g) == "metis"
    monkeypatch.setattr(partition, "METIS_AUTO_MAX_ARCS", g.num_edges - 1)
    assert partition.auto_method(g) == "contiguous"
    p = partition_graph(load_graph("grid:30", cache=False), 2, cache=False, progress=False)
    assert p.method == "contiguous"
    monkeypatch.setattr(partition, "METIS_AUTO_MAX_ARCS", g.num_edges)
    assert partition.auto_method(g) == "metis"
    # "auto" and the method it chose are one split of the graph, built once
    assert partition_graph(g, 2, method="auto") is partition_graph(g, 2, method="metis")


def test_auto_without_pymetis_splits_contiguously(monkeypatch):
    import importlib.util
    import groute.graph.partition as partition
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pymetis" else real(name, *a))
    assert partition.auto_method(load_graph("grid:30", cache=False)) == "contiguous"


@pytest.mark.parametrize("k, match", [(2.7, "got 2.7 \\(float\\)"), (True, "got True \\(bool\\)"),
                                      ("3", "got '3' \\(str\\)")])
def test_a_part_count_that_is_no_int_is_refused(k, match):
    """2.7 was split into 2 parts, True into 1, "3" into 3."""
    g = load_graph("er:40:3:seed=2", cache=False)
    with pytest.raises(TypeError, match=f"k is the number of parts, an int, {match}"):
        partition_graph(g, k, "contiguous")


def test_a_networkx_graph_to_split_is_named_with_its_converter():
    """It failed deep inside with AttributeError: 'Graph' object has no attribute 'to_host'."""
    import networkx as nx
    with pytest.raises(TypeError, match="a groute CSRGraph \\(groute.graph.as_graph converts"):
        partition_graph(nx.path_graph(6), 2)
