"""The public operator API (groute.operators) and the BSP engine, against NumPy references:
frontier conversions, advance (push, pull, auto), filter, compute, on 1-4 devices and both
backends; the functor's checks."""
from __future__ import annotations

import shutil

import networkx as nx
import numpy as np
import pytest

from groute import Context, DeviceError
from groute.engines import BSPEngine, make_engine
from groute.graph import CSRGraph
from groute.operators import (AdvanceStep, DeviceFrontier, Functor, Message, advance, compute,
                              filter, run_loop)
from groute.operators.functor import parse_params
from groute.operators.generated import source as source_
from support import compile_generated, device_cases


def random_graph(n=300, m=1500, directed=False, seed=1):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 20, m), rng.integers(0, n - 20, m)   # the last 20 isolated
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not directed:
        src, dst = np.r_[src, dst], np.r_[dst, src]
    return CSRGraph.from_edges(src, dst, n, directed=directed, name="random")


def _count_hits(s, v):
    np.add.at(s["hits"], v, 1)
    return v


#: counts the arcs that reach each vertex; every reached vertex joins
COUNT_HITS = Functor(name="count_hits", params="int* hits",
                     cuda="atomicAdd(&hits[v], 1); return true;", numpy=_count_hits)
#: accepts every vertex (pull: the first frontier neighbour)
ACCEPT = Functor(name="accept", cuda="return true;", numpy=lambda s, v: v)
#: keeps the vertices whose value is above t
ABOVE = Functor(name="above", params="const int* value, int t", cuda="return value[v] > t;",
                numpy=lambda s, v: s["value"][v] > s["t"])


def _square(s, v):
    s["value"][v] = s["value"][v] * s["value"][v]


SQUARE = Functor(name="square", params="int* value", cuda="value[v] = value[v] * value[v];",
                 numpy=_square)


def engine_for(g, backend, k, partition="contiguous"):
    ctx = Context(k, backend=backend, timeout=30)
    return BSPEngine(g, ctx=ctx, partition=partition), ctx


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
@pytest.mark.parametrize("partition", ["contiguous", "random"])
def test_push_advance_visits_every_arc_of_the_frontier(backend, k, partition):
    g = random_graph(directed=True)
    eng, ctx = engine_for(g, backend, k, partition)
    try:
        eng.state("hits", np.int32, 0)
        chosen = np.random.default_rng(2).choice(g.num_vertices, 60, replace=False)
        out = advance(eng.frontier(chosen), COUNT_HITS, "push")
        arcs = np.concatenate([np.arange(g.indptr[u], g.indptr[u + 1]) for u in chosen])
        want = np.bincount(g.indices[arcs], minlength=g.num_vertices)
        assert np.array_equal(eng.gather("hits"), want)
        assert np.array_equal(out.vertices(), np.flatnonzero(want))
        assert len(out) == np.count_nonzero(want) and out.direction == "push"
    finally:
        eng.close()
        ctx.shutdown()


@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_pull_advance_finds_candidates_with_a_frontier_neighbour(backend, k):
    g = random_graph()
    eng, ctx = engine_for(g, backend, k)
    try:
        rng = np.random.default_rng(3)
        front = rng.choice(g.num_vertices, 40, replace=False)
        cand = rng.choice(g.num_vertices, 150, replace=False)
        out = advance(eng.frontier(front), ACCEPT, "pull", candidates=eng.frontier(cand))
        in_front = np.zeros(g.num_vertices, bool)
        in_front[front] = True
        want = [v for v in cand if in_front[g.indices[g.indptr[v]:g.indptr[v + 1]]].any()]
        assert np.array_equal(out.vertices(), np.sort(want)) and out.direction == "pull"
        every = advance(eng.frontier(front), ACCEPT, "pull")     # candidates: every vertex
        want = [v for v in range(g.num_vertices)
                if in_front[g.indices[g.indptr[v]:g.indptr[v + 1]]].any()]
        assert np.array_equal(every.vertices(), want)
        assert eng.stats["pull_advances"] == 2
    finally:
        eng.close()
        ctx.shutdown()


