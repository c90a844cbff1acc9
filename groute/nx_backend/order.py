"""NetworkX's visiting order, rebuilt from the depths groute computed.

NetworkX's breadth-first functions (``bfs_layers``, ``single_source_shortest_path_length``)
visit layer ``d + 1`` in the order its nodes first appear among the neighbours of layer ``d``'s
nodes, taken in layer order and each node's neighbours in adjacency order. Given every node's
depth that is a vectorised pass per layer over the layer's arcs, with the graph's rows in
NetworkX's adjacency order (:attr:`~.graph.GrouteGraph.adjacency_indices`). The same pass
gives each node NetworkX's breadth-first parent (``bfs_predecessors``, ``bfs_edges``): the
first node of the previous layer, in that order, with an arc to it.
"""
from __future__ import annotations

import numpy as np

from groute.graph.arcs import arcs_of_rows


def layers_in_order(depth: np.ndarray, indptr: np.ndarray, neighbours: np.ndarray,
                    first_layer: np.ndarray, last: int | None = None,
                    parents: list | None = None) -> list[np.ndarray]:
    """The layers (arrays of positions) in NetworkX's order, from ``first_layer`` (depth 0)
    through depth ``last`` (None: every reached layer). ``depth[v]``: hops from the sources,
    < 0 where not reached. ``parents``, a list, receives per layer after the first the parent
    of each of its nodes (an array aligned with the layer)."""
    layers = [np.asarray(first_layer, dtype=np.int64)]
    d = 0
    while last is None or d < last:
        arcs = arcs_of_rows(indptr, layers[-1])     # the layer's rows, row after row
        if arcs.size == 0:
            break
        found = neighbours[arcs]
        onward = depth[found] == d + 1
        found = found[onward]
        if found.size == 0:
            break
        _, first = np.unique(found, return_index=True)
        first = np.sort(first)
        layers.append(found[first])
        if parents is not None:
            rows = np.repeat(layers[-2], indptr[layers[-2] + 1] - indptr[layers[-2]])
            parents.append(rows[onward][first])
        d += 1
    return layers
