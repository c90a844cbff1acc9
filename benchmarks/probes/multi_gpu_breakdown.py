#!/usr/bin/env python
"""Probe: where the time of BFS, SSSP, PageRank and CC goes on 1, 2 and 4 GPUs (issue 37, item 1).

Per case (graph, app, mode, device count), on one reused Context per device count:

* ``time_s``: the app's own time (``AppResult.time_s``, :class:`groute.solver.DeviceTimer`:
  CUDA events on one GPU, a synchronised host clock on several), median of ``--repeat`` runs
  after a warm-up, and the host wall time of ``solver.run()`` in the same runs; the first run
  (kernels compile there) and the set-up are reported apart;
* an *instrumented* run (``--instrumented`` of them, the median one kept): every engine method
  that matters is timed on the host from the outside (wrappers installed for that run only,
  :data:`HOST_SPANS`), every piece of work a device stream is given is bracketed by two CUDA
  events (CPU backend: stamped on the stream's thread), so per device: its busy time, its span
  from first to last work, its idle time (the run's span minus the device's busy time) and how
  late it starts; per run: the phases of ``solver.run()`` (before the timer: staging; the
  timer's synchronisations; the timed region; after it: read-backs, download, renumbering),
  the host CPU time of every thread (the device threads share the GIL), the host waits on
  events, read-backs (``to_host``), stream submits, copies and their bytes (the NVLink wake
  copies among them), cross-device event waits, persistent launches and the cross-device
  barriers each device crossed (:class:`groute.engines.peer_barrier.CrossDeviceBarrier`);
* a *traced* run where the engine offers one: the peer kernels' per-level phases
  (``TraversalTuning.trace`` -> ``stats["level_trace_us"]``), PageRank's persistent iterations
  (``PageRankTuning.trace`` -> ``stats["iteration_trace"]``);
* the engine's own counters (bytes moved, levels, rounds, iterations, items);
* BFS only: the *fixed cost* of a run, BFS from the same source with ``cutoff=0`` (it
  expands nothing: launches, resets, one level's meetings, read-backs, the timer);
* agreement of the answer with the first device count's (a broken run must not be timed).

With ``--kineto`` a last pass, in a subprocess (a profiler failure cannot cost the rest), runs
each case of the first graph at the largest device count once under PyTorch's profiler (CUPTI):
every kernel, copy and fill on every device, which counts the launches exactly. Its results go
to their own file.

One JSON line per case on stdout, a table at the end; with ``$OUT`` set (or ``--out DIR``) also
``breakdown.jsonl``, ``breakdown.md`` and ``kineto.jsonl`` there. A case that fails is recorded
with its error and the run goes on; past ``--budget-s`` the remaining cases are recorded as
skipped. docs/notes/multi_gpu_costs.md says what each field shows and what to expect. Run from
the repository root::

    python benchmarks/probes/multi_gpu_breakdown.py --dry-run          # CPU virtual devices
    python benchmarks/probes/multi_gpu_breakdown.py --graphs kron:21,grid:4900 --devices 1,4,2 \\
        --partition contiguous --kineto --budget-s 320 --kineto-s 60
    python benchmarks/probes/multi_gpu_breakdown.py --graphs kron:25 --devices 1,4 \\
        --apps bfs,pr,cc --modes bsp --trace none
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: (app, mode) in the order they run on each graph and device count; None: the app has no mode
CASES = (("bfs", "bsp"), ("bfs", "async"), ("sssp", "bsp"), ("sssp", "async"),
         ("pr", "bsp"), ("pr", "async"), ("cc", None))
#: what --dry-run measures: tiny generated graphs on CPU virtual devices
DRY_GRAPHS = "kron:9,grid:24"
#: events (CUDA) or stamps (CPU) kept per instrumented run; past it work is only counted
MAX_INTERVALS = 20000
#: a case whose runs take longer than this (seconds) gets one instrumented run
SLOW_RUN_S = 0.25

now = time.perf_counter


# ------------------------------------------------------------------------------------------------
# output
# ------------------------------------------------------------------------------------------------
class Output:
    """JSON lines on stdout and, with a folder, appended to ``<folder>/<name>``."""

    def __init__(self, folder: Path | None, name: str):
        self.path = None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / name
            self.path.write_text("")

    def line(self, **record):
        text = json.dumps(_jsonable(record), default=str)
        print(text, flush=True)
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(text + "\n")


def _jsonable(value):
    from groute.bench.report import jsonable
    return jsonable(value, max_list=64)


def _ms(seconds):
    return None if seconds is None else round(1e3 * float(seconds), 4)


# ------------------------------------------------------------------------------------------------
# instrumentation: wrappers installed for one run
# ------------------------------------------------------------------------------------------------
#: host spans: (module, Class.method or function, how the device index is named: None, an
#: argument position after self, or "self.device"). The probe notes any that no longer exist.
HOST_SPANS = (
    ("groute.engines.relax.solver", "RelaxSolver.check_sources", None),
    ("groute.engines.relax.solver", "RelaxSolver._answer", None),
    ("groute.engines.relax.solver", "land_answer", None),
    ("groute.runtime.renumber", "DeviceRenumbering.gather", None),
    ("groute.engines.relax.solver", "RelaxSolver._raw_on_host", None),
    ("groute.engines.relax.solver", "RelaxSolver._kept_answer", None),
    ("groute.engines.relax.solver", "RelaxSolver._stats", None),
    ("groute.engines.relax.solver", "_Partitioned.to_original", None),
    ("groute.engines.relax.solver", "_Partitioned.to_new_ids", None),
    ("groute.engines.relax.peer", "PeerTraversal.prepare", None),
    ("groute.engines.relax.peer", "PeerTraversal.run", None),
    ("groute.engines.relax.peer", "PeerTraversal._stage", 1),
    ("groute.engines.relax.peer", "PeerTraversal._launch", 0),
    ("groute.engines.relax.linked", "LinkedTraversal.prepare", None),
    ("groute.engines.relax.linked", "LinkedTraversal.run", None),
    ("groute.engines.relax.linked", "LinkedTraversal._reset", 0),
    ("groute.engines.relax.linked", "LinkedTraversal._launch", 0),
    ("groute.engines.relax.cuda_worker", "CUDATraversalWorker.set_source", "self.device"),
    ("groute.engines.relax.cuda_worker", "CUDATraversalWorker.reset_state", "self.device"),
    ("groute.engines.relax.cuda_worker", "CUDATraversalWorker.advance", "self.device"),
    ("groute.engines.relax.cuda_worker", "CUDATraversalWorker.absorb", "self.device"),
    ("groute.engines.relax.cuda_worker", "CUDATraversalWorker.collect_counters", "self.device"),
    ("groute.engines.relax.cpu_worker", "CPUTraversalWorker.advance", "self.device"),
    ("groute.engines.relax.cpu_worker", "CPUTraversalWorker.absorb", "self.device"),
    ("groute.engines.peer_barrier", "CrossDeviceBarrier.launch_each", None),
    ("groute.engines.peer_barrier", "CrossDeviceBarrier.wake_links", None),
    ("groute.engines.peer_barrier", "CrossDeviceBarrier.finish", None),
    ("groute.engines.peer_barrier", "CrossDeviceBarrier.reset", None),
    ("groute.worklist.distributed", "DistributedWorklist.run", None),
    ("groute.worklist.distributed", "DistributedWorklist._absorb_inbox", 1),
    ("groute.worklist.distributed", "DistributedWorklist._send", 1),
    ("groute.worklist.distributed", "DistributedWorklist._wait_sends", None),
    ("groute.worklist.counter", "WorkCounter.wait_idle", 0),
    ("groute.worklist.counter", "WorkCounter.barrier", None),
    ("groute.engines.iterate.solver", "IterateSolver._run_bsp", None),
    ("groute.engines.iterate.solver", "IterateSolver._run_persistent", None),
    ("groute.engines.iterate.solver", "IterateSolver._run_async", None),
    ("groute.engines.iterate.solver", "IterateSolver._check_stats", None),
    ("groute.engines.iterate.solver", "IterateSolver._bsp_iteration", None),
    ("groute.engines.iterate.solver", "IterateSolver._trace_summary", None),
    ("groute.engines.iterate.solver", "IterateSolver._normalized_parts", None),
    ("groute.engines.iterate.solver", "land_answer", None),
    ("groute.runtime.renumber", "WholeAnswerRenumbering.apply", None),
    ("groute.engines.iterate.device", "IterationDevice.bsp_reset", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.bsp_step", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.bsp_stats", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.bsp_answer", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.persistent_launch", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.persistent_fetch", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.persistent_result", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.push_reset", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.push_sweeps", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.pack", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.apply", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.active", "self.device"),
    ("groute.engines.iterate.device", "IterationDevice.push_answer", "self.device"),
    ("groute.engines.components.solver", "ComponentsSolver._run_in_place", None),
    ("groute.engines.components.solver", "ComponentsSolver._run_segments", None),
    ("groute.engines.components.solver", "ComponentsSolver._answer", None),
    ("groute.engines.components.solver", "land_answer", None),
    ("groute.engines.components.solver", "ComponentsSolver._remaining", None),
    # a phase of a run (sampling, description, merge and rest), replayed after the first run:
    # the methods below are called at the first run, and again at every run only where the
    # phase is not replayed (CCTuning.replay=False, or CUDA refused its capture)
    ("groute.engines.components.device", "DeviceCC.replay", "self.device"),
    ("groute.engines.components.device", "DeviceCC.reset", "self.device"),
    ("groute.engines.components.device", "DeviceCC.link_round", "self.device"),
    ("groute.engines.components.device", "DeviceCC.compress", "self.device"),
    ("groute.engines.components.device", "DeviceCC.describe_changes", "self.device"),
    ("groute.engines.components.device", "DeviceCC.merge_changes", "self.device"),
    ("groute.engines.components.device", "DeviceCC.merge", "self.device"),
    ("groute.engines.components.device", "DeviceCC.hook", "self.device"),
    ("groute.engines.components.device", "DeviceCC.sample_mode", "self.device"),
    ("groute.engines.components.device", "DeviceCC.link_rest", "self.device"),
    ("groute.runtime.link", "Link.send", None),
)


def _resolve(module_name: str, qualname: str):
    """``(owner, attribute, the original)`` of ``module:qualname``, the owner being the class
    that defines the method (an inherited one is patched where it is defined); None when it
    is gone."""
    import importlib
    import inspect
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        return None
    parts = qualname.split(".")
    for p in parts[:-1]:
        owner = getattr(owner, p, None)
        if owner is None:
            return None
    attr = parts[-1]
    if isinstance(owner, type):
        owner = next((c for c in owner.__mro__ if attr in c.__dict__), None)
        if owner is None:
            return None
        original = owner.__dict__[attr]
    else:
        original = getattr(owner, attr, None)
    if not inspect.isfunction(original):
        return None
    return owner, attr, original


class Recorder:
    """What one instrumented run saw (the wrappers write here while it is :data:`ACTIVE`)."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.lock = threading.Lock()
        self.local = threading.local()
        self.spans = []         # (label, thread, depth, t0, t1)
        self.intervals = []     # (device, stream, label, start, end): events (CUDA) or seconds
        self.dropped = 0        # device work beyond MAX_INTERVALS (counted, not timed)
        self.counts = {}        # name -> count
        self.bytes = {}         # name -> bytes
        self.crossed = []       # per settle: the cross-device barriers each device crossed
        self.refs = {}          # device index -> (reference event, host time) (CUDA)

    def count(self, name, n=1, nbytes=0):
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n
            if nbytes:
                self.bytes[name] = self.bytes.get(name, 0) + int(nbytes)

    def stack(self):
        st = getattr(self.local, "stack", None)
        if st is None:
            st = self.local.stack = []
        return st

    def span(self, label, t0, t1, depth):
        with self.lock:
            self.spans.append((label, threading.current_thread().name, depth, t0, t1))

    def interval(self, device, stream, label, start, end):
        with self.lock:
            if len(self.intervals) >= MAX_INTERVALS:
                self.dropped += 1
                return
            self.intervals.append((device, stream, label, start, end))

    def innermost(self):
        st = self.stack()
        return st[-1] if st else "run"


