"""groute.kernel_launch: a kernel's arguments packed once as the driver reads them, and the
launch that passes them (every persistent kernel's, through ``launch_resident``)."""
from __future__ import annotations

import ctypes
import gc
import struct
import threading
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from groute.kernel_launch import SLOT, KernelArgs


class FakeCupyArray:
    """Enough of a CuPy array for the packing: its device address."""

    def __init__(self, ptr):
        self.data = SimpleNamespace(ptr=ptr)


def as_driver_reads(args: KernelArgs):
    """Each argument's whole slot as the driver would find it: ``params`` is an array of
    pointers, argument i's slot at the i-th."""
    pointers = (ctypes.c_uint64 * len(args)).from_address(args.params)
    return [ctypes.string_at(pointers[i], SLOT) for i in range(len(args))]


def slot(fmt, value) -> bytes:
    """A value packed at its width, the rest of its slot zero."""
    return struct.pack(fmt, value).ljust(SLOT, b"\0")


def test_each_argument_is_packed_at_its_width_as_cupy_would_pass_it():
    array = FakeCupyArray(0x7F00_0000_1000)
    args = (array, None, np.int32(-5), np.uint32(7), np.int64(-2**40), np.uint64(2**63),
            np.float32(1.5), np.float64(-2.25), np.int8(-3), np.uint16(65535), np.bool_(True),
            11, 0.5, False, np.array([np.int32(9)]))
    packed = KernelArgs(args)
    assert len(packed) == len(args)
    want = [slot("Q", array.data.ptr), slot("Q", 0), slot("i", -5), slot("I", 7),
            slot("q", -2**40), slot("Q", 2**63), slot("f", 1.5), slot("d", -2.25), slot("b", -3),
            slot("H", 65535), slot("?", True), slot("q", 11), slot("d", 0.5), slot("?", False),
            slot("i", 9)]
    assert as_driver_reads(packed) == want
    assert packed.values()[:3] == [array.data.ptr, 0, -5]
    # every slot is SLOT bytes apart, after the pointer array, in one buffer
    pointers = (ctypes.c_uint64 * len(args)).from_address(packed.params)
    assert [pointers[i] - pointers[0] for i in range(len(args))] == \
        [SLOT * i for i in range(len(args))]
    assert pointers[0] == packed.params + SLOT * len(args)
    # a negative int32 rewritten by a positive one leaves no bytes of the old one behind
    packed.set(2, np.int32(3))
    assert as_driver_reads(packed)[2] == slot("i", 3)


def test_set_rewrites_one_argument_in_place_at_the_width_it_had():
    packed = KernelArgs((FakeCupyArray(16), np.uint64(3), np.int32(4), np.float32(0.0)))
    params = packed.params
    packed.set(1, np.uint64(2**64 - 1))
    packed.set(2, np.int32(-7))
    packed.set(0, FakeCupyArray(32))
    assert packed.params == params
    assert packed.values() == [32, 2**64 - 1, -7, 0.0]
    with pytest.raises(TypeError, match=r"kernel argument 2 was a 4-byte 'i' and is now given "
                                        r"as 'q' \(int\): the kernel would read the wrong bytes"):
        packed.set(2, 5)                        # a Python int is an int64, as CuPy passes it
    with pytest.raises(TypeError, match="kernel argument 3 was a 4-byte 'f'"):
        packed.set(3, np.float64(1.0))
    assert packed.values() == [32, 2**64 - 1, -7, 0.0]     # a refused value changes nothing
    for index in (-1, 4):
        with pytest.raises(IndexError, match=f"kernel argument {index} of 4"):
            packed.set(index, np.uint64(0))
    assert packed.values() == [32, 2**64 - 1, -7, 0.0]
    wide = KernelArgs((7,))
    with pytest.raises(OverflowError, match=r"^kernel argument 0: 1180591620717411303424 does "
                                            r"not fit its 8 bytes \('q'"):
        wide.set(0, 2**70)


