"""How many devices ``devices="auto"`` (every algorithm's default) runs on: one data-driven
rule, read by the solvers and printed by the command line's help.

Several GPUs pay only where a run's work outweighs what a run on several costs besides: a launch
per device, a cross-device meeting per level or iteration, the exchange. Below an engine's
break-even (:data:`BREAK_EVEN_ARCS`, the smallest graph on which every GPU of the machine was
measured faster than one, in the tables of docs/PERFORMANCE.md) one GPU is faster, so the
default stays on one; a graph that does not fit one GPU runs on all of them. CPU virtual
devices share the host's cores, so one is fastest there and several are a testing mode. An
explicit ``devices=K`` (or a list, or a ``ctx``) is always honoured.
"""
from __future__ import annotations

from dataclasses import dataclass

from .rules import FACTS, Case, Rule, said

#: the engines' break-even: the fewest arcs from which the default runs on every GPU (None:
#: never by default, only when the graph does not fit one GPU)
BREAK_EVEN_ARCS = {
    "relax": 1_000_000_000,          # BFS, SSSP (the relaxation engines)
    "iterate": 16_000_000,           # PageRank, Katz (the linear iteration engines)
    "components": 1_000_000_000,     # connected components
    "operators": None,               # k-core, SCC, betweenness ... (the operator API's engines)
}

#: each family's memory estimate of one device's share, ``(module, function)``: what the rule's
#: "does not fit one GPU" asks when the caller gives none (None: the family has no estimate, so
#: its rule has no such case)
FAMILY_ESTIMATES = {
    "relax": ("groute.engines.relax.memory", "traversal_bytes"),
    "iterate": ("groute.engines.iterate.memory", "iteration_bytes"),
    "components": ("groute.engines.components.memory", "components_bytes"),
    "operators": None,
}

#: what each engine family runs, as the help names it
FAMILY_NAMES = {"relax": "BFS and SSSP", "iterate": "PageRank and Katz",
                "components": "connected components", "operators": "the operator-API algorithms"}


def summary() -> str:
    """Every family's rule in one sentence (what ``--devices`` prints)."""
    sizes = "; ".join(f"{FAMILY_NAMES[f]} from {a:,} arcs" if a else
                      f"{FAMILY_NAMES[f]} never" for f, a in BREAK_EVEN_ARCS.items())
    estimated = ", ".join(FAMILY_NAMES[f] for f, e in FAMILY_ESTIMATES.items() if e)
    return (f"every GPU where several were measured faster ({sizes}), or, for {estimated}, "
            f"where the graph does not fit one GPU; else one GPU; one CPU virtual device")


def devices_rule(engine: str) -> Rule:
    """The ``devices`` rule of an engine family (a key of :data:`BREAK_EVEN_ARCS`)."""
    arcs = BREAK_EVEN_ARCS[engine]
    vocabulary = {
        "cuda": FACTS["cuda"],
        "several_gpus": ("the machine has several GPUs", "the machine has one GPU", None),
        "fits_one": ("the graph fits one GPU", "the graph does not fit one GPU",
                     "fitting one GPU: the solver's memory estimate for one device is below its "
                     "free memory"),
        "pays": (f"the graph has {arcs:,} arcs or more" if arcs else "never",
                 f"the graph has fewer than {arcs:,} arcs" if arcs else "always", None),
    }
    cases = [
        Case(("not cuda",), 1, "several CPU virtual devices share the host's cores: a testing "
                               "mode, asked for with devices=K"),
        Case(("not several_gpus",), 1, "nothing to split over"),
    ]
    if FAMILY_ESTIMATES[engine] is not None:
        cases.append(Case(("not fits_one",), "all", "several GPUs hold what one cannot"))
    if arcs is not None:
        cases.append(Case(("pays",), "all", "measured faster on every GPU there"))
        cases.append(Case((), 1, "one GPU is faster: a run on several pays a launch per device "
                                 "and cross-device meetings that a smaller graph does not "
                                 "amortise"))
    else:
        cases.append(Case((), 1, "no graph that fits one GPU was measured faster on several"))
    return Rule("devices", tuple(cases), vocabulary=vocabulary)


@dataclass(frozen=True)
class DeviceChoice:
    """What a solver's ``devices`` became: ``devices`` for the context (a count, a list, or
    None for a given ``ctx``) and why, as the command line and ``groute bench`` print it."""

    devices: object
    why: str


def choose_devices(devices, *, ctx=None, backend: str = "auto", engine: str, num_vertices: int,
                   num_arcs: int, directed: bool = False, estimate=None,
                   weighted: bool = False) -> DeviceChoice:
    """The devices a solver of ``engine`` (a key of :data:`BREAK_EVEN_ARCS`) runs a graph of
    ``num_vertices`` vertices and ``num_arcs`` arcs on.

    Parameters
    ----------
    devices : "auto", None, int or list of int
        As the user gave it: ``"auto"`` or None asks the rule; anything else is checked
        (:func:`groute.runtime.context.requested_devices`) and honoured.
    ctx : Context, optional
        A context the user gave: its devices are used and ``devices`` is ignored.
    backend : str
        ``auto``, ``cuda`` or ``cpu``.
    engine : str
        The engine family whose break-even applies.
    num_vertices, num_arcs : int
        The graph's size (an arc count against the break-even, and the estimate's input).
    directed : bool
        Whether the graph is directed (for the estimate).
    estimate : callable, optional
        The solver's memory estimate ``estimate(n, m, *, weighted, directed, devices)``
        (default: its family's, :data:`FAMILY_ESTIMATES`).
    weighted : bool
        Whether the solver reads weights (for the estimate).

    Returns
    -------
    DeviceChoice
        The ``devices`` to open the context with, and why.
    """
    from groute.runtime.context import checked_context, requested_devices, resolve_backend
    if checked_context(ctx) is not None:
        return DeviceChoice(None, f"the given context's {ctx.num_devices}")
    devices = requested_devices(devices)
    if devices is not None:
        return DeviceChoice(devices, "as asked")
    from groute.device import cuda_device_count

    if estimate is None and FAMILY_ESTIMATES[engine] is not None:
        import importlib
        module, name = FAMILY_ESTIMATES[engine]
        estimate = getattr(importlib.import_module(module), name)
    resolved = resolve_backend(backend)
    gpus = cuda_device_count() if resolved == "cuda" else 0
    n, m = int(num_vertices), int(num_arcs)
    facts = {
        "cuda": lambda: resolved == "cuda",
        "several_gpus": lambda: gpus > 1,
        "fits_one": lambda: _fits_one(estimate, n, m, weighted, bool(directed)),
        "pays": lambda: BREAK_EVEN_ARCS[engine] is not None and m >= BREAK_EVEN_ARCS[engine],
    }
    case = devices_rule(engine).decide(facts)
    count = gpus if case.choice == "all" else 1
    count = max(1, min(count, max(n, 1)))
    unit = "GPU" if resolved == "cuda" else "CPU device"
    rule = devices_rule(engine)
    where = said(case.when, rule.vocabulary) if case.when else "otherwise"
    return DeviceChoice(count, f"auto: {count} {unit}{'s' if count > 1 else ''} ({where}: "
                               f"{case.why})")


def _fits_one(estimate, n, m, weighted, directed) -> bool:
    """The solver's estimate for one device is below GPU 0's free memory (True without an
    estimate)."""
    if estimate is None:
        return True
    from groute.memory import free_gpu_bytes
    free = free_gpu_bytes(0)
    if free is None:
        return True
    return estimate(n, m, weighted=weighted, directed=directed, devices=1).total <= free
