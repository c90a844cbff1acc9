"""Connected components: 1-4 devices, both backends, exact canonical labels against the reference
and an independent union-find; weak components of directed graphs; first-available balancing;
bad input; the CLI."""
import numpy as np
import pytest

from apps.cc import (CC, compress_numpy, connected_components, edge_list, hook_numpy, late_arcs,
                     symmetric_csr)
from groute import Context
from groute.device import cuda_device_count
from groute.graph import CSRGraph, load_graph, reference
from support import SHARED_GRAPHS


def graph_from(n, edges, directed=False, name="hand"):
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    src, dst = e[:, 0], e[:, 1]
    if not directed:
        src, dst = np.r_[src, dst], np.r_[dst, src]
    return CSRGraph.from_edges(src, dst, n, directed=directed, name=name)


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


def device_cases(counts):
    """(backend, k) pairs: CPU always; CUDA marked ``gpu`` (and ``multigpu`` for k >= 2)."""
    out = []
    for k in counts:
        out.append(pytest.param("cpu", k, id=f"cpu-x{k}"))
        marks = [pytest.mark.gpu] + ([pytest.mark.multigpu] if k >= 2 else [])
        out.append(pytest.param("cuda", k, marks=marks, id=f"cuda-x{k}"))
    return out


def _skip_if_missing(backend, k):
    if backend == "cuda" and k > cuda_device_count():
        pytest.skip(f"needs {k} GPUs")


def test_reference_agrees_with_union_find():
    for g in hand_graphs().values():
        np.testing.assert_array_equal(reference.connected_components(g), union_find_labels(g))


def test_directed_graph_gives_weak_components():
    g = hand_graphs()["directed_weak"]
    labels = connected_components(g, backend="cpu", devices=1).values
    assert labels.tolist() == [0, 0, 0, 0, 4, 4, 4, 7]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
def test_hand_graphs(backend, k):
    _skip_if_missing(backend, k)
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in hand_graphs().values():
            res = connected_components(g, ctx=ctx, segment_edges=64)
            check(res.values, g)
            np.testing.assert_array_equal(res.values, union_find_labels(g))
            if res.stats["edges"] is not None:      # None: one CUDA device, hooked in place
                assert sum(res.stats["edges_per_device"]) == res.stats["edges"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
def test_random_and_real_graphs(backend, k):
    _skip_if_missing(backend, k)
    graphs = [load_graph("kron:11", cache=False), load_graph("grid:40", cache=False),
              load_graph("er:3000:1", cache=False)]
    for name in ("power.mtx.gz", "polblogs.mtx.gz"):
        if (SHARED_GRAPHS / name).exists():
            graphs.append(load_graph(SHARED_GRAPHS / name, cache=False))
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in graphs:
            with CC(g, ctx=ctx, segment_edges=max(1000, g.num_edges // 13)) as solver:
                first = solver.run()
                check(first.values, g)
                np.testing.assert_array_equal(solver.run().values, first.values)  # reusable


@pytest.mark.timeout(60)
def test_first_available_gives_a_slow_device_fewer_segments():
    g = load_graph("grid:60", cache=False)
    with Context(3, backend="cpu", timeout=20, cpu_delays=[0, 0, 0.05]) as ctx:
        res = connected_components(g, ctx=ctx, segment_edges=200, num_buffers=1, afforest=False)
    check(res.values, g)
    per = res.stats["segments_per_device"]
    assert sum(per) == res.stats["segments"]
    assert per[2] < per[0] and per[2] < per[1], per


def afforest_cases():
    """(backend, k, options): the sampling variants on both backends; on CUDA also the light
    link and the compact-and-route path on one device."""
    out = []
    for k in (1, 2, 3):
        for rounds in (0, 1, 2):
            out.append(pytest.param("cpu", k, {"sample_rounds": rounds}, id=f"cpu-x{k}-r{rounds}"))
    out.append(pytest.param("cpu", 2, {"afforest": False}, id="cpu-x2-edge-list"))
    for k in (1, 2):
        marks = [pytest.mark.gpu] + ([pytest.mark.multigpu] if k >= 2 else [])
        for opts in ({"sample_rounds": 1, "link": "hook"}, {"sample_rounds": 2, "link": "light"},
                     {"sample_rounds": 0, "link": "mixed"}, {"sample_rounds": 2, "link": "mixed"},
                     {"sample_rounds": 2, "rest": "segments"}, {"afforest": False}):
            out.append(pytest.param("cuda", k, opts, marks=marks, id=f"cuda-x{k}-{opts}"))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k, opts", afforest_cases())
def test_afforest_variants(backend, k, opts):
    """Many small components (er:3000:1, a directed graph) leave work after the vote: exact
    labels whatever the rounds, the linking step or where the rest is hooked."""
    _skip_if_missing(backend, k)
    graphs = [load_graph("er:3000:1", cache=False), load_graph("grid:30", cache=False),
              hand_graphs()["directed_weak"], hand_graphs()["one_path"],
              load_graph("rmat:10", cache=False)]
    with Context(k, backend=backend, timeout=20) as ctx:
        for g in graphs:
            with CC(g, ctx=ctx, segment_edges=97, **opts) as solver:
                res = solver.run()
                check(res.values, g)
                np.testing.assert_array_equal(solver.run().values, res.values)
                if opts.get("afforest", True):
                    giant = res.stats["giant_root"]
                    assert res.stats["giant_size"] == np.count_nonzero(res.values == res.values[giant])


def test_symmetric_csr_and_late_arcs():
    d = graph_from(4, [(1, 0), (2, 3), (3, 3), (0, 2)], directed=True)
    indptr, indices = symmetric_csr(d)
    assert indptr.tolist() == [0, 2, 3, 5, 6] and indices.tolist() == [1, 2, 0, 0, 3, 2]
    src, dst = late_arcs(indptr, indices, 1)
    assert src.tolist() == [0, 2] and dst.tolist() == [2, 3]


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
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, segment_edges=0)
    with pytest.raises(ValueError, match="num_samples"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, num_samples=2000)
    with pytest.raises(ValueError, match="one CUDA device"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, rest="kernel")
    with pytest.raises(ValueError, match="link must be"):
        CC(hand_graphs()["isolated"], backend="cpu", devices=1, link="fast")


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
    assert "exact match" in text and "components: 1 " in text
    rows = [line.split() for line in out.read_text().splitlines()]
    assert len(rows) == 34 and rows[0] == ["1", "1"] and all(r[1] == "1" for r in rows)
