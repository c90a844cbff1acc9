"""Packetization (Groute figure 2-1b): a large buffer sent as packets of size P versus one copy.

For each packet size P (4 KiB up to the largest transfer size) the same bytes go from the first
device to the second six ways:

* ``one copy`` of everything, and ``kernel push``: one kernel on the sender writing everything
  into the receiver's memory (the peers of the host- and of the device-initiated Links);
* ``raw packets``: a host loop of stream copies of P bytes each (the least a Python loop pays
  per packet: one runtime call, no views);
* ``Link``: our host-initiated :class:`groute.Link` with packet size P, one copy per packet
  (the receiver takes packets one by one);
* ``Link, batched``: the same Link with ``batching=True`` (the receiver takes several packets
  at once, so queued packets in consecutive slots go as one copy);
* ``device Link``: a device-initiated Link (``initiated="device"``): the sender's kernel sends
  each packet into a slot in the receiver's memory and the receiver's kernel takes it and
  releases it, no host on the path.

The Links get :meth:`~groute.topology.settings.Settings.link_buffers` receive buffers (a window
of ``link_window`` bytes, 4 to 64 buffers), the same for all three. At most ``max_packets``
packets are sent per run, so small P move fewer bytes; throughputs are compared with one copy
(host-initiated) and the kernel push (device-initiated) of the same bytes. Raw packets and the
host-initiated Links are not gated: issuing a packet from the host is the cost being measured,
and their records carry ``host_us_per_packet``, the host's time in the step over its packets.
The device-initiated steps are gated. An untimed run of each Link places every packet into a
destination buffer, which is checked.
"""
from __future__ import annotations

import statistics

from . import device_ops
from .link_paths import close_links, open_link, receive_message
from .results import BenchResult, record, require_two_devices
from .settings import format_bytes
from .timing import Clock, measure

METHODS = ("one copy", "kernel push", "raw packets", "Link", "Link, batched", "device Link")
#: the methods whose host time per packet is the cost measured
HOST_PATHS = ("raw packets", "Link", "Link, batched")


def run(ctx, settings, progress) -> BenchResult:
    result = BenchResult("packets", "Packetization: one buffer as packets of size P through our "
                                    "Links (host- and device-initiated) vs raw copies, one copy "
                                    "and a kernel push")
    require_two_devices(ctx.devices, "packetization")
    a, b = ctx.devices[0], ctx.devices[1]
    words = settings.largest // 4
    src = device_ops.device_buffer(a, words)
    dst = device_ops.device_buffer(b, words)
    device_ops.fill_pattern(src, seed=7)
    expected = device_ops.to_numpy(src).copy()
    clock = Clock(a, ctx.timeout)
    place_stream = b.new_stream("place")
    ratios = {}
    try:
        for packet in settings.packet_sizes:
            pw = packet // 4
            total = min(words, pw * settings.max_packets)
            s, d = src[:total], dst[:total]
            n_packets = -(-total // pw)
            buffers = settings.link_buffers(packet)
            reps = dict(repeat=settings.repeat, warmup=settings.warmup)
            samples = {}

            def one_copy(start, s=s, d=d):
                clock.stream.copy(d, s)

            def kernel_push(start, s=s, d=d):
                device_ops.device_copy(clock.stream, d, s)

            def raw_packets(start, s=s, d=d, pw=pw, total=total):
                plan = clock.stream.copy_plan(d, s)
                for off in range(0, total, pw):
                    plan(off, off, min(pw, total - off))

            for method, step, gate in (("one copy", one_copy, True), ("kernel push", kernel_push, True),
                                       ("raw packets", raw_packets, False)):
                device_ops.clear(d)
                samples[method] = measure(clock, step, gate=gate, **reps)
                device_ops.check_equal(d, expected[:total], f"{method} of {format_bytes(packet)} packets")

            for method, batching in (("Link", False), ("Link, batched", True)):
                link = open_link(ctx, a, b, pw, buffers, f"topo-packets-{packet}", batching=batching)
                try:
                    def via_link(start, s=s, total=total, link=link):
                        link.send(s, event=start)  # first: the receiver is not on the copy's critical path
                        receiver = ctx.submit(1, lambda dev: receive_message(link, total))
                        return ctx.gather([receiver], timeout=ctx.timeout)

                    samples[method] = measure(clock, via_link, **reps)
                    device_ops.clear(d)
                    placed = ctx.submit(1, lambda dev, link=link: receive_message(
                        link, total, stream=place_stream, dest=d))
                    link.send(s)
                    ctx.gather([placed], timeout=ctx.timeout)[0].synchronize(ctx.timeout)
                    device_ops.check_equal(d, expected[:total], f"{method} packets of {format_bytes(packet)}")
                finally:
                    close_links([link])

            samples["device Link"] = _device_link(ctx, clock, place_stream, s, d, pw, buffers,
                                                  expected[:total], reps, f"topo-devlink-{packet}")

            common = dict(src=a.name, dst=b.name, packet_bytes=packet, packets=n_packets, buffers=buffers)
            recs = {}
            for method in METHODS:
                extra = {}
                if method in HOST_PATHS:
                    extra["host_us_per_packet"] = statistics.median(samples[method].host_seconds) \
                        / n_packets * 1e6
                recs[method] = record("packets", method, samples[method], total * 4,
                                      initiated="device" if method in ("kernel push", "device Link") else "host",
                                      **common, **extra)
            result.records.extend(recs.values())
            ratios[packet] = recs["Link, batched"]["gbps"] / recs["one copy"]["gbps"]
            progress(f"packets: P={format_bytes(packet):>8} x{n_packets:<5} B={buffers:<3} "
                     + "  ".join(f"{m} {recs[m]['gbps']:.2f}" for m in METHODS) + " GB/s; host "
                     + ", ".join(f"{m} {recs[m]['host_us_per_packet']:.1f}" for m in HOST_PATHS)
                     + " us/packet")
    finally:
        clock.close()
        b.release_stream(place_stream)
    result.extra = {"link_vs_copy": {str(k): v for k, v in ratios.items()}, "src": a.name, "dst": b.name}
    return result


def _device_link(ctx, clock, place_stream, s, d, pw, buffers, expected, reps, name, part_bytes=None):
    """Time ``s`` through a device-initiated Link from ``clock``'s device to ``place_stream``'s,
    kernels at both ends (the receiver only releases: the transfer path alone); then an
    untimed run whose receiver places every packet into ``d``, checked. ``part_bytes``: the
    least share of a packet one block writes (None: the link's default)."""
    from groute import Link
    a, b = clock.device, place_stream.device
    total = int(s.shape[0])
    packets = -(-total // pw)
    link = Link(a, b, pw, buffers, ctx=ctx, name=name, initiated="device")
    device_ops.preload_link_kernels(a, b)
    sent = [0]

    def step(start, dest=None):
        place_stream.wait_event(start)
        device_ops.link_receive(place_stream, link, total, sent[0], dest, part_bytes=part_bytes)
        device_ops.link_send(clock.stream, link, s, sent[0], part_bytes=part_bytes)
        sent[0] += packets
        return [place_stream.record()]

    try:
        samples = measure(clock, step, gate=True, **reps)
        device_ops.clear(d)
        for event in step(clock.stream.record(), d):
            event.synchronize(ctx.timeout)
        device_ops.check_equal(d, expected, f"device Link packets of {format_bytes(pw * 4)}")
        link.check()
    finally:
        link.close(clock.stream)
        link.join(ctx.timeout)
    return samples
