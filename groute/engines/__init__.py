"""The engines: how an algorithm written on :mod:`groute.operators` runs across devices.

- :class:`Engine` (``base.py``): the interface (state, frontiers, the operators, close), and
  :class:`EngineSolver`, what a solver holding one shares (close, ``with``, ``ctx``).
- :class:`BSPEngine` (``bsp.py``): host-driven bulk-synchronous; each operator is one step on
  every device's host thread, arcs to another device's vertices travel to their owner through a
  :class:`~groute.Router` with the ``by_owner`` policy, and the host stops when no device has
  work (the frontier's counts). Tuned by :class:`groute.tuning.BSPTuning`.

- :class:`AsyncEngine` (``async_engine.py``): the BSP engine, with every loop its caller
  declared order-free (``run_loop(..., order="any")``) and that needs no levels run without
  them: each device works through its own worklist in chunks, sends other devices' targets
  through the Router as it goes, and the loop ends by counted termination
  (``async_loop.py``). Which loops run so is :data:`ASYNC_LOOP_RULE`. Tuned by
  :class:`groute.tuning.AsyncTuning`.

A loop of steps (:func:`groute.operators.run_loop`) runs on every engine; which implementation
runs it is :data:`LOOP_RULE` (``fused.py``: one persistent launch on one CUDA device;
``fused_multi.py``: one per device, all at once, on several CUDA devices that write into each
other's memory; else the operator calls), and on the async engine first
:data:`ASYNC_LOOP_RULE`, reported in
``stats["loop"]``.

``make_engine(graph, mode="auto", ...)`` builds one by name (:data:`ENGINES`) over any graph
input the algorithms take; ``"auto"`` by :data:`ENGINE_RULE`. An engine cannot know the algorithm it will run, so ``auto`` does not
guess it: it picks the async engine wherever there is more than one device, and that engine
decides per loop.

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

from .async_engine import ASYNC_LOOP_RULE, AsyncEngine, async_loop_help
from .base import Engine, EngineSolver
from .bsp import BSPEngine
from .components import ComponentsSolver
from .engine_rule import ENGINE_CHOICES, ENGINE_RULE, choose_engine, engine_rule_help
from .fused import LOOP_RULE, loop_rule_help
from .iterate import FixedPoint, IterateSolver, LinearIteration
from .relax import Relaxation, RelaxSolver, value_add, value_inf

#: name -> engine class
ENGINES = {"bsp": BSPEngine, "async": AsyncEngine}


def make_engine(graph, mode: str = "auto", **options) -> Engine:
    """The engine over ``graph`` that ``mode`` names (:data:`ENGINES`), or with ``"auto"`` the
    one :data:`ENGINE_RULE` picks for the devices ``options`` ask for.

    Parameters
    ----------
    graph : graph input
        What every algorithm takes: a NetworkX graph, a scipy sparse matrix, ``(src, dst)``
        edge arrays, a file, a graph spec or a :class:`~groute.graph.CSRGraph`
        (:func:`groute.graph.load_graph`); the engine's frontiers take its ids.
    mode : {"auto", "bsp", "async"}, optional
        The engine, as the algorithms' ``mode`` chooses it.
    **options
        How it runs, as that engine's constructor: ``ctx``, ``devices``, ``backend``,
        ``timeout``, ``partition``, ``seed``, ``loop``, ``tuning``.

    Returns
    -------
    Engine
        A :class:`BSPEngine` or :class:`AsyncEngine`; close it (or use ``with``).

    Raises
    ------
    TypeError
        An option no engine takes, naming ``make_engine`` and the closest one.
    ValueError
        An unknown ``mode``.

    Examples
    --------
    >>> import networkx as nx
    >>> from groute.engines import make_engine
    >>> G = nx.Graph([("a", "b"), ("b", "c")])
    >>> with make_engine(G, backend="cpu", devices=1) as engine:
    ...     len(engine.frontier(["a", "c"]))
    2
    """
    from groute.graph import CSRGraph, load_graph
    from groute.keywords import check_keywords, solver_options
    check_keywords(make_engine, options, set().union(*map(solver_options, ENGINES.values())))
    if not isinstance(graph, CSRGraph):
        graph = load_graph(graph)
    if mode == "auto":
        mode = choose_engine(graph, options).choice
    try:
        cls = ENGINES[mode]
    except KeyError:
        raise ValueError(f"mode must be one of {', '.join(ENGINE_CHOICES)}; got "
                         f"{mode!r}") from None
    return cls(graph, **options)


__all__ = ["Engine", "EngineSolver", "BSPEngine", "AsyncEngine", "ENGINES", "ENGINE_CHOICES", "make_engine",
           "ENGINE_RULE", "engine_rule_help", "LOOP_RULE", "loop_rule_help",
           "ASYNC_LOOP_RULE", "async_loop_help", "Relaxation", "RelaxSolver", "value_add",
           "value_inf", "LinearIteration", "FixedPoint", "IterateSolver", "ComponentsSolver"]
