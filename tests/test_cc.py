"""Connected components: 1-4 devices, both backends, both paths after sampling (in place: every
device samples and links its own rows, then one merge level with its giant check and repair;
Groute's routed segments), exact canonical labels against the reference and an independent
union-find; the one-level merge on every cut of the rows of adversarial graphs and on random
graphs and cuts, and that its repair is what keeps them exact; weak components of directed
graphs; first-available balancing; merge ordering with a slow device; the labels' chunked
download; the kernels compiled by nvcc; bad input; the CLI."""
import shutil
import subprocess
from functools import partial

import numpy as np
import pytest

import networkx as nx

from groute.apps.cc import CC, connected_components as _connected_components
from groute.apps.cc import weakly_connected_components
from groute.engines.components.device import (KERNEL as UNION_FIND, STAT_REST_ARCS,
                                              STAT_REST_ROWS, STATS, compress_numpy, hook_numpy,
                                              reference_group, rest_numpy)
from groute.engines.components.layout import (bitmap_has, bitmap_members, bitmap_words, edge_list,
                                              late_arcs, late_bitmap, split_rows, symmetric_csr,
                                              undirected_edge_count, vote_samples)
from groute.engines.components.solver import peer_path_unavailable
from groute import Context
from groute.graph import load_graph, reference
from groute.tuning import CCTuning
from support import SHARED_GRAPHS, device_cases, gpu_marks, skip_if_missing
from support import graph_from as _graph_from

#: CC's hand-made graphs are undirected unless a test says otherwise
graph_from = partial(_graph_from, directed=False)


def union_find_labels(g):
    """Weak components by a plain sequential union-find; label = smallest vertex id."""
    n = g.num_vertices
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    src = np.repeat(np.arange(n), np.diff(g.indptr))
    for u, v in zip(src.tolist(), np.asarray(g.indices).tolist()):
        a, b = find(u), find(v)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.array([find(v) for v in range(n)], dtype=np.int64)


def hand_graphs():
    rng = np.random.default_rng(7)
    perm = rng.permutation(1000)                       # one long path, in scrambled vertex order
    return {
        "isolated": graph_from(6, [(1, 4)]),
        "no_edges": graph_from(5, []),
        "one_path": graph_from(1000, np.column_stack([perm[:-1], perm[1:]])),
        "many_pairs": graph_from(400, [(2 * i + 1, 2 * i) for i in range(200)]),
        # weak components {0,1,2,3} and {4,5,6}; every strong component is a single vertex
        "directed_weak": graph_from(8, [(0, 1), (1, 2), (3, 2), (6, 5), (4, 5)], directed=True),
        "selfloops": graph_from(5, [(0, 0), (3, 3), (3, 4)], directed=True),
    }


def check(labels, g):
    ref = reference.connected_components(g)
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(labels, ref, err_msg=f"{g.name}: {reference.mismatch_report(labels, ref)}")


def test_reference_agrees_with_union_find():
    for g in hand_graphs().values():
        np.testing.assert_array_equal(reference.connected_components(g), union_find_labels(g))


def connected_components(g, **options):
    """The components NetworkX's names give ``g``: connected (undirected) or weakly connected
    (directed), the same engine."""
    run = weakly_connected_components if g.directed else _connected_components
    return run(g, **options)


def test_directed_graph_gives_weak_components():
    """connected_components refuses a directed graph, as NetworkX's does;
    weakly_connected_components takes it, and refuses an undirected one."""
    g = hand_graphs()["directed_weak"]
    assert g.directed
    with pytest.raises(nx.NetworkXNotImplemented, match="weakly_connected_components"):
        _connected_components(g, backend="cpu", devices=1)
    labels = weakly_connected_components(g, backend="cpu", devices=1).values
    assert labels.tolist() == [0, 0, 0, 0, 4, 4, 4, 7]
    with pytest.raises(nx.NetworkXNotImplemented, match="undirected"):
        weakly_connected_components(g.symmetrize(), backend="cpu", devices=1)
    G = nx.DiGraph([(0, 1), (2, 1)])
    assert nx.weakly_connected_components(G)   # NetworkX's answers and errors, the same
    with pytest.raises(nx.NetworkXNotImplemented):
        list(nx.connected_components(G))


