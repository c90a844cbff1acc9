"""What the tests of the NetworkX backend share: the backend registered with NetworkX (as the
installed package's entry points do) and the device configurations every answer is checked on.

A test module of the backend imports the fixtures it uses::

    from nx_support import on_devices, registered  # noqa: F401 (fixtures)

``registered`` is autouse within the importing module; ``on_devices`` runs a test on one and on
two CPU virtual devices, and on one CUDA GPU (marked ``gpu``: skipped without one).
"""
from __future__ import annotations

import importlib.metadata

import networkx as nx
import pytest

from groute.nx_backend import info
from groute.runtime import kept


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The backend as NetworkX sees it once groute is installed (entry points); registered
    here by hand where this checkout is not the installed one."""
    from networkx.utils import backends
    added = "groute" not in backends.backends
    if added:
        backends.backends["groute"] = importlib.metadata.EntryPoint(
            name="groute", value="groute.nx_backend.interface:backend_interface",
            group="networkx.backends")
        backends.backend_info["groute"] = info.get_info()
        nx.config.backends = nx.utils.Config(groute=nx.utils.Config(**info.DEFAULT_CONFIG),
                                              **nx.config.backends)
    quiet = "cache" not in nx.config.warnings_to_ignore     # NetworkX's note on cache hits
    nx.config.warnings_to_ignore.add("cache")
    yield
    if quiet:
        nx.config.warnings_to_ignore.discard("cache")
    kept.shutdown_all()
    if added:
        del backends.backends["groute"], backends.backend_info["groute"]
        backends._loaded_backends.pop("groute", None)


@pytest.fixture(params=[("cpu", 1), ("cpu", 2), pytest.param(("cuda", 1), marks=pytest.mark.gpu)],
                ids=["1dev", "2dev", "gpu"])
def on_devices(request):
    """Every answer on one and on two CPU virtual devices and on one GPU; yields the device
    count."""
    backend, count = request.param
    cfg = nx.config.backends.groute
    with cfg(backend=backend, devices=count, partition="metis"):
        yield count
