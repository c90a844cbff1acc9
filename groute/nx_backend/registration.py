"""groute as a NetworkX backend in a process whose groute is a checkout on the path rather than
an installed package: what the entry points (``pyproject.toml``) would register, done by hand.

NetworkX reads its backends' entry points once, when it is imported; a copy of the tree run
with ``PYTHONPATH`` (a GPU machine's) has none, nor does a test run outside an installed
environment. :func:`register` adds what they would add: the backend (loaded on first use), its
:func:`.info.get_info` and its ``nx.config.backends.groute`` with the defaults.
"""
from __future__ import annotations

import importlib.metadata

from . import info


def register() -> bool:
    """Register groute with NetworkX as its entry points would; False (and nothing done) when
    it is registered already.

    Returns
    -------
    bool
        Whether this call registered it (:func:`unregister` undoes that).

    Examples
    --------
    >>> added = register()
    >>> import networkx as nx
    >>> "groute" in nx.config.backends
    True
    """
    import networkx as nx
    from networkx.utils import backends
    if "groute" in backends.backends:
        return False
    backends.backends["groute"] = importlib.metadata.EntryPoint(
        name="groute", value="groute.nx_backend.interface:backend_interface",
        group="networkx.backends")
    backends.backend_info["groute"] = info.get_info()
    # NetworkX that found no backend at import dispatches nothing (a class attribute chosen
    # then): switch it to the dispatching call its entry points would have chosen
    dispatchable = backends._dispatchable
    if dispatchable.__call__ is getattr(dispatchable, "_call_if_no_backends_installed", None):
        dispatchable.__call__ = dispatchable._call_if_any_backends_installed
    if "groute" not in nx.config.backends:      # kept from an earlier register()
        nx.config.backends = nx.utils.Config(groute=nx.utils.Config(**info.DEFAULT_CONFIG),
                                             **nx.config.backends)
    return True


def unregister() -> None:
    """Undo :func:`register` (the backend's configuration stays in ``nx.config.backends``)."""
    from networkx.utils import backends
    backends.backends.pop("groute", None)
    backends.backend_info.pop("groute", None)
    backends._loaded_backends.pop("groute", None)
