"""NCCL through CuPy (``cupy.cuda.nccl``): one process's GPU in a communicator of K, moving bytes.

The runtime's NCCL transport (:mod:`groute.runtime.rank_transport`) asks only for what
:class:`Communicator` has: a group of sends and receives of bytes on a device's stream, the
errors NCCL found asynchronously (a peer that failed), and abort. Every buffer goes as
``NCCL_UINT8``, so rows of any dtype move one way. A communicator joins one GPU per process:
NCCL refuses two ranks of one communicator on one GPU, which is why the transport is chosen
from where the ranks run (:func:`groute.runtime.rank_transport.choose_transport`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from ..config import resolve_timeout
from ..errors import WaitTimeout
from ..waiting import run_bounded


def _nccl():
    from cupy.cuda import nccl
    return nccl


def unavailable() -> str | None:
    """Why this process cannot use NCCL through CuPy (None: it can): the binding, the library,
    or the calls the transport makes (point-to-point needs NCCL 2.7, abort 2.4)."""
    try:
        nccl = _nccl()
    except Exception as exc:  # noqa: BLE001 - any failure to import says the same
        return f"CuPy's NCCL binding does not import ({type(exc).__name__}: {exc})"
    if not getattr(nccl, "available", False):
        return "CuPy finds no NCCL library (pip install nvidia-nccl-cu12, or your CUDA's NCCL)"
    missing = [name for name in ("NcclCommunicator", "get_unique_id", "groupStart", "groupEnd",
                                 "NCCL_UINT8") if not hasattr(nccl, name)]
    missing += [f"NcclCommunicator.{name}" for name in ("send", "recv", "abort",
                                                         "check_async_error")
                if hasattr(nccl, "NcclCommunicator")
                and not hasattr(nccl.NcclCommunicator, name)]
    if missing:
        return f"CuPy's NCCL binding lacks {', '.join(missing)} (CuPy too old)"
    try:
        version = int(nccl.get_version())
    except Exception as exc:  # noqa: BLE001 - a library that cannot say is not used
        return f"NCCL's version cannot be read ({type(exc).__name__}: {exc})"
    if version < 2700:
        return f"NCCL {version} has no point-to-point sends (2.7 or later needed)"
    return None


def unique_id():
    """A new communicator's id (made on one rank, sent to the others: ``Ranks.bcast``), as
    CuPy makes it and its communicator takes it back: ``bytes`` from CuPy 14, a tuple of ints
    before."""
    return _nccl().get_unique_id()


class Communicator:
    """Rank ``rank`` of ``size`` in the NCCL communicator ``uid`` names, on ``device``'s GPU.
    Made by every rank at once: NCCL's ``ncclCommInitRank`` returns once all have joined, and
    waits for them without a limit, so it runs on a thread of its own and a rank that is not
    joined within ``timeout`` seconds raises here, naming the GPU (the job then ends: the
    thread may stay blocked in NCCL)."""

    def __init__(self, size: int, uid, rank: int, device, *, timeout=None):
        nccl = _nccl()
        self._nccl = nccl
        self._uint8 = nccl.NCCL_UINT8
        self.device = device
        def make():
            from .cuda import make_current
            make_current(device.gpu)        # not a scope: its exit would choose GPU 0
            return nccl.NcclCommunicator(int(size), uid, int(rank))
        try:
            self._comm = run_bounded(make, timeout=timeout, name=f"groute-nccl-init-{rank}",
                                     what=f"rank {rank} of {size} to join the NCCL communicator")
        except WaitTimeout as exc:
            raise RuntimeError(f"rank {rank} of {size} on GPU {device.gpu} "
                               f"({device.pci_bus_id()}): the NCCL communicator was not made "
                               f"within {resolve_timeout(timeout):g} s "
                               f"(a rank failed or never joined; NCCL_DEBUG=WARN says more)"
                               ) from exc
        self.aborted = False
        self._ending = threading.Lock()     # abort may come from another thread (a failure)

    @contextmanager
    def group(self):
        """The sends and receives made in the block go as one NCCL group (every peer's at
        once, so no pair waits for another); they run on their streams after the block."""
        with self.device.use():
            self._nccl.groupStart()
            try:
                yield
            finally:
                self._nccl.groupEnd()

    def send(self, address: int, nbytes: int, peer: int, stream) -> None:
        """``nbytes`` bytes at device ``address`` to rank ``peer``, on ``stream`` (a device
        stream of this GPU)."""
        self._comm.send(int(address), int(nbytes), self._uint8, int(peer), int(stream.ptr))

    def recv(self, address: int, nbytes: int, peer: int, stream) -> None:
        """``nbytes`` bytes from rank ``peer`` into device ``address``, on ``stream``."""
        self._comm.recv(int(address), int(nbytes), self._uint8, int(peer), int(stream.ptr))

    def check(self) -> None:
        """Raise the error NCCL found since (``NcclError``: a peer that failed, a network
        error), or that it was aborted; nothing otherwise. Waits only for an abort under
        way on another thread. A status CuPy's table of NCCL's errors
        lacks (a newer NCCL's, e.g. ncclRemoteError) would come out of CuPy as a KeyError: it
        is raised as a RuntimeError naming the status instead."""
        try:
            with self._ending:              # not while another thread aborts it
                if self.aborted:
                    raise RuntimeError(f"the NCCL communicator on GPU {self.device.gpu} was "
                                       f"aborted (a failure or a shutdown elsewhere in this "
                                       f"rank): what it was moving did not all arrive")
                self._comm.check_async_error()
        except KeyError as exc:
            raise RuntimeError(f"NCCL reported an error of status {exc.args[0] if exc.args else '?'}"
                               f" (a peer failed or the network broke)") from exc

    def abort(self) -> None:
        """End the communicator now, its operations in flight included (``ncclCommAbort``):
        what a rank that gave up waiting does, so that no kernel of it waits on a dead peer,
        and what a failure does from another thread (a host thread held in ``ncclGroupEnd``
        by a peer that is gone returns). Once only."""
        with self._ending:
            if not self.aborted:
                self.aborted = True
                self._comm.abort()

    def close(self) -> None:
        """Free the communicator after its last operation ended."""
        with self._ending:
            if not self.aborted:
                self.aborted = True
                self._comm.destroy()
