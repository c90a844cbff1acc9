"""Connected components: 1-4 devices, both backends, both paths after sampling (in place with the
sampling split by rows and peer-read merges; Groute's routed segments), exact canonical labels
against the reference and an independent union-find; weak components of directed graphs;
first-available balancing; merge ordering with a slow device; bad input; the CLI."""
from functools import partial

import numpy as np
import pytest

import networkx as nx

from groute.apps.cc import CC, connected_components as _connected_components
from groute.apps.cc import weakly_connected_components
from groute.engines.components.device import compress_numpy, hook_numpy, rest_numpy
from groute.engines.components.layout import (DESCRIPTION_SHARE, FIRST_SHARE_BOUND,
                                              HUB_DEGREE_FACTOR, edge_list, first_extra,
                                              first_share, hub_arcs, hub_degree_bound,
                                              late_arcs, late_bitmap, split_rows,
                                              symmetric_csr, undirected_edge_count)
from groute.engines.components.solver import peer_path_unavailable
from groute import Context
from groute.graph import load_graph, reference
from groute.tuning import CCTuning
from support import (SHARED_GRAPHS, backends, device_cases, gpu_marks, shared_graph_path,
                     skip_if_missing)
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
    """The counters say which path ran and add up."""
    assert stats["rest"] == rest
    if rest == "kernel":
        # one merge level: every other device's changes into the first, each at least a bit
        # per vertex (a 32-bit word per 32), or its whole array where its list overflowed
        assert stats["merge_rounds"] == (1 if k > 1 else 0)
        assert stats["routed"] is False and stats["edges"] is None and stats["segments"] == 0
        assert len(stats["rows_per_device"]) == k and sum(stats["rows_per_device"]) == n
        assert 0 <= stats["rest_remote_arcs"] <= stats["rest_arcs"]
        whole = stats["merges_read_whole"]
        assert 0 <= whole <= k - 1
        assert stats["bytes_moved"] >= 4 * -(-n // 32) * (k - 1 - whole) + 4 * n * whole
        if k == 1:
            assert stats["rest_remote_arcs"] == 0 and whole == 0
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("share", [1, "tiny"])
@pytest.mark.parametrize("backend, k", device_cases([2, 3, 4]))
def test_merge_by_changes_reads_a_sender_whole_only_past_its_list(backend, k, share,
                                                                 monkeypatch):
    """The in-place merge takes each other device's changes (its giant's tree as bits, the
    other vertices it moved as pairs) and reads a sender's whole array only when its pairs do
    not fit: a list of n pairs always fits, a list of one pair does not hold the 200 pairs of
    many_pairs' components (each sender's rows moved some): exact labels either way."""
    from groute.engines.components import device as cc_device
    skip_if_missing(backend, k)
    graphs = hand_graphs()
    graphs = [graphs["many_pairs"], graphs["one_path"], load_graph("er:3000:1", cache=False),
              load_graph("kron:10", cache=False)]
    monkeypatch.setattr(cc_device, "CHANGES_LIST_SHARE", 1 if share == 1 else 10**9)
    with Context(k, backend=backend, timeout=20) as ctx:
        for i, g in enumerate(graphs):
            res = connected_components(g, ctx=ctx, rest="kernel")
            np.testing.assert_array_equal(res.values, union_find_labels(g))
            check_path_stats(res.stats, "kernel", k, g.num_vertices)
            whole = res.stats["merges_read_whole"]
            if share == 1:
                assert whole == 0
            elif i == 0:
                assert whole == k - 1, res.stats


@pytest.mark.timeout(180)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}")
                               for k in (2, 3)])
def test_merge_by_changes_of_millions_of_vertices(k, monkeypatch):
    """The merge on GPUs where a warp reads fewer than 32 of a sender's bitmap words: about two
    million vertices give each warp of the grid a few (the small graphs above give one, the
    big ones 32), and the labels stay exact; the bits, not the whole array, were read (a list
    of n pairs, so that every sender's pairs fit)."""
    from groute.engines.components import device as cc_device
    skip_if_missing("cuda", k)
    monkeypatch.setattr(cc_device, "CHANGES_LIST_SHARE", 1)
    g = load_graph("er:2000000:4", cache=False)
    with Context(k, backend="cuda", timeout=60) as ctx:
        res = connected_components(g, ctx=ctx, rest="kernel")
    check(res.values, g)
    assert res.stats["merges_read_whole"] == 0, res.stats


