#!/usr/bin/env python
"""GPU check of the centralities added for the NetworkX backend (issue 40): closeness (64-source
breadth-first batches, and by lengths), betweenness by lengths and edge betweenness (Brandes on
the subdivided graph), eigenvector centrality and HITS, on CUDA devices.

1. Closeness's host steps per source: on one graph, the searches from 64, 128, ... sources
   (``Closeness.sums``), each batch a ``run_loop`` (one fused launch on one GPU) and two
   computes; the seconds per batch should stay flat as the sources grow (the host pays per
   batch, the devices per level of each batch), and a host profile of the largest run shows the
   Python calls per batch (``--profile``).
2. The answers of every function on small graphs against NetworkX on the GPU(s), and the
   rounds' and loops' implementation (``fused`` expected on one GPU).
3. Seconds of each function on a mid-size graph (``--graph``), NetworkX's beside it where it
   finishes within ``--nx-limit`` sources' worth of work (its closeness and betweenness are
   timed on ``--nx-sources`` sources and scaled).

Run from the repository root on a machine with a CUDA GPU::

    python benchmarks/probes/gpu_centrality.py                    # one GPU, a few minutes
    python benchmarks/probes/gpu_centrality.py --devices 2        # two GPUs (fused on each)
    python benchmarks/probes/gpu_centrality.py --graph kron:16 --profile

One line per case (``OK``/``FAIL``); exit status 1 if anything failed.
"""
from __future__ import annotations

import argparse
import cProfile
import math
import pstats
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import groute  # noqa: E402
from groute.graph import load_graph  # noqa: E402

FAILED = []


def report(ok: bool, case: str, text: str) -> None:
    print(f"{'OK  ' if ok else 'FAIL'} {case}: {text}", flush=True)
    if not ok:
        FAILED.append(case)


def batches(g, options, counts, profile):
    """Closeness's searches from the first ``count`` vertices, for each count."""
    from groute.apps.closeness import BATCH, Closeness
    with Closeness(g, **options) as solver:
        solver.sums(np.arange(min(BATCH, g.num_vertices)))           # compile, warm
        for count in counts:
            sources = np.arange(min(count, g.num_vertices))
            solver.engine.reset_counters()
            t0 = time.perf_counter()
            solver.sums(sources)
            seconds = time.perf_counter() - t0
            stats = solver.engine.stats
            runs = math.ceil(sources.size / BATCH)
            report(stats["loops"] == runs, f"closeness batches {sources.size}",
                   f"{seconds * 1e3:.1f} ms, {seconds / runs * 1e3:.2f} ms per batch of "
                   f"{BATCH}, loops {stats['loops']} ({stats['loop']}), computes "
                   f"{stats['computes']}")
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            solver.sums(np.arange(min(counts[-1], g.num_vertices)))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(18)


def agree(got: dict, want: dict, tol: float) -> float:
    assert list(got) == list(want) or set(got) == set(want)
    return max((abs(got[k] - want[k]) for k in want), default=0.0)


def answers(options):
    """Every function against NetworkX on small graphs, through the groute functions."""
    G = nx.gnm_random_graph(300, 1200, seed=1)
    D = nx.gnm_random_graph(250, 1500, seed=2, directed=True)
    for H in (G, D):
        for u, v in H.edges():
            H[u][v]["w"] = 1 + (u * 7 + v) % 5 + 0.25 * ((u + v) % 2)
    for name, H in (("undirected", G), ("directed", D)):
        cases = [
            ("closeness", lambda H=H: groute.closeness_centrality(H, **options).to_dict(),
             lambda H=H: nx.closeness_centrality(H), 1e-12),
            ("closeness by w", lambda H=H: groute.closeness_centrality(
                H, distance="w", **options).to_dict(),
             lambda H=H: nx.closeness_centrality(H, distance="w"), 1e-9),
            ("betweenness by w", lambda H=H: groute.betweenness_centrality(
                H, k=24, seed=3, weight="w", **options).to_dict(),
             lambda H=H: nx.betweenness_centrality(H, k=24, seed=3, weight="w"), 1e-9),
            ("edge betweenness", lambda H=H: groute.edge_betweenness_centrality(
                H, k=24, seed=3, **options),
             lambda H=H: nx.edge_betweenness_centrality(H, k=24, seed=3), 1e-9),
            ("eigenvector by w", lambda H=H: groute.eigenvector_centrality(
                H, weight="w", max_iter=1000, **options).to_dict(),
             lambda H=H: nx.eigenvector_centrality(H, weight="w", max_iter=1000), 1e-6),
            ("hits", lambda H=H: groute.hits(H, max_iter=5000, **options)[1].to_dict(),
             lambda H=H: nx.hits(H)[1], 1e-6),
        ]
        for case, ours, theirs, tol in cases:
            try:
                err = agree(ours(), theirs(), tol)
                report(err <= tol, f"{case} ({name})", f"max difference {err:.2e}")
            except Exception as exc:       # a probe: report and go on
                report(False, f"{case} ({name})", f"{type(exc).__name__}: {exc}")


def speeds(g, options, nx_sources):
    """Seconds of each function on ``g`` (second call), NetworkX's beside it (closeness and
    betweenness from ``nx_sources`` sources, scaled to every source)."""
    G = g.to_networkx()
    src, dst = g.edges()
    for u, v, w in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(),
                       np.asarray(g.weights).tolist()):
        G[u][v]["weight"] = w
    n = g.num_vertices
    sample = list(range(min(nx_sources, n)))

    def clock(fn):
        fn()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    ours = {
        "closeness": clock(lambda: groute.closeness_centrality(g, **options)),
        "betweenness (k=64) by lengths": clock(lambda: groute.betweenness_centrality(
            g, k=64, seed=1, weight="weight", **options)),
        "edge betweenness (k=64)": clock(lambda: groute.edge_betweenness_centrality(
            g, k=64, seed=1, **options)),
        "eigenvector": clock(lambda: groute.eigenvector_centrality(g, max_iter=1000,
                                                                   **options)),
        "hits": clock(lambda: groute.hits(g, max_iter=5000, **options)),
    }
    t0 = time.perf_counter()
    for s in sample:
        nx.single_source_shortest_path_length(G, s)
    theirs = {"closeness": (time.perf_counter() - t0) * n / len(sample)}
    t0 = time.perf_counter()
    nx.betweenness_centrality(G, k=min(8, n), seed=1, weight="weight")
    theirs["betweenness (k=64) by lengths"] = (time.perf_counter() - t0) * 64 / min(8, n)
    for case, seconds in ours.items():
        other = theirs.get(case)
        extra = f", NetworkX ~{other:.2f} s ({other / seconds:.1f}x)" if other else ""
        report(True, f"speed {case}", f"{seconds:.3f} s on {g.name}{extra}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="kron:14", help="the speed and batch graph")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--backend", default="cuda", help="cpu: a dry run of this script")
    ap.add_argument("--nx-sources", type=int, default=16)
    ap.add_argument("--profile", action="store_true", help="a host profile of the batches")
    args = ap.parse_args()
    options = dict(backend=args.backend, devices=args.devices)
    g = load_graph(args.graph).with_weights(seed=1, low=1, high=9)
    batches(g, options, [64, 256, 1024, 4096], args.profile)
    answers(options)
    speeds(g, options, args.nx_sources)
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all OK")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
