"""How a RankRouter's rows move (groute.runtime.rank_transport), in one process: the choice of
transport from where the ranks run, the placement of a rank's GPU, the receive pool, and the
two transports behind the router's one flush, with the ranks as threads over fake MPI
collectives and a fake NCCL communicator that moves bytes on the devices' streams as NCCL's
kernels would (a receive waits on its stream for the peer's send). The real MPI path runs
under mpiexec (tests/test_distributed_*.py); the CUDA paths in tests/test_distributed_gpu.py."""
import collections
import contextlib
import concurrent.futures as cf
import ctypes
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

from groute.device import CPUDevice
from groute.device.logical import place_rank
from groute.errors import ContextStopped, WaitTimeout
from groute.runtime.policies import by_owner
from groute.runtime.rank_context import RemoteDevice
from groute.runtime.rank_router import RankRouter
from groute.runtime.rank_transport import (MIN_BUFFER_BYTES, MpiTransport, NcclTransport,
                                           RankPlace, ReceivePool, choose_transport)
from groute.waiting import StopSignal


# -------------------------------------------------------------------------------- the choice
def cuda(host, gpu, no_nccl=None):
    return RankPlace("cuda", host, gpu, no_nccl)


def test_auto_takes_nccl_where_every_rank_has_its_own_gpu():
    places = [cuda("a", "0000:1B:00.0"), cuda("a", "0000:43:00.0"), cuda("b", "0000:1B:00.0")]
    assert choose_transport("auto", places) == ("nccl", "auto: every rank has a GPU of its own")
    assert choose_transport("nccl", places)[0] == "nccl"
    assert choose_transport("mpi", places)[0] == "mpi"        # the override wins


def test_ranks_sharing_a_gpu_go_through_mpi_and_nccl_is_refused_naming_them():
    places = [cuda("a", "0000:1B:00.0"), cuda("b", "0000:1B:00.0"), cuda("a", "0000:1B:00.0")]
    name, why = choose_transport("auto", places)
    assert name == "mpi" and "ranks 0 and 2 share GPU 0000:1B:00.0 on host a" in why
    with pytest.raises(ValueError, match=r"GROUTE_RANK_TRANSPORT=nccl cannot run here: ranks 0 "
                                         r"and 2 share GPU 0000:1B:00.0 on host a"):
        choose_transport("nccl", places)


def test_a_rank_without_nccl_or_a_cpu_job_goes_through_mpi():
    places = [cuda("a", "x"), cuda("a", "y", no_nccl="CuPy finds no NCCL library")]
    name, why = choose_transport("auto", places)
    assert name == "mpi" and "rank 1 cannot use NCCL: CuPy finds no NCCL library" in why
    with pytest.raises(ValueError, match="rank 1 cannot use NCCL"):
        choose_transport("nccl", places)
    cpu = [RankPlace("cpu", "a"), RankPlace("cpu", "a")]
    assert choose_transport("auto", cpu)[0] == "mpi"
    with pytest.raises(ValueError, match="CPU backend"):
        choose_transport("nccl", cpu)
    assert choose_transport("auto", [cuda("a", "x")])[0] == "mpi"      # one rank: nothing to move
    with pytest.raises(ValueError, match=r"one of auto, mpi, nccl .*got 'ucx'"):
        choose_transport("ucx", cpu)


def test_a_ranks_gpu_is_its_place_on_its_host():
    one_gpu = [place_rank(r, r, 2, 1) for r in range(2)]       # mpiexec -n 2 on one GPU
    assert [(p.gpu, p.sharing, p.logical) for p in one_gpu] == [(0, 2, True), (0, 2, True)]
    second_host = [place_rank(4 + r, r, 4, 4) for r in range(4)]    # ranks 4..7 on 4 GPUs
    assert [(p.index, p.gpu, p.sharing) for p in second_host] == [(4, 0, 1), (5, 1, 1),
                                                                  (6, 2, 1), (7, 3, 1)]
    assert not any(p.logical for p in second_host)     # whole GPUs under the ranks' numbers
    assert [place_rank(r, r, 3, 2).sharing for r in range(3)] == [2, 1, 2]
    with pytest.raises(ValueError, match="no CUDA GPU"):
        place_rank(0, 0, 1, 0)


