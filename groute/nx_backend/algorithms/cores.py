"""k-cores: NetworkX's core numbers from groute's k-core algorithm."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry

from ..devices import devices_for

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tests.test_core']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def core_number(G):
    if G.has_self_loops:
        raise nx.NetworkXNotImplemented(
            "Input graph has self loops which is not permitted; "
            "Consider using G.remove_edges_from(nx.selfloop_edges(G)).")
    if not len(G):
        return {}
    run = registry.function("core_number")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, ctx=ctx, partition=partition)
    return dict(zip(G.nodes, np.asarray(result.values, dtype=np.int64).tolist()))
