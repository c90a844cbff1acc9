"""Answers land on the host in one copy per device, in memory kept for the next answer of
their size, never over an answer the caller still holds (groute.runtime.answer_landing)."""
import gc
from types import SimpleNamespace

import numpy as np
import pytest

import groute
from groute import Context
from groute.apps.bfs import BFS
from groute.apps.pr import PageRank
from groute.graph import load_graph
from groute.runtime.answer_landing import AnswerLanding, land_answer

from support import need_gpus, spin


@pytest.fixture(scope="module")
def dev():
    """A CPU virtual device: its landing memory is what the tests hand out."""
    with Context(1, backend="cpu", timeout=10) as ctx:
        yield ctx.devices[0]


class _NoPinnedMemory:
    def landing_memory(self, nbytes):
        raise MemoryError("no pinned memory left")


def _address(a):
    return a.__array_interface__["data"][0]


def test_a_size_asked_again_lands_in_kept_memory_once_the_last_answer_is_gone(dev):
    landing = AnswerLanding()
    first = landing.take(1000, np.int32, dev)           # asked for the first time: fresh memory
    assert landing.kept_bytes == 0 and first.shape == (1000,) and first.dtype == np.int32
    second = landing.take(1000, np.int32, dev)          # asked again: kept from now on
    assert landing.kept_bytes == 4000
    kept_at = _address(second)
    third = landing.take(500, np.int64, dev)            # same bytes, the first is busy: a second
    assert landing.kept_bytes == 8000 and _address(third) != kept_at
    fourth = landing.take(1000, np.int32, dev)          # both busy: fresh memory, not kept
    assert landing.kept_bytes == 8000 and _address(fourth) not in (kept_at, _address(third))
    del second
    gc.collect()
    fifth = landing.take(500, np.float64, dev)          # free again: reused, any dtype
    assert _address(fifth) == kept_at and fifth.dtype == np.float64 and fifth.flags.writeable
    del first, third, fourth


def test_a_view_of_an_answer_keeps_its_memory_from_being_reused(dev):
    landing = AnswerLanding()
    landing.take(64, np.float64, dev)
    answer = landing.take(64, np.float64, dev)
    answer[:] = np.arange(64)
    kept_at = _address(answer)
    tail = answer[32:][::2]             # a view of a view: both lead back to the answer
    del answer
    gc.collect()
    other = landing.take(64, np.float64, dev)           # the second buffer of this size
    other[:] = -1
    assert _address(other) != kept_at
    assert np.array_equal(tail, np.arange(32, 64, 2))
    del tail
    gc.collect()
    assert _address(landing.take(64, np.float64, dev)) == kept_at


def test_kept_memory_stays_under_its_limit_letting_free_buffers_go_oldest_first(dev):
    landing = AnswerLanding(keep_bytes=1000)
    for size in (400, 400, 500, 500):                   # 400 and 500 bytes kept
        landing.take(size, np.uint8, dev)
    assert landing.kept_bytes == 900
    landing.take(600, np.uint8, dev)
    held = landing.take(600, np.uint8, dev)             # 400 goes (oldest free), then 500
    assert landing.kept_bytes == 600
    landing.take(700, np.uint8, dev)
    landing.take(700, np.uint8, dev)                    # no room: 600 is held
    assert landing.kept_bytes == 600
    assert landing.take(2000, np.uint8, dev).shape == (2000,)   # larger than the limit: fresh
    del held
    landing.release()
    assert landing.kept_bytes == 0
    assert landing.take(0, np.int32, dev).shape == (0,)


def test_only_the_oldest_free_buffer_goes_and_none_when_that_cannot_make_room(dev):
    landing = AnswerLanding(keep_bytes=1000)
    for size in (300, 300, 310, 310):
        landing.take(size, np.uint8, dev)
    newer = _address(landing.take(310, np.uint8, dev))  # free again, used last
    landing.take(500, np.uint8, dev)
    busy = landing.take(500, np.uint8, dev)             # 300 goes (oldest), 310 stays
    assert landing.kept_bytes == 810
    assert _address(landing.take(310, np.uint8, dev)) == newer
    landing.take(600, np.uint8, dev)
    landing.take(600, np.uint8, dev)        # 310 free but 500 busy: no room, nothing let go
    assert landing.kept_bytes == 810
    del busy


