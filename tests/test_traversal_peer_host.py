"""The host side of BFS/SSSP on the persistent peer kernels (groute.engines.relax.solver, groute.engines.relax.peer),
on CPU virtual devices: the solver builds only the arrays the peer kernels read (no distributed
worklist, no worklist worker), runs through the PeerTraversal and assembles its values, stats
and shutdown without a worklist. The kernels themselves need GPUs (tests/test_bfs.py,
tests/test_sssp.py, marked ``gpu``); here a stand-in computes the same result on the host from
the arrays the solver built, so wrong rows, weights or value assembly fail the comparison."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

import groute.engines.relax.solver as traversal
import groute.engines.relax.cpu_worker as traversal_cpu
import groute.engines.relax.cuda_worker as traversal_cuda
import groute.engines.relax.peer as traversal_peer
from groute.apps.bfs import BFS
from groute.apps.sssp import SSSP
from groute.engines.relax.cuda_worker import CUDATraversalArrays
from groute.engines.relax.peer import arrays_needed
from groute import Context
from groute.graph import CSRGraph, load_graph, reference
from groute.tuning import TraversalTuning

INT_INF = np.iinfo(np.int32).max


class FakePeer:
    """PeerTraversal's interface; ``run`` relaxes every arc of the arrays' rows until nothing
    changes (Bellman-Ford on the host) and writes the values into the arrays' ``dist``."""

    def __init__(self, ctx, arrays, offsets, *, num_vertices, num_arcs, symmetric, app="bfs",
                 relaxation=None, kind="int", weighted=False, delta=math.inf, tuning=None):
        assert kind == "int"
        assert isinstance(tuning, TraversalTuning)      # the solver's, passed on
        self.arrays, self.offsets = list(arrays), np.asarray(offsets)
        self.n, self.app, self.weighted, self.delta = num_vertices, app, weighted, delta
        assert sum(int(a.indptr[-1]) for a in self.arrays) == num_arcs
        self.counters_host = [{} for _ in self.arrays]
        FakePeer.last = self

    def prepare(self, source_new, max_level=None):
        self.staged = (source_new, max_level)

    def close(self):                    # the solver's close lets the traversal go
        self.closed = True

    def run(self, source_new=None, max_level=None):
        if source_new is None:
            source_new, max_level = self.staged
        src, dst, w = [], [], []
        for a, lo in zip(self.arrays, self.offsets[:-1]):
            deg = np.diff(np.asarray(a.indptr))
            src.append(np.repeat(np.arange(lo, lo + deg.size), deg))
            dst.append(np.asarray(a.indices, dtype=np.int64))
            w.append(np.asarray(a.weights, dtype=np.int64) if self.weighted
                     else np.ones(deg.sum(), np.int64))
        src, dst, w = (np.concatenate(x) for x in (src, dst, w))
        dist = np.full(self.n, INT_INF, np.int64)
        dist[source_new] = 0
        while True:
            reached = dist[src] < INT_INF
            new = dist.copy()
            np.minimum.at(new, dst[reached], dist[src[reached]] + w[reached])
            if np.array_equal(new, dist):
                break
            dist = new
        if max_level is not None:       # BFS: the kernel stops at that level
            dist[dist > max_level] = INT_INF
        for i, a in enumerate(self.arrays):
            lo, hi = self.offsets[i], self.offsets[i + 1]
            a.dist[:hi - lo] = dist[lo:hi]
            self.counters_host[i] = {"processed": int(hi - lo), "edges": 1, "rounds": 2}
        k = len(self.arrays)
        return {"rounds": [2] * k, "items_sent": {f"{i}->peers": 0 for i in range(k)},
                "items_forwarded": [0] * k, "bytes_moved": 0, "threshold_advances": 0,
                "exchange": "peer"}


