"""How devices are physically connected, as the driver reports it (for ``groute info``).

Prefers NVML (``nvidia-ml-py``), falls back to parsing ``nvidia-smi topo -m``; on the CPU
backend the answer is "memcpy" between every pair of virtual devices.
"""
from __future__ import annotations

import logging
import shutil
import subprocess

log = logging.getLogger(__name__)


def link_kinds(devices) -> list[list[str]]:
    """``kinds[i][j]`` describes how device i reaches device j (e.g. ``NV18``, ``PIX``, ``SYS``;
    ``same GPU`` between logical devices sharing one)."""
    n = len(devices)
    if not devices or devices[0].backend != "cuda":
        return [["-" if i == j else "memcpy" for j in range(n)] for i in range(n)]
    table = _nvidia_smi_topo()
    kinds = []
    for a in devices:
        row = []
        for b in devices:
            if a is b:
                row.append("-")
            elif a.gpu == b.gpu:
                row.append("same GPU")
            elif table is not None and a.gpu < len(table) and b.gpu < len(table[a.gpu]):
                row.append(table[a.gpu][b.gpu])
            else:
                row.append("P2P" if a.can_access_peer(b) else "staged")
        kinds.append(row)
    return kinds


def _nvidia_smi_topo():
    """The GPU-to-GPU part of ``nvidia-smi topo -m`` as a matrix of strings, or None."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("nvidia-smi topo failed: %s", exc)
        return None
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("GPU") and parts[0][3:].isdigit():
            cells = parts[1:]
            rows.append(cells)
    if not rows:
        return None
    n = len(rows)
    return [[("-" if c == "X" else c) for c in row[:n]] for row in rows]
