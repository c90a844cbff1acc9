"""Predicate-based filter (PBF) across devices: Groute's first example (seed 004, fig. 3-1/3-2).

The host cuts a large array into segments and a host->devices :class:`~groute.Router` with the
first-available policy sends each segment to whichever device frees a receive buffer first, so a
faster device simply receives more segments. Each device filters its segment (CUDA: a kernel with
warp-aggregated atomics, ``pbf.cu``; CPU: NumPy), reserves a range of the output (one counter
under a lock) and copies its kept elements straight into it, on its own stream: the devices
write the output side by side, each over its own host link, and nothing is copied twice (a
devices->host router would land the kept elements in its receive buffers and leave one host
thread to copy them into place, which bounds the run at that thread's memory bandwidth).
``static=True`` gives every device an equal contiguous share instead (the paper's comparison
point).

The output holds exactly the kept elements, but not in input order (devices finish in any order
and warp-aggregated appends reorder within a segment); compare as a multiset (sorted).
"""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groute import HOST, Router, by_key, first_available
from groute.registry import command, public
from groute.runtime.kept import lease
from groute.runtime.router import CLOSE_JOIN_SECONDS
from groute.runtime.segment import positive_int

log = logging.getLogger(__name__)
KERNEL = Path(__file__).with_name("pbf.cu")


# predicates: the same test as a NumPy function and as a CUDA expression ------------------------
@dataclass(frozen=True)
class Predicate:
    text: str
    numpy: object
    cuda: str


def parse_predicate(text: str) -> Predicate:
    """``even``, ``odd``, ``positive``, ``gt:T``, ``lt:T`` or ``mod:M:R`` (x mod M == R, M > 0)."""
    t = text.strip().lower()
    if t == "even":
        return Predicate(t, lambda x: (x & 1) == 0, "(((x) & 1) == 0)")
    if t == "odd":
        return Predicate(t, lambda x: (x & 1) == 1, "(((x) & 1) == 1)")
    if t == "positive":
        return Predicate(t, lambda x: x > 0, "((x) > 0)")
    m = re.fullmatch(r"(gt|lt):(.*)", t)
    if m:
        v = _whole_field(m.group(2), "T", text)
        _check_int32(v, text)
        if m.group(1) == "gt":
            return Predicate(t, lambda x: x > v, f"((x) > {v})")
        return Predicate(t, lambda x: x < v, f"((x) < {v})")
    m = re.fullmatch(r"mod:([^:]*):([^:]*)", t)
    if m:
        mod, rem = _whole_field(m.group(1), "M", text), _whole_field(m.group(2), "R", text)
        if mod < 1 or not 0 <= rem < mod:
            raise ValueError(f"predicate {text!r}: need M >= 1 and 0 <= R < M")
        _check_int32(mod, text)
        # floor modulo like NumPy, also for negative x
        return Predicate(t, lambda x: x % mod == rem, f"(((((long long)(x)) % {mod}) + {mod}) % {mod} == {rem})")
    raise ValueError(f"unknown predicate {text!r}; use even, odd, positive, gt:T, lt:T or mod:M:R")


def _whole_field(field: str, name: str, text: str) -> int:
    """Field ``name`` of predicate ``text``, a whole number written in digits (an optional
    minus sign): ``gt:1e300`` and ``gt:2.5`` are named as such, not as unknown predicates."""
    if not re.fullmatch(r"-?\d+", field.strip()):
        raise ValueError(f"predicate {text!r}: {name} is a whole number in digits, got "
                         f"{field!r}")
    return int(field)


def _check_int32(v, text):
    if not -2**31 <= v < 2**31:
        raise ValueError(f"predicate {text!r}: {v} does not fit in int32")