def test_ranks_that_each_see_one_gpu_of_their_own_do_not_share_it(monkeypatch):
    """A launcher that shows each process only its own GPU numbers every one 0: the ranks on
    one host then have local ranks 0 and 1 and one GPU each, and share nothing (told by the
    GPUs' bus ids); two ranks on one GPU's bus id share it."""
    from types import SimpleNamespace
    from groute.runtime import rank_context
    monkeypatch.setattr(rank_context, "cuda_device_count", lambda: 1)

    def placed(rank, gpus_of_ranks):
        ctx = SimpleNamespace(ranks=SimpleNamespace(rank=rank, local_rank=rank, local_size=2),
                              _gpus_of_ranks=gpus_of_ranks)
        (p,) = rank_context.RankContext._placements(ctx, [rank], False)
        return p.gpu, p.sharing, p.logical

    own = [("host", "0000:1B:00.0"), ("host", "0000:43:00.0")]
    assert [placed(r, own) for r in range(2)] == [(0, 1, False), (0, 1, False)]
    shared = [("host", "0000:1B:00.0")] * 2
    assert [placed(r, shared) for r in range(2)] == [(0, 2, True), (0, 2, True)]


# -------------------------------------------------------------------------------- the pool
@pytest.fixture
def device():
    dev = CPUDevice(0)
    yield dev
    dev.close()


def test_the_pool_reuses_a_buffer_once_its_segments_are_released(device):
    pool = ReceivePool(device, device.compute_stream)
    first = pool.take(100)
    assert first.buffer.size == MIN_BUFFER_BYTES and pool.made == 1
    first.share(2)
    first.release()
    held = pool.take(100)                       # one segment still holds the first buffer
    assert held.buffer is not first.buffer and pool.made == 2
    first.release(after=device.compute_stream.record())
    again = pool.take(MIN_BUFFER_BYTES)
    assert again.buffer is first.buffer and pool.made == 2
    bigger = pool.take(MIN_BUFFER_BYTES + 1)    # larger than any buffer: a new, larger one
    assert bigger.buffer.size == 2 * MIN_BUFFER_BYTES and pool.made == 3
    held.share(0)                               # smaller than the largest: not kept
    again.share(0)
    assert pool.take(10).buffer is not held.buffer and pool.made == 4


# -------------------------------------------------------------------------------- fake ranks
class World:
    """``size`` ranks as threads: an all-to-all of Python objects, and NCCL's mailboxes."""

    def __init__(self, size):
        self.size = size
        self.meet = threading.Barrier(size, timeout=20)
        self.slots = [None] * size
        self.cond = threading.Condition()
        self.mail = collections.defaultdict(collections.deque)     # (src, dst) -> bytes

    def alltoall(self, rank, objs):
        self.slots[rank] = list(objs)
        self.meet.wait()
        got = [self.slots[s][rank] for s in range(self.size)]
        self.meet.wait()
        return got


class FakeRanks:
    def __init__(self, world, rank):
        self.world, self.rank, self.size = world, rank, world.size
        self.exchanged = []             # (send counts, receive counts) per alltoallv

    def alltoall(self, objs, what=""):
        return self.world.alltoall(self.rank, objs)

    def alltoallv_bytes(self, send, send_counts, recv, recv_counts, what=""):
        self.exchanged.append((list(send_counts), list(recv_counts)))
        starts = np.concatenate([[0], np.cumsum(send_counts)]).astype(int)
        got = self.world.alltoall(self.rank, [bytes(send[a:b]) for a, b in
                                              zip(starts[:-1], starts[1:])])
        assert [len(g) for g in got] == [int(n) for n in recv_counts]
        recv[:sum(recv_counts)] = np.frombuffer(b"".join(got), np.uint8)


class FakeComm:
    """NCCL's point-to-point calls as CuPy's communicator makes them, recorded; a group's
    operations run on their stream when the group ends: the sends post bytes, each receive
    waits (on the stream, as NCCL's kernel would) for its peer's, or for abort."""

    def __init__(self, world, rank):
        self.world, self.rank = world, rank
        self.calls = []
        self.aborted = False
        self.error = None
        self._ops = None

    @contextmanager
    def group(self):
        self.calls.append(("group",))
        self._ops = []
        try:
            yield
        finally:
            ops, self._ops = self._ops, None
            self.calls.append(("end",))
            if ops:
                ops[0][-1].submit(self._run, ops)

    def send(self, address, nbytes, peer, stream):
        assert self._ops is not None, "a send outside a group"
        self.calls.append(("send", nbytes, peer))
        self._ops.append(("send", address, nbytes, peer, stream))

    def recv(self, address, nbytes, peer, stream):
        assert self._ops is not None, "a receive outside a group"
        self.calls.append(("recv", nbytes, peer, address))
        self._ops.append(("recv", address, nbytes, peer, stream))

    def _run(self, ops):
        world = self.world
        for kind, address, nbytes, peer, _ in ops:
            if kind == "send":
                with world.cond:
                    world.mail[self.rank, peer].append(ctypes.string_at(address, nbytes))
                    world.cond.notify_all()
        for kind, address, nbytes, peer, _ in ops:
            if kind == "recv":
                with world.cond:
                    box = world.mail[peer, self.rank]
                    if not world.cond.wait_for(lambda: box or self.aborted, timeout=20):
                        raise TimeoutError("the fake peer never sent")
                    if self.aborted:
                        raise RuntimeError("aborted")
                    data = box.popleft()
                assert len(data) == nbytes, (len(data), nbytes)
                ctypes.memmove(address, data, nbytes)

    def check(self):
        if self.error is not None:
            raise self.error

    def abort(self):
        self.aborted = True
        with self.world.cond:
            self.world.cond.notify_all()


