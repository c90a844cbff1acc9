"""The host side of the persistent kernels' cross-device barrier (groute.engines.peer_barrier): where
those kernels can run (stand-in devices); on CPU virtual devices, its counter only grows between
good runs and is zeroed after a bad one, a failed launch stops the launches that would follow
it, and the end of a run raises what went wrong; resident grids are held to the device's share
of its GPU (stand-in devices and occupancy); on GPUs, the peer traversal takes a timeout changed
after it was built, and the launches wake the links first."""
import contextlib
import time
from types import SimpleNamespace

import numpy as np
import pytest

import groute.engines.peer_barrier as peer_barrier
from groute.engines.peer_barrier import MAX_DEVICES, CrossDeviceBarrier, launch_resident, unavailable
from groute.engines.protocol import ABORT_OWN, ABORT_TIMEOUT, LaunchStop
from groute.device.logical import Placement, place, sm_share
from groute import Context
from groute.graph import load_graph
from support import fake_peer_context, need_gpus


def test_peer_unavailable_names_the_reason():
    assert unavailable(fake_peer_context(2)) is None
    assert unavailable(fake_peer_context(1)) is None
    assert "CPU virtual devices" in unavailable(fake_peer_context(1, backend="cpu"))
    assert "no peer access" in unavailable(fake_peer_context(2, peers=False))
    assert "no NVLink" in unavailable(fake_peer_context(2, atomics=False))
    assert f"1 to {MAX_DEVICES}" in unavailable(fake_peer_context(MAX_DEVICES + 1))
    # devices of other processes: out of the kernels' reach until CUDA IPC maps them here
    assert "CUDA IPC" in unavailable(fake_peer_context(2, ranks=2))
    assert unavailable(fake_peer_context(1, ranks=1)) is None


@pytest.fixture
def ctx():
    with Context(3, backend="cpu", timeout=10) as c:
        yield c


@pytest.mark.timeout(30)
def test_counter_advances_by_the_barriers_every_device_crossed(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(4, np.uint64))
    bar.settle([5, 5, 5])
    assert bar.base == 15                       # 3 devices x 5 barriers
    bar.settle([np.uint64(2)] * 3, ok=True)
    assert bar.base == 21


@pytest.mark.timeout(30)
@pytest.mark.parametrize("crossed, ok", [([5, 5, 4], True), ([5, 5, 5], False), ([], True)])
def test_disagreement_failure_or_no_launch_zeroes_the_block(ctx, crossed, ok):
    block = np.full(4, 7, np.uint64)
    bar = CrossDeviceBarrier(ctx.devices, block)
    bar.base = 42
    bar.settle(crossed, ok=ok)
    assert bar.base == 0
    assert not block.any()                      # zeroed on device 0's stream, which was waited for


@pytest.mark.timeout(30)
def test_launch_each_stops_at_the_first_failure_and_returns_it(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(1, np.uint64))
    calls = []

    def launch(i, dev):
        calls.append((i, dev.name))
        if i == 1:
            raise RuntimeError("no room for the grid")
    launched, failure = bar.launch_each(launch)
    assert launched == [0]
    assert isinstance(failure, RuntimeError) and "no room" in str(failure)
    assert [i for i, _ in calls] == [0, 1]      # device 2 was never launched
    assert bar.launch_each(lambda i, dev: None) == ([0, 1, 2], None)


class _OtherRank:
    """Rank 0 of two for a CrossDeviceBarrier: the other rank's end of a run is ``theirs``
    (and its failure ``told``); collectives pickle what they carry, as MPI's do, and the
    barriers are counted. ``met``: whether the last collective is a marked meeting (a timed
    run's start)."""

    size, rank = 2, 0

    def __init__(self, theirs=None, told=None, met=False):
        self.theirs, self.told, self.met, self.barriers = theirs, told, met, 0

    def allgather(self, obj, what=""):
        import pickle
        return [pickle.loads(pickle.dumps(x, protocol=5))
                for x in (obj, (peer_barrier._as_bytes(self.theirs), self.told))]

    def barrier(self, what=""):
        self.barriers += 1

    def at_marked_meeting(self):
        return self.met


def _rank_devices(ctx):
    """The first two of ``ctx``'s devices as a context spanning two ranks sees them: the
    second another process's."""
    return [ctx.devices[0], SimpleNamespace(name="cuda:1", local=False)]