def test_what_a_kernel_cannot_take_is_refused_naming_it():
    stream = SimpleNamespace(ptr=7)            # a CuPy Stream, Event or Function: not an argument
    for bad in ("text", np.zeros(2, np.int32), np.complex128(1j), [1, 2], np.array([1.0j]),
                stream):
        with pytest.raises(TypeError, match=f"a kernel argument of type {type(bad).__name__}"):
            KernelArgs((np.int32(1), bad))
    assert len(KernelArgs(())) == 0


def test_the_arrays_passed_stay_alive_while_the_arguments_do():
    array = FakeCupyArray(64)
    alive = weakref.ref(array)
    packed = KernelArgs((array,))
    del array
    gc.collect()
    assert alive() is not None
    packed.set(0, FakeCupyArray(128))           # replaced: the old one may go
    gc.collect()
    assert alive() is None


class FakeDriver:
    """CuPy's driver, runtime and stream as :func:`launch_kernel` uses them, recording each
    call; a cooperative launch of more than ``most`` blocks fails as the driver's does."""

    def __init__(self, most=1 << 30):
        self.most, self.device, self.calls = most, 0, []

    def launch(self, *a):
        self.calls.append(("plain", a))

    def launch_cooperative(self, *a):
        self.calls.append(("cooperative", a))
        if a[1] > self.most:
            raise CUDADriverError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: too many blocks")

    def set_device(self, device):
        self.calls.append(("set_device", device))

    def stream(self):
        return 0x5000 + self.device


class CUDADriverError(RuntimeError):
    """Named as CuPy's, which launch_resident tells by name."""


class FakeRawKernel:
    """A RawKernel as launch_kernel reads it: its Function's pointer per device (counted)."""

    def __init__(self, cooperative, driver):
        self.enable_cooperative_groups, self.driver, self.lookups = cooperative, driver, 0

    @property
    def kernel(self):
        self.lookups += 1
        return SimpleNamespace(ptr=0x900 + self.driver.device)


@pytest.fixture
def driver(monkeypatch):
    import groute.kernel_launch as kl
    fake = FakeDriver()
    monkeypatch.setattr(kl, "_cuda", SimpleNamespace(
        launch=fake.launch, launch_cooperative=fake.launch_cooperative,
        device=lambda: fake.device, set_device=fake.set_device, stream=fake.stream))
    monkeypatch.setattr(kl, "_bound", threading.local())
    return fake


def test_packed_arguments_go_to_the_driver_call_the_kernel_was_built_for(driver):
    """Plain or cooperative as the kernel's module says; CuPy's current stream; the packed
    block's address; the kernel's function looked up once per device; each thread's first
    launch on a device makes its context current."""
    from groute.kernel_launch import launch_kernel
    for cooperative in (False, True):
        driver.calls.clear()
        fn = FakeRawKernel(cooperative, driver)
        packed = KernelArgs((FakeCupyArray(64), np.int32(3)))
        launch_kernel(fn, 132, 256, packed, shared_mem=48)
        launch_kernel(fn, 66, 512, packed)
        driver.device = 1
        launch_kernel(fn, 10, 128, packed)
        driver.device = 0
        call = "cooperative" if cooperative else "plain"
        tail = () if cooperative else (0,)
        assert driver.calls == ([("set_device", 0)] if not cooperative else []) + [
            (call, (0x900, 132, 1, 1, 256, 1, 1, 48, 0x5000, packed.params, *tail)),
            (call, (0x900, 66, 1, 1, 512, 1, 1, 0, 0x5000, packed.params, *tail)),
        ] + ([("set_device", 1)] if not cooperative else []) + [
            (call, (0x901, 10, 1, 1, 128, 1, 1, 0, 0x5001, packed.params, *tail))]
        assert fn.lookups == 2                   # once per device, not per launch
    calls = []
    thread = threading.Thread(target=lambda: (launch_kernel(fn, 1, 32, packed),
                                              calls.extend(driver.calls[-2:])))
    thread.start()
    thread.join()
    assert calls[0] == ("set_device", 0)        # a new thread binds its context first


