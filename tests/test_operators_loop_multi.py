"""The fused loop on several CUDA devices (groute.engines.fused_multi, loop_source.multi_source):
on the CPU, the inbox capacity against a count arc by arc, the rules (LOOP_RULE's cases for
several devices, the async engine leaving order-free loops to it, loop='fused' refused where it
cannot run), the inboxes' and published frontiers' bytes against the devices' free memory, the
tables the host packs against the header's and the kernel's layout, the generated source's
order of pushes, meetings, inbox visits and resets and of a pull's publication, meeting and
clearing, a kept loop's stores stopping every device at once and a sweep's meetings, the
rounds' kernel (seeds by owner, meetings, a kept Loop's total summed), the stores', seeds' and
tally's bytes (those the host makes, on a stub device), where the host reads a launch stopped
and how it grows a store, "auto" pushing on a directed graph, and every step kind compiled with nvcc
(the loop's, the sweep's and the rounds' kernels); on 2-4
CUDA devices (logical ones on one GPU), the fused launches against the operator calls and
NetworkX: a BFS by levels, label propagation (a message), pushes over in-arcs, a gathering
push, max_levels and an empty frontier, first-accept pulls and gathering pulls among
candidates or not, "auto" between them (pushing on a directed graph), two pulls in a level,
k-core and SCC end to end, the async engine's order-free loop, betweenness' forward pass kept
and its backward pass swept, a kept store that grows, rounds (betweenness' body, index and
total, a store that grows within a round, a resumed Loop reading total), and a device that
waits too long at a meeting."""
from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest

import groute
from groute.engines import make_engine
from groute.engines.async_engine import AsyncEngine, decide_async_loop, loop_facts
from groute.engines.bsp import body_as_run, steps_as_run
from groute.engines.fused import CTL_WORDS, FusedLoops, LaunchEnd, decide_loop, not_fused_because
from groute.engines.fused_multi import (GLOBAL_WORDS, MAX_DEVICES, P_FULL, PCTL_WORDS, T_CAP, T_COUNT, T_IDS, T_K,
                                        T_MSGS, T_OFF, TABLE_WORDS, Inboxes, MultiFusedLoops,
                                        Published, arc_matrix, inbox_bytes, inbox_capacity,
                                        pull_words, published_bytes, rounds_bytes,
                                        store_bytes)
from groute.engines.protocol import MEETING_WORDS, PROTO_RESULT, PROTOCOL_WORDS
from groute.graph import CSRGraph
from groute.graph.partition import partition_graph
from groute.operators import (AdvanceStep, Compute, ComputeStep, FilterStep, Functor, Levels,
                              Loop, Message, Sweep, compute, run_loop, run_rounds, sweep)
from groute.operators.loop_source import (AT, COUNT, EMPTIED, ITEM, KEPT_TOTAL, LEVEL, PULLS,
                                          STORE_FULL, multi_source, pull_steps, rounds_source,
                                          source)
from groute.operators.rounds import RoundsResult, body_steps
from support import busiest, gpu_marks, in_order, need_gpus
from test_fused_pulls import (CLAIM_ALLOWED, DIRECTIONS, HIT, SOME, _hits_reference,
                              _search, allowed_of, bfs_reference, fused_pull_loops)
from test_fused_pulls import reference_sigma as sigma_among
from test_operators_gather import SIGMA, START, _lower, reference_sigma
from test_operators_gather import random_graph as hub_graph
from test_operators_loop import (BOUNCE, CLAIM, EVEN, MARK, RESUMED_TOTAL, ROUND, SWEPT_PUSH,
                                 _resumed_total_answer, _round_answer, _round_state, bfs_depths,
                                 compile_sources, path_graph, random_graph)

INBOX_CUH = Path(__file__).resolve().parents[1] / "groute" / "operators" / "inbox.cuh"


def _take_min(s, v, m):               # NumPy: v repeats once per arc that reached it
    before = s["label"][v].copy()
    np.minimum.at(s["label"], v, m)
    return np.unique(v[s["label"][v] < before])


#: min-label propagation: a vertex takes the least label along an arc (a message)
LOWER = Functor(name="lower_label", params="int* label",
                message=Message("int", cuda="label[u]", numpy=lambda s, u: s["label"][u]),
                cuda="return atomicMin(&label[v], m) > m;", numpy=_take_min)


def _root(s, v):
    s["depth"][v] = 0


ROOT = Functor(name="root", params="int* depth", cuda="depth[v] = 0;", numpy=_root)


def directed_graph(n=300, m=1200, seed=4):
    return random_graph(n, m, directed=True, seed=seed)


# --- the inboxes' capacity --------------------------------------------------------------------

def _capacity_arc_by_arc(g, offsets, over):
    """What one push from every vertex sends to each device, counted arc by arc: over out-arcs
    the targets of the arcs u -> v, over in-arcs their sources (the rows are the in-arcs)."""
    owner = np.searchsorted(offsets, np.arange(g.num_vertices), side="right") - 1
    caps = [0] * (len(offsets) - 1)
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    for u in range(g.num_vertices):
        for v in indices[indptr[u]:indptr[u + 1]].tolist():
            row, target = (u, v) if over == "out" else (v, u)
            if owner[row] != owner[target]:
                caps[owner[target]] += 1
    return caps


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("partition", ["contiguous", "random"])
def test_the_inbox_capacity_is_every_arc_one_step_can_send_to_a_device(k, partition):
    for g in (random_graph(seed=k), directed_graph(seed=k)):
        part = partition_graph(g, k, partition, seed=3)
        offsets, new = np.asarray(part.offsets), part.graph
        matrix = arc_matrix(offsets, new.indptr, new.indices, chunk=7)   # chunks cut rows
        assert matrix.sum() == new.num_edges
        assert np.array_equal(matrix, arc_matrix(offsets, new.indptr, new.indices))
        for over in ("out", "in"):
            caps = inbox_capacity(matrix, over)
            assert caps.tolist() == _capacity_arc_by_arc(new, offsets, over), (over, g.directed)
            assert caps.sum() > 0
        if not g.directed:          # the in-arcs are the out-arcs
            assert np.array_equal(inbox_capacity(matrix, "in"), inbox_capacity(matrix, "out"))


# --- the rules --------------------------------------------------------------------------------

def _round_of(steps):
    """A round of ``steps``: a kept Loop of them from the seed, then a Sweep of them over its
    levels but the seed's, deepest first."""
    return [Loop(steps, keep=True), Sweep(steps, reverse=True, skip=1)]


def _betweenness_body():
    """Betweenness' round (apps/betweenness.py): start, forward Loop, backward and
    accumulating Sweeps."""
    from groute.apps.betweenness import Betweenness
    return Betweenness.rounds(Betweenness.__new__(Betweenness))


def _several_cuda(facts):
    """An engine's facts as several CUDA devices that write into each other's memory have
    them."""
    return dict(facts, cuda=True, one_device=False, peer_writes=True, inboxes_fit=True)


def _app_loops():
    from groute.apps.kcore import LOSE_NEIGHBOUR, REMOVE
    from groute.apps.scc import CLAIM_SCC, COLOUR, TRIM_IN, TRIM_OUT
    return {"kcore": [ComputeStep(REMOVE), AdvanceStep(LOSE_NEIGHBOUR, "push")],
            "scc trim in": TRIM_IN, "scc trim out": TRIM_OUT, "scc colour": COLOUR,
            "scc claim": CLAIM_SCC}


@pytest.mark.timeout(60)
def test_on_several_devices_the_rule_fuses_loops_kept_loops_sweeps_and_rounds():
    """The engine's facts for its loops, sweeps and rounds, as several CUDA devices that write
    into each other's memory would have them: fused for every step kind (the apps' loops,
    computes, filters, a message, over in-arcs, a gathering push, "auto" with a message, which
    pushes, and the steps that may pull: a first-accept pull, "auto" without a message, a
    gathering step that is not "push"), whether the loop keeps its levels or not, for a sweep
    over levels the fused loop kept, and for rounds of them (betweenness' body too); python
    for a sweep over levels the operator calls kept, and where the devices cannot write into
    each other's memory or the memory would not fit; the generated sources (a loop's and
    rounds of it) are made for each of them."""
    g = random_graph()
    fused = {"bfs": [AdvanceStep(CLAIM)], "mixed": [ComputeStep(MARK), AdvanceStep(CLAIM),
                                                    FilterStep(EVEN)],
             "message": [AdvanceStep(LOWER)], "in-arcs": [AdvanceStep(LOWER, over="in")],
             "gathering push": [AdvanceStep(SIGMA, "push")],
             "auto pushes": [AdvanceStep(LOWER, "auto")], **_app_loops(),
             "gathering auto": [AdvanceStep(SIGMA, "auto")],
             "gathering pull": [AdvanceStep(SIGMA, "pull", over="in")],
             "first-accept auto": [AdvanceStep(CLAIM, "auto")],
             "first-accept pull": [AdvanceStep(CLAIM, "pull")]}
    with make_engine(g, "bsp", backend="cpu", devices=2, timeout=30) as eng:
        assert eng._loop_facts([AdvanceStep(CLAIM)])["peer_writes"] is False    # CPU devices
        eng.state("depth", np.int32, -1)
        levels = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d",
                          keep=True).frontiers          # levels the operator calls kept
        for name, steps in fused.items():
            facts = _several_cuda(eng._loop_facts(steps))
            assert decide_loop(facts)[0] == "fused", name
            assert decide_loop(dict(facts, peer_writes=False))[0] == "python", name
            assert decide_loop(dict(facts, inboxes_fit=False))[0] == "python", name
            multi_source(steps, "d" if name in ("bfs", "mixed") or "ccept" in name
                         or "gathering" in name else None, "test")
            kept = _several_cuda(eng._loop_facts(steps, None, True))     # keep=True
            on_devices = Levels(eng, 3, None, store=SimpleNamespace(engine=eng))
            swept = _several_cuda(eng._loop_facts(steps, on_devices))
            assert decide_loop(kept)[0] == decide_loop(swept)[0] == "fused", name
            on_host = _several_cuda(eng._loop_facts(steps, levels))
            assert on_host["levels_on_host"] and decide_loop(on_host)[0] == "python", name
            rounds = _several_cuda(eng._loop_facts(steps, None, True, 3))     # 3 seeds
            assert "rounds" not in rounds and decide_loop(rounds)[0] == "fused", name
            assert decide_loop(dict(rounds, peer_writes=False))[0] == "python", name
            assert decide_loop(dict(rounds, inboxes_fit=False))[0] == "python", name
            rounds_source(_round_of(steps), None, None, "test", multi=True)
        bc = _betweenness_body()
        facts = _several_cuda(eng._loop_facts(body_steps(bc), None, True, 5))
        assert decide_loop(facts) == decide_loop(_several_cuda(eng._loop_facts(
            body_steps(bc))))
        assert decide_loop(facts)[0] == "fused" and "rounds run every round" in \
            decide_loop(facts)[1]


