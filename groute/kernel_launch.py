"""Launching a CUDA kernel with its arguments packed once, as the driver reads them.

A CuPy ``RawKernel`` call converts every argument on every launch (a small object per argument,
its type looked up each time), so the host's cost of a launch grows with the arguments, and a
persistent kernel has dozens. On several devices those launches come one after the other from
one thread and every device waits at its first meeting for the last one to start, so that cost
is paid once per device per run. :class:`KernelArgs` holds the argument block the driver reads
(``cuLaunchKernel``'s ``kernelParams``: one pointer per argument, each to its value) in one
buffer, written once; a caller that launches the same kernel every run keeps it and rewrites
only the values that change (:meth:`KernelArgs.set`). :func:`launch_kernel` hands it to the
driver, cooperatively where the kernel's module was built for grid-wide synchronisation, on
CuPy's current stream, as the ``RawKernel`` call would (and leaves arguments given as a plain
sequence to that call: converting them once, CuPy's compiled code is faster than packing them
here). The persistent kernels that meet across devices are launched this way: PageRank's
``bsp_persistent`` and the peer BFS and SSSP kernels.

An argument is converted as CuPy converts it: a CuPy array is its device address, ``None`` a
null pointer, a NumPy scalar (or one-element NumPy array) its value at its width, a Python
``int``/``float``/``bool`` an int64/float64/bool. A slot keeps the format it was given first:
a later value of another format (another width, or signed for unsigned) is a TypeError (the
kernel would read the wrong bytes), a value that does not fit it an OverflowError.
"""
from __future__ import annotations

import struct
import threading
from types import SimpleNamespace

import numpy as np

#: NumPy type character -> struct format of that width
_FORMATS = {"?": "?", "b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "l": "q",
            "L": "Q", "q": "q", "Q": "Q", "e": "e", "f": "f", "d": "d"}
#: NumPy scalar type -> struct format (one lookup for the common case)
_SCALARS = {np.dtype(char).type: fmt for char, fmt in _FORMATS.items()}
#: bytes per argument slot: the widest scalar a kernel argument here may have
SLOT = 8


def _format_and_value(value):
    """(struct format, value to pack, the object to keep alive) of one kernel argument."""
    fmt = _SCALARS.get(type(value))
    if fmt is not None:
        return fmt, value, None
    if value is None:
        return "Q", 0, None
    if isinstance(value, bool):
        return "?", value, None
    if isinstance(value, int):
        return "q", value, None
    if isinstance(value, float):
        return "d", value, None
    if isinstance(value, np.ndarray):
        fmt = _FORMATS.get(value.dtype.char)
        if value.size == 1 and fmt is not None:
            return fmt, value.reshape(()).item(), None
    else:
        ptr = getattr(getattr(value, "data", None), "ptr", None)    # a CuPy array
        if isinstance(ptr, int):
            return "Q", ptr, value
    raise TypeError(f"a kernel argument of type {type(value).__name__} ({value!r:.60}) is not "
                    f"one a kernel takes: a CuPy array, None, a NumPy scalar of at most {SLOT} "
                    f"bytes (or a one-element array of one), or a Python int, float or bool")


class KernelArgs:
    """A kernel's arguments in the layout ``cuLaunchKernel`` reads: ``params`` is the address
    of an array of one pointer per argument, each pointing at that argument's value (a slot
    of :data:`SLOT` bytes) in the same buffer. Built from a sequence of arguments (converted
    as CuPy's kernel call converts them); :meth:`set` rewrites one in place. The CuPy arrays
    given are kept referenced, so their memory outlives the launches that read it."""

    __slots__ = ("_buffer", "_formats", "_keep", "_values", "params", "function")

    def __init__(self, args):
        n = len(args)
        # a NumPy buffer, not ctypes': a ctypes buffer of a new size is a new array type,
        # left to the garbage collector when these arguments go
        self._buffer = np.zeros(2 * SLOT * max(n, 1), np.uint8)
        base = self._buffer.ctypes.data
        values = base + SLOT * n
        struct.pack_into(f"{n}Q", self._buffer, 0, *range(values, values + SLOT * n, SLOT))
        self.params = base
        self._values = SLOT * n         # where the values start in the buffer
        self._formats = [None] * n
        self._keep = [None] * n
        #: what :func:`launch_kernel` last launched with these arguments: (the kernel, the
        #: CUDA device, its driver function, cooperative?), so that it looks them up once
        self.function = None
        for i, value in enumerate(args):
            self.set(i, value)

    def __len__(self) -> int:
        return len(self._formats)

    def set(self, index: int, value) -> None:
        """Write argument ``index`` (its slot keeps the format it was first given)."""
        if not 0 <= index < len(self._formats):
            raise IndexError(f"kernel argument {index} of {len(self._formats)}")
        fmt, packed, keep = _format_and_value(value)
        had = self._formats[index]
        if had is None:
            self._formats[index] = fmt
        elif had != fmt:
            raise TypeError(f"kernel argument {index} was a {struct.calcsize(had)}-byte "
                            f"'{had}' and is now given as '{fmt}' ({type(value).__name__}): "
                            f"the kernel would read the wrong bytes")
        try:
            struct.pack_into(fmt, self._buffer, self._values + SLOT * index, packed)
        except struct.error as exc:
            raise OverflowError(f"kernel argument {index}: {value!r} does not fit its "
                                f"{struct.calcsize(fmt)} bytes ('{fmt}': {exc})") from None
        self._keep[index] = keep

    def values(self) -> list:
        """The arguments as the kernel will read them (pointers as ints): for checks and
        errors."""
        return [struct.unpack_from(fmt, self._buffer, self._values + SLOT * i)[0]
                for i, fmt in enumerate(self._formats)]