def test_an_answer_lands_in_fresh_memory_when_kept_memory_cannot_be_had(dev, monkeypatch):
    landing = AnswerLanding()
    for _ in range(3):
        out = landing.take(100, np.int64, _NoPinnedMemory())
        assert out.shape == (100,) and out.flags.owndata
    assert landing.kept_bytes == 0 and landing.keep_bytes == 0      # not asked for again
    monkeypatch.setenv("GROUTE_ANSWER_KEEP_BYTES", "0")
    nothing = AnswerLanding()
    for _ in range(3):
        assert nothing.take(100, np.int64, dev).flags.owndata
    assert nothing.kept_bytes == 0


def test_memory_a_failed_copy_may_still_write_is_never_handed_out_again(dev):
    landing = AnswerLanding()
    landing.take(64, np.int64, dev)
    spoiled = landing.take(64, np.int64, dev)
    at = _address(spoiled)
    landing.spoil(spoiled)
    del spoiled
    gc.collect()
    assert landing.kept_bytes == 0
    assert _address(landing.take(64, np.int64, dev)) != at


def test_a_failed_fill_spoils_the_whole_array_it_was_landing_in(dev):
    """fill copies from its start row; where a copy fails it spoils the array (also given as
    a reshaped view of what take handed out) and raises the failure."""
    landing = AnswerLanding()
    landing.take(8, np.int64, dev)
    flat = landing.take(8, np.int64, dev)
    out = flat.reshape(4, 2)
    landing.fill(out, [(dev, dev.asarray(np.arange(4, dtype=np.int64).reshape(2, 2)))], 10,
                 start=2)
    assert out[2:].ravel().tolist() == [0, 1, 2, 3]
    assert landing.kept_bytes == 64
    too_long = dev.asarray(np.zeros((3, 2), np.int64))
    with pytest.raises(Exception):
        landing.fill(out, [(dev, too_long)], 10, start=2)
    del flat, out
    gc.collect()
    assert landing.kept_bytes == 0


def test_spoiling_fresh_memory_leaves_free_kept_buffers_alone(dev):
    """An array in fresh memory (no base) spoils nothing: a free kept buffer (its array let
    go) is handed out again."""
    landing = AnswerLanding()
    landing.take(64, np.int64, dev)         # the size asked for once: kept from the next
    kept = landing.take(64, np.int64, dev)
    at = _address(kept)
    del kept
    gc.collect()
    landing.spoil(np.empty(64, np.int64))
    assert landing.kept_bytes == 64 * 8
    assert _address(landing.take(64, np.int64, dev)) == at


def test_a_forked_process_writing_an_answer_leaves_this_one_s_alone(dev):
    import os
    landing = AnswerLanding()
    landing.take(8, np.int64, dev)
    answer = landing.take(8, np.int64, dev)
    answer[:] = 7
    child = os.fork()
    if child == 0:                          # the child writes its copy and leaves at once
        answer[:] = 12345
        os._exit(0)
    os.waitpid(child, 0)
    assert answer.tolist() == [7] * 8


