"""k-cores and k-trusses: NetworkX's core numbers from groute's k-core algorithm, the subgraphs
NetworkX builds from them (k-core, shell, crust, corona), and the k-truss by support peeling
on the devices (the intersect operator)."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry
from groute.engines import make_engine
from groute.operators import Functor, Intersection, advance, filter

from ..devices import devices_for
from ..graph import to_networkx
from .support import COUNT_ARRIVAL

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.tests.test_core']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}

SELF_LOOPS = ("Input graph has self loops which is not permitted; "
              "Consider using G.remove_edges_from(nx.selfloop_edges(G)).")


def _core_numbers(G) -> np.ndarray:
    """Every position's core number (groute's k-core); NetworkX's error for self-loops."""
    if G.has_self_loops:
        raise nx.NetworkXNotImplemented(SELF_LOOPS)
    if not len(G):
        return np.zeros(0, np.int64)
    run = registry.function("core_number")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, ctx=ctx, partition=partition)
    return np.asarray(result.values, dtype=np.int64)


def core_number(G):
    return dict(zip(G.nodes, _core_numbers(G).tolist()))


def _networkx(G):
    """The NetworkX graph whose subgraphs are the answers: the caller's, which the conversion
    kept (NetworkX asks these functions' conversions to preserve every attribute), else ``G``
    converted back (a GrouteGraph given directly)."""
    return G.nx_graph if G.nx_graph is not None else to_networkx(G)


def _core_subgraph(G, core_number, k, keep, default):
    """NetworkX's ``_core_subgraph``: the subgraph induced by the nodes whose core number
    ``c`` passes ``keep(c, k)``, with ``k`` (None) ``default(the largest core number)``; the
    core numbers groute's, or the caller's dict read as NetworkX reads it."""
    if core_number is None:
        core = _core_numbers(G)
        if k is None:
            k = default(max(core.tolist()))     # none: max()'s ValueError, as NetworkX's
        nodes = G.labels_of(np.flatnonzero(keep(core, k)))
    else:
        if k is None:
            k = default(max(core_number.values()))
        nodes = [v for v in core_number if keep(core_number[v], k)]
    return _networkx(G).subgraph(nodes).copy()


def k_core(G, k=None, core_number=None):
    return _core_subgraph(G, core_number, k, lambda c, k: c >= k, lambda top: top)


def k_shell(G, k=None, core_number=None):
    return _core_subgraph(G, core_number, k, lambda c, k: c == k, lambda top: top)


def k_crust(G, k=None, core_number=None):
    return _core_subgraph(G, core_number, k, lambda c, k: c <= k, lambda top: top - 1)


def _in_core(s, v):
    return s["core"][v] >= s["k"]


#: a vertex of the k-core
IN_CORE = Functor(name="nx_in_core", params="const int* core, int k",
                  cuda="return core[v] >= k;", numpy=_in_core)


def _neighbours_in_core(G, core, k: int) -> np.ndarray:
    """Per position, how many of its neighbours (NetworkX's ``G[v]``: a directed graph's
    successors) have a core number of at least ``k``: one advance from the k-core along the
    arcs into it."""
    with devices_for(G.csr, "operators") as (ctx, partition):
        with make_engine(G.csr, "bsp", ctx=ctx, partition=partition) as engine:
            engine.state("core", np.int32, values=core)
            engine.state("count", np.int32, 0)
            advance(filter(engine.all_vertices(), IN_CORE, k=k), COUNT_ARRIVAL, over="in")
            return engine.gather("count")


def k_corona(G, k, core_number=None):
    """The nodes of core number ``k`` (None: the largest) with exactly ``k`` neighbours
    (``G[v]``) in the k-core.
    A ``core_number`` dict given is read by position when it holds an integer for every node,
    and nothing else (otherwise NetworkX runs the call, reading it as it does)."""
    if core_number is None:
        core = _core_numbers(G)
    elif set(core_number) == set(G.nodes) and all(
            isinstance(c, (int, np.integer)) and not isinstance(c, bool)
            for c in core_number.values()):
        core = np.array([core_number[v] for v in G.nodes], dtype=np.int64)
    else:
        raise NotImplementedError("a core_number dict that is not an integer per node of G: "
                                  "NetworkX runs the call")
    if k is None:
        k = max(core.tolist())                  # NetworkX's: the largest core number
    shell = core == k
    if bool(shell.any()):
        k = int(core[np.argmax(shell)])      # an integer, whatever k's type
        shell &= _neighbours_in_core(G, core, k) == k
    return _networkx(G).subgraph(G.labels_of(np.flatnonzero(shell))).copy()


def k_truss(G, k):
    """Peeling rounds on the devices (:class:`groute.operators.Intersection`), as NetworkX's
    loop: every edge with fewer than ``k - 2`` common neighbours of its ends goes, then again on
    what is left, until a round drops nothing. The answer is built as NetworkX builds it (a
    copy of ``G`` less the dropped edges and the nodes they leave alone), so its orders are
    NetworkX's."""
    if G.has_self_loops:
        raise nx.NetworkXNotImplemented(SELF_LOOPS)
    n = len(G)
    src, dst = G.arc_rows, G.adjacency_indices
    everything = np.unique(src[src < dst] * n + dst[src < dst])
    left = everything
    if everything.size:
        with devices_for(G.csr, "operators") as (ctx, _):
            with Intersection(G.csr, ctx=ctx) as rows:
                while rows.peel(k - 2):
                    pass
                src, dst = rows.arcs()
        left = src[src < dst] * n + dst[src < dst]
    gone = np.setdiff1d(everything, left, assume_unique=True)
    touched = np.zeros(n, bool)
    touched[left // n] = touched[left % n] = True
    H = _networkx(G).copy()
    H.remove_edges_from(zip(G.labels_of(gone // n), G.labels_of(gone % n)))
    H.remove_nodes_from(G.labels_of(np.flatnonzero(~touched)))
    return H