@pytest.mark.timeout(60)
def test_loop_fused_where_several_devices_cannot_run_it_names_why():
    """loop='fused' on CPU devices is refused when the engine is made; on several devices
    that could run it, a sweep over levels the operator calls kept and rounds whose stores
    would not fit each raise a ValueError naming the fact and the reason."""
    g = random_graph()
    with pytest.raises(ValueError, match=r"loop='fused' runs on one CUDA device, or on several "
                                         r"that write into each other's memory; this engine "
                                         r"has 2 cpu device\(s\)"):
        make_engine(g, "bsp", backend="cpu", devices=2, loop="fused")
    with make_engine(g, "bsp", backend="cpu", devices=2, timeout=30) as eng:
        eng.state("depth", np.int32, -1)
        eng.state("depth2", np.int32, -1)
        eng.state("sigma", np.float64, 0.0)
        levels = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d",
                          keep=True).frontiers
        real = eng._loop_facts
        eng._loop_facts = lambda *args: _several_cuda(real(*args))
        eng.loop = "fused"
        with pytest.raises(ValueError, match=r"sweep: loop='fused' cannot run this loop "
                                             r"\(a sweep over levels kept on the host"):
            sweep(levels, [ComputeStep(MARK)])
        eng._loop_facts = lambda *args: dict(_several_cuda(real(*args)), inboxes_fit=False)
        with pytest.raises(ValueError, match=r"run_rounds: .*\(the inboxes, published frontiers "
                                             r"and stores would not fit .*rounds' stores"):
            run_rounds(eng, [0], [Compute(ROOT, over="seed"),
                                  Loop([AdvanceStep(CLAIM)], level="d")])
        assert (eng.gather("depth") >= 0).sum() > 1        # the first loop ran


def _async_stub(mode, backend, k, peer_writes, fits=True):
    """Enough of an AsyncEngine for its rule (``_async_case``); ``fits``: whether its fused
    loops' inboxes would fit."""
    eng = AsyncEngine.__new__(AsyncEngine)
    eng.async_mode = mode
    eng.ctx = SimpleNamespace(backend=backend, num_devices=k)
    eng._no_peer_writes = None if peer_writes else "no peer access"
    eng._multi = SimpleNamespace(inboxes_fit=lambda steps, keep=False, seeds=None: fits)
    return eng


def test_the_async_engine_leaves_order_free_loops_to_the_fused_launches():
    """On several CUDA devices that write into each other's memory an order-free loop runs by
    levels (LOOP_RULE then fuses it: one launch per device), unless the caller insists on
    async; elsewhere async as before. Every combination of the facts."""
    steps = [AdvanceStep(LOWER)]
    for backend, k, writes in itertools.product(["cpu", "cuda"], [1, 2, 4], [False, True]):
        case = _async_stub("auto", backend, k, writes)._async_case(
            steps, level=None, max_levels=None, keep=False, order="any")
        fused = backend == "cuda" and k > 1 and writes
        want = "levels" if k == 1 or fused else "async"
        assert case.choice == want, (backend, k, writes)
        if fused:
            assert "one fused launch per device" in case.why
        insisted = _async_stub("async", backend, k, writes)._async_case(
            steps, level=None, max_levels=None, keep=False, order="any")
        assert insisted.choice == "async"
    # inboxes that would not fit: async instead
    case = _async_stub("auto", "cuda", 2, True, fits=False)._async_case(
        steps, level=None, max_levels=None, keep=False, order="any")
    assert case.choice == "async", case
    # a first-accept "auto", which may pull, is fused too: levels
    case = _async_stub("auto", "cuda", 2, True)._async_case(
        [AdvanceStep(CLAIM, "auto")], level=None, max_levels=None, keep=False, order="any")
    assert case.choice == "levels" and "one fused launch per device" in case.why, case
    names = ("order_any", "numbered", "gathers", "pulls", "one_device", "fused")
    for values in itertools.product([False, True], repeat=len(names)):
        f = dict(zip(names, values))
        levels = (not f["order_any"] or f["numbered"] or f["gathers"] or f["pulls"]
                  or f["one_device"] or f["fused"])
        assert decide_async_loop(f).choice == ("levels" if levels else "async"), f
    assert set(loop_facts(steps, level=None, max_levels=None, keep=False, order="any",
                          one_device=False)) == set(names)


# --- the table and the generated source ---------------------------------------------------------

def test_the_table_holds_what_the_header_reads_where_it_reads_it():
    """InboxTable's words as the host packs them, at the offsets inbox.cuh asserts (the
    header's static_assert fails the compile where the layout differs)."""
    text = INBOX_CUH.read_text()
    assert int(re.search(r"#define INBOX_MAX_DEVICES (\d+)", text)[1]) == MAX_DEVICES
    from groute.engines.peer_barrier import MAX_DEVICES as PERSISTENT_MAX
    assert MAX_DEVICES == PERSISTENT_MAX
    asserted = dict(re.findall(r"offsetof\(InboxTable, (\w+)\) == (\d+) \* 8", text))
    assert {k: int(v) for k, v in asserted.items()} == dict(cap=T_CAP, ids=T_IDS, msgs=T_MSGS,
                                                            count=T_COUNT, k=T_K)
    assert int(re.search(r"sizeof\(InboxTable\) == (\d+) \* 8", text)[1]) == TABLE_WORDS

    def at(ptr):
        return SimpleNamespace(data=SimpleNamespace(ptr=ptr))
    offsets, caps = np.array([0, 5, 9, 20]), np.array([7, 0, 3])
    ids = [[at(100 + 10 * j), at(101 + 10 * j)] for j in range(3)]
    msgs = [[at(200 + 10 * j), at(201 + 10 * j)] for j in range(2)] + [None]
    pctl = [at(300 + j) for j in range(3)]
    words = Inboxes.table(offsets, caps, ids, msgs, pctl).view(np.int64)
    assert words.shape == (TABLE_WORDS,)
    assert words[T_OFF:T_OFF + MAX_DEVICES + 1].tolist() == [0, 5, 9, 20] + [20] * 5
    assert words[T_CAP:T_CAP + 3].tolist() == [7, 0, 3]
    assert words[T_IDS:T_IDS + 3].tolist() == [100, 110, 120]
    assert words[T_IDS + MAX_DEVICES:T_IDS + MAX_DEVICES + 3].tolist() == [101, 111, 121]
    assert words[T_MSGS:T_MSGS + 3].tolist() == [200, 210, 0]
    assert words[T_MSGS + MAX_DEVICES:T_MSGS + MAX_DEVICES + 3].tolist() == [201, 211, 0]
    assert words[T_COUNT:T_COUNT + 3].tolist() == [300, 301, 302]
    assert words[T_K] == 3
    with pytest.raises(ValueError, match="at most 8 devices"):
        Inboxes.table(np.arange(10), np.zeros(9), [ids[0]] * 9, [None] * 9, [pctl[0]] * 9)


def _steps_of(text):
    """The generated level code, step by step."""
    level = text[text.index("groute_run_level("):]
    return re.split(r"\n    \{  // step \d+: ", level)[1:]


