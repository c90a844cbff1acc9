"""Device-side operations the benchmarks time, for both backends.

On CUDA these are the kernels of ``access_kernels.cu`` (device-initiated copies, coalesced and
random reads/writes of local, peer or mapped host memory) and mapped pinned host buffers. On CPU
virtual devices the same operations are NumPy copies, gathers and scatters run on the device's
stream thread: they exercise the same benchmark code, and their numbers describe NumPy on this
CPU, which reports label as "CPU virtual devices".
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

KERNELS = Path(__file__).with_name("access_kernels.cu")
LINK_KERNELS = Path(__file__).with_name("link_kernels.cu")
THREADS = 256
BLOCKS_PER_SM = 8
_blocks: dict = {}


# memory ----------------------------------------------------------------------------------------
def host_buffer(device, n_words: int):
    """Host memory for ``device`` to copy to/from *and* for its kernels to read/write directly
    (:meth:`groute.device.base.Device.mapped_host_buffer`: pinned, portable and mapped on CUDA,
    so every GPU's kernels reach it at the same address; CPU: a plain NumPy array)."""
    return device.mapped_host_buffer(n_words, np.int32)


def device_buffer(device, n_words: int):
    """``n_words`` zeroed int32 words in ``device``'s memory, ready for use on any stream."""
    array = device.zeros(n_words, np.int32)
    sync(device)
    return array


def buffer_on(device_or_host, n_words: int, owner):
    """A buffer on a device, or mapped host memory (``device_or_host`` None) usable by ``owner``."""
    if device_or_host is None:
        return host_buffer(owner, n_words)
    return device_buffer(device_or_host, n_words)


def address(array) -> int:
    """The address a kernel uses for ``array`` (a CuPy array, or mapped pinned host memory)."""
    from groute.device.cuda import device_address
    return device_address(array)


def to_numpy(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    import cupy
    with cupy.cuda.Device(array.device.id):
        return array.get()


def sync(device) -> None:
    """Wait for everything queued on ``device``, on every stream: the zeroing of
    :meth:`~groute.device.base.Device.zeros` (its compute stream) and the fills CuPy puts on
    its default stream (:func:`fill_pattern`, :func:`clear`). The runtime's streams are
    non-blocking, so no stream a benchmark copies on orders against them by itself."""
    if device.backend == "cuda":
        import cupy
        with device.use():
            cupy.cuda.Device().synchronize()


def fill_pattern(array, seed: int) -> None:
    """Fill ``array`` with a pattern that differs for every ``seed`` (so stale data is caught)."""
    n = int(array.shape[0])
    pattern = (np.arange(n, dtype=np.uint32) * np.uint32(2654435761) + np.uint32(seed * 40503 + 1))
    pattern = pattern.view(np.int32)
    if isinstance(array, np.ndarray):
        array[:] = pattern
        return
    import cupy
    dev = cupy.cuda.Device(array.device.id)
    with dev:
        array.set(pattern)
        dev.synchronize()


def clear(array) -> None:
    """Zero ``array`` (on whichever device it lives, or in host memory) and wait for it."""
    if isinstance(array, np.ndarray):
        array.fill(0)
        return
    import cupy
    dev = cupy.cuda.Device(array.device.id)
    with dev:
        array.fill(0)
        dev.synchronize()


# kernels ---------------------------------------------------------------------------------------
def _kernel(device, name: str, path=KERNELS):
    from groute.kernels import get_kernel
    with device.use():
        return get_kernel(path, name)


def preload_link_kernels(*devices) -> None:
    """Load the device-link kernels onto each CUDA device in ``devices`` now: a receiver
    launched first waits for its sender, and loading the sender's kernel at its first launch
    could wait for that receiver (:func:`groute.kernels.preload`)."""
    from groute.kernels import preload
    for device in devices:
        if device.backend == "cuda":
            with device.use():
                preload(*(_kernel(device, name, LINK_KERNELS)
                          for name in ("link_send_words", "link_receive_words")))


def _grid(device) -> int:
    if device.index not in _blocks:
        sms = int(device.properties().get("multiprocessors") or 80)
        _blocks[device.index] = sms * BLOCKS_PER_SM
    return _blocks[device.index]


def _launch(stream, name: str, *args, path=KERNELS, blocks=None) -> None:
    device = stream.device
    kernel = _kernel(device, name, path)
    stream.submit(kernel, (blocks or _grid(device),), (THREADS,), args)


def spin(stream, seconds: float) -> None:
    """Hold a CUDA stream for ``seconds`` (a one-thread kernel polling the GPU timer)."""
    _launch(stream, "spin_ns", np.uint64(int(seconds * 1e9)))


def device_copy(stream, dst, src) -> None:
    """Device-initiated copy: the stream's device runs a kernel (CUDA) / NumPy copy (CPU) moving
    ``src`` into ``dst``; either may be on another device or in mapped host memory."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"device_copy needs equal sizes, got {dst.shape[0]} <- {src.shape[0]}")
    if stream.device.backend == "cuda":
        _launch(stream, "copy_words", np.uint64(address(dst)), np.uint64(address(src)),
                np.uint64(src.shape[0]))
    else:
        stream.submit(np.copyto, dst, src)


def link_send(stream, link, src, first: int, part_bytes: int | None = None) -> None:
    """The stream's device sends all of ``src`` through the device-initiated ``link`` as the
    packets ``first``, ``first + 1``, ... (``first``: the packets the link carried before), each
    written by a group of blocks (``link_send_words``, ``groute_link_send_grid``; CPU: the same
    through ``link.tx``). ``part_bytes``: the least share of a packet a block writes
    (:meth:`~groute.runtime.device_link.DeviceLink.grid_shape`'s default when None)."""
    words = int(src.shape[0])
    blocks, parts = _link_grid(stream.device, link, words, part_bytes)
    if stream.device.backend == "cuda":
        _launch(stream, "link_send_words", link.tx, src, np.uint64(words), np.uint64(first),
                np.uint64(parts), path=LINK_KERNELS, blocks=blocks)
    else:
        stream.submit(link.tx.send_grid, first, src, parts)


def link_receive(stream, link, words: int, first: int, dst=None, part_bytes: int | None = None) -> None:
    """The stream's device receives the ``words`` that :func:`link_send` sends: each packet is
    copied to its place in ``dst`` by a group of blocks (the sender's shape), or, without
    ``dst``, handed back by one block each (the transfer path alone), and released."""
    if dst is None:
        part_bytes = link.packet_bytes
    blocks, parts = _link_grid(stream.device, link, words, part_bytes)
    if stream.device.backend == "cuda":
        _launch(stream, "link_receive_words", link.rx, dst if dst is not None else np.uint64(0),
                np.uint64(words), np.uint64(first), np.uint64(parts), path=LINK_KERNELS, blocks=blocks)
        return

    def receive():
        if not link.rx.receive_grid(first, dst, words, parts):
            raise RuntimeError(f"{link.name} ended before the message of {words} words from packet {first} had arrived")
    stream.submit(receive)


def _link_grid(device, link, words: int, part_bytes) -> tuple[int, int]:
    """``(blocks, parts)`` of a link kernel moving ``words``: the link's
    :meth:`~groute.runtime.device_link.DeviceLink.grid_shape` within half the device's grid (the
    other half for the kernel at the link's other end when both share a GPU); a CPU device's
    "kernel" is one thread, one block."""
    packets = max(1, -(-words // link.packet_size))
    blocks = max(1, _grid(device) // 2) if device.backend == "cuda" else 1
    extra = {} if part_bytes is None else {"part_bytes": part_bytes}
    return link.grid_shape(packets, blocks, **extra)


class AccessPlan:
    """One direct-access step: the stream's device reads or writes ``target``.

    ``op`` is 'read' or 'write'; ``pattern`` 'coalesced' (every word once, in order) or 'random'
    (``n_access`` 4-byte accesses at hashed indices in a power-of-two prefix of ``target``).
    ``useful_bytes`` is what the step moves, for bandwidth.
    """

    OPS = ("read", "write")
    PATTERNS = ("coalesced", "random")

    def __init__(self, executor, target, op: str, pattern: str, n_access: int = 0, seed: int = 1):
        if op not in self.OPS or pattern not in self.PATTERNS:
            raise ValueError(f"unknown access {op}/{pattern}")
        self.executor, self.target, self.op, self.pattern = executor, target, op, pattern
        n_words = int(target.shape[0])
        self.mask = (1 << (n_words.bit_length() - 1)) - 1
        self.n_access = n_words if pattern == "coalesced" else int(n_access)
        self.useful_bytes = 4 * self.n_access
        self.seed = seed
        self._sink = None
        self._index = None
        if executor.backend == "cuda":
            if op == "read":
                self._sink = device_buffer(executor, _grid(executor) * THREADS)
        elif pattern == "random":
            rng = np.random.default_rng(seed)
            self._index = rng.integers(0, self.mask + 1, self.n_access)
        self.result = None

    def launch(self, stream) -> None:
        if stream.device.backend == "cuda":
            t = np.uint64(address(self.target))
            if self.op == "read" and self.pattern == "coalesced":
                _launch(stream, "read_coalesced", t, np.uint64(self.n_access), np.uint64(address(self._sink)))
            elif self.op == "read":
                _launch(stream, "read_random", t, np.uint64(self.mask), np.uint64(self.n_access),
                        np.uint64(self.seed), np.uint64(address(self._sink)))
            elif self.pattern == "coalesced":
                _launch(stream, "write_coalesced", t, np.uint64(self.n_access), np.int32(self.seed))
            else:
                _launch(stream, "write_random", t, np.uint64(self.mask), np.uint64(self.n_access),
                        np.uint64(self.seed))
        else:
            stream.submit(self._numpy_step)

    def _numpy_step(self):
        t = self.target
        if self.op == "read":
            data = t if self._index is None else t[self._index]
            self.result = int(np.bitwise_xor.reduce(data)) if data.size else 0
        elif self._index is None:
            t.fill(self.seed)
        else:
            t[self._index] = self.seed


def check_equal(dst, expected: np.ndarray, what: str) -> None:
    """Raise if ``dst`` (device or host array) differs from ``expected``: a benchmark that moved the
    wrong bytes must not report a bandwidth."""
    got = to_numpy(dst)
    if got.shape != expected.shape or not np.array_equal(got, expected):
        bad = np.flatnonzero(got != expected) if got.shape == expected.shape else np.array([-1])
        raise RuntimeError(f"data check failed for {what}: {bad.size} of {expected.size} words differ "
                           f"(first at word {int(bad[0])})")
