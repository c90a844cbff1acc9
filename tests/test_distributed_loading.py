"""Each rank loads only its part (groute.graph.ranked, groute partition's part sets): the
ranks' parts put together equal the whole graph, and each holds its share."""
import re
import subprocess
import sys

import pytest

from groute.graph import load_graph
from groute.graph.part_set import read_manifest, write_part_set

from mpi_support import ROOT, needs_mpi, program, run_ranks

GRAPHS = ["kron:8", "rmat:7", "er:400:5", "grid:11", "grid:4x9"]


def check(done, n, sources):
    assert done.returncode == 0, done.stderr
    assert "DIFFERENT" not in done.stdout, done.stdout       # (lines of several ranks may mix)
    for source in sources:     # every rank holds a part, together every arc once
        held = [int(m) for m in re.findall(rf"{re.escape(source)}: same \((\d+) of", done.stdout)]
        total = int(re.search(rf"{re.escape(source)}: same \(\d+ of (\d+)", done.stdout)[1])
        assert len(held) == n and sum(held) == total and max(held) < total


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_generated_parts_put_together_are_the_whole_graph(n):
    check(run_ranks(n, [program("loading_checks.py"), *GRAPHS], timeout=120), n, GRAPHS)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_each_rank_loads_within_the_stated_memory_bound(n, tmp_path):
    """Every rank's traced loader peak is within docs/DISTRIBUTED.md's bound (a generated
    graph: its share of the candidate arcs at 4 bytes each, a few int64 per vertex of its
    share and range, one chunk's working arrays; a part set: its part's CSR), on graphs big
    enough that the graph's terms outweigh the rest."""
    parts = tmp_path / "kron16"
    write_part_set(load_graph("kron:16", cache=False), n, parts)
    graphs = ["kron:18", "grid:700", str(parts)]
    done = run_ranks(n, [program("load_memory_checks.py"), *graphs], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "OVER" not in done.stdout, done.stdout
    for graph in graphs:
        assert len(re.findall(rf"{re.escape(graph)}: within the bound", done.stdout)) == n, \
            done.stdout


@needs_mpi
def test_a_part_set_is_read_one_part_per_rank(tmp_path):
    folder = tmp_path / "power"
    graph = ROOT / "groute" / "data" / "power.mtx.gz"
    written = subprocess.run([sys.executable, "-m", "groute", "partition", "--graph", str(graph),
                              "--parts", "3", "--out", str(folder)], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    assert "as 3 parts" in written.stdout
    check(run_ranks(3, [program("loading_checks.py"), folder], timeout=120), 3, [str(folder)])
    # the whole-graph reference of a part set: its source file (ids from 1, as the file's)
    assert read_manifest(folder)["id_base"] == 1


def test_a_part_set_refuses_another_folders_files_and_bad_counts(tmp_path):
    g = load_graph("grid:5")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files"):
        write_part_set(g, 2, tmp_path)
    with pytest.raises(ValueError, match="between 1 and the vertex count"):
        write_part_set(g, 26, tmp_path / "new")
    with pytest.raises(ValueError, match="no manifest.json"):
        read_manifest(tmp_path)
