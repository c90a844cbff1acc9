"""The pulls of the fused loops (groute.operators.loop_source): the first-accept pull
(``AdvanceStep(f, "pull")`` of a functor that does not gather, with or without candidates),
``"auto"`` between it and the push, and a gathering advance among candidates in every direction.

Without a GPU: the rule runs every step fused on one CUDA device; ``loop="fused"`` refuses only
levels kept on the host; the first-accept pull reads in-arcs on a directed graph (the operator
calls, CPU devices); where the generated pull's barriers and bitmap clears sit, which steps read
in-arcs and candidates, and that the candidates' bitmaps reach the kernel in the order of its
arguments; nvcc compiles the loops, sweeps and rounds with these steps.

On one CUDA GPU: the fused loops against the operator calls (``loop="python"``) and NetworkX:
BFS by first-accept pull and by ``"auto"`` on a Kronecker graph (undirected) and an R-MAT graph
(directed), with and without candidates, where ``"auto"`` switches to the pull and back on the
undirected graph and pushes on the directed one, as the operator calls (the engine's
``pull_advances`` counts the levels that pulled, fused as by the operator calls);
gathers among candidates; a sweep and rounds with such pulls. k-core's fused peel is in
tests/test_kcore.py."""
from __future__ import annotations

import re
import shutil

import networkx as nx
import numpy as np
import pytest

from groute.engines import LOOP_RULE, make_engine
from groute.engines.fused import LOOP_FACTS, FusedLoops, decide_loop
from groute.graph import load_graph
from groute.operators import (AdvanceStep, Compute, ComputeStep, FilterStep, Frontier, Functor,
                              Gather, Levels, Loop, Message, Sweep, compute, run_loop,
                              run_rounds, sweep)
from groute.operators.loop_source import (PULLS, candidate_steps, leaves_clear, needs_in_arcs,
                                          rounds_source, source as loop_source)
from groute.operators.rounds import body_steps
from support import busiest, in_order
from test_operators_gather import START, SIGMA, sigma_over  # the gathering BFS level
from test_operators_loop import (CLAIM, CLAIM2, SUM_RESET, _both_loops, _claim,
                                 compile_sources, random_graph)
from test_operators_loop import ROOTS as ROOT  # level 0 of both searches

DIRECTIONS = ("push", "pull", "auto")


def _claim_allowed(s, v):
    return _claim(s, v[s["allowed"][v] != 0])


#: CLAIM within the allowed vertices: the same answer whether a push (which visits every
#: target) or a pull among candidates (the allowed ones) runs a level
CLAIM_ALLOWED = Functor(name="claim_allowed", params="int* depth, const int* allowed, int d",
                        cuda="return allowed[v] != 0 && atomicCAS(&depth[v], -1, d + 1) == -1;",
                        numpy=_claim_allowed)


def _hit(s, v):
    v = np.unique(v)
    s["hits"][v] += 1
    return v


#: every visit counts: pulled, a vertex counts once per level it has an arc from (the first
#: visit accepts it; the NumPy callable, which sees every visit of a call at once, counts the
#: same), so only the pull gives these counts
HIT = Functor(name="hit", params="int* hits", cuda="atomicAdd(&hits[v], 1); return true;",
              numpy=_hit)


#: a candidates frontier for a generated source, which depends only on whether a step has one
SOME = Frontier(None, [])


def allowed_of(n, seed=11):
    """About two vertices in three: the candidates of the restricted searches."""
    return np.random.default_rng(seed).random(n) < 0.67


def bfs_reference(g, source, allowed=None):
    """Depths from ``source`` by NetworkX (-1: unreached); with ``allowed``, in the graph
    induced by the allowed vertices and the source."""
    G = g.to_networkx()
    if allowed is not None:
        G = G.subgraph(set(np.flatnonzero(allowed).tolist()) | {source})
    depth = np.full(g.num_vertices, -1)
    for v, d in nx.single_source_shortest_path_length(G, source).items():
        depth[v] = d
    return depth


# --- the rule, the option, the operators: CPU ------------------------------------------------

