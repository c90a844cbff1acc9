"""The host side of the persistent kernels' cross-device barrier (groute.apps.peer_barrier): where
those kernels can run (stand-in devices); on CPU virtual devices, its counter only grows between
good runs and is zeroed after a bad one, a failed launch stops the launches that would follow
it, and the end of a run raises what went wrong; on GPUs, the peer traversal takes a timeout
changed after it was built, and the launches wake the links first."""
import time

import numpy as np
import pytest

import groute.apps.peer_barrier as peer_barrier
from groute.apps.peer_barrier import MAX_DEVICES, CrossDeviceBarrier, unavailable
from groute import Context
from groute.graph import load_graph
from support import fake_peer_context, need_gpus


def test_peer_unavailable_names_the_reason():
    assert unavailable(fake_peer_context(2)) is None
    assert unavailable(fake_peer_context(1)) is None
    assert "CPU virtual devices" in unavailable(fake_peer_context(1, backend="cpu"))
    assert "no peer access" in unavailable(fake_peer_context(2, peers=False))
    assert "no NVLink" in unavailable(fake_peer_context(2, atomics=False))
    assert f"1 to {MAX_DEVICES}" in unavailable(fake_peer_context(MAX_DEVICES + 1))


@pytest.fixture
def ctx():
    with Context(3, backend="cpu", timeout=10) as c:
        yield c


@pytest.mark.timeout(30)
def test_counter_advances_by_the_barriers_every_device_crossed(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(4, np.uint64))
    bar.settle([5, 5, 5])
    assert bar.base == 15                       # 3 devices x 5 barriers
    bar.settle([np.uint64(2)] * 3, ok=True)
    assert bar.base == 21


@pytest.mark.timeout(30)
@pytest.mark.parametrize("crossed, ok", [([5, 5, 4], True), ([5, 5, 5], False), ([], True)])
def test_disagreement_failure_or_no_launch_zeroes_the_block(ctx, crossed, ok):
    block = np.full(4, 7, np.uint64)
    bar = CrossDeviceBarrier(ctx.devices, block)
    bar.base = 42
    bar.settle(crossed, ok=ok)
    assert bar.base == 0
    assert not block.any()                      # zeroed on device 0's stream, which was waited for


@pytest.mark.timeout(30)
def test_launch_each_stops_at_the_first_failure_and_returns_it(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(1, np.uint64))
    calls = []

    def launch(i, dev):
        calls.append((i, dev.name))
        if i == 1:
            raise RuntimeError("no room for the grid")
    launched, failure = bar.launch_each(launch)
    assert launched == [0]
    assert isinstance(failure, RuntimeError) and "no room" in str(failure)
    assert [i for i, _ in calls] == [0, 1]      # device 2 was never launched
    assert bar.launch_each(lambda i, dev: None) == ([0, 1, 2], None)


@pytest.mark.timeout(30)
def test_finish_settles_then_raises_the_failure_or_names_who_gave_up(ctx, monkeypatch):
    monkeypatch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 0.5)
    block = np.full(1, 7, np.uint64)
    bar = CrossDeviceBarrier(ctx.devices, block)
    names = dict(what="peer bfs", instead="exchange='host'")
    bar.finish([2, 2, 2], **names)
    assert bar.base == 6 and block.all()        # a good run: the counter goes on
    bar.finish([2, 2, 2], ok=False, **names)    # the app's own check failed: zeroed, no raise
    assert bar.base == 0 and not block.any()
    bar.base = 6
    with pytest.raises(RuntimeError, match=r"^peer bfs: dev1, dev2 waited more than 0.5 s at a "
                                           r"cross-device barrier .*use exchange='host'$"):
        bar.finish([2, 1, 1], aborted=["dev1", "dev2"], **names)
    assert bar.base == 0
    bar.base = 6
    with pytest.raises(KeyError, match="no room"):  # a failed launch first, as it was raised
        bar.finish([2], failure=KeyError("no room"), aborted=["dev0"], **names)
    assert bar.base == 0


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(120)
def test_cuda_peer_traversal_reads_the_timeout_at_each_run(monkeypatch):
    """GROUTE_PEER_BARRIER_TIMEOUT lowered after the solver was built holds for its next run
    (PeerTraversal rewrites the field in its kernels' arguments): a device that never launches
    makes the other give up after 0.5 s, not the default 10 s; the run after is right."""
    need_gpus(2)
    import groute.apps.traversal_peer as traversal_peer
    from groute.apps.bfs import BFS
    g = load_graph("kron:12")
    with BFS(g, backend="cuda", devices=2, partition="random", mode="bsp", exchange="peer",
             timeout=30) as solver:
        good = solver.run(0)
        assert good.stats["exchange"] == "peer"
        monkeypatch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 0.5)
        real = traversal_peer.PeerTraversal._launch
        monkeypatch.setattr(traversal_peer.PeerTraversal, "_launch", lambda self, i, dev, *args:
                            None if i == 1 else real(self, i, dev, *args))
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match="waited more than 0.5 s at a cross-device barrier"):
            solver.run(0)
        assert time.perf_counter() - t0 < 5
        monkeypatch.setattr(traversal_peer.PeerTraversal, "_launch", real)
        np.testing.assert_array_equal(solver.run(0).values, good.values)


@pytest.mark.timeout(30)
def test_cpu_devices_wake_no_links(ctx):
    """The wake-up copy is for NVLink: CPU devices get none, and no buffers."""
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(1, np.uint64))
    assert bar.launch_each(lambda i, dev: None) == ([0, 1, 2], None)
    assert bar._wake is None and bar._woken == {}


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 3], ids=["x2", "x3"])
def test_cuda_links_are_woken_once_allocated_and_joined(k):
    """On CUDA devices a launch long enough after the last run queues the wake copies (each
    device to every other) into buffers allocated once (right after a run, none), and each
    device's compute stream is made to wait for its copies (nothing left pending, also when a
    launch fails); a failure to wake turns waking off instead of failing the launches."""
    need_gpus(k)
    import cupy
    every = list(range(k))
    with Context(k, backend="cuda", timeout=30) as c:
        with c.devices[0].use():
            block = cupy.zeros(1, np.uint64)
        bar = CrossDeviceBarrier(c.devices, block)
        assert bar.launch_each(lambda i, dev: None) == (every, None)
        ptrs = [w.data.ptr for w in bar._wake]
        bar.settle([0] * k)                 # a run just ended: the links are awake
        saved, bar._wake = bar._wake, []    # (a copy into these would raise)
        assert bar.launch_each(lambda i, dev: None) == (every, None) and bar._wake == []
        bar._wake = saved
        bar._last_end -= 1.0                # a second ago: woken again
        assert len(ptrs) == k and bar._woken == {}

        def no_room(i, dev):
            raise KeyError("no room")
        launched, failure = bar.launch_each(no_room)
        assert (launched, type(failure)) == ([], KeyError) and bar._woken == {}
        assert [w.data.ptr for w in bar._wake] == ptrs
        for dev in c.devices:
            dev.compute_stream.record().synchronize()
        bar._wake = [None] * k              # a copy that cannot be made
        assert bar.launch_each(lambda i, dev: None) == (every, None)
        assert bar._wake == ()              # off from now on
