"""Context: device selection, failure propagation within the timeout, shutdown, no leaked threads."""
import threading
import time

import networkx as nx
import numpy as np
import pytest

from groute import HOST, Context, DeviceError, Link, Router, first_available
from groute.errors import ContextStopped, StoppedByFailure, WaitTimeout
from groute.waiting import wait_for
from support import spin

#: the most a run given ``timeout=1`` may take here: far below the 20 s its stuck device would
#: wait and the context's own 30 s, so a timeout not honoured still fails, while a loaded CI
#: machine's scheduling (seconds at worst) does not
SOON = 10


@pytest.mark.timeout(30)
def test_exception_in_one_device_thread_surfaces_in_caller(no_thread_leak):
    ctx = Context(4, backend="cpu", timeout=5)
    started = time.monotonic()

    def work(device):
        if device.index == 2:
            raise ZeroDivisionError("bad vertex")
        ctx.stop_event.wait(30)          # the others would wait much longer than the timeout
        ctx.check()

    with pytest.raises(DeviceError) as info:
        ctx.run(work)
    assert "cpu:2" in str(info.value) and "bad vertex" in str(info.value)
    assert time.monotonic() - started < 5
    ctx.shutdown()


@pytest.mark.timeout(30)
def test_failure_in_a_stream_thread_stops_the_context(no_thread_leak):
    """Nobody waits on the failed stream: only its report to the context can stop the others."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        started = time.monotonic()

        def work(device):
            if device.index == 1:
                device.compute_stream.submit(lambda: 1 / 0)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                ctx.check()
                time.sleep(0.01)

        with pytest.raises(DeviceError, match="cpu:1: ZeroDivisionError") as info:
            ctx.run(work)
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        assert time.monotonic() - started < 5


@pytest.mark.timeout(30)
def test_waits_are_bounded():
    with Context(1, backend="cpu", timeout=0.3) as ctx:
        stream = ctx.devices[0].compute_stream
        gate = threading.Event()
        stream.submit(gate.wait, 5)
        with pytest.raises(WaitTimeout, match="event"):
            stream.record().synchronize()
        gate.set()


def test_a_bounded_run_gives_the_result_the_error_or_up_at_its_timeout():
    """run_bounded: a blocking call of a library (NCCL's) on a thread of its own, waited for
    within the timeout; what it returns or raises comes back on the caller's thread."""
    from groute.waiting import StopSignal, run_bounded
    assert run_bounded(lambda: 7, what="seven", timeout=5) == 7
    with pytest.raises(KeyError, match="inside"):
        run_bounded(lambda: {}["inside"], what="a failing call", timeout=5)
    never = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match="timed out after 0.2 s waiting for a stuck call"):
        run_bounded(never.wait, what="a stuck call", timeout=0.2)
    stop = StopSignal()
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(ContextStopped):
        run_bounded(never.wait, what="a stuck call", timeout=30, stop=stop)
    assert time.monotonic() - t0 < 5
    never.set()


def test_shutdown_twice_is_harmless_and_threads_end(no_thread_leak):
    ctx = Context(3, backend="cpu")
    ctx.run(lambda d: d.compute_stream.synchronize())
    ctx.shutdown()
    ctx.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        ctx.submit(0, lambda d: None)


def test_a_context_dropped_without_shutdown_ends_its_threads(no_thread_leak):
    """Each device's host thread and stream threads wait for work: a context that nobody
    refers to any more, never closed, ends them (a program that forgot ``with`` would
    otherwise keep a few threads per context for good)."""
    ctx = Context(2, backend="cpu")
    assert ctx.run(lambda d: int(d.asarray(np.arange(4)).sum())) == [6, 6]
    del ctx


def test_a_link_on_a_dropped_contexts_devices_works_and_their_threads_end_with_it(
        no_thread_leak):
    """The devices of a context dropped without shutdown stay usable by what holds them (a
    Link made on them); their stream threads end when the last holder lets go."""
    def made_link():
        ctx = Context(2, backend="cpu", timeout=10)
        a, b = ctx.devices
        return Link(a, b, packet_size=1 << 8, num_buffers=2), a

    link, a = made_link()
    link.send(a.asarray(np.arange(1 << 10, dtype=np.int32)))
    link.close()
    got = []
    for pending in link:
        got.append(pending.wait().data.copy())
        pending.release()
    assert np.array_equal(np.concatenate(got), np.arange(1 << 10))
    del link, a, pending


def test_work_submitted_to_a_context_then_dropped_still_runs(no_thread_leak):
    """A context dropped without shutdown ends its threads after what was queued: futures
    still held get their results (nothing is cancelled)."""
    def started():
        ctx = Context(2, backend="cpu")
        slow = ctx.submit(0, lambda d: time.sleep(0.1))
        return [slow] + [ctx.submit(i % 2, lambda d, x=i: 2 * x) for i in range(1, 4)]

    assert [f.result(timeout=10) for f in started()] == [None, 2, 4, 6]


class _Coded(Exception):
    """A user's error whose message reads a slot (a copy made from its args lacks it)."""

    __slots__ = ("code",)

    def __init__(self, code):
        super().__init__(code)
        self.code = code

    def __str__(self):
        return f"code {self.code}"


