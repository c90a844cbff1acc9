"""``groute scc``: strongly connected components of a directed graph file or spec
(:mod:`groute.apps.scc`).

Prints the summary line (time, the number of components and the largest one's size);
``--stats``, ``--json`` and ``--output`` as every app command (:mod:`groute.apps.app_cli`; the
output names each vertex's component by its representative's id, as ``groute cc``).
``--verify`` compares with NetworkX's ``strongly_connected_components``.
"""
from __future__ import annotations

import numpy as np

from groute.registry import command

from .app_cli import (add_engine_options, add_graph_options, checked, load, report, run_solver,
                      write_output)
from .scc import SCC


@command
def register(subparsers, common):
    p = subparsers.add_parser("scc", parents=[common],
                              help="strongly connected components of a directed graph")
    add_graph_options(p, reads_weights=False, verify_help="compare with networkx.strongly_connected_components")
    add_engine_options(p)
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    g, load_s = load(args)
    runs = run_solver(args, g, lambda where: SCC(g, **where, partition=args.partition,
                                                seed=args.seed, mode=args.mode))
    res = runs.result
    count, largest = res.stats["components"], res.stats["largest"]
    line = (f"scc {g.name}: {runs.median * 1e3:.3f} ms ({runs.where()}), {count:,} components, "
            f"largest {largest:,} vertices, {res.stats['iterations']:,} iterations")
    verified = checked(args, g, lambda whole: _verify(whole, res)) if args.verify else None
    report(args, "scc", g, load_s, runs, line, {"components": count, "largest": largest},
           verified)
    if args.output:
        write_output(res, args.output, "component")
    return 0 if verified is None or verified[0] else 1


def _verify(g, res):
    import networkx as nx
    G = g.to_networkx()
    labels = np.asarray(res.values)
    wrong = 0
    for members in nx.strongly_connected_components(G):
        members = np.fromiter(members, np.int64)
        if not (labels[members] == members.min()).all():
            wrong += 1
    if wrong == 0:          # each labelled by its smallest member: the same partition
        return True, "OK (the same components as networkx.strongly_connected_components)"
    return False, (f"FAILED: {wrong:,} of networkx's strongly connected components differ "
                   f"({res.stats['components']:,} components found)")
