"""Logical CUDA devices: K devices over fewer GPUs, so multi-device code runs on one GPU.

Machines with one GPU are the ones most often at hand, and the code paths that only run with
several devices (kernels that store into a peer's memory, cross-device barriers, the merge of
per-device results) would go untested on real hardware there. With logical devices asked for
(``Context(..., logical=True)`` or ``GROUTE_LOGICAL_DEVICES=1``; never on its own), a context
of K devices on a machine of G < K GPUs places device ``i`` on GPU ``i % G``. Each logical
device keeps its own streams, events, allocations and index; two on one GPU reach each other's
memory as plain device memory (copies become device-to-device copies).

Grids that must be resident all at once (the persistent and cooperative kernels that wait for
each other) are sized from a device's *share* of its GPU's multiprocessors, so the K kernels
fit side by side; a GPU with fewer multiprocessors than logical devices is refused.

This is a correctness mode: devices that share a GPU share its bandwidth and compute, so times
taken on them say nothing about scaling (``groute bench`` refuses them).

One process per device (a :class:`~groute.runtime.rank_context.RankContext`) places its one
device the same way: device ``r`` (rank ``r``'s) on the GPU of its rank among the processes of
its host (:func:`place_rank`). There the device's number is the rank's, not a CUDA ordinal, so
a whole GPU under another number is not a logical device; ranks that share a GPU are.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """Where one device of a context runs: its ``index`` (what the runtime calls it), the CUDA
    ordinal of its ``gpu``, and how many devices of the context share that GPU (``sharing``)."""
    index: int
    gpu: int
    sharing: int
    #: the index is a rank's device number (:func:`place_rank`), not a CUDA ordinal
    by_rank: bool = False

    @property
    def logical(self) -> bool:
        """True unless the device is a whole GPU under its own ordinal (a rank's device: a
        whole GPU under any number)."""
        return self.sharing > 1 or (self.gpu != self.index and not self.by_rank)


def place(indices, gpus: int, *, logical: bool) -> list[Placement]:
    """The placement of the devices ``indices`` on a machine of ``gpus`` GPUs.

    Without ``logical`` every index must be a GPU here. With it, an index past the last GPU is
    a logical device on GPU ``index % gpus``; indices that are GPUs here stay whole GPUs when
    no index needs a logical device."""
    indices = [int(i) for i in indices]
    if gpus < 1:
        raise ValueError("no CUDA GPU to place devices on")
    beyond = [i for i in indices if i >= gpus]
    if beyond and not logical:
        raise ValueError(
            f"device index {beyond[0]} does not exist (CUDA devices here: 0..{gpus - 1}); to run "
            f"more devices than GPUs for testing, ask for logical devices (logical=True or "
            f"GROUTE_LOGICAL_DEVICES=1)")
    gpu_of = {i: i % gpus for i in indices}
    counts: dict[int, int] = {}
    for g in gpu_of.values():
        counts[g] = counts.get(g, 0) + 1
    return [Placement(i, gpu_of[i], counts[gpu_of[i]]) for i in indices]


def place_rank(index: int, local_rank: int, local_size: int, gpus: int) -> Placement:
    """Where rank ``index``'s device runs: on GPU ``local_rank % gpus`` of its host, where
    ``local_rank`` is its place among the ``local_size`` processes of the job on that host
    (MPI's shared-memory split). More processes than GPUs share them round-robin, as logical
    devices do (``sharing``: how many of the host's processes run on that GPU).

    Examples
    --------
    >>> place_rank(5, 1, 4, 2)          # the host's second process of four, two GPUs
    Placement(index=5, gpu=1, sharing=2, by_rank=True)
    """
    if gpus < 1:
        raise ValueError("no CUDA GPU to place the rank's device on")
    if not 0 <= local_rank < local_size:
        raise ValueError(f"local rank {local_rank} is not among the host's {local_size} "
                         f"processes")
    gpu = local_rank % gpus
    sharing = len(range(gpu, local_size, gpus))
    return Placement(int(index), gpu, sharing, by_rank=True)


def sm_share(multiprocessors: int, placement: Placement) -> int:
    """The multiprocessors a device may size its resident grids for: its GPU's, divided among
    the devices that share it. Refuses a share of less than one: kernels that wait for each
    other could not all be resident."""
    share = int(multiprocessors) // placement.sharing
    if share < 1:
        raise ValueError(
            f"{placement.sharing} logical devices on GPU {placement.gpu} with {multiprocessors} "
            f"multiprocessors leave less than one each, so their persistent kernels could not all "
            f"be resident at once; ask for at most {multiprocessors} devices per GPU")
    return share
