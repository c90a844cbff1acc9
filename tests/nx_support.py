"""What the tests of the NetworkX backend share: the backend registered with NetworkX (as the
installed package's entry points do) and the device configurations every answer is checked on.

A test module of the backend imports the fixtures it uses::

    from nx_support import on_devices, registered  # noqa: F401 (fixtures)

``registered`` is autouse within the importing module; ``on_devices`` runs a test on one and on
two CPU virtual devices, and on one CUDA GPU (marked ``gpu``: skipped without one).
"""
from __future__ import annotations

import networkx as nx
import pytest

from groute.nx_backend import registration
from groute.runtime import kept


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The backend as NetworkX sees it once groute is installed (entry points); registered
    here by hand where this checkout is not the installed one."""
    added = registration.register()
    quiet = "cache" not in nx.config.warnings_to_ignore     # NetworkX's note on cache hits
    nx.config.warnings_to_ignore.add("cache")
    yield
    if quiet:
        nx.config.warnings_to_ignore.discard("cache")
    kept.shutdown_all()
    if added:
        registration.unregister()


@pytest.fixture(params=[("cpu", 1), ("cpu", 2), pytest.param(("cuda", 1), marks=pytest.mark.gpu)],
                ids=["1dev", "2dev", "gpu"])
def on_devices(request):
    """Every answer on one and on two CPU virtual devices and on one GPU; yields the device
    count."""
    backend, count = request.param
    cfg = nx.config.backends.groute
    with cfg(backend=backend, devices=count, partition="metis"):
        yield count


@pytest.fixture(params=[1, 2], ids=["1dev", "2dev"])
def on_cpu_devices(request):
    """One and two CPU virtual devices only: answers checked to float64's precision (a GPU's
    PageRank computes in float32: ``test_pagerank_on_a_gpu_in_float32``)."""
    cfg = nx.config.backends.groute
    with cfg(backend="cpu", devices=request.param, partition="metis"):
        yield request.param
