"""Generators and specs: counts, shape statistics, determinism by seed and chunking, RNG."""
import numpy as np
import pytest
import scipy.sparse.csgraph as csg

from groute.graph import erdos_renyi, generate, grid, is_spec, kronecker, load_graph, parse_spec, rmat
from groute.graph import reference, rng


def test_splitmix_constants():
    # SplitMix64 seeded with 0: first output is mix(0x9E3779B97F4A7C15) = 0xE220A8397B1DCDAF
    x = np.array([0x9E3779B97F4A7C15], dtype=np.uint64)
    assert int(rng.mix64(x)[0]) == 0xE220A8397B1DCDAF


def test_rng_streams_and_bounds():
    a = rng.random_bits(0, 1000, 1, 1)
    assert np.array_equal(a, rng.random_bits(0, 1000, 1, 1))
    assert np.array_equal(a[500:], rng.random_bits(500, 500, 1, 1))      # counter-based
    assert not np.array_equal(a, rng.random_bits(0, 1000, 2, 1))
    assert not np.array_equal(a, rng.random_bits(0, 1000, 1, 2))
    b = rng.bounded(rng.random_bits(0, 100_000, 0, 0), 3, 7)
    assert b.min() == 3 and b.max() == 7
    counts = np.bincount(b - 3)
    assert counts.min() > 19_000                                          # roughly uniform
    p = rng.random_permutation(1000, 5, 1)
    assert sorted(p.tolist()) == list(range(1000)) and not np.array_equal(p, np.arange(1000))
    assert p.dtype == np.int64
    bits = rng.random_bits(0, 200_000, 9, 9)
    ones = np.unpackbits(bits.view(np.uint8)).mean()
    assert abs(ones - 0.5) < 0.002


def test_a_permutation_is_the_same_in_any_steps_and_dtype(monkeypatch):
    want = rng.random_permutation(1000, 5, 1)
    monkeypatch.setattr(rng, "PERMUTATION_STEP", 7)
    small = rng.random_permutation(1000, 5, 1, dtype=np.uint32)
    assert small.dtype == np.uint32 and np.array_equal(small, want)


def test_spec_grammar():
    s = parse_spec("kron:21:ef=16:a=0.57:b=0.19:c=0.19:seed=3")
    assert s.kind == "kron" and s.params["scale"] == 21 and s.params["seed"] == 3
    assert parse_spec("kron:21:16").params["ef"] == 16
    assert parse_spec("kron:21").canonical == "kron:21:16:a=0.57:b=0.19:c=0.19:seed=0"
    assert parse_spec("er:1e6:8").params == {"n": 1_000_000, "avg_degree": 8.0, "seed": 0}
    g = parse_spec("grid:30x40:drop=0.2")
    assert (g.params["rows"], g.params["cols"], g.params["drop"]) == (30, 40, 0.2)
    assert parse_spec("grid:4900").params["cols"] == 4900
    assert parse_spec("rmat:2^4").params["scale"] == 16
    assert is_spec("kron:3") and not is_spec("graph.mtx") and not is_spec("/tmp/kron")
    for bad, msg in [("kron:", "needs|empty"), ("kron:x", "number"), ("kron:40", "scale"),
                     ("kron:5:zz=1", "unknown option"), ("kron:5:a=0.9:b=0.2", "a, b, c"),
                     ("foo:3", "unknown graph spec"), ("er:100", "average degree"),
                     ("kron:5:seed=1:3", "positional"), ("grid:0", "sides"), ("er:1.5:3", "whole")]:
        with pytest.raises(ValueError, match=msg):
            parse_spec(bad)


@pytest.mark.timeout(10)
def test_spec_numbers_past_any_graph_are_refused_at_once():
    """Infinite, huge and impossible numbers name the field, at once (a power was computed as
    an exact integer first, and an edge count past n^2 or memory generated until killed)."""
    for bad, msg in [("grid:9^99999999", "rows: '9\\^99999999' is too large"),
                     ("kron:2**2000", "scale: '2\\*\\*2000' is too large"),
                     ("grid:1e400", "rows: not a finite number"), ("grid:inf", "finite"),
                     ("grid:3:seed=inf", "option seed: not a finite"),
                     ("er:10:inf", "avg_degree: not a finite"), ("er:10:nan", "finite"),
                     ("er:10:1e12", "between 0 and n - 1"),
                     ("kron:3:ef=1e20", "the edges drawn"),
                     ("rmat:3:sym=2", "sym and perm are 0"), ("rmat:3:perm=-1", "sym and perm"),
                     ("grid:3:high=1e12", "high < low \\+ 2\\^32")]:
        with pytest.raises(ValueError, match=msg):
            parse_spec(bad)
    assert parse_spec("er:10:9").params["avg_degree"] == 9.0
    assert parse_spec("kron:30:1024").params["ef"] == 1024
    assert parse_spec("grid:3:low=5:high=4294967300").params["high"] == 2**32 + 4
    with pytest.raises(ValueError, match="a graph spec has no columns"):
        load_graph("grid:3", columns=(0, 1))
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="the graph is an empty name"):
            load_graph(empty)


