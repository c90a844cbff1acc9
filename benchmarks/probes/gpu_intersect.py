"""The intersect operator and the NetworkX functions built on it, timed and checked.

    python benchmarks/probes/gpu_intersect.py                          # one H200 (and every GPU)
    python benchmarks/probes/gpu_intersect.py --graph kron:18 --devices 1,2,4 --edges 1000000
    python benchmarks/probes/gpu_intersect.py --backend cpu --graph kron:12 --edges 20000

Two parts:

* ``operator``: ``Intersection(g).triangles()`` and a k-truss (``peel`` until nothing drops)
  on ``--graph`` (a groute graph spec; undirected), on each device count of ``--devices``:
  the copy of the rows to the devices (``upload``), then the median of ``--repeat`` calls,
  with the triangle total checked against the first device count's;
* ``networkx``: ``triangles``, ``clustering``, ``transitivity``, ``k_truss`` (k=4) and
  ``jaccard_coefficient`` of the edges, on a G(n, m) NetworkX graph of ``--edges`` edges, with
  and without ``backend="groute"`` (groute's default devices): NetworkX's time, the first
  dispatched call (conversion included), the call from NetworkX's cache, the speed-ups, and
  whether the answers are NetworkX's (floats within 1e-9).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import networkx as nx
import numpy as np


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def operator_part(spec: str, counts, backend: str, repeat: int, k: int) -> None:
    from groute import Context
    from groute.graph import load_graph
    from groute.operators import Intersection
    g = load_graph(spec)
    g = g.symmetrize() if g.directed else g
    print(f"operator on {spec}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs ({backend})")
    print(f"{'devices':>7} {'upload':>9} {'triangles':>10} {'truss':>9} {'truss rounds':>12}"
          f"  triangles found")
    total = None
    for count in counts:
        with Context(devices=count, backend=backend) as ctx:
            upload, rows = timed(lambda: Intersection(g, ctx=ctx))
            rows.triangles()                        # compile and orient once
            times = []
            for _ in range(repeat):
                t, tri = timed(rows.triangles)
                times.append(t)
            found = int(tri.sum()) // 3
            total = found if total is None else total
            rounds = 0
            t0 = time.perf_counter()
            while rows.peel(k - 2):
                rounds += 1
            truss = time.perf_counter() - t0
        print(f"{count:7d} {upload:8.3f}s {statistics.median(times):9.4f}s {truss:8.3f}s "
              f"{rounds:12d}  {found:,}{'' if found == total else '  DIFFERS'}")


def close(got, want) -> bool:
    if isinstance(want, dict):
        return list(got) == list(want) and all(close(got[x], want[x]) for x in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(close(a, b) for a, b in zip(got, want))
    if isinstance(want, tuple):
        return got[:2] == want[:2] and close(got[2], want[2])
    if isinstance(want, float):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, nx.Graph):
        return set(got.edges) == set(want.edges) and list(got) == list(want)
    return got == want


CALLS = {
    "triangles": lambda G, **kw: nx.triangles(G, **kw),
    "clustering": lambda G, **kw: nx.clustering(G, **kw),
    "transitivity": lambda G, **kw: nx.transitivity(G, **kw),
    "k_truss": lambda G, **kw: nx.k_truss(G, 4, **kw),
    "jaccard_coefficient": lambda G, **kw: list(nx.jaccard_coefficient(G, G.edges, **kw)),
}


def networkx_part(edges: int, repeat: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    n = max(2, edges // 10)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(rng.integers(0, n, edges).tolist(), rng.integers(0, n, edges).tolist()))
    G.remove_edges_from(list(nx.selfloop_edges(G)))
    print(f"networkx on G(n, m): {n:,} nodes, {G.number_of_edges():,} edges")
    print(f"{'function':22} {'networkx':>10} {'first':>9} {'cached':>9} {'x first':>8} "
          f"{'x cached':>9}  answers")
    ok = True
    for name, call in CALLS.items():
        nx_s, want = timed(lambda: call(G, backend="networkx"))
        G.__networkx_cache__.clear()
        first, got = timed(lambda: call(G, backend="groute"))
        same = close(got, want)
        cached = []
        for _ in range(repeat):
            t, got = timed(lambda: call(G, backend="groute"))
            cached.append(t)
        cached_s = statistics.median(cached)
        ok = ok and same
        print(f"{name:22} {nx_s:9.3f}s {first:8.3f}s {cached_s:8.4f}s {nx_s / first:7.1f}x "
              f"{nx_s / cached_s:8.1f}x  {'equal' if same else 'DIFFER'}")
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graph", default="kron:20", help="the operator part's graph (groute spec)")
    p.add_argument("--devices", default="1", help="device counts of the operator part, e.g. 1,2,4")
    p.add_argument("--backend", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--truss", type=int, default=5, help="the operator part's k-truss k")
    p.add_argument("--edges", type=int, default=1_000_000, help="the NetworkX graph's edges")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip", choices=("operator", "networkx"), default=None)
    args = p.parse_args(argv)
    if args.skip != "operator":
        operator_part(args.graph, [int(c) for c in args.devices.split(",")], args.backend,
                      args.repeat, args.truss)
    if args.skip == "networkx":
        return 0
    nx.config.backends.groute.backend = args.backend
    nx.config.warnings_to_ignore.add("cache")
    return 0 if networkx_part(args.edges, args.repeat, args.seed) else 1


if __name__ == "__main__":
    sys.exit(main())
