"""Command-line plumbing the graph apps share (``groute bfs``, ``sssp``, ``pr``, ``cc``): graph
options, loading, running a solver (warm-up + repeats), counters, output files.

Output conventions (same as BFS/SSSP): ``--output x.npy`` writes a NumPy array indexed in the
reader's vertex order (file id minus one for 1-based Matrix Market/DIMACS files); any other
suffix writes text lines ``vertex value`` with the ids as written in the input file
(``graph.file_id_of``). CC labels are written as file ids too (a label is a vertex).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def add_graph_options(p, *, repeat_default=5):
    p.add_argument("--graph", required=True, metavar="PATH|SPEC",
                   help="a graph file (.mtx[.gz], .gr, SNAP edge list) or a spec (kron:21, grid:4900, ...)")
    p.add_argument("--seed", type=int, default=0, help="generator / partition seed (default 0)")
    p.add_argument("--repeat", type=int, default=repeat_default, metavar="R",
                   help=f"timed runs after one warm-up; the median is printed (default {repeat_default})")
    p.add_argument("--verify", action="store_true", help="compare with groute.graph.reference")
    p.add_argument("--output", default=None, metavar="FILE", help=".npy (reader order) or text (file ids)")


def load(args):
    from groute.graph import load_graph
    if args.repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {args.repeat}")
    t0 = time.perf_counter()
    g = load_graph(args.graph, seed=args.seed)
    kind = "directed" if g.directed else "undirected"
    print(f"graph {g.name}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs ({kind}), "
          f"loaded in {time.perf_counter() - t0:.2f} s")
    return g


@dataclass
class TimedRuns:
    """What :func:`run_solver` measured: the last result, the median and all run times, the
    set-up time, and the (closed) solver for its descriptive attributes."""

    result: object
    median: float
    times: list
    setup_s: float
    solver: object
    devices: int
    backend: str

    def time_line(self) -> str:
        return (f"  time: median {self.median * 1e3:.3f} ms over {len(self.times)} runs "
                f"(min {min(self.times) * 1e3:.3f}, max {max(self.times) * 1e3:.3f}) after one warm-up")


def run_solver(args, build, *run_args) -> TimedRuns:
    """Build a solver with ``build(ctx)`` on the context ``--backend/--devices/--timeout`` ask for,
    run ``solver.run(*run_args)`` once to warm up and ``--repeat`` times timed, then close the
    solver and the context (also on failure)."""
    from groute.cli_support import context_from_args
    ctx = context_from_args(args)
    try:
        t0 = time.perf_counter()
        solver = build(ctx)
        setup = time.perf_counter() - t0
        try:
            solver.run(*run_args)
            times, res = [], None
            for _ in range(args.repeat):
                res = solver.run(*run_args)
                times.append(res.time_s)
        finally:
            solver.close()
    finally:
        ctx.shutdown()
    return TimedRuns(res, statistics.median(times), times, setup, solver, len(ctx.devices), ctx.backend)


def print_stats(stats, skip=()):
    for key, value in stats.items():
        if key in skip:
            continue
        if isinstance(value, dict) and len(value) > 8:
            value = f"{sum(value.values()):,} in total over {len(value)} entries"
        print(f"  {key}: {value}")


def write_output(graph, values, path, *, labels=False):
    """Write per-vertex values (see the module docstring)."""
    path = Path(path)
    values = np.asarray(values)
    if path.suffix == ".npy":
        np.save(path, values)
    else:
        ids = np.asarray(graph.file_id_of(np.arange(graph.num_vertices)), dtype=np.int64)
        shown = np.asarray(graph.file_id_of(values), dtype=np.int64) if labels else values
        fmt = "%d %d" if labels else "%d %.10g"
        with open(path, "w") as fh:
            np.savetxt(fh, np.column_stack([ids, shown]) if labels else
                       np.rec.fromarrays([ids, shown]), fmt=fmt)
    print(f"wrote {values.size:,} values to {path}")
