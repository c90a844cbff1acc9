"""What the benchmarks measure with: transfer sizes, repeats, packet sizes, and their defaults.

Defaults are chosen per backend: on GPUs large enough to reach peak bandwidth yet finishing in
well under two minutes on four GPUs; on CPU virtual devices small, because there the point is
to exercise the same code path, not to measure a machine.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")

#: Transfers are arrays of 4-byte words moved as 16-byte vectors: sizes are multiples of this.
SIZE_QUANTUM = 16
#: The most receive buffers a packetization Link gets (:meth:`Settings.link_buffers`): at small
#: packets the window is this many packets, so slots are reused within a run.
MAX_LINK_BUFFERS = 64


def parse_size(text: str) -> int:
    """``"4K"``, ``"64MiB"``, ``"1g"``, ``"4096"`` -> bytes (binary units)."""
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 4096, 64K, 256M, 1G)")
    value = int(m.group(1)) * _UNITS[m.group(2).lower()]
    if value < SIZE_QUANTUM or value % SIZE_QUANTUM:
        raise ValueError(f"size {text!r} must be a positive multiple of {SIZE_QUANTUM} bytes")
    return value


def parse_sizes(text: str) -> list[int]:
    """A comma-separated list of sizes, e.g. ``"1M,16M,256M"`` (sorted, duplicates dropped)."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("no sizes given (e.g. 1M,16M,256M)")
    return sorted({parse_size(p) for p in parts})


def format_bytes(n: int) -> str:
    """Binary units, short: 4 KiB, 256 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def powers_of_two(lo: int, hi: int) -> list[int]:
    """lo, 2 lo, 4 lo, ... up to and including hi (hi added if not a power-of-two step)."""
    out, p = [], lo
    while p < hi:
        out.append(p)
        p *= 2
    out.append(hi)
    return out


@dataclass
class Settings:
    """Options shared by every benchmark (see ``groute topo --help``)."""

    sizes: list                 # transfer sizes in bytes (push/pull, broadcast); the largest drives map/packets
    repeat: int = 7             # timed runs per measurement (median reported)
    warmup: int = 1             # untimed runs first
    access_size: int = 0        # bytes a direct-access kernel reads or writes coalesced
    packet_sizes: list = field(default_factory=list)   # packetization sweep, bytes
    max_packets: int = 1024     # packetization moves at most this many packets per run
    num_buffers: int = 4        # receive buffers per Link (at least)
    link_window: int = 4 << 20  # packetization: a Link of packet P gets link_window / P buffers, within [num_buffers, MAX_LINK_BUFFERS]
    chunks: int = 16            # pipelined transfers (staged, ring, broadcast Links) cut a buffer into this many pieces
    source: int = 0             # broadcast source (position in the context's device list)

    @property
    def largest(self) -> int:
        return max(self.sizes)

    def link_buffers(self, packet_bytes: int) -> int:
        """Receive buffers of the packetization benchmark's Links of ``packet_bytes`` packets:
        enough to hold ``link_window`` bytes in flight (a Link's throughput is its window over
        the time a buffer takes to come back), at least ``num_buffers``, at most
        :data:`MAX_LINK_BUFFERS`."""
        return max(self.num_buffers, min(MAX_LINK_BUFFERS, self.link_window // packet_bytes))

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self) -> "Settings":
        if not self.sizes:
            raise ValueError("sizes must not be empty")
        for name in ("repeat", "max_packets", "num_buffers", "chunks", "link_window"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        for s in [*self.sizes, *self.packet_sizes, self.access_size]:
            if s < SIZE_QUANTUM or s % SIZE_QUANTUM:
                raise ValueError(f"size {s} bytes must be a positive multiple of {SIZE_QUANTUM}")
        if self.source < 0:
            raise ValueError(f"source must be >= 0, got {self.source}")
        return self


def default_settings(backend: str, *, quick: bool = False, sizes=None, repeat=None,
                     packet_sizes=None, link_window=None) -> Settings:
    """Defaults for ``backend`` ('cuda' or 'cpu'), optionally overridden."""
    if backend == "cuda":
        base = [1 << 20, 16 << 20] if quick else [1 << 20, 16 << 20, 256 << 20]
        access = (16 << 20) if quick else (256 << 20)
        rep, max_packets = (3 if quick else 7), (256 if quick else 1024)
    else:
        base = [16 << 10, 64 << 10] if quick else [64 << 10, 1 << 20]
        access = (64 << 10) if quick else (1 << 20)
        rep, max_packets = (1 if quick else 3), (16 if quick else 64)
    sizes = sorted(sizes) if sizes else base
    largest = max(sizes)
    if packet_sizes is None:
        packet_sizes = powers_of_two(min(4096, largest), largest)
    too_big = [p for p in packet_sizes if p > largest]
    if too_big:
        raise ValueError(f"packet size {format_bytes(too_big[0])} exceeds the largest transfer size "
                         f"{format_bytes(largest)}; give larger sizes or smaller packet sizes")
    window = link_window if link_window is not None else (4 << 20 if backend == "cuda" else 64 << 10)
    s = Settings(sizes=list(sizes), repeat=repeat if repeat is not None else rep, warmup=1,
                 access_size=min(access, largest), packet_sizes=sorted(set(packet_sizes)),
                 max_packets=max_packets, link_window=window)
    return s.validate()
