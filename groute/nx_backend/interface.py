"""What the ``networkx.backends`` entry point loads: :data:`backend_interface`.

Its attributes are the functions of :data:`.info.FUNCTIONS` (from :mod:`.algorithms`), the
conversions (:mod:`.graph`), ``can_run`` (each function's rule) and ``on_start_tests``, the
hook through which NetworkX's own test suite, run through this backend, learns which of its
tests are expected to fail and why. Every refusal, by a rule, the conversion or a function,
goes through :mod:`.refusal` (logged; an error where falling back to NetworkX is off).
"""
from __future__ import annotations

import inspect

from . import algorithms
from .graph import from_networkx, to_networkx
from .info import FUNCTIONS
from .refusal import refuse, refusing

#: NetworkX tests expected to fail through this backend (every family's, :mod:`.algorithms`)
EXPECTED_FAILURES = algorithms.expected_failures()


class BackendInterface:
    """The backend NetworkX dispatches to (``backend="groute"``)."""

    convert_from_nx = staticmethod(refusing(from_networkx))
    convert_to_nx = staticmethod(to_networkx)

    @staticmethod
    def can_run(name, args, kwargs):
        """True, or why not (NetworkX then runs the call itself; :func:`.refusal.refuse`): the
        function's rule on the call's arguments. Arguments that do not fit the signature are
        NetworkX's to reject (its run of the call raises NetworkX's TypeError)."""
        fn = algorithms.function(name)
        check = getattr(fn, "can_run", None)
        if check is None:
            return fn is not None
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            return f"arguments do not match {name}(): {exc}"
        bound.apply_defaults()
        verdict = check(bound.arguments)
        if verdict is True:
            return True
        return refuse(name, verdict if isinstance(verdict, str) else "its can_run rule declines")

    @staticmethod
    def on_start_tests(items):
        """Mark the tests of :data:`EXPECTED_FAILURES` as expected to fail, with the reason,
        strictly: a listed test that passes fails the run, so the list cannot go stale."""
        import pytest
        for item in items:
            key = expected_failure(item)
            if key is not None:
                item.add_marker(pytest.mark.xfail(reason=EXPECTED_FAILURES[key], strict=True))


def nx_test_key(item) -> str:
    """A NetworkX test as :data:`EXPECTED_FAILURES` names it: "file.py:Class.test[params]" or
    "file.py:test[params]" (no brackets where the test has no parameters)."""
    cls = getattr(item, "cls", None)
    return f"{item.path.name}:{cls.__name__ + '.' if cls is not None else ''}{item.name}"


def expected_failure(item) -> str | None:
    """The key of :data:`EXPECTED_FAILURES` that lists the pytest ``item``: its own key, or,
    for one case of a parametrised test, the key without parameters (every case); None."""
    key = nx_test_key(item)
    for candidate in (key, key.split("[", 1)[0]):
        if candidate in EXPECTED_FAILURES:
            return candidate
    return None


for _name in FUNCTIONS:
    setattr(BackendInterface, _name, staticmethod(refusing(algorithms.function(_name), _name)))

backend_interface = BackendInterface()
