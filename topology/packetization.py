"""Packetization (Groute figure 2-1b): a large buffer sent as packets of size P versus one copy.

For each packet size P (4 KiB up to the largest transfer size) the same bytes go from the first
device to the second three ways: one copy of everything; a host loop of raw stream copies of P
bytes each; and our :class:`groute.Link` with packet size P (receive buffers reused as the
receiver releases them). At most ``max_packets`` packets are sent per run, so small P move fewer
bytes; throughputs are compared with one copy of the same bytes. Nothing is gated: issuing a
packet from the host is the cost being measured. A last, untimed Link run places every packet
into a destination buffer and checks it.
"""
from __future__ import annotations

from . import device_ops
from .link_paths import close_links, open_link, receive_message
from .results import BenchResult, record, require_two_devices
from .settings import format_bytes
from .timing import Clock, measure


def run(ctx, settings, progress) -> BenchResult:
    result = BenchResult("packets", "Packetization: one buffer as packets of size P through our Link "
                                    "vs raw copies vs one copy")
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

            def one_copy(start, s=s, d=d):
                clock.stream.copy(d, s)

            def raw_packets(start, s=s, d=d, pw=pw, total=total):
                for off in range(0, total, pw):
                    clock.stream.copy(d[off:off + pw], s[off:off + pw])

            reps = dict(repeat=settings.repeat, warmup=settings.warmup)
            copy_s = measure(clock, one_copy, **reps)
            device_ops.clear(d)
            raw_s = measure(clock, raw_packets, **reps)
            device_ops.check_equal(d, expected[:total], f"raw packets of {format_bytes(packet)}")

            link = open_link(ctx, a, b, pw, settings.num_buffers, f"topo-packets-{packet}")
            try:
                def via_link(start, s=s, total=total, link=link):
                    link.send(s, event=start)  # first: the receiver is not on the copy's critical path
                    receiver = ctx.submit(1, lambda dev: receive_message(link, total))
                    return ctx.gather([receiver], timeout=ctx.timeout)

                link_s = measure(clock, via_link, **reps)
                device_ops.clear(d)
                placed = ctx.submit(1, lambda dev: receive_message(link, total, stream=place_stream, dest=d))
                link.send(s)
                ctx.gather([placed], timeout=ctx.timeout)[0].synchronize(ctx.timeout)
                device_ops.check_equal(d, expected[:total], f"Link packets of {format_bytes(packet)}")
            finally:
                close_links([link])

            common = dict(src=a.name, dst=b.name, packet_bytes=packet, packets=n_packets)
            recs = [record("packets", "one copy", copy_s, total * 4, **common),
                    record("packets", "raw packets", raw_s, total * 4, **common),
                    record("packets", "Link", link_s, total * 4, **common)]
            result.records.extend(recs)
            ratios[packet] = recs[2]["gbps"] / recs[0]["gbps"]
            progress(f"packets: P={format_bytes(packet):>8} x{n_packets:<5} one copy {recs[0]['gbps']:8.2f}"
                     f"  raw {recs[1]['gbps']:8.2f}  Link {recs[2]['gbps']:8.2f} GB/s "
                     f"({ratios[packet]:.0%} of one copy)")
    finally:
        clock.close()
        b.release_stream(place_stream)
    result.extra = {"link_vs_copy": {str(k): v for k, v in ratios.items()}, "src": a.name, "dst": b.name}
    return result
