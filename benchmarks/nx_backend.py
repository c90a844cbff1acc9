"""Time every function the NetworkX backend dispatches against NetworkX's own, on random graphs.

    python benchmarks/nx_backend.py                                  # 10^4..10^6 edges
    python benchmarks/nx_backend.py --edges 1e4,1e5 --backends cpu --json nx.json --markdown nx.md
    python benchmarks/nx_backend.py --functions pagerank,core_number --edges 1e7 --nx-budget 300

For each function of groute.nx_backend.info.FUNCTIONS, by its call recipe (:data:`RECIPES`: one
line each; the script stops before any work when a dispatched function has none), on a G(n, m)
random graph of each ``--edges`` size (n = m / 10 nodes, no self-loops, integer weights 1..100
in "weight"; undirected or directed as the recipe says), it reports:

* NetworkX: the call on NetworkX's implementation (``backend="networkx"``), stopped after
  ``--nx-budget`` seconds, and not started where the previous size's time, scaled by the sizes,
  passes the budget;
* groute first: the call with ``backend="groute"`` on a graph whose conversion NetworkX has not
  cached (the conversion included);
* groute cached: the same call again, the conversion from NetworkX's cache (median of
  ``--repeat``);

on each of ``--backends`` (CUDA GPUs, CPU virtual devices; ``--devices`` per call), and the
speed-ups over NetworkX (where NetworkX passed its budget, a lower bound: "> budget / groute's
time"). A groute call is not run on a size where its time on the previous size, scaled by the
sizes, passes ``--groute-budget``. Each groute answer is checked against NetworkX's where NetworkX
finished (the recipe says how: equal, or within a tolerance). The backend runs with
``fallback_to_nx=False``, so a call groute declines fails loudly, with the reason, instead of
timing NetworkX. Device start-up and kernel compilation are paid by a warm-up call of each
function on a small graph first, and reported apart. The exit status is 1 when an answer
differs or a call was declined or failed, 2 when a recipe is missing.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))       # a copy of the tree run where groute is not installed

from groute.nx_backend import registration  # noqa: E402
from groute.nx_backend.info import FUNCTIONS  # noqa: E402

#: the source and target of the calls that take them (node labels of every benchmark graph)
S, T = 0, 1
#: betweenness centrality's sample of sources (NetworkX's ``k``, drawn with ``seed=0``); the
#: sources of the all-pairs and eccentricity calls
K = 8


def pairs(G, count: int = 4096) -> list:
    """``count`` node pairs of G, the same ones every run (a similarity's ebunch)."""
    n = len(G)
    return [(u % n, (u * 7919 + 1) % n) for u in range(count)]


#: two graphs equal, nodes, edges and attributes (a subgraph or tree answer)
same_graph = nx.utils.graphs_equal


def equal(got, want) -> bool:
    return got == want


def close(rtol: float) -> Callable:
    """Answers equal but for numbers, which agree within ``rtol`` (relative): dicts of the
    same keys, lists and tuples of the same length, compared item by item."""
    def same(got, want):
        if isinstance(want, dict):
            return got.keys() == want.keys() and all(same(got[k], w) for k, w in want.items())
        if isinstance(want, (list, tuple)):
            return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
        if isinstance(want, float):
            return abs(got - want) <= rtol * max(abs(want), abs(got)) + 1e-12
        return got == want
    return same


def pagerank_close(got, want) -> bool:
    """Both stop at an L1 change below N * tol (tol 1e-6), each from its own iteration."""
    return got.keys() == want.keys() and \
        sum(abs(got[k] - w) for k, w in want.items()) <= 2 * len(want) * 1e-6


def modularity_within(rel: float) -> Callable:
    """Communities, judged by quality: groute's modularity on ``G`` at least ``1 - rel`` of
    NetworkX's (both Louvain; their moves differ, so their communities may)."""
    def same(got, want, G):
        q = nx.community.modularity
        return q(G, got) >= (1 - rel) * q(G, want) - 1e-12
    same.needs_graph = True
    return same


def a_partition(got, want, G) -> bool:
    """Communities that cover every node once (label propagation in another order of updates
    than NetworkX's: any stable labelling is an answer)."""
    return nx.community.is_partition(G, got)


a_partition.needs_graph = True


def judged(recipe, got, want, G) -> bool:
    """``recipe``'s comparison of groute's answer with NetworkX's (on ``G`` where it needs
    the graph)."""
    if getattr(recipe.same, "needs_graph", False):
        return recipe.same(got, want, G)
    return recipe.same(got, want)


class Recipe(NamedTuple):
    """How a function is timed: the benchmark graph it takes ("undirected" or "directed"), the
    call (``call(G, backend=...)``, its answer as a value: generators listed), how two
    answers compare, and whether NetworkX has an implementation to time (Leiden: backends
    only)."""

    graph: str
    call: Callable
    same: Callable = equal
    networkx: bool = True


def _halves(G) -> list[set]:
    """A fixed partition of G's nodes (even, odd labels) whose modularity is timed."""
    return [{u for u in G if u % 2 == 0}, {u for u in G if u % 2 == 1}]


#: every dispatched function's call; a function added to the backend adds its line here
RECIPES = {
    # traversal
    "bfs_layers": Recipe("undirected", lambda G, **b: list(nx.bfs_layers(G, S, **b))),
    "bfs_predecessors": Recipe("undirected", lambda G, **b: list(nx.bfs_predecessors(G, S, **b))),
    "bfs_edges": Recipe("undirected", lambda G, **b: list(nx.bfs_edges(G, S, **b))),
    "bfs_tree": Recipe("undirected", lambda G, **b: nx.bfs_tree(G, S, **b), same_graph),
    "bfs_successors": Recipe("undirected", lambda G, **b: list(nx.bfs_successors(G, S, **b))),
    "descendants": Recipe("directed", lambda G, **b: nx.descendants(G, S, **b)),
    "descendants_at_distance": Recipe(
        "undirected", lambda G, **b: nx.descendants_at_distance(G, S, 3, **b)),
    "ancestors": Recipe("directed", lambda G, **b: nx.ancestors(G, S, **b)),
    # shortest paths
    "shortest_path": Recipe("undirected", lambda G, **b: nx.shortest_path(G, S, T, **b)),
    "shortest_path_length": Recipe(
        "undirected", lambda G, **b: nx.shortest_path_length(G, S, weight="weight", **b)),
    "single_source_dijkstra_path_length": Recipe(
        "directed", lambda G, **b: nx.single_source_dijkstra_path_length(G, S, **b)),
    "single_source_shortest_path_length": Recipe(
        "undirected", lambda G, **b: nx.single_source_shortest_path_length(G, S, **b)),
    "single_target_shortest_path_length": Recipe(
        "directed", lambda G, **b: dict(nx.single_target_shortest_path_length(G, T, **b))),
    "all_pairs_shortest_path_length": Recipe("undirected", lambda G, **b: dict(
        itertools.islice(nx.all_pairs_shortest_path_length(G, **b), K))),
    "has_path": Recipe("directed", lambda G, **b: nx.has_path(G, S, T, **b)),
    "single_source_shortest_path": Recipe(
        "undirected", lambda G, **b: nx.single_source_shortest_path(G, S, **b)),
    "dijkstra_path_length": Recipe("directed",
                                   lambda G, **b: nx.dijkstra_path_length(G, S, T, **b)),
    "bellman_ford_path_length": Recipe(
        "directed", lambda G, **b: nx.bellman_ford_path_length(G, S, T, **b)),
    "single_source_bellman_ford_path_length": Recipe(
        "directed", lambda G, **b: nx.single_source_bellman_ford_path_length(G, S, **b)),
    # distance measures
    "eccentricity": Recipe("undirected", lambda G, **b: nx.eccentricity(G, v=list(range(K)), **b)),
    # components
    "connected_components": Recipe("undirected",
                                   lambda G, **b: list(nx.connected_components(G, **b))),
    "is_connected": Recipe("undirected", lambda G, **b: nx.is_connected(G, **b)),
    "node_connected_component": Recipe(
        "undirected", lambda G, **b: nx.node_connected_component(G, S, **b)),
    "number_connected_components": Recipe(
        "undirected", lambda G, **b: nx.number_connected_components(G, **b)),
    "strongly_connected_components": Recipe(
        "directed", lambda G, **b: list(nx.strongly_connected_components(G, **b))),
    "weakly_connected_components": Recipe(
        "directed", lambda G, **b: list(nx.weakly_connected_components(G, **b))),
    "is_strongly_connected": Recipe("directed", lambda G, **b: nx.is_strongly_connected(G, **b)),
    "is_weakly_connected": Recipe("directed", lambda G, **b: nx.is_weakly_connected(G, **b)),
    "number_strongly_connected_components": Recipe(
        "directed", lambda G, **b: nx.number_strongly_connected_components(G, **b)),
    "number_weakly_connected_components": Recipe(
        "directed", lambda G, **b: nx.number_weakly_connected_components(G, **b)),
    # cores
    "core_number": Recipe("undirected", lambda G, **b: nx.core_number(G, **b)),
    "k_core": Recipe("undirected", lambda G, **b: nx.k_core(G, **b), same_graph),
    "k_corona": Recipe("undirected", lambda G, **b: nx.k_corona(G, 10, **b), same_graph),
    "k_crust": Recipe("undirected", lambda G, **b: nx.k_crust(G, **b), same_graph),
    "k_shell": Recipe("undirected", lambda G, **b: nx.k_shell(G, **b), same_graph),
    "k_truss": Recipe("undirected", lambda G, **b: nx.k_truss(G, 4, **b), same_graph),
    # structure
    "color": Recipe("bipartite", lambda G, **b: nx.bipartite.color(G, **b)),
    "is_bipartite": Recipe("bipartite", lambda G, **b: nx.is_bipartite(G, **b)),
    "is_isolate": Recipe("undirected", lambda G, **b: nx.is_isolate(G, S, **b)),
    "isolates": Recipe("undirected", lambda G, **b: list(nx.isolates(G, **b))),
    "number_of_isolates": Recipe("undirected", lambda G, **b: nx.number_of_isolates(G, **b)),
    "overall_reciprocity": Recipe("directed", lambda G, **b: nx.overall_reciprocity(G, **b),
                                  close(1e-9)),
    "reciprocity": Recipe("directed", lambda G, **b: nx.reciprocity(G, list(G), **b),
                          close(1e-9)),
    # cluster
    "average_clustering": Recipe("undirected", lambda G, **b: nx.average_clustering(G, **b),
                                 close(1e-9)),
    "clustering": Recipe("undirected", lambda G, **b: nx.clustering(G, **b), close(1e-9)),
    "transitivity": Recipe("undirected", lambda G, **b: nx.transitivity(G, **b), close(1e-9)),
    "triangles": Recipe("undirected", lambda G, **b: nx.triangles(G, **b)),
    # link prediction
    "jaccard_coefficient": Recipe(
        "undirected", lambda G, **b: list(nx.jaccard_coefficient(G, pairs(G), **b)), close(1e-9)),
    # centrality
    "betweenness_centrality": Recipe(
        "undirected", lambda G, **b: nx.betweenness_centrality(G, k=K, seed=0, **b), close(1e-6)),
    "edge_betweenness_centrality": Recipe(
        "undirected", lambda G, **b: nx.edge_betweenness_centrality(G, k=K, seed=0, **b),
        close(1e-6)),
    "closeness_centrality": Recipe("undirected", lambda G, **b: nx.closeness_centrality(G, **b),
                                   close(1e-9)),
    "degree_centrality": Recipe("undirected", lambda G, **b: nx.degree_centrality(G, **b),
                                close(1e-12)),
    "in_degree_centrality": Recipe("directed", lambda G, **b: nx.in_degree_centrality(G, **b),
                                   close(1e-12)),
    "out_degree_centrality": Recipe("directed", lambda G, **b: nx.out_degree_centrality(G, **b),
                                    close(1e-12)),
    "eigenvector_centrality": Recipe(
        "undirected", lambda G, **b: nx.eigenvector_centrality(G, **b), close(1e-6)),
    "katz_centrality": Recipe("undirected", lambda G, **b: nx.katz_centrality(G, 0.01, **b),
                              close(1e-6)),
    # link analysis
    "pagerank": Recipe("directed", lambda G, **b: nx.pagerank(G, **b), pagerank_close),
    "hits": Recipe("directed", lambda G, **b: nx.hits(G, **b), close(1e-6)),
    # trees
    "minimum_spanning_edges": Recipe(
        "undirected", lambda G, **b: list(nx.minimum_spanning_edges(G, **b))),
    "maximum_spanning_edges": Recipe(
        "undirected", lambda G, **b: list(nx.maximum_spanning_edges(G, **b))),
    "minimum_spanning_tree": Recipe("undirected", lambda G, **b: nx.minimum_spanning_tree(G, **b),
                                    same_graph),
    "maximum_spanning_tree": Recipe("undirected", lambda G, **b: nx.maximum_spanning_tree(G, **b),
                                    same_graph),
    # community
    "louvain_communities": Recipe(
        "undirected", lambda G, **b: nx.community.louvain_communities(G, seed=1, **b),
        modularity_within(0.01)),
    "louvain_partitions": Recipe(
        "undirected", lambda G, **b: list(nx.community.louvain_partitions(G, seed=1, **b))[-1],
        modularity_within(0.01)),
    "leiden_communities": Recipe(
        "undirected", lambda G, **b: nx.community.leiden_communities(G, seed=1, **b),
        a_partition, networkx=False),
    "leiden_partitions": Recipe(
        "undirected", lambda G, **b: list(nx.community.leiden_partitions(G, seed=1, **b))[-1],
        a_partition, networkx=False),
    "modularity": Recipe(
        "undirected", lambda G, **b: nx.community.modularity(G, _halves(G), **b), close(1e-9)),
    "label_propagation_communities": Recipe(
        "undirected",
        lambda G, **b: sorted(map(sorted, nx.community.label_propagation_communities(G, **b)))),
    "asyn_lpa_communities": Recipe(
        "undirected", lambda G, **b: list(nx.community.asyn_lpa_communities(G, seed=1, **b)),
        a_partition),
    "fast_label_propagation_communities": Recipe(
        "undirected",
        lambda G, **b: list(nx.community.fast_label_propagation_communities(G, seed=1, **b)),
        a_partition),
}


def recipe_problems(functions) -> list[str]:
    """Dispatched functions without a recipe, recipes of functions not dispatched, and
    ``functions`` (those asked for) that are neither."""
    out = []
    missing = [f for f in FUNCTIONS if f not in RECIPES]
    if missing:
        out.append(f"dispatched functions without a recipe in RECIPES: {missing} (add one line "
                   f"each to {Path(__file__).name})")
    stale = [f for f in RECIPES if f not in FUNCTIONS]
    if stale:
        out.append(f"RECIPES names functions the backend does not dispatch: {stale}")
    unknown = [f for f in functions if f not in FUNCTIONS]
    if unknown:
        out.append(f"--functions names functions the backend does not dispatch: {unknown}")
    return out


def benchmark_graph(kind: str, edges: int, seed: int) -> nx.Graph:
    """A G(n, m) graph: m = ``edges`` drawn pairs (repeated ones merge, self-loops dropped),
    n = m / 10 nodes labelled 0..n-1, integer weights 1..100 in "weight"; ``kind``
    "undirected", "directed" or "bipartite" (undirected, every edge between an even and an odd
    label)."""
    rng = np.random.default_rng([seed, edges, kind == "directed"])
    n = max(2, edges // 10)
    src, dst = rng.integers(0, n, edges), rng.integers(0, n, edges)
    weights = rng.integers(1, 101, edges)
    keep = src != dst
    if kind == "bipartite":             # even labels on one side, odd on the other
        src, dst = src - src % 2, dst | 1
        dst[dst >= n] -= 2
    G = nx.DiGraph() if kind == "directed" else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from(zip(src[keep].tolist(), dst[keep].tolist(),
                                  weights[keep].tolist()))
    return G


class OverBudget(Exception):
    """A NetworkX call stopped at its time budget."""


def within(budget: float, fn):
    """``(seconds, fn())``, or OverBudget raised into ``fn`` after ``budget`` seconds (a timer
    signal: NetworkX's loops are Python, so the signal lands within a step). A timer already
    set (pytest-timeout's) is set again, less the time spent, afterwards."""
    def stop(signum, frame):
        raise OverBudget
    previous = signal.signal(signal.SIGALRM, stop)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, budget)
    t0 = time.monotonic()
    try:
        return timed(fn)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer - (time.monotonic() - t0)))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def expected_over(previous: float | None, previous_edges: int, edges: int,
                  budget: float) -> bool:
    """Whether a call that took ``previous`` seconds on ``previous_edges`` edges would pass
    ``budget`` on ``edges`` (time taken as linear in the edges, the least it grows)."""
    return previous is not None and previous * edges / previous_edges > budget


