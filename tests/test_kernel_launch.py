"""groute.kernel_launch: a kernel's arguments packed once as the driver reads them, and the
launch that passes them (every persistent kernel's, through ``launch_resident``)."""
from __future__ import annotations

import ctypes
import gc
import struct
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from groute.kernel_launch import SLOT, KernelArgs


class FakeCupyArray:
    """Enough of a CuPy array for the packing: its device address."""

    def __init__(self, ptr):
        self.data = SimpleNamespace(ptr=ptr)


def as_driver_reads(args: KernelArgs, sizes):
    """The bytes the driver would copy for each argument: ``params`` is an array of pointers,
    argument i's ``sizes[i]`` bytes are at the i-th."""
    pointers = (ctypes.c_uint64 * len(args)).from_address(args.params)
    return [ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes)]


def test_each_argument_is_packed_at_its_width_as_cupy_would_pass_it():
    array = FakeCupyArray(0x7F00_0000_1000)
    memory = SimpleNamespace(ptr=0x7F00_0000_2000)      # a CuPy MemoryPointer
    args = (array, memory, None, np.int32(-5), np.uint32(7), np.int64(-2**40), np.uint64(2**63),
            np.float32(1.5), np.float64(-2.25), np.int8(-3), np.uint16(65535), np.bool_(True),
            11, 0.5, False, np.array([np.int32(9)]))
    packed = KernelArgs(args)
    assert len(packed) == len(args)
    want = [struct.pack("Q", array.data.ptr), struct.pack("Q", memory.ptr), struct.pack("Q", 0),
            struct.pack("i", -5), struct.pack("I", 7), struct.pack("q", -2**40),
            struct.pack("Q", 2**63), struct.pack("f", 1.5), struct.pack("d", -2.25),
            struct.pack("b", -3), struct.pack("H", 65535), struct.pack("?", True),
            struct.pack("q", 11), struct.pack("d", 0.5), struct.pack("?", False),
            struct.pack("i", 9)]
    assert as_driver_reads(packed, [len(w) for w in want]) == want
    assert packed.values()[:4] == [array.data.ptr, memory.ptr, 0, -5]
    # every slot is SLOT bytes apart, after the pointer array, in one buffer
    pointers = (ctypes.c_uint64 * len(args)).from_address(packed.params)
    assert [pointers[i] - pointers[0] for i in range(len(args))] == \
        [SLOT * i for i in range(len(args))]
    assert pointers[0] == packed.params + SLOT * len(args)


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
    wide = KernelArgs((7,))
    with pytest.raises(OverflowError, match=r"^kernel argument 0: 1180591620717411303424 does "
                                            r"not fit its 8 bytes \('q'"):
        wide.set(0, 2**70)


def test_what_a_kernel_cannot_take_is_refused_naming_it():
    for bad in ("text", np.zeros(2, np.int32), np.complex128(1j), [1, 2], np.array([1.0j])):
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
