"""The relaxation engines: one family of engines for any monotone min-relaxation to a fixpoint
(BFS, SSSP, a user's own), given as a :class:`Relaxation`.

- :class:`Relaxation` (``relaxation.py``): the contract, what an arc offers (a C expression
  and its NumPy twin), whether it reads weights, whether every arc adds one; :func:`value_add`
  and :func:`value_inf` for its NumPy side.
- :class:`RelaxSolver` (``solver.py``): partition, ``auto`` rules (``rules.py``), which engine
  runs, the run and its answer; an app subclasses it with its relaxation.
- the engines: per-device workers on the distributed worklist (``cuda_worker.py`` over
  ``fused.cu``/``fused.cuh``, ``cpu_worker.py``; BSP pull levels across devices: ``pull.py``),
  the persistent peer kernels (``peer.py``, ``peer.cu``) and the linked workers (``linked.py``,
  ``linked.cu``).
- around them: ``values.py`` (value arithmetic, overflow checks), ``parents.py``
  (``predecessors=True``), ``memory.py`` (the memory estimate), ``seeds.py`` (a run's seeds
  staged on a CUDA device before the run starts).
"""
from __future__ import annotations

from .relaxation import Relaxation, value_add, value_inf
from .solver import RelaxSolver

__all__ = ["Relaxation", "RelaxSolver", "value_add", "value_inf"]
