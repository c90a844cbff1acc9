"""The asynchronous push's rule (``PageRankTuning.push_rule``, groute/engines/iterate/thresholds.py):
``"degree"`` pushes a vertex when its residual exceeds ``eps_unit * max(outdeg, 1)``, with
``eps_unit = eps * n / W``, so the thresholds add up to what ``"uniform"``'s do and a quiet run
still meets the stopping rule. On CPU devices (1 and 3) and on GPUs (the persistent kernel on 1,
2 and 4 devices, the host-driven push on 1 and 2): PageRank (directed with dangling vertices,
kron, a grid, personalised, weighted) and Katz against the reference and NetworkX; every
residual of a host-driven run ends at or below its own threshold; the thresholds add up to the
rule's bound in float32; the degree rule pushes fewer arcs on a power-law graph; the stats say
which rule ran."""
import networkx as nx
import numpy as np
import pytest

from groute.apps import pr
from groute.apps.katz import KATZ, Katz
from groute.apps.pr import PAGERANK
from groute.engines.iterate.thresholds import (host_threshold, push_thresholds, push_weights,
                                               unit_scale)
from groute.graph import load_graph, reference
from groute.tuning import PageRankTuning
from support import gpu_marks, graph_from, need_gpus, weighted_pagerank_case

pytestmark = pytest.mark.timeout(300)

DEGREE = PageRankTuning(push_rule="degree")


def _case(backend, k, persistent):
    marks = gpu_marks(k) if backend == "cuda" else []
    how = "" if backend == "cpu" else ("-kernel" if persistent else "-host")
    return pytest.param(backend, k, persistent, marks=marks, id=f"{backend}{how}-x{k}")


#: (backend, devices, persistent): CPU devices (the host-driven push), the CUDA persistent
#: kernel, the CUDA host-driven push
CASES = ([_case("cpu", k, False) for k in (1, 3)]
         + [_case("cuda", k, True) for k in (1, 2, 4)]
         + [_case("cuda", k, False) for k in (1, 2)])
#: the host-driven cases, whose runs end with every residual at or below its threshold
HOST_DRIVEN = [c for c in CASES if c.values[2] is False]


def _tuning(backend, persistent, rule="degree"):
    return PageRankTuning(push_rule=rule, persistent=persistent if backend == "cuda" else "auto")


def _prepare(backend, k):
    if backend == "cuda":
        need_gpus(k)


def graphs():
    """A directed graph with dangling and isolated vertices and a sink chain, kron (power law,
    dangling vertices) and a grid (every vertex of about the same degree)."""
    return {"dangling": graph_from(9, [(0, 1), (1, 2), (2, 0), (0, 3), (3, 4), (5, 4), (6, 7),
                                       (7, 8)]),
            "kron:12": load_graph("kron:12", cache=False),
            "grid:40": load_graph("grid:40", cache=False)}


def _options(g, backend, k, persistent, rule="degree"):
    return dict(backend=backend, devices=k, tol=1e-6 / max(g.num_vertices, 1), max_iter=1000,
                weight=None, partition="contiguous", mode="async",
                tuning=_tuning(backend, persistent, rule))


def _total_weight(g) -> int:
    """W by its definition, from the graph's own rows: every vertex's out-arcs, at least 1."""
    return int(np.maximum(np.diff(np.asarray(g.indptr, np.int64)), 1).sum())


# ------------------------------------------------------------------------------------------------
# the thresholds (no device)
# ------------------------------------------------------------------------------------------------
def test_the_modules_examples_run():
    import doctest
    from groute.engines.iterate import thresholds
    assert doctest.testmod(thresholds).failed == 0


def test_push_weights_and_the_unit():
    deg = np.array([0, 1, 2, 7, 0, 300])
    assert push_weights("degree", deg).tolist() == [1, 1, 2, 7, 1, 300]
    assert push_weights("uniform", deg).tolist() == [1] * 6
    assert unit_scale(6, 311) == 6 / 311 and unit_scale(6, 6) == 1.0
    with pytest.raises(ValueError, match="push_rule must be 'uniform' or 'degree'; got 'hub'"):
        push_weights("hub", deg)


@pytest.mark.parametrize("iteration", [PAGERANK, KATZ], ids=["relative", "absolute"])
@pytest.mark.parametrize("tol, n, base_sum", [(1e-6, 100, 0.15), (1e-10, 1 << 16, 0.15),
                                              (3e-7, 7, 7.0)])
