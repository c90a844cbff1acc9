"""NetworkX's own tests run through the backend, and counted: how many ran, how many reached
groute, which functions they called and how often groute declined a call, and what failed.

NetworkX runs its test suite against a backend when ``NETWORKX_TEST_BACKEND`` names one: every
dispatchable call converts its graphs and calls the backend where ``can_run`` allows, and, with
``NETWORKX_FALLBACK_TO_NX``, NetworkX's own function elsewhere. :func:`run` runs the NetworkX
test modules the family modules name (:func:`.algorithms.nx_test_modules`) that way in a pytest
subprocess (NetworkX reads those variables when pytest starts), with this module as a pytest
plugin (``-p groute.nx_backend.suite``) that counts, per test, the calls NetworkX gave groute
(its DEBUG log) and the calls groute declined (:mod:`.refusal`'s INFO log), and writes them to a
JSON file that :class:`SuiteReport` reads. With pytest-xdist installed the tests run on several
worker processes (each test's counts travel in its report to the controller).

A parametrised test runs at most ``max_cases`` of its cases, spread evenly over its parameter
list (the same ones every run), plus any listed in ``EXPECTED_FAILURES``: NetworkX has tests of
hundreds of random graphs (``test_distance_measures.py`` calls ``shortest_path_length`` over a
hundred thousand times), each case through the backend costing what a run on the devices costs.
The report counts the cases left out.

The expected failures are each family module's ``EXPECTED_FAILURES``; the backend's
``on_start_tests`` marks them strictly (a listed test that passes fails), and
:meth:`SuiteReport.problems` also names a listed test that did not run.
"""
from __future__ import annotations

import collections
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: the most cases of one parametrised NetworkX test that run (0: every case)
MAX_CASES = 20
#: the devices NetworkX's tests run on: two CPU virtual devices exercise groute's multi-device
#: code on any machine
BACKEND, DEVICES = "cpu", 2
#: xdist worker processes at most (when installed)
MAX_WORKERS = 4

_CALL = "Using backend '%s' for call to '%s'"


@dataclass
class SuiteReport:
    """What one run of NetworkX's tests through the backend found (the JSON the plugin wrote,
    and the run's exit status and output)."""

    modules: list[str]
    returncode: int
    seconds: float
    outcomes: dict[str, int] = field(default_factory=dict)   # passed, failed, xfailed, ...
    reached: int = 0                                        # tests that called groute
    calls: dict[str, int] = field(default_factory=dict)     # function -> calls of groute's
    refused: dict[str, int] = field(default_factory=dict)   # function -> calls it declined
    failures: list[dict] = field(default_factory=list)      # {"test", "outcome", "message"}
    expected_seen: list[str] = field(default_factory=list)  # EXPECTED_FAILURES keys that ran
    cases_left_out: int = 0
    max_cases: int = MAX_CASES
    workers: int = 1
    output: str = ""                                         # the run's output, its tail

    @property
    def run(self) -> int:
        """Tests that ran (skipped ones not counted)."""
        return sum(n for outcome, n in self.outcomes.items() if outcome != "skipped")

    def problems(self, functions, expected: dict[str, str]) -> list[str]:
        """What makes the run a failure: a test that failed (or passed while listed as an
        expected failure), a function of ``functions`` that no test reached, a listed expected
        failure without a reason or that did not run, no test run, pytest's own error."""
        out = []
        if self.failures:
            out.append(f"{len(self.failures)} NetworkX tests failed through groute and are "
                       f"not listed in EXPECTED_FAILURES with a reason (or are listed and "
                       f"passed):\n" + "\n".join(f"  {f['test']}: {f['message']}"
                                                 for f in self.failures))
        elif self.returncode != 0:
            out.append(f"pytest exited with {self.returncode}:\n{self.output}")
        if self.run == 0:
            out.append("no NetworkX test ran")
        missing = [name for name in functions if not self.calls.get(name)]
        if missing:
            out.append(f"NetworkX's tests never reached groute for {missing} (add the NetworkX "
                       f"test module of each to its family's NX_TEST_MODULES)")
        blank = sorted(k for k, why in expected.items() if not str(why).strip())
        if blank:
            out.append(f"EXPECTED_FAILURES without a reason: {blank}")
        stale = sorted(set(expected) - set(self.expected_seen))
        if stale:
            out.append(f"EXPECTED_FAILURES names tests that did not run: {stale}")
        return out

    def summary(self) -> str:
        """One paragraph: the counts a reader wants first."""
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items()))
        calls, refused = sum(self.calls.values()), sum(self.refused.values())
        left = (f"; {self.cases_left_out} cases of parametrised tests left out (at most "
                f"{self.max_cases} per test)" if self.cases_left_out else "")
        modules = f"{len(self.modules)} module{'s' if len(self.modules) != 1 else ''}"
        return (f"NetworkX's tests through groute: {self.run} run ({kinds}) from {modules}; "
                f"{self.reached} of them reached groute, with {calls} calls to "
                f"{len(self.calls)} of its functions; groute declined {refused} calls "
                f"(NetworkX ran those){left}; {self.seconds:.0f} s in {self.workers} pytest "
                f"process(es).")

    def markdown(self) -> str:
        """The summary and a table of the calls per function."""
        rows = [f"| `{name}` | {self.calls.get(name, 0)} | {self.refused.get(name, 0)} |"
                for name in sorted(set(self.calls) | set(self.refused))]
        return "\n".join([self.summary(), "",
                          "| function | calls of groute's function | calls declined |",
                          "|---|---|---|", *rows, ""])

    def to_json(self) -> dict:
        return {**{k: v for k, v in self.__dict__.items() if k != "output"}, "tests_run": self.run}


