"""What ``auto`` means: each decision a table of cases, read by the solver that decides and by
the command line that explains it.

A :class:`Rule` is an ordered list of :class:`Case` s: the first whose facts all hold gives the
choice (the last case holds always). A fact is a name in the rule's ``vocabulary`` (by default
:data:`FACTS`, the facts of the library's engines; an app adds its own) with the words the help
says it in; the solver supplies what each fact is for its graph and devices as a zero-argument
callable, asked only when a case reaches it (the diameter test samples BFS, so a rule that can
decide without it never runs it). Because the solvers decide by :meth:`Rule.decide` and the CLI
renders :meth:`Rule.help` from the same object, the help cannot say something the code does
not do. Each choice was the fastest measured on its kind of graph and device count; the
figures are in docs/TRAVERSAL.md and docs/PR_CC.md, not here.

The rules themselves live with what they decide: the relaxation engines' in
:mod:`groute.engines.relax.rules`, the linear iteration engines' (PageRank's and Katz's) in
:mod:`groute.engines.iterate.rules`, the connected components engine's (CC's) in
:mod:`groute.engines.components.rules`; :mod:`groute.apps.auto_rules` gathers every app's by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: every fact the library's rules may ask: how the help says it holds, how it says it does not (``"not NAME"``
#: in a case), and what it means where the words alone do not say it (printed once per help)
FACTS: dict[str, tuple[str, str, str | None]] = {
    "one_device": ("one device", "several devices", None),
    "processes": ("devices in several processes", "devices in one process",
                  "several processes: a context spanning MPI ranks (groute.distributed)"),
    "peer": ("the peer kernels can run", "the peer kernels cannot run",
             "the peer kernels run on CUDA GPUs with NVLink between all of them, unless the host "
             "worklist is asked for (exchange host, or a worklist option given)"),
    "shared_gpus": ("devices sharing a GPU", "a GPU per device",
                    "logical devices of one process, or ranks of a job, on one GPU: kernels of "
                    "several processes take turns on it"),
    "symmetric": ("a symmetric graph", "a directed graph", None),
    "low_diameter": ("a low-diameter graph", "a road-like graph",
                     "low-diameter: a BFS from sampled vertices reaches 2^16 vertices within 16 "
                     "levels"),
    "async": ("async mode", "bsp mode", None),
    "windowed": ("the engine keeps a window", "the engine keeps no window",
                 "async and the peer kernel of weighted relaxations (SSSP's) keep a window, BSP "
                 "on the worklist and the unit-step peer kernel (BFS's) do not"),
    "delta_given": ("delta given", "no delta given", None),
    "linked": ("the linked workers run", "the linked workers do not run",
               "the linked workers: async across GPUs through peer memory"),
    "cuda": ("CUDA devices", "CPU devices", None),
    "peer_access": ("the devices reach each other's memory",
                    "the devices cannot reach each other's memory", None),
    "peer_writes": ("the devices write into each other's memory",
                    "the devices cannot write into each other's memory",
                    "writing into each other's memory: CUDA devices (at most 8), every pair with "
                    "peer access and native atomics (NVLink), or logical devices sharing a GPU"),
}


@dataclass(frozen=True)
class Case:
    """``choice`` where every fact of ``when`` holds (``()``: always), and why it is the one."""
    when: tuple[str, ...]
    choice: Any
    why: str


@dataclass(frozen=True)
class Rule:
    """What ``option="auto"`` becomes: the first :class:`Case` whose facts hold. ``vocabulary``:
    the facts its cases may name, with their words (:data:`FACTS` and an app's own)."""
    option: str
    cases: tuple[Case, ...]
    vocabulary: Mapping[str, tuple[str, str, str | None]] = field(
        default_factory=lambda: FACTS, repr=False, compare=False)

    def __post_init__(self):
        if not self.cases or self.cases[-1].when:
            raise ValueError(f"rule {self.option}: the last case must hold always (when=())")
        for case in self.cases:
            for term in case.when:
                if _fact_name(term) not in self.vocabulary:
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
        parts = [f"{shown(c.choice)} where {said(c.when, self.vocabulary)} ({c.why})"
                 for c in self.cases[:-1]]
        last = self.cases[-1]
        text = ("the first that applies: " + "; ".join(parts)
                + f"; otherwise {shown(last.choice)} ({last.why})")
        words = self.vocabulary
        meanings = [words[name][2] for name in words if name in self.facts() and words[name][2]]
        return text + "".join(f". {m[0].upper()}{m[1:]}" for m in meanings) + "."


def _fact_name(term: str) -> str:
    return term[4:] if term.startswith("not ") else term


def said(when, vocabulary=FACTS) -> str:
    """The facts of a case in words (``vocabulary``: as the rule's)."""
    return " and ".join(vocabulary[_fact_name(t)][int(t.startswith("not "))] for t in when)


def shown(choice) -> str:
    """A choice as the help prints it (booleans as on/off)."""
    if isinstance(choice, bool):
        return "on" if choice else "off"
    return str(choice)
