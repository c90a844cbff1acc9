"""The connected components engine: weak components by union-find on a parent array per device
(Afforest's sampling, then the rest linked in place or routed as segments, Groute's design).

- :class:`ComponentsSolver` (``solver.py``): the set-up, which path runs (``auto``:
  ``rules.py``), the merge of the devices' parent arrays, the run and its stats
  (:data:`STATS_KEYS`); an app subclasses it under its own name.
- around it: ``layout.py`` (the host-side edge list, symmetric CSR, late arcs and the cut of the
  rows), ``device.py`` (each device's parent array and operations, ``union_find.cu``),
  ``memory.py`` (the memory estimate).
"""
from __future__ import annotations

from .solver import STATS_KEYS, ComponentsSolver

__all__ = ["ComponentsSolver", "STATS_KEYS"]
