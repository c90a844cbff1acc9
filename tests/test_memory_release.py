"""What a closed solver, Link or Router leaves behind: nothing, and without the garbage collector.

Python frees an object as soon as nothing refers to it, except where objects refer to each
other in a cycle: those wait for the garbage collector, which runs by counting Python
objects, not the bytes their arrays hold. A Router whose ports point back at it, a link that
keeps bound methods of its own, a listener that holds the engine that holds the router: each
would keep every receive buffer (device memory on GPUs) after ``close()`` until some later
collection. And a thread that keeps the last function it ran (a device's worker, a CPU
stream) keeps that function's arrays until its next one. Here, with the collector off, each
of these must give its memory back by itself, and leave no cycle for the collector to find.
"""
import contextlib
import gc
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest

from groute import Context, DeviceError, Link, Router, registry
from groute.errors import ContextStopped
from groute.graph import load_graph
from groute.runtime.policies import by_owner
from support import gpu_marks, need_gpus

#: every app and mode whose several-device path makes Routers, Links or worklists on CPUs
CASES = [("bfs", "bsp"), ("bfs", "async"), ("sssp", "bsp"), ("sssp", "async"), ("pr", "bsp"),
         ("pr", "async"), ("cc", None), ("kcore", None)]


@pytest.fixture
def collector_off():
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.enable()


@contextlib.contextmanager
def traced_from_here(k: int):
    """A context of ``k`` CPU devices and the traced bytes once it is made and the garbage
    before is collected: ``(ctx, base)``."""
    with Context(k, backend="cpu", timeout=10) as ctx:
        gc.collect()
        yield ctx, tracemalloc.get_traced_memory()[0]


#: what may stay traced after a run: the interpreter's and NumPy's small caches
LIMIT = 64 << 10


def groute_cycles() -> list[str]:
    """The groute classes in the cycles a collection finds (the collector is off until then).
    It saves what it finds instead of freeing it, so what the cycles hold is still traced
    after it; the collection empties the interpreter's free lists, which are not."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage
                       if type(o).__module__.startswith("groute")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def settle(base, seconds=5.0) -> tuple[int, list[str]]:
    """``(traced bytes above base, groute classes in cycles)``, read after
    :func:`groute_cycles`, and again until at most :data:`LIMIT` or ``seconds`` have passed
    (a link ends on its pump's thread just after it is closed)."""
    deadline = time.monotonic() + seconds
    while True:
        cycles = groute_cycles()
        held = tracemalloc.get_traced_memory()[0] - base
        if held <= LIMIT or time.monotonic() > deadline:
            return held, cycles
        time.sleep(0.01)


def assert_given_back(base, what: str) -> None:
    """Nothing above ``base`` but :data:`LIMIT` once settled (:func:`settle`), and no groute
    object in a cycle; ``what`` names the drop for the message."""
    held, cycles = settle(base)
    assert held <= LIMIT, f"{held:,} bytes held after {what}"
    assert cycles == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("app,mode", CASES)
def test_a_closed_solver_gives_its_memory_back_without_the_collector(app, mode, k,
                                                                      collector_off):
    graph = load_graph("kron:10", cache=False)
    cls = registry.algorithm_named(app).solver
    args = (0,) if app in ("bfs", "sssp") else ()
    with Context(k, backend="cpu", timeout=30) as ctx:
        options = {"ctx": ctx} | ({"mode": mode} if mode else {})
        with cls(graph, **options) as first:    # what is made once (kernels, caches)
            first.run(*args)
        del first
        gc.collect()        # what the context and the first solver left: not this test's
        base = tracemalloc.get_traced_memory()[0]
        solver = cls(graph, **options)
        result = solver.run(*args)
        made = tracemalloc.get_traced_memory()[0] - base
        solver.close()
        del solver, result
        held, cycles = settle(base)
        assert held <= LIMIT, (f"{app} {mode} on {k} devices holds {held:,} of the {made:,} "
                               f"bytes it made after close() and del")
        assert cycles == []


def pool_bytes() -> int:
    """CuPy's default pool's bytes in live arrays, over every GPU."""
    import cupy
    pool, total = cupy.get_default_memory_pool(), 0
    for i in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(i):
            total += pool.used_bytes()
    return total


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k)) for k in (1, 2)])
@pytest.mark.parametrize("app,mode", CASES)
def test_on_gpus_a_closed_solver_leaves_nothing_in_the_pool(app, mode, k):
    """The same on CUDA devices, read from CuPy's pool: the graph's and the runs' device
    arrays, the persistent kernels' control blocks, the fused loops' inboxes."""
    need_gpus(k)
    graph = load_graph("kron:12", cache=False)
    cls = registry.algorithm_named(app).solver
    args = (0,) if app in ("bfs", "sssp") else ()
    with Context(k, backend="cuda", timeout=60) as ctx:
        options = {"ctx": ctx} | ({"mode": mode} if mode else {})
        with cls(graph, **options) as first:
            first.run(*args)
        del first
        gc.collect()
        gc.disable()
        try:
            base = pool_bytes()
            solver = cls(graph, **options)
            result = solver.run(*args)
            made = pool_bytes() - base
            solver.close()
            del solver, result
            deadline = time.monotonic() + 5
            while pool_bytes() > base and time.monotonic() < deadline:
                time.sleep(0.01)
            held = pool_bytes() - base
            assert held <= 0, (f"{app} {mode} on {k} GPUs holds {held:,} of the {made:,} "
                               f"bytes it made after close() and del")
            assert groute_cycles() == []
        finally:
            gc.enable()


