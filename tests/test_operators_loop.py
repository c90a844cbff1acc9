"""Loops of operator steps (groute.operators.run_loop, sweep): the same answers as the loop
written with the operators, on CPU devices (1-3), with the level scalar, max_levels and kept
levels; the rule that picks the implementation; the argument checks; the fused loop's
CUDA source for every step kind compiled with nvcc (no GPU needed), and where its sweep drops
each level's output. Rounds (run_rounds): a body
of loops once per seed against BFS computed here and against the calls written by hand, their
checks, and the fused rounds' source compiled."""
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
from groute.operators import (AdvanceStep, Compute, ComputeStep, FilterStep, Functor, Gather,
                              Levels, Loop, Message, Sweep, advance, compute, filter, run_loop,
                              run_rounds, sweep)
from groute.operators.loop_source import buffers, rounds_source, source as loop_source
from groute.operators.rounds import body_steps

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


def path_graph(n):
    """The undirected path 0 - 1 - ... - n-1: a search from an end runs n levels."""
    return CSRGraph.from_edges(np.r_[np.arange(n - 1), np.arange(1, n)],
                               np.r_[np.arange(1, n), np.arange(n - 1)], n, directed=False,
                               name="path")


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


def test_the_rule_picks_fused_on_one_cuda_device_or_on_several_that_write_to_each_other():
    """Every combination of the facts: fused on one CUDA device unless a sweep's levels are on
    the host; on several CUDA devices that write into each other's memory also (kept levels,
    sweeps and rounds too), unless the inboxes, published frontiers and stores would not fit;
    the operator calls everywhere else. No fact is about a step's direction, nor about
    rounds."""
    import itertools
    names = ("levels_on_host", "cuda", "one_device", "peer_writes", "inboxes_fit")
    assert "pulls" not in LOOP_RULE.facts() and "rounds" not in LOOP_RULE.facts()
    for values in itertools.product([False, True], repeat=len(names)):
        f = dict(zip(names, values))
        several = f["peer_writes"] and f["inboxes_fit"]
        fused = (f["cuda"] and not f["levels_on_host"] and (f["one_device"] or several))
        assert decide_loop(f)[0] == ("fused" if fused else "python"), f

    def facts(**given):
        return {**dict(levels_on_host=False, cuda=True, one_device=True,
                       peer_writes=False, inboxes_fit=True), **given}
    assert decide_loop(facts())[0] == "fused"
    assert decide_loop(facts(cuda=False))[0] == "python"
    assert decide_loop(facts(one_device=False))[0] == "python"
    assert decide_loop(facts(one_device=False, peer_writes=True))[0] == "fused"
    assert decide_loop(facts(one_device=False, peer_writes=True,
                             inboxes_fit=False))[0] == "python"
    assert decide_loop(facts(inboxes_fit=False))[0] == "fused"      # one device: no inboxes
    assert decide_loop(facts(levels_on_host=True))[0] == "python"
    # on one device every step has a fused form (tests/test_fused_pulls.py): whatever the
    # steps' facts, one CUDA device fuses them
    g = random_graph()
    summing = Functor(name="s", params="int* depth", message=Message("int", cuda="0"),
                      gather=Gather("sum"), cuda="")
    with engine(g, 1) as eng:
        for steps in ([AdvanceStep(CLAIM, "pull")], [AdvanceStep(CLAIM, "auto")],
                      [AdvanceStep(summing, "push", candidates=eng.all_vertices())]):
            assert decide_loop(dict(eng._loop_facts(steps), cuda=True))[0] == "fused"
    assert LOOP_RULE.cases[-1].when == ()          # the last case holds always
    assert "fused where CUDA devices and one device" in loop_rule_help()
    assert ("fused where CUDA devices and the devices write into each other's memory"
            in loop_rule_help())


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
    return compile_sources([loop_source(steps, level, "test") for steps, level in loops],
                           ["groute_loop", "groute_sweep"], tmp_path)


