"""The host side of CUDA IPC between ranks (groute.device.ipc) on stand-ins: which address each
device's array has in this process, what every rank hears when one cannot export or map, the
closing order, and when the ranks' GPUs cannot map each other's memory. The mappings themselves
need GPUs: tests/test_distributed_gpu.py runs BFS and SSSP's peer kernel over them."""
import contextlib
from types import SimpleNamespace

import pytest

from groute.device import ipc


def array_at(address):
    return SimpleNamespace(data=SimpleNamespace(ptr=address))


class Ranks:
    """Rank 0 of two: ``theirs(what, mine)`` is rank 1's entry of each allgather; barriers are
    recorded."""

    def __init__(self, theirs):
        self.rank, self.size, self.theirs, self.met, self.heard = 0, 2, theirs, [], []

    def allgather(self, obj, what):
        self.heard.append(what)
        return [obj, self.theirs(what, obj)]

    def barrier(self, what):
        self.met.append(what)


def rank_zero(theirs, places=None):
    return SimpleNamespace(ranks=Ranks(theirs), places=places or [],
                           local_device=SimpleNamespace(use=contextlib.nullcontext, gpu=0))


def test_in_one_process_the_addresses_are_the_devices_own():
    addresses = ipc.PeerAddresses(SimpleNamespace(ranks=None))
    assert addresses.table([array_at(0x100), None, array_at(0x300)], "the inboxes") == [0x100, 0, 0x300]
    addresses.close()


@pytest.fixture
def driver(monkeypatch):
    """export, open and close of handles, recorded: rank 0 exports b"h0" at offset 8, an
    opened b"h1" maps at 0x9000."""
    seen = {"opened": [], "closed": []}

    def export(array):
        return None if array is None else (b"h0", 8)

    def open_handle(handle):
        seen["opened"].append(handle)
        return 0x9000

    monkeypatch.setattr(ipc, "export", export)
    monkeypatch.setattr(ipc, "open_handle", open_handle)
    monkeypatch.setattr(ipc, "close_handle", lambda base: seen["closed"].append(base))
    monkeypatch.setattr(ipc, "finish_device_work", lambda: seen["closed"].append("waited"))
    return seen


def test_across_ranks_another_rank_s_array_is_its_allocation_opened_here_at_its_offset(driver):
    """Each table is one allgather of the handles and one of the errors; a rank without the
    array (None) gives 0; every opening is closed once, before the ranks meet."""
    ctx = rank_zero(lambda what, mine: ((b"h1", 32), None) if "handles" in what else None)
    addresses = ipc.PeerAddresses(ctx)
    assert addresses.table([array_at(0x500), None], "the values") == [0x500, 0x9000 + 32]
    assert addresses.table([array_at(0x600), None], "the inboxes") == [0x600, 0x9000 + 32]
    assert driver["opened"] == [b"h1", b"h1"] and ctx.ranks.met == []
    addresses.close()
    assert driver["closed"] == ["waited", 0x9000, 0x9000]   # no kernel of ours still writes
    assert ctx.ranks.met == ["the ranks closing their CUDA IPC mappings"]
    addresses.close()                   # idempotent: nothing more closed, no second meeting
    assert len(ctx.ranks.met) == 1 and len(driver["closed"]) == 3
    assert addresses._exported == []


def test_every_rank_that_made_a_table_meets_at_close_even_if_it_opened_nothing(driver,
                                                                              monkeypatch):
    """A rank whose export failed opened nothing, but the ranks that opened its peers' memory
    meet at close: so does it, or they would wait for it until the timeout."""
    def export(array):
        raise RuntimeError("not in a device allocation")
    monkeypatch.setattr(ipc, "export", export)
    ctx = rank_zero(lambda what, mine: ((b"h1", 0), None) if "handles" in what else None)
    addresses = ipc.PeerAddresses(ctx)
    with pytest.raises(RuntimeError):
        addresses.table([array_at(0x500), None], "the values")
    addresses.close()
    assert ctx.ranks.met == ["the ranks closing their CUDA IPC mappings"]


def test_memory_another_rank_may_still_map_is_kept_when_the_ranks_cannot_meet(driver):
    ctx = rank_zero(lambda what, mine: ((b"h1", 0), None) if "handles" in what else None)
    addresses = ipc.PeerAddresses(ctx)
    mine = array_at(0x500)
    addresses.table([mine, None], "the values")

    def stopped(what):
        raise RuntimeError("the context stopped: rank 1 failed")
    ctx.ranks.barrier = stopped
    addresses.close()
    assert driver["closed"] == ["waited", 0x9000] and addresses._exported == [mine]