def test_each_advance_meets_then_visits_its_inbox_then_empties_it():
    """In every advance of the source on several devices (out- and in-arcs, a message, a
    gathering push, two in a level): the push, a meeting, the inbox of the step's parity
    visited, a grid barrier, its count reset, and only then the next advance's parity; after
    each level the count summed at a meeting that decides the next. The one-device source has
    none of it."""
    steps = [AdvanceStep(CLAIM), FilterStep(EVEN), AdvanceStep(LOWER, over="in"),
             ComputeStep(MARK), AdvanceStep(SIGMA, "push")]
    text = multi_source(steps, "d", "test")
    advances = [s for s in _steps_of(text) if "advance(" in s.split("\n")[0]]
    assert len(advances) == 3
    for code in advances:
        assert in_order(code, ["groute_push(", "if (!groute_meet(groute_r)) return -1;",
                               "inbox_receive<", "grid_barrier" if "gathering" in code
                               else "groute_produce_end(",
                               "inbox_reset(*groute_r.inbox, groute_r.me, groute_r.adv & 1)",
                               "++groute_r.adv;"]), code
        assert code.count("inbox_reset(") == code.count("inbox_receive<") == 1
        assert "groute_r.adv & 1" in code[:code.index("groute_push(")]   # the sends' parity
    kernel = text[text.index("groute_loop_multi("):]
    order = [kernel.index(x) for x in (
        "groute_total = groute_begin(groute_r, groute_total0);", "while (groute_total > 0)",
        "groute_n = groute_run_level(", "groute_meet_level(groute_r, groute_sums)",
        "groute_total = groute_sums[0];", "++groute_level;")]
    assert order == sorted(order)
    # a visitor sends what it does not own, and visits what it owns by its local position
    assert "accept((int)(v - first), groute_m);" in text
    assert "groute_send<true>(*inbox, parity, pctl, v, groute_m);" in text
    assert "groute_send<false>(*inbox, parity, pctl, v, (groute_msg_t_0)0);" in text
    one = source(steps, "d", "test")
    assert "groute_meet" not in one and "inbox" not in one and "accept(v);" in one


def test_a_pull_on_several_devices_publishes_meets_pulls_then_clears_its_copy():
    """In every step that may pull, on several devices (a first-accept pull and "auto", a
    gathering "auto" among candidates and a gathering pull over in-arcs, three in a level): the
    frontier published into every device's copy of the step's own slot, a meeting, the pull
    over this device's candidates testing its own copy (a gather reading the published
    messages, its hubs too), a grid barrier, the copy zeroed, the pull counted; no inbox. An
    "auto" step first meets to sum its frontier's vertices and arcs and decides on the sums
    (direction_next, over the whole graph's vertices and arcs); a "pull" step does not meet to
    decide. A first-accept "auto"'s push exchanges through the inboxes as a push does, and
    empties its inbox after produce_end's barrier, only where it pushed. The one-device source
    publishes nothing and meets nowhere."""
    steps = [AdvanceStep(CLAIM, "pull"), AdvanceStep(SIGMA, "auto", candidates=SOME),
             FilterStep(EVEN), AdvanceStep(CLAIM_ALLOWED, "auto", candidates=SOME),
             AdvanceStep(SIGMA, "pull", over="in")]
    text = multi_source(steps, "d", "test")
    codes = _steps_of(text)
    slots = pull_steps(steps)
    assert slots == [0, 1, 3, 4]
    for i in slots:
        code, gathers = codes[i], steps[i].functor.gather is not None
        pull = code[code.index("if (groute_pull) {"):code.index("} else {")]
        assert in_order(pull, [
            f"groute_publish<{'true, groute_msg_t_' + str(i) if gathers else 'false, int'}>"
            f"(groute_r, {slots.index(i)}, groute_q, groute_n,",
            "if (!groute_meet(groute_r)) return -1;",
            "advance_gather(" if gathers else "advance_pull(groute_r.in, groute_g,",
            "grid_barrier(groute_r.bar, groute_r.bar_target);",
            "groute_unpublish(groute_r, groute_front);", "++groute_r.own()[GROUTE_PULLS];"]), i
        assert f"groute_pull_bits(groute_r, {slots.index(i)}, groute_r.me)" in code
        assert "inbox" not in pull and "groute_send" not in pull
        if gathers:
            graph = "out" if steps[i].over == "in" else "in"
            assert f"GroutePublished<GrouteGather{i}> groute_pf" in pull
            assert f"advance_gather(groute_r.{graph}, groute_pf," in pull
            assert f"advance_gather_big(groute_r.{graph}, groute_pf," in pull
        decide = code[:code.index("if (groute_pull) {")]
        if steps[i].direction == "auto":
            assert in_order(decide, ["groute_scout_add(",
                                      "groute_meet_sums(groute_r, groute_all, groute_scouted)) "
                                      "return -1;", "direction_next(",
                                      "groute_all[0], groute_r.vertices,", "groute_r.arcs,"])
            # the meeting opens with a grid barrier, after which its adder reads the scout's
            # sum: no barrier of the scout's own before it
            assert "groute_scout(" not in decide and "grid_barrier" not in decide
        else:
            assert "groute_meet_sums" not in decide
            assert "const bool groute_pull = true;" in decide
    first_accept = codes[3]
    push = first_accept[first_accept.index("} else {"):]
    assert in_order(push, ["groute_push(", "if (!groute_meet(groute_r)) return -1;",
                            "inbox_receive<", "groute_produce_end(", "if (!groute_pull) {",
                            "inbox_reset(*groute_r.inbox, groute_r.me, groute_r.adv & 1)"])
    one = source(steps, "d", "test")
    assert "groute_publish" not in one and "groute_meet" not in one
    assert "GroutePublished" not in one


def test_a_kept_loop_stops_every_device_at_once_and_a_sweep_meets_after_each_level():
    """On several devices a level's meeting sums, beside the frontier, whether each device's
    store has room for the next level, and the loop's test of its store reads that sum: every
    device stops at the same level when one store fills. A sweep runs each device's part of a
    level, then the devices meet, before the next level. On one device the loop tests its own
    store and a sweep meets nobody."""
    steps = [AdvanceStep(SIGMA, "pull", over="in")]
    text = multi_source(steps, "d", "test")
    loop = text[text.index("void __launch_bounds__(256) groute_loop_multi("):
                text.index("void __launch_bounds__(256) groute_sweep_multi(")]
    assert in_order(loop, [
        "long long groute_full = 0;", "if (groute_full > 0) {", "groute_status = 2;",
        "groute_run_level(", "groute_store_full(\n            groute_keep, groute_level + 1, "
        "groute_next_at + groute_n,", "groute_meet_level(groute_r, groute_sums)",
        "groute_total = groute_sums[0];", "groute_full = groute_sums[1];", "++groute_level;",
        "groute_offsets[groute_level + 1] = groute_at + groute_n;", "groute_r.own()[GROUTE_AT] ="])
    swept = text[text.index("void __launch_bounds__(256) groute_sweep_multi("):]
    assert in_order(swept, [
        "if (groute_begin(groute_r, 0) < 0) {", "groute_run_level(",
        "if (groute_left < 0 || !groute_meet(groute_r)) {", "groute_crossed(groute_r, "])
    one = source(steps, "d", "test")
    assert "if (groute_store_full(groute_keep, groute_level, groute_next_at," in one
    assert "groute_full " not in one and "(void)groute_left;" in one
    assert "groute_meet" not in one


