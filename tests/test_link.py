"""Link: packet splitting at every boundary, order, back-pressure, concurrency, close in flight."""
import contextlib
import threading
import time

import numpy as np
import pytest

from groute import (HOST, Context, ContextStopped, DeviceError, Link, LinkClosed, Router,
                    WaitTimeout, broadcast, first_available)
from groute.runtime import link as link_module
from groute.waiting import wait_for
from support import backends, context_or_skip


@pytest.fixture(params=backends(min_gpus=2))
def ctx(request):
    c = context_or_skip(request.param, 2, timeout=10)
    yield c
    c.shutdown()


def _src(ctx, host_array, endpoint):
    return host_array if endpoint is HOST else endpoint.asarray(host_array)


@contextlib.contextmanager
def cpu_link(packet_size, num_buffers, timeout=10):
    """A Link between two CPU virtual devices, for the tests that need CPU devices (they block a
    stream, stop the context or time out on purpose); yields ``(ctx, link)``."""
    with Context(2, backend="cpu", timeout=timeout) as ctx:
        a, b = ctx.devices
        yield ctx, Link(a, b, packet_size=packet_size, num_buffers=num_buffers, ctx=ctx)


@contextlib.contextmanager
def pump_off(link):
    """The pump leaves ``link`` alone inside the block (its visits would issue what the tests
    check the link's callers issue); on leaving, it serves it again."""
    link._pump_turn = lambda: False
    try:
        yield
    finally:
        del link._pump_turn
        link._pump.wake(link)


def _host_copy(data):
    """A NumPy copy of a received packet's data (CuPy or NumPy), kept after its buffer is released."""
    return np.asarray(data.get() if hasattr(data, "get") else data).copy()


def _drain(link, n_expected_packets=None):
    out, metas = [], []
    while True:
        p = link.receive(timeout=5)
        if p is None:
            break
        data = p.wait().data
        dev = p.metadata
        out.append(_host_copy(data))
        metas.append(dev)
        p.release()
    return out, metas


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n,packet,expected", [(0, 4, 0), (1, 4, 1), (8, 4, 2), (9, 4, 3), (4, 4, 1), (3, 1, 3)])
@pytest.mark.parametrize("route", ["d2d", "h2d", "d2h"])
def test_packet_boundaries(ctx, n, packet, expected, route):
    a, b = ctx.devices
    src, dst = {"d2d": (a, b), "h2d": (HOST, b), "d2h": (a, HOST)}[route]
    link = Link(src, dst, packet_size=packet, num_buffers=2, ctx=ctx)
    host = np.arange(n, dtype=np.int32) * 7 - 3
    handle = link.send(_src(ctx, host, src))
    link.close()
    parts, metas = _drain(link)
    assert len(parts) == expected
    assert [len(p) for p in parts] == [min(packet, n - i * packet) for i in range(expected)]
    got = np.concatenate(parts) if parts else np.empty(0, np.int32)
    np.testing.assert_array_equal(got, host)
    if expected:
        assert metas[-1]["last"] and all(not m["last"] for m in metas[:-1])
        assert [m["offset"] for m in metas] == list(range(0, n, packet))
    handle.wait(timeout=5)
    assert handle.done()


@pytest.mark.timeout(60)
def test_order_kept_across_many_sends(ctx):
    a, b = ctx.devices
    link = Link(a, b, packet_size=5, num_buffers=3, ctx=ctx)
    sent = [np.arange(i, i + 1 + i % 7, dtype=np.int32) for i in range(40)]
    for s in sent:
        link.send(a.asarray(s), metadata={"id": len(s)})
    link.close()
    parts, _ = _drain(link)
    np.testing.assert_array_equal(np.concatenate(parts), np.concatenate(sent))


@pytest.mark.timeout(60)
def test_back_pressure_blocks_until_release():
    with cpu_link(packet_size=2, num_buffers=2) as (ctx, link):
        handle = link.send(np.arange(8, dtype=np.int32))  # 4 packets, only 2 buffers
        held = [link.receive(timeout=5), link.receive(timeout=5)]
        time.sleep(0.2)
        assert link.poll() is None, "a third packet arrived although both buffers are held"
        assert not handle.done()
        assert not link.has_room()
        held[0].wait()
        held[0].release()
        third = link.receive(timeout=5)
        np.testing.assert_array_equal(third.wait().data, [4, 5])
        for p in held[1:] + [third]:
            p.release()
        fourth = link.receive(timeout=5)
        np.testing.assert_array_equal(fourth.wait().data, [6, 7])
        fourth.release()
        handle.wait(timeout=5)


@pytest.mark.timeout(60)
def test_copy_is_asynchronous():
    """The copy has not happened while the copying stream is still busy with earlier work."""
    with cpu_link(packet_size=4, num_buffers=1) as (ctx, link):
        gate = threading.Event()
        link.stream.submit(gate.wait, 5)
        link.send(np.arange(4, dtype=np.int32))
        pending = link.receive(timeout=5)
        assert not pending.ready()
        gate.set()
        np.testing.assert_array_equal(pending.wait(timeout=5).data, np.arange(4))
        assert pending.ready()
        pending.release()


@pytest.mark.timeout(60)
def test_receiver_never_releasing_times_out_with_a_clear_message():
    """The link's own timeout (0.5 s), not the receive's (5 s), ends the wait: a WaitTimeout
    that says the receiver holds every buffer and what to do."""
    with cpu_link(packet_size=1, num_buffers=1, timeout=0.5) as (ctx, link):
        link.send(np.arange(3, dtype=np.int32))
        first = link.receive(timeout=5)
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match=r"free receive buffer on .*all 1 are held by the "
                                              r"receiver; release PendingSegments"):
            link.receive(timeout=5)
        assert 0.4 < time.monotonic() - started < 3
        with pytest.raises(DeviceError, match=link.name.replace("[", r"\[")):
            ctx.check()                  # the link's failure stopped its context
        first.release()