def groute_call(recipe: Recipe, G):
    """The recipe's call on groute: (first seconds, answer) on a graph not converted yet."""
    G.__networkx_cache__.clear()
    return timed(lambda: recipe.call(G, backend="groute"))


def bench_size(edges: int, functions, args, history: dict) -> list[dict]:
    """Every function on the graphs of ``edges`` edges: NetworkX once, groute per backend."""
    graphs, rows = {}, []
    for name in functions:
        recipe = RECIPES[name]
        if recipe.graph not in graphs:
            build_s, graphs[recipe.graph] = timed(
                lambda: benchmark_graph(recipe.graph, edges, args.seed))
            G = graphs[recipe.graph]
            print(f"graph {recipe.graph} G(n, m): {len(G):,} nodes, {G.number_of_edges():,} "
                  f"edges, built in {build_s:.1f} s", flush=True)
        G = graphs[recipe.graph]
        base = {"function": name, "graph": f"G(n,m) {recipe.graph}", "nodes": len(G),
                "edges": G.number_of_edges()}
        nx_s, want, nx_note = run_networkx(name, recipe, G, edges, args, history)
        for backend in args.backends:
            row = {**base, "backend": backend, "networkx_s": nx_s, "networkx_note": nx_note}
            row.update(run_groute(name, recipe, G, want, nx_s, backend, edges, args, history))
            rows.append(row)
            print(line(row), flush=True)
    del graphs
    gc.collect()
    return rows


