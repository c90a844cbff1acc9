"""The arithmetic of SSSP distances, and how a distance past its value type is caught.

Distances are int32 for integer weights and float32 for float weights, on both backends: the
worklist packs a value in 32 bits and the CUDA kernels add in those types. A sum can pass the
type's range, and the two kinds end differently:

* int: ``value_add`` (``values.cuh``, and the CPU worker alike) saturates a sum at
  :data:`INT_SATURATED`, one below "unreached" (weights are int32: ``CSRGraph`` keeps them so).
* float: a float32 sum past the range is ``inf``, which is "unreached"; it never improves a
  distance, so the vertex keeps ``inf`` unless another path reaches it.

Candidates that saturate only on the way (a long arc later beaten by a short path) leave no
trace: only an *assigned* distance can be wrong, and :func:`check_overflow` decides after the
run, exactly, whether one is. It raises only when a shortest distance really does not fit.

The check costs nothing on ordinary graphs: a shortest path is simple, so every assigned
distance is at most ``(n - 1) * max weight`` (distances only ever decrease, so the chain of
assignments that produced a distance never revisits a vertex), and when that bound fits the
type (float32: with the rounding of ``n - 1`` additions, each at most ``1 + 2**-24`` up) the
check is skipped (:func:`overflow_possible`).
"""
from __future__ import annotations

import math

import numpy as np

from groute.graph.arcs import arcs_of_rows
from groute.worklist import infinity

#: The largest int distance; an int sum at or past it is stored as this value.
INT_SATURATED = int(infinity("int")) - 1
#: float32's largest finite value.
FLOAT_MAX = float(np.finfo(np.float32).max)


def overflow_possible(num_vertices, max_weight, kind) -> bool:
    """Whether a shortest distance could pass the value type (see the module docstring); False
    means :func:`check_overflow` has nothing to find."""
    bound = max(num_vertices - 1, 0) * float(max_weight)
    if kind == "int":
        return bound >= INT_SATURATED
    return bound * math.exp(max(num_vertices - 1, 0) * 2.0 ** -24) > FLOAT_MAX


def check_overflow(graph, values, kind, app="sssp") -> None:
    """Raise OverflowError, naming the vertex by the graph's own id, if a vertex reachable from
    the source has a shortest distance past the value type; ``values`` are the run's stored
    distances by position.

    float: a reachable vertex left ``inf`` has an arc from a reached vertex (the first unreached
    vertex on any path to it has one), and such an arc means the float32 sum overflowed.

    int: a vertex holding :data:`INT_SATURATED` has a true distance of at least that. It is
    exactly that (the answer is right) when an arc from a vertex below it sums to exactly
    :data:`INT_SATURATED` (in int64), or a zero-weight arc from such a vertex reaches it; any
    other saturated vertex lies further.
    """
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices, dtype=np.int64)
    n = int(graph.num_vertices)
    if kind == "float":
        reached = np.isfinite(values)
        tails = np.repeat(np.arange(n), np.diff(indptr))
        lost = reached[tails] & ~reached[indices]
        if lost.any():
            v = graph.file_id_of(int(indices[np.argmax(lost)]))
            raise OverflowError(
                f"{app}: the shortest distance to vertex {v!r} passes float32's largest value "
                f"({FLOAT_MAX:.4g}); distances are float32 for float weights: scale the weights down")
        return
    saturated = values == INT_SATURATED
    if not saturated.any():
        return
    weights = (np.ones(indices.size, dtype=np.int64) if graph.weights is None
               else np.asarray(graph.weights, dtype=np.int64))
    tails = np.repeat(np.arange(n), np.diff(indptr))
    exact = values < INT_SATURATED
    tight = exact[tails] & saturated[indices] & \
        (values[tails].astype(np.int64) + weights == INT_SATURATED)
    right = np.zeros(n, dtype=bool)
    frontier = np.unique(indices[tight])
    right[frontier] = True
    while frontier.size:                 # zero-weight arcs keep the distance exact
        arcs = arcs_of_rows(indptr, frontier)
        heads = indices[arcs]
        step = (weights[arcs] == 0) & saturated[heads] & ~right[heads]
        frontier = np.unique(heads[step])
        right[frontier] = True
    wrong = np.flatnonzero(saturated & ~right)
    if wrong.size:
        raise OverflowError(
            f"{app}: the shortest distance to vertex {graph.file_id_of(int(wrong[0]))!r} is more "
            f"than {INT_SATURATED}, the largest int32 distance ({wrong.size} such vertices); give float weights "
            f"(float32 distances reach {FLOAT_MAX:.4g})")
