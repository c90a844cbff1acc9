"""The asynchronous push as one persistent kernel per CUDA device (iterate.cu
``pr_async_persistent``, the linear iteration engines' ``mode="async"`` where the devices meet):
the host reads the kernel's words as the kernel declares them, the push threshold keeps every
quiet run within the stopping rule, the kernel compiles for sm_90 without spills in every form
(nvcc, no GPU needed); on GPUs (1, 2 and 4 devices, logical ones where there are fewer GPUs)
PageRank (unweighted, weighted, personalised, with a dangling distribution) and Katz against
the reference and NetworkX, the stats, a run that cannot converge, and a device that never
starts."""
import re
import shutil
import subprocess
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import groute
from groute import kernels
from groute.apps import pr
from groute.apps.katz import KATZ, Katz
from groute.apps.pr import PAGERANK
from groute.engines.iterate import device as iterate_device
from groute.engines.iterate.thresholds import THRESHOLD_MARGIN, push_thresholds
from groute.engines.protocol import MEETING_WORDS, PROTOCOL_WORDS
from groute.graph import load_graph, reference
from groute.tuning import PageRankTuning
from support import gpu_marks, graph_from, need_gpus, weighted_pagerank_case

ROOT = Path(__file__).resolve().parents[1]
ITERATE = ROOT / "groute" / "engines" / "iterate"
KERNEL_NAME = "pr_async_persistent"


def _members(text: str, name: str) -> list:
    """The members of C enum ``name`` in ``text``, in order, as written (``NAME`` or ``NAME =
    VALUE``, comments dropped)."""
    body = re.search(rf"enum {name} \{{(.*?)\}};", text, re.S)[1]
    body = re.sub(r"//[^\n]*", "", body)
    return [m.strip() for m in body.split(",") if m.strip()]


# ------------------------------------------------------------------------------------------------
# the host's half (no GPU)
# ------------------------------------------------------------------------------------------------
def test_the_host_reads_the_words_the_kernel_declares():
    text = (ITERATE / "iterate.cu").read_text()
    words = _members(text, "AsyncWord")
    assert words[0] == "A_STOP = PROTOCOL_WORDS"
    names = [w.split(" = ")[0] for w in words]
    assert all(" = " not in w for w in words[1:]), words    # numbered in order
    assert names == ["A_STOP", "A_EPS", "A_RESID", "A_MASS", "A_ACTIVE", "A_PUSHED", "A_ARCS",
                     "A_SENT", "A_TOTAL_RESID", "A_TOTAL_MASS", "ASYNC_CTL_WORDS"]
    for offset, name in enumerate(names):
        assert getattr(iterate_device, name) == PROTOCOL_WORDS + offset, name
    status = dict(m.split(" = ") for m in _members(text, "AsyncStatus"))
    assert {name: int(v) for name, v in status.items()} == {
        "ASYNC_GO_ON": 0, "ASYNC_CONVERGED": iterate_device.ASYNC_CONVERGED,
        "ASYNC_STUCK": iterate_device.ASYNC_STUCK, "ASYNC_ROUNDS": iterate_device.ASYNC_ROUNDS}
    most = int(re.search(r"#define ASYNC_MAX_DEVICES (\d+)", text)[1])
    assert most == iterate_device.ASYNC_MAX_DEVICES
    assert iterate_device.ASYNC_MEETING_WORDS == MEETING_WORDS + 3 * most
    from groute.engines.peer_barrier import MAX_DEVICES
    assert MAX_DEVICES <= most      # every context the kernels run on has a slot per device


@pytest.mark.parametrize("iteration", [PAGERANK, KATZ], ids=["relative", "absolute"])
@pytest.mark.parametrize("tol, n, base_sum", [(1e-6, 100, 0.15), (1e-10, 1 << 21, 0.15),
                                              (3e-7, 7, 7.0), (1e-6, 1000, 1e-30)])