#: CuPy's driver, runtime and current-stream lookup, bound on the first launch (no import or
#: attribute walk on the launch path)
_cuda = None
#: per host thread, the CUDA devices whose context it has made current (the driver's launch
#: needs one; CuPy's own calls make it on first use)
_bound = threading.local()


def _bind_cuda():
    global _cuda
    from cupy.cuda import driver, runtime, stream
    _cuda = SimpleNamespace(launch=driver.launchKernel,
                            launch_cooperative=driver.launchCooperativeKernel,
                            device=runtime.getDevice, set_device=runtime.setDevice,
                            stream=lambda: stream.get_current_stream().ptr)
    return _cuda


def launch_kernel(fn, grid: int, block: int, args, *, shared_mem: int = 0) -> None:
    """Launch the CuPy ``RawKernel`` ``fn`` on a 1-D grid of ``grid`` blocks of ``block``
    threads with ``args`` and ``shared_mem`` bytes of dynamic shared memory, on CuPy's current
    device and stream. A :class:`KernelArgs` goes straight to the driver (cooperatively,
    ``cuLaunchCooperativeKernel``, where ``fn`` was built with cooperative groups); a sequence
    goes through ``fn``'s own call, whose conversion of arguments made once is faster than
    packing them here (the packing pays off when the same block serves launch after launch).
    Errors are the driver's (CuPy's ``CUDADriverError``)."""
    if not isinstance(args, KernelArgs):
        fn((grid,), (block,), args, shared_mem=shared_mem)
        return
    cuda = _cuda or _bind_cuda()
    device = cuda.device()
    bound = getattr(_bound, "devices", None)
    if bound is None:
        bound = _bound.devices = set()
    if device not in bound:         # a thread's first launch on it: make its context current
        cuda.set_device(device)
        bound.add(device)
    known = args.function
    if known is None or known[0] is not fn or known[1] != device:
        known = args.function = (fn, device, fn.kernel.ptr, bool(fn.enable_cooperative_groups))
    _, _, ptr, cooperative = known
    if cooperative:
        cuda.launch_cooperative(ptr, grid, 1, 1, block, 1, 1, shared_mem, cuda.stream(),
                                args.params)
    else:
        cuda.launch(ptr, grid, 1, 1, block, 1, 1, shared_mem, cuda.stream(), args.params, 0)


def launch_plain(fn, grid: int, block: int, args) -> None:
    """Launch the CuPy ``RawKernel`` ``fn`` with ``cuLaunchKernel`` (never cooperatively) on a
    1-D grid of ``grid`` blocks of ``block`` threads with ``args`` (a sequence, converted as
    CuPy converts it), on CuPy's current device and stream.

    ``fn``'s own call launches every kernel of a module built with cooperative groups
    cooperatively (CuPy's ``Function`` is called with the module's
    ``enable_cooperative_groups``): the driver must hold the whole grid resident at once, and
    CuPy cuts a grid larger than that, with a warning. A kernel with no grid-wide barrier (a
    reset, a fill) needs no such launch; its ``Function`` launches plainly when called
    without that flag.

    Examples
    --------
    >>> launch_plain(module.get_function("reset_fused"), 64, 256, (args, n, t, c))  # doctest: +SKIP
    """
    fn.kernel((grid,), (block,), args)