@pytest.mark.timeout(60)
def test_a_receive_that_times_out_first_also_says_the_receiver_holds_every_buffer():
    """A receive whose own timeout ends before the link's watch (here 0.3 s against 10 s)
    says the same: the careless receiver that iterates a link without releasing learns why."""
    with cpu_link(packet_size=1, num_buffers=2) as (ctx, link):
        link.send(np.arange(5, dtype=np.int32))
        held = [link.receive(timeout=5) for _ in range(2)]
        with pytest.raises(WaitTimeout, match=r"waiting for a segment on .*the receiver holds all 2 "
                                              r"receive buffers of .*release\(\) each PendingSegment"):
            link.receive(timeout=0.3)
        for pending in held:
            pending.release()
        assert link.receive(timeout=5).wait().data.tolist() == [2]


@pytest.mark.timeout(60)
def test_concurrent_senders(ctx):
    a, b = ctx.devices
    link = Link(a, b, packet_size=16, num_buffers=4, ctx=ctx)
    chunks = {t: [np.full(10 + t, 100 * t + i, np.int32) for i in range(20)] for t in range(4)}

    def sender(t):
        for c in chunks[t]:
            link.send(a.asarray(c))

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    got = []

    def receiver():
        while True:
            p = link.receive(timeout=5)
            if p is None:
                return
            d = p.wait().data
            got.append(_host_copy(d))
            p.release()
    r = threading.Thread(target=receiver)
    r.start()
    for th in threads:
        th.join()
    link.close()
    r.join(10)
    allgot = np.sort(np.concatenate(got))
    expect = np.sort(np.concatenate([np.concatenate(v) for v in chunks.values()]))
    np.testing.assert_array_equal(allgot, expect)
    # each sender's chunks keep their own order
    seq = [int(x[0]) for x in got]
    for t in range(4):
        mine = [v for v in seq if v // 100 == t]
        assert mine == sorted(mine)


@pytest.mark.timeout(60)
def test_close_while_in_flight_delivers_everything_then_ends():
    with cpu_link(packet_size=3, num_buffers=1) as (ctx, link):
        link.send(np.arange(10, dtype=np.int32))
        link.close()                     # the send is still in flight (one buffer, four packets)
        with pytest.raises(LinkClosed):
            link.send(np.arange(2, dtype=np.int32))
        parts, _ = _drain(link)
        np.testing.assert_array_equal(np.concatenate(parts), np.arange(10))
        assert link.receive(timeout=1) is None


@pytest.mark.timeout(60)
def test_send_issues_what_fits_and_each_release_issues_the_next(ctx):
    """More packets than buffers: send issues one packet per free buffer on the caller's thread;
    every release then issues the next packet at once (no other thread needed); order and
    back-pressure hold throughout."""
    a, b = ctx.devices
    link = Link(a, b, packet_size=2, num_buffers=3, ctx=ctx)
    host = np.arange(21, dtype=np.int32) * 3
    handle = link.send(_src(ctx, host, a))             # 11 packets, 3 buffers
    held = [link.poll() for _ in range(3)]
    assert all(p is not None for p in held), "send did not issue a packet per free buffer"
    assert link.poll() is None and not link.has_room() and link.backlog() == 3 + 8
    assert not handle.done()
    got = []
    for k in range(11):
        p = held.pop(0)
        d = p.wait(timeout=5).data
        got.append(_host_copy(d))
        assert p.metadata["packet"] == k and p.metadata["offset"] == 2 * k
        p.release()
        nxt = link.poll()                               # issued by that release, at once
        if k + 3 < 11:
            assert nxt is not None and nxt.metadata["packet"] == k + 3
            held.append(nxt)
        else:
            assert nxt is None
        assert link.poll() is None                      # never more than 3 outstanding
    np.testing.assert_array_equal(np.concatenate(got), host)
    handle.wait(timeout=5)
    assert handle.done() and link.backlog() == 0 and link.has_room()
    assert link.stats["packets"] == 11 and link.stats["segments"] == 1
    link.close()
    assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
def test_releases_from_other_threads_keep_order_and_accounting():
    """Packets released out of order from several threads (each release may issue a copy on
    its own thread) still arrive in send order per sender, and every buffer comes back."""
    import concurrent.futures as cf
    import random
    with cpu_link(packet_size=3, num_buffers=4) as (ctx, link):
        sends = {t: [np.arange(1000 * t + 100 * i, 1000 * t + 100 * i + 1 + (7 * i + t) % 11,
                               dtype=np.int32) for i in range(12)] for t in range(3)}
        handles = []

        def sender(t):
            for arr in sends[t]:
                handles.append(link.send(arr, metadata={"t": t}))
        senders = [threading.Thread(target=sender, args=(t,)) for t in range(3)]
        for th in senders:
            th.start()
        got = {t: [] for t in range(3)}
        rng = random.Random(5)

        def release_later(p):
            time.sleep(rng.random() * 1e-3)
            p.release(after=p.event)
        with cf.ThreadPoolExecutor(3) as pool:
            total = sum(len(x) for v in sends.values() for x in v)
            seen = 0
            futures = []
            while seen < total:
                p = link.receive(timeout=5)
                got[p.metadata["t"]].append(p.wait(timeout=5).data.copy())
                seen += p.size
                futures.append(pool.submit(release_later, p))
            for th in senders:
                th.join()
            for f in futures:
                f.result()
        for t in range(3):
            np.testing.assert_array_equal(np.concatenate(got[t]), np.concatenate(sends[t]))
        for h in handles:
            h.wait(timeout=5)
        assert link.backlog() == 0 and link.has_room() and link.poll() is None
        link.close()
        assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
def test_a_failing_copy_breaks_the_link_and_stops_the_context(monkeypatch):
    """A copy that fails while a release issues it: the releaser is not hit, the link reports
    the error to its receivers, senders and the context; a packet copied before still arrives.
    (Packets past COALESCE_PACKET_BYTES: one copy each, issued by the release at once.)"""
    monkeypatch.setattr(link_module, "COALESCE_PACKET_BYTES", 0)
    with cpu_link(packet_size=2, num_buffers=2) as (ctx, link):
        real_copy, calls = link.stream.copy, []

        def copy(dst, src):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("copy engine on fire")
            real_copy(dst, src)
        link.stream.copy = copy
        handle = link.send(np.arange(10, dtype=np.int32))   # 5 packets: 2 issued here
        first = link.receive(timeout=5)
        first.release()                                     # issues the 3rd: fails
        assert ctx.stop_event.wait(5)
        second = link.receive(timeout=5)                    # issued before the failure
        np.testing.assert_array_equal(second.wait(timeout=5).data, [2, 3])
        with pytest.raises(RuntimeError, match="on fire"):
            link.receive(timeout=5)
        with pytest.raises(RuntimeError, match="on fire"):
            handle.wait(timeout=5)
        with pytest.raises(RuntimeError, match="on fire"):
            link.send(np.arange(2, dtype=np.int32))
        with pytest.raises(Exception, match="on fire"):
            ctx.check()


@pytest.mark.timeout(60)
def test_a_copy_failing_in_the_pump_is_reported_once():
    """The pump issues a packet (its issuer ran out of budget with a buffer free) and the copy
    fails: receivers, the sender and the context see the error, and the context hears it once."""
    with cpu_link(packet_size=1, num_buffers=2) as (ctx, link):
        real_copy, calls = link.stream.copy, []
        gates = {2: threading.Event(), 3: threading.Event()}
        entered, issuers = threading.Event(), {}

        def copy(dst, src):
            calls.append(1)
            n = len(calls)
            issuers[n] = threading.current_thread()
            if n == 2:
                entered.set()
            if n in gates:
                assert gates[n].wait(10)
            if n == 4:
                raise RuntimeError("copy engine on fire")
            real_copy(dst, src)
        link.stream.copy = copy
        reports, real_fail = [], ctx.fail

        def fail(name, exc):
            reports.append((name, exc))
            real_fail(name, exc)
        ctx.fail = fail
        link.send(np.arange(1, dtype=np.int32))             # copy 1, into one buffer
        held = link.receive(timeout=5)
        out = {}
        sender = threading.Thread(target=lambda: out.setdefault(
            "handle", link.send(np.arange(4, dtype=np.int32))))
        sender.start()                                      # copy 2 (the free buffer) waits
        assert entered.wait(5)
        held.release()                                      # the sender holds the token
        gates[2].set()                                      # copy 3 into the released buffer
        first = link.receive(timeout=5)
        first.release()                                     # the sender's budget is spent
        gates[3].set()                                      # so the pump issues copy 4: fails
        sender.join(5)
        assert ctx.stop_event.wait(5)
        assert issuers[4] is link._pump.thread
        np.testing.assert_array_equal(link.receive(timeout=5).wait(timeout=5).data, [1])
        with pytest.raises(RuntimeError, match="on fire"):
            link.receive(timeout=5)
        with pytest.raises(RuntimeError, match="on fire"):
            out["handle"].wait(timeout=5)
        assert link.join(5)
        assert [(name, str(exc)) for name, exc in reports] == [(link.name, "copy engine on fire")]


@pytest.mark.timeout(60)
def test_stop_with_sends_queued_is_not_mistaken_for_the_end():
    with cpu_link(packet_size=2, num_buffers=1) as (ctx, link):
        handle = link.send(np.arange(6, dtype=np.int32))    # 3 packets, 1 buffer
        link.close()
        held = link.receive(timeout=5)
        ctx.stop_event.set()
        with pytest.raises(ContextStopped):
            link.receive(timeout=5)
        with pytest.raises(ContextStopped, match="sends still queued"):
            handle.wait(timeout=5)
        held.release()


@pytest.mark.timeout(60)
def test_a_failed_pump_fails_the_queued_sends_at_once(cpu_ctx):
    """When the pump ends on its own error (here: the receiver never releases its buffer) on
    a link outside any context, the queued send fails with that error at once, not after the
    sender's own timeout."""
    a, b = cpu_ctx.devices[:2]
    link = Link(a, b, packet_size=1, num_buffers=1)
    link.timeout = 0.5      # the pump's wait for a free buffer (no context to take it from)
    handle = link.send(np.arange(3, dtype=np.int32))    # 3 packets, 1 buffer
    held = link.receive(timeout=5)
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match="free receive buffer"):
        handle.wait(timeout=30)
    assert time.monotonic() - t0 < 10
    held.release()
    link.close()


