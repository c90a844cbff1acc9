"""The distributed worklist on its own: items, queues, counted termination, routing, failures.

A toy worker ("hops") makes the counting checkable exactly: every item ``(ttl, v)`` processed
spawns one item for vertex ``(v * 7 + 3) % N`` with ``ttl - 1`` until ttl is 0, so a run must
process exactly ``sum(ttl + 1)`` items, whatever the device count, routing, or mode. A lost
item or a miscounted one makes the totals differ or the run hang (and the timeout fail it).
"""
import math
import threading

import numpy as np
import pytest

from groute import Context
from groute.errors import DeviceError
from groute.worklist import (DistributedWorklist, LocalWork, WorkCounter, WorkQueue,
                             call_on_stream, next_threshold, pack, unpack)


def test_pack_unpack_round_trip_int_and_float():
    v = np.array([0, 5, 2**31 - 1], dtype=np.int64)
    ints = np.array([0, 7, 2**31 - 1], dtype=np.int32)
    got_v, got = unpack(pack(v, ints), "int")
    assert got_v.tolist() == v.tolist() and got.tolist() == ints.tolist()
    floats = np.array([0.0, 1.5, np.inf], dtype=np.float32)
    got_v, got = unpack(pack(v, floats), "float")
    assert got.tolist() == floats.tolist()
    # packed items order by value, then vertex
    items = pack(np.array([3, 1, 2]), np.array([2.0, 1.0, 1.0], dtype=np.float32))
    assert unpack(np.sort(items), "float")[0].tolist() == [1, 2, 3]


def test_work_queue_grows_instead_of_losing_items():
    with Context(1, backend="cpu", timeout=10) as ctx:
        q = WorkQueue(ctx.devices[0], capacity=4)
        for chunk in np.array_split(np.arange(1000, dtype=np.int64), 7):
            q.push(chunk)
        assert q.grown > 0 and len(q) == 1000
        assert q.take().tolist() == list(range(1000))
        assert len(q) == 0


def test_counter_ends_only_when_everything_is_zero():
    c = WorkCounter(2, threshold=math.inf, delta=math.inf, stop=threading.Event(), timeout=5)
    c.report(0, LocalWork(near=1))
    assert not c.finished()
    c.report(0, LocalWork(near=0), sent=3)          # work moved into transit
    assert not c.finished()
    c.report(1, LocalWork(near=2), received=3)      # arrived and became local work
    assert not c.finished()
    c.report(1, LocalWork(near=0))
    assert c.finished()


def test_next_threshold_jumps_to_the_deferred_work():
    """values.cuh's next_threshold, on the host: delta past the larger of the old threshold
    and the least deferred value."""
    assert next_threshold(10, 30, 5) == 35
    assert next_threshold(40, 30, 5) == 45
    assert next_threshold(10, math.inf, 5) == 15
    assert next_threshold(1.5, 2.25, 0.5) == 2.75


def test_next_threshold_steps_past_a_float32_base_that_delta_cannot_move():
    """Float distances are float32: a delta lost in the base's precision (in float64, or in
    float32 where the kernels add) still takes the threshold to the least float32 above the
    base, or the window never admits the deferred value and the run waits forever."""
    up = float(np.nextafter(np.float32(1.0), np.float32(2.0)))
    assert next_threshold(0.5, 1.0, 1e-30) == up
    big = float(np.float32(1e8))
    nxt = next_threshold(big, big, 1.0)          # float64 moves, float32 (spacing 8) cannot
    assert nxt > big and np.float32(nxt) > np.float32(big)
    assert next_threshold(0.5, 1.0, 0.25) == 1.25     # a step float32 holds is kept as is
    assert next_threshold(3, math.inf, 2) == 5        # integer distances are exact
    assert next_threshold(1e39, 1e39, 1.0) == 1e39 + 1.0   # past float32: every value is below
    assert next_threshold(big, big, np.float32(1.0)) > big    # a NumPy delta, as a float one
    top = float(np.finfo(np.float32).max)
    assert next_threshold(top, top, 1.0) == math.inf       # as the kernels' next float up


