"""NetworkX's own tests of the functions the backend implements, run through it
(groute.nx_backend.suite): on two CPU virtual devices, every test passes or is listed in a family
module's EXPECTED_FAILURES with its reason (strictly: a listed test that passes fails), every
implemented function is reached, and the counts are printed in the test output
(``benchmarks/nx_suite_report.py`` writes them to files). The runner's own accounting is checked
on a small test package of known outcomes.
"""
from __future__ import annotations

import importlib.util
import textwrap
from types import SimpleNamespace

import networkx as nx
import pytest

from groute.nx_backend import interface, suite
from groute.nx_backend.info import FUNCTIONS


def registered_or_skip():
    if "groute" not in nx.utils.backends.backends:
        pytest.skip("groute is not installed with its NetworkX entry points here "
                    "(pip install -e . registers them; make test does)")


@pytest.mark.timeout(600)
def test_networkx_suite_through_the_backend(capsys):
    registered_or_skip()
    report = suite.run(timeout=570)
    with capsys.disabled():
        print(f"\n{report.summary()}")
    problems = report.problems(FUNCTIONS, interface.EXPECTED_FAILURES)
    assert not problems, "\n".join(problems)


#: a NetworkX-like test package of known outcomes; its conftest is NetworkX's (which reads
#: NETWORKX_TEST_BACKEND), as NetworkX's test modules have
FAKE = {
    "conftest.py": "from networkx.conftest import *  # noqa: F401,F403\n",
    "test_known.py": """
        import networkx as nx
        import pytest

        def test_reaches_groute():
            assert nx.single_source_shortest_path_length(nx.path_graph(3), 0) == {0: 0, 1: 1, 2: 2}

        def test_declined_by_groute():
            ranks = nx.pagerank(nx.cycle_graph(4), nstart={0: 1.0})
            assert ranks[0] == pytest.approx(0.25, abs=1e-5)

        def test_fails():
            assert nx.number_of_nodes(nx.path_graph(2)) == 3

        @pytest.mark.xfail(reason="listed", strict=True)
        def test_listed_but_passes():
            assert True

        @pytest.mark.parametrize("n", range(7))
        def test_many_cases(n):
            assert len(nx.path_graph(n)) == n

        def test_skipped():
            pytest.skip("not here")
        """,
    # a test of the same name in another file (NetworkX's node ids do not name the file)
    "test_twin.py": """
        def test_skipped():
            assert True
        """,
}


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-xdist-workers"])
def known_run(request, tmp_path_factory):
    """The known-outcome package's run, in one pytest process and on two xdist workers (each
    test's counts then travel in its report)."""
    registered_or_skip()
    workers = request.param
    if workers > 1 and importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed")
    root = tmp_path_factory.mktemp("fake")
    package = root / "groute_fake_nx_tests"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in FAKE.items():
        (package / name).write_text(textwrap.dedent(text))
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        mp.setenv("PYTHONPATH", str(root))
        return suite.run(["groute_fake_nx_tests.test_known", "groute_fake_nx_tests.test_twin"],
                         max_cases=3, workers=workers, timeout=240)


@pytest.mark.timeout(300)
def test_runner_counts_outcomes_calls_and_refusals(known_run):
    report = known_run
    assert report.outcomes == {"passed": 6, "failed": 2, "skipped": 1}
    assert report.run == 8 and report.cases_left_out == 4
    assert report.calls["single_source_shortest_path_length"] == 1
    assert report.refused == {"pagerank": 1}
    assert report.reached == 1
    assert sorted(f["test"] for f in report.failures) == [
        "test_known.py:test_fails", "test_known.py:test_listed_but_passes"]
    assert any("XPASS(strict)" in f["message"] for f in report.failures)
    assert report.returncode == 1
    assert "8 run" in report.summary() and "4 cases" in report.summary()
    assert "| `pagerank` | 0 | 1 |" in report.markdown()


@pytest.mark.timeout(300)
def test_problems_name_failures_unreached_functions_and_stale_expectations(known_run):
    problems = "\n".join(known_run.problems(
        ["single_source_shortest_path_length", "core_number"],
        {"test_known.py:test_gone": " "}))
    assert "test_known.py:test_fails: assert 2 == 3" in problems
    assert "test_known.py:test_listed_but_passes" in problems
    assert "never reached groute for ['core_number']" in problems
    assert "did not run: ['test_known.py:test_gone']" in problems
    assert "without a reason: ['test_known.py:test_gone']" in problems


def test_evenly_spread_cases():
    assert suite.evenly(500, 20) >= {0, 499} and len(suite.evenly(500, 20)) == 20
    assert suite.evenly(5, 20) == {0, 1, 2, 3, 4}
    assert suite.evenly(7, 3) == {0, 3, 6} and suite.evenly(7, 1) == {0}


def fake_item(path, name, cls=None):
    item = SimpleNamespace(path=SimpleNamespace(name=path), name=name, cls=cls, markers=[])
    item.add_marker = item.markers.append
    return item


def test_expected_failures_are_strict_and_match_cases(monkeypatch):
    class TestThing:
        pass
    monkeypatch.setattr(interface, "EXPECTED_FAILURES", {
        "test_a.py:TestThing.test_x": "every case", "test_a.py:test_y[2]": "one case"})
    items = [fake_item("test_a.py", "test_x[1-2]", TestThing), fake_item("test_a.py", "test_y[2]"),
             fake_item("test_a.py", "test_y[3]"), fake_item("test_b.py", "test_x", TestThing)]
    interface.backend_interface.on_start_tests(items)
    marks = [[(m.name, m.kwargs) for m in item.markers] for item in items]
    assert marks == [[("xfail", {"reason": "every case", "strict": True})],
                     [("xfail", {"reason": "one case", "strict": True})], [], []]
    assert interface.nx_test_key(items[0]) == "test_a.py:TestThing.test_x[1-2]"