def compile_sources(texts, names, tmp_path):
    """nvcc --ptx of generated fused sources, each defining the kernels ``names``, in one
    translation unit (each in a namespace of its own, its kernels and macros renamed)."""
    from groute.kernels import HEADER_DIRS
    from groute.operators import direction
    lines = ['#include "advance.cuh"', '#include "combine.cuh"', '#include "direction.cuh"',
             '#include "frontier.cuh"', '#include "persistent.cuh"', '#include "inbox.cuh"']
    for i, text in enumerate(texts):
        kernels = re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", text)
        assert kernels == names
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
        ([AdvanceStep(CLAIM, "push")], "d"), ([FilterStep(EVEN), AdvanceStep(CLAIM)], "d"),
    ]
    done = compile_loops(loops, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == 2 * len(loops)


def _sweep_outputs(text, levels, n_local=1000):
    """Where the generated ``groute_sweep`` drops the output of its ``i``-th level, for ``i`` in
    ``range(levels)``: the offset into the loop's buffers, its C expression evaluated."""
    body = text[text.index("groute_sweep("):]
    ping = int(re.search(r"groute_discard = groute_bufs \+ (\d+) \* groute_n_local", body)[1])
    expr = re.search(r"groute_offsets\[groute_level \+ 1\] - groute_a, (.*?)\);\n", body,
                     re.S)[1]
    return [eval(expr.replace("groute_discard", str(ping * n_local))
                 .replace("groute_n_local", str(n_local)).replace("groute_i", str(i)))
            for i in range(levels)]


def test_a_sweep_level_never_writes_the_output_the_next_level_clears_bits_from():
    """A level that ends with an advance that does not gather leaves the bitmap words of its
    output to the next level's first phase, which reads that output while its own threads
    append to theirs; a sweep's next level starts from the store, so it must drop its output
    into the other buffer (one buffer for every level lets appends overwrite entries not yet
    read, and their words stay set). Levels that end otherwise keep one buffer."""
    n = 1000
    g_sum = Functor(name="g_sum", params="double* x", message=Message("double", cuda="x[u]"),
                    gather=Gather("sum", cuda="x[v] != 0"), cuda="x[v] = m; return true;")
    for steps in ([AdvanceStep(CLAIM, "push")], [AdvanceStep(CLAIM, over="in")],
                  [FilterStep(EVEN), AdvanceStep(CLAIM)], [ComputeStep(MARK), AdvanceStep(CLAIM)]):
        out = _sweep_outputs(loop_source(steps, "d", "test"), 6, n)
        assert all(a != b for a, b in zip(out, out[1:])), (steps, out)
        assert all(0 <= a and a + n <= buffers(steps) * n for a in out), (steps, out)
    for steps in ([AdvanceStep(CLAIM), ComputeStep(MARK)], [AdvanceStep(g_sum, "auto")],
                  [AdvanceStep(CLAIM), FilterStep(EVEN)]):
        level = "d" if steps[0].functor is CLAIM else None
        assert len(set(_sweep_outputs(loop_source(steps, level, "test"), 6, n))) == 1, steps


def test_a_round_item_leaves_no_bits_for_the_next_item_to_clear():
    """The next item starts from another frontier, so an item whose levels end with an advance
    that does not gather clears its last output's bitmap words before a barrier of its own."""
    body = [Loop([AdvanceStep(CLAIM)], level="d", keep=True), Sweep([AdvanceStep(BOUNCE)]),
            Loop([AdvanceStep(CLAIM)], level="d", max_levels=2),
            Sweep([ComputeStep(MARK)], reverse=True), Compute(MARK)]
    text = rounds_source(body, None, None, "test")
    items = re.split(r"// item \d+: ", text[text.index("groute_rounds("):])[1:]
    assert len(items) == len(body)
    for item, part in zip(body, items):
        tail = part[part.rindex(f"groute_run_level_") if "groute_run_level_" in part else 0:]
        clears = re.search(r"groute_clear\(groute_r\);\s*(?:}\s*)?\n\s*grid_barrier", tail)
        wanted = not isinstance(item, Compute) and isinstance(item.steps[-1], AdvanceStep)
        assert bool(clears) == wanted, (item, tail)


def test_parameters_shared_by_name_must_agree():
    clash = Functor(name="clash", params="double* depth", cuda="")
    with pytest.raises(ValueError, match="share their parameters by name"):
        loop_source([AdvanceStep(CLAIM), ComputeStep(clash)], None, "test")



def test_a_scalar_named_like_run_loops_own_argument_is_explained():
    """``start=3`` is run_loop's first level number, so the scalar could not be given."""
    starts = Functor(name="starts", params="int* depth, int d, int start", cuda="",
                     numpy=lambda s, v: v[:0])
    with make_engine(random_graph(), backend="cpu", devices=1) as eng:
        eng.state("depth", np.int32, -1)
        with pytest.raises(TypeError, match=r"starts needs the scalar 'start' \(start= is "
                                            r"run_loop's own argument: rename the scalar"):
            run_loop(eng.frontier([0]), [AdvanceStep(starts)], level="d", start=3)
        assert run_loop(eng.frontier([0]), [AdvanceStep(starts)], level="start", d=1).levels == 1


@pytest.mark.parametrize("k", [1, 2])
def test_parameters_shared_by_name_must_agree_on_every_engine(k):
    """Only the fused kernel checked; the operator calls on CPU devices ran each functor with
    its own declaration."""
    clash = Functor(name="clash", params="double* depth", cuda="", numpy=lambda s, v: None)
    scalar = Functor(name="scalar", params="float d", cuda="", numpy=lambda s, v: None)
    with make_engine(random_graph(), backend="cpu", devices=k) as eng:
        eng.state("depth", np.int32, -1)
        for other in (clash, scalar):
            with pytest.raises(ValueError, match=r"run_loop: \w+ declares .* but claim declares"
                                                 r" .*share their parameters by name"):
                run_loop(eng.frontier([0]), [AdvanceStep(CLAIM), ComputeStep(other)], level="d")
            with pytest.raises(ValueError, match="run_rounds: .*share their parameters by name"):
                run_rounds(eng, [0], [Loop([AdvanceStep(CLAIM)], level="d"), Compute(other)])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2])
