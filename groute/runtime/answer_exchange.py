"""Answers across the ranks of one host through device memory: every rank reads the others'
parts of an answer where they lie, on their GPUs, instead of MPI moving them through host
memory (docs/DISTRIBUTED.md, "Answers across ranks").

Why: after a run every rank gets the whole answer
(:func:`~groute.runtime.answer_landing.land_answer`). MPI moves it between the processes of
one host through shared host memory, a copy in and a copy out per byte at the host's memory
speed, and for an answer of tens of megabytes that takes several times the run. The ranks'
GPUs already reach each other's memory (CUDA IPC, :mod:`groute.device.ipc`), and a GPU copies
another's memory to the host at its link's speed.

How: each rank keeps one device buffer, its *slot*, which every other rank maps once
(:class:`~groute.device.ipc.PeerAddresses`). For an answer, a rank copies its parts into its
slot and into its own slice of the host array; the ranks meet; then each rank copies every
other rank's slot, read through its mapping, into that rank's slice. Rank ``r`` writes its
slot again only at the next answer, after that answer's first meeting (the agreement on the
parts' sizes, :func:`~groute.runtime.answer_landing.land_answer`), which no rank enters before
it finished reading: so no reader ever sees a slot half rewritten.

A slot grows when a rank's part outgrows it; the ranks know every rank's part size from that
first meeting, so all of them see the same growth and map the new slots together. Where a rank
cannot afford a slot (its GPU's free memory), or the ranks cannot map each other's memory
(other hosts, no peer access; the CPU backend), the answer goes through MPI as before.
"""
from __future__ import annotations

import numpy as np

#: a slot is at most this share of its GPU's free memory when it grows
FREE_SHARE = 8
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

    def holds(self, nbytes: int) -> bool:
        """Whether this rank can hold a part of ``nbytes`` in its slot: it does already, or
        the slot may grow to it (:data:`FREE_SHARE`). Every rank tells the others this at the
        answer's first meeting, and the slots are used only where every rank can."""
        if nbytes <= self.sizes[self.ctx.ranks.rank]:
            return True
        free, _ = self.device.memory_info()
        return _rounded(nbytes) <= free // FREE_SHARE

    def share(self, out: np.ndarray, nbytes: list, held: list, copy_own) -> None:
        """Fill ``out`` (the answer's host array as bytes: every rank's parts one after
        another in rank order, ``nbytes[r]`` of rank ``r``'s) with every rank's parts: this
        rank's ``held`` (its ``(device, part)`` pairs) copied into its slot, and into its own
        slice by ``copy_own()``, the others' read from their slots after the ranks meet.
        Every rank calls it at once, with the same ``nbytes``."""
        ranks = self.ctx.ranks
        self._fit(nbytes)
        offsets = np.concatenate([[0], np.cumsum(nbytes)]).astype(np.int64)
        if held:
            copy_own()
            self._to_slot(held)
        ranks.barrier("every rank's part of an answer in its slot")
        stream = self.device.compute_stream
        import cupy
        with self.device.use():
            for r, address in enumerate(self._peers):
                if r != ranks.rank and nbytes[r]:
                    cupy.cuda.runtime.memcpyAsync(
                        out.ctypes.data + int(offsets[r]), address, int(nbytes[r]),
                        cupy.cuda.runtime.memcpyDefault, stream.raw.ptr)
        stream.record().synchronize(self.ctx.timeout)

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