def run_networkx(name, recipe, G, edges, args, history):
    """(seconds, answer, note): NetworkX's call within the budget, or (None, None, why not)."""
    if not recipe.networkx:
        return None, None, "NetworkX has none"
    before = history.get(("networkx", name))
    if before is not None and (before[0] is None or expected_over(*before, edges,
                                                                   args.nx_budget)):
        history[("networkx", name)] = (None, edges)
        return None, None, f"not run: over {args.nx_budget:g} s expected"
    try:
        seconds, want = within(args.nx_budget, lambda: recipe.call(G, backend="networkx"))
    except OverBudget:
        history[("networkx", name)] = (None, edges)
        return None, None, f"stopped at {args.nx_budget:g} s"
    history[("networkx", name)] = (seconds, edges)
    return seconds, want, ""


def run_groute(name, recipe, G, want, nx_s, backend, edges, args, history) -> dict:
    """groute's first and cached calls on ``backend``, checked against ``want`` (None: NetworkX
    did not finish)."""
    from groute.errors import NotRunOnGroute
    key = ("groute", backend, name)
    before = history.get(key)
    if before is not None and expected_over(*before, edges, args.groute_budget):
        return {"answer": f"not run: over {args.groute_budget:g} s expected"}
    nx.config.backends.groute.backend = backend
    try:
        first_s, got = groute_call(recipe, G)
        answers, cached = [got], []
        for _ in range(args.repeat):
            seconds, got = timed(lambda: recipe.call(G, backend="groute"))
            cached.append(seconds)
            answers.append(got)
    except NotRunOnGroute as exc:
        return {"answer": f"declined: {exc.reason}", "failed": True}
    except Exception as exc:    # one function's failure is a row, the others still run
        return {"answer": f"error: {type(exc).__name__}: {exc}"[:300], "failed": True}
    cached_s = statistics.median(cached) if cached else None
    history[key] = (first_s, edges)         # the longer call, the conversion's included
    out = {"first_s": first_s, "cached_s": cached_s}
    for kind, seconds in (("first", first_s), ("cached", cached_s)):
        if nx_s is not None and seconds:
            out[f"speedup_{kind}"] = nx_s / seconds
        elif nx_s is None and seconds and recipe.networkx:  # past the budget: at least this
            out[f"speedup_{kind}_over"] = args.nx_budget / seconds
    if want is None and recipe.networkx:       # NetworkX did not finish: nothing to compare
        out["answer"] = "not checked"
    else:
        ok = all(judged(recipe, a, want, G) for a in answers)
        out.update(answer="equal" if ok else "DIFFERS", failed=not ok)
    return out


