"""Seeded graph generators that give the same graph on NumPy and on CuPy.

All randomness comes from :mod:`.rng` (counter-based hashing), every step is whole-array
arithmetic on ``xp``, and the final CSR is built from unique sorted 64-bit arc keys, so a seed
fixes the graph bit for bit on either backend. Edge generation runs in chunks of edges to bound
memory (small chunks on the CPU for cache locality, large ones on a GPU to amortise launches);
since the edge stream can be replayed, a graph bigger than one sort's memory is built by
source-vertex buckets (:mod:`.bucketed`), the same graph for any bucket count.

* :func:`kronecker` -- Graph500 Kronecker: ``2**scale`` vertices, ``ef * 2**scale`` generated
  edges with quadrant probabilities A, B, C (D = 1 - A - B - C) at each of ``scale`` levels, a
  random vertex relabelling, then symmetrised with self loops and duplicates dropped.
* :func:`rmat` -- the same recursive generator kept directed, without relabelling by default.
* :func:`grid` -- a road-like grid: 4-neighbour lattice, random integer weights, a fraction of the
  edges removed but never those of a random monotone spanning tree, so it stays connected and
  BFS from vertex 0 needs exactly ``rows + cols - 1`` levels.
* :func:`erdos_renyi` -- G(n, m) with ``m = n * avg_degree / 2`` uniform edges, symmetrised.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from . import rng
from .arrays import index_dtype
from .bucketed import csr_by_buckets
from .csr import CSRGraph
from .spec import GraphSpec, check_generator_args, parse_spec

log = logging.getLogger(__name__)

_DRAW_BITS = 21              # three 21-bit quadrant draws per 64-bit hash
_DRAW_MASK = (1 << _DRAW_BITS) - 1
_STREAM_EDGES, _STREAM_PERM, _STREAM_ER_SRC, _STREAM_ER_DST = 1, 2, 3, 4
_STREAM_GRID_TREE, _STREAM_GRID_DROP, _STREAM_GRID_W = 5, 6, 7


def _chunk_size(xp, chunk):
    if chunk:
        return int(chunk)
    return 1 << 16 if xp is np else 1 << 24


def _compact_even_bits(x, xp):
    """Morton decode: keep bits 0, 2, 4, ... of each uint64, packed to the low half."""
    u = xp.uint64
    x = x & u(0x5555555555555555)
    x = (x | (x >> u(1))) & u(0x3333333333333333)
    x = (x | (x >> u(2))) & u(0x0F0F0F0F0F0F0F0F)
    x = (x | (x >> u(4))) & u(0x00FF00FF00FF00FF)
    x = (x | (x >> u(8))) & u(0x0000FFFF0000FFFF)
    x = (x | (x >> u(16))) & u(0x00000000FFFFFFFF)
    return x


def rmat_edge_chunks(scale: int, num_edges: int, a: float, b: float, c: float, *, seed: int,
                     xp=np, chunk: int | None = None):
    """Yield ``(src, dst)`` uint64 chunks of R-MAT / Kronecker edges.

    Edge ``e`` descends ``scale`` levels; at each it draws a 21-bit uniform ``u`` and picks the
    quadrant A (u < A), B, C or D, i.e. (row bit, column bit) = (0,0), (0,1), (1,0), (1,1). The
    draws of edge ``e`` come from counters ``e * H + j`` (``H`` hashes of three draws each), so
    any chunking gives the same edges. Probabilities are quantised to 2**-21.
    """
    u64 = xp.uint64
    thresholds = [u64(round(p * (1 << _DRAW_BITS))) for p in (a, a + b, a + b + c)]
    per_hash = 64 // _DRAW_BITS
    hashes = -(-scale // per_hash)
    step = _chunk_size(xp, chunk)
    for start in range(0, num_edges, step):
        m = min(step, num_edges - start)
        base = xp.arange(start, start + m, dtype=u64) * u64(hashes)
        code = xp.zeros(m, dtype=u64)
        level = 0
        for j in range(hashes):
            h = rng.hash_counters(base + u64(j), seed, _STREAM_EDGES, xp)
            for k in range(per_hash):
                if level == scale:
                    break
                d = (h >> u64(_DRAW_BITS * k)) & u64(_DRAW_MASK)
                q = ((d >= thresholds[0]).astype(xp.uint8) + (d >= thresholds[1]).astype(xp.uint8)
                     + (d >= thresholds[2]).astype(xp.uint8))
                code <<= u64(2)
                code |= q.astype(u64)
                level += 1
        yield _compact_even_bits(code >> u64(1), xp), _compact_even_bits(code, xp)


def _bucketed_graph(stream, n, max_candidates, xp, *, symmetric, name, buckets, on_host):
    indptr, indices = csr_by_buckets(stream, n, max_candidates, symmetric=symmetric, xp=xp,
                                     out_xp=np if on_host else xp, buckets=buckets)
    return CSRGraph(indptr, indices, None, directed=not symmetric, name=name, validate=False)


def _rmat_stream(scale, edge_factor, a, b, c, *, seed, xp, chunk, permute):
    """A replayable stream of R-MAT edges ``(src, dst)`` (relabelled when ``permute``), self
    loops dropped: what :func:`kronecker` and :func:`rmat` build their CSR from."""
    n = 1 << scale
    # the relabelling is held by every replayer, so it is kept in 4 bytes per vertex
    perm = rng.random_permutation(n, seed, _STREAM_PERM, xp, dtype=xp.uint32) if permute else None

    def stream():
        for src, dst in rmat_edge_chunks(scale, edge_factor * n, a, b, c, seed=seed, xp=xp,
                                         chunk=chunk):
            if perm is not None:
                src, dst = perm[src].astype(xp.uint64), perm[dst].astype(xp.uint64)
            keep = src != dst
            yield src[keep], dst[keep]
    return stream


def _er_stream(n, m, seed, xp, chunk):
    """The replayable stream of :func:`erdos_renyi`'s ``m`` edges (self loops dropped)."""
    step = _chunk_size(xp, chunk) * 16

    def stream():
        for start in range(0, m, step):
            k = min(step, m - start)
            src = rng.bounded(rng.random_bits(start, k, seed, _STREAM_ER_SRC, xp), 0, n - 1, xp).astype(xp.uint64)
            dst = rng.bounded(rng.random_bits(start, k, seed, _STREAM_ER_DST, xp), 0, n - 1, xp).astype(xp.uint64)
            keep = src != dst
            yield src[keep], dst[keep]
    return stream