@pytest.mark.timeout(120)
@pytest.mark.parametrize("listed", ["pairs", "whole"])
@pytest.mark.parametrize("backend", backends())
def test_changes_as_a_message_merge_at_any_offset(backend, listed):
    """A device's changes packed as a message for another process (giant, bits, pairs, or the
    array whole) read back at any 4-byte offset of a receive buffer (the pairs need not be
    8-byte aligned): merged into a fresh array it gives the sender's partition, and the
    labels made from it are the sender's compressed array."""
    from groute.engines.components.device import DeviceCC
    skip_if_missing(backend, 1)
    g = load_graph("er:3000:1", cache=False)
    indptr, indices = symmetric_csr(g)
    n = g.num_vertices
    cap = n if listed == "pairs" else 1
    with Context(1, backend=backend, timeout=20) as ctx:
        dev = ctx.devices[0]
        sender = DeviceCC(dev, n)
        sender.set_rows(0, indptr, indices)
        sender.reset()
        for r in range(2):
            sender.link_round(r, False)
            sender.compress(rows_only=True)
        sender.make_changes(dev.asarray(np.arange(0, n, 7, dtype=np.int32)[:1024]), cap)
        sender.describe_changes()
        message, count = sender.changes_message(20)
        assert (count < 0) == (listed == "whole")
        want = dev.to_host(sender.parent)
        for offset in range(4):
            buf = dev.xp.zeros(offset + message.shape[0], dtype=np.int32)
            buf[offset:] = message
            recv = DeviceCC(dev, n)
            recv.reset()
            view = recv.changes_from_message(buf[offset:], count, cap)
            moved = dev.asarray(np.zeros(2, np.uint64 if backend == "cuda" else np.int64))
            recv.merge_changes([view], recv.changes_table([view]) if recv.cuda else None, moved)
            recv.compress()
            labels = recv.labels_from_changes(view)
            recv.stream.record().synchronize(20)
            np.testing.assert_array_equal(dev.to_host(recv.parent), want)
            np.testing.assert_array_equal(dev.to_host(labels), want)
            assert int(dev.to_host(moved)[1]) == (listed == "whole")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", backends())
def test_the_vote_takes_the_most_frequent_root_and_the_smallest_of_a_tie(backend):
    """The giant's vote (``DeviceCC.sample_mode``) on both backends: the root most samples
    reach, the smallest among equally frequent ones, for 1 to 1024 samples (a lone sample,
    every root distinct, ties of several sizes, one root with most votes) over compressed
    parent arrays whose roots lie anywhere in the ids, the largest id among them."""
    from groute.engines.components.device import DeviceCC
    skip_if_missing(backend, 1)
    n = 5000
    rng = np.random.default_rng(7)
    cases = []
    for s in (1, 2, 3, 31, 32, 33, 500, 1023, 1024):
        roots = rng.choice(n, size=min(s, 40), replace=False)
        roots[0] = n - 1
        cases.append(rng.choice(roots, size=s))                # random counts, sometimes tied
        cases.append(np.resize(roots, s))                        # as even as can be: tied
    cases.append(rng.permutation(np.arange(n))[:1024])           # every root distinct
    cases.append(np.r_[np.full(600, 17), rng.integers(0, n, 424)])
    cases.append(np.r_[np.full(5, n - 1), np.full(4, 3)])    # the winner's run ends the sort
    cases.append(np.full(1024, n - 1))
    with Context(1, backend=backend, timeout=20) as ctx:
        dev = ctx.devices[0]
        cc = DeviceCC(dev, n)
        giant = dev.asarray(np.zeros(1, np.int32))
        for roots in cases:
            roots = roots.astype(np.int32)
            parent = np.arange(n, dtype=np.int32)
            members = rng.permutation(n).astype(np.int32)[:roots.size]
            members = np.setdiff1d(members, roots)[:roots.size]
            samples = np.r_[roots[:roots.size - members.size], members].astype(np.int32)
            parent[members] = roots[roots.size - members.size:]  # a sample may be a child
            parent[roots] = roots
            cc.parent = dev.asarray(parent)
            cc.sample_mode(dev.asarray(samples), giant)
            cc.stream.record().synchronize(20)
            values, counts = np.unique(parent[samples], return_counts=True)
            want = values[counts == counts.max()].min()
            assert int(dev.to_host(giant)[0]) == want, (roots.size, want)


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
    for k in (1, 2, 3):         # three: the merge tree's uneven branch
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


