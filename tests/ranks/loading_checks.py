"""Run as several MPI processes by tests/test_distributed_loading.py: each rank loads its part
of every graph named on the command line; the parts put together must be the whole graph, and
the ranges the contiguous split's."""
import sys

import numpy as np

from groute import distributed
from groute.graph import load_graph, partition_graph


def same(a, b) -> bool:
    return a is None and b is None or (a is not None and b is not None and np.array_equal(a, b))


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
        print(f"rank {ctx.rank} {source}: {'same' if ok else 'DIFFERENT'} "
              f"({held} of {ref.num_edges} arcs)", flush=True)