def kronecker(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19,
              c: float = 0.19, *, seed: int = 0, xp=None, backend: str | None = None,
              chunk: int | None = None, name: str | None = None, buckets: int | None = None,
              on_host: bool = False) -> CSRGraph:
    """Graph500 Kronecker graph (symmetric, no self loops or duplicates); see the module docstring.

    ``on_host``: build the CSR in host memory even when generating on a GPU. ``buckets``: the
    number of source-vertex buckets (:mod:`.bucketed`; default: from the memory budget); the
    graph is the same for every count."""
    check_generator_args("kron", "kronecker", scale=scale, ef=edge_factor, a=a, b=b, c=c,
                         seed=seed)
    xp = rng.get_xp(backend, xp)
    t0 = time.perf_counter()
    n = 1 << scale
    stream = _rmat_stream(scale, edge_factor, a, b, c, seed=seed, xp=xp, chunk=chunk, permute=True)
    g = _bucketed_graph(stream, n, 2 * edge_factor * n, xp, symmetric=True,
                        name=name or f"kron:{scale}", buckets=buckets, on_host=on_host)
    log.info("generated %s in %.2f s", g, time.perf_counter() - t0)
    return g


def rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         *, seed: int = 0, symmetric: bool = False, permute: bool = False, xp=None,
         backend: str | None = None, chunk: int | None = None, name: str | None = None,
         buckets: int | None = None, on_host: bool = False) -> CSRGraph:
    """R-MAT graph: directed (``symmetric=True`` stores both directions), self loops and
    duplicates dropped; ``permute`` relabels vertices randomly as Kronecker does.
    ``buckets``, ``on_host``: as for :func:`kronecker`."""
    check_generator_args("rmat", "rmat", scale=scale, ef=edge_factor, a=a, b=b, c=c, seed=seed)
    xp = rng.get_xp(backend, xp)
    n = 1 << scale
    stream = _rmat_stream(scale, edge_factor, a, b, c, seed=seed, xp=xp, chunk=chunk,
                          permute=permute)
    return _bucketed_graph(stream, n, (2 if symmetric else 1) * edge_factor * n, xp,
                           symmetric=symmetric, name=name or f"rmat:{scale}", buckets=buckets,
                           on_host=on_host)


