"""The linear iteration engines: one family of engines for any linear fixed point
``y = base + alpha A^T (scale * y)`` (PageRank, Katz centrality, a user's own), given as a
:class:`LinearIteration`.

- :class:`LinearIteration` (``iteration.py``): the contract, what an out-arc carries (a C
  expression and its NumPy twin) and the stopping rule's measure.
- :class:`IterateSolver` (``solver.py``): partition, ``auto`` rules (``rules.py``), which
  kernel runs (BSP pull: csc, bins, the COO pair, their persistent forms; or asynchronous
  push on the distributed worklist), convergence, the answer's normalisation and stats; an app
  subclasses it with its iteration and maps its own options onto a :class:`FixedPoint`
  (``alpha``, ``base``, ``start``, the normalisation, weighted or not).
- around them: ``layout.py`` (the in-arc shards and the "bins" degree order), ``device.py``
  (each device's arrays and kernels, ``iterate.cu``), ``memory.py`` (the memory estimate).
"""
from __future__ import annotations

from .iteration import FixedPoint, LinearIteration
from .solver import IterateSolver

__all__ = ["LinearIteration", "FixedPoint", "IterateSolver"]
