"""Community detection through the NetworkX backend against NetworkX itself: modularity and time.

    python benchmarks/probes/nx_community.py                          # groute's default devices
    python benchmarks/probes/nx_community.py --backend cpu --devices 2 --graphs karate lfr
    python benchmarks/probes/nx_community.py --backend cuda --devices 1 --edges 1000000 10000000

For each graph (the graphs of NetworkX's community tests, the real graphs of ../shared/graphs,
and with ``--edges`` random G(n, m) graphs of n = m / 8 nodes) and each ``--seeds`` seed, it
runs ``louvain_communities`` on NetworkX and through ``backend="groute"`` and reports both
modularities (NetworkX's measure, on the same seed) and their ratio, NetworkX's time and
groute's on a graph NetworkX has converted already (its cache: the cached call's time), then
groute's ``leiden_communities`` (which NetworkX does not implement) and
``label_propagation_communities`` (checked equal to NetworkX's). NetworkX is skipped on graphs
past ``--nx-max-edges`` (its Louvain takes minutes there). A markdown table on stdout, the
rows as JSON lines with ``--json``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "graphs"
REAL = ["karate", "netscience", "polblogs", "power", "hep-th", "as-22july06", "email-Enron",
        "cond-mat-2005"]
TESTS = {
    "karate (weighted)": nx.karate_club_graph,
    "LFR 250": lambda: nx.LFR_benchmark_graph(250, 3, 1.5, 0.009, average_degree=5,
                                              min_community=20, seed=10),
    "LFR 250 directed": lambda: nx.LFR_benchmark_graph(250, 3, 1.5, 0.009, average_degree=5,
                                                       min_community=20,
                                                       seed=10).to_directed(),
    "gn_graph 200": lambda: nx.gn_graph(200, seed=1234),
    "les miserables": nx.les_miserables_graph,
    "path 15": lambda: nx.path_graph(15),
}


def shared(name: str, folder: Path = SHARED):
    import scipy.io
    path = folder / f"{name}.mtx.gz"
    with gzip.open(path) as f:
        symmetry = scipy.io.mminfo(f)[5]
    with gzip.open(path) as f:
        m = scipy.io.mmread(f)
    G = nx.Graph() if symmetry == "symmetric" else nx.DiGraph()
    G.add_nodes_from(range(m.shape[0]))
    G.add_edges_from(zip(m.row.tolist(), m.col.tolist()))
    return G


def random_graph(edges: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    n = max(edges // 8, 2)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(rng.integers(0, n, edges).tolist(), rng.integers(0, n, edges).tolist()))
    return G


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def measure(name, G, seeds, nx_max_edges):
    q = nx.community.modularity
    row = {"graph": name, "nodes": G.number_of_nodes(), "edges": G.number_of_edges()}
    nx.community.louvain_communities(G, seed=seeds[0], backend="groute")   # converts, compiles
    ours, ours_t = zip(*[timed(lambda s=s: nx.community.louvain_communities(
        G, seed=s, backend="groute")) for s in seeds])
    row["groute_modularity"] = [q(G, c) for c in ours]
    row["groute_s"] = statistics.median(ours_t)
    if G.number_of_edges() <= nx_max_edges:
        theirs, theirs_t = zip(*[timed(lambda s=s: nx.community.louvain_communities(
            G, seed=s, backend="networkx")) for s in seeds])
        row["networkx_modularity"] = [q(G, c) for c in theirs]
        row["networkx_s"] = statistics.median(theirs_t)
    if not G.is_directed():
        leiden, row["leiden_s"] = timed(lambda: nx.community.leiden_communities(
            G, seed=seeds[0], backend="groute"))
        row["leiden_modularity"] = q(G, leiden)
        lpa, row["lpa_s"] = timed(lambda: list(nx.community.label_propagation_communities(
            G, backend="groute")))
        if G.number_of_edges() <= nx_max_edges:
            want, row["lpa_networkx_s"] = timed(lambda: list(
                nx.community.label_propagation_communities(G, backend="networkx")))
            row["lpa_equal"] = lpa == want
    return row


def table(rows) -> str:
    out = ["| graph | nodes | edges | NetworkX modularity | groute modularity | ratio | "
           "NetworkX s | groute s (cached) | Leiden modularity | LPA equal |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = np.mean(r["groute_modularity"])
        theirs = np.mean(r["networkx_modularity"]) if "networkx_modularity" in r else None
        out.append(
            f"| {r['graph']} | {r['nodes']:,} | {r['edges']:,} | "
            f"{'-' if theirs is None else f'{theirs:.4f}'} | {ours:.4f} | "
            f"{'-' if theirs is None else f'{ours / theirs:.3f}'} | "
            f"{r.get('networkx_s', float('nan')):.3f} | {r['groute_s']:.3f} | "
            f"{r.get('leiden_modularity', float('nan')):.4f} | {r.get('lpa_equal', '-')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--devices", type=int, default=None)
    parser.add_argument("--graphs", nargs="*", default=list(TESTS) + REAL,
                        help="names among the tests' graphs and ../shared/graphs")
    parser.add_argument("--edges", nargs="*", type=int, default=[],
                        help="add random G(n, m) graphs of these edge counts")
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--nx-max-edges", type=int, default=400_000)
    parser.add_argument("--shared", type=Path, default=SHARED,
                        help="the folder of the real graphs (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="also print every row as JSON")
    args = parser.parse_args(argv)
    nx.config.warnings_to_ignore.add("cache")
    cfg = nx.config.backends.groute
    cfg.backend, cfg.devices = args.backend, args.devices
    rows = []
    for name in args.graphs:
        if name not in TESTS and not (args.shared / f"{name}.mtx.gz").is_file():
            print(f"skipped {name}: not a test graph and not in {args.shared}", file=sys.stderr)
            continue
        G = TESTS[name]() if name in TESTS else shared(name, args.shared)
        rows.append(measure(name, G, args.seeds, args.nx_max_edges))
        if args.json:
            print(json.dumps(rows[-1]), flush=True)
    for edges in args.edges:
        rows.append(measure(f"G(n, m) {edges:,}", random_graph(edges), args.seeds,
                            args.nx_max_edges))
        if args.json:
            print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