@pytest.mark.timeout(60)
def test_empty_sends_keep_their_place_in_the_queue():
    with cpu_link(packet_size=2, num_buffers=1) as (ctx, link):
        h0 = link.send(np.empty(0, np.int32))
        h1 = link.send(np.arange(4, dtype=np.int32))        # 2 packets, 1 buffer
        h2 = link.send(np.empty(0, np.int32))
        h0.wait(timeout=5)
        p = link.receive(timeout=5)
        assert not h2.done(), "an empty send overtook a send still waiting for buffers"
        p.release()
        link.receive(timeout=5).release()
        h1.wait(timeout=5)
        h2.wait(timeout=5)
        assert link.stats["segments"] == 3 and link.stats["packets"] == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("through", ["link", "broadcast router"])
def test_an_empty_send_is_a_fence_for_the_copies_before_it(through):
    """An empty send's handle is done once the sends before it are: with the copy stream
    slowed, it is not done while the earlier copy still reads its source, and a source
    overwritten after it is done arrives as sent."""
    with Context(2, backend="cpu", timeout=10, cpu_delays=[0.3, 0]) as ctx:
        a, b = ctx.devices
        if through == "link":
            link = Link(a, b, packet_size=4, num_buffers=2, ctx=ctx)
            send, outputs = link.send, [link]
        else:
            router = Router([a], [b, a], broadcast, packet_size=4, ctx=ctx)
            link, send, outputs = router, router.inputs[0].send, router.outputs
        src = a.asarray(np.arange(3, dtype=np.int32))
        send(src)
        fence = send(a.asarray(np.zeros(0, np.int32)))
        assert not fence.done(), "an empty send was done before the copy queued ahead of it"
        fence.wait(timeout=10)
        src[:] = -1
        link.close()
        got = [[p.wait().data.tolist() for p in out] for out in outputs]
    assert got == [[[0, 1, 2]]] * len(outputs)


