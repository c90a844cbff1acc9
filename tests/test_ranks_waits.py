"""A collective's wait polls MPI in bursts (groute.runtime.ranks): MPI moves a large message a
piece per ``Test`` call, so one call per step of the back-off would crawl; from BULK_BYTES it
blocks in MPI's ``Wait`` on a thread of its own; one that times out says what the other ranks
are doing. Checked with a request that stands in for MPI's and
answers that stand in for the other ranks', without starting MPI."""
import pytest

import groute.waiting
from groute.runtime import ranks as ranks_module
from groute.waiting import WaitTimeout

pytestmark = pytest.mark.timeout(30)


class Request:
    """Done after ``calls`` calls of ``Test``, as a message needing that many pieces is."""

    def __init__(self, calls):
        self.calls, self.tested = calls, 0

    def Test(self):
        self.tested += 1
        return self.tested >= self.calls


def waiter(timeout=5.0, answers=None):
    """A stand-in for rank 0 of a job whose other ranks answer ``answers`` when asked what
    they are doing (default: rank 1 does not answer)."""
    r = object.__new__(ranks_module.Ranks)
    r.timeout, r.stop, r.rank, r.size, r._waits = timeout, None, 0, 2, {}
    r.spin, r.collectives = 0.0, 0
    r.ask_the_others = lambda: answers if answers is not None else {1: None}
    return r


def test_a_wait_makes_progress_between_sleeps(monkeypatch):
    sleeps = []
    monkeypatch.setattr(groute.waiting.time, "sleep", sleeps.append)
    calls = 3 * ranks_module.TESTS_PER_POLL // 2
    request = Request(calls)
    waiter()._wait(request, "a big alltoallv")
    assert request.tested == calls
    assert len(sleeps) == 1          # one burst was not enough, the second finished it


def test_a_wait_still_times_out_naming_what_it_waited_for():
    with pytest.raises(WaitTimeout, match="a barrier on rank 0 of 2"):
        waiter(timeout=0.05)._wait(Request(10**12), "a barrier")


def test_a_timed_out_wait_names_the_user_code_another_rank_runs():
    """The others answered: rank 1 runs a functor, longer than half the timeout, rank 2
    waits in the same collective: the error names the functor, its device and rank, as one
    process names a functor that stalls its devices; the answers ride along."""
    answers = {1: ("cpu:1", ("reach's numpy callable", 0.2), None),
               2: ("cpu:2", None, ("an allreduce", 0.1))}
    with pytest.raises(WaitTimeout) as raised:
        waiter(0.1, answers)._wait(Request(10**12), "an allreduce")
    assert str(raised.value).startswith(
        "reach's numpy callable has been running on cpu:1 (rank 1) for 0.2 s, and rank 0 timed "
        "out waiting for it: a functor slower than the timeout (0.1 s)")
    assert "(the other ranks: rank 1 runs reach's numpy callable (for 0.2 s), rank 2 waits for " \
        "an allreduce (for 0.1 s); the wait: " in str(raised.value)
    # the collective that timed out is still said, and chained
    assert "waiting for an allreduce on rank 0 of" in str(raised.value)
    assert isinstance(raised.value.__cause__, WaitTimeout)
    assert raised.value.user_code_elsewhere == [(0.2, "cpu:1 (rank 1)", "reach's numpy callable")]


def test_a_timed_out_wait_says_which_ranks_did_not_answer_or_run_groute():
    answers = {1: None, 2: ("cpu:2", None, None)}
    with pytest.raises(WaitTimeout, match=r"waiting for a barrier on rank 0 of 2 .*; the other "
                                          r"ranks: rank 1 did not answer \(it left the job's "
                                          r"context, died, or is stuck outside Python\), rank 2 "
                                          r"runs groute's own code, waiting for no rank"):
        waiter(0.05, answers)._wait(Request(10**12), "a barrier")


