"""The set-up arc transforms (groute.graph.arcs) against their plain definitions."""
import numpy as np
import pytest
import scipy.sparse as sp

from groute.graph import CSRGraph, load_graph
from groute.graph.arcs import arc_rows, in_arcs, self_loop_count


def scipy_transpose(indptr, indices, n):
    """The CSC of a CSR by scipy's linear-time conversion (each column's rows ascending)."""
    m = indices.shape[0]
    csc = sp.csr_matrix((np.ones(m, np.bool_), indices, indptr), shape=(n, n)).tocsc()
    return csc.indptr.astype(np.int64), csc.indices


def relabelled(g, rank):
    """``g`` with vertex ``v`` renamed ``rank[v]``, rows in the new order (targets unsorted)."""
    n = g.num_vertices
    order = np.empty(n, np.int64)
    order[rank] = np.arange(n)
    deg = np.diff(g.indptr)[order]
    indptr = np.r_[0, np.cumsum(deg)].astype(np.int64)
    rows = [g.indices[g.indptr[v]:g.indptr[v + 1]] for v in order]
    indices = rank[np.concatenate(rows)] if rows else np.zeros(0, np.int64)
    return indptr, indices.astype(np.int32)


def graphs():
    rng = np.random.default_rng(3)
    out = {"kron:9": load_graph("kron:9", cache=False),
           "grid:9x13": load_graph("grid:9x13", cache=False),
           "rmat:8 directed": load_graph("rmat:8", cache=False),
           "no arcs": CSRGraph(np.zeros(6, np.int64), np.zeros(0, np.int32)),
           "multi-arcs and loops": CSRGraph.from_edges(
               rng.integers(0, 30, 300), rng.integers(0, 30, 300), 31, dedupe=False)}
    return out


@pytest.mark.parametrize("chunk", [3, 1 << 18])
@pytest.mark.parametrize("name", sorted(graphs()))
@pytest.mark.parametrize("relabel", ["identity", "random", "reverse"])
def test_in_arcs_equal_scipy_transpose_of_the_relabelled_graph(name, relabel, chunk, monkeypatch):
    from groute.graph import arcs
    monkeypatch.setattr(arcs, "KEY_CHUNK_ARCS", chunk)
    g = graphs()[name]
    n = g.num_vertices
    rank = {"identity": None, "random": np.random.default_rng(7).permutation(n),
            "reverse": np.arange(n)[::-1].copy()}[relabel]
    ip, ix = (g.indptr, g.indices) if rank is None else relabelled(g, rank)
    want_ip, want_src = scipy_transpose(ip, ix, n)
    got_ip, got_src = in_arcs(g.indptr, g.indices, rank)
    assert got_ip.dtype == np.int64 and got_src.dtype == np.int32
    np.testing.assert_array_equal(got_ip, want_ip)
    np.testing.assert_array_equal(got_src, want_src)
    # the packed-key sort (what CuPy runs; the host takes scipy for a plain transpose)
    sort_ip, sort_src = arcs._sorted_arcs(g.indptr, g.indices, rank, by_target=True,
                                          counts=None, xp=np)
    np.testing.assert_array_equal(sort_ip, want_ip)
    np.testing.assert_array_equal(sort_src, want_src)
    # with the in-degrees given (the caller's cache) the same arrays
    indeg = np.diff(want_ip)
    got_ip2, got_src2 = in_arcs(g.indptr, g.indices, rank, in_degrees=indeg)
    np.testing.assert_array_equal(got_ip2, want_ip)
    np.testing.assert_array_equal(got_src2, want_src)


def test_arc_rows_and_self_loops():
    g = graphs()["multi-arcs and loops"]
    src, dst = g.edges()
    np.testing.assert_array_equal(arc_rows(g.indptr), src)
    assert arc_rows(g.indptr).dtype == np.int32
    want = int(np.count_nonzero(src == dst))
    assert want > 0
    for chunk in (1, 3, 64, 1 << 16):
        assert self_loop_count(g.indptr, g.indices, chunk) == want
    assert self_loop_count(np.zeros(1, np.int64), np.zeros(0, np.int32)) == 0


@pytest.mark.parametrize("degrees", [[0, 0, 3, 0, 0, 2, 1, 0, 0], [4], [0, 0, 0], [], [2, 0, 1],
                                     [0, 1], [1, 0]])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("wide_marks", [False, True])
def test_rows_by_scan_equals_repeat(degrees, dtype, wide_marks, monkeypatch):
    """The scan CuPy runs for arc_rows, run by NumPy: empty rows first, between and last (each
    of several sharing a start counts), no arcs, no rows; the uint64 marks of > 2**31 vertices
    forced by a stand-in index_dtype."""
    from groute.graph import arcs
    if wide_marks:
        monkeypatch.setattr(arcs, "index_dtype", lambda n: np.int64)
    indptr = np.r_[0, np.cumsum(degrees)].astype(np.int64)
    want = np.repeat(np.arange(len(degrees)), degrees)
    got = arcs._rows_by_scan(indptr, int(indptr[-1]), dtype, np)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_too_many_vertices_for_packed_keys():
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), shape=(2**32 + 1,), strides=(0,))
    rank = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), shape=(2**32,), strides=(0,))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        in_arcs(huge, np.zeros(0, np.int32), rank)
    with pytest.raises(ValueError, match="2\\*\\*31"):
        in_arcs(huge, np.zeros(0, np.int32))


