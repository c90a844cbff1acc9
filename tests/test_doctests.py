"""The public functions' docstrings (issue 36, item 5): numpydoc sections, and Examples that run
as written, on CPU devices. Every ``groute.<name>`` the registry serves is found here, so a new
algorithm's docstring is checked and its examples run too; so are the functions of
``groute.operators`` and ``groute.engines`` an algorithm writer calls."""
import doctest
import inspect

import pytest

import groute.engines
import groute.operators
from groute import registry

pytestmark = pytest.mark.timeout(120)


def _functions(module):
    return {f"{module.__name__}.{name}": getattr(module, name) for name in module.__all__
            if inspect.isfunction(getattr(module, name))}


#: qualified name -> function: every registered function, and the operator API's
PUBLIC = {**{f"groute.{name}": function for name, function in registry.FUNCTIONS.items()},
          **_functions(groute.operators), **_functions(groute.engines)}


def _sections(function) -> set[str]:
    """The numpydoc sections of ``function``'s docstring (a title underlined by dashes)."""
    lines = inspect.getdoc(function).splitlines()
    return {title.strip() for title, rule in zip(lines, lines[1:])
            if rule.strip() and set(rule.strip()) == {"-"} and len(rule.strip()) == len(title.strip())}


def test_the_public_functions_are_found():
    assert {"groute.bfs", "groute.pagerank", "groute.weakly_connected_components",
            "groute.operators.advance", "groute.operators.run_loop",
            "groute.engines.make_engine"} <= PUBLIC.keys()


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_numpydoc_sections(name):
    """Parameters (when it takes any), Returns and Examples everywhere; Raises on every
    function that checks what it is given (the registered ones and the operators)."""
    function = PUBLIC[name]
    sections = _sections(function)
    takes = [p for p in inspect.signature(function).parameters.values()]
    wanted = {"Returns", "Examples"} | ({"Parameters"} if takes else set())
    if name.startswith(("groute.operators.", "groute.engines.make_engine")) \
            or name.count(".") == 1:
        wanted.add("Raises")
    assert wanted <= sections, f"{name} lacks {sorted(wanted - sections)}"
    documented = inspect.getdoc(function).split("Parameters\n----------\n", 1)[-1]
    for p in takes:
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            assert p.name in documented, f"{name} does not document {p.name}"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_examples_run_as_written(name):
    function = PUBLIC[name]
    tests = doctest.DocTestFinder(recurse=False).find(function, name, globs={})
    assert tests and tests[0].examples, f"{name} has no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    outcome = runner.summarize(verbose=False)
    assert outcome.failed == 0, f"{name}: {outcome.failed} of {outcome.attempted} failed"
