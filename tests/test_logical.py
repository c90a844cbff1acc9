"""Logical CUDA devices (groute.device.logical): asked for only explicitly, placed round-robin on
the GPUs there are, each sized to its share of its GPU's multiprocessors; the bench refuses
them. The CPU cases check the rules; the GPU cases check a real context of logical devices."""
import numpy as np
import pytest

from groute import Context
from groute.config import logical_devices_requested
from groute.device.logical import Placement, place, sm_share
from support import need_gpus


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("ON", True),
                                             ("0", False), ("", False), ("no", False)])
def test_environment_asks_for_logical_devices(monkeypatch, value, expected):
    monkeypatch.setenv("GROUTE_LOGICAL_DEVICES", value)
    assert logical_devices_requested() is expected
    assert logical_devices_requested(True) is True      # the option wins over the environment
    assert logical_devices_requested(False) is False


def test_unset_environment_means_no_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.delenv("GROUTE_LOGICAL_DEVICES", raising=False)
    assert logical_devices_requested() is False
    monkeypatch.setenv("GROUTE_LOGICAL_DEVICES", "maybe")
    with pytest.raises(ValueError, match="GROUTE_LOGICAL_DEVICES='maybe'"):
        logical_devices_requested()


def test_more_devices_than_gpus_are_refused_unless_asked():
    with pytest.raises(ValueError, match=r"device index 1 does not exist .*GROUTE_LOGICAL_DEVICES=1"):
        place([0, 1], 1, logical=False)
    assert place([0], 1, logical=False) == [Placement(0, 0, 1)]


def test_logical_devices_go_round_robin_and_count_who_shares():
    assert place([0, 1, 2, 3], 1, logical=True) == [Placement(i, 0, 4) for i in range(4)]
    got = place([0, 1, 2], 2, logical=True)
    assert [(p.gpu, p.sharing) for p in got] == [(0, 2), (1, 1), (0, 2)]
    assert [p.logical for p in got] == [True, False, True]  # device 1: GPU 1, whole
    assert Placement(1, 0, 1).logical                       # a whole GPU under another index


def test_no_logical_devices_when_the_gpus_suffice():
    assert [p.logical for p in place([0, 1], 2, logical=True)] == [False, False]


def test_each_device_gets_its_share_of_the_multiprocessors():
    assert sm_share(132, Placement(0, 0, 1)) == 132
    assert sm_share(132, Placement(2, 0, 3)) == 44
    assert sm_share(132, Placement(3, 0, 4)) == 33
    with pytest.raises(ValueError, match=r"5 logical devices on GPU 0 with 4 multiprocessors .*at most 4"):
        sm_share(4, Placement(4, 0, 5))


def test_cpu_contexts_are_never_logical():
    with Context(3, backend="cpu", logical=True) as ctx:
        assert not ctx.logical and len(ctx) == 3


def test_bench_refuses_logical_devices(monkeypatch):
    """The bench's context never takes logical devices, whatever the environment says: a case
    on more devices than GPUs is skipped and says why."""
    from groute.bench import runner
    monkeypatch.setenv("GROUTE_LOGICAL_DEVICES", "1")
    monkeypatch.setattr("groute.device.cuda_device_count", lambda: 1)
    bench = runner.SuiteRun.__new__(runner.SuiteRun)
    bench.contexts, bench.backend = {}, "cuda"
    with pytest.raises(runner._NotEnoughDevices, match="logical devices are for testing"):
        bench._context(2)


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_cuda_logical_devices_are_devices_of_their_own(k, capsys, monkeypatch):
    """On fewer GPUs than ``k``: k devices with their own index, streams and allocations, each
    sized to its share of its GPU's multiprocessors, peers of each other; copies between two on
    one GPU arrive; the info command says they are logical."""
    need_gpus(k)
    from groute.commands.info import describe
    from groute.device import cuda_device_count
    gpus = cuda_device_count()
    if gpus >= k:
        pytest.skip(f"{gpus} GPUs: a {k}-device context has no logical devices")
    import cupy
    with Context(k, backend="cuda", logical=True, timeout=20) as ctx:
        assert ctx.logical and [d.index for d in ctx] == list(range(k))
        assert len({d.compute_stream.ptr for d in ctx}) == k
        for d in ctx:
            total = cupy.cuda.runtime.getDeviceProperties(d.gpu)["multiProcessorCount"]
            sharing = sum(1 for e in ctx if e.gpu == d.gpu)
            assert d.multiprocessors == total // sharing and d.sharing == sharing
        assert ctx.peer_matrix().sum() == k * (k - 1)
        a, b = ctx.devices[0], ctx.devices[-1]
        src = a.asarray(np.arange(1000, dtype=np.int32))
        dst = b.zeros(1000, np.int32)
        assert src.data.ptr != dst.data.ptr
        # zeros is queued on b's compute stream: the copy stream waits for it, as a Link does
        b.copy_stream.wait_event(b.compute_stream.record())
        b.copy_stream.copy(dst, src)
        b.copy_stream.synchronize()
        np.testing.assert_array_equal(b.to_host(dst), np.arange(1000))
        info = describe(ctx)
        assert info["logical"] and all(d["logical"] for d in info["devices"] if "gpu" in d)
        assert "same GPU" in info["links"][0]
    from groute.cli import main
    monkeypatch.setenv("GROUTE_LOGICAL_DEVICES", "1")
    assert main(["info", "--backend", "cuda", "--devices", str(k)]) == 0
    out = capsys.readouterr().out
    assert "logical devices over" in out and "shared by" in out, out
