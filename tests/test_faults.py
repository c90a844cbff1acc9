"""A fault on one device of K in the middle of a BFS, a PageRank, a CC and an operator loop
(tests/faults.py runs each scenario and records what it saw):

- a device function raises (CPU: a NumPy functor or a step on a virtual device; CUDA: a step
  on the GPU's host side, a launch): the caller gets a DeviceError naming that device, the
  original error its cause, within the timeout; the context runs the next run, right and in
  its normal time (nothing of the failed run left running into it);
- CUDA: a kernel traps (``__trap()``, an out-of-bounds guard through the operator API's CUDA
  functor, or a trapping kernel launched on the GPU mid-run): the GPU's CUDA context is broken
  for the rest of the process (a sticky error, which CUDA also reports on the GPUs that touched
  its memory), so the caller gets, within the timeout, a DeviceError naming a GPU of the run
  and the CUDA error, the next run is refused at once saying the Context must be closed,
  closing it returns within the timeout, and the same run in a new process, on every GPU,
  takes its normal time (no GPU was left spinning). Each trap runs in a process of its own.
"""
from __future__ import annotations

import shutil

import pytest

from faults import APPS, FAULTY, run_in_subprocess, scenario
from support import gpu_marks, need_gpus

CPU_APPS = [a for a in APPS if a != "fused_loop"]          # no fused launches on CPU devices
CUDA_APPS = [a for a in APPS if a != "async_loop"]        # (covered by the CPU tests)
COUNTS = (2, 3, 4)


def cuda_cases():
    return [pytest.param(app, k, marks=gpu_marks(k), id=f"{app}-cuda-x{k}")
            for app in CUDA_APPS for k in COUNTS]


def assert_named_failure(seen, device, original):
    """The run raised a DeviceError naming ``device``, ``original`` (a type name) in its chain
    of causes, within the context's timeout."""
    err = seen["error"]
    assert err is not None, f"the faulty run did not fail: {seen}"
    assert err["type"] in ("DeviceError", "StoppedByFailure") and err["device"] == device, seen
    assert original in [t for t, _ in err["chain"]], seen
    assert seen["error_after_s"] < seen["timeout"], seen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", COUNTS)
@pytest.mark.parametrize("app", CPU_APPS)
def test_a_device_function_that_raises_on_one_cpu_device(app, k):
    seen = scenario(app, "cpu", k, "raise", timeout=10)
    assert_named_failure(seen, f"cpu:{FAULTY}", "InjectedFault")
    assert seen["next_right"] and seen["close_error"] is None, seen
    assert seen["next_s"] <= 5 * seen["normal_s"] + 1.0, seen


@pytest.mark.timeout(300)
@pytest.mark.parametrize("app, k", cuda_cases())
def test_a_device_function_that_raises_on_one_gpu(app, k):
    need_gpus(k)
    seen = scenario(app, "cuda", k, "raise", timeout=30)
    assert_named_failure(seen, f"cuda:{FAULTY}", "InjectedFault")
    assert seen["next_right"] and seen["close_error"] is None, seen
    assert seen["next_s"] <= 3 * seen["normal_s"] + 0.3, seen


@pytest.mark.timeout(600)
@pytest.mark.parametrize("app, k", cuda_cases())
def test_a_kernel_that_traps_on_one_gpu(app, k):
    need_gpus(k, physical=True)         # a trap breaks a whole GPU, every logical device on it
    seen = run_in_subprocess(app, k, "trap")
    err = seen["error"]
    assert err is not None, f"the faulty run did not fail: {seen}"
    assert err["type"] in ("DeviceError", "StoppedByFailure"), seen
    # CUDA reports a kernel fault on the GPUs whose work touched the faulty one's memory too
    # (the peer kernels of BFS read each other's words), so the first GPU found failing may be
    # a peer of the faulty one: the error names a GPU of the run and says so
    assert err["device"] in {f"cuda:{i}" for i in range(k)}, seen
    assert "may have run on another GPU" in err["message"], seen
    assert {"CUDARuntimeError", "CUDADriverError"} & {t for t, _ in err["chain"]}, seen
    assert "close the Context" in err["message"], seen
    assert seen["error_after_s"] < seen["timeout"], seen
    refused = seen["next_refused"]
    assert refused is not None and "close" in refused["message"], seen
    assert seen["refused_after_s"] < 1.0 and seen["close_s"] < seen["timeout"], seen
    assert seen["close_error"] is None, seen
    # the trap leaves this process's CUDA runtime unusable, peers of the faulty GPU included:
    # a new Context in it either works or says to start a new process, naming a device
    fresh = seen["new_context_error"]
    assert fresh is None or (fresh["type"] == "DeviceError"
                             and "start a new process" in fresh["message"]), seen
    # a new process finds every GPU, the faulty one too, right and in normal time: nothing was
    # left spinning
    again = run_in_subprocess(app, k, "again")
    assert again["right"], again
    assert again["s"] <= 2 * seen["normal_s"] + 0.5, (again, seen)


