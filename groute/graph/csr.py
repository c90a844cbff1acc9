"""The compressed-sparse-row graph every other part of groute consumes.

A :class:`CSRGraph` is three arrays and a few facts: ``indptr`` (int64, |V|+1), ``indices``
(int32 while |V| < 2**31, the targets of the out-arcs of vertex v in
``indices[indptr[v]:indptr[v+1]]``, sorted within each row), optional ``weights`` aligned with
``indices``, and whether it is ``directed`` (``False`` means symmetric: every arc is stored in
both directions). Vertex ids are 0-based internally; :meth:`file_id_of` / :meth:`vertex_of` map
to and from the ids written in the source file.

The arrays may be NumPy or CuPy arrays: the structural helpers are written once against the
array module of the graph (``xp``), which is how the generators build identical graphs on both
backends. CuPy is only ever imported lazily.
"""
from __future__ import annotations

import functools
import hashlib
import logging

import numpy as np

from ..ints import is_int
from . import rng as _rng
from .arcs import arc_rows, relabelled_arcs, row_chunks
from .arrays import array_module, index_dtype, vertex_outside, weight_codes
from .ids import VertexIds, label_array
from .symmetry import unmatched_arc

log = logging.getLogger(__name__)

#: arcs per step of :meth:`CSRGraph.with_weights` on the host (cache-sized temporaries)
WEIGHT_CHUNK_ARCS = 1 << 20

def sorted_unique(a, xp=None, *, overwrite: bool = False):
    """Sorted distinct values of a 1-D array: sort plus neighbour compare.

    Used instead of ``xp.unique``, which is far slower on large integer arrays in recent NumPy
    (hash-based) and whose algorithm differs between backends. ``overwrite``: sort ``a`` in
    place (no sorted copy beside it; for a caller that drops ``a``).
    """
    xp = xp or array_module(a)
    if overwrite:
        a.sort()
        s = a
    else:
        s = xp.sort(a)
    if s.shape[0] < 2:
        return s
    keep = xp.empty(s.shape[0], dtype=bool)
    keep[0] = True
    xp.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def weights_for_sort(w):
    """Weights as float32/int32 (what the graph stores) before they are sorted with the arcs."""
    return weight_array(w)