def test_a_spec_whose_graph_cannot_fit_host_memory_is_refused_before_generating(monkeypatch):
    from groute.graph import budget
    from groute.memory import GraphTooLarge
    monkeypatch.setattr(budget, "available_bytes", lambda: 10 * 2**20)
    with pytest.raises(GraphTooLarge, match=r"kron:20: up to 33,554,432 arcs on 1,048,576 "
                                            r"vertices, a CSR of about 0.1 GiB, more than the "
                                            r"0.0 GiB"):
        load_graph("kron:20", cache=False)
    assert generate("kron:10", backend="cpu").num_vertices == 1024


def test_kronecker_counts_skew_and_determinism():
    g = kronecker(12)
    assert g.num_vertices == 4096 and not g.directed
    assert g.is_symmetric()
    src, dst = g.edges()
    assert not np.any(src == dst)                                       # no self loops
    assert np.all(np.diff(src * 4096 + dst) > 0)                        # sorted, no duplicates
    # 16 * 4096 generated edges; symmetrised minus loops and duplicates lands around 1.45x
    assert 1.3 * 16 * 4096 < g.num_edges < 1.7 * 16 * 4096
    d = g.degrees()
    assert d.max() > 20 * d.mean()                                      # heavy-tailed
    assert g.degree_stats()["top1pct_arc_share"] > 0.15
    assert np.array_equal(g.indices, kronecker(12).indices)
    assert not np.array_equal(g.indices, kronecker(12, seed=1).indices)
    er = erdos_renyi(4096, g.num_edges / 4096)
    assert er.degrees().max() < 3 * er.degrees().mean()                 # not skewed, unlike kron


def test_generation_independent_of_chunk_size():
    a = kronecker(11, chunk=1000)
    b = kronecker(11, chunk=1 << 20)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    c, d = erdos_renyi(5000, 6, chunk=64), erdos_renyi(5000, 6)
    assert np.array_equal(c.indices, d.indices)


def test_kronecker_matches_reference_size_at_scale_16():
    # the kron:21 figure is ~63.5M arcs (30.3 per vertex); scale 16 has ~27.8 per vertex
    g = load_graph("kron:16", cache=False)
    assert 1_700_000 < g.num_edges < 1_950_000


def test_rmat_directed_no_loops_no_dupes():
    g = rmat(11)
    assert g.directed and not g.is_symmetric()
    src, dst = g.edges()
    assert not np.any(src == dst)
    assert np.all(np.diff(src * g.num_vertices + dst) > 0)
    # without permutation low ids are the hubs (quadrant A = 0.57)
    assert g.degrees()[:64].sum() > g.degrees()[-64:].sum() * 10
    s = rmat(11, symmetric=True)
    assert not s.directed and s.is_symmetric()
    assert not np.array_equal(rmat(11, permute=True).indices, g.indices)