class FakeContext:
    """What a RankRouter asks of its RankContext."""

    def __init__(self, ranks, device, make_transport, timeout=10.0):
        self.ranks, self.rank = ranks, ranks.rank
        self.local_device = device
        self.timeout = timeout
        self.stop_event = StopSignal()
        self.devices = [device if i == ranks.rank else
                        RemoteDevice(i, ranks.rank, self.stop_event) for i in range(ranks.size)]
        self._make = make_transport

    def open_transport(self):
        return self._make(self)

    def fail(self, device_name, exc):
        self.failed = (device_name, exc)
        self.stop_event.set()


def mpi(staged):
    return lambda ctx: MpiTransport(ctx.ranks, ctx.local_device, staged=staged,
                                    timeout=ctx.timeout, stop=ctx.stop_event)


def nccl(comms):
    return lambda ctx: NcclTransport(ctx.ranks, ctx.local_device, comms[ctx.rank],
                                     timeout=ctx.timeout, stop=ctx.stop_event)


def as_ranks(size, fn):
    """``fn(rank)`` on ``size`` threads at once; their results in rank order."""
    with cf.ThreadPoolExecutor(size) as pool:
        return [f.result(timeout=60) for f in [pool.submit(fn, r) for r in range(size)]]


@pytest.fixture
def devices():
    made = [CPUDevice(r) for r in range(3)]
    yield made
    for dev in made:
        dev.close()


#: rank -> [(destination, rows)]: rows of (sender, destination, row number), int32 pairs
def sends_of(rank, size):
    return [(j, np.array([[rank * 10 + j, i] for i in range(j + rank + 1)], np.int32))
            for j in range(size)] + [((rank + 1) % size, np.zeros((0, 2), np.int32))]


def route_and_flush(ctx, flushes=1):
    """A router over ``ctx``: every flush, rank r sends sends_of(r) (every rank, itself
    included, and an empty segment); what arrived, per flush, as (source, rows) in order."""
    router = RankRouter(ctx.devices, ctx.devices, by_owner, item_shape=(2,), ctx=ctx,
                        name="test")
    me, out = ctx.rank, []
    for _ in range(flushes):
        handles = [router.inputs[me].send(rows, metadata={"owner": j})
                   for j, rows in sends_of(me, ctx.ranks.size)]
        assert not any(h.done() for h in handles)
        router.flush()
        assert all(h.done() for h in handles)
        got = []
        while (pending := router.outputs[me].poll()) is not None:
            got.append((int(pending.source.device.index),
                        ctx.local_device.to_host(pending.wait(5).data)))
            pending.release(after=ctx.local_device.compute_stream.record())
        out.append(got)
    return router, out


def expected_at(rank, size):
    want = []
    for s in range(size):
        want += [(s, rows) for j, rows in sends_of(s, size) if j == rank]
    return want


def same_segments(got, want):
    return (len(got) == len(want) and all(a == c and np.array_equal(b, d)
                                          for (a, b), (c, d) in zip(got, want)))


@pytest.mark.parametrize("staged", [False, True])
def test_the_mpi_transport_delivers_every_segment_in_order(devices, staged):
    world = World(3)

    def rank(r):
        ctx = FakeContext(FakeRanks(world, r), devices[r], mpi(staged))
        router, flushes = route_and_flush(ctx, flushes=2)
        return router, flushes, ctx.ranks.exchanged
    for r, (router, flushes, exchanged) in enumerate(as_ranks(3, rank)):
        assert all(same_segments(got, expected_at(r, 3)) for got in flushes), flushes
        # byte counts from the headers: rank s sends j + s + 1 rows of 8 bytes to rank j
        assert exchanged[0] == ([8 * (j + r + 1) for j in range(3)],
                                [8 * (r + s + 1) for s in range(3)])
        if staged:                      # the flushes received into one reused buffer
            assert router.transport.pool.made == 1


