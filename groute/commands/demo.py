"""``groute demo`` (what ``make demo`` runs): every app on the devices that are there, verified.

Uses the small real graph shipped in ``groute/data`` so it works without ``../shared`` or a
network: PBF on a random array, then BFS, SSSP, PageRank, connected components and every other
registered app (k-core...), each compared with its independent reference (NumPy / scipy; an app
registered with its own checks, by those, as ``groute bench`` does). The apps come from :mod:`groute.registry`, as
the facade registered them.
"""
from __future__ import annotations

import numpy as np

from ..cli_support import context_from_args


def register(subparsers, common):
    p = subparsers.add_parser("demo", parents=[common],
                              help="run PBF, BFS, SSSP, PageRank and CC on the shipped graph, verified")
    p.add_argument("--graph", default=None, help="graph path or spec (default: the shipped graph)")
    p.set_defaults(func=run)


def _line(name, ok, ms, detail):
    print(f"  {name:9s} {ms:9.2f} ms  {'verified' if ok else 'WRONG'}  {detail}")
    return ok


def run(args) -> int:
    from .. import registry
    from ..graph import load_graph, reference, shipped_graph_path

    spec = args.graph or str(shipped_graph_path())
    graph = load_graph(spec)
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
        k = len(ctx.devices)
        partition = "metis" if k > 1 and _have_pymetis() else "contiguous"
        source = int(np.argmax(graph.degrees()))
        weighted = graph if graph.weights is not None else graph.with_weights(seed=1)
        # app (as registered) -> (its check against the graph layer's reference, what it shows)
        checks = {
            "bfs": (lambda g, r: np.array_equal(r.values, reference.bfs(g, source)),
                    f"source {graph.file_id_of(source)}"),
            "sssp": (lambda g, r: np.allclose(r.values, reference.sssp(g, source)),
                     "random weights 1..64"),
            "pr": (lambda g, r: reference.pagerank_error(r.values, reference.pagerank(g))[0]
                   <= 1e-4, "L1 <= 1e-4"),
            "cc": (lambda g, r: np.array_equal(r.values, reference.connected_components(g)),
                   "labels = smallest vertex id"),
        }
        for name, app in registry.APPS.items():
            g = weighted if app.weighted else graph
            if not app.self_loops:
                g = g.remove_self_loops()
            if app.directed:
                g = g.as_directed()
            options = {"partition": partition} if app.takes_partition else {}
            run_args = (graph.file_id_of(source),) if app.needs_source else ()
            sample = None
            if app.sources:
                from ..bench.suite import choose_sources
                sample = choose_sources(g, app.sources)
                run_args = ([graph.file_id_of(int(v)) for v in sample],)
            check, detail = checks.get(name) or _registry_check(name, app, sample)
            with app.solver_class()(g, ctx=ctx, **options) as solver:
                options = app.run_options or {}
                solver.run(*run_args, **options)     # warm-up: compiles kernels, fills caches
                r = solver.run(*run_args, **options)
            results.append(_line(name, bool(check(g, r)), r.time_s * 1e3, detail))
    print("all results verified" if all(results) else "SOME RESULTS ARE WRONG")
    return 0 if all(results) else 1


def _registry_check(name, app, sources):
    """The check of an app that brings its own (``App.reference`` and ``App.verify``, as
    ``groute bench`` uses them); ``sources``: its sample, for an app run from sources."""
    from ..bench.verify import verify
    from ..registry import load
    if app.reference is None:
        raise ValueError(f"app {name!r} registered no reference: the demo cannot check it")

    def check(g, r):
        ref = np.asarray(load(*app.reference)(g, sources if app.sources else None))
        return verify(name, r.values, ref, g).ok
    return check, f"{app.verify}, as {app.reference[0]}.{app.reference[1]}"


def _have_pymetis():
    try:
        import pymetis  # noqa: F401
        return True
    except ImportError:
        return False