def test_a_rank_that_cannot_map_makes_every_rank_raise_naming_it(driver):
    ctx = rank_zero(lambda what, mine: ((b"h1", 0), None) if "handles" in what
                    else "rank 1 could not map rank 0's the values: CUDARuntimeError: invalid")
    with pytest.raises(RuntimeError, match=r"CUDA IPC between the ranks failed: rank 1 could not "
                                           r"map rank 0's the values: CUDARuntimeError"):
        ipc.PeerAddresses(ctx).table([array_at(0x500), None], "the values")


def test_a_rank_that_cannot_export_raises_on_every_rank_and_maps_nothing(driver, monkeypatch):
    def export(array):
        raise RuntimeError("not in a device allocation")
    monkeypatch.setattr(ipc, "export", export)
    ctx = rank_zero(lambda what, mine: ((b"h1", 0), None) if "handles" in what else None)
    with pytest.raises(RuntimeError, match=r"rank 0 could not export the values: RuntimeError: "
                                           r"not in a device allocation"):
        ipc.PeerAddresses(ctx).table([array_at(0x500), None], "the values")
    assert driver["opened"] == []


def place(host, gpu):
    return SimpleNamespace(host=host, gpu=gpu)


def test_the_ranks_must_be_few_and_on_one_host():
    ctx = rank_zero(None, [place("a", "0000:1B:00.0")] * 2)
    ctx.ranks.size = 9
    assert ipc.ipc_unavailable(ctx, 8) == "it runs on at most 8 devices (the job has 9 ranks)"
    ctx = rank_zero(None, [place("a", "0000:1B:00.0"), place("b", "0000:1B:00.0")])
    assert ipc.ipc_unavailable(ctx, 8).startswith("the ranks run on 2 hosts (a, b): CUDA IPC")


def test_what_one_rank_cannot_reach_is_every_rank_s_answer(monkeypatch):
    """Each rank checks the GPUs it sees; one allgather: the first reason any rank has is
    everyone's (the same choice on every rank), and a rank that cannot ask says so."""
    places = [place("a", "0000:1B:00.0"), place("a", "0000:2C:00.0")]
    monkeypatch.setattr(ipc, "_unreachable_here", lambda ctx: None)
    told = "rank 1 does not see rank 0's GPU (0000:1B:00.0); its CUDA_VISIBLE_DEVICES hides it"
    assert ipc.ipc_unavailable(rank_zero(lambda what, mine: told, places), 8) == told
    assert ipc.ipc_unavailable(rank_zero(lambda what, mine: None, places), 8) is None

    def fails(ctx):
        raise ImportError("no CuPy")
    monkeypatch.setattr(ipc, "_unreachable_here", fails)
    why = ipc.ipc_unavailable(rank_zero(lambda what, mine: None, places), 8)
    assert why == "rank 0 could not ask its GPU: ImportError: no CuPy"


def test_the_rules_across_processes():
    """exchange 'auto' across the ranks of one host, each on a GPU of its own, is the peer
    kernel over CUDA IPC, and PageRank's persistent 'auto' its persistent kernel; ranks
    sharing a GPU (whose persistent kernels would take turns on it) or where the kernels
    cannot run get the worklist and the host-driven iterations. SSSP's priority 'auto' there
    is off without a delta (no diameter test on a part)."""
    from groute.engines.relax.rules import EXCHANGE, WEIGHTED_RULES

    def facts(**given):
        def ask(name):
            return lambda: given[name]
        return {name: ask(name) for name in given}

    case = EXCHANGE.decide(facts(one_device=False, processes=True, shared_gpus=False, peer=True))
    assert case.choice == "peer" and "CUDA IPC" in case.why
    for shared, peer in ((True, True), (False, False)):
        case = EXCHANGE.decide(facts(one_device=False, processes=True, shared_gpus=shared,
                                     peer=peer))
        assert case.choice == "host" and "exchange='peer'" in case.why
    assert EXCHANGE.decide(facts(one_device=False, processes=False, peer=True)).choice == "peer"
    from groute.engines.iterate.rules import ITERATE_RULES
    persistent = ITERATE_RULES["persistent"]
    case = persistent.decide(facts(persistent_can_run=True, processes=True, shared_gpus=True))
    assert case.choice is False and "persistent=True" in case.why
    case = persistent.decide(facts(persistent_can_run=True, processes=True, shared_gpus=False))
    assert case.choice is True and "CUDA IPC" in case.why
    assert persistent.decide(facts(persistent_can_run=False, processes=True,
                                   shared_gpus=False)).choice is False
    assert persistent.decide(facts(persistent_can_run=True, processes=False)).choice is True
    priority = WEIGHTED_RULES["priority"]
    assert priority.decide(facts(windowed=True, delta_given=False, processes=True)).choice is False
    assert priority.decide(facts(windowed=True, delta_given=True, processes=True)).choice is True