def test_the_apps_take_the_loop_option_and_report_it(k):
    from groute.apps.betweenness import Betweenness
    from groute.apps.kcore import KCore
    from groute.apps.scc import SCC
    g, d = random_graph(), random_graph(directed=True)
    for loop in ("auto", "python"):
        on = dict(backend="cpu", devices=k, mode="bsp", loop=loop)     # the BSP engine's loops
        for solver in (KCore(g, **on), Betweenness(g, **on), SCC(d, **on)):
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
    there (FusedLoops._common, on a directed graph's first loop over in-arcs or with a pull,
    first-accept or gathering) would wait on itself forever. The engine builds them on the
    caller's thread first. (A stub stands for FusedLoops: this runs on CPU.)"""
    from groute.operators.loop import LoopResult
    g = random_graph(directed=True)
    carry_in = Functor(name="carry_in", params="int* depth, int d",
                       cuda="return atomicCAS(&depth[v], -1, d + 1) == -1;", numpy=_claim)
    summing = Functor(name="s", params="double* x, int d", message=Message("double", cuda="x[u]"),
                      gather=Gather("sum"), cuda="x[v] = m; return true;")
    needs = [[AdvanceStep(carry_in, over="in")], [AdvanceStep(carry_in, "pull")],
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


@pytest.mark.timeout(60)
def test_a_directed_graphs_auto_advances_push_whatever_runs_the_loop():
    """"auto" may not pull on a directed graph (BSPEngine._choose pushes there), so the engine
    gives a loop's, a sweep's and a rounds body's "auto" advances to whatever runs them as
    pushes, before the rule chooses: the rule's facts, the one-device fused loop (a stub here:
    this runs on CPU) and the operator calls see the same steps, and no in-arcs are built for
    a pull that never runs; the async engine asks the rule's facts of the same steps. An
    undirected graph's steps run as given."""
    from groute.operators.loop import LoopResult
    from groute.operators.rounds import RoundsResult
    summing = Functor(name="s", params="double* x, int d", message=Message("double", cuda="x[u]"),
                      gather=Gather("sum"), cuda="x[v] = m; return true;")
    loop = [AdvanceStep(CLAIM, "auto"), AdvanceStep(summing, "auto")]
    body = [Loop([AdvanceStep(CLAIM, "auto")], level="d", keep=True),
            Sweep([AdvanceStep(summing, "auto")], level="d")]
    for directed, want in ((True, "push"), (False, "auto")):
        with engine(random_graph(directed=directed), 1) as eng:
            seen = []

            class Stub:
                def run_loop(self, frontier, steps, **_):
                    seen.append(steps)
                    return LoopResult(0, frontier, None, "fused")

                def sweep(self, levels, steps, **_):
                    seen.append(steps)

                def run_rounds(self, seeds, body, **_):
                    seen.append(body_steps(body))
                    return RoundsResult(len(seeds), 0, 0, "fused")

            def choice(steps, *args, **kwargs):
                seen.append(steps)
                return "fused"
            eng._fused, eng._loop_choice = Stub(), choice
            run_loop(eng.frontier([0]), loop, level="d")
            sweep(Levels(eng, 1, lambda i: eng.frontier([0])), loop, level="d")
            run_rounds(eng, [0, 1], body)
            assert len(seen) == 6
            assert {s.direction for steps in seen for s in steps} == {want}, directed
            if directed:
                assert eng._in_parts is None
    g = random_graph(directed=True)
    with engine(g, 2) as eng:                           # the operator calls: CPU devices
        eng.state("depth", np.int32, values=np.where(np.arange(g.num_vertices) == 0, 0, -1))
        calls, advance_on = [], eng.advance

        def recorded(frontier, functor, direction, *args, **kwargs):
            calls.append(direction)
            return advance_on(frontier, functor, direction, *args, **kwargs)
        eng.advance = recorded
        result = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM, "auto")], level="d")
        assert np.array_equal(eng.gather("depth"), bfs_depths(g, 0))
        assert calls == ["push"] * result.levels and result.levels > 2
        assert eng.stats["loop"] == "python" and eng.stats["pull_advances"] == 0
    with make_engine(g, "async", backend="cpu", devices=2, timeout=30) as eng:
        # the async engine asks the loop rule's facts (a memory check on several CUDA
        # devices) before it hands the loop on: of the steps that run, too
        eng.state("depth", np.int32, values=np.where(np.arange(g.num_vertices) == 0, 0, -1))
        asked, facts_of = [], eng._loop_facts

        def recorded_facts(steps, *args, **kwargs):
            asked.append(steps)
            return facts_of(steps, *args, **kwargs)
        eng._loop_facts = recorded_facts
        run_loop(eng.frontier([0]), [AdvanceStep(CLAIM, "auto")], level="d")
        assert np.array_equal(eng.gather("depth"), bfs_depths(g, 0))
        assert asked and {s.direction for steps in asked for s in steps} == {"push"}


