"""Command lines ``groute bfs`` and ``groute sssp``: load, solve (warm-up + repeats), verify, write.

``--source`` takes the vertex id as written in the graph file (1-based for Matrix Market and
DIMACS, the original id for SNAP edge lists, 0-based for generated graphs). ``--output x.npy``
writes a NumPy array indexed in the reader's order (file id minus one for 1-based formats);
any other suffix writes text lines ``vertex value`` with file ids. Unreachable vertices are -1
(BFS depth) or inf (SSSP distance). Without ``--source`` the first vertex is used.
"""
from __future__ import annotations


import numpy as np

from .app_cli import add_graph_options, load, print_stats, run_solver, write_output


def register_app(subparsers, common, name, solver_cls):
    what = {"bfs": "breadth-first search (depths)",
            "sssp": "single-source shortest paths (distances; weights >= 0)"}[name]
    p = subparsers.add_parser(name, parents=[common], help=f"{what} across devices",
                              description=f"{what.capitalize()} on the distributed worklist: "
                                          "asynchronous, fused per-device workers.")
    add_graph_options(p)
    p.add_argument("--source", type=int, default=None, metavar="V",
                   help="source vertex, as written in the file (default: the first vertex)")
    p.add_argument("--partition", choices=["metis", "contiguous", "random"], default=None,
                   help="how vertices are split over devices (default: metis; none for 1 device)")
    p.add_argument("--mode", choices=["auto", "async", "bsp"], default="auto",
                   help="async: fused workers, asynchronous exchange; bsp: level-synchronous (BFS pulls "
                        "across devices); auto (default): bsp for BFS on several devices of a "
                        "symmetric low-diameter graph, else async")
    p.add_argument("--no-priority", action="store_true",
                   help="switch soft priority off (default: on for BFS; for SSSP chosen from the "
                        "graph's diameter, see docs/TRAVERSAL.md)")
    p.add_argument("--delta", type=float, default=None,
                   help="soft-priority step in value units (default: chosen from the graph)")
    p.add_argument("--routing", choices=["all2all", "ring"], default="all2all")
    p.add_argument("--exchange", choices=["auto", "host", "peer"], default="auto",
                   help="BSP on several devices: host (the worklist steers each level), peer (one "
                        "launch per device, exchange through peer memory; BFS and SSSP on NVLink GPUs) or "
                        "auto (default: peer where it can run)")
    p.set_defaults(func=lambda args: run_cli(args, name, solver_cls))


def run_cli(args, name, solver_cls):
    graph = load(args)
    if name == "sssp" and graph.weights is None:
        graph = graph.with_weights(seed=args.seed)
        print(f"graph has no weights: using random integer weights 1..64 (seed {args.seed})")
    if args.source is None:
        source = 0
    else:
        try:
            source = graph.vertex_of(args.source)
        except KeyError as exc:
            raise ValueError(f"--source {args.source}: {exc.args[0]}") from None
    delta = args.delta
    if delta is not None and solver_cls.weighted and graph.weights is not None \
            and np.asarray(graph.weights).dtype.kind in "iu":
        delta = int(delta)
    runs = run_solver(args, lambda ctx: solver_cls(
        graph, ctx=ctx, partition=args.partition or "metis", mode=args.mode,
        priority=False if args.no_priority else "auto", routing=args.routing, delta=delta,
        seed=args.seed, exchange=args.exchange), source)
    res, median = runs.result, runs.median
    reached = int(np.count_nonzero(res.values >= 0) if name == "bfs"
                  else np.count_nonzero(np.isfinite(res.values)))
    print(f"{name} from {graph.file_id_of(source)} on {runs.devices} {runs.backend} device(s), "
          f"{res.stats['mode']}: {median * 1e3:.3f} ms (median of {args.repeat}), "
          f"{graph.num_edges / median / 1e9:.3f} GTEPS, {reached:,} vertices reached")
    print_stats(res.stats)
    status = 0
    if args.verify:
        status = verify(name, graph, source, res.values)
    if args.output:
        write_output(graph, res.values, args.output)
    return status


def verify(name, graph, source, values) -> int:
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
        print(f"verify: FAILED at {bad.size:,} vertices, e.g. vertex {graph.file_id_of(v)}: "
              f"got {values[v]}, expected {ref[v]}")
        return 1
    print("verify: ok (matches groute.graph.reference)")
    return 0
