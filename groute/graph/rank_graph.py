"""RankGraph: one rank's range of rows of a graph split by contiguous ranges (how it is
loaded: :mod:`groute.graph.ranked`), and what the ranks build from every rank's rows together:
a range's in-arcs (:func:`ranked_in_arcs`), a directed graph's arcs both ways
(:meth:`RankGraph.both_ways`)."""
from __future__ import annotations

import contextlib
import logging

import numpy as np

from .arcs import arc_rows
from .arrays import array_module
from .csr import CSRGraph, rows_pair_weights
from .ids import VertexIds
from .partition import LocalGraph

log = logging.getLogger(__name__)

def whole_rows(graph):
    """``graph``'s rows where one object holds them all: a graph loaded by a job of one rank
    (a :class:`RankGraph` of one part) gives its part (every row, ids unchanged), any other
    graph itself. What reads a graph's rows where a job of one rank asks as one process does
    (the diameter test of the ``auto`` rules, PageRank's dangling vertices)."""
    if isinstance(graph, RankGraph) and graph.num_parts == 1:
        return graph.part
    return graph


def refuse_rank_graph(graph, what: str) -> None:
    """Raise where ``what`` runs on a whole graph in one process and ``graph`` holds only a
    rank's rows (a :class:`RankGraph`).

    Raises
    ------
    ValueError
        Naming ``what``, the graph and how to load it whole.
    """
    if isinstance(graph, RankGraph):
        raise ValueError(f"{what} runs on a whole graph in one process, but {graph.name} was "
                         f"loaded by ranks (groute.distributed.load_graph) and holds only rank "
                         f"{graph.rank}'s rows; load it whole with groute.graph.load_graph")


def loading_ranks(graph):
    """The ranks that loaded ``graph`` by parts, each holding its rows (a :class:`RankGraph` of
    several parts): what a check of the rows must agree over before every rank acts alike.
    None where one object holds every row."""
    if getattr(graph, "num_parts", 1) > 1:
        return getattr(graph, "ranks", None)
    return None


