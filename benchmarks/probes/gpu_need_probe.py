"""GPU probe: what storing into the peers costs PageRank's persistent csc sweep, on one device.

On two H200s a device's sweep of N vertices took 10-14% longer than one GPU's sweep of a graph
with N vertices (grid:4900 on two against grid:3465 on one): every vertex read its ``need``
byte (which peers read it) to decide where to store. Measured with this probe on one H200
(grid:3465, a second output vector that no vertex needs): the byte of every vertex made the
sweep 1.205x as long, one bit per vertex (``need_any`` words, tried next) still 1.089x. The
kernels now store only their own vector in the sweep and export the listed vertices to the
peers afterwards (iterate.cu ``pr_export``). This runs the persistent csc kernel on one GPU
(``persistent=True``, ``GROUTE_PR_TRACE=1``: median phases of an iteration) alone (nouts 1),
with a second output and nothing to export, and with every hundredth vertex exported to it.

    python benchmarks/probes/gpu_need_probe.py [--graphs grid:3465,grid:2450] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def with_second_output(dev, every=0):
    """Give ``dev`` a second output vector (a dummy) and export every ``every``-th local
    vertex to it (0: none)."""
    import numpy as np
    dummy = [dev.device.zeros(dev.n, np.float32) for _ in dev.contrib]
    ptrs = [c.data.ptr for par in range(2) for c in (dev.contrib[par % len(dev.contrib)],
                                                     dummy[par % len(dummy)])]
    dev._dummy = dummy
    dev.outs_both = dev.device.asarray(np.array(ptrs, dtype=np.uint64))
    dev.outs = [dev.outs_both[:2], dev.outs_both[2:]]
    dev.num_outputs = 2
    listed = np.arange(0, dev.n_local, every, dtype=np.int32) if every else np.zeros(0, np.int32)
    dev.nexports = int(listed.size)
    dev.exports = dev.device.asarray(listed if listed.size else np.zeros(1, np.int32))
    dev.export_off = dev.device.asarray(np.array([0, 0, listed.size], np.int32))
    dev._bind_fused_args()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="grid:3465,grid:2450")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import os
    os.environ["GROUTE_PR_TRACE"] = "1"
    from groute.apps.pr import PageRank
    from groute.tuning import PageRankTuning
    from groute import Context
    from groute.graph import load_graph
    for spec in args.graphs.split(","):
        g = load_graph(spec)
        phases, first = {}, None
        for how, every in (("nouts 1", None), ("nouts 2, nothing exported", 0),
                           ("nouts 2, 1% exported", 100), ("nouts 1 again", None)):
            with Context(1, backend="cuda") as ctx, PageRank(
                    g, ctx=ctx, mode="bsp", weight=None, tol=1e-6 / g.num_vertices, max_iter=1000,
                    tuning=PageRankTuning(bsp_kernel="csc", persistent=True, trace=True)) as s:
                if every is not None:
                    with_second_output(s.devs[0], every)
                s.run()
                runs = [s.run() for _ in range(args.repeat)]
            tr = [r.stats["iteration_trace"]["per_device_us"][0] for r in runs]
            phases[how] = tuple(statistics.median(t[key] for t in tr) for key in ("sweep", "iteration"))
            first = runs[-1].values if first is None else first
            assert (runs[-1].values == first).all(), f"{spec} {how}: a different answer"
        base = phases["nouts 1"][0]
        print(f"{spec}: " + ", ".join(f"{k}: sweep {sw:.1f} us ({sw / base:.3f}x), iteration {it:.1f} us"
                                      for k, (sw, it) in phases.items()), flush=True)


if __name__ == "__main__":
    main()
