"""The host side of the cross-device barrier that persistent kernels meet at (``peer_sync.cuh``
``cross_device_wait``): launching one grid per device and keeping track of the counter.

The counter lives in device 0's memory and only grows: at every barrier each of the ``k``
devices adds one, and a run that starts with the counter at ``base`` waits for ``base + k * b``
at its ``b``-th barrier. So the host never zeroes it between runs (that would cost a launch and
a sync per run); it adds what the run crossed to ``base``, read from the devices' own control
words. Only when a run failed, or the devices disagree on how many barriers they crossed, does
the counter stand somewhere unknown: then every device is waited for and the block is zeroed.

Used by the persistent BFS/SSSP kernels (:mod:`apps.traversal_peer`) and persistent BSP
PageRank (:mod:`apps.pr`).
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class CrossDeviceBarrier:
    """``block``: the device-0 array holding the counter (its first word) and anything else the
    kernels expect zeroed after a failure; ``devices``: the run's devices, device 0 first."""

    def __init__(self, devices, block):
        self.devices = list(devices)
        self.block = block
        self.base = 0       # where the counter stands before the next run

    @property
    def ptr(self) -> int:
        """The counter's device address, for the kernels' arguments."""
        return self.block.data.ptr

    def launch_each(self, launch):
        """Call ``launch(i, device)`` for every device in order, stopping at the first that
        raises. Returns ``(launched indices, that exception or None)``: the caller still reads
        the launched ones back (they give up at the barrier after their timeout) before it
        raises, so nothing is left running."""
        launched = []
        for i, dev in enumerate(self.devices):
            try:
                launch(i, dev)
            except BaseException as exc:  # noqa: BLE001 - raised by the caller after read-back
                return launched, exc
            launched.append(i)
        return launched, None

    def settle(self, crossed, ok: bool = True) -> None:
        """After a run: ``crossed`` holds each launched device's count of barriers crossed.
        Advance ``base`` when the run was ``ok`` and they agree, else :meth:`reset`."""
        crossed = set(int(c) for c in crossed)
        if ok and len(crossed) == 1:
            self.base += len(self.devices) * crossed.pop()
        else:
            self.reset()

    def reset(self) -> None:
        """Wait for every device, then zero the block on device 0's compute stream (the
        non-blocking stream the kernels run on: a fill on CuPy's default stream would not be
        ordered before the next launch)."""
        for dev in self.devices:
            dev.compute_stream.record().synchronize()
        self.devices[0].compute_stream.submit(self.block.fill, 0)
        self.devices[0].compute_stream.record().synchronize()
        self.base = 0


def launch_resident(fn, blocks: int, block: int, args, *, shared_mem: int = 0, name: str = "") -> int:
    """Launch ``fn`` as a cooperative grid of ``blocks`` (every block resident, as a grid-wide
    barrier needs); where the driver says the grid is too large (the occupancy answer was
    optimistic) halve it until it fits. Returns the blocks launched, for the next launch."""
    from cupy.cuda import driver
    while True:
        try:
            fn((blocks,), (block,), args, shared_mem=shared_mem)
            return blocks
        except driver.CUDADriverError as exc:
            if "TOO_LARGE" not in str(exc) or blocks <= 1:
                raise
            blocks = max(1, blocks // 2)
            log.info("%s: cooperative grid too large, now %d blocks", name, blocks)
