"""Diagnose the accuracy of asynchronous PageRank on several devices (device tool script).

For each graph: a reference (BSP on one device, tight tol), then async runs on 1..k devices
under several settings (packet size, sweeps). Prints per run: the L1 error of the normalised
ranks, the unnormalised mass (rank + residual summed), the largest final residual against eps,
items sent, and the error split by owning device and by in-degree class. Not a test: run it by
hand, e.g. ``python benchmarks/probes/gpu_pr_async_probe.py --graphs kron:23 --devices 1,2``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--graphs", default="kron:21")
    ap.add_argument("--devices", default="1,2")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--packets", default="default,16777216",
                    help="worklist packet sizes to try on several devices ('default' = the solver's)")
    ap.add_argument("--sweeps", default="default")
    ap.add_argument("--partition", default="contiguous")
    ap.add_argument("--audit", action="store_true",
                    help="sum the values each device packs and each applies (host syncs: slow)")
    args = ap.parse_args(argv)
    import groute.worklist as gw
    from groute.apps.pr import PageRank
    from groute.tuning import PageRankTuning
    from groute.graph.load import load_graph

    orig = gw.DistributedWorklist.__init__
    chosen = {"packet": None}

    def patched(self, ctx, packet_size=None, **kw):
        return orig(self, ctx, packet_size=chosen["packet"] or packet_size, **kw)
    gw.DistributedWorklist.__init__ = patched
    audit = {"packed": 0.0, "applied": 0.0, "items_packed": 0, "items_applied": 0}
    if args.audit:
        install_audit(audit)

    for spec in args.graphs.split(","):
        t0 = time.perf_counter()
        g = load_graph(spec, backend=args.backend)
        print(f"== {spec}: {g.num_vertices} vertices, {g.num_edges} arcs ({time.perf_counter() - t0:.1f} s)",
              flush=True)
        with PageRank(g, devices=1, backend=args.backend, mode="bsp", weight=None,
                      tol=1e-10 / g.num_vertices, max_iter=400) as s:
            ref = np.asarray(s.run().values, np.float64)
        indeg = np.bincount(np.asarray(g.indices), minlength=g.num_vertices)
        classes = [("in=0", indeg == 0), ("in 1-32", (indeg >= 1) & (indeg <= 32)),
                   ("in 33-4096", (indeg > 32) & (indeg <= 4096)), ("in>4096", indeg > 4096)]
        for k in (int(x) for x in args.devices.split(",")):
            packets = ["default"] if k == 1 else args.packets.split(",")
            for packet in packets:
                for sweeps in args.sweeps.split(","):
                    chosen["packet"] = None if packet == "default" else int(packet)
                    kw = {} if sweeps == "default" else {"sweeps": int(sweeps)}
                    with PageRank(g, devices=k, backend=args.backend, mode="async",
                                  partition=args.partition, tuning=PageRankTuning(**kw),
                                  weight=None, tol=1e-6 / g.num_vertices, max_iter=1000) as s:
                        for rep in range(2):
                            t1 = time.perf_counter()
                            res = s.run()
                            dt = time.perf_counter() - t1
                            vals = np.asarray(res.values, np.float64)
                            err = np.abs(vals - ref)
                            mass = sum(float(d.device.to_host(d.push_answer()).sum())
                                       for d in s.devs)
                            rmax = max(float(d.device.to_host(d.residual).max()) if d.n_local else 0.0
                                       for d in s.devs)
                            eps = res.stats.get("eps")
                            owner = (np.zeros(g.num_vertices, np.int64) if s.partition is None
                                     else np.asarray(s.partition.owner, np.int64))
                            by_dev = [float(err[owner == i].sum()) for i in range(k)]
                            by_cls = {name: float(err[m].sum()) for name, m in classes}
                            print(f"k={k} packet={packet} sweeps={sweeps} rep={rep}: L1 {err.sum():.3e} "
                                  f"Linf {err.max():.3e} mass {mass:.9f} max residual {rmax:.3e} "
                                  f"(eps {eps:.3e}) {dt * 1e3:.0f} ms items {res.stats.get('items_sent')} "
                                  f"rounds {res.stats.get('rounds')}", flush=True)
                            if args.audit:
                                left = sum(float(d.device.to_host(d.remote_acc).astype(np.float64).sum())
                                           for d in s.devs)
                                print(f"    audit: packed {audit['packed']:.9e} in {audit['items_packed']} items, "
                                      f"applied {audit['applied']:.9e} in {audit['items_applied']} items, "
                                      f"left in remote accumulators {left:.3e}", flush=True)
                                audit.update(packed=0.0, applied=0.0, items_packed=0, items_applied=0)
                            print(f"    error by owner {['%.2e' % x for x in by_dev]} by in-degree "
                                  f"{ {a: '%.2e' % b for a, b in by_cls.items()} }", flush=True)
                            worst = np.argsort(err)[-5:][::-1]
                            print("    worst vertices", [(int(v), int(indeg[v]), int(owner[v]),
                                                         '%.3e' % ref[v], '%.3e' % vals[v]) for v in worst],
                                  flush=True)


def install_audit(audit):
    """Wrap the async worker's pack and apply so that every item value is summed (float64)."""
    import threading

    import groute.engines.iterate.device as pr_device
    from groute.worklist import call_on_stream, unpack
    lock = threading.Lock()
    pack, apply = pr_device.IterationDevice.pack, pr_device.IterationDevice.apply

    def total(dev, arrays):
        xp = dev.device.xp

        def fn():
            s, m = 0.0, 0
            for a in arrays:
                if a is not None and a.shape[0]:
                    vals = unpack(a, "float", xp)[1]
                    s += float(vals.astype(xp.float64).sum())
                    m += int(a.shape[0])
            return s, m
        return call_on_stream(dev.stream, fn)

    def audited_pack(self, ranges):
        out = pack(self, ranges)
        s, m = total(self, out)
        with lock:
            audit["packed"] += s
            audit["items_packed"] += m
        return out

    def audited_apply(self, item_arrays):
        s, m = total(self, item_arrays)
        with lock:
            audit["applied"] += s
            audit["items_applied"] += m
        return apply(self, item_arrays)
    pr_device.IterationDevice.pack, pr_device.IterationDevice.apply = audited_pack, audited_apply


if __name__ == "__main__":
    main()
