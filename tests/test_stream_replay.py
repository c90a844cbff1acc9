"""``Stream.recorded``: a fixed sequence of work submitted once and replayed after (the CPU
backend calls it again; a CUDA stream captures it into a graph, launched in one call), what
CC's phases run through (``DeviceCC.replay``). The CUDA capture's bookkeeping is checked here
with a stand-in for CuPy's stream; the real capture on a GPU."""
from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from groute import Context


@pytest.mark.timeout(30)
def test_the_cpu_backend_submits_the_recorded_work_each_time_in_stream_order():
    with Context(1, backend="cpu", timeout=10) as ctx:
        dev = ctx.devices[0]
        x = dev.zeros(4, np.int64)
        stream = dev.compute_stream

        def work():
            stream.submit(np.add, x, 1, out=x)
            stream.submit(np.multiply, x, 2, out=x)
        again = stream.recorded(work)
        stream.synchronize()
        assert x.tolist() == [2] * 4
        again()
        again()
        stream.synchronize()
        assert x.tolist() == [14] * 4           # ((2 + 1) * 2 + 1) * 2


class _RawStream:
    """CuPy's stream as the capture sees it: the calls made on it, and a capture that fails
    at its end when ``fail_end`` says so."""

    def __init__(self, fail_end=None):
        self.calls, self.capturing, self.fail_end = [], False, fail_end

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def begin_capture(self):
        self.calls.append("begin")
        self.capturing = True

    def end_capture(self):
        self.calls.append("end")
        self.capturing = False
        if self.fail_end is not None:
            raise self.fail_end
        return SimpleNamespace(launch=lambda stream: self.calls.append(("launch", stream)))


class CUDARuntimeError(Exception):
    """What CuPy raises for a failed CUDA call, told by name and ``status`` (no GPU here)."""

    def __init__(self, status, text):
        super().__init__(text)
        self.status = status


#: CUDA's refusal of an operation while its stream captures, and a sticky fault
REFUSED = CUDARuntimeError(900, "cudaErrorStreamCaptureUnsupported: operation not permitted "
                                "when stream is capturing")
TRAP = CUDARuntimeError(719, "cudaErrorLaunchFailure: unspecified launch failure")


class _FakeGPU(SimpleNamespace):
    """Referable weakly, as a real device is (by its streams)."""


def _stream(raw):
    from groute.device import cuda
    stream = object.__new__(cuda.CUDAStream)
    stream.raw, stream.name = raw, "compute"
    device = _FakeGPU(name="cuda:0", broken=None, use=contextlib.nullcontext)
    for method in ("note_failure", "broken_note"):
        setattr(device, method, getattr(cuda.CUDADevice, method).__get__(device))
    stream.device = device
    stream.fake_device = device     # the stream refers to its device weakly: kept here
    return stream


@pytest.mark.timeout(30)
def test_a_cuda_stream_runs_the_work_then_captures_it_and_replays_the_graph():
    """The work is submitted as it is (a one-shot call captures nothing); replayed the first
    time, its calls are captured (while the stream captures, nothing runs) and the graph
    launched on the stream, and each later replay is one launch."""
    raw = _RawStream()
    stream = _stream(raw)
    seen = []
    again = stream.recorded(lambda: seen.append(raw.capturing))
    assert seen == [False] and raw.calls == []
    again()
    assert seen == [False, True] and raw.calls == ["begin", "end", ("launch", raw)]
    again()
    assert seen == [False, True] and raw.calls[3:] == [("launch", raw)]


@pytest.mark.timeout(30)
def test_work_that_cannot_be_captured_is_submitted_call_by_call_with_a_warning(caplog):
    """A capture CUDA refuses (the work did something a capture cannot hold, told at the
    work's call or at the capture's end) is dropped: that replay and every later one submit
    the work call by call, and a warning names the stream and CUDA's error."""
    for fail_in_work, fail_end in ((True, None), (False, REFUSED)):
        raw = _RawStream(fail_end=fail_end)
        stream = _stream(raw)
        calls = []

        def work():
            calls.append(raw.capturing)
            if raw.capturing and fail_in_work:
                raise REFUSED
        again = stream.recorded(work)
        with caplog.at_level(logging.WARNING, logger="groute.device.cuda"):
            again()
        assert raw.calls == ["begin", "end"] and not raw.capturing
        assert "could not be captured" in caplog.text and "CUDAStream cuda:0/compute" in caplog.text
        assert "CUDARuntimeError 900" in caplog.text
        assert calls == [False, True, False]
        again()
        assert calls == [False, True, False, False] and raw.calls == ["begin", "end"]
        assert stream.device.broken is None
        caplog.clear()


@pytest.mark.timeout(30)
def test_a_device_failure_during_the_capture_is_the_device_s_error():
    """Anything else that fails while the work is captured is a failure of the device, raised
    as a submit raises it (a sticky fault marks the device broken), the capture ended; a
    broken device is refused before any capture."""
    from groute import DeviceError
    for fail_in_work, fail_end in ((True, None), (False, TRAP)):
        raw = _RawStream(fail_end=fail_end)
        stream = _stream(raw)

        def work():
            if raw.capturing and fail_in_work:
                raise TRAP
        again = stream.recorded(work)
        with pytest.raises(DeviceError, match=r"^cuda:0: CUDARuntimeError: cudaErrorLaunch"):
            again()
        assert raw.calls == ["begin", "end"] and not raw.capturing
        assert stream.device.broken is not None
        with pytest.raises(DeviceError, match="refused"):
            again()
        assert raw.calls == ["begin", "end"]


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_a_captured_graph_replays_the_kernels_on_the_arrays_as_they_are_then():
    """On a GPU: the work of two kernels recorded once and replayed reads and writes the
    arrays' current contents each time (the graph holds their addresses, not their values),
    after other work queued between the replays."""
    from support import skip_if_missing
    skip_if_missing("cuda", 1)
    with Context(1, backend="cuda", timeout=20) as ctx:
        dev = ctx.devices[0]
        stream = dev.compute_stream
        with dev.on_compute():
            x = dev.xp.zeros(1 << 16, dev.xp.int64)
            y = dev.xp.zeros_like(x)

        def work():
            def kernels():
                x.__iadd__(1)
                dev.xp.multiply(x, 3, out=y)
            stream.submit(kernels)
        again = stream.recorded(work)
        for i in range(5):
            again()
            stream.submit(lambda: x.__iadd__(10))
        stream.synchronize()
        assert again.launch is not again.work       # a graph, not the calls again
        assert int(dev.to_host(x)[7]) == 6 + 5 * 10
        assert int(dev.to_host(y)[7]) == 3 * (6 + 4 * 10)
