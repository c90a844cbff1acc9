"""Generator benchmark: time ``generate(spec)`` on NumPy and, where there is a GPU, on CuPy.

    python -m groute.graph.bench_generators [SPEC ...] [--backend numpy|cupy|both] [--json]

Default specs: kron:16, kron:18, kron:21, grid:1000, er:1e6:8. For each it reports vertices,
arcs, seconds (wall clock; on CuPy after a device synchronise, excluding the first, warm-up run
of a small spec that compiles the kernels) and, when both backends ran, whether the arrays are
identical (they must be: see :mod:`groute.graph.rng`).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from .generators import generate
from .rng import get_xp


def _time(spec, xp):
    sync = (lambda: xp.cuda.Device().synchronize()) if xp is not np else (lambda: None)
    sync()
    t0 = time.perf_counter()
    g = generate(spec, xp=xp)
    sync()
    return time.perf_counter() - t0, g


def run(specs, backends, compare=True):
    rows = []
    xps = {}
    for b in backends:
        # with both backends asked for, a machine without a GPU just runs NumPy
        xp = get_xp(None if b == "numpy" else ("auto" if len(backends) > 1 else "cupy"))
        if b == "cupy" and xp is np:
            continue
        xps[b] = xp
        if xp is not np:
            _time("kron:10", xp)              # warm-up: kernel compilation
    for spec in specs:
        row = {"spec": spec}
        graphs = {}
        for b, xp in xps.items():
            seconds, g = _time(spec, xp)
            row[f"{b}_seconds"] = round(seconds, 3)
            row["vertices"], row["arcs"] = g.num_vertices, g.num_edges
            if compare and len(xps) > 1:
                graphs[b] = g.to_host()
            del g
        if len(graphs) > 1:
            a, c = graphs["numpy"], graphs["cupy"]
            row["identical"] = bool(np.array_equal(a.indptr, c.indptr)
                                    and np.array_equal(a.indices, c.indices)
                                    and (a.weights is None or np.array_equal(a.weights, c.weights)))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", default=["kron:16", "kron:18", "kron:21", "grid:1000", "er:1e6:8"])
    ap.add_argument("--backend", choices=["numpy", "cupy", "both"], default="both")
    ap.add_argument("--no-compare", action="store_true", help="don't check CPU and GPU agree")
    args = ap.parse_args(argv)
    backends = ["numpy", "cupy"] if args.backend == "both" else [args.backend]
    run(args.specs, backends, compare=not args.no_compare)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