@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
def test_the_faults_cuda_code_compiles(tmp_path):
    """The trapping functors in the operator calls' kernels and in the fused loop's, and the
    trapping kernel the GPU scenarios launch, compile (nvcc, no GPU needed)."""
    import subprocess
    from faults import TRAP, _loop_functor, _order_free_functor
    from groute.operators import AdvanceStep
    from support import compile_generated
    from test_operators_loop import compile_loops
    done = compile_generated([_loop_functor(), _order_free_functor()], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = compile_loops([((AdvanceStep(_loop_functor()),), "d")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (tmp_path / "trap.cu").write_text(TRAP)
    done = subprocess.run(["nvcc", "-arch=sm_90", "--ptx", str(tmp_path / "trap.cu"), "-o",
                           str(tmp_path / "trap.ptx")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


class CUDARuntimeError(Exception):
    """What CuPy raises for a failed CUDA call, told by name and ``status`` (no GPU here)."""

    def __init__(self, status, text=None):
        super().__init__(text or {719: "cudaErrorLaunchFailure: unspecified launch failure"}
                         .get(status, f"cudaError {status}"))     # CuPy's words for the status
        self.status = status


def test_a_sticky_cuda_error_breaks_its_device_and_the_context_says_to_close_it():
    """The mechanism the trap scenarios rely on, without a GPU: a sticky CUDA error (found
    through the causes) marks its device broken; a broken device refuses work at once; a
    context with a broken device refuses the next run saying it must be closed, and closes."""
    from types import MethodType, SimpleNamespace
    from groute import Context, DeviceError
    from groute.device import cuda
    trap = CUDARuntimeError(719, "cudaErrorLaunchFailure: unspecified launch failure")
    assert cuda.sticky_error(trap).startswith("a kernel that failed (a trap")
    try:
        raise DeviceError("cuda:1", "read-back failed") from trap
    except DeviceError as err:
        assert cuda.sticky_error(err) is not None
    assert cuda.sticky_error(CUDARuntimeError(2, "cudaErrorMemoryAllocation")) is None
    assert cuda.sticky_error(RuntimeError("unspecified launch failure")) is None

    gpu = SimpleNamespace(name="cuda:1", broken=None)
    gpu.note_failure = MethodType(cuda.CUDADevice.note_failure, gpu)
    gpu.broken_note = MethodType(cuda.CUDADevice.broken_note, gpu)
    with pytest.raises(DeviceError, match=r"^cuda:1: CUDARuntimeError: cudaErrorLaunchFailure") \
            as info:
        with cuda._failures_on(gpu):
            raise trap
    assert info.value.__cause__ is trap and "close the Context" in str(info.value)
    ran = []
    with pytest.raises(DeviceError, match="refused: .*close the Context"):
        with cuda._failures_on(gpu):
            ran.append(1)
    assert not ran

    ctx = Context(2, backend="cpu", timeout=5)
    assert ctx.run(lambda d: d.index) == [0, 1]
    ctx.devices[1].broken = gpu.broken              # as a GPU's note_failure sets it
    with pytest.raises(RuntimeError, match=r"cpu:1 hit a sticky CUDA error.*close it"):
        ctx.run(lambda d: d.index)
    ctx.shutdown()


def test_a_device_that_cannot_start_after_a_sticky_error_says_to_start_a_new_process(
        monkeypatch):
    """After a trap, this process's CUDA runtime fails every call, on the faulty GPU's peers
    too (seen on 4 H200s: a new Context on the other GPUs failed creating a stream): starting
    a device then raises a DeviceError naming it that says to start a new process, not CuPy's
    bare error; an error that is not sticky passes through as it is."""
    import contextlib
    from types import SimpleNamespace
    from groute import DeviceError
    from groute.device import cuda

    def fake_cupy(error):
        def stream(non_blocking):
            raise error
        runtime = SimpleNamespace(getDeviceProperties=lambda gpu: {"multiProcessorCount": 132})
        return SimpleNamespace(cuda=SimpleNamespace(runtime=runtime, Stream=stream,
                                                    Device=lambda gpu: contextlib.nullcontext()))
    monkeypatch.setattr(cuda, "cuda_device_count", lambda: 2)
    trap = CUDARuntimeError(719, "cudaErrorLaunchFailure: unspecified launch failure")
    monkeypatch.setattr(cuda, "_cupy", lambda: fake_cupy(trap))
    with pytest.raises(DeviceError, match=r"^cuda:0: cannot start: a kernel that failed .*start "
                                          r"a new process") as info:
        cuda.CUDADevice(0)
    assert info.value.__cause__ is trap
    other = CUDARuntimeError(2, "cudaErrorMemoryAllocation: out of memory")
    monkeypatch.setattr(cuda, "_cupy", lambda: fake_cupy(other))
    with pytest.raises(CUDARuntimeError, match="out of memory"):
        cuda.CUDADevice(0)


def _fake_gpus(monkeypatch, trapped: int, count: int = 3):
    """``count`` fake GPUs of one context whose work never ends; GPU ``trapped``'s events and
    streams report a trap (a sticky error) when queried, as a real GPU's do after ``__trap()``:
    CuPy's queries return CUDA's status (719) and ``Event.done`` reads it as not done."""
    import contextlib
    import threading
    from types import SimpleNamespace
    from groute.device import cuda
    trap = CUDARuntimeError(719, "cudaErrorLaunchFailure: unspecified launch failure")

    class Raw:
        def __init__(self, gpu):
            self.gpu, self.ptr = gpu, gpu

        @property
        def done(self):
            return query(self.ptr) == 0        # CuPy's Event.done

    def query(ptr):
        return 719 if ptr == trapped else 600   # a trap; cudaErrorNotReady: still running

    runtime = SimpleNamespace(CUDARuntimeError=CUDARuntimeError, streamQuery=query,
                              eventQuery=query)
    monkeypatch.setattr(cuda, "_cupy", lambda: SimpleNamespace(cuda=SimpleNamespace(
        runtime=runtime)))
    class FakeGPU(SimpleNamespace):
        """Referable weakly, as a real device is (by its streams)."""

    stop = threading.Event()
    gpus = []
    for i in range(count):
        gpu = FakeGPU(name=f"cuda:{i}", broken=None, timeout=5.0, stop_event=stop,
                              use=contextlib.nullcontext)
        for method in ("note_failure", "broken_note"):
            setattr(gpu, method, getattr(cuda.CUDADevice, method).__get__(gpu))
        gpu.compute_stream = gpu.copy_stream = SimpleNamespace(raw=Raw(i))
        gpus.append(gpu)
    for gpu in gpus:
        gpu.siblings = tuple(gpus)
    events = [cuda.CUDAEvent(gpu, Raw(i)) for i, gpu in enumerate(gpus)]
    for event, gpu in zip(events, gpus):
        event.fake_gpu = gpu        # an event refers to its device weakly: kept here
    return events, trap


@pytest.mark.timeout(30)
def test_a_wait_on_a_healthy_gpu_raises_a_peer_gpus_trap_at_once(monkeypatch):
    """A kernel fault on one GPU can leave another GPU's work waiting forever (on the faulty
    GPU's event, at a meeting): a wait on the healthy GPU asks its context's other GPUs and
    raises the faulty one's error within a fraction of a second, not at the timeout."""
    import time
    from groute import DeviceError
    events, trap = _fake_gpus(monkeypatch, trapped=2)
    t0 = time.perf_counter()
    with pytest.raises(DeviceError, match=r"^cuda:2: .*cudaErrorLaunchFailure.*close the "
                                          r"Context") as info:
        events[0].synchronize()
    assert time.perf_counter() - t0 < 1.0
    assert info.value.__cause__.status == trap.status == 719
    assert events[2].device.broken is not None
    assert events[1].device.broken is None


@pytest.mark.timeout(30)
def test_waiting_for_every_gpu_raises_the_failed_ones_error_at_once(monkeypatch):
    """``wait_all`` (what Context.synchronize does on GPUs) polls every device together: the
    faulty GPU's error is raised at once though the GPUs before it never finish."""
    import time
    from groute import DeviceError
    from groute.device import cuda
    events, trap = _fake_gpus(monkeypatch, trapped=1)
    t0 = time.perf_counter()
    with pytest.raises(DeviceError, match=r"^cuda:1: ") as info:
        cuda.CUDAEvent.wait_all(events, timeout=5.0)
    assert time.perf_counter() - t0 < 1.0 and info.value.__cause__.status == 719


@pytest.mark.timeout(30)
def test_asking_an_idle_stream_tells_a_trap_as_the_devices_error(monkeypatch):
    """``CUDAStream.idle`` (Context.synchronize's first step) asks CUDA without waiting: done
    is True, running False, and a trap raises a DeviceError naming the GPU, which is marked
    broken, as a wait on one of its events would."""
    from groute import DeviceError
    from groute.device import cuda
    events, trap = _fake_gpus(monkeypatch, trapped=1)
    status = {0: 0, 1: 719, 2: 600}
    monkeypatch.setattr(cuda._cupy().cuda.runtime, "streamQuery", status.get)

    def stream_of(event):
        stream = object.__new__(cuda.CUDAStream)
        stream._ptr = event.raw.ptr
        stream.device = event.device
        return stream
    done, trapped, running = (stream_of(event) for event in events)
    assert done.idle() is True and running.idle() is False
    with pytest.raises(DeviceError, match=r"^cuda:1: .*cudaErrorLaunchFailure") as info:
        trapped.idle()
    assert info.value.__cause__.status == trap.status
    assert events[1].device.broken is not None and events[0].device.broken is None
