"""Katz centrality (groute.katz_centrality, apps/katz.py) against networkx.katz_centrality, the
second instance of the linear iteration engines (groute.engines.LinearIteration): random
directed and undirected graphs with isolated vertices, 1-3 CPU devices, BSP and async, every
BSP layout; NetworkX's iteration count, error on divergence and beta forms; the worked example
of docs/OPERATORS_REFERENCE.md on public names; the contract's checks and generated headers; its
CUDA compiled with nvcc (no GPU needed); ``groute katz``."""
import dataclasses
import shutil
import subprocess
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import groute
from groute import kernels
from groute.apps.katz import KATZ, Katz, katz_centrality
from groute.apps.pr import PAGERANK
from groute.cli import main
from groute.engines import FixedPoint, IterateSolver, LinearIteration
from groute.graph import load_graph, reference
from groute.tuning import PageRankTuning

from support import check_imports_only_public_names, need_gpus, operator_doc_blocks

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
ITERATE = ROOT / "groute" / "engines" / "iterate"
#: the documented example: the block that defines Katz
BLOCK = next(b for b in operator_doc_blocks() if "class Katz(" in b)


def random_graph(seed, directed, n=80, p=0.05):
    G = nx.gnp_random_graph(n, p, seed=seed, directed=directed)
    G.add_nodes_from(range(n, n + 4))           # isolated vertices
    return G


def assert_close(got: dict, ref: dict, rtol=1e-6):
    assert set(got) == set(ref)
    scale = max(abs(v) for v in ref.values())
    err = max(abs(got[v] - ref[v]) for v in ref)
    assert err <= rtol * scale, err


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["bsp", "async"])
def test_matches_networkx_cpu(directed, k, mode):
    G = random_graph(k, directed)
    ref = nx.katz_centrality(G, alpha=0.1, tol=1e-12, max_iter=5000)
    got = katz_centrality(G, alpha=0.1, tol=1e-11, backend="cpu", devices=k, mode=mode,
                          partition="random" if k > 1 else "metis")
    assert got.stats["converged"] and got.stats["alpha"] == 0.1
    # async on several devices sends float32 sums between them
    assert_close(got.to_dict(), ref, rtol=1e-6 if mode == "async" and k > 1 else 1e-9)


@pytest.mark.parametrize("k", [1, 2])
def test_raw_values_and_beta_per_vertex(k):
    G = random_graph(7, True)
    beta = {v: 0.5 + (v % 3) for v in G}
    ref = nx.katz_centrality(G, alpha=0.15, beta=beta, tol=1e-12, normalized=False)
    for mode in ("bsp", "async"):
        got = groute.katz_centrality(G, alpha=0.15, beta=beta, tol=1e-11, normalized=False,
                                     backend="cpu", devices=k, mode=mode)
        assert_close(got.to_dict(), ref, rtol=1e-6)
    by_position = np.array([beta[v] for v in G])
    got = groute.katz_centrality(G, alpha=0.15, beta=by_position, tol=1e-11, normalized=False,
                                 backend="cpu", devices=k)
    assert_close(got.to_dict(), ref, rtol=1e-9)


def test_iterations_are_networkx_iterations():
    """BSP runs NetworkX's iteration from x = 0 and stops where NetworkX does: NetworkX
    converges within the iterations groute ran and fails within one fewer."""
    G = random_graph(11, True, p=0.08)
    with Katz(load_graph(G), alpha=0.08, tol=1e-8, backend="cpu", devices=1, mode="bsp") as s:
        t = s.run().stats["iterations"]
    assert t > 3
    nx.katz_centrality(G, alpha=0.08, tol=1e-8, max_iter=t)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(G, alpha=0.08, tol=1e-8, max_iter=t - 1)


