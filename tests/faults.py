"""A fault on one device of K in the middle of a run, and what the caller sees: the scenarios of
tests/test_faults.py (import as ``from faults import ...``), one implementation for CPU virtual
devices (in the test process) and CUDA GPUs (a CUDA trap breaks its GPU for the rest of the
process, so those run in a process of their own: :func:`run_in_subprocess`).

A scenario (:func:`scenario`) builds one app's solver (BFS, PageRank, CC) or an engine running
an operator loop (the operator calls, the fused launches, the async engine) on a context of
``k`` devices, runs it three times (the answer; a second run, CC's phases captured then; a
normal run's time), makes one device
(:data:`FAULTY`) fail at a point in the middle of the next run, and records what the run
raised and how long that took; then what the context does next: a ``"raise"`` fault (a device
function raises) leaves it usable, so the next run's answer and time are recorded; a
``"trap"`` (a CUDA kernel executes ``__trap()``) breaks the GPU's CUDA context, so the next
run's refusal is recorded, the context is closed, and the same run on a new context of the
other devices is timed against the same run on them before the fault (a GPU left spinning by
the failed run would slow it). The tests assert on the record.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: the device (position in the context) that fails
FAULTY = 1
#: the apps, and the operator loops: the operator calls ("loop"), one fused launch per device
#: ("fused_loop", CUDA), the async engine's worklists ("async_loop", order-free)
APPS = ("bfs", "pagerank", "cc", "loop", "fused_loop", "async_loop")
#: seconds the persistent kernels' devices wait at a cross-device meeting in these runs
BARRIER_TIMEOUT_S = 1.0
#: the faulty device's CUDA kernel that traps
TRAP = r'extern "C" __global__ void groute_test_trap() { __trap(); }'


class InjectedFault(RuntimeError):
    """The exception a ``"raise"`` fault raises."""


def _graph():
    from groute.graph import load_graph
    return load_graph("kron:9", cache=False)


def _fault(kind: str, device):
    """What the faulty device does: raise, or launch a trapping kernel on the current stream."""
    if kind == "raise":
        raise InjectedFault(f"injected fault on {device.name}")
    import cupy
    cupy.RawKernel(TRAP, "groute_test_trap")((1,), (1,), ())


class Patch:
    """``owner.name`` replaced for the scenario: its ``at``-th call on the faulty device
    (``device_of(self, *args)``) calls ``instead(self, *args)``; every other call is the
    original. ``undo()`` puts it back."""

    def __init__(self, owner, name, device_of, instead, at=1):
        self.owner, self.name, self.real = owner, name, getattr(owner, name)
        self.calls = 0
        real = self.real

        def patched(this, *args, **kwargs):
            if device_of(this, *args).index == FAULTY:
                self.calls += 1
                if self.calls == at:
                    return instead(this, *args, **kwargs)
            return real(this, *args, **kwargs)
        setattr(owner, name, patched)

    def undo(self):
        setattr(self.owner, self.name, self.real)


def _loop_functor():
    """A BFS-like claim of the level's vertices: a vertex marked in state ``fault`` is where
    the faulty device fails (CUDA: traps; NumPy: raises)."""
    from groute.operators import Functor

    def claim(s, v):
        if s["fault"][v].any():
            raise InjectedFault(f"injected fault at local vertex {int(v[s['fault'][v] != 0][0])}")
        v = np.unique(v[s["depth"][v] < 0])
        s["depth"][v] = s["d"] + 1
        return v
    return Functor(name="claim_or_fail", params="int* depth, const int* fault, int d",
                   cuda="if (fault[v]) __trap();\n"
                        "return atomicCAS(&depth[v], -1, d + 1) == -1;",
                   numpy=claim)


def _order_free_functor():
    from groute.operators import Functor

    def claim(s, v):
        if s["fault"][v].any():
            raise InjectedFault("injected fault in an order-free loop")
        v = np.unique(v[s["reached"][v] == 0])
        s["reached"][v] = 1
        return v
    return Functor(name="reach_or_fail", params="int* reached, const int* fault",
                   cuda="if (fault[v]) __trap();\n"
                        "return atomicCAS(&reached[v], 0, 1) == 0;", numpy=claim)


class _Runner:
    """One app on a context: ``run()`` returns ``(answer, seconds)``; ``fault(kind)`` sets the
    fault up for the next run and returns its undo."""

    def __init__(self, app, ctx, graph):
        self.app, self.ctx, self.graph = app, ctx, graph
        self.cuda = ctx.backend == "cuda"
        self.source = int(np.argmax(graph.degrees()))
        if app == "bfs":
            from groute.apps.bfs import BFS
            options = dict(mode="bsp", exchange="peer") if self.cuda else dict(mode="async")
            self.solver = BFS(graph, ctx=ctx, partition="contiguous", **options)
        elif app == "pagerank":
            from groute.apps.pr import PageRank
            from groute.tuning import PageRankTuning
            options = dict(tuning=PageRankTuning(persistent=True)) if self.cuda and \
                ctx.num_devices > 1 else {}
            self.solver = PageRank(graph, ctx=ctx, mode="bsp", partition="contiguous",
                                   **options)
        elif app == "cc":
            from groute.apps.cc import CC
            self.solver = CC(graph, ctx=ctx)
        else:
            from groute.engines import make_engine
            kind = "async" if app == "async_loop" else "bsp"
            loop = {"loop": "python", "fused_loop": "fused", "async_loop": "async"}[app]
            self.solver = make_engine(graph, kind, ctx=ctx, partition="contiguous", loop=loop)
            self._mark = np.zeros(graph.num_vertices, np.int32)
            self.solver.state("fault", np.int32, 0)

    def close(self):
        self.solver.close()

    def run(self):
        if self.app in ("bfs", "pagerank", "cc"):
            res = self.solver.run(self.source) if self.app == "bfs" else self.solver.run()
            return np.asarray(res.values), res.time_s
        from groute.operators import AdvanceStep, run_loop
        eng = self.solver
        t0 = time.perf_counter()
        if self.app == "async_loop":
            eng.state("reached", np.int32, 0,
                      values=(np.arange(eng.num_vertices) == self.source).astype(np.int32))
            run_loop(eng.frontier([self.source]), [AdvanceStep(_order_free_functor())],
                     order="any")
            answer = eng.gather("reached")
        else:
            depth = np.full(eng.num_vertices, -1, np.int32)
            depth[self.source] = 0
            eng.state("depth", np.int32, values=depth)
            run_loop(eng.frontier([self.source]), [AdvanceStep(_loop_functor())], level="d")
            answer = eng.gather("depth")
        return answer, time.perf_counter() - t0

    def fault(self, kind):
        """Set the fault up; the undo."""
        if self.app in ("loop", "fused_loop", "async_loop") and (kind == "trap" or not self.cuda):
            return self._mark_vertex()
        if self.app == "bfs" and self.cuda:
            from groute.engines.relax.peer import PeerTraversal

            def launch(this, i, dev):
                _fault(kind, dev)           # instead of its kernel: the others wait for it
            return Patch(PeerTraversal, "_launch", lambda this, i, dev: this.devices[i],
                         launch).undo
        if self.app == "bfs":
            from groute.engines.relax.cpu_worker import CPUTraversalWorker
            return Patch(CPUTraversalWorker, "_advance", lambda this, *a: this.device,
                         lambda this, *a: _fault(kind, this.device)).undo
        if self.app == "pagerank" and self.cuda and self.ctx.num_devices > 1:
            from groute.engines.iterate.device import IterationDevice

            def launch(this, *args):         # instead of its persistent kernel
                this.stream.submit(_fault, kind, this.device)
            return Patch(IterationDevice, "persistent_launch", lambda this, *a: this.device,
                         launch).undo
        if self.app == "pagerank":
            from groute.engines.iterate.device import IterationDevice
            real = IterationDevice.bsp_step

            def step(this, t, base):
                this.stream.submit(_fault, kind, this.device)
                real(this, t, base)
            return Patch(IterationDevice, "bsp_step", lambda this, *a: this.device, step,
                         at=3).undo
        if self.app == "cc":
            # a phase of the faulty device's run (replayed after the first run: on CUDA one
            # graph launch, no host call per kernel left to fail)
            from groute.engines.components.device import DeviceCC
            real = DeviceCC.replay

            def phase(this, name, work):
                this.stream.submit(_fault, kind, this.device)
                real(this, name, work)
            return Patch(DeviceCC, "replay", lambda this, *a: this.device, phase).undo
        if self.app == "loop":              # CUDA, raise: the host's step on the device
            from groute.operators import cuda_ops
            real = cuda_ops.push

            def push(part, *args, **kwargs):
                if part.device.index == FAULTY:
                    push.calls += 1
                    if push.calls == 2:
                        _fault("raise", part.device)
                return real(part, *args, **kwargs)
            push.calls = 0
            cuda_ops.push = push
            return lambda: setattr(cuda_ops, "push", real)
        from groute.engines.fused import FusedLoops     # fused_loop, CUDA, raise: a launch
        return Patch(FusedLoops, "_launch", lambda this, *a: this.part.device,
                     lambda this, *a: _fault("raise", this.part.device)).undo

    def _mark_vertex(self):
        """Mark, in state ``fault``, a vertex the faulty device owns two or more levels from
        the source (so the loop is under way on every device when it reaches it)."""
        from groute.graph import reference
        eng, n = self.solver, self.graph.num_vertices
        depth = np.asarray(reference.bfs(self.graph, self.source))
        new = np.asarray(eng.partition.perm)
        owner = np.searchsorted(np.asarray(eng.partition.offsets), new, side="right") - 1
        candidates = np.flatnonzero((owner == FAULTY) & (depth >= 2))
        mark = np.zeros(n, np.int32)
        mark[candidates[0]] = 1
        eng.state("fault", np.int32, values=mark)
        return lambda: eng.state("fault", np.int32, 0)


def _chain(exc):
    """``[type name, message]`` of ``exc`` and its causes."""
    out = []
    while exc is not None and len(out) < 8:
        out.append([type(exc).__name__, str(exc)])
        exc = exc.__cause__ or exc.__context__
    return out


def scenario(app: str, backend: str, k: int, kind: str, *, timeout: float = 30.0) -> dict:
    """Run the scenario (module docstring) of ``app`` on ``k`` devices of ``backend`` with a
    ``kind`` fault (``"raise"``, or ``"trap"`` on CUDA); what was seen, as plain data."""
    import groute.engines.peer_barrier as peer_barrier
    before, peer_barrier.BARRIER_TIMEOUT_S = peer_barrier.BARRIER_TIMEOUT_S, BARRIER_TIMEOUT_S
    try:
        return _scenario(app, backend, k, kind, timeout)
    finally:
        peer_barrier.BARRIER_TIMEOUT_S = before


def _scenario(app, backend, k, kind, timeout) -> dict:
    from groute import Context
    graph = _graph()
    survivors = [i for i in range(k) if i != FAULTY]
    out = {"app": app, "backend": backend, "k": k, "kind": kind, "timeout": timeout}
    if kind == "again":
        return _again(app, backend, k, timeout, graph)
    ctx = Context(k, backend=backend, timeout=timeout)
    runner = _Runner(app, ctx, graph)
    try:
        want, _ = runner.run()
        runner.run()                # a replayed phase is captured here (CC: DeviceCC.replay)
        _, out["normal_s"] = runner.run()
        undo = runner.fault(kind)
        t0 = time.perf_counter()
        try:
            runner.run()
            out["error"] = None
        except BaseException as exc:  # noqa: BLE001 - the record says what it was
            out["error"] = {"type": type(exc).__name__, "device": getattr(exc, "device", None),
                            "message": str(exc), "chain": _chain(exc)}
        out["error_after_s"] = time.perf_counter() - t0
        if kind == "raise":
            undo()          # after a trap the Context refuses everything, the undo too
            got, out["next_s"] = runner.run()
            out["next_right"] = bool(_same(app, got, want))
        else:
            t0 = time.perf_counter()
            try:
                runner.run()
                out["next_refused"] = None
            except BaseException as exc:  # noqa: BLE001
                out["next_refused"] = {"type": type(exc).__name__, "message": str(exc)}
            out["refused_after_s"] = time.perf_counter() - t0
    finally:
        out["close_error"] = None
        t0 = time.perf_counter()
        try:
            runner.close()
            ctx.close()
        except BaseException as exc:  # noqa: BLE001 - the record says what it was
            out["close_error"] = f"{type(exc).__name__}: {exc}"
            ctx.close()
        out["close_s"] = time.perf_counter() - t0
    if kind == "trap":
        # a trap leaves this process's CUDA runtime in a sticky error, on the peers of the
        # faulty GPU too: a new Context here says so (the GPUs themselves are checked in a new
        # process, :func:`_again`)
        out["new_context_error"] = None
        try:
            Context(survivors, backend=backend, timeout=timeout).close()
        except BaseException as exc:  # noqa: BLE001 - the record says what it was
            out["new_context_error"] = {"type": type(exc).__name__, "message": str(exc)}
    return out


def _again(app, backend, k, timeout, graph) -> dict:
    """In a new process after a trap: the same run on all ``k`` devices, the faulty one
    included, right (against the CPU backend's answer) and in normal time (its second run):
    no GPU was left spinning or broken."""
    from groute import Context
    with Context(k, backend=backend, timeout=timeout) as ctx:
        runner = _Runner(app, ctx, graph)
        runner.run()
        got, seconds = runner.run()
        runner.close()
    with Context(k, backend="cpu", timeout=timeout) as cpu:
        # the reference: the same operator calls; the fused loop is CUDA's, CPU devices loop
        runner = _Runner("loop" if app == "fused_loop" else app, cpu, graph)
        want, _ = runner.run()
        runner.close()
    return {"app": app, "k": k, "kind": "again", "right": bool(_same(app, got, want)),
            "s": seconds}


def _same(app, got, want) -> bool:
    """The same answer: PageRank's within float error (a sum's order differs with the device
    count), CC's the same partition (its labels may be other members), the others equal."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if app == "pagerank":
        return np.allclose(got, want, rtol=1e-4, atol=1e-7)
    if app == "cc":
        pairs = len(set(zip(got.tolist(), want.tolist())))
        return pairs == len(set(got.tolist())) == len(set(want.tolist()))
    return np.array_equal(got, want)


def run_in_subprocess(app: str, k: int, kind: str, *, timeout_s: float = 300) -> dict:
    """:func:`scenario` on CUDA in a process of its own (a trap breaks its GPU for the rest of
    the process); its record."""
    here = Path(__file__).resolve().parent
    script = (f"import json, sys\nsys.path[:0] = [{str(here.parent)!r}, {str(here)!r}]\n"
              f"import faults\nprint(json.dumps(faults.scenario({app!r}, 'cuda', {k}, "
              f"{kind!r})))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=timeout_s, cwd=str(here.parent), env=dict(os.environ))
    if r.returncode != 0:
        raise AssertionError(f"the scenario's process failed ({r.returncode}):\n"
                             f"{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])
