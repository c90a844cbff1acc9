"""Broadcast (Groute figure 2-1d): one device's buffer to every other device.

Six ways, three pairs of host-managed versus device-initiated:

* ``copies`` / ``kernels``: separate transfers from the source to each destination at once
  (stream copies on the source, one stream per destination / a kernel on each destination
  reading the source's memory);
* ``ring copies`` / ``ring kernels``: the buffer is cut into ``chunks`` pieces that travel
  source -> d1 -> d2 -> ...; each device forwards piece k as soon as it has it (stream events
  order the pieces, so the whole schedule is enqueued up front and the host is out of the loop);
* ``Links`` / ``Link ring``: the same two shapes built from our :class:`groute.Link`: one Link
  per destination, or Links chained around the ring where each device's host worker places
  every PendingSegment as it becomes ready and forwards it on the next Link.

Raw methods are gated (see :mod:`groute.topology.timing`); Link methods are not, because their host
work is part of what they cost. Every destination is checked after the last run.
"""
from __future__ import annotations

from . import device_ops
from .link_paths import chunk_words, close_links, cut_pieces, open_link, receive_message
from .results import BenchResult, record, require_two_devices
from .settings import format_bytes
from .timing import Clock, measure

METHODS = ("copies", "kernels", "ring copies", "ring kernels", "Links", "Link ring")


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

            steps = {"copies": (direct, True), "kernels": (lambda st: direct(st, kernels=True), True),
                     "ring copies": (ring_step, True),
                     "ring kernels": (lambda st: ring_step(st, kernels=True), True),
                     "Links": (via_links, False), "Link ring": (via_link_ring, False)}
            line = []
            try:
                for method, (step, gate) in steps.items():
                    for dev in dests:
                        device_ops.clear(d[dev.index])
                    samples = measure(clock, step, repeat=settings.repeat, warmup=settings.warmup, gate=gate)
                    for dev in dests:
                        device_ops.check_equal(d[dev.index], expected[:words],
                                               f"broadcast by {method} to {dev.name}")
                    rec = record("broadcast", method, samples, size, src=root.name, dst="all",
                                 destinations=len(dests), aggregate_gbps=size * len(dests) / samples.median / 1e9,
                                 initiated="device" if "kernel" in method else "host",
                                 shape="ring" if "ring" in method else "direct", chunk_bytes=cw * 4)
                    result.records.append(rec)
                    line.append(f"{method} {samples.median * 1e3:.3f} ms")
            finally:
                close_links(links + chain)
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
