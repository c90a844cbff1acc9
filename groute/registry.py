"""The algorithms, public functions and subcommands groute offers, each registered where it is
defined.

An algorithm module says what it is with a decorator on its one-shot function, as NetworkX's
``@_dispatchable`` and nx-cugraph's ``@networkx_algorithm`` do::

    from groute.registry import algorithm

    @algorithm("kcore", solver=KCore, label="k-core")
    def core_number(graph, **options): ...

and its command-line entry with :func:`command` on a ``register(subparsers, common)`` function
(in the same module or a ``*_cli`` module beside it). A plain public function (no solver class)
takes :func:`public`. Nothing central lists them: the facade names the packages that hold
algorithms (:func:`search`, ``groute.apps``), and the first lookup (``groute.bfs``, the CLI,
``groute bench``) imports every module of those packages once, which registers what they
define. So ``import groute`` stays cheap, and adding an algorithm touches its own module, its CLI
entry and its tests.

What ``groute bench`` needs to check and compare an algorithm (references, peers, baselines)
lives with the bench (:mod:`groute.bench.specs`), not here: this table says what an algorithm
*is*.

A registered function checks its keyword arguments before it runs: one it does not take is a
TypeError naming the function the caller called and the closest name it does take
(:func:`groute.keywords.check_keywords`), never a class or function inside it that the keywords
reach. What it takes is its own parameters and, for its ``**options``, the keyword parameters
of the solver class it builds (:func:`groute.keywords.solver_options`). Called on a context
spanning processes, it also checks that every rank made the same call, and raises on every
rank where they did not (:meth:`groute.runtime.ranks.Ranks.check_same_call`).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

from .keywords import check_keywords, solver_options
from .runtime.context import checked_context

#: what an algorithm's module uses: the decorators that register it
__all__ = ["algorithm", "public", "command", "Algorithm", "ALGORITHMS", "FUNCTIONS", "COMMANDS",
           "algorithm_named", "function", "labels", "search", "discover"]


@dataclass(frozen=True)
class Algorithm:
    """A graph algorithm as the facade, the CLI, ``groute demo`` and ``groute bench`` see it."""

    #: its key and CLI name: ``bfs``, ``sssp``, ``pr``, ``cc`` ...
    name: str
    #: how tables print it
    label: str
    #: the solver class: ``solver(graph, ctx=, [partition=, mode=, ...]).run([source])``, which
    #: partitions and uploads once and runs many times
    solver: type
    #: the one-shot function ``function(graph, [source], **options)``, also ``groute.<its name>``
    function: Callable
    #: ``run(source)`` rather than ``run()``
    needs_source: bool = False
    #: runs on edge weights
    weighted: bool = False
    #: the ``mode`` values its solver takes; () when it has no mode argument
    modes: tuple = ()
    #: its solver takes ``partition=``
    takes_partition: bool = True
    #: False: it refuses self-loops (a harness gives it the graph without them)
    self_loops: bool = True
    #: True: it takes directed graphs only (a harness gives it an undirected graph as the
    #: directed graph of its arcs, ``CSRGraph.as_directed``)
    directed: bool = False
    #: its device memory estimate ``memory(n, m, *, weighted, directed, devices)``, returning
    #: a :class:`groute.memory.DeviceBytes`; None when it has none
    memory: Callable | None = None

    @property
    def module(self) -> str:
        """The module that defines it."""
        return self.function.__module__


class _Table(Mapping):
    """A read-only name -> entry mapping that finds the registered modules on first use."""

    def __init__(self):
        self._entries: dict = {}

    def __getitem__(self, name):
        discover()
        return self._entries[name]

    def __iter__(self):
        discover()
        return iter(list(self._entries))    # a module registering while the caller iterates

    def __len__(self):
        discover()
        return len(self._entries)

    def __repr__(self):
        return f"{type(self).__name__}({list(self)})"


#: name -> :class:`Algorithm`, in the order the modules were found (by module name)
ALGORITHMS: Mapping[str, Algorithm] = _Table()
#: public name -> the function ``groute.<name>`` returns (every algorithm's one-shot function,
#: and the functions registered with :func:`public`)
FUNCTIONS: Mapping[str, Callable] = _Table()
#: the subcommands' ``register(subparsers, common)`` functions, by module and function name
COMMANDS: Mapping[str, Callable] = _Table()

_PACKAGES: list[str] = []
_found: set[str] = set()
_lock = threading.RLock()
_discovering = False


def search(package: str) -> None:
    """Look for algorithms, public functions and subcommands in every module of ``package``
    (imported on the first lookup, not now)."""
    with _lock:
        if package not in _PACKAGES:
            _PACKAGES.append(package)


def discover() -> None:
    """Import every module of the packages given to :func:`search` that has not been imported
    yet, so that their decorators register what they define. A module that fails to import is a
    bug, not an absence: its error propagates, naming it."""
    global _discovering
    if _found.issuperset(_PACKAGES):
        return
    with _lock:                    # other threads wait here until the modules are imported
        if _discovering:           # a lookup from a module this thread is importing sees
            return                 # what is registered so far
        _discovering = True
        try:
            for package in list(_PACKAGES):
                if package in _found:
                    continue
                root = importlib.import_module(package)
                for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
                    name = f"{package}.{info.name}"
                    try:
                        importlib.import_module(name)
                    except ImportError as exc:
                        raise ImportError(f"groute could not import {name} while looking for "
                                          f"algorithms: {exc}") from exc
                _found.add(package)
        finally:
            _discovering = False


def _add(table: _Table, key: str, entry, what: str) -> None:
    old = table._entries.get(key)
    if old is not None and old is not entry and _origin(old) != _origin(entry):
        raise ValueError(f"two {what}s named {key!r}: {_origin(old)} and {_origin(entry)}")
    table._entries[key] = entry


def _named(table: _Table, key: str, what: str):
    """``table[key]``, or a KeyError naming ``what`` was asked for and listing the keys there
    are: one message for every lookup by name."""
    try:
        return table[key]
    except KeyError:
        raise KeyError(f"no {what} {key!r} is registered; known: {', '.join(table)}") from None


def _origin(entry) -> str:
    target = entry.function if isinstance(entry, Algorithm) else entry
    return f"{target.__module__}.{target.__qualname__}"


def _checked(function: Callable, solver: type | None) -> Callable:
    """``function`` with its keyword arguments checked (:func:`~groute.keywords.check_keywords`)
    against its own parameters and, behind its ``**options``, ``solver``'s
    (:func:`~groute.keywords.solver_options`); on a context spanning processes (a ``ctx``
    with ranks), that every rank made the same call
    (:meth:`~groute.runtime.ranks.Ranks.check_same_call`)."""
    signature = inspect.signature(function)
    params = signature.parameters.values()
    own = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    passes_on = var_keyword is not None
    accepted = None

    @functools.wraps(function)
    def checked(*args, **kwargs):
        nonlocal accepted
        if accepted is None:
            accepted = own | (solver_options(solver) if passes_on and solver else set())
        check_keywords(function, kwargs, accepted)
        ranks = getattr(checked_context(kwargs.get("ctx")), "ranks", None)
        if ranks is not None:       # a context spanning processes: every rank the same call
            given = signature.bind_partial(*args, **kwargs).arguments
            given.update(given.pop(var_keyword, {}))
            given.pop("ctx", None)
            ranks.check_same_call(f"{function.__name__}()", given)
        return function(*args, **kwargs)
    return checked


def algorithm(name: str, *, solver: type, label: str | None = None, **facts):
    """Register the decorated one-shot function as the algorithm ``name``.

    Parameters
    ----------
    name : str
        The algorithm's key: its subcommand and its name in ``groute bench``.
    solver : type
        Its solver class (set up once, ``run`` many times).
    label : str, optional
        How tables print it (default: ``name``).
    **facts
        The other fields of :class:`Algorithm` (``needs_source``, ``weighted``, ``modes``,
        ``takes_partition``, ``self_loops``, ``directed``, ``memory``).

    Returns
    -------
    callable
        A decorator that registers the function (also as ``groute.<function name>``) and
        returns it with its keyword arguments checked (module docstring).
    """
    def register(function):
        function = _checked(function, solver)
        entry = Algorithm(name=name, label=label or name, solver=solver, function=function,
                          **facts)
        _add(ALGORITHMS, name, entry, "algorithm")
        _add(FUNCTIONS, function.__name__, function, "public function")
        return function
    return register


def public(function=None, *, solver: type | None = None):
    """Offer the decorated function as ``groute.<its name>`` (a function that is not an
    algorithm of the bench: ``shortest_path``, ``katz_centrality``, ``pbf``), with its keyword
    arguments checked; ``@public(solver=S)`` when its ``**options`` go to the solver ``S``."""
    def register(function):
        function = _checked(function, solver)
        _add(FUNCTIONS, function.__name__, function, "public function")
        return function
    return register if function is None else register(function)


def command(register):
    """Add the subcommands that the decorated ``register(subparsers, common)`` defines to the
    ``groute`` command line (listed in ``groute --help`` by module name, after the tools)."""
    _add(COMMANDS, f"{register.__module__}.{register.__qualname__}", register, "command")
    return register


def labels() -> str:
    """The registered algorithms as tables print them (``BFS, SSSP, PageRank, ...``): what
    ``groute --help`` and ``groute demo --help`` list, a new algorithm too."""
    return ", ".join(entry.label for entry in ALGORITHMS.values())


def algorithm_named(name: str) -> Algorithm:
    """The registered algorithm ``name``; a KeyError listing the known ones."""
    return _named(ALGORITHMS, name, "algorithm")


def function(name: str) -> Callable:
    """The public function registered as ``name``; a KeyError listing the known ones."""
    return _named(FUNCTIONS, name, "function")
