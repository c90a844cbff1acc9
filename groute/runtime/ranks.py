"""Ranks: the processes of an MPI job as one group, with bounded collectives and failure notices.

groute runs one process per device across processes and hosts (docs/DISTRIBUTED.md): rank
``r`` drives device ``r``. This module is the only one that talks to MPI (through
``mpi4py``, imported on first use). It gives the rest of groute what a
:class:`~groute.runtime.rank_context.RankContext` needs:

- collectives that never wait forever: every one is MPI's non-blocking form (``Iallreduce``,
  ``Ialltoallv``, ...) polled with :func:`groute.waiting.wait_for`, so it gives up at the
  context's stop flag (a failure anywhere) or its timeout (a rank that died or never came),
  naming what it waited for and which rank waited;
- failure notices: a rank whose device failed tells every other rank (rank, device, the
  original error) on a communicator of its own, and :meth:`Ranks.notice` reads the notices
  that arrived, without waiting;
- where a wait times out, what the other ranks are doing (the user's code they run, the
  collective they wait in, or nothing heard), asked on that communicator and answered by
  their failure watch (:meth:`Ranks.ask_the_others`, :meth:`Ranks.answer`), so that the
  error names the rank the others waited for.

Python objects travel pickled (small control data: counts, stats, decisions); arrays travel as
typed buffers. The communicators are duplicates of the one given (``MPI.COMM_WORLD`` by
default), so groute's messages never match the program's own.
"""
from __future__ import annotations

import math
import os
import pickle
import re
import threading
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ..config import resolve_timeout
from ..errors import WaitTimeout, error_text, stalled_by_user_code
from ..waiting import wait_for

#: the message tag of a failure notice
NOTICE_TAG = 77
#: the message tags of a rank asking the others what they are doing, after a wait of its timed
#: out, and of their answers (:meth:`Ranks.ask_the_others`)
ASK_TAG, ANSWER_TAG = 78, 79
#: seconds a rank whose wait timed out waits for the others' answers: each answers within
#: its failure watch's poll interval, unless it is gone or stuck
ASK_S = 1.0
#: ``Test`` calls per poll of a collective: MPI moves a large message a piece per call (MPICH's
#: shared-memory pipeline), so a single ``Test`` per step of the waits' back-off would crawl
#: through it; a burst of calls costs little when there is nothing to do
TESTS_PER_POLL = 128
#: seconds a collective's wait polls without sleeping before the back-off (``spin`` of
#: :func:`~groute.waiting.wait_for`), on a host with two cores per rank (one for the waiting
#: thread, one for the rank's others): the ranks meet around every run (its launches, its
#: ends, the timer's synchronisation), a few tens of microseconds apart, and a back-off sleep
#: would end each meeting late by up to its own length
SPIN_S = 0.002
#: bytes a collective moves (on this rank, in or out) from which its wait blocks in MPI on a
#: thread of its own instead of polling: MPI moves a large message in pieces, each needing a
#: call into MPI on both sides, so polling with the back-off's sleeps between bursts of
#: ``Test`` crawls through it, orders of magnitude slower than a blocked wait (docs/
#: DISTRIBUTED.md). The waiting thread still wakes for the timeout and a stop.
BULK_BYTES = 1 << 20
#: bytes of the fixed slot each rank fills in a pickled allgather or broadcast: the object's
#: length, then its first bytes. Small control data (a run's ends, a decision, a failure)
#: fits, and the collective is one meeting; a longer object's rest follows in a second one,
#: which every rank knows it needs from the lengths the first brought
SLOT_BYTES = 2048
#: environment variables a process manager sets in the processes it starts: MPICH's hydra
#: (PMI), Open MPI, PMIx, Slurm
LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS")
INSTALL_HINT = "pip install 'groute[mpi]' (mpi4py and the mpich wheel), or mpi4py built for your site's MPI"


