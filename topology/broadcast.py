"""Broadcast (Groute figure 2-1d): one device's buffer to every other device.

Eight ways, four pairs of host-managed versus device-initiated:

* ``copies`` / ``kernels``: separate transfers from the source to each destination at once
  (stream copies on the source, one stream per destination / a kernel on each destination
  reading the source's memory);
* ``ring copies`` / ``ring kernels``: the buffer is cut into ``chunks`` pieces that travel
  source -> d1 -> d2 -> ...; each device forwards piece k as soon as it has it (stream events
  order the pieces, so the whole schedule is enqueued up front and the host is out of the loop);
* ``Links`` / ``Link ring``: the same two shapes built from our :class:`groute.Link`: one Link
  per destination, or Links chained around the ring where each device's host worker places
  every PendingSegment as it becomes ready and forwards it on the next Link;
* ``Router`` / ``device Links``: the whole buffer through a :class:`groute.Router` with the
  ``broadcast`` policy (one packet per destination, copied into each destination's receive
  buffer, all issued before anything waits; receivers release in the background) / through
  one device-initiated Link per destination (``initiated="device"``: a kernel on the source
  per destination sends the pieces, a kernel on each destination places them).

Raw methods and device Links are gated (see :mod:`groute.topology.timing`); host-initiated Link
and Router methods are not, because their host work is part of what they cost (their records
carry ``host_us``, the host's time in the step). Every destination is checked after the last
run (the Router's: its receive buffers).
"""
from __future__ import annotations

import statistics

from groute import Link, Router, broadcast as broadcast_policy

from . import device_ops
from .link_paths import chunk_words, close_links, cut_pieces, open_link, receive_message
from .results import BenchResult, record, require_two_devices
from .settings import format_bytes
from .timing import Clock, measure

METHODS = ("copies", "kernels", "ring copies", "ring kernels", "Links", "Link ring", "Router",
           "device Links")
#: the methods whose host work is part of their cost: their records carry ``host_us``, the
#: host's time in the step (issuing, and what the receivers' threads take of the GIL meanwhile)
HOST_PATHS = ("Links", "Link ring", "Router")


