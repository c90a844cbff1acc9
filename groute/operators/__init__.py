"""The operator layer of the graph programming model: device code shared by every engine.

The ``.cuh`` headers in this folder hold each device-side operator once; the kernels of the
engines and apps include them (``groute.kernels`` puts this folder on every module's include
path). ``docs/OPERATORS.md`` says what each header provides and how a kernel composes them.

- ``values.cuh``: value representation (int, or float bits), ``value_add``, ``arc_value``,
  ``next_threshold`` (soft priority), (vertex, value) items packed in an int64.
- ``appends.cuh``: warp-aggregated queue reservations.
- ``frontier.cuh``: the frontier as a queue (sparse) or a bitmap (dense), and the conversion.
- ``advance.cuh``: the load-balanced advance, push (thread / warp / edge-balanced chunks by
  degree) and pull, as templates over the algorithm's functor.
- ``direction.cuh`` with :mod:`groute.operators.direction`: Beamer's direction rule.
- ``partition.cuh``: the owner of a vertex.
- ``barriers.cuh``, ``peer_memory.cuh``: grid-wide and cross-device barriers, system-scope
  operations on memory the GPUs of a host share.
"""
