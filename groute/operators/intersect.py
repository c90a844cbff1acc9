"""The intersect operator: the neighbours two vertices share, and a graph's triangles, from
sorted rows on every device.

An advance visits one arc at a time, and its functor sees one vertex; how many neighbours ``u``
and ``v`` share is a question about two whole rows, which on several devices live apart. An
:class:`Intersection` gives every device of a Context a copy of the graph's rows (a CSR, every
row sorted by target, as every :class:`~groute.graph.CSRGraph`'s) and splits the *work*: device
``i`` takes the arcs of a contiguous range of vertices holding about ``1/k`` of the arcs
(:func:`groute.graph.partition.contiguous_offsets`). Intersection is bound by reading rows, not
by moving answers, so a copy of the rows per device buys each device its share of the work with
no exchange during it; the price is the rows' memory on every device.

- :meth:`Intersection.triangles`: the forward algorithm. Every arc is oriented from the end
  earlier in the order by (degree, vertex) to the later one, on the devices; a triangle
  ``u < v < w`` is then found exactly once, at the oriented arc ``u -> v``, as the ``w`` common
  to the oriented rows of ``u`` and ``v``, and adds to ``u``, ``v`` and ``w`` (one, or the
  product of a value of each of its three edges). The orientation keeps every row within
  ``O(sqrt(m))`` of its arcs, so a hub costs no more than any vertex.
- :meth:`Intersection.common`: the shared neighbours of given pairs of vertices.
- :meth:`Intersection.arc_common` and :meth:`Intersection.peel`: the same for every arc (a
  directed graph's transitive triples; an edge's triangles), and the removal of every edge in
  fewer than some number of triangles, after which every device drops the same edges from its
  rows: one round of k-truss peeling.
- :meth:`Intersection.reciprocated`: per vertex, the arcs whose reverse is an arc too.

Each device's kernels are :mod:`.intersect_cuda` (``intersect.cu``: a thread per arc or pair
walks the shorter row and finds each element in the longer by binary search) or
:mod:`.intersect_cpu` (NumPy, vectorised over chunks of arcs); answers come back to the host by
vertex position. docs/OPERATORS.md ("Intersections") has an example.
"""
from __future__ import annotations

import numpy as np

from groute.graph.partition import contiguous_offsets

from . import intersect_cpu, intersect_cuda


class _Rows:
    """One device's copy of the rows, its vertex range ``[lo, hi)`` and, once asked for, the
    oriented rows (``oriented``: indptr, indices, values)."""

    def __init__(self, device, lo, hi, indptr, indices, values):
        self.device, self.lo, self.hi = device, int(lo), int(hi)
        self.indptr, self.indices, self.values = indptr, indices, values
        self.oriented = None

    @property
    def xp(self):
        return self.device.xp

    @property
    def ops(self):
        return intersect_cuda if self.device.backend == "cuda" else intersect_cpu

    def arc_range(self, indptr=None) -> tuple[int, int]:
        indptr = self.indptr if indptr is None else indptr
        return int(indptr[self.lo]), int(indptr[self.hi])