def warm_up(functions, backends, seed) -> dict:
    """Each function once on NetworkX and once per backend on small graphs: imports, device
    start-up and kernel compilation, paid before any timed call. Returns the seconds per
    backend."""
    graphs = {kind: benchmark_graph(kind, 2_000, seed)
              for kind in ("undirected", "directed", "bipartite")}
    for name in functions:
        if RECIPES[name].networkx:
            RECIPES[name].call(graphs[RECIPES[name].graph], backend="networkx")
    out = {}
    for backend in backends:
        nx.config.backends.groute.backend = backend
        t0 = time.perf_counter()
        for name in functions:
            try:
                RECIPES[name].call(graphs[RECIPES[name].graph], backend="groute")
            except Exception as exc:    # its rows say so, with the timed graphs' outcome
                print(f"warm-up of {name} on {backend}: {type(exc).__name__}: {exc}",
                      flush=True)
        out[backend] = time.perf_counter() - t0
    return out


def seconds_text(s, note=""):
    return f"{s:.3g}" if s is not None else (note or "-")


def speedup_text(row, kind):
    """The speed-up, or its lower bound where NetworkX passed its budget ("> 12x")."""
    if row.get(f"speedup_{kind}") is not None:
        return f"{row[f'speedup_{kind}']:.1f}x"
    over = row.get(f"speedup_{kind}_over")
    return f"> {over:.1f}x" if over is not None else "-"


