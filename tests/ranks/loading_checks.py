"""Run as several MPI processes by tests/test_distributed_loading.py: each rank loads its part
of every graph named on the command line; the parts put together must be the whole graph, and
the ranges the contiguous split's; each rank's in-arcs gathered from every rank's out-arcs
(ranked_in_arcs, weights carried) are the whole graph's in-arcs of its range."""
import sys

import numpy as np

from groute import distributed
from groute.graph import load_graph, partition_graph
from groute.graph.rank_graph import ranked_in_arcs


def same(a, b) -> bool:
    return a is None and b is None or (a is not None and b is not None and np.array_equal(a, b))


def in_arcs_of(graph, first, end):
    """The in-arcs of rows ``[first, end)`` of a whole graph, sources ascending in each row,
    with the arcs' weights (None unweighted)."""
    indptr = np.asarray(graph.indptr, np.int64)
    src = np.repeat(np.arange(graph.num_vertices), np.diff(indptr))
    dst = np.asarray(graph.indices, np.int64)
    keep = np.flatnonzero((dst >= first) & (dst < end))
    keep = keep[np.lexsort((src[keep], dst[keep]))]
    in_indptr = np.zeros(end - first + 1, np.int64)
    np.cumsum(np.bincount(dst[keep] - first, minlength=end - first), out=in_indptr[1:])
    weights = None if graph.weights is None else np.asarray(graph.weights, np.float64)[keep]
    return in_indptr, src[keep].astype(np.int32), weights


with distributed.Context(backend="cpu", timeout=30) as ctx:
    for source in sys.argv[1:]:
        weighted = True if source.startswith("er:") else None
        part = distributed.load_graph(source, ctx, weighted=weighted)
        held = part.part.num_edges
        whole = part.gather(ctx.ranks)
        ref = load_graph(source, cache=False, weighted=weighted)
        ranges = partition_graph(ref, ctx.num_devices, "contiguous").offsets
        ok = (same(whole.indptr, ref.indptr) and same(whole.indices, ref.indices)
              and same(whole.weights, ref.weights) and same(part.offsets, ranges)
              and part.num_edges == ref.num_edges and part.directed == ref.directed
              and same(part.vertex_ids.array(), ref.vertex_ids.array()))
        got = ranked_in_arcs(part, ctx.ranks, part.weights)
        want = in_arcs_of(ref, part.first, part.end)
        ok = ok and all(same(a, b) for a, b in zip(got, want))
        print(f"rank {ctx.rank} {source}: {'same' if ok else 'DIFFERENT'} "
              f"({held} of {ref.num_edges} arcs)", flush=True)