def default_workers() -> int:
    """The xdist workers :func:`run` uses: one per core, at most :data:`MAX_WORKERS`; 1 (no
    xdist) where it is not installed."""
    if importlib.util.find_spec("xdist") is None:
        return 1
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def run(modules=None, *, max_cases: int = MAX_CASES, workers: int | None = None,
        timeout: float | None = None) -> SuiteReport:
    """Run NetworkX's test ``modules`` (default: every family's ``NX_TEST_MODULES``) through
    the backend on two CPU virtual devices, in a pytest subprocess.

    Parameters
    ----------
    modules : list of str, optional
        NetworkX test modules by dotted name (``networkx.algorithms.tests.test_core``).
    max_cases : int
        The most cases of one parametrised test that run; 0 runs every case.
    workers : int, optional
        pytest-xdist worker processes (default :func:`default_workers`); 1 runs in one process.
    timeout : float, optional
        Seconds the subprocess may run (None: no limit).

    Returns
    -------
    SuiteReport

    Raises
    ------
    RuntimeError
        groute is not registered with NetworkX here (``pip install -e .`` registers it), or the
        run wrote no report (its output is in the message).
    subprocess.TimeoutExpired
        The run took longer than ``timeout``.

    Examples
    --------
    >>> report = run(["networkx.algorithms.tests.test_core"])     # doctest: +SKIP
    >>> print(report.summary())                                    # doctest: +SKIP
    """
    import networkx as nx
    from . import algorithms
    if "groute" not in nx.utils.backends.backends:
        raise RuntimeError("groute is not registered as a NetworkX backend here: installing "
                           "groute (pip install -e .) registers its entry points")
    modules = list(modules if modules is not None else algorithms.nx_test_modules())
    workers = default_workers() if workers is None else workers
    root = Path(__file__).resolve().parents[2]      # the checkout: its pytest settings apply
    with tempfile.TemporaryDirectory(prefix="groute-nx-suite-") as tmp:
        path = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-p", "no:randomly", "-p", __name__, f"--groute-report={path}",
                   f"--groute-max-cases={max_cases}"]
        if workers > 1:
            command += ["-n", str(workers)]
        env = dict(os.environ, NETWORKX_TEST_BACKEND="groute", NETWORKX_FALLBACK_TO_NX="True",
                   GROUTE_DATA_DIR=tmp)         # METIS splits cached there, not in ~
        start = time.perf_counter()
        done = subprocess.run([*command, "--pyargs", *modules], env=env, cwd=root,
                              capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - start
        output = (done.stdout + done.stderr)[-4000:]
        if not path.exists():
            raise RuntimeError(f"NetworkX's tests through groute wrote no report (exit "
                               f"{done.returncode}):\n{output}")
        found = json.loads(path.read_text())
    return SuiteReport(modules=modules, returncode=done.returncode, seconds=seconds,
                       workers=workers, output=output, max_cases=max_cases, **found)


# ------------------------------------------------------------------------------------------------
# the pytest plugin (-p groute.nx_backend.suite), in the subprocess and in each xdist worker
# ------------------------------------------------------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("groute", "NetworkX's tests through the groute backend")
    group.addoption("--groute-report", default=None, help="write the counts to this JSON file")
    group.addoption("--groute-max-cases", type=int, default=MAX_CASES,
                    help="the most cases of one parametrised test that run (0: all)")


def pytest_configure(config):
    config.pluginmanager.register(_Recorder(config), "groute-nx-suite-recorder")


class _Counter(logging.Handler):
    """Counts NetworkX's calls of groute's functions and groute's refusals, by function."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.calls, self.refused = collections.Counter(), collections.Counter()

    def emit(self, record):
        if record.name.startswith("networkx"):
            if isinstance(record.msg, str) and record.msg.startswith(_CALL) \
                    and record.args[0] == "groute":
                self.calls[record.args[1]] += 1
        elif record.levelno == logging.INFO:        # groute.nx_backend.refusal: function first
            self.refused[record.args[0]] += 1


class _Recorder:
    """Per test: the calls and refusals (in its report's ``user_properties``); over the run
    (where reports arrive: the only process, or xdist's controller): the outcomes and totals."""

    def __init__(self, config):
        import networkx as nx
        from . import refusal
        self.config = config
        self.max_cases = config.getoption("--groute-max-cases")
        settings = nx.config.backends.groute
        settings.backend, settings.devices = BACKEND, DEVICES
        self.counter = _Counter()
        nx_log = logging.getLogger("networkx")      # its DEBUG log names each backend call
        nx_log.setLevel(logging.DEBUG)
        nx_log.addHandler(self.counter)
        nx_log.propagate = False
        logging.getLogger(refusal.__name__).setLevel(logging.INFO)
        logging.getLogger(refusal.__name__).addHandler(self.counter)
        self.phases = collections.defaultdict(dict)     # (file, node id) -> {when: report}
        self.group_sizes = {}                           # parametrised test -> its cases

    # in the process that runs the tests ---------------------------------------------------
    def pytest_collection_modifyitems(self, config, items):
        from .interface import expected_failure
        groups = collections.defaultdict(list)
        for item in items:
            if getattr(item, "callspec", None) is not None:
                groups[_group(item)].append(item)
        dropped = set()
        for cases in groups.values():
            if self.max_cases and len(cases) > self.max_cases:
                kept = evenly(len(cases), self.max_cases)
                dropped.update(id(c) for i, c in enumerate(cases)
                               if i not in kept and expected_failure(c) is None)
        if dropped:
            config.hook.pytest_deselected(items=[i for i in items if id(i) in dropped])
            items[:] = [i for i in items if id(i) not in dropped]
        self.group_sizes = {name: len(cases) for name, cases in groups.items()}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.counter.calls.clear()
        self.counter.refused.clear()

    @pytest.hookimpl(tryfirst=True)      # before pytest's own makes the report from the item
    def pytest_runtest_makereport(self, item, call):
        if call.when != "teardown":
            return
        from .interface import expected_failure, nx_test_key
        group = _group(item)
        item.user_properties.append(("groute", {
            "test": nx_test_key(item), "expected": expected_failure(item),
            "calls": dict(self.counter.calls), "refused": dict(self.counter.refused),
            "group": [group, self.group_sizes[group]] if group in self.group_sizes else None}))

    # where the reports arrive ---------------------------------------------------------------
    def pytest_runtest_logreport(self, report):
        # a NetworkX test's node id has no file (it lies outside the rootdir): the file too
        self.phases[(report.location[0], report.nodeid)][report.when] = report

    def pytest_sessionfinish(self, session):
        path = self.config.getoption("--groute-report")
        if path and not hasattr(self.config, "workerinput"):     # not an xdist worker
            Path(path).write_text(json.dumps(self.tally()))

    def tally(self) -> dict:
        outcomes, calls, refused = (collections.Counter() for _ in range(3))
        failures, expected_seen, reached, groups = [], set(), 0, {}
        for phases in self.phases.values():
            outcome, failed = _outcome(phases)
            outcomes[outcome] += 1
            mine = dict(getattr(phases.get("teardown"), "user_properties", ()) or ()).get(
                "groute")
            if mine is None:
                continue
            calls.update(mine["calls"])
            refused.update(mine["refused"])
            reached += bool(mine["calls"])
            if mine["expected"] is not None and outcome != "skipped":
                expected_seen.add(mine["expected"])
            if mine["group"] is not None:
                name, size = mine["group"]
                groups.setdefault(name, [size, 0])[1] += 1
            if failed is not None:
                failures.append({"test": mine["test"], "outcome": outcome,
                                 "message": _message(failed)})
        return {"outcomes": dict(outcomes), "reached": reached, "calls": dict(calls),
                "refused": dict(refused), "failures": failures,
                "expected_seen": sorted(expected_seen),
                "cases_left_out": sum(size - ran for size, ran in groups.values())}


def _group(item) -> str:
    """The parametrised test of which ``item`` is a case: its file and node id less the
    parameters (a NetworkX test's node id alone does not name its file)."""
    return f"{item.location[0]}::{item.nodeid.split('[', 1)[0]}"


def evenly(n: int, k: int) -> set[int]:
    """``k`` of the indices ``0 .. n-1``, spread evenly, first and last included."""
    if k >= n:
        return set(range(n))
    if k == 1:
        return {0}
    return {round(i * (n - 1) / (k - 1)) for i in range(k)}


def _outcome(phases) -> tuple[str, object]:
    """A test's outcome from its phases' reports (as pytest's summary counts them) and the
    report of its failure, if it failed."""
    setup, call, teardown = (phases.get(w) for w in ("setup", "call", "teardown"))
    for report in (setup, call):
        if report is None or report.passed:
            continue
        if report.failed:
            return ("error" if report is setup else "failed"), report
        return ("xfailed" if hasattr(report, "wasxfail") else "skipped"), None
    if teardown is not None and teardown.failed:
        return "error", teardown
    if call is not None and hasattr(call, "wasxfail"):
        return "xpassed", None
    return "passed", None


def _message(report) -> str:
    """A failed report's one line: its exception's message (or XPASS(strict) and reason)."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text.strip().splitlines()[0][:300] if text.strip() else "failed"