def run(ctx, settings, progress) -> BenchResult:
    result = BenchResult("broadcast", "Broadcast from one device to all others: direct vs ring, "
                                      "host-managed vs device-initiated, raw vs our Links")
    devices = list(ctx.devices)
    require_two_devices(devices, "broadcast")
    if settings.source >= len(devices):
        raise ValueError(f"broadcast source {settings.source} is not one of the {len(devices)} devices")
    pos = {d.index: n for n, d in enumerate(devices)}
    root = devices[settings.source]
    ring = devices[settings.source:] + devices[:settings.source]
    dests = ring[1:]
    words_max = settings.largest // 4
    src = device_ops.device_buffer(root, words_max)
    device_ops.fill_pattern(src, seed=11)
    expected = device_ops.to_numpy(src).copy()
    dst = {d.index: device_ops.device_buffer(d, words_max) for d in dests}
    streams = {d.index: d.new_stream("bcast") for d in ring}
    root_streams = [root.new_stream(f"bcast-to-{d.name}") for d in dests]
    place = {d.index: d.new_stream("place") for d in dests}
    clock = Clock(root, ctx.timeout)
    result.extra = {"source": root.name, "ring": [d.name for d in ring]}
    reach_all = all(root.can_access_peer(dev) for dev in dests)
    if not reach_all:
        result.notes.append(f"device Links not measured: {root.name} cannot reach every "
                            f"destination's memory (no peer access)")
    try:
        for size in settings.sizes:
            words = size // 4
            cw = chunk_words(words, settings.chunks)
            pieces = cut_pieces(words, cw)
            s = src[:words]
            d = {k: v[:words] for k, v in dst.items()}

            def direct(start, kernels=False):
                done = []
                for dev, rs in zip(dests, root_streams):
                    stream = streams[dev.index] if kernels else rs
                    stream.wait_event(start)
                    if kernels:
                        device_ops.device_copy(stream, d[dev.index], s)
                    else:
                        stream.copy(d[dev.index], s)
                    done.append(stream.record())
                return done

            def ring_step(start, kernels=False):
                for dev in dests:
                    streams[dev.index].wait_event(start)
                last = {}
                for lo, hi in pieces:
                    before = None
                    for k, dev in enumerate(dests):
                        stream = streams[dev.index]
                        prev = s if k == 0 else d[dests[k - 1].index]
                        if before is not None:
                            stream.wait_event(before)
                        if kernels:
                            device_ops.device_copy(stream, d[dev.index][lo:hi], prev[lo:hi])
                        else:
                            stream.copy(d[dev.index][lo:hi], prev[lo:hi])
                        before = last[dev.index] = stream.record()
                return list(last.values())

            links = [open_link(ctx, root, dev, cw, settings.num_buffers, f"topo-bcast-{dev.name}")
                     for dev in dests]
            chain = [open_link(ctx, ring[k], ring[k + 1], cw, settings.num_buffers,
                               f"topo-ring-{ring[k].name}-{ring[k + 1].name}") for k in range(len(dests))]

            def via_links(start):
                for link in links:
                    link.send(s, event=start)
                receivers = [ctx.submit(pos[dev.index], lambda _, link=link, dev=dev: receive_message(
                    link, words, stream=place[dev.index], dest=d[dev.index])) for dev, link in zip(dests, links)]
                return ctx.gather(receivers, timeout=ctx.timeout)

            def via_link_ring(start):
                chain[0].send(s, event=start)
                receivers = []
                for k, dev in enumerate(dests):
                    forward = chain[k + 1] if k + 1 < len(chain) else None
                    receivers.append(ctx.submit(pos[dev.index], lambda _, k=k, dev=dev, forward=forward:
                                                receive_message(chain[k], words, stream=place[dev.index],
                                                                dest=d[dev.index], forward=forward)))
                return ctx.gather(receivers, timeout=ctx.timeout)

            device_links = [Link(root, dev, cw, settings.link_buffers(cw * 4), ctx=ctx,
                                 initiated="device", name=f"topo-bcast-dev-{dev.name}")
                            for dev in dests] if reach_all else []
            if device_links:
                device_ops.preload_link_kernels(root, *dests)
            sent = [0]

            def via_device_links(start):
                for link, dev, rs in zip(device_links, dests, root_streams):
                    streams[dev.index].wait_event(start)
                    rs.wait_event(start)
                    device_ops.link_receive(streams[dev.index], link, words, sent[0], d[dev.index])
                    device_ops.link_send(rs, link, s, sent[0])
                sent[0] += len(pieces)
                return [streams[dev.index].record() for dev in dests]

            steps = {"copies": (direct, True), "kernels": (lambda st: direct(st, kernels=True), True),
                     "ring copies": (ring_step, True),
                     "ring kernels": (lambda st: ring_step(st, kernels=True), True),
                     "Links": (via_links, False), "Link ring": (via_link_ring, False),
                     "Router": (None, False), "device Links": (via_device_links, True)}
            if not reach_all:
                del steps["device Links"]
            line = []
            try:
                for method, (step, gate) in steps.items():
                    reps = dict(repeat=settings.repeat, warmup=settings.warmup)
                    if method == "Router":
                        samples = _BroadcastRouter(ctx, root, dests, s).measure(clock, reps, expected[:words])
                    else:
                        for dev in dests:
                            device_ops.clear(d[dev.index])
                        samples = measure(clock, step, gate=gate, **reps)
                        for dev in dests:
                            device_ops.check_equal(d[dev.index], expected[:words],
                                                   f"broadcast by {method} to {dev.name}")
                    extra = {"host_us": statistics.median(samples.host_seconds) * 1e6} \
                        if method in HOST_PATHS else {}
                    rec = record("broadcast", method, samples, size, src=root.name, dst="all",
                                 destinations=len(dests), aggregate_gbps=size * len(dests) / samples.median / 1e9,
                                 initiated="device" if "kernel" in method else "host",
                                 shape="ring" if "ring" in method else "direct", chunk_bytes=cw * 4, **extra)
                    result.records.append(rec)
                    line.append(f"{method} {samples.median * 1e3:.3f} ms"
                                + (f" (host {extra['host_us']:.0f} us)" if extra else ""))
            finally:
                close_links(links + chain)
                for link, rs in zip(device_links, root_streams):
                    link.close(rs)
                    link.join(ctx.timeout)
            progress(f"broadcast: {format_bytes(size):>8} {root.name} -> {len(dests)} devices: " + ", ".join(line))
    finally:
        clock.close()
        for dev in ring:
            dev.release_stream(streams[dev.index])
        for rs in root_streams:
            root.release_stream(rs)
        for dev in dests:
            dev.release_stream(place[dev.index])
    return result


class _BroadcastRouter:
    """The ``Router`` method: a Router from the source to the destinations with the
    ``broadcast`` policy and the whole buffer as one packet, receivers on the destinations' host
    workers releasing each packet once the next has arrived (off the timed path: a step is the
    send and the copies it issues); the packets they hold at the end are checked."""

    def __init__(self, ctx, root, dests, src):
        self.ctx, self.src = ctx, src
        self.router = Router([root], dests, broadcast_policy, packet_size=int(src.shape[0]),
                             num_buffers=2, ctx=ctx, name="topo-bcast-router")
        self.arrived = [0] * len(dests)
        self.held = [None] * len(dests)
        self.sent = 0
        self.positions = [ctx.devices.index(dev) for dev in dests]

    def measure(self, clock, reps, expected):
        receivers = [self.ctx.submit(p, self._receive, j) for j, p in enumerate(self.positions)]
        try:
            samples = measure(clock, self._step, prepare=self._settle, **reps)
            self._settle(None)
            for j, pending in enumerate(self.held):
                device_ops.check_equal(pending.wait().data, expected,
                                       f"broadcast by Router to {self.router.output_endpoints[j]}")
        finally:
            self.router.close()
            self.ctx.gather(receivers, timeout=self.ctx.timeout)
        return samples

    def _receive(self, device, j):
        for pending in self.router.outputs[j]:
            if self.held[j] is not None:
                self.held[j].release(after=self.held[j].event)
            self.held[j] = pending
            self.arrived[j] += 1
        if self.held[j] is not None:
            self.held[j].release()

    def _step(self, start):
        handle = self.router.inputs[0].send(self.src, event=start)
        self.sent += 1
        return [h.event for h in handle.handles]

    def _settle(self, k):
        """Before a run and after the last (untimed): every packet sent has arrived everywhere."""
        from groute.waiting import wait_for
        wait_for(lambda: min(self.arrived) >= self.sent, what="the broadcast router's receivers",
                 timeout=self.ctx.timeout, stop=self.ctx.stop_event)
