"""RankContext: a Context spanning the ranks of an MPI job, one device per rank.

Every rank runs the same program (SPMD) on a context of ``K`` devices, K the number of ranks:
device ``r`` is rank ``r``'s own device, with its host thread and streams as in a
:class:`~groute.runtime.context.Context`: a CPU virtual device, or on CUDA the GPU of its place
among the job's processes on its host (:func:`~groute.device.logical.place_rank`: ranks share
the GPUs round-robin where there are more of them than GPUs); the others are
:class:`RemoteDevice` stand-ins that name the rank driving them. What runs on a device is
submitted on that device's rank: here :meth:`RankContext.submit` runs the local device's
function and gives a remote device's entry as ``None`` (its rank runs it), so a loop over the
devices runs each device's share exactly once in the job. Host values every rank needs
(counts, sums, decisions) come from :meth:`~groute.runtime.context.Context.share`, through
MPI (:mod:`groute.runtime.ranks`), data between devices from a
:class:`~groute.runtime.rank_router.RankRouter` (what a :class:`~groute.runtime.router.Router`
over a RankContext is), through the context's transport
(:mod:`groute.runtime.rank_transport`).

Failure: a device function that raises on rank ``r`` stops rank ``r``'s context as always,
and a notice goes to every other rank (so does an exception of rank ``r``'s own host code that
leaves the context's ``with`` block, or that the command line catches:
:meth:`RankContext.tell_failure`); each rank watches for notices (a thread polling every
:data:`~groute.waiting.POLL_INTERVAL`) and stops its context with a
:class:`~groute.errors.RankFailed` naming the rank, its device and the original error. So every
rank's waits give up within a poll interval, and every rank raises the same failure. A rank
that dies without a word is noticed by the others' timeout (each collective is bounded). Ranks
cannot meet again after a step some left midway, so a stopped RankContext is not reset: the
job ends (:meth:`RankContext.end_job`, which the command line calls).

At start-up the ranks tell each other where they run (backend, host, GPU; one allgather):
they must agree on the backend, and the transport every RankRouter of the context moves its
rows with is chosen from it, the same on every rank
(:func:`~groute.runtime.rank_transport.choose_transport`): NCCL where every rank has a GPU of
its own, else MPI (staged through the host on CUDA).
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import sys
import threading
import time

from ..device import cuda_device_count
from ..device.cuda import make_current, pci_bus_id
from ..device import nccl
from ..device.logical import place_rank
from ..errors import RankFailed
from ..tuning import setting
from ..waiting import POLL_INTERVAL
from .context import Context
from .rank_transport import MpiTransport, NcclTransport, RankPlace, choose_transport
from .ranks import Ranks

log = logging.getLogger(__name__)

#: seconds a rank other than 0 waits, after a failure, for rank 0 to end the job (so rank 0's
#: report is printed) before ending it itself
END_GRACE_S = 2.0


class NotOnThisRank(AttributeError):
    """What a remote device was asked for is on another rank's device."""