def test_degree_thresholds_at_their_most_meet_the_rule(iteration, tol, n, base_sum):
    """Every vertex's residual at its degree threshold (eps_unit * w_v rounded in float32 as
    the kernel rounds it, on a skewed degree sequence with dangling vertices and hubs past
    2^24), summed in float64, meets the stopping rule at the least mass and a larger one; the
    host-driven threshold's sum is n times the uniform one."""
    rng = np.random.default_rng(n)
    deg = np.minimum(rng.zipf(1.8, n), 1 << 25) * (rng.random(n) > 0.2)
    deg[:2] = (0, (1 << 24) + 3)
    w = push_weights("degree", deg)
    scale = unit_scale(n, int(w.sum()))
    eps0, per_mass = push_thresholds(iteration, tol, n, base_sum, scale)
    bound = iteration.bound(tol, n)
    uniform = push_thresholds(iteration, tol, n, base_sum)
    assert eps0 == pytest.approx(uniform[0] * scale, rel=1e-6)
    assert per_mass == pytest.approx(uniform[1] * scale, rel=1e-12)
    for mass in (base_sum, 3.0 * base_sum):
        grown = np.float32(per_mass * mass)     # the kernel rounds it down
        if float(grown) > per_mass * mass:
            grown = np.nextafter(grown, np.float32(0))
        unit = max(np.float32(eps0), grown)
        residuals = unit * w.astype(np.float32)     # the kernel's float32 product
        assert residuals.dtype == np.float32
        assert bool(iteration.stopped(residuals.astype(np.float64).sum(), mass, bound))
    eps_v = host_threshold(iteration, tol, n, base_sum / n)
    unit = host_threshold(iteration, tol, n, base_sum / n, scale)
    assert (unit * w.astype(np.float64)).sum() == pytest.approx(n * eps_v, rel=1e-12)


# ------------------------------------------------------------------------------------------------
# runs
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend, k, persistent", CASES)
def test_pagerank_under_the_degree_rule_matches_the_reference(backend, k, persistent):
    """PageRank on a directed graph with dangling vertices, kron and a grid within the L1
    bound of the reference (as the uniform rule's tests: the rule bounds the residuals by 1e-6
    of the mass); the stats say the degree rule ran with eps * n / W per unit of weight."""
    _prepare(backend, k)
    for name, g in graphs().items():
        if g.num_vertices < k:
            continue
        opts = _options(g, backend, k, persistent)
        res = pr.pagerank(g, **opts)
        uniform = pr.pagerank(g, **_options(g, backend, k, persistent, "uniform"))
        assert res.stats["push_rule"] == "degree" and uniform.stats["push_rule"] == "uniform"
        assert res.stats["converged"] is True
        assert res.stats["persistent"] is (backend == "cuda" and persistent)
        scale = g.num_vertices / _total_weight(g)
        assert res.stats["eps"] == pytest.approx(uniform.stats["eps"] * scale, rel=1e-6)
        l1 = reference.pagerank_error(res.values, reference.pagerank(g, tol=1e-13))[0]
        assert l1 <= 2e-5, (name, l1)
        assert np.abs(res.values - uniform.values).sum() <= 3e-5, name


@pytest.mark.parametrize("backend, k, persistent", HOST_DRIVEN)
def test_every_residual_ends_at_or_below_its_own_threshold(backend, k, persistent):
    """A host-driven run ends when no vertex is above its threshold: on kron every residual is
    at or below eps_unit * max(outdeg, 1), and many are above eps_unit itself (the uniform
    threshold of this unit), so the thresholds really differ by vertex."""
    _prepare(backend, k)
    g = load_graph("kron:12", cache=False)
    with pr.PageRank(g, **_options(g, backend, k, persistent)) as s:
        eps = s.run().stats["eps"]
        above_unit = 0
        for dev in s.devs:
            residual = np.asarray(dev.device.to_host(dev.residual), np.float64)
            deg = np.diff(np.asarray(dev.device.to_host(dev.out_indptr), np.int64))
            limit = (np.float64(dev.fdt(eps))
                     * push_weights("degree", deg).astype(dev.fdt).astype(np.float64))
            assert np.all(residual <= limit * (1 + 1e-6)), dev.device.name
            above_unit += int(np.count_nonzero(residual > eps))
        assert above_unit > 0


@pytest.mark.parametrize("k", [pytest.param(k, marks=gpu_marks(k), id=f"cuda-kernel-x{k}")
                               for k in (1, 2, 4)])
def test_a_big_power_law_graph_keeps_the_error_bound_under_the_degree_rule(k):
    """kron:21 by the persistent kernel under the degree rule: its hubs' thresholds are
    thousands of times the leaves', and the answer stays within the uniform rule's bound
    (alpha / (1 - alpha) times 1e-6, twice for the normalisation)."""
    need_gpus(k)
    g = load_graph("kron:21")
    res = pr.pagerank(g, **_options(g, "cuda", k, True))
    assert res.stats["persistent"] is True and res.stats["converged"] is True
    assert res.stats["push_rule"] == "degree"
    l1 = reference.pagerank_error(res.values, reference.pagerank(g, tol=1e-10))[0]
    assert l1 <= 1.2e-5, f"L1 {l1:.2e}"


def test_the_degree_rule_pushes_fewer_arcs_on_a_power_law_graph():
    """kron:12 on one CPU device (deterministic): the hubs wait until they hold mass worth
    their arcs, so fewer arcs are pushed in all than with one threshold for every vertex."""
    g = load_graph("kron:12", cache=False)
    arcs = {rule: sum(pr.pagerank(g, **_options(g, "cpu", 1, False, rule))
                      .stats["arcs_pushed_per_device"]) for rule in ("uniform", "degree")}
    assert 0 < arcs["degree"] < arcs["uniform"], arcs