@pytest.fixture
def peer_path(monkeypatch):
    """The solver takes the peer path on CPU devices, with FakePeer for the kernels; building
    a worklist or a worklist worker fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the peer path built part of the worklist path")
    monkeypatch.setattr(traversal.RelaxSolver, "_use_peer", lambda self, exchange: True)
    monkeypatch.setattr(traversal_peer, "PeerTraversal", FakePeer)
    monkeypatch.setattr(traversal, "DistributedWorklist", refuse)
    monkeypatch.setattr(traversal_cpu, "CPUTraversalWorker", refuse)
    monkeypatch.setattr(traversal_cuda, "CUDATraversalWorker", refuse)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("app", ["bfs", "sssp"])
def test_peer_path_builds_only_the_kernels_arrays(peer_path, app, k):
    g = load_graph("kron:8")
    if app == "sssp":
        g = g.with_weights(seed=1)
    cls = BFS if app == "bfs" else SSSP
    source = int(np.argmax(np.diff(g.indptr)))
    solver = cls(g, backend="cpu", devices=k, partition="random", mode="bsp", timeout=10)
    try:
        assert solver.worklist is None and solver.peer is FakePeer.last
        need = arrays_needed(app == "bfs")
        for a, lo, hi in zip(solver.workers, solver.part.offsets[:-1], solver.part.offsets[1:]):
            assert type(a) is CUDATraversalArrays
            assert len(a.near) == need["queues"] and a.near[0].size == max(hi - lo, 1)
            if need["sent_best"]:
                assert a.sent_best.size == (g.num_vertices if k > 1 else 1)
            else:
                assert a.sent_best is None
        # SSSP keeps soft priority on the peer path; BFS has none
        assert FakePeer.last.delta == (solver.delta if app == "sssp" else math.inf)
        for _ in range(2):
            res = solver.run(g.file_id_of(source))
            expected = reference.bfs(g, source) if app == "bfs" else reference.sssp(g, source)
            np.testing.assert_array_equal(res.values, expected)
        assert res.stats["exchange"] == "peer" and res.stats["levels"] == [2] * k
        assert res.stats["items_processed"] == list(np.diff(solver.part.offsets))
    finally:
        solver.close()
        solver.close()                  # no worklist to close, twice
    assert FakePeer.last.closed         # its mappings of other ranks' memory let go


@pytest.mark.timeout(30)
def test_traversal_arrays_on_a_device():
    """What CUDATraversalArrays uploads: the local rows, weights in the value kind, a slot of
    ``sent_best`` on one device; values() reads ``dist`` in the value kind."""
    g = CSRGraph(np.array([0, 2, 3, 3]), np.array([1, 2, 0], np.int32),
                 np.array([0.5, 2.0, 1.0], np.float32))
    with Context(1, backend="cpu", timeout=10) as ctx:
        dev = ctx.devices[0]
        a = CUDATraversalArrays(dev, g, lo=0, hi=3, offsets=[0, 3], num_vertices=3, kind="float",
                                weighted=True, queues=1, sent_best=True)
        np.testing.assert_array_equal(a.indptr, g.indptr)
        np.testing.assert_array_equal(a.indices, g.indices)
        assert a.weights.dtype == np.float32 and a.sent_best.size == 1 and len(a.near) == 1
        assert not a.has_big
        a.dist[:] = np.array([0.0, 0.5, 2.0], np.float32).view(np.int32)
        np.testing.assert_array_equal(a.values(), [0.0, 0.5, 2.0])
    with pytest.raises(ValueError, match="takes unit"):
        arrays_needed("pr")


def test_a_cuda_worker_s_reset_is_two_plain_launches_of_its_module(monkeypatch):
    """CUDATraversalWorker.reset_state on a stand-in (no GPU): reset_fused on a grid of a
    block per ``block`` items of the longest fill (its values, or sent_best over the other
    devices' vertices), at most its resident blocks, at least one, with the seeds round 0
    queues (none under a ceiling of 0), the threshold's and the ceiling's bits; then, where it
    owns seeds, place_seeds_fused with them. Both launched plainly; nothing else on the host."""
    from groute.engines.relax.cuda_worker import CUDATraversalWorker, _bits
    launches = []
    monkeypatch.setattr(traversal_cuda, "launch_plain",
                        lambda fn, grid, block, args: launches.append((fn, grid, block, args)))
    w = CUDATraversalWorker.__new__(CUDATraversalWorker)
    w.kind, w.block, w.blocks, w.args = "float", 128, 264, "args"
    w.reset_kernel, w.seeds_kernel = "reset_fused", "place_seeds_fused"
    seeds = SimpleNamespace(size=3)
    for items, staged, ceiling, threshold, grid, queued in (
            (1000, seeds, math.inf, 2.5, 8, 3),        # ceil(1000 / 128) blocks
            (10**7, seeds, 0.0, math.inf, 264, 0),     # at most the resident grid; not queued
            (0, None, 4.0, 1.0, 1, 0)):                # at least one block; no seed here
        launches.clear()
        w.reset_items, w.staged_seeds, w.ceiling_bits = items, staged, _bits(ceiling, "float")
        w.reset_state(threshold)
        reset = ("reset_fused", grid, 128, ("args", queued, _bits(threshold, "float"),
                                            _bits(ceiling, "float")))
        assert [(fn, g, b, tuple(int(x) if x != "args" else x for x in a))
                for fn, g, b, a in launches[:1]] == [reset]
        if staged is None:
            assert len(launches) == 1
            continue
        assert len(launches) == 2
        fn, g, b, (args, placed, n, queue) = launches[1]
        assert (fn, g, b, args, placed, int(n), int(queue)) == (
            "place_seeds_fused", 1, 128, "args", seeds, 3, int(queued > 0))


def test_the_persistent_engines_stage_their_seeds_before_the_timed_run():
    """RelaxSolver.run calls ``prepare(seeds, limit)`` outside its timer and then ``run()``:
    every persistent engine it may hold (the peer kernels, the linked workers) takes both, and
    ``run`` still takes the seeds itself for a caller that stages nothing."""
    import inspect

    from groute.engines.relax.linked import LinkedTraversal
    from groute.engines.relax.peer import PeerTraversal
    for cls in (PeerTraversal, LinkedTraversal):
        prepare = list(inspect.signature(cls.prepare).parameters.values())
        assert [p.name for p in prepare[:2]] == ["self", "sources_new"], cls
        assert len(prepare) == 3 and prepare[2].default is None, cls
        run = list(inspect.signature(cls.run).parameters.values())[1:]
        assert run and run[0].name == "sources_new", cls
        assert all(p.default is None for p in run), cls


class _Event:
    """An event of work already done (the stand-in streams run their calls at once)."""

    @classmethod
    def wait_all(cls, events, timeout=None, *, spin=0.0):
        assert all(isinstance(e, cls) for e in events)

    def synchronize(self, timeout=None, *, spin=0.0):
        pass


class _Stream:
    """A compute stream whose ``submit`` runs the call at once, as a CUDA stream's does on the
    host (the work it queues is the stream's, the call itself is not deferred)."""

    def submit(self, fn, *args, **kwargs):
        fn(*args, **kwargs)

    def record(self):
        return _Event()


class _Device:
    def __init__(self, name):
        self.name, self.compute_stream = name, _Stream()


class _Barrier:
    """CrossDeviceBarrier's ``launch_each`` (every launch succeeds) and ``finish`` (records
    whether the run was ``ok``)."""

    def __init__(self, devices):
        self.devices, self.finished = devices, []

    def launch_each(self, launch):
        for i, dev in enumerate(self.devices):
            launch(i, dev)
        return list(range(len(self.devices))), None

    def share_ends(self, ends, failure, phase, what):   # one process: its own
        return [ends.get(i) for i in range(len(self.devices))], failure

    def finish(self, stops, *, ok, **_):
        self.finished.append(ok)


class _Readback:
    """A device array whose ``get`` writes what a finished kernel left (``fill(out)``)."""

    def __init__(self, fill):
        self.fill = fill

    def get(self, out, **_):
        self.fill(out)


class _SeedsOnDevice:
    """A worker's staged seeds as the linked traversal reads them: an address and a size."""

    def __init__(self, ptr, size):
        self.data, self.size = SimpleNamespace(ptr=ptr), size


class _LinkedWorker:
    """What LinkedTraversal asks of a CUDATraversalWorker outside the kernel: ``set_source``
    (recorded; it stages the seeds of ``[lo, hi)`` at a made-up address and the ceiling's
    bits, as the worker does; ``fails`` makes it raise), the launch's arguments and the
    counters' read-back."""

    def __init__(self, lo, hi, read):
        self.lo, self.hi = lo, hi
        self.sources, self.fails = [], False
        self.staged_seeds, self.ceiling_bits = None, None
        self.args, self.narrow_blocks, self.has_big = f"args[{lo}]", 4, 0
        self.counters_dev = _Readback(read)

    def set_source(self, seeds, ceiling=None):
        if self.fails:
            raise ValueError("no such seed")
        self.sources.append((np.asarray(seeds).tolist(), ceiling))
        mine = [s for s in np.asarray(seeds).tolist() if self.lo <= s < self.hi]
        self.staged_seeds = _SeedsOnDevice(1000 + self.lo, len(mine)) if mine else None
        self.ceiling_bits = INT_INF if ceiling is None else ceiling


def test_the_linked_traversal_runs_once_from_what_prepare_staged(monkeypatch):
    """LinkedTraversal on stand-ins for its workers, barrier and launch: run() before prepare()
    raises naming it; prepare() gives every worker the seeds and launches nothing; run()
    launches every device from them (its staged seeds' address and count, the ceiling's bits)
    and consumes them (a second run() raises again); run(seeds) stages them itself; a prepare
    that fails leaves nothing staged. A run queues on a device its reset (one plain launch: the
    seeds it queues, delta, the ceiling), every reset before any persistent launch, then its launch
    and, after every launch, its read-back: no other host work."""
    from groute.engines import peer_barrier
    from groute.engines.protocol import PROTO_RESULT, PROTOCOL_WORDS
    import groute.engines.relax.linked as linked
    from groute.engines.relax.linked import L_INT, L_U64, STOP_DONE, LinkedTraversal

    events = []

    def finished(i):            # a device's control block: it stopped because the work ran out
        def fill(out):
            events.append(("read", i))
            out[PROTO_RESULT:PROTO_RESULT + 1].view(np.int32)[1] = STOP_DONE
        return fill

    def launch(fn, blocks, block, args, *, device, kernel):
        assert (fn, kernel) == ("traverse_linked", "traverse_linked")
        events.append(("launch", device.name))
        w_args, links, seeds, count, delta, ceiling, *_, timeout = args
        launches.append((device.name, w_args, links, int(seeds), int(count), int(delta),
                         int(ceiling), int(timeout)))
        return blocks

    def plain(fn, grid, block, args):       # the resets' launch: plain (no barrier in them)
        i = int(fn[-2])
        assert fn == f"reset_linked[{i}]" and block == linked.BLOCK
        w_args, links, queued, delta, ceiling = args
        events.append(("reset", f"cuda:{i}"))
        resets.append((f"cuda:{i}", grid, w_args, links, int(queued), int(delta), int(ceiling)))

    monkeypatch.setattr(linked, "launch_resident", launch)
    monkeypatch.setattr(linked, "launch_plain", plain)
    t = LinkedTraversal.__new__(LinkedTraversal)
    t.app, t.k, t.cap, t.max_rounds, t._staged = "bfs", 2, 1 << 16, 10, None
    t.delta_bits = 7
    t.devices = [_Device("cuda:0"), _Device("cuda:1")]
    t.workers = [_LinkedWorker(0, 4, lambda out: out.fill(0)),
                 _LinkedWorker(4, 8, lambda out: out.fill(0))]
    t.fns, t.blocks, t.links = ["traverse_linked"] * 2, [4, 4], ["links[0]", "links[1]"]
    t.resets, t.reset_blocks = ["reset_linked[0]", "reset_linked[1]"], [3, 5]
    t.barrier = _Barrier(t.devices)
    t.barrier.base = 0
    t.state = [_Readback(finished(i)) for i in range(2)]
    t.state_host = [np.zeros(PROTOCOL_WORDS + L_U64 + L_INT // 2, np.uint64) for _ in range(2)]
    t.counters_pinned = [np.zeros(16, np.int64) for _ in range(2)]
    t.counters_host = [{}, {}]
    launches, resets = [], []

    with pytest.raises(RuntimeError, match=r"linked bfs: run\(\) without prepare\(\)"):
        t.run()
    assert launches == [] and all(w.sources == [] for w in t.workers)
    t.prepare([6, 1, 7], ceiling=5)
    assert all(w.sources == [([6, 1, 7], 5)] for w in t.workers) and launches == []
    stats = t.run()
    timeout = peer_barrier.timeout_ns()
    # device 0 owns seed 1, device 1 seeds 6 and 7: each kernel gets its own, and the ceiling
    assert launches == [("cuda:0", "args[0]", "links[0]", 1000, 1, 7, 5, timeout),
                        ("cuda:1", "args[4]", "links[1]", 1004, 2, 7, 5, timeout)]
    # each device's reset: its grid, the seeds it queues, delta, the ceiling
    assert resets == [("cuda:0", 3, "args[0]", "links[0]", 1, 7, 5),
                      ("cuda:1", 5, "args[4]", "links[1]", 2, 7, 5)]
    # the resets, then the launches, then the read-backs
    assert events == [("reset", "cuda:0"), ("reset", "cuda:1"), ("launch", "cuda:0"),
                      ("launch", "cuda:1"), ("read", 0), ("read", 1)]
    assert stats["exchange"] == "peer" and t.barrier.finished == [True]
    with pytest.raises(RuntimeError, match=r"run\(\) without prepare\(\)"):
        t.run()
    assert len(launches) == 2
    t.run([5])
    # a device that owns no seed launches with a null pointer and none; no ceiling: inf bits
    assert launches[2:] == [("cuda:0", "args[0]", "links[0]", 0, 0, 7, INT_INF, timeout),
                            ("cuda:1", "args[4]", "links[1]", 1004, 1, 7, INT_INF, timeout)]
    t.prepare([2])
    t.workers[1].fails = True
    with pytest.raises(ValueError, match="no such seed"):
        t.prepare([7])
    with pytest.raises(RuntimeError, match=r"run\(\) without prepare\(\)"):
        t.run()
    assert len(launches) == 4


def test_the_peer_traversal_runs_once_from_what_prepare_staged():
    """PeerTraversal on stand-ins for its devices, barrier, seed upload and launch: run()
    before prepare() raises naming it; prepare() stages each device's own seeds (local ids)
    with the level limit and launches nothing; run() launches every device from its staged
    seeds and consumes them (a second run() raises again); run(seeds) stages them itself; a
    prepare refused (a ceiling without a unit relaxation) leaves nothing staged."""
    from groute.engines import peer_barrier
    from groute.engines.relax.peer import COUNTERS, CTL_WORDS, PeerTraversal

    t = PeerTraversal.__new__(PeerTraversal)
    t.app, t.kernel, t.k, t.unit, t.max_rounds, t._staged = "bfs", "peer_bfs", 2, True, 10, None
    t.offsets = np.array([0, 4, 8])
    t.devices = [_Device("cuda:0"), _Device("cuda:1")]
    t.local = [0, 1]
    t.barrier = _Barrier(t.devices)
    t.state = [_Readback(lambda out: out.fill(0)) for _ in range(2)]
    t.state_host = [np.zeros(COUNTERS + CTL_WORDS, np.uint64) for _ in range(2)]
    t.counters_host = [{}, {}]
    t.trace = [None, None]
    staged_seeds, launches, shared_seeds = [], [], []

    def stage(staged, i, seeds, shared):    # the upload, kept on the host
        staged_seeds.append((i, seeds.tolist()))
        staged[i] = seeds.tolist()
        shared_seeds.append((i, shared.tolist()))

    t._stage = stage
    t._launch = lambda i, dev: launches.append((i, dev.name, t._staged[i], int(t._level),
                                                int(t._timeout_ns)))

    with pytest.raises(RuntimeError, match=r"peer bfs: run\(\) without prepare\(\)"):
        t.run()
    assert launches == [] and staged_seeds == []
    t.prepare([6, 1], max_level=3)
    assert staged_seeds == [(0, [1]), (1, [2])] and launches == []
    # a BFS from a few seeds shares level 0: every device gets every seed (global ids)
    assert shared_seeds == [(0, [1, 6]), (1, [1, 6])]
    stats = t.run()
    timeout = peer_barrier.timeout_ns()
    assert launches == [(0, "cuda:0", [1], 3, timeout), (1, "cuda:1", [2], 3, timeout)]
    assert stats["exchange"] == "peer" and t.barrier.finished == [True]
    with pytest.raises(RuntimeError, match=r"run\(\) without prepare\(\)"):
        t.run()
    assert len(launches) == 2
    t.run([5])
    unlimited = int(np.iinfo(np.int32).max)
    assert launches[2:] == [(0, "cuda:0", [], unlimited, timeout),
                            (1, "cuda:1", [1], unlimited, timeout)]
    t.prepare([2])
    # no first level to share under a ceiling of 0, nor among more seeds than SHARED_SEEDS
    from groute.engines.relax.peer import SHARED_SEEDS
    shared_seeds.clear()
    t.prepare([3, 5], max_level=0)
    t.prepare(list(range(SHARED_SEEDS + 1)))
    assert [x for _, x in shared_seeds] == [[]] * 4
    t.prepare([2])
    t.unit = False
    with pytest.raises(ValueError, match="a ceiling needs a unit relaxation"):
        t.prepare([2], max_level=1)
    with pytest.raises(RuntimeError, match=r"run\(\) without prepare\(\)"):
        t.run()
    assert len(launches) == 4


class _Ranks:
    """Two ranks' meetings as rank 0 sees them: each ``barrier`` recorded; rank 1's entry of
    an allgather is ``ends`` for the run's ends (its counters' row and what it failed at, if
    anything) and ``stopped`` for a reset's (what its device's failure was: None, none)."""

    def __init__(self):
        self.size, self.rank, self.met, self.heard = 2, 0, [], []
        self.ends, self.stopped = None, None

    def barrier(self, what):
        self.met.append(what)

    def at_marked_meeting(self):    # not a timed run's start: the launches meet first
        return False

    def allgather(self, obj, what):
        self.heard.append(what)
        return [obj, self.ends if what.startswith("the ends") else self.stopped]


class _RemoteStandIn:
    """Device 1 of a two-rank context, as rank 0 holds it: driven by rank 1."""
    name, local = "cuda:1", False


def _rank_zero_traversal():
    """PeerTraversal as rank 0 of two holds it (device 1 is rank 1's), over the real
    CrossDeviceBarrier, whose ranks record their meetings; rank 0's kernel leaves 5 received
    offers and 2 levels, and its own launch is recorded."""
    from groute.engines.peer_barrier import CrossDeviceBarrier
    from groute.engines.protocol import PROTO_CROSSED, PROTO_RESULT
    from groute.engines.relax.peer import COUNTERS, CTL_WORDS, RECEIVED, PeerTraversal

    def finished(out, received=5):
        out.fill(0)
        out[RECEIVED] = received
        out[COUNTERS + PROTO_CROSSED] = 4
        out[COUNTERS + PROTO_RESULT:COUNTERS + PROTO_RESULT + 1].view(np.int32)[0] = 2

    t = PeerTraversal.__new__(PeerTraversal)
    t.app, t.kernel, t.k, t.unit, t.max_rounds, t._staged = "bfs", "peer_bfs", 2, True, 10, None
    t.offsets = np.array([0, 4, 8])
    t.devices = [_Device("cuda:0"), _RemoteStandIn()]
    t.local = [0]
    ranks = _Ranks()
    t.barrier = CrossDeviceBarrier(t.devices, np.ones(16, np.uint64), ranks=ranks,
                                   address=0x1000)
    t.state = [_Readback(finished), None]
    t.state_host = [np.zeros(COUNTERS + CTL_WORDS, np.uint64), None]
    t.counters_host = [{}, {}]
    t.trace = [None, None]
    launches, resets = [], []
    t._stage = lambda staged, i, seeds, shared: staged.__setitem__(i, seeds.tolist())
    t._launch = lambda i, dev: launches.append(dev.name)
    row = np.zeros(COUNTERS + CTL_WORDS, np.uint64)
    finished(row, received=7)
    return t, ranks, launches, row, finished


def test_across_processes_a_rank_launches_its_device_and_hears_the_others_counters():
    """On a RankContext a rank launches only its own device, after the ranks meet (their
    launches within the meeting timeout); the other ranks' counters come through
    ``ctx.share``, so every rank's stats and meeting counter are the whole run's; the
    meeting block's address is the mapped one."""
    t, ranks, launches, row, _ = _rank_zero_traversal()
    ranks.ends = (row, None)
    t.prepare([6, 1])
    stats = t.run()
    assert launches == ["cuda:0"] and len(ranks.met) == 1
    assert stats["items_received"] == [5, 7] and stats["rounds"] == [2, 2]
    assert t.barrier.base == 2 * 4 and t.barrier.ptr == 0x1000
    assert t.counters_host[1]["processed"] == 7
    assert ranks.heard == ["the ends of a run of peer bfs"]


def test_across_processes_another_rank_s_failed_launch_raises_naming_it():
    """A rank whose launch failed tells the others with its counters' share: every rank
    raises, rank 0 naming cuda:1, its rank and the original error; the meeting counter is
    zeroed after the ranks meet (no rank launches on a counter left somewhere unknown)."""
    t, ranks, launches, row, _ = _rank_zero_traversal()
    ranks.ends = (None, "could not launch its kernel: ZeroDivisionError: injected")
    t.barrier.base = 8
    t.prepare([6])
    with pytest.raises(RuntimeError, match=r"peer bfs: cuda:1 \(rank 1\) could not launch its "
                                           r"kernel: ZeroDivisionError: injected"):
        t.run()
    assert launches == ["cuda:0"] and t.barrier.base == 0 and not t.barrier.block.any()
    assert ranks.heard[1:] == ["the ranks' devices stopped before the meeting block is zeroed"]
    assert ranks.met[1:] == ["the meeting block zeroed before the next launch"]


def test_across_processes_a_device_that_failed_after_the_run_stops_every_rank_s_reset():
    """A run the devices disagree on is reset; where another rank's device failed by then,
    every rank raises naming it and none zeroes the meeting block or launches again (the
    counter stands somewhere unknown), instead of that rank raising alone."""
    from groute.engines.protocol import PROTO_CROSSED
    from groute.engines.relax.peer import COUNTERS
    t, ranks, launches, row, _ = _rank_zero_traversal()
    row[COUNTERS + PROTO_CROSSED] = 3   # rank 1 passed fewer meetings: not a good run
    ranks.ends = (row, None)
    ranks.stopped = "DeviceError: cuda:1: an illegal memory access"
    t.barrier.base = 8
    t.prepare([6])
    with pytest.raises(RuntimeError, match=r"cuda:1 \(rank 1\) failed after a run of the kernels "
                                           r"that meet across the ranks: DeviceError: cuda:1: an "
                                           r"illegal memory access"):
        t.run()
    assert t.barrier.block.all() and t.barrier.base == 8 and len(ranks.met) == 1


def test_together_tells_every_rank_whether_the_others_did_their_part():
    """peer_barrier.together: in one process an error is raised as it comes; across
    processes every rank hears the others (one allgather) and all raise, a rank without an
    error of its own naming the first rank that failed, its device and error, so no rank
    goes on to a meeting the failed one never reaches."""
    from types import SimpleNamespace
    from groute.engines.peer_barrier import together
    with pytest.raises(ZeroDivisionError):
        with together(SimpleNamespace(ranks=None), "set up", "peer bfs"):
            raise ZeroDivisionError("here")
    ranks = _Ranks()
    ctx = SimpleNamespace(ranks=ranks, devices=[_Device("cuda:0"), _RemoteStandIn()])
    with together(ctx, "set up its kernel", "peer bfs"):
        pass                                # nobody failed: on it goes
    ranks.stopped = "MemoryError: out of memory"
    with pytest.raises(RuntimeError, match=r"peer bfs: cuda:1 \(rank 1\) has not set up its "
                                           r"kernel: MemoryError: out of memory"):
        with together(ctx, "set up its kernel", "peer bfs"):
            pass
    with pytest.raises(ZeroDivisionError):  # its own error, once the others heard it
        with together(ctx, "set up its kernel", "peer bfs"):
            raise ZeroDivisionError("here")
    assert ranks.heard == ["whether every rank set up its kernel"] * 3
    with together(ctx, "set up its kernel", "peer bfs", across=False):
        pass                                # not across: no allgather
    assert len(ranks.heard) == 3
