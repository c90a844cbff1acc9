"""Personalized PageRank (``personalization=``) against NetworkX, every mode and layout, on CPU
virtual devices (1-4) and CUDA devices; ``groute pr --max-iter``."""
import dataclasses

import networkx as nx
import numpy as np
import pytest

from groute.apps.pr import PageRank, pagerank
from groute.cli import main
from groute.tuning import PageRankTuning

from support import need_gpus

pytestmark = pytest.mark.timeout(120)


def random_graph(seed, n=90):
    G = nx.gnp_random_graph(n, 0.05, seed=seed, directed=True)
    G.add_nodes_from(range(n, n + 5))           # isolated (dangling) vertices
    G.add_edge(3, 3)
    return G


def close(got, ref, tol):
    assert set(got) == set(ref)
    err = sum(abs(got[v] - ref[v]) for v in ref)
    assert err <= tol, err


PERSONAL = {0: 1.0, 3: 2.0, 91: 0.5, 40: 0.0}


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["bsp", "async"])
def test_matches_networkx_cpu(k, mode):
    G = random_graph(k)
    ref = nx.pagerank(G, personalization=PERSONAL, tol=1e-12, max_iter=2000)
    got = pagerank(G, personalization=PERSONAL, backend="cpu", devices=k, mode=mode,
                   partition="contiguous" if k > 1 else "metis", tol=1e-9).to_dict()
    close(got, ref, 1e-6)


@pytest.mark.parametrize("tuning", [dict(bsp_kernel="bins"), dict(inplace=True),
                                    dict(device_check=False)], ids=str)
@pytest.mark.parametrize("k", [1, 3])
def test_layouts_and_sweeps_cpu(tuning, k):
    G = random_graph(10 + k)
    t = dataclasses.replace(PageRankTuning(), **tuning)
    p = np.zeros(len(G))
    p[[1, 7, 60]] = [1.0, 3.0, 2.0]
    ref = nx.pagerank(G, personalization=dict(enumerate(p)), tol=1e-12, max_iter=2000)
    got = pagerank(G, personalization=p, backend="cpu", devices=k, partition="random",
                   tol=1e-9, tuning=t).to_dict()
    close(got, ref, 1e-6)


def test_uniform_personalization_is_plain_pagerank():
    G = random_graph(5)
    plain = pagerank(G, backend="cpu", devices=2, tol=1e-9).values
    flat = pagerank(G, personalization=np.ones(len(G)), backend="cpu", devices=2,
                    tol=1e-9).values
    np.testing.assert_allclose(flat, plain, atol=1e-9)


def test_errors_name_the_argument():
    G = random_graph(6)
    with pytest.raises(ZeroDivisionError, match="personalization"):
        pagerank(G, personalization={0: 0.0}, backend="cpu")
    with pytest.raises(ValueError, match="personalization key"):
        pagerank(G, personalization={"nope": 1.0}, backend="cpu")
    with pytest.raises(ValueError, match=r"one weight per vertex \(95\)"):
        pagerank(G, personalization=np.ones(3), backend="cpu")
    with pytest.raises(ValueError, match="finite and >= 0"):
        pagerank(G, personalization={0: -1.0}, backend="cpu")
    # float()'s "could not convert string to float: 'x'" named neither the argument nor a type
    with pytest.raises(TypeError, match="personalization must be a dict of numbers by id or an "
                                        "array of them by position, got str"):
        pagerank(G, personalization="x", backend="cpu")
    with pytest.raises(TypeError, match="nstart: the values must be numbers, got 'x'"):
        pagerank(G, nstart={0: "x"}, backend="cpu")


def test_cli_max_iter_without_convergence_is_an_error(capsys):
    """``--max-iter`` too small: NetworkX's PowerIterationFailedConvergence, as the library
    raises it, is the command's error (exit 1), not a normal answer."""
    assert main(["pr", "--graph", "grid:400", "--backend", "cpu", "--devices", "1",
                 "--max-iter", "3", "--repeat", "1", "--json"]) == 1
    err = capsys.readouterr().err
    assert "groute pr: error: pagerank: no convergence" in err and "max_iter" in err


@pytest.mark.gpu
@pytest.mark.timeout(240)
@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.multigpu),
                               pytest.param(3, marks=pytest.mark.multigpu)])
@pytest.mark.parametrize("setup", [dict(mode="bsp"), dict(mode="async"),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="bins")),
                                   dict(mode="bsp", tuning=dict(bsp_kernel="coo")),
                                   dict(mode="bsp", tuning=dict(persistent=True))], ids=str)
def test_matches_networkx_cuda(k, setup):
    need_gpus(k)
    setup = dict(setup)
    tuning = dataclasses.replace(PageRankTuning(), **setup.pop("tuning", {}))
    G = random_graph(20 + k, n=600)
    ref = nx.pagerank(G, personalization=PERSONAL, tol=1e-12, max_iter=2000)
    # max_iter: the asynchronous push's bound is 10 * max_iter sweeps per device, and a tol
    # this far below NetworkX's default needs more than NetworkX's default max_iter gives it
    with PageRank(_graph(G), backend="cuda", devices=k, partition="contiguous", tol=1e-10,
                  max_iter=1000, tuning=tuning, personalization=PERSONAL, **setup) as solver:
        for _ in range(2):
            close(solver.run().to_dict(), ref, 1e-4)


def _graph(G):
    from groute.graph import input_graph
    return input_graph(G, weight=None)
