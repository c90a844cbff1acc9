"""``groute.operators.reduce``: the sum, min or max of per-vertex state over a frontier, on 1-3
CPU devices and on CUDA devices, against NumPy over the same vertices; its errors; and k-core's
level jumping by it (the levels it runs are the distinct core numbers)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import Functor, filter, reduce
from support import device_cases

pytestmark = pytest.mark.timeout(120)


def random_graph(n=200, m=900, seed=5):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 5, m), rng.integers(0, n - 5, m)     # the last 5 isolated
    keep = src != dst
    return CSRGraph.from_edges(np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]], n,
                               directed=False, name="random")


#: the vertices of odd position in the graph's own order of this device (a frontier to reduce)
ODD = Functor(name="odd_value", params="const long long* value",
              cuda="return (value[v] & 1) == 1;", numpy=lambda s, v: (s["value"][v] & 1) == 1)


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
def test_reduce_matches_numpy_over_the_frontier(backend, k):
    g = random_graph()
    n = g.num_vertices
    rng = np.random.default_rng(k)
    value = rng.integers(-1000, 1000, n).astype(np.int64) * 2 + (np.arange(n) % 2)
    weight = rng.random(n)
    with make_engine(g, "bsp", backend=backend, devices=k, timeout=60) as eng:
        eng.state("value", np.int64, values=value)
        eng.state("weight", np.float64, values=weight)
        eng.out_degree_state("degree")
        everything = eng.all_vertices()
        odd = filter(everything, ODD)
        picked = np.flatnonzero(value & 1)
        assert reduce(everything, "value", "sum") == int(value.sum())
        assert reduce(everything, "value", "min") == int(value.min())
        assert reduce(everything, "value", "max") == int(value.max())
        assert reduce(odd, "value", "min") == int(value[picked].min())
        assert reduce(odd, "value", "max") == int(value[picked].max())
        assert reduce(odd, "weight", "sum") == pytest.approx(float(weight[picked].sum()))
        assert reduce(everything, "degree", "sum") == int(np.diff(np.asarray(g.indptr)).sum())
        some = eng.frontier([0, 7, n - 1])
        assert reduce(some, "value") == int(value[[0, 7, n - 1]].sum())
        empty = eng.frontier([])
        assert reduce(empty, "value", "sum") == 0
        assert reduce(empty, "value", "min") is None and reduce(empty, "value", "max") is None


def test_reduce_names_what_is_wrong():
    g = random_graph()
    with make_engine(g, "bsp", backend="cpu", devices=2, timeout=30) as eng:
        eng.state("value", np.int64, 1)
        everything = eng.all_vertices()
        with pytest.raises(ValueError, match="op must be one of sum, min, max; got 'mean'"):
            reduce(everything, "value", "mean")
        with pytest.raises(ValueError, match="no state named 'values'"):
            reduce(everything, "values", "sum")
        with pytest.raises(TypeError, match="state must be the name"):
            reduce(everything, 3, "sum")
        with pytest.raises(TypeError, match="reduce takes a Frontier"):
            reduce([0, 1], "value", "sum")


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_kcore_runs_one_level_per_distinct_core_number(backend, k):
    """The level jumps to the least degree left, so the levels run are exactly the distinct
    core numbers (a level that peels nobody never runs); answers as NetworkX's."""
    from groute.apps.kcore import KCore
    G = nx.barabasi_albert_graph(400, 6, seed=2)
    G.add_nodes_from(range(400, 410))                        # isolated: core number 0
    ref = nx.core_number(G)
    from groute.graph import load_graph
    g = load_graph(G)
    with KCore(g, backend=backend, devices=k) as solver:
        res = solver.run()
    assert res.to_dict() == ref
    assert res.stats["levels"] == len(set(ref.values()))
    assert len(set(ref.values())) < max(ref.values()) + 1      # some levels were skipped


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_nan_in_float_state_is_the_min_and_max_wherever_it_falls(op, k):
    """NumPy's min and max of a float array with a NaN are NaN; over several devices the
    shares combine so too, whichever device holds the NaN (Python's min and max keep or drop
    it by its place among the shares)."""
    g = CSRGraph.from_edges(np.array([0, 1, 1, 2, 2, 3]), np.array([1, 0, 2, 1, 3, 2]), 4,
                            directed=False)
    for at in range(4):
        x = np.arange(4, dtype=np.float64)
        x[at] = np.nan
        with make_engine(g, "bsp", backend="cpu", devices=k, timeout=60) as eng:
            eng.state("x", np.float64, values=x)
            assert np.isnan(reduce(eng.all_vertices(), "x", op)), (at, k)