def test_ranks_share_their_ends_as_arrays_and_hear_a_failure(ctx):
    """Across processes every rank gets every rank's end of a run, arrays whole (dtype, shape,
    writable) inside tuples, and a rank that failed is named with what it failed at."""
    counters = np.arange(6, dtype=np.uint64)
    theirs = (np.array([7, 8], np.uint64), np.arange(6, dtype=np.float64).reshape(2, 3))
    bar = CrossDeviceBarrier(_rank_devices(ctx), np.zeros(1, np.uint64),
                             ranks=_OtherRank(theirs))
    ends, failure = bar.share_ends({0: (counters, None)}, None, "could not launch", "peer bfs")
    assert failure is None
    assert ends[0][1] is None and ends[0][0].dtype == np.uint64
    np.testing.assert_array_equal(ends[0][0], counters)
    assert ends[1][1].shape == (2, 3) and ends[1][1].dtype == np.float64
    np.testing.assert_array_equal(ends[1][1], theirs[1])
    ends[1][0][0] = 1                       # the rows are the caller's to change
    bar = CrossDeviceBarrier(_rank_devices(ctx), np.zeros(1, np.uint64),
                             ranks=_OtherRank(None, "failed while its kernel ran: OSError: ECC"))
    ends, failure = bar.share_ends({0: counters}, None, "could not launch", "peer bfs")
    assert ends[1] is None
    assert isinstance(failure, RuntimeError)
    assert str(failure) == ("peer bfs: cuda:1 (rank 1) failed while its kernel ran: "
                            "OSError: ECC")


@pytest.mark.parametrize("met, meets", [(False, 1), (True, 0)])
def test_ranks_meet_before_launching_unless_they_just_met(ctx, met, meets):
    """The launches of all ranks fall within the kernels' timeout: the ranks meet first,
    unless their last collective was the timed run's start (program order, the same on every
    rank), and only this rank's device is launched."""
    ranks = _OtherRank(met=met)
    bar = CrossDeviceBarrier(_rank_devices(ctx), np.zeros(1, np.uint64), ranks=ranks)
    launched, failure = bar.launch_each(lambda i, dev: None)
    assert (launched, failure, ranks.barriers) == ([0], None, meets)


def _stops(crossed, abort=None):
    """A LaunchStop per device: ``crossed`` meetings each, ``abort[i]`` its abort reason."""
    abort = abort or [0] * len(crossed)
    return [LaunchStop(f"dev{i}", a, c, 3, 0) for i, (c, a) in enumerate(zip(crossed, abort))]


@pytest.mark.timeout(30)
def test_finish_settles_then_raises_the_failure_or_names_who_gave_up(ctx, monkeypatch):
    monkeypatch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 0.5)
    block = np.full(1, 7, np.uint64)
    bar = CrossDeviceBarrier(ctx.devices, block)
    names = dict(what="peer bfs", instead="exchange='host'")
    bar.finish(_stops([2, 2, 2]), **names)
    assert bar.base == 6 and block.all()        # a good run: the counter goes on
    bar.finish(_stops([2, 2, 2]), ok=False, **names)    # the app's check failed: zeroed, no raise
    assert bar.base == 0 and not block.any()
    bar.base = 6
    with pytest.raises(RuntimeError, match=r"^peer bfs: dev1, dev2 waited more than 0.5 s at a "
                                           r"cross-device barrier .*use exchange='host'$"):
        bar.finish(_stops([2, 1, 1], [0, ABORT_TIMEOUT, ABORT_TIMEOUT]), **names)
    assert bar.base == 0
    bar.base = 6
    with pytest.raises(KeyError, match="no room"):  # a failed launch first, as it was raised
        bar.finish(_stops([2], [ABORT_TIMEOUT]), failure=KeyError("no room"), **names)
    assert bar.base == 0
    # a kernel's own abort reason settles as a good run here: the app checks and raises for it
    bar.base = 6
    bar.finish(_stops([2, 2, 2], [ABORT_OWN] * 3), **names)
    assert bar.base == 12


