"""Direct access (Groute figure 2-1a): a kernel on one device reading or writing memory that lives
on itself, on a peer device, or in pinned host memory, coalesced versus random 4-byte accesses.

Coalesced steps touch every word of an ``access_size`` buffer once, as 16-byte vectors; random
steps make ``access_size / 16`` independent 4-byte accesses at hashed indices, so both move
comparable amounts of useful data. On CPU virtual devices the "kernel" is a NumPy sum / fill /
gather / scatter of the other device's array, run on the executing device's stream.
"""
from __future__ import annotations

from .device_ops import AccessPlan, buffer_on
from .results import BenchResult, record
from .timing import Clock, measure

RANDOM_FRACTION = 16   # random accesses = buffer bytes / RANDOM_FRACTION


def run(ctx, settings, progress) -> BenchResult:
    result = BenchResult("access", "Direct access: kernel on one device reading/writing another's memory")
    if ctx.backend != "cuda":
        result.notes.append("CPU virtual devices: NumPy gathers/scatters of another virtual device's "
                            "array stand in for kernels; the numbers describe this CPU's memory")
    devices = list(ctx.devices)
    words = settings.access_size // 4
    n_random = settings.access_size // RANDOM_FRACTION
    targets = [(d.name, d) for d in devices] + [("host", None)]
    buffers = {name: buffer_on(end, words, devices[0]) for name, end in targets}
    for executor in devices:
        clock = Clock(executor, ctx.timeout)
        try:
            for name, end in targets:
                if end is not None and end is not executor and not executor.can_access_peer(end):
                    # a kernel dereferencing memory it cannot reach would kill the CUDA context
                    result.notes.append(f"{executor.name} cannot access {name} directly; not measured")
                    continue
                for op in AccessPlan.OPS:
                    for pattern in AccessPlan.PATTERNS:
                        plan = AccessPlan(executor, buffers[name], op, pattern, n_access=n_random)

                        def step(start, plan=plan, clock=clock):
                            plan.launch(clock.stream)

                        samples = measure(clock, step, repeat=settings.repeat, warmup=settings.warmup,
                                          gate=True)
                        where = "local" if end is executor else ("host" if end is None else "peer")
                        rec = record("access", f"{op} {pattern}", samples, plan.useful_bytes,
                                     src=executor.name, dst=name, op=op, pattern=pattern, where=where)
                        result.records.append(rec)
                        progress(f"access: {executor.name} {op:5s} {pattern:9s} {where:5s} {name:<7} "
                                 f"{rec['gbps']:8.2f} GB/s")
        finally:
            clock.close()
    return result
