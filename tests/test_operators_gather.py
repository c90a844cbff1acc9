"""The gathering advance (``Functor(gather=Gather(...))``): push, pull and auto give the same
answers as a NumPy reference on 1-3 CPU devices (sum, min and max; over out-arcs and in-arcs;
directed and undirected graphs; a candidates frontier); the argument checks; the generated
kernels of every op and message type compile with nvcc; on CUDA devices, the same answers as
the CPU's and the fused loop's as the Python loop's."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from groute import DeviceError
from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import (AdvanceStep, Functor, Gather, Message, advance, compute, run_loop,
                              sweep)
from support import compile_generated, device_cases

DIRECTIONS = ["push", "pull", "auto"]


def random_graph(n=300, m=1500, directed=False, seed=1):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 20, m), rng.integers(0, n - 20, m)   # the last 20 isolated
    # one hub past WARP_EDGES arcs, so the pull's chunked hubs run on CUDA devices
    src, dst = np.r_[src, np.zeros(1100, np.int64)], np.r_[dst, rng.integers(1, n - 20, 1100)]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not directed:
        src, dst = np.r_[src, dst], np.r_[dst, src]
    return CSRGraph.from_edges(src, dst, n, directed=directed, name="random")


def _claim(s, v, m):
    s["depth"][v] = s["d"] + 1
    s["sigma"][v] = m
    return v


#: one BFS level with shortest-path counts: every unvisited vertex with arcs from the frontier
#: joins it with the sum of its sources' counts
SIGMA = Functor(name="sigma", params="int* depth, double* sigma, int d",
                message=Message("double", cuda="sigma[u]", numpy=lambda s, u: s["sigma"][u]),
                gather=Gather("sum", cuda="depth[v] < 0", numpy=lambda s, v: s["depth"][v] < 0),
                cuda="depth[v] = d + 1; sigma[v] = m; return true;", numpy=_claim)


def _lower(op):
    """``label[v]`` takes the op of its in-neighbours' labels in the frontier (and its own);
    who changed joins."""
    better = {"min": np.minimum, "max": np.maximum}[op]
    cmp = "<" if op == "min" else ">"

    def numpy(s, v, m):
        new = better(s["label"][v], m)
        changed = new != s["label"][v]
        s["label"][v] = new
        return v[changed]
    return Functor(name=f"label_{op}", params="long long* label",
                   message=Message("long long", cuda="label[u]", numpy=lambda s, u: s["label"][u]),
                   gather=Gather(op), numpy=numpy,
                   cuda=f"if (m {cmp} label[v]) {{ label[v] = m; return true; }} return false;")


def _count(s, v, m):
    s["count"][v] = m
    return v[:0]


#: how many of a candidate's arcs come from the frontier (an int sum), for the vertices of
#: even key (their positions in the input graph)
COUNT_EVEN = Functor(name="count_even", params="int* count, const int* key",
                     message=Message("int", cuda="1", numpy=lambda s, u: np.ones_like(u)),
                     gather=Gather("sum", cuda="(key[v] & 1) == 0",
                                   numpy=lambda s, v: (s["key"][v] & 1) == 0),
                     cuda="count[v] = m; return false;", numpy=_count)


def _start(s, v):
    s["depth"][v], s["sigma"][v] = 0, 1.0


START = Functor(name="start", params="int* depth, double* sigma",
                cuda="depth[v] = 0; sigma[v] = 1.0;", numpy=_start)


def arcs(g, over):
    """(source, target) of every arc the frontier's side reads (``over="in"``: reversed)."""
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    src = np.repeat(np.arange(g.num_vertices), np.diff(indptr))
    return (indices, src) if over == "in" else (src, indices)


def reference_sigma(g, source, over="out"):
    src, dst = arcs(g, over)
    return sigma_over(src, dst, g.num_vertices, source)


def sigma_over(src, dst, n, source):
    """Depths and shortest-path counts from ``source`` over the arcs ``src -> dst``."""
    depth = np.full(n, -1)
    sigma = np.zeros(n)
    depth[source], sigma[source] = 0, 1.0
    frontier, d = np.array([source]), 0
    while frontier.size:
        on = np.isin(src, frontier) & (depth[dst] < 0)
        np.add.at(sigma, dst[on], sigma[src[on]])
        frontier = np.unique(dst[on])
        depth[frontier] = d + 1
        d += 1
    return depth, sigma


def engine(g, backend, k, partition="random"):
    return make_engine(g, "bsp", backend=backend, devices=k, partition=partition, timeout=60)


