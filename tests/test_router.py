"""Router: every policy, a custom policy, and availability balancing toward the faster device."""
import threading
import time

import numpy as np
import pytest

from groute import (HOST, Context, Link, Route, Router, WaitTimeout, broadcast, by_owner,
                    first_available, ring)
from support import backends, context_or_skip


def _collect(router, j, sink, delay=0.0):
    for p in router.outputs[j]:
        d = p.wait().data
        sink.append((j, np.asarray(d.get() if hasattr(d, "get") else d).copy(), dict(p.metadata)))
        if delay:
            time.sleep(delay)
        p.release()


def _run_router(ctx, policy, segments, metadata=None, delays=None, num_buffers=2):
    router = Router([HOST], ctx.devices, policy, packet_size=64, num_buffers=num_buffers, ctx=ctx)
    got = []
    threads = [threading.Thread(target=_collect, args=(router, j, got, (delays or {}).get(j, 0)))
               for j in range(len(ctx.devices))]
    for t in threads:
        t.start()
    for i, s in enumerate(segments):
        router.inputs[0].send(s, metadata=(metadata or (lambda i: {}))(i))
    router.close()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads)
    return router, got


def _each_device_sends_its_index(router, ctx):
    """Input ``i`` of ``router`` (one per device of ``ctx``) sends four copies of ``i``, then the
    router closes: the sorted ``(output, index that arrived there)`` pairs that its outputs'
    collectors saw (each waited for up to 20 s)."""
    got = []
    threads = [threading.Thread(target=_collect, args=(router, j, got))
               for j in range(len(router.outputs))]
    for t in threads:
        t.start()
    for i, dev in enumerate(ctx.devices):
        router.inputs[i].send(dev.asarray(np.full(4, i, np.int32)))
    router.close()
    for t in threads:
        t.join(20)
    return sorted((j, int(d[0])) for j, d, _ in got)


@pytest.fixture(params=backends(min_gpus=3))
def ctx(request):
    c = context_or_skip(request.param, 3, timeout=10)
    yield c
    c.shutdown()


@pytest.mark.timeout(60)
def test_broadcast_reaches_every_destination(ctx):
    segs = [np.arange(i * 10, i * 10 + 10, dtype=np.int32) for i in range(5)]
    router, got = _run_router(ctx, broadcast, segs)
    for j in range(3):
        mine = np.concatenate([d for (jj, d, _) in got if jj == j])
        np.testing.assert_array_equal(mine, np.concatenate(segs))
    assert router.routed.tolist() == [[5, 5, 5]]


@pytest.mark.timeout(60)
def test_by_owner_follows_metadata(ctx):
    segs = [np.full(7, i, np.int32) for i in range(9)]
    _, got = _run_router(ctx, by_owner, segs, metadata=lambda i: {"owner": i % 3})
    for j, d, meta in got:
        assert meta["owner"] == j
        assert np.all(d % 3 == j)
    assert len(got) == 9


@pytest.mark.timeout(60)
@pytest.mark.parametrize("owner", [1.7, True, "abc", None, np.array([1])])
def test_by_owner_refuses_an_owner_that_is_not_an_output_index(ctx, owner):
    """An owner of 1.7 or True went to output 1; a string failed in int() naming nothing."""
    router = Router([HOST], ctx.devices, by_owner, packet_size=4, ctx=ctx)
    try:
        with pytest.raises(TypeError, match=r"by_key policy, metadata 'owner' chose .* as a "
                                            r"destination; destinations are output indices"):
            router.inputs[0].send(np.arange(3, dtype=np.int32), metadata={"owner": owner})
    finally:
        router.close()


@pytest.mark.timeout(60)
def test_ring_sends_to_next(ctx):
    router = Router(ctx.devices, ctx.devices, ring, packet_size=8, ctx=ctx)
    assert _each_device_sends_its_index(router, ctx) == [(0, 2), (1, 0), (2, 1)]


@pytest.mark.timeout(60)
def test_custom_policy_function(ctx):
    def largest_to_last(segment, source, destinations):
        return [destinations[-1]] if segment.size > 5 else Route((destinations[0],), "fixed")
    segs = [np.zeros(n, np.int32) for n in (1, 9, 3, 12)]
    _, got = _run_router(ctx, largest_to_last, segs)
    assert sorted((j, len(d)) for j, d, _ in got) == [(0, 1), (0, 3), (2, 9), (2, 12)]


