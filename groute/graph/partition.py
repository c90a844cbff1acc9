"""Partitioning a graph across k devices, with renumbering so each device owns a contiguous range.

``partition_graph(g, k, method=...)`` decides an owner per vertex (METIS edge-cut through pymetis,
contiguous ranges with equal arc counts, or a seeded random balanced assignment; ``"auto"``, the
default, METIS on graphs small enough for it to be quick, :func:`auto_method`), then renumbers
vertices so part ``i`` owns new ids ``[offsets[i], offsets[i+1])``, keeping the original relative
order inside each part. Runtime code then needs no lookup table to route a vertex to its owner:
``owner_of_new`` is a ``searchsorted`` on ``offsets``.

METIS runs on the symmetrised graph without self loops (it requires an undirected graph), each
vertex weighing 1 + its degree so that the parts balance arcs (work), not vertex counts; its
result is cached in ``<cache dir>/partitions/`` (never beside the graph file) under the graph's
content hash and k, because it takes minutes on multi-million-vertex graphs.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ..ints import is_int
from . import rng
from .arcs import row_chunks, self_loop_count
from .arrays import array_module
from .cache import CACHE_SUFFIX, cache_root
from .csr import CSRArrays, CSRGraph, host_array

log = logging.getLogger(__name__)

METHODS = ("auto", "metis", "contiguous", "random")
#: the method every solver and engine splits a graph by unless told (``partition=``)
DEFAULT_PARTITION = "auto"
#: the most arcs ``"auto"`` splits by METIS: METIS runs on one core in time that grows with the
#: arcs, so past this a first call would wait minutes (docs/GRAPHS.md) for a split whose run
#: takes milliseconds; a contiguous split costs nothing
METIS_AUTO_MAX_ARCS = 8_000_000
#: what ``"auto"`` means, as help texts and reports say it
AUTO_RULE = (f"metis up to {METIS_AUTO_MAX_ARCS:,} arcs where pymetis is installed, else "
             f"contiguous")


def auto_method(g) -> str:
    """The method ``"auto"`` splits ``g`` by: METIS where pymetis is installed and ``g`` has at
    most :data:`METIS_AUTO_MAX_ARCS` arcs (its cut matters most on the small real graphs, and
    it is quick there), else contiguous ranges of equal arc counts.

    Parameters
    ----------
    g : CSRGraph
        The graph to split (its arc count decides).

    Returns
    -------
    str
        ``"metis"`` or ``"contiguous"``.

    Examples
    --------
    A graph of a billion arcs (only its arc count is read) is split into contiguous ranges:

    >>> from types import SimpleNamespace
    >>> auto_method(SimpleNamespace(num_edges=1_000_000_000))
    'contiguous'
    """
    if int(g.num_edges) > METIS_AUTO_MAX_ARCS:
        return "contiguous"
    import importlib.util
    return "metis" if importlib.util.find_spec("pymetis") is not None else "contiguous"


def resolve_method(method: str, g) -> str:
    """``method`` as it splits ``g``.

    Parameters
    ----------
    method : str
        A partition method's name (one of :data:`METHODS`, or any string: the caller checks).
    g : CSRGraph
        The graph to split (``"auto"`` reads its arc count).

    Returns
    -------
    str
        :func:`auto_method`'s choice for ``"auto"``, else ``method`` as given.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> resolve_method("auto", SimpleNamespace(num_edges=10**9)), resolve_method("random", None)
    ('contiguous', 'random')
    """
    return auto_method(g) if method == "auto" else method


class LocalGraph(CSRArrays):
    """Part ``part``'s share of a partitioned graph: its owned vertices' out-arcs.

    ``indptr`` has one entry per owned vertex plus one; ``indices`` are GLOBAL new ids (they may
    point into other parts); ``weights`` are aligned with ``indices``. Owned vertex ``j`` is
    global new id ``first + j``.
    """

    def __init__(self, part, first, indptr, indices, weights, *, num_global_vertices, directed,
                 name=""):
        self.part = int(part)
        self.first = int(first)
        self.indptr = indptr
        self.indices = indices
        self.weights = weights
        self.num_global_vertices = int(num_global_vertices)
        self.directed = directed
        self.name = name
        self.device = None

    # num_vertices (owned), num_edges, xp, degrees: from CSRArrays
    @property
    def end(self) -> int:
        return self.first + self.num_vertices

    def global_ids(self):
        return self.xp.arange(self.first, self.end, dtype=self.xp.int64)

    def to_device(self, device) -> "LocalGraph":
        h = self.to_host()
        out = LocalGraph(self.part, self.first, device.asarray(h.indptr), device.asarray(h.indices),
                         None if h.weights is None else device.asarray(h.weights),
                         num_global_vertices=self.num_global_vertices, directed=self.directed,
                         name=self.name)
        out.device = device
        return out

    def to_host(self) -> "LocalGraph":
        if self.device is None and self.xp is np:
            return self
        back = functools.partial(host_array, device=self.device)
        return LocalGraph(self.part, self.first, back(self.indptr), back(self.indices),
                          back(self.weights), num_global_vertices=self.num_global_vertices,
                          directed=self.directed, name=self.name)

    def __repr__(self):
        return (f"LocalGraph(part {self.part}: new ids [{self.first}, {self.end}), "
                f"{self.num_edges:,} arcs)")


class Partition:
    """The result of :func:`partition_graph` (attributes as in the module docstring).

    ``owner`` (int32) is indexed by ORIGINAL vertex; ``perm`` maps original -> new id, ``iperm``
    new -> original; ``offsets`` (int64, k+1) bound each part's new-id range; ``graph`` is the
    whole graph in new ids; ``original`` the input graph; ``stats`` a dict of figures.
    """

    def __init__(self, original: CSRGraph, graph: CSRGraph, owner, perm, iperm, offsets, stats):
        self.original = original
        self.graph = graph
        self.owner = owner
        self.perm = perm
        self.iperm = iperm
        self.offsets = offsets
        self.stats = stats
        self._locals = {}

    @property
    def num_parts(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def method(self) -> str:
        return self.stats["method"]

    def part_range(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def local(self, i: int) -> LocalGraph:
        """Part ``i``'s owned vertices' out-arcs (views into :attr:`graph`, no copy)."""
        if not 0 <= i < self.num_parts:
            raise IndexError(f"part {i} out of range for {self.num_parts} parts")
        if i not in self._locals:
            lo, hi = self.part_range(i)
            g = self.graph
            a, b = int(g.indptr[lo]), int(g.indptr[hi])
            self._locals[i] = LocalGraph(
                i, lo, g.indptr[lo:hi + 1] - a, g.indices[a:b],
                None if g.weights is None else g.weights[a:b],
                num_global_vertices=g.num_vertices, directed=g.directed, name=f"{g.name}[{i}]")
        return self._locals[i]

    def owner_of_new(self, new_ids):
        """Owning part of each new id (vectorised ``searchsorted`` on ``offsets``)."""
        if np.isscalar(new_ids):
            return int(np.searchsorted(self.offsets, new_ids, side="right") - 1)
        xp = array_module(new_ids)
        offs = self.offsets if xp is np else xp.asarray(self.offsets)
        return (xp.searchsorted(offs, xp.asarray(new_ids), side="right") - 1).astype(xp.int32)

    @property
    def renumbers(self) -> bool:
        """Whether the vertices have new ids (False: one part, or parts already contiguous)."""
        return not self.stats["identity"]

    def to_original(self, values_new):
        """Values indexed by new id -> the same values indexed by original id: the array
        itself, not a copy, when the partition renumbered nothing (one part, or parts already
        contiguous), since every caller passes an array of its own (an answer just gathered
        from the devices) and a gather over every vertex costs the caller a pass over memory."""
        if not self.renumbers:
            return values_new
        xp = array_module(values_new)
        perm = self.perm if xp is np else xp.asarray(self.perm)
        return values_new[perm]

    def to_new(self, values_original):
        """Values indexed by original id -> indexed by new id."""
        xp = array_module(values_original)
        iperm = self.iperm if xp is np else xp.asarray(self.iperm)
        return values_original[iperm]

    def __repr__(self):
        s = self.stats
        return (f"Partition({s['method']}, {self.num_parts} parts of {self.graph.name!r}, "
                f"edge cut {s['edge_cut']:,} arcs)")


#: the graph attribute that holds the Partitions already built for that graph object, so that
#: several solvers on one graph (a benchmark's BFS, SSSP, PR, ...) renumber it once. On the
#: graph, not in a module-level table keyed by it: a Partition refers to its graph
#: (``original``), so a table's entry would keep its own key, and every graph split, alive
#: for good.
_MEMO_ATTRIBUTE = "_partitions"


#: the partition seeds: METIS takes a C int (the random split takes the same, one rule for both)
METIS_SEEDS = 2 ** 31


def partition_graph(g: CSRGraph, k: int, method: str = DEFAULT_PARTITION, *, seed: int = 0,
                    cache: bool = True, progress: bool = True) -> Partition:
    """Split ``g`` (host arrays) over ``k`` devices; see the module docstring.

    A graph loaded by ranks (:class:`~groute.graph.rank_graph.RankGraph`) is split by its
    ranges whatever the method (:class:`~groute.graph.rank_graph.RangeSplit`).

    Raises ValueError for k < 1, k > |V|, an unknown method or a seed outside
    ``[0, METIS_SEEDS)`` (TypeError for a k or seed that is not an int, or a ``g`` that is no
    groute graph), and ImportError with the pip
    command when METIS is asked for but pymetis is not installed. The same graph object asked
    for the same split again gets the same :class:`Partition` back (treat it as read-only).
    """
    _check_split(g, k)
    if hasattr(g, "split_by_ranges"):           # a RankGraph: split by its ranges
        return g.split_by_ranges(k, method)
    seed = rng.checked_seed(seed, "seed (the partition's)", below=METIS_SEEDS)
    method = resolve_method(method, g)     # "auto" and what it chose share one split
    key = (int(k), method, seed)
    try:
        memo = vars(g).setdefault(_MEMO_ATTRIBUTE, {})
    except TypeError:  # no attributes of its own: no memo
        memo = {}
    if cache and key in memo:
        return memo[key]
    part = _partition(g, k, method, seed=seed, cache=cache, progress=progress)
    if cache:
        memo[key] = part
    return part


def warm_metis_cache(g: CSRGraph, k: int, *, seed: int = 0) -> bool:
    """Compute the METIS split of ``g`` into ``k`` parts into the on-disk cache that
    :func:`partition_graph` reads, without building the renumbered :class:`Partition`: for a
    caller that has another process partition while it does other work (``groute bench``).
    Returns whether the cache now holds the split (False: no writable cache location, so
    ``partition_graph`` will compute it again)."""
    _check_split(g, k)
    g = g.to_host()
    k = int(k)
    if not 2 <= k <= max(g.num_vertices, 1):
        raise ValueError(f"cannot warm a METIS split of {g.num_vertices} vertices into {k} parts")
    _metis_owner(g, k, seed=seed, cache=True, progress=False)
    return any(p.is_file() for p in _partition_cache_path(g, k, g.structure_hash(), seed))


def _check_split(g, k) -> None:
    """A TypeError for a ``g`` that is no groute graph or a ``k`` that is no int (``2.7`` and
    ``"3"`` would be read as 2 and 3 parts, ``True`` as one)."""
    if not isinstance(g, CSRGraph) and not hasattr(g, "split_by_ranges"):
        raise TypeError(f"a graph to split is a groute CSRGraph (groute.graph.as_graph converts "
                        f"NetworkX graphs, SciPy matrices and edge arrays), got "
                        f"{type(g).__name__}")
    if not is_int(k):
        raise TypeError(f"k is the number of parts, an int, got {k!r} ({type(k).__name__})")


def _partition(g, k, method, *, seed, cache, progress) -> Partition:
    g = g.to_host()
    k = int(k)
    n = g.num_vertices
    if k < 1:
        raise ValueError(f"number of parts must be >= 1, got {k}")
    if k > max(n, 1):
        raise ValueError(f"cannot split {n} vertices into {k} parts: k must be <= |V|")
    if method not in METHODS:
        raise ValueError(f"unknown partition method {method!r}: use one of {', '.join(METHODS)}")
    t0 = time.perf_counter()
    if k == 1:
        owner = np.zeros(n, dtype=np.int32)
    elif method == "contiguous":
        owner = _contiguous_owner(g, k)
    elif method == "random":
        owner = _random_owner(n, k, seed)
    else:
        owner = _metis_owner(g, k, seed=seed, cache=cache, progress=progress)
    return _build(g, owner, k, method, time.perf_counter() - t0)


def _build(g: CSRGraph, owner, k, method, seconds) -> Partition:
    n = g.num_vertices
    counts = np.bincount(owner, minlength=k).astype(np.int64)
    offsets = np.zeros(k + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(counts)
    identity = n == 0 or bool(np.all(owner[1:] >= owner[:-1]))
    if identity:                                   # already contiguous: no renumbering
        iperm = np.arange(n, dtype=np.int64)
        perm = iperm
        new = g
    else:
        iperm = np.argsort(owner, kind="stable").astype(np.int64)
        perm = np.empty(n, dtype=np.int64)
        perm[iperm] = np.arange(n, dtype=np.int64)
        new = g.relabel(perm)
    cut_per_part, boundary_per_part = _cut_counts(new.indptr, new.indices, offsets)
    edge_cut = int(sum(cut_per_part))
    stats = {
        "method": method,
        "identity": bool(identity),          # no renumbering was needed (k == 1, contiguous)
        "num_parts": k,
        "edge_cut": edge_cut,
        "edge_cut_fraction": float(edge_cut / max(1, g.num_edges)),
        "vertices_per_part": counts.tolist(),
        "edges_per_part": np.diff(np.asarray(new.indptr)[offsets]).astype(np.int64).tolist(),
        "boundary_vertices_per_part": boundary_per_part,
        "seconds": 0.0,
    }
    stats["seconds"] = float(seconds)
    log.info("partitioned %s into %d parts (%s) in %.2f s: edge cut %d arcs (%.2f%%)", g.name, k,
             method, seconds, stats["edge_cut"], 100 * stats["edge_cut_fraction"])
    return Partition(g, new, owner.astype(np.int32), perm, iperm, offsets, stats)


#: arcs one step of :func:`_cut_counts` looks at (bounded temporaries on billion-arc graphs)
CUT_CHUNK_ARCS = 1 << 18
#: threads that count chunks at once (NumPy releases the GIL in each chunk's passes)
CUT_THREADS = max(1, min(16, os.cpu_count() or 1))


def _cut_counts(indptr, indices, offsets, chunk_arcs: int | None = None):
    """Per part of a renumbered graph (part ``i`` owns new ids ``[offsets[i], offsets[i+1])``):
    the arcs leaving the part and the owned vertices with at least one such arc.

    One pass over ``indices`` in row-aligned, cache-sized chunks (counted by up to
    :data:`CUT_THREADS` threads, one per full chunk of arcs), comparing targets with the part's range: no per-arc source
    array or owner gather (such 8-byte-per-arc temporaries would make the statistics most of
    a contiguous split's cost).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    chunk_arcs = int(chunk_arcs or CUT_CHUNK_ARCS)
    k = int(offsets.shape[0]) - 1
    # (part, first row, end row): about chunk_arcs arcs each
    chunks = [(i, r, e) for i in range(k)
              for r, e in row_chunks(indptr, int(offsets[i]), int(offsets[i + 1]), chunk_arcs)]

    def count(chunk):
        i, r, e = chunk
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        a, b = int(indptr[r]), int(indptr[e])
        if b == a:
            return 0, 0
        t = indices[a:b]
        out = (t < lo) | (t >= hi)
        c = int(np.count_nonzero(out))
        if not c:
            return 0, 0
        nonempty = indptr[r + 1:e + 1] > indptr[r:e]
        starts = indptr[r:e][nonempty] - a
        return c, int(np.count_nonzero(np.logical_or.reduceat(out, starts)))

    # a thread per full chunk of arcs at most: a small graph (k parts: k chunks, however few
    # arcs) is counted in this thread, with no pool to start
    threads = min(CUT_THREADS, int(indptr[-1]) // chunk_arcs)
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads) as pool:
            counts = list(pool.map(count, chunks))
    else:
        counts = [count(c) for c in chunks]
    cut, boundary = [0] * k, [0] * k
    for (i, _, _), (c, bnd) in zip(chunks, counts):
        cut[i] += c
        boundary[i] += bnd
    return cut, boundary


def contiguous_offsets(indptr, k: int) -> np.ndarray:
    """The bounds (int64, ``k + 1``) of ``k`` vertex ranges with (about) equal arc counts, every
    range at least one vertex, for the graph whose row pointers are ``indptr``: the contiguous
    split, which a rank also computes for a graph it holds only a range of
    (:mod:`groute.graph.ranked`, from its share of the row pointers: :func:`contiguous_cuts`)."""
    indptr = np.asarray(indptr)
    n, m = int(indptr.shape[0]) - 1, int(indptr[-1])
    cuts = np.searchsorted(indptr, contiguous_targets(m, k), side="left")
    return offsets_from_cuts(cuts, n, m, k)


def contiguous_targets(m: int, k: int) -> np.ndarray:
    """The arc counts at which the contiguous split of ``m`` arcs into ``k`` ranges cuts: the
    ``k - 1`` values ``j * m // k``."""
    return (np.arange(1, k, dtype=np.int64) * m) // k


def contiguous_cuts(indptr_part, first: int, m: int, k: int) -> np.ndarray:
    """Where the contiguous split cuts, as far as a consecutive piece of the row pointers
    tells: ``indptr_part`` is ``indptr[first:first + len]`` of a graph of ``m`` arcs; for each
    of :func:`contiguous_targets` the vertex ``np.searchsorted(indptr, target, "left")`` of the
    whole ``indptr`` where the piece decides it (the target is in ``(indptr_part[0],
    indptr_part[-1]]``, or ``first`` is 0 and the target is 0), else -1. Pieces that cover the
    row pointers with overlapping ends decide every cut once: their maximum is the whole
    graph's search."""
    piece = np.asarray(indptr_part)
    targets = contiguous_targets(m, k)
    found = first + np.searchsorted(piece, targets, side="left")
    mine = (targets > piece[0]) & (targets <= piece[-1]) if piece.shape[0] else targets < 0
    if first == 0:
        mine |= targets == 0
    return np.where(mine, found, -1).astype(np.int64)


def offsets_from_cuts(cuts, n: int, m: int, k: int) -> np.ndarray:
    """:func:`contiguous_offsets` from its searches ``cuts`` (one vertex per target of
    :func:`contiguous_targets`) for a graph of ``n`` vertices and ``m`` arcs: without arcs,
    equal vertex counts; every range made at least one vertex."""
    if m == 0:
        bounds = (np.arange(1, k, dtype=np.int64) * n) // k
    else:
        bounds = np.asarray(cuts, dtype=np.int64)
    i = np.arange(1, k, dtype=np.int64)
    bounds = np.clip(bounds, i, n - (k - i))
    bounds = np.maximum.accumulate(bounds - i) + i          # strictly increasing
    return np.concatenate([[0], bounds, [n]]).astype(np.int64)


def _contiguous_owner(g: CSRGraph, k: int):
    """Vertex ranges with (about) equal arc counts (:func:`contiguous_offsets`)."""
    owner = np.zeros(g.num_vertices, dtype=np.int32)
    owner[contiguous_offsets(g.indptr, k)[1:-1]] = 1
    return np.cumsum(owner, dtype=np.int32)


def _random_owner(n: int, k: int, seed: int):
    """A seeded random assignment with part sizes differing by at most one."""
    order = rng.random_permutation(n, seed, 0x9A27)
    owner = np.empty(n, dtype=np.int32)
    owner[order] = (np.arange(n, dtype=np.int64) * k // n).astype(np.int32)
    return owner


def _partition_cache_path(g: CSRGraph, k: int, digest: str, seed: int) -> list[Path]:
    # "degw": vertices weighted by degree (splits cached before, unweighted, are not read)
    tag = f"metis-degw-k{k}-s{seed}-{digest[:16]}{CACHE_SUFFIX}"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in (g.name or "graph"))
    return [cache_root() / "partitions" / f"{safe}.{tag}"]


def _metis_vertex_weights(deg, dtype):
    """Vertex weights for METIS, which balances the parts' total weight: 1 + the vertex's
    degree, so the parts hold about equal shares of the arcs (a device's work and memory);
    the 1 keeps isolated vertices from weighing nothing. Unweighted, METIS balances vertex
    counts only: on a power-law graph one part then holds nearly all the arcs (the hubs and
    their neighbourhoods against the many low-degree vertices), while weighted parts hold
    about equal arcs. Weighted, METIS also runs faster on such graphs and still cuts fewer arcs
    than a random split (a power-law graph has no good cut). The sum must fit METIS's 32-bit integers: degrees
    are scaled down where it would not."""
    deg = np.asarray(deg, dtype=np.int64)
    total = int(deg.sum()) + deg.size
    limit = np.iinfo(np.int32).max // 2    # headroom: METIS adds up weights of merged parts
    scale = -(-total // limit) if total > limit else 1
    return (1 + deg // scale).astype(dtype)


#: one redirection of fds 1 and 2 at a time: two nested from different threads would restore
#: them in the wrong order and leave the process's output in a closed temporary file
_C_OUTPUT_LOCK = threading.Lock()


@contextlib.contextmanager
def _c_output_to_log():
    """METIS complains from C, straight to file descriptors 1 and 2 ("***Cannot bisect a
    graph with 0 vertices!" when a part comes out empty, which groute handles). While it runs
    they go to temporary files; afterwards its lines go to the log and anything else (another
    thread's output) back where it was going. Threads take turns (METIS runs on one core)."""
    with _C_OUTPUT_LOCK:
        yield from _redirect_c_output()


def _redirect_c_output():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    saved = []
    try:
        for fd in (1, 2):
            try:
                copy = os.dup(fd)
            except OSError:          # not open: nothing to keep off it
                continue
            tmp = tempfile.TemporaryFile()
            saved.append((fd, copy, tmp))
            os.dup2(tmp.fileno(), fd)
        yield
    finally:
        try:
            ctypes.CDLL(None).fflush(None)     # C stdio's buffers, before the fds go back
        except (OSError, AttributeError):
            pass
        for fd, copy, tmp in saved:
            os.dup2(copy, fd)
            os.close(copy)
            tmp.seek(0)
            other = []
            for line in tmp.read().decode(errors="replace").splitlines(keepends=True):
                if line.lstrip().startswith("***"):
                    log.info("METIS: %s", line.strip(" \t\n*"))
                else:
                    other.append(line)
            tmp.close()
            if other:
                os.write(fd, "".join(other).encode())


def _check_metis_arcs(g, arcs: int, dtype) -> None:
    """Raise ValueError when METIS's ``dtype`` indices cannot address ``arcs`` (the arcs of
    ``g`` symmetrised without self loops, or a lower bound of them)."""
    if arcs > np.iinfo(dtype).max:
        raise ValueError(f"METIS here takes at most {np.iinfo(dtype).max:,} arcs ({dtype} "
                         f"indices); the symmetrised {g.name or 'graph'} has {arcs:,} or more: "
                         f"use method='contiguous' or 'random' (one device needs no partition)")


def _metis_owner(g: CSRGraph, k: int, *, seed: int, cache: bool, progress: bool):
    try:
        import pymetis
    except ImportError as exc:
        raise ImportError("METIS partitioning needs pymetis: pip install pymetis "
                          "(or use method='contiguous' or 'random')") from exc
    zc = getattr(pymetis, "zero_copy_dtype", None)
    dtype = np.dtype(zc() if callable(zc) else np.int32)
    if g.num_edges > np.iinfo(dtype).max:   # before hashing or symmetrising a huge graph
        _check_metis_arcs(g, g.num_edges - self_loop_count(g.indptr, g.indices), dtype)
    digest = g.structure_hash() if cache else ""     # METIS sees no weights
    paths = _partition_cache_path(g, k, digest, seed) if cache else []
    for p in paths:
        if p.is_file():
            try:
                with np.load(p, allow_pickle=False) as z:
                    owner = z["owner"]
                    if owner.shape == (g.num_vertices,) and str(z["digest"]) == digest:
                        log.info("METIS partition of %s into %d parts loaded from %s", g.name, k, p)
                        return owner.astype(np.int32)
            except Exception as exc:
                log.warning("ignoring unreadable partition cache %s (%s)", p, exc)
    sym = g.symmetrize().remove_self_loops()
    say = _progress_printer(progress)
    say(f"METIS (degree-weighted): splitting {g.name or 'graph'} ({sym.num_vertices:,} "
        f"vertices, {sym.num_edges // 2:,} edges) into {k} parts...")
    t0 = time.perf_counter()
    opts = pymetis.Options(seed=int(seed))
    _check_metis_arcs(g, sym.num_edges, dtype)
    xadj, adjncy = sym.indptr.astype(dtype, copy=False), sym.indices.astype(dtype, copy=False)
    vweights = _metis_vertex_weights(sym.degrees(), dtype)
    with _c_output_to_log():
        if hasattr(pymetis, "CSRAdjacency"):        # pymetis >= 2025.2
            _, membership = pymetis.part_graph(k, pymetis.CSRAdjacency(xadj, adjncy),
                                               options=opts, vweights=vweights)
        else:
            _, membership = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, options=opts,
                                               vweights=vweights)
    owner = np.asarray(membership, dtype=np.int32)
    say(f"METIS: done in {time.perf_counter() - t0:.1f} s", end=True)
    for p in paths:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            # a unique temporary name: concurrent runs may partition the same graph at once
            fd, tmp = tempfile.mkstemp(prefix=p.name + ".", suffix=".part", dir=p.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    np.savez(f, owner=owner, digest=np.array(digest))
                os.chmod(tmp, 0o644)
                os.replace(tmp, p)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            log.info("cached METIS partition as %s", p)
            break
        except OSError as exc:
            log.info("could not cache partition at %s (%s)", p, exc)
    return owner


def _progress_printer(progress: bool):
    tty = progress and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()

    def say(msg, end=False):
        log.info(msg)
        if tty:
            sys.stderr.write(("\r" + msg + "\n") if end else msg)
            sys.stderr.flush()
    return say
