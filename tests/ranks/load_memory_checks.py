"""Run as several MPI processes by tests/test_distributed_loading.py: each rank loads its part
of every graph named on the command line (a generated spec, or a part set's folder) with its
host memory traced, and checks the loader's traced peak against the bound docs/DISTRIBUTED.md
("Loading") states, whose terms each rank computes here on its own (replaying the stream to
count what its share and its range hold)."""
import sys
from pathlib import Path

import numpy as np

from groute import distributed
from groute.graph.generators import edge_stream, grid_rows, spec_params
from groute.graph.ranged_rows import BUCKET_SLACK, GRID_SLICE, SORT_BLOCK
from groute.graph.spec import parse_spec
from groute.host_peak import TracedPeak

#: Python's own objects and the small arrays of a load (tracemalloc traces them too)
SMALL = 1 << 20


def candidates(stream, symmetric, lo, hi):
    """Each vertex of ``[lo, hi)``'s candidate arcs (repeats included), counted here."""
    counts = np.zeros(hi - lo, dtype=np.int64)
    for src, dst in stream():
        for ends in ((src, dst) if symmetric else (src,)):
            mine = ends[(ends >= lo) & (ends < hi)].astype(np.int64) - lo
            counts += np.bincount(mine, minlength=hi - lo)
    return counts


def stream_bound(spec, k, r, first, end, arcs):
    """The bound for a graph built from an edge stream: W + F + 5 D + max(4 max(c_r, b) +
    32 v, 64 v) + SMALL."""
    s = parse_spec(spec)
    stream, n, symmetric, edges = edge_stream(s.kind, spec_params(s))
    chunk = 0
    with TracedPeak() as working:                   # W: the stream's own arrays
        for src, _ in stream():
            chunk = max(chunk, int(src.shape[0]))
    share = (n * r // k, n * (r + 1) // k)
    mine = candidates(stream, symmetric, first, end)
    shared = candidates(stream, symmetric, *share)
    c_r, c_s = int(mine.sum()), int(shared.sum())
    most = int(max(mine.max(initial=0), shared.max(initial=0)))            # D
    budget = int(np.ceil(edges * (2 if symmetric else 1) * (1 + BUCKET_SLACK) / k))
    bucket = min(c_s, max(budget, most))                                   # b
    v = max(share[1] - share[0], end - first)
    places = 96 * chunk + 48 * SORT_BLOCK                                  # F
    assert c_r >= arcs
    return (working.bytes + places + 5 * most + max(4 * max(c_r, bucket) + 32 * v, 64 * v)
            + SMALL)


def grid_bound(spec, k, r, first, end, arcs):
    """The bound for a grid: G + max(its CSR part + 8 n_r, 32 v) + SMALL, G one slice's
    arrays."""
    p = spec_params(parse_spec(spec))
    n = p["rows"] * p["cols"]
    with TracedPeak() as working:
        grid_rows(p["rows"], p["cols"], 0, min(GRID_SLICE, n), drop=p["drop"], seed=p["seed"],
                  low=p["low"], high=p["high"])
    v = max(n * (r + 1) // k - n * r // k, end - first)
    part = 8 * (end - first + 1) + 8 * arcs
    return working.bytes + max(part + 8 * (end - first), 32 * v) + SMALL


def part_set_bound(graph):
    """The bound for a part set: this part's CSR (and the labels, every rank's) + SMALL."""
    p = graph.part
    labels = 0 if graph.file_ids is None else graph.file_ids.nbytes
    weights = 0 if p.weights is None else p.weights.nbytes
    return p.indptr.nbytes + p.indices.nbytes + weights + labels + SMALL


with distributed.Context(timeout=60) as ctx:
    for spec in sys.argv[1:]:
        graph = distributed.load_graph(spec, ctx, measure=True)
        traced = graph.load_memory.ranks[ctx.rank]["traced_bytes"]
        if Path(spec).is_dir():
            bound = part_set_bound(graph)
        else:
            bound = (grid_bound if spec.startswith("grid") else stream_bound)(
                spec, ctx.num_devices, ctx.rank, graph.first, graph.end, graph.part.num_edges)
        verdict = "within" if traced <= bound else "OVER"
        print(f"rank {ctx.rank} {spec}: {verdict} the bound (traced {traced:,} bytes, bound "
              f"{bound:,}, this part's CSR {graph.load_memory.ranks[ctx.rank]['csr_bytes']:,})",
              flush=True)