@pytest.mark.timeout(60)
def test_a_dropped_router_frees_its_receive_buffers_without_the_collector(collector_off):
    with traced_from_here(2) as (ctx, base):
        a, b = ctx.devices
        router = Router([a, b], [a, b], by_owner, packet_size=1 << 16, num_buffers=4, ctx=ctx)
        for i in range(2):
            router.inputs[i].send(ctx.devices[i].asarray(np.arange(1 << 17, dtype=np.int32)),
                                  metadata={"owner": 1 - i})
        router.close()
        got = 0
        for output in router.outputs:
            while (pending := output.receive()) is not None:
                got += int(pending.wait().data.shape[0])
                pending.release()
        assert got == 2 << 17
        assert router.join(timeout=5)
        del router, output, pending
        assert_given_back(base, "the router's drop")


@pytest.mark.timeout(60)
def test_a_dropped_link_and_its_segments_free_their_buffers_without_the_collector(
        collector_off):
    with traced_from_here(2) as (ctx, base):
        a, b = ctx.devices
        link = Link(a, b, packet_size=1 << 16, num_buffers=4, ctx=ctx)
        link.send(a.asarray(np.arange(1 << 17, dtype=np.int32)))
        link.close()
        kept = list(link)                               # the receiver keeps its segments
        for pending in kept:
            pending.wait()
        assert len(kept) == 2 and link.join(timeout=5)
        del link
        assert tracemalloc.get_traced_memory()[0] - base >= 1 << 20   # the views hold them
        for pending in kept:
            pending.release()                           # a release after the link's drop
        del kept, pending
        assert_given_back(base, "the link's drop")


@pytest.mark.timeout(60)
def test_pbf_lets_go_of_its_input_once_it_returns(collector_off):
    """The host's segments go through a Router; its last copies' sources (views of the whole
    input) must not wait on the stream for a next send that never comes."""
    from groute.apps.pbf import pbf
    with Context(2, backend="cpu", timeout=10) as ctx:
        pbf(np.arange(1 << 12, dtype=np.int32), ctx=ctx)         # what is made once
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        data = np.arange(1 << 20, dtype=np.int32)                 # 4 MiB
        for device in ctx.devices:      # slow streams: the last copies outlast the links
            device.delay = 0.02
        result = pbf(data, ctx=ctx)
        del data, result
        assert_given_back(base, "pbf returned")


@pytest.mark.timeout(60)
def test_a_dropped_device_link_frees_its_ring_without_the_collector(collector_off):
    with traced_from_here(2) as (ctx, base):
        a, b = ctx.devices
        link = Link(a, b, packet_size=1 << 14, num_buffers=8, ctx=ctx, initiated="device")
        made = tracemalloc.get_traced_memory()[0] - base
        assert made >= 8 << 14
        sender, receiver = link.tx, link.rx     # the ends keep the link, not the other way
        link.close()
        del link, sender, receiver
        held, cycles = settle(base)
        assert held <= LIMIT, f"{held:,} of {made:,} bytes held after the device link's drop"
        assert cycles == []


@pytest.mark.timeout(30)
def test_the_device_threads_and_streams_let_go_of_what_they_ran(collector_off):
    with Context(1, backend="cpu", timeout=10) as ctx:
        device = ctx.devices[0]
        result = ctx.submit(0, lambda device: np.ones(1 << 16)).result()
        gone = weakref.ref(result)
        del result      # the thread lets go as it hands the result over: at most just after
        assert gone_soon(gone), "the device's worker thread still holds its last result"
        data = np.ones(1 << 16)
        gone = weakref.ref(data)
        stream = device.compute_stream
        stream.submit(np.sum, data)
        stream.synchronize()
        del data
        assert gone_soon(gone), "the stream's thread still holds its last operation's array"


