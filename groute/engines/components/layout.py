"""Host-side layout of the connected components engine's graph
(:mod:`groute.engines.components.solver`): the edge list of Groute's design, the symmetric CSR
that Afforest samples, the arcs its sampling rounds leave (and their bitmap), the cut of the rows
across devices, the edge count, and the edges left after sampling.
Pure NumPy (:func:`remaining_edges` takes the array module: it also runs on a device's arrays):
no solver or device state, so each piece is testable on its own.
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import LOOP_CHUNK_ARCS, arc_rows, self_loop_count
from groute.graph.csr import kept_on


def edge_list(graph) -> np.ndarray:
    """The edges CC must hook, as an ``(m, 2)`` int32 array: ``u < v`` of each undirected edge,
    or every non-loop arc of a directed graph (hooking ignores direction: weak components)."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices)
    src = arc_rows(indptr)
    keep = src != indices if graph.directed else src < indices
    edges = np.empty((int(keep.sum()), 2), np.int32)
    edges[:, 0] = src[keep]
    edges[:, 1] = indices[keep]
    return edges


def symmetric_csr(graph):
    """``(indptr int64, indices int32)`` of the undirected version of ``graph``: the graph's own
    arrays when it is undirected; for a directed graph every non-loop arc in both directions,
    each row sorted by neighbour (so the first neighbours are the smallest)."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    indices = np.asarray(graph.indices)
    if not graph.directed:
        return indptr, indices.astype(np.int32, copy=False)
    n = indptr.shape[0] - 1
    src = arc_rows(indptr)
    keep = src != indices
    s, d = src[keep], indices[keep].astype(np.int32, copy=False)
    s2, d2 = np.concatenate([s, d]), np.concatenate([d, s])
    del s, d
    order = np.lexsort((d2, s2))
    sym_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(s2, minlength=n), out=sym_ptr[1:])
    return sym_ptr, np.ascontiguousarray(d2[order])


def late_arcs(indptr, indices, rounds):
    """The arcs ``(src, dst)`` (int32) at slot ``rounds`` or later of their row: those the
    sampling rounds did not link (each row's trailing ``degree - rounds`` arcs; the only
    per-arc temporary is a one-byte mask)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    keep = np.ones(indices.shape[0], bool)
    for r in range(int(rounds)):
        keep[indptr[:-1][deg > r] + r] = False
    src = np.repeat(np.arange(n, dtype=np.int32), np.maximum(deg - int(rounds), 0))
    return src, np.ascontiguousarray(indices[keep])


#: how much more of the sampling work (a share of the whole graph's) the first device takes than
#: each other, in one process. The others describe their arrays after sampling (a compression
#: and a pass over all n) while the first device, which merges the descriptions, samples on;
#: and the first device's rows, the lowest ids, do not sample at the others' rate (a graph's ids
#: are not shuffled). The value is the best measured over both (docs/PR_CC.md, step 0)
DESCRIPTION_SHARE = 0.2

#: the most work the first device takes, as a multiple of an even share: it holds the fullest
#: device's rows, whose bytes the memory bound keeps near an even share of the CSR
#: (docs/notes/memory_share.md)
FIRST_SHARE_BOUND = 1.25


def first_extra(k: int) -> float:
    """How much more of the work the first of ``k`` devices takes than each other in one
    process, for :func:`split_rows`.

    Parameters
    ----------
    k : int
        Devices.

    Returns
    -------
    float
        :data:`DESCRIPTION_SHARE`, or less where that would take the first device's share past
        :data:`FIRST_SHARE_BOUND` times an even one (from four devices on); 0 on one device.
    """
    return min(DESCRIPTION_SHARE, (FIRST_SHARE_BOUND - 1) / (k - 1)) if k > 1 else 0.0


