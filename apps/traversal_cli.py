"""Command lines ``groute bfs`` and ``groute sssp``: load, solve (warm-up + repeats), verify, write.

``--source`` takes the vertex id as written in the graph file (1-based for Matrix Market and
DIMACS, the original id for SNAP edge lists, 0-based for generated graphs). ``--output x.npy``
writes a NumPy array indexed in the reader's order (file id minus one for 1-based formats);
any other suffix writes text lines ``vertex value`` with file ids. Unreachable vertices are -1
(BFS depth) or inf (SSSP distance). Without ``--source`` the first vertex is used.
"""
from __future__ import annotations

import inspect
import re

import numpy as np

from groute.worklist import MODES, ROUTINGS

from .app_cli import add_graph_options, load, print_stats, run_solver, write_output
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
    p.add_argument("--source", type=int, default=None, metavar="V",
                   help="source vertex, as written in the file (default: the first vertex)")
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
