"""The host side of the persistent kernels' cross-device barrier (apps.peer_barrier), on CPU
virtual devices: its counter only grows between good runs and is zeroed after a bad one, and a
failed launch stops the launches that would follow it."""
import numpy as np
import pytest

from apps.peer_barrier import CrossDeviceBarrier
from groute import Context


@pytest.fixture
def ctx():
    with Context(3, backend="cpu", timeout=10) as c:
        yield c


@pytest.mark.timeout(30)
def test_counter_advances_by_the_barriers_every_device_crossed(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(4, np.uint64))
    bar.settle([5, 5, 5])
    assert bar.base == 15                       # 3 devices x 5 barriers
    bar.settle([np.uint64(2)] * 3, ok=True)
    assert bar.base == 21


@pytest.mark.timeout(30)
@pytest.mark.parametrize("crossed, ok", [([5, 5, 4], True), ([5, 5, 5], False), ([], True)])
def test_disagreement_failure_or_no_launch_zeroes_the_block(ctx, crossed, ok):
    block = np.full(4, 7, np.uint64)
    bar = CrossDeviceBarrier(ctx.devices, block)
    bar.base = 42
    bar.settle(crossed, ok=ok)
    assert bar.base == 0
    assert not block.any()                      # zeroed on device 0's stream, which was waited for


@pytest.mark.timeout(30)
def test_launch_each_stops_at_the_first_failure_and_returns_it(ctx):
    bar = CrossDeviceBarrier(ctx.devices, np.zeros(1, np.uint64))
    calls = []

    def launch(i, dev):
        calls.append((i, dev.name))
        if i == 1:
            raise RuntimeError("no room for the grid")
    launched, failure = bar.launch_each(launch)
    assert launched == [0]
    assert isinstance(failure, RuntimeError) and "no room" in str(failure)
    assert [i for i, _ in calls] == [0, 1]      # device 2 was never launched
    assert bar.launch_each(lambda i, dev: None) == ([0, 1, 2], None)