def erdos_renyi(n: int, avg_degree: float, *, seed: int = 0, xp=None, backend: str | None = None,
                chunk: int | None = None, name: str | None = None, buckets: int | None = None,
                on_host: bool = False) -> CSRGraph:
    """Uniform random graph: ``round(n * avg_degree / 2)`` edges with independent uniform
    endpoints, symmetrised; self loops and repeats dropped (so the mean degree is a hair lower).
    ``buckets``, ``on_host``: as for :func:`kronecker`."""
    check_generator_args("er", "erdos_renyi", n=n, avg_degree=avg_degree, seed=seed)
    xp = rng.get_xp(backend, xp)
    n = int(n)
    m = int(round(n * avg_degree / 2))
    stream = _er_stream(n, m, seed, xp, chunk)
    return _bucketed_graph(stream, n, 2 * m, xp, symmetric=True,
                           name=name or f"er:{n}:{avg_degree:g}", buckets=buckets, on_host=on_host)


def grid(rows: int, cols: int | None = None, *, drop: float = 0.1, seed: int = 0, low: int = 1,
         high: int = 64, xp=None, backend: str | None = None, name: str | None = None) -> CSRGraph:
    """Road-like grid: ``rows x cols`` lattice (vertex ``r * cols + c``), undirected, weights in
    ``[low, high]``.

    Every vertex but 0 gets a *parent* edge to its left or upper neighbour (a fair coin; forced
    on the first row/column). Those edges form a spanning tree whose paths to vertex 0 are
    monotone, so the graph is connected and the BFS depth of ``(r, c)`` from vertex 0 is exactly
    ``r + c`` (the Manhattan lower bound is met): ``rows + cols - 1`` levels. The other edges are
    removed independently with the probability that makes ``drop`` the expected fraction of all
    lattice edges removed (about ``2 * drop`` of the non-tree edges on a square grid); that is
    what makes the graph road-like (irregular, degree 1-4, average about 3.6).
    """
    cols = rows if cols is None else cols
    check_generator_args("grid", "grid", rows=rows, cols=cols, drop=drop, seed=seed, low=low,
                         high=high)
    xp = rng.get_xp(backend, xp)
    indptr, indices, weights = grid_rows(rows, cols, 0, rows * cols, drop=drop, seed=seed,
                                         low=low, high=high, xp=xp)
    return CSRGraph(indptr, indices, weights, directed=False,
                    name=name or (f"grid:{rows}" if rows == cols else f"grid:{rows}x{cols}"),
                    validate=False)


