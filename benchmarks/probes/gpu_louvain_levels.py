"""Louvain's levels on one GPU against one CPU virtual device of the same machine: each level's
arcs, iterations and seconds, then the default call (``backend="auto"``: levels of fewer than
``groute.apps.louvain.HOST_LEVEL_ARCS`` arcs on the host) against NetworkX. What the threshold
was set from (docs/NETWORKX.md, "Community detection, measured apart").

    python benchmarks/probes/gpu_louvain_levels.py 1e4,3e4,1e5

The graphs are ``benchmarks/nx_backend.py``'s G(n, m) (n = m / 10, integer weights), seed 0;
each backend runs twice and the second run is reported; NetworkX runs up to 10^5 edges.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import groute  # noqa: E402
import groute.apps.louvain as louvain  # noqa: E402
import groute.operators.keyed as keyed  # noqa: E402
from nx_backend import benchmark_graph  # noqa: E402

calls = [0]
levels = []


def counted(best_key):
    """``keyed.best_key`` counting its calls (one per iteration of a level's moves)."""
    def call(*args, **kwargs):
        calls[0] += 1
        return best_key(*args, **kwargs)
    return call


def timed(move):
    """``_Level.move`` recording (arcs, iterations, seconds) of each level."""
    def call(self, *args, **kwargs):
        before, started = calls[0], time.perf_counter()
        out = move(self, *args, **kwargs)
        levels.append((self.level.csr.num_edges, calls[0] - before,
                       time.perf_counter() - started))
        return out
    return call


def main(sizes: str) -> None:
    keyed.best_key = counted(keyed.best_key)
    louvain._Level.move = timed(louvain._Level.move)
    groute.louvain_communities(benchmark_graph("undirected", 2000, 0), seed=1, backend="cuda",
                               devices=1)          # compiles the kernels
    for edges in (int(float(e)) for e in sizes.split(",")):
        G = benchmark_graph("undirected", edges, 0)
        for backend in ("cuda", "cpu"):
            for _ in range(2):
                levels.clear()
                started = time.perf_counter()
                groute.louvain_communities(G, seed=1, backend=backend, devices=1)
                total = time.perf_counter() - started
            print(f"edges={edges} {backend} total={total:.3f} levels(arcs,iterations,s)=" +
                  " ".join(f"({a},{i},{s:.3f})" for a, i, s in levels), flush=True)
        for _ in range(2):
            started = time.perf_counter()
            found = groute.louvain_communities(G, seed=1)
            total = time.perf_counter() - started
        print(f"edges={edges} auto total={total:.3f} backends={found.stats['backends']}",
              flush=True)
        if edges <= 100_000:
            started = time.perf_counter()
            theirs = nx.community.louvain_communities(G, seed=1)
            print(f"edges={edges} networkx total={time.perf_counter() - started:.3f} "
                  f"modularity networkx={nx.community.modularity(G, theirs):.4f} "
                  f"groute={nx.community.modularity(G, found.components()):.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "1e4,3e4,1e5")
