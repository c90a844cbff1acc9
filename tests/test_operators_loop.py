"""Loops of operator steps (groute.operators.run_loop, sweep): the same answers as the loop
written with the operators, on CPU devices (1-3), with the level scalar, max_levels and kept
levels; the rule that picks the implementation; the argument checks; and the fused loop's
CUDA source for every step kind compiled with nvcc (no GPU needed)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from groute.engines import LOOP_RULE, make_engine
from groute.engines.fused import decide_loop, loop_rule_help
from groute.graph import CSRGraph
from groute.operators import (AdvanceStep, ComputeStep, FilterStep, Functor, Gather, Levels,
                              Message, advance, compute, filter, run_loop, sweep)
from groute.operators.loop_source import source as loop_source

DEVICES = [1, 2, 3]


def random_graph(n=300, m=1200, directed=False, seed=3):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)   # the last 10 isolated
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not directed:
        src, dst = np.r_[src, dst], np.r_[dst, src]
    return CSRGraph.from_edges(src, dst, n, directed=directed, name="random")


def _claim(s, v):
    v = np.unique(v[s["depth"][v] < 0])
    s["depth"][v] = s["d"] + 1
    return v


#: BFS: level d claims the unvisited targets for level d + 1 (d: the level scalar)
CLAIM = Functor(name="claim", params="int* depth, int d",
                cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;", numpy=_claim)


def _mark(s, v):
    s["seen"][v] += 1


#: counts how often each vertex was in a level's frontier
MARK = Functor(name="mark", params="int* seen", cuda="seen[v] += 1;", numpy=_mark)
#: keeps the vertices of even position
EVEN = Functor(name="even", params="", cuda="return (v & 1) == 0;",
               numpy=lambda s, v: (v & 1) == 0)


def _record(log):
    def numpy(s, v):
        log.append((int(s["level"]), np.sort(v).tolist()))
    return Functor(name="record", params="int level", cuda="", numpy=numpy)


def engine(g, k):
    return make_engine(g, "bsp", backend="cpu", devices=k, timeout=30)


def bfs_depths(g, source):
    depth = np.full(g.num_vertices, -1)
    depth[source], frontier, d = 0, [source], 0
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    while frontier:
        nxt = set()
        for u in frontier:
            for v in indices[indptr[u]:indptr[u + 1]]:
                if depth[v] < 0:
                    depth[v] = d + 1
                    nxt.add(int(v))
        frontier, d = sorted(nxt), d + 1
    return depth


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", DEVICES)
def test_the_level_scalar_numbers_the_levels(k):
    g = random_graph()
    with engine(g, k) as eng:
        eng.state("depth", np.int32, -1)
        compute(eng.frontier([0]), Functor(name="root", params="int* depth",
                                           cuda="depth[v] = 0;",
                                           numpy=lambda s, v: s["depth"].__setitem__(v, 0)))
        result = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d")
        depth = eng.gather("depth")
        assert eng.stats["loop"] == "python" and eng.stats["loops"] == 1
    want = bfs_depths(g, 0)
    assert np.array_equal(depth, want)
    assert result.levels == want.max() + 1          # the last level finds nobody
    assert not result.frontier and result.frontiers is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", DEVICES)
def test_a_loop_is_the_loop_written_with_the_operators(k):
    """compute, advance and filter in one level, with a start for the level scalar and
    max_levels: the same state, levels, kept frontiers and last frontier as by hand."""
    g = random_graph(seed=k)
    steps = [ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)]
    out = []
    for by_hand in (True, False):
        with engine(g, k) as eng:
            eng.state("depth", np.int32, -1)
            eng.state("seen", np.int32, 0)
            start = eng.frontier([0, 2, 4])
            if by_hand:
                frontier, kept, levels = start, [], 0
                while frontier and levels < 3:
                    kept.append(frontier.vertices())
                    compute(frontier, MARK)
                    frontier = filter(advance(frontier, CLAIM, d=5 + levels), EVEN)
                    levels += 1
            else:
                result = run_loop(start, steps, level="d", start=5, max_levels=3, keep=True)
                frontier, levels = result.frontier, result.levels
                kept = [f.vertices() for f in result.frontiers]
                assert isinstance(result.frontiers, Levels)
                assert result.frontiers.total == sum(len(f) for f in kept)
            out.append((eng.gather("depth"), eng.gather("seen"), levels,
                        [x.tolist() for x in kept], frontier.vertices().tolist()))
    (d0, s0, l0, k0, f0), (d1, s1, l1, k1, f1) = out
    assert np.array_equal(d0, d1) and np.array_equal(s0, s1)
    assert (l0, k0, f0) == (l1, k1, f1)
    assert l1 == 3 and f1                         # max_levels stopped it with work left
    assert set(d1[d1 >= 0].tolist()) <= {6, 7, 8}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", DEVICES)
def test_sweep_runs_the_kept_levels_in_order_with_their_numbers(k):
    g = random_graph()
    log = []
    with engine(g, k) as eng:
        eng.state("depth", np.int32, -1)
        result = run_loop(eng.frontier([1]), AdvanceStep(CLAIM), level="d", keep=True)
        levels = result.frontiers
        sweep(levels[1:], [ComputeStep(_record(log))], level="level", reverse=True, start=100)
        want = [f.vertices().tolist() for f in levels]
    assert len(levels) == result.levels >= 3
    # one call per device per level, deepest first, each numbered 100 + its level
    numbers = [n for n, _ in log]
    assert numbers == sorted(numbers, reverse=True)
    assert sorted(set(numbers)) == [100 + i for i in range(1, len(want))]
    got = {}
    for n, vs in log:
        got.setdefault(n, []).extend(vs)
    assert all(len(got[100 + i]) == len(want[i]) for i in range(1, len(want)))


@pytest.mark.timeout(60)
def test_max_levels_zero_runs_nothing_and_gives_the_frontier_back():
    g = random_graph()
    with engine(g, 2) as eng:
        eng.state("depth", np.int32, -1)
        start = eng.frontier([3, 4])
        result = run_loop(start, [AdvanceStep(CLAIM)], level="d", max_levels=0, keep=True)
        assert result.levels == 0 and len(result.frontiers) == 0
        assert result.frontier.vertices().tolist() == [3, 4]
        assert (eng.gather("depth") == -1).all()


@pytest.mark.timeout(60)
def test_bad_loops_are_refused_naming_the_argument():
    g = random_graph()
    with engine(g, 1) as eng:
        eng.state("depth", np.int32, -1)
        eng.state("seen", np.int32, 0)
        f = eng.frontier([0])
        with pytest.raises(ValueError, match="steps is empty"):
            run_loop(f, [])
        with pytest.raises(ValueError, match="no step makes a new frontier"):
            run_loop(f, [ComputeStep(MARK)])
        with pytest.raises(TypeError, match="ComputeStep, FilterStep or AdvanceStep"):
            run_loop(f, [CLAIM])
        with pytest.raises(TypeError, match=r"declares the scalar\(s\) \['q'\]"):
            run_loop(f, [AdvanceStep(CLAIM)], d=0, q=1)
        with pytest.raises(ValueError, match="level='x' names no scalar"):
            run_loop(f, [AdvanceStep(CLAIM)], level="x")
        with pytest.raises(ValueError, match="do not give it as well"):
            run_loop(f, [AdvanceStep(CLAIM)], level="d", d=0)
        with pytest.raises(ValueError, match="max_levels"):
            run_loop(f, [AdvanceStep(CLAIM)], level="d", max_levels=-1)
        with pytest.raises(TypeError, match="frontier must be a Frontier"):
            run_loop([0], [AdvanceStep(CLAIM)], level="d")
        with pytest.raises(TypeError, match="levels must be the Levels"):
            sweep([f], [ComputeStep(MARK)])
        with pytest.raises(TypeError, match="only an AdvanceStep sends one"):
            run_loop(f, [FilterStep(Functor(name="m", message=Message("int", cuda="0"),
                                            cuda="return true;"))])
        with pytest.raises(TypeError, match="needs an int"):
            run_loop(f, [AdvanceStep(Functor(name="x", params="double d", cuda=""))],
                     level="d")
    with pytest.raises(ValueError, match="direction must be one of"):
        AdvanceStep(CLAIM, "sideways")
    for step in (ComputeStep, FilterStep, AdvanceStep):
        with pytest.raises(TypeError, match=f"{step.__name__}: functor must be a Functor"):
            step("claim")


@pytest.mark.timeout(60)
def test_steps_that_are_no_list_or_miss_a_scalar_are_named_before_the_loop_runs():
    g = random_graph()
    with engine(g, 1) as eng:
        eng.state("depth", np.int32, -1)
        f = eng.frontier([0])
        with pytest.raises(TypeError, match="run_loop: steps must be a step or a list of "
                                            "steps; got NoneType"):
            run_loop(f, None)
        with pytest.raises(TypeError, match=r"run_loop: steps holds the Functor claim; wrap it "
                                            r"in a step \(ComputeStep"):
            run_loop(f, CLAIM, level="d")
        # a scalar no one gives: named here, not as a device's failure inside the loop
        with pytest.raises(TypeError, match=r"run_loop: claim needs the scalar 'd' \(pass "
                                            r"d=\.\.\. or level='d'\)"):
            run_loop(f, [AdvanceStep(CLAIM)])
        assert (eng.gather("depth") == -1).all()
    with pytest.raises(ValueError, match="over='in'"):
        AdvanceStep(CLAIM, "pull", over="in")


def test_the_rule_picks_fused_only_on_one_cuda_device():
    def facts(**given):
        return {**dict(pull_step=False, levels_on_host=False, cuda=True, one_device=True),
                **given}
    assert decide_loop(facts())[0] == "fused"
    assert decide_loop(facts(cuda=False))[0] == "python"
    assert decide_loop(facts(one_device=False))[0] == "python"
    assert decide_loop(facts(pull_step=True))[0] == "python"
    assert decide_loop(facts(levels_on_host=True))[0] == "python"
    # what the engine reads as a pull step: a first-accept pull, or a gather among candidates
    g = random_graph()
    summing = Functor(name="s", params="int* depth", message=Message("int", cuda="0"),
                      gather=Gather("sum"), cuda="")
    with engine(g, 1) as eng:
        def pulls(*steps):
            return eng._loop_facts(steps)["pull_step"]
        assert pulls(AdvanceStep(CLAIM, "pull"))
        assert not pulls(AdvanceStep(CLAIM, "auto"))
        assert not pulls(AdvanceStep(summing, "pull"), AdvanceStep(summing, "auto", over="in"))
        assert pulls(AdvanceStep(summing, "push", candidates=eng.all_vertices()))
    assert LOOP_RULE.cases[-1].when == ()          # the last case holds always
    assert "fused where CUDA devices and one device" in loop_rule_help()


@pytest.mark.timeout(60)
def test_the_loop_option_is_checked():
    g = random_graph()
    with pytest.raises(ValueError, match="loop must be one of"):
        make_engine(g, "bsp", backend="cpu", devices=1, loop="fast")
    with pytest.raises(ValueError, match="loop='fused' runs on one CUDA device"):
        make_engine(g, "bsp", backend="cpu", devices=1, loop="fused")
    with make_engine(g, "bsp", backend="cpu", devices=2, loop="python") as eng:
        eng.state("depth", np.int32, -1)
        run_loop(eng.frontier([0]), AdvanceStep(CLAIM), level="d")
        assert eng.stats["loop"] == "python"


# --- the fused loop's CUDA source, compiled without a GPU ---------------------------------------

def compile_loops(loops, tmp_path):
    """nvcc --ptx of the fused-loop source of each ``(steps, level)`` in one translation unit
    (each in a namespace of its own, its kernels and macros renamed). nvcc's CompletedProcess."""
    from groute.kernels import HEADER_DIRS
    from groute.operators import direction
    lines = ['#include "advance.cuh"', '#include "combine.cuh"', '#include "direction.cuh"',
             '#include "frontier.cuh"', '#include "barriers.cuh"']
    for i, (steps, level) in enumerate(loops):
        text = loop_source(steps, level, "test")
        kernels = re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", text)
        assert kernels == ["groute_loop", "groute_sweep"]
        lines += [f"#define {k} groute_test{i}_{k}" for k in kernels]
        lines += [f"namespace groute_test{i} {{", text, "}"]
        lines += [f"#undef {name}" for name in kernels + re.findall(r"#define (\w+)", text)]
    path = tmp_path / "loops.cu"
    path.write_text("\n".join(lines))
    return subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{HEADER_DIRS[0]}",
                           *direction.compile_options(), "--ptx", str(path), "-o",
                           str(tmp_path / "loops.ptx")],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_fused_loops_compile(tmp_path):
    """Every step kind (compute, filter, advance over out- and in-arcs, with and without a
    message, several producing steps in a level, a level scalar; gathering advances pushing,
    pulling and auto over either arcs, of several message types, two in a level) and the
    apps' loops."""
    from groute.apps.betweenness import BACKWARD_PASS, FORWARD_PASS
    from groute.apps.kcore import LOSE_NEIGHBOUR, REMOVE
    from groute.apps.scc import CLAIM_SCC, COLOUR, TRIM_IN, TRIM_OUT
    carry = Functor(name="carry", params="int* depth, int d", message=Message(
        "long long", cuda="(long long)depth[u]"), cuda="return m >= 0 && depth[v] < 0;")
    def gather(op, ctype):
        x = f"x_{ctype.replace(' ', '_')}"
        return Functor(name=f"g_{op}", params=f"{ctype}* {x}",
                       message=Message(ctype, cuda=f"{x}[u]"),
                       gather=Gather(op, cuda=f"{x}[v] != 0"), cuda=f"{x}[v] = m; return true;")
    loops = [
        ([ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], "d"),
        ([AdvanceStep(gather("sum", "double"), "auto"), ComputeStep(MARK),
          AdvanceStep(gather("sum", "double"), "pull", over="in")], None),
        ([AdvanceStep(gather("min", "int"), "push", over="in"),
          AdvanceStep(gather("max", "float"), "auto", over="in")], None),
        ([FilterStep(EVEN), AdvanceStep(carry, over="in"), ComputeStep(MARK)], None),
        ([ComputeStep(REMOVE), AdvanceStep(LOSE_NEIGHBOUR, "auto")], None),
        (FORWARD_PASS, "d"), (BACKWARD_PASS, "level"),
        (TRIM_IN, None), (TRIM_OUT, None), (COLOUR, None), (CLAIM_SCC, None),
    ]
    done = compile_loops(loops, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == 2 * len(loops)


def test_parameters_shared_by_name_must_agree():
    clash = Functor(name="clash", params="double* depth", cuda="")
    with pytest.raises(ValueError, match="share their parameters by name"):
        loop_source([AdvanceStep(CLAIM), ComputeStep(clash)], None, "test")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2])