def run_sigma(g, backend, k, direction, over="out", source=1):
    with engine(g, backend, k) as eng:
        eng.state("depth", np.int32, -1)
        eng.state("sigma", np.float64, 0.0)
        compute(eng.frontier([source]), START)
        frontier, d, used = eng.frontier([source]), 0, []
        while frontier:
            frontier = advance(frontier, SIGMA, direction, over=over, d=d)
            used.append(frontier.direction)
            d += 1
        return eng.gather("depth"), eng.gather("sigma"), used


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3]))
@pytest.mark.parametrize("directed, over", [(False, "out"), (True, "out"), (True, "in")])
def test_every_direction_sums_the_frontiers_messages(backend, k, directed, over):
    g = random_graph(directed=directed, seed=3)
    want_depth, want_sigma = reference_sigma(g, 1, over)
    for direction in DIRECTIONS:
        depth, sigma, used = run_sigma(g, backend, k, direction, over)
        np.testing.assert_array_equal(depth, want_depth, err_msg=direction)
        np.testing.assert_allclose(sigma, want_sigma, rtol=1e-12, err_msg=direction)
        assert (depth > 1).any()
        if direction != "auto":
            assert set(used) == {direction}
        elif not directed:
            assert set(used) == {"push", "pull"}       # Beamer's rule switched on the way


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_and_max_gather_as_a_reference_relaxation(backend, k, op):
    g = random_graph(directed=True, seed=4)
    src, dst = arcs(g, "out")
    labels = np.random.default_rng(5).permutation(g.num_vertices).astype(np.int64) * 3 - 400
    better = np.minimum if op == "min" else np.maximum
    want = labels.copy()
    while True:                                        # Jacobi rounds from every vertex
        new = want.copy()
        better.at(new, dst, want[src])
        if np.array_equal(new, want):
            break
        want = new
    functor = _lower(op)
    for direction in DIRECTIONS:
        with engine(g, backend, k) as eng:
            eng.state("label", np.int64, values=labels)
            frontier, rounds = eng.all_vertices(), 0
            while frontier:
                frontier = advance(frontier, functor, direction)
                rounds += 1
            np.testing.assert_array_equal(eng.gather("label"), want, err_msg=direction)
            assert rounds > 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2]))
@pytest.mark.parametrize("direction", ["push", "pull"])
def test_candidates_and_the_gathers_own_test_both_restrict(backend, k, direction):
    g = random_graph(seed=6)
    src, dst = arcs(g, "out")
    front = np.arange(0, g.num_vertices, 3)
    cand = np.arange(0, g.num_vertices, 4)
    on = np.isin(src, front) & np.isin(dst, cand) & (dst % 2 == 0)
    want = np.bincount(dst[on], minlength=g.num_vertices)
    with engine(g, backend, k) as eng:
        eng.state("count", np.int32, -1)
        eng.state("key", np.int32, values=np.arange(g.num_vertices))
        out = advance(eng.frontier(front), COUNT_EVEN, direction, candidates=eng.frontier(cand))
        got = eng.gather("count")
    assert not out
    np.testing.assert_array_equal(got[want > 0], want[want > 0])
    assert (got[want == 0] == -1).all()                 # the body ran only where an arc came


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_loop_of_gathering_steps_runs_forward_and_backward(k):
    """run_loop with an "auto" gathering step, then a pulling sweep: Brandes' dependencies."""
    g = random_graph(seed=7)
    with engine(g, "cpu", k) as eng:
        for name in ("depth", "sigma", "delta"):
            eng.state(name, np.int32 if name == "depth" else np.float64, -1 if name == "depth"
                      else 0.0)
        compute(eng.frontier([0]), START)
        levels = run_loop(eng.frontier([0]), [AdvanceStep(SIGMA, "auto")], level="d",
                          keep=True).frontiers
        sweep(levels[1:], [AdvanceStep(DEPENDENCY, "pull", over="in")], level="level",
              reverse=True)
        assert eng.stats["loop"] == "python"
        depth, sigma, delta = eng.gather("depth"), eng.gather("sigma"), eng.gather("delta")
    want_depth, want_sigma = reference_sigma(g, 0)
    np.testing.assert_array_equal(depth, want_depth)
    np.testing.assert_allclose(delta, reference_delta(g, want_depth, want_sigma), rtol=1e-9)


def _dependency(s, v, m):
    s["delta"][v] = s["sigma"][v] * m
    return v[:0]


#: Brandes' dependency of a vertex one level above the frontier
DEPENDENCY = Functor(name="dependency",
                     params="const int* depth, const double* sigma, double* delta, int level",
                     message=Message("double", cuda="(1.0 + delta[u]) / sigma[u]",
                                     numpy=lambda s, u: (1.0 + s["delta"][u]) / s["sigma"][u]),
                     gather=Gather("sum", cuda="depth[v] == level - 1",
                                   numpy=lambda s, v: s["depth"][v] == s["level"] - 1),
                     cuda="delta[v] = sigma[v] * m;", numpy=_dependency)


