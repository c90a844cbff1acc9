"""The operator layer of the graph programming model.

The public API (:data:`__all__`), what an algorithm is written with:

- :class:`Functor`: one step on a vertex, as a CUDA C body and a vectorised NumPy callable,
  reading and writing state by name, the :class:`Message` an arc step carries from its
  source, and the :class:`Gather` that makes it combine a candidate's messages before its body
  runs once (a pull without atomics) (:mod:`groute.operators.functor`);
- :class:`Frontier` (one :class:`DeviceFrontier` per device: a sparse queue or a dense bitmap
  with its count, converting between them; :mod:`groute.operators.frontier`);
- :func:`advance` (push, pull, or ``"auto"``: Beamer's rule, :mod:`groute.operators.direction`;
  over out-arcs or in-arcs),
  :func:`filter`, :func:`compute`, and :func:`reduce` (a sum, min or max of state over a
  frontier, for the host's decisions) (:mod:`groute.operators.api`);
- :func:`run_loop`: a whole ``while frontier:`` loop of steps (:class:`ComputeStep`,
  :class:`FilterStep`, :class:`AdvanceStep`) in one call, which an engine may run without the
  host between levels (one persistent launch on one CUDA device), returning a
  :class:`LoopResult` (and, kept, the :class:`Levels`); :func:`sweep`: steps over kept levels
  (:mod:`groute.operators.loop`);
- :func:`subdivided`: the graph with a vertex on every arc, where values on arcs (weights,
  scores per edge) are vertex state, :func:`arc_values` (an input's as float64), and
  :data:`DISTANCE`, shortest paths by length on it (:mod:`groute.operators.arc_vertices`);
- :func:`run_rounds`: the same body of :class:`Loop`, :class:`Sweep` and :class:`Compute`
  items once per seed (nested loops), which an engine may run in one launch, returning a
  :class:`RoundsResult` (:mod:`groute.operators.rounds`);
- :class:`Intersection`: every device's copy of a graph's sorted rows, intersected: triangles
  by the forward algorithm, the neighbours pairs of vertices share, k-truss peeling rounds,
  reciprocated arcs (:mod:`groute.operators.intersect`).
- :mod:`~groute.operators.keyed`: reductions by key (per vertex over its arcs grouped by the
  neighbours' keys, per key over the vertices; tables of keys on every device), what community
  detection is made of.

The engines (:mod:`groute.engines`) run them across devices. ``docs/OPERATORS.md`` is the
tutorial (a first algorithm, k-core), ``docs/OPERATORS_REFERENCE.md`` the reference.

Device code, shared by these operators and by every kernel of the apps: the ``.cuh`` headers in
this folder (``groute.kernels`` puts it on every module's include path);
docs/OPERATORS_REFERENCE.md says what each provides. ``values.cuh`` (values, ``value_add``,
items), ``appends.cuh`` (warp-aggregated reservations), ``frontier.cuh`` (queue and bitmap), ``advance.cuh`` (the
load-balanced advance), ``direction.cuh`` (Beamer's rule), ``partition.cuh``, ``barriers.cuh``,
``peer_memory.cuh``. The kernels generated around a functor are :mod:`groute.operators.generated`.
"""
from . import keyed
from .api import ARCS, DIRECTIONS, REDUCTIONS, advance, compute, filter, reduce
from .frontier import DeviceFrontier, Frontier
from .functor import Functor, Gather, Message
from .intersect import Intersection
from .loop import AdvanceStep, ComputeStep, FilterStep, Levels, LoopResult, run_loop, sweep
from .rounds import Compute, Loop, RoundsResult, Sweep, run_rounds
from .arc_vertices import DISTANCE, DISTANCE_UNREACHED, arc_values, subdivided, subdivided_graph

__all__ = ["Functor", "Message", "Gather", "Frontier", "DeviceFrontier", "advance", "filter", "compute",
           "reduce", "REDUCTIONS",
           "DIRECTIONS", "ARCS", "run_loop", "sweep", "ComputeStep", "FilterStep",
           "AdvanceStep", "LoopResult", "Levels", "run_rounds", "Loop", "Sweep", "Compute",
           "RoundsResult", "Intersection", "subdivided", "subdivided_graph", "arc_values", "DISTANCE",
           "DISTANCE_UNREACHED", "keyed"]
