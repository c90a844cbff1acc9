"""Context: device selection, failure propagation within the timeout, shutdown, no leaked threads."""
import threading
import time

import numpy as np
import pytest

from groute import Context, DeviceError
from groute.errors import WaitTimeout


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
    with Context(2, backend="cpu", timeout=5) as ctx:
        dev = ctx.devices[1]

        def work(device):
            if device is dev:
                device.compute_stream.submit(lambda: 1 / 0)
                device.compute_stream.synchronize()
            else:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    ctx.check()
                    time.sleep(0.01)

        with pytest.raises(DeviceError, match="cpu:1"):
            ctx.run(work)


@pytest.mark.timeout(30)
def test_waits_are_bounded():
    with Context(1, backend="cpu", timeout=0.3) as ctx:
        stream = ctx.devices[0].compute_stream
        gate = threading.Event()
        stream.submit(gate.wait, 5)
        with pytest.raises(WaitTimeout, match="event"):
            stream.record().synchronize()
        gate.set()


def test_shutdown_twice_is_harmless_and_threads_end(no_thread_leak):
    ctx = Context(3, backend="cpu")
    ctx.run(lambda d: d.compute_stream.synchronize())
    ctx.shutdown()
    ctx.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        ctx.submit(0, lambda d: None)


def test_run_returns_results_in_device_order():
    with Context(3, backend="cpu") as ctx:
        assert ctx.run(lambda d, k: d.index * k, 10) == [0, 10, 20]


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"devices": 0}, ValueError, ">= 1"),
    ({"devices": [0, 0]}, ValueError, "repeats"),
    ({"devices": []}, ValueError, "empty"),
    ({"backend": "tpu"}, ValueError, "backend"),
    ({"devices": 2, "timeout": -1}, ValueError, "timeout"),
])
def test_bad_arguments(kwargs, exc, msg):
    kwargs.setdefault("backend", "cpu")
    with pytest.raises(exc, match=msg):
        Context(**kwargs)


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
def test_cuda_bad_device_index():
    from groute.device import cuda_device_count
    with pytest.raises(ValueError, match="does not exist"):
        Context(devices=[cuda_device_count()], backend="cuda", logical=False)