def racing_graphs():
    """Graphs big enough for every SM of a GPU to race on the same parent words, each a shape
    that ``union_find.cu``'s plain (possibly stale) and fresh reads must get right: a
    power-law graph (millions of reads of its hubs' roots), a mesh (long chains after a light
    round), a path in scrambled order (one chain through every vertex), and many small
    components (work left after the vote)."""
    rng = np.random.default_rng(11)
    n = 1 << 19
    perm = rng.permutation(n)
    return [load_graph("kron:16", cache=False), load_graph("grid:700", cache=False),
            graph_from(n, np.column_stack([perm[:-1], perm[1:]]), name="scrambled-path"),
            load_graph("er:300000:1", cache=False)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}")
                               for k in (1, 2, 4)])
def test_union_find_kernels_race_on_large_graphs(k):
    """The CUDA kernels' exact labels where thousands of threads race: every linking step, the
    in-place path and Groute's segments, several runs of one solver (the races differ)."""
    skip_if_missing("cuda", k)
    with Context(k, backend="cuda", timeout=60) as ctx:
        for g in racing_graphs():
            ref = reference.connected_components(g)
            for link in ("hook", "light", "mixed"):
                for rest in ("kernel", "segments"):
                    with CC(g, ctx=ctx, rest=rest, tuning=CCTuning(link=link)) as solver:
                        for _ in range(3):
                            labels = solver.run().values
                            np.testing.assert_array_equal(
                                labels, ref, err_msg=f"{g.name} link={link} rest={rest}: "
                                f"{reference.mismatch_report(labels, ref)}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}")
                               for k in (1, 2)])
def test_union_find_kernels_on_graphs_past_one_grid_step(k):
    """Graphs of more vertices than one step of the kernels' grid-stride loops covers at a
    full grid (8 blocks of 256 threads per SM, ``PASS_UNROLL`` vertices per thread, and a
    merge warp's 1,024 vertices per step): every pass and the merge take several steps, over
    a mesh and a graph of many small components (pairs in the merge's list)."""
    skip_if_missing("cuda", k)
    with Context(k, backend="cuda", timeout=60) as ctx:
        for spec in ("grid:3000", "er:1e7:2"):
            g = load_graph(spec, cache=False)
            ref = reference.connected_components(g)
            with CC(g, ctx=ctx) as solver:
                for _ in range(2):
                    labels = solver.run().values
                    np.testing.assert_array_equal(
                        labels, ref, err_msg=f"{spec}: {reference.mismatch_report(labels, ref)}")


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
    for hubs in (-1, 2.5, True):
        with pytest.raises(ValueError, match="hubs must be an int >= 0"):
            CCTuning(hubs=hubs)


def test_hub_arcs_are_the_sampled_arcs_of_the_highest_degrees():
    # degrees 2 0 3 3 1 3: the three hubs are 2, 3, 5 (ties by id), highest first
    indptr = np.r_[0, np.cumsum([2, 0, 3, 3, 1, 3])].astype(np.int64)
    indices = np.array([1, 2, 0, 3, 4, 0, 2, 5, 3, 1, 4, 0], np.int32)
    degrees, arcs = hub_arcs(indptr, indices, 3, 2)
    assert degrees.tolist() == [3, 3, 3]
    assert arcs.tolist() == [[[2, 0], [2, 3]], [[3, 0], [3, 2]], [[5, 1], [5, 4]]]
    # a tie at the cut goes to the lower ids
    assert hub_arcs(indptr, indices, 2, 2)[1][:, 0, 0].tolist() == [2, 3]
    # rows of a part: ids from `first`; a row with fewer arcs than rounds pads with loops
    degrees, arcs = hub_arcs(indptr[4:] - indptr[4], indices[indptr[4]:], 2, 2, first=4)
    assert degrees.tolist() == [3, 1] and arcs.tolist() == [[[5, 1], [5, 4]], [[4, 3], [4, 4]]]
    # a row without arcs is never a hub
    assert hub_arcs(indptr, indices, 99, 1)[1][:, 0, 0].tolist() == [2, 3, 5, 0, 4]
    assert hub_arcs(indptr, indices, 3, 0)[1].shape == (0, 0, 2)
    assert hub_arcs(np.zeros(4, np.int64), np.zeros(0, np.int32), 2, 2)[1].shape == (0, 2, 2)
    # only rows of least_degree or more: here the three of degree 3
    assert hub_arcs(indptr, indices, 5, 2, least_degree=3)[1][:, 0, 0].tolist() == [2, 3, 5]
    assert hub_arcs(indptr, indices, 5, 2, least_degree=4)[1].shape == (0, 2, 2)
    assert hub_degree_bound(60, 10) == HUB_DEGREE_FACTOR * 6 and hub_degree_bound(0, 10) == 1


