"""The operators on one CUDA device: launches of the kernels generated around a functor
(:mod:`groute.operators.generated`), on the device's compute stream.

Push is ``advance.cuh``'s load-balanced advance (a warp per 32 vertices, medium vertices by the
whole warp, hubs cut into chunks by a second launch); an arc whose target another device owns
is appended to the ``remote`` queue, which the engine routes to the owner, where ``apply_k``
visits it. The output frontier is deduplicated with a bitmap (``bitmap_claim``).

A gathering functor's push deposits each arc's message into a per-vertex accumulator (filled
with the combination's identity for the call) and marks the target in that bitmap instead;
:func:`finish` then runs ``gather_finish_k``, the body once per marked vertex. Its pull is
``gather_pull_k`` (small and medium candidates, no atomics), ``gather_pull_big_k`` (hubs'
chunks, deposited) and the same ``gather_finish_k``.
"""
from __future__ import annotations

import numpy as np

from . import generated
from .frontier import DeviceFrontier, launch, queue_to_bitmap, read_count, words_for

BLOCK = 256
#: a null pointer as a kernel argument (an 8-byte zero)
NULL = np.uint64(0)


def _xp(part):
    return part.device.xp


def _scratch(part, name, shape, dtype):
    """A buffer kept between calls (grown when too small)."""
    buf = part.scratch.get(name)
    if buf is None or buf.shape[0] < shape:
        with part.device.on_compute():
            buf = part.scratch[name] = _xp(part).empty(max(int(shape), 1), dtype)
    return buf


class _Output:
    """The output frontier being built: queue, count and the bitmap that dedupes it. A
    gathering functor's (``functor``, its parameter ``values``) also holds the accumulators
    and the candidates' bitmap (``candidates``: a frontier, or None for every vertex); its
    bitmap marks the vertices to finish."""

    def __init__(self, part, functor=None, values=None, candidates=None, where=""):
        xp = _xp(part)
        self.where = where
        gather = functor.gather if functor is not None else None
        self.functor, self.values = (functor, values) if gather is not None else (None, None)
        self.acc = self.cand = NULL
        with part.device.on_compute():
            self.queue = xp.empty(max(part.size, 1), np.int32)
            self.count = xp.zeros(1, np.int32)
            self.bits = xp.zeros(words_for(part.size), np.uint32)
            if gather is not None:
                dtype = functor.message.dtype
                self.acc = xp.full(max(part.size, 1), gather.identity(dtype), dtype)
        if gather is not None and candidates is not None:
            self.cand = candidates.to_bitmap().bitmap

    def finish_gather(self, part):
        """``gather_finish_k``: the body of every marked vertex, into the queue."""
        launch(part.device, generated.kernels(self.functor, self.where)["gather_finish_k"],
               words_for(part.size), _gather_args(part, self, NULL, NULL, self.values))
        self.functor = None


def _gather_args(part, out, front, table, values, counters=NULL, big=(NULL, NULL)):
    """The arguments of a gathering functor's kernels (``GROUTE_GATHER_ARGS``)."""
    return (part.indptr, part.indices, big[0], big[1], counters, np.int64(part.size), front,
            table, out.cand, out.acc, out.bits, out.queue, out.count,
            *_params(out.functor, values))


def _params(functor, values):
    return tuple(values[p.name] for p in functor.parsed)


def push(part, frontier, functor, values, where, candidates=None):
    """Visit the owned targets of the frontier's arcs (``part``'s rows); return the output
    being built, the other devices' targets (global ids) and their messages (None without
    one). ``candidates`` restricts a gathering functor."""
    k = generated.kernels(functor, where)
    out = _Output(part, functor, values, candidates, where)
    n = frontier.count
    remote = _scratch(part, "remote", part.num_arcs, np.int32)
    message = functor.message
    remote_msg = NULL if message is None else \
        _scratch(part, f"remote_msg_{message.dtype.str}", part.num_arcs, message.dtype)
    with part.device.on_compute():
        remote_count = _xp(part).zeros(1, np.int32)
        counters = _xp(part).zeros(2, np.uint64)
    big_items = _scratch(part, "big_items", max(n, 1), np.int64)
    big_first = _scratch(part, "big_first_chunk", max(n, 1), np.int32)
    if n:
        args = (part.indptr, part.indices, big_items, big_first, counters, frontier.queue,
                np.int64(n), np.int64(part.first), np.int64(part.end), out.queue, out.count,
                out.bits, remote, remote_count, remote_msg, out.acc, out.cand,
                *_params(functor, values))
        launch(part.device, k["advance_push_k"], n, args, BLOCK)
        launch(part.device, k["advance_push_big_k"], part.device.multiprocessors * 2048, args,
               BLOCK)
    m = read_count(part.device, remote_count)
    return out, remote[:m], None if message is None else remote_msg[:m]


def output(part, functor, values, where):
    """An output frontier with nothing in it yet, for :func:`apply` to visit into without a
    push of this device's own before it (the asynchronous loop's arrivals)."""
    return _Output(part, functor, values, None, where)


