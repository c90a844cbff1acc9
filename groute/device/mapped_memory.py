"""Mapped pinned host memory (portable and mapped: every GPU's kernels reach it), handed out
again instead of given back to CUDA.

Freeing pinned memory (``cudaFreeHost``) waits for every kernel running on the GPUs: an
implicit synchronisation. A device Link's flags live in such memory and die with the link,
on whatever thread drops its last reference (the link pump's, a user's): freed there while a
kernel ran, they stalled that thread until the kernel ended, and a kernel that waited for that
thread (a persistent one, a Link's receiver) never ended. So a block, once its last array is
gone, goes back to a free list of its size and the next array of that size takes it, as
CuPy's pools keep device memory; the blocks live as long as the process.

A block is handed out again as soon as its arrays are gone, as CuPy's device pool hands out
again the memory of a Link's device words: a kernel must not use a link's memory after the
link is gone.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable

import numpy as np

#: The least block: smaller requests share this size, so that blocks are reused across them.
MIN_BLOCK = 256

#: ``cudaHostAllocPortable | cudaHostAllocMapped``
_PORTABLE_MAPPED = 3


def block_size(nbytes: int) -> int:
    """The size of the block that serves ``nbytes``: the power of two at or above it, at least
    :data:`MIN_BLOCK` (few sizes, so that a freed block serves the next request)."""
    return max(MIN_BLOCK, 1 << max(int(nbytes) - 1, 0).bit_length())


class MappedPool:
    """Blocks of mapped pinned memory by size; see the module docstring.

    Parameters
    ----------
    allocate : callable
        ``allocate(nbytes)``: a new block, an object with ``ptr`` (its host address) that owns
        the memory while it lives (CuPy's ``PinnedMemory``).
    """

    def __init__(self, allocate: Callable[[int], object]):
        self._allocate = allocate
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()       # the count below; never taken by a finalizer
        #: blocks allocated (not reused): what the pool holds in all
        self.allocated = 0

    def array(self, shape, dtype) -> np.ndarray:
        """A zeroed array of ``shape`` and ``dtype`` in a block of the pool; the block goes back
        to the pool once this array and every view of it are gone.

        Parameters
        ----------
        shape : int or tuple of int
            The array's shape.
        dtype : data-type
            Its items' type.

        Returns
        -------
        numpy.ndarray
            The array, in mapped pinned memory on CUDA.

        Examples
        --------
        >>> import ctypes
        >>> buffers = []
        >>> def allocate(nbytes):
        ...     buffers.append(ctypes.create_string_buffer(nbytes))
        ...     return type("Block", (), {"ptr": ctypes.addressof(buffers[-1])})()
        >>> pool = MappedPool(allocate)
        >>> a = pool.array(4, "int32"); first = a.ctypes.data; del a
        >>> pool.array((2, 2), "int32").ctypes.data == first, pool.allocated
        (True, 1)
        """
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        size = block_size(count * dtype.itemsize)
        free = self._free.setdefault(size, [])
        try:
            block = free.pop()
        except IndexError:
            block = None
        if block is None:
            block = self._allocate(size)
            with self._lock:
                self.allocated += 1
        view = (ctypes.c_char * size).from_address(int(block.ptr))
        # the finalizer holds the block: it lives until it is back in the free list
        weakref.finalize(view, self._give_back, size, block).atexit = False
        array = np.frombuffer(view, dtype, count).reshape(shape)
        array[...] = 0
        return array

    def _give_back(self, size: int, block) -> None:
        # no lock: a finalizer runs wherever the last view dies, a garbage collection inside
        # any allocation among them (one under a lock of this pool too); the free lists'
        # append and pop are atomic
        self._free[size].append(block)

    def free_blocks(self) -> int:
        """Blocks in the free lists (none in use)."""
        return sum(len(blocks) for blocks in list(self._free.values()))


def _pinned_mapped(nbytes: int):
    import cupy
    return cupy.cuda.PinnedMemory(nbytes, _PORTABLE_MAPPED)


#: The process's pool (CUDA's pinned memory is the process's, not a GPU's).
POOL = MappedPool(_pinned_mapped)


#: ``mapped_host_array(shape, dtype)``: a zeroed array in mapped pinned host memory, portable
#: and mapped (``cudaHostAllocPortable | cudaHostAllocMapped``), so every GPU's kernels reach
#: it at :func:`groute.device.cuda.device_address`; :meth:`MappedPool.array` of :data:`POOL`
mapped_host_array = POOL.array
