#!/usr/bin/env python
"""Probe: the asynchronous push's two rules (``PageRankTuning.push_rule``: ``uniform``, one
threshold for every vertex; ``degree``, a threshold proportional to the out-degree) against
BSP, on each graph and device count.

For each graph and device count: PageRank BSP (the default kernel), then ``mode="async"``
under each rule (the persistent push kernel where it runs: ``persistent`` says), each solver
built once, one warm-up run, then the median of ``--repeat`` runs' own ``time_s`` (CUDA
events on one GPU, a synchronised clock on several), with the push's rounds, vertices and arcs
pushed (summed over the devices; arcs also per arc of the graph), the entries sent between
devices, and the L1 distance of each answer to BSP's. PageRank's ``tol`` is the bench's (an L1
change of 1e-6 of the mass, ``1e-6 / n`` per vertex). One line per case, and with ``--json
FILE`` the cases as a JSON list.

On one H200 and on four (``nvidia-h200`` / ``nvidia-h200-x4``):

    python benchmarks/probes/gpu_push_rule_probe.py --graphs kron:21,grid:1000,kron:25 \\
        --devices 1,4 --repeat 5 --json $OUT/push_rule.json

``--backend cpu --graphs kron:10,grid:30 --devices 1,2 --repeat 1`` runs it on CPU virtual
devices (a harness check: the host-driven push, no kernel).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time


def timed(solver, repeat: int):
    """One warm-up run, then ``repeat`` runs: (median ms of their ``time_s``, the last
    result)."""
    solver.run()
    times, res = [], None
    for _ in range(repeat):
        res = solver.run()
        times.append(res.time_s)
    return statistics.median(times) * 1e3, res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="kron:21,grid:1000,kron:25")
    ap.add_argument("--devices", default="1", help="device counts, e.g. 1,4")
    ap.add_argument("--rules", default="uniform,degree")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--partition", default="contiguous")
    ap.add_argument("--check-every", type=int, default=None,
                    help="rounds between the persistent push kernel's decisions (default: its own)")
    ap.add_argument("--json", metavar="FILE", help="write the cases as a JSON list")
    args = ap.parse_args(argv)
    import numpy as np

    from groute.apps.pr import PageRank
    from groute.graph import load_graph
    from groute.tuning import PageRankTuning

    cases = []

    def say(case):
        cases.append(case)
        print(json.dumps(case), flush=True)

    for spec in args.graphs.split(","):
        t0 = time.perf_counter()
        g = load_graph(spec)
        m = int(g.num_edges)
        print(f"== {spec}: {g.num_vertices:,} vertices, {m:,} arcs "
              f"({time.perf_counter() - t0:.1f} s to load)", flush=True)
        opts = dict(backend=args.backend, weight=None, tol=1e-6 / max(g.num_vertices, 1),
                    max_iter=1000, partition=args.partition)
        for k in (int(x) for x in args.devices.split(",")):
            base = {"graph": spec, "devices": k}
            try:
                with PageRank(g, devices=k, mode="bsp", **opts) as s:
                    bsp_ms, bsp = timed(s, args.repeat)
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                say({**base, "mode": "bsp", "error": repr(exc)[:300]})
                continue
            say({**base, "mode": "bsp", "ms": round(bsp_ms, 3),
                 "iterations": bsp.stats["iterations"], "kernel": bsp.stats["kernel"],
                 "persistent": bsp.stats["persistent"]})
            for rule in args.rules.split(","):
                tuning = PageRankTuning.from_environment()
                tuning = dataclasses.replace(tuning, push_rule=rule,
                                             check_every=args.check_every or tuning.check_every)
                try:
                    with PageRank(g, devices=k, mode="async", tuning=tuning, **opts) as s:
                        ms, res = timed(s, args.repeat)
                except Exception as exc:  # noqa: BLE001
                    say({**base, "mode": "async", "push_rule": rule, "error": repr(exc)[:300]})
                    continue
                st = res.stats
                arcs = sum(st["arcs_pushed_per_device"])
                say({**base, "mode": "async", "push_rule": st["push_rule"],
                     "persistent": st["persistent"], "ms": round(ms, 3),
                     "vs_bsp": round(ms / bsp_ms, 2), "rounds": max(st["rounds"]),
                     "vertices_pushed": sum(st["vertices_pushed_per_device"]),
                     "arcs_pushed": arcs, "arcs_per_arc": round(arcs / max(m, 1), 2),
                     "sent": sum((st["items_sent"] or {}).values()), "eps": st["eps"],
                     "l1_to_bsp": float(np.abs(res.values - bsp.values).sum())})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
