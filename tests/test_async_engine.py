"""The async engine (groute.engines.AsyncEngine): order-free loops (run_loop(order="any")) run
without levels give the answers of NetworkX and of the BSP engine on random graphs (directed
and undirected, isolated vertices) on 1-4 devices, with steps after a remote advance, over
in-arcs and in small chunks; they end on empty frontiers and single devices; the rules that
pick the engine and the loop; the errors of a loop forced async that cannot be; the Router's
counts of the ids moved; k-core through the engine and the command."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

import groute
from groute.cli import main
from groute.engines import (ASYNC_LOOP_RULE, ENGINE_RULE, AsyncEngine, BSPEngine,
                            async_loop_help, engine_rule_help, make_engine)
from groute.graph import CSRGraph, load_graph
from groute.operators import (AdvanceStep, ComputeStep, FilterStep, Functor, Gather, Message,
                              run_loop)
from groute.tuning import AsyncTuning, BSPTuning
from support import CLAIM_ONCE, device_cases, operator_doc_blocks


def _take_min(s, v, m):
    before = s["label"][v].copy()
    np.minimum.at(s["label"], v, m)
    return v[s["label"][v] < before]


#: label propagation: a vertex takes the least label arriving along an arc (monotone, accepts
#: only on improvement: order-free)
LOWER = Functor(name="lower_label", params="int* label",
                message=Message("int", cuda="label[u]", numpy=lambda s, u: s["label"][u]),
                cuda="return atomicMin(&label[v], m) > m;", numpy=_take_min)


def _count(s, v):
    np.add.at(s["runs"], v, 1)


#: how often the steps after the advance ran on each vertex
COUNT = Functor(name="count", params="int* runs", cuda="runs[v] += 1;", numpy=_count)
#: an open vertex passes its claim on; a blocked one is reached but stops there
OPEN = Functor(name="open", params="const int* blocked", cuda="return blocked[v] == 0;",
               numpy=lambda s, v: s["blocked"][v] == 0)


def random_graph(n, m, seed, directed):
    """A CSRGraph with its last 10 vertices isolated, and the NetworkX graph of it."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(src.tolist(), dst.tolist()))
    return load_graph(G), G


def engine(g, backend, k, timeout=30, **options):
    return make_engine(g, "async", backend=backend, devices=k, timeout=timeout, **options)


def propagate(eng, g, **loop):
    eng.state("label", np.int32, values=np.arange(g.num_vertices))
    result = run_loop(eng.all_vertices(), [AdvanceStep(LOWER)], **loop)
    return result, eng.gather("label")


def least_ancestor(G):
    """Each vertex's least id over itself and every vertex with a path to it."""
    if not G.is_directed():
        out = np.empty(G.number_of_nodes(), np.int64)
        for c in nx.connected_components(G):
            out[list(c)] = min(c)
        return out
    return np.array([min(nx.ancestors(G, v) | {v}) for v in range(G.number_of_nodes())])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
@pytest.mark.parametrize("directed", [False, True])
def test_label_propagation_matches_networkx_and_bsp(backend, k, directed):
    for seed in range(3):
        g, G = random_graph(300, 420, seed, directed)
        with engine(g, backend, k, loop="async") as eng:
            result, label = propagate(eng, g, order="any")
            assert eng.stats["loop"] == result.implementation == "async"
            assert not result.frontier and result.levels == max(eng.stats["async_chunks"])
        with make_engine(g, "bsp", backend=backend, devices=k, timeout=30) as bsp:
            _, by_levels = propagate(bsp, g)
        assert np.array_equal(label, least_ancestor(G))
        assert np.array_equal(label, by_levels)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([3]))
def test_the_router_counts_the_ids_moved_between_devices(backend, k):
    g, _ = random_graph(300, 900, 5, False)
    # insisting on async: on CUDA devices that write into each other's memory, auto runs the
    # loop as the fused launches, which route nothing through the Router
    with engine(g, backend, k, loop="async") as eng:
        propagate(eng, g, order="any")
        routed = np.array(eng.stats["routed_ids"])
        assert routed.shape == (k, k) and not np.diag(routed).any()
        assert (routed.sum() - np.trace(routed)) > 0
        # every id a device sent went through the Router to its owner
        assert routed.sum() == eng.stats["exchanged_ids"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 4]))