def collective_spin(local_ranks: int, cores: int, usable: int) -> float:
    """Seconds a collective's wait polls before it sleeps, for a rank that may run on
    ``usable`` of its host's ``cores`` (its CPU affinity), the host running ``local_ranks`` of
    the job: :data:`SPIN_S` where the rank has two cores of its own (bound to at least two,
    or unbound on a host with two per rank), else 0 (a spinning rank would take the core
    another rank, or its own device thread, needs to arrive)."""
    if usable < cores:                  # bound by the launcher or the container: its own cores
        return SPIN_S if usable >= 2 else 0.0
    return SPIN_S if cores >= 2 * local_ranks else 0.0


def _usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:              # no affinity on this platform (macOS)
        return os.cpu_count() or 1


def mpi():
    """The ``mpi4py.MPI`` module, or an ImportError that says how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(f"groute over several processes needs mpi4py and an MPI library: "
                          f"{INSTALL_HINT} ({exc})") from exc
    return MPI


def launched_size() -> int:
    """How many processes the MPI launcher that started this one started (1 when none did),
    from its environment, without starting MPI."""
    for name in LAUNCHER_SIZE_VARIABLES:
        text = os.environ.get(name, "")
        if text.isdigit() and int(text) > 0:
            return int(text)
    return 1


@dataclass(frozen=True)
class Notice:
    """A failure on another rank: where, and the original error's type and message."""

    rank: int
    device: str
    error: str
    message: str

    def __str__(self):
        return f"{self.error}: {self.message}"


_OPS = {"sum": "SUM", "min": "MIN", "max": "MAX"}

def _by_rank(values) -> str:
    """``'a' on ranks 0, 2; 'b' on rank 1``: each rank's value, the ranks of a value together."""
    groups = {}
    for r, value in enumerate(values):
        groups.setdefault(value, []).append(r)
    return "; ".join(f"{value} on rank{'s' if len(ranks) > 1 else ''} "
                     f"{', '.join(map(str, ranks))}" for value, ranks in groups.items())


#: characters of an argument's description kept (:func:`describe_argument`)
DESCRIPTION_CHARS = 120
#: items from which a collection is described by its length and a checksum of its contents
#: instead of item by item (:func:`describe_argument`): a text per item would cost seconds
LARGE_COLLECTION = 4096


def _checksum(data: bytes | memoryview) -> str:
    return f"{zlib.crc32(data):08x}"


#: the item types a large collection may hold to be described by one checksum of its repr:
#: their repr is the same in every process (no addresses, no hash-seed order inside)
_PLAIN = (int, float, str, bytes, bool, type(None))


_NOT_PLAIN = object()


def _plain(value):
    """``value`` as a plain Python value where it is one or a NumPy scalar (its ``.item()``),
    else ``_NOT_PLAIN``: what a large collection's checksum may cover by repr."""
    if isinstance(value, np.generic):
        value = value.item()
    return value if type(value) in _PLAIN else _NOT_PLAIN


def _large(value) -> str:
    """A collection of :data:`LARGE_COLLECTION` items or more, by its length and a checksum
    equal on every rank where its items are: of the repr of its plain items (sets' and
    dicts' sorted), else of every item's :func:`describe_argument` text (sorted for sets and
    dicts), which costs more."""
    pairs = list(value.items()) if isinstance(value, dict) else None
    items = [x for pair in pairs for x in pair] if pairs is not None else list(value)
    plain = [_plain(x) for x in items]
    unordered = isinstance(value, (set, frozenset, dict))
    if not any(x is _NOT_PLAIN for x in plain):
        if pairs is not None:
            texts = [repr(pair) for pair in zip(plain[0::2], plain[1::2])]
        else:
            texts = [repr(x) for x in plain]
    elif pairs is not None:
        texts = [f"{describe_argument(k)}: {describe_argument(v)}" for k, v in pairs]
    else:
        texts = [describe_argument(x) for x in items]
    if unordered:
        texts.sort()
    return (f"a {type(value).__name__} of {len(value)} items (checksum "
            f"{_checksum(chr(31).join(texts).encode())})")


