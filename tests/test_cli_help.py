"""The CLI says what ``--mode auto`` runs in the rule's own words (its docstring), so the help
cannot drift from the rule."""
import pytest

from groute.apps.bfs import BFS
from groute.apps.sssp import SSSP
from groute.apps.traversal_cli import auto_mode_help
from groute.cli import build_parser


@pytest.mark.parametrize("name, solver_cls", [("bfs", BFS), ("sssp", SSSP)])
def test_mode_help_is_the_auto_rule_docstring(name, solver_cls, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([name, "--help"])
    shown = "".join(capsys.readouterr().out.split())     # argparse wraps, also at hyphens
    rule = auto_mode_help(solver_cls)
    assert rule.startswith("Where the kernels that keep the host out of the loop can run")
    assert "``" not in rule and ":mod:" not in rule
    assert "".join(rule.replace("%%", "%").split()) in shown


def test_bfs_help_says_one_device_needs_a_symmetric_graph_for_bsp():
    """The rule BFS.auto_mode applies on one device (BSP only where the kernel can pull)."""
    assert "on one device a symmetric one" in auto_mode_help(BFS)
    assert "symmetric" not in auto_mode_help(SSSP).split("Without them")[0]
