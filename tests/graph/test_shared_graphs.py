"""Every graph in ../shared/graphs loads with the counts its README gives (skipped if absent)."""
import re

import numpy as np
import pytest

from groute.graph import load_graph, partition_graph, reference, shipped_graph_path
from tests.graph.conftest import SHARED_GRAPHS


def readme_table():
    readme = SHARED_GRAPHS / "README.md"
    if not readme.is_file():
        return []
    rows = []
    for line in readme.read_text().splitlines():
        m = re.match(r"\|\s*([\w.-]+\.mtx\.gz)\s*\|\s*([\d,]+)\s*\|\s*([\d,]+)\s*\|\s*([\d,]+)\s*\|\s*([^|]+)\|",
                     line)
        if m:
            num = lambda s: int(s.replace(",", ""))
            rows.append((m.group(1), num(m.group(2)), num(m.group(3)), num(m.group(4)),
                         m.group(5).strip()))
    return rows


ROWS = readme_table()


def test_readme_parsed_when_present():
    if not (SHARED_GRAPHS / "README.md").is_file():
        pytest.skip("no ../shared/graphs here")
    assert len(ROWS) >= 8


@pytest.mark.parametrize("name,vertices,file_edges,arcs,kind", ROWS, ids=[r[0] for r in ROWS])
def test_shared_graph_counts(name, vertices, file_edges, arcs, kind, tmp_path):
    path = SHARED_GRAPHS / name
    g = load_graph(path)                      # the shared dir is read-only: cache goes elsewhere
    assert g.num_vertices == vertices
    assert g.num_edges == arcs
    assert g.directed == kind.startswith("directed")
    assert g.id_base == 1 and g.file_id_of(0) == 1
    if not g.directed:
        assert g.is_symmetric()
    import scipy.io
    assert scipy.io.mmread(path).tocsr().nnz == arcs
    import groute.graph.load
    groute.graph.load._recent.clear()         # the graph kept in memory aside
    again = load_graph(path)                  # from the cache this time
    assert again is not g
    assert np.array_equal(again.indptr, g.indptr) and np.array_equal(again.indices, g.indices)
    assert again.id_base == g.id_base and again.directed == g.directed
    if not SHARED_GRAPHS.stat().st_mode & 0o222:   # a read-only shared folder stays untouched
        assert not (SHARED_GRAPHS / (name + ".groute-cache.npz")).exists()


@pytest.mark.parametrize("name", ["karate.mtx.gz", "power.mtx.gz", "polblogs.mtx.gz"])
def test_partitions_and_references_on_shared_graphs(name):
    if not (SHARED_GRAPHS / name).is_file():
        pytest.skip("no ../shared/graphs here")
    g = load_graph(SHARED_GRAPHS / name)
    method = "metis" if __import__("importlib").util.find_spec("pymetis") else "random"
    p = partition_graph(g, 3, method=method, progress=False)
    assert sorted(p.perm.tolist()) == list(range(g.num_vertices))
    depth = reference.bfs(g, 0)
    assert depth[0] == 0 and depth.max() > 0
    cc = reference.connected_components(g)
    assert cc[0] == 0
    assert abs(reference.pagerank(g).sum() - 1) < 1e-9


def test_shipped_graph_is_power():
    g = load_graph(shipped_graph_path(), cache=False)
    assert (g.num_vertices, g.num_edges, g.directed) == (4941, 13188, False)
    cc = reference.connected_components(g)
    assert np.unique(cc).size == 1            # the Western US power grid is connected
    assert reference.bfs(g, 0).max() > 20     # and has a high diameter
