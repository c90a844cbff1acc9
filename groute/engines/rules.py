"""What ``auto`` means, for every app: each decision a table of cases, read by the solver that
decides and by the command line that explains it.

A :class:`Rule` is an ordered list of :class:`Case` s: the first whose facts all hold gives the
choice (the last case holds always). A fact is a name in :data:`FACTS` with the words the help
says it in; the solver supplies what each fact is for its graph and devices as a zero-argument
callable, asked only when a case reaches it (the diameter test samples BFS, so a rule that can
decide without it never runs it). Because the solvers decide by :meth:`Rule.decide` and the CLI
renders :meth:`Rule.help` from the same object, the help cannot say something the code does
not do. Each choice was the fastest measured on its kind of graph and device count; the
figures are in docs/TRAVERSAL.md and docs/PR_CC.md, not here.

This module is data: it imports no app, so every app (and a test) may read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: every fact a rule may ask: how the help says it holds, how it says it does not (``"not NAME"``
#: in a case), and what it means where the words alone do not say it (printed once per help)
FACTS: dict[str, tuple[str, str, str | None]] = {
    "one_device": ("one device", "several devices", None),
    "peer": ("the peer kernels can run", "the peer kernels cannot run",
             "the peer kernels run on CUDA GPUs with NVLink between all of them, unless the host "
             "worklist is asked for (exchange host, or a worklist option given)"),
    "symmetric": ("a symmetric graph", "a directed graph", None),
    "low_diameter": ("a low-diameter graph", "a road-like graph",
                     "low-diameter: a BFS from sampled vertices reaches 2^16 vertices within 16 "
                     "levels"),
    "async": ("async mode", "bsp mode", None),
    "windowed": ("the engine keeps a window", "the engine keeps no window",
                 "async and SSSP's peer kernel keep a window, BSP on the worklist and BFS's "
                 "peer kernel do not"),
    "delta_given": ("delta given", "no delta given", None),
    "linked": ("the linked workers run", "the linked workers do not run",
               "the linked workers: async across GPUs through peer memory"),
    "cuda": ("CUDA devices", "CPU devices", None),
    "inplace": ("in-place sweeps asked for", "Jacobi sweeps", None),
    "heavy_in_arcs": ("a power-law graph", "a graph of small in-degrees",
                      "power-law: most arcs enter vertices of in-degree > 32"),
    "persistent_can_run": ("the persistent kernels can run", "the persistent kernels cannot run",
                           "the persistent kernels: BSP, csc or bins, on CUDA devices with peer "
                           "access and native atomics, device_check on, Jacobi sweeps"),
    "peer_access": ("the devices reach each other's memory",
                    "the devices cannot reach each other's memory", None),
}


@dataclass(frozen=True)
class Case:
    """``choice`` where every fact of ``when`` holds (``()``: always), and why it is the one."""
    when: tuple[str, ...]
    choice: Any
    why: str


@dataclass(frozen=True)
class Rule:
    """What ``option="auto"`` becomes: the first :class:`Case` whose facts hold."""
    option: str
    cases: tuple[Case, ...]

    def __post_init__(self):
        if not self.cases or self.cases[-1].when:
            raise ValueError(f"rule {self.option}: the last case must hold always (when=())")
        for case in self.cases:
            for term in case.when:
                if _fact_name(term) not in FACTS:
                    raise ValueError(f"rule {self.option}: unknown fact {term!r}")

    def decide(self, facts: Mapping[str, Callable[[], bool]]) -> Case:
        """The case that applies, each fact asked at most once and only when a case needs it."""
        known: dict[str, bool] = {}

        def holds(term):
            name = _fact_name(term)
            if name not in known:
                known[name] = bool(facts[name]())
            return known[name] != term.startswith("not ")

        return next(case for case in self.cases if all(holds(t) for t in case.when))

    def facts(self) -> set[str]:
        """The facts the rule may ask."""
        return {_fact_name(t) for case in self.cases for t in case.when}

    def help(self) -> str:
        """The rule in words, first case first, then what its facts mean: what the command line
        prints."""
        if len(self.cases) == 1:
            return f"{shown(self.cases[0].choice)} ({self.cases[0].why})"
        parts = [f"{shown(c.choice)} where {said(c.when)} ({c.why})" for c in self.cases[:-1]]
        last = self.cases[-1]
        text = ("the first that applies: " + "; ".join(parts)
                + f"; otherwise {shown(last.choice)} ({last.why})")
        meanings = [FACTS[name][2] for name in FACTS if name in self.facts() and FACTS[name][2]]
        return text + "".join(f". {m[0].upper()}{m[1:]}" for m in meanings) + "."


def _fact_name(term: str) -> str:
    return term[4:] if term.startswith("not ") else term


def said(when) -> str:
    """The facts of a case in words."""
    return " and ".join(FACTS[_fact_name(t)][int(t.startswith("not "))] for t in when)


def shown(choice) -> str:
    """A choice as the help prints it (booleans as on/off)."""
    if isinstance(choice, bool):
        return "on" if choice else "off"
    return str(choice)


# ------------------------------------------------------------------------------------------------
# BFS and SSSP (groute.apps.traversal)
# ------------------------------------------------------------------------------------------------
#: the exchange ``exchange="auto"`` runs, once the mode is known
TRAVERSAL_EXCHANGE = Rule("exchange", (
    Case(("one_device", "async"), "host",
         "one device's fused worker runs alone: there is nothing to exchange"),
    Case(("not peer",), "host", "the distributed worklist: the host moves the items"),
    Case((), "peer", "one launch per device for the whole run, exchanging through peer memory: "
                     "BSP the level-synchronous peer kernel, async the linked workers"),
))

BFS_RULES = {
    "mode": Rule("mode", (
        Case(("one_device", "not peer"), "async", "one device's fused worker, whatever the "
                                                  "diameter: no diameter test"),
        Case(("peer", "not one_device", "low_diameter"), "bsp",
             "the persistent level-synchronous peer kernel"),
        Case(("peer", "symmetric", "low_diameter"), "bsp",
             "the peer kernel on one device, where it can pull over in-arcs"),
        Case(("peer",), "async", "one device's fused worker; on several the fused workers "
                                 "with device-initiated links"),
        Case(("symmetric", "low_diameter"), "bsp", "the worklist pulls across devices"),
        Case((), "async", "the fused workers on the worklist"),
    )),
    "priority": Rule("priority", (
        Case(("not windowed",), False, "no window to keep"),
        Case(("delta_given",), True, "a window of delta levels"),
        Case(("linked",), False, "their rounds are cheap: re-expanding what a late offer lowers "
                                 "costs less than the window's far-queue splits"),
        Case(("one_device",), False, "the fused worker expands level by level already"),
        Case((), True, "a window of 4 levels keeps a device from running ahead on depths that "
                       "remote updates will still lower"),
    )),
    "exchange": TRAVERSAL_EXCHANGE,
}

SSSP_RULES = {
    "mode": Rule("mode", (
        Case(("not peer",), "async", "the fused workers on the worklist"),
        Case(("low_diameter",), "bsp", "the persistent peer kernel, on any number of devices"),
        Case((), "async", "one device's fused worker; on several the fused workers with "
                          "device-initiated links"),
    )),
    "priority": Rule("priority", (
        Case(("not windowed",), False, "no window to keep"),
        Case(("delta_given",), True, "a window of delta"),
        Case(("low_diameter",), False, "Bellman-Ford rounds converge in a few levels; near-far "
                                       "rounds cost more than the re-expansions they save"),
        Case((), True, "near-far keeps the work near Dijkstra's on road-like graphs (delta: "
                       "mean weight * 64 / mean degree)"),
    )),
    "exchange": TRAVERSAL_EXCHANGE,
}

# ------------------------------------------------------------------------------------------------
# PageRank (groute.apps.pr)
# ------------------------------------------------------------------------------------------------
PR_RULES = {
    "mode": Rule("mode", (
        Case((), "bsp", "faster than async on every graph and device count measured, and it "
                        "stops on a global L1 rule"),
    )),
    "bsp_kernel": Rule("bsp_kernel", (
        Case(("one_device", "inplace"), "csc", "the only in-place kernel"),
        Case(("heavy_in_arcs",), "bins", "the fused pull over vertices relabelled by in-degree "
                                         "with a static task list"),
        Case((), "csc", "the fused pull over the in-arcs, faster on grids, roads and meshes "
                        "than the COO pull pair, which is never picked"),
    )),
    "sweeps": Rule("sweeps", (
        Case(("not cuda",), 2, "vectorised NumPy sweeps"),
        Case(("not one_device", "heavy_in_arcs"), 1,
             "a sweep is costly and a hub's remote sums should go out at once"),
        Case((), 8, "few host round trips"),
    )),
    "persistent": Rule("persistent", (
        Case(("not persistent_can_run",), False, "see stats['persistent_reason']"),
        Case(("one_device",), False, "no cross-device waits to save: the two forms run even"),
        Case((), True, "one launch per run saves the cross-device waits between per-iteration "
                       "launches"),
    )),
}

# ------------------------------------------------------------------------------------------------
# connected components (groute.apps.cc)
# ------------------------------------------------------------------------------------------------
CC_RULES = {
    "rest": Rule("rest", (
        Case(("not peer_access",), "segments", "the edges left after sampling compacted and "
                                               "routed to the devices, Groute's path"),
        Case((), "kernel", "sampling split by rows, parent arrays merged by peer reads, the "
                           "rest linked in place"),
    )),
}

#: every app's rules, by the app's name
RULES = {"bfs": BFS_RULES, "sssp": SSSP_RULES, "pr": PR_RULES, "cc": CC_RULES}