# the per-device filter: the only backend-specific part ------------------------------------------
class _DeviceFilter:
    """Filters segments on one device into a kept-elements buffer; returns the kept count."""

    def __init__(self, device, predicate: Predicate, capacity: int):
        self.device = device
        self.predicate = predicate
        self.outs = [device.empty(capacity, np.int32) for _ in range(2)]  # double-buffered
        self.which = 0
        if device.backend == "cuda":
            from groute.kernels import get_kernel
            self.kernel = get_kernel(KERNEL, "pbf_filter", options=(f"-DGROUTE_PRED(x)={predicate.cuda}",))
            self.counter = device.zeros(1, np.uint64)
            self.count_host = device.host_buffer(1, np.uint64)
            sms = device.properties()["multiprocessors"]
            self.grid = sms * 8

    def __call__(self, data, stream):
        out = self.outs[self.which]
        self.which ^= 1
        n = int(data.shape[0])
        if self.device.backend == "cuda":
            def launch():
                self.counter.fill(0)
                blocks = min(self.grid, max(1, -(-n // 256)))
                self.kernel((blocks,), (256,), (data, np.int64(n), out, self.counter))
                stream.copy(self.count_host, self.counter)
            stream.submit(launch)
            stream.synchronize()
            return out, int(self.count_host[0])
        box = []

        def run():
            kept = data[self.predicate.numpy(data)]
            out[:kept.size] = kept
            box.append(kept.size)
        stream.submit(run)
        stream.synchronize()
        return out, box[0]


@dataclass
class PBFResult:
    values: np.ndarray
    time_s: float
    stats: dict = field(default_factory=dict)


@public
def pbf(data, predicate="even", *, ctx=None, segment_size: int = 1 << 20, num_buffers: int = 2,
        static: bool = False, backend="auto", devices=None) -> PBFResult:
    """Keep the elements of ``data`` that satisfy ``predicate``, spread over devices: Groute's
    dataflow example (segments routed to whichever device frees a buffer first).

    Parameters
    ----------
    data : array of int32
        The elements, 1-D.
    predicate : str or Predicate, optional
        ``"even"``, ``"odd"``, ``"mod:M:R"`` (``x % M == R``), ...
    ctx : Context, optional
        The devices to run on (default: the kept context for ``backend`` and ``devices``).
    segment_size : int, optional
        Elements per segment the router hands out.
    num_buffers : int, optional
        Receive buffers per device link.
    static : bool, optional
        Split the data evenly up front instead of first-available routing.
    backend : {"auto", "cuda", "cpu"}, optional
    devices : int, optional

    Returns
    -------
    PBFResult
        ``values``: the kept elements (in no particular order), ``time_s``, ``stats``.

    Raises
    ------
    ValueError
        ``data`` not a 1-D int32 array, a ``segment_size`` that is not a whole number >= 1, an
        unknown predicate.
    TypeError
        A ``predicate`` that is neither a str nor a Predicate.

    Examples
    --------
    >>> import numpy as np, groute
    >>> kept = groute.pbf(np.arange(10, dtype=np.int32), "mod:3:1", backend="cpu", devices=2)
    >>> sorted(kept.values.tolist())
    [1, 4, 7]
    """
    if not isinstance(predicate, (str, Predicate)):
        raise TypeError(f"predicate is a str (even, odd, positive, gt:T, lt:T, mod:M:R) or a "
                        f"Predicate, got {type(predicate).__name__}")
    pred = predicate if isinstance(predicate, Predicate) else parse_predicate(predicate)
    data = np.ascontiguousarray(data)
    if data.dtype != np.int32 or data.ndim != 1:
        raise ValueError(f"pbf filters a 1-D int32 array, got {data.ndim}-D {data.dtype}")
    segment_size = positive_int("segment_size", segment_size)
    ctx, release = lease(ctx, devices=devices, backend=backend)
    try:
        return _run(ctx, data, pred, segment_size, num_buffers, static)
    finally:
        release()


def _run(ctx, data, pred, seg, num_buffers, static):
    k = len(ctx.devices)
    n = data.size
    nseg = -(-n // seg)
    policy = by_key("owner") if static else first_available
    to_devices = Router([HOST], ctx.devices, policy, packet_size=seg, num_buffers=num_buffers,
                        ctx=ctx, name="pbf-scatter")
    host_src = ctx.devices[0].host_buffer(n, np.int32) if n else np.empty(0, np.int32)
    host_src[:] = data
    result = ctx.devices[0].host_buffer(n, np.int32) if n else np.empty(0, np.int32)
    filters = [_DeviceFilter(d, pred, seg) for d in ctx.devices]
    processed = np.zeros(k, np.int64)
    segments = np.zeros(k, np.int64)
    busy = np.zeros(k)
    filled, reserve = [0], threading.Lock()

    def device_worker(device):
        j = ctx.devices.index(device)
        stream = device.compute_stream
        for pending in to_devices.outputs[j]:
            t0 = time.perf_counter()
            seg_data = pending.wait_on(stream).data
            out, kept = filters[j](seg_data, stream)     # the stream has run the filter
            pending.release()
            if kept:
                with reserve:
                    at = filled[0]
                    filled[0] += kept
                # in stream order: the filter that next writes this buffer waits for the copy
                stream.copy(result[at:at + kept], out[:kept])
            processed[j] += pending.size
            segments[j] += 1
            busy[j] += time.perf_counter() - t0
        stream.synchronize()

    t0 = time.perf_counter()
    workers = [ctx.submit(j, device_worker) for j in range(k)]
    try:
        for s in range(nseg):
            lo, hi = s * seg, min(n, (s + 1) * seg)
            to_devices.inputs[0].send(host_src[lo:hi], metadata={"owner": s * k // nseg, "index": s})
        to_devices.close()
    except BaseException as exc:  # stop the devices; gather below raises the first failure
        ctx.fail("host", exc)
    ctx.gather(workers)
    ctx.check()
    elapsed = time.perf_counter() - t0
    to_devices.join(timeout=CLOSE_JOIN_SECONDS)     # the last copies let go of host_src
    stats = {"devices": [d.name for d in ctx.devices], "elements_per_device": processed.tolist(),
             "segments_per_device": segments.tolist(), "busy_s_per_device": busy.round(6).tolist(),
             "segments": nseg, "segment_size": seg, "kept": filled[0],
             "policy": "static" if static else "first_available"}
    return PBFResult(result[:filled[0]], elapsed, stats)


# command line ------------------------------------------------------------------------------------
@command
def register(subparsers, common):
    p = subparsers.add_parser("pbf", parents=[common],
                              help="predicate-based filter of a random int32 array across devices")
    p.add_argument("--size", type=float, default=1e7, help="elements (default 1e7)")
    p.add_argument("--segment", type=float, default=2**20, help="elements per segment (default 2^20)")
    p.add_argument("--buffers", type=int, default=2, help="receive buffers per link (default 2)")
    p.add_argument("--predicate", default="even", help="even | odd | positive | gt:T | lt:T | mod:M:R")
    p.add_argument("--static", action="store_true", help="equal static shares instead of first-available")
    p.add_argument("--compare", action="store_true", help="run both first-available and static")
    p.add_argument("--scale", type=_counts, default=None, metavar="K,K,...",
                   help="a scaling run: first-available on the first K devices for each K "
                        "(e.g. 1,2,4), each verified, with its speed-up over the first K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu-delays", default=None, metavar="S,S,...",
                   help="CPU backend: artificial per-task delay per device, to model unequal devices")
    p.set_defaults(func=_cli)


def _counts(text):
    import argparse
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"not a list of device counts: {text!r} (e.g. 1,2,4)")
    return counts


def _whole(flag: str, value: float, least: int) -> int:
    """A count option's value: a whole number >= ``least``, or a ValueError naming ``flag``."""
    if not (np.isfinite(value) and value == int(value) and value >= least):
        raise ValueError(f"{flag} must be a whole number >= {least}, got {value:g}")
    return int(value)


def _delays(flag: str, text):
    """``--cpu-delays S,S,...`` (``flag``): seconds per task of each device, as numbers (the
    Context checks their values and count)."""
    if not text:
        return None
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} {text!r}: give each device's delay in seconds, separated by "
                         f"commas") from None


def _cli(args) -> int:
    from groute import Context
    from groute.graph.budget import available_bytes
    size, segment = _whole("--size", args.size, 0), _whole("--segment", args.segment, 1)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    free = available_bytes()
    if free is not None and 3 * 4 * size > free:     # the data, its filtered copy, the answer
        raise ValueError(f"--size {size:,}: about {3 * 4 * size / 2**30:.1f} GiB of int32 "
                         f"arrays, more than the {free / 2**30:.1f} GiB this process can still "
                         f"allocate")
    pred = parse_predicate(args.predicate)
    delays = _delays("--cpu-delays", args.cpu_delays)
    data = np.random.default_rng(args.seed).integers(-2**31, 2**31 - 1, size, dtype=np.int32)
    expected = np.sort(data[pred.numpy(data)])
    print(f"pbf: {size:,} int32, predicate {pred.text}, segments of {segment:,}")
    if args.scale:
        return _scaling(args, data, pred, segment, expected, delays)
    # one device per delay unless --devices says how many
    devices = len(delays) if delays and args.devices in (None, "auto") else args.devices
    with Context(devices=devices, backend=args.backend, timeout=args.timeout,
                 cpu_delays=delays) as ctx:
        print(f"  {len(ctx.devices)} x {ctx.backend}")
        for static in ([False, True] if args.compare else [args.static]):
            res = _timed(ctx, data, pred, segment, args.buffers, static)
            if not _report(res, expected):
                return 1
    return 0


def _timed(ctx, data, pred, segment, buffers, static) -> PBFResult:
    """A warm-up on one segment, then the run."""
    pbf(data[: min(data.size, segment)], pred, ctx=ctx, segment_size=segment, static=static)
    return pbf(data, pred, ctx=ctx, segment_size=segment, num_buffers=buffers, static=static)


def _report(res, expected, extra="") -> bool:
    ok = res.values.size == expected.size and np.array_equal(np.sort(res.values), expected)
    print(f"  {res.stats['policy']:>15}: {res.time_s * 1e3:9.2f} ms, kept {res.stats['kept']:,} "
          f"-> {'verified against NumPy' if ok else 'MISMATCH with NumPy'}{extra}")
    for name, el, sg in zip(res.stats["devices"], res.stats["elements_per_device"],
                            res.stats["segments_per_device"]):
        print(f"      {name:8s} {el:>12,} elements in {sg:>5} segments")
    return ok


def _scaling(args, data, pred, segment, expected, delays) -> int:
    """``--scale``: each device count, with first-available routing (``--static``: static
    shares; ``--compare``: both), each run verified and timed against the first count's."""
    from groute import Context
    top = max(args.scale)           # every count can run: refused before the first is timed
    with Context(devices=top, backend=args.backend, timeout=args.timeout,
                 cpu_delays=delays[:top] if delays else None):
        pass
    first = {}
    for k in args.scale:
        with Context(devices=k, backend=args.backend, timeout=args.timeout,
                     cpu_delays=delays[:k] if delays else None) as ctx:
            for static in ([False, True] if args.compare else [args.static]):
                res = _timed(ctx, data, pred, segment, args.buffers, static)
                base = first.setdefault(static, res.time_s)
                if not _report(res, expected, f"; {k} x {ctx.backend}: {base / res.time_s:.2f}x "
                                              f"the speed of {args.scale[0]}"):
                    return 1
    return 0