@pytest.mark.parametrize("over", ["out", "in"])
def test_steps_after_an_advance_run_where_the_target_lives(backend, k, over):
    """[advance, filter, compute]: targets another device owns continue at the filter on
    their owner; the claim accepts each vertex once, so the compute runs once on each."""
    g, G = random_graph(300, 700, 9, True)
    blocked = (np.arange(300) % 7 == 3).astype(np.int32)
    steps = [AdvanceStep(CLAIM_ONCE, over=over), FilterStep(OPEN), ComputeStep(COUNT)]
    answers = []
    for make in ("bsp", "async"):
        with make_engine(g, make, backend=backend, devices=k, timeout=30,
                         **({"loop": "async"} if make == "async" else {})) as eng:
            eng.state("reached", np.int32, 0)
            eng.state("runs", np.int32, 0)
            eng.state("blocked", np.int32, values=blocked)
            run_loop(eng.frontier([0, 1]), steps, order="any")
            answers.append((eng.gather("reached"), eng.gather("runs")))
    (reached, runs), (reached_bsp, runs_bsp) = answers[1], answers[0]
    # reference: reached through open vertices from 0 and 1, along arcs (or against them)
    H = G if over == "out" else G.reverse()
    want, todo = np.zeros(300, np.int32), [0, 1]
    while todo:
        u = todo.pop()
        for v in H.successors(u):
            if not want[v]:
                want[v] = 1
                if not blocked[v]:
                    todo.append(v)
    assert np.array_equal(reached, want) and np.array_equal(reached_bsp, want)
    assert np.array_equal(runs, runs_bsp)
    assert set(np.unique(runs)) <= {0, 1}


@pytest.mark.timeout(60)
def test_small_chunks_give_the_same_answer():
    g, G = random_graph(300, 420, 2, False)
    with engine(g, "cpu", 3, tuning=AsyncTuning(chunk=3)) as eng:
        _, label = propagate(eng, g, order="any")
        assert max(eng.stats["async_chunks"]) > 20
    assert np.array_equal(label, least_ancestor(G))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 2, 4])
def test_empty_frontiers_and_work_on_one_device_end(k):
    g, _ = random_graph(100, 200, 1, False)
    with engine(g, "cpu", k, loop="async") as eng:
        eng.state("label", np.int32, values=np.arange(100))
        result = run_loop(eng.frontier([]), [AdvanceStep(LOWER)], order="any")
        assert result.levels == 0 and not result.frontier
        assert eng.stats["loop"] == "async"
        # an isolated vertex: work on one device that sends nothing
        result = run_loop(eng.frontier([99]), [AdvanceStep(LOWER)], order="any")
        assert result.levels == 1 and eng.stats["exchanged_ids"] == 0
        assert np.array_equal(eng.gather("label"), np.arange(100))


def _gathered(s, v, m):
    s["label"][v] = np.minimum(s["label"][v], m)
    return v[:0]


GATHERING = Functor(name="gathering", params="int* label",
                    message=Message("int", cuda="label[u]", numpy=lambda s, u: s["label"][u]),
                    gather=Gather("min"), cuda="label[v] = min(label[v], m);",
                    numpy=_gathered)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, loop, why", [
    ("levels", dict(), "declare order='any'"),
    ("level scalar", dict(order="any", level="d"), "level number"),
    ("keep", dict(order="any", keep=True), "kept levels"),
    ("max_levels", dict(order="any", max_levels=3), "count of them"),
    ("pull", dict(order="any"), "a pull reads"),
    ("gather", dict(order="any"), "gathering step"),
])
def test_a_loop_forced_async_that_needs_levels_is_an_error(case, loop, why):
    g, _ = random_graph(60, 150, 4, False)
    with engine(g, "cpu", 2, loop="async") as eng:
        eng.state("label", np.int32, values=np.arange(60))
        eng.state("reached", np.int32, 0)
        eng.state("d", np.int32, 0)
        step = {"pull": AdvanceStep(CLAIM_ONCE, "pull"), "gather": AdvanceStep(GATHERING, "push"),
                "level scalar": AdvanceStep(Functor(
                    name="at_level", params="int* reached, int d",
                    cuda="return atomicCAS(&reached[v], 0, d + 1) == 0;",
                    numpy=lambda s, v: v[:0]))}.get(case, AdvanceStep(LOWER))
        with pytest.raises(ValueError, match=rf"loop='async' cannot run this loop.*{why}"):
            run_loop(eng.frontier([0]), [step], **loop)
    # the same loop on loop="auto" runs by levels and says why
    with engine(g, "cpu", 2) as eng:
        eng.state("label", np.int32, values=np.arange(60))
        eng.state("reached", np.int32, 0)
        run_loop(eng.frontier([0]), [step], **loop)
        assert eng.stats["loop"] == "python" and why in eng.stats["loop_why"]


