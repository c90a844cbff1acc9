"""Graphs loaded by ranks: each process of an MPI job holds only its range of rows.

On a :class:`~groute.runtime.rank_context.RankContext` of ``K`` ranks, rank ``r`` owns the
vertices ``[offsets[r], offsets[r + 1])`` of the contiguous split
(:func:`groute.graph.partition.contiguous_offsets`: ranges of about equal arc counts, exactly
the ranges ``partition_graph(g, K, "contiguous")`` gives the whole graph) and holds their
out-arcs, nothing else of the graph (:class:`RankGraph`). How a rank gets its rows without
the whole graph (:func:`load_ranked`):

- a generated spec (``kron``, ``rmat``, ``er``: a replayable edge stream, replayed on the
  rank's GPU where it runs on one; ``grid``: rows computed from vertex ids), by
  :mod:`.ranged_rows`: each rank counts the degrees of an equal
  share of the vertices (``[r n / K, (r + 1) n / K)``); the ranks cut the arc-balanced ranges
  from their shares (:func:`groute.graph.partition.contiguous_cuts`: no rank holds the whole
  graph's degrees); each share's counts go to the ranks that own its vertices (one
  alltoallv), and each rank builds its own range's rows from them;
- a file: from a part set written once by ``groute partition`` (:mod:`.part_set`), each rank
  reading its own part's file.

The host memory this takes per rank is stated in docs/DISTRIBUTED.md ("Loading"); with
``measure=True`` the loader traces its own peak on every rank (:class:`LoadMemory`).

The ranks' rows together are the whole graph's, bit for bit (weights too: ``weighted=True``
hashes each arc's ends as :meth:`~groute.graph.CSRGraph.with_weights` does);
:meth:`RankGraph.gather` puts them together again, for checks.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import host_peak
from . import part_set
from .budget import csr_bytes
from .generators import edge_stream, spec_params
from .partition import LocalGraph, contiguous_cuts, offsets_from_cuts
from .rank_graph import RankGraph
from .ranged_rows import GridRows, StreamRows
from .spec import is_spec, parse_spec


def load_ranked(source, ranks, *, seed: int | None = None, weighted: bool | None = None,
                symmetric: bool = False, measure: bool = False, device=None) -> RankGraph:
    """This rank's :class:`RankGraph` of ``source``: a random spec, a grid spec, or a part set
    written by ``groute partition`` (module docstring). A collective: every rank calls it with
    the same arguments.

    Parameters
    ----------
    source : str or path
        A graph spec (``kron:20``, ``grid:1000``, ...) or the folder of a part set.
    ranks : Ranks
        The job's ranks (:class:`groute.runtime.ranks.Ranks`).
    seed : int, optional
        The generator seed for a spec that sets none, and the random weights' seed.
    weighted : bool, optional
        True adds random weights where the graph has none, False drops them (None keeps what
        it has).
    symmetric : bool
        Refused (a graph loaded by ranks is symmetrised where its part set is written).
    measure : bool
        Trace every rank's host memory while it loads (:class:`LoadMemory`, as the graph's
        ``load_memory``; one allgather more).
    device : Device, optional
        This rank's device (a rank context's ``local_device``): on a CUDA device a generated
        graph's edge stream is replayed on its GPU and the rank's rows are sorted there; only
        degrees and targets are copied to the host
        (:class:`~groute.graph.ranged_rows.StreamRows`), and the memory pool's cached blocks
        are let go after; None or a CPU device: NumPy. The rows are the same either way.

    Returns
    -------
    RankGraph
        This rank's rows and the whole graph's facts.

    Raises
    ------
    ValueError
        For a file that is not a part set (saying how to write one), ``symmetric`` on a graph
        loaded by ranks, a part set of another number of parts than there are ranks, more
        ranks than vertices, or ranks that called it with different arguments (on every rank).
    """
    ranks.check_same_call("load_graph()", {
        "source": os.fspath(source) if isinstance(source, (str, os.PathLike)) else source,
        "seed": seed, "weighted": weighted, "symmetric": symmetric, "measure": measure})
    if not measure:
        return _load(source, ranks, seed, weighted, symmetric, device)
    with host_peak.TracedPeak() as peak:
        g = _load(source, ranks, seed, weighted, symmetric, device)
    g.load_memory = LoadMemory.gather(g, peak.bytes, ranks)
    return g


def _load(source, ranks, seed, weighted, symmetric, device) -> RankGraph:
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
        manifest = part_set.read_manifest(path)
        sets = ranks.allgather(manifest.get("set"), what=f"the part set ids of {text}")
        if len(set(sets)) > 1:          # a stale or another set's copy on some host
            raise ValueError(f"{text}: the ranks read different writings of the part set (set "
                             f"ids by rank: {sets}); copy the same part set to every host")
        part_set.check_arc_count(text, manifest,
                                 ranks.allreduce(int(g.part.num_edges),
                                                 what=f"the arc count of {text}"))
    elif path.exists():
        raise ValueError(f"{text}: a file is read by ranks from a part set, one file per rank; "
                         f"write it once in {ranks.size} parts (groute.graph.part_set."
                         f"write_part_set, or the command groute partition) and give its "
                         f"folder as the graph")
    elif is_spec(text):
        g = _generate(text, ranks, seed, device)
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


def _generate(text: str, ranks, seed, device) -> RankGraph:
    """The rows of this rank's range of a generated graph (module docstring), its edge stream
    replayed on ``device``'s array module (:func:`load_ranked`)."""
    xp = np if device is None else device.xp
    if xp is np:
        return _generate_on(text, ranks, seed, np)
    with device.use():
        try:
            return _generate_on(text, ranks, seed, xp)
        finally:    # else the replays' chunks stay cached in CuPy's pool, where the other
            xp.get_default_memory_pool().free_all_blocks()  # ranks on this GPU cannot use them


