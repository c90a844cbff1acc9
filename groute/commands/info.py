"""``groute info``: the devices, their memory, the backend, and how they reach each other; and
which devices are logical devices sharing a GPU (:mod:`groute.device.logical`), or what the CPU
backend's virtual devices are."""
from __future__ import annotations

import json
import os
import platform
import textwrap

from ..cli_support import context_from_args


def register(subparsers, common):
    p = subparsers.add_parser("info", parents=[common], help="show devices, memory, peer access, links")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=run)


def describe(ctx) -> dict:
    from ..device.links_info import link_kinds
    devices = []
    for dev in ctx.devices:
        props = dev.properties()
        props["device"] = dev.name
        devices.append(props)
    info = {"backend": ctx.backend, "devices": devices, "logical": ctx.logical,
            "peer_access": ctx.peer_matrix().astype(int).tolist(),
            "links": link_kinds(ctx.devices), "python": platform.python_version()}
    if ctx.backend == "cpu":
        info["cpu_cores"] = os.cpu_count()
        info["note"] = cpu_note(len(ctx.devices), info["cpu_cores"])
    if ctx.backend == "cuda":
        import cupy
        info["cupy"] = cupy.__version__
        info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        info["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
    return info


def cpu_note(devices: int, cores: int | None) -> str:
    """What the CPU backend's virtual devices are, for a reader who counts them as hardware."""
    return (f"CPU virtual devices model a host's GPUs in NumPy, each with its own stream "
            f"threads; all {devices} share this machine's {cores or 'unknown number of'} "
            f"cores and memory, so several of them test multi-device code (exchange, "
            f"asynchrony) and run no faster than one: the algorithms' default "
            f"(--devices auto) runs on one")


def _gib(x):
    return f"{x / 2**30:.1f} GiB" if x else "?"


def run(args) -> int:
    with context_from_args(args) as ctx:
        info = describe(ctx)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    label = "CUDA GPUs" if info["backend"] == "cuda" else "CPU virtual devices (NumPy)"
    print(f"backend: {info['backend']} ({label}), {len(info['devices'])} device(s)")
    if "cupy" in info:
        print(f"cupy {info['cupy']}, CUDA runtime {info['cuda_runtime']}, driver {info['cuda_driver']}")
    if "note" in info:
        print(textwrap.fill(info["note"], 100))
    if info["logical"]:
        gpus = len({d["gpu"] for d in info["devices"] if "gpu" in d})
        print(f"logical devices over {gpus} GPU(s), sharing their memory and multiprocessors: "
              f"for testing multi-device code, not for timing")
    for d in info["devices"]:
        extra = f", {d['multiprocessors']} SMs, cc {d['compute_capability']}" if "multiprocessors" in d else ""
        if d.get("logical"):
            extra += (f", logical: GPU {d['gpu']} shared by {d['sharing']} "
                      f"({d['gpu_multiprocessors']} SMs in all)")
        print(f"  {d['device']:8s} {d['name']}: {_gib(d['memory_free'])} free of "
              f"{_gib(d['memory_total'])}{extra}")
    n = len(info["devices"])
    names = [d["device"] for d in info["devices"]]
    width = max(9, *(len(x) + 1 for x in names))
    print("peer access (row reaches column directly):")
    print(" " * width + "".join(f"{x:>{width}}" for x in names))
    for i in range(n):
        print(f"{names[i]:<{width}}" + "".join(
            f"{('-' if i == j else ('yes' if info['peer_access'][i][j] else 'no')):>{width}}" for j in range(n)))
    print("links (as the driver reports them):")
    print(" " * width + "".join(f"{x:>{width}}" for x in names))
    for i in range(n):
        print(f"{names[i]:<{width}}" + "".join(f"{info['links'][i][j]:>{width}}" for j in range(n)))
    return 0
