"""Every app's result ``stats`` has its one documented key set, whatever path ran (CPU backend)."""
import pytest

from groute.apps.bfs import BFS
from groute.apps.cc import CC
from groute.apps.cc import STATS_KEYS as CC_KEYS
from groute.results import complete_stats
from groute.apps.pr import STATS_KEYS as PR_KEYS
from groute.apps.pr import PageRank
from groute.apps.sssp import SSSP
from groute.engines.relax.solver import STATS_KEYS as TRAVERSAL_KEYS
from groute.graph import load_graph
from groute.tuning import PageRankTuning
from support import graph_from


def graphs():
    return [load_graph("kron:8", cache=False), load_graph("grid:10", cache=False)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("mode, kernel", [("bsp", "csc"), ("bsp", "bins"), ("bsp", "coo"),
                                          ("async", "auto")])
def test_pagerank_stats_keys(k, mode, kernel):
    for g in graphs():
        with PageRank(g, backend="cpu", devices=k, mode=mode, partition="contiguous",
                      tuning=PageRankTuning(bsp_kernel=kernel)) as solver:
            stats = solver.run().stats
        assert list(stats) == list(PR_KEYS)
        assert stats["mode"] == mode
        assert (stats["iterations"] is None) == (mode == "async")
        assert (stats["rounds"] is None) == (mode == "bsp")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["bsp", "async"])
def test_pagerank_stats_keys_of_an_empty_graph(mode):
    stats = PageRank(graph_from(0, []), backend="cpu", devices=1, mode=mode).run().stats
    assert list(stats) == list(PR_KEYS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("options", [{}, {"rest": "segments"}, {"afforest": False}],
                         ids=["in-place", "segments", "edge-list"])
def test_cc_stats_keys(k, options):
    for g in graphs() + [graph_from(0, [])]:
        with CC(g, backend="cpu", devices=k if g.num_vertices else 1, **options) as solver:
            stats = solver.run().stats
        assert list(stats) == list(CC_KEYS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("solver_cls", [BFS, SSSP])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("mode", ["async", "bsp"])
def test_traversal_stats_keys(solver_cls, k, mode):
    for g in graphs():
        with solver_cls(g, backend="cpu", devices=k, mode=mode, partition="contiguous",
                        timeout=20) as solver:
            stats = solver.run(0).stats
        assert list(stats) == list(TRAVERSAL_KEYS)


def test_an_undocumented_key_is_an_error():
    assert complete_stats(("a", "b"), {"b": 1}) == {"a": None, "b": 1}
    with pytest.raises(ValueError, match="not in the documented set"):
        complete_stats(("a",), {"c": 1})