def line(row) -> str:
    return (f"{row['function']:36} {row['edges']:>11,} {row['backend']:5} "
            f"nx {seconds_text(row['networkx_s'], row.get('networkx_note')):>8}  "
            f"first {seconds_text(row.get('first_s')):>8}  cached "
            f"{seconds_text(row.get('cached_s')):>8}  {speedup_text(row, 'cached'):>8}"
            f"  {row['answer']}")


def markdown(doc: dict) -> str:
    head = ["| function | graph | edges | backend | NetworkX s | groute first s | "
            "groute cached s | speed-up (cached) | speed-up (first) | answer |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [f"| `{r['function']}` | {r['graph']} | {r['edges']:,} | {r['backend']} | "
            f"{seconds_text(r['networkx_s'], r.get('networkx_note'))} | "
            f"{seconds_text(r.get('first_s'))} | {seconds_text(r.get('cached_s'))} | "
            f"{speedup_text(r, 'cached')} | {speedup_text(r, 'first')} | "
            f"{r['answer']} |" for r in doc["rows"]]
    machine = doc["machine"]
    gpus = ", ".join(g["name"] for g in machine.get("gpus", [])) or "no GPU"
    start = ", ".join(f"{b} {s:.1f} s" for b, s in doc["startup_s"].items())
    return "\n".join([f"NetworkX {nx.__version__} against `backend=\"groute\"` on {gpus} "
                      f"({machine['cpu']}); devices per call: {doc['devices'] or 'auto'}; "
                      f"start-up and compilation (not in the table): {start}.", "", *head,
                      *rows, ""])