@pytest.mark.parametrize("mode", ["bsp", "async"])
@pytest.mark.parametrize("k", [1, 2])
def test_divergence_raises_like_networkx(mode, k):
    """alpha past 1 / lambda_max: NetworkX's PowerIterationFailedConvergence after max_iter,
    with the cure in the message."""
    G = nx.gnp_random_graph(40, 0.3, seed=2, directed=True)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(G, alpha=0.5, max_iter=30)
    with pytest.raises(groute.PowerIterationFailedConvergence, match="lower alpha") as exc:
        katz_centrality(G, alpha=0.5, max_iter=30, backend="cpu", devices=k, mode=mode)
    assert isinstance(exc.value, nx.PowerIterationFailedConvergence)
    assert exc.value.num_iterations == 30


@pytest.mark.parametrize("mode", ["bsp", "async"])
def test_divergence_past_overflow_warns_nothing(mode):
    """A diverging iteration run until its values overflow ends in the convergence error
    alone: no NumPy overflow or invalid-value warnings from the sweeps or the stopping check
    before it (a user sees one message, the one with the cure)."""
    import warnings
    G = nx.gnp_random_graph(40, 0.3, seed=2, directed=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(groute.PowerIterationFailedConvergence, match="lower alpha"):
            katz_centrality(G, alpha=0.5, max_iter=1000, backend="cpu", devices=2, mode=mode)
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


@pytest.mark.parametrize("k", [1, 2])
def test_values_whose_norm_passes_float64_fail_to_converge_on_any_device_count(k):
    """Long enough past 1 / lambda_max that the devices' squared sums add up beyond float64:
    the norm is inf and the values stay as they are (NumPy's norm), so the run fails to
    converge as on one device, whatever the count."""
    from groute.apps.katz import Katz
    from groute.runtime import Context
    with Context(k, backend="cpu", timeout=20) as ctx, \
            Katz(load_graph("grid:10", cache=False), ctx=ctx, alpha=0.9025, max_iter=302,
                 mode="bsp") as solver:
        with pytest.raises(groute.PowerIterationFailedConvergence, match="lower alpha"):
            solver.run()


@pytest.mark.parametrize("tuning", [dict(bsp_kernel="bins"), dict(bsp_kernel="csc"),
                                    dict(bsp_kernel="coo"), dict(inplace=True),
                                    dict(device_check=False)])
@pytest.mark.parametrize("k", [1, 3])
def test_every_bsp_layout(tuning, k):
    """The degree order ("bins"), the partitioned CSC and COO layouts and in-place sweeps (one
    device) give NetworkX's answer on a power-law graph."""
    g = load_graph("kron:8", cache=False)
    G = nx.DiGraph()
    G.add_nodes_from(range(g.num_vertices))
    G.add_edges_from(zip(np.repeat(np.arange(g.num_vertices), np.diff(g.indptr)).tolist(),
                         g.indices.tolist()))
    lam = max(abs(np.linalg.eigvals(nx.to_numpy_array(G))))
    alpha = 0.5 / lam
    ref = nx.katz_centrality(G, alpha=alpha, tol=1e-12, max_iter=5000)
    t = dataclasses.replace(PageRankTuning(), **tuning)
    got = katz_centrality(g, alpha=alpha, tol=1e-11, backend="cpu", devices=k, mode="bsp",
                          tuning=t)
    assert_close(dict(enumerate(got.values.tolist())), ref, rtol=1e-7)


def test_beta_errors_name_the_argument():
    G = random_graph(1, True)
    with pytest.raises(ValueError, match="beta: a dict needs a value for every vertex"):
        katz_centrality(G, beta={0: 1.0}, backend="cpu", devices=1)
    with pytest.raises(ValueError, match="beta key"):
        katz_centrality(G, beta={**{v: 1.0 for v in G}, "nope": 2.0}, backend="cpu", devices=1)
    with pytest.raises(ValueError, match=r"katz: beta needs one value per vertex \(84\)"):
        katz_centrality(G, beta=np.ones(3), backend="cpu", devices=1)
    with pytest.raises(ValueError, match="alpha must be finite and >= 0"):
        katz_centrality(G, alpha=-0.1, backend="cpu", devices=1)
    with pytest.raises(ValueError, match="katz: beta must be finite and >= 0 in async mode"):
        katz_centrality(G, beta=-1.0, backend="cpu", devices=1, mode="async")
    with pytest.raises(ValueError, match="katz: beta must be finite"):
        katz_centrality(G, beta=np.full(84, np.nan), backend="cpu", devices=1)
    # not numbers at all: the argument named, not float()'s message
    with pytest.raises(TypeError, match="katz: alpha must be a number, got 'x'"):
        katz_centrality(G, alpha="x", backend="cpu", devices=1)
    with pytest.raises(TypeError, match="katz: beta must be a number, a dict or an array by "
                                        "position, got 'a'"):
        katz_centrality(G, beta="a", backend="cpu", devices=1)
    with pytest.raises(TypeError, match="katz: tol must be a number, got 'x'"):
        katz_centrality(G, tol="x", backend="cpu", devices=1)


def test_empty_graph_and_isolated_vertices_only():
    assert katz_centrality(nx.DiGraph(), backend="cpu", devices=1).to_dict() == {}
    G = nx.empty_graph(5)
    got = katz_centrality(G, backend="cpu", devices=2).to_dict()
    assert_close(got, nx.katz_centrality(G), rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.timeout(240)
@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.multigpu),
                               pytest.param(3, marks=pytest.mark.multigpu)])
