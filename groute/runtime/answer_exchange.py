"""Answers across the ranks of one host through device memory: every rank copies the others'
parts of an answer from their GPUs into its own, instead of MPI moving them through host
memory (docs/DISTRIBUTED.md, "Answers across ranks").

Why: after a run every rank gets the whole answer
(:func:`~groute.runtime.answer_landing.land_answer`). MPI moves it between the processes of
one host through shared host memory, a copy in and a copy out per byte at the host's memory
speed, and for an answer of tens of megabytes that takes several times the run. The ranks'
GPUs already reach each other's memory (CUDA IPC, :mod:`groute.device.ipc`) over NVLink, many
times faster; and with the whole answer on its GPU a rank can also put it in the graph's order
there (:class:`~groute.runtime.renumber.WholeAnswerRenumbering`) before its one download.

How: each rank keeps one device buffer, its *slot*, which every other rank maps once
(:class:`~groute.device.ipc.PeerAddresses`). For an answer, a rank copies its parts into its
slot; the ranks meet; then each rank copies every rank's slot into one array on its GPU, the
whole answer, which the caller downloads. Rank ``r`` writes its slot again only at the next
answer, after that answer's first meeting (the agreement on the parts' sizes, in
:func:`~groute.runtime.answer_landing.land_answer`), which no rank enters before its copies of
this answer finished (its download waits for them): so no reader ever sees a slot half
rewritten.

A slot grows when a rank's part outgrows it; the ranks know every rank's part size and free
memory from that first meeting, so all of them see the same growth, and the same choice of
path, and map the new slots together. Where some rank cannot afford its slot and the whole
answer (:data:`FREE_SHARE` of its GPU's free memory), or the ranks cannot map each other's
memory (other hosts, no peer access; the CPU backend), the answer goes through MPI.
"""
from __future__ import annotations

import numpy as np

#: a rank's slot growth and its copy of the whole answer take at most 1 / FREE_SHARE of its
#: GPU's free memory
FREE_SHARE = 4
#: slots grow to a multiple of this many bytes, so that answers of nearby sizes share one
GRANULE = 1 << 20


def _rounded(nbytes: int) -> int:
    return -(-int(nbytes) // GRANULE) * GRANULE


class DeviceAnswerExchange:
    """The slots of the ranks of ``ctx`` (a RankContext on CUDA whose ranks map each other's
    memory: :meth:`for_context` decides); see the module docstring."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.device = ctx.local_device
        self.sizes = [0] * ctx.ranks.size      # every rank's slot, in bytes
        self._slot = None                       # this rank's slot (a uint8 device array)
        self._addresses = None                  # the mappings of every rank's slot
        self._peers = None                      # every rank's slot as this rank addresses it

    @classmethod
    def for_context(cls, ctx):
        """The exchange of ``ctx``, made at its first answer (every rank at once: whether the
        ranks map each other's memory is one allgather), or None where the answers go through
        MPI: not CUDA, one rank, or the ranks cannot map each other's memory."""
        known = getattr(ctx, "_answer_exchange", False)
        if known is not False:
            return known
        exchange = None
        if ctx.backend == "cuda" and ctx.ranks.size > 1:
            from groute.engines.peer_barrier import MAX_DEVICES
            from groute.device.ipc import ipc_unavailable
            if ipc_unavailable(ctx, MAX_DEVICES) is None:
                exchange = cls(ctx)
        ctx._answer_exchange = exchange
        return exchange

    def free(self) -> int:
        """Bytes free on this rank's GPU, which every rank tells the others at an answer's
        first meeting (:meth:`fits`)."""
        return self.device.memory_info()[0]

    def fits(self, nbytes: list, free: list) -> bool:
        """Whether every rank can hold its part of an answer in its slot (grown where it
        must be) and the whole answer beside it, within :data:`FREE_SHARE` of the free memory
        it told (``free[r]``; ``nbytes[r]``: its part). The same answer on every rank."""
        whole = sum(nbytes)
        return all(whole + (_rounded(need) if need > have else 0) <= room // FREE_SHARE
                   for need, have, room in zip(nbytes, self.sizes, free))

    def gather(self, nbytes: list, held: list):
        """The whole answer on this rank's GPU: a uint8 array of ``sum(nbytes)`` bytes, every
        rank's parts one after another in rank order (``nbytes[r]`` of rank ``r``'s), made on
        its compute stream (a download queued there after it reads it whole). This rank's
        ``held`` (its ``(device, part)`` pairs) go through its slot like every other rank's.
        Every rank calls it at once, with the same ``nbytes``; the caller waits for what it
        queues after it before the next answer."""
        import cupy
        ranks = self.ctx.ranks
        self._fit(nbytes)
        if held:
            self._to_slot(held)
        ranks.barrier("every rank's part of an answer in its slot")
        dev = self.device
        whole = dev.empty(sum(nbytes), np.uint8)
        at = 0
        with dev.use():
            for r, address in enumerate(self._peers):
                if nbytes[r]:
                    cupy.cuda.runtime.memcpyAsync(
                        int(whole.data.ptr) + at, address, int(nbytes[r]),
                        cupy.cuda.runtime.memcpyDefault, dev.compute_stream.raw.ptr)
                at += int(nbytes[r])
        return whole

    def _to_slot(self, held) -> None:
        """This rank's parts one after another into its slot, on their compute streams,
        waited for."""
        import cupy
        at, copied = 0, []
        for dev, part in held:
            size = int(part.nbytes)
            with dev.use():
                cupy.cuda.runtime.memcpyAsync(int(self._slot.data.ptr) + at, int(part.data.ptr),
                                              size, cupy.cuda.runtime.memcpyDefault,
                                              dev.compute_stream.raw.ptr)
            copied.append(dev.compute_stream.record())
            at += size
        type(copied[0]).wait_all(copied, self.ctx.timeout)

    def _fit(self, nbytes: list) -> None:
        """Grow the slots of the ranks whose parts outgrew theirs, every rank at once (each
        sees the same ``nbytes`` and sizes): the old mappings closed, the new slots mapped."""
        grown = [max(have, _rounded(need)) if need > have else have
                 for have, need in zip(self.sizes, nbytes)]
        if grown == self.sizes and self._peers is not None:
            return
        from groute.device.ipc import PeerAddresses
        self.close()
        me = self.ctx.ranks.rank
        with self.device.use():
            self._slot = self.device.empty(max(grown[me], 1), np.uint8)
        self._addresses = PeerAddresses(self.ctx)
        arrays = [self._slot if r == me else None for r in range(len(grown))]
        self._peers = self._addresses.table(arrays, "the ranks' answer slots")
        self.sizes = grown

    def close(self) -> None:
        """Let the slots go, every rank at once (:meth:`PeerAddresses.close
        <groute.device.ipc.PeerAddresses.close>`: the mappings closed before any rank frees
        its slot)."""
        if self._addresses is not None:
            addresses, self._addresses, self._peers = self._addresses, None, None
            addresses.close()
        self._slot = None
        self.sizes = [0] * len(self.sizes)