def test_land_answer_puts_every_devices_part_at_its_offset():
    with Context(3, backend="cpu", timeout=10) as ctx:
        parts = [np.arange(5, dtype=np.int64), None, np.arange(100, 103, dtype=np.int64)]
        for _ in range(3):
            out = land_answer(ctx, parts)
            assert np.array_equal(out, [0, 1, 2, 3, 4, 100, 101, 102])
        with pytest.raises(TypeError, match="differ in dtype"):
            land_answer(ctx, [np.zeros(2, np.int32), np.zeros(2, np.int64), None], "the labels")
        with pytest.raises(ValueError, match="the labels: no device holds a part"):
            land_answer(ctx, [None, None, None], "the labels")
    assert ctx.answer_landing.kept_bytes == 0           # let go at shutdown


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 3])
def test_answers_a_caller_keeps_are_not_overwritten_by_the_next_runs(k):
    g = load_graph("grid:30", cache=False)
    with Context(k, backend="cpu", timeout=20) as ctx, \
            BFS(g, ctx=ctx, partition="contiguous") as bfs:     # answers are the landed arrays
        kept = [bfs.run(s) for s in (0, 450, 899, 0, 450)]
        for result, source in zip(kept, (0, 450, 899, 0, 450)):
            want = groute.bfs(g, source, backend="cpu", devices=1).values
            assert np.array_equal(result.values, want), source
        assert ctx.answer_landing.kept_bytes == 2 * g.num_vertices * 4     # two per size
    with Context(k, backend="cpu", timeout=20) as ctx, \
            PageRank(g, ctx=ctx, partition="contiguous") as pr:
        pr.run()                                # its size asked for once: kept from now on
        first = pr.run()
        assert not first.values.flags.owndata   # landed in kept memory
        again = [pr.run().values.copy() for _ in range(3)]      # each dropped: memory reused
        assert all(np.array_equal(first.values, a) for a in again)
        assert abs(first.values.sum() - 1) < 1e-12


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_on_a_gpu_answers_land_in_pinned_memory_and_stay_right():
    need_gpus(1)
    import cupy
    g = load_graph("kron:12", cache=False)
    with Context(1, backend="cuda", timeout=30) as ctx, BFS(g, ctx=ctx) as bfs:
        held = [bfs.run(s).values for s in (0, 1, 0)]
        assert np.array_equal(held[0], held[2])
        assert ctx.answer_landing.kept_bytes == 2 * g.num_vertices * 4
        memory = cupy.cuda.runtime.pointerGetAttributes(_address(held[1]))
        assert memory.type == cupy.cuda.runtime.memoryTypeHost      # pinned
        for s in (0, 1):
            want = groute.bfs(g, s, backend="cpu", devices=1).values
            assert np.array_equal(bfs.run(s).values, want)


@pytest.mark.gpu
@pytest.mark.timeout(60)
def test_a_copy_by_address_lands_its_bytes_and_a_broken_device_refuses_it_by_name():
    """CUDAStream.copy_bytes is how the ranks' answer slots cross their CUDA IPC mappings,
    which no array describes: the bytes land in stream order, a zero-byte copy does nothing,
    and a broken device refuses the copy with a DeviceError naming it."""
    need_gpus(1)
    from groute import DeviceError
    with Context(1, backend="cuda", timeout=30) as ctx:
        dev = ctx.devices[0]
        stream = dev.compute_stream
        src = dev.asarray(np.arange(1000, dtype=np.int32))
        dst = dev.zeros(1000, np.int32)
        stream.copy_bytes(dev.address(dst) + 400, dev.address(src), 2400)
        stream.copy_bytes(dev.address(dst), dev.address(src), 0)
        stream.synchronize(30)
        want = np.zeros(1000, np.int32)
        want[100:700] = np.arange(600)
        assert np.array_equal(dev.to_host(dst), want)
        dev.broken = "hit a sticky CUDA error, a test's"
        try:
            with pytest.raises(DeviceError, match=f"^{dev.name}: refused"):
                stream.copy_bytes(dev.address(dst), dev.address(src), 4)
        finally:
            dev.broken = None


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_on_a_gpu_answers_are_finished_behind_a_busy_compute_stream(monkeypatch):
    """Every app's answer is finished on the device and downloaded while its GPU is busy (a
    kernel spinning on the compute stream and one on CuPy's default stream just before the
    parts are made): a part made, or a copy issued, on a stream other than the compute stream
    would run before the work it depends on. (The contended GPU stage, four test processes on
    one GPU, is the wider net for such races.)"""
    need_gpus(1)
    from groute.engines.components.solver import ComponentsSolver
    from groute.engines.iterate.device import IterationDevice
    from groute.engines.relax.solver import RelaxSolver
    from groute.graph import reference
    from groute.tuning import PageRankTuning

    def busy_first(cls, name, device_of):
        original = getattr(cls, name)

        def wrapped(self, *args, **kwargs):
            device = device_of(self)
            if device.backend == "cuda":        # the CPU references pass here too
                spin(device, "compute", 0.1)
                spin(device, "default", 0.1)
            return original(self, *args, **kwargs)
        monkeypatch.setattr(cls, name, wrapped)

    busy_first(RelaxSolver, "_answer", lambda s: s.ctx.devices[0])
    busy_first(IterationDevice, "bsp_answer", lambda d: d.device)
    busy_first(IterationDevice, "push_answer", lambda d: d.device)
    busy_first(ComponentsSolver, "_answer", lambda s: s.devs[0].device)
    g = load_graph("kron:10", cache=False)
    cpu = dict(backend="cpu", devices=1)
    with Context(1, backend="cuda", timeout=30) as ctx:
        for app in (groute.bfs, groute.sssp):
            assert np.array_equal(app(g, 0, ctx=ctx).values, app(g, 0, **cpu).values), app
        ref = reference.pagerank(g, tol=1e-13)
        for options in (dict(mode="bsp", tuning=PageRankTuning(bsp_kernel="bins")),
                        dict(mode="bsp", tuning=PageRankTuning(bsp_kernel="csc")),
                        dict(mode="async")):
            values = groute.pagerank(g, ctx=ctx, **options).values
            assert np.all(values >= 0) and abs(values.sum() - 1) < 1e-9, options
            assert np.abs(values - ref).sum() < 1e-2, options     # float32, tol 1e-6: ~1e-3
        labels = [groute.connected_components(g, **where).values for where in (dict(ctx=ctx), cpu)]
        assert np.array_equal(*[_least_member(x) for x in labels])


