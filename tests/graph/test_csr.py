"""CSRGraph: validation, transformations, id mapping, weights, device round trip."""
import numpy as np
import pytest

from groute.graph import CSRGraph, load_graph
from tests.graph.conftest import edges_graph


def test_validation_rejects_broken_csr():
    with pytest.raises(ValueError, match="indptr\\[-1\\]"):
        CSRGraph(np.array([0, 1, 3], dtype=np.int64), np.array([1, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="not monotone"):
        CSRGraph(np.array([0, 2, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="out of range"):
        CSRGraph(np.array([0, 1, 2], dtype=np.int64), np.array([1, 2], dtype=np.int32))
    with pytest.raises(ValueError, match="indptr\\[0\\]"):
        CSRGraph(np.array([1, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="weights"):
        CSRGraph(np.array([0, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int32),
                 np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="int64"):
        CSRGraph(np.array([0, 1, 2], dtype=np.int32), np.array([1, 0], dtype=np.int32))


@pytest.mark.parametrize("backend", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_an_undirected_graph_missing_a_reverse_arc_is_refused_by_name(backend):
    """directed=False promises both directions of every edge; an edge list with each edge
    once (the natural way to write one) would give the undirected algorithms wrong answers
    without an error, so it is refused, naming the arc; a reverse of another weight too."""
    if backend == "cupy":
        from support import need_gpus
        need_gpus(1)
        import cupy as xp
    else:
        xp = np
    src, dst = xp.array([0, 1, 1, 2]), xp.array([1, 0, 2, 3])
    with pytest.raises(ValueError, match="directed=False but the arc 1 -> 2 has no arc 2 -> 1"):
        CSRGraph.from_edges(src, dst, 4, directed=False)
    with pytest.raises(ValueError, match="arc 12 -> 13 has no arc 13 -> 12.*symmetrize"):
        CSRGraph(xp.array([0, 1, 2, 3, 3], dtype=np.int64), xp.array([1, 0, 3], dtype=np.int32),
                 directed=False, id_base=10)
    w = xp.array([1.0, 1.0, 2.0, 5.0], dtype=xp.float32)
    with pytest.raises(ValueError, match="arc 0 -> 1 has no arc 1 -> 0 of the same weight"):
        CSRGraph.from_edges(xp.array([0, 1, 0, 3]), xp.array([1, 0, 3, 0]), 4,
                            xp.array([1.0, 2.0, 5.0, 5.0], dtype=xp.float32), directed=False)
    g = CSRGraph.from_edges(xp.concatenate([src, dst]), xp.concatenate([dst, src]), 4,
                            xp.concatenate([w, w]), directed=False)      # both ways: accepted
    assert not g.directed and g.is_symmetric()
    g = CSRGraph.from_edges(src, dst, 4, w, directed=True).symmetrize()
    assert g.num_edges == 6 and g.is_symmetric()
    # 0.0 and -0.0 are one weight: bits that differ are not a missing reverse
    z = CSRGraph.from_edges(xp.array([0, 1]), xp.array([1, 0]), 2,
                            xp.array([0.0, -0.0], dtype=xp.float32), directed=False)
    assert z.num_edges == 2


def test_symmetry_check_counts_repeated_arcs():
    """The check compares the arc multiset with its reverse: a repeated arc needs its reverse
    repeated as often (dedupe=False keeps repeats)."""
    from groute.graph.symmetry import unmatched_arc
    ip = np.array([0, 2, 3], dtype=np.int64)
    assert unmatched_arc(ip, np.array([1, 1, 0], dtype=np.int32)) is not None
    ip = np.array([0, 2, 4], dtype=np.int64)
    assert unmatched_arc(ip, np.array([1, 1, 0, 0], dtype=np.int32)) is None


def test_from_edges_sorts_dedupes_keeps_min_weight():
    g = edges_graph(4, [(2, 1), (0, 3), (0, 1), (2, 1), (0, 1)], weights=[5, 1, 7, 2, 3])
    assert g.indptr.tolist() == [0, 2, 2, 3, 3]
    assert g.indices.tolist() == [1, 3, 1]
    assert g.weights.tolist() == [3, 1, 2]
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.num_edges == 3 and g.num_vertices == 4


def test_symmetrize_remove_loops_dedupe_transpose():
    g = edges_graph(4, [(0, 1), (1, 2), (2, 2), (3, 0)])
    s = g.symmetrize()
    assert not s.directed
    assert sorted(zip(*[a.tolist() for a in s.edges()])) == \
        [(0, 1), (0, 3), (1, 0), (1, 2), (2, 1), (2, 2), (3, 0)]
    assert s.is_symmetric() and not g.is_symmetric()
    nl = g.remove_self_loops()
    assert nl.num_edges == 3 and 2 not in nl.neighbors(2).tolist()
    t = g.transpose()
    assert sorted(zip(*[a.tolist() for a in t.edges()])) == [(0, 3), (1, 0), (2, 1), (2, 2)]
    assert t.transpose().indices.tolist() == g.indices.tolist()
    dup = CSRGraph(np.array([0, 3, 3], dtype=np.int64), np.array([1, 0, 1], dtype=np.int32))
    d = dup.deduplicate()
    assert d.indices.tolist() == [0, 1] and d.indptr.tolist() == [0, 2, 2]


def test_degrees_and_stats():
    g = edges_graph(5, [(0, 1), (0, 2), (0, 3), (1, 0)])
    assert g.degrees().tolist() == [3, 1, 0, 0, 0]
    st = g.degree_stats()
    assert st["max"] == 3 and st["min"] == 0 and st["isolated"] == 3
    assert st["mean"] == pytest.approx(0.8) and st["num_edges"] == 4


def test_file_id_mapping_identity_base_and_sparse():
    g = edges_graph(3, [(0, 1)])
    assert g.file_id_of(2) == 2 and g.vertex_of(1) == 1
    g.id_base = 1
    assert g.file_id_of(np.array([0, 2])).tolist() == [1, 3]
    assert g.vertex_of(np.array([3, 1])).tolist() == [2, 0]
    with pytest.raises(KeyError):
        g.vertex_of(0)
    h = CSRGraph(g.indptr, g.indices, file_ids=np.array([10, 42, 7]))
    assert h.vertex_of(42) == 1 and h.vertex_of(np.array([7, 10])).tolist() == [2, 0]
    assert h.file_id_of(np.array([2, 0])).tolist() == [7, 10]
    with pytest.raises(KeyError):
        h.vertex_of(11)


def test_relabel_keeps_file_ids():
    g = edges_graph(3, [(0, 1), (1, 2)])
    g.id_base = 1
    r = g.relabel(np.array([2, 0, 1]))
    assert sorted(zip(*[a.tolist() for a in r.edges()])) == [(0, 1), (2, 0)]
    assert r.file_id_of(np.arange(3)).tolist() == [2, 3, 1]


def test_with_weights_deterministic_symmetric_and_in_range():
    g = load_graph("kron:9", cache=False)
    a, b, c = g.with_weights(seed=3), g.with_weights(seed=3), g.with_weights(seed=4)
    assert a.weights.dtype == np.int32
    assert np.array_equal(a.weights, b.weights) and not np.array_equal(a.weights, c.weights)
    assert a.weights.min() >= 1 and a.weights.max() <= 64
    assert a.is_symmetric()          # both directions of an edge share a weight
    w = g.with_weights(seed=1, low=5, high=6).weights
    assert set(np.unique(w).tolist()) == {5, 6}


class FakeDevice:
    """Stands in for a groute device: arrays wrapped in a distinct type to prove the copy."""

    class Arr(np.ndarray):
        pass

    def __init__(self):
        self.calls = 0
        self.xp = np

    def asarray(self, a):
        self.calls += 1
        return np.array(a).view(FakeDevice.Arr)

    def to_host(self, a):
        return np.asarray(a).copy()


def test_to_device_and_back():
    g = edges_graph(4, [(0, 1), (1, 2)], weights=[1.5, 2.5])
    dev = FakeDevice()
    d = g.to_device(dev)
    assert dev.calls == 3 and isinstance(d.indices, FakeDevice.Arr) and d.device is dev
    h = d.to_host()
    assert np.array_equal(h.indptr, g.indptr) and np.array_equal(h.weights, g.weights)
    assert type(h.indices) is np.ndarray and h.device is None


def test_to_device_with_groute_cpu_device():
    cpu = pytest.importorskip("groute.device.cpu")
    dev = cpu.CPUDevice(0)
    try:
        g = load_graph("grid:7", cache=False)
        d = g.to_device(dev)
        assert d.indices is not g.indices and np.array_equal(d.indices, g.indices)
        h = d.to_host()
        assert h.indices is not d.indices and np.array_equal(h.weights, g.weights)
        from groute.graph import partition_graph
        loc = partition_graph(g, 2, method="contiguous").local(1).to_device(dev)
        assert loc.device is dev and loc.to_host().num_edges == loc.num_edges
    finally:
        dev.release_stream(dev.compute_stream)
        dev.release_stream(dev.copy_stream)


def test_content_hash_changes_with_content():
    a = edges_graph(3, [(0, 1)])
    b = edges_graph(3, [(0, 2)])
    assert a.content_hash() == edges_graph(3, [(0, 1)]).content_hash()
    assert a.content_hash() != b.content_hash()


def test_hashes_are_computed_once_per_graph(monkeypatch):
    """The second call answers from the graph object (kron:25 hashes 4.5 GB per call)."""
    w = edges_graph(3, [(0, 1), (1, 2)], weights=[4, 5])
    content, structure = w.content_hash(), w.structure_hash()
    monkeypatch.setattr(w, "_hash", lambda **kw: pytest.fail("hashed twice"))
    assert (w.content_hash(), w.structure_hash()) == (content, structure)
    assert content != structure


@pytest.mark.parametrize("n", [5, 1 << 17])          # packed-sort path and two-sort fallback
def test_weighted_dedupe_keeps_least_weight_ints_and_floats(n):
    src = np.array([3, 0, 3, 0, 3, 1], dtype=np.int64)
    dst = np.array([1, 2, 1, 2, 1, 4], dtype=np.int64)
    ints = np.array([7, -2**31 + 5, -3, 2**31 - 1, 4, 0])
    g = CSRGraph.from_edges(src, dst, n, ints)
    assert g.weights.dtype == np.int32
    assert g.edges()[0].tolist() == [0, 1, 3] and g.indices.tolist() == [2, 4, 1]
    assert g.weights.tolist() == [-2**31 + 5, 0, -3]
    floats = np.array([0.5, -0.0, -1.25, 0.0, 3e30, -7e-20])
    f = CSRGraph.from_edges(src, dst, n, floats)
    assert f.weights.dtype == np.float32
    assert f.weights.tolist() == [np.float32(-0.0), np.float32(-7e-20), np.float32(-1.25)]
    keep = CSRGraph.from_edges(src, dst, n, floats, dedupe=False)
    assert keep.num_edges == 6 and sorted(keep.weights[3:].tolist()) == keep.weights[3:].tolist()


@pytest.mark.gpu
def test_gpu_transformations_match_cpu():
    from tests.graph.conftest import cupy_or_skip
    cupy = cupy_or_skip()
    g = load_graph("rmat:10", cache=False).with_weights(seed=1)        # directed, weighted
    g = CSRGraph.from_edges(np.r_[g.edges()[0], 5], np.r_[g.indices, 5], g.num_vertices,
                            np.r_[g.weights, 9])                        # plus a self loop
    d = CSRGraph(cupy.asarray(g.indptr), cupy.asarray(g.indices), cupy.asarray(g.weights))
    assert d.xp is cupy
    for op in ("symmetrize", "transpose", "remove_self_loops", "deduplicate", "without_weights"):
        a, b = getattr(g, op)(), getattr(d, op)().to_host()
        assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices), op
        assert (a.weights is None and b.weights is None) or np.array_equal(a.weights, b.weights), op
    assert d.is_symmetric() == g.is_symmetric() and d.symmetrize().is_symmetric()
    assert np.array_equal(d.with_weights(seed=4).weights.get(), g.with_weights(seed=4).weights)
    perm = np.random.default_rng(0).permutation(g.num_vertices)
    assert np.array_equal(d.relabel(cupy.asarray(perm)).to_host().indices, g.relabel(perm).indices)
    assert d.degree_stats() == g.degree_stats()

    class CupyDevice:
        xp = cupy

        def asarray(self, a):
            return cupy.asarray(a)

        def to_host(self, a):
            return cupy.asnumpy(a)

    on = g.to_device(CupyDevice())
    assert isinstance(on.indices, cupy.ndarray)
    assert np.array_equal(on.to_host().weights, g.weights)
    from groute.graph import partition_graph
    p = partition_graph(g, 3, method="random")
    vals = cupy.arange(g.num_vertices)
    assert np.array_equal(p.to_original(vals).get(), p.to_original(np.arange(g.num_vertices)))
    assert np.array_equal(p.owner_of_new(cupy.asarray(p.perm)).get(), p.owner)
    loc = p.local(1).to_device(CupyDevice())
    assert isinstance(loc.indptr, cupy.ndarray) and loc.to_host().num_edges == p.local(1).num_edges


def test_kept_on_computes_once_per_object_and_copes_with_slotted_objects():
    from groute.graph.csr import kept_on
    g = load_graph("grid:5", cache=False)
    calls = []
    first = kept_on(g, "_probe", lambda: calls.append(1) or np.arange(3))
    again = kept_on(g, "_probe", lambda: calls.append(1) or np.arange(5))
    assert first is again and len(calls) == 1

    class Slotted:
        __slots__ = ()
    assert kept_on(Slotted(), "_probe", lambda: 7) == 7   # not kept, but answered


@pytest.mark.parametrize("call, error, match", [
    # an id past the vertex count was packed into another arc's key: (0, 3) became (1, 0)
    (lambda: CSRGraph.from_edges([0, 2], [3, 1], 3), ValueError,
     r"dst\[0\] = 3 is not a vertex of a graph of 3 vertices \(0..2\)"),
    (lambda: CSRGraph.from_edges([0], [-1], 3), ValueError, r"dst\[0\] = -1 is not a vertex"),
    (lambda: CSRGraph.from_edges([0.0, 1.5], [1, 2], 3), TypeError,
     "src's vertex ids are integers, got an array of float64"),
    (lambda: CSRGraph.from_edges([0, 1], [1, 0], 2.7), TypeError,
     "num_vertices is a count of vertices, an int >= 0, got 2.7"),
    (lambda: CSRGraph.from_edges([0, 1], [1, 0], -2), ValueError, "an int >= 0, got -2"),
    # one weight for three arcs was given to all three
    (lambda: CSRGraph.from_edges([0, 1, 2], [1, 2, 0], 3, [4.0]), ValueError,
     "weights has 1 value for 3 arcs: one weight per arc"),
    (lambda: CSRGraph.from_edges([0, 1, 2], [1, 2, 0], 3, [4.0, 1.0], drop_self_loops=True),
     ValueError, "weights has 2 values for 3 arcs"),
    (lambda: CSRGraph.from_edges([0, 1, 2], [1, 2, 0], 3, [[1], [2], [3]]), ValueError,
     "weights is a 1-D array, one weight per arc, got shape \\(3, 1\\)"),
    (lambda: CSRGraph.from_edges([0], [0], 0), ValueError,
     "is not a vertex of a graph of 0 vertices \\(it has none\\)"),
    (lambda: CSRGraph.from_edges([0, 1, 2], [1, 2, 0], 3, [1j, 2, 3]), TypeError,
     "weights are real numbers \\(floats or integers\\), got an array of complex128"),
    (lambda: CSRGraph(np.array([0, 1, 2]), np.array([1, 0]), np.array(["a", "b"])), TypeError,
     "weights are real numbers"),
    (lambda: CSRGraph(np.array([0, 1, 2]), np.array([1, 0]), np.array([1, "b"], dtype=object)),
     TypeError, "got an array of object \\(values of mixed or non-numeric types\\)"),
])
def test_arcs_that_name_no_vertex_or_weights_that_fit_no_arc_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_an_empty_edge_list_of_any_type_is_a_graph_without_arcs():
    g = CSRGraph.from_edges([], [], 3)
    assert (g.num_vertices, g.num_edges) == (3, 0)


@pytest.mark.parametrize("perm, error, match", [
    ([0, 0, 1], ValueError, "perm is not a permutation of 0..2: it names no vertex 2"),
    ([0, 1, -1], ValueError, r"perm\[2\] = -1 is not a vertex"),
    ([0.0, 1.0, 2.0], TypeError, "perm's vertex ids are integers"),
    ([1, 0], ValueError, "perm gives every vertex its new id: 3 ids, got 2"),
])
def test_relabel_takes_only_a_permutation(perm, error, match):
    """A perm naming a vertex twice built an invalid graph (relabel skips validation)."""
    g = CSRGraph.from_edges([0, 1, 2], [1, 2, 0], 3)
    with pytest.raises(error, match=match):
        g.relabel(perm)
    assert g.relabel([2, 0, 1]).num_edges == 3


@pytest.mark.parametrize("position, error", [(-1, IndexError), (10, IndexError),
                                             (1.7, TypeError), (True, TypeError),
                                             ([0.5], TypeError), (np.array([3, 10]), IndexError)])
def test_file_id_of_takes_positions_of_the_graph(position, error):
    """-1 answered the last vertex's id, 1.7 the second's, 10 an id past the graph."""
    g = CSRGraph.from_edges([0, 1], [1, 2], 10)
    with pytest.raises(error, match="vertex position"):
        g.file_id_of(position)
    assert g.file_id_of(9) == 9 and g.file_id_of(np.array([1, 2])).tolist() == [1, 2]


def test_labels_given_as_objects_that_are_all_ints_are_int_labels():
    """An object array of ints stayed objects: a part set then refused the labels, and SNAP
    wrote them as text."""
    g = CSRGraph.from_edges([0], [1], 3, file_ids=np.array([10, 20, 30], dtype=object))
    assert g.file_ids.dtype == np.int64 and g.vertex_of(20) == 1 and g.file_id_of(2) == 30