def test_every_step_kind_runs_fused_on_one_cuda_device():
    """No fact of the rule is about a step: first-accept pulls and gathers, with candidates or
    not, in loops and rounds, run fused where the devices allow it; only levels kept on the
    host keep a sweep on the operator calls."""
    assert "pull_step" not in LOOP_FACTS and "pull_step" not in LOOP_RULE.facts()
    with make_engine(random_graph(), "bsp", backend="cpu", devices=1, timeout=30) as eng:
        cand = eng.frontier(range(0, 300, 2))
        kinds = [[AdvanceStep(CLAIM, "pull")], [AdvanceStep(CLAIM, "pull", candidates=cand)],
                 [AdvanceStep(CLAIM, "auto", candidates=cand)],
                 [AdvanceStep(SIGMA, "push", candidates=cand)],
                 [AdvanceStep(SIGMA, "pull", candidates=cand)],
                 [AdvanceStep(SIGMA, "auto", candidates=cand)]]
        for steps in kinds:
            for facts in (eng._loop_facts(steps),
                          eng._loop_facts(body_steps([Loop(steps, level="d", keep=True),
                                                      Sweep(steps, level="d")]))):
                facts.update(cuda=True, one_device=True)
                assert decide_loop(facts)[0] == "fused", steps
        python_levels = Levels(eng, 1, lambda i: eng.frontier([0]))
        facts = dict(eng._loop_facts(kinds[0], python_levels), cuda=True, one_device=True)
        assert decide_loop(facts) == ("python", "a sweep over levels kept as separate frontiers")


def test_loop_fused_names_why_it_cannot_run_a_loop():
    """The one loop a fused engine cannot run (a sweep over levels the operator calls kept):
    the error says why in the rule's words."""
    with make_engine(random_graph(), "bsp", backend="cpu", devices=1, timeout=30) as eng:
        eng.loop = "fused"                                # as on one CUDA device
        eng._loop_facts = lambda steps=(), levels=None, kept=False, seeds=None: dict(
            cuda=True, one_device=True, levels_on_host=levels is not None)
        levels = Levels(eng, 1, lambda i: eng.frontier([0]))
        with pytest.raises(ValueError, match=r"sweep: loop='fused' cannot run this loop \(a "
                                             r"sweep over levels kept on the host: a sweep over "
                                             r"levels kept as separate frontiers\)"):
            sweep(levels, [AdvanceStep(HIT, "pull")])


def _search(eng, source, allowed, direction, restricted):
    """Reset both searches to start at ``source`` and give the step of one BFS level: among
    the allowed candidates (``restricted``) or not; a push among candidates visits every
    target, so it claims only allowed ones to give the same answer."""
    eng.state("depth", np.int32, -1)
    eng.state("depth2", np.int32, -1)
    compute(eng.frontier([source]), ROOT)
    cand = eng.frontier(np.flatnonzero(allowed)) if restricted else None
    functor = CLAIM if direction == "pull" or not restricted else CLAIM_ALLOWED
    return AdvanceStep(functor, direction, candidates=cand)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_first_accept_pull_reads_in_arcs_on_a_directed_graph(k):
    """A directed graph's pull reads the candidates' in-arcs (the engine keeps them, as for a
    gathering pull): BFS by pull, among candidates or not, as by push and NetworkX."""
    g = random_graph(directed=True, seed=k)
    source, allowed = busiest(g), allowed_of(g.num_vertices)
    with make_engine(g, "bsp", backend="cpu", devices=k, partition="random",
                     timeout=30) as eng:
        for direction in DIRECTIONS:
            for restricted in (False, True):
                step = _search(eng, source, allowed, direction, restricted)
                eng.state("allowed", np.int32, values=allowed.astype(np.int32))
                run_loop(eng.frontier([source]), [step], level="d")
                want = bfs_reference(g, source, allowed if restricted else None)
                assert np.array_equal(eng.gather("depth"), want), (direction, restricted)
                assert (want > 2).any()
        assert eng.stats["pull_advances"] > 0


# --- the generated source: CPU -----------------------------------------------------------------