@pytest.mark.timeout(60)
def test_first_available_favours_the_faster_device():
    with Context(3, backend="cpu", timeout=10) as ctx:
        segs = [np.arange(50, dtype=np.int32) for _ in range(60)]
        # device 2 takes 20 ms per segment, the others 1 ms
        _, got = _run_router(ctx, first_available, segs, delays={0: 0.001, 1: 0.001, 2: 0.02}, num_buffers=1)
        counts = np.bincount([j for j, _, _ in got], minlength=3)
        assert counts.sum() == 60
        assert counts[2] < counts[0] and counts[2] < counts[1], counts


def test_policy_choosing_nonexistent_output(cpu_ctx):
    router = Router([HOST], cpu_ctx.devices[:2], lambda s, src, d: [5], packet_size=4, ctx=cpu_ctx)
    with pytest.raises(ValueError, match="output 5"):
        router.inputs[0].send(np.zeros(3, np.int32))
    router.close()


def test_policy_errors_and_host_pairs_name_the_router(cpu_ctx):
    """A segment without the owner by_owner reads, a broadcast naming an output twice (it
    delivered the segment twice) and a pair of host ends (the Link's own error named neither
    the router nor pairs=) each say which router."""
    router = Router([HOST], cpu_ctx.devices[:2], by_owner, packet_size=4, ctx=cpu_ctx,
                    name="owned")
    with pytest.raises(ValueError, match=r"^owned: policy by_key\('owner'\), a segment from "
                                         r"input 0: by_key policy: segment metadata has no"):
        router.inputs[0].send(np.zeros(3, np.int32))
    router.close()
    twice = Router([HOST], cpu_ctx.devices[:2], lambda s, src, d: Route((1, 1), "broadcast"),
                   packet_size=4, ctx=cpu_ctx, name="twice")
    with pytest.raises(ValueError, match=r"twice: .*broadcast to output 1 more than once"):
        twice.inputs[0].send(np.zeros(3, np.int32))
    twice.close()
    with pytest.raises(ValueError, match=r"^hosts: input 0 and output 0 are both the host.*"
                                         r"pairs="):
        Router([HOST], [HOST, cpu_ctx.devices[0]], broadcast, packet_size=4, ctx=cpu_ctx,
               name="hosts")
    fine = Router([HOST], [HOST, cpu_ctx.devices[0]], broadcast, packet_size=4, ctx=cpu_ctx,
                  pairs=[(0, 1)])
    fine.close()


@pytest.mark.timeout(60)
def test_join_waits_the_context_s_timeout_once_for_all_links():
    """An unclosed router's join waited 60 s per link, whatever the context's timeout."""
    with Context(3, backend="cpu", timeout=0.3) as ctx:
        router = Router(ctx.devices, ctx.devices, broadcast, packet_size=4, ctx=ctx)
        link = Link(ctx.devices[0], ctx.devices[1], 4, ctx=ctx)
        t0 = time.monotonic()
        assert router.join() is False and link.join() is False
        assert time.monotonic() - t0 < 5        # the context's timeout, once per join
        router.close()
        link.close()
        assert router.join() and link.join()


def test_policy_must_be_callable(cpu_ctx):
    with pytest.raises(TypeError, match="policy"):
        Router([HOST], cpu_ctx.devices, "first", packet_size=4)


def test_a_router_s_endpoints_pairs_and_input_index_are_checked(cpu_ctx):
    """One endpoint not in a list was read letter by letter ("not an endpoint: 'h'"), pairs
    that are no list and an input index that is no int failed inside Python."""
    a, b = cpu_ctx.devices[:2]
    with pytest.raises(TypeError, match=r"inputs is a list of .*got 'host'; one alone goes in"):
        Router("host", [b], first_available, packet_size=4, ctx=cpu_ctx)
    with pytest.raises(TypeError, match=r"outputs is a list of .*got .*cpu:1"):
        Router([a], b, first_available, packet_size=4, ctx=cpu_ctx)
    with pytest.raises(TypeError, match=r"named: pairs is a list of \(input index, output index\) "
                                        r"pairs, got 5"):
        Router([a], [b], first_available, packet_size=4, ctx=cpu_ctx, name="named", pairs=5)
    router = Router([a], [b], first_available, packet_size=4, ctx=cpu_ctx, name="named")
    with pytest.raises(TypeError, match=r"named's inputs are indexed by an int or a slice, got '0'"):
        router.inputs["0"]
    assert router.inputs[-1].index == 0
    router.close()


