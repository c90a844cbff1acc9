"""``groute betweenness``: betweenness centrality of a graph file or spec
(:mod:`groute.apps.betweenness`).

Prints the summary line (time, the sources, the most central vertex); ``--stats``, ``--json``
and ``--output`` as every app command (:mod:`groute.apps.app_cli`). ``--k`` samples sources as
NetworkX does, seeded by ``--seed``; ``--sources`` names them. ``--verify`` compares with
NetworkX's ``betweenness_centrality`` on the same sources (slow: it is the same Brandes
algorithm in Python).
"""
from __future__ import annotations

import argparse
import random

import numpy as np

from groute.registry import command

from .app_cli import (add_engine_options, add_graph_options, checked, load, parse_vertices,
                      report, run_solver, write_output)
from .betweenness import Betweenness, sample_sources


@command
def register(subparsers, common):
    p = subparsers.add_parser("betweenness", aliases=["betweenness_centrality"], parents=[common],
                              help="betweenness centrality (Brandes; all or sampled sources)")
    add_graph_options(p, repeat_default=1, reads_weights=False,
                      verify_help="compare with networkx.betweenness_centrality on the same "
                                  "sources (slow: the same Brandes in Python)")
    p.add_argument("--k", type=int, default=None, metavar="N",
                   help="score from N sources sampled as NetworkX samples them, seeded by "
                        "--seed (default: every vertex is a source)")
    p.add_argument("--sources", default=None, metavar="IDS",
                   help="comma-separated vertex ids to use as the sources instead of a sample "
                        "(rescaled as a sample of that many)")
    p.add_argument("--normalized", action=argparse.BooleanOptionalAction, default=True,
                   help="divide by the number of pairs of other vertices (default: normalized)")
    p.add_argument("--endpoints", action="store_true",
                   help="count a path's ends among the vertices it passes through")
    add_engine_options(p)
    p.set_defaults(func=_cli)


def _sources(args, g):
    """The sources the options ask for, as the graph's ids (``None``: every vertex)."""
    if args.k is not None and args.sources is not None:
        raise ValueError("--k and --sources both choose the sources; give one")
    if args.sources is not None:
        positions = parse_vertices(g, args.sources, "--sources")
    elif args.k is not None:
        positions = sample_sources(g.num_vertices, args.k, args.seed)
    else:
        positions = None
    return None if positions is None else [g.file_id_of(p) for p in positions]


def _cli(args) -> int:
    g, load_s = load(args)
    sources = _sources(args, g)
    runs = run_solver(args, g, lambda where: Betweenness(
        g, **where, partition=args.partition, mode=args.mode),
                      sources, normalized=args.normalized, endpoints=args.endpoints)
    res = runs.result
    bc = np.asarray(res.values)
    top = int(np.nanargmax(bc)) if bc.size and not np.isnan(bc).all() else 0
    top_id = g.file_id_of(top) if bc.size else None
    line = (f"betweenness {g.name}: {runs.median * 1e3:.3f} ms ({runs.where()}), "
            f"{res.stats['sources']:,} sources, max {bc[top] if bc.size else 0:.6g} at vertex "
            f"{top_id}, max depth {res.stats['max_depth']:,}")
    verified = None
    if args.verify:
        verified = checked(args, g, lambda whole: _verify(whole, res, sources, args))
    report(args, "betweenness", g, load_s, runs, line,
           {"sources": res.stats["sources"], "max": float(bc[top]) if bc.size else 0.0,
            "max_vertex": top_id}, verified)
    if args.output:
        write_output(res, args.output, "betweenness")
    return 0 if verified is None or verified[0] else 1


class GivenSources(random.Random):
    """A NetworkX ``seed`` whose ``sample`` returns the given positions: NetworkX then scores
    from exactly the sources groute used (its nodes are positions here)."""

    def __init__(self, positions):
        super().__init__(0)
        self.positions = list(positions)

    def sample(self, population, k, **_):
        return [population[i] for i in self.positions]


def _verify(g, res, sources, args):
    import networkx as nx
    G = g.to_networkx()
    options = dict(normalized=args.normalized, endpoints=args.endpoints)
    if sources is not None:
        options.update(k=len(sources), seed=GivenSources([g.vertex_of(i) for i in sources]))
    ref = nx.betweenness_centrality(G, **options)
    want = np.array([ref[v] for v in range(g.num_vertices)], dtype=np.float64)
    got = np.asarray(res.values)
    close = np.isclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    bad = np.flatnonzero(~close)
    if bad.size == 0:
        return True, "OK (matches networkx.betweenness_centrality)"
    v = int(bad[0])
    return False, (f"FAILED: {bad.size:,} vertices differ from networkx.betweenness_centrality "
                   f"(first: position {v}, {got[v]!r} vs {want[v]!r})")
