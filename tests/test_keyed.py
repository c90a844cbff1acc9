"""``groute.operators.keyed``, the reductions by key: every operation against a plain Python
reference over the same arcs, on random weighted graphs (self-loops, isolated vertices) split
over 1-3 CPU devices (and CUDA devices) by each partition, frontiers of every vertex and of
some; the tie rules; and the errors."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import groute.operators.keyed as keyed_module
from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import keyed
from support import device_cases

pytestmark = pytest.mark.timeout(120)

N = 90


def random_graph(seed=3, n=N, m=400):
    """Undirected, with self-loops and 6 isolated vertices; per-arc weights (a pair's two arcs
    weigh alike) in CSR order."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 6, m), rng.integers(0, n - 6, m)
    loops = rng.integers(0, n - 6, 5)
    src, dst = np.r_[src, loops], np.r_[dst, loops]
    g = CSRGraph.from_edges(np.r_[src, dst], np.r_[dst, src], n, directed=False, name="random")
    rows = np.repeat(np.arange(n), np.diff(g.indptr))
    lo, hi = np.minimum(rows, g.indices), np.maximum(rows, g.indices)
    weights = 1.0 + ((lo * 7919 + hi * 104729) % 13) / 4.0      # the same both ways
    return g, rows, np.asarray(g.indices, dtype=np.int64), weights


def engine(g, backend, k, partition):
    return make_engine(g, "bsp", backend=backend, devices=k, partition=partition, timeout=60)


CASES = [pytest.param(b, k, p, marks=m, id=f"{i}-{p}")
         for b, k, m, i in [(c.values[0], c.values[1], c.marks, c.id) for c in device_cases([1, 3])]
         for p in ("metis", "random")]


def some(n, seed):
    """About half the positions."""
    return np.flatnonzero(np.random.default_rng(seed).random(n) < 0.5)


@pytest.mark.parametrize("backend, k, partition", CASES)
def test_arc_sums_count_and_weigh_the_arcs_kept(backend, k, partition):
    g, rows, cols, w = random_graph()
    label = np.arange(N) % 4
    chosen = some(N, 1)
    with engine(g, backend, k, partition) as eng:
        keyed.arc_state(eng, "w", w)
        eng.state("label", np.int64, values=label)
        keyed.share(eng.all_vertices(), "label", into="label_of")
        eng.state("total", np.float64, -1.0)
        keyed.arc_sums(eng.frontier(chosen), weight="w", into="total", loops=False,
                       where=lambda s, v, u: s["label_of"][u] == s["label"][v])
        got = eng.gather("total")
        eng.state("count", np.float64)
        keyed.arc_sums(eng.all_vertices(), into="count")
        count = eng.gather("count")
    keep = (rows != cols) & (label[rows] == label[cols])
    want = np.full(N, -1.0)
    want[chosen] = np.bincount(rows[keep], weights=w[keep], minlength=N)[chosen]
    assert np.allclose(got, want)
    assert np.array_equal(count, np.diff(g.indptr).astype(float))


def on_host(part, name):
    """A part's state array on the host, copied after the device's queued kernels (a plain
    CuPy ``.get()`` runs on CuPy's default stream, which does not wait for them)."""
    return np.asarray(part.device.to_host(part.state[name]))


@pytest.mark.parametrize("backend, k, partition", CASES)
def test_share_and_key_totals_reach_every_device(backend, k, partition):
    g, _, _, _ = random_graph()
    value = np.arange(N, dtype=np.float64) * 1.5
    key = (np.arange(N) * 7) % 11
    chosen = some(N, 2)
    with engine(g, backend, k, partition) as eng:
        eng.state("key", np.int32, values=key)
        eng.state("value", np.float64, values=value)
        keyed.share(eng.all_vertices(), "key", into="key_of")
        eng.state("key", np.int32, values=key + 100)
        keyed.share(eng.frontier(chosen), "key", into="key_of")        # only those change
        keyed.key_totals(eng.frontier(chosen), "value", "key", into="totals", num_keys=120)
        tables = [eng.partition.to_original(on_host(part, "key_of"))
                  for part in eng.parts]
        totals = [on_host(part, "totals") for part in eng.parts]
    want = key.copy()
    want[chosen] += 100
    for table in tables:
        assert np.array_equal(table, want)
    expected = np.bincount(key[chosen] + 100, weights=value[chosen], minlength=120)
    for total in totals:
        assert np.allclose(total, expected)


