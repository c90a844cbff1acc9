"""Time NetworkX calls with and without ``backend="groute"`` on one NetworkX graph.

    python benchmarks/probes/nx_backend.py                       # ~1M edges, groute's default devices
    python benchmarks/probes/nx_backend.py --edges 100000 --backend cpu --devices 2

For ``nx.pagerank``, ``nx.single_source_shortest_path_length`` and ``nx.connected_components``
on an undirected G(n, m) random graph (m edges, n = m / 10 nodes), it reports:

* ``networkx``: the call on NetworkX's own implementation (the median of ``--nx-repeat``);
* ``convert``: groute's conversion of the graph alone (what NetworkX caches on the graph);
* ``first``: the dispatched call on a graph not converted yet (conversion included);
* ``cached``: the dispatched call again, the conversion taken from NetworkX's cache (median
  of ``--repeat``);

and the speed-ups over NetworkX of ``first`` and ``cached``. Every groute answer is checked
against NetworkX's (PageRank within NetworkX's tolerance, the others equal). Device start-up
and kernel compilation are paid by a warm-up call on a small graph first and reported apart.
The issue's target (PageRank, ``first`` at least 20x NetworkX's time) is judged on H200s only.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import networkx as nx
import numpy as np

TARGET_PAGERANK_FIRST = 20.0


def random_graph(num_nodes: int, num_edges: int, seed: int) -> nx.Graph:
    """An undirected G(n, m)-like graph (repeated pairs merge, so slightly fewer edges)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges).tolist()
    dst = rng.integers(0, num_nodes, num_edges).tolist()
    G = nx.Graph()
    G.add_nodes_from(range(num_nodes))
    G.add_edges_from(zip(src, dst))
    return G


CALLS = {
    "pagerank": lambda G, **kw: nx.pagerank(G, **kw),
    "single_source_shortest_path_length":
        lambda G, **kw: nx.single_source_shortest_path_length(G, 0, **kw),
    "connected_components": lambda G, **kw: list(nx.connected_components(G, **kw)),
}


def same_answer(name: str, got, want) -> bool:
    if name == "pagerank":      # both stop when the L1 change is below N * tol
        return set(got) == set(want) and sum(abs(got[k] - want[k]) for k in want) <= \
            2 * len(want) * 1e-6
    return got == want


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def edge_attrs_of(name: str):
    """What NetworkX asks the conversion for in each call (pagerank reads "weight")."""
    return {"weight": 1} if name == "pagerank" else None


def bench(G, name: str, repeat: int, nx_repeat: int) -> dict:
    from groute.nx_backend.interface import backend_interface
    call = CALLS[name]
    nx_times = []
    for _ in range(nx_repeat):
        t, want = timed(lambda: call(G, backend="networkx"))
        nx_times.append(t)
    G.__networkx_cache__.clear()
    convert_s, _ = timed(lambda: backend_interface.convert_from_nx(
        G, edge_attrs=edge_attrs_of(name), name=name))
    G.__networkx_cache__.clear()
    first_s, got = timed(lambda: call(G, backend="groute"))
    ok = same_answer(name, got, want)
    cached = []
    for _ in range(repeat):
        t, got = timed(lambda: call(G, backend="groute"))
        cached.append(t)
        ok = ok and same_answer(name, got, want)
    nx_s, cached_s = statistics.median(nx_times), statistics.median(cached)
    return {"function": name, "networkx_s": nx_s, "convert_s": convert_s, "first_s": first_s,
            "cached_s": cached_s, "speedup_first": nx_s / first_s,
            "speedup_cached": nx_s / cached_s, "answers_equal": bool(ok)}


def device_summary() -> str:
    from groute.runtime.context import resolve_backend
    from groute.nx_backend.devices import _contexts
    names = sorted({d.name for ctx, _ in _contexts.values() for d in ctx.devices})
    return f"{resolve_backend(nx.config.backends.groute.backend)}: {', '.join(names)}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", type=int, default=1_000_000, help="edges drawn (default 1M)")
    p.add_argument("--nodes", type=int, default=None, help="nodes (default edges / 10)")
    p.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--devices", type=int, default=None, help="devices per call (default: "
                   "every GPU, or one CPU virtual device)")
    p.add_argument("--repeat", type=int, default=5, help="cached groute calls timed (median)")
    p.add_argument("--nx-repeat", type=int, default=1, help="NetworkX calls timed (median)")
    p.add_argument("--functions", default=",".join(CALLS), help="comma-separated subset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    if "groute" not in nx.utils.backends.backends:
        print("groute is not registered as a NetworkX backend: pip install -e . first",
              file=sys.stderr)
        return 2
    nx.config.backends.groute.backend = args.backend
    nx.config.backends.groute.devices = args.devices
    nx.config.warnings_to_ignore.add("cache")
    startup_s, _ = timed(lambda: [CALLS[f](nx.path_graph(64), backend="groute") for f in CALLS])
    n = args.nodes or max(2, args.edges // 10)
    build_s, G = timed(lambda: random_graph(n, args.edges, args.seed))
    print(f"graph: {G.number_of_nodes():,} nodes, {G.number_of_edges():,} edges "
          f"(built in {build_s:.1f} s); groute on {device_summary()}; start-up and compile "
          f"{startup_s:.2f} s")
    rows = [bench(G, f, args.repeat, args.nx_repeat) for f in args.functions.split(",")]
    print(f"{'function':36} {'networkx':>10} {'convert':>9} {'first':>9} {'cached':>9} "
          f"{'x first':>8} {'x cached':>9}  answers")
    for r in rows:
        print(f"{r['function']:36} {r['networkx_s']:9.3f}s {r['convert_s']:8.3f}s "
              f"{r['first_s']:8.3f}s {r['cached_s']:8.4f}s {r['speedup_first']:7.1f}x "
              f"{r['speedup_cached']:8.1f}x  {'equal' if r['answers_equal'] else 'DIFFER'}")
    pr = next((r for r in rows if r["function"] == "pagerank"), None)
    on_h200 = "H200" in device_summary()
    if pr is not None:
        verdict = ("met" if pr["speedup_first"] >= TARGET_PAGERANK_FIRST else "missed") \
            if on_h200 else "not judged (not on an H200)"
        print(f"target: PageRank dispatched with conversion >= {TARGET_PAGERANK_FIRST:.0f}x "
              f"NetworkX: {pr['speedup_first']:.1f}x, {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
                       "devices": device_summary(), "startup_s": startup_s, "rows": rows}, f,
                      indent=1)
    return 0 if all(r["answers_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