class RankGraph:
    """Rank ``rank``'s rows of a graph split by ranges (module docstring). Global facts
    (``num_vertices``, ``num_edges``, ``directed``, ``name``, ids) are the whole graph's;
    ``part`` (a :class:`~groute.graph.partition.LocalGraph`) holds this rank's rows, whose
    targets are global vertex ids; ``offsets`` bound every rank's range."""

    def __init__(self, part: LocalGraph, offsets, *, num_edges: int, name: str, id_base: int = 0,
                 labels=None):
        self.part = part
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.rank = part.part
        self.num_vertices = int(self.offsets[-1])
        self.num_edges = int(num_edges)
        self.directed = bool(part.directed)
        self.name = name
        self.id_base = int(id_base)
        self.file_ids = labels
        self.vertex_ids = VertexIds(self.num_vertices, base=self.id_base, labels=labels, name=name)
        #: the ranks that loaded it (set by the loader that has them; None otherwise)
        self.ranks = None
        #: every rank's host memory while loading (:class:`~groute.graph.ranked.LoadMemory`),
        #: when the loader measured it
        self.load_memory = None

    @property
    def num_parts(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def first(self) -> int:
        return self.part.first

    @property
    def end(self) -> int:
        return self.part.end

    @property
    def weights(self):
        """This rank's arcs' weights (None when the graph has none)."""
        return self.part.weights

    def to_host(self) -> "RankGraph":
        return self

    def vertex_of(self, ident, what: str = "id"):
        return self.vertex_ids.position_of(ident, what)

    def file_id_of(self, v):
        return self.vertex_ids.id_of(v)

    def with_weights(self, seed: int = 0, low: int = 1, high: int = 64) -> "RankGraph":
        """This part with the random weights :meth:`CSRGraph.with_weights
        <groute.graph.CSRGraph.with_weights>` gives the whole graph's arcs."""
        p = self.part
        part = LocalGraph(p.part, p.first, p.indptr, p.indices,
                          rows_pair_weights(np.asarray(p.indptr), np.asarray(p.indices),
                                            self.num_vertices, seed, low, high, first=p.first),
                          num_global_vertices=p.num_global_vertices, directed=p.directed,
                          name=p.name)
        out = RankGraph(part, self.offsets, num_edges=self.num_edges, name=self.name,
                        id_base=self.id_base, labels=self.file_ids)
        out.ranks, out.load_memory = self.ranks, self.load_memory
        return out

    def describe_across_ranks(self) -> str:
        """The whole graph's facts, the same on every rank (each holds another part): how a
        call's check that every rank passed the same arguments sees it
        (:meth:`groute.runtime.ranks.Ranks.check_same_call`)."""
        return (f"the graph {self.name!r} ({self.num_vertices:,} vertices, {self.num_edges:,} "
                f"arcs, {'directed' if self.directed else 'undirected'}, "
                f"{'weighted' if self.weights is not None else 'unweighted'})")

    def edges(self):
        """This rank's arcs as COO ``(src, dst)`` (src int64: global ids)."""
        p = self.part
        return (np.repeat(np.arange(p.first, p.end, dtype=np.int64), np.diff(np.asarray(p.indptr))),
                p.indices)

    def both_ways(self) -> "RankGraph":
        """The undirected graph in which every arc of this directed graph counts at both its
        ends, as this rank's part: each vertex's row holds its out-arcs' targets and its
        in-arcs' sources (those from every rank's out-arcs, one alltoallv:
        :func:`ranked_in_arcs`), repeats kept, so a pair of opposite arcs is two arcs each way
        (``CSRGraph.from_edges`` of both directions with ``dedupe=False``: the whole graph's
        reading in one process); no weights. A collective over the ranks that loaded it (every
        rank calls it)."""
        p = self.part
        indptr = np.asarray(p.indptr, dtype=np.int64)
        in_indptr, sources, _ = ranked_in_arcs(self, self.ranks)
        mine = np.arange(p.first, p.end, dtype=np.int64)
        src = np.concatenate([np.repeat(mine, np.diff(indptr)),
                              np.repeat(mine, np.diff(in_indptr))])
        dst = np.concatenate([np.asarray(p.indices, dtype=np.int64), sources.astype(np.int64)])
        order = np.lexsort((dst, src))
        both = np.zeros(p.num_vertices + 1, dtype=np.int64)
        np.cumsum(np.diff(indptr) + np.diff(in_indptr), out=both[1:])
        part = LocalGraph(p.part, p.first, both, dst[order].astype(np.int32), None,
                          num_global_vertices=p.num_global_vertices, directed=False, name=p.name)
        out = RankGraph(part, self.offsets, num_edges=2 * self.num_edges, name=self.name,
                        id_base=self.id_base, labels=self.file_ids)
        out.ranks = self.ranks
        return out

    def split_by_ranges(self, k: int, method: str = "contiguous") -> "RangeSplit":
        """The split of this graph over ``k`` devices: its ranges (``method`` cannot change
        that, and is logged when it asks otherwise); ValueError unless ``k`` is its part
        count."""
        if int(k) != self.num_parts:
            raise ValueError(f"{self.name} was loaded by {self.num_parts} ranks, split into {k} "
                             f"parts; a graph loaded by ranks runs on a context of as many "
                             f"devices")
        if method not in (RangeSplit.method, "auto"):
            log.info("%s was loaded by ranks: split by its ranges, not %s", self.name, method)
        return RangeSplit(self)

    def gather(self, ranks) -> CSRGraph:
        """The whole graph, put together from every rank's rows (a collective: every rank
        calls it and gets the graph; for checks and small graphs)."""
        p = self.part
        degrees = np.concatenate(ranks.allgatherv(np.diff(np.asarray(p.indptr)).astype(np.int64)))
        indptr = np.zeros(self.num_vertices + 1, dtype=np.int64)
        np.cumsum(degrees, out=indptr[1:])
        indices = np.concatenate(ranks.allgatherv(np.asarray(p.indices, dtype=np.int32)))
        weights = None
        if p.weights is not None:
            weights = np.concatenate(ranks.allgatherv(np.asarray(p.weights)))
        return CSRGraph(indptr, indices, weights, directed=self.directed, name=self.name,
                        id_base=self.id_base, file_ids=self.file_ids)

    def __repr__(self):
        return (f"RankGraph({self.name!r}: rank {self.rank} of {self.num_parts} holds vertices "
                f"[{self.first}, {self.end}) of {self.num_vertices:,}, {self.part.num_edges:,} of "
                f"{self.num_edges:,} arcs)")


def ranked_in_arcs(graph: RankGraph, ranks, values=None, *, device=None):
    """The in-arcs of this rank's vertices: ``(in_indptr int64 from 0, sources int32, in_values)``,
    each row's sources ascending as :func:`groute.graph.arcs.in_arcs` orders them, from every
    rank's out-arcs (sent to their targets' ranks: :func:`arcs_to_owners`). ``values``: one per
    out-arc of this rank (an arc's weight or factor), carried to the in-arc (None: none).
    ``device``: the rank's device, which packs and sorts the arcs in its memory and keeps
    ``sources`` and ``in_values`` there (None: the host, NumPy)."""
    with _on(device) as xp:
        keys = in_arc_keys(graph.part, xp)
        moved = None if values is None else xp.asarray(np.asarray(values, dtype=np.float64))
        return arcs_to_owners(keys, graph.offsets, ranks, values=moved,
                              what=f"the in-arcs of {graph.name}")


def in_arc_keys(part, xp, rank=None):
    """Each out-arc ``u -> v`` of a rank's rows ``part`` (a
    :class:`~groute.graph.partition.LocalGraph`) as the key of the in-arc it is,
    ``v << KEY_SHIFT | u``, in ``xp``'s memory (uint64, the out-arcs' order); with ``rank``
    (an array of ``xp``: each vertex's new id) ``rank[v] << KEY_SHIFT | rank[u]``."""
    indptr = xp.asarray(np.asarray(part.indptr, dtype=np.int64))
    targets = xp.asarray(np.asarray(part.indices))
    sources = arc_rows(indptr, int(targets.shape[0]), xp=xp, dtype=np.int64)
    del indptr
    sources += part.first
    if rank is not None:
        targets, sources = rank[targets], rank[sources]
    keys = targets.astype(xp.uint64) << KEY_SHIFT
    del targets
    keys |= sources.astype(xp.uint64)
    return keys


@contextlib.contextmanager
def _on(device):
    """The array module of ``device`` (NumPy for None), with its compute stream current: the
    arrays made in the block are that device's, ordered with its kernels."""
    if device is None:
        yield np
        return
    with device.on_compute():
        yield device.xp


#: an arc's key is ``row << KEY_SHIFT | col`` (uint64; ids below 2^31)
KEY_SHIFT = np.uint64(32)
_COL_MASK = np.uint64(0xFFFFFFFF)


def arcs_to_owners(keys, offsets, ranks, *, values=None, what: str = "arcs"):
    """Every rank's arcs, each sent to the rank that owns its row under ``offsets`` (rank
    ``r``: rows ``[offsets[r], offsets[r+1])``, ids below 2^31): this rank's rows. One
    alltoall of counts and one alltoallv of the keys (a second of the values, if any).

    Parameters
    ----------
    keys : numpy.ndarray or cupy.ndarray of uint64
        One key per arc, ``row << KEY_SHIFT | col``; sorted in place without ``values``. On a GPU
        (CuPy, with the device's stream current) they are sorted there and only the exchange
        passes through host memory.
    offsets : array of int
        The rows' owners' ranges, one more than the ranks.
    ranks : Ranks
        The job's ranks (:class:`groute.runtime.ranks.Ranks`).
    values : array of float, optional
        One per arc (an arc's weight or factor), carried with it; in the keys' memory.
    what : str
        What the arcs are, for an error in the exchange.

    Returns
    -------
    tuple
        ``(indptr int64 from 0, cols int32, values float64 or None)`` of this rank's rows,
        each row's columns ascending, repeated arcs in their senders' order (rank by rank);
        ``indptr`` on the host, ``cols`` and ``values`` in the keys' memory.

    Notes
    -----
    Each rank sorts its own keys, so the rows' owners are runs of them, cut by a search, and
    what arrives is one sorted run per rank, which a stable sort merges (NumPy's timsort
    finds the runs in about a pass; a GPU's radix sort does not need them). The keys are
    sent as they lie, with no copy on the host.

    Examples
    --------
    >>> import numpy as np
    >>> from groute.runtime.ranks import Ranks       # doctest: +SKIP
    >>> keys = np.array([1 << 32 | 5, 0 << 32 | 7], np.uint64)
    >>> arcs_to_owners(keys, [0, 2], Ranks())       # doctest: +SKIP
    (array([0, 1, 2]), array([7, 5], dtype=int32), None)
    """
    xp = array_module(keys)
    if getattr(keys, "dtype", None) != np.uint64 or getattr(keys, "ndim", 0) != 1:
        raise TypeError(f"{what}: arcs_to_owners takes one-dimensional uint64 keys (row << "
                        f"KEY_SHIFT | col), got {getattr(keys, 'dtype', type(keys).__name__)} "
                        f"of shape {getattr(keys, 'shape', None)}")
    keys = xp.ascontiguousarray(keys)
    offsets = np.asarray(offsets, dtype=np.int64)
    if int(offsets[-1]) > 2**31:
        raise ValueError(f"{what}: rows are ids below 2^31 (int32 columns), got "
                         f"{int(offsets[-1]):,} rows")
    order = None
    if values is None:
        keys.sort()
    else:
        order = xp.argsort(keys, kind="stable")
        keys = keys[order]
    bounds = offsets.astype(np.uint64) << KEY_SHIFT
    cuts = _host(xp.searchsorted(keys, xp.asarray(bounds))).astype(np.int64)
    send_counts = np.diff(cuts) * keys.itemsize
    recv_counts = ranks.alltoall_counts(send_counts, what)
    got = _exchanged(keys, send_counts, recv_counts, ranks, what)
    del keys
    moved = None
    if values is None:
        got = xp.asarray(got)
        got.sort(kind="stable")
    else:
        sent = xp.asarray(values, dtype=np.float64)[order]
        del order
        moved = xp.asarray(_exchanged(sent, send_counts, recv_counts, ranks, what))
        del sent
        got = xp.asarray(got)
        merged = xp.argsort(got, kind="stable")
        got, moved = got[merged], moved[merged]
        del merged
    first, end = int(offsets[ranks.rank]), int(offsets[ranks.rank + 1])
    rows = np.arange(first, end + 1, dtype=np.uint64) << KEY_SHIFT
    indptr = _host(xp.searchsorted(got, xp.asarray(rows))).astype(np.int64)
    return indptr, _low_halves(got, xp), moved


def _host(array) -> np.ndarray:
    """A host copy of a small device array (NumPy's as it is)."""
    return array if isinstance(array, np.ndarray) else array.get()


def _exchanged(sent, send_counts, recv_counts, ranks, what: str) -> np.ndarray:
    """``sent`` (runs for each rank, ``send_counts`` bytes each) after the alltoallv: what
    every rank sent here, in rank order, in host memory. Host arrays are sent as they lie; a
    device's come to the host first (the ranks' exchange is host memory)."""
    host = _host(sent)
    got = np.empty(int(recv_counts.sum()) // host.itemsize, host.dtype)
    ranks.alltoallv_bytes(host.view(np.uint8), send_counts, got.view(np.uint8), recv_counts,
                          what)
    return got


def _low_halves(keys, xp):
    """The columns of sorted keys as int32 (their low 32 bits; used up on the host)."""
    if xp is np:
        keys &= _COL_MASK
        return keys.astype(np.int32)
    return (keys & _COL_MASK).astype(np.int32)


class _Same:
    """The identity as an index: ``_Same()[positions]`` is ``positions`` (an array)."""

    def __getitem__(self, positions):
        return np.asarray(positions, dtype=np.int64)


class RangeSplit:
    """How a :class:`RankGraph` is split over the devices of its job: by its ranges, vertices
    keeping their ids (what :func:`groute.graph.partition_graph` gives for one). It answers
    what a :class:`~groute.graph.partition.Partition` does, but :meth:`local` holds only this
    rank's part."""

    method = "contiguous"
    #: old id -> new id and back: the same (a RangeSplit renumbers nothing)
    perm = iperm = None
    renumbers = False

    def __init__(self, graph: RankGraph):
        self.graph = graph
        self.perm = self.iperm = _Same()
        self.offsets = graph.offsets
        self.stats = {"method": self.method, "identity": True, "num_parts": graph.num_parts}

    @property
    def num_parts(self) -> int:
        return self.graph.num_parts

    def part_range(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def local(self, i: int) -> LocalGraph:
        if i != self.graph.rank:
            raise ValueError(f"part {i} of {self.graph.name} is rank {i}'s; rank "
                             f"{self.graph.rank} holds part {self.graph.rank} only")
        return self.graph.part

    def owner_of_new(self, ids):
        return np.searchsorted(self.offsets, ids, side="right") - 1

    def to_original(self, values):
        return values

    def to_new(self, values):
        return values
