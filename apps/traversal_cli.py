"""Command lines ``groute bfs`` and ``groute sssp``: load, solve (warm-up + repeats), verify, write.

``--source`` takes one of the graph's own vertex ids (as written in the file: 1-based for Matrix
Market and DIMACS, the original id for SNAP edge lists, the name for CSV files, 0-based for
generated graphs); without it the vertex with the most out-arcs is used. SSSP runs on the graph's
weights, weight 1 on every arc of an unweighted graph (as the library does), or with
``--random-weights`` random integers 1..64. ``--sources`` starts from several ids at once
(distance to the nearest), ``--cutoff`` leaves vertices farther than that (BFS: hops; SSSP: a
distance) unreached, as NetworkX's ``cutoff``, ``--predecessors FILE`` also writes each reached vertex's parent on a shortest path.
What is printed and the ``--output`` formats: :mod:`groute.apps.app_cli`. Unreachable vertices
are -1 (BFS depth) or inf (SSSP distance).
"""
from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

import numpy as np

from groute.engines.relax.solver import EXCHANGES, PARTITIONS
from groute.graph.partition import AUTO_RULE, DEFAULT_PARTITION
from groute.tuning import WorklistTuning
from groute.worklist import MODES, ROUTINGS

from .app_cli import (add_graph_options, advanced_group, auto_help, busiest_vertex, checked,
                      gteps, load, out_degrees, parse_vertex, parse_vertices, report, run_solver,
                      write_output)

log = logging.getLogger(__name__)


def register_app(subparsers, common, name, solver_cls):
    what = {"bfs": "breadth-first search (depths)",
            "sssp": "single-source shortest paths (distances; weights >= 0)"}[name]
    p = subparsers.add_parser(name, parents=[common], help=f"{what} across devices",
                              description=f"{what.capitalize()}: on the distributed worklist "
                                          "(fused per-device workers, asynchronous or "
                                          "level-synchronous), or in one launch per GPU "
                                          "exchanging through peer memory.")
    add_graph_options(p, reads_weights=name == "sssp", negative_hint="groute bfs reads none")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--source", default=None, metavar="ID",
                       help="source vertex, by the graph's own id (as written in the file); "
                            "default: the vertex with the most out-arcs")
    seeds.add_argument("--sources", default=None, metavar="ID,ID,...",
                       help="several source vertices at once, comma-separated ids: each vertex "
                            "gets its distance to the nearest")
    if name == "bfs":
        p.add_argument("--cutoff", type=int, default=None, metavar="D",
                       help="leave vertices more than D hops from the sources unreached (-1) "
                            "and do not expand the frontier at depth D (NetworkX's cutoff)")
    else:
        p.add_argument("--cutoff", type=float, default=None, metavar="D",
                       help="leave vertices farther than distance D from the sources "
                            "unreached (inf) and do not expand past it (NetworkX's cutoff)")
    p.add_argument("--predecessors", default=None, metavar="FILE",
                   help="also write each reached vertex's parent on a shortest path, by id "
                        "(formats as --output, - for standard output; sources and unreached "
                        "vertices left out)")
    if name == "sssp":
        p.add_argument("--random-weights", action="store_true",
                       help="run on random integer weights 1..64 (seeded by --seed) instead of "
                            "the graph's (default: the graph's weights, or 1 on every arc)")
    rules = solver_cls.rules
    advanced = advanced_group(p)
    advanced.add_argument("--mode", choices=["auto", *MODES], default="auto",
                          help="async: fused workers, asynchronous exchange; bsp: "
                               "level-synchronous (BFS pulls across devices); auto (default): "
                               f"{auto_help(rules['mode'])}")
    advanced.add_argument("--partition", choices=PARTITIONS, default=DEFAULT_PARTITION,
                          help=f"how vertices are split over devices (default "
                               f"{DEFAULT_PARTITION}: {AUTO_RULE}; none for 1 device)")
    advanced.add_argument("--no-priority", action="store_true",
                          help="switch soft priority off (default: "
                               f"{auto_help(rules['priority'])})")
    advanced.add_argument("--delta", type=float, default=None,
                          help="soft-priority step in value units (default: chosen from the "
                               "graph)")
    advanced.add_argument("--routing", choices=ROUTINGS, default=None,
                          help="the worklist's routing (WorklistTuning.routing; default "
                               "all2all; ring means the worklist runs)")
    advanced.add_argument("--exchange", choices=EXCHANGES, default="auto",
                          help="host (the worklist moves the items; in BSP it steers each "
                               "level), peer (one launch per device for the whole run, exchange "
                               "through peer memory; CUDA GPUs with NVLink between them) or "
                               f"auto (default): {auto_help(rules['exchange'])}")
    p.set_defaults(func=lambda args: run_cli(args, name, solver_cls))


#: what an output file calls each app's value
VALUE_NAMES = {"bfs": "depth", "sssp": "distance"}


