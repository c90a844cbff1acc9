"""The set-up arc transforms (groute.graph.arcs) against their plain definitions."""
import doctest

import numpy as np
import pytest
import scipy.sparse as sp

from groute.graph import CSRGraph, load_graph
from groute.graph import arcs
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


def row_ranges(n):
    return [(0, n), (0, n // 3), (n // 3, n), (n // 2, n // 2)]


@pytest.mark.parametrize("step", [1, 3, 1 << 16])
@pytest.mark.parametrize("name", sorted(graphs()))
@pytest.mark.parametrize("relabel", ["identity", "random", "reverse"])
def test_in_arcs_equal_scipy_transpose_of_the_relabelled_graph(name, relabel, step):
    """Every range of rows, in steps of 1 arc (a row spans many steps), 3 and more than the
    graph: the rows of scipy's transpose of the relabelled graph, int32 sources ascending;
    the in-degrees given or counted."""
    g = graphs()[name]
    n = g.num_vertices
    rank = {"identity": None, "random": np.random.default_rng(7).permutation(n),
            "reverse": np.arange(n)[::-1].copy()}[relabel]
    ip, ix = (g.indptr, g.indices) if rank is None else relabelled(g, rank)
    want_ip, want_src = scipy_transpose(ip, ix, n)
    for lo, hi in row_ranges(n):
        for indeg in (None, np.diff(want_ip)):
            got_ip, got_src = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi),
                                      in_degrees=indeg, step_arcs=step)
            assert got_ip.dtype == np.int64 and got_src.dtype == np.int32
            np.testing.assert_array_equal(got_ip, want_ip[lo:hi + 1] - want_ip[lo])
            np.testing.assert_array_equal(got_src, want_src[want_ip[lo]:want_ip[hi]])


@pytest.mark.parametrize("step", [1, 5, 1 << 16])
@pytest.mark.parametrize("name", sorted(graphs()))
@pytest.mark.parametrize("relabel", ["identity", "random"])
def test_in_arcs_carry_each_arcs_payload(name, relabel, step):
    """A payload (here each arc's id) follows its arc: in-arc ``i`` carries the id of an arc
    from its source to its row, repeated arcs in their order among the out-arcs; also filled
    into the two columns of one interleaved array (``out``: how a CUDA device packs a
    weighted graph's arcs)."""
    g = graphs()[name]
    n = g.num_vertices
    rank = None if relabel == "identity" else np.random.default_rng(7).permutation(n)
    r = np.arange(n) if rank is None else rank
    arc_ids = np.arange(g.num_edges, dtype=np.int32)
    tails = np.repeat(np.arange(n), np.diff(g.indptr))
    for lo, hi in row_ranges(n):
        want_ip, want_src = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi))
        ip, src, ids = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), payload=arc_ids,
                               step_arcs=step)
        np.testing.assert_array_equal(ip, want_ip)
        np.testing.assert_array_equal(src, want_src)
        assert ids.dtype == np.int32
        row = np.repeat(np.arange(lo, hi), np.diff(ip))
        np.testing.assert_array_equal(r[tails[ids]], src)
        np.testing.assert_array_equal(r[g.indices[ids]], row)
        same = (row[1:] == row[:-1]) & (src[1:] == src[:-1])
        assert np.all(ids[1:][same] > ids[:-1][same])
        pairs = np.full((src.shape[0], 2), -1, np.int32)
        in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), payload=arc_ids,
                out=(pairs[:, 0], pairs[:, 1]), step_arcs=step)
        np.testing.assert_array_equal(pairs[:, 0], src)
        np.testing.assert_array_equal(pairs[:, 1], ids)


def test_in_arcs_hold_one_share_and_step_temporaries(monkeypatch):
    """The transpose of one quarter of the rows peaks (tracemalloc) at its own arrays plus
    the rows' next slots, ``rank`` and one step's temporaries: no array of the whole graph's
    arcs (about 4 bytes per arc of the result where a sort of the graph's keys held 8 per
    arc of the graph, 32 on a GPU)."""
    import tracemalloc
    from groute.graph import arcs
    g = load_graph("kron:14", cache=False)
    n, m = g.num_vertices, g.num_edges
    rank = np.random.default_rng(1).permutation(n).astype(np.int32)
    indeg = np.zeros(n, np.int64)
    np.add.at(indeg, rank[g.indices], 1)
    step = 1 << 12
    lo, hi = n // 4, n // 2
    tracemalloc.start()
    try:
        ip, src = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), in_degrees=indeg,
                          step_arcs=step)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    share = 4 * src.shape[0] + 8 * (hi - lo + 1)
    assert src.shape[0] < m / 2
    assert peak <= share + 8 * (hi - lo) + arcs.IN_ARC_STEP_BYTES * step + (1 << 16), \
        (peak, share, m)


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


def test_too_many_vertices_for_int32_sources():
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), shape=(2**32 + 1,), strides=(0,))
    rank = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), shape=(2**32,), strides=(0,))
    for r in (rank, None):
        with pytest.raises(ValueError, match="2\\*\\*31"):
            in_arcs(huge, np.zeros(0, np.int32), r)


def test_rows_out_of_range():
    g = graphs()["kron:9"]
    with pytest.raises(ValueError, match=r"rows \[3, 1\)"):
        in_arcs(g.indptr, g.indices, rows=(3, 1))


