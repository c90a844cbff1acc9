"""Connected, weakly and strongly connected components, in NetworkX's order."""
from __future__ import annotations

import networkx as nx
import numpy as np

from groute import registry
from groute.graph.reference import label_groups

from ..devices import devices_for
from .support import component_labels, depths

#: NetworkX's test modules that exercise this module's functions (tests/test_nx_suite.py)
NX_TEST_MODULES = ['networkx.algorithms.components.tests.test_connected', 'networkx.algorithms.components.tests.test_weakly_connected', 'networkx.algorithms.components.tests.test_strongly_connected']

#: NetworkX tests of these functions expected to fail through the backend: {"file.py:Class.test"
#: or "file.py:test": reason}; each a documented limit (docs/NETWORKX.md), not a wrong answer
EXPECTED_FAILURES: dict[str, str] = {}


def _component_sets(G):
    """The components as sets, in NetworkX's order (by each one's first node in ``G``)."""
    for members in label_groups(component_labels(G)):
        yield set(G.labels_of(members))


def connected_components(G):
    if len(G):
        yield from _component_sets(G)


def weakly_connected_components(G):
    if len(G):
        yield from _component_sets(G)


def number_connected_components(G):
    if not len(G):
        return 0
    labels = component_labels(G)
    return int(np.count_nonzero(labels == np.arange(labels.shape[0])))


def is_connected(G):
    if not len(G):
        raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    return bool(np.all(component_labels(G) == 0))


def is_weakly_connected(G):
    return is_connected(G)          # a directed graph's labels are its weak components'


def number_weakly_connected_components(G):
    return number_connected_components(G)


def node_connected_component(G, n):
    hash(n)         # an unhashable node: TypeError, as NetworkX's set of seen nodes raises
    if n not in G:
        raise KeyError(n)
    depth = depths(G, G.position(n))
    return set(G.labels_of(np.flatnonzero(depth >= 0)))


def _strong_labels(G) -> np.ndarray:
    """Every position's strongly connected component: the smallest position in it."""
    run = registry.function("strongly_connected_components")
    with devices_for(G.csr, "operators") as (ctx, partition):
        result = run(G.csr, ctx=ctx, partition=partition)
    return np.asarray(result.values, dtype=np.int64)


def is_strongly_connected(G):
    if not len(G):
        raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    return bool(np.all(_strong_labels(G) == 0))


def number_strongly_connected_components(G):
    if not len(G):
        return 0
    labels = _strong_labels(G)
    return int(np.count_nonzero(labels == np.arange(labels.shape[0])))


def _tarjan_order(G, labels) -> list[int]:
    """The components (by label) in the order NetworkX's Tarjan yields them: a component when
    the first of its nodes that the depth-first search reached is finished, the search started
    from each node in ``G``'s order not yet reached and taking every node's neighbours in
    adjacency order. With the components known this is a plain depth-first search (no
    lowlinks), but a sequential one over every arc: depth-first order has no parallel form."""
    indptr = np.asarray(G.csr.indptr).tolist()
    nbrs = G.adjacency_indices.tolist()
    label = labels.tolist()
    n = len(label)
    visited = bytearray(n)
    is_root = bytearray(n)
    claimed = bytearray(n)        # by label: its root has been reached
    nxt = indptr[:-1]             # per node, the next arc to look at
    order = []
    for s in range(n):
        if visited[s]:
            continue
        visited[s] = 1
        if not claimed[label[s]]:
            claimed[label[s]] = is_root[s] = 1
        stack = [s]
        while stack:
            v = stack[-1]
            i, end = nxt[v], indptr[v + 1]
            while i < end and visited[nbrs[i]]:
                i += 1
            if i < end:
                w = nbrs[i]
                nxt[v] = i + 1
                visited[w] = 1
                if not claimed[label[w]]:
                    claimed[label[w]] = is_root[w] = 1
                stack.append(w)
            else:
                nxt[v] = end
                stack.pop()
                if is_root[v]:
                    order.append(label[v])
    return order


def strongly_connected_components(G):
    """groute's components, yielded in NetworkX's order (its Tarjan's: NetworkX's
    ``condensation`` numbers the components in that order, and functions built on it, such as
    ``write_network_text``, print by it): the order is replayed on the host from the
    components (:func:`_tarjan_order`) unless there is only one."""
    if not G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for undirected type")
    if not len(G):
        return
    labels = _strong_labels(G)
    if bool(np.all(labels == 0)):
        yield set(G.nodes)
        return
    groups = {int(m[0]): m for m in label_groups(labels)}     # a group's first: its label
    for lab in _tarjan_order(G, labels):
        yield set(G.labels_of(groups[lab]))
