"""``groute kcore``: k-core decomposition of a graph file or spec (:mod:`groute.apps.kcore`).

Prints the summary line (time, the largest core number and how many vertices have it);
``--stats``, ``--json`` and ``--output`` as every app command (:mod:`groute.apps.app_cli`).
``--verify`` compares with NetworkX's ``core_number`` (slow on graphs of millions of arcs).
"""
from __future__ import annotations

import numpy as np

from groute.registry import command

from .app_cli import (add_engine_options, add_graph_options, advanced_group, checked, load, report,
                      run_solver, write_output)
from .kcore import DEFAULT_DIRECTION, KCore


@command
def register(subparsers, common):
    p = subparsers.add_parser("kcore", aliases=["core_number"], parents=[common],
                              help="k-core decomposition (core number of every vertex)")
    add_graph_options(p, reads_weights=False, verify_help="compare with networkx.core_number (slow on millions of "
                                     "arcs)")
    add_engine_options(p)
    advanced_group(p).add_argument(
        "--direction", choices=("push", "pull", "auto"), default=DEFAULT_DIRECTION,
        help=f"the peel's direction (default {DEFAULT_DIRECTION}: a pulling candidate reads its "
             "arcs until it falls to k, where Beamer's rule counts on a pull stopping at the "
             "first frontier arc; auto: Beamer's rule, groute.operators.direction)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    g, load_s = load(args)
    runs = run_solver(args, g, lambda where: KCore(g, **where, partition=args.partition,
                                                  seed=args.seed, mode=args.mode,
                                                  direction=args.direction))
    res = runs.result
    core = np.asarray(res.values)
    top = int(core.max()) if core.size else 0
    in_top = int(np.count_nonzero(core == top)) if core.size else 0
    line = (f"kcore {g.name}: {runs.median * 1e3:.3f} ms ({runs.where(runs.solver.direction)}), "
            f"max core {top} ({in_top:,} vertices), {res.stats['levels']:,} levels, "
            f"{res.stats['rounds']:,} rounds")
    verified = None
    if args.verify:
        verified = checked(args, g, lambda whole: _verify(whole, res))
    report(args, "kcore", g, load_s, runs, line,
           {"max_core": top, "max_core_vertices": in_top}, verified)
    if args.output:
        write_output(res, args.output, "core")
    return 0 if verified is None or verified[0] else 1


def _verify(g, res):
    import networkx as nx
    G = g.to_networkx()
    ref = nx.core_number(G)
    want = np.array([ref[v] for v in range(g.num_vertices)], dtype=np.int64)
    bad = np.flatnonzero(np.asarray(res.values) != want)
    if bad.size == 0:
        return True, "OK (exact match with networkx.core_number)"
    v = int(bad[0])
    return False, (f"FAILED: {bad.size:,} vertices differ from networkx.core_number (first: "
                   f"position {v}, {int(res.values[v])} vs {int(want[v])})")