@pytest.mark.parametrize("kwargs,msg", [({"packet_size": 0}, "packet_size"), ({"packet_size": 4, "num_buffers": 0}, "num_buffers"),
                                        ({"packet_size": 2.5}, "packet_size")])
def test_bad_arguments(cpu_ctx, kwargs, msg):
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(ValueError, match=msg):
        Link(a, b, **kwargs)


@pytest.mark.parametrize("initiated", ["host", "device"])
def test_an_item_shape_that_is_not_one_is_named(cpu_ctx, initiated):
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(TypeError, match="item_shape must be a tuple of sizes"):
        Link(a, b, 4, item_shape=3, ctx=cpu_ctx, initiated=initiated)     # "'int' object is not iterable"
    with pytest.raises(ValueError, match="item_shape's sizes must be an int >= 1, got -1"):
        Link(a, b, 4, item_shape=(-1,), ctx=cpu_ctx, initiated=initiated)  # NumPy's "negative dimensions"


def test_wrong_dtype_is_rejected(cpu_ctx):
    a, b = cpu_ctx.devices[:2]
    link = Link(a, b, 4, ctx=cpu_ctx)
    with pytest.raises(ValueError, match="int32"):
        link.send(np.zeros(3, np.float64))
    link.close()


def test_a_send_of_a_scalar_or_a_bad_event_or_metadata_names_the_link(cpu_ctx):
    a, b = cpu_ctx.devices[:2]
    link = Link(a, b, 4, ctx=cpu_ctx, name="typed")
    items = np.arange(3, dtype=np.int32)
    with pytest.raises(ValueError, match="typed: send takes an array of items, got a 0-d array"):
        link.send(np.int32(5))                          # a 0-d array: not a packet of items
    with pytest.raises(TypeError, match="typed: event must be an event a stream recorded"):
        link.send(items, event="x")                     # not a recorded event
    with pytest.raises(TypeError, match="typed: metadata must be a dict, got int"):
        link.send(items, metadata=5)
    with pytest.raises(ValueError, match=r"typed: metadata keys \['last', 'offset'\] are the "
                                         r"link's own"):
        link.send(items, metadata={"offset": 99, "last": "mine", "k": 1})   # were overwritten
    assert link.stats["segments"] == 0                  # nothing was queued
    link.close()
    router = Router([HOST], [a, b], first_available, packet_size=4, ctx=cpu_ctx)
    with pytest.raises(TypeError, match=r"router\[0->0\]: metadata must be a dict"):
        router.inputs[0].send(items, metadata=5)        # the router's own check, named
    with pytest.raises(ValueError, match=r"router\[0->0\]: metadata keys \['total'\]"):
        router.inputs[0].send(items, metadata={"total": 3})
    with pytest.raises(ValueError, match=r"router\[0->0\]: send takes an array of items"):
        router.inputs[0].send(np.int32(5))
    router.close()


def test_a_link_s_buffers_dtype_and_a_router_s_pairs_are_checked_when_made(cpu_ctx):
    """Ten million buffers took half a minute and gigabytes of slots to build (a billion never
    returned); buffers past the memory failed inside NumPy; a dtype that is no number, and
    pairs that are not pairs of ints, were taken or failed naming nothing; an item shape whose
    size passed int64 wrapped past the memory check."""
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(ValueError, match="num_buffers must be at most 65,536"):
        Link(a, b, 1, 10**7, ctx=cpu_ctx)
    for initiated in ("host", "device"):
        with pytest.raises(MemoryError, match=r"named: its receive buffers take .* GiB, more "
                                              r"than the .* GiB cpu:1 has free"):
            Link(a, b, 10**12, 2, ctx=cpu_ctx, name="named", initiated=initiated)
        # an item of 2**64 bytes wrapped to 0 in int64 and passed the check
        with pytest.raises(MemoryError, match=r"wide: its receive buffers take .* GiB"):
            Link(a, b, 4, 2, ctx=cpu_ctx, name="wide", item_shape=(2**62, 4),
                 initiated=initiated)
        with pytest.raises(TypeError, match="dtype: data type 'nosuch' not understood"):
            Link(a, b, 4, ctx=cpu_ctx, dtype="nosuch", initiated=initiated)
        with pytest.raises(TypeError, match="a link carries numbers or bools, not object"):
            Link(a, b, 4, ctx=cpu_ctx, dtype=object, initiated=initiated)
    for pairs in ([(0, "a")], [(0, 1.0)], [(0,)], [3], [(True, 0)]):
        with pytest.raises(TypeError, match=r"router: pairs are \(input index, output index\)"):
            Router([HOST], [a, b], first_available, packet_size=4, ctx=cpu_ctx, pairs=pairs)
    Link(a, b, 4, 1 << 16, ctx=cpu_ctx, dtype=np.complex64).close()
    pairs = np.argwhere(~np.eye(2, dtype=bool))         # rows of an int array are pairs too
    router = Router([a, b], [a, b], first_available, packet_size=4, ctx=cpu_ctx, pairs=pairs)
    assert router.links[0][0] is None and router.links[0][1] is not None
    router.close()


