"""Where a benchmark ran: GPUs, driver, CuPy/CUDA, CPU, library versions, project commit.

Every result file carries this so a number can be traced to the machine and code that produced
it. Each probe is best effort and bounded: a missing tool becomes "unknown", never a failure.
"""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from .tuning import setting

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def describe_machine() -> dict:
    """A JSON-ready description of this machine and checkout."""
    info = {
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "memory_bytes": _physical_memory(),
        "libraries": _library_versions(),
        "project": project_version(),
    }
    info.update(gpu_description())
    return info


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _library_versions() -> dict:
    import importlib
    versions = {}
    for name in ("numpy", "scipy", "networkx", "pymetis", "igraph", "matplotlib", "cupy", "cugraph"):
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        versions[name] = getattr(module, "__version__", "installed")
    return versions


def gpu_description() -> dict:
    """GPU model/count/memory, driver and CUDA versions; ``gpus: []`` when CuPy finds none."""
    from groute.device import cuda_device_count
    count = cuda_device_count()
    if count == 0:
        return {"gpus": [], "gpu_count": 0}
    import cupy
    runtime = cupy.cuda.runtime
    gpus = []
    for i in range(count):
        props = runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        gpus.append({"index": i, "name": name, "memory_bytes": int(props["totalGlobalMem"]),
                     "multiprocessors": int(props["multiProcessorCount"]),
                     "compute_capability": f"{props['major']}.{props['minor']}"})
    return {"gpus": gpus, "gpu_count": count,
            "cuda_driver_version": _cuda_version(runtime.driverGetVersion()),
            "cuda_runtime_version": _cuda_version(runtime.runtimeGetVersion()),
            "nvidia_driver": _nvidia_driver(), "cupy": cupy.__version__}


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _run(cmd, cwd=None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _nvidia_driver() -> str:
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else "unknown"


def project_version() -> dict:
    """The groute version and, in a git checkout, the commit and whether tracked files changed.

    ``$GROUTE_COMMIT``, when set, names the commit instead of git (``dirty`` is then unknown):
    a copy of the tree sent to a remote GPU machine may have no ``.git`` or a stale one.
    """
    from groute import __version__
    info = {"version": __version__, "commit": None, "dirty": None}
    commit = setting("GROUTE_COMMIT")
    if commit:  # said explicitly: a copied tree's .git may be stale
        info["commit"] = commit
        info["commit_from"] = "GROUTE_COMMIT"
        return info
    commit = _run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT)
    if commit:
        info["commit"] = commit
        status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT)
        info["dirty"] = bool(status) if status is not None else None
    return info


def summary_line(machine: dict) -> str:
    """One line for tables and plot titles: '4x NVIDIA H200, driver 580.x, CUDA 13.0 | CPU ...'."""
    gpus = machine.get("gpus") or []
    if gpus:
        names = sorted({g["name"] for g in gpus})
        gpu = (f"{len(gpus)}x {' + '.join(names)}, driver {machine.get('nvidia_driver', '?')}, "
               f"CUDA {machine.get('cuda_runtime_version', '?')}, CuPy {machine.get('cupy', '?')}")
    else:
        gpu = "no GPU"
    return f"{gpu} | {machine.get('cpu', '?')} ({machine.get('cpu_cores', '?')} cores)"
