"""Computations from several threads on one Context take turns (Context.exclusive): two runs
whose device functions wait for each other across devices, and two async-engine loops, with
their functions forced to reach the devices' host threads in opposite orders (what a thread
switch between two submits can do), both finish with the right answers; they used to wait for
each other until the timeout. No test here depends on timing: the interleaving is forced by
holding each thread at a chosen submit until the other thread reached a chosen point (or
waits for its turn)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from groute import Context
from groute.engines import make_engine
from groute.graph import CSRGraph
from groute.operators import AdvanceStep, run_loop
from support import CLAIM_ONCE

pytestmark = pytest.mark.timeout(120)

#: the most a thread held at a submit waits for the other to get where it is expected (only
#: reached when something is wrong: the test then fails on what the runs raised)
HOLD_S = 30


class Interleaving:
    """Holds each thread's submits of the functions ``wanted`` (by qualified name) to the
    devices of ``ctx`` as ``rules`` say: ``rules[(thread name, device index)]`` is ``(signal,
    wait for, then signal)``, names of events (any may be None) set before the submit, waited
    for before it and set after it. A wait also ends once a thread waits for its turn on the
    context (the runs take turns, so the other thread will not submit)."""

    def __init__(self, ctx, wanted: str, rules):
        self.ctx, self.wanted, self.rules = ctx, wanted, rules
        self.events = {name: threading.Event() for rule in rules.values() for name in rule
                       if name is not None}
        for i, worker in enumerate(ctx._workers):
            worker.submit = self._held(i, worker.submit)

    def _someone_waits_for_a_turn(self) -> bool:
        return getattr(self.ctx, "_waiting", 0) > 0

    def _wait(self, name):
        event = self.events[name]
        for _ in range(int(HOLD_S / 0.01)):
            if event.wait(0.01) or self._someone_waits_for_a_turn():
                return

    def _held(self, i, submit):
        def held(fn):
            rule = self.rules.get((threading.current_thread().name, i))
            if rule is None or self.wanted not in getattr(fn, "__qualname__", ""):
                return submit(fn)
            before, wait_for, after = rule
            if before is not None:
                self.events[before].set()
            if wait_for is not None:
                self._wait(wait_for)
            future = submit(fn)
            if after is not None:
                self.events[after].set()
            return future
        return held


def run_in_threads(**calls):
    """Run each ``name=fn`` in a thread of that name; their results or exceptions by name."""
    out = {}

    def call(name, fn):
        try:
            out[name] = fn()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out[name] = exc
    threads = [threading.Thread(target=call, args=(name, fn), name=name)
               for name, fn in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HOLD_S * 3)
    return out


def test_two_runs_whose_functions_meet_take_turns_in_any_submit_order():
    """A's function reaches device 0, then B's reach both devices, then A's reaches device 1:
    device 0 runs A's, which waits for A's on device 1, queued behind B's, which waits for
    B's on device 0, queued behind A's. Taking turns, B submits nothing until A is done."""
    ctx = Context(2, backend="cpu", timeout=3)
    meetings = {"A": threading.Barrier(2), "B": threading.Barrier(2)}

    def meet(device, who):
        meetings[who].wait(timeout=ctx.timeout)     # every device's function of the run
        return (who, device.index)

    Interleaving(ctx, "meet", {("A", 0): (None, None, "A at 0"),
                               ("B", 0): (None, "A at 0", None),
                               ("B", 1): (None, None, "B at 1"),
                               ("A", 1): (None, "B at 1", None)})
    try:
        out = run_in_threads(A=lambda: ctx.run(meet, "A"), B=lambda: ctx.run(meet, "B"))
        assert out == {"A": [("A", 0), ("A", 1)], "B": [("B", 0), ("B", 1)]}, out
    finally:
        ctx.shutdown()


def test_two_async_loops_on_one_context_take_turns():
    """The issue's deadlock: two engines' order-free loops on one context from two threads,
    each device's loop waiting for counted termination, their loops reaching the devices in
    opposite orders (A's device 0, B's both, A's device 1). Each reaches every vertex."""
    n = 60
    src = np.arange(n - 1)
    g = CSRGraph.from_edges(np.r_[src, src + 1], np.r_[src + 1, src], n, directed=False)
    ctx = Context(2, backend="cpu", timeout=3)
    engines = {who: make_engine(g, "async", ctx=ctx) for who in "AB"}

    def reach(who):
        eng = engines[who]
        eng.state("reached", np.int32, 0, values=(np.arange(n) == 0).astype(np.int32))
        result = run_loop(eng.frontier([0]), [AdvanceStep(CLAIM_ONCE)], order="any")
        return result.implementation, int(eng.gather("reached").sum())

    # A's loop reaches device 0 once B's seeds are placed (B is at its loops); then as above
    Interleaving(ctx, "_device_loop", {("A", 0): (None, "B ready", "A at 0"),
                                       ("B", 0): ("B ready", "A at 0", None),
                                       ("B", 1): (None, None, "B at 1"),
                                       ("A", 1): (None, "B at 1", None)})
    try:
        out = run_in_threads(A=lambda: reach("A"), B=lambda: reach("B"))
        assert out == {"A": ("async", n), "B": ("async", n)}, out
    finally:
        for eng in engines.values():
            eng.close()
        ctx.shutdown()


def test_two_bfs_solvers_on_one_context_take_turns():
    """The same for two BFS solvers on the distributed worklist (their device loops wait for
    counted termination), the runs from two threads on one context."""
    from groute.apps.bfs import BFS
    src = np.arange(59)
    g = CSRGraph.from_edges(np.r_[src, src + 1], np.r_[src + 1, src], 60, directed=False)
    ctx = Context(2, backend="cpu", timeout=3)
    solvers = {who: BFS(g, ctx=ctx, mode="async", partition="contiguous") for who in "AB"}
    Interleaving(ctx, "_async_loop", {("A", 0): (None, "B ready", "A at 0"),
                                      ("B", 0): ("B ready", "A at 0", None),
                                      ("B", 1): (None, None, "B at 1"),
                                      ("A", 1): (None, "B at 1", None)})
    try:
        out = run_in_threads(A=lambda: solvers["A"].run(0).values.tolist(),
                             B=lambda: solvers["B"].run(59).values.tolist())
        assert out == {"A": list(range(60)), "B": list(range(59, -1, -1))}, out
    finally:
        for solver in solvers.values():
            solver.close()
        ctx.shutdown()