def apply(part, out, items, msgs, functor, values, where):
    """Visit owned vertices ``items`` (global ids) that other devices' arcs reached, with
    their messages ``msgs`` (None without one)."""
    n = int(items.shape[0])
    if n:
        xp = _xp(part)
        with part.device.on_compute():
            items = xp.ascontiguousarray(items)
            msgs = NULL if msgs is None else xp.ascontiguousarray(msgs)
        launch(part.device, generated.kernels(functor, where)["apply_k"], n,
               (items, msgs, np.int64(n), np.int64(part.first), out.queue, out.count, out.bits,
                out.acc, out.cand, *_params(functor, values)), BLOCK)


def finish(part, out) -> DeviceFrontier:
    if out.functor is not None:
        out.finish_gather(part)
    n = read_count(part.device, out.count)
    queue = out.queue[:n]
    if n < part.size:
        # a copy of the n entries, so the output's buffer of every owned vertex goes back to
        # the pool: an algorithm that keeps its frontiers (betweenness keeps every level)
        # holds what they hold, not a vertex-sized buffer per frontier
        with part.device.on_compute():
            queue = queue.copy()
    return DeviceFrontier(part.device, part.size, queue=queue, count=n)


def pull(part, front, candidates, functor, values, where):
    out = _Output(part)
    cand = NULL if candidates is None else candidates.to_bitmap().bitmap
    with part.device.on_compute():
        counters = _xp(part).zeros(2, np.uint64)
    if part.size:
        launch(part.device, generated.kernels(functor, where)["advance_pull_k"], part.size,
               (part.indptr, part.indices, np.int64(part.size), front, cand, out.queue,
                out.count, counters, *_params(functor, values)), BLOCK)
    with part.device.on_compute():
        edges = int(counters[1].get())
    return finish(part, out), edges


def gather_pull(part, front, table, candidates, functor, values, where):
    """A gathering pull (``cpu_ops.gather_pull``; ``front``: a bitmap over every global id,
    ``table``: the frontier's messages by global id). Returns the output frontier and the arcs
    read."""
    k = generated.kernels(functor, where)
    out = _Output(part, functor, values, candidates, where)
    with part.device.on_compute():
        counters = _xp(part).zeros(2, np.uint64)
    big = (_scratch(part, "big_items", max(part.size, 1), np.int64),
           _scratch(part, "big_first_chunk", max(part.size, 1), np.int32))
    args = _gather_args(part, out, front, table, values, counters, big)
    if part.size:
        launch(part.device, k["gather_pull_k"], part.size, args, BLOCK)
        launch(part.device, k["gather_pull_big_k"], part.device.multiprocessors * 2048, args,
               BLOCK)
    frontier = finish(part, out)
    with part.device.on_compute():
        edges = int(counters[1].get())
    return frontier, edges


def frontier_messages(part, frontier, functor, values, where):
    """The functor's message at each vertex of ``frontier`` (``message_k``), aligned with its
    queue."""
    n = frontier.count
    with part.device.on_compute():
        msgs = _xp(part).empty(n, functor.message.dtype)
    if n:
        launch(part.device, generated.kernels(functor, where)["message_k"], n,
               (frontier.queue, np.int64(n), msgs, *_params(functor, values)), BLOCK)
    return msgs


def message_table(part, id_arrays, msg_arrays, dtype):
    """The messages of the global ids ``id_arrays`` in one array over every global id."""
    xp = _xp(part)
    with part.device.on_compute():
        table = xp.zeros(max(part.num_global, 1), dtype)
        for ids, msgs in zip(id_arrays, msg_arrays):
            if ids.shape[0]:
                table[xp.asarray(ids)] = xp.asarray(msgs)
    return table


def membership(part, id_arrays):
    """A bitmap over every global id with the bits of ``id_arrays`` (global ids) set."""
    xp = _xp(part)
    with part.device.on_compute():
        ids = xp.concatenate([xp.asarray(a) for a in id_arrays]) if id_arrays \
            else xp.zeros(0, np.int32)
    return queue_to_bitmap(part.device, ids, part.num_global)


def global_ids(part, frontier):
    with part.device.on_compute():
        return frontier.queue + np.int32(part.first)


def filter(part, frontier, functor, values, where):
    out = _Output(part)
    n = frontier.count
    if n:
        cur = NULL if frontier.everything else frontier.queue
        launch(part.device, generated.kernels(functor, where)["filter_k"], n,
               (cur, np.int64(n), out.queue, out.count, *_params(functor, values)), BLOCK)
    return finish(part, out)


def compute(part, frontier, functor, values, where):
    n = frontier.count
    if n:
        cur = NULL if frontier.everything else frontier.queue
        launch(part.device, generated.kernels(functor, where)["compute_k"], n,
               (cur, np.int64(n), *_params(functor, values)), BLOCK)


def arcs(part, frontier) -> int:
    if frontier.everything:
        return part.num_arcs
    q = frontier.queue
    with part.device.on_compute():
        return int((part.indptr[q + 1] - part.indptr[q]).sum().get())
