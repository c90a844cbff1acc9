"""Run as several MPI processes by tests/test_distributed_apps.py (CPU) and
tests/test_distributed_gpu.py (CUDA): CC across ranks merges each rank's changes (a bit per
vertex of a giant's tree and pairs for the rest, or the array whole where its pairs overflow)
and answers as one process, whichever form the changes take: messages through Routers on the
CPU backend, read in place by rank 0 over CUDA IPC on CUDA ranks of one host (``auto``).
``cc_checks.py BACKEND SHARE SPEC...``: SHARE pairs per vertex (CHANGES_LIST_SHARE); each rank
prints per graph whether its answer is the one process's, and the stats of the exchange."""
import sys

import numpy as np

import groute
from groute import distributed
from groute.apps.cc import CC
from groute.engines.components import device as cc_device
from groute.graph import load_graph

backend = sys.argv[1]
cc_device.CHANGES_LIST_SHARE = int(sys.argv[2])
with distributed.Context(backend=backend, timeout=60) as ctx:
    for spec in sys.argv[3:]:
        part = distributed.load_graph(spec, ctx)
        got = groute.connected_components(part, ctx=ctx)
        want = groute.connected_components(load_graph(spec), backend=backend, devices=1)
        same = np.array_equal(got.values, want.values)
        st = got.stats
        print(f"rank {ctx.rank} {spec}: {'same' if same else 'DIFFERENT'} "
              f"whole {st['merges_read_whole']} bytes {st['bytes_moved']} "
              f"rounds {st['merge_rounds']} routed {st['routed']}", flush=True)
        # a solver's lists are sized when it is made: a later change of the share is not
        # what its ranks read each other's messages by
        share = cc_device.CHANGES_LIST_SHARE
        with CC(part, ctx=ctx) as solver:
            cc_device.CHANGES_LIST_SHARE = 1 if share != 1 else 10**9
            # twice: a rank's next run rewrites what rank 0 read in the last one
            again = all(np.array_equal(solver.run().values, want.values) for _ in range(2))
            cc_device.CHANGES_LIST_SHARE = share
        print(f"rank {ctx.rank} {spec} made before: {'same' if again else 'DIFFERENT'}",
              flush=True)
    if backend == "cpu":        # reads in place need CUDA IPC: asked for, a clear error
        try:
            CC(part, ctx=ctx, exchange="peer").close()
            print(f"rank {ctx.rank} peer: not refused", flush=True)
        except ValueError as exc:
            print(f"rank {ctx.rank} peer refused: {exc}", flush=True)
