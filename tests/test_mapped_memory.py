"""The pool of mapped pinned host memory (groute.device.mapped_memory): a block goes back to
the pool when its last array is gone and serves the next array of its size; CUDA is never
asked to free one (freeing pinned memory waits for every running kernel). Host buffers stand
in for CUDA's pinned memory here; the device Link tests use the real pool on GPUs."""
import ctypes
import gc
import threading

import numpy as np
import pytest

from groute.device.mapped_memory import MIN_BLOCK, MappedPool, block_size


class _Blocks:
    """An allocator of host blocks that counts what it made."""

    def __init__(self):
        self.made = []

    def __call__(self, nbytes):
        buffer = ctypes.create_string_buffer(nbytes)
        self.made.append(buffer)
        return type("Block", (), {"ptr": ctypes.addressof(buffer), "nbytes": nbytes})()


@pytest.mark.parametrize("nbytes, size", [(0, MIN_BLOCK), (1, MIN_BLOCK), (MIN_BLOCK, MIN_BLOCK),
                                          (MIN_BLOCK + 1, 2 * MIN_BLOCK), (5000, 8192)])
def test_a_request_takes_the_power_of_two_block_at_or_above_it(nbytes, size):
    assert block_size(nbytes) == size


def test_a_block_serves_again_once_its_array_and_views_are_gone():
    blocks = _Blocks()
    pool = MappedPool(blocks)
    a = pool.array((3, 4), np.uint64)
    address = a.ctypes.data
    view = a[1]
    del a
    gc.collect()
    b = pool.array(12, np.uint64)                    # the view still holds the first block
    assert b.ctypes.data != address and pool.allocated == 2
    del view
    gc.collect()
    assert pool.free_blocks() == 1
    c = pool.array(24, np.int32)                     # another shape, the same block size
    assert c.ctypes.data == address and pool.allocated == 2 and pool.free_blocks() == 0
    assert len(blocks.made) == 2


def test_a_reused_block_is_zeroed_and_sizes_do_not_mix():
    pool = MappedPool(_Blocks())
    a = pool.array(8, np.int64)
    a[:] = 7
    small = a.ctypes.data
    del a
    big = pool.array(1024, np.int64)                 # 8 KiB: a block of its own
    assert big.ctypes.data != small and pool.allocated == 2
    again = pool.array(8, np.int64)
    assert again.ctypes.data == small and not again.any()


def test_arrays_taken_and_dropped_from_threads_share_the_blocks():
    pool = MappedPool(_Blocks())
    errors = []

    def work():
        try:
            for i in range(300):
                a = pool.array(4 + i % 8, np.int32)
                assert not a.any()
                a[:] = i
                del a
        except Exception as exc:     # noqa: BLE001 - reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert pool.allocated <= 4 and pool.free_blocks() == pool.allocated


@pytest.mark.timeout(20)
def test_an_array_dropped_while_the_pool_counts_goes_back_without_a_deadlock():
    """A block goes back wherever its last view dies: a garbage collection may run inside any
    allocation, one made while the pool holds its own lock among them. Giving back takes no
    lock, so dropping an array then does not wait for itself."""
    pool = MappedPool(_Blocks())
    a = pool.array(8, np.int64)
    address = a.ctypes.data
    with pool._lock:                # as a collection inside the pool's counted allocation
        del a
    assert pool.free_blocks() == 1
    assert pool.array(8, np.int64).ctypes.data == address
