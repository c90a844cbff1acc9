#!/usr/bin/env python
"""Host time of a Router broadcast's send, call by call, beside a Link's send of the same packet.

Run from the repository root on the GPUs of one host (``nvidia-h200-x4`` for issue 38's
broadcast from one GPU to the three others)::

    python benchmarks/probes/gpu_router_host.py --devices 4 --packet 1M

The first device sends one packet of ``--packet`` bytes at a time, ``--sends`` times (after
``--warmup`` untimed ones), each after an event recorded on its compute stream (as a kernel
that produced it would be): through a :class:`groute.Router` with the ``broadcast`` policy to
every other device, then through one :class:`groute.Link` to the second device. Receivers on the
destinations' host workers hold each packet until the next has arrived and release the one
before, as ``groute topo broadcast``'s Router does; the sender waits for every arrival before its
next send, so each send finds free buffers. Timers wrapped around the calls of the send path
(the copy stream's waits and records, the copies, the links' and the router's steps, the copy
events, the hand-over to the receivers) say where a send's host time goes: calls per send, µs
per call and µs per send, the wrappers' own cost included (a few tenths of a µs each), from a
second run of each case after a first without them, whose median comes first. ``--backend cpu`` runs it on CPU virtual devices, whose streams
are threads: its figures are not a GPU's.
"""
from __future__ import annotations

import argparse
import collections
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from groute import Context, Link, Router, broadcast  # noqa: E402 - after the path is set
from groute.runtime import copy_events, link, router, router_output  # noqa: E402


class CallTimers:
    """Timers wrapped around methods and functions: total ns and calls per label, undone by
    :meth:`restore`."""

    def __init__(self):
        self.totals = collections.defaultdict(lambda: [0, 0])
        self._undo = []
        self.on = False

    def wrap(self, owner, name: str, label: str | None = None) -> None:
        fn = getattr(owner, name)
        label = label or f"{getattr(owner, '__name__', owner)}.{name}"
        totals = self.totals

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if not self.on:
                return fn(*args, **kwargs)
            t0 = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = totals[label]
                entry[0] += time.perf_counter_ns() - t0
                entry[1] += 1
        self._undo.append((owner, name, owner.__dict__.get(name)))   # None: inherited
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, own in reversed(self._undo):
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)
        self._undo.clear()

    def rows(self, sends: int) -> list:
        """``(label, calls per send, µs per call, µs per send)``, the costliest first."""
        return [(label, calls / sends, ns / calls / 1e3, ns / sends / 1e3)
                for label, (ns, calls) in sorted(self.totals.items(), key=lambda kv: -kv[1][0])]


def _parse_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text)


def _wrap_send_path(timers: CallTimers, stream, plan) -> None:
    """Every call of a send's path, on the classes the run uses (its backend's stream and copy
    plan)."""
    timers.wrap(type(stream), "wait_event", "stream.wait_event")
    timers.wrap(type(stream), "record", "stream.record")
    timers.wrap(type(plan), "__call__", "copy plan (the copy call)")
    for name in ("_check_send", "_copy_run", "_arrived", "_hand_over_and_yield", "_take_all",
                 "_plan_for", "_issue_and_yield"):
        timers.wrap(link.Link, name, f"Link.{name}")
    timers.wrap(link, "_send_together", "send_all's copies (_send_together)")
    timers.wrap(router.Router, "_route", "Router._route (the whole send)")
    timers.wrap(router_output.RouterOutput, "_deliver", "RouterOutput._deliver")
    timers.wrap(copy_events.CopyEvents, "record", "CopyEvents.record")
    timers.wrap(copy_events.CopyEvents, "hold", "CopyEvents.hold")


def _measure(ctx, port, outputs, src, sends: int, warmup: int, timers: CallTimers) -> list:
    """Host seconds of each timed send of ``src`` into ``port``, each after every receiver has
    taken the one before; ``outputs``: ``(device position, receiving end)`` pairs."""
    arrived = [0] * len(outputs)
    held = [None] * len(outputs)

    def receive(device, j):
        for pending in outputs[j][1]:
            if held[j] is not None:
                held[j].release(after=held[j].event)
            held[j] = pending
            arrived[j] += 1
        if held[j] is not None:
            held[j].release()
    receivers = [ctx.submit(position, receive, j) for j, (position, _) in enumerate(outputs)]
    src_stream = ctx.devices[0].compute_stream
    hosts = []
    try:
        for k in range(warmup + sends):
            deadline = time.monotonic() + ctx.timeout
            while min(arrived) < k:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"send {k} did not arrive within {ctx.timeout} s")
                time.sleep(0)
            produced = src_stream.record()         # the producer's event, as a kernel's
            timers.on = k >= warmup
            t0 = time.perf_counter()
            handle = port.send(src, event=produced)
            t1 = time.perf_counter()
            timers.on = False
            if k >= warmup:
                hosts.append(t1 - t0)
            handle.wait(ctx.timeout)
    finally:
        timers.on = False
        port.close()
        ctx.gather(receivers, timeout=ctx.timeout)
    return hosts


def _case(ctx, case: str, words: int, src, args, timers: CallTimers) -> list:
    """One measurement of ``case`` ("Router" or "Link") on a new router or link."""
    a, *others = ctx.devices
    if case == "Router":
        node = Router([a], others, broadcast, packet_size=words, num_buffers=2, ctx=ctx,
                      name="probe-router")
        port, outputs = node.inputs[0], list(enumerate(node.outputs, start=1))
    else:
        node = Link(a, others[0], words, 2, ctx=ctx, name="probe-link")
        port, outputs = node, [(1, node)]
    return _measure(ctx, port, outputs, src, args.sends, args.warmup, timers)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=4, help="devices: the first broadcasts to the others")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--packet", default="1M", help="packet bytes (4K, 1M, 16M, ...)")
    p.add_argument("--sends", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    args = p.parse_args(argv)
    if args.devices < 2:
        p.error("--devices: at least 2 (a source and a destination)")
    words = max(1, _parse_bytes(args.packet) // 4)
    timers = CallTimers()
    plain, wrapped = {}, {}
    with Context(args.devices, backend=args.backend, timeout=60) as ctx:
        a = ctx.devices[0]
        src = a.asarray(np.arange(words, dtype=np.int32))
        for case in ("Router", "Link"):
            plain[case] = _case(ctx, case, words, src, args, timers)
        probe = Link(a, ctx.devices[1], words, 2, ctx=ctx, name="probe-classes")
        try:
            _wrap_send_path(timers, probe.stream, probe.stream.copy_plan(probe._ring, src))
            probe.close()
            for case in ("Router", "Link"):
                timers.totals.clear()
                _case(ctx, case, words, src, args, timers)
                wrapped[case] = timers.rows(args.sends)
        finally:
            timers.restore()
    print(f"host time of a send, {words * 4:,} bytes from {a.name} ({args.backend}), "
          f"{args.sends} sends after {args.warmup}:")
    for case, hosts in plain.items():
        dests = args.devices - 1 if case == "Router" else 1
        ordered = sorted(hosts)
        print(f"\n{case} to {dests} device(s): median {statistics.median(hosts) * 1e6:.1f} us "
              f"(p10 {ordered[len(ordered) // 10] * 1e6:.1f}, p90 {ordered[9 * len(ordered) // 10] * 1e6:.1f}); "
              f"another run's calls, timed:")
        for label, calls, per_call, per_send in wrapped[case]:
            print(f"  {label:38s} {calls:5.2f} calls/send  {per_call:7.2f} us/call  {per_send:7.2f} us/send")
    return 0


if __name__ == "__main__":
    sys.exit(main())