@pytest.mark.timeout(60)
def test_the_rules_decide_and_their_help_says_so():
    g, _ = random_graph(60, 150, 4, False)
    assert ASYNC_LOOP_RULE.cases[-1] == ASYNC_LOOP_RULE.cases[-1].__class__(
        (), "async", ASYNC_LOOP_RULE.cases[-1].why)
    assert "levels where one device" in async_loop_help()
    assert "fused where CUDA devices and one device" in async_loop_help()
    assert "bsp where one device" in engine_rule_help() == ENGINE_RULE.help()
    with make_engine(g, "auto", backend="cpu", devices=1) as eng:
        assert type(eng) is BSPEngine
    with make_engine(g, "auto", backend="cpu", devices=3, timeout=30) as eng:
        assert type(eng) is AsyncEngine
        _, label = propagate(eng, g, order="any")
        assert eng.stats["loop"] == "async"
        propagate(eng, g)                               # not declared order-free: levels
        assert eng.stats["loop"] == "python" and "order='any'" in eng.stats["loop_why"]
    with engine(g, "cpu", 1) as eng:                  # auto on one device: levels
        propagate(eng, g, order="any")
        assert eng.stats["loop"] == "python" and "one device" in eng.stats["loop_why"]
    with engine(g, "cpu", 2, loop="python") as eng:   # the BSP engine's loop option: never async
        propagate(eng, g, order="any")
        assert eng.stats["loop"] == "python"


def test_arguments_are_checked_by_name():
    g, _ = random_graph(60, 150, 4, False)
    with pytest.raises(ValueError, match="mode must be one of bsp, async, auto; got 'asink'"):
        make_engine(g, "asink", backend="cpu", devices=1)
    with pytest.raises(ValueError, match="loop must be one of auto, fused, python, async"):
        make_engine(g, "async", backend="cpu", devices=1, loop="later")
    with pytest.raises(TypeError, match="tuning must be a groute.tuning.AsyncTuning"):
        make_engine(g, "async", backend="cpu", devices=1, tuning=BSPTuning())
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        AsyncTuning(chunk=0)
    with engine(g, "cpu", 1) as eng:
        eng.state("label", np.int32, 0)
        with pytest.raises(ValueError, match="order must be one of levels, any; got 'free'"):
            run_loop(eng.all_vertices(), [AdvanceStep(LOWER)], order="free")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend, k", device_cases([1, 2, 3, 4]))
@pytest.mark.parametrize("directed", [False, True])
def test_kcore_on_the_async_engine_matches_networkx(backend, k, directed):
    for seed in range(3):
        g, G = random_graph(300, 1500, seed, directed)
        res = groute.core_number(G, backend=backend, devices=k, mode="async", loop="async",
                                 direction="push" if seed else "auto")
        assert res.to_dict() == nx.core_number(G)
        assert res.stats["loop"] == "async" and res.stats["engine"] == "async"


@pytest.mark.timeout(120)
def test_the_kcore_command_takes_the_mode(capsys):
    assert main(["kcore", "--graph", "grid:12", "--backend", "cpu", "--devices", "2",
                 "--mode", "auto", "--repeat", "1", "--json", "--verify"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["verify"]["ok"] and record["stats"]["engine"] == "async"
    assert record["stats"]["loop"] == "async" and record["max_core"] == 2


@pytest.mark.timeout(120)
def test_the_example_in_operators_md_runs():
    example = [b for b in operator_doc_blocks()
               if 'order="any"' in b and "connected_components" in b]
    assert len(example) == 1
    exec(compile(example[0], "OPERATORS.md (label propagation)", "exec"), {})


def _owned_by(eng, device):
    """1 on the vertices (input positions) ``device`` owns, else 0."""
    new = eng.partition.perm[np.arange(eng.num_vertices)]
    owner = np.searchsorted(np.asarray(eng.partition.offsets), new, "right") - 1
    return (owner == device).astype(np.int32)


def _fail_on_marked(s, v):
    if s["marked"][v].any():
        raise RuntimeError("boom on a marked vertex")


#: raises on a vertex marked in ``marked`` (the vertices one device owns)
FAIL = Functor(name="fail_on_marked", params="const int* marked", cuda="",
               numpy=_fail_on_marked)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make, k, failing", [("async", 2, 1), ("async", 3, 0), ("async", 3, 2),
                                              ("bsp", 3, 1)])