@pytest.mark.parametrize("answer", [None, 1.5, True, np.True_, "1", [1, "2"], [1.0], {1},
                                    np.array([[0, 1]]), Route(1, "fixed"),
                                    Route(np.array(1), "fixed"), np.array(1.5)])
def test_a_policy_answer_that_is_no_destination_is_a_clear_error(cpu_ctx, answer):
    def odd(segment, source, destinations):
        return answer
    router = Router([HOST], cpu_ctx.devices[:2], odd, packet_size=4, ctx=cpu_ctx, name="odd-router")
    with pytest.raises(TypeError, match=r"odd-router: policy odd (returned|chose) .*output ind"):
        router.inputs[0].send(np.zeros(3, np.int32))
    router.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("answer", [np.int64(1), np.int32(1), [np.int64(1)], np.array([1]),
                                    Route((np.int64(1),), "fixed"), 1, (1,), range(1, 2),
                                    np.array(1)])
def test_numpy_integers_and_sequences_are_destinations(answer):
    with Context(2, backend="cpu", timeout=10) as ctx:
        router, got = _run_router(ctx, lambda s, src, d: answer, [np.arange(3, dtype=np.int32)])
        assert [j for j, _, _ in got] == [1]
        assert router.routed.tolist() == [[0, 1]]


@pytest.mark.timeout(60)
def test_host_threads_grow_linearly_with_the_devices(no_thread_leak):
    """An all-to-all router over K devices has K*K links; its host threads stay a few per
    device (a pump and a links stream each, besides the device's own), not one per link."""
    k = 8
    with Context(k, backend="cpu", timeout=10) as ctx:
        before = sum(t.name.startswith("groute") for t in threading.enumerate())
        router = Router(ctx.devices, ctx.devices, ring, packet_size=8, ctx=ctx)
        after = sum(t.name.startswith("groute") for t in threading.enumerate())
        assert sum(len(row) for row in router.links) == k * k
        assert after - before <= 2 * k, (before, after)
        want = sorted(((i + 1) % k, i) for i in range(k))
        assert _each_device_sends_its_index(router, ctx) == want


@pytest.mark.timeout(60)
def test_a_ring_router_links_only_what_its_policy_reaches(no_thread_leak):
    """``pairs`` from the policy's reach: K links for a ring, not K*K; an output the router
    has no link to is a clear error; the outputs end once their few links close."""
    from groute.runtime.policies import reach
    k = 4
    with Context(k, backend="cpu", timeout=10) as ctx:
        pairs = [(i, j) for i in range(k) for j in reach(ring, i, list(range(k)))]
        assert pairs == [(i, (i + 1) % k) for i in range(k)]
        assert reach(by_owner, 0, [0, 1, 2]) == (0, 1, 2)
        router = Router(ctx.devices, ctx.devices, ring, pairs=pairs, packet_size=8, ctx=ctx)
        assert [(i, j) for i, j, _ in router.each_link()] == pairs
        arrived = []
        router.outputs[1].add_arrival_listener(lambda: arrived.append(1))
        got = []
        threads = [threading.Thread(target=_collect, args=(router, j, got)) for j in range(k)]
        for t in threads:
            t.start()
        for i, dev in enumerate(ctx.devices):
            router.inputs[i].send(dev.asarray(np.full(3, i, np.int32)))
        stray = Router(ctx.devices[:2], ctx.devices[:2], by_owner, pairs=[(0, 1)], packet_size=8,
                       ctx=ctx, name="stray")
        with pytest.raises(ValueError, match="stray: policy chose output 0 for input 1, which has no link"):
            stray.inputs[1].send(ctx.devices[1].asarray(np.zeros(2, np.int32)), metadata={"owner": 0})
        stray.close()
        router.close()
        for t in threads:
            t.join(20)
        assert router.join(5) and stray.join(5)
        assert sorted((j, int(d[0])) for j, d, _ in got) == sorted(((i + 1) % k, i) for i in range(k))
        assert arrived == [1] and router.routed_elements.sum() == 3 * k


