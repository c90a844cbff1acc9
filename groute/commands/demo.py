"""``groute demo`` (what ``make demo`` runs): every app on the devices that are there, verified.

Uses the small real graph shipped in ``groute/data`` so it works without ``../shared`` or a
network: PBF on a random array, then every registered algorithm (BFS, SSSP, PageRank, connected
components, k-core ...: :data:`groute.registry.ALGORITHMS`), each compared with its independent
reference exactly as ``groute bench`` checks it (:mod:`groute.bench.specs`).
"""
from __future__ import annotations

import numpy as np

from ..cli_support import context_from_args


def register(subparsers, common):
    from .. import registry
    p = subparsers.add_parser("demo", parents=[common],
                              help=f"run PBF and every algorithm ({registry.labels()}) on the "
                                   f"shipped graph, verified")
    p.add_argument("--graph", default=None, help="graph path or spec (default: the shipped graph)")
    p.set_defaults(func=run)


def _line(name, ok, ms, detail):
    print(f"  {name:11s} {ms:9.2f} ms  {'verified' if ok else 'WRONG'}  {detail}")
    return ok


def run(args) -> int:
    from .. import registry
    from ..bench.references import reference_label, reference_result
    from ..bench.specs import spec_for
    from ..bench.suite import WEIGHT_SEED, choose_sources
    from ..bench.verify import verify
    from ..graph import load_graph, shipped_graph_path

    spec = args.graph or str(shipped_graph_path())
    graph = load_graph(spec)
    if graph.num_vertices == 0:
        raise ValueError(f"--graph {spec}: the graph has no vertices, so there is nothing to "
                         f"demonstrate on it")
    results = []
    with context_from_args(args) as ctx:
        print(f"groute demo on {len(ctx.devices)} x {ctx.backend} "
              f"({', '.join(d.name for d in ctx.devices)})")
        data = np.random.default_rng(0).integers(0, 1 << 30, 2_000_000, dtype=np.int32)
        res = registry.function("pbf")(data, "mod:3:1", ctx=ctx, segment_size=1 << 17)
        ok = np.array_equal(np.sort(res.values), np.sort(data[data % 3 == 1]))
        results.append(_line("pbf", ok, res.time_s * 1e3,
                             f"kept {res.values.size:,} of {data.size:,}; per device "
                             f"{res.stats['elements_per_device']}"))

        print(f"graph {graph.name}: {graph.num_vertices:,} vertices, {graph.num_edges:,} arcs")
        source = int(np.argmax(graph.degrees()))
        weighted = graph if graph.weights is not None else graph.with_weights(seed=WEIGHT_SEED)
        for name, app in registry.ALGORITHMS.items():
            checks = spec_for(name)
            if checks.reference is None:
                print(f"  {name:11s} not run: no reference to check it against")
                continue
            g = weighted if app.weighted else graph
            if not app.self_loops:
                g = g.remove_self_loops()
            if app.directed:
                g = g.as_directed()
            at = source if app.needs_source else None
            run_args = (graph.file_id_of(source),) if app.needs_source else ()
            if checks.sources:
                at = choose_sources(g, checks.sources)
                run_args = ([graph.file_id_of(int(v)) for v in at],)
            with app.solver(g, ctx=ctx, **checks.options_for(g)) as solver:
                solver.run(*run_args, **checks.run_options)  # warm-up: compiles kernels
                r = solver.run(*run_args, **checks.run_options)
            verdict = verify(name, r.values, reference_result(name, g, at), g)
            results.append(_line(name, verdict.ok, r.time_s * 1e3,
                                 f"{verdict.detail} ({reference_label(name, 'cpu')})"))
    print("all results verified" if all(results) else "SOME RESULTS ARE WRONG")
    return 0 if all(results) else 1