@pytest.mark.parametrize("setup", [dict(mode="bsp"), dict(mode="async"),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="bins")),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="csc")),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="coo")),
                                   dict(mode="bsp", tuning=dict(persistent=True)),
                                   dict(mode="bsp", beta="per vertex")], ids=str)
def test_matches_networkx_cuda(k, setup):
    """Katz's header in every CUDA kernel (float32 values): NetworkX's answer within float32
    rounding, twice from one solver, and its divergence error."""
    need_gpus(k)
    setup = dict(setup)
    tuning = dataclasses.replace(PageRankTuning(), **setup.pop("tuning", {}))
    G = random_graph(30 + k, True, n=600, p=0.01)
    beta = {v: 0.5 + (v % 3) for v in G} if setup.pop("beta", None) else 1.0
    ref = nx.katz_centrality(G, alpha=0.1, beta=beta, tol=1e-12, max_iter=5000)
    with Katz(load_graph(G), alpha=0.1, beta=beta, backend="cuda", devices=k,
              partition="contiguous", tol=1e-6, tuning=tuning, **setup) as solver:
        for _ in range(2):     # NetworkX's default tol: the float32 sums settle below it
            assert_close(solver.run().to_dict(), ref, rtol=1e-4)
    with pytest.raises(groute.PowerIterationFailedConvergence):
        katz_centrality(nx.gnp_random_graph(60, 0.3, seed=2, directed=True), alpha=0.5,
                        max_iter=40, backend="cuda", devices=k, tuning=tuning, **setup)


# ------------------------------------------------------------------------------------------------
# the worked example and the contract
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def example():
    namespace = {}
    exec(compile(BLOCK, "OPERATORS_REFERENCE.md (Katz)", "exec"), namespace)
    return namespace


def test_the_example_uses_only_public_names(tmp_path):
    path = tmp_path / "katz_example.py"
    path.write_text(BLOCK)
    check_imports_only_public_names(path)
    check_imports_only_public_names(ROOT / "apps" / "katz.py")


@pytest.mark.parametrize("mode", ["bsp", "async"])
@pytest.mark.parametrize("k", [1, 3])
def test_the_example_matches_networkx(example, k, mode):
    G = random_graph(5, False)
    ref = nx.katz_centrality(G, alpha=0.1, tol=1e-12)
    with example["Katz"](load_graph(G), alpha=0.1, tol=1e-11, backend="cpu", devices=k,
                         mode=mode, partition="random" if k > 1 else "metis") as solver:
        assert solver.rules["bsp_kernel"].option == "bsp_kernel"
        assert_close(solver.run().to_dict(), ref, rtol=1e-6)


