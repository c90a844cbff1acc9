#!/usr/bin/env python
"""Probe: where the time of BFS, SSSP, PageRank and CC goes on one GPU, against the bandwidth
floor (the CSR read once at the measured copy rate), and betweenness' time per source with every
round in one launch and as operator calls.

Per (app, graph): the app's own time (median of ``--repeat`` runs after a warm-up, the mode
``auto`` picks), then a traced run: BFS/SSSP the peer kernel's per-level stamps
(``TraversalTuning.trace``), PageRank the persistent kernel's per-iteration phases
(``PageRankTuning.trace``). One JSON line per case::

    python benchmarks/probes/gpu_where_time_goes.py --graphs kron:21,grid:4900
    python benchmarks/probes/gpu_where_time_goes.py --only bc --bc-sources 64
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_small_probe import med as timed  # noqa: E402  (median ms of the app's own time)


def line(**kw):
    print(json.dumps(kw, default=str), flush=True)


def copy_rate():
    """Bytes per second of a 1 GiB device copy (read + write), median of 5."""
    import cupy
    a = cupy.ones(1 << 28, dtype=cupy.float32)
    b = cupy.empty_like(a)
    ts = []
    for _ in range(6):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        b[...] = a
        e.record()
        e.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(s, e) / 1e3)
    return 2 * a.nbytes / statistics.median(ts[1:])


def summarize_levels(rows):
    """Per-level [A, B, expansion, C] microseconds -> totals and the heaviest levels."""
    if not rows:
        return None
    cols = list(zip(*rows))
    per = [sum(r) for r in rows]
    heavy = sorted(range(len(rows)), key=lambda i: -per[i])[:4]
    light = sorted(per)[: max(1, len(per) // 2)]
    return {"levels": len(rows), "total_us": round(sum(per), 1),
            "A_us": round(sum(cols[0]), 1), "B_us": round(sum(cols[1]), 1),
            "expand_us": round(sum(cols[2]), 1), "C_us": round(sum(cols[3]), 1),
            "median_level_us": round(statistics.median(per), 2),
            "light_half_mean_us": round(sum(light) / len(light), 2),
            "heaviest": {i: rows[i] for i in heavy}}


def traversal(g, app, cls, src, repeat, rate, floor_ms):
    from groute.tuning import TraversalTuning
    with cls(g, backend="cuda", devices=1) as s:
        ms, r = timed(s, repeat, src)
    st = r.stats
    line(graph=g.name, app=app, ms=round(ms, 3), floor_ms=round(floor_ms, 4),
         over_floor=round(ms / floor_ms, 1), mode=st.get("mode"), exchange=st.get("exchange"),
         levels=st.get("bsp_levels") or st.get("levels"), rounds=st.get("rounds"))
    t = dataclasses.replace(TraversalTuning.from_environment(), trace=True)
    with cls(g, backend="cuda", devices=1, mode="bsp", tuning=t) as s:
        ms_t, r = timed(s, max(1, repeat // 3), src)
    tr = r.stats.get("level_trace_us")
    line(graph=g.name, app=app, traced_ms=round(ms_t, 3), exchange=r.stats.get("exchange"),
         trace=summarize_levels(tr[0]) if tr else None)
    # the fixed cost of a run: the same solver from a source it does not expand (BFS: depth
    # limit 0; both: a vertex without out-arcs, where the graph has one)
    import numpy as np
    lonely = np.flatnonzero(np.diff(g.indptr) == 0)
    with cls(g, backend="cuda", devices=1) as s:
        if app == "bfs":
            s.run(src, cutoff=0)
            ts = [s.run(src, cutoff=0).time_s for _ in range(repeat)]
            line(graph=g.name, app=app, fixed="cutoff=0",
                 ms=round(statistics.median(ts) * 1e3, 3))
        if lonely.size:
            ms0, r = timed(s, repeat, int(g.ids[int(lonely[0])]))
            line(graph=g.name, app=app, fixed="source without out-arcs", ms=round(ms0, 3),
                 levels=r.stats.get("bsp_levels") or r.stats.get("levels"))


def pagerank(g, repeat, rate, floor_ms):
    from groute.apps.pr import PageRank
    from groute.tuning import PageRankTuning
    with PageRank(g, backend="cuda", devices=1, weight=None, tol=1e-6 / g.num_vertices,
                  max_iter=1000) as s:
        ms, r = timed(s, repeat)
    st = r.stats
    it = st.get("iterations")
    line(graph=g.name, app="pr", ms=round(ms, 3), floor_ms=round(floor_ms, 4),
         over_floor=round(ms / floor_ms, 1), iterations=it,
         ms_per_iteration=round(ms / it, 4) if it else None, layout=st.get("layout"),
         persistent=st.get("persistent"), bsp_kernel=st.get("bsp_kernel"))
    for pers in (False, True):
        t = dataclasses.replace(PageRankTuning.from_environment(), persistent=pers, trace=pers)
        try:
            with PageRank(g, backend="cuda", devices=1, tuning=t, weight=None,
                          tol=1e-6 / g.num_vertices, max_iter=1000) as s:
                ms2, r = timed(s, max(1, repeat // 2))
            it = r.stats.get("iterations")
            line(graph=g.name, app="pr", persistent=pers, ms=round(ms2, 3), iterations=it,
                 ms_per_iteration=round(ms2 / it, 4) if it else None,
                 iteration_trace=r.stats.get("iteration_trace"))
        except Exception as exc:  # noqa: BLE001
            line(graph=g.name, app="pr", persistent=pers, error=repr(exc)[:300])


def cc(g, repeat, rate, floor_ms):
    from groute.apps.cc import CC
    with CC(g, backend="cuda", devices=1) as s:
        ms, r = timed(s, repeat)
    line(graph=g.name, app="cc", ms=round(ms, 3), floor_ms=round(floor_ms, 4),
         over_floor=round(ms / floor_ms, 1),
         stats={k: v for k, v in r.stats.items() if isinstance(v, (int, float, str))})
    cc_phases(g, repeat)


def cc_phases(g, repeat):
    """CUDA events after each of CC's phases on one device (the host's time between phases
    shows in the phase after it), every kernel launched from the host (``replay=False``: a
    replayed phase calls none of the methods timed here)."""
    import cupy
    from groute.apps.cc import CC
    from groute.tuning import CCTuning
    with CC(g, backend="cuda", devices=1, tuning=CCTuning(replay=False)) as s:
        s.run()
        dev = s.devs[0]
        marks = []

        def wrap(name):
            fn = getattr(dev, name)

            def inner(*a, **k):
                out = fn(*a, **k)
                e = cupy.cuda.Event()
                e.record(dev.stream.raw)
                marks.append((name, e))
                return out
            setattr(dev, name, inner)
        for name in ("reset", "link_round", "compress", "sample_mode", "link_rest"):
            wrap(name)
        rows = []
        for _ in range(repeat):
            marks.clear()
            start = cupy.cuda.Event()
            start.record(dev.stream.raw)
            s.run()
            marks[-1][1].synchronize()
            prev, row = start, []
            for name, e in marks:
                row.append((name, cupy.cuda.get_elapsed_time(prev, e) * 1e3))
                prev = e
            rows.append(row)
    names = [n for n, _ in rows[0]]
    line(graph=g.name, app="cc", phases_us=[[names[i], round(statistics.median(
        r[i][1] for r in rows), 1)] for i in range(len(names))])


def betweenness(spec, sources, repeat):
    """ms per source of ``Betweenness.run`` (the median of ``repeat`` runs after a warm-up) with
    every source's round in one launch (``loop="fused"``) and as operator calls
    (``loop="python"``: a launch or more per step), the scores checked equal."""
    import numpy as np
    from groute.apps.betweenness import Betweenness, sample_sources
    from groute.graph import load_graph
    g = load_graph(spec)
    ids = [g.file_id_of(p) for p in sample_sources(g.num_vertices, sources, 0)]
    scores = {}
    for loop in ("fused", "python"):
        with Betweenness(g, backend="cuda", devices=1, loop=loop) as solver:
            ms, res = timed(solver, repeat, ids)
        scores[loop] = np.asarray(res.values)
        line(graph=spec, app="bc", sources=sources, loop=res.stats.get("loop"),
             rounds=res.stats.get("rounds"), ms_per_source=round(ms / sources, 3),
             levels=res.stats["levels"], max_depth=res.stats["max_depth"])
    equal = bool(np.allclose(scores["fused"], scores["python"], rtol=1e-9, atol=1e-12))
    line(graph=spec, app="bc", fused_equals_python=equal)
    if not equal:
        raise SystemExit("betweenness: the fused rounds' scores differ from the operator calls'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="kron:21,grid:4900")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default="bfs,sssp,pr,cc,bc")
    ap.add_argument("--bc-graph", default="kron:21")
    ap.add_argument("--bc-sources", type=int, default=64)
    a = ap.parse_args()
    import numpy as np
    from groute.apps.bfs import BFS
    from groute.apps.sssp import SSSP
    from groute.graph import load_graph
    only = set(a.only.split(","))
    rate = copy_rate()
    line(copy_GBps=round(rate / 1e9, 1))
    for spec in a.graphs.split(","):
        if not only & {"bfs", "sssp", "pr", "cc"}:
            break
        t0 = time.perf_counter()
        g = load_graph(spec)
        src = int(g.ids[int(np.argmax(np.diff(g.indptr)))])
        csr = 8 * (g.num_vertices + 1) + 4 * g.num_edges
        floor_ms = (csr + 4 * g.num_vertices) / rate * 1e3
        line(graph=spec, vertices=g.num_vertices, arcs=g.num_edges,
             load_s=round(time.perf_counter() - t0, 1))
        for app, fn in (("bfs", lambda: traversal(g, "bfs", BFS, src, a.repeat, rate, floor_ms)),
                        ("pr", lambda: pagerank(g, a.repeat, rate, floor_ms)),
                        ("cc", lambda: cc(g, a.repeat, rate, floor_ms))):
            if app in only:
                try:
                    fn()
                except Exception as exc:  # noqa: BLE001
                    line(graph=spec, app=app, error=repr(exc)[:400])
        if "sssp" in only:
            try:
                gw = load_graph(spec, weighted=True)
                fw = (csr + 4 * gw.num_edges + 4 * g.num_vertices) / rate * 1e3
                traversal(gw, "sssp", SSSP, src, a.repeat, rate, fw)
            except Exception as exc:  # noqa: BLE001
                line(graph=spec, app="sssp", error=repr(exc)[:400])
    if "bc" in only:
        try:
            betweenness(a.bc_graph, a.bc_sources, a.repeat)
        except Exception as exc:  # noqa: BLE001
            import traceback
            line(app="bc", error=traceback.format_exc()[-800:])


if __name__ == "__main__":
    main()