def test_after_step_runs_after_every_step_and_the_steps_do_not_change_the_arcs():
    """``after_step`` (where a CUDA device gives its pool's cached blocks back) is called once
    per step of arcs and once per step of rows sorted, also for a step that keeps no arc of
    the rows; the result is the same for any step size."""
    g = graphs()["kron:9"]
    n, m = g.num_vertices, g.num_edges
    rank = np.random.default_rng(2).permutation(n).astype(np.int32)
    want = in_arcs(g.indptr, g.indices, rank, rows=(0, n // 3))
    for step in (5, 64, 1000, m):
        calls = []
        got = in_arcs(g.indptr, g.indices, rank, rows=(0, n // 3), step_arcs=step,
                      after_step=lambda: calls.append(1))
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        arc_steps = -(-m // step)
        row_steps = len(list(arcs.row_chunks(want[0], 0, want[0].shape[0] - 1, step)))
        assert len(calls) == arc_steps + row_steps, (step, len(calls))
    calls = []
    in_arcs(g.indptr, g.indices, None, rows=(0, 1), step_arcs=5, after_step=lambda: calls.append(1))
    assert len(calls) == -(-m // 5)         # no relabelling: no rows to sort


def test_a_step_reads_one_arc_per_step_bytes_of_the_graph_within_the_module_bounds():
    least, most = arcs.IN_ARC_STEP_ARCS["cupy"]
    assert arcs.in_arc_step(0) == least and arcs.in_arc_step(10**12) == most
    assert arcs.in_arc_step(arcs.IN_ARC_STEP_BYTES * (least + 5)) == least + 5
    assert arcs.IN_ARC_STEP_BYTES * arcs.in_arc_step(10**8) <= 10**8      # a quarter of 4 B/arc
    assert arcs.in_arc_step(10**8, "numpy") == arcs.IN_ARC_STEP_ARCS["numpy"][1]
    examples = doctest.testmod(arcs)                # the module's examples run as written
    assert examples.failed == 0 and examples.attempted >= 2


@pytest.mark.gpu
def test_cupy_in_arcs_hold_their_live_arrays_and_no_pool_left_over():
    """On a GPU, the pool CuPy keeps holds at most two steps' temporaries more than the arrays
    alive at the build's peak (steps keep different numbers of a share's arcs, so the blocks
    of one step's sizes may not serve the next: cached blocks past two steps go back to the
    driver after a step), and none of them after the build."""
    from tests.graph.conftest import cupy_or_skip
    from groute.bench.memory import ExactPoolPeaks
    from groute.engines.iterate.layout import bins_layout, degree_split, shard_in_arcs
    from groute import Context
    cupy_or_skip()
    g = load_graph("kron:18", cache=False)
    layout = bins_layout(g)
    step_bytes = arcs.IN_ARC_STEP_BYTES * arcs.in_arc_step(g.num_edges)
    with Context(1, backend="cuda") as ctx:
        device = ctx.devices[0]
        for k in (1, 2, 4):
            offsets = degree_split(layout.in_indptr, k)
            device.synchronize()
            with ExactPoolPeaks() as peaks:
                _, cols, _ = shard_in_arcs(device, g.indptr, g.indices,
                                           (int(offsets[0]), int(offsets[1])),
                                           rank=layout.rank, in_degrees=layout.in_degrees)
            assert peaks.held <= peaks.live + 2 * step_bytes + (2 << 20), \
                (k, peaks.held, peaks.live, cols.nbytes)
            assert peaks.live <= cols.nbytes + 12 * (g.num_vertices + 1) + step_bytes, \
                (k, peaks.live, cols.nbytes)
            device.synchronize()
            assert peaks.held_now() <= cols.nbytes + (1 << 20)         # nothing cached
            del cols


@pytest.mark.gpu
def test_cupy_in_arcs_equal_numpy():
    """The same code on a GPU (CuPy): the same arrays, payload carried, also filled into an
    interleaved array's columns (a weighted graph's packed arcs)."""
    from tests.graph.conftest import cupy_or_skip
    cp = cupy_or_skip()
    for name, g in graphs().items():
        n = g.num_vertices
        ids = np.arange(g.num_edges, dtype=np.int32)
        for rank in (None, np.random.default_rng(1).permutation(n).astype(np.int32)):
            for lo, hi in row_ranges(n):
                want = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), payload=ids)
                got = in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), payload=ids, xp=cp,
                              step_arcs=7)
                np.testing.assert_array_equal(got[0], want[0], err_msg=name)
                np.testing.assert_array_equal(cp.asnumpy(got[1]), want[1], err_msg=name)
                np.testing.assert_array_equal(cp.asnumpy(got[2]), want[2], err_msg=name)
                pairs = cp.empty((want[1].shape[0], 2), np.int32)
                in_arcs(g.indptr, g.indices, rank, rows=(lo, hi), payload=ids,
                        out=(pairs[:, 0], pairs[:, 1]), xp=cp, step_arcs=7)
                np.testing.assert_array_equal(cp.asnumpy(pairs[:, 0]), want[1], err_msg=name)
                np.testing.assert_array_equal(cp.asnumpy(pairs[:, 1]), want[2], err_msg=name)
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