#: the recorder of the run being instrumented (None: the wrappers only call through)
ACTIVE: Recorder | None = None


def _device_suffix(how, args):
    try:
        if how == "self.device":
            return f"[{args[0].device.index}]"
        if isinstance(how, int):
            return f"[{int(args[1 + how])}]"
    except Exception:  # noqa: BLE001 - a label only
        pass
    return ""


def _span_wrapper(original, label, how, is_method):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        rec = ACTIVE
        if rec is None:
            return original(*args, **kwargs)
        name = label + (_device_suffix(how, args) if is_method else "")
        st = rec.stack()
        st.append(name)
        t0 = now()
        try:
            return original(*args, **kwargs)
        finally:
            t1 = now()
            st.pop()
            rec.span(name, t0, t1, len(st))
    return wrapper


def _cuda_event(stream):
    import cupy
    with stream.device.use():
        ev = cupy.cuda.Event()
        ev.record(stream.raw)
    return ev


def _stream_wrappers(stream_cls, cuda: bool):
    """Replacements for a stream class's submit, copy and wait_event."""
    submit, copy, wait_event = stream_cls.submit, stream_cls.copy, stream_cls.wait_event

    def label_of(fn):
        return (getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
                or type(fn).__name__)

    @functools.wraps(submit)
    def new_submit(self, fn, *args, **kwargs):
        rec = ACTIVE
        if rec is None:
            return submit(self, fn, *args, **kwargs)
        dev, name = self.device.index, f"{rec.innermost()}/{label_of(fn)}"
        rec.count(f"submits[{dev}]")
        if cuda:
            t0 = now()
            ev0 = _cuda_event(self)
            try:
                return submit(self, fn, *args, **kwargs)
            finally:
                ev1 = _cuda_event(self)
                rec.interval(dev, self.name, name, ev0, ev1)
                rec.span(f"submit[{dev}]", t0, now(), len(rec.stack()))

        def stamped(*a, **k):       # runs on the CPU stream's thread: its own start and end
            s = now()
            try:
                return fn(*a, **k)
            finally:
                rec.interval(dev, self.name, name, s, now())
        return submit(self, stamped, *args, **kwargs)

    @functools.wraps(copy)
    def new_copy(self, dst, src):
        rec = ACTIVE
        if rec is None:
            return copy(self, dst, src)
        dev = self.device.index
        rec.count(f"copies[{dev}]", nbytes=getattr(src, "nbytes", 0))
        rec.count(f"copies:{rec.innermost()}", nbytes=getattr(src, "nbytes", 0))
        if not cuda:
            return copy(self, dst, src)     # its work is a submit: timed there
        ev0 = _cuda_event(self)
        try:
            return copy(self, dst, src)
        finally:
            rec.interval(dev, self.name, f"{rec.innermost()}/copy", ev0, _cuda_event(self))

    @functools.wraps(wait_event)
    def new_wait_event(self, event):
        rec = ACTIVE
        if rec is not None:
            device = getattr(event, "device", None)         # CUDA events name their device
            if device is None:                                # CPU events their stream
                device = getattr(getattr(event, "stream", None), "device", None)
            other = getattr(device, "index", None)
            kind = "local" if other == self.device.index else "cross"
            rec.count(f"event_waits_{kind}[{self.device.index}]")
        return wait_event(self, event)

    return {"submit": new_submit, "copy": new_copy, "wait_event": new_wait_event}


