"""The operators on one CPU virtual device: NumPy, vectorised over a frontier's arcs.

A functor's ``numpy`` callable sees every visit of one call at once: ``v`` holds one local
position per arc (repeats included), so a body that counts (k-core's degree decrements) uses
``np.subtract.at`` or ``np.unique(..., return_counts=True)``. The output frontier is the set of
positions the callable returned (repeats removed).

A gathering functor (``Functor(gather=...)``) sees each candidate once instead, with the
combination of its arcs' messages: a push collects the (target, message) pairs of every arc
(its own and those other devices sent) and :func:`finish` combines them; a pull
(:func:`gather_pull`) combines the messages of each candidate's arcs from the frontier, read
from a table of the whole frontier's messages by global id (:func:`message_table`).
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arcs_of_rows

from . import returns
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


class _Gathering:
    """A gathering push under way: the owned targets and messages of every arc so far, and
    the candidates (``cand``: a bool per owned vertex, or None for every one)."""

    def __init__(self, functor, values, where, cand):
        self.functor, self.values, self.where, self.cand = functor, values, where, cand
        self.v, self.m = [], []

    def add(self, v, m):
        self.v.append(v)
        self.m.append(m)

    def finish(self, part) -> DeviceFrontier:
        if not self.v:
            return _frontier(part, [])
        v, m = np.concatenate(self.v), np.concatenate(self.m)
        return _frontier(part, _gathered(part, self.functor, self.values, v, m, self.cand,
                                         self.where))


def _gathered(part, functor, values, v, m, cand, where):
    """The body on each candidate of ``v`` (local positions, one per arc) with its arcs'
    messages ``m`` combined; the positions it accepted, as a list for :func:`_frontier`."""
    keep = _wants(part, functor, values, v, where)
    if cand is not None:
        keep &= cand[v]
    if not keep.any():
        return []
    vertices, acc = functor.gather.combine(v[keep], m[keep], functor.message.dtype)
    return [_visit(part, functor, values, vertices, where, acc)]


def _visit(part, functor, values, v, where, m=None):
    """The body on ``v`` (local positions; ``m`` their messages): the positions it accepted,
    checked (:func:`groute.operators.returns.positions`)."""
    body = functor.numpy_body(where)
    with part.device.running(f"{functor.name}'s numpy callable in {where}"):
        out = body(values, v) if functor.message is None else body(values, v, m)
    return returns.positions(part, functor, where, out)


def _wants(part, functor, values, v, where):
    """The gather's candidates among ``v``, a checked bool mask."""
    with part.device.running(f"the gather of {functor.name}'s numpy callable in {where}"):
        wants = functor.gather.wants(values, v, where)
    return returns.mask(part, f"the gather of {functor.name}", where, wants, v)


def messages(part, functor, values, sources, where):
    """The functor's message for each arc out of ``sources`` (None without a message),
    checked (:func:`groute.operators.returns.messages`)."""
    if functor.message is None:
        return None
    with part.device.running(f"{functor.name}'s message in {where}"):
        m = functor.message.numpy_body(where)(values, sources)
    return returns.messages(part, functor, where, m, sources)


def push(part, frontier, functor, values, where, candidates=None):
    """Visit the owned targets of the frontier's arcs (``part``'s rows: out-arcs, or in-arcs
    for an advance over them); return the joined positions so far (a gathering functor: the
    pairs collected, :class:`_Gathering`), the other devices' targets (global ids, int32) and
    their messages (None without one). ``candidates`` restricts a gathering functor."""
    queue = frontier.queue.astype(np.int64)
    arcs, pos = arcs_of(part.indptr, queue)
    sources = queue[pos]
    targets = part.indices[arcs]
    m = messages(part, functor, values, sources, where)
    mine = (targets >= part.first) & (targets < part.end)
    if functor.gather is not None:
        cand = None if candidates is None else _mask(part, candidates)
        joined = _Gathering(functor, values, where, cand)
        joined.add(targets[mine].astype(np.int64) - part.first, m[mine])
    else:
        joined = []
        if mine.any():
            joined.append(_visit(part, functor, values,
                                 targets[mine].astype(np.int64) - part.first,
                                 where, None if m is None else m[mine]))
    return joined, targets[~mine].astype(np.int32), None if m is None else m[~mine]


def output(part, functor, values, where):
    """An output frontier with nothing in it yet, for :func:`apply` to visit into without a
    push of this device's own before it (the asynchronous loop's arrivals)."""
    return []


def apply(part, joined, items, msgs, functor, values, where):
    """Visit owned vertices ``items`` (global ids) another device's arcs reached, with their
    messages ``msgs`` (None without one)."""
    if not items.shape[0]:
        return
    v = items.astype(np.int64) - part.first
    if isinstance(joined, _Gathering):
        joined.add(v, msgs)
    else:
        joined.append(_visit(part, functor, values, v, where, msgs))


def finish(part, joined) -> DeviceFrontier:
    if isinstance(joined, _Gathering):
        return joined.finish(part)
    return _frontier(part, joined)


def _mask(part, frontier):
    """A bool per owned vertex: whether ``frontier`` holds it."""
    if frontier.everything:
        return np.ones(part.size, bool)
    mask = np.zeros(part.size, bool)
    mask[frontier.queue] = True
    return mask


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


def gather_pull(part, front, table, candidates, functor, values, where):
    """A gathering pull: every candidate (``candidates``, else every owned vertex, and the
    gather's own test) combines the messages of its arcs (``part``'s rows) from frontier
    members (``front``: a bool per global id; ``table``: their messages by global id) and the
    body runs once on each with at least one. Returns the output frontier and the arcs read."""
    queue = (np.arange(part.size, dtype=np.int64) if candidates is None
             else candidates.queue.astype(np.int64))
    queue = queue[_wants(part, functor, values, queue, where)]
    arcs, pos = arcs_of(part.indptr, queue)
    others = part.indices[arcs]
    hit = front[others] != 0
    joined = []
    if hit.any():
        vertices, acc = functor.gather.combine(queue[pos[hit]], table[others[hit]],
                                               functor.message.dtype)
        joined.append(_visit(part, functor, values, vertices, where, acc))
    return _frontier(part, joined), int(arcs.shape[0])


def frontier_messages(part, frontier, functor, values, where):
    """The functor's message at each vertex of ``frontier`` (aligned with its queue): what a
    gathering pull sends with the frontier's ids."""
    return messages(part, functor, values, frontier.queue.astype(np.int64), where)


def message_table(part, id_arrays, msg_arrays, dtype):
    """The messages ``msg_arrays`` of the global ids ``id_arrays`` in one array over every
    global id (the others: zero, never read)."""
    table = np.zeros(part.num_global, dtype)
    for ids, msgs in zip(id_arrays, msg_arrays):
        table[ids] = msgs
    return table


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
    with part.device.running(f"{functor.name}'s numpy callable in {where}"):
        keep = functor.numpy_body(where)(values, v)
    keep = returns.mask(part, functor.name, where, keep, v)
    return DeviceFrontier(part.device, part.size, queue=v[keep].astype(np.int32))


def compute(part, frontier, functor, values, where):
    v = np.arange(part.size, dtype=np.int64) if frontier.everything \
        else frontier.queue.astype(np.int64)
    with part.device.running(f"{functor.name}'s numpy callable in {where}"):
        functor.numpy_body(where)(values, v)


def arcs(part, frontier) -> int:
    """Out-arcs of the frontier's vertices."""
    if frontier.everything:
        return part.num_arcs
    return arc_count(part.indptr, frontier.queue)