class Intersection:
    """Every device's copy of ``graph``'s rows, for intersecting them (module docstring).

    Parameters
    ----------
    graph : CSRGraph
        The graph; an undirected one's rows hold every edge both ways. Vertices are positions
        ``0..n-1``.
    ctx : Context
        The devices (CUDA GPUs or CPU virtual devices) that hold a copy and share the work.
    values : array_like of float, optional
        A value per arc, in the graph's arc order, that :meth:`triangles` multiplies (an
        undirected edge's two arcs carry the same value).

    Raises
    ------
    ValueError
        ``values`` of another length than the arcs; a context spanning processes.

    Examples
    --------
    >>> import networkx as nx
    >>> from groute import Context
    >>> from groute.graph import load_graph
    >>> from groute.operators import Intersection
    >>> G = nx.complete_graph(4)
    >>> with Context(devices=2, backend="cpu") as ctx:
    ...     rows = Intersection(load_graph(G), ctx=ctx)
    ...     rows.triangles().tolist(), rows.common([0], [1]).tolist()
    ([3, 3, 3, 3], [2])
    """

    def __init__(self, graph, *, ctx, values=None):
        if ctx.ranks is not None:
            raise ValueError("Intersection copies the rows to every device of one process; "
                             "a context spanning processes has no such copy")
        graph = graph.to_host()
        self.ctx = ctx
        self.num_vertices = n = int(graph.num_vertices)
        self.directed = bool(graph.directed)
        indptr = np.asarray(graph.indptr, dtype=np.int64)
        indices = np.asarray(graph.indices, dtype=np.int32)
        if values is not None:
            values = np.asarray(values, dtype=np.float64)
            if values.shape != indices.shape:
                raise ValueError(f"Intersection: values has shape {values.shape}; the graph "
                                 f"has {indices.shape[0]} arcs")
        k = min(ctx.num_devices, max(n, 1))
        bounds = contiguous_offsets(indptr, k) if n else np.zeros(k + 1, np.int64)

        def upload(device, i):
            return _Rows(device, bounds[i], bounds[i + 1], device.asarray(indptr),
                         device.asarray(indices),
                         None if values is None else device.asarray(values))
        self._rows = self._each(upload, range(k))

    # running on every device --------------------------------------------------------------
    def _each(self, fn, *per_device):
        """``fn(device, *args_i)`` on the first ``len(per_device[0])`` devices, at once; their
        results (a failure stops them all and raises naming the device)."""
        with self.ctx.exclusive():
            futures = [self.ctx.submit(i, fn, *(a[i] for a in per_device))
                       for i in range(len(per_device[0]))]
            return self.ctx.gather(futures)

    def _on_rows(self, fn, *per_device):
        """``fn(rows, *args_i)`` on every device's copy, its compute stream current."""
        def run(device, rows, *args):
            with device.on_compute():
                return fn(rows, *args)
        return self._each(run, self._rows, *per_device)

    # the operations -------------------------------------------------------------------------
    def triangles(self) -> np.ndarray:
        """Per vertex, the sum over the triangles it is in of the product of their three
        edges' values (without values, the count of its triangles: int64). Self-loops and a
        vertex's repeated arcs are no triangle.

        Returns
        -------
        numpy.ndarray
            By vertex position: int64 counts, or float64 sums with ``values``.

        Raises
        ------
        ValueError
            A directed graph (its rows are not its edges both ways).
        """
        if self.directed:
            raise ValueError("Intersection.triangles: the graph is directed; give its "
                             "undirected form (CSRGraph.symmetrize())")

        def run(rows):
            if rows.oriented is None:
                rows.oriented = _orient(rows, self.num_vertices)
            indptr, indices, values = rows.oriented
            first, end = rows.arc_range(indptr)
            acc = rows.ops.triangles(rows.device, indptr, indices, values, first, end,
                                     self.num_vertices)
            return rows.device.to_host(acc)
        return np.sum(self._on_rows(run), axis=0)

    def common(self, a, b, *, exclude_ends: bool = True) -> np.ndarray:
        """For each pair ``(a[i], b[i])`` of vertex positions, how many vertices are in both
        their rows (the targets of both: common neighbours, common successors).

        Parameters
        ----------
        a, b : array_like of int
            The pairs' positions, of one length.
        exclude_ends : bool, optional
            Not counting ``a[i]`` or ``b[i]`` themselves (which a self-loop, or an arc between
            them, puts in a row).

        Returns
        -------
        numpy.ndarray
            int64, one count per pair.
        """
        a = np.asarray(a, dtype=np.int64).reshape(-1)
        b = np.asarray(b, dtype=np.int64).reshape(-1)
        if a.shape != b.shape:
            raise ValueError(f"Intersection.common: a and b differ in length ({a.shape[0]} "
                             f"and {b.shape[0]})")
        bad = np.concatenate([a, b])
        if bad.size and (bad.min() < 0 or bad.max() >= self.num_vertices):
            raise ValueError(f"Intersection.common: positions must be in "
                             f"[0, {self.num_vertices})")
        cuts = np.linspace(0, a.shape[0], len(self._rows) + 1).astype(np.int64)
        pieces = [(a[x:y], b[x:y]) for x, y in zip(cuts[:-1], cuts[1:])]

        def run(rows, pair):
            x, y = (rows.device.asarray(p.astype(np.int32)) for p in pair)
            out = rows.ops.common(rows.device, rows.indptr, rows.indices, x, y, exclude_ends)
            return rows.device.to_host(out)
        return np.concatenate(self._on_rows(run, pieces)).astype(np.int64, copy=False)

    def arc_common(self, *, exclude_ends: bool = True) -> np.ndarray:
        """For every arc ``u -> v``, how many vertices both rows hold: :meth:`common` of its
        two ends, without the pairs leaving the devices.

        Returns
        -------
        numpy.ndarray
            int64, one count per arc in the rows' order (after :meth:`peel`, its arcs').
        """
        def run(rows):
            out = _arc_common(rows, exclude_ends, upper=False)[2]
            return rows.device.to_host(out)
        return np.concatenate(self._on_rows(run)).astype(np.int64, copy=False)

    def peel(self, least: int) -> int:
        """Remove every edge that fewer than ``least`` vertices close into a triangle (the
        common neighbours of its ends, counted on the edge's rows as they stand), from every
        device's rows; each device judges the edges of its own range, and the dropped edges go
        to every device through the host.

        Returns
        -------
        int
            How many edges were removed (0: every edge has ``least`` left).

        Raises
        ------
        ValueError
            A directed graph.
        """
        if self.directed:
            raise ValueError("Intersection.peel: the graph is directed; edges are peeled from "
                             "an undirected graph")
        n = self.num_vertices

        def judge(rows):
            u, v, support = _arc_common(rows, True, upper=True)
            weak = support < least
            return rows.device.to_host(u[weak] * n + v[weak])
        dropped = np.concatenate(self._on_rows(judge)).astype(np.int64, copy=False)
        if not dropped.size:
            return 0
        both = np.unique(np.concatenate([dropped, (dropped % n) * n + dropped // n]))

        def drop(rows):
            xp = rows.xp
            gone = rows.device.asarray(both)
            m = int(rows.indices.shape[0])
            src = rows.ops.arc_rows(rows.indptr, 0, m)
            keys = src * n + rows.indices
            pos = xp.minimum(xp.searchsorted(gone, keys), gone.shape[0] - 1)
            keep = gone[pos] != keys
            counts = xp.bincount(src[keep], minlength=n)
            rows.indptr = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counts)])
            rows.indices = rows.indices[keep]
            if rows.values is not None:
                rows.values = rows.values[keep]
            rows.oriented = None
        self._on_rows(drop)
        return int(dropped.size)

    def reciprocated(self) -> np.ndarray:
        """Per vertex, how many of its arcs ``u -> v`` have their reverse ``v -> u`` (a
        self-loop is its own reverse).

        Returns
        -------
        numpy.ndarray
            int64, by vertex position.
        """
        def run(rows):
            xp = rows.xp
            first, end = rows.arc_range()
            flags = rows.ops.reversed_arcs(rows.device, rows.indptr, rows.indices, first, end,
                                           self.num_vertices)
            sums = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(flags, dtype=np.int64)])
            bounds = rows.indptr[rows.lo:rows.hi + 1] - first
            return rows.device.to_host(sums[bounds[1:]] - sums[bounds[:-1]])
        return np.concatenate(self._on_rows(run)).astype(np.int64, copy=False)

    def arcs(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows' arcs (after :meth:`peel`, those left) as ``(sources, targets)`` positions,
        in row order."""
        def run(rows):
            first, end = rows.arc_range()
            src = rows.ops.arc_rows(rows.indptr, first, end)
            return rows.device.to_host(src), rows.device.to_host(rows.indices[first:end])
        pieces = self._on_rows(run)
        return (np.concatenate([p[0] for p in pieces]).astype(np.int64, copy=False),
                np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False))

    def close(self) -> None:
        """Free the devices' copies (idempotent)."""
        self._rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _orient(rows, n: int):
    """The oriented rows: each arc kept from the end earlier in the order by (degree, vertex)
    (a self-loop from neither), its value along; on the device."""
    xp = rows.xp
    indptr, indices = rows.indptr, rows.indices
    degree = indptr[1:] - indptr[:-1]
    order = degree * n + xp.arange(n, dtype=np.int64)
    src = rows.ops.arc_rows(indptr, 0, int(indices.shape[0]))
    keep = order[src] < order[indices]
    counts = xp.bincount(src[keep], minlength=n)
    oriented = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counts)])
    return oriented, indices[keep], None if rows.values is None else rows.values[keep]


def _arc_common(rows, exclude_ends: bool, *, upper: bool):
    """The arcs ``u -> v`` of the device's range (``upper``: those with ``u < v``, an edge
    once) and the count of vertices both rows hold, as device arrays."""
    first, end = rows.arc_range()
    u = rows.ops.arc_rows(rows.indptr, first, end)
    v = rows.indices[first:end].astype(np.int64)
    if upper:
        mine = u < v
        u, v = u[mine], v[mine]
    counts = rows.ops.common(rows.device, rows.indptr, rows.indices, u, v, exclude_ends)
    return u, v, counts