def test_a_packed_grid_the_driver_finds_too_large_is_halved(driver, monkeypatch):
    """launch_resident's halving works through the packed launch (the driver's error, by
    name), the same block of arguments each time."""
    from groute.engines import peer_barrier
    from groute.engines.peer_barrier import launch_resident
    monkeypatch.setattr(peer_barrier, "resident_capacity", lambda *a, **kw: 1 << 20)
    driver.most = 40
    fn = FakeRawKernel(True, driver)
    packed = KernelArgs((np.int32(1),))
    dev = SimpleNamespace(name="cuda:0")
    assert launch_resident(fn, 132, 256, packed, device=dev, kernel="k") == 33
    grids = [a[1] for call, a in driver.calls if call == "cooperative"]
    params = {a[9] for call, a in driver.calls if call == "cooperative"}
    assert grids == [132, 66, 33] and params == {packed.params}
    with pytest.raises(CUDADriverError, match="TOO_LARGE"):
        launch_resident(fn, 132, 256, packed, device=dev, kernel="k", min_blocks=66)


KERNELS = r"""
extern "C" __global__ void add(int* out, int a, long long b, float c, double d, unsigned char e) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + (int)b + (int)c + (int)d + e;
}
extern "C" __global__ void count_blocks(int* out, int add) {
    if (threadIdx.x == 0) atomicAdd(out, add);
}
"""


@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("cooperative", [False, True])
def test_a_packed_launch_runs_the_kernel_with_its_arguments(cooperative):
    """Plain and cooperative launches on CuPy's current stream read every argument at its
    width, before and after one is rewritten; a sequence goes through the kernel's own call."""
    import cupy

    from groute.kernel_launch import launch_kernel
    module = cupy.RawModule(code=KERNELS, enable_cooperative_groups=cooperative)
    add, count = module.get_function("add"), module.get_function("count_blocks")
    out = cupy.zeros(1, np.int32)
    packed = KernelArgs((out, np.int32(1), np.int64(20), np.float32(300.0), np.float64(4000.0),
                         np.uint8(50)))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        launch_kernel(add, 1, 32, packed)
        stream.synchronize()
        assert int(out.get()[0]) == 4371
        packed.set(1, np.int32(2))
        launch_kernel(add, 1, 32, packed)
        stream.synchronize()
        assert int(out.get()[0]) == 4372
        out.fill(0)
        launch_kernel(count, 7, 64, (out, np.int32(3)))
        stream.synchronize()
    assert int(out.get()[0]) == 21


class FakeFunction:
    """CuPy's ``Function`` as launch_plain calls it: each call recorded, with its keywords."""

    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args, **kwargs):
        self.calls.append((grid, block, args, kwargs))


def test_a_plain_launch_never_asks_for_a_cooperative_one():
    """launch_plain calls the kernel's Function without enable_cooperative_groups (CuPy's
    default there: cuLaunchKernel), whatever the module was built for; the RawKernel's own call,
    which would pass the module's flag, is not used."""
    from groute.kernel_launch import launch_plain
    for cooperative in (False, True):
        function = FakeFunction()
        fn = SimpleNamespace(enable_cooperative_groups=cooperative, kernel=function)
        launch_plain(fn, 132, 256, ("args", np.int32(3)))
        assert function.calls == [((132,), (256,), ("args", np.int32(3)), {})]


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_a_plain_launch_of_a_cooperative_module_s_kernel_runs_a_grid_past_one_wave():
    """A kernel of a module built with cooperative groups, launched plainly, runs every block of
    a grid four times what the GPU holds at once, without a warning: its own call (cooperative)
    would have cut the grid to one wave."""
    import warnings

    import cupy

    from groute.kernel_launch import launch_plain
    module = cupy.RawModule(code=KERNELS, enable_cooperative_groups=True)
    count = module.get_function("count_blocks")
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    wave = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(count.kernel.ptr, 1024, 0)
    grid = 4 * wave * sms
    out = cupy.zeros(1, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launch_plain(count, grid, 1024, (out, np.int32(1)))
    cupy.cuda.get_current_stream().synchronize()
    assert int(out.get()[0]) == grid