# --- rounds: a body of loops once per seed (groute.operators.run_rounds) ------------------------

def _root(s, v):
    s["depth"][v] = 0


#: a round's seed: level 0
ROOT = Functor(name="root", params="int* depth", cuda="depth[v] = 0;", numpy=_root)


def _add_level(s, v):
    np.add.at(s["acc"], v, s["level"] + 10 * s["round"])


#: per kept level but the seed's, deepest first: acc[v] += its level + 10 * the round's number
ADD_LEVEL = Functor(name="add_level", params="long long* acc, int level, int round",
                    cuda="acc[v] += level + 10 * round;", numpy=_add_level)


def _end(s, v):
    s["count"][v] += s["depth"][v] >= 0
    s["depth"][v] = -1
    s["last"][v] = s["reached"]


#: every vertex after a round: count the rounds that reached it, note the round's reach, reset
END = Functor(name="end", params="int* count, int* depth, double* last, double reached",
              cuda="count[v] += depth[v] >= 0;\ndepth[v] = -1;\nlast[v] = reached;",
              numpy=_end)

ROUND = [Compute(ROOT, over="seed"), Loop([AdvanceStep(CLAIM)], level="d", keep=True),
         Sweep([ComputeStep(ADD_LEVEL)], level="level", reverse=True, skip=1), Compute(END)]


def _round_state(eng):
    eng.state("depth", np.int32, -1)
    eng.state("acc", np.int64, 0)
    eng.state("count", np.int32, 0)
    eng.state("last", np.float64, 0.0)


def _round_answer(eng):
    return {name: eng.gather(name).tolist() for name in ("depth", "acc", "count", "last")}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", DEVICES)
