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
path, and map the new slots together. Where some GPU cannot afford its ranks' slots and their
copies of the whole answer (:data:`FREE_SHARE` of its free memory), or the ranks cannot map
each other's memory as the kernels that meet across them need (one host, NVLink between every
pair, at most eight ranks: :func:`~groute.device.ipc.ipc_unavailable`; not the CPU backend),
the answer goes through MPI.
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
        """The exchange of ``ctx``, made at its first answer.

        Parameters
        ----------
        ctx : Context
            The answer's context; every rank asks at once (whether the ranks map each
            other's memory is one allgather, asked once per context).

        Returns
        -------
        DeviceAnswerExchange or None
            None where the answers go through MPI: not CUDA, one rank, or ranks that cannot
            map each other's memory as the kernels that meet across them need
            (:func:`~groute.device.ipc.ipc_unavailable`: one host, NVLink between every pair,
            at most :data:`~groute.engines.peer_barrier.MAX_DEVICES` ranks).
        """
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

    def fits(self, nbytes: list, free: list, copies: int = 1) -> bool:
        """Whether every GPU can hold its ranks' slots (grown where a part outgrew one) and
        ``copies`` of the whole answer per rank within :data:`FREE_SHARE` of its free memory.

        Parameters
        ----------
        nbytes : list of int
            Every rank's part, in bytes.
        free : list of int
            The free memory every rank told of its GPU.
        copies : int
            Whole answers a rank holds at once on its GPU (2 where it renumbers it there).

        Returns
        -------
        bool
            The same on every rank (from what every rank told, and the slots' sizes, which
            every rank tracks alike). Ranks sharing one GPU count together against it.
        """
        whole = sum(nbytes)
        places = getattr(self.ctx, "places", None)
        gpus = [p.gpu for p in places] if places else list(range(len(nbytes)))
        need = {}
        for gpu, part, have in zip(gpus, nbytes, self.sizes):
            need[gpu] = need.get(gpu, 0) + copies * whole + \
                (_rounded(part) if part > have else 0)
        return all(need[gpu] <= room // FREE_SHARE for gpu, room in zip(gpus, free))

    def gather(self, nbytes: list, held: list):
        """The whole answer on this rank's GPU.

        Parameters
        ----------
        nbytes : list of int
            Every rank's part, in bytes (the same list on every rank: every rank calls this
            at once).
        held : list
            This rank's ``(device, part)`` pairs: contiguous arrays of its GPU, copied into
            its slot like every other rank's parts into theirs.

        Returns
        -------
        cupy.ndarray
            A uint8 array of ``sum(nbytes)`` bytes, every rank's parts one after another in
            rank order, made on the compute stream: a download queued there after it reads
            it whole, and the caller waits for that before the next answer (which rewrites
            the slots).
        """
        ranks = self.ctx.ranks
        self._fit(nbytes)
        if held:
            self._to_slot(held)
        ranks.barrier("every rank's part of an answer in its slot")
        dev = self.device
        whole = dev.empty(sum(nbytes), np.uint8)
        at = 0
        with dev.use():
            for address, size in zip(self._peers, nbytes):
                dev.compute_stream.copy_bytes(int(whole.data.ptr) + at, address, size)
                at += int(size)
        return whole

    def _to_slot(self, held) -> None:
        """This rank's parts one after another into its slot, on their compute streams,
        waited for."""
        at, copied = 0, []
        for dev, part in held:
            if not part.flags.c_contiguous:
                raise ValueError(f"{dev.name}: an answer's part must be contiguous to cross "
                                 f"the ranks' slots")
            size = int(part.nbytes)
            dev.compute_stream.copy(self._slot[at:at + size], part.reshape(-1).view(np.uint8))
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
        from groute.engines.peer_barrier import together
        self.close()
        me = self.ctx.ranks.rank
        with together(self.ctx, "allocated its answer slot", "the ranks' answer slots"):
            self._slot = self.device.empty(max(grown[me], 1), np.uint8)
        self._addresses = PeerAddresses(self.ctx)
        arrays = [self._slot if r == me else None for r in range(len(grown))]
        self._peers = self._addresses.table(arrays, "the ranks' answer slots")
        self.sizes = grown

    def close(self) -> None:
        """Let the slots go, every rank at once (:meth:`PeerAddresses.close
        <groute.device.ipc.PeerAddresses.close>`: the mappings closed before any rank frees
        its slot). At a context's shutdown after a failure it is not called: another rank
        may still read this one's slot, which is kept."""
        if self._addresses is not None:
            addresses, self._addresses, self._peers = self._addresses, None, None
            addresses.close()
        self._slot = None
        self.sizes = [0] * len(self.sizes)