def test_grid_is_connected_road_like_with_exact_bfs_depth():
    rows, cols = 60, 45
    g = grid(rows, cols, seed=3)
    n = rows * cols
    lattice_arcs = 2 * (rows * (cols - 1) + cols * (rows - 1))
    assert g.num_vertices == n and not g.directed and g.is_symmetric()
    assert 0.85 * lattice_arcs < g.num_edges < 0.95 * lattice_arcs    # ~10% dropped
    assert g.weights.dtype == np.int32 and g.weights.min() >= 1 and g.weights.max() <= 64
    depth = reference.bfs(g, 0)
    assert depth.min() == 0                                            # connected
    v = np.arange(n)
    assert np.array_equal(depth, v // cols + v % cols)                 # Manhattan distance
    assert depth.max() + 1 == rows + cols - 1
    d = g.degrees()
    assert d.min() >= 1 and d.max() <= 4 and 3.2 < d.mean() < 3.8
    assert not np.array_equal(g.indices, grid(rows, cols, seed=4).indices)
    assert np.array_equal(g.weights, grid(rows, cols, seed=3).weights)


def test_grid_drop_zero_is_full_lattice_and_diameter_order():
    g = grid(30, drop=0.0)
    assert g.num_edges == 2 * 2 * 30 * 29
    dist = csg.shortest_path(g.to_scipy(), unweighted=True, indices=[0])
    assert dist.max() == 58


def test_erdos_renyi_average_degree():
    g = erdos_renyi(20_000, 8, seed=1)
    assert not g.directed and g.is_symmetric()
    assert 7.8 < g.num_edges / g.num_vertices <= 8.0


def test_generate_by_spec_and_seed_keyword():
    a = generate("kron:8:seed=4").to_host()          # on a GPU machine "auto" generates there
    assert np.array_equal(a.indices, kronecker(8, seed=4).indices)
    assert a.name == "kron:8:seed=4"
    b = generate("kron:8", seed=4).to_host()
    assert np.array_equal(a.indices, b.indices)
    c = generate("grid:5x7:low=2:high=3").to_host()
    assert c.num_vertices == 35 and set(np.unique(c.weights).tolist()) <= {2, 3}


def test_generated_graph_cached(isolated_cache, monkeypatch):
    import groute.graph.load as gload
    monkeypatch.setattr(gload, "GENERATED_CACHE_MIN_ARCS", 10)
    a = load_graph("kron:7")
    assert list((isolated_cache / "generated").glob("kron_7*"))
    import groute.graph.generators as ggen
    monkeypatch.setattr(ggen, "kronecker", lambda *a, **k: pytest.fail("generated again"))
    b = load_graph("kron:7")
    assert np.array_equal(a.indices, b.indices) and b.name == "kron:7"


@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["kron:14", "rmat:13", "grid:300x200", "er:50000:6",
                                  "kron:12:ef=8:a=0.45:b=0.15:c=0.15:seed=9"])
def test_gpu_generation_identical_to_cpu(spec):
    from tests.graph.conftest import cupy_or_skip
    cupy = cupy_or_skip()
    cpu = generate(spec, xp=np)
    gpu = generate(spec, xp=cupy)
    assert gpu.xp is cupy
    h = gpu.to_host()
    assert np.array_equal(cpu.indptr, h.indptr)
    assert np.array_equal(cpu.indices, h.indices)
    if cpu.weights is not None:
        assert np.array_equal(cpu.weights, h.weights)
    w_cpu = cpu.with_weights(seed=2).weights
    w_gpu = gpu.with_weights(seed=2).weights.get()
    assert np.array_equal(w_cpu, w_gpu)


@pytest.mark.parametrize("call, error, match", [
    (lambda: kronecker(5, a=0.9), ValueError, "kronecker: a, b, c must be >= 0"),
    (lambda: kronecker(5.0), TypeError, "kronecker: scale is an int, got 5.0 \\(float\\)"),
    (lambda: kronecker(4, 16.0), TypeError, "kronecker: edge_factor is an int, got 16.0"),
    (lambda: rmat(40), ValueError, "rmat: scale must be between 1 and 31"),
    (lambda: erdos_renyi(2.7, 1), TypeError, "erdos_renyi: n is an int, got 2.7"),
    (lambda: erdos_renyi(10, -1), ValueError, "the average degree must be between 0 and n - 1"),
    (lambda: erdos_renyi(10, True), TypeError, "avg_degree is a finite real number, got True"),
    (lambda: grid(4, drop=1.5), ValueError, "grid: drop must be in \\[0, 1\\)"),
    (lambda: grid(4, low=0), ValueError, "grid: need 1 <= low <= high"),
    (lambda: grid(-3), ValueError, "grid: grid sides must be >= 1"),
    (lambda: kronecker(4, seed=-1), ValueError, "kronecker: seed must be >= 0"),
])
def test_a_generator_called_directly_refuses_what_its_spec_refuses(call, error, match):
    """Only specs were checked: kronecker(5, a=0.9) drew from probabilities past 1,
    erdos_renyi(2.7, 1) made 2 vertices, grid(4, drop=1.5) dropped the whole lattice but its
    tree, and a negative size failed deep in NumPy."""
    with pytest.raises(error, match=match):
        call()
