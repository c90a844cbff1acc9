"""The asynchronous engine: the BSP engine's partition, state, operators and level loops, and
order-free loops run without levels (:mod:`groute.engines.async_loop`).

Single operator calls (``advance``, ``filter``, ``compute``, ``reduce``), sweeps and rounds
are bulk-synchronous steps, inherited from :class:`~groute.engines.bsp.BSPEngine`: one call is
one step of a level, and nothing inside it waits on another device beyond its own exchange.
What is asynchronous is a whole ``run_loop`` whose caller declared ``order="any"`` (the answer
does not depend on the order of visits: docs/OPERATORS_REFERENCE.md, "Order-free loops") and
that needs no levels: each device runs its worklist a chunk at a time, sends other devices'
targets through the engine's Router as it goes, takes in theirs whenever they arrive, and the
loop ends by counted termination, with no barrier between levels.

Which loops run so is :data:`ASYNC_LOOP_RULE` (a :class:`~groute.engines.rules.Rule`, so the
help says what the code does); a loop it leaves to levels runs as on the BSP engine
(:data:`groute.engines.fused.LOOP_RULE`: fused on one CUDA device, or one launch per device
on several that write into each other's memory, else the operator calls); on such
devices the rule leaves order-free loops to those launches (its case says why).
``stats["loop"]`` names what ran the last loop (``"async"``, ``"fused"``, ``"python"``) and
``stats["loop_why"]`` the case of the rule that decided.
"""
from __future__ import annotations

import numpy as np

from groute.operators.loop import AdvanceStep, LoopResult
from groute.runtime.context import taking_turns
from groute.tuning import AsyncTuning

from .async_loop import AsyncLoop, empty_frontier
from .bsp import BSPEngine, steps_as_run
from .fused import LOOP_CHOICES, LOOP_RULE, decide_loop
from .rules import FACTS, Case, Rule

#: the facts :data:`ASYNC_LOOP_RULE` asks besides the library's (``one_device``)
ASYNC_LOOP_FACTS = {
    **FACTS,
    "order_any": ("the loop declares order='any'", "the loop keeps its levels (order='levels')",
                  "declaring order='any', the caller says that the loop's answer does not depend on "
                  "the order of visits (each visit changes the state monotonically and accepts "
                  "a vertex only when it did; a repeated visit changes nothing)"),
    "numbered": ("the loop numbers, keeps or counts its levels",
                 "the loop neither numbers, keeps nor counts its levels",
                 "numbering, keeping or counting levels: run_loop's level=, keep=True or "
                 "max_levels="),
    "gathers": ("a step gathers", "no step gathers", None),
    "pulls": ("a step pulls", "no step pulls",
              "a pull is an advance with direction='pull'; 'auto' pushes in an async loop"),
    "fused": ("the loop rule runs the loop as one fused launch per device",
              "the loop rule does not fuse the loop on these devices",
              "groute.engines.LOOP_RULE, asked for this loop on this engine's devices"),
}
#: what an :class:`AsyncEngine` runs a ``run_loop`` as: ``"async"``, or ``"levels"`` (as the
#: BSP engine: :data:`groute.engines.fused.LOOP_RULE`)
ASYNC_LOOP_RULE = Rule("loop", (
    Case(("not order_any",), "levels",
         "its answer may depend on the order of levels; declare order='any' where it does not"),
    Case(("numbered",), "levels", "a level number, kept levels or a count of them need levels"),
    Case(("gathers",), "levels", "a gathering step combines a whole level's messages at once"),
    Case(("pulls",), "levels", "a pull reads a whole level's frontier"),
    Case(("one_device",), "levels", "one device has no exchange to overlap; on CUDA its loop "
                                    "is one fused launch"),
    Case(("fused",), "levels",
         "the loop rule runs it as one fused launch per device: a level's meetings cost the "
         "devices microseconds, where every chunk of the async loop costs host steps, "
         "launches, a count read back and the Router's packets"),
    Case((), "async", "each device runs chunks of its own worklist and sends other devices' "
                      "targets through the Router as it goes: no barrier between levels, "
                      "counted termination"),
), ASYNC_LOOP_FACTS)
#: the values an async engine's ``loop`` option takes: the BSP engine's, and ``"async"`` (every
#: loop that can, on one device too; a loop that cannot is an error)
ASYNC_LOOP_CHOICES = LOOP_CHOICES + ("async",)


def loop_facts(steps, *, level, max_levels, keep, order, one_device: bool,
               fused: bool = False) -> dict:
    """The facts of :data:`ASYNC_LOOP_RULE` for one ``run_loop`` (name -> bool)."""
    advances = [s for s in steps if isinstance(s, AdvanceStep)]
    return {"order_any": order == "any",
            "numbered": level is not None or keep or max_levels is not None,
            "gathers": any(s.functor.gather is not None for s in advances),
            "pulls": any(s.direction == "pull" for s in advances),
            "one_device": one_device, "fused": fused}


def decide_async_loop(facts: dict) -> Case:
    """The case of :data:`ASYNC_LOOP_RULE` that applies to ``facts`` (name -> bool)."""
    return ASYNC_LOOP_RULE.decide({name: (lambda value=value: value)
                                   for name, value in facts.items()})


