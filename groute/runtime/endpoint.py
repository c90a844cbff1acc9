"""Endpoints: where Links start and end.

An endpoint is the host, a device, or a named virtual endpoint on a device (several may share one
device, e.g. a worker and a router port). Routers are endpoints too (see :mod:`groute.runtime.router`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    device: object = None   # a Device, or None for the host
    name: str = ""

    @property
    def is_host(self) -> bool:
        return self.device is None

    def __str__(self):
        base = "host" if self.device is None else self.device.name
        return f"{base}/{self.name}" if self.name else base

    @staticmethod
    def of(x) -> "Endpoint":
        """Accept an Endpoint, a Device (another rank's too: a
        :class:`~groute.runtime.rank_context.RemoteDevice`), or the string ``"host"``."""
        if isinstance(x, Endpoint):
            return x
        if x is None or (isinstance(x, str) and x == "host"):
            return HOST
        if hasattr(x, "backend") and hasattr(x, "compute_stream"):
            return Endpoint(x)
        if getattr(x, "local", None) is False:      # a device another rank drives
            return Endpoint(x)
        raise TypeError(f"not an endpoint: {x!r} (expected a Device, 'host' or an Endpoint)")


HOST = Endpoint(None)