def _sort_weighted(keys, weights, n, xp, dedupe):
    """Sort arcs by key (then weight); with ``dedupe`` keep each key once with its least weight.

    When key and weight code fit in 64 bits together (e.g. roadNet-CA with weights up to 2**22)
    one plain sort of packed words does it: several times faster than an argsort, and equal
    packed words are identical, so the result does not depend on the sort algorithm.
    """
    codes, wbits, decode = weight_codes(weights, xp)
    kbits = max(1, (n * n - 1).bit_length()) if n > 1 else 1
    if kbits + wbits <= 64:
        packed = xp.sort((keys << xp.uint64(wbits)) | codes)
        del codes
        keys = packed >> xp.uint64(wbits)
        weights = decode(packed & xp.uint64((1 << wbits) - 1))
        del packed
    else:                                   # two stable sorts: lightest first among equal keys
        order = xp.argsort(weights, kind="stable")
        order = order[xp.argsort(keys[order], kind="stable")]
        keys, weights = keys[order], weights[order]
        del order
    if dedupe and keys.shape[0] > 1:
        first = xp.ones(keys.shape[0], dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys, weights = keys[first], weights[first]
    return keys, weights


def _arc_ends(name: str, ids, n: int):
    """``ids`` (a 1-D array of vertex ids, argument ``name``) checked against a graph of ``n``
    vertices: integers (an empty array of any type stands for none), each in ``0..n-1``. An
    id past that range would be packed into another arc's key, a float cut to an int."""
    if ids.ndim != 1:
        raise ValueError(f"{name} is a 1-D array of vertex ids, got shape {ids.shape}")
    if not ids.size:
        return ids.astype(array_module(ids).int64)
    outside = vertex_outside(ids, n, f"{name}'s vertex ids")
    if outside is not None:
        at, value = outside
        raise ValueError(f"{name}[{at}] = {value} is not a vertex of a graph of {n} vertices "
                         f"({f'0..{n - 1}' if n else 'it has none'})")
    return ids


def _as_array(a):
    if a is None:
        return None
    if isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__"):
        return a
    return np.asarray(a)


#: why a finite float past float32's range is refused (it would become infinite)
PAST_FLOAT32 = "is past float32's range (about 3.4e38), which groute's weights are stored in"


#: why an integer weight cannot be stored (it follows "the weight ... ")
PAST_INT32 = ("does not fit in int32, which groute's integer weights are stored in (give float "
              "weights, or scale them)")


def unstorable_weight(w, stored=None):
    """The first weight that groute's weight arrays cannot hold, and why.

    One rule for :func:`weight_array` (which names the arc), the readers (the line) and the
    NetworkX conversion (the edge): a float past float32's range (it would become infinite),
    a nonzero float that float32 holds as 0, an integer past int32.

    Parameters
    ----------
    w : array
        Weights, NumPy or CuPy, of any numeric dtype.
    stored : array, optional
        ``w`` cast to float32 already, where the caller keeps that cast (not made twice).

    Returns
    -------
    tuple or None
        ``(position, why)``, ``why`` a phrase that follows "the weight ... "; None when every
        weight can be stored.
    """
    if not w.size:
        return None
    kind = w.dtype.kind
    if kind == "f" and w.dtype != np.float32:
        size = abs(w)
        past = (size > float(np.finfo(np.float32).max)) & (size != np.inf)
        if bool(past.any()):
            return int(past.argmax()), PAST_FLOAT32
        stored = w.astype(np.float32) if stored is None else stored
        lost = (stored == 0) & (w != 0)
        if bool(lost.any()):
            return int(lost.argmax()), ("is below float32's smallest (about 1.4e-45), which "
                                        "groute's weights are stored in, and would be 0 "
                                        "(scale the weights)")
    if kind in "iub" and not np.can_cast(w.dtype, np.int32):
        # the bounds as Python ints only once the values are known to pass one: CuPy's
        # comparison of an unsigned or narrow array with an out-of-range int is not NumPy's
        low, high = int(w.min()), int(w.max())
        if low < -2**31 or high > 2**31 - 1:
            out = w == (low if low < -2**31 else high)
            return int(out.argmax()), PAST_INT32
    return None


def weight_array(w):
    """Weights as the kernels expect them: float32 for real values, int32 for integers.

    Parameters
    ----------
    w : array-like or None
        Weights aligned with the arcs (NumPy or CuPy); None for an unweighted graph.

    Returns
    -------
    array or None
        ``w`` as float32 or int32 (``w`` itself where it is one already).

    Raises
    ------
    ValueError
        A value that float32 or int32 cannot hold (:func:`unstorable_weight`), named with its
        arc's position.
    """
    if w is None:
        return None
    w = _as_array(w)
    kind = w.dtype.kind
    if kind not in "fiub":
        mixed = " (values of mixed or non-numeric types)" if kind == "O" else ""
        raise TypeError(f"weights are real numbers (floats or integers), got an array of "
                        f"{w.dtype}{mixed}")
    cast = w.dtype not in (np.float32, np.int32)
    with np.errstate(over="ignore"):           # what overflows is refused just below
        out = w.astype(np.float32 if kind == "f" else np.int32) if cast else w
    bad = unstorable_weight(w, stored=out if kind == "f" else None)
    if bad is not None:
        at, why = bad
        raise ValueError(f"the weight {w[at].item()!r} of arc {at} {why}")
    return out


def kept_on(graph, name: str, compute):
    """``getattr(graph, name)``, or ``compute()`` kept there for the next caller: derived data
    that several solvers of one graph need (in-degrees, a layout, a transpose) is built once per
    graph object. Objects that take no new attributes just get the value, recomputed per call."""
    value = getattr(graph, name, None)
    if value is None:
        value = compute()
        try:
            setattr(graph, name, value)
        except AttributeError:
            pass
    return value


def host_array(a, device):
    """``a`` as a NumPy array: copied back through ``device`` (the one a graph was moved to by
    ``to_device``; a CPU virtual device keeps its own memory) where it has ``to_host``, else by
    CuPy's ``.get()``; ``None`` (no weights) stays ``None``. One copy-back for the ``to_host``
    of a whole graph and of a device's share of one (:class:`~groute.graph.partition.LocalGraph`)."""
    if a is None:
        return None
    if device is not None and hasattr(device, "to_host"):
        return np.asarray(device.to_host(a))
    return a.get()


class CSRArrays:
    """What any holder of CSR arrays reads off its own ``indptr`` and ``indices``, the same way
    for a whole :class:`CSRGraph` and for one device's share of it
    (:class:`~groute.graph.partition.LocalGraph`)."""

    @property
    def num_vertices(self) -> int:
        """Rows: ``len(indptr) - 1`` (a share: the vertices it owns)."""
        return int(self.indptr.shape[0]) - 1

    @property
    def num_edges(self) -> int:
        """Stored arcs (``len(indices)``); an undirected edge counts twice."""
        return int(self.indices.shape[0])

    @property
    def xp(self):
        """The array module (numpy or cupy) the arrays live in."""
        return array_module(self.indices)

    def degrees(self):
        """Out-degree of every row (int64: the indptr's dtype)."""
        return self.indptr[1:] - self.indptr[:-1]



def pair_weights(src, dst, n: int, seed: int = 0, low: int = 1, high: int = 64, xp=np):
    """The random integer weights (int32, in ``[low, high]``) of :meth:`CSRGraph.with_weights`
    for the arcs ``src -> dst`` of a graph of ``n`` vertices: a hash of the unordered pair and
    the seed, so any subset of a graph's arcs (one rank's rows) gets the weights the whole
    graph gives them."""
    nn = xp.uint64(max(int(n), 1))
    src, dst = xp.asarray(src).astype(xp.int64), xp.asarray(dst).astype(xp.int64)
    pair = xp.minimum(src, dst).astype(xp.uint64) * nn + xp.maximum(src, dst).astype(xp.uint64)
    return _rng.bounded(_rng.hash_counters(pair, seed, 0x5EED, xp), low, high, xp).astype(xp.int32)

def rows_pair_weights(indptr, indices, n: int, seed: int = 0, low: int = 1, high: int = 64, *,
                      first: int = 0, xp=None):
    """:func:`pair_weights` of the arcs of rows ``indptr`` (from 0), ``indices`` (global
    targets), the rows of vertices ``first, first + 1, ...`` of a graph of ``n`` vertices:
    int32, on the rows' module. Computed in row-aligned chunks of about
    :data:`WEIGHT_CHUNK_ARCS` arcs (no arc-sized int64 temporaries), on ``xp`` (default: the
    rows' module; CuPy for host rows hashes on the GPU, chunk by chunk)."""
    gx = array_module(indices)
    xp = xp or gx
    host_ip = indptr if gx is np else indptr.get()
    rows = int(host_ip.shape[0]) - 1
    w = gx.empty(int(host_ip[-1]), dtype=gx.int32)
    step = WEIGHT_CHUNK_ARCS if xp is np else WEIGHT_CHUNK_ARCS * 64
    for r, e in row_chunks(host_ip, 0, rows, step):
        a, b = int(host_ip[r]), int(host_ip[e])
        if a == b:
            continue
        ip = xp.asarray(host_ip[r:e + 1] - a) if xp is not gx else indptr[r:e + 1] - a
        src = arc_rows(ip, b - a, xp=xp, dtype=np.int64) + (first + r)
        dst = xp.asarray(indices[a:b]).astype(xp.int64)
        chunk = pair_weights(src, dst, n, seed, low, high, xp)
        del src, dst
        if gx is np and xp is not np:
            chunk.get(out=w[a:b])
        else:
            w[a:b] = chunk if xp is gx else gx.asarray(chunk)
    return w


class CSRGraph(CSRArrays):
    """A graph in CSR form, validated on construction (see the module docstring).

    ``name`` is for messages and caches (file stem or spec). ``source`` is the file it was read
    from, if any. The graph's own vertex ids (:attr:`ids`) are ``v + id_base`` (1 for Matrix
    Market and DIMACS, 0 for generated graphs) unless ``file_ids`` is given: one id per vertex,
    ``file_ids[v]`` the id of internal vertex ``v`` (SNAP: the original, sparse ids; NetworkX:
    the node labels, any hashable objects).
    """

    def __init__(self, indptr, indices, weights=None, *, directed: bool = True, name: str = "",
                 source=None, id_base: int = 0, file_ids=None, validate: bool = True):
        self.indptr = _as_array(indptr)
        self.indices = _as_array(indices)
        self.weights = weight_array(weights)
        self.directed = bool(directed)
        self.name = str(name)
        self.source = source
        self.id_base = int(id_base)
        self.file_ids = None if file_ids is None else label_array(file_ids)
        self.device = None
        self._vertex_ids = None
        if validate:
            self.validate()

    # ------------------------------------------------------------------ basic facts
    # num_vertices, num_edges, xp: from CSRArrays
    @property
    def weighted(self) -> bool:
        return self.weights is not None

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.indptr, self.indices, self.weights) if a is not None))

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        w = f", weights={self.weights.dtype}" if self.weights is not None else ""
        where = "" if self.xp is np else ", on device"
        return (f"CSRGraph({self.name!r}, {self.num_vertices:,} vertices, {self.num_edges:,} arcs, "
                f"{kind}{w}{where})")

    def validate(self, *, symmetry: bool = True) -> "CSRGraph":
        """Check the CSR invariants; raise ValueError saying which one is broken.

        Parameters
        ----------
        symmetry : bool, optional
            Also check that an undirected graph holds every arc's reverse (a linear pass over
            the arcs); off for a graph checked so before (a cache of one).

        Returns
        -------
        CSRGraph
            The graph itself.
        """
        xp = self.xp
        ip, ix = self.indptr, self.indices
        if ip.ndim != 1 or ip.shape[0] < 1:
            raise ValueError("indptr must be a 1-D array of length num_vertices + 1")
        if ix.ndim != 1:
            raise ValueError("indices must be a 1-D array")
        if ip.dtype != np.int64:
            raise ValueError(f"indptr must be int64, got {ip.dtype}")
        if ix.dtype.kind not in "iu":
            raise ValueError(f"indices must be integers, got {ix.dtype}")
        n = self.num_vertices
        if int(ip[0]) != 0:
            raise ValueError(f"indptr[0] must be 0, got {int(ip[0])}")
        if int(ip[-1]) != ix.shape[0]:
            raise ValueError(f"indptr[-1] = {int(ip[-1])} but there are {ix.shape[0]} indices")
        if n > 0 and bool(xp.any(ip[1:] < ip[:-1])):
            bad = int(xp.flatnonzero(ip[1:] < ip[:-1])[0])
            raise ValueError(f"indptr is not monotone: indptr[{bad + 1}] < indptr[{bad}]")
        if ix.shape[0]:
            lo, hi = int(ix.min()), int(ix.max())
            if lo < 0 or hi >= n:
                raise ValueError(f"indices out of range [0, {n}): min {lo}, max {hi}")
        if self.weights is not None:
            if self.weights.shape != ix.shape:
                raise ValueError(f"weights has shape {self.weights.shape}, indices {ix.shape}")
        if self.file_ids is not None:
            if self.file_ids.shape[0] != n:
                raise ValueError(f"file_ids has {self.file_ids.shape[0]} entries for {n} "
                                 f"vertices")
            twice = self.vertex_ids.repeated_label()
            if twice is not None:
                raise ValueError(f"file_ids repeat: {twice!r} names two vertices")
        if symmetry and not self.directed:
            arc = unmatched_arc(ip, ix, self.weights, n)
            if arc is not None:
                u, v = (self.file_id_of(x) for x in arc)
                same = " of the same weight" if self.weights is not None else ""
                raise ValueError(
                    f"directed=False but the arc {u!r} -> {v!r} has no arc {v!r} -> {u!r}"
                    f"{same}: an undirected graph stores every edge in both directions "
                    f"(build it directed and call .symmetrize())")
        return self

    def _like(self, indptr, indices, weights, *, directed=None, name=None, validate=False,
              keep_ids=True) -> "CSRGraph":
        g = CSRGraph(indptr, indices, weights,
                     directed=self.directed if directed is None else directed,
                     name=self.name if name is None else name, source=self.source,
                     id_base=self.id_base if keep_ids else 0,
                     file_ids=self.file_ids if keep_ids else None, validate=validate)
        g.device = self.device
        return g

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(cls, src, dst, num_vertices: int, weights=None, *, directed: bool = True,
                   dedupe: bool = True, drop_self_loops: bool = False, name: str = "",
                   xp=None, **kwargs) -> "CSRGraph":
        """Build a CSR graph from arc lists (any order), on whichever backend the arrays are.

        Rows come out sorted by target. With ``dedupe`` repeated arcs are merged keeping the
        smallest weight (the one a shortest path would use). The sort is on unique 64-bit keys
        ``src * n + dst`` (ties only between equal arcs), so NumPy and CuPy give the same arrays.
        """
        xp = xp or array_module(src)
        if not is_int(num_vertices) or num_vertices < 0:
            raise (ValueError if is_int(num_vertices) else TypeError)(
                f"num_vertices is a count of vertices, an int >= 0, got {num_vertices!r}")
        n = int(num_vertices)
        if n >= 2**32:
            raise ValueError("graphs with 2**32 or more vertices are not supported")
        src = _arc_ends("src", xp.asarray(src), n)
        dst = _arc_ends("dst", xp.asarray(dst), n)
        if src.shape != dst.shape:
            raise ValueError(f"src and dst differ in length: {src.shape} vs {dst.shape}")
        if weights is not None:
            weights = xp.asarray(weights)
            if weights.ndim != 1:
                raise ValueError(f"weights is a 1-D array, one weight per arc, got shape "
                                 f"{weights.shape}")
            if weights.shape != src.shape:
                raise ValueError(f"weights has {weights.size} value"
                                 f"{'' if weights.size == 1 else 's'} for {src.size} arcs: one "
                                 f"weight per arc")
        if drop_self_loops:
            keep = src != dst
            src, dst = src[keep], dst[keep]
            if weights is not None:
                weights = weights[keep]
        keys = src.astype(xp.uint64) * xp.uint64(n) + dst.astype(xp.uint64)
        del src, dst
        if weights is None:
            keys = sorted_unique(keys, xp) if dedupe else xp.sort(keys)
        else:
            keys, weights = _sort_weighted(keys, weights_for_sort(weights), n, xp, dedupe)
        return cls.from_sorted_keys(keys, n, weights, directed=directed, name=name, xp=xp, **kwargs)

    @classmethod
    def from_sorted_keys(cls, keys, num_vertices: int, weights=None, *, xp=None,
                         **kwargs) -> "CSRGraph":
        """Build from sorted arc keys ``src * n + dst`` (uint64), weights aligned with them."""
        xp = xp or array_module(keys)
        n = int(num_vertices)
        nn = xp.uint64(max(n, 1))
        src_sorted = (keys // nn).astype(xp.int64)
        indices = (keys % nn).astype(index_dtype(n))
        indptr = xp.searchsorted(src_sorted, xp.arange(n + 1, dtype=xp.int64), side="left")
        del src_sorted
        return cls(indptr.astype(xp.int64), indices, weights, **kwargs)

    @classmethod
    def from_scipy(cls, matrix, *, directed: bool = True, name: str = "", **kwargs) -> "CSRGraph":
        """Wrap a square scipy sparse matrix (its values become the weights)."""
        m = matrix.tocsr()
        m.sort_indices()
        if m.shape[0] != m.shape[1]:
            raise ValueError(f"adjacency matrix must be square, got {m.shape}")
        return cls(m.indptr.astype(np.int64), m.indices.astype(index_dtype(m.shape[0])),
                   m.data, directed=directed, name=name, **kwargs)

    # ------------------------------------------------------------------ views
    def edges(self):
        """The arcs as COO ``(src, dst)`` arrays (src int64, dst as ``indices``)."""
        # CuPy's repeat takes no per-element counts; arc_rows handles both backends
        src = arc_rows(self.indptr, self.num_edges, xp=self.xp, dtype=np.int64)
        return src, self.indices

    def neighbors(self, v: int):
        """Out-neighbours of vertex ``v``."""
        return self.indices[self.indptr[v]:self.indptr[v + 1]]

    def degree_stats(self) -> dict:
        """Vertex/arc counts and out-degree statistics, as plain Python numbers."""
        d = self.degrees()
        if self.xp is not np:
            d = d.get()
        n = self.num_vertices
        if n == 0:
            return dict(num_vertices=0, num_edges=0, directed=self.directed, min=0, max=0,
                        mean=0.0, median=0.0, std=0.0, isolated=0, p99=0.0, top1pct_arc_share=0.0)
        top = max(1, n // 100)
        top_share = float(np.sort(d)[-top:].sum() / max(1, d.sum()))
        return dict(num_vertices=n, num_edges=self.num_edges, directed=self.directed,
                    min=int(d.min()), max=int(d.max()), mean=float(d.mean()),
                    median=float(np.median(d)), std=float(d.std()),
                    isolated=int(np.count_nonzero(d == 0)), p99=float(np.percentile(d, 99)),
                    top1pct_arc_share=top_share)

    def to_scipy(self):
        """The adjacency matrix as ``scipy.sparse.csr_matrix`` (weights, or ones)."""
        import scipy.sparse as sp
        g = self.to_host()
        data = g.weights if g.weights is not None else np.ones(g.num_edges, dtype=np.float32)
        return sp.csr_matrix((data, g.indices, g.indptr), shape=(g.num_vertices, g.num_vertices))

    def to_networkx(self, *, directed: bool | None = None):
        """The graph as NetworkX's ``Graph`` (undirected) or ``DiGraph`` (directed, or
        ``directed=True``: every arc), its nodes the positions ``0..n-1``, no edge attributes:
        what a check against NetworkX's algorithms (``--verify``, the benchmark's peers and
        the tests) builds. Repeated arcs are one edge, as NetworkX keeps them."""
        import networkx as nx
        g = self.to_host()
        directed = bool(g.directed) if directed is None else directed
        G = nx.DiGraph() if directed else nx.Graph()
        G.add_nodes_from(range(g.num_vertices))
        src, dst = g.edges()
        G.add_edges_from(zip(np.asarray(src).tolist(), np.asarray(dst).tolist()))
        return G

    def content_hash(self) -> str:
        """SHA-1 over the arrays, weights included (and direction): the key of caches whose
        contents depend on the weights (benchmark references). Computed once per graph object,
        since every app's reference asks for it and a big graph takes seconds to hash: a
        graph's arrays are not changed after it is built."""
        return kept_on(self, "_content_hash", lambda: self._hash(with_weights=True))

    def structure_hash(self) -> str:
        """SHA-1 over the structure only (``indptr``, ``indices``, direction): the key of caches
        that ignore weights, such as METIS partitions (SSSP's weighted copy of a graph reuses the
        unweighted graph's split). Equals :meth:`content_hash` for an unweighted graph. Computed
        once per graph object, as that is."""
        if self.weights is None:        # the same bytes: hash them once
            return self.content_hash()
        return kept_on(self, "_structure_hash", lambda: self._hash(with_weights=False))

    def _hash(self, *, with_weights: bool) -> str:
        g = self.to_host()
        h = hashlib.sha1()
        h.update(f"csr-v1 n={g.num_vertices} m={g.num_edges} directed={g.directed}".encode())
        weights = (g.weights,) if with_weights and g.weights is not None else ()
        for a in (g.indptr, g.indices) + weights:
            h.update(str(a.dtype).encode())
            h.update(np.ascontiguousarray(a).view(np.uint8))
        return h.hexdigest()

    # ------------------------------------------------------------------ id mapping
    @property
    def vertex_ids(self) -> VertexIds:
        """The map between positions and the graph's own ids (rebuilt when ``id_base`` or
        ``file_ids`` is reassigned)."""
        ids = self._vertex_ids
        if (ids is None or ids.n != self.num_vertices or ids.base != self.id_base
                or ids.labels is not self.file_ids or ids.name != (self.name or "the graph")):
            ids = self._vertex_ids = VertexIds(self.num_vertices, base=self.id_base,
                                               labels=self.file_ids, name=self.name)
        return ids

    @property
    def ids(self) -> np.ndarray:
        """The graph's own id of every vertex, in position order (int64, or objects for labels)."""
        return self.vertex_ids.array()

    def file_id_of(self, v):
        """The graph's own id (as written in the source file, or the label) of internal vertex
        ``v`` (int or array)."""
        return self.vertex_ids.id_of(v)

    def vertex_of(self, file_id, what: str = "id"):
        """Internal 0-based vertex of one of the graph's own ids (one id, or an array of them).

        Raises KeyError naming ``what`` for ids that are not vertices of this graph.
        """
        return self.vertex_ids.position_of(file_id, what)

    # ------------------------------------------------------------------ transformations
    def relabel(self, perm) -> "CSRGraph":
        """The same graph with vertex ``v`` renamed ``perm[v]`` (rows re-sorted).

        File ids follow the vertices, so ``file_id_of`` still answers with the file's ids.
        """
        xp = self.xp
        n = self.num_vertices
        perm = _arc_ends("perm", xp.asarray(perm), n).astype(xp.int64, copy=False)
        if perm.shape != (n,):
            raise ValueError(f"perm gives every vertex its new id: {n} ids, got {perm.size}")
        named = xp.zeros(n, dtype=bool)
        named[perm] = True
        if not bool(named.all()):      # n ids in range, one missing: another is named twice
            missing = int(xp.argmin(named))
            raise ValueError(f"perm is not a permutation of 0..{n - 1}: it names no vertex "
                             f"{missing} (and another twice)")
        iperm = xp.empty_like(perm)
        iperm[perm] = xp.arange(n, dtype=xp.int64)
        # one sort of packed keys (row, target, weight code), no per-arc int64 arrays; None when
        # two vertex ids and the weight bits do not fit 64 bits: the edge-list build then
        packed = relabelled_arcs(self.indptr, self.indices, perm, self.weights, xp=xp)
        if packed is not None:
            g = CSRGraph(packed[0], packed[1], packed[2] if len(packed) > 2 else None,
                         directed=self.directed, name=self.name, source=self.source,
                         validate=False)
        else:
            src, dst = self.edges()
            g = CSRGraph.from_edges(perm[src], perm[dst.astype(xp.int64)], n, self.weights,
                                    directed=self.directed, dedupe=False, name=self.name,
                                    source=self.source, validate=False, xp=xp)
        host_iperm = iperm if xp is np else iperm.get()
        g.file_ids = label_array(np.asarray(self.file_id_of(host_iperm)).reshape(-1))
        g.device = self.device
        return g

    def symmetrize(self) -> "CSRGraph":
        """Undirected version: every arc in both directions, duplicates merged (min weight)."""
        if not self.directed:
            return self
        xp = self.xp
        src, dst = self.edges()
        dst = dst.astype(xp.int64)
        w = None if self.weights is None else xp.concatenate([self.weights, self.weights])
        g = CSRGraph.from_edges(xp.concatenate([src, dst]), xp.concatenate([dst, src]),
                                self.num_vertices, w, directed=False, validate=False, xp=xp)
        return self._like(g.indptr, g.indices, g.weights, directed=False)

    def remove_self_loops(self) -> "CSRGraph":
        """The graph without arcs ``v -> v``."""
        xp = self.xp
        src, dst = self.edges()
        keep = src != dst
        if bool(keep.all()):
            return self
        counts = xp.bincount(src[keep], minlength=self.num_vertices) if self.num_vertices else xp.zeros(0, xp.int64)
        indptr = xp.zeros(self.num_vertices + 1, dtype=xp.int64)
        indptr[1:] = xp.cumsum(counts)
        w = None if self.weights is None else self.weights[keep]
        return self._like(indptr, self.indices[keep], w)

    def deduplicate(self) -> "CSRGraph":
        """Merge repeated arcs (keeping the smallest weight); rows come out sorted."""
        xp = self.xp
        src, dst = self.edges()
        g = CSRGraph.from_edges(src, dst, self.num_vertices, self.weights, directed=self.directed,
                                validate=False, xp=xp)
        if g.num_edges == self.num_edges and self.weights is None:
            return self._like(g.indptr, g.indices, None)
        return self._like(g.indptr, g.indices, g.weights)

    def as_directed(self) -> "CSRGraph":
        """The same arcs read as a directed graph (an undirected graph's edges, each both ways);
        for algorithms defined on directed graphs only, as strongly connected components."""
        if self.directed:
            return self
        return self._like(self.indptr, self.indices, self.weights, directed=True)

    def transpose(self) -> "CSRGraph":
        """In-edges as a CSR (arc u->v becomes v->u), for pull-style kernels."""
        if not self.directed:
            return self
        xp = self.xp
        src, dst = self.edges()
        g = CSRGraph.from_edges(dst.astype(xp.int64), src, self.num_vertices, self.weights,
                                dedupe=False, validate=False, xp=xp)
        return self._like(g.indptr, g.indices, g.weights)

    def is_symmetric(self) -> bool:
        """Whether every arc u->v has v->u with the same weight, as often
        (:func:`~groute.graph.symmetry.unmatched_arc`: one linear pass)."""
        return unmatched_arc(self.indptr, self.indices, self.weights, self.num_vertices) is None

    def with_weights(self, seed: int = 0, low: int = 1, high: int = 64, *,
                     xp=None) -> "CSRGraph":
        """A copy with random integer weights in ``[low, high]`` (int32), as Gunrock does.

        The weight of arc u->v is a hash of the unordered pair {u, v} and the seed, so both
        directions of an undirected edge get the same weight and the result is identical on
        every backend and independent of arc order. Computed in row-aligned chunks of about
        :data:`WEIGHT_CHUNK_ARCS` arcs (no arc-sized int64 temporaries), on ``xp`` (default:
        the graph's module; CuPy for a host graph hashes on the GPU, chunk by chunk); the
        weights live where the graph's arrays do.
        """
        w = rows_pair_weights(self.indptr, self.indices, self.num_vertices, seed, low, high,
                              xp=xp)
        return self._like(self.indptr, self.indices, w)

    def without_weights(self) -> "CSRGraph":
        return self._like(self.indptr, self.indices, None)

    # ------------------------------------------------------------------ devices
    def to_device(self, device) -> "CSRGraph":
        """A copy whose arrays live on ``device`` (anything with ``.asarray(np_array)``).

        The copy's methods run their array work on the array module's current stream, and
        :meth:`to_host` copies back through ``device.to_host``; on a CUDA
        :class:`~groute.device.base.Device` that reads after the device's compute stream, so
        call them under ``device.on_compute()`` (CuPy's default stream does not wait for
        it)."""
        host = self.to_host()
        g = CSRGraph(device.asarray(host.indptr), device.asarray(host.indices),
                     None if host.weights is None else device.asarray(host.weights),
                     directed=self.directed, name=self.name, source=self.source,
                     id_base=self.id_base, file_ids=self.file_ids, validate=False)
        g.device = device
        return g

    def to_host(self) -> "CSRGraph":
        """The graph with NumPy arrays: copied back through the device it was moved to, else
        itself when its arrays are already NumPy arrays."""
        if self.device is None and self.xp is np:
            return self
        back = functools.partial(host_array, device=self.device)
        g = CSRGraph(back(self.indptr), back(self.indices), back(self.weights),
                     directed=self.directed, name=self.name, source=self.source,
                     id_base=self.id_base, file_ids=self.file_ids, validate=False)
        return g