def _step_code(text, i):
    """The code of step ``i`` in a generated level function."""
    start = text.index(f"// step {i}: ")
    return text[start:text.index("\n    }\n", start)]


def test_the_pull_sets_tests_and_clears_the_frontiers_bits_between_barriers():
    """The first-accept pull: the frontier's bits set, a barrier, advance_pull over the
    in-arcs, a barrier (every test done), the same words zeroed, the count read after
    produce_end's barrier; a push leaves its output's words for the next phase, a pull leaves
    none. "auto" and "pull" share the code; a gather among candidates tests them in wants."""
    for direction in ("pull", "auto"):
        text = loop_source([AdvanceStep(CLAIM, direction, candidates=SOME)], "d", "test")
        code = _step_code(text, 0)
        pull = code[code.index("if (groute_pull) {"):code.index("} else {")]
        order = ["queue_to_bitmap(groute_q, groute_n, groute_front",
                 "grid_barrier(groute_r.bar, groute_r.bar_target);",
                 "advance_pull(groute_r.in, groute_g, groute_r.n_local",
                 "grid_barrier(groute_r.bar, groute_r.bar_target);",
                 "groute_zero_words(groute_r, groute_front, groute_q, groute_n);",
                 "++groute_r.own()[GROUTE_PULLS];"]
        assert in_order(pull, order), pull
        assert "groute_front = groute_r.bits + 2 * groute_r.words" in pull
        assert "GroutePull0 groute_g{groute_front, groute_p.groute_cand_0, groute_to" in pull
        tail = code[code.index("groute_produce_end"):]
        assert re.search(r"if \(!groute_pull\) \{\s*groute_r\.clear_q = groute_q;", tail)
        assert "bitmap_claim" not in text[text.index("struct GroutePull0"):
                                          text.index("struct GroutePull0") + 900]
    assert "groute_r.pulling_0" in loop_source([AdvanceStep(CLAIM, "auto")], "d", "test")
    assert "const bool groute_pull = true;" in loop_source([AdvanceStep(CLAIM, "pull")], "d",
                                                           "test")
    # a message makes "auto" push, as the operator: no pull generated
    carry = Functor(name="carry", params="int* depth", message=Message("int", cuda="depth[u]"),
                    cuda="return atomicCAS(&depth[v], -1, m + 1) == -1;")
    assert "advance_pull" not in _step_code(loop_source([AdvanceStep(carry, "auto")], None,
                                                        "test"), 0)
    gather = loop_source([AdvanceStep(SIGMA, "auto", candidates=SOME)], "d", "test")
    assert re.search(r"return \(cand == nullptr \|\| bitmap_test\(cand, \(int\)v\)\) && "
                     r"groute_wants_0\(", gather)
    assert re.search(r"groute_front,\s+groute_p\.groute_cand_0, groute_acc", _step_code(gather, 0))
    assert "++groute_r.own()[GROUTE_PULLS];" in _step_code(gather, 0)


def test_which_steps_read_in_arcs_candidates_and_leave_bits():
    pull, push, auto = (AdvanceStep(CLAIM, d) for d in ("pull", "push", "auto"))
    carry = Functor(name="carry", params="int* depth", message=Message("int", cuda="depth[u]"),
                    cuda="return true;")
    assert needs_in_arcs([pull]) and needs_in_arcs([FilterStep(CLAIM), auto])
    assert not needs_in_arcs([push]) and not needs_in_arcs([AdvanceStep(carry, "auto")])
    assert not leaves_clear([pull]) and leaves_clear([auto]) and leaves_clear([push])
    steps = [AdvanceStep(CLAIM, "push", candidates=SOME),      # a push ignores them
             AdvanceStep(SIGMA, "push", candidates=SOME), ComputeStep(HIT),
             AdvanceStep(CLAIM, "pull"), AdvanceStep(CLAIM, "auto", candidates=SOME),
             AdvanceStep(carry, "auto", candidates=SOME)]    # a message: pushes
    assert candidate_steps(steps) == [1, 4]