def test_host_to_host_is_rejected():
    with pytest.raises(ValueError, match="device"):
        Link(HOST, HOST, 4)


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(60)
def test_cuda_peer_and_staged_paths():
    """Both the peer path and the host-staged path deliver the same bytes."""
    from groute.device import cuda as cuda_backend
    with Context(2, backend="cuda", timeout=10) as ctx:
        a, b = ctx.devices
        host = np.arange(1000, dtype=np.int32)
        for staged in (False, True):
            saved = set(cuda_backend._PEERS)
            if staged:
                cuda_backend._PEERS.clear()
            try:
                link = Link(a, b, packet_size=300, num_buffers=2, ctx=ctx)
                link.send(a.asarray(host))
                link.close()
                parts, _ = _drain(link)
            finally:
                cuda_backend._PEERS.update(saved)
            np.testing.assert_array_equal(np.concatenate(parts), host)


@pytest.mark.timeout(60)
def test_a_link_whose_end_fails_does_not_stop_the_pump_of_its_device(cpu_ctx, monkeypatch):
    """One pump thread serves every link a device copies for: a link that cannot give its
    stream back at its end must not take that thread (and every later link of the device)
    down with it."""
    a, b = cpu_ctx.devices[:2]
    real = type(a).release_link_stream

    def failing(self, stream):
        raise RuntimeError("stream would not close")

    monkeypatch.setattr(type(a), "release_link_stream", failing)
    first = Link(a, b, packet_size=4, num_buffers=1)
    first.send(np.arange(4, dtype=np.int32))
    first.receive(timeout=5).release()
    first.close()
    time.sleep(0.2)                    # the pump ends the first link (and, unguarded, itself)
    monkeypatch.setattr(type(a), "release_link_stream", real)
    second = Link(a, b, packet_size=2, num_buffers=1)
    handle = second.send(np.arange(6, dtype=np.int32))       # 3 packets through 1 buffer
    got = []
    for _ in range(3):
        p = second.receive(timeout=5)
        got.extend(_host_copy(p.wait().data).tolist())
        p.release()
    handle.wait(timeout=5)
    second.close()
    assert second.receive(timeout=5) is None       # the end of the stream, which the pump sends
    assert got == list(range(6))


@pytest.mark.timeout(60)
def test_batching_sends_queued_packets_in_consecutive_slots_as_one_copy(ctx):
    """A batching receiver gets the packets of one send that find consecutive free slots as
    one segment (one copy), ``metadata["packets"]`` of them; releasing it frees them all, and
    the next batch goes into them at once. Order and bytes are those of the send."""
    a, b = ctx.devices
    link = Link(a, b, packet_size=3, num_buffers=4, ctx=ctx, batching=True)
    host = np.arange(31, dtype=np.int32) * 5             # 11 packets: 4 + 4 + 3
    handle = link.send(_src(ctx, host, a), metadata={"round": 2})
    got, metas = [], []
    while sum(len(g) for g in got) < host.size:
        p = link.receive(timeout=5)
        got.append(_host_copy(p.wait(timeout=5).data))
        metas.append(dict(p.metadata))
        p.release(after=p.event)
    np.testing.assert_array_equal(np.concatenate(got), host)
    assert [m["packets"] for m in metas] == [4, 4, 3]
    assert [m["offset"] for m in metas] == [0, 12, 24] and [m["packet"] for m in metas] == [0, 4, 8]
    assert [m["last"] for m in metas] == [False, False, True] and metas[0]["round"] == 2
    assert link.stats["copies"] == 3 and link.stats["packets"] == 11
    handle.wait(timeout=5)
    link.close()
    assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
def test_small_packets_wait_for_the_receivers_last_release_and_go_as_one_copy():
    """Packets of one send in consecutive free slots go as one copy, each still its own
    segment; a release while the receiver has segments to take leaves the queued packets, and
    its release of the last segment issues them into every freed slot at once (one copy
    again, the ring's slots whole)."""
    with cpu_link(packet_size=2, num_buffers=4) as (ctx, link):
        with pump_off(link):
            host = np.arange(16, dtype=np.int32) * 7           # 8 packets, 4 buffers
            handle = link.send(host)
            assert link.stats["copies"] == 1 and link.stats["packets"] == 4
            got, events = [], set()
            for k in range(8):
                p = link.receive(timeout=5)
                assert p.size == 2 and p.metadata["packet"] == k and p.metadata["offset"] == 2 * k
                assert "packets" not in p.metadata
                got.append(p.wait(timeout=5).data.copy())
                events.add(id(p.event))
                p.release()
                issued = 2 if k >= 3 else 1                     # the 4th release issues
                assert link.stats["copies"] == issued, f"after packet {k}"
            np.testing.assert_array_equal(np.concatenate(got), host)
            assert len(events) == 2 and link.stats["packets"] == 8
        handle.wait(timeout=5)
        link.close()
        assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("take", ["receive", "poll"])
