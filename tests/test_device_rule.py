"""``devices="auto"``, every algorithm's default (:mod:`groute.engines.device_rule`): one rule
decides from the graph, the engine and the machine how many devices a run uses; an explicit
count, list or context is always honoured; the command line says what was chosen and why."""
from __future__ import annotations

import pytest

from groute.cli import main
from groute.engines import device_rule
from groute.engines.device_rule import BREAK_EVEN_ARCS, choose_devices, devices_rule
from groute.graph import load_graph


@pytest.fixture
def four_gpus(monkeypatch):
    """A machine of four GPUs of ``free`` bytes each, as the rule sees it (nothing runs)."""
    import groute.device
    import groute.memory
    import groute.runtime.context
    state = {"free": 100 << 30}
    monkeypatch.setattr(groute.runtime.context, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(groute.device, "cuda_device_count", lambda: 4)
    monkeypatch.setattr(groute.memory, "free_gpu_bytes", lambda gpu: state["free"])
    return state


def choose(engine, arcs, vertices=1000, **kw):
    return choose_devices("auto", engine=engine, num_vertices=vertices, num_arcs=arcs, **kw)


@pytest.mark.parametrize("engine", sorted(BREAK_EVEN_ARCS))
def test_below_the_break_even_one_gpu_above_it_all(four_gpus, engine):
    arcs = BREAK_EVEN_ARCS[engine]
    if arcs is None:                    # never by default while the graph fits one GPU
        assert choose(engine, 10**12).devices == 1
        return
    small, big = choose(engine, arcs - 1), choose(engine, arcs)
    assert small.devices == 1 and "one GPU is faster" in small.why
    assert big.devices == 4 and f"{arcs:,} arcs or more" in big.why


def test_a_graph_that_does_not_fit_one_gpu_runs_on_all(four_gpus):
    from groute.engines.relax.memory import traversal_bytes
    four_gpus["free"] = 1 << 20          # 1 MiB free: a million-arc graph does not fit
    choice = choose("relax", 10**6, vertices=10**5, estimate=traversal_bytes)
    assert choice.devices == 4 and "does not fit one GPU" in choice.why
    four_gpus["free"] = 100 << 30
    assert choose("relax", 10**6, vertices=10**5, estimate=traversal_bytes).devices == 1


def test_one_gpu_machine_and_cpu_backend_run_on_one(monkeypatch):
    assert choose("iterate", 10**9, backend="cpu").devices == 1
    import groute.device
    import groute.runtime.context
    monkeypatch.setattr(groute.runtime.context, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(groute.device, "cuda_device_count", lambda: 1)
    assert choose("iterate", 10**9).devices == 1


def test_auto_never_asks_for_more_devices_than_vertices(four_gpus):
    assert choose("iterate", BREAK_EVEN_ARCS["iterate"], vertices=3).devices == 3


def test_an_explicit_choice_is_honoured(four_gpus):
    assert choose_devices(2, engine="relax", num_vertices=10, num_arcs=10).devices == 2
    assert choose_devices([1, 3], engine="relax", num_vertices=10, num_arcs=10).devices == [1, 3]
    assert choose_devices(None, engine="relax", num_vertices=10,
                          num_arcs=10**10).devices == 4          # None is auto

    from groute import Context

    class Given(Context):           # a context of 3 devices, never started
        num_devices = 3

        def __init__(self):
            pass
    choice = choose_devices(2, ctx=Given(), engine="relax", num_vertices=10, num_arcs=10)
    assert choice.devices is None and "the given context's 3" in choice.why
    with pytest.raises(ValueError, match="devices must be 'auto', a count or a list"):
        choose_devices("all", engine="relax", num_vertices=10, num_arcs=10)


def test_the_rule_reads_as_it_decides():
    text = devices_rule("iterate").help()
    assert f"{BREAK_EVEN_ARCS['iterate']:,} arcs or more" in text
    assert "does not fit one GPU" in text
    assert "never" in device_rule.summary()


def test_solvers_say_what_they_chose():
    from groute.apps.bfs import BFS
    from groute.apps.kcore import KCore
    from groute.apps.pr import PageRank
    g = load_graph("grid:6")
    with BFS(g, backend="cpu") as solver:
        assert solver.ctx.num_devices == 1 and solver.device_choice.why.startswith("auto: 1 CPU")
    with PageRank(g, backend="cpu", devices=2) as solver:
        assert solver.ctx.num_devices == 2 and solver.device_choice.why == "as asked"
    with KCore(g, backend="cpu") as solver:
        assert solver.ctx.num_devices == 1 and solver.device_choice.why.startswith("auto")


def test_the_command_line_says_what_it_chose(capsys):
    assert main(["cc", "--graph", "grid:6", "--backend", "cpu", "--repeat", "1", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "1 cpu device (auto)" in out and "devices: auto: 1 CPU device" in out
    assert main(["cc", "--graph", "grid:6", "--backend", "cpu", "--devices", "2",
                 "--repeat", "1"]) == 0
    assert "2 cpu devices" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["cc", "--graph", "grid:6", "--devices", "many"])


def test_families_without_an_estimate_have_no_fits_case_and_the_help_says_so():
    from groute.engines.device_rule import FAMILY_ESTIMATES, summary
    for family, estimate in FAMILY_ESTIMATES.items():
        assert ("does not fit one GPU" in devices_rule(family).help()) == (estimate is not None)
    assert "the operator-API algorithms never" in summary()


def test_the_family_estimate_is_asked_when_the_caller_gives_none(four_gpus):
    """The NetworkX backend and the engines decide without passing an estimate: the family's
    is used, so a graph too big for one GPU runs on all of them there too."""
    four_gpus["free"] = 1 << 20
    assert choose("relax", 10**6, vertices=10**5).devices == 4
    assert choose("operators", 10**6, vertices=10**5).devices == 1


def test_a_numpy_device_count_is_a_count():
    import numpy as np
    from groute.apps.bfs import bfs
    g = load_graph("grid:6")
    assert bfs(g, 0, backend="cpu", devices=np.int64(2)).stats["devices"] == 2