@pytest.mark.parametrize("transport", ["mpi", "staged", "nccl"])
def test_rows_leave_after_the_event_they_were_sent_with(devices, transport):
    """Rows written on another stream of the device, late: the flush moves them only after
    the event the send named (the host waits for it, or the transport's stream does)."""
    world = World(2)
    make = {"mpi": mpi(False), "staged": mpi(True),
            "nccl": nccl([FakeComm(world, r) for r in range(2)])}[transport]

    def rank(r):
        ctx = FakeContext(FakeRanks(world, r), devices[r], make)
        router = RankRouter(ctx.devices, ctx.devices, by_owner, ctx=ctx, name="late")
        rows = np.zeros(1000, np.int32)
        side = devices[r].new_stream("side")
        side.submit(lambda: (threading.Event().wait(0.2), rows.fill(r + 7)))
        router.inputs[r].send(rows, event=side.record(), metadata={"owner": 1 - r})
        router.flush()
        pending = router.outputs[r].poll()
        return devices[r].to_host(pending.wait(5).data)
    for r, got in enumerate(as_ranks(2, rank)):
        assert (got == 1 - r + 7).all(), (transport, r, got[:4])


def test_the_nccl_transport_sends_in_one_group_sized_by_the_headers(devices):
    world = World(3)
    comms = [FakeComm(world, r) for r in range(3)]

    def rank(r):
        ctx = FakeContext(FakeRanks(world, r), devices[r], nccl(comms))
        return route_and_flush(ctx, flushes=2)
    results = as_ranks(3, rank)
    for r, (router, flushes) in enumerate(results):
        assert all(same_segments(got, expected_at(r, 3)) for got in flushes), flushes
        calls = comms[r].calls
        groups = [i for i, c in enumerate(calls) if c == ("group",)]
        assert len(groups) == 2                             # one group per flush
        first = calls[groups[0] + 1:groups[1] - 1]
        assert calls[groups[1] - 1] == ("end",)
        peers = [p for p in range(3) if p != r]             # itself: a copy on the device
        assert [c[:3] for c in first] == [c for p in peers for c in
                                          ([("send", 8 * (p + r + 1), p)] +
                                           [("recv", 8 * (r + p + 1), p)])]
        # both flushes received into the same pool buffer: released between them
        recv_at = [c[3] for c in calls if c[0] == "recv"]
        assert recv_at[:len(peers)] == recv_at[len(peers):]
        assert router.transport.pool.made == 1


def stalled_exchange(devices, world, comm, **options):
    """Rank 0 of 2 exchanging with a rank 1 that never sends."""
    transport = NcclTransport(FakeRanks(world, 0), devices[0], comm, **options)
    block = devices[0].asarray(np.arange(4, dtype=np.uint8))
    return transport, lambda: transport.exchange([[], [block]], [[], [16]], [], "a test flush")


def test_a_stop_ends_the_wait_for_the_group_and_aborts_the_communicator(devices):
    world = World(2)
    comm = FakeComm(world, 0)
    stop = StopSignal()
    transport, exchange = stalled_exchange(devices, world, comm, timeout=30, stop=stop)
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(ContextStopped, match="NCCL sends and receives of rank 0 of 2"):
        exchange()
    assert comm.aborted
    with pytest.raises(RuntimeError, match="was aborted after an earlier failure"):
        exchange()


def test_a_timeout_or_an_nccl_error_aborts_the_communicator(devices):
    world = World(2)
    comm = FakeComm(world, 0)
    _, exchange = stalled_exchange(devices, world, comm, timeout=0.3, stop=StopSignal())
    with pytest.raises(WaitTimeout, match="timed out after 0.3 s waiting for a test flush"):
        exchange()
    assert comm.aborted
    comm = FakeComm(World(2), 0)
    comm.error = RuntimeError("NCCL_ERROR_REMOTE_ERROR: a peer died")
    _, exchange = stalled_exchange(devices, world, comm, timeout=30, stop=StopSignal())
    with pytest.raises(RuntimeError, match="a peer died"):
        exchange()
    assert comm.aborted


def test_connecting_sends_a_byte_to_and_from_every_other_rank_in_one_group(devices):
    """What RankContext does at start-up on NCCL: every pair meets once, while every rank is
    there, so that no later exchange runs NCCL's unbounded first handshake."""
    world = World(3)
    comms = [FakeComm(world, r) for r in range(3)]
    as_ranks(3, lambda r: NcclTransport(FakeRanks(world, r), devices[r], comms[r], timeout=10,
                                        stop=StopSignal()).connect())
    for r, comm in enumerate(comms):
        peers = [p for p in range(3) if p != r]
        assert comm.calls[0] == ("group",) and comm.calls[-1] == ("end",)
        assert [c[:3] for c in comm.calls[1:-1]] == [c for p in peers for c in
                                                     (("send", 1, p), ("recv", 1, p))]
        assert not comm.aborted