def reference_best(rows, cols, w, key, own, score, ties, loops, where=None):
    """Each vertex's best key, as best_key promises, by plain Python."""
    best = own.copy()
    for v in range(N):
        mine = int(own[v]) if own[v] >= 0 else None      # None: no key of its own
        sums = {} if mine is None else {mine: 0.0}
        for j in np.flatnonzero(rows == v):
            u = cols[j]
            if (not loops and u == v) or key[u] < 0 or (where is not None and not where[j]):
                continue
            sums[int(key[u])] = sums.get(int(key[u]), 0.0) + w[j]
        scored = {k: score(v, k, x) for k, x in sums.items()}
        scored[mine] = scored.get(mine, -np.inf)        # staying keyless scores -inf
        top = max(scored.values())
        winners = [k for k, x in scored.items() if x == top]
        if mine in winners:
            best[v] = own[v]
        else:
            best[v] = min(winners) if ties == "smallest" else max(winners)
    return best


@pytest.mark.parametrize("backend, k, partition", CASES)
@pytest.mark.parametrize("ties", ["smallest", "largest"])
def test_best_key_matches_the_reference(backend, k, partition, ties):
    g, rows, cols, w = random_graph()
    key = np.where(np.arange(N) % 9 == 0, -1, np.arange(N) % 7)     # some have no key
    own = (np.arange(N) * 5) % 7
    own[[3, 40, 77]] = -1                                            # some have none of their own
    bias = np.linspace(0.0, 1.0, 7)
    with engine(g, backend, k, partition) as eng:
        keyed.arc_state(eng, "w", w)
        eng.state("key", np.int32, values=key)
        eng.state("own", np.int32, values=own)
        eng.state("bias", np.float64, values=np.zeros(N))
        eng.state("best", np.int32)
        keyed.share(eng.all_vertices(), "key", into="key_of")
        # counts of arcs: ties everywhere
        moved = keyed.best_key(eng.all_vertices(), "key_of", own="own", into="best", ties=ties)
        counted = eng.gather("best")
        moved_counted = moved.vertices()
        # weights against a bias per key, loops not counted
        keyed.best_key(eng.all_vertices(), "key_of", own="own", into="best", weight="w",
                       loops=False, ties=ties, bias=bias,
                       score=lambda s, v, kk, x: x - s["bias"][kk])
        weighed = eng.gather("best")
        # a NaN score never wins (it scores as -inf), on some vertices' arcs to some of them
        keyed.best_key(eng.frontier(some(N, 5)), "key_of", own="own", into="best",
                       weight="w", ties=ties, where=lambda s, v, u: s["key_of"][u] != 5,
                       score=lambda s, v, kk, x: s["xp"].where(kk == 3, s["xp"].nan, x))
        nan_scored = eng.gather("best")
    want = reference_best(rows, cols, np.ones_like(w), key, own, lambda v, kk, x: x, ties, True)
    assert np.array_equal(counted, want)
    assert np.array_equal(moved_counted, np.flatnonzero(want != own))
    want = reference_best(rows, cols, w, key, own, lambda v, kk, x: x - bias[kk], ties, False)
    assert np.array_equal(weighed, want)
    chosen = some(N, 5)
    want_nan = reference_best(rows, cols, w, key, own,
                              lambda v, kk, x: -np.inf if kk == 3 else x, ties, True,
                              where=key[cols] != 5)
    # the vertices outside the frontier keep the last call's choice
    assert np.array_equal(nan_scored[chosen], want_nan[chosen])
    outside = np.setdiff1d(np.arange(N), chosen)
    assert np.array_equal(nan_scored[outside], weighed[outside])


