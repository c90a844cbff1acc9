"""The CPU (NumPy) worker of the relaxation engines: any relaxation on one virtual device.

Label-correcting push traversal over the vertices this device owns (new ids ``[lo, hi)``):
a round expands every vertex of the near queue, relaxes its out-arcs (the value each offers:
the relaxation's ``numpy``; BFS adds one, SSSP the weight), keeps the best candidate per target, and for local targets that improved updates
the state and enqueues them (near if below the threshold, deferred otherwise); candidates for
remote targets become items in the owner's outbox, unless this device already sent that
vertex a value at least as good (``sent_best``: vertex refinement). Each round is a handful of
vectorised NumPy calls; ``advance`` runs rounds in the device's compute stream until done.
"""
from __future__ import annotations

import math

import numpy as np

from groute.operators.cpu_ops import arc_count, arcs_of, pull_hits
from groute.worklist import (LocalWork, StreamWorker, WorkQueue, infinity, next_threshold, pack,
                             unpack)

from .pull import PullSteps
from .seeds import owned_seeds


def _min_per_target(targets, values):
    """Unique targets and the smallest value offered to each."""
    if targets.size == 0:
        return targets, values
    order = np.lexsort((values, targets))
    t, v = targets[order], values[order]
    first = np.ones(t.size, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    return t[first], v[first]


def _below(values, threshold):
    """``values < threshold`` compared in float64: a priority threshold (a start plus steps of
    delta) can pass float32's range on huge float weights, and comparing float32 values with
    such a number makes NumPy warn of an overflowing cast."""
    return values < np.float64(threshold)


class CPUTraversalWorker(PullSteps, StreamWorker):
    """One device's share of a relaxation run (see the module docstring): ``relaxation`` (its
    ``numpy`` gives the values the arcs offer), ``unit`` (every arc adds one on this graph:
    pull levels)."""

    def __init__(self, device, local, *, lo, hi, offsets, num_vertices, kind, weighted,
                 relaxation, unit, symmetric=False, flush_items=1 << 16):
        self.device = device
        self.lo, self.hi = int(lo), int(hi)
        self.n_local = self.hi - self.lo
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.k = len(self.offsets) - 1
        self.kind = kind
        self.inf = infinity(kind)
        self.indptr = np.asarray(local.indptr, dtype=np.int64)
        self.num_arcs = int(self.indptr[-1]) if self.indptr.size else 0
        # the rows as the graph stores them (no copy; ids int32 below 2**31 vertices, weights
        # int32 or float32): a round widens only the arcs it reads
        self.indices = np.asarray(local.indices)
        self.weights = None if not weighted else np.asarray(local.weights).astype(
            np.int32 if kind == "int" else np.float32, copy=False)
        self.relaxation = relaxation
        self.dist = np.full(self.n_local, self.inf, dtype=self.inf.dtype)
        self.sent_best = np.full(num_vertices, self.inf, dtype=self.inf.dtype)
        self.near = np.empty(0, dtype=np.int64)
        self.far = WorkQueue(device, 1024, name=f"far@{device.name}")
        self.flush_items = int(flush_items)
        # BSP on several devices may pull (see pull.py): flags of the level's vertices, all
        # devices' (this device fills its range, the worklist copies the others)
        self.can_pull = bool(symmetric and unit and self.k > 1)
        self.frontier = np.zeros(num_vertices if self.can_pull else 1, dtype=np.uint8)
        self.work = LocalWork()
        # this device's seeds (local ids, as the queues hold them) and their value 0: what
        # each run's start enqueues
        self.mine = np.empty(0, dtype=np.int64)
        self.mine_zeros = np.zeros(0, dtype=self.dist.dtype)
        self.ceiling = self.inf
        self.counters = {}

    # ------------------------------------------------------------------ protocol
    def set_source(self, seeds_new, ceiling=None):
        """The next run's seeds (renumbered ids, one or several; each starts at value 0) and
        its ceiling: a vertex whose value reaches it keeps the value but is not expanded (BFS's
        depth limit; None: no limit)."""
        self.mine = owned_seeds(seeds_new, self.lo, self.hi).astype(np.int64)
        self.mine_zeros = np.zeros(self.mine.size, dtype=self.dist.dtype)
        self.ceiling = self.inf if ceiling is None else ceiling

    def values(self):
        return self.dist

    def collect_counters(self):
        return self.counters

    # ------------------------------------------------------------------ the work
    def _start(self, threshold):
        self.dist.fill(self.inf)
        self.sent_best.fill(self.inf)
        self.far.clear()
        self.near = np.empty(0, dtype=np.int64)
        self.counters = {"processed": 0, "edges": 0, "deferrals": 0, "rounds": 0, "launches": 0,
                         "absorbed": 0, "improved_remote": 0, "pull_rounds": 0}
        self._enqueue(self.mine, self.mine_zeros, threshold)
        return self._report()

    def _report(self, threshold=None):
        far = self.far.view()
        far_min = math.inf
        if far.size:
            far_min = unpack(far, self.kind)[1].min().item()
        self.work = LocalWork(int(self.near.size), int(far.size), far_min, threshold)
        return self.work

    def _enqueue(self, local_ids, values, threshold):
        """Lower ``dist`` where ``values`` improve it; queue the improved vertices below the
        ceiling."""
        better = values < self.dist[local_ids]
        u, d = local_ids[better], values[better]
        self.dist[u] = d
        improved = int(u.size)
        if self.ceiling != self.inf:
            below = d < self.ceiling
            u, d = u[below], d[below]
        near = _below(d, threshold)
        if near.any():
            self.near = np.union1d(self.near, u[near])
        if not near.all():
            self.far.push(pack(u[~near], d[~near]))
            self.counters["deferrals"] += int((~near).sum())
        return improved

    def _round(self, threshold, outbox):
        f = self.near
        self.near = np.empty(0, dtype=np.int64)
        self.counters["processed"] += int(f.size)
        self.counters["rounds"] += 1
        eidx, owner_pos = arcs_of(self.indptr, f)
        self.counters["edges"] += int(eidx.size)
        if eidx.size == 0:
            return
        targets = self.indices[eidx].astype(np.int64)
        cand = self._offered(self.dist[f][owner_pos], eidx)
        local = (targets >= self.lo) & (targets < self.hi)
        t, v = _min_per_target(targets[local] - self.lo, cand[local])
        self._enqueue(t, self._as_value(v), threshold)
        if not local.all():
            t, v = _min_per_target(targets[~local], cand[~local])
            v = self._as_value(v)
            fresh = v < self.sent_best[t]
            t, v = t[fresh], v[fresh]
            self.sent_best[t] = v
            owners = np.searchsorted(self.offsets, t, side="right") - 1
            for j in np.unique(owners):
                mine = owners == j
                outbox[j].append(pack(t[mine], v[mine]))

    def _offered(self, d, eidx):
        """The values the arcs ``eidx`` offer from tails of values ``d``: the relaxation's
        ``numpy``, with the arcs' weights (1 on a graph without weights; none for a relaxation
        that reads none)."""
        if not self.relaxation.weighted:
            return self.relaxation.numpy(d, None)
        if self.weights is None:
            return self.relaxation.numpy(d, 1)
        w = self.weights[eidx]      # int sums in 64 bits (_as_value saturates them)
        return self.relaxation.numpy(d, w.astype(np.int64) if self.kind == "int" else w)

    def _as_value(self, v):
        """Candidates as stored values (the relaxation's :func:`~.relaxation.value_add`
        saturates int sums as the kernels do; :func:`groute.engines.relax.values.check_overflow`
        resolves them); anything at or past "unreached" offers nothing."""
        if self.kind == "int":
            return np.minimum(v, self.inf).astype(np.int32)
        return np.asarray(v, dtype=np.float32)

    def _publish_frontier(self):
        self.frontier[self.lo:self.hi] = 0
        self.frontier[self.near + self.lo] = 1

    def _frontier_arcs(self):
        return arc_count(self.indptr, self.near)

    def _pull(self, level):
        """One BFS level bottom-up: every unreached local vertex with an arc to a flagged
        vertex (any device's, at depth ``level``) gets depth ``level + 1``."""
        self.counters["rounds"] += 1
        self.counters["pull_rounds"] += 1
        todo = np.flatnonzero(self.dist == self.inf)
        hits, read = pull_hits(self.indptr, self.indices, todo, self.frontier)
        self.counters["edges"] += read
        found = np.zeros(todo.size, dtype=bool)
        found[hits] = True
        new = todo[found]
        self.dist[new] = level + 1
        self.counters["processed"] += int(new.size)
        self.near = new if level + 1 < self.ceiling else new[:0]

    def _advance(self, threshold, max_rounds, self_advance):
        self.counters["launches"] += 1
        if self.pull_level is not None:
            self._pull(self.pull_level)
            return self._report(), [None] * self.k
        outbox = [[] for _ in range(self.k)]
        rounds = 0
        moved = None
        while True:
            if self.near.size == 0:
                if self_advance and len(self.far) and threshold != math.inf:
                    threshold = next_threshold(threshold, self._report().far_min, self._delta)
                    moved = threshold
                    self._split(threshold)
                    continue
                break
            self._round(threshold, outbox)
            rounds += 1
            if max_rounds is not None and rounds >= max_rounds:
                break
            if sum(a.size for parts in outbox for a in parts) >= self.flush_items:
                break
        out = [np.concatenate(parts) if parts else None for parts in outbox]
        return self._report(moved), out

    _delta = math.inf

    def set_delta(self, delta):
        self._delta = delta

    def _absorb(self, arrays, threshold):
        items = np.concatenate([np.asarray(a) for a in arrays])
        self.counters["absorbed"] += int(items.size)
        v, d = unpack(items, self.kind)
        t, d = _min_per_target(v.astype(np.int64) - self.lo, d)
        self.counters["improved_remote"] += self._enqueue(t, d, threshold)
        return self._report()

    def _split(self, threshold):
        far = self.far.take()
        if far.size:
            v, d = unpack(far, self.kind)
            current = d == self.dist[v]          # stale items: the vertex improved since
            v, d = v[current], d[current]
            near = _below(d, threshold)
            if near.any():
                self.near = np.union1d(self.near, v[near])
            self.far.push(far[current][~near])
        return self._report()
