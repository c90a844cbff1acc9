"""Answers out: an AppResult's arrays are indexed by position and carry the graph's own ids
(``ids``), ``to_dict()`` answers in those ids (unreached vertices left out, CC labels as ids),
and ``to_cupy()`` hands over the answer on the GPU (kept there on one CUDA device)."""
import sys

import networkx as nx
import numpy as np
import pytest

from groute.apps.bfs import BFS, bfs
from groute.apps.cc import connected_components
from groute.results import AppResult
from groute.apps.pr import pagerank
from groute.apps.sssp import sssp
from groute.graph import load_graph, reference, shipped_graph_path
from groute.graph.ids import VertexIds

from support import gpu_marks, need_gpus


def test_ids_are_the_graphs_own():
    power = load_graph(shipped_graph_path())                    # Matrix Market: 1-based
    res = bfs(power, 1, backend="cpu", devices=1)
    assert res.ids.tolist() == list(range(1, power.num_vertices + 1))
    spec = bfs("grid:3", 4, backend="cpu", devices=1)            # generated: 0-based
    assert spec.ids.tolist() == list(range(9))
    G = nx.relabel_nodes(nx.path_graph(3), {0: "a", 1: "b", 2: "c"})
    assert bfs(G, "b", backend="cpu", devices=1).ids.tolist() == ["a", "b", "c"]


def test_solver_results_carry_ids_too():
    power = load_graph(shipped_graph_path())
    with BFS(power, backend="cpu", devices=2, partition="random") as solver:
        res = solver.run(power.file_id_of(0))           # solvers take the graph's ids too
    np.testing.assert_array_equal(res.values, reference.bfs(power, 0))
    assert res.ids[0] == 1 and res.to_dict()[1] == 0


def test_to_dict_leaves_out_what_the_run_did_not_reach():
    src, dst = np.array([0, 1, 3]), np.array([1, 2, 4])
    depths = bfs((src, dst), 0, backend="cpu", devices=1)
    assert depths.values.tolist() == [0, 1, 2, -1, -1]
    assert depths.to_dict() == {0: 0, 1: 1, 2: 2}
    dist = sssp((src, dst, np.array([2.5, 1.0, 1.0])), 0, backend="cpu", devices=1)
    assert dist.to_dict() == {0: 0.0, 1: 2.5, 2: 3.5}
    assert np.isinf(dist.values[3:]).all()
    ranks = pagerank((src, dst), backend="cpu", devices=1).to_dict()
    assert sorted(ranks) == [0, 1, 2, 3, 4] and sum(ranks.values()) == pytest.approx(1.0)


def test_cc_labels_come_out_as_ids():
    G = nx.Graph([("p", "q"), ("q", "r"), ("s", "t")])
    G.add_node("alone")
    res = connected_components(G, backend="cpu", devices=2)
    assert res.values.tolist() == [0, 0, 0, 3, 3, 5]           # positions, as the solver has them
    assert res.to_dict() == {"p": "p", "q": "p", "r": "p", "s": "s", "t": "s", "alone": "alone"}


def test_to_dict_python_scalars():
    res = bfs("grid:3", 0, backend="cpu", devices=1)
    d = res.to_dict()
    assert all(type(k) is int and type(v) is int for k, v in d.items())


def test_to_cupy_returns_the_kept_device_array():
    kept = object()                  # stands in for a CuPy array the solver left on its GPU
    res = AppResult(np.zeros(2), 0.1, {}, device_values=kept)
    assert res.to_cupy() is kept


def test_to_cupy_without_cupy_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)             # import cupy -> ImportError
    res = bfs("grid:3", 0, backend="cpu", devices=1)
    assert res.device_values is None                          # CPU devices keep nothing
    with pytest.raises(RuntimeError, match=r"needs CuPy.*\.values"):
        res.to_cupy()


def test_ids_without_vertex_ids_are_positions():
    res = AppResult(np.array([5.0, 6.0]), 0.0, {})
    assert res.ids.tolist() == [0, 1] and res.to_dict() == {0: 5.0, 1: 6.0}
    labelled = AppResult(np.array([1, 0]), 0.0, {}, vertex_ids=VertexIds(2, labels=["u", "v"]),
                         values_are_vertices=True)
    assert labelled.to_dict() == {"u": "v", "v": "u"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [pytest.param(1, marks=gpu_marks(1)), pytest.param(2, marks=gpu_marks(2))])
@pytest.mark.parametrize("app", ["bfs", "sssp"])
def test_to_cupy_on_cuda(app, k):
    """One GPU: the answer stays there (``device_values``, no host copy); several: a copy."""
    need_gpus(k)
    import cupy
    g = load_graph("kron:10").with_weights(seed=1) if app == "sssp" else load_graph("kron:10")
    run = bfs if app == "bfs" else sssp
    res = run(g, int(np.argmax(np.diff(g.indptr))), backend="cuda", devices=k)
    on_gpu = res.to_cupy()
    assert isinstance(on_gpu, cupy.ndarray) and on_gpu.dtype == res.values.dtype
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu), res.values)
    assert (res.device_values is not None) == (k == 1)