def test_too_many_cpu_devices_is_a_one_line_error():
    with pytest.raises(ValueError, match="at most 64 virtual devices.*got 1000"):
        Context(1000, backend="cpu")


@pytest.mark.timeout(60)
def test_a_router_wait_while_receivers_hold_every_buffer_says_release():
    with Context(2, backend="cpu", timeout=0.5) as ctx:
        router = Router([HOST], ctx.devices, first_available, packet_size=4, num_buffers=1, ctx=ctx)
        for _ in range(2):                      # one packet into each output's only buffer
            router.inputs[0].send(np.zeros(4, np.int32))
        held = [router.outputs[j].receive(timeout=5) for j in range(2)]
        with pytest.raises(WaitTimeout, match=r"hold every receive buffer; release\(\) each"):
            router.inputs[0].send(np.zeros(4, np.int32))
        for p in held:
            p.release()
        router.close()


@pytest.mark.timeout(60)
def test_an_output_receive_that_times_out_says_its_receiver_holds_every_buffer():
    with Context(2, backend="cpu", timeout=10) as ctx:
        router = Router([HOST], ctx.devices[:1], first_available, packet_size=4, num_buffers=1,
                        ctx=ctx)
        router.inputs[0].send(np.zeros(8, np.int32))     # two packets, one buffer
        held = router.outputs[0].receive(timeout=5)
        with pytest.raises(WaitTimeout, match=r"at router output 0 .*the receiver holds all 1 "
                                              r"receive buffers of router\[0->0\]"):
            router.outputs[0].receive(timeout=0.3)
        held.release()
        router.close()


@pytest.mark.timeout(60)
def test_a_batching_router_hands_its_outputs_runs_of_packets():
    with Context(2, backend="cpu", timeout=10) as ctx:
        router = Router([HOST], ctx.devices, broadcast, packet_size=4, num_buffers=3, ctx=ctx,
                        batching=True)
        router.inputs[0].send(np.arange(10, dtype=np.int32))
        router.close()
        for j in range(2):
            got = list(router.outputs[j])
            assert [p.metadata["packets"] for p in got] == [3]     # 3 packets in one segment
            np.testing.assert_array_equal(got[0].wait().data, np.arange(10))
            for p in got:
                p.release()
        assert all(link.stats["copies"] == 1 for _, _, link in router.each_link())