class Hooks:
    """Installs the wrappers (class and module attributes) and restores them; ``missing``
    names the targets that no longer exist."""

    def __init__(self, backend: str):
        self.backend = backend
        self.saved = []
        self.missing = []

    def _set(self, owner, attr, value):
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        self.saved.append((owner, attr, original))
        setattr(owner, attr, value)

    def install(self):
        done = set()
        for module, qualname, how in HOST_SPANS:
            found = _resolve(module, qualname)
            if found is None:
                self.missing.append(f"{module}:{qualname}")
                continue
            owner, attr, original = found
            if (owner, attr) in done:       # an inherited method named twice: wrapped once
                continue
            done.add((owner, attr))
            label = f"{owner.__name__}.{attr}" if isinstance(owner, type) else attr
            self._set(owner, attr, _span_wrapper(original, label, how, isinstance(owner, type)))
        self._install_devices()
        self._install_barrier()
        self._replace_everywhere("groute.solver", "DeviceTimer", _stamped_timer)
        self._replace_everywhere("groute.engines.peer_barrier", "launch_resident", _counted_launch)
        return self

    def _install_devices(self):
        if self.backend == "cuda":
            from groute.device.cuda import CUDADevice as dev_cls, CUDAEvent as ev_cls, \
                CUDAStream as stream_cls
        else:
            from groute.device.cpu import CPUDevice as dev_cls, CPUEvent as ev_cls, \
                CPUStream as stream_cls
        for name, fn in _stream_wrappers(stream_cls, self.backend == "cuda").items():
            self._set(stream_cls, name, fn)
        sync, to_host = ev_cls.synchronize, dev_cls.to_host

        @functools.wraps(sync)
        def new_sync(ev, timeout=None, *, spin=0.0):
            rec = ACTIVE
            if rec is None:
                return sync(ev, timeout, spin=spin)
            t0 = now()
            try:
                return sync(ev, timeout, spin=spin)
            finally:
                rec.count(f"host_waits:{threading.current_thread().name}")
                rec.span("host_wait", t0, now(), len(rec.stack()))

        @functools.wraps(to_host)
        def new_to_host(dev, array):
            rec = ACTIVE
            if rec is None:
                return to_host(dev, array)
            t0 = now()
            try:
                return to_host(dev, array)
            finally:
                rec.count(f"to_host[{dev.index}]", nbytes=getattr(array, "nbytes", 0))
                rec.span(f"to_host[{dev.index}]", t0, now(), len(rec.stack()))
        self._set(ev_cls, "synchronize", new_sync)
        self._set(dev_cls, "to_host", new_to_host)

    def _install_barrier(self):
        found = _resolve("groute.engines.peer_barrier", "CrossDeviceBarrier.settle")
        if found is None:
            self.missing.append("groute.engines.peer_barrier:CrossDeviceBarrier.settle")
            return
        owner, attr, settle = found

        @functools.wraps(settle)
        def new_settle(barrier, crossed, ok=True):
            rec = ACTIVE
            if rec is not None:
                crossed = [int(c) for c in crossed]
                with rec.lock:
                    rec.crossed.append(crossed)
            return settle(barrier, crossed, ok)
        self._set(owner, attr, new_settle)

    def _replace_everywhere(self, module_name, attr, make):
        """Replace ``module.attr`` and every groute module's name for the same object."""
        import importlib
        try:
            original = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            self.missing.append(f"{module_name}:{attr}")
            return
        replacement = make(original)
        for name, mod in list(sys.modules.items()):
            if (name == "groute" or name.startswith("groute.")) and mod is not None \
                    and getattr(mod, attr, None) is original:
                self._set(mod, attr, replacement)

    def restore(self):
        for owner, attr, original in reversed(self.saved):
            setattr(owner, attr, original)
        self.saved.clear()