def check_path_stats(stats, rest, k, n):
    """The counters say which path ran and add up: in place, one merge level whatever the
    device count (two bitmap words per 32 vertices from each other device at least); segments,
    a merge tree."""
    assert stats["rest"] == rest
    if rest == "kernel":
        assert stats["merge_rounds"] == int(k > 1)
        assert stats["routed"] is False and stats["edges"] is None and stats["segments"] == 0
        assert len(stats["rows_per_device"]) == k and sum(stats["rows_per_device"]) == n
        assert 0 <= stats["rest_remote_arcs"] <= stats["rest_arcs"]
        assert stats["bytes_moved"] >= 8 * -(-n // 32) * (k - 1)
        assert set(stats["repaired_devices"]) <= set(range(k))
        if k == 1:
            assert stats["rest_remote_arcs"] == 0 and stats["repaired_devices"] == []
    else:
        assert stats["merge_rounds"] == (int(np.ceil(np.log2(k))) if k > 1 else 0)
        assert stats["routed"] is True
        assert sum(stats["edges_per_device"]) == stats["edges"]
        assert sum(stats["segments_per_device"]) == stats["segments"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rest", ["kernel", "segments"])
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
def test_hand_graphs(backend, k, rest):
    skip_if_missing(backend, k)
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in hand_graphs().values():
            res = connected_components(g, ctx=ctx, rest=rest, tuning=CCTuning(segment_edges=64))
            check(res.values, g)
            np.testing.assert_array_equal(res.values, union_find_labels(g))
            if g.num_vertices:
                check_path_stats(res.stats, rest, k, g.num_vertices)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("rest", ["auto", "segments"])
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
def test_random_and_real_graphs(backend, k, rest):
    skip_if_missing(backend, k)
    graphs = [load_graph("kron:11", cache=False), load_graph("grid:40", cache=False),
              load_graph("er:3000:1", cache=False)]
    for name in ("power.mtx.gz", "polblogs.mtx.gz"):
        if (SHARED_GRAPHS / name).exists():
            graphs.append(load_graph(SHARED_GRAPHS / name, cache=False))
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in graphs:
            with CC(g, ctx=ctx, rest=rest,
                    tuning=CCTuning(segment_edges=max(1000, g.num_edges // 13))) as solver:
                first = solver.run()
                check(first.values, g)
                # auto is the in-place path wherever devices reach each other (CPU; NVLink)
                auto = "segments" if peer_path_unavailable(ctx.devices) else "kernel"
                check_path_stats(first.stats, auto if rest == "auto" else rest, k, g.num_vertices)
                np.testing.assert_array_equal(solver.run().values, first.values)  # reusable


@pytest.mark.timeout(60)
def test_first_available_gives_a_slow_device_fewer_segments():
    g = load_graph("grid:60", cache=False)
    # fast devices take some time per task too, so neither is starved by the other's head start
    with Context(3, backend="cpu", timeout=20, cpu_delays=[0.002, 0.002, 0.05]) as ctx:
        res = connected_components(g, ctx=ctx, afforest=False,
                                   tuning=CCTuning(segment_edges=200, num_buffers=1))
    check(res.values, g)
    per = res.stats["segments_per_device"]
    assert sum(per) == res.stats["segments"]
    assert per[2] < per[0] and per[2] < per[1], per


def afforest_cases():
    """(backend, k, options): the sampling variants on both backends; on CUDA also the light
    link and the compact-and-route path on one device."""
    out = []
    for k in (1, 2, 3, 4):
        for rounds in (0, 1, 2):
            for rest in ("kernel", "segments"):
                out.append(pytest.param("cpu", k, {"sample_rounds": rounds, "rest": rest},
                                        id=f"cpu-x{k}-r{rounds}-{rest}"))
    out.append(pytest.param("cpu", 2, {"afforest": False}, id="cpu-x2-edge-list"))
    for k in (1, 2, 3, 4):      # three: the segment merge tree's uneven branch
        for opts in ({"sample_rounds": 1, "link": "hook"}, {"sample_rounds": 2, "link": "light"},
                     {"sample_rounds": 0, "link": "mixed"}, {"sample_rounds": 2, "link": "mixed"},
                     {"sample_rounds": 1, "link": "light", "rest": "kernel"},
                     {"sample_rounds": 2, "rest": "segments"}, {"afforest": False}):
            out.append(pytest.param("cuda", k, opts, marks=gpu_marks(k), id=f"cuda-x{k}-{opts}"))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k, opts", afforest_cases())
def test_afforest_variants(backend, k, opts):
    """Many small components (er:3000:1, a directed graph) leave work after the vote: exact
    labels whatever the rounds, the linking step or where the rest is hooked."""
    skip_if_missing(backend, k)
    graphs = [load_graph("er:3000:1", cache=False), load_graph("grid:30", cache=False),
              hand_graphs()["directed_weak"], hand_graphs()["one_path"],
              load_graph("rmat:10", cache=False)]
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in graphs:
            knobs = {key: v for key, v in opts.items() if key in ("sample_rounds", "link")}
            path = {key: v for key, v in opts.items() if key not in knobs}
            with CC(g, ctx=ctx, **path, tuning=CCTuning(segment_edges=97, **knobs)) as solver:
                res = solver.run()
                check(res.values, g)
                np.testing.assert_array_equal(solver.run().values, res.values)
                if opts.get("afforest", True):
                    giant = res.stats["giant_root"]
                    assert res.stats["giant_size"] == np.count_nonzero(res.values == res.values[giant])
                    check_path_stats(res.stats, opts.get("rest", "kernel"), k, g.num_vertices)


def test_symmetric_csr_and_late_arcs():
    d = graph_from(4, [(1, 0), (2, 3), (3, 3), (0, 2)], directed=True)
    indptr, indices = symmetric_csr(d)
    assert indptr.tolist() == [0, 2, 3, 5, 6] and indices.tolist() == [1, 2, 0, 0, 3, 2]
    src, dst = late_arcs(indptr, indices, 1)
    assert src.tolist() == [0, 2] and dst.tolist() == [2, 3]


@pytest.mark.parametrize("rounds", [0, 1, 2, 5])
def test_late_arcs_equal_the_definition(rounds):
    """late_arcs (trailing arcs of each row, a byte mask) gives exactly the arcs whose slot in
    their row is >= rounds, in CSR order, on random graphs with empty and long rows."""
    rng = np.random.default_rng(rounds)
    for trial in range(20):
        n = int(rng.integers(1, 40))
        g = graph_from(n, rng.integers(0, n, (int(rng.integers(0, 200)), 2)).tolist(),
                       directed=bool(trial % 2))
        indptr, indices = symmetric_csr(g)
        src = np.repeat(np.arange(n), np.diff(indptr))
        slot = np.arange(indices.shape[0]) - np.repeat(indptr[:-1], np.diff(indptr))
        got_src, got_dst = late_arcs(indptr, indices, rounds)
        assert got_src.dtype == np.int32
        np.testing.assert_array_equal(got_src, src[slot >= rounds])
        np.testing.assert_array_equal(got_dst, indices[slot >= rounds])


def test_hooking_primitives():
    parent = np.arange(10, dtype=np.int32)
    hook_numpy(parent, np.array([9, 3, 5], np.int32), np.array([3, 7, 7], np.int32))
    assert parent.tolist() == [0, 1, 2, 3, 4, 3, 6, 3, 8, 3]
    chain = np.array([0, 0, 1, 2, 3], np.int32)
    compress_numpy(chain)
    assert chain.tolist() == [0] * 5


def test_edge_list_halves_undirected_and_keeps_directed_arcs():
    und = graph_from(4, [(0, 1), (1, 2), (2, 2)])
    assert sorted(map(tuple, edge_list(und).tolist())) == [(0, 1), (1, 2)]
    d = graph_from(4, [(1, 0), (0, 1), (2, 3), (3, 3)], directed=True)
    assert sorted(map(tuple, edge_list(d).tolist())) == [(0, 1), (1, 0), (2, 3)]


def test_empty_graph_and_bad_arguments():
    assert connected_components(graph_from(0, []), backend="cpu", devices=1).values.size == 0
    with pytest.raises(ValueError, match="segment_edges"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, tuning=CCTuning(segment_edges=0))
    with pytest.raises(ValueError, match="num_samples"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, tuning=CCTuning(num_samples=2000))
    with pytest.raises(ValueError, match="needs afforest=True"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, rest="kernel", afforest=False)
    with pytest.raises(ValueError, match="rest must be"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, rest="peer")
    with pytest.raises(ValueError, match="link must be"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, tuning=CCTuning(link="fast"))


@pytest.mark.timeout(60)
def test_cli_verifies_and_writes_file_ids(tmp_path, capsys):
    from groute.cli import main
    path = SHARED_GRAPHS / "karate.mtx.gz"
    if not path.exists():
        pytest.skip(f"{path} not present")
    out = tmp_path / "labels.txt"
    assert main(["cc", "--graph", str(path), "--backend", "cpu", "--devices", "2", "--verify",
                 "--repeat", "1", "--segment-edges", "10", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "exact match" in text and " 1 component " in text
    rows = [line.split() for line in out.read_text().splitlines()]
    assert len(rows) == 34 and rows[0] == ["1", "1"] and all(r[1] == "1" for r in rows)


def test_split_rows_balances_links_and_covers_every_vertex():
    indptr = np.r_[0, np.cumsum([5, 0, 0, 0, 1, 7, 2, 0, 3, 3])].astype(np.int64)
    for k in (1, 2, 3, 4, 12):
        off = split_rows(indptr, k, 2)
        assert off[0] == 0 and off[-1] == 10 and len(off) == k + 1 and np.all(np.diff(off) >= 0)
    # weights 1 + min(deg, 2): 3 1 1 1 2 | 3 3 1 3 3 (total 21): the first range takes the rows
    # whose running total stays within half (8 of 10.5)
    assert split_rows(indptr, 2, 2).tolist() == [0, 5, 10]
    assert split_rows(np.zeros(1, np.int64), 3, 2).tolist() == [0, 0, 0, 0]


def test_late_bitmap_and_edge_count():
    deg = np.array([0, 3, 1, 2] * 10)
    indptr = np.r_[0, np.cumsum(deg)].astype(np.int64)
    words = late_bitmap(indptr, 1)
    assert words.dtype == np.uint32 and words.size == 2
    bits = [(int(words[u // 32]) >> (u % 32)) & 1 for u in range(40)]
    assert bits == [int(d > 1) for d in deg]
    g = graph_from(6, [(0, 1), (1, 2), (2, 2), (3, 4), (5, 5)])   # loops are no edges
    indptr, indices = symmetric_csr(g)
    want = int(np.count_nonzero(np.repeat(np.arange(6), np.diff(indptr)) < indices))
    for chunk in (1, 2, 3, 1 << 20):
        assert undirected_edge_count(indptr, indices, chunk=chunk) == want == 3


def test_rest_links_every_late_arc_of_rows_outside_the_giant():
    """A device's rest decides on its own array only, so it cannot leave an edge to its twin's
    row (that row may be on another device, whose giant skips it): row 3 links 3 -> 1 although
    1 < 3 and 1 is outside the giant's tree; row 2, in it, is skipped. Counted: rows, arcs."""
    parent = np.array([0, 1, 0, 3], np.int32)
    stats = np.zeros(STATS, np.uint64)
    rest_numpy(parent, (np.array([2, 3], np.int32), np.array([1, 1], np.int32)),
               np.zeros(1, np.int32), stats)
    assert parent.tolist() == [0, 1, 0, 1]
    assert stats[STAT_REST_ROWS] == 1 and stats[STAT_REST_ARCS] == 1


@pytest.mark.timeout(60)
def test_in_place_merges_wait_for_a_slow_device():
    """The merge reads the other devices' arrays after their events only (no host wait): a slow
    device must still be merged after it finished, so delays change nothing but the time (each
    device's rest depends on its own rows only: the same counters as without delays)."""
    g = load_graph("er:3000:1", cache=False)
    for delays in ([0, 0.03, 0], [0.03, 0, 0, 0.03], [0, 0, 0, 0.02]):
        runs = []
        for cpu_delays in (delays, None):
            with Context(len(delays), backend="cpu", timeout=20, cpu_delays=cpu_delays) as ctx:
                runs.append(connected_components(g, ctx=ctx))
        slow, fast = runs
        check(slow.values, g)
        check_path_stats(slow.stats, "kernel", len(delays), g.num_vertices)
        for key in ("rest_rows", "rest_arcs", "repaired_devices", "bytes_moved", "giant_size"):
            assert slow.stats[key] == fast.stats[key], key
        assert slow.stats["rest_arcs"] > 0


@pytest.mark.timeout(60)
def test_without_peer_access_auto_routes_segments(monkeypatch):
    from groute.device.cpu import CPUDevice
    g = load_graph("grid:30", cache=False)
    with Context(2, backend="cpu", timeout=20) as ctx:
        assert peer_path_unavailable(ctx.devices) is None
        monkeypatch.setattr(CPUDevice, "can_access_peer", lambda self, other: False)
        assert "no peer access" in peer_path_unavailable(ctx.devices)
        assert peer_path_unavailable(ctx.devices[:1]) is None     # one device reads no peer
        res = connected_components(g, ctx=ctx)
        check(res.values, g)
        check_path_stats(res.stats, "segments", 2, g.num_vertices)
        with pytest.raises(ValueError, match="no peer access"):
            CC(g, ctx=ctx, rest="kernel")


@pytest.mark.timeout(60)
def test_cli_routes_segments_on_request(capsys):
    from groute.cli import main
    assert main(["cc", "--graph", "grid:20", "--backend", "cpu", "--devices", "3", "--verify",
                 "--repeat", "1", "--rest", "segments", "--stats"]) == 0
    text = capsys.readouterr().out
    assert "exact match" in text and "rest: segments" in text and "routed: True" in text


def test_edge_count_is_kept_on_the_graph(monkeypatch):
    """The undirected edge count (a pass over every arc) is counted once per graph: a second
    solver on the same graph object does not count again, and both report the same number."""
    import groute.engines.components.layout as cc_layout
    g = graph_from(6, [(0, 1), (1, 2), (2, 2), (3, 4), (5, 5)])
    assert not g.directed
    with CC(g, backend="cpu", devices=1) as a:
        first = a.m
    monkeypatch.setattr(cc_layout, "undirected_edge_count",
                        lambda *args, **kw: pytest.fail("counted again"))
    with CC(g, backend="cpu", devices=2) as b:
        assert b.m == first == 3


# ------------------------------------------------------------------------------------------------
# the one-level merge: every cut of the rows, adversarial and random graphs, the repair
# ------------------------------------------------------------------------------------------------
def cut_graphs():
    """Small graphs whose components meet the device boundaries in every way: a path in order
    (cut at every boundary by some cut), a scrambled path, a star whose hub is the last vertex
    (on the last device), many small components and isolated vertices, two components whose
    vertices alternate, a cycle, a directed graph, and no edges."""
    return {
        "path": graph_from(7, [(i, i + 1) for i in range(6)]),
        "scrambled_path": graph_from(7, [(3, 0), (0, 6), (6, 2), (2, 5), (5, 1), (1, 4)]),
        "star_hub_last": graph_from(7, [(6, i) for i in range(6)]),
        "pairs_and_isolated": graph_from(7, [(0, 3), (1, 2), (4, 6)]),
        "alternating": graph_from(7, [(0, 2), (2, 4), (4, 6), (1, 3), (3, 5)]),
        "cycle": graph_from(6, [(0, 5), (5, 1), (1, 4), (4, 2), (2, 3), (3, 0)]),
        "directed": graph_from(6, [(5, 0), (1, 0), (2, 4), (4, 3)], directed=True),
        "no_edges": graph_from(5, []),
    }


def every_cut(n, k):
    """Every way to cut vertices 0 .. n - 1 into k contiguous ranges, empty ones included, as
    split_rows's offsets."""
    from itertools import combinations_with_replacement
    for inner in combinations_with_replacement(range(n + 1), k - 1):
        yield np.array([0, *inner, n], np.int64)


def run_with_cuts(monkeypatch, ctx, g, cuts, rounds, **options):
    """The in-place path on ``ctx`` with the rows cut at each of ``cuts`` in turn: yields
    (cut, result)."""
    import groute.engines.components.solver as cc_solver
    for cut in cuts:
        monkeypatch.setattr(cc_solver, "split_rows", lambda indptr, k, r, cut=cut: cut)
        with CC(g, ctx=ctx, rest="kernel", tuning=CCTuning(sample_rounds=rounds, **options)) as s:
            yield cut, s.run()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_one_level_merge_on_every_cut(monkeypatch, k):
    """Exact labels for every cut of the rows into k ranges (empty ones too), with and without
    sampling rounds (none: every device's giant is one vertex, so the repair runs often)."""
    repaired = 0
    with Context(k, backend="cpu", timeout=20) as ctx:
        for name, g in cut_graphs().items():
            for rounds in (0, 1, 2):
                for cut, res in run_with_cuts(monkeypatch, ctx, g, every_cut(g.num_vertices, k),
                                              rounds):
                    ref = reference.connected_components(g)
                    assert np.array_equal(res.values, ref), (name, rounds, cut.tolist())
                    assert res.stats["rows_per_device"] == np.diff(cut).tolist()
                    assert res.stats["giant_size"] == np.count_nonzero(
                        ref == ref[res.stats["giant_root"]])
                    repaired += bool(res.stats["repaired_devices"])
    assert (repaired > 0) == (k > 1)


@pytest.mark.timeout(300)
def test_the_repair_is_what_keeps_split_giants_exact(monkeypatch):
    """Without the repair, some cut leaves two devices' giants apart in the merged forest with
    the arcs between them skipped by both: a wrong answer the check in the merge catches."""
    import groute.engines.components.device as cc_device
    monkeypatch.setattr(cc_device, "repair_numpy", lambda parent, devs, stats: None)
    wrong = []
    with Context(2, backend="cpu", timeout=20) as ctx:
        for name, g in cut_graphs().items():
            for cut, res in run_with_cuts(monkeypatch, ctx, g, every_cut(g.num_vertices, 2), 0):
                if not np.array_equal(res.values, reference.connected_components(g)):
                    wrong.append((name, cut.tolist(), res.stats["repaired_devices"]))
    assert wrong and all(redo for _, _, redo in wrong), wrong


def random_graph(rng):
    """A random small graph: a few dense clusters, a sparse sprinkle of cross edges, isolated
    vertices, in a random vertex order, directed or not."""
    n = int(rng.integers(1, 60))
    edges = []
    for _ in range(int(rng.integers(0, 4))):
        members = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
        edges += [tuple(e) for e in rng.choice(members, (int(rng.integers(0, 2 * n)), 2))]
    edges += [tuple(e) for e in rng.integers(0, n, (int(rng.integers(0, 5)), 2))]
    return graph_from(n, edges, directed=bool(rng.integers(0, 2)))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_one_level_merge_on_random_graphs_and_cuts(monkeypatch, k):
    """Exact labels on random graphs cut at random places, with random rounds and voters."""
    rng = np.random.default_rng(100 + k)
    with Context(k, backend="cpu", timeout=20) as ctx:
        for trial in range(60):
            g = random_graph(rng)
            cut = np.r_[0, np.sort(rng.integers(0, g.num_vertices + 1, k - 1)), g.num_vertices]
            rounds, voters = int(rng.integers(0, 3)), int(rng.integers(1, 20))
            for _, res in run_with_cuts(monkeypatch, ctx, g, [cut], rounds, num_samples=voters):
                assert np.array_equal(res.values, reference.connected_components(g)), \
                    (trial, cut.tolist(), rounds, voters)


def test_reference_group_prefers_the_devices_that_skipped_most():
    """The reference giant is the merged root whose devices' giant trees hold the most
    vertices (one more per device), the first device's on a tie; the rest are repaired."""
    assert reference_group([5, 5, 7, 7], [10, 0, 3, 3]) == (5, 0b1100)
    assert reference_group([1, 2, 2], [100, 0, 0]) == (1, 0b110)
    assert reference_group([1, 2], [0, 0]) == (1, 0b10)
    assert reference_group([2, 1, 1], [0, 0, 0]) == (1, 0b1)
    assert reference_group([4], [9]) == (4, 0)


def test_bitmaps_and_voters():
    mask = np.zeros(70, bool)
    mask[[0, 31, 32, 69]] = True
    words = bitmap_words(mask)
    assert words.dtype == np.uint32 and words.size == 3
    assert bitmap_members(words, 70).tolist() == [0, 31, 32, 69]
    assert bitmap_members(words, 40).tolist() == [0, 31, 32]
    assert bitmap_has(words, np.array([0, 1, 69])).tolist() == [True, False, True]
    assert bitmap_words(np.zeros(0, bool)).tolist() == [0]
    # one device draws exactly what a first device always drew from the whole graph
    one = vote_samples(np.array([0, 1000]), 64)
    assert np.array_equal(one[0], np.random.default_rng(0x5EED).integers(0, 1000, 64).astype(np.int32))
    parts = vote_samples(np.array([0, 10, 10, 30]), 200)
    assert parts[0].min() >= 0 and parts[0].max() < 10
    assert parts[1].min() >= 0 and parts[1].max() < 30        # no rows: the whole graph's
    assert parts[2].min() >= 10 and parts[2].max() < 30
    assert all(p.dtype == np.int32 and p.size == 200 for p in parts)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_union_find_kernels_compile(tmp_path):
    """union_find.cu compiles for Hopper (nvcc, no GPU needed): a kernel's syntax or type error
    shows here, not on the first GPU run."""
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(UNION_FIND), "-o",
                           str(tmp_path / "union_find.o")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------------------------------
# the CUDA path on 2-4 GPUs (the same cases as above where they are cheap)
# ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k)) for k in (2, 3, 4)])
def test_one_level_merge_on_every_cut_cuda(monkeypatch, k):
    """The CUDA merge, publish and repair kernels: exact labels for every cut of the adversarial
    graphs, and on random graphs cut at random; the repair runs in some of them."""
    skip_if_missing("cuda", k)
    repaired = 0
    rng = np.random.default_rng(k)
    with Context(k, backend="cuda", timeout=20) as ctx:
        graphs = cut_graphs()
        for name in ("path", "star_hub_last", "pairs_and_isolated", "alternating", "directed"):
            g = graphs[name]
            for rounds in (0, 2):
                for cut, res in run_with_cuts(monkeypatch, ctx, g, every_cut(g.num_vertices, k),
                                              rounds):
                    check(res.values, g)
                    repaired += bool(res.stats["repaired_devices"])
        for trial in range(30):
            g = random_graph(rng)
            cut = np.r_[0, np.sort(rng.integers(0, g.num_vertices + 1, k - 1)), g.num_vertices]
            for _, res in run_with_cuts(monkeypatch, ctx, g, [cut], int(rng.integers(0, 3))):
                check(res.values, g)
    assert repaired > 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k)) for k in (1, 2, 3, 4)])
def test_cuda_in_place_on_larger_graphs(k):
    """kron and grid graphs (a giant: no device is repaired, the giant's size is counted on the
    device) and a graph without one (er:3000:1 with no sampling round: devices are repaired),
    each exact, run twice on one solver."""
    skip_if_missing("cuda", k)
    with Context(k, backend="cuda", timeout=60) as ctx:
        for spec, rounds, giant in (("kron:16", 2, True), ("grid:300", 2, True),
                                    ("er:3000:1", 0, False)):
            g = load_graph(spec, cache=False)
            with CC(g, ctx=ctx, rest="kernel", tuning=CCTuning(sample_rounds=rounds)) as solver:
                for _ in range(2):
                    res = solver.run()
                    check(res.values, g)
                    check_path_stats(res.stats, "kernel", k, g.num_vertices)
                    root = res.stats["giant_root"]
                    assert res.stats["giant_size"] == np.count_nonzero(res.values == res.values[root])
                    if giant:
                        assert res.stats["repaired_devices"] == [], spec
                    elif k > 1:
                        assert res.stats["repaired_devices"], spec


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k)) for k in (1, 2)])
def test_cuda_labels_download_in_chunks(monkeypatch, k):
    """The int64 labels come down chunk by chunk through the staging buffer (a chunk smaller
    than the graph here): every chunk lands in its place."""
    import groute.engines.components.device as cc_device
    skip_if_missing("cuda", k)
    monkeypatch.setattr(cc_device, "LABEL_CHUNK", 1000)
    g = load_graph("kron:12", cache=False)
    with CC(g, backend="cuda", devices=k) as solver:
        assert solver.devs[0].staging.shape == (1000,)
        check(solver.run().values, g)
