"""Loading CUDA source: compile once per (file, options, device), report errors with the line.

CUDA kernels live in ``.cu`` files next to the app that uses them. ``load_module(path)`` compiles
with NVRTC through CuPy (``-I`` the file's folder, so ``#include "x.cuh"`` works; ``-arch`` of the
current device, so Hopper builds use sm_90 code) and caches the module. A compile error becomes a
:class:`KernelCompileError` quoting ``file:line`` and the offending source line.
"""
from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from .errors import GrouteError

_cache: dict = {}
_lock = threading.Lock()


class KernelCompileError(GrouteError):
    """NVRTC rejected a .cu file; the message quotes file:line and the source line."""


def _arch_option():
    import cupy
    dev = cupy.cuda.Device()
    cc = dev.compute_capability  # e.g. '90'
    return f"--gpu-architecture=sm_{cc}"


def load_module(path, *, options=(), name_expressions=None, cooperative=False):
    """The compiled ``cupy.RawModule`` for ``path`` on the current device (cached)."""
    import cupy
    path = Path(path).resolve()
    dev = cupy.cuda.Device().id
    key = (str(path), os.path.getmtime(path), tuple(options), tuple(name_expressions or ()),
           cooperative, dev)
    with _lock:
        module = _cache.get(key)
        if module is not None:
            return module
        source = path.read_text()
        opts = ("-std=c++17", f"-I{path.parent}", _arch_option(), *options)
        module = cupy.RawModule(code=source, options=opts, name_expressions=name_expressions,
                                enable_cooperative_groups=cooperative)
        try:
            module.compile() if hasattr(module, "compile") else None
            if name_expressions is None:
                module.get_module() if hasattr(module, "get_module") else None
        except cupy.cuda.compiler.CompileException as exc:
            raise KernelCompileError(_explain(path, source, str(exc))) from None
        _cache[key] = module
        return module


def get_kernel(path, name, **kwargs):
    """One kernel (``RawKernel``) from a .cu file, compiled for the current device."""
    import cupy
    module = load_module(path, **kwargs)
    try:
        return module.get_function(name)
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(_explain(Path(path), Path(path).read_text(), str(exc))) from None


_ERR = re.compile(r"\((\d+)\): (error|warning)[^:]*: (.*)")


def _explain(path: Path, source: str, log: str) -> str:
    lines = source.splitlines()
    out = [f"CUDA compile of {path} failed:"]
    for m in _ERR.finditer(log):
        n = int(m.group(1))
        if m.group(2) != "error":
            continue
        text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        out.append(f"  {path.name}:{n}: {m.group(3)}\n      {text}")
    if len(out) == 1:
        out.append(log.strip()[:2000])
    return "\n".join(out)
