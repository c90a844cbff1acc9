"""groute: asynchronous multi-GPU irregular computation from Python, after Groute (PPoPP 2017).

The dataflow API: a :class:`Context` owns devices (CUDA GPUs through CuPy, or NumPy CPU virtual
devices); :class:`Link` moves packetized segments between endpoints with bounded buffers;
:class:`Router` picks a destination per segment by a policy (:mod:`groute.runtime.policies`).

The algorithms as one-shot functions: ``groute.bfs``, ``groute.sssp``, ``groute.pagerank``,
``groute.connected_components``, ``groute.core_number`` ... (``dir(groute)`` lists them; ``pbf``
is the dataflow example). Each registers itself in its own module (:mod:`groute.registry`);
this facade only names the package that holds them, ``groute.apps``, whose modules are imported
on the first lookup, so ``import groute`` loads neither the algorithms nor SciPy or CuPy.
"""
from ._checkout import add_checkout_finder as _add_checkout_finder

_add_checkout_finder()

import importlib  # noqa: E402
import importlib.util  # noqa: E402

from . import registry as _registry  # noqa: E402
from .errors import ContextStopped, DeviceError, GrouteError, LinkClosed, WaitTimeout  # noqa: E402
from .runtime import (HOST, Context, Endpoint, Link, PendingSegment, Route, Router,  # noqa: E402
                      Segment, SendHandle, broadcast, by_key, by_owner, first_available, ring)

__version__ = "0.1.0"

#: the packages whose modules register algorithms, public functions and subcommands
#: (:mod:`groute.registry` imports them on the first lookup)
_registry.search("groute.apps")

#: public names imported when first asked for: the result type the algorithms return (an
#: algorithm written on the operators returns one too), and the errors that are NetworkX's too
#: (made with NetworkX, :data:`groute.errors.NETWORKX_TWINS`)
_LAZY = {"AppResult": ("groute.results", "AppResult"),
         "GraphNotSupported": ("groute.errors", "GraphNotSupported"),
         "NodeNotFound": ("groute.errors", "NodeNotFound"),
         "PowerIterationFailedConvergence": ("groute.errors", "PowerIterationFailedConvergence")}


#: the names every ``from groute import *`` brings besides the registered functions
_API = ["Context", "Endpoint", "HOST", "Link", "SendHandle", "Router", "Route", "Segment",
        "PendingSegment", "broadcast", "by_key", "by_owner", "first_available", "ring",
        "GrouteError", "DeviceError", "WaitTimeout", "ContextStopped", "LinkClosed",
        "GraphNotSupported", "NodeNotFound", "PowerIterationFailedConvergence", "AppResult"]


def __getattr__(name):
    """The registered public functions (``groute.bfs`` ...: :data:`groute.registry.FUNCTIONS`)
    and :data:`_LAZY`, imported when first asked for; ``__all__`` with the functions' names."""
    if name == "__all__":
        return _API + list(_registry.FUNCTIONS)
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    elif not name.startswith("_") and not _is_submodule(name) and name in _registry.FUNCTIONS:
        value = _registry.FUNCTIONS[name]
    else:
        raise AttributeError(f"module 'groute' has no attribute {name!r}")
    globals()[name] = value
    return value


def _is_submodule(name: str) -> bool:
    """``groute.<name>`` is a module not imported yet (``from groute import graph``): the
    import system loads it, no need to look for algorithms."""
    try:
        return importlib.util.find_spec(f"{__name__}.{name}") is not None
    except (ImportError, ValueError):
        return False


def __dir__():
    return sorted(set(globals()) | set(_registry.FUNCTIONS) | set(_LAZY))
