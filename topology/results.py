"""What a benchmark returns: flat measurement records plus status, for tables, JSON and plots.

Every measurement is one dict with the same core keys (``benchmark``, ``method``, ``src``,
``dst``, ``bytes``, ``seconds`` (median), ``best_s``, ``samples_s``, ``gbps``) and a few
benchmark-specific ones (``packet_bytes``, ``op``, ``pattern``...), so reports and plots select
rows by key instead of knowing each benchmark's internals.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .timing import Samples

CORE_KEYS = ("benchmark", "method", "src", "dst", "bytes", "seconds", "best_s", "samples_s", "gbps")


def record(benchmark: str, method: str, samples: Samples, nbytes: int, *, src="", dst="", **extra) -> dict:
    """One measurement; ``gbps`` is ``nbytes`` / median seconds in 10^9 bytes per second."""
    median = samples.median
    return {"benchmark": benchmark, "method": method, "src": str(src), "dst": str(dst),
            "bytes": int(nbytes), "seconds": median, "best_s": samples.best,
            "samples_s": list(samples.seconds), "gbps": nbytes / median / 1e9, **extra}


@dataclass
class BenchResult:
    """The outcome of one benchmark: ``status`` is 'ok', 'failed' or 'skipped'."""

    name: str
    title: str
    records: list = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def select(self, **where) -> list:
        """Records whose fields equal every ``key=value`` given."""
        return [r for r in self.records if all(r.get(k) == v for k, v in where.items())]

    @classmethod
    def from_dict(cls, d: dict) -> "BenchResult":
        """Inverse of :meth:`to_dict` (re-rendering a saved JSON report)."""
        return cls(d["name"], d["title"], list(d.get("records", [])), d.get("status", "ok"), d.get("error"),
                   d.get("seconds", 0.0), list(d.get("notes", [])), dict(d.get("extra", {})))

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "status": self.status, "error": self.error,
                "seconds": self.seconds, "notes": list(self.notes), "extra": self.extra,
                "records": self.records}


class BenchmarkSkipped(Exception):
    """The benchmark cannot run on this context (e.g. it needs two devices); not a failure."""


def require_two_devices(devices, benchmark: str) -> None:
    """Skip ``benchmark`` (raise :class:`BenchmarkSkipped`) on fewer than two devices."""
    if len(devices) < 2:
        raise BenchmarkSkipped(f"{benchmark} needs two devices or more")