@pytest.mark.gpu
def test_cupy_in_arcs_equal_numpy():
    from tests.graph.conftest import cupy_or_skip
    cp = cupy_or_skip()
    for name, g in graphs().items():
        n = g.num_vertices
        for rank in (None, np.random.default_rng(1).permutation(n).astype(np.int32)):
            want = in_arcs(g.indptr, g.indices, rank)
            got = in_arcs(cp.asarray(g.indptr), cp.asarray(g.indices),
                          None if rank is None else cp.asarray(rank))
            np.testing.assert_array_equal(cp.asnumpy(got[0]), want[0], err_msg=name)
            np.testing.assert_array_equal(cp.asnumpy(got[1]), want[1], err_msg=name)
            np.testing.assert_array_equal(cp.asnumpy(arc_rows(cp.asarray(g.indptr))),
                                          arc_rows(g.indptr), err_msg=name)


@pytest.mark.parametrize("name", sorted(graphs()))
def test_relabel_of_unweighted_graph_equals_the_edge_list_build(name, monkeypatch):
    """CSRGraph.relabel's packed-key path (unweighted graphs) builds the arrays that
    from_edges of the renamed arc list builds (rows sorted, repeated arcs kept), also with the
    host keys assembled in tiny chunks."""
    from groute.graph import arcs
    monkeypatch.setattr(arcs, "KEY_CHUNK_ARCS", 5)
    g = graphs()[name].without_weights()
    n = g.num_vertices
    for perm in (np.random.default_rng(5).permutation(n), np.arange(n)[::-1].copy()):
        src, dst = g.edges()
        want = CSRGraph.from_edges(perm[src], perm[dst.astype(np.int64)], n, dedupe=False,
                                   directed=g.directed)
        got = g.relabel(perm)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        assert got.indices.dtype == want.indices.dtype and got.weights is None
        assert got.directed == g.directed


def weighted_graphs():
    rng = np.random.default_rng(11)
    m = 400
    s, d = rng.integers(0, 50, m), rng.integers(0, 50, m)
    raw = CSRGraph(np.array([0, 3, 3, 5, 6], np.int64), np.array([3, 3, 1, 0, 0, 2], np.int32),
                   np.array([5, 2, 7, 4, 1, 9], np.int32))     # unsorted rows, repeats
    big = 70_000                          # float weights need 32 bits: ids do not fit beside them
    return {
        "int repeats": CSRGraph.from_edges(s, d, 50, rng.integers(-3, 9, m), dedupe=False),
        "float repeats": CSRGraph.from_edges(s, d, 50, rng.random(m).astype(np.float32) - 0.5,
                                             dedupe=False),
        "raw rows": raw,
        "grid": load_graph("grid:9x13", cache=False),
        "kron weighted": load_graph("kron:9", cache=False).with_weights(seed=2),
        "float, too wide to pack": CSRGraph.from_edges(
            rng.integers(0, big, 900), rng.integers(0, big, 900), big,
            rng.random(900).astype(np.float32), dedupe=False),
    }


@pytest.mark.parametrize("name", sorted(weighted_graphs()))
def test_relabel_of_weighted_graph_equals_the_edge_list_build(name, monkeypatch):
    """Weighted graphs: the packed (row, target, weight code) sort gives what from_edges of the
    renamed, weighted arc list gives (repeated arcs lightest first), and graphs whose ids and
    weight bits do not fit 64 bits take the edge-list build."""
    from groute.graph import arcs
    monkeypatch.setattr(arcs, "KEY_CHUNK_ARCS", 7)
    g = weighted_graphs()[name]
    n = g.num_vertices
    packed = arcs.relabelled_arcs(g.indptr, g.indices, np.arange(n), g.weights)
    assert (packed is None) == (name == "float, too wide to pack")
    for perm in (np.random.default_rng(3).permutation(n), np.arange(n)[::-1].copy()):
        src, dst = g.edges()
        want = CSRGraph.from_edges(perm[src], perm[dst.astype(np.int64)], n, g.weights,
                                   dedupe=False, directed=g.directed)
        got = g.relabel(perm)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.weights, want.weights)
        assert got.weights.dtype == want.weights.dtype and got.indices.dtype == want.indices.dtype


def test_arcs_of_rows_lists_each_rows_arcs_in_the_order_given():
    from groute.graph.arcs import arcs_of_rows
    indptr = np.array([0, 2, 2, 5, 6], dtype=np.int64)       # rows of 2, 0, 3 and 1 arcs
    assert arcs_of_rows(indptr, np.array([2, 0, 1, 3])).tolist() == [2, 3, 4, 0, 1, 5]
    assert arcs_of_rows(indptr, np.array([1])).tolist() == []
    assert arcs_of_rows(indptr, np.zeros(0, dtype=np.int64)).tolist() == []
    rng = np.random.default_rng(3)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 5, 50))])
    rows = rng.permutation(50)[:20]
    want = [a for r in rows for a in range(indptr[r], indptr[r + 1])]
    assert arcs_of_rows(indptr, rows).tolist() == want