def test_a_collective_polls_without_sleeping_while_it_spins(monkeypatch):
    """Ranks meet a few tens of microseconds apart around every run: within its spin a wait
    yields the GIL (sleep(0)) and never sleeps the back-off's 20 us or more, which would end
    the meeting late by up to its own length."""
    sleeps = []
    monkeypatch.setattr(groute.waiting.time, "sleep", sleeps.append)
    r = waiter()
    r.spin = 10.0
    request = Request(5 * ranks_module.TESTS_PER_POLL)
    r._wait(request, "a barrier")
    assert sleeps == [0, 0, 0, 0]
    r.spin = 0.0
    sleeps.clear()
    r._wait(Request(5 * ranks_module.TESTS_PER_POLL), "a barrier")
    assert len(sleeps) == 4 and min(sleeps) >= 20e-6


def test_a_wait_spins_only_where_the_rank_has_two_cores_of_its_own():
    spin, rule = ranks_module.SPIN_S, ranks_module.collective_spin
    assert spin > 0
    # unbound: the host's cores shared by its ranks
    assert rule(4, 16, 16) == rule(2, 4, 4) == spin
    assert rule(2, 2, 2) == rule(3, 2, 2) == 0.0
    # bound by the launcher (Open MPI, Slurm) or a container: the rank's own cores
    assert rule(4, 64, 1) == 0.0
    assert rule(4, 64, 2) == rule(1, 64, 16) == spin


def test_a_spinning_wait_still_stops_and_times_out(monkeypatch):
    """The spin is inside the bounded wait: the stop flag and the timeout still end it."""
    import threading
    stop = threading.Event()
    stop.set()
    with pytest.raises(groute.waiting.ContextStopped, match="stopped while waiting for x"):
        groute.waiting.wait_for(lambda: False, what="x", timeout=5, stop=stop, spin=10.0)
    with pytest.raises(WaitTimeout, match="waiting for y"):
        groute.waiting.wait_for(lambda: False, what="y", timeout=0.05, spin=10.0)


class BlockingRequest:
    """Done once ``release`` is set, as MPI's ``Wait`` returns when the message has moved;
    records the thread that waited in it."""

    def __init__(self, error=None):
        import threading
        self.release, self.error, self.threads = threading.Event(), error, []

    def Test(self):
        raise AssertionError("a bulk wait blocks in Wait; it does not poll")

    def Wait(self):
        import threading
        self.threads.append(threading.current_thread().name)
        self.release.wait(10)
        if self.error is not None:
            raise self.error


def test_a_bulk_wait_blocks_in_mpi_on_a_thread_of_its_own():
    """From BULK_BYTES a collective's wait is MPI's blocking Wait (which moves the pieces of
    a large message without the back-off's sleeps between them), on another thread: this one
    still wakes at its end, and for the timeout."""
    import threading
    request = BlockingRequest()
    threading.Timer(0.05, request.release.set).start()
    waiter()._wait(request, "a big allgather", ranks_module.BULK_BYTES)
    assert request.threads == ["groute-mpi-wait"]
    small = Request(1)                      # below BULK_BYTES: polled
    waiter()._wait(small, "a small allgather", ranks_module.BULK_BYTES - 1)
    assert small.tested == 1


def test_a_bulk_wait_times_out_and_raises_what_the_wait_raised():
    stuck = BlockingRequest()
    with pytest.raises(WaitTimeout, match="a big alltoallv on rank 0 of 2"):
        waiter(timeout=0.05)._wait(stuck, "a big alltoallv", ranks_module.BULK_BYTES)
    stuck.release.set()
    failed = BlockingRequest(error=RuntimeError("MPI_ERR_TRUNCATE"))
    failed.release.set()
    with pytest.raises(RuntimeError, match="MPI_ERR_TRUNCATE"):
        waiter()._wait(failed, "a big bcast", ranks_module.BULK_BYTES)
