"""CUDA IPC: one process's device memory mapped into the other processes of its host, so that a
persistent kernel on one rank writes straight into another rank's arrays (docs/DISTRIBUTED.md,
"CUDA IPC for the persistent kernels on one host").

A kernel that meets its peers at a cross-device barrier takes a table of device addresses: the
peers' control blocks, inboxes and values. In one process those are the peers' own addresses
(peer access makes them reachable); across processes each rank exports the allocation holding
each array (``cudaIpcGetMemHandle``: 64 bytes, plus the array's offset into it), the ranks
allgather the handles, and each opens the others' (``cudaIpcOpenMemHandle`` with lazy peer
access, which over NVLink is the mapping peer access gives one process; on the same GPU it is
that GPU's memory). :class:`PeerAddresses` gives one table per array for either case, so the
kernels' arguments are built one way.

CuPy's memory pool hands out pieces of larger allocations, and a handle names a whole
allocation: the exporter sends the allocation's handle and the array's offset into it
(``cuMemGetAddressRange``), and opening one allocation twice gives the same mapping (the driver
counts the openings; each is closed once). An exporter must keep its memory until every
importer has closed its mapping: :meth:`PeerAddresses.close` closes this rank's mappings, meets
the other ranks, and only then lets the exported arrays go.
"""
from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

#: cudaIpcMemLazyEnablePeerAccess: open another GPU's memory with peer access enabled on use
LAZY_PEER_ACCESS = 1


def _libcuda():
    from .cuda import libcuda
    try:
        return libcuda()
    except OSError as exc:
        raise RuntimeError(f"CUDA IPC needs the CUDA driver library (libcuda.so.1): {exc}") from exc


def allocation_of(address: int) -> tuple[int, int]:
    """``(base, size)`` of the CUDA allocation holding device ``address`` (the driver's
    ``cuMemGetAddressRange``); RuntimeError naming the address when it is not device memory."""
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    status = _libcuda().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                                ctypes.c_uint64(int(address)))
    if status != 0:
        raise RuntimeError(f"CUDA IPC: address {int(address):#x} is not in a device allocation "
                           f"of this process (cuMemGetAddressRange returned {status})")
    return int(base.value), int(size.value)


def export(array) -> tuple[bytes, int] | None:
    """What another process needs to map ``array`` (a CuPy array on the current device):
    the IPC handle of its allocation and the array's offset into it; None for None (an array
    the kernel does not have, passed as a null address)."""
    if array is None:
        return None
    import cupy
    address = int(array.data.ptr)
    base, _ = allocation_of(address)
    return bytes(cupy.cuda.runtime.ipcGetMemHandle(base)), address - base


def ipc_unavailable(ctx, max_devices: int) -> str | None:
    """Why kernels on the ranks of ``ctx`` (a RankContext on CUDA) cannot write into each
    other's memory through CUDA IPC (None: they can), the same answer on every rank (each
    checks the pairs it sees, then one allgather): the ranks must be at most ``max_devices``,
    on one host, and each rank's GPU must see every other rank's GPU (not hidden by
    ``CUDA_VISIBLE_DEVICES``), with peer access and native atomics (NVLink) unless it is the
    same GPU."""
    ranks, places = ctx.ranks, ctx.places
    if ranks.size > max_devices:
        return f"it runs on at most {max_devices} devices (the job has {ranks.size} ranks)"
    hosts = sorted({p.host for p in places})
    if len(hosts) > 1:
        return (f"the ranks run on {len(hosts)} hosts ({', '.join(hosts)}): CUDA IPC maps "
                f"memory within one host (between hosts: NVSHMEM, not built; docs/DISTRIBUTED.md)")
    try:
        mine = _unreachable_here(ctx)
    except Exception as exc:  # noqa: BLE001 - every rank must reach the allgather
        mine = f"rank {ranks.rank} could not ask its GPU: {type(exc).__name__}: {exc}"
    return next((why for why in ranks.allgather(mine, what="whether the ranks' GPUs reach "
                                                "each other's memory") if why), None)


def _unreachable_here(ctx) -> str | None:
    """Why this rank's GPU cannot write into some other rank's GPU's memory (None: it can
    reach every one), from the bus ids the ranks told each other."""
    import cupy
    from .cuda import native_atomics_between
    runtime = cupy.cuda.runtime
    me, here = ctx.ranks.rank, ctx.local_device.gpu
    for r, place in enumerate(ctx.places):
        if r == me or place.gpu == ctx.places[me].gpu:
            continue
        try:
            there = int(runtime.deviceGetByPCIBusId(place.gpu))
        except Exception:  # noqa: BLE001 - not visible here
            return (f"rank {me} does not see rank {r}'s GPU ({place.gpu}); its "
                    f"CUDA_VISIBLE_DEVICES hides it")
        if not runtime.deviceCanAccessPeer(here, there):
            return f"rank {me}'s GPU cannot access rank {r}'s GPU's memory (no peer access)"
        if native_atomics_between(here, there) is False:
            return f"rank {me}'s GPU has no native atomics on rank {r}'s GPU's memory (no NVLink)"
    return None