def test_candidates_reach_the_kernels_in_the_order_of_their_arguments():
    """The host's bitmaps (FusedLoops._candidates) follow the functors' parameters in the
    kernels' signatures, one per step that reads them, a null pointer for every vertex."""
    g = random_graph()
    with make_engine(g, "bsp", backend="cpu", devices=1, timeout=30) as eng:
        some = np.arange(3, g.num_vertices, 5)
        steps = [AdvanceStep(CLAIM, "push", candidates=eng.frontier([1])),
                 AdvanceStep(SIGMA, "push", candidates=eng.frontier(some)),
                 AdvanceStep(CLAIM, "pull", candidates=eng.all_vertices()),
                 AdvanceStep(CLAIM, "auto")]
        got = FusedLoops(eng, 0)._candidates(steps)
        assert len(got) == 2 and got[1] == 0 and got[1].dtype == np.uint64
        bits = np.unpackbits(np.asarray(got[0]).view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == some.tolist()   # one device: positions
    text = loop_source(steps, "d", "test")
    for kernel in ("groute_loop", "groute_sweep"):
        head = text[text.index(f"{kernel}("):]
        head = head[:head.index(") {")]
        assert head.endswith("int* depth, int d, double* sigma, const unsigned int* "
                             "groute_cand_1, const unsigned int* groute_cand_2"), head
    assert "GrouteParams groute_p{depth, d, sigma, groute_cand_1, groute_cand_2};" in text


def test_a_rounds_auto_loop_starts_every_round_pushing():
    """A first-accept "auto" Loop's direction state is reset per round, as a gather's."""
    body = [Compute(ROOT, over="seed"), Loop([AdvanceStep(CLAIM, "auto")], level="d"),
            Compute(SUM_RESET)]
    text = rounds_source(body, None, None, "test")
    item = text[text.index("// item 1: Loop"):text.index("// item 2:")]
    assert "groute_r.pulling_1 = 0; groute_r.explored_1 = 0;" in item


def fused_pull_loops():
    """(steps, level) of loops and sweeps with first-accept pulls and gathers among
    candidates, k-core's peel in every direction among them."""
    from groute.apps.kcore import LOSE_NEIGHBOUR, REMOVE
    even = Functor(name="even", params="", cuda="return (v & 1) == 0;")
    loops = [([AdvanceStep(CLAIM, "pull")], "d"), ([AdvanceStep(CLAIM, "auto")], "d"),
             ([AdvanceStep(CLAIM, "pull", candidates=SOME)], "d"),
             ([AdvanceStep(CLAIM_ALLOWED, "auto", candidates=SOME)], "d"),
             ([FilterStep(even), AdvanceStep(CLAIM, "pull"), ComputeStep(HIT)], "d"),
             ([AdvanceStep(HIT, "pull"), AdvanceStep(CLAIM, "auto", candidates=SOME)], "d"),
             ([AdvanceStep(SIGMA, "auto", candidates=SOME), AdvanceStep(HIT, "pull")], "d")]
    loops += [([ComputeStep(REMOVE), AdvanceStep(LOSE_NEIGHBOUR, d, candidates=SOME)], None)
              for d in DIRECTIONS]
    loops += [([AdvanceStep(SIGMA, d, candidates=SOME)], "d") for d in DIRECTIONS]
    return loops


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_loops_and_sweeps_with_pulls_compile(tmp_path):
    loops = fused_pull_loops()
    done = compile_sources([loop_source(steps, level, "test") for steps, level in loops],
                           ["groute_loop", "groute_sweep"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "loops.ptx").read_text().count(".entry") == 2 * len(loops)


def pull_round(cand):
    """A round with pulls: a search among ``cand`` by pull, kept and pulled over from level 1,
    then a full search by "auto"; every vertex adds the second's depth and is reset."""
    return [Compute(ROOT, over="seed"),
            Loop([AdvanceStep(CLAIM, "pull", candidates=cand)], level="d", keep=True),
            Sweep([AdvanceStep(HIT, "pull")], skip=1),
            Loop([AdvanceStep(CLAIM2, "auto")], level="d"), Compute(SUM_RESET)]


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_rounds_with_pulls_compile(tmp_path):
    bodies = [pull_round(SOME),
              [Compute(ROOT, over="seed"),
               Loop([AdvanceStep(SIGMA, "auto", candidates=SOME)], level="d", keep=True),
               Sweep([AdvanceStep(HIT, "auto")], reverse=True),
               Loop([AdvanceStep(CLAIM2, "pull")], level="d", max_levels=3)]]
    done = compile_sources([rounds_source(body, None, None, "test") for body in bodies],
                           ["groute_rounds"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "loops.ptx").read_text().count(".entry") == len(bodies)


# --- on one CUDA GPU: fused against the operator calls and NetworkX --------------------------

@pytest.mark.timeout(300)
@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["kron:12", "rmat:12"])
def test_bfs_by_first_accept_pull_and_auto_fused(spec):
    """Every direction, among the allowed candidates or not: depths as NetworkX's, levels and
    kept frontiers as the operator calls'. The pull pulls every level; "auto" pushes the first
    level, pulls the big middle ones and pushes again, but on the directed graph pushes every
    level, fused as by the operator calls (the engine gives the fused loop its steps so)."""
    g = load_graph(spec)
    source, allowed = busiest(g), allowed_of(g.num_vertices)

    def run(eng):
        out = {}
        eng.state("allowed", np.int32, values=allowed.astype(np.int32))
        for direction in DIRECTIONS:
            for restricted in (False, True):
                step = _search(eng, source, allowed, direction, restricted)
                before = eng.stats["pull_advances"]
                r = run_loop(eng.frontier([source]), [step], level="d", keep=True)
                out[direction, restricted] = (
                    eng.gather("depth").tolist(), r.levels,
                    [f.vertices().tolist() for f in r.frontiers],
                    eng.stats["pull_advances"] - before)
        return out

    fused, python = _both_loops(g, run)
    for (direction, restricted), got in fused.items():
        want = bfs_reference(g, source, allowed if restricted else None)
        assert got[0] == want.tolist(), (direction, restricted)
        assert got[:3] == python[direction, restricted][:3], (direction, restricted)
        levels, pulled = got[1], got[3]
        assert levels == want.max() + 1 >= 4
        if direction == "push":
            assert pulled == 0 == python[direction, restricted][3]
        elif direction == "pull":
            assert pulled == levels == python[direction, restricted][3]
        elif g.directed:                      # "auto" may not pull there
            assert pulled == 0 == python[direction, restricted][3], restricted
        else:                                 # Beamer's rule switched both ways
            assert 0 < pulled < levels - 1, (restricted, pulled)


def reference_sigma(g, source, allowed):
    """Depths and shortest-path counts from ``source`` over the arcs into allowed vertices."""
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    src = np.repeat(np.arange(g.num_vertices), np.diff(indptr))
    keep = allowed[indices]
    return sigma_over(src[keep], indices[keep], g.num_vertices, source)


@pytest.mark.timeout(300)
@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["kron:12", "rmat:12"])
def test_gathers_among_candidates_fused(spec):
    """Path counts gathered among the allowed candidates, pushed (deposits only into
    candidates), pulled (only candidates gather) and "auto" (pushing every level on the
    directed graph, as the operator calls): as computed here and as the operator calls."""
    g = load_graph(spec)
    source, allowed = busiest(g), allowed_of(g.num_vertices, seed=12)
    want_depth, want_sigma = reference_sigma(g, source, allowed)

    def run(eng):
        out = {}
        cand = eng.frontier(np.flatnonzero(allowed))
        for direction in DIRECTIONS:
            eng.state("depth", np.int32, -1)
            eng.state("sigma", np.float64, 0.0)
            compute(eng.frontier([source]), START)
            before = eng.stats["pull_advances"]
            r = run_loop(eng.frontier([source]), [AdvanceStep(SIGMA, direction, candidates=cand)],
                         level="d", keep=True)
            out[direction] = (eng.gather("depth"), eng.gather("sigma"), r.levels,
                              [f.vertices().tolist() for f in r.frontiers],
                              eng.stats["pull_advances"] - before)
        return out

    fused, python = _both_loops(g, run)
    for direction in DIRECTIONS:
        depth, sigma, levels, kept, pulled = fused[direction]
        np.testing.assert_array_equal(depth, want_depth, err_msg=direction)
        np.testing.assert_allclose(sigma, want_sigma, rtol=1e-12, err_msg=direction)
        assert (levels, kept) == python[direction][2:4], direction
        assert levels == want_depth.max() + 1 >= 4
        assert pulled == {"push": 0, "pull": levels}.get(direction, pulled)
    levels, pulled = fused["auto"][2], fused["auto"][4]
    if g.directed:                                    # "auto" may not pull there
        assert pulled == 0 == python["auto"][4]
    else:
        assert 0 < pulled < levels - 1                # "auto" pushed, pulled, pushed


def _hits_reference(g, depth, sweep_from=0):
    """HIT pulled over each level of ``depth`` from ``sweep_from`` on: per vertex, the levels
    it has an arc from."""
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    src = np.repeat(np.arange(g.num_vertices), np.diff(indptr))
    hits = np.zeros(g.num_vertices, np.int64)
    for level in range(sweep_from, depth.max() + 1):
        hits[np.unique(indices[depth[src] == level])] += 1
    return hits


@pytest.mark.timeout(300)
@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["kron:11", "rmat:11"])
def test_a_sweep_and_rounds_with_first_accept_pulls_fused(spec):
    """A kept "auto" search, then a sweep that pulls HIT over its levels (deepest first), one
    among candidates; and pull_round's rounds (a search among candidates by pull, a sweep
    pulling over it, a full search by "auto"; seeds repeated, one without arcs): fused as the
    operator calls and as computed here."""
    g = load_graph(spec)
    source, allowed = busiest(g), allowed_of(g.num_vertices, seed=13)
    seeds = [source, int(np.argmin(np.diff(np.asarray(g.indptr)))), 7, source]

    def run(eng):
        for name in ("depth", "depth2"):
            eng.state(name, np.int32, -1)
        eng.state("hits", np.int32, 0)
        eng.state("acc", np.int64, 0)
        compute(eng.frontier([source]), ROOT)
        kept = run_loop(eng.frontier([source]), AdvanceStep(CLAIM, "auto"), level="d",
                        keep=True).frontiers
        depth = eng.gather("depth")
        sweep(kept, [AdvanceStep(HIT, "pull")], reverse=True)
        swept = eng.gather("hits")
        eng.state("hits", np.int32, 0)
        cand = eng.frontier(np.flatnonzero(allowed))
        sweep(kept[1:], [AdvanceStep(HIT, "pull", candidates=cand)])
        among = eng.gather("hits")
        eng.state("hits", np.int32, 0)
        eng.state("depth", np.int32, -1)
        eng.state("depth2", np.int32, -1)
        before = eng.stats["pull_advances"]
        r = run_rounds(eng, seeds, pull_round(cand))
        assert eng.stats["rounds"] == eng.stats["loop"]
        return dict(depth=depth.tolist(), swept=swept.tolist(), among=among.tolist(),
                    hits=eng.gather("hits").tolist(), acc=eng.gather("acc").tolist(),
                    rounds=(r.rounds, r.levels, r.deepest),
                    pulled=eng.stats["pull_advances"] - before)

    fused, python = _both_loops(g, run)
    assert {k: v for k, v in fused.items() if k != "pulled"} == \
        {k: v for k, v in python.items() if k != "pulled"}
    depth = np.asarray(fused["depth"])
    assert np.array_equal(depth, bfs_reference(g, source))
    assert fused["swept"] == _hits_reference(g, depth).tolist()
    assert fused["among"] == (_hits_reference(g, depth, 1) * allowed).tolist()
    hits, acc = np.zeros(g.num_vertices, np.int64), np.zeros(g.num_vertices, np.int64)
    for s in seeds:
        hits += _hits_reference(g, bfs_reference(g, s, allowed), 1)
        acc += bfs_reference(g, s)
    assert fused["hits"] == hits.tolist() and fused["acc"] == acc.tolist()
    assert fused["pulled"] > 0
