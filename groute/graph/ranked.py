"""Graphs loaded by ranks: each process of an MPI job holds only its range of rows.

On a :class:`~groute.runtime.rank_context.RankContext` of ``K`` ranks, rank ``r`` owns the
vertices ``[offsets[r], offsets[r + 1])`` of the contiguous split
(:func:`groute.graph.partition.contiguous_offsets`: ranges of about equal arc counts, exactly
the ranges ``partition_graph(g, K, "contiguous")`` gives the whole graph) and holds their
out-arcs, nothing else of the graph (:class:`RankGraph`). How a rank gets its rows without
the whole graph (:func:`load_ranked`):

- a random spec (``kron``, ``rmat``, ``er``): its edge stream is counter-based, so a rank
  replays it and keeps the arcs leaving its range (:func:`groute.graph.bucketed.range_rows`);
  first the rows of an equal share of the vertices, whose degrees every rank then shares to
  cut the arc-balanced ranges, then its own range's. Memory: the rank's share (and one
  degree per vertex of the graph while the ranges are cut); time: every rank replays the
  whole stream (an R-MAT edge's source is random), twice;
- a ``grid``: every choice is a function of a vertex's id, so a rank computes its rows alone;
- a file: from a part set written once by ``groute partition`` (:mod:`.part_set`), each rank
  reading its own part's file.

The ranks' rows together are the whole graph's, bit for bit (weights too: ``weighted=True``
hashes each arc's ends as :meth:`~groute.graph.CSRGraph.with_weights` does);
:meth:`RankGraph.gather` puts them together again, for checks.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import part_set
from .bucketed import range_rows
from .generators import edge_stream, grid_rows, spec_params
from .partition import LocalGraph, contiguous_offsets
from .rank_graph import RankGraph
from .spec import is_spec, parse_spec


def load_ranked(source, ranks, *, seed: int | None = None, weighted: bool | None = None,
                symmetric: bool = False) -> RankGraph:
    """This rank's :class:`RankGraph` of ``source``: a random spec, a grid spec, or a part set
    written by ``groute partition`` (module docstring). ``seed``: the generator seed for a spec
    that sets none, and the random weights' seed; ``weighted``: True adds random weights where
    the graph has none, False drops them (None keeps what it has). A collective: every rank
    calls it with the same arguments.

    Raises
    ------
    ValueError
        For a file that is not a part set (saying how to write one), ``symmetric`` on a graph
        loaded by ranks, or a part set of another number of parts than there are ranks.
    """
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    if text is None:
        raise TypeError(f"a graph loaded by ranks comes from a spec or a part set, got "
                        f"{type(source).__name__}")
    if symmetric:
        raise ValueError("symmetric=True is not applied to a graph loaded by ranks: write the "
                         "part set from the symmetric graph (groute.graph.part_set."
                         "write_part_set of it, or the command groute partition)")
    path = Path(text).expanduser()
    if path.is_dir():
        g = part_set.read_part(path, ranks.rank, ranks.size)
    elif path.exists():
        raise ValueError(f"{text}: a file is read by ranks from a part set, one file per rank; "
                         f"write it once in {ranks.size} parts (groute.graph.part_set."
                         f"write_part_set, or the command groute partition) and give its "
                         f"folder as the graph")
    elif is_spec(text):
        g = _generate(text, ranks, seed)
    else:
        raise FileNotFoundError(f"{text!r} is neither a part set (a folder written by groute "
                                f"partition) nor a graph spec (kron:21, rmat:20, grid:4900, "
                                f"er:1e6:8)")
    if weighted is True and g.weights is None:
        g = g.with_weights(seed=0 if seed is None else seed)
    elif weighted is False and g.weights is not None:
        g = RankGraph(_local(g.part, g.part.indptr, g.part.indices, None), g.offsets,
                      num_edges=g.num_edges, name=g.name, id_base=g.id_base, labels=g.file_ids)
    g.ranks = ranks
    return g


def _local(like: LocalGraph, indptr, indices, weights) -> LocalGraph:
    return LocalGraph(like.part, like.first, indptr, indices, weights,
                      num_global_vertices=like.num_global_vertices, directed=like.directed,
                      name=like.name)


def _generate(text: str, ranks, seed) -> RankGraph:
    """The rows of this rank's range of a generated graph (module docstring)."""
    s = parse_spec(text)
    p = spec_params(s, seed)
    k, r = ranks.size, ranks.rank
    if s.kind == "grid":
        height, width = p["rows"], p["cols"]
        n, symmetric = height * width, True

        def build(lo, hi):
            return grid_rows(height, width, lo, hi, drop=p["drop"], seed=p["seed"], low=p["low"],
                             high=p["high"])
    else:
        stream, n, symmetric = edge_stream(s.kind, p)

        def build(lo, hi):
            return (*range_rows(stream, n, lo, hi, symmetric=symmetric), None)
    if k > max(n, 1):
        raise ValueError(f"{text}: {k} ranks for a graph of {n} vertices; every rank owns at "
                         f"least one vertex")
    share = (n * r // k, n * (r + 1) // k)
    rows = build(*share)
    degrees = np.concatenate(ranks.allgatherv(np.diff(rows[0]).astype(np.int64),
                                              what=f"the degrees of {text}"))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    del degrees
    offsets = contiguous_offsets(indptr, k)
    m = int(indptr[-1])
    del indptr
    lo, hi = int(offsets[r]), int(offsets[r + 1])
    if (lo, hi) != share:
        rows = build(lo, hi)
    ip, indices, weights = rows
    part = LocalGraph(r, lo, ip, np.asarray(indices, dtype=np.int32), weights,
                      num_global_vertices=n, directed=not symmetric, name=f"{text}[{r}]")
    return RankGraph(part, offsets, num_edges=m, name=text)


def ranked_in_arcs(graph: RankGraph, ranks, values=None):
    """The in-arcs of this rank's vertices: ``(in_indptr int64 from 0, sources int32, in_values)``,
    each row's sources ascending as :func:`groute.graph.arcs.in_arcs` orders them, from every
    rank's out-arcs (one alltoallv of the arcs to their targets' ranks). ``values``: one per
    out-arc of this rank (an arc's weight or factor), carried to the in-arc (None: none)."""
    p = graph.part
    indptr = np.asarray(p.indptr, dtype=np.int64)
    src = np.repeat(np.arange(p.first, p.end, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(p.indices, dtype=np.int64)
    owner = np.searchsorted(graph.offsets, dst, side="right") - 1
    order = np.argsort(owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(ranks.size + 1))
    pairs = np.stack([dst[order], src[order]], axis=1)
    what = f"the in-arcs of {graph.name}"
    got = np.concatenate(ranks.alltoallv([pairs[a:b] for a, b in zip(cuts[:-1], cuts[1:])],
                                         np.int64, (2,), what=what))
    arcs = np.lexsort((got[:, 1], got[:, 0]))
    in_indptr = np.zeros(p.num_vertices + 1, dtype=np.int64)
    np.cumsum(np.bincount(got[:, 0] - p.first, minlength=p.num_vertices), out=in_indptr[1:])
    in_values = None
    if values is not None:
        moved = np.asarray(values, dtype=np.float64)[order]
        in_values = np.concatenate(ranks.alltoallv(
            [moved[a:b] for a, b in zip(cuts[:-1], cuts[1:])], np.float64, what=what))[arcs]
    return in_indptr, got[arcs, 1].astype(np.int32), in_values
