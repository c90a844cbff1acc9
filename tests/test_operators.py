"""The operator layer's host side: the direction rule, and how kernels find the shared headers."""
import re
from pathlib import Path

import numpy as np
import pytest

from groute import kernels
from groute.operators import direction

ROOT = Path(__file__).resolve().parents[1]
OPERATORS = ROOT / "groute" / "operators"


def test_direction_rule_boundaries():
    # push -> pull once the frontier's arcs times ALPHA exceed the unexplored arcs
    assert not direction.push_to_pull(10, 10 * direction.ALPHA)
    assert direction.push_to_pull(10, 10 * direction.ALPHA - 1)
    # pull goes on while the frontier holds at least 1/BETA of the vertices
    assert direction.stay_pulling(10, 10 * direction.BETA)
    assert not direction.stay_pulling(10, 10 * direction.BETA + 1)
    assert direction.scout(2, 2 * direction.SCOUT_MIN - 1)
    assert not direction.scout(2, 2 * direction.SCOUT_MIN)


def test_direction_state_counts_pushed_arcs_as_the_kernels_do():
    """Unexplored arcs: the total minus the arcs of the levels pushed so far; an exact figure
    given instead wins; a pull stays while the frontier is large."""
    a = direction.ALPHA
    state = direction.DirectionState(vertices=1000, arcs=100 * a)
    assert not state.wants_arcs(1) and state.wants_arcs(2 * 1000 // direction.SCOUT_MIN + 1)
    assert not state.next(10, front_arcs=50) and state.explored == 50
    assert state.next(10, front_arcs=100) and state.pulling        # 100a > 100a - 50
    assert not state.wants_arcs(1000)
    assert state.next(-(-1000 // direction.BETA)) and not state.next(1)
    fresh = direction.DirectionState(vertices=1000, arcs=100 * a)
    assert not fresh.next(10, front_arcs=1, unexplored=a) and fresh.next(10, 2, unexplored=a)


def test_direction_constants_reach_the_kernels_only_as_options():
    opts = dict(o[2:].split("=") for o in direction.compile_options())
    assert opts == {"PULL_ALPHA": str(direction.ALPHA), "PULL_BETA": str(direction.BETA),
                    "SCOUT_MIN": str(direction.SCOUT_MIN)}
    # no CUDA source defines them itself: direction.py is the one place
    for src in [*ROOT.glob("apps/*.cu*"), *ROOT.glob("groute/engines/**/*.cu*"),
                *OPERATORS.glob("*.cuh")]:
        assert not re.search(r"#\s*define\s+(PULL_ALPHA|PULL_BETA|SCOUT_MIN)\b", src.read_text()), src


def test_every_include_of_the_kernels_resolves():
    """Each ``#include "x"`` of the apps' kernels, the engines' kernels and the operator headers
    names a file the compiler finds on the include path load_module gives it (the engines'
    with the folders of their generated headers: BFS's relaxation, PageRank's iteration)."""
    from groute.apps.bfs import HOPS
    from groute.apps.pr import PAGERANK
    generated = (HOPS.include_dir, PAGERANK.include_dir)
    engines = [*ROOT.glob("groute/engines/**/*.cu"), *ROOT.glob("groute/engines/**/*.cuh")]
    assert len(engines) >= 4, engines
    for src in [*ROOT.glob("apps/*.cu"), *ROOT.glob("apps/*.cuh"), *OPERATORS.glob("*.cuh"),
                *engines]:
        dirs = kernels.include_dirs(src, generated if src in engines else ())
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', src.read_text(), re.M):
            assert kernels.resolve_include(name, src, dirs) is not None, (src, name)


def test_operator_headers_are_on_every_include_path(tmp_path):
    assert OPERATORS in kernels.include_dirs(tmp_path / "k.cu")
    assert kernels.include_dirs(tmp_path / "k.cu")[0] == tmp_path.resolve()


def test_include_digest_follows_shared_headers(tmp_path, monkeypatch):
    """An edit to a shared header (found through HEADER_DIRS, included from another header)
    changes the digest that keys CuPy's on-disk cache."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "outer.cuh").write_text('#include "inner.cuh"\n')
    (shared / "inner.cuh").write_text("#define X 1\n")
    app = tmp_path / "app"
    app.mkdir()
    kernel = app / "k.cu"
    kernel.write_text('#include "outer.cuh"\n')
    monkeypatch.setattr(kernels, "HEADER_DIRS", (shared,))
    before = kernels._includes_digest(kernel, kernel.read_text())
    (shared / "inner.cuh").write_text("#define X 2\n")
    assert kernels._includes_digest(kernel, kernel.read_text()) != before


def test_include_resolution_prefers_the_including_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "h.cuh").write_text("")
    (tmp_path / "b" / "h.cuh").write_text("")
    found = kernels.resolve_include("h.cuh", tmp_path / "a" / "k.cu", (tmp_path / "b",))
    assert found == (tmp_path / "a" / "h.cuh").resolve()
    assert kernels.resolve_include("missing.cuh", tmp_path / "a" / "k.cu", ()) is None


@pytest.mark.parametrize("header", ["values.cuh", "appends.cuh", "frontier.cuh", "advance.cuh",
                                    "direction.cuh", "partition.cuh", "barriers.cuh",
                                    "persistent.cuh", "peer_memory.cuh"])
def test_headers_ship_with_the_package(header):
    assert (OPERATORS / header).is_file()


def test_cpu_arc_helpers_list_arcs_by_row_and_pull_from_marked_ends():
    """groute.operators.cpu_ops' arc helpers, which the operators and the traversal apps' CPU
    worker share: arcs row after row with each arc's position in the rows given, their count,
    and a pull's hits (a row repeats per marked end) with the arcs it read."""
    from groute.operators.cpu_ops import arc_count, arcs_of, pull_hits
    indptr = np.array([0, 2, 2, 5, 6], dtype=np.int64)       # rows of 2, 0, 3 and 1 arcs
    indices = np.array([1, 2, 0, 1, 3, 2], dtype=np.int32)
    arcs, pos = arcs_of(indptr, np.array([2, 0, 1, 3]))
    assert arcs.tolist() == [2, 3, 4, 0, 1, 5] and pos.tolist() == [0, 0, 0, 1, 1, 3]
    assert [a.size for a in arcs_of(indptr, np.zeros(0, np.int64))] == [0, 0]
    assert arc_count(indptr, np.array([0, 2])) == 5 and arc_count(indptr, np.array([1])) == 0
    front = np.array([0, 1, 1, 0], dtype=np.uint8)            # vertices 1 and 2 marked
    hits, read = pull_hits(indptr, indices, np.array([0, 2, 3]), front)
    assert hits.tolist() == [0, 0, 1, 2] and read == 6       # row 0 twice, rows 2 and 3 once