def describe_argument(value) -> str:
    """A short text that is equal on two ranks where ``value`` is the same call's argument:
    an array by its shape, dtype and a checksum of its bytes, an object with a
    ``describe_across_ranks()`` by what that says (a graph loaded by ranks, of which each rank
    holds another part: the whole graph's facts), a collection by its items (a set's and a
    dict's in one order, whatever the order they were made in; one of
    :data:`LARGE_COLLECTION` items or more by its length and a checksum of its contents), a
    NumPy scalar as the Python number it holds, other values by their ``repr`` without object
    addresses, cut to :data:`DESCRIPTION_CHARS` characters."""
    if isinstance(value, np.generic):       # np.float64(0.1) and 0.1 are the same argument
        value = value.item()
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        return (f"an array of shape {value.shape} and dtype {value.dtype} "
                f"(checksum {_checksum(data)})")
    across = getattr(value, "describe_across_ranks", None)
    if callable(across):            # e.g. a graph loaded by ranks: each holds another part
        return across()
    if isinstance(value, (list, tuple, set, frozenset, dict)) and len(value) >= LARGE_COLLECTION:
        return _large(value)
    if isinstance(value, (list, tuple)):
        text = ", ".join(describe_argument(v) for v in value)
        text = f"[{text}]" if isinstance(value, list) else f"({text})"
    elif isinstance(value, (set, frozenset)):   # in an order the process's hash seed sets
        text = "{" + ", ".join(sorted(describe_argument(v) for v in value)) + "}"
    elif isinstance(value, dict):               # insertion order: the same hash seed's
        text = "{" + ", ".join(sorted(f"{describe_argument(k)}: {describe_argument(v)}"
                                      for k, v in value.items())) + "}"
    else:               # without the addresses of objects, which differ between processes
        text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))
    return text if len(text) <= DESCRIPTION_CHARS else \
        f"{text[:DESCRIPTION_CHARS]}... (checksum {_checksum(text.encode())})"


#: bytes of a slot's length header (:data:`SLOT_BYTES`)
_LENGTH_BYTES = 8


def _slot(data: bytes) -> bytearray:
    """A :data:`SLOT_BYTES` slot holding ``data``'s length and as many of its first bytes as
    fit (plain bytes, no NumPy: these collectives sit on every run's path, where each array
    operation's few microseconds add up)."""
    slot = bytearray(SLOT_BYTES)
    slot[:_LENGTH_BYTES] = len(data).to_bytes(_LENGTH_BYTES, "little")
    head = data[:SLOT_BYTES - _LENGTH_BYTES]
    slot[_LENGTH_BYTES:_LENGTH_BYTES + len(head)] = head
    return slot


def _unslot(slots: bytearray, count: int):
    """The lengths and the head bytes held by ``count`` slots one after another
    (:func:`_slot`)."""
    sizes, heads = [], []
    for r in range(count):
        at = r * SLOT_BYTES
        n = int.from_bytes(slots[at:at + _LENGTH_BYTES], "little")
        sizes.append(n)
        heads.append(bytes(slots[at + _LENGTH_BYTES:
                                 at + _LENGTH_BYTES + min(n, SLOT_BYTES - _LENGTH_BYTES)]))
    return sizes, heads