def run_cli(args, name, solver_cls):
    if args.delta is not None and args.no_priority:
        raise ValueError("--delta is the soft priority's step; --no-priority leaves it unused")
    graph, load_s = load(args)
    weights = "the graph's" if graph.weights is not None else "1 on every arc"
    if name == "sssp" and args.random_weights:
        graph = graph.with_weights(seed=args.seed)
        weights = f"random integers 1..64 (seed {args.seed})"
    if args.sources is not None:
        # one source named twice is one source (the summary counts distinct ones)
        seeds = list(dict.fromkeys(parse_vertices(graph, args.sources, "--sources")))
    else:
        seeds = [busiest_vertex(graph, f"--graph {args.graph}") if args.source is None
                 else parse_vertex(graph, args.source, "--source")]
    seed_ids = [graph.file_id_of(s) for s in seeds]
    cutoff = args.cutoff
    if cutoff is not None and not cutoff >= 0:
        raise ValueError(f"--cutoff must be >= 0, got {cutoff}")
    delta = args.delta          # integer distances: the solver rounds a window up to whole units
    given = {"routing": args.routing}
    worklist = dataclasses.replace(WorklistTuning.from_environment(),
                                   **{k: v for k, v in given.items() if v is not None})
    runs = run_solver(args, graph, lambda where: solver_cls(
        graph, **where, partition=args.partition, mode=args.mode,
        priority=False if args.no_priority else "auto", delta=delta, seed=args.seed,
        exchange=args.exchange, worklist_tuning=worklist),
        sources=seed_ids, predecessors=args.predecessors is not None, cutoff=cutoff)
    res, median = runs.result, runs.median
    if args.delta is not None and not res.stats["priority"]:
        # the priority rule turned it off (no window this exchange keeps): said, not refused,
        # since which mode and exchange run is known only now
        log.warning("--delta %g left unused: soft priority was off in this run (%s)",
                    args.delta, runs.where(res.stats["mode"]).split("; ", 1)[-1])
    reached_mask = np.asarray(res.values) != res.unreached
    reached = int(np.count_nonzero(reached_mask))
    arcs = traversed_arcs(graph, reached_mask)
    source_id = seed_ids[0] if len(seed_ids) == 1 else seed_ids
    origin = f"{seed_ids[0]}" if len(seed_ids) == 1 else f"{len(seed_ids)} sources"
    if cutoff is not None:
        origin += f" (cutoff {cutoff:g})"
    line = (f"{name} {graph.name} from {origin}: {median * 1e3:.3f} ms "
            f"({runs.where(res.stats['mode'])}), {reached:,} of {graph.num_vertices:,} vertices "
            f"reached, {arcs:,} arcs, {gteps(arcs, median):.3f} GTEPS")
    facts = {"source": source_id, "mode": res.stats["mode"], "reached": reached,
             "arcs_traversed": arcs, "gteps": gteps(arcs, median)}
    if cutoff is not None:
        facts["cutoff"] = cutoff
    if name == "sssp":
        facts["weights"] = weights
    random_weights = name == "sssp" and args.random_weights
    # (across processes the check reads the whole graph again: the same weights on it)
    verified = checked(args, graph, lambda g: verify(
        name, g.with_weights(seed=args.seed) if random_weights and g is not graph else g,
        seeds, res.values, cutoff)) if args.verify else None
    report(args, name, graph, load_s, runs, line, facts, verified,
           extra_stats=[f"weights: {weights}"] if name == "sssp" else ())
    if args.output:
        write_output(res, args.output, VALUE_NAMES[name])
    if args.predecessors:
        write_output(parent_table(res), args.predecessors, "parent", option="--predecessors")
    return 0 if verified is None or verified[0] else 1


def parent_table(result):
    """The reached vertices that have a parent and the parent, both by id, in the shape
    :func:`~groute.apps.app_cli.write_output` writes."""
    parent = np.asarray(result.predecessors)
    has = parent >= 0
    ids = np.asarray(result.ids)
    return SimpleNamespace(ids=ids[has], values=ids[parent[has]], values_are_vertices=False)


def traversed_arcs(graph, reached_mask) -> int:
    """The arcs a traversal from one source expands: the out-arcs of every vertex it reached
    (Graph500's count, what GTEPS is made of; none from an isolated source)."""
    return int(out_degrees(graph)[reached_mask].sum())


def verify(name, graph, sources, values, cutoff=None):
    """``(ok, detail)``: ``values`` against :mod:`groute.graph.reference` from ``sources`` (the
    least over them), cut at ``cutoff``."""
    from groute.graph import reference
    if name == "bfs":
        depths = [np.asarray(reference.bfs(graph, s), dtype=np.float64) for s in sources]
        least = np.min([np.where(d < 0, np.inf, d) for d in depths], axis=0)
        if cutoff is not None:
            least[least > cutoff] = np.inf
        ref = np.where(np.isinf(least), -1, least).astype(np.int64)
        bad = np.flatnonzero(ref != values)
    else:
        ref = np.min([np.asarray(reference.sssp(graph, s)) for s in sources], axis=0)
        if cutoff is not None:
            ref[ref > cutoff] = np.inf
        close = np.isclose(values, ref, rtol=1e-5, atol=0) | (np.isinf(ref) & np.isinf(values))
        bad = np.flatnonzero(~close)
    if bad.size:
        v = int(bad[0])
        return False, (f"FAILED at {bad.size:,} vertices, e.g. vertex {graph.file_id_of(v)}: "
                       f"got {values[v]}, expected {ref[v]}")
    return True, "ok (matches groute.graph.reference)"