def async_loop_help() -> str:
    """:data:`ASYNC_LOOP_RULE` in words, and what ``levels`` then runs (the BSP engine's
    :data:`~groute.engines.fused.LOOP_RULE`): what a command's help prints.

    Returns
    -------
    str
        Both rules' cases, in order, and why each.

    Examples
    --------
    >>> from groute.engines import async_loop_help
    >>> "order='any'" in async_loop_help()
    True
    """
    return f"{ASYNC_LOOP_RULE.help()} A loop left to levels runs as {LOOP_RULE.help()}"


class AsyncEngine(BSPEngine):
    """See the module docstring. Options as :class:`~groute.engines.bsp.BSPEngine`; ``loop``:
    ``"auto"`` (:data:`ASYNC_LOOP_RULE`), ``"async"`` (insist: a loop the rule leaves to
    levels for any reason but the devices is a ValueError naming it), ``"fused"`` or
    ``"python"`` (never async, as the BSP engine); ``tuning``: an
    :class:`~groute.tuning.AsyncTuning`."""

    name = "async"

    def __init__(self, graph, *, loop: str = "auto", tuning: AsyncTuning | None = None,
                 **options):
        if loop not in ASYNC_LOOP_CHOICES:
            raise ValueError(f"loop must be one of {', '.join(ASYNC_LOOP_CHOICES)}; got "
                             f"{loop!r}")
        self.async_mode = loop
        self._active = None          # the AsyncLoop running now (arrivals wake its devices)
        if getattr(options.get("ctx"), "ranks", None) is not None:
            raise ValueError("the async engine does not run across processes yet (its loops need "
                             "items in flight between devices); use mode='bsp' or 'auto'")
        super().__init__(graph, loop="auto" if loop == "async" else loop,
                         tuning=AsyncTuning.given(tuning),
                         **options)

    def reset_counters(self):
        super().reset_counters()
        self.stats.update(loop_why=None, async_chunks=None, routed_ids=None)

    def _async_case(self, steps, *, level, max_levels, keep, order) -> Case | None:
        """The case of :data:`ASYNC_LOOP_RULE` for this loop (None: the ``loop`` option says
        levels); a ValueError where ``loop="async"`` cannot run it."""
        if self.async_mode in ("fused", "python"):
            return None
        one_device = self.ctx.num_devices == 1
        # on several devices, whether the loop rule would fuse this loop: asked, not derived
        fused = not one_device and decide_loop(self._loop_facts(steps, None, keep))[0] == "fused"
        facts = loop_facts(steps, level=level, max_levels=max_levels, keep=keep, order=order,
                           one_device=one_device, fused=fused)
        if self.async_mode == "async":
            # insisting: whatever the devices, the loop runs without levels if it can
            case = decide_async_loop(dict(facts, one_device=False, fused=False))
            if case.choice != "async":
                raise ValueError(f"run_loop: loop='async' cannot run this loop without levels "
                                 f"({case.why}); make the engine with loop='auto' to run it "
                                 f"level by level")
            return case
        return decide_async_loop(facts)

    @taking_turns
    def run_loop(self, frontier, steps, *, level, start, max_levels, keep, scalars,
                 order="levels"):
        self._check(frontier, "run_loop")
        # as the BSP engine gives them to whatever runs them, before the rules' facts
        steps = steps_as_run(steps, self.directed)
        case = self._async_case(steps, level=level, max_levels=max_levels, keep=keep,
                                order=order)
        if case is None or case.choice != "async":
            result = super().run_loop(frontier, steps, level=level, start=start,
                                      max_levels=max_levels, keep=keep, scalars=scalars)
            self.stats["loop_why"] = case.why if case is not None else f"loop={self.loop!r}"
            return result
        for s in steps:
            if isinstance(s, AdvanceStep) and s.candidates is not None:
                self._check(s.candidates, "run_loop: an AdvanceStep's candidates")
        loop = AsyncLoop(self, steps, scalars, self.tuning.chunk)
        self._active = loop
        try:
            tallies, routed = loop.run(frontier)
        finally:
            self._active = None
        self._count(tallies, routed, case)
        return LoopResult(max(t["chunks"] for t in tallies), empty_frontier(self), None, "async")

    def _make_router(self, policy, name, item_shape=()):
        """The BSP engine's Router, whose arrivals wake the idle devices of whichever async
        loop runs."""
        router = super()._make_router(policy, name, item_shape)
        for output in router.outputs:
            output.add_arrival_listener(self._wake)
        return router

    def _wake(self):
        loop = self._active
        if loop is not None:
            loop.wake()

    def _count(self, tallies, routed, case) -> None:
        stats = self.stats
        stats["loops"] += 1
        stats["loop"], stats["loop_why"] = "async", case.why
        for key in ("computes", "filters", "advances"):
            stats[key] += sum(t[key] for t in tallies)
        stats["exchanged_ids"] += sum(t["sent"] for t in tallies)
        stats["async_chunks"] = [t["chunks"] for t in tallies]
        stats["routed_ids"] = np.asarray(routed).tolist()

    def __repr__(self):
        return (f"<AsyncEngine {self.num_vertices:,} vertices on {self.ctx.num_devices} "
                f"{self.ctx.backend} devices>")