def test_a_connection_that_never_comes_aborts_and_raises(devices):
    comm = FakeComm(World(2), 0)
    transport = NcclTransport(FakeRanks(World(2), 0), devices[0], comm, timeout=0.3,
                              stop=StopSignal())
    with pytest.raises(WaitTimeout, match="connecting every pair of ranks"):
        transport.connect()
    assert comm.aborted


def test_a_failed_flush_stops_the_context_naming_this_rank(devices):
    """A flush on the caller's thread (the BSP engine's) that fails tells the context, which
    tells the other ranks."""
    world = World(2)
    comm = FakeComm(world, 0)
    comm.error = RuntimeError("NCCL_ERROR_REMOTE_ERROR: a peer died")
    ctx = FakeContext(FakeRanks(world, 0), devices[0], nccl([comm, None]))
    router = RankRouter(ctx.devices, ctx.devices, by_owner, ctx=ctx, name="failing")
    router.inputs[0].send(np.arange(4, dtype=np.int32), metadata={"owner": 1})
    threading.Thread(target=lambda: world.alltoall(1, [[], []]), daemon=True).start()
    with pytest.raises(RuntimeError, match="a peer died"):
        router.flush()
    assert ctx.failed[0] == devices[0].name and "a peer died" in str(ctx.failed[1])


class _FakeNcclModule:
    """CuPy's ``cupy.cuda.nccl`` as far as :class:`groute.device.nccl.Communicator` uses it,
    with a communicator whose making blocks (a rank that never joins) or fails."""
    NCCL_UINT8 = 1

    def __init__(self, make):
        self.NcclCommunicator = make


class _GPU:
    gpu = 3

    def use(self):
        return contextlib.nullcontext()

    def pci_bus_id(self):
        return "0000:3B:00.0"


def test_a_communicator_no_rank_joins_raises_naming_the_gpu_within_the_timeout(monkeypatch):
    from groute.device import nccl
    never = threading.Event()
    monkeypatch.setattr("groute.device.cuda.make_current", lambda gpu: None)
    monkeypatch.setattr(nccl, "_nccl", lambda: _FakeNcclModule(lambda *a: never.wait()))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 of 2 on GPU 3 \(0000:3B:00.0\): the NCCL "
                                           r"communicator was not made within 0.3 s"):
        nccl.Communicator(2, b"id", 1, _GPU(), timeout=0.3)
    assert time.monotonic() - t0 < 5
    never.set()


def test_a_communicator_gets_the_id_as_cupy_made_it_and_raises_what_making_it_raised(monkeypatch):
    from groute.device import nccl
    seen = []

    def make(size, uid, rank):
        seen.append((size, uid, rank))
        if rank == 1:
            raise RuntimeError("NCCL_ERROR_SYSTEM_ERROR")
        return object()
    monkeypatch.setattr("groute.device.cuda.make_current", lambda gpu: None)
    monkeypatch.setattr(nccl, "_nccl", lambda: _FakeNcclModule(make))
    assert not nccl.Communicator(2, b"\x01id", 0, _GPU(), timeout=5).aborted
    with pytest.raises(RuntimeError, match="NCCL_ERROR_SYSTEM_ERROR"):
        nccl.Communicator(2, b"\x01id", 1, _GPU(), timeout=5)
    assert seen == [(2, b"\x01id", 0), (2, b"\x01id", 1)]     # bytes, as CuPy 14 makes it


def test_a_send_with_metadata_or_an_event_that_is_not_one_is_refused_naming_the_router(devices):
    """As a Link's and a one-process Router's sends: a TypeError naming the router before
    anything is queued (metadata=5 failed in dict())."""
    world = World(1)
    ctx = FakeContext(FakeRanks(world, 0), devices[0], mpi(False))
    router = RankRouter(ctx.devices, ctx.devices, by_owner, ctx=ctx, name="checked")
    rows = np.zeros(4, np.int32)
    with pytest.raises(TypeError, match="checked: metadata must be a dict, got int"):
        router.inputs[0].send(rows, metadata=5)
    with pytest.raises(TypeError, match="checked: event must be an event a stream recorded"):
        router.inputs[0].send(rows, event="now", metadata={"owner": 0})
    assert router.routed.sum() == 0
