"""Command lines ``groute bfs`` and ``groute sssp``: load, solve (warm-up + repeats), verify, write.

``--source`` takes one of the graph's own vertex ids (as written in the file: 1-based for Matrix
Market and DIMACS, the original id for SNAP edge lists, the name for CSV files, 0-based for
generated graphs); without it the vertex with the most out-arcs is used. SSSP runs on the graph's
weights, weight 1 on every arc of an unweighted graph (as the library does), or with
``--random-weights`` random integers 1..64. What is printed and the ``--output`` formats:
:mod:`groute.apps.app_cli`. Unreachable vertices are -1 (BFS depth) or inf (SSSP distance).
"""
from __future__ import annotations

import inspect
import re

import numpy as np

from groute.worklist import MODES, ROUTINGS

from .app_cli import (add_graph_options, busiest_vertex, gteps, load, parse_vertex, report,
                      run_solver, write_output)
from .traversal import EXCHANGES, PARTITIONS


def auto_mode_help(solver_cls) -> str:
    """What ``--mode auto`` runs, as the rule itself says it: ``solver_cls.auto_mode``'s
    docstring on one line, Sphinx roles and literals as plain text (percent signs escaped for
    argparse)."""
    text = " ".join(inspect.getdoc(solver_cls.auto_mode).split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
    return text.replace("%", "%%")


def register_app(subparsers, common, name, solver_cls):
    what = {"bfs": "breadth-first search (depths)",
            "sssp": "single-source shortest paths (distances; weights >= 0)"}[name]
    p = subparsers.add_parser(name, parents=[common], help=f"{what} across devices",
                              description=f"{what.capitalize()}: on the distributed worklist "
                                          "(fused per-device workers, asynchronous or "
                                          "level-synchronous), or in one launch per GPU "
                                          "exchanging through peer memory.")
    add_graph_options(p)
    p.add_argument("--source", default=None, metavar="ID",
                   help="source vertex, by the graph's own id (as written in the file); default: "
                        "the vertex with the most out-arcs")
    if name == "sssp":
        p.add_argument("--random-weights", action="store_true",
                       help="run on random integer weights 1..64 (seeded by --seed) instead of "
                            "the graph's (default: the graph's weights, or 1 on every arc)")
    p.add_argument("--partition", choices=PARTITIONS, default=None,
                   help="how vertices are split over devices (default: metis; none for 1 device)")
    p.add_argument("--mode", choices=["auto", *MODES], default="auto",
                   help="async: fused workers, asynchronous exchange; bsp: level-synchronous (BFS "
                        f"pulls across devices); auto (default): "
                        f"{auto_mode_help(solver_cls)}")
    p.add_argument("--no-priority", action="store_true",
                   help="switch soft priority off (default: on in async mode; SSSP also keeps it "
                        "on the peer kernel and leaves it off on a low-diameter graph, see "
                        "docs/TRAVERSAL.md)")
    p.add_argument("--delta", type=float, default=None,
                   help="soft-priority step in value units (default: chosen from the graph)")
    p.add_argument("--routing", choices=ROUTINGS, default="all2all",
                   help="the worklist's routing (default all2all; ring means the worklist runs)")
    p.add_argument("--exchange", choices=EXCHANGES, default="auto",
                   help="host (the worklist moves the items; in BSP it steers each level), peer "
                        "(one launch per device for the whole run, exchange through peer memory; "
                        "CUDA GPUs with NVLink between them: BSP the level-synchronous peer "
                        "kernel, async on several GPUs the fused workers writing into each "
                        "other's rings) or auto (default: peer where it can run and no worklist "
                        "option such as --routing ring is given)")
    p.set_defaults(func=lambda args: run_cli(args, name, solver_cls))


#: what an output file calls each app's value
VALUE_NAMES = {"bfs": "depth", "sssp": "distance"}


def run_cli(args, name, solver_cls):
    graph, load_s = load(args)
    weights = "the graph's" if graph.weights is not None else "1 on every arc"
    if name == "sssp" and args.random_weights:
        graph = graph.with_weights(seed=args.seed)
        weights = f"random integers 1..64 (seed {args.seed})"
    source = (busiest_vertex(graph) if args.source is None
              else parse_vertex(graph, args.source, "--source"))
    delta = args.delta
    if delta is not None and solver_cls.weighted and graph.weights is not None \
            and np.asarray(graph.weights).dtype.kind in "iu":
        delta = int(delta)
    runs = run_solver(args, graph, lambda ctx: solver_cls(
        graph, ctx=ctx, partition=args.partition or "metis", mode=args.mode,
        priority=False if args.no_priority else "auto", routing=args.routing, delta=delta,
        seed=args.seed, exchange=args.exchange), graph.file_id_of(source))
    res, median = runs.result, runs.median
    reached_mask = np.asarray(res.values) != res.unreached
    reached = int(np.count_nonzero(reached_mask))
    arcs = traversed_arcs(graph, reached_mask)
    source_id = graph.file_id_of(source)
    line = (f"{name} {graph.name} from {source_id}: {median * 1e3:.3f} ms "
            f"({runs.where(res.stats['mode'])}), {reached:,} of {graph.num_vertices:,} vertices "
            f"reached, {arcs:,} arcs, {gteps(arcs, median):.3f} GTEPS")
    facts = {"source": source_id, "mode": res.stats["mode"], "reached": reached,
             "arcs_traversed": arcs, "gteps": gteps(arcs, median)}
    if name == "sssp":
        facts["weights"] = weights
    verified = verify(name, graph, source, res.values) if args.verify else None
    report(args, name, graph, load_s, runs, line, facts, verified,
           extra_stats=[f"weights: {weights}"] if name == "sssp" else ())
    if args.output:
        write_output(res, args.output, VALUE_NAMES[name])
    return 0 if verified is None or verified[0] else 1


def traversed_arcs(graph, reached_mask) -> int:
    """The arcs a traversal from one source expands: the out-arcs of every vertex it reached
    (Graph500's count, what GTEPS is made of; none from an isolated source)."""
    degrees = np.diff(np.asarray(graph.indptr))
    return int(degrees[reached_mask].sum())


def verify(name, graph, source, values):
    """``(ok, detail)``: ``values`` against :mod:`groute.graph.reference` from ``source``."""
    from groute.graph import reference
    if name == "bfs":
        ref = reference.bfs(graph, source)
        bad = np.flatnonzero(np.asarray(ref) != values)
    else:
        ref = np.asarray(reference.sssp(graph, source))
        close = np.isclose(values, ref, rtol=1e-5, atol=0) | (np.isinf(ref) & np.isinf(values))
        bad = np.flatnonzero(~close)
    if bad.size:
        v = int(bad[0])
        return False, (f"FAILED at {bad.size:,} vertices, e.g. vertex {graph.file_id_of(v)}: "
                       f"got {values[v]}, expected {ref[v]}")
    return True, "ok (matches groute.graph.reference)"