@pytest.mark.parametrize("hubs", [40, 8])
def test_ranks_choose_the_hubs_one_process_chooses(hubs):
    """Across processes each rank offers its own rows' hubs and every rank keeps the same
    highest degrees (ties: the lower id): the whole graph's :func:`hub_arcs`. Each rank's own
    call makes its offer (its rows, its ``first``, the bound from the arcs the set-up summed);
    every rank then gathers all offers. On kron:9 nine rows pass the bound: with 40 hubs the bound
    decides, with 8 the count cuts between rows 42 and 176 (both of degree 153), which lie in
    different ranks' rows."""
    from types import SimpleNamespace
    from groute.engines.components.solver import ComponentsSolver
    g = load_graph("kron:9", cache=False)
    indptr, indices = symmetric_csr(g)
    n = g.num_vertices
    want = hub_arcs(indptr, indices, hubs, 2, least_degree=hub_degree_bound(indptr[-1], n))[1]
    assert want.shape[0] == min(hubs, 9) and (hubs == 40 or 42 in want[:, 0, 0])
    cuts = [0, 100, 101, 300, n]
    parts = [(indptr[a:b + 1] - indptr[a], indices[indptr[a]:indptr[b]], a)
             for a, b in zip(cuts[:-1], cuts[1:])]

    def rank(gathered):
        ranks = SimpleNamespace(allgather=gathered)
        return SimpleNamespace(tuning=CCTuning(hubs=hubs), rounds=2, k=len(parts), n=n,
                               ctx=SimpleNamespace(ranks=ranks))
    arcs = int(indptr[-1])              # every rank's rows' arcs, as the set-up sums them
    offers = []
    for ip, ix, a in parts:             # what each rank offers
        ComponentsSolver._ranks_hub_arcs(rank(lambda obj, what: offers.append(obj) or [obj]),
                                         ip, ix, a, arcs)
    for ip, ix, a in parts:             # what each rank keeps of every rank's offer
        got = ComponentsSolver._ranks_hub_arcs(rank(lambda obj, what: offers), ip, ix, a, arcs)
        np.testing.assert_array_equal(got, want)


@pytest.mark.timeout(120)
def test_hubs_leave_the_rest_as_one_device_leaves_it():
    """On a graph with hubs (kron:11) the hubs linked first change no answer and no count of
    the rest: every device count links the same rows and arcs after sampling."""
    g = load_graph("kron:11", cache=False)
    indptr, _ = symmetric_csr(g)
    assert hub_arcs(indptr, symmetric_csr(g)[1], 1024, 2,
                    least_degree=hub_degree_bound(indptr[-1], g.num_vertices))[1].shape[0] > 10
    counts = set()
    for k in (1, 2, 3):
        res = connected_components(g, backend="cpu", devices=k, rest="kernel")
        check(res.values, g)
        counts.add((res.stats["rest_rows"], res.stats["rest_arcs"], res.stats["giant_root"]))
    assert len(counts) == 1