def test_contract_checks():
    ok = dict(name="it", share="x", share_numpy=lambda x, deg: x)
    with pytest.raises(ValueError, match="name"):
        LinearIteration(**{**ok, "name": "a b"})
    with pytest.raises(ValueError, match="one C expression"):
        LinearIteration(**{**ok, "share": "x; y"})
    with pytest.raises(TypeError, match="share_numpy must be a function"):
        LinearIteration(**{**ok, "share_numpy": "x"})
    with pytest.raises(ValueError, match="stop must be one of"):
        LinearIteration(**{**ok, "stop": "l2"})
    with pytest.raises(ValueError, match="finite share >= 0"):
        LinearIteration(**{**ok, "share_numpy": lambda x, deg: -x})

    class NoIteration(IterateSolver):
        pass
    with pytest.raises(TypeError, match="iteration must be a LinearIteration"):
        NoIteration(load_graph("grid:3"), FixedPoint(alpha=0.5, base=1.0), backend="cpu",
                    devices=1)


def test_shares_and_headers():
    """PageRank's share is 1/outdeg (0 dangling), Katz's 1; the headers differ, so their
    modules do, and each says its rule."""
    deg = np.array([0, 1, 4])
    assert PAGERANK.scale(deg).tolist() == [0.0, 1.0, 0.25]
    assert KATZ.scale(deg).tolist() == [0.0, 1.0, 1.0]
    assert PAGERANK.include_dir != KATZ.include_dir
    assert "((diff) <= (tol) * (mass))" in PAGERANK.header()
    assert "((diff) <= (tol))" in KATZ.header() and "return (x);" in KATZ.header()
    # tol is per vertex, as NetworkX's, for both measures
    assert KATZ.bound(1e-6, 100) == pytest.approx(1e-4) == PAGERANK.bound(1e-6, 100)


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
@pytest.mark.parametrize("base_vector, arc_weights", [(0, 0), (1, 1)])
def test_katz_compiles_into_every_kernel(base_vector, arc_weights, tmp_path):
    """iterate.cu (pull, push, persistent BSP and push) compiles with Katz's header, with and without a
    per-vertex base, with and without arcs that carry a weight (ARC_WEIGHTS)."""
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{ITERATE}", f"-I{KATZ.include_dir}",
         f"-I{kernels.HEADER_DIRS[0]}", f"-DBASE_VECTOR={base_vector}",
         f"-DARC_WEIGHTS={arc_weights}", "--ptx",
         str(ITERATE / "iterate.cu"), "-o", str(tmp_path / "katz.ptx")],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = (tmp_path / "katz.ptx").read_text()
    for name in ("pr_push", "pr_csc32_k2", "pr_bins64", "pr_csc32_persistent_k2",
                 "pr_bins32_persistent", "pr_pull", "pr_finalize", "pr_async_persistent"):
        assert f".entry {name}(" in ptx, name


# ------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------
def test_cli_verifies_and_writes(tmp_path, capsys):
    out = tmp_path / "katz.csv"
    code = main(["katz", "--graph", "grid:12", "--backend", "cpu", "--devices", "2",
                 "--repeat", "1", "--alpha", "0.2", "--tol", "1e-9", "--verify",
                 "--output", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "katz grid:12" in text and "OK" in text
    rows = out.read_text().splitlines()
    assert rows[0] == "id,centrality" and len(rows) == 145
    g = load_graph("grid:12")
    ref = reference.katz(g, alpha=0.2, tol=1e-12)
    got = np.array([float(r.split(",")[1]) for r in rows[1:]])
    assert np.allclose(got, ref, rtol=1e-6)


def test_cli_help_renders_the_rules(capsys):
    with pytest.raises(SystemExit):
        main(["katz", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert Katz.rules["bsp_kernel"].help().split()[0] in text
    assert "below 1/lambda_max" in text