def main(argv=None) -> int:
    from groute.device import cuda_device_count
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", default="1e4,1e5,1e6",
                   help="comma-separated graph sizes in edges drawn (default 1e4,1e5,1e6)")
    p.add_argument("--backends", default=None, help="comma-separated groute backends (default: "
                   "cuda,cpu where CuPy finds a GPU, else cpu)")
    p.add_argument("--devices", type=int, default=None,
                   help="devices per call (default: the algorithms' own choice)")
    p.add_argument("--functions", default=None, help="comma-separated subset (default: all)")
    p.add_argument("--repeat", type=int, default=3, help="cached groute calls timed (median)")
    p.add_argument("--nx-budget", type=float, default=60.0,
                   help="seconds a NetworkX call may take (default 60)")
    p.add_argument("--groute-budget", type=float, default=60.0,
                   help="seconds a groute call is expected to stay under, or it is not run on "
                        "the next size (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    p.add_argument("--markdown", default=None, help="write the table to this file")
    args = p.parse_args(argv)
    functions = args.functions.split(",") if args.functions else list(FUNCTIONS)
    problems = recipe_problems(functions)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    sizes = [int(float(x)) for x in args.edges.split(",")]
    args.backends = (args.backends.split(",") if args.backends
                     else ["cuda", "cpu"] if cuda_device_count() else ["cpu"])
    registration.register()
    cfg = nx.config.backends.groute
    cfg.devices, cfg.fallback_to_nx = args.devices, False
    nx.config.warnings_to_ignore.add("cache")
    startup = warm_up(functions, args.backends, args.seed)
    print(f"start-up and compilation: {startup}", flush=True)
    history, rows = {}, []
    for edges in sorted(sizes):
        rows += bench_size(edges, functions, args, history)
    from groute.machine import describe_machine
    doc = {"machine": describe_machine(), "networkx": nx.__version__, "devices": args.devices,
           "nx_budget_s": args.nx_budget, "repeat": args.repeat, "startup_s": startup,
           "rows": rows}
    table = markdown(doc)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 1 if any(r.get("failed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
