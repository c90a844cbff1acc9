#!/usr/bin/env python
"""Set-up time of the multi-device solvers on a big graph, with their answers cross-checked.

Not a pytest module: run it on a machine with CUDA GPUs (``--backend cpu`` runs the same cases
on CPU virtual devices, to test the script)::

    python benchmarks/gpu_setup_probe.py --graph kron:25 --cases bfs:1,bfs:2,pr:1,pr:2,cc:1,cc:2

For each case ``APP:K`` it builds the solver on a context of ``K`` devices made beforehand and
prints the wall time of the constructor (``setup_s``: partitioning, renumbering, layouts, uploads),
then runs it once to warm up and once timed. Cases run in the order given on ONE graph object,
as ``groute bench`` does, so what a solver leaves on the graph (the partition memo, PageRank's
degree layout and in-degrees) serves the later ones: the first case of each app pays for it.
Answers on K > 1 devices must equal the app's first answer (BFS depths and CC labels exactly,
PageRank within L1 1e-5); with ``--check-layout SPEC`` the CUDA "bins" in-arcs built with CuPy
are also compared with the NumPy build on that (smaller) graph. With ``$OUT`` set the results go
to ``$OUT/gpu_setup_probe.json``. The script uses only the solvers' public constructors, so it
can time an older checkout too. It puts this tree first on ``sys.path`` unless
``GROUTE_PROBE_KEEP_PATH`` is set, so an older one is timed with both::

    GROUTE_PROBE_KEEP_PATH=1 PYTHONPATH=old_tree python benchmarks/gpu_setup_probe.py

(the source vertex still comes from this tree's ``tests/support.py``: ``busiest``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

if not os.environ.get("GROUTE_PROBE_KEEP_PATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # support.busiest

from groute import Context  # noqa: E402
from groute.graph import load_graph  # noqa: E402
from support import busiest  # noqa: E402

PR_MAX_L1 = 1e-5


def build(app, g, ctx):
    if app == "bfs":
        from groute.apps.bfs import BFS
        return BFS(g, ctx=ctx, partition="contiguous")
    if app == "pr":
        from groute.apps.pr import PageRank
        from groute.tuning import PageRankTuning
        return PageRank(g, ctx=ctx, mode="bsp", tuning=PageRankTuning(bsp_kernel="bins"),
                        weight=None, tol=1e-6 / g.num_vertices, max_iter=1000)
    if app == "cc":
        from groute.apps.cc import CC
        return CC(g, ctx=ctx)
    raise ValueError(f"unknown app {app!r}: use bfs, pr or cc")


def run(app, solver, source):
    return solver.run(source) if app == "bfs" else solver.run()


def compare(app, first, values):
    """'equal' or why not: the K-device answer against the app's first answer."""
    if app == "pr":
        l1 = float(np.abs(np.asarray(first) - np.asarray(values)).sum())
        return "equal" if l1 <= PR_MAX_L1 else f"L1 {l1:.3e} > {PR_MAX_L1}"
    same = np.array_equal(np.asarray(first), np.asarray(values))
    return "equal" if same else f"{int(np.count_nonzero(np.asarray(first) != np.asarray(values)))} differ"


def check_layout(spec, backend):
    """The bins in-arcs a CUDA solver holds (CuPy build) against the NumPy build."""
    from groute.apps.pr import PageRank
    from groute.tuning import PageRankTuning
    from groute.engines.iterate.layout import bins_layout
    g = load_graph(spec)
    host = bins_layout(g)
    want = host.sources(g)
    host.host_sources = None            # make the solver build them on the device
    with Context(2, backend=backend, timeout=300) as ctx:
        with PageRank(g, ctx=ctx, mode="bsp", tuning=PageRankTuning(bsp_kernel="bins"),
                      weight=None) as s:
            got = np.concatenate([d.device.to_host(d.in_cols) for d in s.devs])
    return "equal" if np.array_equal(got, want) else "DIFFERENT"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", default="kron:25")
    ap.add_argument("--cases", default="bfs:1,bfs:2,pr:1,pr:2,cc:1,cc:2")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--label", default="", help="a name for this run (e.g. before / after)")
    ap.add_argument("--check-layout", default=None, metavar="SPEC")
    args = ap.parse_args()
    out = {"commit": os.environ.get("GROUTE_COMMIT", ""), "label": args.label,
           "graph": args.graph, "cases": []}
    path = Path(os.environ["OUT"]) / f"gpu_setup_probe{('_' + args.label) if args.label else ''}.json" \
        if os.environ.get("OUT") else None
    import groute.apps
    import groute
    print(f"[{args.label}] code: {Path(groute.apps.__file__).parent}, {Path(groute.__file__).parent} "
          f"(commit {out['commit'] or '?'})", flush=True)
    t = time.perf_counter()
    g = load_graph(args.graph)
    print(f"[{args.label}] {g} loaded in {time.perf_counter() - t:.1f} s", flush=True)
    source = busiest(g)
    first = {}
    failed = False
    for case in args.cases.split(","):
        app, k = case.split(":")
        k = int(k)
        row = {"app": app, "devices": k}
        try:
            with Context(k, backend=args.backend, timeout=300) as ctx:
                t = time.perf_counter()
                solver = build(app, g, ctx)
                row["setup_s"] = round(time.perf_counter() - t, 3)
                try:
                    run(app, solver, source)
                    res = run(app, solver, source)
                finally:
                    solver.close()
            row["run_ms"] = round(res.time_s * 1e3, 3)
            if app not in first:
                first[app] = res.values
                row["check"] = "first"
            else:
                row["check"] = compare(app, first[app], res.values)
                failed |= row["check"] != "equal"
        except Exception as exc:  # report and go on with the next case
            row["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
            failed = True
        print(f"[{args.label}] {app} on {k}: " + ", ".join(f"{a} {b}" for a, b in row.items()
                                                         if a not in ("app", "devices")), flush=True)
        out["cases"].append(row)
        if path:
            path.write_text(json.dumps(out, indent=1))
    if args.check_layout:
        out["layout_check"] = check_layout(args.check_layout, args.backend)
        print(f"[{args.label}] bins in-arcs, CuPy vs NumPy build on {args.check_layout}: "
              f"{out['layout_check']}", flush=True)
        failed |= out["layout_check"] != "equal"
        if path:
            path.write_text(json.dumps(out, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
