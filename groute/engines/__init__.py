"""The engines: how an algorithm written on :mod:`groute.operators` runs across devices.

- :class:`Engine` (``base.py``): the interface (state, frontiers, the operators, close), and
  :class:`EngineSolver`, what a solver holding one shares (close, ``with``, ``ctx``).
- :class:`BSPEngine` (``bsp.py``): host-driven bulk-synchronous; each operator is one step on
  every device's host thread, arcs to another device's vertices travel to their owner through a
  :class:`~groute.Router` with the ``by_owner`` policy, and the host stops when no device has
  work (the frontier's counts). Tuned by :class:`groute.tuning.BSPTuning`.

A loop of steps (:func:`groute.operators.run_loop`) runs on every engine; which implementation
runs it is :data:`LOOP_RULE` (``fused.py``: one persistent launch on one CUDA device, else the
operator calls), reported in ``stats["loop"]``.

``make_engine(graph, engine="bsp", ...)`` builds one by name (:data:`ENGINES`).

The relaxation engines (:mod:`groute.engines.relax`) are a family of their own: an algorithm
that is a monotone min-relaxation (BFS, SSSP) gives a :class:`Relaxation` (what an arc offers,
in CUDA and NumPy) to a :class:`RelaxSolver`, which runs it on fused per-device workers, the
persistent peer kernels or the linked workers; :func:`value_add` and :func:`value_inf` are the
value arithmetic of its NumPy side. The linear iteration engines (:mod:`groute.engines.iterate`)
are another: an algorithm that is a linear fixed point ``y = base + alpha A^T (scale * y)``
(PageRank, Katz centrality) gives a :class:`LinearIteration` (what an out-arc carries, in CUDA
and NumPy, and the stopping rule's measure) to an :class:`IterateSolver`, which runs it by BSP
pull sweeps or asynchronous residual push. The connected components engine
(:mod:`groute.engines.components`) is a third, for one algorithm: :class:`ComponentsSolver` finds
weak components by union-find on a parent array per device (Afforest's sampling, then the rest
in place or routed as segments). The ``auto`` rules every solver decides by are
:mod:`groute.engines.rules`.
"""
from __future__ import annotations

from .base import Engine, EngineSolver
from .bsp import BSPEngine
from .components import ComponentsSolver
from .fused import LOOP_RULE, loop_rule_help
from .iterate import IterateSolver, LinearIteration
from .relax import Relaxation, RelaxSolver, value_add, value_inf

#: name -> engine class
ENGINES = {"bsp": BSPEngine}


def make_engine(graph, engine: str = "bsp", **options) -> Engine:
    """The engine called ``engine`` over ``graph`` (a :class:`~groute.graph.CSRGraph`);
    ``options`` as that engine's constructor (``ctx``, ``devices``, ``backend``,
    ``partition``, ...)."""
    try:
        cls = ENGINES[engine]
    except KeyError:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}") from None
    return cls(graph, **options)


__all__ = ["Engine", "EngineSolver", "BSPEngine", "ENGINES", "make_engine", "LOOP_RULE",
           "loop_rule_help", "Relaxation", "RelaxSolver", "value_add", "value_inf",
           "LinearIteration", "IterateSolver", "ComponentsSolver"]
