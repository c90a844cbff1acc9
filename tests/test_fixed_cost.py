"""A one-shot call's fixed cost (issue 39): what a call on a small graph pays besides its run.
A call given no context leases a kept one (groute.runtime.kept), so a second call starts no
thread; a one-device BSP engine runs its steps on the caller's thread; a NetworkX graph's
conversion and a file's graph are kept for the next call until they change; the first call
imports neither NetworkX nor SciPy's csgraph. ``benchmarks/probes/gpu_fixed_cost.py`` measures the
same on GPUs."""
import subprocess
import sys
import threading

import networkx as nx
import numpy as np
import pytest

import groute
from groute.engines import make_engine
from groute.errors import DeviceError
from groute.graph import convert, load, load_graph
from groute.operators import Functor, compute
from groute.runtime import kept

pytestmark = pytest.mark.timeout(120)

CPU = dict(backend="cpu", devices=1)


@pytest.fixture
def fresh_kept():
    kept.shutdown_all()
    yield
    kept.shutdown_all()


def test_a_lease_reuses_the_kept_context(fresh_kept):
    ctx, release = kept.lease(backend="cpu", devices=2, timeout=17)
    release()
    release()                                   # idempotent
    again, release_again = kept.lease(backend="cpu", devices=2, timeout=17)
    assert again is ctx
    busy, release_busy = kept.lease(backend="cpu", devices=2, timeout=17)
    assert busy is not ctx                      # held: a context of its own, shut at release
    release_busy()
    assert busy._closed and not ctx._closed
    release_again()
    mine = groute.Context(1, backend="cpu")
    given, release_given = kept.lease(mine)
    assert given is mine
    release_given()
    assert not mine._closed                     # the caller's stays the caller's
    mine.shutdown()


def test_a_lease_never_gets_a_kept_context_retired_while_it_took_the_lock(fresh_kept):
    """Between finding the kept context and taking its lock, another thread may retire it (a
    failure stopped it, and that thread's lease replaced it): the lease then gets the new
    one, never the stopped one."""
    ctx, release = kept.lease(backend="cpu", devices=1, timeout=17)
    release()
    [key] = list(kept._kept)
    entry = kept._kept[key]

    class RetiredMeanwhile:
        """The kept context's lock, which another thread's failure beats to it once."""
        def __init__(self):
            self.lock, self.first = entry[1], True

        def acquire(self, blocking=True):
            if self.first:
                self.first = False
                ctx.fail("cpu:0", RuntimeError("another thread's run failed"))
            return self.lock.acquire(blocking)

        def release(self):
            self.lock.release()

    kept._kept[key] = (ctx, RetiredMeanwhile())
    got, release = kept.lease(backend="cpu", devices=1, timeout=17)
    assert got is not ctx and not got.stopped
    assert ctx._closed          # the retired one is shut down, not left with its threads
    release()


def test_a_kept_context_retired_while_leased_is_shut_down(fresh_kept):
    """Another thread retires the kept context (replacing it) while this lease holds its lock,
    so that retirement cannot shut it: the lease, finding it no longer kept, shuts it down
    rather than leaving its threads running."""
    ctx, release = kept.lease(backend="cpu", devices=1, timeout=17)
    release()
    [key] = list(kept._kept)
    real = kept._kept[key][1]

    class RetiredWhileHeld:
        def __init__(self):
            self.first = True

        def acquire(self, blocking=True):
            got = real.acquire(blocking)
            if self.first and got:      # the other thread, while this one holds the lock
                self.first = False
                ctx.fail("cpu:0", RuntimeError("another thread's run failed"))
                stale = kept._kept[key]
                kept._kept[key] = (groute.Context(1, backend="cpu", timeout=17), threading.Lock())
                kept._retire(stale)     # cannot take the lock: left to the holder
                assert not ctx._closed
            return got

        def release(self):
            real.release()

    kept._kept[key] = (ctx, RetiredWhileHeld())
    got, release = kept.lease(backend="cpu", devices=1, timeout=17)
    assert got is not ctx and ctx._closed
    release()


