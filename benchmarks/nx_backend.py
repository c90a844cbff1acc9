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
#: betweenness centrality's sample of sources (NetworkX's ``k``, drawn with ``seed=0``)
K = 8


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


class Recipe(NamedTuple):
    """How a function is timed: the benchmark graph it takes ("undirected" or "directed"), the
    call (``call(G, backend=...)``, its answer as a value: generators listed) and how two
    answers compare."""

    graph: str
    call: Callable
    same: Callable = equal


#: every dispatched function's call; a function added to the backend adds its line here
RECIPES = {
    # traversal
    "bfs_layers": Recipe("undirected", lambda G, **b: list(nx.bfs_layers(G, S, **b))),
    "bfs_predecessors": Recipe("undirected", lambda G, **b: list(nx.bfs_predecessors(G, S, **b))),
    # shortest paths
    "shortest_path": Recipe("undirected", lambda G, **b: nx.shortest_path(G, S, T, **b)),
    "shortest_path_length": Recipe(
        "undirected", lambda G, **b: nx.shortest_path_length(G, S, weight="weight", **b)),
    "single_source_dijkstra_path_length": Recipe(
        "directed", lambda G, **b: nx.single_source_dijkstra_path_length(G, S, **b)),
    "single_source_shortest_path_length": Recipe(
        "undirected", lambda G, **b: nx.single_source_shortest_path_length(G, S, **b)),
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
    # cores
    "core_number": Recipe("undirected", lambda G, **b: nx.core_number(G, **b)),
    # centrality
    "betweenness_centrality": Recipe(
        "undirected", lambda G, **b: nx.betweenness_centrality(G, k=K, seed=0, **b), close(1e-6)),
    # link analysis
    "pagerank": Recipe("directed", lambda G, **b: nx.pagerank(G, **b), pagerank_close),
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
    n = m / 10 nodes labelled 0..n-1, integer weights 1..100 in "weight"."""
    rng = np.random.default_rng([seed, edges, kind == "directed"])
    n = max(2, edges // 10)
    src, dst = rng.integers(0, n, edges), rng.integers(0, n, edges)
    weights = rng.integers(1, 101, edges)
    keep = src != dst
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
        elif nx_s is None and seconds:      # NetworkX passed the budget: at least this
            out[f"speedup_{kind}_over"] = args.nx_budget / seconds
    if want is None:
        out["answer"] = "not checked"
    else:
        ok = all(recipe.same(a, want) for a in answers)
        out.update(answer="equal" if ok else "DIFFERS", failed=not ok)
    return out


def warm_up(functions, backends, seed) -> dict:
    """Each function once on NetworkX and once per backend on small graphs: imports, device
    start-up and kernel compilation, paid before any timed call. Returns the seconds per
    backend."""
    graphs = {kind: benchmark_graph(kind, 2_000, seed) for kind in ("undirected", "directed")}
    for name in functions:
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
