"""A Context spanning MPI ranks (groute.distributed): its collectives and Router, and a failure
on one rank stopping every rank with the rank, device and error named; run as real processes
(mpiexec -n 2 and -n 3) under timeouts."""
import re

import pytest

from mpi_support import needs_mpi, program, run_ranks

pytestmark = needs_mpi


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_and_the_rank_router(n):
    done = run_ranks(n, [program("runtime_checks.py"), "cpu", "collectives", 20], timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(re.findall(r"rank \d: collectives ok over (?:mpi|nccl)", done.stdout)) == \
        [f"rank {r}: collectives ok over mpi" for r in range(n)]


def test_a_failing_rank_stops_every_rank_naming_it():
    done = run_ranks(3, [program("runtime_checks.py"), "cpu", "fail", 1, 20], timeout=60)
    assert done.returncode != 0
    raised = dict(re.findall(r"rank (\d) raised after ([\d.]+) s: .*", done.stdout))
    # rank 0 reports first (the others wait for it to end the job), naming rank 1 and the error
    assert "0" in raised, done.stdout + done.stderr
    assert re.search(r"rank 0 raised after [\d.]+ s: RankFailed: cpu:1 \(rank 1\): "
                     r"ZeroDivisionError: injected failure", done.stdout), done.stdout
    assert float(raised["0"]) < 5           # within a few poll intervals, not the timeout
    assert "did not raise" not in done.stdout


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_failing_in_a_flush_stops_the_ranks_waiting_for_its_rows(n):
    """Rank 1 fails after the flush's headers went, before its rows: the others, waiting for
    them in the transport, give up at its notice, naming it."""
    done = run_ranks(n, [program("runtime_checks.py"), "cpu", "fail-in-flush", 1, 20],
                     timeout=60)
    assert done.returncode != 0
    assert re.search(r"rank 0 raised after ([\d.]+) s: RankFailed: cpu:1 \(rank 1\): "
                     r"ZeroDivisionError: injected failure in the transport", done.stdout), \
        done.stdout + done.stderr
    took = float(re.search(r"rank 0 raised after ([\d.]+) s", done.stdout)[1])
    assert took < 5 and "did not raise" not in done.stdout


def test_a_rank_failing_outside_a_device_function_stops_every_rank_naming_it():
    """Rank 1's own host code raises and leaves the context's with block: the others, waiting
    for it in a collective, stop within a poll interval naming it and the error, not at their
    timeout."""
    done = run_ranks(3, [program("runtime_checks.py"), "cpu", "fail-on-host", 1, 20],
                     timeout=60)
    assert done.returncode != 0
    # (a wait on the caller's thread: the stop it saw, carrying the failure; or, where rank 0
    # learnt of it between waits, the RankFailed itself: a race either way names the device
    # once, not again as the RankFailed's own)
    assert re.search(r"rank 0 raised after [\d.]+ s: "
                     r"(StoppedByFailure|RankFailed): cpu:1 \(rank 1\): "
                     r"KeyError: 'injected failure in the host "
                     r"code'", done.stdout), \
        done.stdout + done.stderr
    took = float(re.search(r"rank 0 raised after ([\d.]+) s", done.stdout)[1])
    assert took < 5 and "did not raise" not in done.stdout


def functor_run(case):
    """functor_checks.py CASE on 3 ranks, rank 1 misbehaving, a 3 s timeout: the output and
    how long rank 0 took to raise."""
    done = run_ranks(3, [program("functor_checks.py"), case, 1, 3], timeout=60)
    assert done.returncode != 0
    found = re.search(r"rank 0 raised after ([\d.]+) s: (.*)", done.stdout)
    assert found, done.stdout + done.stderr
    return float(found[1]), found[2]


def test_a_user_functor_failing_on_one_rank_stops_every_rank_naming_it():
    took, error = functor_run("raise")
    # StoppedByFailure where rank 0 was waiting when it learnt of the failure, the RankFailed
    # itself where it was between waits (its streams idle, a synchronize does not wait)
    assert re.match(r"(StoppedByFailure|RankFailed): cpu:1 \(rank 1\): "
                    r"KeyError: 'injected failure in the functor'", error), error
    assert took < 2


def test_a_functor_stalled_past_the_timeout_on_one_rank_is_named_by_the_others():
    """Rank 1's functor sleeps past the timeout: the others time out waiting for it, ask every
    rank what it is doing and name the functor, its device and rank (as one process names a
    functor that stalls its devices), and what the others wait for."""
    took, error = functor_run("stall")
    assert re.match(r"WaitTimeout: reach's numpy callable in advance\(reach\) has been running "
                    r"on cpu:1 \(rank 1\) for [\d.]+ s, and rank 0 timed out waiting for it: a "
                    r"functor slower than the timeout \(3 s\)", error), error
    assert "rank 2 waits for bsp-exchange's exchange" in error, error
    assert took < 3 + 2         # the timeout, and the others' answers


def test_a_rank_that_left_the_job_is_named_by_those_waiting_for_it():
    took, error = functor_run("leave")
    assert re.match(r"WaitTimeout: timed out after 3 s waiting for .* on rank 0 of 3", error), \
        error
    assert "rank 1 did not answer (it left the job's context, died, or is stuck outside " \
           "Python)" in error, error
    assert took < 3 + 2


@pytest.mark.parametrize("exc, told", [(SystemExit(0), False), (SystemExit(None), False),
                                       (GeneratorExit(), False), (SystemExit(2), True),
                                       (KeyError("x"), True), (KeyboardInterrupt(), True)])
def test_only_a_failure_leaving_a_rank_s_context_is_told_to_the_others(monkeypatch, exc, told):
    """A rank's ``with`` block left by ``sys.exit()``/``sys.exit(0)`` or a closed generator
    ends its program cleanly: the other ranks are not told of a failure (they would raise
    RankFailed); any other exception, a non-zero exit included, is told."""
    from groute.runtime.context import Context
    from groute.runtime.rank_context import RankContext
    said = []
    ctx = RankContext.__new__(RankContext)
    monkeypatch.setattr(RankContext, "tell_failure", lambda self, e: said.append(e))
    monkeypatch.setattr(Context, "__exit__", lambda self, *a: None)
    ctx.__exit__(type(exc), exc, None)
    assert said == ([exc] if told else [])