def _stamped_timer(timer_cls):
    """DeviceTimer with its synchronisations and its timed region stamped."""
    class StampedTimer(timer_cls):
        def __enter__(self):
            rec, t0 = ACTIVE, now()
            out = super().__enter__()
            if rec is not None:
                self._probe_t1 = now()
                rec.span("DeviceTimer.enter", t0, self._probe_t1, len(rec.stack()))
            return out

        def __exit__(self, *exc):
            rec, t0 = ACTIVE, now()
            out = super().__exit__(*exc)
            if rec is not None:
                rec.span("DeviceTimer.exit", t0, now(), len(rec.stack()))
                if hasattr(self, "_probe_t1"):
                    rec.span("DeviceTimer.region", self._probe_t1, t0, len(rec.stack()))
            return out
    StampedTimer.__name__ = timer_cls.__name__
    return StampedTimer


def _counted_launch(launch):
    @functools.wraps(launch)
    def counted(fn, blocks, block, args, *, device, kernel, **kwargs):
        rec = ACTIVE
        if rec is not None:
            rec.count(f"persistent_launches[{device.index}]")
            rec.count(f"persistent:{kernel}")
        return launch(fn, blocks, block, args, device=device, kernel=kernel, **kwargs)
    return counted


class WakeCounter:
    """During the timed runs: how many launches of the persistent kernels first woke the links
    (``CrossDeviceBarrier.wake_links`` queued its copies) out of how many asked."""

    def __enter__(self):
        self.calls = self.woke = 0
        self.found = _resolve("groute.engines.peer_barrier", "CrossDeviceBarrier.wake_links")
        if self.found is not None:
            owner, attr, original = self.found

            @functools.wraps(original)
            def counted(barrier):
                original(barrier)
                self.calls += 1
                self.woke += bool(getattr(barrier, "_woken", None))
            setattr(owner, attr, counted)
        return self

    def __exit__(self, *exc):
        if self.found is not None:
            owner, attr, original = self.found
            setattr(owner, attr, original)
        return False


def thread_cpu() -> dict:
    """CPU seconds each live thread of this process has used (nanosecond clocks), by
    ``(thread id, name)``."""
    out = {}
    for t in threading.enumerate():
        try:
            out[(t.ident, t.name)] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (AttributeError, OSError, TypeError, OverflowError):
            continue
    return out


def cpu_used(before: dict, after: dict) -> dict:
    """CPU seconds used between two :func:`thread_cpu` snapshots, summed over the threads of
    each name (threads that ended in between are not counted)."""
    out = {}
    for key, t in after.items():
        if key in before:
            out[key[1]] = out.get(key[1], 0.0) + t - before[key]
    return out


def instrumented_run(solver, ctx, args, options, backend):
    """One ``solver.run`` with the hooks installed; its record (see :func:`analyse`)."""
    global ACTIVE
    ctx.synchronize()
    rec = Recorder(cuda=backend == "cuda")
    hooks = Hooks(backend)
    try:
        hooks.install()
        cpu0 = thread_cpu()
        if rec.cuda:
            for dev in ctx.devices:
                rec.refs[dev.index] = (_cuda_event(dev.compute_stream), now())
        ACTIVE = rec
        t0 = now()
        result = solver.run(*args, **options)
        t1 = now()
    finally:
        ACTIVE = None
        hooks.restore()
    ctx.synchronize()
    cpu = cpu_used(cpu0, thread_cpu())
    return analyse(rec, t0, t1, cpu, result, hooks.missing)


def _host_times(rec: Recorder):
    """Each interval as (device, stream, label, start, end) in host seconds."""
    if not rec.cuda:
        return list(rec.intervals)
    import cupy
    out = []
    for dev, stream, label, e0, e1 in rec.intervals:
        ref, t_ref = rec.refs[dev]
        e1.synchronize()
        out.append((dev, stream, label, t_ref + cupy.cuda.get_elapsed_time(ref, e0) / 1e3,
                    t_ref + cupy.cuda.get_elapsed_time(ref, e1) / 1e3))
    return out


def _union(intervals):
    """Total length of the union of (start, end) pairs."""
    total, end = 0.0, -float("inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def analyse(rec: Recorder, t0, t1, cpu, result, missing) -> dict:
    wall = t1 - t0
    spans = {}
    for label, thread, depth, a, b in rec.spans:
        s = spans.setdefault(label, [0.0, 0])
        s[0] += b - a
        s[1] += 1
    def first(name):
        return next(((a, b) for lab, _, _, a, b in rec.spans if lab == name), None)
    enter, region, leave = (first("DeviceTimer.enter"), first("DeviceTimer.region"),
                            first("DeviceTimer.exit"))
    phases = None
    if enter and leave:
        phases = {"before_timer": _ms(enter[0] - t0), "timer_enter_sync": _ms(enter[1] - enter[0]),
                  "timed_region": _ms(region[1] - region[0]) if region else None,
                  "timer_exit_sync": _ms(leave[1] - leave[0]), "after_timer": _ms(t1 - leave[1])}
    intervals = _host_times(rec)
    kernels = ((min(x for *_, x, _ in intervals), max(y for *_, y in intervals))
               if intervals else None)
    devices = []
    for dev in sorted({d for d, *_ in intervals} | set(rec.refs)):
        mine = [(a, b) for d, _, _, a, b in intervals if d == dev]
        by_label = {}
        for d, _, label, a, b in intervals:
            if d == dev:
                by_label[label] = by_label.get(label, 0.0) + (b - a)
        busy = _union(mine)
        span = (min(a for a, _ in mine), max(b for _, b in mine)) if mine else None
        devices.append({
            "device": dev, "busy_ms": _ms(busy),
            "span_ms": _ms(span[1] - span[0]) if span else None,
            "gaps_in_span_ms": _ms(span[1] - span[0] - busy) if span else None,
            "idle_in_run_ms": _ms(max(wall - busy, 0.0)),
            "idle_in_kernels_span_ms": _ms(kernels[1] - kernels[0] - busy) if kernels else None,
            "starts_after_run_start_ms": _ms(span[0] - t0) if span else None,
            "ends_before_run_end_ms": _ms(t1 - span[1]) if span else None,
            "work_items": len(mine),
            "submits": rec.counts.get(f"submits[{dev}]", 0),
            "copies": rec.counts.get(f"copies[{dev}]", 0),
            "copy_bytes": rec.bytes.get(f"copies[{dev}]", 0),
            "event_waits_cross": rec.counts.get(f"event_waits_cross[{dev}]", 0),
            "event_waits_local": rec.counts.get(f"event_waits_local[{dev}]", 0),
            "to_host": rec.counts.get(f"to_host[{dev}]", 0),
            "to_host_bytes": rec.bytes.get(f"to_host[{dev}]", 0),
            "persistent_launches": rec.counts.get(f"persistent_launches[{dev}]", 0),
            "top_work_ms": {k: _ms(v) for k, v in
                            sorted(by_label.items(), key=lambda kv: -kv[1])[:6]},
        })
    host_waits = {k.split(":", 1)[1]: v for k, v in rec.counts.items()
                  if k.startswith("host_waits:")}
    copies_by_phase = {k.split(":", 1)[1]: [v, rec.bytes.get(k, 0)] for k, v in rec.counts.items()
                       if k.startswith("copies:")}
    return {
        "run_wall_ms": _ms(wall), "phases_ms": phases,
        "kernels_span_ms": _ms(kernels[1] - kernels[0]) if kernels else None,
        "spans_ms": {k: [_ms(v[0]), v[1]]
                     for k, v in sorted(spans.items(), key=lambda kv: -kv[1][0])},
        "thread_cpu_ms": {k: _ms(v) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])
                          if v > 0},
        "devices": devices,
        "cross_device_barriers": rec.crossed,
        "host_waits": host_waits,
        "copies_by_phase": copies_by_phase,
        "persistent_kernels": {k.split(":", 1)[1]: v for k, v in rec.counts.items()
                               if k.startswith("persistent:")},
        "intervals_dropped": rec.dropped,
        "hooks_missing": missing,
        "app_time_ms": _ms(getattr(result, "time_s", None)),
    }