def test_rounds_run_the_body_once_per_seed_with_index_and_total(k):
    """BFS from each seed (one repeated, one isolated), every kept level but the seed's
    numbered and added deepest first, then a compute on every vertex that reads the round's
    reach: against BFS depths computed here."""
    g = random_graph(seed=k)
    seeds = [0, 7, g.num_vertices - 1, 7]               # an isolated vertex; 7 twice
    with engine(g, k) as eng:
        _round_state(eng)
        result = run_rounds(eng, seeds, ROUND, index="round", total="reached")
        got = _round_answer(eng)
        assert eng.stats["rounds"] == "python"
    acc, count = np.zeros(g.num_vertices, np.int64), np.zeros(g.num_vertices, np.int64)
    levels = []
    for i, s in enumerate(seeds):
        depth = bfs_depths(g, s)
        acc += np.where(depth > 0, depth + 10 * i, 0)
        count += depth >= 0
        levels.append(depth.max() + 1)
    assert got["acc"] == acc.tolist() and got["count"] == count.tolist()
    assert got["depth"] == [-1] * g.num_vertices
    assert got["last"] == [float((bfs_depths(g, seeds[-1]) >= 0).sum())] * g.num_vertices
    assert (result.rounds, result.levels, result.deepest) == (4, sum(levels), max(levels))
    assert result.implementation == "python" and levels[2] == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 3])
def test_rounds_are_the_loops_written_by_hand(k):
    """A Loop with max_levels and start, one without keep, a Sweep from level 0, a Compute
    on the seed: the same state as the operator calls written out per seed."""
    g = random_graph(seed=4)
    body = [Loop([ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], level="d",
                 start=5, max_levels=3, keep=True),
            Sweep([ComputeStep(MARK)]),
            Compute(ROOT, over="seed"),
            Loop([AdvanceStep(CLAIM)], level="d")]
    out = []
    for by_hand in (True, False):
        with engine(g, k) as eng:
            eng.state("depth", np.int32, -1)
            eng.state("seen", np.int32, 0)
            if by_hand:
                for s in (2, 4, 2):
                    levels = run_loop(eng.frontier([s]), body[0].steps, level="d", start=5,
                                      max_levels=3, keep=True).frontiers
                    sweep(levels, [ComputeStep(MARK)])
                    compute(eng.frontier([s]), ROOT)
                    run_loop(eng.frontier([s]), [AdvanceStep(CLAIM)], level="d")
            else:
                run_rounds(eng, np.array([2, 4, 2]), body)
            out.append((eng.gather("depth").tolist(), eng.gather("seen").tolist()))
    assert out[0] == out[1]
    assert max(out[1][1]) >= 2


@pytest.mark.timeout(60)
def test_no_seeds_run_no_rounds():
    g = random_graph()
    with engine(g, 2) as eng:
        _round_state(eng)
        result = run_rounds(eng, [], ROUND, index="round", total="reached")
        assert (result.rounds, result.levels, result.deepest) == (0, 0, 0)
        assert (eng.gather("count") == 0).all()