def test_the_apps_take_the_loop_option_and_report_it(k):
    from groute.apps.betweenness import Betweenness
    from groute.apps.kcore import KCore
    from groute.apps.scc import SCC
    g, d = random_graph(), random_graph(directed=True)
    for loop in ("auto", "python"):
        for solver in (KCore(g, backend="cpu", devices=k, loop=loop),
                       Betweenness(g, backend="cpu", devices=k, loop=loop),
                       SCC(d, backend="cpu", devices=k, loop=loop)):
            with solver:
                stats = solver.run().stats
            assert stats["loop"] == "python" and stats["loops"] > 0, type(solver).__name__


# --- on one CUDA GPU: the fused loop against the Python loop ---------------------------------------

def _bounce(s, v):
    s["hits"][v] += 1
    return np.unique(v)


#: every target joins the next frontier: frontiers repeat vertices level after level, so a
#: kept store of the levels fills and grows
BOUNCE = Functor(name="bounce", params="int* hits", cuda="atomicAdd(&hits[v], 1); return true;",
                 numpy=_bounce)


def _both_loops(g, run):
    """``run(engine)`` on one CUDA device with the fused loop and with the Python loop."""
    out = {}
    for loop in ("fused", "python"):
        with make_engine(g, "bsp", backend="cuda", devices=1, loop=loop, timeout=60) as eng:
            out[loop] = run(eng)
            assert eng.stats["loop"] == loop
    return out["fused"], out["python"]


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_fused_loops_give_the_python_loops_answers():
    g = random_graph(n=3000, m=20000)

    def run(eng):
        eng.state("depth", np.int32, -1)
        eng.state("seen", np.int32, 0)
        eng.state("hits", np.int32, 0)
        bfs = run_loop(eng.frontier([0]), AdvanceStep(CLAIM), level="d", keep=True)
        depth = eng.gather("depth").tolist()
        eng.state("depth", np.int32, -1)
        mixed = run_loop(eng.frontier([1, 2, 3]),
                         [ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)],
                         level="d", start=5, max_levels=3)
        bounce = run_loop(eng.frontier([4]), AdvanceStep(BOUNCE), max_levels=40, keep=True)
        sweep(bounce.frontiers[1:], [ComputeStep(MARK)])
        return dict(depth=depth, mixed_depth=eng.gather("depth").tolist(), seen=eng.gather("seen").tolist(),
                    hits=eng.gather("hits").tolist(), bfs_levels=bfs.levels,
                    bfs=[f.vertices().tolist() for f in bfs.frontiers],
                    total=bfs.frontiers.total,
                    mixed=(mixed.levels, mixed.frontier.vertices().tolist()),
                    bounce=(bounce.levels, bounce.frontiers.total,
                            bounce.frontier.vertices().tolist()))
    fused, python = _both_loops(g, run)
    assert fused == python


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_the_apps_fused_give_the_python_loops_answers():
    from groute.apps.betweenness import Betweenness
    from groute.apps.kcore import KCore
    from groute.apps.scc import SCC
    g, d = random_graph(n=3000, m=20000), random_graph(n=3000, m=6000, directed=True)
    for make, close in ((lambda loop: KCore(g, backend="cuda", devices=1, loop=loop), False),
                        (lambda loop: Betweenness(g, backend="cuda", devices=1, loop=loop), True),
                        (lambda loop: SCC(d, backend="cuda", devices=1, loop=loop), False)):
        values = {}
        for loop in ("fused", "python"):
            with make(loop) as solver:
                res = solver.run()
            assert res.stats["loop"] == loop
            values[loop] = np.asarray(res.values)
        if close:
            np.testing.assert_allclose(values["fused"], values["python"], rtol=1e-9, atol=1e-12)
        else:
            assert np.array_equal(values["fused"], values["python"])


