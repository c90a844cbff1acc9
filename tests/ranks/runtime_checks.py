"""Run as several MPI processes by tests/test_distributed_runtime.py (the CPU backend) and
tests/test_distributed_gpu.py (CUDA): a RankContext's collectives and RankRouter
(``BACKEND collectives TIMEOUT``), a failure on one rank in a step (``BACKEND fail R
TIMEOUT``), one in the middle of a flush, after the headers went and before its rows do,
while the others wait for them in the transport (``BACKEND fail-in-flush R TIMEOUT``), and one
in rank R's own host code, outside any device function, that leaves the context's ``with``
block while the others wait for it (``BACKEND fail-on-host R TIMEOUT``)."""
import sys
import time

import numpy as np

import groute.runtime.ranks as ranks_module
from groute.distributed import Context
from groute.runtime.policies import by_owner
from groute.runtime.router import Router
from groute.solver import DeviceTimer
from lines import say


def collectives(ctx):
    k, r = ctx.num_devices, ctx.rank
    names = ctx.share(ctx.run(lambda device: device.name))
    assert names == [f"{ctx.backend}:{i}" for i in range(k)], names
    assert ctx.ranks.allreduce(r + 1) == k * (k + 1) // 2
    # a timed run's start is a meeting the launches go on from, until the next collective
    with DeviceTimer(ctx):
        assert ctx.ranks.at_marked_meeting()
        ctx.ranks.barrier()
        assert not ctx.ranks.at_marked_meeting()
    assert ctx.ranks.allreduce(np.array([r, -r]), "max").tolist() == [k - 1, 0]
    # objects that fit the collectives' fixed slot, and ones that do not (on some ranks only)
    slot = ranks_module.SLOT_BYTES
    for sizes in ([3] * k, [slot + 1000 * i for i in range(k)], [5 * slot if i == 1 else 0
                                                                  for i in range(k)]):
        assert ctx.ranks.allgather(bytes([r]) * sizes[r]) == \
            [bytes([i]) * sizes[i] for i in range(k)]
        for root in (0, k - 1):
            got = ctx.ranks.bcast(("root", bytes([root]) * sizes[root]) if r == root else None,
                                  root)
            assert got == ("root", bytes([root]) * sizes[root]), (root, len(got[1]))
    router = Router(ctx.devices, ctx.devices, by_owner, packet_size=4, ctx=ctx, name="check",
                    item_shape=(2,))
    for j in range(k):     # rank r sends j + 1 rows of (r, j) to rank j, and two to itself
        router.inputs[r].send(np.full((j + 1, 2), [r, j], np.int32), metadata={"owner": j})
    router.flush()
    got = []
    while (pending := router.outputs[r].poll()) is not None:     # the rows, once they landed
        got.append(ctx.local_device.to_host(pending.wait(ctx.timeout).data))
        pending.release()
    assert [g.shape for g in got] == [(r + 1, 2)] * k, [g.shape for g in got]
    assert [int(g[0, 0]) for g in got] == list(range(k))      # in the order of the ranks
    assert all((g[:, 1] == r).all() for g in got)
    router.close()
    say(f"rank {r}: collectives ok over {ctx.transport}")


def fail(ctx, bad):
    def step(device):
        if device.index == bad:
            time.sleep(0.2)
            raise ZeroDivisionError("injected failure")
        ctx.ranks.barrier("a step the failed rank never reaches")
    stops_every_rank(ctx, step)


def fail_in_flush(ctx, bad):
    router = Router(ctx.devices, ctx.devices, by_owner, packet_size=4, ctx=ctx, name="faulty",
                    item_shape=(2,))
    if ctx.rank == bad:
        def exchange(*args):
            time.sleep(0.2)
            raise ZeroDivisionError("injected failure in the transport")
        router.transport.exchange = exchange

    def step(device):           # on the device's host thread, as an engine's level runs
        k, r = ctx.num_devices, ctx.rank
        rows = ctx.local_device.asarray(np.full((1000, 2), r, np.int32))
        for j in range(k):
            router.inputs[r].send(rows, metadata={"owner": j})
        router.flush()
    stops_every_rank(ctx, step)


def fail_on_host(ctx, bad):
    t0 = time.monotonic()
    try:
        if ctx.rank == bad:
            time.sleep(0.2)
            raise KeyError("injected failure in the host code")
        ctx.ranks.barrier("a meeting the failed rank never reaches")
    except Exception as exc:  # noqa: BLE001 - what the other ranks raise is the test's subject
        say(f"rank {ctx.rank} raised after {time.monotonic() - t0:.2f} s: "
            f"{type(exc).__name__}: {exc}")
        if ctx.rank == bad:
            raise               # out of the context's with block, as a program's error goes
        ctx.end_job(3)
    say(f"rank {ctx.rank} did not raise")


def stops_every_rank(ctx, step):
    t0 = time.monotonic()
    try:
        ctx.run(step)
    except Exception as exc:  # noqa: BLE001 - what every rank raises is the test's subject
        say(f"rank {ctx.rank} raised after {time.monotonic() - t0:.2f} s: "
            f"{type(exc).__name__}: {exc}")
        ctx.end_job(3)
    say(f"rank {ctx.rank} did not raise")


if __name__ == "__main__":
    with Context(backend=sys.argv[1], timeout=float(sys.argv[-1])) as ctx:
        if sys.argv[2] == "collectives":
            collectives(ctx)
        elif sys.argv[2] == "fail":
            fail(ctx, int(sys.argv[3]))
        elif sys.argv[2] == "fail-on-host":
            fail_on_host(ctx, int(sys.argv[3]))
        else:
            fail_in_flush(ctx, int(sys.argv[3]))