class FakeResidentDevice:
    """Enough of a CUDA device for :func:`launch_resident`: its name, index, GPU and share of
    the GPU's multiprocessors (``groute.device.logical``), and how many devices share it."""

    def __init__(self, placement, gpu_sms):
        self.index, self.gpu, self.sharing = placement.index, placement.gpu, placement.sharing
        self.name = f"cuda:{placement.index}"
        self.multiprocessors = sm_share(gpu_sms, placement)

    def use(self):
        return contextlib.nullcontext()


class FakeKernel:
    """Records the grids it is launched with; a kernel that never runs."""

    def __init__(self):
        self.grids = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.grids.append(grid[0])


@pytest.fixture
def occupancy(monkeypatch):
    """The blocks per SM the stand-in kernels have (``occupancy.per_sm``; 4 unless set), and
    the GPU it was asked about for each query."""
    import groute.kernels
    monkeypatch.setattr(peer_barrier, "_capacity", {})
    state = SimpleNamespace(per_sm=4, asked=[])

    def per_sm(kernel, block, gpu, shared_mem=0):
        state.asked.append((gpu, block, shared_mem))
        return state.per_sm
    monkeypatch.setattr(groute.kernels, "resident_blocks_per_sm", per_sm)
    return state


def test_resident_grids_of_logical_devices_fit_their_gpu_together(occupancy):
    """Four logical devices on a GPU of 132 SMs each get 33: a grid sized for the whole GPU
    (4 x 132 blocks, which the driver's own check of one launch accepts) is cut to the
    device's 4 x 33, so the four grids together are no more than the GPU holds."""
    devices = [FakeResidentDevice(p, 132) for p in place(range(4), 1, logical=True)]
    fn = FakeKernel()
    got = [launch_resident(fn, 4 * 132, 256, (), device=d, kernel="traverse") for d in devices]
    assert got == [4 * 33] * 4 and fn.grids == got
    assert sum(fn.grids) <= 4 * 132
    assert launch_resident(fn, 10, 256, (), device=devices[0], kernel="traverse") == 10
    assert occupancy.asked == [(0, 256, 0)] * 4            # once per kernel and device
    whole = FakeResidentDevice(Placement(0, 0, 1), 132)      # a whole GPU: all of it
    assert launch_resident(fn, 600, 256, (), device=whole, kernel="traverse") == 4 * 132


def test_a_grid_that_cannot_be_resident_is_refused_naming_device_kernel_and_share(occupancy):
    devices = [FakeResidentDevice(p, 132) for p in place(range(4), 1, logical=True)]
    fn = FakeKernel()
    with pytest.raises(RuntimeError, match=r"^cuda:2: kernel traverse needs 200 blocks of 256 "
                                           r"threads resident at once, but its share of GPU 0 "
                                           r"\(33 multiprocessors; the GPU is shared by 4 logical "
                                           r"devices\) holds 132; .*fewer logical devices per GPU"):
        launch_resident(fn, 400, 256, (), device=devices[2], kernel="traverse", min_blocks=200)
    occupancy.per_sm = 0                                    # not one block fits an SM
    with pytest.raises(RuntimeError, match=r"cuda:3: kernel pr_persistent needs 1 blocks of 512 "
                                           r"threads and 4096 bytes of shared memory .* holds 0"):
        launch_resident(fn, 33, 512, (), device=devices[3], kernel="pr_persistent",
                        shared_mem=4096)
    assert fn.grids == []                                   # nothing was launched


def test_a_grid_the_driver_finds_too_large_is_halved_down_to_min_blocks(occupancy):
    class CUDADriverError(Exception):
        pass

    calls = []

    def fn(grid, block, args, shared_mem=0):
        calls.append(grid[0])
        if grid[0] > 40:
            raise CUDADriverError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")
    dev = FakeResidentDevice(Placement(0, 0, 1), 132)
    assert launch_resident(fn, 132, 256, (), device=dev, kernel="k") == 33
    assert calls == [132, 66, 33]
    with pytest.raises(CUDADriverError):
        launch_resident(fn, 132, 256, (), device=dev, kernel="k", min_blocks=66)