def test_auto_follows_beamers_rule():
    g = random_graph()
    with make_engine(g, backend="cpu", devices=2) as eng:
        everything = eng.all_vertices()
        assert advance(everything, ACCEPT, "auto").direction == "pull"
        assert advance(eng.frontier([0]), ACCEPT, "auto").direction == "push"
    d = random_graph(directed=True)
    with make_engine(d, backend="cpu", devices=2) as eng:
        assert advance(eng.all_vertices(), ACCEPT, "auto").direction == "push"
        # a directed graph's pull reads the in-arcs: every vertex with one from the frontier
        front = np.arange(0, 200, 7)
        pulled = advance(eng.frontier(front), ACCEPT, "pull")
        want = np.unique(np.asarray(d.indices)[np.concatenate(
            [np.arange(d.indptr[u], d.indptr[u + 1]) for u in front])])
        assert pulled.direction == "pull" and np.array_equal(pulled.vertices(), want)


@pytest.mark.parametrize("backend, k", device_cases([1, 4]))
def test_filter_and_compute_match_numpy(backend, k):
    g = random_graph()
    eng, ctx = engine_for(g, backend, k, "random")
    try:
        values = np.random.default_rng(4).integers(-50, 50, g.num_vertices).astype(np.int32)
        eng.state("value", np.int32, values=values)
        kept = filter(eng.all_vertices(), ABOVE, t=10)
        assert np.array_equal(kept.vertices(), np.flatnonzero(values > 10))
        again = filter(kept, ABOVE, t=30)
        assert np.array_equal(again.vertices(), np.flatnonzero(values > 30))
        compute(again, SQUARE)
        want = values.copy()
        want[values > 30] **= 2
        assert np.array_equal(eng.gather("value"), want)
        eng.out_degree_state("deg")
        assert np.array_equal(eng.gather("deg"), np.diff(g.indptr))
    finally:
        eng.close()
        ctx.shutdown()


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("size", [0, 1, 31, 32, 33, 1000])
def test_frontier_converts_between_queue_and_bitmap(backend, size):
    with Context(1, backend=backend, timeout=30) as ctx:
        dev = ctx.devices[0]
        chosen = np.random.default_rng(size).choice(size, size // 3, replace=False) \
            if size else np.zeros(0, np.int64)
        with dev.use():
            f = DeviceFrontier(dev, size, queue=dev.asarray(chosen.astype(np.int32)))
        dense = f.to_bitmap()
        assert dense.form == "bitmap" and dense.count == chosen.size
        bits = np.unpackbits(dev.to_host(dense.bitmap).view(np.uint8), bitorder="little")
        assert np.array_equal(np.flatnonzero(bits), np.sort(chosen))
        back = DeviceFrontier(dev, size, bitmap=dense.bitmap, count=dense.count).to_queue()
        assert back.form == "queue" and np.array_equal(back.positions(), np.sort(chosen))
        every = DeviceFrontier(dev, size, everything=True)
        assert np.array_equal(every.to_queue().positions(), np.arange(size))


def test_functor_parameters_are_checked():
    assert [(p.name, p.array, p.dtype) for p in parse_params("int* a, const float* b, long long c")] \
        == [("a", True, np.int32), ("b", True, np.float32), ("c", False, np.int64)]
    with pytest.raises(ValueError, match="'short x'"):
        Functor(params="short x")
    with pytest.raises(ValueError, match="reserved"):
        Functor(params="int* indices")
    with pytest.raises(ValueError, match="twice"):
        Functor(params="int a, int a")
    for name in ("over", "direction", "candidates", "frontier", "functor"):
        # a scalar of an operator keyword's name could never be passed to the operator
        with pytest.raises(ValueError, match=f"functor parameter '{name}': a scalar is passed "
                                             f"as a keyword of the operator call"):
            Functor(params=f"int {name}")
        assert Functor(params=f"int* {name}").parsed[0].array     # state is found by name
    with pytest.raises(TypeError, match="functor f: numpy must be a function"):
        Functor(numpy=5, name="f")                  # was taken, and failed when first called
    with pytest.raises(TypeError, match="functor f: cuda must be the CUDA source text"):
        Functor(cuda=lambda: 0, name="f")
    from groute.operators.generated import source_path
    one, other = Functor(cuda="return true;"), Functor(cuda="return false;")
    assert source_path(one, "t") != source_path(other, "t")
    assert source_path(one, "t").read_text() == source_(one, "t")


def test_operator_errors_name_the_functor_and_what_is_missing():
    g = random_graph(n=50, m=100)
    with make_engine(g, backend="cpu", devices=2) as eng:
        with pytest.raises(DeviceError, match="count_hits reads state 'hits'"):
            advance(eng.all_vertices(), COUNT_HITS)
        eng.state("value", np.int64, 0)
        with pytest.raises(DeviceError, match="'value' is int64"):
            filter(eng.all_vertices(), ABOVE, t=1)
        eng.state("value", np.int32, 0)
        with pytest.raises(DeviceError, match="needs the scalar 't'"):
            filter(eng.all_vertices(), ABOVE)
        mask = Functor(name="mask", numpy=lambda s, v: v > 3)
        with pytest.raises(DeviceError, match="bool mask"):
            advance(eng.all_vertices(), mask)
        with pytest.raises(TypeError, match="takes a Frontier"):
            advance([1, 2], ACCEPT)
        with pytest.raises(ValueError, match="direction"):
            advance(eng.all_vertices(), ACCEPT, "sideways")
    with make_engine(g, backend="cpu", devices=1) as other:
        with pytest.raises(ValueError, match="another engine"):
            eng.filter(other.all_vertices(), ABOVE, {"t": 1})


def test_a_frontier_of_one_string_a_missing_state_or_a_scalar_of_another_type_is_named():
    G = nx.path_graph(["ab", "a", "b"])
    with make_engine(G, backend="cpu", devices=2) as eng:
        with pytest.raises(TypeError, match="frontier takes a list of the graph's ids"):
            eng.frontier("ab")              # a string is not a list of ids (nor its letters)
        assert eng.frontier(["ab"]).vertices().tolist() == [0]
        with pytest.raises(ValueError, match=r"gather: no state named 'nothing' \(the engine "
                                             r"holds \['value'\]\)"):
            eng.state("value", np.int32, 0)
            eng.gather("nothing")           # said as reduce says it
        with pytest.raises(DeviceError, match=r"above's scalar 't' is declared 'int t', got 'x'"):
            filter(eng.all_vertices(), ABOVE, t="x")    # named: the functor and its scalar
        # an int parameter takes a whole number: 1.7 is refused (C would truncate it to 1),
        # 2.0 is 2
        for bad in (1.7, np.int64(2**40), "3", [2], np.array([2, 3]), np.array([2])):
            with pytest.raises(DeviceError, match=r"above's scalar 't' is declared 'int t', got "):
                filter(eng.all_vertices(), ABOVE, t=bad)
        assert filter(eng.all_vertices(), ABOVE, t=2.0).vertices().tolist() == \
            filter(eng.all_vertices(), ABOVE, t=2).vertices().tolist()


def test_a_frontier_of_positions_takes_integers_only():
    """Where the ids are the positions (0..n-1), 5.7, True, NaN and "1" are no vertex (they
    were truncated or converted to 5, 1, an error from deep inside and 1)."""
    from groute.errors import NodeNotFound
    with make_engine(nx.path_graph(10), backend="cpu", devices=2) as eng:
        for bad in (5.7, True, float("nan"), "1", 10, -1):
            with pytest.raises(NodeNotFound, match=f"frontier id {bad!r} is not a vertex"):
                eng.frontier([bad])
        assert eng.frontier([5, np.int64(7)]).vertices().tolist() == [5, 7]
        assert eng.frontier(np.array([3, 4])).vertices().tolist() == [3, 4]
        assert eng.frontier([]).vertices().tolist() == []
        assert eng.frontier([np.int32(1), np.uint64(2)]).vertices().tolist() == [1, 2]


def test_frontier_at_checks_its_positions_as_frontier_checks_ids():
    """1.7, True and "3" were read as 1, 1 and 3, and one position as a list of it."""
    with make_engine(nx.path_graph(10), backend="cpu", devices=2) as eng:
        for bad in ([1.7, 2], [True], ["3"], [None]):
            with pytest.raises(TypeError, match="frontier_at: vertex positions are integers"):
                eng.frontier_at(bad)
        with pytest.raises(TypeError, match="frontier_at takes a list of vertex positions"):
            eng.frontier_at(3)
        for bad, shown in (([10], "10"), ([-1], "-1"), ([2**70], str(2**70)),
                           (np.array([2**63 + 1], np.uint64), str(2**63 + 1))):
            with pytest.raises(ValueError, match=rf"positions must be in \[0, 10\); got {shown}"):
                eng.frontier_at(bad)
        assert eng.positions_of(eng.frontier_at(np.array([4, 3], np.int32))).tolist() == [3, 4]
        assert eng.positions_of(eng.frontier_at(iter([np.int64(9), 0]))).tolist() == [0, 9]
        assert eng.positions_of(eng.frontier_at([])).tolist() == []


@pytest.mark.parametrize("devices", [1, 2])
def test_an_engine_call_from_inside_a_functor_is_refused_alike_on_any_device_count(devices):
    """On one device the call ran (the device's work runs on the caller's thread, so the
    functor re-entered the engine midway); on two it failed on the device thread's wait."""
    held = {}

    def reenter(s, v):
        held["call"](held["engine"])
    reentering = Functor(name="reenter", params="int* x", cuda="", numpy=reenter)
    calls = {"gather": lambda e: e.gather("x"), "state": lambda e: e.state("y", np.int32, 0),
             "frontier": lambda e: e.frontier([0]),
             "all_vertices": lambda e: compute(e.all_vertices(), SQUARE)}
    with make_engine(nx.path_graph(6), backend="cpu", devices=devices) as eng:
        eng.state("x", np.int32, 0)
        eng.state("value", np.int32, 2)
        held["engine"] = eng
        for name, call in calls.items():
            held["call"] = call
            with pytest.raises(DeviceError, match=rf"{name} called from reenter's numpy callable "
                                                  rf"in compute\(reenter\) on cpu:\d"):
                compute(eng.all_vertices(), reentering)
        compute(eng.all_vertices(), SQUARE)         # the engine goes on
        assert eng.gather("value").tolist() == [4] * 6


SET_TO = Functor(name="set_to", params="float* x, float c", cuda="x[v] = c;",
                 numpy=lambda s, v: s["x"].__setitem__(v, s["c"]))
SET_CONST = Functor(name="set_const", params="const float* x, float c", cuda="x[v] = c;",
                    numpy=lambda s, v: s["x"].__setitem__(v, s["c"]))


@pytest.mark.parametrize("devices", [1, 2])
def test_a_float_scalar_that_overflows_or_a_write_to_const_state_is_refused(devices):
    """A float parameter given 1e300 held inf; a NumPy callable wrote to state its functor
    declares const (CUDA's compiler refuses that write), so the backends differed."""
    with make_engine(nx.path_graph(6), backend="cpu", devices=devices) as eng:
        eng.state("x", np.float32, 0)
        with pytest.raises(DeviceError, match=r"set_to's scalar 'c' is declared 'float c', got "
                                              r"1e\+300"):
            compute(eng.all_vertices(), SET_TO, c=1e300)
        compute(eng.all_vertices(), SET_TO, c=float("inf"))     # inf as given is a float
        assert np.isinf(eng.gather("x")).all()
        compute(eng.all_vertices(), SET_TO, c=2.5)
        with pytest.raises(DeviceError, match=r"set_const's numpy callable wrote to state it "
                                              r"declares const \(const float\* x\)"):
            compute(eng.all_vertices(), SET_CONST, c=1.0)
        assert eng.gather("x").tolist() == [2.5] * 6


def test_a_state_holds_exactly_what_it_is_given_or_says_why_not():
    """Values an integer state cannot hold exactly (1.7, NaN, past its range, -1 as uint32)
    were cast with a warning at most; a bad name or dtype is named with the state."""
    with make_engine(nx.path_graph(4), backend="cpu", devices=2) as eng:
        for args, kwargs, error, said in [
                (("d", np.int32), {"values": [1.7, 0, 0, 0]}, ValueError, "whole numbers"),
                (("d", np.int32), {"values": [np.nan, 0, 0, 0]}, ValueError, "whole numbers"),
                (("d", np.int32), {"values": [3e9, 0, 0, 0]}, ValueError, "outside the range"),
                (("d", np.int32), {"fill": 2.9}, ValueError, "fill must be whole numbers"),
                (("d", np.uint32), {"fill": -1}, ValueError, "fill -1 is outside the range"),
                (("d", np.int32), {"fill": 2**40}, ValueError, "outside the range of int32"),
                (("d", np.int32), {"fill": "x"}, TypeError, "fill must be numbers"),
                (("b", np.bool_), {"fill": 2}, ValueError, "of a bool state must be 0, 1"),
                (("d", "nosuch"), {}, TypeError, "state 'd': data type 'nosuch'"),
                (("d", object), {}, TypeError, "holds numbers or bools"),
                (("", np.int32), {}, TypeError, "non-empty string"),
                ((5, np.int32), {}, TypeError, "non-empty string")]:
            with pytest.raises(error, match=said):
                eng.state(*args, **kwargs)
        eng.state("d", np.int32, 3.0)                   # a whole float is that number
        eng.state("f", np.float32, np.nan)
        eng.state("v", np.int64, values=np.array([0, -5, 2**40, 7]))
        eng.state("big", np.float64, 2**70)             # a Python int past int64: a float
        with pytest.raises(ValueError, match=f"fill {2**70} is outside the range of int64"):
            eng.state("big", np.int64, 2**70)
        assert eng.gather("d").tolist() == [3] * 4 and np.isnan(eng.gather("f")).all()
        assert eng.gather("v").tolist() == [0, -5, 2**40, 7]


def test_exchange_in_many_small_packets_through_few_buffers():
    from groute.tuning import BSPTuning
    with pytest.raises(ValueError, match="power of two"):
        BSPTuning(packet_size=3)
    g = random_graph(directed=True)
    tiny = BSPTuning(packet_size=4, num_buffers=1)
    with make_engine(g, "bsp", backend="cpu", devices=3, partition="random", tuning=tiny) as eng:
        eng.state("hits", np.int32, 0)
        out = advance(eng.all_vertices(), COUNT_HITS)
        want = np.bincount(g.indices, minlength=g.num_vertices)
        assert np.array_equal(eng.gather("hits"), want)
        assert np.array_equal(out.vertices(), np.flatnonzero(want))
        assert eng.stats["exchanged_ids"] > 4 * 10


#: parameters named like the generated kernels' locals and the push functor's members
CLASHING = Functor(name="clashing",
                   params="const int* value, int t, double* edges, float a, long long e, int p",
                   cuda="return value[v] > t && edges[v] > a + e + p;")


def test_generated_push_functor_reads_parameters_not_its_own_members():
    from groute.operators.generated import source
    text = source(CLASHING, "test")
    assert "groute_fn(v, p.value, p.t, p.edges, p.a, p.e, p.p)" in text
    assert "remote_count, remote_msg, groute_acc, groute_cand, {value, t, edges, a, e, p}}" in text


def test_a_functor_s_kernels_are_found_by_what_its_source_is_made_of():
    """The compiled kernels are remembered by what the CUDA source reads: functors that differ
    only in their NumPy callables share them (and an unhashable callable is no obstacle), any
    difference in the source does not."""
    from dataclasses import replace

    from groute.operators.generated import source, source_key

    class Unhashable:
        __hash__ = None

        def step(self, s, v):
            return v

    key = source_key(SQUARE)
    twin = replace(SQUARE, numpy=Unhashable().step)
    assert source_key(twin) == key and hash(source_key(twin)) == hash(key)
    for changed in (replace(SQUARE, name="other"), replace(SQUARE, cuda=SQUARE.cuda + " ")):
        assert source_key(changed) != key
    assert source(twin, "test") == source(SQUARE, "test")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_generated_kernels_compile(tmp_path):
    from groute.operators.generated import FRONTIER_OPS
    functors = [COUNT_HITS, ACCEPT, ABOVE, SQUARE, CLASHING, CLAIM_DEPTH, ADD_PATHS]
    done = compile_generated(functors, tmp_path, files=[FRONTIER_OPS])
    assert done.returncode == 0, done.stderr[-3000:]


def _claim_depth(s, v, m):
    fresh = s["depth"][v] < 0
    v, m = v[fresh], m[fresh]
    s["depth"][v] = m                   # repeats carry the same depth: any write wins
    return np.unique(v)


def _add_paths(s, v, m):
    on_level = s["depth"][v] == s["d"] + 1
    np.add.at(s["paths"], v[on_level], m[on_level])
    return v[:0]


#: BFS as an arc step: the target gets the source's depth + 1 (the message) if it has none
CLAIM_DEPTH = Functor(name="claim_depth", params="int* depth",
                      message=Message("int", cuda="depth[u] + 1",
                                      numpy=lambda s, u: s["depth"][u] + 1),
                      cuda="return atomicCAS(&depth[v], -1, m) == -1;", numpy=_claim_depth)
#: counts shortest paths: a target one level down adds its source's count (a double message)
ADD_PATHS = Functor(name="add_paths", params="const int* depth, double* paths, int d",
                    message=Message("double", cuda="paths[u]", numpy=lambda s, u: s["paths"][u]),
                    cuda="if (depth[v] == d + 1) atomicAdd(&paths[v], m); return false;",
                    numpy=_add_paths)


def _levels_and_paths(g, backend, k, source, over, partition):
    eng, ctx = engine_for(g, backend, k, partition)
    with ctx, eng:
        depth = np.full(g.num_vertices, -1, np.int32)
        depth[source] = 0
        paths = np.zeros(g.num_vertices)
        paths[source] = 1
        eng.state("depth", np.int32, values=depth)
        eng.state("paths", np.float64, values=paths)
        frontier, d = eng.frontier([source]), 0
        while frontier:
            nxt = advance(frontier, CLAIM_DEPTH, over=over)
            advance(frontier, ADD_PATHS, over=over, d=d)
            frontier, d = nxt, d + 1
        return eng.gather("depth"), eng.gather("paths")


def _reference_levels_and_paths(g, source, over):
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    src = np.repeat(np.arange(g.num_vertices), np.diff(indptr))
    if over == "in":
        src, indices = indices, src
    depth = np.full(g.num_vertices, -1)
    paths = np.zeros(g.num_vertices)
    depth[source], paths[source] = 0, 1
    frontier, d = [source], 0
    while frontier:
        on = np.isin(src, frontier)
        nxt = np.unique(indices[on][depth[indices[on]] < 0])
        depth[nxt] = d + 1
        for u, v in zip(src[on], indices[on]):
            if depth[v] == d + 1:
                paths[v] += paths[u]
        frontier, d = nxt.tolist(), d + 1
    return depth, paths


@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
@pytest.mark.parametrize("directed, over", [(False, "out"), (True, "out"), (True, "in")])
def test_messages_carry_the_sources_state_across_devices(backend, k, directed, over):
    g = random_graph(directed=directed, seed=3)
    source = int(np.argmax(np.diff(np.asarray(g.indptr))))
    depth, paths = _levels_and_paths(g, backend, k, source, over, "random")
    want_depth, want_paths = _reference_levels_and_paths(g, source, over)
    np.testing.assert_array_equal(depth, want_depth)
    np.testing.assert_allclose(paths, want_paths)
    assert (depth > 1).any()            # the run went past the first level


def test_message_functor_errors_name_the_problem():
    with pytest.raises(ValueError, match="message type 'short'"):
        Message("short", cuda="0")
    with pytest.raises(TypeError, match="must be a groute.operators.Message"):
        Functor(name="bad", message="int")
    for name in ("m", "u", "msgs", "remote_msg"):     # the generated kernels' own names
        with pytest.raises(ValueError, match="reserved"):
            Functor(name="bad", params=f"int* {name}")
    g = random_graph(directed=False)
    eng, ctx = engine_for(g, "cpu", 2)
    with ctx, eng:
        eng.state("depth", np.int32, -1)
        eng.state("paths", np.float64, 0)
        front = eng.frontier([0])
        with pytest.raises(ValueError, match="claim_depth carries a message"):
            advance(front, CLAIM_DEPTH, "pull")
        with pytest.raises(TypeError, match="filter: claim_depth carries a message"):
            filter(front, CLAIM_DEPTH)
        with pytest.raises(ValueError, match="over must be one of out, in"):
            advance(front, CLAIM_DEPTH, over="both")
        with pytest.raises(ValueError, match="direction must be 'push'"):
            advance(front, ACCEPT, "pull", over="in")
        bad = Functor(name="short_message", params="int* depth", cuda="return false;",
                      message=Message("int", numpy=lambda s, u: u[:1]),
                      numpy=lambda s, v, m: v)
        with pytest.raises(DeviceError, match="short_message's message returned shape"):
            advance(eng.all_vertices(), bad)


@pytest.mark.parametrize("rows", [1, 2, 7])
def test_received_messages_are_aligned_for_their_type(rows):
    """A packet of (id, message words) rows comes back as ids and messages whose address suits
    the message type (a GPU faults on an 8-byte load 4 bytes past an aligned address, which a
    one-row packet's column slice would give)."""
    from groute.operators.part import DevicePart
    msgs = np.arange(rows, dtype=np.float64) + 0.5
    data = np.empty((rows, 3), np.int32)
    data[:, 0] = np.arange(rows)
    data[:, 1:] = msgs.view(np.int32).reshape(rows, 2)
    ids, got = DevicePart.unpack_rows(data, Message("double", cuda="0"), np)
    assert got.ctypes.data % 8 == 0
    np.testing.assert_array_equal(got, msgs)
    np.testing.assert_array_equal(ids, np.arange(rows))


def test_a_closed_engine_refuses_its_state_and_frontiers_naming_the_call():
    """A closed engine's context went back (a kept one may serve another engine by now):
    nothing of it is to be used, so every call says so by its own name."""
    eng = make_engine(nx.path_graph(6), backend="cpu", devices=2)
    eng.state("value", np.int32, 1)
    eng.close()
    calls = {"state": lambda: eng.state("other", np.int32, 0),
             "gather": lambda: eng.gather("value"),
             "all_vertices": eng.all_vertices,
             "frontier": lambda: eng.frontier([1]),
             "out_degree_state": lambda: eng.out_degree_state("deg")}
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=f"^{name}: the engine is closed"):
            call()


