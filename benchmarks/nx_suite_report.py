"""Count NetworkX's own tests run through the groute backend, as tests/test_nx_suite.py runs them.

    python benchmarks/nx_suite_report.py                          # every family's NX_TEST_MODULES
    python benchmarks/nx_suite_report.py --json nx_suite.json --markdown nx_suite.md
    python benchmarks/nx_suite_report.py --max-cases 0            # every parametrised case
    python benchmarks/nx_suite_report.py --modules networkx.algorithms.tests.test_core

Runs the NetworkX test modules that the family modules of groute.nx_backend.algorithms name
(``NX_TEST_MODULES``) with ``NETWORKX_TEST_BACKEND=groute`` on two CPU virtual devices
(groute.nx_backend.suite) and prints how many tests ran, how many reached groute, the calls of
each function and the calls groute declined, and what failed; ``--json`` and ``--markdown`` write
the same to files (docs/NETWORKX.md, "NetworkX's own tests", quotes the counts). Exit status 1
when the run has a problem tests/test_nx_suite.py would fail on. Needs no GPU.
"""
from __future__ import annotations

import argparse
import json
import sys

from groute.nx_backend import interface, suite
from groute.nx_backend.info import FUNCTIONS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modules", nargs="+", default=None,
                   help="NetworkX test modules (default: every family's NX_TEST_MODULES)")
    p.add_argument("--max-cases", type=int, default=suite.MAX_CASES,
                   help=f"cases run of one parametrised test (default {suite.MAX_CASES}; "
                        f"0: all)")
    p.add_argument("--workers", type=int, default=None,
                   help="pytest-xdist workers (default: one per core, at most "
                        f"{suite.MAX_WORKERS}, where xdist is installed)")
    p.add_argument("--json", default=None, help="write the counts to this JSON file")
    p.add_argument("--markdown", default=None, help="write the summary and table here")
    args = p.parse_args(argv)
    report = suite.run(args.modules, max_cases=args.max_cases, workers=args.workers)
    expected = interface.EXPECTED_FAILURES
    if args.modules is not None:        # some modules: judge only what they can reach
        files = {f"{m.rsplit('.', 1)[-1]}.py" for m in args.modules}
        expected = {k: v for k, v in expected.items() if k.split(":", 1)[0] in files}
    problems = report.problems(FUNCTIONS if args.modules is None else (), expected)
    print(report.markdown())
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**report.to_json(), "problems": problems}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown())
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
