"""Push versus push/pull (Groute figure 2-1c): moving a buffer from device i to device j directly,
or staged through pinned host memory (the source pushes to the host, the destination pulls).

Host-initiated methods use stream copies; device-initiated ones use kernels (the source's kernel
writes into the peer's memory, or the destination's kernel reads from the source's memory, or
both through mapped host memory). Staged methods are pipelined in ``chunks`` pieces: the pull of
piece k overlaps the push of piece k+1. Every step is gated (see :mod:`groute.topology.timing`), so
the numbers describe the transfer, not Python issuing it.
"""
from __future__ import annotations

from . import device_ops
from .link_paths import chunk_words, cut_pieces
from .results import BenchResult, record, require_two_devices
from .settings import format_bytes
from .timing import Clock, measure

METHODS = ("push (copy)", "push/pull via host (copies)", "push (kernel)", "pull (kernel)",
           "push/pull via host (kernels)")


def run(ctx, settings, progress) -> BenchResult:
    result = BenchResult("pushpull", "Push vs push/pull through host: direct device-to-device vs "
                                     "staged through pinned host memory")
    devices = list(ctx.devices)
    require_two_devices(devices, "push/pull")
    words_max = settings.largest // 4
    src = {d.index: device_ops.device_buffer(d, words_max) for d in devices}
    dst = {d.index: device_ops.device_buffer(d, words_max) for d in devices}
    staging = device_ops.host_buffer(devices[0], words_max)
    expected = {}
    for n, d in enumerate(devices):
        device_ops.fill_pattern(src[d.index], seed=100 + n)
        expected[d.index] = device_ops.to_numpy(src[d.index]).copy()
    clocks = {d.index: Clock(d, ctx.timeout) for d in devices}
    pull_streams = {d.index: d.new_stream("pull") for d in devices}
    try:
        for size in settings.sizes:
            words = size // 4
            pieces = cut_pieces(words, chunk_words(words, settings.chunks))
            for a in devices:
                for b in devices:
                    if a is b:
                        continue
                    clock, sb = clocks[a.index], pull_streams[b.index]
                    s, d, h = src[a.index][:words], dst[b.index][:words], staging[:words]

                    def push_copy(start, s=s, d=d, clock=clock):
                        clock.stream.copy(d, s)

                    def staged(start, s=s, d=d, h=h, clock=clock, sb=sb, kernels=False):
                        sb.wait_event(start)
                        for lo, hi in pieces:
                            if kernels:
                                device_ops.device_copy(clock.stream, h[lo:hi], s[lo:hi])
                            else:
                                clock.stream.copy(h[lo:hi], s[lo:hi])
                            sb.wait_event(clock.stream.record())
                            if kernels:
                                device_ops.device_copy(sb, d[lo:hi], h[lo:hi])
                            else:
                                sb.copy(d[lo:hi], h[lo:hi])
                        return [sb.record()]

                    def push_kernel(start, s=s, d=d, clock=clock):
                        device_ops.device_copy(clock.stream, d, s)

                    def pull_kernel(start, s=s, d=d, sb=sb):
                        sb.wait_event(start)
                        device_ops.device_copy(sb, d, s)
                        return [sb.record()]

                    steps = {METHODS[0]: push_copy, METHODS[1]: staged, METHODS[2]: push_kernel,
                             METHODS[3]: pull_kernel,
                             METHODS[4]: lambda start, f=staged: f(start, kernels=True)}
                    line = []
                    for method, step in steps.items():
                        device_ops.clear(d)
                        samples = measure(clock, step, repeat=settings.repeat, warmup=settings.warmup,
                                          gate=True)
                        device_ops.check_equal(d, expected[a.index][:words], f"{method} {a.name} -> {b.name}")
                        rec = record("pushpull", method, samples, size, src=a.name, dst=b.name,
                                     initiated="device" if "kernel" in method else "host",
                                     staged="via host" in method)
                        result.records.append(rec)
                        line.append(f"{rec['gbps']:.1f}")
                    progress(f"pushpull: {format_bytes(size):>8} {a.name} -> {b.name}: "
                             + ", ".join(f"{m} {g} GB/s" for m, g in zip(METHODS, line)))
    finally:
        for c in clocks.values():
            c.close()
        for d in devices:
            d.release_stream(pull_streams[d.index])
    return result
