#!/usr/bin/env python
"""Probe: per-level / per-iteration costs on small graphs, one GPU, over the knobs that set
grid sizes (peer_blocks for BFS/SSSP, bsp_kernel/persistent for PageRank, CC's sampling).
Each case: median of the app's own time_s over --repeat runs; one JSON line per case."""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics


def med(solver, repeat, *args):
    solver.run(*args)
    ts, res = [], None
    for _ in range(repeat):
        res = solver.run(*args)
        ts.append(res.time_s)
    return statistics.median(ts) * 1e3, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default=".graphs/email-Enron.mtx.gz")
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args()
    import numpy as np
    from groute.apps.bfs import BFS
    from groute.apps.cc import CC
    from groute.apps.pr import PageRank
    from groute.apps.sssp import SSSP
    from groute.graph import load_graph
    from groute.tuning import CCTuning, PageRankTuning, TraversalTuning
    for spec in a.graphs.split(","):
        g = load_graph(spec)
        src = int(g.ids[int(np.argmax(np.diff(g.indptr)))])
        def line(**kw):
            print(json.dumps({"graph": spec, **kw}, default=str), flush=True)
        for app, cls in (("bfs", BFS), ("sssp", SSSP)):
            for pb in (None, 528, 264, 132, 66, 33, 16):
                for mode in ("bsp", "async"):
                    if mode == "async" and pb not in (None,):
                        continue
                    try:
                        t = dataclasses.replace(TraversalTuning.from_environment(), peer_blocks=pb)
                        with cls(g, backend="cuda", devices=1, tuning=t, mode=mode) as s:
                            ms, r = med(s, a.repeat, src)
                        st = r.stats
                        line(app=app, mode=mode, peer_blocks=pb, ms=ms, levels=st.get("levels"),
                             rounds=st.get("rounds"), launches=st.get("launches"))
                    except Exception as exc:  # noqa: BLE001
                        line(app=app, mode=mode, peer_blocks=pb, error=repr(exc)[:300])
        for kernel in ("csc", "bins"):
            for pers in (False, True):
                for trace in ((False, True) if pers else (False,)):
                    try:
                        t = dataclasses.replace(PageRankTuning.from_environment(), bsp_kernel=kernel,
                                                persistent=pers, trace=trace)
                        with PageRank(g, backend="cuda", devices=1, tuning=t, weight=None,
                                      tol=1e-6 / g.num_vertices, max_iter=1000) as s:
                            ms, r = med(s, a.repeat)
                        st = r.stats
                        line(app="pr", kernel=kernel, persistent=pers, trace=trace, ms=ms,
                             iterations=st.get("iterations"), tr=str(st.get("iteration_trace"))[:600])
                    except Exception as exc:  # noqa: BLE001
                        line(app="pr", kernel=kernel, persistent=pers, error=repr(exc)[:300])
        for samples, rounds in ((1024, 2), (256, 2), (1024, 1), (1024, 0)):
            try:
                t = dataclasses.replace(CCTuning.from_environment(), num_samples=samples,
                                        sample_rounds=rounds)
                with CC(g, backend="cuda", devices=1, tuning=t) as s:
                    ms, r = med(s, a.repeat)
                line(app="cc", samples=samples, rounds=rounds, ms=ms,
                     stats={k: v for k, v in r.stats.items() if isinstance(v, (int, float, str))})
            except Exception as exc:  # noqa: BLE001
                line(app="cc", samples=samples, rounds=rounds, error=repr(exc)[:300])


if __name__ == "__main__":
    main()
