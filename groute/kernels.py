"""Loading CUDA source: compile once per (file, options, device), report errors with the line.

CUDA kernels live in ``.cu`` files next to the app that uses them. ``load_module(path)`` compiles
with NVRTC through CuPy and caches the module. The include path is the file's folder, then the
library's shared device headers (:data:`HEADER_DIRS`: ``groute/operators`` and ``groute/runtime``),
so ``#include "x.cuh"`` finds either; a caller may put folders of generated headers in between
(``include=``: :func:`write_generated` writes them); ``-arch`` is the current device's, so
Hopper builds use sm_90 code. A compile error becomes a :class:`KernelCompileError` quoting ``file:line`` and the
offending source line.
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


#: Folders of the library's shared device headers, searched after the including file's folder:
#: the operator layer's, and the runtime's (``link.cuh``, the device side of device-initiated
#: links). Paths, not imports: the runtime does not depend on the layers whose headers these are.
HEADER_DIRS = (Path(__file__).with_name("operators"), Path(__file__).with_name("runtime"))

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_dirs(path, include=()) -> tuple[Path, ...]:
    """The include path of the module compiled from ``path``: its folder, the ``include``
    folders, then :data:`HEADER_DIRS`."""
    return (Path(path).resolve().parent, *(Path(d).resolve() for d in include), *HEADER_DIRS)


def include_options() -> tuple[str, ...]:
    """The ``-I`` options that find the library's shared headers (:data:`HEADER_DIRS`), for a
    kernel compiled outside :func:`load_module`, e.g. ``cupy.RawKernel(code, name,
    options=groute.kernels.include_options())`` including ``link.cuh``.

    Examples
    --------
    >>> from groute.kernels import include_options
    >>> all(option.startswith("-I") for option in include_options())
    True
    """
    return tuple(f"-I{d}" for d in HEADER_DIRS)


_generated_lock = threading.Lock()


def write_generated(text: str, name: str) -> Path:
    """The file ``name`` holding ``text`` in a folder of the temporary directory named by the
    text's hash (so a changed text gets a folder of its own and two texts never share one),
    written once (atomically: concurrent writers of the same text agree). For generated
    headers, whose folder a caller passes to :func:`load_module` as ``include``."""
    import hashlib
    import tempfile
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    path = Path(tempfile.gettempdir()) / f"groute-generated-{os.getuid()}" / digest / name
    with _generated_lock:
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    return path


def resolve_include(name: str, including: Path, dirs) -> Path | None:
    """The file ``#include "name"`` in ``including`` opens: the including file's folder first,
    then ``dirs`` in order; None if no such file exists."""
    for folder in (including.parent, *dirs):
        candidate = (folder / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def _includes_digest(path: Path, source: str, include=()) -> str:
    """A hash of every file ``source`` (the text of ``path``) includes with ``#include "..."``,
    found as the compiler finds it (:func:`resolve_include`), followed recursively (each once)."""
    import hashlib
    digest = hashlib.sha256()
    dirs = include_dirs(path, include)
    seen, todo = set(), [(path, source)]
    while todo:
        including, text = todo.pop()
        for name in _INCLUDE.findall(text):
            inc = resolve_include(name, including, dirs)
            if inc is None or inc in seen:
                continue
            seen.add(inc)
            inc_text = inc.read_text()
            digest.update(name.encode() + b"\0" + inc_text.encode())
            todo.append((inc, inc_text))
    return digest.hexdigest()[:16]


def load_module(path, *, options=(), name_expressions=None, cooperative=False, include=()):
    """The compiled ``cupy.RawModule`` for ``path`` on the current device (cached).
    ``include``: folders searched after ``path``'s own (generated headers), part of the key."""
    import cupy
    path = Path(path).resolve()
    dev = cupy.cuda.Device().id
    include = tuple(str(Path(d).resolve()) for d in include)
    key = (str(path), os.path.getmtime(path), tuple(options), tuple(name_expressions or ()),
           cooperative, dev, include)
    with _lock:
        module = _cache.get(key)
        if module is not None:
            return module
        source = path.read_text()
        # CuPy's on-disk cache keys on this text and the options only: name the included
        # files' contents too, so an edit to a header is never served a stale binary
        source += f"\n// groute includes: {_includes_digest(path, source, include)}\n"
        opts = ("-std=c++17", *(f"-I{d}" for d in include_dirs(path, include)), _arch_option(),
                *options)
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


def preload(*kernels) -> None:
    """Load ``kernels`` (CuPy ``RawKernel``s) onto the current GPU now, before any of them runs.

    CUDA loads a kernel when it is first launched (lazy loading), and loading may wait until
    the GPU's running kernels end. Kernels that wait for each other, e.g. the sender and the
    receiver of a device-initiated Link on one GPU (logical devices), would then never run
    together: load them all first. Reading a kernel's attributes compiles and loads it."""
    for kernel in kernels:
        kernel.attributes    # noqa: B018 - read for its effect: the kernel is loaded


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


def pack_struct(fields):
    """A kernel argument struct as a NumPy record with C layout (``align=True``): ``fields`` is
    ``[(name, dtype or (dtype, shape), value), ...]`` in declaration order. Upload its bytes and
    pass the pointer; :func:`check_struct_layout` checks the compiler agrees."""
    import numpy as np
    dtype = np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields]},
                     align=True)
    rec = np.zeros((), dtype=dtype)
    for name, _, value in fields:
        rec[name] = value
    return rec


def check_struct_layout(layout_kernel, rec, names, what):
    """Raise unless ``layout_kernel`` (one thread writing ``sizeof`` and the ``offsetof`` of
    each of ``names`` into an int64 array) reports the layout of the record ``rec``."""
    import cupy
    import numpy as np
    out = cupy.zeros(1 + len(names), dtype=np.int64)
    layout_kernel((1,), (1,), (out,))
    got = out.get().tolist()
    want = [rec.dtype.itemsize] + [rec.dtype.fields[n][1] for n in names]
    if got != want:
        raise RuntimeError(f"{what} layout {got} (size, offsets of {', '.join(names)}) differs "
                           f"from the host's {want}")


def resident_blocks_per_sm(kernel, block: int, gpu: int, shared_mem: int = 0) -> int:
    """Blocks of ``block`` threads of ``kernel`` one SM of GPU ``gpu`` (a CUDA ordinal: a
    device's ``gpu``) holds at once: the driver's occupancy answer for a ``RawKernel`` (with
    ``shared_mem`` bytes of dynamic shared memory), else an estimate from the register count.
    Every persistent grid is sized from this, and the sizes its speed was measured with come
    from it: a change here is a change of grid shapes, to be measured with ``groute bench``.
    A cooperative grid must not be larger than this times the device's ``multiprocessors``:
    on a logical device that is its share of the GPU's, so the grids of every device sharing
    the GPU are resident together (:func:`groute.engines.peer_barrier.launch_resident` holds
    each launch to it)."""
    import cupy
    try:
        return max(1, int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, block, shared_mem)))
    except Exception:  # noqa: BLE001 - fall back to the register count
        attrs = cupy.cuda.Device(gpu).attributes
        regs = max(int(kernel.num_regs), 1)
        per_warp = -(-regs * 32 // 256) * 256
        warps = attrs["MaxRegistersPerMultiprocessor"] // per_warp
        return max(1, min(warps // (block // 32), attrs["MaxThreadsPerMultiProcessor"] // block))