@pytest.mark.parametrize("backend, k, persistent", CASES)
def test_weighted_and_personalised_pagerank_match_networkx(backend, k, persistent):
    """The ARC_WEIGHTS and BASE_VECTOR forms under the degree rule (a weighted graph's weight
    is its arc count): weighted PageRank on a directed graph with dangling vertices, a
    personalisation, and a dangling distribution, against NetworkX."""
    _prepare(backend, k)
    G, person, dangling = weighted_pagerank_case(k)
    g = load_graph(G, weight="w")
    opts = dict(backend=backend, devices=k, tol=1e-10, max_iter=1000, partition="contiguous",
                mode="async", tuning=_tuning(backend, persistent))
    for theirs in (dict(weight="w"), dict(weight=None, personalization=person),
                   dict(weight="w", personalization=person, dangling=dangling)):
        want = nx.pagerank(G, tol=1e-13, max_iter=5000, **theirs)
        with pr.PageRank(g, **opts, **theirs) as s:
            res = s.run()
        assert res.stats["push_rule"] == "degree" and res.stats["converged"], res.stats
        got = res.to_dict()
        err = sum(abs(got[v] - want[v]) for v in want)
        assert err <= 1e-4, (theirs.keys(), err)


@pytest.mark.parametrize("backend, k, persistent", CASES)
def test_katz_under_the_degree_rule_matches_networkx(backend, k, persistent):
    """Katz (absolute stop, share 1) with a uniform and a per-vertex beta against NetworkX."""
    _prepare(backend, k)
    G = nx.gnp_random_graph(600, 0.01, seed=40 + k, directed=True)
    G.add_nodes_from(range(600, 604))
    for beta in (1.0, {v: 0.5 + (v % 3) for v in G}):
        ref = nx.katz_centrality(G, alpha=0.1, beta=beta, tol=1e-12, max_iter=5000)
        with Katz(load_graph(G), alpha=0.1, beta=beta, backend=backend, devices=k,
                  partition="contiguous", tol=1e-8, mode="async",
                  tuning=_tuning(backend, persistent)) as s:
            res = s.run()
        assert res.stats["push_rule"] == "degree" and res.stats["converged"], res.stats
        got = res.to_dict()
        scale = max(abs(x) for x in ref.values())
        assert max(abs(got[v] - ref[v]) for v in ref) <= 1e-4 * scale


def test_bsp_has_no_push_rule():
    g = load_graph("grid:12", cache=False)
    assert pr.pagerank(g, backend="cpu", devices=1, mode="bsp", tuning=DEGREE) \
        .stats["push_rule"] is None


@pytest.mark.parametrize("command", ["pr", "katz"])
def test_the_command_line_takes_the_rule(command, capsys):
    """``--push-rule`` (PageRank and Katz, in the advanced group); a bad value names the
    choices, as PageRankTuning's check does."""
    import json
    from groute.cli import main
    alpha = ["--alpha", "0.01"] if command == "katz" else []   # below 1 / lambda_max
    for rule in ("degree", "uniform"):
        assert main([command, "--graph", "kron:8", "--backend", "cpu", "--mode", "async",
                     "--push-rule", rule, "--json", "--repeat", "1", *alpha]) == 0
        assert json.loads(capsys.readouterr().out)["stats"]["push_rule"] == rule
    with pytest.raises(SystemExit):
        main([command, "--graph", "kron:8", "--push-rule", "hubs"])
    err = capsys.readouterr().err
    assert "--push-rule: invalid choice: 'hubs'" in err and "uniform" in err and "degree" in err
    with pytest.raises(ValueError, match="push_rule must be one of uniform, degree; got 'hubs'"):
        PageRankTuning(push_rule="hubs")


def test_the_probe_compares_both_rules_with_bsp(tmp_path, capsys):
    """benchmarks/probes/gpu_push_rule_probe.py on CPU virtual devices (its harness; the lead
    runs it on GPUs): per graph and device count a BSP case and one per rule, with the
    counters it prints."""
    import importlib.util
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "gpu_push_rule_probe.py"
    spec = importlib.util.spec_from_file_location("gpu_push_rule_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    out = tmp_path / "cases.json"
    assert probe.main(["--backend", "cpu", "--graphs", "kron:8,grid:10", "--devices", "1,2",
                       "--repeat", "1", "--json", str(out)]) == 0
    cases = json.loads(out.read_text())
    assert [(c["graph"], c["devices"], c["mode"], c.get("push_rule")) for c in cases] == [
        (g, k, mode, rule) for g in ("kron:8", "grid:10") for k in (1, 2)
        for mode, rule in (("bsp", None), ("async", "uniform"), ("async", "degree"))]
    for case in cases:
        assert "error" not in case, case
        if case["mode"] == "async":
            assert case["arcs_pushed"] > 0 and case["l1_to_bsp"] < 1e-4, case