def test_on_a_directed_graph_auto_pushes_on_several_devices():
    """As the operator calls decide (BSPEngine._choose), the engine gives the launches every
    "auto" advance of a directed graph as a push (steps_as_run, body_as_run): no pull, so no
    published frontier and no meeting to decide; fixed directions and the steps' other fields
    stay, and a rounds body's Loops and Sweeps are rewritten alike. On an undirected graph the
    steps run as given."""
    steps = [AdvanceStep(CLAIM, "auto", candidates=SOME), AdvanceStep(SIGMA, "auto", over="in"),
             AdvanceStep(CLAIM, "pull"), FilterStep(EVEN), AdvanceStep(LOWER, "auto")]
    run = steps_as_run(steps, directed=True)
    assert [getattr(s, "direction", None) for s in run] == ["push", "push", "pull", None, "push"]
    assert run[0].candidates is SOME and run[1].over == "in" and run[3] is steps[3]
    assert pull_steps(run) == [2] and pull_words(run) == [0]
    assert "groute_meet_sums(groute_r" not in multi_source(run, "d", "test")
    assert steps_as_run(steps, directed=False) == tuple(steps)
    body = (Compute(ROOT, over="seed"), Loop(steps, level="d", keep=True),
            Sweep([AdvanceStep(CLAIM, "auto")], level="d"))
    pushed = body_as_run(body, directed=True)
    assert pushed[0] is body[0] and pushed[1].keep and pushed[1].level == "d"
    assert pushed[1].steps == run and pushed[2].steps[0].direction == "push"
    assert body_as_run(body, directed=False) == body


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_fused_loops_on_several_devices_compile(tmp_path):
    """groute_loop_multi for a BFS level, compute, advance and filter in a level, messages of
    several types over out- and in-arcs, two advances in a level, gathering pushes, the
    apps' loops (k-core's peel, SCC's trims, colouring and claim), and the loops with pulls
    of the one-device tests (first-accept and gathering pulls and "auto" among candidates,
    several in a level, k-core's peel in every direction) and gathering pulls over in-arcs."""
    carry = Functor(name="carry", params="int* depth, int d", message=Message(
        "long long", cuda="(long long)depth[u]"), cuda="return m >= 0 && depth[v] < 0;")
    loops = [([AdvanceStep(CLAIM)], "d"),
             ([ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], "d"),
             ([AdvanceStep(LOWER)], None), ([AdvanceStep(LOWER, over="in")], None),
             ([FilterStep(EVEN), AdvanceStep(carry, over="in"), AdvanceStep(CLAIM)], "d"),
             ([AdvanceStep(SIGMA, "push")], "d"),
             ([AdvanceStep(_lower("min"), "push", over="in"), AdvanceStep(BOUNCE)], None),
             *[(steps, None) for steps in _app_loops().values()],
             *fused_pull_loops(),
             ([AdvanceStep(_lower("max"), "pull", over="in"),
               AdvanceStep(SIGMA, "auto", over="in", candidates=SOME)], "d")]
    done = compile_sources([multi_source(steps, level, "test") for steps, level in loops],
                           ["groute_loop_multi", "groute_sweep_multi"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == 2 * len(loops)
    assert "atom.add.sys" in ptx or "atom.sys.add" in ptx or "atom.global.sys.add" in ptx
    assert "red.relaxed.sys.global.or.b32" in ptx          # a pull's published bits


def test_rounds_on_several_devices_meet_as_loops_and_sweeps_and_sum_a_kept_loops_total():
    """groute_rounds_multi: the peer arguments and the first meeting; per round the seed (a
    global id) level 0 on its owner only; a Loop's levels from the seed's one vertex over the
    devices (or, on a relaunch past the seed's level, the resumed level's, the host's: a first
    launch resumes nothing) summed at every level's meeting, on a ring
    whose sequence is the launch's count of level meetings (many Loops per launch); a kept
    Loop's total summed at a meeting of its own before the total scalar is set; a Sweep's
    meeting after each level; every exit (a full store, a device that did not come, the end)
    reports the meetings passed. The one-device kernel has the same items and no meeting."""
    text = rounds_source(_betweenness_body(), None, "reached", "test", multi=True)
    kernel = text[text.index("groute_rounds_multi("):]
    assert in_order(kernel, [
        "GROUTE_RUN_ARGS, GROUTE_PEER_ARGS, long long groute_total0, const int* groute_seeds,",
        "GROUTE_PEER_INIT", "if (groute_begin(groute_r, 0) < 0) {",
        "for (int groute_round = groute_round0;",
        "groute_seed = (long long)groute_seeds[groute_round] - groute_r.first;",
        "groute_seed_n = groute_seed >= 0 && groute_seed < groute_r.n_local;",
        "if (groute_seed_n) groute_store[0] = (int)groute_seed;",
        "groute_offsets[1] = groute_seed_n;", "// item 0: Compute on seed",
        "groute_run_level_0(groute_r, groute_p, groute_store, groute_seed_n, nullptr);",
        "// item 1: Loop", "&& groute_resume_level > 0;", ": groute_seed_n;",
        "long long groute_total = groute_resume ? groute_total0 : 1, groute_full = 0;",
        "while (groute_total > 0)", "groute_meet_level(groute_r, groute_sums)",
        "if (groute_status == 3) {", "if (groute_status == 2) {",
        "groute_r.own()[GROUTE_KEPT_TOTAL] =",
        "groute_crossed(groute_r, groute_gbase);", "return;",
        "long long groute_kept_sums[2] = {groute_at, 0};",
        "if (!groute_meet_sums(groute_r, groute_kept_sums)) {",
        "groute_kept_total = groute_kept_sums[0];",
        "groute_p.reached = (double)(groute_kept_total);", "// item 2: Sweep",
        "int groute_status = 0;", "if (groute_left < 0 || !groute_meet(groute_r)) {",
        "if (groute_status == 3) {", "// item 3: Sweep",
        "protocol_result(groute_ctl, groute_rounds, 0);",
        "groute_crossed(groute_r, groute_gbase);"]), kernel
    # the first meeting; the Loop's failed meeting, full store and failed total; two Sweeps'
    # failed meetings; the end
    assert kernel.count("groute_crossed(") == 7
    assert "r.levels_met++" in text and "groute_meet_level(groute_r, groute_sums, " not in text
    one = rounds_source(_betweenness_body(), None, "reached", "test")
    one_kernel = one[one.index("groute_rounds("):]
    assert "groute_meet" not in one and "groute_crossed(" not in one_kernel
    assert "groute_seed = (long long)groute_seeds[groute_round] - 0;" in one_kernel
    assert "groute_kept_total = groute_at;" in one_kernel
    # item for item, the same code on one device and on several
    items = [re.split(r"// item \d+: ", t)[1:] for t in (one_kernel, kernel)]
    assert [i.split("\n")[0] for i in items[0]] == [i.split("\n")[0] for i in items[1]]


def test_rounds_stores_and_seeds_count_against_the_devices_free_memory():
    """Rounds cost every device a store (whether or not a Loop keeps its levels: level 0 holds
    the seed), the seeds and a tally per item, on top of the inboxes."""
    assert rounds_bytes(0, 0) == 0 and rounds_bytes(10, 3) == 40 + 48
    claim = [AdvanceStep(CLAIM)]                                 # inboxes: 24,000 bytes
    need = 24_000 + store_bytes(600) + rounds_bytes(100, 1)
    stub = _multi_stub(_gpus(need))
    stub.engine.parts = [SimpleNamespace(size=400), SimpleNamespace(size=600)]
    assert stub.inboxes_fit(claim, seeds=100)
    stub.devices = _gpus(need - 1)
    assert not stub.inboxes_fit(claim, seeds=100) and stub.inboxes_fit(claim, seeds=99)
    assert stub.inboxes_fit(claim, keep=True)                    # a loop holds no seeds
    with make_engine(random_graph(), "bsp", backend="cpu", devices=2, timeout=30) as eng:
        ctx, eng._multi = eng.ctx, _multi_stub(_gpus(need - 1))
        eng._multi.engine.parts = stub.engine.parts
        eng.ctx, eng._no_peer_writes = SimpleNamespace(backend="cuda", num_devices=2), None
        try:                                # the engine's facts pass the seeds on
            assert decide_loop(eng._loop_facts(claim, None, True, 100))[0] == "python"
            assert decide_loop(eng._loop_facts(claim, None, True, 99))[0] == "fused"
        finally:
            eng.ctx = ctx


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_fused_rounds_on_several_devices_compile(tmp_path):
    """groute_rounds_multi for betweenness' round (gathering "auto" and pull over in-arcs,
    computes swept), the tests' rounds with index and total, a swept push before another
    Loop, a resumed Loop that reads total, a round of pulls, and a Loop without keep."""
    bodies = [(_betweenness_body(), None, "reached"), (ROUND, "round", "reached"),
              (SWEPT_PUSH, None, None), (RESUMED_TOTAL, None, "reached"),
              (_round_of([AdvanceStep(CLAIM, "auto"), AdvanceStep(SIGMA, "pull", over="in")]),
               None, None),
              ([Compute(ROOT, over="seed"), Loop([AdvanceStep(LOWER)], max_levels=3),
                Compute(ROOT)], None, None)]
    done = compile_sources([rounds_source(body, index, total, "test", multi=True)
                            for body, index, total in bodies], ["groute_rounds_multi"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == len(bodies)


# --- on 2-4 CUDA devices ------------------------------------------------------------------------

MULTI = [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}") for k in (2, 3, 4)]


def _engine(g, k, loop, partition="random"):
    """The fused loop (``loop="fused"``) or the operator calls (``"python"``) on ``k`` CUDA
    devices, the same random partition either way."""
    return make_engine(g, "bsp", backend="cuda", devices=k, loop=loop, partition=partition,
                       seed=5, timeout=60)


def _components(G):
    out = np.empty(G.number_of_nodes(), np.int64)
    for c in (nx.weakly_connected_components(G) if G.is_directed()
              else nx.connected_components(G)):
        out[list(c)] = min(c)
    return out


def _least_reached(D):
    """Per vertex of the digraph ``D``, the least vertex it reaches (itself included): over
    the condensation, in reverse topological order."""
    C = nx.condensation(D)
    best = {}
    for c in reversed(list(nx.topological_sort(C))):
        best[c] = min([min(C.nodes[c]["members"])] + [best[s] for s in C.successors(c)])
    return [best[C.graph["mapping"][v]] for v in range(D.number_of_nodes())]


def _levels_and_steps(eng, g, loop):
    """The loops of the test below on an undirected graph; what each left."""
    got = {}
    eng.state("depth", np.int32, -1)
    compute(eng.frontier([0]), ROOT)
    bfs = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d")
    assert eng.stats["loop"] == loop and bfs.implementation == loop
    got["bfs"] = (bfs.levels, len(bfs.frontier), eng.gather("depth").tolist())
    eng.state("depth", np.int32, -1)
    eng.state("seen", np.int32, 0)
    mixed = run_loop(eng.frontier([1, 2, 3, g.num_vertices - 1]),
                     [ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], level="d",
                     start=5, max_levels=3)
    got["mixed"] = (mixed.levels, mixed.frontier.vertices().tolist(),
                    [p.count for p in mixed.frontier.parts], eng.gather("depth").tolist(),
                    eng.gather("seen").tolist())
    eng.state("hits", np.int32, 0)
    bounce = run_loop(eng.frontier([4]), [AdvanceStep(BOUNCE)], max_levels=6)
    got["bounce"] = (bounce.levels, bounce.frontier.vertices().tolist(),
                     eng.gather("hits").tolist())
    # how many levels label propagation takes depends on when a message reads a label that
    # falls in the same level; the labels it ends with do not
    eng.state("label", np.int32, values=np.arange(g.num_vertices))
    labels = run_loop(eng.all_vertices(), [AdvanceStep(LOWER)])
    got["labels"] = (len(labels.frontier), eng.gather("label").tolist())
    eng.state("depth", np.int32, -1)
    eng.state("sigma", np.float64, 0.0)
    compute(eng.frontier([1]), START)
    sigma = run_loop(eng.frontier([1]), [AdvanceStep(SIGMA, "push")], level="d")
    got["sigma"] = (sigma.levels, eng.gather("depth").tolist(), eng.gather("sigma").tolist())
    assert eng.stats["loop"] == loop
    empty = run_loop(eng.frontier([]), [AdvanceStep(CLAIM)], level="d")
    alone = run_loop(eng.frontier([g.num_vertices - 1]), [AdvanceStep(CLAIM)], level="d")
    got["edges"] = (empty.levels, len(empty.frontier), alone.levels, len(alone.frontier))
    assert empty.implementation == alone.implementation == loop
    return got


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_fused_levels_on_several_devices_give_the_operator_calls_answers(k):
    """One engine per implementation on the same random partition: a BFS by levels from one
    vertex (the other devices start with nothing), compute, advance and filter in a level with
    a start and max_levels (the frontier left on every device), targets that repeat every
    level, min-label propagation (an int message) over out-arcs and, on a directed graph,
    over in-arcs, a gathering push (path counts), an empty frontier and an isolated vertex."""
    need_gpus(k)
    g, d = random_graph(n=3000, m=20000, seed=k), directed_graph(n=3000, m=9000, seed=k)
    out = {}
    for loop in ("fused", "python"):
        with _engine(g, k, loop) as eng:
            out[loop] = _levels_and_steps(eng, g, loop)
        with _engine(d, k, loop) as eng:
            eng.state("label", np.int32, values=np.arange(d.num_vertices))
            back = run_loop(eng.all_vertices(), [AdvanceStep(LOWER, over="in")])
            assert eng.stats["loop"] == loop
            out[loop]["labels over in-arcs"] = (len(back.frontier), eng.gather("label").tolist())
    assert out["fused"] == out["python"]
    fused, G = out["fused"], g.to_networkx()
    reach = nx.single_source_shortest_path_length(G, 0)
    assert fused["bfs"][2] == [reach.get(v, -1) for v in range(g.num_vertices)]
    assert fused["bfs"][:2] == (max(reach.values()) + 1, 0)
    assert fused["mixed"][0] == 3 and fused["mixed"][1]          # max_levels stopped it
    assert fused["labels"] == (0, _components(G).tolist())
    # over in-arcs a label flows against the arcs: the least vertex each one reaches
    assert fused["labels over in-arcs"] == (0, _least_reached(d.to_networkx()))
    want_depth, want_sigma = reference_sigma(g, 1)
    assert fused["sigma"][1] == want_depth.tolist()
    np.testing.assert_allclose(fused["sigma"][2], want_sigma, rtol=1e-12)
    assert fused["edges"] == (0, 0, 1, 0)


def _pulled(eng, run):
    """``run()``'s result and the levels its loop pulled (the engine's ``pull_advances``)."""
    before = eng.stats["pull_advances"]
    result = run()
    return result, eng.stats["pull_advances"] - before


def _searches(eng, g, source, allowed, loop, directions=("pull", "auto")):
    """BFS from ``source`` by first-accept pull and by "auto" (``directions``), among the
    allowed candidates or not; "auto" stopped after two levels; and two pulls in a level (HIT
    pulled, then CLAIM by "auto"). Per run: what it left, and last the levels it pulled."""
    out = {}
    eng.state("allowed", np.int32, values=allowed.astype(np.int32))
    for direction in directions:
        for restricted in (False, True):
            step = _search(eng, source, allowed, direction, restricted)
            r, pulled = _pulled(eng, lambda: run_loop(eng.frontier([source]), [step],
                                                      level="d"))
            assert eng.stats["loop"] == r.implementation == loop
            out[direction, restricted] = (eng.gather("depth").tolist(), r.levels,
                                          len(r.frontier), pulled)
    step = _search(eng, source, allowed, "auto", False)
    r, pulled = _pulled(eng, lambda: run_loop(eng.frontier([source]), [step], level="d",
                                              max_levels=2))
    out["stopped"] = (eng.gather("depth").tolist(), r.levels, r.frontier.vertices().tolist(),
                      [p.count for p in r.frontier.parts], pulled)
    step = _search(eng, source, allowed, "auto", False)
    eng.state("hits", np.int32, 0)
    r, pulled = _pulled(eng, lambda: run_loop(eng.frontier([source]),
                                              [AdvanceStep(HIT, "pull"), step], level="d"))
    out["two pulls"] = (eng.gather("depth").tolist(), eng.gather("hits").tolist(), r.levels,
                        pulled)
    return out


def _gathers(eng, source, allowed, directions=("pull", "auto")):
    """Path counts from ``source`` gathered (``directions``), among the allowed candidates or
    not. Per run: depths, counts, levels, and last the levels it pulled."""
    out = {}
    cand = eng.frontier(np.flatnonzero(allowed))
    for direction in directions:
        for restricted in (False, True):
            eng.state("depth", np.int32, -1)
            eng.state("sigma", np.float64, 0.0)
            compute(eng.frontier([source]), START)
            step = AdvanceStep(SIGMA, direction, candidates=cand if restricted else None)
            r, pulled = _pulled(eng, lambda: run_loop(eng.frontier([source]), [step],
                                                      level="d"))
            out[direction, restricted] = (eng.gather("depth").tolist(),
                                          eng.gather("sigma").tolist(), r.levels, pulled)
    return out


def _same_answers(fused, python):
    """Both implementations' runs alike but for the levels they pulled (each run's last
    item): the operator calls' "auto" weighs other unexplored arcs (BSPEngine._choose)."""
    assert fused.keys() == python.keys()
    for key in fused:
        assert fused[key][:-1] == python[key][:-1], key


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_fused_pulls_on_several_devices_give_the_operator_calls_answers(k):
    """One engine per implementation on the same random partition, fused (one launch per
    device) and as operator calls: on an undirected graph BFS by first-accept pull and by
    "auto" among candidates or not (each pull level counted; "auto" pushes, then pulls, the
    fused launches by the rule on the devices' summed frontier), "auto" stopped by
    max_levels (the frontier left on every device), two pulls in a level (each step its own
    published frontier), path counts gathered by pull and "auto" among candidates or not (a
    hub past WARP_EDGES arcs, pulled in chunks); on a directed graph every direction of both,
    where "auto" pushes (as the operator calls decide) and the pulls read in-arcs. Answers
    as NetworkX's and computed here."""
    need_gpus(k)
    g, d = random_graph(n=3000, m=20000, seed=k), directed_graph(n=3000, m=9000, seed=k)
    h = hub_graph(n=20000, m=100000, seed=k)
    sources = {"g": busiest(g), "d": busiest(d)}
    allowed = {name: allowed_of(x.num_vertices) for name, x in (("g", g), ("d", d), ("h", h))}
    out = {}
    for loop in ("fused", "python"):
        with _engine(g, k, loop) as eng:
            out[loop, "searches"] = _searches(eng, g, sources["g"], allowed["g"], loop)
        with _engine(h, k, loop) as eng:
            out[loop, "gathers"] = _gathers(eng, 1, allowed["h"])
        with _engine(d, k, loop) as eng:
            out[loop, "directed searches"] = _searches(eng, d, sources["d"], allowed["d"],
                                                       loop, DIRECTIONS)
            out[loop, "directed gathers"] = _gathers(eng, 0, allowed["d"], DIRECTIONS)
            assert eng.stats["loop"] == loop
    whats = ("searches", "gathers", "directed searches", "directed gathers")
    for what in whats:
        _same_answers(out["fused", what], out["python", what])
    searches, gathers, directed, directed_gathers = (out["fused", what] for what in whats)
    for (name, x, runs) in (("g", g, searches), ("d", d, directed)):
        for direction in (DIRECTIONS if name == "d" else ("pull", "auto")):
            for restricted in (False, True):
                depth, levels, left, pulled = runs[direction, restricted]
                want = bfs_reference(x, sources[name], allowed[name] if restricted else None)
                assert depth == want.tolist(), (name, direction, restricted)
                assert (levels, left) == (want.max() + 1, 0)
                if direction == "pull":
                    assert pulled == levels, (name, restricted)
                elif direction == "push" or name == "d":
                    assert pulled == 0, (name, direction, restricted)
                else:
                    assert 0 < pulled < levels, (restricted, pulled)     # pushed, then pulled
    full = bfs_reference(g, sources["g"])
    depth, levels, left, counts, _ = searches["stopped"]
    assert levels == 2 and left == np.flatnonzero(full == 2).tolist() and sum(counts) == len(left)
    depth, hits, levels, pulled = searches["two pulls"]
    assert pulled > levels                   # HIT pulled every level, CLAIM at some
    assert hits == _hits_reference(g, np.asarray(depth)).tolist()
    for name, x, source, runs in (("h", h, 1, gathers), ("d", d, 0, directed_gathers)):
        for direction in (DIRECTIONS if name == "d" else ("pull", "auto")):
            for restricted in (False, True):
                among = allowed[name] if restricted else np.ones(x.num_vertices, bool)
                want_depth, want_sigma = sigma_among(x, source, among)
                depth, sigma, levels, pulled = runs[direction, restricted]
                assert depth == want_depth.tolist(), (name, direction, restricted)
                np.testing.assert_allclose(sigma, want_sigma, rtol=1e-12)
                assert levels == want_depth.max() + 1
                want_pulled = {"pull": levels, "push": 0}.get(direction, 0 if name == "d"
                                                             else pulled)
                assert pulled == want_pulled and (name == "d" or pulled > 0), \
                    (name, direction, restricted)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_kcore_and_scc_fuse_their_loops_on_several_devices(k):
    """The apps end to end with loop='auto' on the BSP and the async engine: every loop of
    k-core's peel and SCC's trims, colouring and claim is one launch per device, and the
    answers are NetworkX's."""
    need_gpus(k)
    rng = np.random.default_rng(k)
    src, dst = rng.integers(0, 1990, 12000), rng.integers(0, 1990, 12000)
    keep = src != dst
    G = nx.Graph()
    G.add_nodes_from(range(2000))
    G.add_edges_from(zip(src[keep].tolist(), dst[keep].tolist()))
    for engine in ("bsp", "auto"):
        res = groute.core_number(G, backend="cuda", devices=k, mode=engine,
                                 partition="random")
        assert res.stats["loop"] == "fused", engine
        assert res.to_dict() == nx.core_number(G)
    D = nx.DiGraph()
    D.add_nodes_from(range(2000))
    D.add_edges_from(zip(src[:2400].tolist(), dst[:2400].tolist()))
    res = groute.strongly_connected_components(D, backend="cuda", devices=k, partition="random")
    assert res.stats["loop"] == "fused" and res.stats["loops"] > 3
    assert (sorted(map(sorted, res.components()))
            == sorted(map(sorted, nx.strongly_connected_components(D))))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_the_async_engine_fuses_an_order_free_loop_unless_told_async(k):
    need_gpus(k)
    g = random_graph(n=3000, m=4000, seed=7)
    want = _components(g.to_networkx()).tolist()
    for mode, ran in (("auto", "fused"), ("async", "async")):
        with make_engine(g, "async", backend="cuda", devices=k, loop=mode, timeout=60) as eng:
            eng.state("label", np.int32, values=np.arange(g.num_vertices))
            run_loop(eng.all_vertices(), [AdvanceStep(LOWER)], order="any")
            assert eng.stats["loop"] == ran, mode
            assert eng.gather("label").tolist() == want
        if ran == "fused":
            assert "one fused launch per device" in eng.stats["loop_why"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_a_device_that_waits_too_long_at_a_meeting_fails_the_loop_and_the_next_runs(k,
                                                                                    monkeypatch):
    """A wait limit of a microsecond: some device gives up at the first meeting (the others
    launch later than that), every device leaves at its next meeting, and the host raises
    naming the devices that gave up. The same engine's next loop, with the limit back, gives
    the right answer (the barrier's counter was reset)."""
    from groute.engines import peer_barrier
    need_gpus(k)
    g = random_graph(n=3000, m=20000, seed=2)
    with make_engine(g, "bsp", backend="cuda", devices=k, timeout=60) as eng:
        eng.state("depth", np.int32, -1)
        with monkeypatch.context() as patch:
            patch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 1e-6)
            with pytest.raises(RuntimeError, match=r"run_loop\(fused\) on \d devices: cuda:\d.* "
                                                   r"waited more than 1e-06 s at a cross-device "
                                                   r"barrier"):
                run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d")
        for _ in range(2):
            eng.state("depth", np.int32, -1)
            compute(eng.frontier([0]), ROOT)
            run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d")
            assert eng.stats["loop"] == "fused"
            assert eng.gather("depth").tolist() == bfs_depths(g, 0).tolist()


def _fused_and_python(k, run):
    """``run(engine, graph, loop)`` on an undirected and a directed graph, each on ``k``
    devices fused and as operator calls (one engine per implementation, the same random
    partition): per graph's name, the graph and each implementation's answer."""
    graphs = {"undirected": random_graph(n=3000, m=20000, seed=k),
              "directed": directed_graph(n=3000, m=12000, seed=k)}
    out = {}
    for name, g in graphs.items():
        out[name] = (g, {})
        for loop in ("fused", "python"):
            with _engine(g, k, loop) as eng:
                out[name][1][loop] = run(eng, g, loop)
    return out


def _kept_and_swept(eng, source, loop):
    """Betweenness' passes from ``source`` as a loop and a sweep (a kept BFS by levels whose
    gathering advance sums the path counts, then a reverse gathering pull over every level but
    the source's: the dependencies), a kept loop whose store fills and grows (its frontiers
    repeat vertices level after level, for more levels than a new store has offsets for) and a
    push swept over its levels, and an empty kept loop; what each left, exactly, and the path
    counts and dependencies (sums of floats in any order) apart."""
    from groute.apps.betweenness import BACKWARD_PASS, FORWARD_PASS
    from groute.apps.betweenness import START as BC_START
    got, floats = {}, {}
    eng.state("depth", np.int32, -1)
    eng.state("sigma", np.float64, 0.0)
    eng.state("delta", np.float64, 0.0)
    compute(eng.frontier([source]), BC_START)
    forward = run_loop(eng.frontier([source]), FORWARD_PASS, level="d", keep=True)
    assert eng.stats["loop"] == loop and forward.implementation == loop
    levels = forward.frontiers
    sweep(levels[1:], BACKWARD_PASS, level="level", reverse=True)
    assert eng.stats["loop"] == loop
    got["forward"] = (forward.levels, len(forward.frontier), len(levels), levels.total,
                      levels[1:].total, [f.vertices().tolist() for f in levels],
                      [f.vertices().tolist() for f in levels[1:]], eng.gather("depth").tolist())
    floats["sigma"], floats["delta"] = eng.gather("sigma"), eng.gather("delta")
    eng.state("hits", np.int32, 0)
    bounce = run_loop(eng.frontier([4]), [AdvanceStep(BOUNCE)], max_levels=70, keep=True)
    assert eng.stats["loop"] == loop
    kept = bounce.frontiers
    got["bounce"] = (bounce.levels, bounce.frontier.vertices().tolist(), len(kept), kept.total,
                     [f.vertices().tolist() for f in kept], eng.gather("hits").tolist())
    sweep(kept[3:], [AdvanceStep(BOUNCE)])
    assert eng.stats["loop"] == loop
    got["bounce swept"] = eng.gather("hits").tolist()
    empty = run_loop(eng.frontier([]), [AdvanceStep(CLAIM)], level="d", keep=True)
    got["empty"] = (empty.levels, len(empty.frontier), len(empty.frontiers))
    return got, floats


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_kept_levels_and_sweeps_on_several_devices_give_the_operator_calls_answers(k):
    """One engine per implementation on the same random partition, an undirected and a
    directed graph: betweenness' forward pass kept (its "auto" gathering advance pulls big
    levels on the undirected graph, pushes on the directed one) and its backward pass swept
    in reverse (a gathering pull over in-arcs, the successors' messages read from the
    published table), against the operator calls and NetworkX's shortest-path counts; a kept
    store that fills and grows on every device, a push swept over a slice of its levels, and
    an empty kept loop."""
    need_gpus(k)
    for name, (g, out) in _fused_and_python(k, lambda eng, g, loop: _kept_and_swept(
            eng, 1, loop)).items():
        (fused, fused_floats), (python, python_floats) = out["fused"], out["python"]
        assert fused == python, name
        for what in ("sigma", "delta"):
            np.testing.assert_allclose(fused_floats[what], python_floats[what], rtol=1e-12,
                                       err_msg=f"{name}: {what}")
        want_depth, want_sigma = reference_sigma(g, 1)
        assert fused["forward"][-1] == want_depth.tolist(), name
        np.testing.assert_allclose(fused_floats["sigma"], want_sigma, rtol=1e-12)
        assert fused["forward"][0] == max(want_depth) + 1 and fused["forward"][1] == 0
        assert fused["empty"] == (0, 0, 0)
        if name == "undirected":                    # vertex 4's neighbours bounce back
            assert fused["bounce"][0] == 70


def _rounds_run(eng, g, loop):
    """The rounds of the test below: betweenness' body with endpoints (every source's levels
    kept, swept back and accumulated; one isolated source), the tests' round with index and
    total (a repeated seed), and a round whose Loop outgrows a new store's offsets (its
    frontiers repeat vertices for 70 levels: every device stops, the host grows every store
    and resumes mid-round) swept by a compute. What each left, exactly, and betweenness' sums
    of floats apart."""
    got = {}
    for name, dtype, value in (("depth", np.int32, -1), ("sigma", np.float64, 0.0),
                               ("delta", np.float64, 0.0), ("bc", np.float64, 0.0)):
        eng.state(name, dtype, value)
    isolated = int(np.flatnonzero(np.diff(np.asarray(g.indptr)) == 0)[0])
    sources = [1, 17, isolated, 2000, 2999]
    bc = run_rounds(eng, sources, _betweenness_body(), total="reached", endpoints=1)
    assert eng.stats["rounds"] == eng.stats["loop"] == bc.implementation == loop
    got["betweenness"] = (bc.rounds, bc.levels, bc.deepest, eng.gather("depth").tolist())
    floats = eng.gather("bc")
    _round_state(eng)
    r = run_rounds(eng, [0, 5, g.num_vertices - 1, 5, 17], ROUND, index="round",
                   total="reached")
    got["round"] = (_round_answer(eng), (r.rounds, r.levels, r.deepest))
    eng.state("hits", np.int32, 0)
    eng.state("seen", np.int32, 0)
    grown = run_rounds(eng, [4, 9], [Loop([AdvanceStep(BOUNCE)], max_levels=70, keep=True),
                                     Sweep([ComputeStep(MARK)], reverse=True)])
    assert eng.stats["rounds"] == loop
    got["grown"] = (eng.gather("hits").tolist(), eng.gather("seen").tolist(),
                    (grown.rounds, grown.levels, grown.deepest))
    return got, floats


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", MULTI)
def test_fused_rounds_on_several_devices_give_the_operator_calls_answers(k):
    """One engine per implementation on the same random partition, an undirected and a
    directed graph: run_rounds fused (one launch per device for every round) against the
    operator calls (loop="python"): betweenness' body, the tests' round, a store that must
    grow within a round; and on a path, a resumed Loop that reads the total of the kept Loop
    before it (the total summed over the devices), against the answer computed here."""
    need_gpus(k)
    for name, (g, out) in _fused_and_python(k, _rounds_run).items():
        (fused, fused_bc), (python, python_bc) = out["fused"], out["python"]
        assert fused == python, name
        np.testing.assert_allclose(fused_bc, python_bc, rtol=1e-9, atol=1e-12, err_msg=name)
        assert fused["betweenness"][3] == [-1] * g.num_vertices     # every round reset
        if name == "undirected":                    # vertex 4's neighbours bounce back
            assert fused["grown"][2][2] == 70
    n, seeds = 400, [0, 200, 399]
    out = {}
    for loop in ("fused", "python"):
        with _engine(path_graph(n), k, loop, partition="contiguous") as eng:
            for name in ("depth", "depth2"):
                eng.state(name, np.int32, -1)
            eng.state("acc", np.int64, 0)
            r = run_rounds(eng, seeds, RESUMED_TOTAL, total="reached")
            assert eng.stats["rounds"] == loop
            out[loop] = (eng.gather("acc").tolist(), (r.rounds, r.levels, r.deepest))
    assert out["fused"] == out["python"]
    assert out["fused"][0] == _resumed_total_answer(n, seeds)


class _StubGPU:
    """A CUDA device as groute.memory reads it: ``free`` bytes, an empty CuPy pool."""
    backend, gpu = "cuda", None

    def __init__(self, name, free):
        self.name, self.free = name, free

    def memory_info(self):
        return self.free, self.free

    def use(self):
        import contextlib
        return contextlib.nullcontext()

    class xp:
        class _Pool:
            def free_bytes(self):
                return 0

        @staticmethod
        def get_default_memory_pool():
            return _StubGPU.xp._Pool()


def weakly(engine):
    """What the loops keep of their engine (a weak reference, called for the engine), for a
    stub: the stub itself."""
    return lambda: engine


def _multi_stub(devices, n=1000):
    """Enough of a MultiFusedLoops for its memory check: 1,000 arcs from device 0's rows to
    device 1's vertices and 3,000 back, on a graph of ``n`` vertices."""
    multi = MultiFusedLoops.__new__(MultiFusedLoops)
    multi._engine = weakly(SimpleNamespace(num_vertices=n))
    multi._inboxes = multi._published = None
    multi._matrix = np.array([[0, 1000], [3000, 0]], np.int64)   # arcs from rows i to j's ids
    multi.devices = devices
    return multi


def _gpus(free0, free1=1 << 30):
    return [_StubGPU("cuda:0", free0), _StubGPU("cuda:1", free1)]


def test_inboxes_that_would_not_fit_send_the_loop_to_the_operator_calls():
    """The inboxes' bytes (two per device, each an int32 id and the message's words per arc
    crossing into the device) against the devices' free memory: a loop fuses on several
    devices only where they fit, and where inboxes made for an earlier loop already hold it."""
    # device 0 receives 3,000 items: two inboxes of ids and one-word messages = 48,000 bytes
    lower = [AdvanceStep(LOWER)]
    assert _multi_stub(_gpus(48_000, 48_000)).inboxes_fit(lower)
    assert not _multi_stub(_gpus(47_999)).inboxes_fit(lower)
    assert _multi_stub(_gpus(47_999)).inboxes_fit([AdvanceStep(CLAIM)])   # ids only: 24,000
    held = _multi_stub(_gpus(0))
    held._inboxes = SimpleNamespace(holds=lambda caps, words: True)
    assert held.inboxes_fit(lower)                         # made for an earlier loop
    facts = dict(levels_on_host=False, cuda=True, one_device=False, peer_writes=True,
                 inboxes_fit=False)
    assert decide_loop(facts)[0] == "python"


def test_a_pulls_published_frontiers_count_against_the_devices_free_memory():
    """Every step that may pull costs every device a bitmap over every vertex (n / 8 bytes,
    in words) and, gathering, a message per vertex: counted with the inboxes, once the ones
    made for an earlier loop do not hold them; on a directed graph "auto" pushes, so it costs
    nothing; the rule's words say so."""
    n = 1000                                       # a bitmap of 32 words: 128 bytes
    assert published_bytes(n, []) == 0
    assert published_bytes(n, [0]) == 128 and published_bytes(n, [2, 0]) == 128 + 8000 + 128
    sigma, claim = [AdvanceStep(SIGMA, "auto")], [AdvanceStep(CLAIM, "pull")]
    two = [AdvanceStep(HIT, "pull"), FilterStep(EVEN), AdvanceStep(SIGMA, "pull"),
           AdvanceStep(CLAIM, "auto"), AdvanceStep(LOWER, "auto"), AdvanceStep(SIGMA, "push")]
    assert pull_steps(two) == [0, 2, 3] and pull_words(two) == [0, 2, 0]
    assert pull_words(sigma) == [2] and pull_words([AdvanceStep(LOWER, "auto")]) == []
    # SIGMA's double over 3,000 items into device 0, twice: 72,000; its table 8,128
    assert _multi_stub(_gpus(80_128)).inboxes_fit(sigma)
    assert not _multi_stub(_gpus(80_127)).inboxes_fit(sigma)
    pushed = steps_as_run(sigma, directed=True)                     # "auto" pushes
    assert _multi_stub(_gpus(72_000)).inboxes_fit(pushed)
    assert not _multi_stub(_gpus(71_999)).inboxes_fit(pushed)
    assert _multi_stub(_gpus(24_128)).inboxes_fit(claim)
    assert not _multi_stub(_gpus(24_127)).inboxes_fit(claim)
    held = _multi_stub(_gpus(8_128))
    held._inboxes = SimpleNamespace(holds=lambda caps, words: True)
    assert held.inboxes_fit(sigma)                          # the published frontiers alone
    held._published = SimpleNamespace(holds=lambda words: words == [2])
    held.devices = _gpus(0)
    assert held.inboxes_fit(sigma) and not held.inboxes_fit(two)
    why = not_fused_because(dict(levels_on_host=False, cuda=True, one_device=False,
                                 peer_writes=True, inboxes_fit=False))
    assert ("the inboxes, published frontiers and stores would not fit the devices' free memory"
            in why)
    assert "a kept loop's or rounds' stores" in why
    assert "a pull's copies of its frontier" in why


def test_a_kept_loops_stores_count_against_the_devices_free_memory():
    """A loop that keeps its levels costs every device a store: its part's vertices three
    times (the first frontier and two levels) and the levels' offsets, on top of the inboxes,
    whether or not inboxes made earlier hold the loop; the busiest part counts."""
    assert store_bytes(0) == 4 + 8 * FusedLoops.OFFSETS
    assert store_bytes(500) == 4 * 1501 + 8 * FusedLoops.OFFSETS
    claim = [AdvanceStep(CLAIM)]                                 # inboxes: 24,000 bytes
    store = store_bytes(600)
    stub = _multi_stub(_gpus(24_000 + store))
    stub.engine.parts = [SimpleNamespace(size=400), SimpleNamespace(size=600)]
    assert stub.inboxes_fit(claim, keep=True)
    stub.devices = _gpus(24_000 + store - 1)
    assert stub.inboxes_fit(claim) and not stub.inboxes_fit(claim, keep=True)
    stub._inboxes = SimpleNamespace(holds=lambda caps, words: True)
    stub.devices = _gpus(store)
    assert stub.inboxes_fit(claim, keep=True)
    stub.devices = _gpus(store - 1)
    assert not stub.inboxes_fit(claim, keep=True)


class _HostArray(np.ndarray):
    """A NumPy array read back as a CuPy one is (``.get()``)."""

    def get(self):
        return np.asarray(self).copy()


def _host_loops(size, stats=None):
    """A FusedLoops whose device makes NumPy arrays (``_HostArray``): its host code, which
    makes the stores, grows them and reads control blocks and tallies, runs on the CPU."""
    import contextlib

    def made(fn):
        return lambda *args: fn(*args).view(_HostArray)
    xp = SimpleNamespace(empty=made(np.empty), zeros=made(np.zeros),
                         asarray=made(lambda a: np.array(a)))
    device = SimpleNamespace(xp=xp, use=contextlib.nullcontext, on_compute=contextlib.nullcontext)
    loops = FusedLoops.__new__(FusedLoops)
    loops._engine = weakly(SimpleNamespace(stats=stats if stats is not None else {}))
    loops.part = SimpleNamespace(size=size, device=device)
    return loops


def test_the_stores_seeds_and_tally_made_are_the_bytes_counted():
    """The memory check counts what the host makes, by the same formulas: a kept loop's first
    store (its whole part in the first frontier) is store_bytes, a rounds' store (level 0
    the seed) no bigger; the seeds and the tally are rounds_bytes; the inboxes inbox_bytes."""
    loops = _host_loops(500)
    store, offsets, capacity, offsets_capacity = loops._new_store(np.arange(500, dtype=np.int32),
                                                                  500)
    assert store.nbytes + offsets.nbytes == store_bytes(500)
    assert (capacity, offsets_capacity) == (store.shape[0], offsets.shape[0])
    assert store[:500].tolist() == list(range(500)) and offsets[:3].tolist() == [0, 500, 0]
    ids, (buffer, offsets, capacity, _), tally = loops._rounds_buffers([3, 7, 9], 4)
    assert ids.tolist() == [3, 7, 9] and capacity == buffer.shape[0] == 2 * 500 + 2
    assert buffer.nbytes + offsets.nbytes <= store_bytes(500) and not offsets.any()
    assert ids.nbytes + tally.nbytes == rounds_bytes(3, 4) and not tally.any()
    assert inbox_bytes(3000, 1) == 48_000 and inbox_bytes(0, 2) == 0
    assert 2 * 4 * sum(Inboxes.sizes(3000, 2)) == inbox_bytes(3000, 2) == 72_000


def test_the_host_reads_where_a_launch_stopped_and_grows_the_store():
    """A control block's words as the kernels write them (loop_source's ctl: the protocol's,
    the levels run and the status among them, then the loop's own: the last level's count, its
    place in the store, the rounds' resume point, the levels pulled): where the launch stopped,
    its pulls counted; a full store grown keeps what it held and the offsets up to the level;
    the rounds' tally read as levels per item, a Loop's deepest, and the operator counters."""
    stats = {"pull_advances": 1, "advances": 0, "computes": 0, "filters": 0}
    loops = _host_loops(10, stats)
    words = np.zeros(CTL_WORDS, np.uint64).view(_HostArray)
    result = words[PROTO_RESULT:PROTO_RESULT + 1].view(np.int32)    # what ran, why it stopped
    result[:] = 5, STORE_FULL
    own = words[PROTOCOL_WORDS:]
    own[COUNT], own[AT], own[ITEM], own[LEVEL], own[KEPT_TOTAL], own[PULLS] = 4, 20, 2, 3, 77, 6
    end = loops._end(words)
    assert end == LaunchEnd(5, STORE_FULL, 4, 20, 2, 3, 77) and end.full
    assert stats["pull_advances"] == 7
    result[1] = EMPTIED
    assert not LaunchEnd.of(words).full
    store = loops._new_store(np.arange(10, dtype=np.int32), 10)
    store[0][10:24] = np.arange(100, 114)
    store[1][2:7] = [14, 16, 18, 20, 24]
    grown, offsets, capacity, offsets_capacity = loops._grow(*store, end.at + end.count, 5)
    assert capacity >= 24 + 2 * 10 + 1 and grown.shape[0] == capacity
    assert grown[:24].tolist() == store[0][:24].tolist()
    assert offsets[:7].tolist() == store[1][:7].tolist() and not offsets[7:].any()
    body = [Compute(ROOT, over="seed"), Loop([AdvanceStep(CLAIM)], level="d", keep=True),
            Sweep([ComputeStep(MARK), AdvanceStep(CLAIM)], level="d")]
    tally = np.array([2, 0, 9, 4, 7, 0], np.int64).view(_HostArray)
    assert loops._rounds_result(body, 2, tally) == RoundsResult(2, 9, 4, "fused")
    assert (stats["computes"], stats["advances"]) == (2 + 7, 9 + 7)


def test_a_launch_finds_its_compiled_module_by_its_text(monkeypatch):
    """A module's kernels are compiled at its first launch and found by the module's text at
    every launch after: its source file is written (hashed, read back) once, not per launch."""
    import groute.kernels as kernels
    from groute.engines import fused
    written, loaded = [], []
    monkeypatch.setattr(fused, "write_source",
                        lambda text: written.append(text) or f"/tmp/{len(written)}.cu")
    monkeypatch.setattr(kernels, "load_module", lambda path, **_: loaded.append(path)
                        or SimpleNamespace(get_function=lambda name: f"fn {name}"))
    monkeypatch.setattr(kernels, "resident_blocks_per_sm", lambda fn, block, gpu: 2)
    loops = _host_loops(10)
    loops.part.device.gpu, loops.part.device.multiprocessors = 0, 3
    loops._compiled = {}
    first = loops._kernels("module a", ("k", "s"))
    assert first == ({"k": "fn k", "s": "fn s"}, {"k": 6, "s": 6})
    assert loops._kernels("module a", ("k", "s")) is first
    loops._kernels("module b", ("k",))
    assert written == ["module a", "module b"] and loaded == ["/tmp/1.cu", "/tmp/2.cu"]


class _Relaunched(Exception):
    """Ends the loop below at its second launch, once its arguments are seen."""


class _Frontier(list):
    """A frontier of two parts, ``len`` its vertices over the devices."""

    def __init__(self, counts):
        super().__init__(range(sum(counts)))
        self.parts = [SimpleNamespace(count=c, to_queue=lambda c=c: SimpleNamespace(
            queue=np.arange(c, dtype=np.int32).view(_HostArray))) for c in counts]


def test_a_relaunch_of_a_kept_loop_on_several_devices_goes_on_from_the_level_that_filled():
    """A kept loop whose store filled: the host grows every device's store and launches again
    from that level, each device with that level's count of its own (not the first
    frontier's) and their sum as the level's size over the devices."""
    multi = MultiFusedLoops.__new__(MultiFusedLoops)
    multi._engine = weakly(SimpleNamespace(
        _each=lambda fn, *lists: [fn(None, *args) for args in zip(*lists)]))
    multi.loops = [_host_loops(100), _host_loops(100)]
    multi._module = lambda steps, level, scalars, where: ("text", [(), ()])
    multi._room = lambda steps: None
    launches = []

    def launch_all(text, kernel, steps, room, own, params, where):
        launches.append(own)
        if len(launches) == 2:
            raise _Relaunched
        return [LaunchEnd(5, STORE_FULL, 40, 60, 0, 0, 0),
                LaunchEnd(5, STORE_FULL, 7, 90, 0, 0, 0)], [None, None]
    multi._launch_all = launch_all
    with pytest.raises(_Relaunched):
        multi.run_loop(_Frontier([3, 2]), [AdvanceStep(CLAIM)], level="d", start=0,
                       max_levels=None, keep=True, scalars={})
    first, again = launches
    assert [(int(own[1]), int(own[2])) for own in first] == [(3, 5), (2, 5)]
    assert [(int(own[1]), int(own[2])) for own in again] == [(40, 47), (7, 47)]
    assert [int(own[8]) for own in again] == [5, 5]          # from level 5
    assert [own[3].shape[0] >= at + count + 2 * 100 for own, (at, count)
            in zip(again, [(60, 40), (90, 7)])] == [True, True]


def test_the_pull_table_holds_what_the_kernel_reads_where_it_reads_it():
    """The published frontiers' addresses as the host packs them: row 2 r the devices'
    bitmaps of pulling step r, row 2 r + 1 their tables (0: a first-accept pull's none), a
    column per device, as groute_pull_bits and groute_pull_table index them; device 0's block
    as long as the kernel's GROUTE_G_WORDS."""
    def at(ptr):
        return SimpleNamespace(data=SimpleNamespace(ptr=ptr))
    bits = [[at(100 + 10 * j), at(101 + 10 * j)] for j in range(3)]
    msgs = [[at(200 + 10 * j), None] for j in range(3)]
    words = Published.table(bits, msgs).view(np.int64).reshape(4, MAX_DEVICES)
    assert words[0, :3].tolist() == [100, 110, 120] and words[2, :3].tolist() == [101, 111, 121]
    assert words[1, :3].tolist() == [200, 210, 220] and not words[3].any()
    assert not words[:, 3:].any()
    assert Published.table([[], []], [[], []]).shape == (MAX_DEVICES,)    # no step pulls
    text = multi_source([AdvanceStep(CLAIM, "auto"), AdvanceStep(SIGMA, "pull")], "d", "test")
    assert "r.pulls[2 * slot * INBOX_MAX_DEVICES + j]" in text
    assert "r.pulls[(2 * slot + 1) * INBOX_MAX_DEVICES + j]" in text
    assert re.search(r"#define GROUTE_G_WORDS \(MEETING_WORDS \+ (\d+)\)", text)[1] == \
        str(GLOBAL_WORDS - MEETING_WORDS)
    # the peer control block: the word the host reads, and its length (the last pair of sums)
    words = {name: int(n) for name, n in re.findall(r"#define GROUTE_P_(\w+) (\d+)", text)}
    assert words["FULL"] == P_FULL
    assert max(words.values()) + 2 == PCTL_WORDS
    held = Published.__new__(Published)
    held.words = [2, 0]
    assert held.holds([2]) and held.holds([1, 0]) and not held.holds([0, 1])
    assert not held.holds([2, 0, 0])