@pytest.mark.timeout(60)
def test_bad_rounds_are_refused_naming_the_argument():
    g = random_graph()
    loop, kept = Loop([AdvanceStep(CLAIM)], level="d"), Loop([AdvanceStep(CLAIM)], level="d",
                                                             keep=True)
    with engine(g, 1) as eng:
        _round_state(eng)
        with pytest.raises(ValueError, match="run_rounds: body is empty"):
            run_rounds(eng, [0], [])
        with pytest.raises(TypeError, match="body holds AdvanceStep; each item is a Loop"):
            run_rounds(eng, [0], [AdvanceStep(CLAIM)])
        with pytest.raises(ValueError, match="a Sweep sweeps the levels of the Loop before it"):
            run_rounds(eng, [0], [loop, Sweep([ComputeStep(MARK)])])
        with pytest.raises(ValueError, match="total='reached' is read before any Loop kept"):
            run_rounds(eng, [0], [Compute(END), kept], total="reached")
        with pytest.raises(TypeError, match="Compute needs the scalar 'reached'"):
            run_rounds(eng, [0], [kept, Compute(END)])
        with pytest.raises(TypeError, match=r"declares the scalar\(s\) \['q'\]"):
            run_rounds(eng, [0], [kept], q=1)
        with pytest.raises(ValueError, match="'round' is set per round"):
            run_rounds(eng, [0], ROUND, index="round", total="reached", round=3)
        with pytest.raises(ValueError, match="index='x' names no scalar"):
            run_rounds(eng, [0], ROUND, index="x", total="reached")
        with pytest.raises(TypeError, match="index='reached' is declared double"):
            run_rounds(eng, [0], ROUND, index="reached", total="round")
        with pytest.raises(ValueError, match="'d' is a Loop's level scalar and given"):
            run_rounds(eng, [0], [kept], d=1)
        with pytest.raises(ValueError, match=r"seeds must be positions in \[0, 300\)"):
            run_rounds(eng, [0, 300], ROUND, index="round", total="reached")
        with pytest.raises(TypeError, match="seeds must be a 1-D list of vertex positions"):
            run_rounds(eng, [0.5], ROUND, index="round", total="reached")
        with pytest.raises(TypeError, match="engine must be an engine"):
            run_rounds(eng.all_vertices(), [0], ROUND, index="round", total="reached")
        assert (eng.gather("count") == 0).all()            # nothing ran
    with pytest.raises(ValueError, match="Loop: no step makes a new frontier"):
        Loop([ComputeStep(MARK)])
    with pytest.raises(ValueError, match="Sweep: skip must be an int >= 0"):
        Sweep([ComputeStep(MARK)], skip=-1)
    with pytest.raises(ValueError, match="Compute: over must be one of all, seed"):
        Compute(MARK, over="frontier")
    with pytest.raises(TypeError, match="Compute: functor must be a Functor"):
        Compute(ComputeStep(MARK))
    with pytest.raises(TypeError, match="Loop: steps holds the Functor claim"):
        Loop(CLAIM)