def test_a_receiver_gets_what_its_releases_left_without_the_pump(take):
    """A receiver that released a segment while others were still to take, then took the
    rest, gets the next packet from its next receive or poll (finding none issues it), not
    from the pump's visit or a timeout."""
    with cpu_link(packet_size=2, num_buffers=3) as (ctx, link):
        link.send(np.arange(8, dtype=np.int32))               # 4 packets, 3 issued
        with pump_off(link):
            first = link.receive(timeout=5)
            first.release()                                   # two still to take: waits
            assert link.stats["packets"] == 3
            rest = [link.receive(timeout=5) for _ in range(2)]
            if take == "poll":
                nxt = link.poll()
                assert nxt is not None, "poll did not issue the packet the release left"
            else:
                nxt = link.receive(timeout=1)
        np.testing.assert_array_equal(nxt.wait(timeout=5).data, [6, 7])
        assert nxt.metadata["packet"] == 3 and link.stats["packets"] == 4
        for p in [*rest, nxt]:
            p.release()
        link.close()
        assert link.receive(timeout=5) is None


@pytest.mark.timeout(60)
def test_a_receiver_that_stops_taking_leaves_the_pump_to_issue():
    """A receiver that released some segments and takes no more does not keep a send from
    being issued into the freed buffers: the pump's visit issues it."""
    with cpu_link(packet_size=2, num_buffers=4) as (ctx, link):
        link.send(np.arange(12, dtype=np.int32))               # 6 packets, 4 issued
        with pump_off(link):
            for p in [link.receive(timeout=5) for _ in range(2)]:
                p.release()                                    # two left to take: wait
            assert link.stats["packets"] == 4
        wait_for(lambda: link.stats["packets"] == 6, what="the pump's issue", timeout=5)


@pytest.mark.timeout(60)
def test_a_sender_asking_for_its_handle_issues_what_the_releases_left():
    """A sender that asks whether its send is done (or waits for it) while the receiver holds
    segments after releasing others gets the queued packets issued then, not at the pump's
    next visit."""
    with cpu_link(packet_size=2, num_buffers=4) as (ctx, link), pump_off(link):
        handle = link.send(np.arange(12, dtype=np.int32))      # 6 packets, 4 issued
        for p in [link.receive(timeout=5) for _ in range(2)]:
            p.release()                                        # two left to take: wait
        assert link.stats["packets"] == 4
        handle.done()
        assert link.stats["packets"] == 6
        handle.wait(timeout=5)


@pytest.mark.timeout(60)
def test_large_packets_go_into_each_freed_buffer_at_once(monkeypatch):
    """Past COALESCE_PACKET_BYTES a release issues the next packet at once, whatever the
    receiver still holds: the copy is long enough to overlap the receiver's work."""
    monkeypatch.setattr(link_module, "COALESCE_PACKET_BYTES", 4)
    with cpu_link(packet_size=2, num_buffers=3) as (ctx, link):     # 8-byte packets
        link.send(np.arange(8, dtype=np.int32))
        assert link.stats["copies"] == 3                   # a copy each, each ready on its own
        first = link.receive(timeout=5)
        first.release()                                    # two still to take: issues anyway
        assert link.stats["packets"] == 4
        got = [link.receive(timeout=5) for _ in range(3)]
        assert [p.metadata["packet"] for p in got] == [1, 2, 3]
        for p in got:
            p.release()
        link.close()


@pytest.mark.timeout(60)
def test_a_copys_event_is_recorded_again_only_once_every_segment_it_completed_is_released():
    """The packets of one copy share its event. A slot of it refilled while other segments of
    that copy are held gets another event (recording theirs again would make them wait for
    the later copy); once all are released and the copy is done, the event is kept and
    recorded again."""
    with cpu_link(packet_size=2, num_buffers=4) as (ctx, link), pump_off(link):
        real, asked = link.stream.record, []

        def record(event=None):          # a CUDA stream records the event it is given again
            asked.append(event)
            return event if event is not None else real()
        link.stream.record = record
        link.send(np.arange(8, dtype=np.int32))                # 4 packets, one copy
        held = [link.receive(timeout=5) for _ in range(4)]
        shared = held[0].event
        assert all(p.event is shared for p in held) and asked == [None]
        held[0].wait(timeout=5)                                # the copy is done
        held[0].release()
        link.send(np.arange(2, dtype=np.int32))                # into slot 0, the others held
        again = link.receive(timeout=5)
        assert again.event is not shared and asked[-1] is None
        for p in held[1:]:
            p.release()
        again.wait(timeout=5)
        again.release()
        link.send(np.arange(2, dtype=np.int32))
        assert asked[-1] in (shared, again.event)              # a kept event, recorded again
        link.receive(timeout=5).release()