def test_a_run_with_no_vertex_above_the_threshold_meets_the_rule(iteration, tol, n, base_sum):
    """Every residual at the threshold (the most a quiet run leaves), summed in float64 as the
    kernel sums them, meets the stopping rule at the least mass there is (the base's sum) and
    at any larger mass with the threshold that mass gives; the threshold is a float32 value
    and within THRESHOLD_MARGIN (and float32 rounding) of the rule's share per vertex."""
    eps0, per_mass = push_thresholds(iteration, tol, n, base_sum)
    bound = iteration.bound(tol, n)
    assert float(np.float32(eps0)) == eps0
    for mass in (base_sum, 3.0 * base_sum):
        eps = max(eps0, float(np.float32(per_mass * mass)))   # the kernel rounds down
        if float(np.float32(per_mass * mass)) > per_mass * mass:
            eps = max(eps0, float(np.nextafter(np.float32(per_mass * mass), np.float32(0))))
        residuals = np.full(n, np.float32(eps), np.float32)
        assert bool(iteration.stopped(residuals.astype(np.float64).sum(), mass, bound))
    share = tol * (base_sum if iteration.stop == "relative" else 1.0)
    assert share * (1 - 2 * THRESHOLD_MARGIN) <= eps0 <= share
    assert per_mass == (tol * (1 - THRESHOLD_MARGIN) if iteration.stop == "relative" else 0.0)


def test_a_stuck_run_says_why_it_did_not_converge():
    """The kernel's stops that are not convergence raise NetworkX's error, naming what
    happened: no vertex above the threshold with residuals that fail the rule (not finite), or
    the round cap."""
    g = load_graph("grid:6", cache=False)
    with pr.PageRank(g, backend="cpu", devices=1, mode="async", max_iter=7) as s:
        stats = s.solve()[2]
        stats.update(persistent=True, converged=False, rounds=[12], stop="stuck")
        with pytest.raises(groute.PowerIterationFailedConvergence, match="not finite"):
            s.check_converged(stats)
        stats.update(rounds=[70])           # stuck at the round cap: still why it stopped
        with pytest.raises(groute.PowerIterationFailedConvergence, match="not finite"):
            s.check_converged(stats)
        stats.update(stop="rounds")
        with pytest.raises(groute.PowerIterationFailedConvergence,
                           match=r"in 70 push rounds \(mode"):
            s.check_converged(stats)


def decision_blocks(sums, status):
    """Control blocks (uint64 words) of devices whose last decision added up ``sums``
    (residuals, mass per device) and stopped with ``status``."""
    from groute.engines.iterate.device import A_STOP, A_TOTAL_MASS, A_TOTAL_RESID
    blocks = []
    for resid, mass in sums:
        block = np.zeros(A_TOTAL_MASS + 1, np.uint64)
        block[A_STOP] = status
        block[A_TOTAL_RESID:A_TOTAL_MASS + 1] = np.array([resid, mass]).view(np.uint64)
        blocks.append(block)
    return blocks


def test_the_host_checks_the_kernels_decision():
    """The sums every device decided on must agree bit for bit, and the stopping rule on them
    must say what the kernels did (a flush not yet visible at the decision would not)."""
    from groute.engines.iterate.device import ASYNC_CONVERGED, ASYNC_ROUNDS, ASYNC_STUCK
    from groute.engines.iterate.solver import decided_sums
    bound = PAGERANK.bound(1e-6, 100)               # the rule: residuals <= 1e-4 of the mass
    same = [(1e-5, 1.0)] * 3
    assert decided_sums("pagerank", decision_blocks(same, ASYNC_CONVERGED), ASYNC_CONVERGED,
                        PAGERANK, bound) == (1e-5, 1.0)
    for status in (ASYNC_ROUNDS, ASYNC_STUCK):
        with pytest.raises(RuntimeError, match="stopped as .* says it holds"):
            decided_sums("pagerank", decision_blocks(same, status), status, PAGERANK, bound)
    far = [(1e-3, 1.0)] * 2
    with pytest.raises(RuntimeError, match="stopped as 'converged' .* does not hold"):
        decided_sums("pagerank", decision_blocks(far, ASYNC_CONVERGED), ASYNC_CONVERGED,
                     PAGERANK, bound)
    assert decided_sums("pagerank", decision_blocks(far, ASYNC_ROUNDS), ASYNC_ROUNDS,
                        PAGERANK, bound) == (1e-3, 1.0)
    split = [(1e-5, 1.0), (1e-5 * (1 + 1e-15), 1.0)]
    with pytest.raises(RuntimeError, match="decided on different sums"):
        decided_sums("pagerank", decision_blocks(split, ASYNC_CONVERGED), ASYNC_CONVERGED,
                     PAGERANK, bound)