@pytest.mark.timeout(60)
def test_a_fused_loop_finds_the_in_arcs_it_needs_built_before_it_goes_to_the_device():
    """The fused loops run on the device's host thread (BSPEngine._on_device); the in-arc
    parts are built by submitting to that same thread and waiting, so building them from
    there (FusedLoops._common, on a directed graph's first loop over in-arcs or a gathering
    pull/auto: betweenness' forward pass) would wait on itself forever. The engine builds
    them on the caller's thread first. (A stub stands for FusedLoops: this runs on CPU.)"""
    from groute.operators.loop import LoopResult
    g = random_graph(directed=True)
    carry_in = Functor(name="carry_in", params="int* depth, int d",
                       cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;", numpy=_claim)
    summing = Functor(name="s", params="double* x, int d", message=Message("double", cuda="x[u]"),
                      gather=Gather("sum"), cuda="x[v] = m; return true;")
    needs = [[AdvanceStep(carry_in, over="in")], [AdvanceStep(summing, "auto")],
             [AdvanceStep(summing, "pull")]]
    for steps in needs:
        with engine(g, 1) as eng:
            built = []

            class Stub:
                def run_loop(self, frontier, steps, **_):
                    built.append(eng._in_parts is not None)
                    return LoopResult(0, frontier, None, "fused")

                def sweep(self, levels, steps, **_):
                    built.append(eng._in_parts is not None)

            eng._fused = Stub()
            eng._loop_choice = lambda *args: "fused"
            run_loop(eng.frontier([0]), steps, level="d")
            assert built == [True], steps
        with engine(g, 1) as eng:
            built = []
            eng._fused = Stub()
            eng._loop_choice = lambda *args: "fused"
            sweep(Levels(eng, 1, lambda i: eng.frontier([0])), steps, level="d")
            assert built == [True], steps
