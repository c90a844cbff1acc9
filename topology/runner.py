"""Running a selection of benchmarks, each isolated, into one report.

Each benchmark gets a fresh :class:`groute.Context` from ``make_context`` so that a failure in one
(a stopped context, a failed stream) cannot poison the next: it is recorded with its error, the
others still run, and :func:`run_benchmarks`' caller learns from the statuses that something failed.
"""
from __future__ import annotations

import logging
import time
import traceback

from . import broadcast, direct_access, machine, packetization, push_pull
from .results import BenchmarkSkipped, BenchResult

log = logging.getLogger(__name__)

#: name -> (module with ``run(ctx, settings, progress)``, one-line description), in run order.
BENCHMARKS = {
    "map": (machine, "devices, links, copy bandwidth and latency matrices (host and every device)"),
    "access": (direct_access, "kernel reads/writes of local, peer and host memory, coalesced vs random (fig. 2a)"),
    "packets": (packetization, "packet size sweep: our Link vs raw packet copies vs one copy (fig. 2b)"),
    "pushpull": (push_pull, "direct vs staged through host, host- vs device-initiated (fig. 2c)"),
    "broadcast": (broadcast, "one-to-all: direct, ring, Links; host-managed vs device-initiated (fig. 2d)"),
}


def resolve_names(names) -> list[str]:
    """Expand 'all' and check names (ValueError naming an unknown one); canonical order."""
    wanted = set()
    for name in names or ["all"]:
        if name == "all":
            wanted.update(BENCHMARKS)
        elif name in BENCHMARKS:
            wanted.add(name)
        else:
            raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)} or all")
    return [n for n in BENCHMARKS if n in wanted]


def run_benchmarks(names, make_context, settings, progress=lambda line: None):
    """Run ``names`` in order; returns ``(machine_description, [BenchResult, ...])``."""
    names = resolve_names(names)
    description = None
    results = []
    for name in names:
        module, _ = BENCHMARKS[name]
        t0 = time.perf_counter()
        progress(f"{name}: starting")
        try:
            ctx = make_context()
        except Exception as exc:  # noqa: BLE001 - reported as this benchmark's failure
            results.append(BenchResult(name, module.__doc__.splitlines()[0], status="failed",
                                       error=f"{type(exc).__name__}: {exc}"))
            progress(f"{name}: FAILED to create the context: {exc}")
            continue
        try:
            if description is None:
                description = _describe(ctx)
            res = module.run(ctx, settings, progress)
        except BenchmarkSkipped as exc:
            res = BenchResult(name, module.__doc__.splitlines()[0], status="skipped", error=str(exc))
            progress(f"{name}: skipped: {exc}")
        except Exception as exc:  # noqa: BLE001 - one failing benchmark must not stop the others
            log.debug("benchmark %s failed", name, exc_info=True)
            res = BenchResult(name, module.__doc__.splitlines()[0], status="failed",
                              error=f"{type(exc).__name__}: {exc}")
            res.notes.append(traceback.format_exc(limit=6))
            progress(f"{name}: FAILED: {type(exc).__name__}: {exc}")
        finally:
            ctx.shutdown()
        res.seconds = time.perf_counter() - t0
        if res.status == "ok":
            progress(f"{name}: done in {res.seconds:.1f} s ({len(res.records)} measurements)")
        results.append(res)
    return description, results


def _describe(ctx) -> dict:
    try:
        return machine.describe_machine(ctx)
    except Exception as exc:  # noqa: BLE001 - a missing description must not lose the measurements
        log.info("machine description failed", exc_info=True)
        return {"backend": ctx.backend, "label": machine.backend_label(ctx.backend),
                "device_count": len(ctx.devices), "error": f"{type(exc).__name__}: {exc}"}
