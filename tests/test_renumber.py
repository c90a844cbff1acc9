"""An answer held by new ids is put back into the graph's order on the devices, each making
its slice through peer memory (groute.runtime.renumber), so a renumbering partition costs the
caller no host pass."""
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import groute
from groute import Context
from groute.apps.bfs import BFS
from groute.apps.pr import PageRank
from groute.graph import load_graph
from groute.runtime.answer_landing import land_answer
from groute.runtime.renumber import KERNEL, MAX_PARTS, DeviceRenumbering, gather_on_devices
from groute.tuning import PageRankTuning

from support import device_cases, fake_peer_context

ROOT = Path(__file__).resolve().parents[1]


def _case(n, offsets, dtype, seed):
    """A permutation ``index`` (graph id -> new id), the values by graph id, and each
    device's part of them by new id."""
    rng = np.random.default_rng(seed)
    index = rng.permutation(n)
    values = (rng.integers(-2**30, 2**30, n) if np.dtype(dtype).kind in "iu"
              else rng.standard_normal(n)).astype(dtype)
    by_new = np.empty_like(values)
    by_new[index] = values
    parts = [by_new[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]
    return index, values, parts


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 3, 4]))
def test_each_device_makes_its_slice_in_the_graph_s_order(backend, k):
    n = 1000
    offsets = np.array([0, 1, 600, 600, 1000][:k] + [n]) if k > 1 else np.array([0, n])
    with Context(k, backend=backend, timeout=20) as ctx:
        for dtype, seed in ((np.int32, 1), (np.float64, 2), (np.int64, 3), (np.float32, 4)):
            index, values, parts = _case(n, offsets, dtype, seed)
            on_devices = [None if p.size == 0 else ctx.devices[i].asarray(p)
                          for i, p in enumerate(parts)]
            renumbering = DeviceRenumbering(ctx, index, offsets)
            slices = renumbering.gather(on_devices)
            assert [int(s.shape[0]) for s in slices] == np.diff(renumbering.bounds).tolist()
            assert np.array_equal(land_answer(ctx, slices), values), dtype


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, k", device_cases([1, 3]))
def test_a_whole_answer_by_new_ids_is_put_in_order_on_one_device(backend, k):
    """Where the devices cannot gather part by part (several processes' devices, or no peer
    access), the whole answer by new ids is put in the graph's order on one device of this
    process: landed with its renumbering, in kept memory from the second answer of its size
    on; a wrong length is refused."""
    from groute.runtime.renumber import WholeAnswerRenumbering
    n = 1000
    offsets = np.linspace(0, n, k + 1).astype(np.int64)
    with Context(k, backend=backend, timeout=20) as ctx:
        for dtype, seed in ((np.float64, 1), (np.int32, 2), (np.uint8, 3)):
            index, values, parts = _case(n, offsets, dtype, seed)
            on_devices = [dev.asarray(p) for dev, p in zip(ctx.devices, parts)]
            renumbering = WholeAnswerRenumbering(ctx, ctx.devices[-1], index)
            held, memory = None, []
            for _ in range(4):      # the caller holds the last answer while the next lands
                got = land_answer(ctx, on_devices, renumbering=renumbering)
                assert got.dtype == values.dtype and np.array_equal(got, values), dtype
                memory.append(got.__array_interface__["data"][0])
                held = got
            # put in order where it landed: from the second answer on, the two kept buffers
            assert memory[1] != memory[2] and memory[3] == memory[1], (dtype, memory)
            del held
        with pytest.raises(ValueError, match="renumbering: 999 values for 1000 vertices"):
            renumbering.apply(np.zeros(n - 1, np.uint8))


def test_parts_that_do_not_match_the_new_ids_are_refused():
    with Context(2, backend="cpu", timeout=10) as ctx:
        with pytest.raises(ValueError, match="do not split 10 new ids over 2 devices"):
            DeviceRenumbering(ctx, np.arange(10), [0, 4, 9])
        renumbering = DeviceRenumbering(ctx, np.arange(10), [0, 4, 10])
        with pytest.raises(ValueError, match="device 1's part is 5 x int32, its new ids 6"):
            renumbering.gather([np.zeros(4, np.int32), np.zeros(5, np.int32)])
        with pytest.raises(ValueError, match="device 1's part is 6 x float64"):
            renumbering.gather([np.zeros(4, np.int32), np.zeros(6, np.float64)])
        with pytest.raises(ValueError, match="no device holds a part"):
            renumbering.gather([None, None])
        with pytest.raises(ValueError, match="1 parts for 2 devices"):
            renumbering.gather([np.zeros(4, np.int32)])
        with pytest.raises(TypeError, match="values of 2 bytes"):
            renumbering.gather([np.zeros(4, np.int16), np.zeros(6, np.int16)])