def test_counter_advances_threshold_only_when_no_near_work_and_all_split():
    c = WorkCounter(2, threshold=10, delta=5, stop=threading.Event(), timeout=5)
    c.report(0, LocalWork(near=1, far=1, far_min=30))
    assert c.epoch == 0
    c.report(0, LocalWork(near=0, far=1, far_min=30))
    assert c.epoch == 1 and c.threshold == 35       # jumps to the lowest deferred + delta
    c.report(1, LocalWork(near=0, far=2, far_min=50))
    assert c.epoch == 1                             # device 0 has not split for epoch 1 yet
    c.report(0, LocalWork(near=0, far=1, far_min=40), epoch=1)
    assert c.epoch == 1                             # device 1 has not split either
    c.report(1, LocalWork(near=0, far=2, far_min=50), epoch=1)
    assert c.epoch == 2 and c.threshold == 45


class HopsWorker:
    """Toy worker: see the module docstring. Device i owns vertices [offsets[i], offsets[i+1])."""

    def __init__(self, device, offsets, seeds, n):
        self.device, self.offsets, self.n = device, np.asarray(offsets), n
        self.i = device.index
        self.seeds = seeds
        self.work = LocalWork()

    def _own(self, v):
        return (v >= self.offsets[self.i]) & (v < self.offsets[self.i + 1])

    def start(self, threshold):
        def go():
            v, ttl = self.seeds
            mine = self._own(v)
            self.queue = [pack(v[mine], ttl[mine])]
            self.processed = 0
            return self._report()
        return call_on_stream(self.device.compute_stream, go)

    def _report(self):
        self.work = LocalWork(near=sum(a.size for a in self.queue))
        return self.work

    def advance(self, threshold, *, max_rounds=None, self_advance=False):
        def go():
            outbox = [[] for _ in range(len(self.offsets) - 1)]
            rounds = 0
            while self.queue and (max_rounds is None or rounds < max_rounds):
                items = np.concatenate(self.queue)
                self.queue = []
                self.processed += items.size
                v, ttl = unpack(items, "int")
                live = ttl > 0
                nv = (v[live] * 7 + 3) % self.n
                nt = ttl[live] - 1
                owners = np.searchsorted(self.offsets, nv, side="right") - 1
                for j in np.unique(owners):
                    sel = owners == j
                    (self.queue if j == self.i else outbox[j]).append(pack(nv[sel], nt[sel]))
                rounds += 1
            out = [np.concatenate(o) if o else None for o in outbox]
            return self._report(), out
        return call_on_stream(self.device.compute_stream, go)

    def absorb(self, arrays, threshold):
        def go():
            for a in arrays:
                v, _ = unpack(a, "int")
                assert self._own(v).all(), "an item reached a device that does not own it"
                self.queue.append(np.array(a, copy=True))
            return self._report()
        return call_on_stream(self.device.compute_stream, go)

    def split(self, threshold):
        return self.work


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("routing", ["all2all", "ring"])
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_hops_processes_exactly_every_item(k, routing, mode):
    n = 97
    rng = np.random.default_rng(k)
    seeds = (rng.integers(0, n, 40).astype(np.int64), rng.integers(0, 30, 40).astype(np.int32))
    offsets = np.linspace(0, n, k + 1).astype(np.int64)
    with Context(k, backend="cpu", timeout=10) as ctx:
        wl = DistributedWorklist(ctx, routing=routing, packet_size=8, num_buffers=2)
        try:
            workers = [HopsWorker(d, offsets, seeds, n) for d in ctx.devices]
            for run in range(2):                      # a worklist runs many times
                stats = wl.run(workers, mode=mode, max_rounds=3)
                assert sum(w.processed for w in workers) == int((seeds[1] + 1).sum())
                if k > 1:
                    assert sum(stats["items_sent"].values()) > 0
                if routing == "ring" and k > 2:
                    assert sum(stats["items_forwarded"]) > 0
                    assert set(stats["items_sent"]) == {f"{i}->{(i + 1) % k}" for i in range(k)}
        finally:
            wl.close()