def _least_member(labels):
    """Each vertex's component named by its least vertex (labels name components any way)."""
    least = np.full(labels.shape[0], labels.shape[0])
    np.minimum.at(least, labels, np.arange(labels.shape[0]))
    return least[labels]


class TwoRanks:
    """Rank ``rank`` of two, the other rank holding ``other`` (an array or None): what its
    collectives would give."""

    size = 2

    def __init__(self, other, rank=0, failure=None):
        self.other, self.rank, self.failure = other, rank, failure

    def allgather(self, obj, what=""):
        theirs = None if self.other is None else (self.other.dtype.str, self.other.shape[1:],
                                                  self.other.shape[0])
        # no free GPU memory told (CPU), no failure
        return [obj, (theirs, None, self.failure)][::1 - 2 * self.rank]

    def allgatherv_in_place(self, buffer, counts, what=""):
        assert buffer.nbytes == sum(counts)
        if self.other is not None:      # the other rank's bytes at its place
            at = 0 if self.rank == 1 else counts[0]
            buffer[at:at + counts[1 - self.rank]] = self.other.reshape(-1).view(np.uint8)


class OneRankOfTwo:
    """The context of one rank of two (:class:`TwoRanks`), its device a CPU virtual one."""

    def __init__(self, ctx, ranks):
        self.ranks, self.answer_landing, self.timeout = ranks, ctx.answer_landing, ctx.timeout
        self.backend, self.local_device = ctx.backend, ctx.devices[0]
        other = SimpleNamespace(name=f"cpu:{1 - ranks.rank}", local=False)
        self.devices = [self.local_device, other][::1 - 2 * ranks.rank]

    def parts(self, mine):
        """A part per device: ``mine`` at this rank's, None at the other's."""
        return [mine, None][::1 - 2 * self.ranks.rank]


def test_ranks_land_an_answer_in_place_in_rank_order():
    """Across processes each rank copies its parts into its slice of the answer and the others'
    land around them, in rank order; a rank holding none (its part is another rank's) takes
    the dtype the others agree on; rows keep their shape; the array is kept memory once the
    size was asked for before; parts of different dtypes, or none anywhere, are errors naming
    the answer."""
    with Context(1, backend="cpu", timeout=10) as ctx:
        def land(other, mine, rank=0, what="the labels", failure=None):
            here = OneRankOfTwo(ctx, TwoRanks(other, rank, failure))
            return land_answer(here, here.parts(mine), what)
        for _ in range(2):
            got = land(np.array([7, 8], np.int64), np.array([1, 2, 3], np.int64))
            np.testing.assert_array_equal(got, [1, 2, 3, 7, 8])
        assert ctx.answer_landing.kept_bytes == 40          # the second landed in kept memory
        got = land(np.array([7, 8], np.int64), np.array([1, 2, 3], np.int64), rank=1)
        np.testing.assert_array_equal(got, [7, 8, 1, 2, 3])
        got = land(np.array([0.5, 1.5]), None, what="the values")
        assert got.dtype == np.float64 and got.tolist() == [0.5, 1.5]
        got = land(np.array([[5, 6]], np.int32), np.array([[1, 2], [3, 4]], np.int32), rank=1)
        assert got.tolist() == [[5, 6], [1, 2], [3, 4]]
        # by new ids: put in the graph's order (graph id x holds new id index[x]) once whole
        from groute.runtime.renumber import WholeAnswerRenumbering
        renumbering = WholeAnswerRenumbering(ctx, ctx.devices[0], np.array([4, 0, 3, 1, 2]))
        here = OneRankOfTwo(ctx, TwoRanks(np.array([7, 8], np.int64)))
        got = land_answer(here, here.parts(np.array([1, 2, 3], np.int64)), "the labels",
                          renumbering)
        np.testing.assert_array_equal(got, [8, 1, 7, 2, 3])
        with pytest.raises(TypeError, match="the labels: the ranks' parts differ in dtype"):
            land(np.array([1], np.int32), np.array([1], np.int64))
        with pytest.raises(ValueError, match="the labels: no device holds a part"):
            land(None, None)
        # a rank whose parts cannot be described raises on every rank, after the meeting
        with pytest.raises(RuntimeError, match=r"the labels: cpu:1 \(rank 1\) could not "
                                               r"describe its part: TypeError: mixed"):
            land(None, np.array([1], np.int64), failure="TypeError: mixed")