class RemoteDevice:
    """Device ``index`` of a RankContext, driven by rank ``index``: a name and what the
    context's bookkeeping asks of every device (nothing to drain, close or synchronise here).
    Anything else (memory, streams) is on its rank, and asking for it here says so."""

    broken = None
    user_code = None
    local = False

    def __init__(self, index: int, here: int, stop_event, backend: str = "cpu"):
        self.index = index
        self.rank = index
        self.backend = backend
        self._here = here
        self.stop_event = stop_event
        self.timeout = None

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.index}"

    def __getattr__(self, attr):
        raise NotOnThisRank(f"{self.backend}:{self.index} is driven by rank {self.index}; rank "
                            f"{self._here} holds only {self.backend}:{self._here} (asked for "
                            f"{attr!r})")

    def __repr__(self):
        return f"<RemoteDevice {self.name} on rank {self.rank}>"

    def drain(self, timeout) -> bool:
        return True

    def synchronize(self, timeout=None, *, spin: float = 0.0) -> None:
        pass

    def record_all(self) -> list:
        return []

    def idle(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def clear_failure(self, timeout=None) -> None:
        pass

    def note_failure(self, exc) -> None:
        pass

    def can_access_peer(self, other) -> bool:
        return False


class _RemoteHost:
    """The host-thread slot of a remote device: never busy here."""

    running = None
    _thread = None

    def wait_idle(self, timeout) -> bool:
        return True

    def stop(self) -> None:
        pass

    def join(self, timeout) -> bool:
        return True


def _gpu_of(backend: str, ranks):
    """``(host, PCI bus id)`` of the GPU this rank's device would run on, or None where it
    runs no GPU (the CPU backend, or ``"auto"`` finding none). A failure to read it is
    returned (as text), not raised: every rank must still reach the allgather."""
    if backend == "cpu":
        return None
    gpus = cuda_device_count()
    if gpus < 1:
        return None
    try:
        return ranks.host, pci_bus_id(ranks.local_rank % gpus)
    except Exception as exc:  # noqa: BLE001 - raised by every rank after the allgather
        return f"rank {ranks.rank} could not read its GPU's bus id: {type(exc).__name__}: {exc}"


class RankContext(Context):
    """A Context over the ranks of ``comm`` (default ``MPI.COMM_WORLD``); see the module
    docstring. ``backend``: ``"auto"`` (CUDA where CuPy finds a GPU, else the CPU; every rank
    must come to the same), ``"cuda"`` or ``"cpu"``. ``timeout`` bounds every wait,
    collectives included (default: groute's). ``transport``: how the RankRouters move rows,
    ``"auto"``, ``"mpi"`` or ``"nccl"`` (None: ``GROUTE_RANK_TRANSPORT``, default auto).

    Examples
    --------
    Run with ``mpiexec -n 2 python prog.py`` (or ``groute launch -n 2 -- prog.py``)::

        from groute.distributed import Context
        with Context(backend="cpu") as ctx:
            ranks = ctx.run(lambda device: device.name)   # ['cpu:0', None] on rank 0
            everyone = ctx.share(ranks)                   # ['cpu:0', 'cpu:1'] on every rank
    """

    def __init__(self, comm=None, *, backend: str = "auto", timeout=None, transport=None):
        self._announced = False
        self._answer_failed = False     # an answer to another rank failed (said once)
        self._watching = False
        self._places = None
        self._nccl = None
        #: the ranks' answers through device memory (groute.runtime.answer_exchange), decided
        #: at the first answer: False until then, None where they go through MPI
        self._answer_exchange = False
        ranks = Ranks(comm, timeout=timeout)
        self.ranks = ranks          # before the devices: this rank's is placed by it
        # every rank says which GPU it would run on (one allgather on every rank, whatever its
        # backend, so the collectives stay matched): the ranks on one GPU share it
        self._gpus_of_ranks = ranks.allgather(_gpu_of(backend, ranks),
                                              what="which GPU each rank runs on")
        failed = [g for g in self._gpus_of_ranks if isinstance(g, str)]
        if failed:
            raise RuntimeError("; ".join(failed))
        if self._gpus_of_ranks[ranks.rank] is not None:   # a GPU: current before any CUDA
            # work of this thread (cuda.make_current)
            make_current(ranks.local_rank % cuda_device_count())
        super().__init__(devices=[ranks.rank], backend=backend, timeout=timeout)
        ranks.stop = self.stop_event
        ranks.user_code = self._user_code_here
        self.rank = ranks.rank
        local = self.devices[0]
        self.devices = [local if i == ranks.rank else
                        RemoteDevice(i, ranks.rank, self.stop_event, self.backend)
                        for i in range(ranks.size)]
        for dev in self.devices:
            dev.timeout = self.timeout
        host = self._workers[0]
        self._workers = [host if i == ranks.rank else _RemoteHost() for i in range(ranks.size)]
        try:
            if self.backend == "cuda":      # the device's host thread too
                gpu = local.gpu
                host.submit(lambda: make_current(gpu)).result(timeout=self.timeout)
            self._meet(transport if transport is not None else setting("GROUTE_RANK_TRANSPORT"))
        except BaseException:
            super().shutdown()
            raise
        self._watching = True
        self._watch = threading.Thread(target=self._watch_notices, daemon=True,
                                       name=f"groute-rank{ranks.rank}-notices")
        self._watch.start()
        log.info("rank context: rank %d of %d on %s, %s; transport %s (%s)", ranks.rank,
                 ranks.size, ranks.host, self._where(), self.transport, self.transport_why)

    def _placements(self, indices, logical: bool) -> list:
        """This rank's device on the GPU of its place among its host's processes (module
        docstring), shared by as many devices as ranks run on that GPU (told by host and bus
        id: a launcher that shows each process only its own GPU numbers every one 0);
        ``logical`` does not apply: ranks share GPUs as they must."""
        ranks = self.ranks
        placed = place_rank(indices[0], ranks.local_rank, ranks.local_size, cuda_device_count())
        mine = self._gpus_of_ranks[ranks.rank]
        return [dataclasses.replace(placed, sharing=self._gpus_of_ranks.count(mine))]

    def _meet(self, asked: str) -> None:
        """Tell the other ranks where this one runs, hear where they do (one allgather), check
        that they agree on the backend, choose the transport and, for NCCL, make the
        communicator (every rank at once)."""
        ranks, local = self.ranks, self.local_device
        cuda = self.backend == "cuda"
        mine = RankPlace(self.backend, ranks.host, local.pci_bus_id() if cuda else None,
                         (nccl.unavailable() if cuda and ranks.size > 1 else None))
        places = ranks.allgather(mine, what="where the ranks run")
        backends = {p.backend for p in places}
        if len(backends) > 1:
            which = ", ".join(f"rank {r} {p.backend}" for r, p in enumerate(places))
            raise ValueError(f"the ranks of a distributed context must run one backend, but "
                             f"{which}; pass the same backend to every rank (backend='cpu' "
                             f"where some host has no GPU)")
        self._places = places
        self.transport, self.transport_why = choose_transport(asked, places)
        if self.transport == "nccl":
            uid = ranks.bcast(nccl.unique_id() if ranks.rank == 0 else None,
                              what="the NCCL communicator's id")
            try:
                self._nccl = nccl.Communicator(ranks.size, uid, ranks.rank, local,
                                               timeout=self.timeout)
                mine_failed = None
            except Exception as exc:  # noqa: BLE001 - every rank hears it, then all raise
                mine_failed = f"rank {ranks.rank}: {type(exc).__name__}: {exc}"
            failed = [f for f in ranks.allgather(mine_failed, what="the NCCL communicator "
                                                 "made on every rank") if f]
            if failed:
                if self._nccl is not None:
                    self._nccl.abort()
                raise RuntimeError("the NCCL communicator could not be made: " + "; ".join(failed))
            # every pair connected now, while every rank is here: NCCL connects a pair at
            # its first exchange, with a handshake no timeout or stop ends, which would hold
            # a healthy rank for good if its peer had failed before that first exchange
            self.open_transport().connect()

    def open_transport(self):
        """A new transport for one RankRouter (its own receive buffers): the context's
        choice (:attr:`transport`)."""
        options = dict(timeout=self.timeout, stop=self.stop_event)
        if self.transport == "nccl":
            return NcclTransport(self.ranks, self.local_device, self._nccl, **options)
        return MpiTransport(self.ranks, self.local_device, staged=self.backend == "cuda",
                            **options)

    def _where(self) -> str:
        device = self.local_device
        if self.backend != "cuda":
            return device.name
        shared = f", shared by {device.sharing} ranks" if device.sharing > 1 else ""
        return f"{device.name} on GPU {device.gpu}{shared}"

    # facts -----------------------------------------------------------------------------------
    @property
    def local_device(self):
        """This rank's device."""
        return self.devices[self.rank]

    @property
    def logical(self) -> bool:
        """True when some ranks share a GPU (every rank says the same): times taken on this
        context say nothing about how the work scales."""
        if self._places is None:        # while the devices are made
            return super().logical
        gpus = [(p.host, p.gpu) for p in self._places if p.gpu is not None]
        return len(set(gpus)) < len(gpus)

    @property
    def places(self) -> list:
        """Where every rank runs, in rank order (:class:`~groute.runtime.rank_transport.
        RankPlace`: backend, host, GPU bus id), as the ranks told each other at start-up."""
        return list(self._places or ())

    @property
    def gpu_count(self) -> int:
        """How many GPUs the job's devices run on, over every host (0 on the CPU backend)."""
        return len({(p.host, p.gpu) for p in self._places or () if p.gpu is not None})

    def is_local(self, index: int) -> bool:
        return index == self.rank

    def share(self, values, what: str = "the devices' values") -> list:
        """Every device's entry of ``values`` (a list over the devices, whose remote entries
        this rank does not have), on every rank: the local entry goes to every other rank."""
        return self.ranks.allgather(values[self.rank], what=f"sharing {what}")

    # running ----------------------------------------------------------------------------------
    def submit(self, device_index: int, fn, *args, **kwargs) -> cf.Future:
        """Run ``fn(device, ...)`` on this rank's device; a remote device's entry is a done
        future of ``None`` (its own rank runs it)."""
        if self.is_local(device_index):
            return super().submit(device_index, fn, *args, **kwargs)
        future = cf.Future()
        future.set_result(None)
        future.device = self.devices[device_index].name
        return future

    def synchronize(self, timeout=None, *, spin: float = 0.0):
        """Wait for this rank's device, then for every rank to have done so: a host clock
        around a step then times the whole job's step."""
        super().synchronize(timeout, spin=spin)
        self.ranks.barrier("the ranks to synchronise their devices")

    # failure ----------------------------------------------------------------------------------
    def fail(self, device_name: str, exc: BaseException) -> None:
        if device_name == self.local_device.name:
            device_name = f"{device_name} (rank {self.rank})"
        super().fail(device_name, exc)
        if self._error is not None and not self._announced \
                and not isinstance(self._error, RankFailed):
            self._announced = True
            try:
                self.ranks.announce(self._error_device, self._error)
            except Exception as sending:  # noqa: BLE001 - the others time out instead
                log.error("rank %d could not tell the other ranks of its failure: %s",
                          self.rank, sending)

    def tell_failure(self, exc: BaseException) -> None:
        """This rank's program failed outside any device function (its own host code, an
        input only it read): record ``exc`` as this rank's device's failure and tell every
        other rank, whose waits then stop within a poll interval naming this rank and ``exc``
        instead of running to their timeout. Nothing more where the context failed already
        (that first failure was told)."""
        self.fail(self.local_device.name, exc)

    def __exit__(self, exc_type, exc, tb):
        """As :meth:`Context.__exit__ <groute.runtime.context.Context.__exit__>`; an
        exception leaving the ``with`` block on this rank is told to the others first
        (:meth:`tell_failure`): they may be waiting for this rank in a collective."""
        if exc is not None and not _clean_exit(exc):
            self.tell_failure(exc)
        return super().__exit__(exc_type, exc, tb)

    def _user_code_here(self):
        """This rank's device's name and the user's code it runs, with how many seconds so
        far (None when it runs none): what this rank answers another whose wait timed out."""
        device = self.local_device
        code = device.user_code
        return (device.name, None if code is None else (code[0], time.monotonic() - code[1]))

    def _watch_notices(self):
        while self._watching:
            try:
                self.ranks.answer()
            except Exception as exc:  # noqa: BLE001 - one answer lost: keep watching
                if self.ranks.MPI.Is_finalized():
                    return
                (log.debug if self._answer_failed else log.warning)(
                    "rank %d could not answer another rank's question: %s", self.rank, exc)
                self._answer_failed = True      # said once, at warning level
            try:
                notice = self.ranks.notice()
            except Exception as exc:  # noqa: BLE001 - MPI finalised under us: stop watching
                log.debug("rank %d stops watching for failure notices: %s", self.rank, exc)
                return
            if notice is not None:
                self._announced = True      # the failure is another rank's, told already
                self.fail(f"{notice.device}", RankFailed(notice))
                continue
            time.sleep(POLL_INTERVAL)

    def reset(self, timeout=None) -> None:
        """A stopped RankContext cannot run again (module docstring): RuntimeError naming the
        failure; a context that is not stopped needs nothing."""
        self._usable()
        if not self.stopped:
            return
        why = (f"{self._error_device} failed ({type(self._error).__name__}: {self._error})"
               if self._error is not None else "it was stopped")
        raise RuntimeError(f"this distributed context cannot run again: {why}, and ranks cannot "
                           f"meet again after a step some of them left; end the job "
                           f"(RankContext.end_job)")

    def end_job(self, code: int = 1) -> None:
        """End every rank's process after a failure (``MPI_Abort``): rank 0 at once (after
        what it printed), the others after :data:`END_GRACE_S` unless rank 0's abort ended
        them first, so that rank 0's report is the one printed."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if self.rank != 0:
            time.sleep(END_GRACE_S)
        self.ranks.abort(code)

    def shutdown(self) -> None:
        """As :meth:`Context.shutdown <groute.runtime.context.Context.shutdown>`, after the
        failure watch has stopped (it calls MPI, which the interpreter's exit finalises); an
        NCCL communicator is freed, or aborted after a failure (its peers may be gone)."""
        self._watching = False
        if threading.current_thread() is not self._watch:
            self._watch.join(4 * POLL_INTERVAL)
        if self._nccl is not None and self._error is not None:
            # first: a worker held in an NCCL group by a failed peer returns, not at the
            # end of the workers' timeout
            self._nccl.abort()
        exchange = self._answer_exchange
        if exchange and self._error is None:    # every rank at once; after a failure the
            exchange.close()                    # slots are kept (another may still map them)
        broke = False
        try:
            super().shutdown()
        except BaseException:
            broke = True        # a worker may still be inside NCCL: freeing would wait for it
            raise
        finally:
            if self._nccl is not None:
                comm, self._nccl = self._nccl, None
                if self._error is not None or broke:
                    comm.abort()        # once only: a no-op after the abort above
                else:
                    comm.close()

    close = shutdown

    def __repr__(self):
        return (f"<RankContext rank {self.rank} of {self.ranks.size}: {self._where()}, "
                f"transport {self.transport}>")


__all__ = ["RankContext", "RemoteDevice"]


def _clean_exit(exc: BaseException) -> bool:
    """An exception that ends a rank's program without a failure (``sys.exit()`` or
    ``sys.exit(0)``, a generator closed): not told to the other ranks as one."""
    return isinstance(exc, GeneratorExit) or \
        (isinstance(exc, SystemExit) and exc.code in (None, 0))