def test_occupancy_sizes_grids_as_they_were_measured(monkeypatch):
    """groute.kernels.resident_blocks_per_sm, which every persistent grid is sized from: a
    RawKernel is asked of the driver (with the dynamic shared memory); a module's Function is
    estimated from its registers, as the grids whose speed docs/PERFORMANCE.md records were
    sized. Stand-in CuPy: no GPU needed."""
    import sys
    from groute.kernels import resident_blocks_per_sm
    asked = []

    def occupancy(ptr, block, shared):
        asked.append((ptr, block, shared))
        return 3
    attrs = {"MaxRegistersPerMultiprocessor": 65536, "MaxThreadsPerMultiProcessor": 2048}
    cupy = SimpleNamespace(cuda=SimpleNamespace(
        driver=SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=occupancy),
        Device=lambda gpu: SimpleNamespace(attributes=attrs)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    raw = SimpleNamespace(kernel=SimpleNamespace(ptr=22), num_regs=32)
    assert resident_blocks_per_sm(raw, 512, 0, 4096) == 3
    assert asked == [(22, 512, 4096)]
    function = SimpleNamespace(ptr=11, num_regs=32)
    assert resident_blocks_per_sm(function, 256, 0) == 8            # threads: 2048 / 256
    assert resident_blocks_per_sm(SimpleNamespace(ptr=11, num_regs=128), 256, 0) == 2  # registers
    assert asked == [(22, 512, 4096)]


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(120)
def test_cuda_peer_traversal_reads_the_timeout_at_each_run(monkeypatch):
    """GROUTE_PEER_BARRIER_TIMEOUT lowered after the solver was built holds for its next run
    (PeerTraversal rewrites the field in its kernels' arguments): a device that never launches
    makes the other give up after 0.5 s, not the default 10 s; the run after is right."""
    need_gpus(2)
    import groute.engines.relax.peer as traversal_peer
    from groute.apps.bfs import BFS
    g = load_graph("kron:12")
    with BFS(g, backend="cuda", devices=2, partition="random", mode="bsp", exchange="peer",
             timeout=30) as solver:
        good = solver.run(0)
        assert good.stats["exchange"] == "peer"
        monkeypatch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 0.5)
        real = traversal_peer.PeerTraversal._launch
        monkeypatch.setattr(traversal_peer.PeerTraversal, "_launch", lambda self, i, dev, *args:
                            None if i == 1 else real(self, i, dev, *args))
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match="waited more than 0.5 s at a cross-device barrier"):
            solver.run(0)
        assert time.perf_counter() - t0 < 5
        monkeypatch.setattr(traversal_peer.PeerTraversal, "_launch", real)
        np.testing.assert_array_equal(solver.run(0).values, good.values)


@pytest.mark.timeout(30)
def test_cpu_devices_wake_no_links(ctx):
    """The wake-up copy is for NVLink: CPU devices get none, and no buffers."""
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(1, np.uint64))
    assert bar.launch_each(lambda i, dev: None) == ([0, 1, 2], None)
    assert bar._wake is None and bar._woken == {}


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 3], ids=["x2", "x3"])
def test_cuda_links_are_woken_once_allocated_and_joined(k):
    """On CUDA devices a launch long enough after the last run queues the wake copies (each
    device to every other) into buffers allocated once (right after a run, none), and each
    device's compute stream is made to wait for its copies (nothing left pending, also when a
    launch fails); a failure to wake turns waking off instead of failing the launches."""
    need_gpus(k)
    import cupy
    every = list(range(k))
    with Context(k, backend="cuda", timeout=30) as c:
        with c.devices[0].use():
            block = cupy.zeros(1, np.uint64)
        bar = CrossDeviceBarrier(c.devices, block)
        assert bar.launch_each(lambda i, dev: None) == (every, None)
        ptrs = [w.data.ptr for w in bar._wake]
        bar.settle([0] * k)                 # a run just ended: the links are awake
        saved, bar._wake = bar._wake, []    # (a copy into these would raise)
        assert bar.launch_each(lambda i, dev: None) == (every, None) and bar._wake == []
        bar._wake = saved
        bar._last_end -= 1.0                # a second ago: woken again
        assert len(ptrs) == k and bar._woken == {}

        def no_room(i, dev):
            raise KeyError("no room")
        launched, failure = bar.launch_each(no_room)
        assert (launched, type(failure)) == ([], KeyError) and bar._woken == {}
        assert [w.data.ptr for w in bar._wake] == ptrs
        for dev in c.devices:
            dev.compute_stream.record().synchronize()
        bar._wake = [None] * k              # a copy that cannot be made
        assert bar.launch_each(lambda i, dev: None) == (every, None)
        assert bar._wake == ()              # off from now on
