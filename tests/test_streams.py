"""The public read paths of one GPU read what the kernels wrote, and the kernels read what the
set-up wrote, on a busy GPU: a slow kernel queued ahead on the device's compute stream, or on
CuPy's default stream (:func:`support.spin`), before each step. CuPy work that groute left on
the default stream would then run before, or after, the compute stream's kernels (the race
that 4 test processes sharing one GPU showed); :meth:`groute.device.base.Device.on_compute`
keeps it on the compute stream. Every answer is compared with the CPU backend's."""
from __future__ import annotations

import numpy as np
import pytest

from groute import Context
from groute.apps.bfs import BFS
from groute.apps.cc import CC
from groute.apps.pr import PageRank
from groute.engines import make_engine
from groute.graph import CSRGraph, reference
from groute.operators import Functor, advance, compute, filter, keyed, reduce
from support import spin

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(180)]

#: which stream the slow kernel holds up
BUSY = ["compute", "default"]


def random_graph(n=3000, m=15000, seed=5):
    """Undirected, the last 50 vertices isolated."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n - 50, m), rng.integers(0, n - 50, m)
    keep = src != dst
    src, dst = np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]]
    return CSRGraph.from_edges(src, dst, n, directed=False, name="random")


def _mod7(s, v):
    s["value"][v] = v % 7


#: each vertex's value, its local position modulo 7
MOD7 = Functor(name="streams_mod7", params="int* value", cuda="value[v] = v % 7;", numpy=_mod7)
#: keeps the vertices whose value is above t
ABOVE = Functor(name="streams_above", params="const int* value, int t",
                cuda="return value[v] > t;", numpy=lambda s, v: s["value"][v] > s["t"])


def _count_hits(s, v):
    np.add.at(s["hits"], v, 1)
    return v


#: counts the arcs that reach each vertex; every reached vertex joins
COUNT_HITS = Functor(name="streams_count_hits", params="int* hits",
                     cuda="atomicAdd(&hits[v], 1); return true;", numpy=_count_hits)


def on_both(run):
    """``run(engine, busy)`` on one GPU, with ``busy(stream)`` queuing a slow kernel there, and
    on one CPU device (``busy`` doing nothing): both answers."""
    g = random_graph()
    answers = {}
    for backend in ("cuda", "cpu"):
        with Context(1, backend=backend, timeout=60) as ctx, \
                make_engine(g, "bsp", ctx=ctx) as eng:
            device = ctx.devices[0]
            busy = (lambda stream: spin(device, stream)) if backend == "cuda" else \
                (lambda stream: None)
            answers[backend] = run(eng, busy)
    return answers["cuda"], answers["cpu"]


def same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("stream", BUSY)
def test_engine_steps_states_and_frontiers(stream):
    """A fill, a compute, a filter, a push advance, a reduce: their state read through
    ``engine.gather`` and their frontiers through ``Frontier.vertices``."""
    def run(eng, busy):
        chosen = eng.frontier(np.arange(0, eng.num_vertices, 11))
        busy(stream)
        eng.state("value", np.int32, -1)
        eng.state("hits", np.int32, 0)
        compute(eng.all_vertices(), MOD7)
        above = filter(eng.all_vertices(), ABOVE, t=3)
        reached = advance(chosen, COUNT_HITS, "push")
        total = reduce(above, "value")
        busy(stream)
        return (eng.gather("value"), above.vertices(), eng.gather("hits"), reached.vertices(),
                [total])
    same(*on_both(run))


@pytest.mark.parametrize("stream", BUSY)
def test_keyed_tables_and_choices(stream):
    """A table written by ``keyed.share``, totals by ``keyed.key_totals``, sums by
    ``keyed.arc_sums`` and the choices of ``keyed.best_key``: the tables read on the device's
    host copy, the states through ``engine.gather``."""
    def run(eng, busy):
        n = eng.num_vertices
        eng.state("team", np.int32, values=np.arange(n) % 5)
        keyed.arc_state(eng, "w", 1.0 + (np.arange(eng.num_arcs) % 3))
        busy(stream)
        eng.out_degree_state("degree", np.int64)
        eng.state("best", np.int32, -1)
        eng.state("weight", np.float64, 0.0)
        everyone = eng.all_vertices()
        keyed.share(everyone, "team", into="team_of")
        keyed.key_totals(everyone, "degree", "team", into="sizes", num_keys=5)
        keyed.arc_sums(everyone, weight="w", into="weight")
        moved = keyed.best_key(everyone, "team_of", own="team", into="best", weight="w")
        busy(stream)
        part = eng.parts[0]
        return (part.device.to_host(part.state["sizes"]), part.device.to_host(
            part.state["team_of"]), eng.gather("best"), eng.gather("weight"), moved.vertices())
    same(*on_both(run))


@pytest.mark.parametrize("stream", BUSY)
def test_solvers_answers(stream):
    """BFS (the relaxation's workers), PageRank (the iteration's) and CC (the components'),
    each built and run behind a slow kernel; BFS's answer also as kept on the device."""
    g = random_graph()
    with Context(1, backend="cuda", timeout=60) as ctx:
        device = ctx.devices[0]
        spin(device, stream)
        with BFS(g, ctx=ctx) as solver:
            spin(device, stream)
            depths = solver.run(0)
        np.testing.assert_array_equal(depths.values, reference.bfs(g, 0))
        np.testing.assert_array_equal(depths.to_cupy().get(), depths.values)
        spin(device, stream)
        with PageRank(g, ctx=ctx, tol=1e-8) as solver:
            spin(device, stream)
            ranks = solver.run()
        l1, _ = reference.pagerank_error(ranks.values, reference.pagerank(g, tol=1e-12))
        assert l1 <= 1e-4       # float32 sums: about 1e-5 when right
        spin(device, stream)
        with CC(g, ctx=ctx) as solver:
            spin(device, stream)
            labels = solver.run()
        assert reference.compare_labels(labels.values, reference.connected_components(g))


def test_synchronize_waits_for_a_busy_stream_and_asks_an_idle_one():
    """``Context.synchronize`` returns at once when every stream says it is idle, and waits
    for a kernel still running on one: the answer written after the slow kernel is there.
    The stream's answer agrees with an event recorded on it at the same time."""
    import cupy
    with Context(1, backend="cuda", timeout=60) as ctx:
        device = ctx.devices[0]
        with device.on_compute():   # on the compute stream: the default one would race it
            out = cupy.zeros(1, np.int32)
            out += 7                # compiled and loaded here, not behind the slow kernel
        ctx.synchronize()
        assert device.compute_stream.idle() and device.copy_stream.idle()
        spin(device, "compute", seconds=1.0)
        with device.on_compute():
            out += 7
        behind = device.compute_stream.record()
        assert not device.compute_stream.idle() and not behind.query()
        ctx.synchronize()
        assert device.compute_stream.idle() and behind.query()
        assert int(out.get()[0]) == 14
