"""Helpers shared by test modules (import as ``from support import ...``).

Kept out of conftest.py on purpose: there are several conftest.py files (tests/, tests/graph/),
and ``from conftest import`` would pick whichever was imported first.
"""
from pathlib import Path

import pytest

#: the repository's sibling ``shared/graphs`` (absent on machines without it: tests skip)
SHARED_GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "graphs"


def backends(min_gpus: int = 1):
    """The backends to parametrise over: cpu always; cuda marked ``gpu`` (and ``multigpu`` when
    the test needs ``min_gpus`` >= 2, so it is skipped on a machine with fewer)."""
    marks = [pytest.mark.gpu] + ([pytest.mark.multigpu] if min_gpus >= 2 else [])
    return ["cpu", pytest.param("cuda", marks=marks)]


def context_or_skip(backend: str, k: int, **kwargs):
    """A Context of ``k`` devices, or skip when the machine has fewer CUDA GPUs than that."""
    from groute import Context
    from groute.device import cuda_device_count
    if backend == "cuda" and cuda_device_count() < k:
        pytest.skip(f"needs {k} CUDA GPUs (found {cuda_device_count()})")
    return Context(k, backend=backend, **kwargs)
