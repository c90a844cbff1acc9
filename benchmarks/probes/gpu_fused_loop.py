#!/usr/bin/env python
"""GPU check of the fused loop (``groute.operators.run_loop`` on one CUDA device): every app
written on it (k-core, betweenness, SCC) with ``loop="fused"`` and ``loop="python"`` on one
GPU, the answers compared, the times printed; then betweenness' passes fused with each
direction (the app's: forward ``auto``, backward pulled; both pushed; both pulled), per-source
milliseconds and the answers compared with the app's.

Run from the repository root on a machine with a CUDA GPU::

    python benchmarks/probes/gpu_fused_loop.py                      # kron:21, about a minute or two
    python benchmarks/probes/gpu_fused_loop.py --graph kron:18 --sources 16
    python benchmarks/probes/gpu_fused_loop.py --devices 2    # the apps on two GPUs

With ``--devices K`` (K > 1) the apps run on K CUDA devices, where a fused loop (and
betweenness' rounds) is one launch per device exchanging through device-initiated writes
(docs/OPERATORS_REFERENCE.md, "Loops on several devices"); betweenness' directions run on one device and
are skipped.

One line per case (``OK``/``FAIL``, the loop, seconds, the stats that count levels); a case that
raises prints ``FAIL <case>: <error>`` and the rest go on. Exit status 1 if anything failed.
``--only-directions`` skips the apps' fused-vs-python cases.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from groute.graph import CSRGraph, load_graph  # noqa: E402


def random_directed(n, arcs, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, arcs), rng.integers(0, n, arcs)
    return CSRGraph.from_edges(src, dst, n, directed=True, name=f"random-directed:{n}")


def timed(make, repeat):
    """The answer and the median seconds of ``repeat`` runs after one warm-up (compiles)."""
    with make() as solver:
        result = solver.run()
        seconds = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = solver.run()
            seconds.append(time.perf_counter() - t0)
    return result, float(np.median(seconds))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="kron:21", help="k-core and betweenness (undirected)")
    ap.add_argument("--scc-vertices", type=int, default=1 << 20)
    ap.add_argument("--sources", type=int, default=64, help="betweenness sources")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--devices", type=int, default=1,
                    help="CUDA devices of the apps (several: the directions are skipped)")
    ap.add_argument("--only-directions", action="store_true",
                    help="only betweenness' passes by direction")
    args = ap.parse_args()
    from groute.apps.betweenness import BACKWARD, FORWARD, Betweenness, sample_sources
    from groute.operators import AdvanceStep
    from groute.apps.kcore import KCore
    from groute.apps.scc import SCC

    g = load_graph(args.graph)
    d = random_directed(args.scc_vertices, 4 * args.scc_vertices)
    sources = [g.file_id_of(p) for p in sample_sources(g.num_vertices, args.sources, 1)]

    class BC(Betweenness):
        def run(self):
            return super().run(sources)

    cases = [
        ("kcore", lambda loop: KCore(g, devices=args.devices, backend="cuda", loop=loop),
         ("levels", "rounds"), lambda a, b: np.array_equal(a, b)),
        ("betweenness", lambda loop: BC(g, devices=args.devices, backend="cuda", loop=loop),
         ("levels", "max_depth"), lambda a, b: np.allclose(a, b, rtol=1e-9, atol=1e-12)),
        ("scc", lambda loop: SCC(d, devices=args.devices, backend="cuda", loop=loop),
         ("iterations", "trim_rounds", "colour_rounds", "claim_rounds"),
         lambda a, b: np.array_equal(a, b)),
    ]

    class PushOnly(BC):
        forward_pass = [AdvanceStep(FORWARD, "push")]
        backward_pass = [AdvanceStep(BACKWARD, "push", over="in")]

    class PullOnly(BC):
        forward_pass = [AdvanceStep(FORWARD, "pull")]

    failed = False
    for name, make, keys, same in [] if args.only_directions else cases:
        answers = {}
        for loop in ("python", "fused"):
            try:
                res, seconds = timed(lambda: make(loop), args.repeat)
                answers[loop] = np.asarray(res.values)
                extra = " ".join(f"{k}={res.stats.get(k)}" for k in keys)
                per = (f" ({seconds / args.sources * 1e3:.3f} ms per source)"
                       if name == "betweenness" else "")
                print(f"OK   {name:12s} loop={loop:6s} ran={res.stats.get('loop')} "
                      f"{seconds * 1e3:10.2f} ms{per}  {extra}", flush=True)
            except Exception as exc:  # noqa: BLE001 - one line per case, go on
                failed = True
                print(f"FAIL {name} loop={loop}: {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exc(limit=3)
        if len(answers) == 2:
            equal = same(answers["python"], answers["fused"])
            failed |= not equal
            print(f"{'OK  ' if equal else 'FAIL'} {name:12s} fused == python: {equal}",
                  flush=True)
    if args.devices == 1:
        failed |= directions(g, args, {"auto (the app's)": BC, "push only": PushOnly,
                                       "pull only": PullOnly})
    return 1 if failed else 0


def directions(g, args, solvers) -> bool:
    """Betweenness fused with each set of passes: per-source ms, answers against the first."""
    failed, first = False, None
    for label, solver in solvers.items():
        try:
            res, seconds = timed(lambda: solver(g, devices=1, backend="cuda", loop="fused"),
                                 args.repeat)
        except Exception as exc:  # noqa: BLE001 - one line per case, go on
            print(f"FAIL betweenness {label}: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=3)
            failed = True
            continue
        values = np.asarray(res.values)
        ok = first is None or np.allclose(values, first, rtol=1e-9, atol=1e-12)
        same = "" if first is None else f"  same as auto: {ok}"
        failed |= not ok
        first = values if first is None else first
        print(f"{'OK  ' if ok else 'FAIL'} betweenness {label:18s} "
              f"{seconds / args.sources * 1e3:8.3f} ms per source  "
              f"levels={res.stats.get('levels')}{same}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