def test_every_device_links_the_hubs_before_sampling(monkeypatch):
    """In place on several devices every device hooks the same hub arcs right after its
    reset, before its first sampling round; on one device, and with hubs=0, none does."""
    from groute.engines.components import device as cc_device
    calls = []
    for name in ("reset", "hook", "link_round"):
        orig = getattr(cc_device.DeviceCC, name)

        def wrapped(self, *a, _orig=orig, _name=name, **kw):
            calls.append((self.device.name, _name, a[0].tolist() if _name == "hook" else None))
            return _orig(self, *a, **kw)
        monkeypatch.setattr(cc_device.DeviceCC, name, wrapped)
    g = load_graph("kron:10", cache=False)
    indptr, indices = symmetric_csr(g)
    least = hub_degree_bound(indptr[-1], g.num_vertices)
    edges = hub_arcs(indptr, indices, 8, 2, least_degree=least)[1].reshape(-1, 2).tolist()
    assert len(edges) == 16
    res = connected_components(g, backend="cpu", devices=3, rest="kernel",
                               tuning=CCTuning(hubs=8))
    check(res.values, g)
    for dev in ("cpu:0", "cpu:1", "cpu:2"):
        mine = [(name, arg) for d, name, arg in calls if d == dev]
        assert mine[:3] == [("reset", None), ("hook", edges), ("link_round", None)], mine[:3]
    # one device, no hubs asked for, and a mesh (no vertex of 8x the mean degree): no hook
    for devices, hubs, graph in ((1, 8, g), (2, 0, g), (2, 8, load_graph("grid:40", cache=False))):
        calls.clear()
        check(connected_components(graph, backend="cpu", devices=devices, rest="kernel",
                                   tuning=CCTuning(hubs=hubs)).values, graph)
        assert not [c for c in calls if c[1] == "hook"]


@pytest.mark.timeout(60)
def test_cli_verifies_and_writes_file_ids(tmp_path, capsys):
    from groute.cli import main
    path = shared_graph_path("karate")
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


def test_split_rows_gives_the_first_device_its_extra_share():
    """With ``extra`` the first device takes that share of the work more than each other
    device (which describe their arrays after sampling while it waits); the others split the
    rest equally. 1,000 rows of equal work: on 2 devices 55% and 45%, on 4 32.5% and 22.5%
    each."""
    indptr = np.arange(0, 2001, 2, dtype=np.int64)          # every row weighs 1 + 2
    assert split_rows(indptr, 2, 2, 0.1).tolist() == [0, 550, 1000]
    assert split_rows(indptr, 4, 2, 0.1).tolist() == [0, 325, 550, 775, 1000]
    assert split_rows(indptr, 1, 2, 0.1).tolist() == [0, 1000]
    assert split_rows(indptr, 3, 2, 0.0).tolist() == split_rows(indptr, 3, 2).tolist()


def test_first_extra_keeps_the_first_device_near_an_even_share():
    """The first device's extra work is DESCRIPTION_SHARE where that keeps its share within
    FIRST_SHARE_BOUND times an even one, else the bound's (it holds the fullest rows)."""
    assert first_extra(1) == 0.0
    assert first_extra(2) == DESCRIPTION_SHARE
    for k in range(2, 9):
        assert first_share(k, first_extra(k)) <= FIRST_SHARE_BOUND / k + 1e-12
    assert first_share(4, first_extra(4)) == pytest.approx(FIRST_SHARE_BOUND / 4)


