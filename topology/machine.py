"""The machine map: what the devices are, how they are linked, and copy bandwidth/latency between
every pair of endpoints (each device and the host).

Bandwidth is one copy of the largest transfer size; latency is one 4-byte copy. Both are plain
stream copies (``cudaMemcpyAsync``/``cudaMemcpyPeerAsync`` on CUDA) on a stream of the source
device (of the device, for host transfers), timed with a gated clock so the numbers describe the
copy engines and links, not the Python call that issued them.
"""
from __future__ import annotations

import logging

import numpy as np

from . import device_ops
from .results import BenchResult, record
from .timing import Clock, measure

log = logging.getLogger(__name__)
LATENCY_WORDS = 1


def backend_label(backend: str) -> str:
    return "CUDA GPUs" if backend == "cuda" else "CPU virtual devices (NumPy; not GPU numbers)"


def describe_machine(ctx) -> dict:
    """This context's devices, peer access and link kinds (``groute info``) plus the host, GPU,
    library and project description every result file carries (:mod:`groute.machine`)."""
    from groute.commands.info import describe
    from groute.machine import describe_machine as describe_host
    info = describe(ctx)
    host = describe_host()
    info["label"] = backend_label(ctx.backend)
    info["device_count"] = len(ctx.devices)
    info["device_models"] = sorted({d["name"] for d in info["devices"]})
    info["numpy"] = np.__version__
    info["cpu"] = host["cpu"]
    info["cpu_count"] = host["cpu_cores"]
    info["os"] = host["os"]
    info["project_commit"] = host["project"]["commit"]
    info["host"] = host
    if ctx.backend == "cuda":
        info["driver_version"] = host.get("nvidia_driver")
    return info


def run(ctx, settings, progress) -> BenchResult:
    """Bandwidth and latency of a copy between every ordered pair of endpoints."""
    result = BenchResult("map", "Copy bandwidth and latency between every pair of endpoints")
    devices = list(ctx.devices)
    ends = [*devices, None]                      # None is the host
    names = [d.name for d in devices] + ["host"]
    words = settings.largest // 4
    expected = {}
    src, dst = {}, {}
    for i, end in enumerate(ends):
        owner = end if end is not None else devices[0]
        src[i] = device_ops.buffer_on(end, words, owner)
        dst[i] = device_ops.buffer_on(end, words, owner)
        device_ops.fill_pattern(src[i], seed=i + 1)
        expected[i] = device_ops.to_numpy(src[i]).copy()
    clocks = {d.index: Clock(d, ctx.timeout) for d in devices}
    n = len(ends)
    bandwidth = [[None] * n for _ in range(n)]
    latency = [[None] * n for _ in range(n)]
    try:
        for i, a in enumerate(ends):
            for j, b in enumerate(ends):
                if i == j and a is None:
                    continue  # host to host is not a device transfer
                executor = a if a is not None else b
                clock = clocks[executor.index]
                s, d = src[i], dst[j]
                device_ops.clear(d)

                def copy_all(start, s=s, d=d, clock=clock):
                    clock.stream.copy(d, s)

                def copy_word(start, s=s, d=d, clock=clock):
                    clock.stream.copy(d[:LATENCY_WORDS], s[:LATENCY_WORDS])

                bw = measure(clock, copy_all, repeat=settings.repeat, warmup=settings.warmup, gate=True)
                device_ops.check_equal(d, expected[i], f"copy {names[i]} -> {names[j]}")
                lat = measure(clock, copy_word, repeat=settings.repeat, warmup=settings.warmup, gate=True)
                rec = record("map", "copy", bw, words * 4, src=names[i], dst=names[j])
                result.records.append(rec)
                result.records.append(record("map", "latency", lat, LATENCY_WORDS * 4,
                                             src=names[i], dst=names[j]))
                bandwidth[i][j] = rec["gbps"]
                latency[i][j] = lat.median * 1e6
                progress(f"map: {names[i]:>7} -> {names[j]:<7} {rec['gbps']:8.2f} GB/s, "
                         f"latency {lat.median * 1e6:8.2f} us")
    finally:
        for c in clocks.values():
            c.close()
    result.extra = {"endpoints": names, "bandwidth_gbps": bandwidth, "latency_us": latency,
                    "bytes": words * 4, "peer_access": ctx.peer_matrix().astype(int).tolist()}
    try:
        from groute.device.links_info import link_kinds
        result.extra["links"] = link_kinds(devices)
    except Exception as exc:  # noqa: BLE001 - the link kinds are a description, not a measurement
        log.info("link kinds unavailable: %s", exc)
    return result