@pytest.mark.timeout(60)
def test_batching_takes_only_consecutive_free_slots():
    """Slots freed out of order: a batch is a run of consecutive free slots (one copy into one
    piece of memory), so a gap splits it; without batching every packet is its own segment."""
    with cpu_link(packet_size=2, num_buffers=4) as (ctx, plain):
        plain.send(np.arange(8, dtype=np.int32))
        assert [plain.receive(timeout=5).size for _ in range(4)] == [2, 2, 2, 2]
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=2, num_buffers=4, ctx=ctx, batching=True)
        first = link.send(np.arange(2, dtype=np.int32))
        held = [link.receive(timeout=5) for _ in range(1)]
        rest = link.send(np.arange(2, 8, dtype=np.int32))          # slots 1..3: one batch
        middle = link.receive(timeout=5)
        assert middle.metadata["packets"] == 3 and middle.size == 6
        middle.release()                                           # slots 1, 2, 3 free
        link.send(np.arange(10, 18, dtype=np.int32))               # 4 packets: 3 fit, in one run
        again = link.receive(timeout=5)
        assert again.metadata["packets"] == 3
        np.testing.assert_array_equal(again.wait(timeout=5).data, np.arange(10, 16))
        held[0].release()                                          # slot 0: the 4th packet
        last = link.receive(timeout=5)
        assert last.metadata["packets"] == 1 and last.metadata["offset"] == 6
        np.testing.assert_array_equal(last.wait(timeout=5).data, [16, 17])
        again.release()
        last.release()
        first.wait(timeout=5)
        rest.wait(timeout=5)
        assert link.backlog() == 0


