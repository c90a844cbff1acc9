"""The operators on one CPU virtual device: NumPy, vectorised over a frontier's arcs.

A functor's ``numpy`` callable sees every visit of one call at once: ``v`` holds one local
position per arc (repeats included), so a body that counts (k-core's degree decrements) uses
``np.subtract.at`` or ``np.unique(..., return_counts=True)``. The output frontier is the set of
positions the callable returned (repeats removed).
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arcs_of_rows

from .frontier import DeviceFrontier


def arcs_of(indptr, vertices):
    """The arc ids of every arc of ``vertices`` (rows of the CSR offsets ``indptr``), row after
    row as :func:`groute.graph.arcs.arcs_of_rows` lists them, and per arc the position in
    ``vertices`` of its row: what an advance needs to take each arc's source value along (the
    operators here, and the traversal apps' CPU worker)."""
    vertices = np.asarray(vertices, dtype=np.int64)
    counts = indptr[vertices + 1] - indptr[vertices]
    return (arcs_of_rows(indptr, vertices).astype(np.int64, copy=False),
            np.repeat(np.arange(vertices.shape[0], dtype=np.int64), counts))


def arc_count(indptr, vertices) -> int:
    """How many arcs ``vertices`` have (rows of ``indptr``): the work an advance over them
    reads, which the direction rule and the counters weigh."""
    return int((indptr[vertices + 1] - indptr[vertices]).sum())


def pull_hits(indptr, indices, vertices, front):
    """One pull over the arcs of ``vertices`` (rows of ``indptr``/``indices``): per arc whose
    other end is marked in ``front`` (a flag per global id, nonzero for a frontier member), the
    position in ``vertices`` of its row (a vertex with several such arcs repeats); and how
    many arcs were read. Pulling reads every arc of every candidate, so the second number is
    the pull's cost whatever it finds."""
    arcs, pos = arcs_of(indptr, vertices)
    return pos[front[indices[arcs]] != 0], int(arcs.shape[0])


def _frontier(part, joined) -> DeviceFrontier:
    if not joined:
        return DeviceFrontier.empty(part.device, part.size)
    return DeviceFrontier(part.device, part.size,
                          queue=np.unique(np.concatenate(joined)).astype(np.int32))


def _visit(part, functor, values, v, where, m=None):
    body = functor.numpy_body(where)
    out = body(values, v) if functor.message is None else body(values, v, m)
    if out is None:
        raise TypeError(f"{where}: {functor.name}'s numpy callable returned None; advance wants "
                        f"the positions that join the output frontier (an empty array for none)")
    out = np.asarray(out)
    if out.dtype == bool:
        raise TypeError(f"{where}: {functor.name}'s numpy callable returned a bool mask; advance "
                        f"wants the positions that join the output frontier (v[mask])")
    return out.astype(np.int64, copy=False)


def messages(functor, values, sources, where):
    """The functor's message for each arc out of ``sources`` (None without a message)."""
    if functor.message is None:
        return None
    m = np.asarray(functor.message.numpy_body(where)(values, sources))
    if m.shape != sources.shape:
        raise TypeError(f"{where}: {functor.name}'s message returned shape {m.shape}, expected "
                        f"one value per source ({sources.shape})")
    return m.astype(functor.message.dtype, copy=False)


def push(part, frontier, functor, values, where):
    """Visit the owned targets of the frontier's arcs (``part``'s rows: out-arcs, or in-arcs
    for an advance over them); return the joined positions so far, the other devices' targets
    (global ids, int32) and their messages (None without one)."""
    queue = frontier.queue.astype(np.int64)
    arcs, pos = arcs_of(part.indptr, queue)
    sources = queue[pos]
    targets = part.indices[arcs]
    m = messages(functor, values, sources, where)
    mine = (targets >= part.first) & (targets < part.end)
    joined = []
    if mine.any():
        joined.append(_visit(part, functor, values, targets[mine].astype(np.int64) - part.first,
                             where, None if m is None else m[mine]))
    return joined, targets[~mine].astype(np.int32), None if m is None else m[~mine]


def apply(part, joined, items, msgs, functor, values, where):
    """Visit owned vertices ``items`` (global ids) another device's arcs reached, with their
    messages ``msgs`` (None without one)."""
    if items.shape[0]:
        joined.append(_visit(part, functor, values, items.astype(np.int64) - part.first, where,
                             msgs))


def finish(part, joined) -> DeviceFrontier:
    return _frontier(part, joined)


def pull(part, front, candidates, functor, values, where):
    """Every candidate visits its arcs from frontier members (``front``: a bool per global id).
    Returns the output frontier and the arcs read."""
    queue = (np.arange(part.size, dtype=np.int64) if candidates is None
             else candidates.queue.astype(np.int64))
    hits, read = pull_hits(part.indptr, part.indices, queue, front)
    joined = []
    if hits.size:
        joined.append(_visit(part, functor, values, queue[hits], where))
    return _frontier(part, joined), read


def membership(part, id_arrays):
    """A bool per global id: whether one of ``id_arrays`` (global ids) holds it."""
    front = np.zeros(part.num_global, dtype=bool)
    for ids in id_arrays:
        front[ids] = True
    return front


def global_ids(part, frontier):
    return (frontier.queue.astype(np.int64) + part.first).astype(np.int32)


def filter(part, frontier, functor, values, where):
    v = np.arange(part.size, dtype=np.int64) if frontier.everything \
        else frontier.queue.astype(np.int64)
    keep = np.asarray(functor.numpy_body(where)(values, v))
    if keep.dtype != bool or keep.shape != v.shape:
        raise TypeError(f"{where}: {functor.name}'s numpy callable must return a bool mask aligned "
                        f"with v (shape {v.shape}), got {keep.dtype} {keep.shape}")
    return DeviceFrontier(part.device, part.size, queue=v[keep].astype(np.int32))


def compute(part, frontier, functor, values, where):
    v = np.arange(part.size, dtype=np.int64) if frontier.everything \
        else frontier.queue.astype(np.int64)
    functor.numpy_body(where)(values, v)


def arcs(part, frontier) -> int:
    """Out-arcs of the frontier's vertices."""
    if frontier.everything:
        return part.num_arcs
    return arc_count(part.indptr, frontier.queue)