def test_the_persistent_push_s_stats_are_in_the_documented_set():
    """Every key the persistent push reports is one PageRank's results document (a key outside
    the set fails every run), and ``stop`` names why the kernels stopped."""
    from groute.engines.iterate.device import (A_ARCS, A_PUSHED, A_SENT, ASYNC_CONVERGED,
                                               ASYNC_ROUNDS, ASYNC_STUCK)
    from groute.engines.iterate.solver import persistent_async_stats, stats_keys
    from groute.results import complete_stats
    for status, stop in ((ASYNC_CONVERGED, "converged"), (ASYNC_STUCK, "stuck"),
                         (ASYNC_ROUNDS, "rounds")):
        for k in (1, 3):
            blocks = decision_blocks([(1e-5, 1.0)] * k, status)
            for i, block in enumerate(blocks):
                block[[A_PUSHED, A_ARCS, A_SENT]] = (10 + i, 100 + i, 7 * i)
            stats = persistent_async_stats(blocks, 12, status, 1e-5, 2.0, push_rule="degree",
                                           eps=1e-9, check_every=4)
            full = complete_stats(stats_keys(PAGERANK), stats)
            assert full["stop"] == stop and full["converged"] == (stop == "converged")
            assert full["rounds"] == [12] * k and full["l1_change"] == 5e-6
            assert full["arcs_pushed_per_device"] == [100 + i for i in range(k)]
            assert full["bytes_sent"] == 4 * sum(7 * i for i in range(k))
            assert full["items_sent"] == ({f"{i}->peers": 7 * i for i in range(k)} if k > 1
                                          else {})


@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile without a GPU")
@pytest.mark.parametrize("arc_weights, base_vector", [(0, 0), (1, 1)])
def test_the_kernel_compiles_without_spills(arc_weights, base_vector, tmp_path):
    """iterate.cu with PageRank's header, with and without weighted arcs and a base vector:
    pr_async_persistent fits the 64 registers that four blocks of 256 threads per SM leave
    (its __launch_bounds__, the grid launch_resident computes) without spilling."""
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{ITERATE}", f"-I{PAGERANK.include_dir}",
         f"-I{kernels.HEADER_DIRS[0]}", f"-DARC_WEIGHTS={arc_weights}",
         f"-DBASE_VECTOR={base_vector}", "-Xptxas", "-v", "-cubin",
         str(ITERATE / "iterate.cu"), "-o", str(tmp_path / "iterate.cubin")],
        capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stderr.split(f"Compiling entry function '{KERNEL_NAME}'")[1]
    report = report.split("Compiling entry function")[0]
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    registers = int(re.search(r"Used (\d+) registers", report)[1])
    assert registers <= 64, report


# ------------------------------------------------------------------------------------------------
# on GPUs
# ------------------------------------------------------------------------------------------------
def cuda_cases(counts=(1, 2, 4)):
    return [pytest.param(k, marks=gpu_marks(k), id=f"cuda-x{k}") for k in counts]


def graphs():
    """kron (power law, dangling vertices), a grid (slow mixing), a small directed graph with
    dangling and isolated vertices and a sink chain."""
    return {"kron:12": load_graph("kron:12", cache=False),
            "grid:40": load_graph("grid:40", cache=False),
            "dangling": graph_from(9, [(0, 1), (1, 2), (2, 0), (0, 3), (3, 4), (5, 4), (6, 7),
                                       (7, 8)])}


def _options(g, **more):
    """What these runs share: 1e-6 of the mass as the L1 bound (tol is per vertex), every arc
    alike unless weighted, the contiguous partition."""
    return {"tol": 1e-6 / max(g.num_vertices, 1), "max_iter": 1000, "weight": None,
            "partition": "contiguous", "mode": "async", **more}


def _l1_to_reference(values, g):
    return reference.pagerank_error(values, reference.pagerank(g, tol=1e-13))[0]