@pytest.mark.timeout(60)
def test_a_broadcast_from_a_device_goes_as_one_sequence_with_one_event(ctx):
    """A broadcasting policy's links from one device share a copy stream; a broadcast that finds
    every destination idle with room is one handle (one event for every copy, of every packet);
    one that finds none queues a send per destination; each destination gets every segment in
    order, with its metadata."""
    from groute.runtime.policies import broadcasts
    assert broadcasts(broadcast) and not broadcasts(first_available)
    a = ctx.devices[0]
    router = Router([a], ctx.devices, broadcast, packet_size=8, num_buffers=2, ctx=ctx)
    assert len({id(link.stream) for _, _, link in router.each_link()}) == 1
    two_packets = np.arange(12, dtype=np.int32)
    one_packet = np.arange(8, dtype=np.int32) + 50
    first = router.inputs[0].send(a.asarray(two_packets), metadata={"n": 0})
    assert len(first.handles) == 1
    second = router.inputs[0].send(a.asarray(one_packet), metadata={"n": 1})   # no room left
    assert len(second.handles) == 3
    got = []
    threads = [threading.Thread(target=_collect, args=(router, j, got)) for j in range(3)]
    for t in threads:
        t.start()
    router.close()
    for t in threads:
        t.join(20)
    for j in range(3):
        mine = [(meta["n"], data) for jj, data, meta in got if jj == j]
        assert [n for n, _ in mine] == [0, 0, 1]
        np.testing.assert_array_equal(np.concatenate([d for _, d in mine]),
                                      np.concatenate([two_packets, one_packet]))
    assert router.routed.tolist() == [[2, 2, 2]] and router.routed_elements.tolist() == [[20, 20, 20]]
    first.wait(5)
    second.wait(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("by_source", [True, False])
def test_a_policy_that_answers_by_the_source_alone_is_asked_once_per_input(by_source):
    """A policy marked ``by_source`` (as broadcast, to_the_others, ring and first_available
    are) is asked on an input's first send and its checked route kept for the next; any other
    policy is asked on every send, since it may read the segment."""
    asked = []

    def to_both(segment, source, destinations):
        asked.append(source)
        return Route(tuple(destinations), "broadcast")
    if by_source:
        to_both.by_source = True
    segs = [np.full(4, i, dtype=np.int32) for i in range(5)]
    with Context(2, backend="cpu", timeout=10) as ctx:
        router, got = _run_router(ctx, to_both, segs)
    assert asked == ([0] if by_source else [0] * 5)
    for j in range(2):
        assert sorted(int(d[0]) for jj, d, _ in got if jj == j) == [0, 1, 2, 3, 4]
    assert router.routed.tolist() == [[5, 5]]


@pytest.mark.timeout(60)
def test_a_kept_route_was_checked_when_first_asked():
    """A ``by_source`` policy's bad answer fails on the first send, not once kept."""
    def nowhere(segment, source, destinations):
        return Route((), "broadcast")
    nowhere.by_source = True
    with Context(2, backend="cpu", timeout=10) as ctx:
        router = Router([HOST], ctx.devices, nowhere, packet_size=8, ctx=ctx, name="r")
        try:
            for _ in range(2):
                with pytest.raises(ValueError, match="allowed no destination"):
                    router.inputs[0].send(np.arange(4, dtype=np.int32))
        finally:
            router.close()


@pytest.mark.timeout(180)
def test_the_router_host_probe_times_a_broadcasts_calls():
    """benchmarks/probes/gpu_router_host.py on CPU devices: both cases run, and the timed calls
    include the router's send, the broadcast's copies and each destination's hand-over."""
    import subprocess
    import sys
    from pathlib import Path
    probe = Path(__file__).resolve().parents[1] / "benchmarks/probes/gpu_router_host.py"
    out = subprocess.run([sys.executable, str(probe), "--backend", "cpu", "--devices", "3",
                          "--sends", "20", "--warmup", "5", "--packet", "4K"],
                         capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Router to 2 device(s): median" in text and "Link to 1 device(s): median" in text
    router_part = text.split("Router to 2 device(s)")[1].split("Link to 1 device(s)")[0]
    assert "Router._route (the whole send)" in router_part
    assert "RouterOutput._deliver                   2.00 calls/send" in router_part
    assert "stream.wait_event                       1.00 calls/send" in router_part


def test_an_arrival_listener_may_be_any_callable_and_a_bound_method_does_not_keep_its_object():
    """A bound method of an object that can be weakly referenced is held weakly (the object
    that listens keeps the router, see RouterOutput); one of an object that cannot (a class
    with __slots__) is held, and called, as any other callable."""
    import gc
    import weakref

    class Slotted:
        __slots__ = ("hits",)

        def __init__(self):
            self.hits = 0

        def hit(self):
            self.hits += 1

    class Plain:
        def __init__(self):
            self.hits = 0

        def hit(self):
            self.hits += 1

    with Context(2, backend="cpu", timeout=10) as ctx:
        router = Router(ctx.devices, ctx.devices, by_owner, packet_size=8, ctx=ctx)
        slotted, plain, calls = Slotted(), Plain(), []
        gone = Plain()
        output = router.outputs[1]
        for fn in (slotted.hit, plain.hit, lambda: calls.append(1), gone.hit):
            output.add_arrival_listener(fn)
        dropped = weakref.ref(gone)
        del gone, fn
        gc.collect()
        assert dropped() is None
        router.inputs[0].send(np.arange(3, dtype=np.int32), metadata={"owner": 1})
        router.close()
        while (pending := output.receive()) is not None:
            pending.release()
        assert slotted.hits == plain.hits == len(calls) == 1