def test_a_stopped_or_shut_kept_context_is_replaced(fresh_kept):
    ctx, release = kept.lease(backend="cpu", devices=1, timeout=17)
    ctx.fail("cpu:0", RuntimeError("simulated"))
    release()
    assert ctx._closed
    other, release = kept.lease(backend="cpu", devices=1, timeout=17)
    assert other is not ctx and not other.stopped
    release()
    other.shutdown()                            # its user shut it: the next lease replaces it
    third, release = kept.lease(backend="cpu", devices=1, timeout=17)
    assert third is not other and not third._closed
    release()


def test_shutting_the_kept_contexts_down_passes_one_that_is_stuck(fresh_kept):
    """A kept context whose device function ignores the stop fails its shutdown (WaitTimeout,
    naming the device); the kept contexts after it are shut down all the same, and at exit the
    failure is logged, not raised into a traceback."""
    import time
    stuck, release = kept.lease(backend="cpu", devices=1, timeout=0.2)
    started = threading.Event()
    stuck.submit(0, lambda device: (started.set(), time.sleep(1.5)))
    assert started.wait(10)
    release()
    other, release = kept.lease(backend="cpu", devices=2, timeout=17)
    release()
    with pytest.raises(groute.WaitTimeout, match="cpu:0"):
        kept.shutdown_all()
    assert stuck._closed and other._closed and not kept._kept
    code = ("import threading, time\nfrom groute.runtime import kept\n"
            "ctx, release = kept.lease(backend='cpu', devices=1, timeout=0.2)\n"
            "started = threading.Event()\n"
            "ctx.submit(0, lambda device: (started.set(), time.sleep(1)))\n"
            "started.wait(10)\nrelease()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "at exit, a kept context's shutdown: shutdown gave up" in done.stderr


def test_a_closed_solver_does_not_run(fresh_kept):
    """Its lease of the kept context is given back at close (another solver may hold it now):
    every solver refuses to run after its close, naming why."""
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.katz import Katz
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    g = load_graph(nx.karate_club_graph())
    for solver, args in ((BFS, (0,)), (SSSP, (0,)), (PageRank, ()), (CC, ()), (Katz, ())):
        with solver(g, **CPU) as s:
            s.run(*args)
        with pytest.raises(RuntimeError, match=f"{solver.__name__} is closed"):
            s.run(*args)


def _starts(monkeypatch):
    """A list that grows by one name per thread started from now on."""
    started = []
    start = threading.Thread.start

    def counting(self):
        started.append(self.name)
        return start(self)
    monkeypatch.setattr(threading.Thread, "start", counting)
    return started


@pytest.mark.parametrize("call", [
    lambda G: groute.bfs(G, 0, **CPU), lambda G: groute.pagerank(G, **CPU),
    lambda G: groute.connected_components(G, **CPU), lambda G: groute.core_number(G, **CPU),
    lambda G: groute.betweenness_centrality(G, **CPU)],
    ids=["bfs", "pagerank", "cc", "core_number", "betweenness"])
def test_a_second_call_starts_no_thread(call, monkeypatch):
    G = nx.karate_club_graph()
    call(G)
    started = _starts(monkeypatch)
    call(G)
    assert started == []


def test_one_device_steps_run_on_the_callers_thread_and_fail_as_on_a_device():
    where = []

    def visit(s, v):
        where.append(threading.current_thread())
        if s["fail"]:
            raise ZeroDivisionError("visit gave up")
    VISIT = Functor(name="where", params="int fail", cuda="", numpy=visit)
    with make_engine(nx.path_graph(4), "bsp", **CPU) as engine:
        compute(engine.all_vertices(), VISIT, fail=0)
        assert where == [threading.current_thread()]
        with pytest.raises(DeviceError, match="cpu:0: ZeroDivisionError: visit gave up") as exc:
            compute(engine.all_vertices(), VISIT, fail=1)
        assert isinstance(exc.value.__cause__, ZeroDivisionError)
        compute(engine.all_vertices(), VISIT, fail=0)     # the context runs again
        assert len(where) == 3


def test_a_networkx_graph_is_converted_once_until_it_changes(monkeypatch):
    conversions = []
    convert_now = convert.from_networkx
    monkeypatch.setattr(convert, "from_networkx",
                        lambda G, **kw: conversions.append(kw) or convert_now(G, **kw))
    G = nx.path_graph(5)
    assert groute.bfs(G, 0, **CPU).to_dict()[4] == 4
    assert groute.bfs(G, 0, **CPU).to_dict()[4] == 4
    assert len(conversions) == 1
    groute.sssp(G, 0, **CPU)                    # weight="weight": its own conversion
    assert len(conversions) == 2
    G.add_edge(0, 4)                            # NetworkX clears its cache: converted again
    assert groute.bfs(G, 0, **CPU).to_dict()[4] == 1
    assert len(conversions) == 3
    with nx.config(cache_converted_graphs=False):
        groute.bfs(G, 0, **CPU)
        groute.bfs(G, 0, **CPU)
    assert len(conversions) == 5


def test_a_file_is_read_once_per_process_until_it_changes(tmp_path, monkeypatch):
    reads = []
    read_now = load._read_file
    monkeypatch.setattr(load, "_read_file",
                        lambda *a, **kw: reads.append(a) or read_now(*a, **kw))
    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 3\n")
    first = load_graph(path)
    assert load_graph(path) is first and len(reads) == 1
    assert load_graph(path, symmetric=True) is not first and len(reads) == 2
    path.write_text("1 2\n2 3\n3 4\n")
    assert load_graph(path).num_edges == 3 and len(reads) == 3
    monkeypatch.setattr(load, "RECENT_FILE_BYTES", 8)       # too big to keep
    big = tmp_path / "big.txt"
    big.write_text("1 2\n2 3\n")
    assert load_graph(big) is not load_graph(big)


def test_a_first_call_imports_neither_networkx_nor_csgraph():
    script = ("import sys, numpy as np, groute\n"
              "groute.bfs((np.array([0, 1]), np.array([1, 2])), 0, backend='cpu', devices=1)\n"
              "print(sorted(m for m in ('networkx', 'scipy.sparse.csgraph') "
              "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_shared_arrays_of_a_kept_graph_are_not_changed_by_a_run():
    """A graph kept for the next call is shared by the calls: a run must not change it."""
    G = nx.gnp_random_graph(40, 0.1, seed=3, directed=True)
    g = convert.cached_from_networkx(G, weight=None)
    before = (g.indptr.copy(), g.indices.copy())
    for call in (groute.bfs, groute.sssp):
        call(G, 0, **CPU)
    groute.pagerank(G, weight=None, **CPU)
    groute.strongly_connected_components(G, **CPU)
    assert convert.cached_from_networkx(G, weight=None) is g
    assert np.array_equal(g.indptr, before[0]) and np.array_equal(g.indices, before[1])


def test_a_failed_clean_up_still_ends_the_lease():
    """A solver whose own clean-up raises still hands its kept context back, so the next call
    gets the kept one (not a private context for ever after)."""
    import pytest as _pytest
    from groute.apps.bfs import BFS
    from groute.graph import load_graph
    g = load_graph("grid:5")
    solver = BFS(g, backend="cpu", devices=1, timeout=17)
    kept_ctx = solver.ctx

    def broken():
        raise RuntimeError("clean-up failed")
    solver._release = broken
    with _pytest.raises(RuntimeError, match="clean-up failed"):
        solver.close()
    again = BFS(g, backend="cpu", devices=1, timeout=17)
    try:
        assert again.ctx is kept_ctx
    finally:
        again.close()
