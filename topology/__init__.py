"""Topology microbenchmarks: how the devices of a machine talk (``groute topo``).

After Groute's figure 2-1: a map of the devices and their copy bandwidth/latency, direct access
from kernels (coalesced vs random, peer vs host), packetization through our Link, push vs
push/pull through host, and broadcast (direct vs ring, host-managed vs device-initiated). Every
benchmark runs on CUDA GPUs and, with the same code, on CPU virtual devices.
"""
from .runner import BENCHMARKS, run_benchmarks
from .settings import Settings, default_settings

__all__ = ["BENCHMARKS", "run_benchmarks", "Settings", "default_settings"]