# ------------------------------------------------------------------------------------------------
# traces and stats
# ------------------------------------------------------------------------------------------------
def level_trace_summary(trace):
    """The peer kernels' per-level [A, B, expansion, C] µs, per device: totals, the median level,
    the heaviest levels."""
    if not trace:
        return None
    out = []
    for dev, rows in enumerate(trace):
        if not rows:
            out.append({"device": dev, "levels_traced": 0})
            continue
        cols = list(zip(*rows))
        per = [sum(r) for r in rows]
        heavy = sorted(range(len(rows)), key=lambda i: -per[i])[:3]
        out.append({"device": dev, "levels_traced": len(rows),
                    "total_us": round(sum(per), 1), "A_us": round(sum(cols[0]), 1),
                    "B_us": round(sum(cols[1]), 1), "expand_us": round(sum(cols[2]), 1),
                    "C_wait_us": round(sum(cols[3]), 1),
                    "median_level_us": round(statistics.median(per), 2),
                    "median_A_us": round(statistics.median(cols[0]), 2),
                    "median_C_us": round(statistics.median(cols[3]), 2),
                    "heaviest": {i: rows[i] for i in heavy}})
    return out


#: the stats keys the summary keeps (whatever engine ran; absent ones are left out)
STATS = ("mode", "exchange", "routing", "priority", "persistent", "persistent_reason", "kernel",
         "layout", "partition", "bytes_moved", "bytes_sent", "bsp_levels", "levels", "rounds",
         "rounds_per_device", "launches", "pull_levels", "iterations", "items_sent",
         "items_received", "ring_full", "idle_rounds", "publishing_rounds", "threshold_advances",
         "vertices_pushed_per_device", "arcs_pushed_per_device", "sweeps_per_round",
         "edges_traversed", "merge_rounds", "rest", "routed", "rest_arcs", "rest_remote_arcs",
         "rows_per_device", "giant_size", "phase_seconds", "check_every", "device_check")


def pick_stats(stats):
    return {k: stats[k] for k in STATS if stats and stats.get(k) is not None}


def bytes_of(stats):
    from groute.bench.runner import bytes_moved
    return bytes_moved(stats or {})


# ------------------------------------------------------------------------------------------------
# cases
# ------------------------------------------------------------------------------------------------
class Graphs:
    """The graph of each app on one spec: loaded once; loopless, directed and weighted copies
    made once, as ``groute bench`` makes them."""

    def __init__(self, spec, backend):
        from groute.bench.suite import choose_source
        from groute.graph import load_graph
        t0 = now()
        g = load_graph(spec)
        self.graph = g.to_host() if hasattr(g, "to_host") else g
        self.load_s = now() - t0
        self.spec, self.backend = spec, backend
        self.source, self.source_rule = choose_source(self.graph, spec)
        self._made = {}

    def for_app(self, app):
        from groute.bench.suite import APPS, WEIGHT_SEED
        a = APPS[app]
        key = (a.self_loops, a.directed, a.weighted)
        if key not in self._made:
            g = self.graph
            if not a.self_loops:
                g = g.remove_self_loops()
            if a.directed:
                g = g.as_directed()
            if a.weighted and g.weights is None:
                if self.backend == "cuda":
                    import cupy
                    g = g.with_weights(seed=WEIGHT_SEED, xp=cupy)
                else:
                    g = g.with_weights(seed=WEIGHT_SEED)
            self._made[key] = g
        return self._made[key]


class Contexts:
    def __init__(self, backend, timeout):
        self.backend, self.timeout = backend, timeout
        self.open = {}

    def get(self, k):
        from groute import Context
        if k not in self.open:
            if self.backend == "cuda":
                from groute.device import cuda_device_count
                if k > cuda_device_count():
                    raise _Skip(f"{k} devices asked, this machine has {cuda_device_count()} GPUs")
            self.open[k] = Context(devices=k, backend=self.backend, timeout=self.timeout,
                                   logical=False)
        return self.open[k]

    def drop(self, k):
        ctx = self.open.pop(k, None)
        if ctx is not None:
            closer = threading.Thread(target=ctx.shutdown, daemon=True)
            closer.start()
            closer.join(ctx.timeout + 5)

    def close(self):
        for k in list(self.open):
            self.drop(k)


class _Skip(Exception):
    pass


def free_memory():
    gc.collect()
    try:
        from groute.bench.peers import free_gpu_memory
        free_gpu_memory()
    except Exception:  # noqa: BLE001 - only memory hygiene
        pass


def build(app, graphs: Graphs, ctx, mode, partition, tuning=None):
    """The solver of one case, and the arguments and options of its ``run``."""
    from groute.bench.specs import spec_for
    from groute.bench.suite import APPS
    a, spec = APPS[app], spec_for(app)
    g = graphs.for_app(app)
    kwargs = {"ctx": ctx, **spec.options_for(g)}
    if a.takes_partition:
        kwargs["partition"] = partition
    if mode is not None:
        kwargs["mode"] = mode
    if tuning is not None:
        kwargs["tuning"] = tuning
    solver = a.solver(g, **kwargs)
    args = (g.file_id_of(graphs.source),) if a.needs_source else ()
    return solver, args, dict(spec.run_options), g