def open_handle(handle: bytes) -> int:
    """The address in this process of the allocation another process exported as ``handle``
    (on the current device, peer access enabled on use)."""
    import cupy
    return int(cupy.cuda.runtime.ipcOpenMemHandle(handle, LAZY_PEER_ACCESS))


def finish_device_work() -> None:
    """Wait for everything queued on the current device (its kernels among it)."""
    import cupy
    cupy.cuda.runtime.deviceSynchronize()


def close_handle(base: int) -> None:
    """Close one opening of a mapping :func:`open_handle` made."""
    import cupy
    cupy.cuda.runtime.ipcCloseMemHandle(int(base))


class MappedArray:
    """Another process's array as this process addresses it: its address only, as
    ``.data.ptr`` (where a CuPy array keeps its own), for the kernels' pointer tables."""

    class _Data:
        def __init__(self, ptr: int):
            self.ptr = int(ptr)

    def __init__(self, address: int):
        self.data = MappedArray._Data(address)


class PeerAddresses:
    """Device addresses of arrays every device of ``ctx`` holds, each usable by this process's
    kernels: the devices' own on a Context of one process, mapped through CUDA IPC on a
    :class:`~groute.runtime.rank_context.RankContext` (module docstring). Call :meth:`close`
    (every rank at once) when the kernels that use them are done."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.ranks = getattr(ctx, "ranks", None)
        self._opened = []       # bases this process opened, one entry per opening
        self._exported = []     # this rank's arrays the others map: kept until they close
        self._joined = False    # whether this rank took part in an exchange (close meets)

    def table(self, arrays, what: str) -> list[int]:
        """Per device, the address of its entry of ``arrays`` (a list over the devices: this
        process's arrays, None for another rank's and for an array a device does not have,
        whose address is 0). Across ranks every rank calls it at once (an allgather); a
        handle that cannot be opened on any rank raises on every rank, naming it."""
        if self.ranks is None or self.ranks.size == 1:
            return [0 if a is None else int(a.data.ptr) for a in arrays]
        with self.ctx.local_device.use():
            return self._mapped(arrays, what)

    def _mapped(self, arrays, what: str) -> list[int]:
        rank = self.ranks.rank
        mine = arrays[rank]
        self._joined = True         # every rank meets at close, whatever happens below
        try:
            sent, error = export(mine), None
        except Exception as exc:  # noqa: BLE001 - every rank hears it, then all raise
            sent, error = None, f"rank {rank} could not export {what}: {type(exc).__name__}: {exc}"
        if sent is not None:        # from now on another rank may map it
            self._exported.append(mine)
        shared = self.ranks.allgather((sent, error), what=f"the CUDA IPC handles of {what}")
        addresses, opened = [], []
        for r, (handle, failed) in enumerate(shared):
            error = error or failed
            if r == rank:
                addresses.append(0 if mine is None else int(mine.data.ptr))
            elif handle is None or error:
                addresses.append(0)
            else:
                try:
                    addresses.append(self._open(*handle))
                    opened.append(addresses[-1])
                except Exception as exc:  # noqa: BLE001 - as above
                    error = (f"rank {rank} could not map rank {r}'s {what}: "
                             f"{type(exc).__name__}: {exc}")
                    addresses.append(0)
        errors = [e for e in self.ranks.allgather(error, what=f"mapping {what}") if e]
        if errors:
            raise RuntimeError(f"CUDA IPC between the ranks failed: {errors[0]}")
        return addresses

    def _open(self, handle: bytes, offset: int) -> int:
        base = open_handle(handle)
        self._opened.append(base)
        return base + int(offset)

    def close(self) -> None:
        """Wait for this process's kernels (they may still write through the mappings: a run
        that failed elsewhere gives up at its meetings only after their timeout), close its
        mappings, then meet the other ranks, so that no rank frees memory another still maps.
        Every rank that made a table meets, whatever it opened. Idempotent. Where the ranks
        cannot meet (a rank failed or died), this rank keeps the memory it exported rather
        than let another rank's kernel write into reused memory."""
        if not self._joined:
            return
        self._joined = False
        opened, self._opened = self._opened, []
        with self.ctx.local_device.use():
            try:
                finish_device_work()
            except Exception as exc:  # noqa: BLE001 - a failed GPU runs nothing more
                log.warning("waiting for this rank's kernels before closing its CUDA IPC "
                            "mappings failed: %s", exc)
            for base in opened:
                try:
                    close_handle(base)
                except Exception as exc:  # noqa: BLE001 - a failed GPU: nothing more to close
                    log.warning("closing a CUDA IPC mapping failed: %s", exc)
        try:
            self.ranks.barrier("the ranks closing their CUDA IPC mappings")
        except Exception as exc:  # noqa: BLE001 - the job is failing
            log.warning("the ranks did not meet after closing their CUDA IPC mappings (%s); "
                        "rank %d keeps the memory it exported", exc, self.ranks.rank)
            return
        self._exported = []
