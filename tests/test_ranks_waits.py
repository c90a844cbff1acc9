"""A collective's wait polls MPI in bursts (groute.runtime.ranks): MPI moves a large message a
piece per ``Test`` call, so one call per step of the back-off would crawl. Checked with a
request that stands in for MPI's, without starting MPI."""
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


def waiter(timeout=5.0):
    r = object.__new__(ranks_module.Ranks)
    r.timeout, r.stop, r.rank, r.size = timeout, None, 0, 2
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