def reference_delta(g, depth, sigma):
    src, dst = arcs(g, "out")
    delta = np.zeros(g.num_vertices)
    for level in range(depth.max(), 0, -1):
        on = (depth[dst] == level) & (depth[src] == level - 1)
        np.add.at(delta, src[on], sigma[src[on]] * (1.0 + delta[dst[on]]) / sigma[dst[on]])
    return delta


def test_gather_arguments_are_checked_naming_them():
    with pytest.raises(ValueError, match="op must be one of sum, min, max"):
        Gather("mean")
    with pytest.raises(ValueError, match="give it a message= as well"):
        Functor(name="bad", gather=Gather("sum"))
    with pytest.raises(TypeError, match="gather must be a groute.operators.Gather"):
        Functor(name="bad", message=Message("int", cuda="0"), gather="sum")
    only_cuda = Functor(name="only_cuda", message=Message("int", cuda="0", numpy=lambda s, u: u),
                        gather=Gather("sum", cuda="v > 0"), numpy=lambda s, v, m: v)
    g = random_graph()
    with engine(g, "cpu", 1) as eng:
        with pytest.raises(DeviceError, match="the gather's candidates have no numpy callable"):
            advance(eng.all_vertices(), only_cuda, "pull")
    # a gather may pull over in-arcs, which a first-accept pull may not
    AdvanceStep(SIGMA, "pull", over="in")
    assert Gather("min").identity(np.int32) == np.iinfo(np.int32).max
    assert Gather("max").identity(np.float64) == -np.inf and Gather("sum").identity(np.int64) == 0


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_generated_gather_kernels_compile(tmp_path):
    """Every op over every message type, and the functors above."""
    from groute.operators.functor import C_TYPES
    functors = [SIGMA, DEPENDENCY, COUNT_EVEN, _lower("min"), _lower("max")]
    for op in ("sum", "min", "max"):
        for ctype in ("int", "unsigned int", "long long", "unsigned long long", "float",
                      "double"):
            assert ctype in C_TYPES
            functors.append(Functor(
                name=f"{op}_{ctype.replace(' ', '_')}", params=f"{ctype}* x",
                message=Message(ctype, cuda="x[u]"), gather=Gather(op, cuda="x[v] != 0"),
                cuda="x[v] = m; return true;"))
    done = compile_generated(functors, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]


# --- on CUDA devices ------------------------------------------------------------------------------

@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend, k", [c for c in device_cases([1, 2]) if c.values[0] == "cuda"])
def test_cuda_gathers_give_the_cpus_answers(backend, k):
    g = random_graph(n=5000, m=40000, seed=8)
    for direction in DIRECTIONS:
        depth, sigma, _ = run_sigma(g, backend, k, direction)
        want_depth, want_sigma, _ = run_sigma(g, "cpu", k, direction)
        np.testing.assert_array_equal(depth, want_depth, err_msg=direction)
        np.testing.assert_allclose(sigma, want_sigma, rtol=1e-9, err_msg=direction)


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_fused_gathering_loops_give_the_python_loops_answers():
    g = random_graph(n=20000, m=200000, seed=9)
    out = {}
    for loop in ("fused", "python"):
        with make_engine(g, "bsp", backend="cuda", devices=1, loop=loop, timeout=60) as eng:
            got = {}
            for direction in DIRECTIONS:
                for name in ("depth", "sigma", "delta"):
                    eng.state(name, np.int32 if name == "depth" else np.float64,
                              -1 if name == "depth" else 0.0)
                compute(eng.frontier([0]), START)
                fwd = run_loop(eng.frontier([0]), [AdvanceStep(SIGMA, direction)], level="d",
                               keep=True)
                sweep(fwd.frontiers[1:], [AdvanceStep(DEPENDENCY, "pull", over="in")],
                      level="level", reverse=True)
                assert eng.stats["loop"] == loop
                got[direction] = (fwd.levels, [f.vertices().tolist() for f in fwd.frontiers],
                                  eng.gather("depth"), eng.gather("sigma"), eng.gather("delta"))
            eng.state("label", np.int64, values=np.arange(g.num_vertices)[::-1].copy())
            labels = run_loop(eng.all_vertices(), [AdvanceStep(_lower("min"), "auto")])
            got["label"] = (labels.levels, eng.gather("label"))
            out[loop] = got
    for key in DIRECTIONS:
        (lf, vf, df, sf, ef), (lp, vp, dp, sp, ep) = out["fused"][key], out["python"][key]
        assert (lf, vf) == (lp, vp), key
        np.testing.assert_array_equal(df, dp)
        np.testing.assert_allclose(sf, sp, rtol=1e-9)
        np.testing.assert_allclose(ef, ep, rtol=1e-9)
    # the fused pull reads labels its own bodies write (the Message contract allows it for a
    # monotone relaxation), so its rounds may differ; the fixpoint may not
    np.testing.assert_array_equal(out["fused"]["label"][1], out["python"]["label"][1])
