"""GPU probe: what the peer-store mask costs PageRank's persistent csc sweep, on one device.

On two H200s a device's sweep of N vertices took 10-14% longer than one GPU's sweep of a graph
with N vertices (grid:4900 on two against grid:3465 on one). The kernels differ by the peer
mask once there are peer outputs (nouts > 1). This runs the persistent csc kernel on one GPU
(``persistent=True``, ``GROUTE_PR_TRACE=1``: the median sweep of an iteration) as it runs alone
(nouts 1) and with a second output vector that no vertex needs (nouts 2, nothing stored into
it): as the kernel reads the mask now (the ``need_any`` words, one bit per vertex), and with
every ``need_any`` bit set, so that every vertex's ``need`` byte is read, as before
``need_any``. (Measured before it with the per-iteration kernel: 115.0 against 126.7 us on
grid:3465, one H200.)

    python tests/gpu_need_probe.py [--graphs grid:3465,grid:2450] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def with_unused_output(dev, read_every_byte=False):
    """Give ``dev`` a second output vector whose bit no vertex has (need stays 1 per vertex);
    ``read_every_byte``: set every need_any bit, so the kernel reads every need byte."""
    import numpy as np
    if read_every_byte:
        dev.need_any = dev.device.asarray(np.full(dev.need_any.size, 0xFFFFFFFF, np.uint32))
    dummy = [dev.device.zeros(dev.n, np.float32) for _ in dev.contrib]
    ptrs = [c.data.ptr for par in range(2) for c in (dev.contrib[par % len(dev.contrib)],
                                                     dummy[par % len(dummy)])]
    dev._dummy = dummy
    dev.outs_both = dev.device.asarray(np.array(ptrs, dtype=np.uint64))
    dev.outs = [dev.outs_both[:2], dev.outs_both[2:]]
    dev.out_targets = [dev, dev]
    dev._bind_fused_args()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="grid:3465,grid:2450")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import os
    os.environ["GROUTE_PR_TRACE"] = "1"
    from apps.pr import PageRank
    from groute import Context
    from groute.graph import load_graph
    for spec in args.graphs.split(","):
        g = load_graph(spec)
        sweeps, first = {}, None
        for how in ("nouts 1", "nouts 2", "nouts 2, every need byte read", "nouts 1 again"):
            with Context(1, backend="cuda") as ctx, PageRank(g, ctx=ctx, mode="bsp", bsp_kernel="csc",
                                                             persistent=True) as s:
                if "nouts 2" in how:
                    with_unused_output(s.devs[0], read_every_byte="every" in how)
                s.run()
                runs = [s.run() for _ in range(args.repeat)]
            sweeps[how] = statistics.median(r.stats["iteration_trace"]["per_device_us"][0]["sweep"]
                                            for r in runs)
            first = runs[-1].values if first is None else first
            assert (runs[-1].values == first).all(), f"{spec} {how}: a different answer"
        base = sweeps["nouts 1"]
        print(f"{spec}: sweep " + ", ".join(f"{k} {v:.1f} us ({v / base:.3f}x)"
                                            for k, v in sweeps.items()), flush=True)


if __name__ == "__main__":
    main()