def test_run_loop_takes_numpy_ints_as_its_counts():
    """max_levels and start take NumPy's ints as every count of the API does."""
    with make_engine(nx.path_graph(6), backend="cpu", devices=2) as eng:
        eng.state("d", np.int32, -1)
        out = run_loop(eng.frontier([0]), [AdvanceStep(ACCEPT)], max_levels=np.int64(2),
                       start=np.int32(0))
        assert out.levels == 2


@pytest.mark.parametrize("devices", [1, 2])
def test_states_and_keywords_are_checked_as_the_docs_say(devices):
    """An out-degree state too narrow for the largest degree wrapped it; an array given as ``fill`` failed inside a device on several; a keyword that
    names an array parameter was ignored by a single operator call."""
    import networkx as nx
    from groute.engines import make_engine
    from groute.operators import Functor, advance, reduce
    with make_engine(nx.star_graph(200), "bsp", backend="cpu", devices=devices) as eng:
        for dtype in (np.int8, bool):
            with pytest.raises(ValueError, match="cannot hold the largest out-degree, 200"):
                eng.out_degree_state("deg", dtype)
        with pytest.raises(TypeError, match="a state holds numbers or bools"):
            eng.out_degree_state("deg", object)
        eng.out_degree_state("deg", np.int16)
        assert reduce(eng.all_vertices(), "deg", "max") == 200
        with pytest.raises(TypeError, match="fill is one number for every vertex; values="):
            eng.state("x", np.int32, np.zeros(201))
        eng.state("depth", np.int32, 0)
        probe = Functor(name="keyword_probe", params="int* depth, int d", cuda="return false;",
                        numpy=lambda s, v: v[:0])
        with pytest.raises(DeviceError, match=r"reads \['depth'\] from the engine's state"):
            advance(eng.frontier([0]), probe, d=0, depth=np.zeros(201, np.int32))
