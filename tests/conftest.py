"""Shared fixtures and the GPU markers: ``gpu``/``multigpu`` tests skip without CUDA GPUs.

On a machine with at least one GPU but fewer than the tests ask for (MOST_TEST_DEVICES), the
session asks for logical devices (``GROUTE_LOGICAL_DEVICES=1``, unless the environment already
says 0 or 1), so the several-device tests run on the GPUs there are; the header says so.
"""
from __future__ import annotations

import os
import threading

import pytest

from groute.device import cuda_device_count
from support import MOST_TEST_DEVICES, cuda_devices_for_tests


def pytest_configure(config):
    if 1 <= cuda_device_count() < MOST_TEST_DEVICES:
        os.environ.setdefault("GROUTE_LOGICAL_DEVICES", "1")


def pytest_report_header(config):
    gpus = cuda_device_count()
    if gpus and cuda_devices_for_tests() > gpus:
        return (f"groute: {gpus} CUDA GPU(s); tests of more devices run logical devices "
                f"(GROUTE_LOGICAL_DEVICES=1)")
    return f"groute: {gpus} CUDA GPU(s)"


def pytest_collection_modifyitems(config, items):
    gpus = cuda_device_count()
    usable = cuda_devices_for_tests()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (CuPy finds none)")
    skip_multi = pytest.mark.skip(
        reason="needs 2+ CUDA devices (CuPy finds no GPU)" if gpus < 1 else
        f"needs 2+ CUDA devices (found {gpus} GPU; GROUTE_LOGICAL_DEVICES=1 runs logical devices)")
    for item in items:
        if "multigpu" in item.keywords and usable < 2:
            item.add_marker(skip_multi)
        elif "gpu" in item.keywords and gpus < 1:
            item.add_marker(skip_gpu)
        elif _cuda_devices_asked(item) > usable:
            # a (backend, k) case (support.device_cases) of more CUDA devices than there are
            # here, e.g. four on two GPUs with logical devices turned off
            item.add_marker(pytest.mark.skip(
                reason=f"needs {_cuda_devices_asked(item)} CUDA devices (found {usable})"))


def _cuda_devices_asked(item) -> int:
    """The ``k`` of a test case parametrised with ``backend="cuda"`` and ``k``; else 0."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    k = params.get("k")
    return k if params.get("backend") == "cuda" and isinstance(k, int) else 0


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