def test_the_rule_runs_rounds_as_it_runs_loops():
    """The rule reads the rounds' steps as a loop's: a first-accept pull in them runs fused
    on one CUDA device as any other step."""
    g = random_graph()
    with engine(g, 1) as eng:
        steps = body_steps([Loop([AdvanceStep(CLAIM)], level="d", keep=True),
                            Sweep([AdvanceStep(CLAIM, "pull")], level="d")])
        for body in (steps, body_steps(ROUND)):
            facts = dict(eng._loop_facts(body), cuda=True, one_device=True)
            assert decide_loop(facts)[0] == "fused"


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_fused_rounds_compile(tmp_path):
    """groute_rounds for betweenness' rounds, the rounds of these tests, a body with two
    kept Loops, a Loop without keep and several producing steps in a level, one that sweeps a
    push advance before another Loop, and one whose second kept Loop reads total."""
    from groute.apps.betweenness import Betweenness
    bodies = [
        (Betweenness.rounds(Betweenness.__new__(Betweenness)), None, "reached"),
        (ROUND, "round", "reached"),
        ([Loop([ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], level="d",
               max_levels=3, keep=True), Compute(ROOT, over="seed"),
          Loop([AdvanceStep(CLAIM)], level="d"), Loop([AdvanceStep(CLAIM)], level="d",
                                                      keep=True),
          Sweep([ComputeStep(ADD_LEVEL)], level="level", reverse=True), Compute(END)],
         "round", "reached"),
        (SWEPT_PUSH, None, None),
        (RESUMED_TOTAL, None, "reached"),
    ]
    texts = [rounds_source(body, index, total, "test") for body, index, total in bodies]
    done = compile_sources(texts, ["groute_rounds"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == len(bodies)


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_fused_rounds_give_the_python_rounds_answers():
    """One launch for every round against the operator calls: the tests' round (isolated and
    repeated seeds), a round whose kept levels repeat vertices (the store fills and the
    launch resumes mid-round) and a path deeper than the store's first offsets."""
    g = random_graph(n=3000, m=20000)
    n = 400
    path = path_graph(n)
    bounce = [Loop([AdvanceStep(BOUNCE)], max_levels=12, keep=True),
              Sweep([ComputeStep(MARK)], reverse=True)]

    def run(eng):
        _round_state(eng)
        eng.state("hits", np.int32, 0)
        eng.state("seen", np.int32, 0)
        seeds = [0, 5, 2999, 5, 17]
        a = run_rounds(eng, seeds, ROUND, index="round", total="reached")
        b = run_rounds(eng, [4, 9], bounce)
        assert eng.stats["rounds"] == eng.stats["loop"]
        return (_round_answer(eng), eng.gather("hits").tolist(), eng.gather("seen").tolist(),
                (a.rounds, a.levels, a.deepest), (b.rounds, b.levels, b.deepest))

    def run_path(eng):
        _round_state(eng)
        r = run_rounds(eng, [0, n // 2, n - 1], ROUND, index="round", total="reached")
        return _round_answer(eng), (r.rounds, r.levels, r.deepest)

    fused, python = _both_loops(g, run)
    assert fused == python
    fused, python = _both_loops(path, run_path)
    assert fused == python and fused[1][2] == n


def _roots(s, v):
    s["depth"][v] = 0
    s["depth2"][v] = 0


#: a round's seed: level 0 of both searches
ROOTS = Functor(name="roots", params="int* depth, int* depth2", cuda="depth[v] = 0; depth2[v] = 0;",
                numpy=_roots)


def _claim2(s, v):
    v = np.unique(v[s["depth2"][v] < 0])
    s["depth2"][v] = s["d"] + 1
    return v


#: CLAIM's search again, into depth2
CLAIM2 = Functor(name="claim2", params="int* depth2, int d",
                 cuda="return atomicCAS(&depth2[v], -1, d + 1) == -1;", numpy=_claim2)


def _sum_reset(s, v):
    s["acc"][v] += s["depth2"][v]
    s["depth"][v] = -1
    s["depth2"][v] = -1


#: every vertex after a round: add the second search's depth, reset both
SUM_RESET = Functor(name="sum_reset", params="long long* acc, int* depth, int* depth2",
                    cuda="acc[v] += depth2[v];\ndepth[v] = -1;\ndepth2[v] = -1;",
                    numpy=_sum_reset)

#: a search that keeps its levels, a push advance swept over them (adjacent levels' targets
#: overlap), then a search that needs the advances' bitmaps clean: bits left set drop
#: vertices from its frontiers and change its depths
SWEPT_PUSH = [Compute(ROOTS, over="seed"), Loop([AdvanceStep(CLAIM)], level="d", keep=True),
              Sweep([AdvanceStep(BOUNCE, "push")]), Loop([AdvanceStep(CLAIM2)], level="d"),
              Compute(SUM_RESET)]


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_a_swept_push_advance_leaves_the_bitmaps_clean():
    """SWEPT_PUSH's rounds fused against the operator calls: the sweep's levels clear one
    dropped output while appending to another, and its last output is cleared before the next
    Loop. Also a standalone sweep of a push advance (its levels alternate two buffers)."""
    g = random_graph(n=20000, m=60000, seed=5)

    def run(eng):
        eng.state("depth", np.int32, -1)
        eng.state("depth2", np.int32, -1)
        eng.state("acc", np.int64, 0)
        eng.state("hits", np.int32, 0)
        r = run_rounds(eng, list(range(0, 20000, 997)), SWEPT_PUSH)
        kept = run_loop(eng.frontier([1]), AdvanceStep(CLAIM), level="d", keep=True).frontiers
        sweep(kept, [AdvanceStep(BOUNCE, "push")], reverse=True)
        return (eng.gather("acc").tolist(), eng.gather("hits").tolist(),
                eng.gather("depth").tolist(), (r.rounds, r.levels, r.deepest))

    fused, python = _both_loops(g, run)
    assert fused == python
    assert sum(x > 0 for x in fused[0]) > g.num_vertices // 2     # the searches went deep


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 3])
def test_total_is_the_last_kept_loops_after_a_loop_without_keep(k):
    """A Loop without keep between the kept Loop and the item that reads total leaves total
    as the kept Loop set it (as the operator calls would: run_loop without keep has no
    Levels); a Sweep still needs the nearest Loop before it to keep its levels."""
    g = random_graph(seed=k)
    seeds = [0, 7, g.num_vertices - 1]
    body = [Compute(ROOT, over="seed"), Loop([AdvanceStep(CLAIM)], level="d", keep=True),
            Loop([AdvanceStep(CLAIM)], level="d", max_levels=2), Compute(END)]
    with engine(g, k) as eng:
        _round_state(eng)
        run_rounds(eng, seeds, body, total="reached")
        got = _round_answer(eng)
        with pytest.raises(ValueError, match="a Sweep sweeps the levels of the Loop before it"):
            run_rounds(eng, seeds, body[:3] + [Sweep([ComputeStep(MARK)])])
    reach = [int((bfs_depths(g, s) >= 0).sum()) for s in seeds]
    assert got["last"] == [float(reach[-1])] * g.num_vertices
    assert got["count"] == sum((bfs_depths(g, s) >= 0).astype(int) for s in seeds).tolist()


def _claim_total(s, v):
    v = np.unique(v[s["depth2"][v] < 0])
    s["depth2"][v] = s["d"] + 1
    s["acc"][v] += int(s["reached"])
    return v


#: CLAIM2's search, adding the vertices the kept Loop before it kept to each vertex it claims
CLAIM_TOTAL = Functor(name="claim_total", params="int* depth2, long long* acc, int d, "
                                                 "long long reached",
                      cuda="if (atomicCAS(&depth2[v], -1, d + 1) != -1) return false;\n"
                           "acc[v] += reached;\nreturn true;",
                      numpy=_claim_total)

#: a short kept search, then a deep kept search that reads the first one's total: on a long
#: path the second fills the store, and the launch resumes at it, past the items that set total
RESUMED_TOTAL = [Compute(ROOTS, over="seed"),
                 Loop([AdvanceStep(CLAIM)], level="d", max_levels=10, keep=True),
                 Loop([AdvanceStep(CLAIM_TOTAL)], level="d", keep=True), Compute(SUM_RESET)]


def _resumed_total_answer(n, seeds):
    """RESUMED_TOTAL's acc on path_graph(n), computed here."""
    acc = np.zeros(n, np.int64)
    for s in seeds:
        depth = np.abs(np.arange(n) - s)
        acc += np.where(depth > 0, int((depth < 10).sum()), 0) + depth
    return acc.tolist()


@pytest.mark.timeout(60)
def test_a_loop_reads_the_total_of_the_kept_loop_before_it():
    n, seeds = 150, [0, 75, 149]
    with engine(path_graph(n), 2) as eng:
        for name in ("depth", "depth2"):
            eng.state(name, np.int32, -1)
        eng.state("acc", np.int64, 0)
        result = run_rounds(eng, seeds, RESUMED_TOTAL, total="reached")
        assert eng.gather("acc").tolist() == _resumed_total_answer(n, seeds)
    assert (result.levels, result.deepest) == (30 + 150 + 76 + 150, 150)


def test_a_resumed_launch_gives_the_loop_the_total_its_skipped_items_set():
    """When a kept Loop fills the store, the launch ends and the next starts at that Loop,
    skipping the round's items before it: the total the kept Loop before it set goes out
    through the control block (every exit of a full store) and comes back as the kernel's
    argument, set before the first round, so the resumed Loop reads what it read before."""
    text = rounds_source(RESUMED_TOTAL, None, "reached", "test")
    kernel = text[text.index("groute_rounds("):]
    head = kernel[:kernel.index("for (int groute_round")]
    assert "long long groute_kept_total0" in head
    assert re.search(r"groute_kept_total = groute_kept_total0;\s*groute_p\.reached = "
                     r"\(long long\)\(groute_kept_total\);", head), head
    exits = re.findall(r"protocol_result\(groute_ctl, groute_round, 2\);(.*?)return;", kernel,
                       re.S)
    assert len(exits) == 2 and all(
        "groute_r.own()[GROUTE_KEPT_TOTAL] = (unsigned long long)groute_kept_total;" in e
        for e in exits)
    assert kernel.count("groute_kept_total = groute_at;") == 2


@pytest.mark.timeout(300)
@pytest.mark.gpu
def test_a_resumed_loop_reads_the_total_the_kept_loop_before_it_set():
    """RESUMED_TOTAL on a 400-vertex path, fused against the operator calls and the answer
    computed here: its second Loop fills the store's offsets and resumes mid-round."""
    n, seeds = 400, [0, 200, 399]

    def run(eng):
        for name in ("depth", "depth2"):
            eng.state(name, np.int32, -1)
        eng.state("acc", np.int64, 0)
        r = run_rounds(eng, seeds, RESUMED_TOTAL, total="reached")
        return eng.gather("acc").tolist(), (r.rounds, r.levels, r.deepest)

    fused, python = _both_loops(path_graph(n), run)
    assert fused == python
    assert fused[0] == _resumed_total_answer(n, seeds)