def _assert_persistent(stats, k):
    assert stats["persistent"] is True and stats["persistent_reason"] is None, stats
    assert stats["converged"] is True and stats["sweeps_per_round"] == 1
    rounds = stats["rounds"]
    assert len(rounds) == k and len(set(rounds)) == 1 and rounds[0] >= 1
    assert rounds[0] % stats["check_every"] == 0, stats      # decided at a check, not the cap
    assert sum(stats["vertices_pushed_per_device"]) > 0
    assert sum(stats["arcs_pushed_per_device"]) >= 0
    assert 0 <= stats["l1_change"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", cuda_cases())
def test_pagerank_matches_the_reference(k):
    """Unweighted PageRank on kron, a grid and a directed graph with dangling vertices: the
    answer within the L1 bound of the reference (the rule bounds the residuals' sum by 1e-6 of
    the mass, the answer's error by alpha / (1 - alpha) times that, twice for the
    normalisation), the kernel's own measure within the rule, twice from one solver (the
    meeting counter goes on from where it stands)."""
    need_gpus(k)
    for name, g in graphs().items():
        if g.num_vertices < k:
            continue
        with pr.PageRank(g, backend="cuda", devices=k, **_options(g)) as s:
            for _ in range(2):
                res = s.run()
                _assert_persistent(res.stats, k)
                assert res.stats["l1_change"] <= 1e-6, (name, res.stats["l1_change"])
                l1 = _l1_to_reference(res.values, g)
                assert l1 <= 2e-5, (name, l1)
                if k > 1 and name != "dangling":
                    assert sum(res.stats["items_sent"].values()) > 0, res.stats
                    assert res.stats["bytes_sent"] == 4 * sum(res.stats["items_sent"].values())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", cuda_cases((2, 4)))
def test_a_big_power_law_graph_keeps_the_error_bound(k):
    """kron:21 on several devices: the remote sums flushed once per round (double until
    then) lose nothing the bound cannot absorb (alpha / (1 - alpha) times 1e-6, twice for the
    normalisation)."""
    need_gpus(k)
    g = load_graph("kron:21")
    res = pr.pagerank(g, backend="cuda", devices=k, **_options(g))
    _assert_persistent(res.stats, k)
    l1 = reference.pagerank_error(res.values, reference.pagerank(g, tol=1e-10))[0]
    assert l1 <= 1.2e-5, f"L1 {l1:.2e}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", cuda_cases())
def test_pagerank_agrees_with_the_host_driven_push_and_bsp(k):
    """The persistent kernel, the host-driven push (persistent=False) and BSP give the same
    PageRank within their bounds; the host path says why it is not persistent."""
    need_gpus(k)
    g = load_graph("kron:12", cache=False)
    kernel = pr.pagerank(g, backend="cuda", devices=k, **_options(g))
    host = pr.pagerank(g, backend="cuda", devices=k,
                       **_options(g, tuning=PageRankTuning(persistent=False)))
    bsp = pr.pagerank(g, backend="cuda", devices=k, **_options(g, mode="bsp"))
    assert kernel.stats["persistent"] is True
    assert host.stats["persistent"] is False
    assert host.stats["persistent_reason"] == "persistent=False"
    for other in (host, bsp):
        assert np.abs(kernel.values - other.values).sum() <= 3e-5


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", cuda_cases())
def test_weighted_and_personalised_pagerank_match_networkx(k):
    """ARC_WEIGHTS and BASE_VECTOR forms of the kernel: weighted PageRank on a directed graph
    with dangling vertices (by arcs and by weight), a personalisation, and a dangling
    distribution (two solves on one set-up, the second with another base vector), against
    NetworkX."""
    need_gpus(k)
    G, person, dangling = weighted_pagerank_case(k)
    g = load_graph(G, weight="w")
    opts = dict(backend="cuda", devices=k, tol=1e-10, max_iter=1000, partition="contiguous",
                mode="async")
    cases = [(dict(weight="w"), dict(weight="w")),
             (dict(weight=None, personalization=person), dict(weight=None,
                                                               personalization=person)),
             (dict(weight="w", personalization=person, dangling=dangling),
              dict(weight="w", personalization=person, dangling=dangling))]
    for ours, theirs in cases:
        want = nx.pagerank(G, tol=1e-13, max_iter=5000, **theirs)
        with pr.PageRank(g, **opts, **ours) as s:
            res = s.run()
        assert res.stats["persistent"] is True and res.stats["converged"], res.stats
        got = res.to_dict()
        err = sum(abs(got[v] - want[v]) for v in want)
        assert err <= 1e-4, (ours.keys(), err)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("k", cuda_cases())