def gone_soon(ref, seconds=2.0) -> bool:
    """Whether the weakly referred object is gone, waited for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    return ref() is None


def test_a_split_graph_goes_with_its_last_user():
    """The splits made of a graph are kept for its next solver, and go with it: a table
    keyed by the graph whose entries (each split refers to its graph) kept it for good."""
    from groute.graph.partition import partition_graph
    graph = load_graph("kron:8", cache=False)
    first = partition_graph(graph, 2, "contiguous")
    assert partition_graph(graph, 2, "contiguous") is first      # kept for the next solver
    gone = weakref.ref(graph)
    del graph, first
    gc.collect()
    assert gone() is None


def carried_to_the_end(ctx, n: int) -> Link:
    """A Link from the context's first device to its second that carried ``n`` int32s in
    packets of 1 KiB, closed, drained and ended."""
    a, b = ctx.devices[:2]
    link = Link(a, b, packet_size=1 << 8, num_buffers=2, ctx=ctx)
    link.send(a.asarray(np.arange(n, dtype=np.int32)))
    link.close()
    for pending in link:
        pending.wait()
        pending.release()
    assert link.join(timeout=10)
    return link


@pytest.mark.timeout(60)
def test_a_link_that_wakes_its_ended_pump_is_not_kept_by_it(collector_off):
    """A close or a release can race the pump's last turn: the pump ends the drained link
    and returns, then the link's own wake arrives. The ended pump must not keep the link
    (the two would refer to each other, buffers and all, until a collection)."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        link = carried_to_the_end(ctx, 1 << 10)
        pump = link._pump
        pump.thread.join(5)
        assert not pump.thread.is_alive()
        link.close()            # the late wake, made certain
        gone = weakref.ref(link)
        del link, pump
        assert gone() is None, "the ended pump keeps the link that woke it"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=gpu_marks(2))])
def test_a_closed_context_goes_with_its_last_user(backend, collector_off):
    """The context holds its devices, each device its streams, and a stream the events its
    links recorded (kept for reuse): the way back (a device's failure report to its context,
    a stream's or an event's device, a device's siblings) is weak, so a closed context and its
    devices go when dropped, not at some later collection (which would also free a context
    that an earlier run let go of in the middle of a later one)."""
    if backend == "cuda":
        need_gpus(2)
    with Context(2, backend=backend, timeout=30) as ctx:
        ctx.run(lambda device: device.asarray(np.ones(4)))
        carried_to_the_end(ctx, 1 << 12)
    gone = [weakref.ref(ctx)] + [weakref.ref(d) for d in ctx.devices]
    del ctx
    assert all(gone_soon(ref) for ref in gone), "a closed context is kept after its drop"
    assert groute_cycles() == []


def a_device_function_raises(ctx):
    def boom(device):
        if device.index == 0:
            raise ValueError("boom")
        device.compute_stream.synchronize()
    with pytest.raises(DeviceError, match="boom"):
        ctx.run(boom)


def a_stream_operation_raises(ctx):
    def boom():
        raise ValueError("boom")

    def run(device):
        device.compute_stream.submit(boom)
        device.compute_stream.synchronize()
    with pytest.raises(DeviceError, match="boom"):
        ctx.run(run)


def a_link_stops_with_packets_not_taken(ctx):
    a, b = ctx.devices
    link = Link(a, b, packet_size=16, num_buffers=4, ctx=ctx)
    link.send(a.asarray(np.arange(64, dtype=np.int32)))    # 4 packets arrive, none is taken
    deadline = time.monotonic() + 5
    while link.stats["packets"] < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    ctx.fail("cpu:0", ValueError("stop"))
    assert link.join(timeout=5)


def a_stopped_link_is_asked_again(ctx):
    a, b = ctx.devices
    link = Link(a, b, packet_size=16, num_buffers=4, ctx=ctx)
    link.send(a.asarray(np.arange(128, dtype=np.int32)))   # 8 packets, 4 buffers: sends wait
    ctx.fail("cpu:0", ValueError("stop"))
    assert link.join(timeout=5)
    for _ in range(2):                                      # its kept error, raised each time
        with pytest.raises(ContextStopped):
            link.send(a.asarray(np.arange(4, dtype=np.int32)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("failure", [a_device_function_raises, a_stream_operation_raises,
                                     a_link_stops_with_packets_not_taken,
                                     a_stopped_link_is_asked_again])
def test_after_a_failure_the_closed_context_goes_with_its_last_user(failure, collector_off):
    """A failure's traceback holds the frames it passed through, and they hold the device
    function's device, the link, the context: whatever keeps the error (the context, the stop
    flag, a failed stream, a stopped link) must not be reachable from those frames, or the
    two keep each other, buffers and devices with them, until a collection. A link's kept
    error is raised as a fresh copy each time (each raise would add its frames)."""
    before = set(threading.enumerate())
    ctx = Context(2, backend="cpu", timeout=10)
    try:
        failure(ctx)
    finally:
        ctx.shutdown()
    gone = [weakref.ref(ctx)] + [weakref.ref(d) for d in ctx.devices]
    del ctx
    assert all(gone_soon(ref) for ref in gone), "a context that failed is kept after its drop"
    for thread in set(threading.enumerate()) - before:    # their frames are garbage after
        thread.join(5)
    assert groute_cycles() == []