@pytest.mark.parametrize("backend, k, partition", CASES)
def test_smallest_missing_key_is_the_greedy_colour(backend, k, partition):
    g, rows, cols, _ = random_graph()
    colour = np.where(np.arange(N) % 3 == 0, -1, np.arange(N) % 5)
    chosen = some(N, 4)
    with engine(g, backend, k, partition) as eng:
        eng.state("colour", np.int32, values=colour)
        eng.state("even", np.int32, values=1 - np.arange(N) % 2)
        keyed.share(eng.all_vertices(), "colour", into="colour_of")
        keyed.share(eng.all_vertices(), "even", into="even_of")     # u is a global id
        eng.state("free", np.int32, -7)
        keyed.smallest_missing_key(eng.frontier(chosen), "colour_of", into="free", loops=False,
                                   where=lambda s, v, u: s["even_of"][u] == 1)
        got = eng.gather("free")
    want = np.full(N, -7)
    for v in chosen:
        taken = {int(colour[u]) for j in np.flatnonzero(rows == v) for u in [cols[j]]
                 if u != v and u % 2 == 0 and colour[u] >= 0}
        want[v] = next(c for c in range(N + 1) if c not in taken)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("backend, k, partition", CASES)
def test_key_pair_sums_build_the_graph_of_the_keys(backend, k, partition):
    g, rows, cols, w = random_graph()
    key = (np.arange(N) * 3) % 8
    with engine(g, backend, k, partition) as eng:
        keyed.arc_state(eng, "w", w)
        keyed.arc_state(eng, "one", np.ones_like(w))
        eng.state("key", np.int32, values=key)
        keyed.share(eng.all_vertices(), "key", into="key_of")
        a, b, (sums, counts) = keyed.key_pair_sums(eng.all_vertices(), "key", "key_of",
                                                   ["w", "one"])
    want = {}
    for r, c, x in zip(key[rows], key[cols], w):
        s, n = want.get((r, c), (0.0, 0))
        want[(int(r), int(c))] = (s + x, n + 1)
    pairs = sorted(want)
    assert list(zip(a.tolist(), b.tolist())) == pairs
    assert np.allclose(sums, [want[p][0] for p in pairs])
    assert np.array_equal(counts, [want[p][1] for p in pairs])


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_keys_out_of_their_range_are_named(backend, k):
    """key_totals counts the keys outside ``[0, num_keys)`` on the devices and names the state
    (one device and several: the count read alone, or with the partial totals); a table whose
    dtype holds keys >= 2**31 is checked where it is read."""
    g, _, _, _ = random_graph()
    team = np.arange(N) % 4
    team[[5, 50]] = -1
    wide = np.where(np.arange(N) == 7, 2**31, 0)      # vertex 7 has arcs
    with engine(g, backend, k, "random") as eng:
        eng.out_degree_state("degree")
        eng.state("team", np.int32, values=team)
        everyone = eng.all_vertices()
        outside = int(np.count_nonzero((team < 0) | (team >= 3)))
        with pytest.raises(ValueError, match=rf"key_totals: state 'team' holds {outside} "
                                             rf"key\(s\) outside \[0, 3\)"):
            keyed.key_totals(everyone, "degree", "team", into="sizes", num_keys=3)
        eng.state("wide", np.int64, values=wide)
        keyed.share(everyone, "wide", into="wide_of")
        eng.state("best", np.int32)
        with pytest.raises(Exception, match=r"table 'wide_of' holds a key >= 2\*\*31"):
            keyed.best_key(everyone, "wide_of", own="team", into="best")
        # the arcs an operation does not count may lead anywhere
        keyed.best_key(everyone, "wide_of", own="team", into="best",
                       where=lambda s, v, u: s["wide_of"][u] < 2**31)


def readbacks(monkeypatch) -> list:
    """A list that grows by one at each copy CuPy makes to the host and waits for (an
    ``ndarray.get``: ``int()``, ``.item()``, a mask's count, ``cupy.asnumpy``), which CuPy
    declares to ``cupy._core.syncdetect``."""
    from cupy._core import syncdetect
    seen, declare = [], syncdetect._declare_synchronize
    monkeypatch.setattr(syncdetect, "_declare_synchronize",
                        lambda: (seen.append(1), declare())[1])
    return seen