def grid_rows(rows: int, cols: int, lo: int, hi: int, *, drop: float = 0.1, seed: int = 0,
              low: int = 1, high: int = 64, xp=np):
    """``(indptr, indices, weights)`` of the rows of vertices ``[lo, hi)`` of :func:`grid`'s
    graph (``indptr`` from 0): every random choice is a function of a vertex's id, so a range
    needs only its own vertices and the row of vertices below it."""
    n = rows * cols
    end = min(hi + cols, n)             # the range's vertices and the row below them
    v = xp.arange(lo, end, dtype=xp.int64)
    span = end - lo
    r, c = v // cols, v % cols
    has_h = c >= 1                      # edge (v-1, v) exists in the lattice
    has_v = r >= 1                      # edge (v-cols, v)
    total = int(rows * (cols - 1) + cols * (rows - 1))
    tree = max(n - 1, 0)
    p_drop = 0.0 if total == tree else min(1.0, drop * total / (total - tree))
    coin = (rng.random_bits(lo, span, seed, _STREAM_GRID_TREE, xp) >> xp.uint64(63)) == 1
    parent_left = has_h & (~has_v | coin)
    parent_up = has_v & ~parent_left
    # edge ids: 2v for the horizontal edge ending at v, 2v+1 for the vertical one
    limit = xp.uint64(int(p_drop * 2**53))
    drop_h = (rng.random_bits(lo, span, seed, _STREAM_GRID_DROP, xp) >> xp.uint64(11)) < limit
    drop_v = (rng.hash_counters(v.astype(xp.uint64) + xp.uint64(n), seed, _STREAM_GRID_DROP, xp)
              >> xp.uint64(11)) < limit
    keep_h = has_h & (parent_left | ~drop_h)
    keep_v = has_v & (parent_up | ~drop_v)
    del drop_h, drop_v, coin, parent_left, parent_up, has_h, has_v
    w_h = rng.bounded(rng.random_bits(lo, span, seed, _STREAM_GRID_W, xp), low, high, xp).astype(xp.int32)
    w_v = rng.bounded(rng.hash_counters(v.astype(xp.uint64) + xp.uint64(n), seed, _STREAM_GRID_W, xp),
                      low, high, xp).astype(xp.int32)
    m = hi - lo
    # Neighbour slots in increasing id order: up, left, right, down -> rows come out sorted.
    false = xp.zeros(1, dtype=bool)
    mask = xp.stack([keep_v[:m],
                     keep_h[:m],
                     xp.concatenate([keep_h[1:], false])[:m] & (c[:m] < cols - 1),
                     xp.concatenate([keep_v[cols:], xp.zeros(cols, dtype=bool)])[:m]], axis=1)
    it = index_dtype(n)
    v, own = v[:m], slice(0, m)
    nbr = xp.stack([v - cols, v - 1, v + 1, v + cols], axis=1).astype(it)
    zero_w = xp.zeros(1, dtype=xp.int32)
    wts = xp.stack([w_v[own], w_h[own], xp.concatenate([w_h[1:], zero_w])[:m],
                    xp.concatenate([w_v[cols:], xp.zeros(cols, dtype=xp.int32)])[:m]], axis=1)
    del w_h, w_v, keep_h, keep_v, r, c
    counts = mask.sum(axis=1)
    indptr = xp.zeros(m + 1, dtype=xp.int64)
    indptr[1:] = xp.cumsum(counts)
    flat = mask.ravel()
    return indptr, nbr.ravel()[flat], wts.ravel()[flat]


def edge_stream(kind: str, p: dict, *, xp=np, chunk: int | None = None):
    """``(stream, n, symmetric, edges)`` of a random spec's graph (``kind`` ``kron``, ``rmat``
    or ``er``, parameters ``p`` as :func:`spec_params` gives them): the replayable edge stream
    it is built from (:mod:`.bucketed`), so that one range of rows can be built alone
    (:mod:`groute.graph.ranged_rows`), and how many edges the stream generates (self loops
    included: an upper bound on what it yields)."""
    if kind in ("kron", "rmat"):
        permute = True if kind == "kron" else bool(p["perm"])
        stream = _rmat_stream(p["scale"], p["ef"], p["a"], p["b"], p["c"], seed=p["seed"], xp=xp,
                              chunk=chunk, permute=permute)
        n = 1 << p["scale"]
        return stream, n, kind == "kron" or bool(p["sym"]), p["ef"] * n
    if kind == "er":
        n = int(p["n"])
        m = int(round(n * p["avg_degree"] / 2))
        return _er_stream(n, m, p["seed"], xp, chunk), n, True, m
    raise ValueError(f"{kind}: no edge stream (the random specs kron, rmat and er have one)")


