"""The CLI says what each ``auto`` runs in the words of the rule the solver decides by
(groute.apps.auto_rules), so the help cannot drift from the code."""
import itertools

import pytest

from groute.apps import auto_rules
from groute.apps.auto_rules import BFS_RULES, CC_RULES, PR_RULES, SSSP_RULES, Case, Rule
from groute.cli import build_parser
from groute.graph import load_graph


def shown_help(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return "".join(capsys.readouterr().out.split())     # argparse wraps, also at hyphens


def squeezed(text):
    return "".join(text.split())


@pytest.mark.parametrize("command, rules", [("bfs", BFS_RULES), ("sssp", SSSP_RULES),
                                            ("pr", PR_RULES), ("cc", CC_RULES)])
def test_the_help_prints_every_rule_of_the_app(command, rules, capsys):
    shown = shown_help(command, capsys)
    for option, rule in rules.items():
        if option == "persistent":          # PageRankTuning.persistent has no flag
            continue
        assert squeezed(rule.help()) in shown, (command, option)


def test_a_changed_rule_changes_the_help_and_the_solver(monkeypatch, capsys):
    """Both read the same object: a rule swapped for another is what the help prints and what
    the solvers then do (CPU devices, where the real rules pick otherwise)."""
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    grid, kron = load_graph("grid:12", cache=False), load_graph("kron:10", cache=False)
    always = lambda option, choice: Rule(option, (Case((), choice, "swapped in by a test"),))  # noqa: E731
    with BFS(grid, backend="cpu", devices=1) as solver:
        assert solver.mode == "async"
    monkeypatch.setitem(BFS_RULES, "mode", always("mode", "bsp"))
    assert "bsp(swappedinbyatest)" in shown_help("bfs", capsys)
    with BFS(grid, backend="cpu", devices=1) as solver:
        assert solver.mode == "bsp"
    with SSSP(kron, backend="cpu", devices=1) as solver:
        assert solver.priority is False                 # low diameter: no window
    monkeypatch.setitem(SSSP_RULES, "priority", always("priority", True))
    with SSSP(kron, backend="cpu", devices=1) as solver:
        assert solver.priority is True
    monkeypatch.setitem(PR_RULES, "mode", always("mode", "async"))
    monkeypatch.setitem(PR_RULES, "sweeps", always("sweeps", 3))
    stats = PageRank(grid, backend="cpu", devices=1).run().stats
    assert (stats["mode"], stats["sweeps_per_round"]) == ("async", 3)
    monkeypatch.setitem(PR_RULES, "mode", always("mode", "bsp"))
    monkeypatch.setitem(PR_RULES, "bsp_kernel", always("bsp_kernel", "coo"))
    assert PageRank(grid, backend="cpu", devices=1).run().stats["bsp_kernel"] == "coo"
    with CC(grid, backend="cpu", devices=2) as solver:
        assert solver.path == "kernel"
    monkeypatch.setitem(CC_RULES, "rest", always("rest", "segments"))
    assert "segments(swappedinbyatest)" in shown_help("cc", capsys)
    with CC(grid, backend="cpu", devices=2) as solver:
        assert solver.path == "segments"


def test_bfs_mode_table_is_the_measured_rule():
    """Every combination of the facts: BSP where the peer kernels run a low-diameter graph
    (on one device only a symmetric one, where the kernel pulls), or without them across
    devices of a symmetric low-diameter graph (the worklist pulls); async elsewhere."""
    names = ("one_device", "peer", "symmetric", "low_diameter")
    for values in itertools.product([False, True], repeat=4):
        one, peer, sym, low = values
        facts = {n: (lambda v=v: v) for n, v in zip(names, values)}
        bsp = low and ((peer and (not one or sym)) or (not peer and not one and sym))
        assert BFS_RULES["mode"].decide(facts).choice == ("bsp" if bsp else "async"), values


def test_facts_are_asked_only_when_a_case_needs_them():
    """One device without the peer kernels: no diameter test (it samples BFS)."""
    def never():
        raise AssertionError("asked")
    case = BFS_RULES["mode"].decide({"one_device": lambda: True, "peer": lambda: False,
                                     "symmetric": never, "low_diameter": never})
    assert case.choice == "async"


def test_rules_name_known_facts_and_end_with_a_default():
    with pytest.raises(ValueError, match="last case"):
        Rule("x", (Case(("peer",), 1, "why"),))
    with pytest.raises(ValueError, match="unknown fact"):
        Rule("x", (Case(("fast",), 1, "why"), Case((), 2, "why")))
    for rules in auto_rules.RULES.values():
        for rule in rules.values():
            assert rule.facts() <= set(auto_rules.FACTS)


def test_bfs_priority_is_off_where_no_window_applies():
    """The help says priority is off on the linked workers and on one device, and the stats say
    so: one device reports priority False and no window (it ran without one before too)."""
    from groute.apps.bfs import BFS
    text = BFS_RULES["priority"].help()
    assert "off where the linked workers run" in text and "off where one device" in text
    g = load_graph("grid:8", cache=False)
    for priority in ("auto", True):
        with BFS(g, backend="cpu", devices=1, priority=priority) as solver:
            stats = solver.run(0).stats
        assert stats["priority"] is False and stats["delta"] == float("inf")
    with BFS(g, backend="cpu", devices=1, delta=2) as solver:
        assert solver.run(0).stats["priority"] is True
    with BFS(g, backend="cpu", devices=2, partition="contiguous", mode="async") as solver:
        stats = solver.run(0).stats
    assert (stats["priority"], stats["delta"]) == (True, 4)