def _generate_on(text: str, ranks, seed, xp) -> RankGraph:
    """:func:`_generate` with the stream on ``xp`` (NumPy, or CuPy on the current GPU)."""
    s = parse_spec(text)
    p = spec_params(s, seed)
    k, r = ranks.size, ranks.rank
    if s.kind == "grid":
        n, symmetric = p["rows"] * p["cols"], True
        source = GridRows({key: p[key] for key in ("rows", "cols", "drop", "seed", "low",
                                                    "high")})
    else:
        stream, n, symmetric, edges = edge_stream(s.kind, p, xp=xp)
        source = StreamRows(stream, n, symmetric=symmetric, edges=edges, parts=k, xp=xp)
    if k > max(n, 1):
        raise ValueError(f"{text}: {k} ranks for a graph of {n} "
                         f"{'vertex' if n == 1 else 'vertices'}; every rank owns at "
                         f"least one vertex")
    share = (n * r // k, n * (r + 1) // k)
    table = source.counts(*share)
    offsets, m = _cut(table[:, 0], share[0], n, ranks, text)
    lo, hi = int(offsets[r]), int(offsets[r + 1])
    table = _to_owners(table, share, offsets, ranks, text)
    ip, indices, weights = source.rows(lo, hi, table)
    del table
    part = LocalGraph(r, lo, ip, indices, weights, num_global_vertices=n,
                      directed=not symmetric, name=f"{text}[{r}]")
    return RankGraph(part, offsets, num_edges=m, name=text)


def _cut(degrees, first: int, n: int, ranks, text: str):
    """``(offsets, m)``: the contiguous split of the graph whose vertices ``[first, first +
    len(degrees))`` have ``degrees`` on this rank (every rank a consecutive share), and its arc
    count; from every rank's row pointers of its share, never the whole graph's."""
    k, r = ranks.size, ranks.rank
    totals = ranks.allgather(int(degrees.sum()), what=f"the arc counts of {text}")
    m = sum(totals)
    piece = np.empty(degrees.shape[0] + 1, dtype=np.int64)
    piece[0] = sum(totals[:r])
    np.cumsum(degrees, out=piece[1:])
    piece[1:] += piece[0]
    cuts = contiguous_cuts(piece, first, m, k)
    del piece
    if k > 1:
        cuts = ranks.allreduce(cuts, "max", what=f"the ranges of {text}")
    return offsets_from_cuts(cuts, n, m, k), m


def _to_owners(table, share, offsets, ranks, text: str):
    """The rows of every rank's counts ``table`` (one row per vertex of its ``share``) that
    belong to this rank's range of ``offsets``, in vertex order (one alltoallv)."""
    a, b = share
    pieces = []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        pieces.append(table[min(max(int(lo), a), b) - a:min(max(int(hi), a), b) - a])
    got = ranks.alltoallv(pieces, np.int64, (table.shape[1],), what=f"the counts of {text}")
    return np.concatenate(got)


class LoadMemory:
    """Every rank's host memory while it loaded its part of a graph (``load_ranked(...,
    measure=True)``), against the whole graph's CSR.

    ``ranks``: one dict per rank, in rank order, with ``traced_bytes`` (the loader's
    :class:`~groute.host_peak.TracedPeak`: NumPy's arrays and Python's objects),
    ``max_rss_bytes`` (the process's peak resident set so far, interpreter, MPI and all:
    :func:`~groute.host_peak.max_rss_bytes`), ``vertices`` and ``arcs`` (of its part) and
    ``csr_bytes`` (its part's CSR). ``csr_bytes``: the whole graph's CSR
    (:func:`groute.graph.budget.csr_bytes`, weights included where it has them).
    """

    def __init__(self, ranks: list, csr_bytes: int):
        self.ranks = list(ranks)
        self.csr_bytes = int(csr_bytes)

    @classmethod
    def gather(cls, graph: RankGraph, traced_bytes: int, ranks) -> "LoadMemory":
        """Every rank's figures (this rank's ``traced_bytes`` and the rest), by one allgather:
        a collective."""
        p = graph.part
        weighted = p.weights is not None
        mine = {"traced_bytes": int(traced_bytes), "max_rss_bytes": host_peak.max_rss_bytes(),
                "vertices": int(p.num_vertices), "arcs": int(p.num_edges),
                "csr_bytes": csr_bytes(p.num_vertices, p.num_edges, weighted=weighted)}
        every = ranks.allgather(mine, what=f"the loading memory of {graph.name}")
        return cls(every, csr_bytes(graph.num_vertices, graph.num_edges, weighted=weighted))

    def ratio(self, key: str = "traced_bytes") -> float | None:
        """The largest rank's ``key`` figure over the whole graph's CSR bytes."""
        values = [r[key] for r in self.ranks if r[key] is not None]
        return max(values) / self.csr_bytes if values and self.csr_bytes else None

    def as_dict(self) -> dict:
        return {"csr_bytes": self.csr_bytes, "ranks": self.ranks,
                "traced_over_csr": self.ratio("traced_bytes"),
                "max_rss_over_csr": self.ratio("max_rss_bytes")}

    def lines(self) -> list[str]:
        """What ``--stats`` prints: a line per rank and the largest rank's ratio."""
        out = [f"loading memory per rank (the loader's traced NumPy peak; the process's peak "
               f"resident set), the whole graph's CSR {_size(self.csr_bytes)}:"]
        for r, f in enumerate(self.ranks):
            rss = "unknown" if f["max_rss_bytes"] is None else _size(f["max_rss_bytes"])
            out.append(f"  rank {r}: traced {_size(f['traced_bytes'])} "
                       f"({f['traced_bytes'] / self.csr_bytes:.3f}x the CSR), resident {rss}; "
                       f"holds {f['vertices']:,} vertices, {f['arcs']:,} arcs "
                       f"({_size(f['csr_bytes'])})")
        traced, rss = self.ratio("traced_bytes"), self.ratio("max_rss_bytes")
        out.append(f"  largest rank: traced {traced:.3f}x the CSR"
                   + ("" if rss is None else f", resident {rss:.3f}x"))
        return out


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"