class _SlotDevice:
    """This rank's GPU as the answer exchange sees it: ``free`` bytes free, host arrays for
    slots, every query counted."""

    def __init__(self, free):
        self.free, self.queries = free, 0

    def memory_info(self):
        self.queries += 1
        return self.free, 4 * self.free

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def use(self):
        import contextlib
        return contextlib.nullcontext()


def test_answer_slots_grow_together_and_only_where_memory_allows(monkeypatch):
    """The ranks' answer slots (groute.runtime.answer_exchange): a slot grows, in whole
    granules, only when a part outgrows it, every rank's growth remapping every slot (the old
    mappings let go first); the slots are used where every rank's growth and its copy of the
    whole answer fit its share of the free memory it told."""
    import groute.device.ipc as ipc
    from groute.runtime.answer_exchange import FREE_SHARE, GRANULE, DeviceAnswerExchange
    made, closed = [], []

    class Addresses:
        def __init__(self, ctx):
            made.append(self)

        def table(self, arrays, what):
            assert arrays[0] is not None and arrays[1] is None    # this rank's slot only
            self.slot = arrays[0]
            return [0, 0xbeef]

        def close(self):
            closed.append(self)
    monkeypatch.setattr(ipc, "PeerAddresses", Addresses)
    device = _SlotDevice(free=FREE_SHARE * 4 * GRANULE)
    ranks = SimpleNamespace(size=2, rank=0, allgather=lambda told, what: [told, None])
    ctx = SimpleNamespace(ranks=ranks, local_device=device, devices=["cuda:0", "cuda:1"])
    exchange = DeviceAnswerExchange(ctx)
    exchange._fit([5, 3 * GRANULE + 1])
    assert exchange.sizes == [GRANULE, 4 * GRANULE] and len(made) == 1 and not closed
    assert made[0].slot.nbytes == GRANULE and exchange._peers == [0, 0xbeef]
    exchange._fit([GRANULE, 2])                     # every part fits: nothing remapped
    assert len(made) == 1 and not closed
    exchange._fit([GRANULE + 1, 0])                 # this rank's grows: both slots remapped
    assert exchange.sizes == [2 * GRANULE, 4 * GRANULE] and closed == [made[0]]
    assert len(made) == 2 and made[1].slot.nbytes == 2 * GRANULE
    # each rank: its slot's growth and the whole answer within its share of what it told free
    free = FREE_SHARE * 4 * GRANULE
    assert exchange.fits([GRANULE, GRANULE], [free, free])
    assert exchange.fits([2 * GRANULE, 2 * GRANULE], [free, free])      # 4 granules, no growth
    assert not exchange.fits([2 * GRANULE + 1, 0], [free, free])        # and a granule more
    assert not exchange.fits([GRANULE, GRANULE], [free, FREE_SHARE * GRANULE])
    assert not exchange.fits([GRANULE, GRANULE], [free, free], copies=3)    # renumbered too
    # two ranks on one GPU count together against it
    ctx.places = [SimpleNamespace(gpu="0000:1b:00.0")] * 2
    assert not exchange.fits([2 * GRANULE, 2 * GRANULE], [free, free])
    assert exchange.fits([2 * GRANULE, 2 * GRANULE], [2 * free, 2 * free])
    del ctx.places
    assert exchange.free() == free and device.queries == 1
    exchange.close()
    assert closed == made and exchange.sizes == [0, 0] and exchange._peers is None