def test_where_the_devices_can_gather():
    with Context(2, backend="cpu", timeout=10) as ctx:
        assert gather_on_devices(ctx, np.int32) and gather_on_devices(ctx, np.float64)
        assert not gather_on_devices(ctx, np.int16)     # the kernel copies 4 or 8 bytes
    fake = fake_peer_context
    assert gather_on_devices(fake(4, atomics=False), np.int32)  # a read needs no atomics
    assert not gather_on_devices(fake(2, peers=False), np.int32)
    assert not gather_on_devices(fake(MAX_PARTS + 1), np.int32)
    across = fake(2)
    across.ranks = object()                     # another process's memory is out of reach
    assert not gather_on_devices(across, np.int32)


def test_a_16_bit_answer_is_put_in_order_on_the_host(monkeypatch):
    """A solver whose answer's values are not 4 or 8 bytes keeps the host's renumbering."""
    from groute.apps.bfs import BFS as Base

    class Short(Base):
        answer_dtype = np.int16
    g = load_graph("kron:9", cache=False)
    with Context(2, backend="cpu", timeout=20) as ctx, Short(g, ctx=ctx, partition="random") as s:
        got = s.run(0)
        assert got.values.dtype == np.int16 and s._device_renumbering is None
    assert np.array_equal(got.values, groute.bfs(g, 0, backend="cpu", devices=1).values)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([3]))
def test_renumbered_answers_equal_one_device_s_without_a_host_pass(backend, k, monkeypatch):
    """BFS over METIS and random splits and PageRank's degree order cut over k devices: the
    answer of one device, and the partition's host renumbering is never called."""
    from groute.graph.partition import Partition
    from groute.runtime.renumber import WholeAnswerRenumbering

    def refused(*args, **kwargs):
        raise AssertionError("renumbered on the host")
    g = load_graph("kron:11", cache=False)
    one = {s: groute.bfs(g, s, backend="cpu", devices=1).values for s in (0, 7)}
    ranks = groute.pagerank(g, backend="cpu", devices=1, mode="bsp").values
    monkeypatch.setattr(Partition, "to_original", refused)
    monkeypatch.setattr(WholeAnswerRenumbering, "apply", refused)
    with Context(k, backend=backend, timeout=30) as ctx:
        for partition in ("metis", "random"):
            with BFS(g, ctx=ctx, partition=partition) as bfs:
                for s in (0, 7):
                    assert np.array_equal(bfs.run(s).values, one[s]), (partition, s)
        with PageRank(g, ctx=ctx, mode="bsp", tuning=PageRankTuning(bsp_kernel="bins")) as pr:
            got = pr.run()
        assert got.stats["layout"] == "degree-split"
        assert np.abs(got.values - ranks).sum() < 1e-4


def test_the_kernels_compile(tmp_path):
    """renumber.cu compiles with nvcc (no GPU needed)."""
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(KERNEL), "-o",
                           str(tmp_path / "renumber.o")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert KERNEL.parent == ROOT / "groute" / "runtime"


def _busy(dev, seconds):
    """Keep ``dev``'s compute stream busy for about ``seconds`` from now."""
    if dev.backend == "cuda":
        from support import spin
        spin(dev, "compute", seconds)
    else:
        dev.compute_stream.submit(time.sleep, seconds)


def _made_late(dev, values, seconds):
    """``values`` as an array of ``dev`` that its compute stream writes only after being busy
    for ``seconds``."""
    if dev.backend == "cuda":
        with dev.on_compute():
            staged = dev.asarray(values)
            _busy(dev, seconds)
            return staged * 1
    out = np.zeros_like(values)
    _busy(dev, seconds)
    dev.compute_stream.submit(np.copyto, out, values)
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend, k", device_cases([3]))
def test_a_gather_waits_for_the_other_devices_parts_and_they_for_it(backend, k):
    """Parts written late on their devices' streams are read only once written; and a part
    overwritten on its own stream right after the gather returns (its memory reused) is
    overwritten only after every device that reads it has gathered, itself held up."""
    n = 30_011
    offsets = np.linspace(0, n, k + 1).astype(np.int64)
    index, values, parts = _case(n, offsets, np.float64, 7)
    with Context(k, backend=backend, timeout=30) as ctx:
        devs = ctx.devices
        renumbering = DeviceRenumbering(ctx, index, offsets)
        warm = [dev.asarray(p) for dev, p in zip(devs, parts)]
        land_answer(ctx, renumbering.gather(warm))          # compiled, memory pooled
        # device 0 idle; the others write their parts late
        late = [devs[0].asarray(parts[0])] + [_made_late(dev, p, 0.3)
                                              for dev, p in zip(devs[1:], parts[1:])]
        assert np.array_equal(land_answer(ctx, renumbering.gather(late)), values)
        # device 0 held up; the others overwrite their parts right after the gather returns
        parts_now = [dev.asarray(p) for dev, p in zip(devs, parts)]
        _busy(devs[0], 0.3)
        slices = renumbering.gather(parts_now)
        for dev, part in zip(devs[1:], parts_now[1:]):
            if dev.backend == "cuda":
                with dev.on_compute():
                    part.fill(-1.0)
            else:
                dev.compute_stream.submit(part.fill, -1.0)
        assert np.array_equal(land_answer(ctx, slices), values)