def test_a_users_error_that_cannot_be_copied_still_stops_the_run_and_reaches_the_caller():
    """The context keeps a copy of a failure without its frames where it can; where a copy
    does not fit the user's class, it keeps the error itself: the run still stops at once
    and the caller gets that error, frames included."""
    def boom():
        raise _Coded(3)

    def on_stream(device):
        device.compute_stream.submit(boom)
        device.compute_stream.record().synchronize()

    def in_function(device):
        if device.index == 0:
            boom()
        while not device.stop_event.is_set():       # stopped by device 0's failure
            time.sleep(0.001)

    with Context(2, backend="cpu", timeout=20) as ctx:
        for fn in (on_stream, in_function):
            t0 = time.monotonic()
            with pytest.raises(DeviceError, match="_Coded: code 3") as info:
                ctx.run(fn)
            assert time.monotonic() - t0 < 5
            assert isinstance(info.value.__cause__, _Coded)
            frames = []
            tb = info.value.__cause__.__traceback__
            while tb is not None:
                frames.append(tb.tb_frame.f_code.co_name)
                tb = tb.tb_next
            assert frames[-1] == "boom"
            ctx.reset()


def test_run_returns_results_in_device_order():
    with Context(3, backend="cpu") as ctx:
        assert ctx.run(lambda d, k: d.index * k, 10) == [0, 10, 20]


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"devices": 0}, ValueError, ">= 1"),
    ({"devices": [0, 0]}, ValueError, "repeats"),
    ({"devices": []}, ValueError, "empty"),
    ({"devices": 1.5}, TypeError, r"devices must be 'auto', a count or a list .*got 1.5"),
    ({"devices": True}, TypeError, r"devices must be .*got True \(bool\)"),
    ({"devices": "x"}, ValueError, r"devices must be .*got 'x'"),
    ({"devices": [0, "a"]}, TypeError, r"devices: a device index is an int, got 'a'"),
    ({"devices": 2 ** 40}, ValueError, "at most 64 virtual devices"),   # not a list of 2**40
    ({"backend": "tpu"}, ValueError, "backend"),
    ({"devices": 2, "timeout": -1}, ValueError, "timeout"),
    ({"devices": 2, "timeout": float("inf")}, ValueError, "finite"),   # nothing waits forever
    ({"devices": 2, "timeout": 1e10}, ValueError, "at most 604800 s"),  # nor past the clocks
    ({"devices": 2, "timeout": 1e300}, ValueError, "at most 604800 s"),
    ({"devices": 2, "timeout": "5"}, TypeError, r"timeout must be a number of seconds or None, got '5'"),
    ({"devices": 2, "timeout": True}, TypeError, r"timeout must be .*got True \(bool\)"),
])
def test_bad_arguments(kwargs, exc, msg):
    kwargs.setdefault("backend", "cpu")
    with pytest.raises(exc, match=msg):
        Context(**kwargs)


def test_a_run_bounded_by_a_timeout_that_is_not_one_says_so():
    with Context(2, backend="cpu") as ctx:
        ran = []
        with pytest.raises(ValueError, match="timeout must be finite positive seconds or None, got -1"):
            ctx.run(ran.append, timeout=-1)          # refused, not run unbounded
        with pytest.raises(TypeError, match="timeout must be a number of seconds or None, got 'x'"):
            ctx.run(ran.append, timeout="x")
        # each device runs its calls in order: had a refused run queued any, they have run by
        # the end of the next one
        assert ctx.run(lambda d: d.index, timeout=5) == [0, 1]
        assert not ran                               # refused before any device started
        with pytest.raises(ValueError, match="got -1"):
            ctx.gather([ctx.submit(0, lambda d: None)], timeout=-1)


def test_submit_takes_a_position_in_the_context_and_gather_its_futures():
    with Context(2, backend="cpu") as ctx:
        for bad, exc in ((-1, IndexError), (2, IndexError), ("a", TypeError), (1.0, TypeError)):
            with pytest.raises(exc, match=r"submit: device_index"):
                ctx.submit(bad, lambda d: d.name)           # -1 is no position from the end
        with pytest.raises(TypeError, match="gather takes the futures submit returned, got int"):
            ctx.gather([5])
        assert ctx.gather(ctx.submit(i, lambda d: d.name) for i in (1, 0)) == ["cpu:1", "cpu:0"]


def test_an_algorithm_given_devices_of_another_type_says_so():
    import groute
    with pytest.raises(TypeError, match=r"devices must be 'auto', a count .*got 1.5 \(float\)"):
        groute.bfs(nx.path_graph(3), 0, devices=1.5, backend="cpu")


def test_the_longest_timeout_runs_and_shuts_down():
    """A week, the longest timeout (groute.config.MAX_TIMEOUT), is a wait every part of the
    runtime can take: a run, a failed run's reset and shutdown (Context(timeout=1e10) raised
    OverflowError at shutdown)."""
    from groute.config import MAX_TIMEOUT
    ctx = Context(2, backend="cpu", timeout=MAX_TIMEOUT)
    try:
        assert ctx.run(lambda d: d.index) == [0, 1]
        with pytest.raises(DeviceError):
            ctx.run(lambda d: 1 / 0)
        assert ctx.run(lambda d: d.index) == [0, 1]
    finally:
        ctx.shutdown()


def test_cuda_backend_without_gpu_says_what_to_do():
    from groute.device import cuda_device_count
    if cuda_device_count():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="backend='cpu'"):
        Context(backend="cuda")


def test_default_is_four_cpu_devices_without_gpu():
    from groute.device import cuda_device_count
    if cuda_device_count():
        pytest.skip("a GPU is present")
    with Context() as ctx:
        assert [d.name for d in ctx.devices] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
        assert ctx.peer_matrix().sum() == 12


