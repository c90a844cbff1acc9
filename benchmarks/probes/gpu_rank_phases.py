"""Where a run's time goes across ranks (issue 42: ranks against threads on kron:21): each
rank times its collectives (barriers, allgathers, broadcasts), its context's synchronisations,
the cross-device barrier's launch and ends, the timer's start and end, each kernel launch and
each call submitted to a CUDA stream, the wait for the read-back and the reading of each
device's stop around every run of one solver,
beside the run's own ``time_s`` and its wall time; ``--threads`` runs the same solver on the devices of
one process, for the same table without the ranks.

    mpiexec -n 2 python benchmarks/probes/gpu_rank_phases.py --app bfs --graph kron:21
    python benchmarks/probes/gpu_rank_phases.py --app cc --graph kron:21 --threads --devices 2

Each process prints one JSON line: its rank (None with ``--threads``), the medians of
``time_s`` and of the wall time of ``run()``, and per phase its calls and its seconds per run
(a phase inside another counts in both: a barrier inside a synchronisation). A collective that
takes long on one rank is waiting for a later one.

``--trace N`` also prints, for each of the last ``N`` runs, every timed call's start and end
(milliseconds from a meeting of the ranks after the runs, so the ranks' lines share one
clock to within a barrier's spread), with each collective's wait named by what it waits for:
where a rank waits, and for whom.
"""
from __future__ import annotations

import argparse
import collections
import functools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SECONDS = collections.defaultdict(float)
CALLS = collections.Counter()
#: (label, start, end) of every timed call while tracing (``--trace``), else None
TRACE = None


def timed(owner, name: str, label) -> None:
    """Wrap ``owner.name`` so that each call adds its wall time to ``label`` (a text, or a
    function of the call's arguments giving one), and to the trace while one is kept."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            end = time.perf_counter()
            text = label if isinstance(label, str) else label(*args, **kwargs)
            SECONDS[text] += end - start
            CALLS[text] += 1
            if TRACE is not None:
                TRACE.append((text, start, end))
    setattr(owner, name, wrapper)


def instrument() -> None:
    from groute.engines.peer_barrier import CrossDeviceBarrier
    from groute.runtime.context import Context
    from groute.runtime.rank_context import RankContext
    from groute.runtime.ranks import Ranks
    for name in ("barrier", "allgather", "allreduce", "bcast", "allgatherv"):
        timed(Ranks, name, f"ranks.{name}")
    timed(RankContext, "synchronize", "context.synchronize")
    timed(RankContext, "share", "context.share")
    timed(Context, "synchronize", "context.synchronize (one process)")
    timed(CrossDeviceBarrier, "launch_each", "barrier.launch_each")
    timed(CrossDeviceBarrier, "share_ends", "barrier.share_ends")
    timed(Ranks, "_wait", lambda self, request, what, nbytes=0: f"wait: {what}")
    # a run's own host path on each device: the timer, the launches, the read-back's wait and
    # the reading of where each device stopped
    from groute.device.cuda import CUDAEvent, CUDAStream
    from groute.engines import peer_barrier
    from groute.engines.protocol import LaunchStop
    from groute.engines.relax import peer
    from groute.solver import DeviceTimer
    timed(DeviceTimer, "__enter__", "timer: start")
    timed(DeviceTimer, "__exit__", "timer: end")
    timed(peer, "launch_resident", "peer: launch_resident")
    timed(peer_barrier, "launch_kernel", "launch_kernel")
    timed(CUDAEvent, "wait_all", "events: wait_all")
    timed(CUDAStream, "submit", "stream.submit")       # a kernel launch, fill or copy each
    timed(LaunchStop, "read", "LaunchStop.read")
    timed(CrossDeviceBarrier, "finish", "barrier.finish")


def solver_of(app: str, graph, **where):
    import groute.apps.bfs as bfs
    import groute.apps.cc as cc
    import groute.apps.pr as pr
    import groute.apps.sssp as sssp
    if app == "bfs":
        return bfs.BFS(graph, **where), (3,)
    if app == "sssp":
        return sssp.SSSP(graph, **where), (3,)
    if app == "pr":
        return pr.PageRank(graph, **where), ()
    return cc.CC(graph, **where), ()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", choices=("bfs", "sssp", "pr", "cc"), default="bfs")
    ap.add_argument("--graph", default="kron:21")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--threads", action="store_true",
                    help="one process driving --devices devices, no ranks")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--trace", type=int, default=0, metavar="N",
                    help="print every timed call of the last N runs (module docstring)")
    args = ap.parse_args()
    if not 0 <= args.trace <= args.runs:
        ap.error(f"--trace {args.trace}: traces some of the --runs {args.runs} runs (0 to "
                 f"{args.runs})")
    instrument()
    from groute import distributed
    from groute.graph import load_graph
    if args.threads:
        graph, where, ctx, rank = load_graph(args.graph), \
            {"backend": args.backend, "devices": args.devices}, None, None
    else:
        ctx = distributed.Context(backend=args.backend, timeout=120)
        graph, where, rank = distributed.load_graph(args.graph, ctx), {"ctx": ctx}, ctx.rank
    try:
        solver, run_args = solver_of(args.app, graph, **where)
        with solver:
            solver.run(*run_args)                       # compiles, warms the links
            SECONDS.clear()
            CALLS.clear()
            times, walls, runs = [], [], []
            for n in range(args.runs):
                global TRACE
                if n == args.runs - args.trace:
                    TRACE = []
                start = time.perf_counter()
                result = solver.run(*run_args)
                walls.append(time.perf_counter() - start)
                runs.append((start, walls[-1]))
                times.append(result.time_s)
            trace, TRACE = TRACE, None
            if ctx is not None:
                ctx.ranks.barrier("the trace's clock")
            clock = time.perf_counter()
        phases = {label: {"calls_per_run": CALLS[label] / args.runs,
                          "ms_per_run": round(1e3 * SECONDS[label] / args.runs, 4)}
                  for label in sorted(SECONDS)}
        print(json.dumps({"app": args.app, "graph": args.graph, "rank": rank,
                          "threads": bool(args.threads), "runs": args.runs,
                          "time_ms": round(1e3 * statistics.median(times), 4),
                          "wall_ms": round(1e3 * statistics.median(walls), 4),
                          "phases": phases}), flush=True)
        if trace:
            def ms(t):
                return round(1e3 * (t - clock), 3)
            lines = [(start, f"run {ms(start)} .. {ms(start + wall)}")
                     for start, wall in runs[-args.trace:]]
            lines += [(start, f"  {label}: {ms(start)} .. {ms(end)} ({1e3 * (end - start):.3f})")
                      for label, start, end in trace]
            print("\n".join(f"[rank {rank}] {text}" for _, text in sorted(lines)), flush=True)
    finally:
        if ctx is not None:
            ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