def first_share(k: int, extra: float) -> float:
    """The first of ``k`` devices' share of the work when it takes ``extra`` of the whole more
    than each other device (:func:`split_rows`).

    Parameters
    ----------
    k : int
        Devices.
    extra : float
        The first device's extra work, a share of the whole graph's (:func:`first_extra`).

    Returns
    -------
    float
        ``(1 + extra (k - 1)) / k``; 1 on one device.
    """
    return (1 + extra * (k - 1)) / k if k > 1 else 1.0


def split_rows(indptr, k, rounds, extra: float = 0.0) -> np.ndarray:
    """``k + 1`` vertex offsets cutting the rows into contiguous ranges of work (a visit per
    vertex plus one link per sampling round it has a neighbour for).

    Parameters
    ----------
    indptr : array of int
        The symmetric CSR's row offsets.
    k : int
        Devices.
    rounds : int
        Afforest's sampling rounds.
    extra : float
        How much more of the work the first device takes than each other device, as a share
        of the whole graph's: the others' work after their sampling (their descriptions,
        :func:`first_extra`), which the first device waits for. The others share the
        rest equally. 0: equal ranges.

    Returns
    -------
    numpy.ndarray
        int64 offsets, ``0`` first and ``n`` last, non-decreasing.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    cum = np.cumsum(1 + np.minimum(np.diff(indptr), int(rounds)))
    total = int(cum[-1]) if n else 0
    first = first_share(k, extra)
    ends = first + (1 - first) * np.arange(0, k - 1, dtype=np.float64) / max(k - 1, 1)
    cuts = np.searchsorted(cum, total * ends, side="right")
    return np.concatenate([[0], cuts, [n]]).astype(np.int64)


def late_bitmap(indptr, rounds, *, first: int = 0, n: int | None = None) -> np.ndarray:
    """uint32 words, bit ``u % 32`` of word ``u // 32`` set when vertex ``u`` has arcs from slot
    ``rounds`` on (more than ``rounds`` neighbours). ``indptr``: the rows of vertices
    ``first, first + 1, ...`` of a graph of ``n`` vertices (default: all of them, from 0); the
    other vertices' bits stay clear."""
    late = np.diff(np.asarray(indptr, dtype=np.int64)) > rounds
    if first or (n is not None and n != late.shape[0]):
        whole = np.zeros(late.shape[0] + first if n is None else n, bool)
        whole[first:first + late.shape[0]] = late
        late = whole
    bits = np.packbits(late, bitorder="little")
    words = np.zeros(4 * max(1, -(-bits.shape[0] // 4)), np.uint8)
    words[:bits.shape[0]] = bits
    return words.view("<u4").astype(np.uint32)


#: a hub's degree is at least this many times the graph's mean (meshes and road graphs have
#: none: no vertex there is the first neighbour of many)
HUB_DEGREE_FACTOR = 8


def hub_degree_bound(arcs: int, n: int) -> float:
    """The least degree of a hub: :data:`HUB_DEGREE_FACTOR` times the mean, and at least 1.

    Parameters
    ----------
    arcs : int
        The arcs of the symmetric CSR (all ranks' together, across processes).
    n : int
        The vertex count.

    Returns
    -------
    float
        The bound :func:`hub_arcs` takes as ``least_degree``.
    """
    return max(HUB_DEGREE_FACTOR * int(arcs) / max(int(n), 1), 1.0)


def highest_degree_first(rows, degrees) -> np.ndarray:
    """The one order of the hubs, in one process or across ranks: highest degree first, ties
    by the lower id.

    Parameters
    ----------
    rows : array of int
        Vertex ids.
    degrees : array of int
        Their degrees, position by position.

    Returns
    -------
    numpy.ndarray
        The positions of ``rows`` in that order.
    """
    return np.lexsort((np.asarray(rows), -np.asarray(degrees)))


def hub_arcs(indptr, indices, hubs: int, rounds: int, *, first: int = 0,
             least_degree: float = 1.0):
    """The sampled arcs of the hubs: the first ``rounds`` arcs of each of the (at most)
    ``hubs`` rows of highest degree, which sampling links on the hubs' own device only. On
    several devices every device links them before sampling (``ComponentsSolver._keep_hubs``).

    The rows past the bound are a small share of a power-law graph's (with
    :func:`hub_degree_bound`), so they are picked first and only they are ordered.

    Parameters
    ----------
    indptr, indices : arrays
        Rows of the symmetric CSR (``indptr`` rebased to 0).
    hubs : int
        The most rows to choose (0: none).
    rounds : int
        Sampled arcs per row (``CCTuning.sample_rounds``).
    first : int
        The vertex id of the first row (a rank's rows start there).
    least_degree : float
        The least degree of a hub (:func:`hub_degree_bound`; never below 1).

    Returns
    -------
    degrees : numpy.ndarray
        The chosen rows' degrees, int64, in :func:`highest_degree_first` order.
    arcs : numpy.ndarray
        Their arcs, an ``(h, rounds, 2)`` int32 array of ``(hub, neighbour)`` pairs; a row of
        fewer arcs is padded with ``(hub, hub)`` (a loop links nothing).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    h, rounds = max(int(hubs), 0), max(int(rounds), 0)
    top = _rows_of_degree(indptr, max(least_degree, 1)) if h and rounds else \
        np.zeros(0, np.int64)
    degrees = indptr[top + 1] - indptr[top]
    if top.shape[0] > h:            # the h highest, ties at the cut by the lower id
        cut = np.partition(degrees, top.shape[0] - h)[top.shape[0] - h]
        above = np.flatnonzero(degrees > cut)
        keep = np.concatenate([above, np.flatnonzero(degrees == cut)[:h - above.shape[0]]])
        top, degrees = top[keep], degrees[keep]
    order = highest_degree_first(top, degrees)
    top, degrees = top[order], degrees[order]
    slot = np.arange(rounds)
    has = slot[None, :] < degrees[:, None]
    ids = (top + first).astype(np.int32)
    arcs = np.empty((top.shape[0], rounds, 2), np.int32)
    arcs[:, :, 0] = ids[:, None]
    arcs[:, :, 1] = ids[:, None]
    arcs[:, :, 1][has] = np.asarray(indices)[(indptr[top, None] + slot[None, :])[has]]
    return degrees, arcs


def _rows_of_degree(indptr, least, chunk: int = 1 << 20) -> np.ndarray:
    """The rows (int64, ascending) of degree ``least`` or more, read a cache-sized chunk of
    ``indptr`` at a time: the whole degree array would be 8 bytes a vertex to allocate and fill
    for a few hundred rows."""
    n = indptr.shape[0] - 1
    found = []
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        found.append(lo + np.flatnonzero(indptr[lo + 1:hi + 1] - indptr[lo:hi] >= least))
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def undirected_edge_count(indptr, indices, chunk=LOOP_CHUNK_ARCS) -> int:
    """Non-loop edges of a symmetric CSR (each stored as two arcs); the loops are counted in
    cache-sized row chunks (:func:`groute.graph.arcs.self_loop_count`)."""
    loops = self_loop_count(indptr, indices, chunk)
    return (int(np.asarray(indptr)[-1]) - loops) // 2


def edge_count(graph, indptr, indices) -> int:
    """:func:`undirected_edge_count` of an undirected graph, kept on the graph object
    (``graph._cc_edge_count``) so that CC solvers for other device counts skip the pass."""
    return kept_on(graph, "_cc_edge_count", lambda: undirected_edge_count(indptr, indices))


def remaining_edges(xp, parent, src, dst, giant):
    """The ``(m', 2)`` edges left after sampling: arcs ``(u, v)`` of ``src``/``dst`` whose ``u``
    is not in the giant's tree, each undirected edge once (``u < v``, or ``v`` in the giant's
    tree, where its twin arc is not kept). ``parent`` is fully compressed; ``giant`` an array of 1."""
    g = giant[0]
    pu = parent[src]
    keep = (pu != g) & ((src < dst) | (parent[dst] == g))
    return xp.ascontiguousarray(xp.stack([src[keep], dst[keep]], axis=1))

