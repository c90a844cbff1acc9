"""GPU probe: what a closed solver leaves in GPU memory, and whether the garbage collector or
nothing at all gives it back.

A solver whose objects hold each other in a cycle keeps its device arrays after ``close()`` and
``del`` until Python's garbage collector runs, which it does by counting Python objects, not
device bytes: a program that makes solver after solver on large graphs can find the GPU full
meanwhile. And what not even a collection frees grows run after run: a leak (or a cache, which
stays the same size from the second run on). Per app, mode and device count, each of ``--runs``
runs makes a solver on one context, runs it, closes and drops it with the collector off, and
prints CuPy's used bytes over every GPU above the run's start: after the drop, then after a
collection.

    python benchmarks/probes/gpu_memory_after_close.py [--graph kron:16] [--devices 1,2] [--runs 3]
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CASES = [("bfs", "bsp"), ("bfs", "async"), ("sssp", "bsp"), ("sssp", "async"), ("pr", "bsp"),
         ("pr", "async"), ("cc", None), ("kcore", None)]


def used_bytes() -> int:
    """CuPy's default pool's bytes in live arrays, over every GPU."""
    import cupy
    pool = cupy.get_default_memory_pool()
    total = 0
    for i in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(i):
            total += pool.used_bytes()
    return total


def one_run(cls, graph, args, kwargs) -> tuple[int, int, int, list]:
    """Bytes above the start after the solver's drop, after a collection, the objects the
    collection found and the groute classes among them (the cycles to break)."""
    gc.collect()
    base = used_bytes()
    gc.disable()
    try:
        solver = cls(graph, **kwargs)
        result = solver.run(*args)
        if hasattr(solver, "close"):
            solver.close()
        del solver, result
        time.sleep(0.05)    # a device's thread lets go of its last task just after handing it
        dropped = used_bytes() - base
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        cycles = sorted({type(o).__qualname__ for o in gc.garbage
                         if type(o).__module__.startswith("groute")})
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()        # what the saved list kept: its cycles again, now freed
        collected = used_bytes() - base
    finally:
        gc.enable()
    return dropped, collected, found, cycles


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="kron:16")
    ap.add_argument("--devices", default="1,2", help="device counts, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="runs per case (a leak grows in each)")
    opts = ap.parse_args()
    from groute import Context, registry
    from groute.graph import load_graph
    graph = load_graph(opts.graph)
    for k in (int(x) for x in opts.devices.split(",")):
        ctx = Context(k, backend="cuda", timeout=60)
        for app, mode in CASES:
            cls = registry.algorithm_named(app).solver
            args = (0,) if app in ("bfs", "sssp") else ()
            kwargs = {"ctx": ctx} | ({"mode": mode} if mode else {})
            seen = [one_run(cls, graph, args, kwargs) for _ in range(opts.runs)]
            runs = ", ".join(f"{d / 1e6:.2f} / {c / 1e6:.2f} MB ({n} objects"
                             + (f": {' '.join(names)})" if names else ")")
                             for d, c, n, names in seen)
            print(f"{k} GPU(s) {app:5} {mode or '-':5} after the drop / after a collection: "
                  f"{runs}", flush=True)
        ctx.close()


if __name__ == "__main__":
    main()
