"""The fused loop on several CUDA devices (groute.engines.fused_multi, loop_source.multi_source):
on the CPU, the inbox capacity against a count arc by arc, the rules (LOOP_RULE's cases for
several devices, the async engine leaving order-free loops to it, loop='fused' refused where it
cannot run), the table the host packs against the header's layout, the generated source's
order of pushes, meetings, inbox visits and resets, and every step kind compiled with nvcc; on
2-4 CUDA devices (logical ones on one GPU), the fused launches against the operator calls and
NetworkX: a BFS by levels, label propagation (a message), pushes over in-arcs, a gathering
push, max_levels and an empty frontier, k-core and SCC end to end, the async engine's
order-free loop, and a device that waits too long at a meeting."""
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
from groute.engines.fused import decide_loop
from groute.engines.fused_multi import (MAX_DEVICES, T_CAP, T_COUNT, T_IDS, T_K, T_MSGS, T_OFF,
                                        TABLE_WORDS, Inboxes, arc_matrix, inbox_capacity)
from groute.graph import CSRGraph
from groute.graph.partition import partition_graph
from groute.operators import (AdvanceStep, Compute, ComputeStep, FilterStep, Functor, Loop,
                              Message, compute, run_loop, run_rounds, sweep)
from groute.operators.loop_source import multi_source, multi_unsupported, source
from support import gpu_marks, need_gpus
from test_operators_gather import SIGMA, START, _lower, reference_sigma
from test_operators_loop import (BOUNCE, CLAIM, EVEN, MARK, bfs_depths, compile_sources,
                                 random_graph)

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
def test_on_several_devices_the_rule_fuses_pushing_loops_that_keep_no_levels():
    """The engine's facts for its loops, sweeps and rounds, as several CUDA devices that write
    into each other's memory would have them: fused for pushes, filters and computes (the
    apps' loops, a message, over in-arcs, a gathering push, "auto" with a message, which
    pushes), python for kept levels, sweeps, rounds, and steps that may pull (a first-accept
    pull, "auto" without a message, a gathering step that is not "push"). The generated source agrees: it is made exactly where the rule fuses."""
    g = random_graph()
    fused = {"bfs": [AdvanceStep(CLAIM)], "mixed": [ComputeStep(MARK), AdvanceStep(CLAIM),
                                                    FilterStep(EVEN)],
             "message": [AdvanceStep(LOWER)], "in-arcs": [AdvanceStep(LOWER, over="in")],
             "gathering push": [AdvanceStep(SIGMA, "push")],
             "auto pushes": [AdvanceStep(LOWER, "auto")], **_app_loops()}
    gathers_pull = {"gathering auto": [AdvanceStep(SIGMA, "auto")],
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
            assert multi_unsupported(steps) is None, name
            multi_source(steps, "d" if name in ("bfs", "mixed") else None, "test")
            kept = _several_cuda(eng._loop_facts(steps, None, True))     # keep=True, rounds
            swept = _several_cuda(eng._loop_facts(steps, levels))
            assert kept["kept"] and swept["kept"]
            assert decide_loop(kept)[0] == decide_loop(swept)[0] == "python", name
        for name, steps in gathers_pull.items():
            facts = _several_cuda(eng._loop_facts(steps))
            assert facts["pulls"] and decide_loop(facts)[0] == "python", name
            assert "may pull" in multi_unsupported(steps)
            with pytest.raises(ValueError, match="on several devices the fused loop pushes"):
                multi_source(steps, "d", "test")


@pytest.mark.timeout(60)
def test_loop_fused_where_several_devices_cannot_run_it_names_why():
    """loop='fused' on CPU devices is refused when the engine is made; on several devices
    that could run it, a loop that keeps its levels, a sweep (its levels kept by the operator
    calls), rounds and a gathering step that may pull each raise a ValueError naming the fact
    and the reason."""
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
        kept = r"the levels are kept, swept or run as rounds: on several devices kept levels"
        with pytest.raises(ValueError, match=rf"run_loop: loop='fused' cannot run this loop "
                                             rf"\({kept}"):
            run_loop(eng.frontier([0]), [AdvanceStep(CLAIM)], level="d", keep=True)
        with pytest.raises(ValueError, match=r"sweep: loop='fused' cannot run this loop "
                                             r"\(a sweep over levels kept on the host"):
            sweep(levels, [ComputeStep(MARK)])
        with pytest.raises(ValueError, match=rf"run_rounds: .*\({kept}"):
            run_rounds(eng, [0], [Compute(ROOT, over="seed"),
                                  Loop([AdvanceStep(CLAIM)], level="d")])
        with pytest.raises(ValueError, match=r"\(a step may pull: on several devices "
                                             r"the fused launch only pushes"):
            run_loop(eng.frontier([0]), [AdvanceStep(SIGMA, "auto")], level="d")
        assert (eng.gather("depth") >= 0).sum() > 1        # only the first loop ran


def _async_stub(mode, backend, k, peer_writes, fits=True):
    """Enough of an AsyncEngine for its rule (``_async_case``); ``fits``: whether its fused
    loops' inboxes would fit."""
    eng = AsyncEngine.__new__(AsyncEngine)
    eng.async_mode = mode
    eng.ctx = SimpleNamespace(backend=backend, num_devices=k)
    eng._no_peer_writes = None if peer_writes else "no peer access"
    eng._multi = SimpleNamespace(inboxes_fit=lambda steps: fits)
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
    # a first-accept "auto" may pull in the fused launch, which only pushes: async instead
    case = _async_stub("auto", "cuda", 2, True)._async_case(
        [AdvanceStep(CLAIM, "auto")], level=None, max_levels=None, keep=False, order="any")
    assert case.choice == "async", case
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
        at = 0
        for x in ("groute_push(", "groute_meet(groute_r, 0, -1) < 0) return -1;",
                  "inbox_receive<", "grid_barrier" if "gathering" in code
                  else "groute_produce_end(",
                  "inbox_reset(*groute_r.inbox, groute_r.me, groute_r.adv & 1)",
                  "++groute_r.adv;"):
            assert code.find(x, at) >= 0, (x, code)
            at = code.find(x, at)
        assert code.count("inbox_reset(") == code.count("inbox_receive<") == 1
        assert "groute_r.adv & 1" in code[:code.index("groute_push(")]   # the sends' parity
    kernel = text[text.index("groute_loop_multi("):]
    order = [kernel.index(x) for x in (
        "groute_total = groute_begin(groute_r, groute_total0);", "while (groute_total > 0)",
        "groute_n = groute_run_level(", "groute_total = groute_meet(groute_r, groute_n, "
        "groute_level - groute_level0);", "++groute_level;")]
    assert order == sorted(order)
    # a visitor sends what it does not own, and visits what it owns by its local position
    assert "accept((int)(v - first), groute_m);" in text
    assert "groute_send<true>(*inbox, parity, pctl, v, groute_m);" in text
    assert "groute_send<false>(*inbox, parity, pctl, v, (groute_msg_t_0)0);" in text
    one = source(steps, "d", "test")
    assert "groute_meet" not in one and "inbox" not in one and "accept(v);" in one


@pytest.mark.timeout(320)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_fused_loops_on_several_devices_compile(tmp_path):
    """groute_loop_multi for a BFS level, compute, advance and filter in a level, messages of
    several types over out- and in-arcs, two advances in a level, gathering pushes and the
    apps' loops (k-core's peel, SCC's trims, colouring and claim)."""
    carry = Functor(name="carry", params="int* depth, int d", message=Message(
        "long long", cuda="(long long)depth[u]"), cuda="return m >= 0 && depth[v] < 0;")
    loops = [([AdvanceStep(CLAIM)], "d"),
             ([ComputeStep(MARK), AdvanceStep(CLAIM), FilterStep(EVEN)], "d"),
             ([AdvanceStep(LOWER)], None), ([AdvanceStep(LOWER, over="in")], None),
             ([FilterStep(EVEN), AdvanceStep(carry, over="in"), AdvanceStep(CLAIM)], "d"),
             ([AdvanceStep(SIGMA, "push")], "d"),
             ([AdvanceStep(_lower("min"), "push", over="in"), AdvanceStep(BOUNCE)], None),
             *[(steps, None) for steps in _app_loops().values()]]
    done = compile_sources([multi_source(steps, level, "test") for steps, level in loops],
                           ["groute_loop_multi"], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = Path(tmp_path / "loops.ptx").read_text()
    assert ptx.count(".entry") == len(loops)
    assert "atom.add.sys" in ptx or "atom.sys.add" in ptx or "atom.global.sys.add" in ptx


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
        res = groute.core_number(G, backend="cuda", devices=k, engine=engine,
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


def test_inboxes_that_would_not_fit_send_the_loop_to_the_operator_calls():
    """The inboxes' bytes (two per device, each an int32 id and the message's words per arc
    crossing into the device) against the devices' free memory: a loop fuses on several
    devices only where they fit, and where inboxes made for an earlier loop already hold it."""
    from groute.engines.fused_multi import MultiFusedLoops
    multi = MultiFusedLoops.__new__(MultiFusedLoops)
    multi._inboxes = None
    multi._matrix = np.array([[0, 1000], [3000, 0]], np.int64)   # arcs from rows i to j's ids
    # device 0 receives 3,000 items: two inboxes of ids and one-word messages = 48,000 bytes
    lower = [AdvanceStep(LOWER)]
    multi.devices = [_StubGPU("cuda:0", 48_000), _StubGPU("cuda:1", 48_000)]
    assert multi.inboxes_fit(lower)
    multi.devices = [_StubGPU("cuda:0", 47_999), _StubGPU("cuda:1", 1 << 30)]
    assert not multi.inboxes_fit(lower)
    assert multi.inboxes_fit([AdvanceStep(CLAIM)])          # ids only: 24,000 bytes
    facts = dict(levels_on_host=False, cuda=True, one_device=False, kept=False, pulls=False,
                 peer_writes=True, inboxes_fit=False)
    assert decide_loop(facts)[0] == "python"