@pytest.mark.timeout(30)
def test_idle_devices_do_not_deadlock_and_empty_run_ends():
    n = 10
    with Context(3, backend="cpu", timeout=5) as ctx:
        wl = DistributedWorklist(ctx)
        try:
            empty = (np.empty(0, np.int64), np.empty(0, np.int32))
            workers = [HopsWorker(d, [0, 4, 8, 10], empty, n) for d in ctx.devices]
            wl.run(workers)
            assert all(w.processed == 0 for w in workers)
            one = (np.array([9]), np.array([0], np.int32))  # only the last device has work
            workers = [HopsWorker(d, [0, 4, 8, 10], one, n) for d in ctx.devices]
            wl.run(workers)
            assert [w.processed for w in workers] == [0, 0, 1]
        finally:
            wl.close()


class FailingWorker(HopsWorker):
    def absorb(self, arrays, threshold):
        raise RuntimeError("boom in absorb")


@pytest.mark.timeout(30)
def test_a_failing_device_stops_the_run_and_raises():
    """The run raises the failing device's own error, naming that device, within the timeout;
    the next run on the same worklist (new links, the context reset) counts every item."""
    import time
    n = 50
    seeds = (np.arange(10, dtype=np.int64), np.full(10, 20, np.int32))
    offsets = [0, 25, 50]
    with Context(2, backend="cpu", timeout=5) as ctx:
        wl = DistributedWorklist(ctx)
        try:
            workers = [HopsWorker(ctx.devices[0], offsets, seeds, n),
                       FailingWorker(ctx.devices[1], offsets, seeds, n)]
            started = time.monotonic()
            with pytest.raises(DeviceError, match="boom in absorb") as info:
                wl.run(workers)
            assert time.monotonic() - started < 5
            assert info.value.device == "cpu:1" and str(info.value).startswith("cpu:1: ")
            assert isinstance(info.value.__cause__, RuntimeError)
            workers[1] = HopsWorker(ctx.devices[1], offsets, seeds, n)
            wl.run(workers)
            assert sum(w.processed for w in workers) == int((seeds[1] + 1).sum())
        finally:
            wl.close()


def test_bad_options_are_clear_errors():
    with Context(2, backend="cpu", timeout=5) as ctx:
        with pytest.raises(ValueError, match="routing"):
            DistributedWorklist(ctx, routing="mesh")
        wl = DistributedWorklist(ctx)
        try:
            with pytest.raises(ValueError, match="mode"):
                wl.run([None, None], mode="sync")
            with pytest.raises(ValueError, match="one worker per device"):
                wl.run([None])
        finally:
            wl.close()


@pytest.mark.timeout(30)
def test_an_idle_wait_times_out_only_without_progress():
    """The timeout bounds an idle wait in which no device reports and none holds near work
    (what is in transit never arrives), not a run: a device that holds work keeps the others
    waiting past it, as do reports of items arriving, and the end wakes them."""
    import time
    from groute.errors import WaitTimeout
    stop = threading.Event()
    counter = WorkCounter(3, threshold=math.inf, delta=math.inf, stop=stop, timeout=0.3)
    counter.report(0, LocalWork(near=0), sent=4)            # 4 items on their way, forever
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"device 1 .*in transit=4"):
        counter.wait_idle(1, lambda: False)
    assert time.monotonic() - started < 2

    counter.report(0, LocalWork(near=5), received=4)       # device 0 busy for 0.8 s

    def work():
        time.sleep(0.8)
        counter.report(0, LocalWork(near=0), sent=6)        # then device 2 takes in one item
        for _ in range(6):                                  # every 0.1 s, holding none
            time.sleep(0.1)
            counter.report(2, LocalWork(near=0), received=1)
    worker = threading.Thread(target=work)
    worker.start()
    started = time.monotonic()
    try:
        finished, _, _ = counter.wait_idle(1, lambda: False)
    finally:
        worker.join()
    assert finished and time.monotonic() - started > 1.2