def test_katz_matches_networkx_and_a_divergent_run_raises(k):
    """Katz's iteration (absolute stop, share 1) with a uniform and a per-vertex beta against
    NetworkX; an alpha above 1 / the largest eigenvalue diverges and raises NetworkX's
    error."""
    need_gpus(k)
    G = nx.gnp_random_graph(600, 0.01, seed=40 + k, directed=True)
    G.add_nodes_from(range(600, 604))
    for beta in (1.0, {v: 0.5 + (v % 3) for v in G}):
        ref = nx.katz_centrality(G, alpha=0.1, beta=beta, tol=1e-12, max_iter=5000)
        with Katz(load_graph(G), alpha=0.1, beta=beta, backend="cuda", devices=k,
                  partition="contiguous", tol=1e-8, mode="async") as s:
            res = s.run()
        assert res.stats["persistent"] is True and res.stats["converged"], res.stats
        got = res.to_dict()
        scale = max(abs(x) for x in ref.values())
        assert max(abs(got[v] - ref[v]) for v in ref) <= 1e-4 * scale
    with pytest.raises(groute.PowerIterationFailedConvergence):
        groute.katz_centrality(nx.gnp_random_graph(60, 0.3, seed=2, directed=True), alpha=0.5,
                               max_iter=40, backend="cuda", devices=k, mode="async")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("k", cuda_cases())
def test_a_run_that_cannot_converge_in_max_iter_raises(k):
    """Ten times max_iter rounds is the cap: a tolerance the cap cannot reach raises NetworkX's
    error (naming the rounds), and the solver runs again afterwards."""
    need_gpus(k)
    g = load_graph("grid:40", cache=False)
    with pr.PageRank(g, backend="cuda", devices=k, **_options(g, tol=1e-14, max_iter=2)) as s:
        with pytest.raises(groute.PowerIterationFailedConvergence, match="20 push rounds"):
            s.run()
    res = pr.pagerank(g, backend="cuda", devices=k, **_options(g))
    assert res.stats["converged"] and _l1_to_reference(res.values, g) <= 2e-5


@pytest.mark.timeout(240)
@pytest.mark.parametrize("check_every", [1, 3, 16])
@pytest.mark.parametrize("k", cuda_cases((1, 2)))
def test_check_every_sets_the_rounds_between_decisions(k, check_every):
    need_gpus(k)
    g = load_graph("kron:10", cache=False)
    res = pr.pagerank(g, backend="cuda", devices=k,
                      **_options(g, tuning=PageRankTuning(check_every=check_every)))
    _assert_persistent(res.stats, k)
    assert res.stats["check_every"] == check_every
    assert _l1_to_reference(res.values, g) <= 2e-5


@pytest.mark.multigpu
@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 4], ids=["x2", "x4"])
def test_a_device_that_never_starts_raises_and_the_solver_recovers(k, monkeypatch):
    """A device whose kernel never launches: the others give up at a meeting after
    GROUTE_PEER_BARRIER_TIMEOUT, the run raises in the caller naming the devices that waited,
    the meeting block is zeroed, and the next run is right."""
    need_gpus(k)
    import groute.engines.peer_barrier as peer_barrier
    monkeypatch.setattr(peer_barrier, "BARRIER_TIMEOUT_S", 0.5)
    g = load_graph("kron:10", cache=False)
    IterationDevice = iterate_device.IterationDevice
    with pr.PageRank(g, backend="cuda", devices=k, **_options(g)) as s:
        good = s.run()
        real = IterationDevice.push_persistent_launch
        monkeypatch.setattr(IterationDevice, "push_persistent_launch",
                            lambda self, *a: None if self.device.index == 1 else real(self, *a))
        with pytest.raises(RuntimeError, match="waited more than 0.5 s at a cross-device"):
            s.run()
        monkeypatch.setattr(IterationDevice, "push_persistent_launch", real)
        again = s.run()
    assert again.stats["persistent"] is True and again.stats["converged"]
    assert np.abs(again.values - good.values).sum() <= 3e-5
    assert _l1_to_reference(again.values, g) <= 2e-5
