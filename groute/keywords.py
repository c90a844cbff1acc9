"""Keyword arguments checked where the caller passed them.

groute's public functions pass their ``**options`` on to a solver or an engine class; a keyword
none of them takes would surface as a TypeError from inside (``IterateSolver.__init__() got an
unexpected keyword argument``), naming a class the caller never called. :func:`check_keywords`
raises instead in the function the caller called, naming it and the closest keyword it does
take, which :func:`solver_options` finds on the class the options go to.
"""
from __future__ import annotations

import difflib
import functools
import inspect
from typing import Callable

#: words other graph libraries use for options that NetworkX and groute name otherwise
#: (igraph's ``damping``, ``niter``, ``eps``, ``weights`` and ``directed``, graph-tool's
#: ``epsilon``, NetworkX's own ``depth_limit`` of ``bfs_edges``), so that the error for one
#: names the option meant, not the nearest spelling (``damping`` is nearer ``dangling``)
OTHER_LIBRARIES = {"damping": "alpha", "niter": "max_iter", "eps": "tol", "epsilon": "tol",
                   "depth_limit": "cutoff", "weights": "weight", "directed": "symmetric"}


@functools.cache
def solver_options(cls: type) -> frozenset[str]:
    """The keyword arguments ``cls(graph, ...)`` takes: the keyword parameters of its
    ``__init__`` and, while that passes ``**options`` on, of the ``__init__`` it passes them to
    (the next one up its classes). Positional-only parameters (what a subclass gives its base
    itself) are not among them. Computed once per class (a solver is built per call)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]
        names.update(p.name for p in params
                     if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    names.discard("graph")
    return frozenset(names)


def check_keywords(function: Callable | str, given, accepted) -> None:
    """Raise a TypeError, worded as Python's own for an unexpected keyword argument, when
    ``given`` (keyword names) holds one not in ``accepted``: it names ``function`` (the one the
    caller called, or its name) and the closest accepted keyword (:data:`OTHER_LIBRARIES`, else
    the nearest spelling)."""
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return
    name = unknown[0]
    near = OTHER_LIBRARIES.get(name)
    if near not in accepted:
        near = next(iter(difflib.get_close_matches(name, sorted(accepted), n=1, cutoff=0.6)),
                    None)
    hint = f"; did you mean {near!r}?" if near else f"; it takes {', '.join(sorted(accepted))}"
    called = function if isinstance(function, str) else function.__name__
    raise TypeError(f"{called}() got an unexpected keyword argument {name!r}{hint}")
