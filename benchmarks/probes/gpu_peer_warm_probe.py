"""Peer BFS with NVLink asleep and awake (two or more CUDA GPUs; run by hand).

NVLink drops to a low-power state when the GPUs leave it idle for 20-50 ms
(benchmarks/probes/gpu_nvlink_wake_probe.py: the first remote load then takes ~105 us and the
first 2 MB store ~180 us instead of 1.7 and 9 us). ``BFS.run`` on kron:25 spends longer than that on
the host after each traversal (the answer's download and renumbering), so every run starts with
the links asleep. This probe times the traversal alone (``solver.peer.run`` inside a
DeviceTimer) after ``--idle-ms`` of idleness and back to back, with the per-level trace of the
last run of each (``GROUTE_PEER_TRACE=1``). Since the links are woken before every launch
(``groute.engines.peer_barrier``), ``--no-wake`` shows what a run costs without that (woken and not
woken runs alternate, so neither gets the other's warm-up).

    GROUTE_PEER_TRACE=1 python benchmarks/probes/gpu_peer_warm_probe.py --graph kron:25 --devices 2 --repeat 7
"""
from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="kron:25")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--no-wake", action="store_true", help="also time runs without waking the links")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--idle-ms", type=float, default=150.0)
    args = ap.parse_args()
    from groute import Context
    from groute.bench.suite import choose_source
    from groute.graph import load_graph
    g = load_graph(args.graph)
    source, _ = choose_source(g, args.graph)        # the source groute bench takes
    with Context(args.devices, backend="cuda") as ctx:
        run_probe(args, g, source, ctx)


def run_probe(args, g, source, ctx):
    """Idle, then run the peer BFS, with and without the wake-up copy, alternating."""
    from groute.apps.bfs import BFS
    from groute.solver import DeviceTimer
    print(f"{args.graph}: {g.num_vertices:,} vertices, source {source}, {args.devices} GPUs", flush=True)
    from groute.engines import peer_barrier
    wake = peer_barrier.CrossDeviceBarrier.wake_links
    settings = [True, False] if args.no_wake else [True]
    with BFS(g, ctx=ctx, mode="bsp", exchange="peer", partition="contiguous") as solver:
        new = solver.part.to_new_id(source)
        solver.run(source)                          # warm-up (compiles, first touches)
        try:
            for label, idle in (("asleep", args.idle_ms / 1e3), ("awake", 0.0)):
                times = {w: [] for w in settings}
                last = {}
                for _ in range(args.repeat):        # woken and not woken alternate
                    for woken in settings:
                        peer_barrier.CrossDeviceBarrier.wake_links = (
                            wake if woken else (lambda self: None))
                        time.sleep(idle)
                        solver.peer.prepare(new)    # staged outside the timer, as a solver runs
                        with DeviceTimer(ctx) as timer:
                            last[woken] = solver.peer.run()
                        times[woken].append(timer.seconds * 1e3)
                for woken in settings:
                    t = times[woken]
                    print(f"{'woken' if woken else 'not woken':9} {label:6}: median "
                          f"{statistics.median(t):.3f} ms (min {min(t):.3f}, max {max(t):.3f})",
                          flush=True)
                    for d, rows in enumerate(last[woken].get("level_trace_us") or []):
                        print(f"    device {d} [A/B/expand/C us]: "
                              + " ".join("/".join(f"{v:g}" for v in r) for r in rows), flush=True)
        finally:
            peer_barrier.CrossDeviceBarrier.wake_links = wake


if __name__ == "__main__":
    main()