@pytest.mark.gpu
def test_key_totals_on_one_gpu_reads_back_only_the_count_outside_the_range(monkeypatch):
    """The totals stay on the device; the one read-back is the count of keys outside
    ``[0, num_keys)``: no check of the keys' least and greatest, no ``cupy.bincount`` (which
    reads both back)."""
    g, _, _, _ = random_graph()
    team = np.arange(N) % 4
    with engine(g, "cuda", 1, "random") as eng:
        eng.out_degree_state("degree")
        eng.state("team", np.int32, values=team)
        everyone = eng.all_vertices()
        seen = readbacks(monkeypatch)
        keyed.key_totals(everyone, "degree", "team", into="sizes", num_keys=4)
        assert len(seen) == 1
        sizes = on_host(eng.parts[0], "sizes")
    np.testing.assert_array_equal(sizes, np.bincount(team, weights=np.diff(g.indptr)))


@pytest.mark.gpu
def test_a_key_table_of_int32_is_read_without_a_range_check(monkeypatch):
    """An int32 table cannot hold a key >= 2**31: its keys are used as they are, with no
    read-back; an int64 table's are checked (one read-back)."""
    import cupy
    from groute.operators import keyed_ops
    g, _, _, _ = random_graph()
    with engine(g, "cuda", 1, "random") as eng:
        everyone = eng.all_vertices()
        for name, dtype in (("narrow", np.int32), ("wide", np.int64)):
            eng.state(name, dtype, values=np.arange(N) % 5)
            keyed.share(everyone, name, into=f"{name}_of")
        part = eng.parts[0]
        with part.device.on_compute():
            u = part.indices.astype(cupy.int64)
        seen = readbacks(monkeypatch)
        with part.device.on_compute():
            keyed_ops.keys_of(part, "narrow_of", u, cupy)
            assert len(seen) == 0
            keyed_ops.keys_of(part, "wide_of", u, cupy)
            assert len(seen) == 1


def test_errors_name_the_problem():
    g, _, _, w = random_graph()
    with make_engine(g, "bsp", backend="cpu", devices=1) as eng:
        with pytest.raises(ValueError, match="arc_state 'w': values has shape"):
            keyed.arc_state(eng, "w", w[:-1])
        eng.state("own", np.int32)
        eng.state("best", np.int32)
        keyed.share(eng.all_vertices(), "own", into="own_of")
        with pytest.raises(ValueError, match="ties must be one of"):
            keyed.best_key(eng.all_vertices(), "own_of", own="own", into="best", ties="first")
        with pytest.raises(Exception, match="no arc state named 'w'"):
            keyed.best_key(eng.all_vertices(), "own_of", own="own", into="best", weight="w")
        with pytest.raises(Exception, match="score callable returned shape"):
            keyed.best_key(eng.all_vertices(), "own_of", own="own", into="best",
                           score=lambda s, v, k, x: x[:1])
        with pytest.raises(Exception, match="where callable returned"):
            keyed.arc_sums(eng.all_vertices(), into="best", where=lambda s, v, u: u)
        with pytest.raises(Exception, match="no state or table named 'nothing'"):
            keyed.share(eng.all_vertices(), "nothing", into="x")
        with pytest.raises(TypeError, match="takes a Frontier"):
            keyed.arc_sums(eng, into="best")
        with pytest.raises(ValueError, match="num_keys must be >= 0, got -1"):
            keyed.key_totals(eng.all_vertices(), "own", "own", into="t", num_keys=-1)
        for bad in (2.5, True, "4"):
            with pytest.raises(TypeError, match="num_keys must be an int, got"):
                keyed.key_totals(eng.all_vertices(), "own", "own", into="t", num_keys=bad)
        # one weight's name is one arc state, not its letters ('nosuch' was 'n', 'o', ...)
        with pytest.raises(Exception, match="no arc state named 'nosuch'"):
            keyed.key_pair_sums(eng.all_vertices(), "own", "own_of", "nosuch")
        keyed.arc_state(eng, "w", w)
        one = keyed.key_pair_sums(eng.all_vertices(), "own", "own_of", "w")
        listed = keyed.key_pair_sums(eng.all_vertices(), "own", "own_of", ["w"])
        assert all(np.array_equal(x, y) for x, y in zip(one[:2], listed[:2]))
        assert np.array_equal(one[2][0], listed[2][0])


def test_the_examples_run():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(keyed_module):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