def test_late_bitmap_and_edge_count():
    deg = np.array([0, 3, 1, 2] * 10)
    indptr = np.r_[0, np.cumsum(deg)].astype(np.int64)
    words = late_bitmap(indptr, 1)
    assert words.dtype == np.uint32 and words.size == 2
    bits = [(int(words[u // 32]) >> (u % 32)) & 1 for u in range(40)]
    assert bits == [int(d > 1) for d in deg]
    # a rank's rows (vertices 33..36 of 70): only their bits, at their places in the whole
    part = late_bitmap(indptr[33:38] - indptr[33], 1, first=33, n=70)
    assert part.size == 3
    bits = [(int(part[u // 32]) >> (u % 32)) & 1 for u in range(70)]
    assert bits == [int(33 <= u < 37 and deg[u] > 1) for u in range(70)]
    g = graph_from(6, [(0, 1), (1, 2), (2, 2), (3, 4), (5, 5)])   # loops are no edges
    indptr, indices = symmetric_csr(g)
    want = int(np.count_nonzero(np.repeat(np.arange(6), np.diff(indptr)) < indices))
    for chunk in (1, 2, 3, 1 << 20):
        assert undirected_edge_count(indptr, indices, chunk=chunk) == want == 3


def test_rest_keeps_edges_decided_on_one_snapshot():
    """After sampling: giant {0}, tree {1, 2} (root 1), {3}. Device 0's rows hold 2 -> 0 (kept:
    0 is in the giant's tree) and 3 -> 1 (left to its twin, since 1 < 3 and 1 is outside the
    giant's tree); device 1's row holds 1 -> 3. Deciding device 1's list after hooking device 0's
    would find 1 in the giant's tree by then, drop 1 -> 3 and leave 3 alone."""
    parent = np.array([0, 1, 1, 3], np.int32)
    giant = np.zeros(1, np.int32)
    first = (2, np.array([0, 1, 2], np.int64), np.array([0, 1], np.int32))    # rows 2, 3
    second = (1, np.array([0, 1], np.int64), np.array([3], np.int32))         # row 1
    count = np.zeros(4, np.int64)
    rest_numpy(parent, [first, second], 0, giant, count)
    assert parent.tolist() == [0, 0, 0, 0]
    assert count.tolist() == [3, 3, 1, 1]


@pytest.mark.timeout(60)
def test_in_place_merges_wait_for_a_slow_device():
    """The merge of a peer's array is ordered by events only (no host wait): a slow sender must
    still be merged after it finished, and every device count gives the same rest counters."""
    g = load_graph("er:3000:1", cache=False)
    counts = set()
    for delays in ([0, 0.03, 0], [0.03, 0, 0, 0.03], [0, 0, 0, 0.02]):
        with Context(len(delays), backend="cpu", timeout=20, cpu_delays=delays) as ctx:
            res = connected_components(g, ctx=ctx)
        check(res.values, g)
        check_path_stats(res.stats, "kernel", len(delays), g.num_vertices)
        counts.add((res.stats["rest_rows"], res.stats["rest_arcs"]))
    with Context(1, backend="cpu", timeout=20) as ctx:
        one = connected_components(g, ctx=ctx)
    assert counts == {(one.stats["rest_rows"], one.stats["rest_arcs"])} and one.stats["rest_arcs"] > 0


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases((1, 2, 3)))
def test_replayed_phases_give_what_the_host_s_calls_give(backend, k):
    """In place, each device's phases of a run are recorded at the first run and replayed
    after it (CUDA: graphs; ``CCTuning.replay``): over several runs of one solver, on graphs
    whose runs differ in what is left after the vote, the labels are exact and equal to those
    of a solver that launches every kernel from the host, and so are the stats (CUDA: the
    counters the phases zero do not pile up from run to run, whatever the races); the phases
    recorded are the sampling on every device, the description on the senders, the merge and
    rest on the first, on CUDA each a captured graph."""
    skip_if_missing(backend, k)
    counters = ("rest_rows", "rest_arcs", "rest_remote_arcs", "bytes_moved")
    with Context(k, backend=backend, timeout=30) as ctx:
        for g in (load_graph("kron:12", cache=False), load_graph("er:3000:1", cache=False),
                  load_graph("grid:40", cache=False)):
            ref = reference.connected_components(g)
            with CC(g, ctx=ctx, rest="kernel") as replayed, \
                    CC(g, ctx=ctx, rest="kernel", tuning=CCTuning(replay=False)) as called:
                seen = []
                for _ in range(5):
                    a, b = replayed.run(), called.run()
                    np.testing.assert_array_equal(a.values, ref)
                    np.testing.assert_array_equal(b.values, ref)
                    seen.append((a.stats, b.stats))
                for a, b in seen:
                    if backend == "cpu":
                        assert a == b
                    assert (a["giant_size"], a["giant_root"]) == (b["giant_size"], b["giant_root"])
                    most = {key: max(y[key] for _, y in seen) for key in counters}
                    assert all(a[key] <= 1.5 * most[key] + 8 for key in counters), (a, most)
                want = [{"sampling"} | ({"merge and rest"} if i == 0 else {"description"})
                        for i in range(k)]
                assert [set(d._phases) for d in replayed.devs] == want
                assert all(not d._phases for d in called.devs)
                if backend == "cuda":
                    assert all(p.launch is not p.work for d in replayed.devs
                               for p in d._phases.values())