def spec_params(s: GraphSpec, seed: int | None = None) -> dict:
    """The generator parameters of spec ``s``, ``seed`` used where the spec sets none."""
    p = dict(s.params)
    if seed is not None and "seed=" not in s.text.replace(" ", ""):
        p["seed"] = int(seed)
    return p


def spec_size_bound(s: GraphSpec) -> tuple[int, int]:
    """``(vertices, arcs)`` of spec ``s``'s graph, the arcs an upper bound (every edge its
    generator draws, both directions where it is symmetric; a grid's four neighbours a
    vertex): what its CSR is sized by, known before anything is generated."""
    p = s.params
    if s.kind in ("kron", "rmat"):
        symmetric = s.kind == "kron" or bool(p["sym"])
        return 1 << p["scale"], (2 if symmetric else 1) * p["ef"] << p["scale"]
    if s.kind == "er":
        return int(p["n"]), 2 * int(round(p["n"] * p["avg_degree"] / 2))
    return p["rows"] * p["cols"], 4 * p["rows"] * p["cols"]


def check_fits_host(s: GraphSpec) -> None:
    """Raise :class:`~groute.memory.GraphTooLarge` naming spec ``s`` when its graph's CSR alone
    (:func:`spec_size_bound`) would not fit the memory this process can still allocate: a
    spec of any size is a few characters, and generating it would otherwise run until the
    machine runs out of memory."""
    from groute.memory import GraphTooLarge
    from .budget import available_bytes, csr_bytes
    n, arcs = spec_size_bound(s)
    need, free = csr_bytes(n, arcs, weighted=s.kind == "grid"), available_bytes()
    if free is not None and need > free:
        raise GraphTooLarge(f"{s.text or s.canonical}: up to {arcs:,} arcs on {n:,} vertices, "
                            f"a CSR of about {need / 2**30:.1f} GiB, more than the "
                            f"{free / 2**30:.1f} GiB this process can still allocate")


def generate(spec, *, xp=None, backend: str | None = "auto", seed: int | None = None,
             name: str | None = None, on_host: bool = False) -> CSRGraph:
    """Generate the graph a spec names (string or :class:`GraphSpec`); ``seed`` is used when the
    spec has none of its own. The result is on ``xp`` (NumPy unless a GPU backend is chosen),
    or in host memory with ``on_host`` (the random graphs are then built there directly);
    a graph that cannot fit there is refused first (:func:`check_fits_host`)."""
    s = spec if isinstance(spec, GraphSpec) else parse_spec(spec)
    p = spec_params(s, seed)
    xp = rng.get_xp(backend, xp)
    if on_host or xp is np:
        check_fits_host(s)
    label = name or s.text or s.canonical
    if s.kind == "kron":
        return kronecker(p["scale"], p["ef"], p["a"], p["b"], p["c"], seed=p["seed"], xp=xp,
                         name=label, on_host=on_host)
    if s.kind == "rmat":
        return rmat(p["scale"], p["ef"], p["a"], p["b"], p["c"], seed=p["seed"], xp=xp,
                    symmetric=bool(p["sym"]), permute=bool(p["perm"]), name=label,
                    on_host=on_host)
    if s.kind == "grid":
        g = grid(p["rows"], p["cols"], drop=p["drop"], seed=p["seed"], low=p["low"],
                 high=p["high"], xp=xp, name=label)
        return g.to_host() if on_host else g
    if s.kind == "er":
        return erdos_renyi(p["n"], p["avg_degree"], seed=p["seed"], xp=xp, name=label,
                           on_host=on_host)
    raise ValueError(f"no generator for {s.kind!r}")