def traced_tuning(app, mode):
    """The tuning that traces the engine's persistent kernel, or None where it has no trace."""
    if mode != "bsp":
        return None
    if app in ("bfs", "sssp"):
        from groute.tuning import TraversalTuning
        return dataclasses.replace(TraversalTuning.from_environment(), trace=True)
    if app == "pr":
        from groute.tuning import PageRankTuning
        return dataclasses.replace(PageRankTuning.from_environment(), trace=True)
    return None


def run_case(app, mode, k, graphs: Graphs, contexts: Contexts, a, references, deadline):
    """Measure one case; returns its record (errors recorded, not raised)."""
    from groute.bench.suite import APPS
    g = graphs.for_app(app)
    case = {"graph": graphs.spec, "app": app, "mode": mode, "devices": k,
            "partition": a.partition if APPS[app].takes_partition and k > 1 else None,
            "vertices": int(g.num_vertices), "arcs": int(g.num_edges), "status": "error"}
    t_case = now()
    solver = None
    try:
        ctx = contexts.get(k)
        t0 = now()
        solver, args, options, _ = build(app, graphs, ctx, mode, a.partition)
        case["setup_s"] = round(now() - t0, 3)
        t0 = now()
        first = solver.run(*args, **options)
        case["first_run_s"] = round(now() - t0, 4)     # kernels compile here on first use
        key = (graphs.spec, app)
        if key in references:
            from groute.bench.verify import verify
            ref_case, ref_values = references[key]
            verdict = verify(app, np.asarray(first.values), ref_values, g)
            case["agrees_with"] = ref_case
            case["agrees"] = bool(verdict.ok)
            if not verdict.ok:      # a wrong answer is never given a time
                case.update(status="FAIL", agree_detail=verdict.detail)
                return case
        else:
            references[key] = (f"{k} device{'s' if k > 1 else ''} {mode or ''}".strip(),
                               np.asarray(first.values).copy())
        for _ in range(a.warmup):
            solver.run(*args, **options)
        app_times, walls, last = [], [], first
        spent = 0.0
        with WakeCounter() as wakes:
            while len(app_times) < a.repeat and now() < deadline \
                    and (len(app_times) < a.min_repeat or spent < a.case_s):
                t0 = now()
                last = solver.run(*args, **options)
                walls.append(now() - t0)
                spent += walls[-1]
                app_times.append(float(last.time_s))
        case["link_wakes_in_timed_runs"] = {"woke": wakes.woke, "launches": wakes.calls}
        case["time_ms"] = _summary_ms(app_times)
        case["host_wall_ms"] = _summary_ms(walls)
        case["stats"] = pick_stats(last.stats)
        case["bytes_moved"] = bytes_of(last.stats)
        case["status"] = "ok"       # timed; what follows only adds to the record
        if app == "bfs" and now() < deadline:
            part(case, "fixed_cost", ctx, lambda: fixed_cost(solver, args, options, a))
        # a slow run (asynchronous PageRank on several GPUs: seconds) is instrumented once
        n_instr = a.instrumented if statistics.median(walls or [0.0]) < SLOW_RUN_S else 1
        if now() < deadline:
            part(case, "instrumented", ctx, lambda: pick_median(
                [instrumented_run(solver, ctx, args, options, a.backend) for _ in range(n_instr)]))
        solver.close()
        solver = None
        tuning = traced_tuning(app, mode) if a.trace != "none" else None
        if tuning is not None and now() < deadline:
            part(case, "trace", ctx, lambda: traced(app, mode, graphs, ctx, a, tuning))
    except _Skip as exc:
        case.update(status="skip", note=str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded, the next case runs
        case["error"] = f"{type(exc).__name__}: {exc}"
        case["traceback"] = traceback.format_exc()[-1500:]
        contexts.drop(k)    # a failed run may leave the context stopped or half busy
    finally:
        if solver is not None:
            try:
                solver.close()
            except Exception:  # noqa: BLE001
                pass
        free_memory()
        case["case_wall_s"] = round(now() - t_case, 2)
    return case


def part(case, name, ctx, measure):
    """``case[name] = measure()``; if it raises, ``case[name + "_error"]`` says how, the devices
    are waited for, and the case keeps what it has (its times above all)."""
    try:
        case[name] = measure()
    except Exception as exc:  # noqa: BLE001 - recorded; the timed part stands
        case[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        case[f"{name}_traceback"] = traceback.format_exc()[-1500:]
        try:
            ctx.synchronize()
        except Exception:  # noqa: BLE001 - the case's context is dropped below
            case["context_dropped"] = True
            raise


def pick_median(runs):
    """The instrumented run of median wall time, saying of how many."""
    runs = sorted(runs, key=lambda r: r["run_wall_ms"])
    chosen = runs[len(runs) // 2]
    chosen["of_runs"] = len(runs)
    return chosen


def fixed_cost(solver, args, options, a):
    """BFS from the same source with ``cutoff=0``: the run expands nothing, so its time is
    what a run costs whatever the graph (launches, resets, meetings of one level, read-backs,
    the timer's synchronisations), median of ``--repeat`` after a warm-up."""
    opts = dict(options, cutoff=0)
    solver.run(*args, **opts)
    times, walls = [], []
    for _ in range(a.repeat):
        t0 = now()
        r = solver.run(*args, **opts)
        walls.append(now() - t0)
        times.append(float(r.time_s))
    return {"time_ms": _summary_ms(times), "host_wall_ms": _summary_ms(walls)}


def traced(app, mode, graphs, ctx, a, tuning):
    """Two runs of a solver whose persistent kernel stamps its levels or iterations; the
    second one's trace."""
    solver, args, options, _ = build(app, graphs, ctx, mode, a.partition, tuning=tuning)
    try:
        solver.run(*args, **options)
        r = solver.run(*args, **options)
    finally:
        solver.close()
    st = r.stats or {}
    out = {"time_ms": _ms(r.time_s)}
    if st.get("level_trace_us"):
        out["levels"] = level_trace_summary(st["level_trace_us"])
    if st.get("iteration_trace"):
        out["iterations"] = st["iteration_trace"]
    return out


def _summary_ms(values):
    if not values:
        return None
    return {"median": _ms(statistics.median(values)), "min": _ms(min(values)),
            "max": _ms(max(values)), "n": len(values)}


# ------------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------------
def table(cases) -> str:
    """One row per case: the app's time, the host's, where the host's time went and what each
    device did."""
    head = ("| graph | app | mode | K | status | app ms | vs 1 | host ms | instr ms | before | "
            "timed | after "
            "| dev busy ms (min-max) | dev idle ms (max) | levels/iters | x-dev barriers | "
            "x-dev waits | host waits | submits/dev | bytes moved |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    one = {}
    for c in cases:
        if c.get("status") == "ok" and c["devices"] == 1:
            one[(c["graph"], c["app"], c["mode"])] = c["time_ms"]["median"]
    for c in cases:
        base = [c["graph"], c["app"], c.get("mode") or "-", str(c["devices"]), c.get("status", "?")]
        if c.get("status") != "ok":
            note = c.get("error") or c.get("note") or c.get("agree_detail") or ""
            rows.append("| " + " | ".join(base + [note[:80]] + [""] * 14) + " |")
            continue
        t = c["time_ms"]["median"] if c.get("time_ms") else None
        ref = one.get((c["graph"], c["app"], c["mode"]))
        vs = f"{ref / t:.2f}x" if ref and t else ""
        ins = c.get("instrumented") or {}
        ph = ins.get("phases_ms") or {}
        devs = ins.get("devices") or []
        busy = [d["busy_ms"] for d in devs if d.get("busy_ms") is not None]
        idle = [d["idle_in_run_ms"] for d in devs if d.get("idle_in_run_ms") is not None]
        st = c.get("stats") or {}
        levels = _levels(st)
        crossed = ins.get("cross_device_barriers") or []
        xb = "/".join(str(max(x)) for x in crossed) if crossed else ""
        xw = sum(d.get("event_waits_cross", 0) for d in devs)
        hw = sum((ins.get("host_waits") or {}).values())
        subs = "/".join(str(d.get("submits", 0)) for d in devs)
        rows.append("| " + " | ".join(base + [
            _f(t), vs, _f((c.get("host_wall_ms") or {}).get("median")),
            _f(ins.get("run_wall_ms")),
            _f(ph.get("before_timer")), _f(ph.get("timed_region")), _f(ph.get("after_timer")),
            f"{_f(min(busy))}-{_f(max(busy))}" if busy else "", _f(max(idle)) if idle else "",
            str(levels), xb, str(xw), str(hw), subs, _bytes(c.get("bytes_moved"))]) + " |")
    return "\n".join(rows)


def _levels(st):
    """Levels (BSP traversals: the most any device ran), iterations (PageRank BSP) or rounds."""
    if st.get("iterations"):
        return str(st["iterations"])
    lv = st.get("levels")
    if isinstance(lv, list) and lv and st.get("mode") == "bsp":
        return str(max(lv))
    rounds = st.get("rounds")
    if isinstance(rounds, list):
        rounds = max(rounds) if rounds else None
    return f"{rounds} rounds" if rounds else ""


def _f(x):
    if x is None:
        return ""
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _bytes(b):
    if not b:
        return "0" if b == 0 else ""
    for unit in ("B", "kB", "MB", "GB"):
        if b < 1000:
            return f"{b:.0f} {unit}"
        b /= 1000
    return f"{b:.1f} TB"


# ------------------------------------------------------------------------------------------------
# the profiler pass (subprocess)
# ------------------------------------------------------------------------------------------------
def kineto_case(app, mode, k, graphs, contexts, a):
    """One run of the case under PyTorch's profiler: per device, the kernels, copies and fills
    (count, device time, the heaviest kernels), and the host's launch calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device: the profiler cannot trace the GPUs")
    ctx = contexts.get(k)
    solver, args, options, _ = build(app, graphs, ctx, mode, a.partition)
    try:
        solver.run(*args, **options)
        solver.run(*args, **options)
        ctx.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            solver.run(*args, **options)
            ctx.synchronize()
    finally:
        solver.close()
        free_memory()
    per, host_calls = {}, {}
    for e in prof.events():
        name = e.name
        if e.device_type == torch.autograd.DeviceType.CUDA:
            d = per.setdefault(int(e.device_index), {"kernels": 0, "kernel_us": 0.0, "copies": 0,
                                                     "copy_us": 0.0, "fills": 0, "by_kernel": {},
                                                     "start": None, "end": None})
            t0, t1 = e.time_range.start, e.time_range.end
            d["start"] = t0 if d["start"] is None else min(d["start"], t0)
            d["end"] = t1 if d["end"] is None else max(d["end"], t1)
            low = name.lower()
            if low.startswith("memcpy"):
                d["copies"] += 1
                d["copy_us"] += t1 - t0
            elif low.startswith("memset"):
                d["fills"] += 1
            else:
                d["kernels"] += 1
                d["kernel_us"] += t1 - t0
                s = d["by_kernel"].setdefault(name[:60], [0, 0.0])
                s[0] += 1
                s[1] += t1 - t0
        elif any(w in name for w in ("LaunchKernel", "LaunchCooperativeKernel", "Memcpy",
                                     "Memset", "EventRecord", "EventSynchronize", "EventQuery",
                                     "StreamWaitEvent", "StreamSynchronize")):
            host_calls[name] = host_calls.get(name, 0) + 1
    for d in per.values():
        d["span_us"] = round(d.pop("end") - d.pop("start"), 1)
        d["kernel_us"] = round(d["kernel_us"], 1)
        d["copy_us"] = round(d["copy_us"], 1)
        d["by_kernel"] = {n: [c, round(us, 1)] for n, (c, us) in
                          sorted(d["by_kernel"].items(), key=lambda kv: -kv[1][1])[:8]}
    return {"devices": per, "host_cuda_calls": host_calls}


def kineto_pass(a, cases, out_dir):
    """Profile ``cases`` ((graph, app, mode, k) tuples) in this process; one line each."""
    out = Output(out_dir, "kineto.jsonl")
    contexts = Contexts(a.backend, a.timeout)
    deadline = time.monotonic() + a.budget_s
    loaded = {}
    try:
        for spec, app, mode, k in cases:
            rec = {"pass": "kineto", "graph": spec, "app": app, "mode": mode, "devices": k}
            if time.monotonic() > deadline:
                out.line(**rec, status="skip", note="past the profiler pass's budget")
                continue
            try:
                if spec not in loaded:
                    loaded.clear()
                    loaded[spec] = Graphs(spec, a.backend)
                rec.update(kineto_case(app, mode, k, loaded[spec], contexts, a), status="ok")
            except Exception as exc:  # noqa: BLE001 - recorded, the next case runs
                rec.update(status="error", error=f"{type(exc).__name__}: {exc}",
                           traceback=traceback.format_exc()[-1200:])
                contexts.drop(k)
            out.line(**rec)
    finally:
        contexts.close()


def start_kineto(a, cases, out_dir, remaining_s):
    """The profiler pass as a subprocess of this script, bounded by ``remaining_s``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--kineto-pass",
           "--kineto-cases", json.dumps(cases), "--backend", a.backend,
           "--partition", a.partition, "--budget-s", str(max(remaining_s - 20, 10))]
    if out_dir is not None:
        cmd += ["--out", str(out_dir)]
    try:
        proc = subprocess.run(cmd, timeout=remaining_s, cwd=str(ROOT))
        return {"kineto_pass": "done", "returncode": proc.returncode}
    except subprocess.TimeoutExpired:
        return {"kineto_pass": "killed", "after_s": remaining_s}


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------
def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="kron:21,grid:4900",
                    help="graph specs, in order (add kron:25 where memory and time allow)")
    ap.add_argument("--devices", default="1,4,2",
                    help="device counts, in the order they run (default 1,4,2: should the budget "
                         "run out, the two-device cases are the ones left out)")
    ap.add_argument("--apps", default="bfs,sssp,pr,cc")
    ap.add_argument("--modes", default="bsp,async", help="modes of the apps that have them")
    ap.add_argument("--partition", default="contiguous",
                    help="partitioner of the apps that take one (default contiguous: no METIS)")
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per case (median)")
    ap.add_argument("--min-repeat", type=int, default=3,
                    help="timed runs even past --case-s")
    ap.add_argument("--warmup", type=int, default=1, help="runs after the first, untimed")
    ap.add_argument("--case-s", type=float, default=2.0,
                    help="timed runs stop past this many seconds (after --min-repeat)")
    ap.add_argument("--instrumented", type=int, default=3,
                    help="instrumented runs per case (the median one is reported)")
    ap.add_argument("--trace", choices=("on", "none"), default="on",
                    help="a traced solver where the engine has a trace (bsp BFS/SSSP/PageRank)")
    ap.add_argument("--budget-s", type=float, default=300.0,
                    help="past this many seconds the remaining cases are skipped")
    ap.add_argument("--kineto", action="store_true",
                    help="afterwards profile each case at the largest device count on the first "
                         "graph under PyTorch's profiler, in a subprocess")
    ap.add_argument("--kineto-s", type=float, default=70.0,
                    help="seconds of --budget-s kept for the profiler pass")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="the contexts' wait limit, seconds (a hung case costs this much)")
    ap.add_argument("--out", default=None, help="folder for the files (default: $OUT if set)")
    ap.add_argument("--dry-run", action="store_true",
                    help=f"CPU virtual devices on tiny graphs ({DRY_GRAPHS}): checks the probe")
    ap.add_argument("--kineto-pass", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kineto-cases", default="[]", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.dry_run:
        a.backend = "cpu"
        if a.graphs == ap.get_default("graphs"):
            a.graphs = DRY_GRAPHS
        a.repeat, a.min_repeat, a.instrumented = min(a.repeat, 3), min(a.min_repeat, 2), 2
        a.kineto = False
    return a


def case_list(a):
    apps = [x for x in a.apps.split(",") if x]
    modes = [x for x in a.modes.split(",") if x]
    devices = [int(x) for x in a.devices.split(",") if x]
    out = []
    for spec in [x for x in a.graphs.split(",") if x]:
        for k in devices:
            for app, mode in CASES:
                if app in apps and (mode is None or mode in modes):
                    out.append((spec, app, mode, k))
    return out


def main(argv=None):
    a = parse(argv)
    out_env = a.out or os.environ.get("OUT")
    out_dir = Path(out_env) if out_env else None
    if a.kineto_pass:
        kineto_pass(a, [tuple(c) for c in json.loads(a.kineto_cases)], out_dir)
        return 0
    t_start = time.monotonic()
    failed = set()      # specs that did not load
    deadline_main = t_start + a.budget_s - (a.kineto_s if a.kineto else 0.0)
    out = Output(out_dir, "breakdown.jsonl")
    from groute.machine import describe_machine
    out.line(kind="run", argv=sys.argv[1:], backend=a.backend, partition=a.partition,
             machine=describe_machine(), commit=_commit())
    contexts = Contexts(a.backend, a.timeout)
    cases, references, graphs = [], {}, None
    try:
        for spec, app, mode, k in case_list(a):
            if spec not in failed and (graphs is None or graphs.spec != spec):
                graphs = None
                references.clear()
                free_memory()
                try:
                    graphs = Graphs(spec, a.backend)
                    out.line(kind="graph", graph=spec, vertices=int(graphs.graph.num_vertices),
                             arcs=int(graphs.graph.num_edges), load_s=round(graphs.load_s, 2),
                             source=int(graphs.source), source_rule=graphs.source_rule)
                except Exception as exc:  # noqa: BLE001
                    failed.add(spec)
                    out.line(kind="graph", graph=spec, error=f"{type(exc).__name__}: {exc}")
            if graphs is None or graphs.spec != spec:
                case = {"graph": spec, "app": app, "mode": mode, "devices": k,
                        "status": "error", "error": "the graph did not load"}
            elif time.monotonic() > deadline_main:
                case = {"graph": spec, "app": app, "mode": mode, "devices": k,
                        "status": "skip", "note": "past --budget-s"}
            else:
                deadline = now() + (deadline_main - time.monotonic())
                case = run_case(app, mode, k, graphs, contexts, a, references, deadline)
            case["kind"] = "case"
            cases.append(case)
            out.line(**case)
    finally:
        contexts.close()
    text = table(cases)
    print("\n" + text, flush=True)
    if out_dir is not None:
        (out_dir / "breakdown.md").write_text(
            f"# multi_gpu_breakdown ({a.backend}, partition {a.partition})\n\n"
            f"`{' '.join(sys.argv)}`\n\n{text}\n")
    if a.kineto:
        ks = [int(x) for x in a.devices.split(",") if x]
        first = a.graphs.split(",")[0]
        todo = [c[:4] for c in case_list(a) if c[0] == first and c[3] == max(ks)]
        remaining = a.budget_s - (time.monotonic() - t_start)
        print(json.dumps(start_kineto(a, todo, out_dir, remaining)), flush=True)
    return 0


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=str(ROOT), timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(main())