def test_device_copy_between_virtual_devices():
    with Context(2, backend="cpu") as ctx:
        a, b = ctx.devices
        src, dst = a.asarray(np.arange(5, dtype=np.int64)), b.empty(5, np.int64)
        b.copy_stream.copy(dst, src)
        b.copy_stream.synchronize()
        np.testing.assert_array_equal(dst, np.arange(5))
        with pytest.raises(ValueError, match="equal size"):
            b.copy_stream.copy(b.empty(4, np.int64), src)


def _fail_on(index, exc):
    def work(device):
        if device.index == index:
            raise exc
        return device.index
    return work


@pytest.mark.timeout(30)
def test_a_failed_run_leaves_the_context_usable(no_thread_leak):
    """After a failure the next run starts clean: no stale error, streams run again, new links
    carry data."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        with pytest.raises(DeviceError, match="cpu:1: KeyError"):
            ctx.run(_fail_on(1, KeyError("x")))
        assert ctx.run(lambda d: d.index) == [0, 1]
        # a stream failure, reported by the run that saw it; then the stream works again
        def fail_stream(device):
            if device.index == 0:
                device.compute_stream.submit(lambda: 1 / 0)
            device.compute_stream.synchronize()
        with pytest.raises(DeviceError, match="cpu:0: ZeroDivisionError"):
            ctx.run(fail_stream)
        out = np.zeros(3)
        def use_stream(device):
            device.compute_stream.submit(out.__setitem__, device.index, 7.0)
            device.compute_stream.synchronize()
        ctx.run(use_stream)
        assert out.tolist() == [7.0, 7.0, 0.0]
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, ctx=ctx)
        link.send(np.arange(3, dtype=np.int32))
        got = link.receive(timeout=5)
        assert got.wait().data.tolist() == [0, 1, 2]
        got.release()
        link.close()


@pytest.mark.timeout(30)
def test_reset_clears_the_failure_the_stop_and_failed_streams():
    with Context(2, backend="cpu", timeout=5) as ctx:
        stream = ctx.devices[1].compute_stream
        stream.submit(lambda: 1 / 0)
        assert ctx.stop_event.wait(5)
        with pytest.raises(DeviceError, match="cpu:1"):
            ctx.check()
        ctx.reset()
        assert not ctx.stopped
        ctx.check()
        stream.submit(lambda: None)
        stream.synchronize(timeout=5)          # no failure left on the stream
        assert ctx.run(lambda d: d.name) == ["cpu:0", "cpu:1"]


@pytest.mark.timeout(30)
def test_a_failure_between_runs_is_raised_once_then_the_context_runs(no_thread_leak):
    with Context(2, backend="cpu", timeout=5) as ctx:
        ctx.devices[0].copy_stream.submit(lambda: [][1])
        assert ctx.stop_event.wait(5)
        with pytest.raises(DeviceError, match="cpu:0: IndexError"):
            ctx.run(lambda d: None)
        assert ctx.run(lambda d: d.index) == [0, 1]


@pytest.mark.timeout(30)
def test_a_solver_runs_again_after_a_failed_run():
    from groute.apps.bfs import BFS
    from groute.graph import load_graph, reference
    g = load_graph("grid:8")
    with BFS(g, backend="cpu", devices=2, partition="contiguous", mode="async", timeout=5) as solver:
        worker = solver.workers[1]
        real = worker._advance
        calls = []

        def advance(*args):
            calls.append(1)
            if len(calls) == 1:
                raise MemoryError("device out of memory")
            return real(*args)
        worker._advance = advance
        with pytest.raises(DeviceError, match="cpu:1: MemoryError"):
            solver.run(0)
        np.testing.assert_array_equal(solver.run(0).values, reference.bfs(g, 0))


@pytest.mark.timeout(30)
def test_run_timeout_ends_near_it_and_names_the_slow_device():
    release = threading.Event()
    with Context(3, backend="cpu", timeout=30) as ctx:
        def work(device):
            if device.index == 2:
                release.wait(20)          # user code that does not watch the context
            else:
                ctx.stop_event.wait(20)   # user code that does
        started = time.monotonic()
        with pytest.raises(DeviceError, match=r"cpu:2: WaitTimeout: .*within 1 s: cpu:2 still"):
            ctx.run(work, timeout=1)
        assert time.monotonic() - started < SOON
        release.set()
        assert ctx.run(lambda d: d.index) == [0, 1, 2]


@pytest.mark.timeout(30)
def test_run_timeout_also_bounds_a_failed_run_and_names_a_device_in_a_wait():
    """run(timeout=1) ends near 1 s when a device fails while another does not notice the stop
    (the failure is raised, not held for the context's timeout); and a device still waiting at
    the deadline is named even though the stop ends its wait."""
    release = threading.Event()
    with Context(2, backend="cpu", timeout=30) as ctx:
        link = Link(ctx.devices[0], ctx.devices[1], packet_size=4, ctx=ctx)

        def wait_for_data(device):
            if device.index == 1:
                link.receive()               # nothing is ever sent: a bounded wait
        started = time.monotonic()
        with pytest.raises(DeviceError, match=r"cpu:1: WaitTimeout: .*within 1 s: cpu:1 still"):
            ctx.run(wait_for_data, timeout=1)
        assert time.monotonic() - started < SOON

        def work(device):
            if device.index == 0:
                time.sleep(0.2)
                raise KeyError("boom")
            release.wait(20)
        started = time.monotonic()
        with pytest.raises(DeviceError, match="cpu:0: KeyError") as info:
            ctx.run(work, timeout=1)
        assert time.monotonic() - started < SOON and isinstance(info.value.__cause__, KeyError)
        release.set()
        assert ctx.run(lambda d: d.index) == [0, 1]


@pytest.mark.timeout(30)
def test_shutdown_is_bounded_by_the_timeout_and_names_the_stuck_device():
    release = threading.Event()
    try:
        ctx = Context(2, backend="cpu", timeout=1)
        ctx.submit(1, lambda d: release.wait(20))
        time.sleep(0.1)
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match=r"cpu:1 \(running .*lambda.*\) still running"):
            ctx.shutdown()
        assert time.monotonic() - started < SOON
        # leaving a with block on an error: that error comes out, the stuck device is logged
        with pytest.raises(KeyError):
            with Context(1, backend="cpu", timeout=1) as ctx:
                ctx.submit(0, lambda d: release.wait(20))
                time.sleep(0.1)
                raise KeyError("the user's error")
    finally:
        release.set()


@pytest.mark.timeout(30)
def test_a_device_still_running_after_a_failure_makes_the_context_say_it_is_unusable():
    release = threading.Event()
    try:
        with pytest.raises(WaitTimeout):
            with Context(2, backend="cpu", timeout=1) as ctx:
                def work(device):
                    if device.index == 0:
                        raise ValueError("bad input")
                    release.wait(20)
                with pytest.raises(DeviceError, match="cpu:0: ValueError"):
                    ctx.run(work)
                with pytest.raises(WaitTimeout, match=r"could not be reset: .*cpu:1 \(running"):
                    ctx.run(lambda d: None)
                with pytest.raises(RuntimeError, match="could not be reset"):
                    ctx.run(lambda d: None)
    finally:
        release.set()


@pytest.mark.timeout(30)
def test_a_wait_ended_by_a_failure_names_the_device_and_the_cause():
    with Context(2, backend="cpu", timeout=10) as ctx:
        a, b = ctx.devices
        link = Link(a, b, packet_size=4, ctx=ctx)
        ctx.submit(1, lambda d: 1 / 0)
        started = time.monotonic()
        with pytest.raises(StoppedByFailure, match="cpu:1: ZeroDivisionError") as info:
            link.receive()
        assert time.monotonic() - started < 5
        assert isinstance(info.value, ContextStopped) and isinstance(info.value, DeviceError)
        assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.gpu
def test_cuda_context_basics():
    with Context(1, backend="cuda") as ctx:
        d = ctx.devices[0]
        x = d.asarray(np.arange(10, dtype=np.int32))
        y = d.empty(10, np.int32)
        d.compute_stream.copy(y, x)
        d.compute_stream.synchronize()
        np.testing.assert_array_equal(d.to_host(y), np.arange(10))
        assert d.properties()["multiprocessors"] > 0


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_cuda_to_host_waits_for_the_compute_streams_kernels():
    """An array written by a kernel still queued behind a slow one on the compute stream reads
    back as written (a copy on CuPy's default stream would read it before)."""
    import cupy
    with Context(1, backend="cuda") as ctx:
        d = ctx.devices[0]
        for _ in range(3):
            y = d.zeros(1 << 20, np.int32)
            d.compute_stream.synchronize()
            spin(d, "compute", 0.1)
            with d.on_compute():
                y += cupy.arange(1 << 20, dtype=np.int32)
            np.testing.assert_array_equal(d.to_host(y), np.arange(1 << 20))


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_cuda_uploads_and_fills_are_ordered_with_the_compute_streams_kernels():
    """Device.asarray, zeros and full run on the compute stream: behind a slow kernel on
    CuPy's default stream they are not held back, and a kernel queued after them on the
    compute stream reads what they wrote (on the default stream they would land after it)."""
    with Context(1, backend="cuda") as ctx:
        d = ctx.devices[0]
        n = 1 << 20
        for _ in range(3):
            spin(d, "default", 0.1)
            x = d.asarray(np.arange(n, dtype=np.int32))
            zero, seven = d.zeros(n, np.int32), d.full(n, 7, np.int32)
            with d.on_compute():
                total = x + zero + seven
            np.testing.assert_array_equal(d.to_host(total), np.arange(n) + 7)


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_cuda_a_host_to_host_copy_comes_after_the_streams_earlier_copies():
    """A copy between two host arrays on a CUDA stream runs in its order: after a copy into its
    source queued behind a slow kernel (run at once, it would copy the source's old bytes)."""
    with Context(1, backend="cuda") as ctx:
        d = ctx.devices[0]
        n = 1 << 20
        x = d.asarray(np.arange(n, dtype=np.int32))
        staged, out = d.host_buffer(n, np.int32), np.zeros(n, np.int32)
        staged[:] = -1
        spin(d, "compute", 0.1)
        d.compute_stream.copy(staged, x)
        d.compute_stream.copy(out, staged)
        d.compute_stream.synchronize()
        np.testing.assert_array_equal(out, np.arange(n))


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_cuda_to_host_behind_a_kernel_that_does_not_end_times_out_naming_the_device():
    """A read-back waits for the compute stream's work with the bounded wait: a kernel that
    runs past the context's timeout (one waiting for this thread would never end) makes it
    raise, naming the device, instead of blocking the thread."""
    from support import spin
    with Context(1, backend="cuda", timeout=0.5) as ctx:
        d = ctx.devices[0]
        x = d.zeros(4, np.int32)
        spin(d, "compute", 3.0)
        t0 = time.monotonic()
        with pytest.raises((WaitTimeout, DeviceError), match="cuda:0"):
            d.to_host(x)
        assert time.monotonic() - t0 < 2.0
        d.compute_stream.synchronize(timeout=10)


@pytest.mark.gpu
def test_cuda_bad_device_index():
    from groute.device import cuda_device_count
    with pytest.raises(ValueError, match="does not exist"):
        Context(devices=[cuda_device_count()], backend="cuda", logical=False)


@pytest.mark.timeout(30)
def test_a_plain_stop_is_reported_once_then_the_context_runs():
    with Context(2, backend="cpu", timeout=5) as ctx:
        ctx.stop_event.set()                 # a stop with no failure behind it
        with pytest.raises(ContextStopped, match="stopped"):
            ctx.run(lambda d: None)
        assert ctx.run(lambda d: d.index) == [0, 1]


@pytest.mark.timeout(60)
def test_a_host_clocked_run_ends_by_polling_without_sleeping(monkeypatch):
    """On several devices DeviceTimer reads the clock after a wait that polls without sleeping
    (END_SPIN_S): the back-off's doubling sleeps would read a sub-millisecond run at the next
    poll, up to twice its length. The wait before the start may sleep."""
    from groute.device.cpu import CPUEvent
    from groute.solver import END_SPIN_S, DeviceTimer
    spins = []
    real = CPUEvent.synchronize

    def synchronize(self, timeout=None, *, spin=0.0):
        spins.append(spin)
        return real(self, timeout, spin=spin)

    def keep_streams_busy(ctx):        # idle streams are not waited for at all
        for device in ctx.devices:
            for stream in (device.compute_stream, device.copy_stream):
                stream.submit(time.sleep, 0.05)

    with Context(devices=2, backend="cpu") as ctx:
        monkeypatch.setattr(CPUEvent, "synchronize", synchronize)
        keep_streams_busy(ctx)
        with DeviceTimer(ctx) as timer:
            started = len(spins)
            ctx.submit(1, lambda device: None).result()
            keep_streams_busy(ctx)
        assert END_SPIN_S > 0 and started == 4 and spins[:started] == [0.0] * 4
        assert spins[started:] == [END_SPIN_S] * 4      # two devices, two streams each
        assert timer.seconds >= 0


@pytest.mark.timeout(30)
def test_a_wait_timed_out_on_a_device_running_user_code_names_that_code():
    """A device stuck in the user's code (a functor's NumPy callable) makes the others' waits
    time out; the failure names that code and its device, with the wait as its cause, not the
    wait alone (a Link's 'release PendingSegments', a counter's 'waiting for work')."""
    from groute.waiting import wait_for
    ctx = Context(2, backend="cpu", timeout=1)

    def work(device):
        if device.index == 1:
            with device.running("slow's numpy callable in advance(slow)"):
                ctx.stop_event.wait(30)          # until the others' failure stops the context
            return
        wait_for(lambda: False, timeout=ctx.timeout, what="a packet from cpu:1")

    with pytest.raises(DeviceError) as info:
        ctx.run(work)
    err = info.value
    assert err.device == "cpu:1" and isinstance(err.__cause__, WaitTimeout), repr(err)
    assert str(err).startswith("cpu:1: WaitTimeout: slow's numpy callable in advance(slow) has "
                               "been running on cpu:1 for "), str(err)
    assert "cpu:0 timed out waiting for it: a functor slower than the timeout (1 s)" in str(err)
    assert "a packet from cpu:1" in str(err.__cause__.__cause__)
    assert ctx.run(lambda d: d.user_code) == [None, None]       # and the context runs again
    ctx.shutdown()


@pytest.mark.timeout(30)
def test_reset_waits_for_work_still_queued_behind_a_peers_event():
    """A stream that has not failed may still hold work of the stopped run: here a wait for a
    peer's event whose stream fails only later. Reset drains every stream, failed or not,
    before clearing the failures, so that failure does not land in the next run."""
    import threading
    from groute import Context
    with Context(2, backend="cpu", timeout=5) as ctx:
        d0, d1 = ctx.devices
        gate = threading.Event()

        def fails_later():
            gate.wait(5)
            raise RuntimeError("a step of the stopped run, failing late")
        d1.compute_stream.submit(fails_later)
        d0.compute_stream.wait_event(d1.compute_stream.record())
        ctx.fail("cpu:1", RuntimeError("the run failed"))
        threading.Timer(0.3, gate.set).start()
        ctx.reset()
        ctx.synchronize()           # the late failure was the stopped run's, drained by reset
        assert ctx.run(lambda device: device.index) == [0, 1]


def test_a_stop_by_a_device_error_names_its_device_once():
    """A wait stopped by a failure that is already a DeviceError of the same device (another
    rank's RankFailed, a device's own) says the device once, then the original error; a
    failure of another kind keeps its type's name."""
    from groute.errors import DeviceError, StoppedByFailure
    from groute.waiting import StopSignal, stopped
    stop = StopSignal()
    stop.failure = ("cpu:1 (rank 1)", DeviceError("cpu:1 (rank 1)", "KeyError: 'x'"))
    err = stopped(stop, "waiting for the exchange")
    assert isinstance(err, StoppedByFailure)
    assert str(err) == "cpu:1 (rank 1): KeyError: 'x' (waiting for the exchange)"
    stop.failure = ("cpu:0", ValueError("bad"))
    assert str(stopped(stop, "waiting")) == "cpu:0: ValueError: bad (waiting)"


@pytest.mark.parametrize("bad", ["x", [0, 1], 2])
def test_an_algorithm_given_something_else_than_a_context_says_so(bad):
    """``ctx=`` takes a Context (or None): anything else is a TypeError naming ctx, not an
    AttributeError from deep inside the device rule."""
    import groute
    from groute.graph import load_graph
    g = load_graph("kron:6", cache=False)
    import networkx as nx
    G = nx.karate_club_graph()
    for run in (lambda: groute.bfs(g, 0, ctx=bad), lambda: groute.pagerank(g, ctx=bad),
                lambda: groute.connected_components(g, ctx=bad),
                lambda: groute.core_number(G, ctx=bad),
                lambda: groute.betweenness_centrality(G, ctx=bad),
                lambda: groute.louvain_communities(G, ctx=bad),
                lambda: groute.asyn_lpa_communities(G, ctx=bad)):
        with pytest.raises(TypeError, match=r"ctx must be a groute Context .* got "):
            run()


@pytest.mark.timeout(30)
def test_links_made_after_a_failed_run_carry_the_next_runs_packets(no_thread_leak):
    """A Link or Router made between a failed run and the next (as the guide says: make new
    ones) belongs to the next run: the context is reset when it is made, not after, so it is
    not ended by the stop of the run before."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        a, b = ctx.devices
        for make in (lambda: Link(a, b, 4, 2, ctx=ctx),
                     lambda: Router([a], [b], first_available, packet_size=4, ctx=ctx)):
            with pytest.raises(DeviceError, match="ZeroDivisionError"):
                ctx.run(lambda d: 1 / d.index)
            channel = make()
            receiving = channel.outputs[0] if isinstance(channel, Router) else channel
            sending = channel.inputs[0] if isinstance(channel, Router) else channel

            def work(device):
                if device.index == 0:
                    sending.send(device.asarray(np.arange(10, dtype=np.int32))).wait()
                    channel.close()
                    return None
                got = []
                for pending in receiving:
                    got += pending.wait().data.tolist()
                    pending.release()
                return got
            assert ctx.run(work)[1] == list(range(10))


@pytest.mark.timeout(30)
def test_a_shut_down_context_makes_no_links(no_thread_leak):
    ctx = Context(2, backend="cpu", timeout=5)
    a, b = ctx.devices
    ctx.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        Link(a, b, 4, ctx=ctx)
    with pytest.raises(RuntimeError, match="shut down"):
        Router([a], [b], first_available, packet_size=4, ctx=ctx)
    with pytest.raises(RuntimeError, match="cpu:0 is closed"):      # without the context
        Link(a, b, 4)


@pytest.mark.timeout(30)
def test_a_device_function_that_waits_for_its_own_thread_is_told_so_at_once():
    """run, shutdown, or a gather of work queued on the calling device's own host thread would
    wait for the function that calls them: each raises at once, naming the device."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        with pytest.raises(DeviceError, match="Context.run called from a device function"):
            ctx.run(lambda d: ctx.run(lambda e: 1))
        with pytest.raises(DeviceError, match="Context.shutdown called from a device function"):
            ctx.run(lambda d: ctx.shutdown())

        def gather_own(device):
            return ctx.gather([ctx.submit(device.index, lambda e: 1)])
        with pytest.raises(DeviceError, match="gather called from a device function on cpu:"):
            ctx.run(gather_own)

        def gather_other(device):       # another device's thread, free by then: fine
            if device.index == 0:
                return ctx.gather([ctx.submit(1, lambda e: e.index)])[0]
        assert ctx.run(gather_other) == [1, None]
        with pytest.raises(TypeError, match="run: fn is called as fn"):
            ctx.run(5)
        assert ctx.run(lambda d: d.index) == [0, 1]


@pytest.mark.timeout(30)
def test_device_functions_waiting_for_each_others_threads_time_out_naming_them():
    """Each device's function gathers work queued on the other's thread, which is busy with the
    other function: work a gather in a device function waits for must start within the
    context's timeout. Work that has started is waited for as long as it runs."""
    with Context(2, backend="cpu", timeout=1) as ctx:
        def gather_other(device):
            return ctx.gather([ctx.submit(1 - device.index, lambda e: e.index)])[0]
        started = time.monotonic()
        with pytest.raises(DeviceError, match=r"cpu:\d: WaitTimeout: a gather in a device "
                                              r"function on cpu:\d waited 1 s for work "
                                              r"submitted to cpu:\d to start"):
            ctx.run(gather_other)
        assert time.monotonic() - started < SOON
        assert ctx.run(lambda d: d.index) == [0, 1]

        def gather_long(device):        # longer than the timeout, on a free thread: fine
            if device.index == 0:
                return ctx.gather([ctx.submit(1, lambda e: time.sleep(1.6) or "slow")])[0]
        assert ctx.run(gather_long) == ["slow", None]


@pytest.mark.timeout(30)
def test_a_link_made_by_another_thread_waits_for_the_running_computation_to_reset():
    """A thread that makes a Link on a context stopped by another thread's computation, still
    under way, waits for that computation to end before resetting the context (a reset under
    it cleared its stop and its failures)."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        a, b = ctx.devices
        made = []
        with ctx.exclusive():
            with pytest.raises(DeviceError, match="ZeroDivisionError"):
                ctx.run(lambda d: 1 / d.index)
            maker = threading.Thread(target=lambda: made.append(Link(a, b, 4, 2, ctx=ctx)))
            maker.start()
            time.sleep(0.3)
            assert ctx.stopped and not made     # the computation still has its turn
        maker.join(5)
        assert made and not ctx.stopped
        made[0].close()


class _NeedsTwo(Exception):
    """An error whose constructor takes other arguments than the args it keeps."""

    def __init__(self, code, text):
        super().__init__(f"{code}: {text}")
        self.code = code


@pytest.mark.parametrize("kept", [
    ValueError("bad value"),
    DeviceError("cpu:1", "ValueError: boom"),
    WaitTimeout("timed out after 1 s waiting for x"),
    StoppedByFailure("cpu:0", "ValueError: boom (link0 stopped)"),
    _NeedsTwo(7, "seven"),
], ids=lambda e: type(e).__name__)
def test_a_kept_error_is_raised_again_as_a_copy_that_says_the_same(kept):
    """What a link or a context keeps to raise to every later caller goes out as a fresh copy
    (each raise would add its frames to the kept one): same type, message, attributes and
    cause, and the kept error's traceback untouched."""
    from groute.errors import again
    cause = OSError("the original")
    kept.__cause__ = cause
    fresh = again(kept)
    assert fresh is not kept and type(fresh) is type(kept)
    assert str(fresh) == str(kept) and fresh.args == kept.args
    assert vars(fresh) == vars(kept) and fresh.__cause__ is cause
    with pytest.raises(type(kept)):
        raise again(kept)
    assert kept.__traceback__ is None


@pytest.mark.timeout(30)
def test_a_slowed_cpu_device_stops_waiting_at_a_stop():
    """A device slowed to many seconds per task (``cpu_delays``) slept them out after its run
    had failed: the reset before the next run waited for the queued task's delay, gave up and
    left the context unusable."""
    t0 = time.monotonic()
    with Context(1, backend="cpu", timeout=0.5, cpu_delays=[60]) as ctx:
        def slow(device):
            device.compute_stream.submit(lambda: None)
            device.compute_stream.synchronize()
        with pytest.raises(DeviceError, match="WaitTimeout"):
            ctx.run(slow)
        ctx.devices[0].delay = 0.0
        assert ctx.run(lambda device: device.name) == ["cpu:0"]
    assert time.monotonic() - t0 < 10


#: run in a process of its own: a SIGINT from a timer thread, as Ctrl-C, while a context runs
_INTERRUPTED = r"""
import os, signal, threading, time
import groute
from groute import Context
from groute.graph import load_graph
from groute.waiting import wait_for


def interrupt_after(seconds):
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT)).start()


ctx = Context(4, backend="cpu", timeout=8)
never = threading.Event()
interrupt_after(0.3)
try:
    ctx.run(lambda d: wait_for(never.is_set, what="a peer", stop=d.stop_event, timeout=8))
except KeyboardInterrupt:
    print("run interrupted, stopped:", ctx.stopped)
t = time.monotonic()
print("next run:", ctx.run(lambda d: d.index), "in", round(time.monotonic() - t) < 2)

g = load_graph("grid:300")
first = groute.bfs(g, 0, backend="cpu", devices=4, ctx=ctx, mode="async").values
interrupt_after(0.2)
try:
    for _ in range(100):
        groute.bfs(g, 0, backend="cpu", devices=4, ctx=ctx, mode="async")
except KeyboardInterrupt:
    print("bfs interrupted")
print("next bfs equal:",
      (groute.bfs(g, 0, backend="cpu", devices=4, ctx=ctx, mode="async").values == first).all())

ctx.submit(0, lambda d: time.sleep(1.5))
interrupt_after(0.3)
try:
    ctx.shutdown()
except KeyboardInterrupt:
    print("shutdown interrupted")
ctx.shutdown()
time.sleep(0.5)
print("threads left:", threading.active_count())
"""


@pytest.mark.timeout(120)
def test_an_interrupt_stops_the_run_and_the_next_one_starts_clean():
    """Ctrl-C during a run left the devices running: the next run queued behind them and
    failed with the interrupted one's timeout, a solver's next run with a LinkClosed from the
    interrupted one's clean-up; a shutdown cut short left every stream thread behind, and a
    second shutdown did not finish it."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _INTERRUPTED], capture_output=True, text=True,
                         timeout=100)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "run interrupted, stopped: True", "next run: [0, 1, 2, 3] in True", "bfs interrupted",
        "next bfs equal: True", "shutdown interrupted", "threads left: 1"], out.stderr[-3000:]


@pytest.mark.timeout(60)
def test_host_code_failing_between_device_calls_stops_their_work(no_thread_leak):
    """A computation whose own thread raised while its device functions waited left them
    waiting: the next run queued behind them until the timeout."""
    never = threading.Event()
    with Context(3, backend="cpu", timeout=20) as ctx:
        with pytest.raises(ValueError, match="host side"):
            with ctx.exclusive():
                for i in range(3):
                    ctx.submit(i, lambda d: wait_for(never.is_set, what="a peer",
                                                     stop=d.stop_event))
                raise ValueError("host side")
        t0 = time.monotonic()
        assert ctx.run(lambda d: d.index) == [0, 1, 2]
        assert time.monotonic() - t0 < SOON


@pytest.mark.timeout(60)
def test_work_a_shutdown_cancelled_is_not_waited_for():
    """gather waited its whole timeout for functions shutdown had cancelled (a future
    cancelled without notice is never done to concurrent.futures.wait); work submitted
    after a thread was told to end was queued behind its end, never run."""
    ctx = Context(2, backend="cpu", timeout=30)
    futures = [ctx.submit(0, lambda d: time.sleep(0.3)) for _ in range(3)]
    threading.Timer(0.1, ctx.shutdown).start()
    t0 = time.monotonic()
    with pytest.raises(ContextStopped, match="the context was shut down"):
        ctx.gather(futures)
    assert time.monotonic() - t0 < SOON
    late = ctx._workers[1].submit(lambda: None)
    assert late.cancelled()


@pytest.mark.timeout(30)
def test_a_failure_whose_message_cannot_be_made_still_names_its_device():
    class BadStr(Exception):
        def __str__(self):
            raise RuntimeError("no message")

    def fn(device):
        if device.index == 3:
            raise BadStr()

    with Context(4, backend="cpu", timeout=5) as ctx:
        with pytest.raises(DeviceError, match=r"cpu:3: BadStr: <its message could not be made"
                                              r": RuntimeError in __str__>") as info:
            ctx.run(fn)
        assert isinstance(info.value.__cause__, BadStr)


def test_every_timeout_is_checked_alike():
    """10**400 overflowed inside math.isfinite; synchronize read 0 and False as the default;
    reset took any timeout while the context ran."""
    with pytest.raises(ValueError, match="at most 604800 s"):
        Context(1, backend="cpu", timeout=10**400)
    with Context(2, backend="cpu", timeout=5) as ctx:
        for bad, error in [(0, ValueError), (0.0, ValueError), (np.int64(0), ValueError),
                           (False, TypeError)]:
            with pytest.raises(error, match="timeout must be"):
                ctx.synchronize(timeout=bad)
        for bad, error in [(-1, ValueError), (float("nan"), ValueError), ("x", TypeError),
                           (True, TypeError)]:
            with pytest.raises(error, match="timeout must be"):
                ctx.reset(timeout=bad)
        ctx.synchronize(timeout=1)


@pytest.mark.timeout(30)
def test_shutdown_names_only_the_devices_whose_work_runs_on(caplog):
    """A shutdown without a failure spoke of "the failed run's work", and named an idle
    device that the first had left no time; a tiny timeout made an idle context's shutdown
    raise that its devices were stuck."""
    ctx = Context(2, backend="cpu", timeout=0.3)
    ctx.devices[0].compute_stream.submit(time.sleep, 1.5)
    with caplog.at_level("WARNING", logger="groute.runtime.context"):
        ctx.shutdown()
    warned = [r.getMessage() for r in caplog.records]
    assert warned == ["cpu:0: the work queued on its streams had not ended in time"]
    for _ in range(5):
        Context(4, backend="cpu", timeout=1e-6).shutdown()


@pytest.mark.timeout(60)
def test_a_device_failure_before_the_callers_own_error_is_raised_by_the_next_run():
    """A device function failed, then the caller's code raised an error of its own: the
    context counted the device's failure as reported, and the next run returned normally."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        with pytest.raises(KeyError):
            with ctx.exclusive():
                ctx.submit(1, lambda d: 1 / 0)
                wait_for(lambda: ctx._error is not None, what="the failure", timeout=5)
                raise KeyError("the caller's")
        with pytest.raises(DeviceError, match="cpu:1: ZeroDivisionError"):
            ctx.run(lambda d: d.index)
        assert ctx.run(lambda d: d.index) == [0, 1]


@pytest.mark.timeout(60)
def test_an_error_of_the_callers_own_with_nothing_running_leaves_the_context_as_it_was():
    """On the CPU backend a stream never said it was idle, so every error leaving a
    computation stopped the context: a link the caller had made was stopped with it."""
    with Context(2, backend="cpu", timeout=5) as ctx:
        link = Link(*ctx.devices, packet_size=4, ctx=ctx)
        with pytest.raises(KeyError):
            with ctx.exclusive():
                ctx.run(lambda d: d.compute_stream.submit(time.sleep, 0.01))
                ctx.synchronize()
                raise KeyError("the caller's")
        assert not ctx.stopped
        link.send(np.arange(3, dtype=np.int32))
        got = link.receive(timeout=5)
        assert got.wait().data.tolist() == [0, 1, 2]
        got.release()
        link.close()


@pytest.mark.timeout(60)
def test_an_interrupted_run_waits_for_its_work_once():
    """Ctrl-C during run waited the timeout for the work it left twice: once in gather, once
    as the run's turn ended."""
    ctx = Context(1, backend="cpu", timeout=1)
    ended = threading.Event()

    def deaf(device):          # does not notice the stop: the wait for it lasts the timeout
        time.sleep(2.5)
        ended.set()

    try:
        threading.Timer(0.3, _interrupt_main).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            ctx.run(deaf)
        took = time.monotonic() - t0
        assert took < 2.0, took
    finally:
        ended.wait(10)
        ctx.shutdown()


def _interrupt_main():
    import _thread
    _thread.interrupt_main()


@pytest.mark.timeout(60)
def test_an_interrupt_caught_inside_the_callers_block_still_stops_the_work_it_left():
    """An interrupted gather inside the caller's own exclusive block left its work running
    when the block caught the interrupt: the next run queued behind it."""
    with Context(2, backend="cpu", timeout=10) as ctx:
        def poll(device):
            wait_for(lambda: False, what="nothing", timeout=5, stop=ctx.stop_event)

        with ctx.exclusive():
            futures = [ctx.submit(i, poll) for i in range(2)]
            threading.Timer(0.3, _interrupt_main).start()
            try:
                ctx.gather(futures)
            except KeyboardInterrupt:
                pass
            assert ctx.stopped and not any(w.busy for w in ctx._workers)
        t0 = time.monotonic()
        assert ctx.run(lambda d: d.index) == [0, 1]
        assert time.monotonic() - t0 < 2


def test_a_cpu_stream_is_idle_once_what_was_put_before_has_run():
    with Context(1, backend="cpu", timeout=5) as ctx:
        stream = ctx.devices[0].compute_stream
        assert stream.idle()
        gate = threading.Event()
        stream.submit(gate.wait, 5)
        assert not stream.idle()
        gate.set()
        stream.synchronize()
        assert stream.idle()
        stream.submit(lambda: 1 / 0)
        with pytest.raises(DeviceError, match="ZeroDivisionError"):
            wait_for(stream.idle, what="the failed stream", timeout=5)