def test_a_failing_device_stops_the_loop_and_the_next_loop_runs(make, k, failing):
    """A functor that raises on one device's vertices, after an advance that keeps every
    device busy and sending: the loop raises promptly, a DeviceError naming that device and
    the original error, and the next loops on the same engine (through the Routers of the
    exchange, which the failure's stop ended) give the right answer, run without levels and
    by levels."""
    import time
    from groute import DeviceError
    g, G = random_graph(300, 900, 3, False)
    with make_engine(g, make, backend="cpu", devices=k, timeout=5) as eng:
        eng.state("marked", np.int32, values=_owned_by(eng, failing))
        eng.state("label", np.int32, values=np.arange(g.num_vertices))
        started = time.monotonic()
        with pytest.raises(DeviceError, match="boom on a marked vertex") as info:
            run_loop(eng.all_vertices(), [AdvanceStep(LOWER), ComputeStep(FAIL)], order="any")
        assert time.monotonic() - started < 4
        assert info.value.device == f"cpu:{failing}"
        assert isinstance(info.value.__cause__, RuntimeError)
        for order in ("any", "levels", "any"):
            _, label = propagate(eng, g, order=order)
            ran_async = make == "async" and order == "any"
            assert eng.stats["loop"] == ("async" if ran_async else "python")
            assert np.array_equal(label, least_ancestor(G))


def _slow_on_marked(s, v):
    import time
    time.sleep(0.05 * int(s["marked"][v].sum()))


#: a twentieth of a second per marked vertex
SLOW = Functor(name="slow_on_marked", params="const int* marked", cuda="",
               numpy=_slow_on_marked)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunk", [1, 1 << 16])
def test_an_idle_device_waits_out_a_healthy_loop_longer_than_the_timeout(chunk):
    """Device 1 runs out of work at once while device 0 works for about three timeouts, in
    many short chunks (each reports) or in one long one (it holds work all along): device 1
    keeps waiting, and the loop ends with the right answer."""
    G = nx.Graph()
    G.add_nodes_from(range(40))
    G.add_edges_from((v, v + 1) for v in range(0, 39, 2))
    g = load_graph(G)
    with engine(g, "cpu", 2, timeout=0.3, tuning=AsyncTuning(chunk=chunk)) as eng:
        marked = _owned_by(eng, 0)
        marked[np.flatnonzero(marked)[18:]] = 0                 # 18 vertices: 0.9 s
        eng.state("marked", np.int32, values=marked)
        eng.state("label", np.int32, values=np.arange(40))
        run_loop(eng.all_vertices(), [ComputeStep(SLOW), AdvanceStep(LOWER)], order="any")
        assert eng.stats["loop"] == "async"
        assert np.array_equal(eng.gather("label"), least_ancestor(G))


@pytest.mark.timeout(60)
def test_a_functor_slower_than_the_timeout_is_named_as_the_cause():
    """An async loop stalled by a slow user functor on one device: the error names the functor
    and its device (it named the idle device's wait for work, or a Link and 'release
    PendingSegments')."""
    import threading
    g = load_graph("grid:20", cache=False)
    ctx = groute.Context(2, backend="cpu", timeout=1)
    eng = make_engine(g, "async", ctx=ctx, partition="contiguous",   # vertex 0 on cpu:0
                      tuning=AsyncTuning(chunk=8))

    def slow_on_cpu1(s, v):
        if threading.current_thread().name == "groute-cpu:1-host":
            ctx.stop_event.wait(30)        # stuck until the failure stops the context
        return CLAIM_ONCE.numpy(s, v)
    slow = Functor(name="slow_claim", params="int* reached", cuda="return false;",
                   numpy=slow_on_cpu1)
    eng.state("reached", np.int32, 0)
    try:
        with pytest.raises(groute.DeviceError) as info:
            run_loop(eng.frontier([0]), [AdvanceStep(slow)], order="any")
        assert str(info.value).startswith("cpu:1: WaitTimeout: slow_claim's numpy callable in "
                                          "run_loop(async) has been running on cpu:1 for "), \
            str(info.value)
        assert "PendingSegments" not in str(info.value)
    finally:
        eng.close()
        ctx.close()