@pytest.mark.timeout(60)
def test_a_pending_segment_released_twice_from_two_threads_frees_its_slot_once():
    with cpu_link(packet_size=2, num_buffers=2) as (ctx, link):
        link.send(np.arange(4, dtype=np.int32))
        p = link.receive(timeout=5)
        link.receive(timeout=5)                  # the other slot stays held
        threads = [threading.Thread(target=p.release) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert link.held() == 1 and link.backlog() == 1


def test_a_link_mode_other_than_host_or_device_is_rejected(cpu_ctx):
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(ValueError, match="initiated must be 'host' or 'device'"):
        Link(a, b, 4, initiated="kernel")


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(60)
def test_cuda_link_records_each_slot_event_again():
    """A CUDA link makes one event per receive slot and records it again at each packet (a
    packet costs the host a record, not an event's creation); copy plans move the rows."""
    with Context(2, backend="cuda", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=100, num_buffers=3, ctx=ctx)
        host = np.arange(1000, dtype=np.int32)
        link.send(a.asarray(host))
        events, parts = set(), []
        while sum(len(x) for x in parts) < host.size:
            p = link.receive(timeout=5)
            events.add(id(p.event))
            parts.append(_host_copy(p.wait(timeout=5).data))
            p.release(after=p.event)
        np.testing.assert_array_equal(np.concatenate(parts), host)
        assert len(events) <= 3
        link.close()
        plan_dst = b.zeros((6, 2), np.int32)
        src = a.asarray(np.arange(12, dtype=np.int32).reshape(6, 2))
        a.copy_stream.wait_event(b.compute_stream.record())     # the zeros first
        a.copy_stream.copy_plan(plan_dst, src)(1, 3, 2)
        a.copy_stream.synchronize()
        np.testing.assert_array_equal(b.to_host(plan_dst)[1:3], [[6, 7], [8, 9]])


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(60)
@pytest.mark.parametrize("initiated", ["host", "device"])
def test_a_cuda_links_ring_is_not_memory_a_queued_kernel_still_writes(initiated):
    """CuPy's pool hands a block freed on the receiver's compute stream straight to that
    stream's next allocation while a kernel queued there may still write it; a Link's ring,
    written by other streams and devices, comes from elsewhere (``Device.receive_buffer``), so
    what arrives is the packet, not the kernel's writes."""
    import cupy
    spin_then_write = cupy.RawKernel(r"""
    extern "C" __global__ void spin_then_write(int* out, int n, long long cycles) {
        const long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
        for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = -1;
    }""", "spin_then_write")
    n = 1 << 16
    with Context(2, backend="cuda", timeout=10) as ctx:
        a, b = ctx.devices
        host = np.arange(n, dtype=np.int32)
        sent = a.asarray(host)
        with b.on_compute():
            cupy.get_default_memory_pool().free_all_blocks()    # no other free block to pick
            scratch = cupy.empty(n, np.int32)
            where = scratch.data.ptr
            spin_then_write((1,), (256,), (scratch, np.int32(n), np.int64(200_000_000)))
            del scratch             # back to the pool of b's compute stream, still being written
        link = Link(a, b, packet_size=n, num_buffers=1, ctx=ctx, initiated=initiated)
        assert link._ring.data.ptr != where
        if initiated == "device":       # its kernels write the ring: not that block is enough
            link.close()
            return
        link.send(sent)
        pending = link.receive(timeout=5)
        np.testing.assert_array_equal(b.to_host(pending.wait(timeout=5).data), host)  # kernel done
        pending.release()
        link.close()


@pytest.mark.timeout(60)
def test_send_all_serves_idle_links_together_and_queues_the_others():
    """send_all: the links of one copy stream that are idle with room take the send together,
    with one handle and one event for all their packets; a link whose buffer is held gets its
    own queued send, which its release issues. Every receiver gets the data and metadata."""
    from groute.runtime.link import send_all
    with Context(4, backend="cpu", timeout=10) as ctx:
        a, *dests = ctx.devices
        links = [Link(a, d, packet_size=4, num_buffers=2, ctx=ctx) for d in dests]
        held = links[2].send(a.asarray(np.arange(8, dtype=np.int32)))    # both of its buffers
        held.wait(5)
        data = np.arange(6, dtype=np.int32) + 100
        handles = send_all(links, a.asarray(data), metadata={"tag": 7})
        assert len(handles) == 2                                          # together, then links[2]
        for link in links[:2]:
            parts = [link.receive(timeout=5) for _ in range(2)]
            assert all(p.event is handles[0].event for p in parts)
            assert [p.metadata["offset"] for p in parts] == [0, 4] and parts[1].metadata["last"]
            assert all(p.metadata["tag"] == 7 for p in parts)
            np.testing.assert_array_equal(np.concatenate([_host_copy(p.wait().data) for p in parts]), data)
            for p in parts:
                p.release()
        assert not handles[1].done() and links[2].stats["packets"] == 2      # queued: no free buffer
        for p in [links[2].receive(timeout=5) for _ in range(2)]:
            p.release()                                                   # frees room: issues the queued send
        got = [links[2].receive(timeout=5) for _ in range(2)]
        np.testing.assert_array_equal(np.concatenate([_host_copy(p.wait().data) for p in got]), data)
        handles[1].wait(5)
        assert [link.stats["segments"] for link in links] == [1, 1, 2]
        links[1].close()
        with pytest.raises(LinkClosed):
            send_all(links[:2], a.asarray(data))
        assert _host_copy(links[0].receive(timeout=5).wait().data).tolist() == data[:4].tolist()


def test_the_per_packet_path_makes_no_device_current(monkeypatch):
    """Issuing a packet selects no device (a copy and a record name their stream; making a CUDA
    device current costs runtime calls per packet)."""
    with cpu_link(packet_size=2, num_buffers=2) as (ctx, link):
        a = ctx.devices[0]
        data = a.asarray(np.arange(40, dtype=np.int32))
        made_current = []
        monkeypatch.setattr(type(a), "use", lambda self: made_current.append(self) or contextlib.nullcontext())
        link.send(data)
        out, _ = _drain_n(link, 20)
        np.testing.assert_array_equal(np.concatenate(out), np.arange(40))
        assert made_current == []


def test_sends_of_the_same_array_share_one_copy_plan(monkeypatch):
    """A copy plan (addresses, the kind of copy) is made once for consecutive sends of one array,
    and again for another array."""
    with cpu_link(packet_size=4, num_buffers=4) as (ctx, link):
        a = ctx.devices[0]
        plans = []
        real = type(link.stream).copy_plan
        monkeypatch.setattr(type(link.stream), "copy_plan",
                            lambda self, dst, src: plans.append(src) or real(self, dst, src))
        one, other = a.asarray(np.arange(4, dtype=np.int32)), a.asarray(np.arange(4, dtype=np.int32) + 9)
        for data in (one, one, one, other):
            link.send(data)
            p = link.receive(timeout=5)
            p.wait()
            p.release()
        assert [x is one for x in plans] == [True, False]


def _drain_n(link, packets):
    out, metas = [], []
    for _ in range(packets):
        p = link.receive(timeout=5)
        out.append(_host_copy(p.wait().data))
        metas.append(p.metadata)
        p.release()
    return out, metas


def test_link_streams_of_one_share_key_are_one_given_back_with_the_last(monkeypatch):
    """Device.link_stream(share=key), as CUDA devices have it: every link passing the key gets
    one stream, given back once the last of them gives it back; other keys and no key get
    their own. (A CPU device shares one stream among all its links anyway.)"""
    from groute.device.base import Device
    with Context(1, backend="cpu") as ctx:
        dev = ctx.devices[0]
        given_back = []
        real = type(dev).release_stream
        monkeypatch.setattr(type(dev), "release_stream",
                            lambda self, s: given_back.append(s) or real(self, s))
        key = object()
        one, two = Device.link_stream(dev, "x", share=key), Device.link_stream(dev, "y", share=key)
        other, alone = Device.link_stream(dev, "z", share=object()), Device.link_stream(dev, "w")
        assert one is two and len({id(one), id(other), id(alone)}) == 3
        Device.release_link_stream(dev, one)
        assert given_back == []
        for stream in (two, other, alone):
            Device.release_link_stream(dev, stream)
        assert given_back == [one, other, alone] and not dev._shared_link_streams


def test_a_release_after_something_not_an_event_is_refused_at_the_release():
    with cpu_link(4, 2) as (ctx, link):
        link.send(np.arange(4, dtype=np.int32))
        got = link.receive(timeout=5)
        got.wait()
        with pytest.raises(TypeError, match="release: after must be an event"):
            got.release(after="junk")
        got.release()               # the refused release did not take the buffer back
        link.send(np.arange(4, dtype=np.int32))
        assert link.receive(timeout=5).wait().data.tolist() == [0, 1, 2, 3]


def test_a_strided_send_is_refused_on_every_backend_before_it_is_queued():
    """A copy moves a packet's rows as one block: CUDA's copy plan refuses a strided view when
    it issues (which would fail the link), so every backend refuses it at the send."""
    with cpu_link(4, 2) as (ctx, link):
        with pytest.raises(ValueError, match="C-contiguous"):
            link.send(np.arange(8, dtype=np.int32)[::2])
        link.send(np.arange(8, dtype=np.int32)[::2].copy())
        assert link.receive(timeout=5).wait().data.tolist() == [0, 2, 4, 6]


def test_a_router_of_host_ends_only_says_so():
    with Context(1, backend="cpu") as ctx:
        with pytest.raises(ValueError, match="needs a device among its inputs or outputs"):
            Router([HOST], [HOST], first_available, packet_size=4, ctx=ctx)


@pytest.mark.timeout(30)
def test_a_join_whose_time_is_up_while_copies_run_still_answers():
    """join() spends what is left of its time on the copies still reading the sends' sources;
    with none left it lets go of those that are done and answers (it raised ValueError)."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=1024, num_buffers=2, ctx=ctx)
        a.delay = b.delay = 0.2
        link.send(a.asarray(np.arange(1024, dtype=np.int32)))
        link.close()
        pending = link.receive()
        pending.release()
        assert link.receive() is None and link.finished
        assert link.join(1e-6)
        assert link.join(5)
