"""Shared fixtures and the GPU markers: ``gpu``/``multigpu`` tests skip without CUDA GPUs."""
from __future__ import annotations

import threading

import pytest

from groute.device import cuda_device_count

def pytest_collection_modifyitems(config, items):
    gpus = cuda_device_count()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (CuPy finds none)")
    skip_multi = pytest.mark.skip(reason=f"needs 2+ CUDA GPUs (found {gpus})")
    for item in items:
        if "multigpu" in item.keywords and gpus < 2:
            item.add_marker(skip_multi)
        elif "gpu" in item.keywords and gpus < 1:
            item.add_marker(skip_gpu)


@pytest.fixture
def cpu_ctx():
    """Four CPU virtual devices with a short wait timeout, shut down after the test."""
    from groute import Context
    ctx = Context(4, backend="cpu", timeout=10)
    yield ctx
    ctx.shutdown()


@pytest.fixture
def no_thread_leak():
    """Fails the test if it leaves groute threads running."""
    before = {t.ident for t in threading.enumerate()}
    yield
    import time
    deadline = time.monotonic() + 5
    while True:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("groute")]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not extra, f"leaked threads: {[t.name for t in extra]}"