class Ranks:
    """The ranks of ``comm`` (default ``MPI.COMM_WORLD``); see the module docstring.

    ``timeout`` bounds every collective (seconds; default: groute's); ``stop`` (a
    :class:`~groute.waiting.StopSignal`) ends a collective early when set.
    """

    def __init__(self, comm=None, *, timeout=None, stop=None):
        MPI = mpi()
        if not MPI.Is_initialized():
            MPI.Init_thread(MPI.THREAD_MULTIPLE)
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise RuntimeError("groute's ranks call MPI from several threads (a device's host "
                               "thread and the failure watch), but MPI was started without "
                               "MPI_THREAD_MULTIPLE; let mpi4py start it (its default) or "
                               "start it with MPI.Init_thread(MPI.THREAD_MULTIPLE)")
        self.MPI = MPI
        base = comm if comm is not None else MPI.COMM_WORLD
        self.comm = base.Dup()
        self.notices = base.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # this process's place among the job's processes on its host: which GPU it takes
        host = base.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = host.Get_rank(), host.Get_size()
        host.Free()
        #: seconds each collective's wait polls before it sleeps (:data:`SPIN_S`, or 0 where
        #: this host's ranks have fewer than two cores each)
        self.spin = collective_spin(self.local_size, os.cpu_count() or 1, _usable_cores())
        #: the name of this process's host (MPI's processor name)
        self.host = MPI.Get_processor_name()
        self.timeout = resolve_timeout(timeout)
        self.stop = stop
        self._sent = []              # failure notices and answers still in flight
        self._waits = {}             # thread id -> (what it waits for, since)
        #: collectives this rank has waited for, in program order (the same count on every
        #: rank at the same point of an SPMD program), and that count where a caller marked a
        #: meeting (:meth:`mark_meeting`)
        self.collectives = 0
        self._marked = -1
        #: ``() -> (device name, (what, seconds) or None)``: this rank's device and the user's
        #: code it runs now, for the answers to the other ranks (:meth:`answer`); set by the
        #: context
        self.user_code = lambda: (None, None)

    def __repr__(self):
        return f"<Ranks {self.rank} of {self.size}>"

    # waiting --------------------------------------------------------------------------------
    def _wait(self, request, what: str, nbytes: int = 0):
        """Wait for ``request`` (a collective moving ``nbytes`` here), bounded by the timeout
        and the stop event: polled, or from :data:`BULK_BYTES` blocked in MPI on a thread of
        its own (:meth:`_wait_bulk`)."""
        self.collectives += 1
        if nbytes >= BULK_BYTES:
            return self._wait_bulk(request, what)

        def done() -> bool:
            return any(request.Test() for _ in range(TESTS_PER_POLL))
        me = threading.get_ident()
        self._waits[me] = (what, time.monotonic())
        try:
            wait_for(done, timeout=self.timeout, stop=self.stop, spin=self.spin,
                     what=f"{what} on rank {self.rank} of {self.size} (a rank that failed, died "
                          f"or runs another step)")
        except WaitTimeout as exc:
            raise self._timed_out(exc) from exc
        finally:
            self._waits.pop(me, None)

    def mark_meeting(self) -> None:
        """Mark the collective this rank just made as a meeting its caller goes on from at
        once (the synchronisation at the start of a timed run, before its launches):
        :meth:`at_marked_meeting` then says whether no collective came since. Every rank
        marks the same point (SPMD), so every rank gets the same answer there."""
        self._marked = self.collectives

    def at_marked_meeting(self) -> bool:
        """Whether the ranks' last meeting is the one :meth:`mark_meeting` marked.

        Returns
        -------
        bool
            True where this rank's last collective is the marked one: the ranks met there,
            and none has met the others since. Program order, not time: the same on every
            rank at the same point of the program.
        """
        return self.collectives == self._marked

    def _wait_bulk(self, request, what: str):
        """``request.Wait()`` on a daemon thread (mpi4py lets go of the GIL inside it), this
        thread waking at its end, at the timeout or at a stop. Past those the blocked thread
        stays; the job is failing then, and ends by ``MPI_Abort``
        (:meth:`~groute.runtime.rank_context.RankContext.end_job`)."""
        ended = threading.Condition()
        out = {}

        def run():
            try:
                request.Wait()
            except BaseException as exc:  # noqa: BLE001 - raised on the waiting thread
                out["error"] = exc
            with ended:
                out["done"] = True
                ended.notify_all()
        me = threading.get_ident()
        self._waits[me] = (what, time.monotonic())
        try:
            threading.Thread(target=run, daemon=True, name="groute-mpi-wait").start()
            with ended:
                wait_for(lambda: "done" in out, timeout=self.timeout, stop=self.stop,
                         cond=ended, what=f"{what} on rank {self.rank} of {self.size} (a rank "
                                          f"that failed, died or runs another step)")
        except WaitTimeout as exc:
            raise self._timed_out(exc) from exc
        finally:
            self._waits.pop(me, None)
        if "error" in out:
            raise out["error"]

    def _timed_out(self, exc: WaitTimeout) -> WaitTimeout:
        """``exc`` (a collective's wait that timed out) saying what the other ranks are doing
        (:meth:`ask_the_others`); its ``user_code_elsewhere`` lists ``(seconds, device, what)``
        of the user's code they run, which a context names as the failure
        (:meth:`groute.runtime.context.Context.fail`)."""
        said, running = [], []
        for r, answer in self.ask_the_others().items():
            if answer is None:
                said.append(f"rank {r} did not answer (it left the job's context, died, or is "
                            f"stuck outside Python)")
                continue
            device, code, waiting = answer
            if code is not None:
                running.append((code[1], f"{device} (rank {r})", code[0]))
                said.append(f"rank {r} runs {code[0]} (for {code[1]:.1f} s)")
            elif waiting is not None:
                said.append(f"rank {r} waits for {waiting[0]} (for {waiting[1]:.1f} s)")
            else:
                said.append(f"rank {r} runs groute's own code, waiting for no rank")
        slow = [r for r in running if r[0] >= self.timeout / 2]
        if slow:            # the user's code the others wait for: why, and what to do
            took, device, code = max(slow)
            why = stalled_by_user_code(code, device, took, f"rank {self.rank}", self.timeout)
            timed = WaitTimeout(f"{why} (the other ranks: {', '.join(said)}; the wait: {exc})")
        else:
            timed = WaitTimeout(f"{exc}; the other ranks: {', '.join(said)}")
        timed.user_code_elsewhere = running
        return timed

    def ask_the_others(self, within: float = ASK_S) -> dict:
        """What every other rank is doing now, as its failure watch answers (:meth:`answer`):
        rank -> ``(its device, (the user's code it runs, for how many seconds) or None, (the
        collective it waits in, for how many seconds) or None)``, or None where no answer came
        within ``within`` seconds."""
        for r in range(self.size):
            if r != self.rank:
                self._sent.append(self.notices.Isend(np.zeros(1, np.uint8), dest=r, tag=ASK_TAG))
        answers = {}
        deadline = time.monotonic() + within
        while len(answers) < self.size - 1 and time.monotonic() < deadline:
            status = self.MPI.Status()
            message = self.notices.improbe(source=self.MPI.ANY_SOURCE, tag=ANSWER_TAG,
                                           status=status)
            if message is None:
                time.sleep(0.005)
                continue
            buf = np.empty(status.Get_count(self.MPI.BYTE), np.uint8)
            message.Recv(buf)
            answers[status.Get_source()] = pickle.loads(buf.tobytes())
        return {r: answers.get(r) for r in range(self.size) if r != self.rank}

    def answer(self) -> None:
        """Answer the other ranks that asked what this one is doing (:meth:`ask_the_others`;
        never waits): this rank's device, the user's code it runs (:attr:`user_code`) and the
        collective it waits in, each with how long so far."""
        while True:
            status = self.MPI.Status()
            message = self.notices.improbe(source=self.MPI.ANY_SOURCE, tag=ASK_TAG,
                                           status=status)
            if message is None:
                return
            message.Recv(np.empty(1, np.uint8))
            now = time.monotonic()
            device, code = self.user_code()
            waits = list(self._waits.values())
            waiting = min(waits, key=lambda w: w[1], default=None)
            data = pickle.dumps((device, code,
                                 None if waiting is None else (waiting[0], now - waiting[1])),
                                protocol=5)
            self._sent.append(self.notices.Isend(np.frombuffer(data, np.uint8),
                                                 dest=status.Get_source(), tag=ANSWER_TAG))
            self._sent = [req for req in self._sent if not req.Test()]

    # collectives --------------------------------------------------------------------------------
    def barrier(self, what: str = "a barrier") -> None:
        """Every rank meets."""
        self._wait(self.comm.Ibarrier(), what)

    def allreduce(self, values, op: str = "sum", what: str = "an allreduce"):
        """``values`` (a number or an array) combined over the ranks by ``op`` (``"sum"``,
        ``"min"``, ``"max"``); the same shape and type back. Every rank must send the same
        type: a signed integer goes as int64 and a float as float64 (a rank's int32 weight
        and another's Python int agree so), anything else as it is."""
        scalar = np.ndim(values) == 0
        send = np.asarray(values)
        if scalar and send.dtype.kind in "if":
            send = send.astype(np.float64 if send.dtype.kind == "f" else np.int64)
        send = np.ascontiguousarray(np.atleast_1d(send))
        recv = np.empty_like(send)
        self._wait(self.comm.Iallreduce(send, recv, op=getattr(self.MPI, _OPS[op])), what,
                   send.nbytes)
        return recv[0].item() if scalar else recv

    def reduce_scatter(self, values, counts, op: str = "sum",
                       what: str = "a reduce-scatter") -> np.ndarray:
        """``values`` (an array over a whole, the same shape on every rank) combined over the
        ranks by ``op``, each rank getting its piece: rank ``r`` the ``counts[r]`` elements
        after the pieces of the ranks before it."""
        send = np.ascontiguousarray(values)
        counts = [int(c) for c in counts]
        if len(counts) != self.size or sum(counts) != send.shape[0]:
            raise ValueError(f"reduce_scatter takes one count per rank ({self.size}) adding up "
                             f"to the values' {send.shape[0]}, got {counts}")
        recv = np.empty(counts[self.rank], send.dtype)
        self._wait(self.comm.Ireduce_scatter(send, recv, counts,
                                             op=getattr(self.MPI, _OPS[op])), what, send.nbytes)
        return recv

    def allgather(self, obj, what: str = "an allgather") -> list:
        """Every rank's ``obj`` (pickled), in rank order."""
        return [pickle.loads(b) for b in self._allgather_bytes(pickle.dumps(obj, protocol=5), what)]

    def _allgather_bytes(self, data: bytes, what):
        """Every rank's ``data``, in rank order: one allgather of :data:`SLOT_BYTES` slots,
        then one of the rests where any rank's ``data`` did not fit its slot."""
        slots = bytearray(self.size * SLOT_BYTES)
        self._wait(self.comm.Iallgather(_slot(data), slots), what, len(slots))
        sizes, heads = _unslot(slots, self.size)
        rests = [n - len(head) for n, head in zip(sizes, heads)]
        if not any(rests):
            return heads
        recv = np.empty(sum(rests), np.uint8)
        displs = np.concatenate([[0], np.cumsum(rests)[:-1]])
        self._wait(self.comm.Iallgatherv(np.frombuffer(data, np.uint8)[len(heads[self.rank]):],
                                         [recv, rests, displs, self.MPI.BYTE]), what,
                   recv.nbytes)
        return [head + recv[a:a + n].tobytes() for head, a, n in zip(heads, displs, rests)]

    def alltoall(self, objs, what: str = "an alltoall") -> list:
        """``objs[j]`` (pickled) to rank ``j``; what every rank sent here, in rank order."""
        if len(objs) != self.size:
            raise ValueError(f"alltoall takes one object per rank ({self.size}), got {len(objs)}")
        payloads = [np.frombuffer(pickle.dumps(o, protocol=5), np.uint8) for o in objs]
        return [pickle.loads(p.tobytes()) for p in self.alltoallv(payloads, np.uint8, what=what)]

    def alltoallv(self, arrays, dtype, item_shape=(), what: str = "an alltoallv") -> list:
        """``arrays[j]`` (rows of ``item_shape``, of ``dtype``) to rank ``j``; the arrays every
        rank sent here, in rank order (MPI's ``Alltoallv``)."""
        if len(arrays) != self.size:
            raise ValueError(f"alltoallv takes one array per rank ({self.size}), got {len(arrays)}")
        dtype = np.dtype(dtype)
        row = math.prod(item_shape) * dtype.itemsize
        flat = [np.ascontiguousarray(a, dtype=dtype).reshape(-1).view(np.uint8) for a in arrays]
        counts = np.array([f.size for f in flat], np.int64)
        got = self.alltoall_counts(counts, what)
        send = np.concatenate(flat) if flat else np.zeros(0, np.uint8)
        recv = np.empty(int(got.sum()), np.uint8)
        self.alltoallv_bytes(send, counts, recv, got, what)
        rdispl = np.concatenate([[0], np.cumsum(got)[:-1]])
        return [recv[a:a + n].view(dtype).reshape((n // max(row, 1), *item_shape))
                for a, n in zip(rdispl, got)]

    def alltoall_counts(self, counts, what: str = "an alltoall of counts") -> np.ndarray:
        """``counts[j]`` (int64) to rank ``j``: the count every rank sent here, in rank order
        (what the receiving side of :meth:`alltoallv_bytes` needs)."""
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        if counts.shape != (self.size,):
            raise ValueError(f"alltoall_counts takes one count per rank ({self.size}), got "
                             f"{counts.shape}")
        got = np.empty(self.size, np.int64)
        self._wait(self.comm.Ialltoall(counts, got), what)
        return got

    def alltoallv_bytes(self, send, send_counts, recv, recv_counts,
                        what: str = "an alltoallv") -> None:
        """MPI's ``Alltoallv`` of bytes whose counts both sides know already: ``send``'s
        first ``send_counts[0]`` bytes to rank 0, the next ``send_counts[1]`` to rank 1, ...;
        ``recv`` (host memory, at least ``sum(recv_counts)`` bytes) filled with
        ``recv_counts[s]`` bytes from each rank ``s`` in rank order. The buffers may be larger
        than the counts (staging buffers that grow)."""
        send_counts = np.asarray(send_counts, np.int64)
        recv_counts = np.asarray(recv_counts, np.int64)
        sdispl = np.concatenate([[0], np.cumsum(send_counts)[:-1]])
        rdispl = np.concatenate([[0], np.cumsum(recv_counts)[:-1]])
        byte = self.MPI.BYTE
        self._wait(self.comm.Ialltoallv([send, send_counts, sdispl, byte],
                                        [recv, recv_counts, rdispl, byte]), what,
                   max(int(send_counts.sum()), int(recv_counts.sum())))

    def allgatherv(self, array, what: str = "an allgatherv") -> list:
        """Every rank's ``array`` (of one dtype and row shape on every rank), in rank order."""
        array = np.ascontiguousarray(array)
        sizes = np.empty(self.size, np.int64)
        self._wait(self.comm.Iallgather(np.array([array.nbytes], np.int64), sizes), what)
        recv = np.empty(int(sizes.sum()), np.uint8)
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self._wait(self.comm.Iallgatherv(array.reshape(-1).view(np.uint8),
                                         [recv, sizes, displs, self.MPI.BYTE]), what,
                   recv.nbytes)
        shape = array.shape[1:]
        row = int(np.prod(shape, dtype=np.int64)) * array.dtype.itemsize
        return [recv[a:a + n].view(array.dtype).reshape((n // max(row, 1), *shape))
                for a, n in zip(displs, sizes)]

    def allgatherv_in_place(self, buffer: np.ndarray, counts, what: str = "an allgatherv"):
        """Every rank's piece, gathered into the caller's own buffer (MPI's ``MPI_IN_PLACE``):
        no receive buffer, no copy out of it.

        Parameters
        ----------
        buffer : numpy.ndarray
            Bytes (a contiguous uint8 array), the same length on every rank; rank ``r`` has
            written its piece at its place before the call.
        counts : sequence of int
            Every rank's piece in bytes: rank ``r``'s is the ``counts[r]`` bytes after the
            pieces of the ranks before it.
        what : str
            What is gathered, for a wait that times out.

        Raises
        ------
        ValueError
            Where ``counts`` is not one count per rank adding up to the buffer's length.
        """
        counts = np.asarray(counts, np.int64)
        if counts.shape != (self.size,) or int(counts.sum()) != buffer.nbytes:
            raise ValueError(f"allgatherv_in_place takes one count per rank ({self.size}) "
                             f"adding up to the buffer's {buffer.nbytes} bytes, got "
                             f"{counts.tolist()}")
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self._wait(self.comm.Iallgatherv(self.MPI.IN_PLACE,
                                         [buffer, counts, displs, self.MPI.BYTE]), what,
                   buffer.nbytes)

    def bcast(self, obj, root: int = 0, what: str = "a broadcast"):
        """``root``'s ``obj`` on every rank: one broadcast of a :data:`SLOT_BYTES` slot, and
        one of the rest where the pickled object does not fit it."""
        data = pickle.dumps(obj, protocol=5) if self.rank == root else b""
        slot = _slot(data) if self.rank == root else bytearray(SLOT_BYTES)
        self._wait(self.comm.Ibcast(slot, root=root), what)
        (size,), (head,) = _unslot(slot, 1)
        rest = np.frombuffer(data, np.uint8)[len(head):].copy() if self.rank == root \
            else np.empty(size - len(head), np.uint8)
        if rest.size:
            self._wait(self.comm.Ibcast(rest, root=root), what, rest.nbytes)
        return pickle.loads(head + rest.tobytes())

    def check_same_call(self, name: str, arguments: dict) -> None:
        """Raise a ValueError on every rank unless every rank called ``name`` with the same
        ``arguments`` (parameter name -> value; one allgather of their descriptions,
        :func:`describe_argument`). Every rank must make the same calls with the same
        arguments (SPMD); ranks that do not would go on into different collectives, or the
        same ones with different sizes, and fail there with errors that say nothing of the
        cause, or give an answer mixed from the calls."""
        mine = {key: describe_argument(value) for key, value in arguments.items()}
        every = self.allgather((name, mine), what=f"the arguments of {name}")
        if all(seen == every[0] for seen in every):
            return
        if len({called for called, _ in every}) > 1:
            raise ValueError(f"the ranks of one job made different calls at once "
                             f"({_by_rank([called for called, _ in every])}); every rank must "
                             f"make the same calls with the same arguments")
        differ = []
        for key in sorted({key for _, seen in every for key in seen}):
            values = [seen.get(key, "(not given)") for _, seen in every]
            if len(set(values)) > 1:
                differ.append(f"{key}: {_by_rank(values)}")
        raise ValueError(f"{name} was called with different arguments on the ranks of one job "
                         f"({'; '.join(differ)}); every rank must make the same calls with the "
                         f"same arguments")

    # failures -------------------------------------------------------------------------------------
    def announce(self, device: str, exc: BaseException) -> None:
        """Tell every other rank that ``device`` (this rank's) failed with ``exc``. Returns at
        once: the notices go out while this rank unwinds."""
        notice = Notice(self.rank, device, type(exc).__name__, error_text(exc))
        data = pickle.dumps(notice, protocol=5)
        for r in range(self.size):
            if r != self.rank:
                self._sent.append(self.notices.Isend(np.frombuffer(data, np.uint8), dest=r,
                                                     tag=NOTICE_TAG))
        self._sent = [req for req in self._sent if not req.Test()]

    def notice(self) -> Notice | None:
        """A failure notice from another rank that has arrived, or None (never waits)."""
        status = self.MPI.Status()
        message = self.notices.improbe(source=self.MPI.ANY_SOURCE, tag=NOTICE_TAG, status=status)
        if message is None:
            return None
        buf = np.empty(status.Get_count(self.MPI.BYTE), np.uint8)
        message.Recv(buf)
        return pickle.loads(buf.tobytes())

    def abort(self, code: int = 1) -> None:
        """End every process of the job now (``MPI_Abort``): what a job whose ranks cannot
        meet again does last."""
        self.comm.Abort(code)
