"""A NetworkX graph converted for groute, and the conversions NetworkX's dispatcher calls.

NetworkX converts a graph once per set of edge attributes a call needs and keeps the result in
``G.__networkx_cache__`` (``nx.config.cache_converted_graphs``) until ``G`` changes through its
methods, so a second call on the same graph skips the conversion. What a conversion must give
for that to be right: a result that depends only on ``G`` and the attributes asked for, which
:func:`from_networkx` does.
"""
from __future__ import annotations

import itertools
from functools import cached_property

import networkx as nx
import numpy as np

from groute.graph.arcs import arc_rows
from groute.graph.convert import csr_from_adjacency, networkx_adjacency


class GrouteGraph:
    """A NetworkX graph as groute runs it.

    ``csr``: the :class:`~groute.graph.CSRGraph` (rows sorted, the node labels as its vertex
    ids); ``nodes``: the labels in ``list(G)`` order (position ``i`` is ``nodes[i]``);
    ``adjacency_indices``: every row's neighbours again, in the order ``G[u]`` yields them
    (the rows are ``csr.indptr``'s), from which the backend rebuilds NetworkX's visiting order;
    ``weight``: the edge attribute read as the weight (None: unweighted) and ``weights`` its
    values in adjacency order with their own type (int64 or float64; None when no edge has
    the attribute); ``graph``: ``G.graph``, the graph attributes.

    ``name``: ``G.name``. ``nx_graph``: the caller's NetworkX graph itself, kept (a reference,
    no copy) by a conversion asked to preserve every edge or node attribute (NetworkX asks it
    of the functions that return a subgraph or a graph with the edges' data: ``k_core``, a
    spanning tree) and for every multigraph (whose edges a function may name by key), else
    None; from it ``edge_data`` is each arc's data as NetworkX stores it, aligned with
    :attr:`adjacency_indices` (a dict; a multigraph's ``{key: dict}``), and ``node_data`` each
    node's dict (both None without it). ``networkx_class`` is the class of ``G``, for a
    function that returns a graph of it.
    """

    __networkx_backend__ = "groute"

    def __init__(self, adjacency, csr, *, directed: bool, multigraph: bool, weight, graph=None,
                 nx_graph=None, name=""):
        self.csr = csr
        self.nodes = adjacency.nodes
        self.adjacency_indices = adjacency.indices
        self.weight = weight
        self.weights = adjacency.weights
        self.labels_are_positions = adjacency.labels_are_positions
        self.directed = bool(directed)
        self.multigraph = bool(multigraph)
        self.graph = dict(graph or {})
        self.nx_graph = nx_graph
        self.name = name
        self.networkx_class = type(nx_graph) if nx_graph is not None else {
            (False, False): nx.Graph, (True, False): nx.DiGraph,
            (False, True): nx.MultiGraph, (True, True): nx.MultiDiGraph}[(directed, multigraph)]

    @cached_property
    def edge_data(self) -> list | None:
        """Each arc's data dict in adjacency order (see the class docstring), or None."""
        if self.nx_graph is None:
            return None
        return list(itertools.chain.from_iterable(r.values()
                                                  for r in self.nx_graph._adj.values()))

    @cached_property
    def node_data(self) -> list | None:
        """Each node's data dict in ``nodes`` order, or None."""
        if self.nx_graph is None:
            return None
        return [self.nx_graph._node[u] for u in self.nodes]

    # what NetworkX's decorators (not_implemented_for, ...) ask of a graph
    def is_directed(self) -> bool:
        return self.directed

    def is_multigraph(self) -> bool:
        return self.multigraph

    def __len__(self) -> int:
        return len(self.nodes)

    def number_of_nodes(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __contains__(self, node) -> bool:
        """As ``node in G``: False for an unhashable object."""
        try:
            return node in self.index
        except TypeError:
            return False

    @cached_property
    def index(self) -> dict:
        """``{label: position}``."""
        return {u: i for i, u in enumerate(self.nodes)}

    def position(self, node) -> int:
        """The position of ``node`` (KeyError if it is not a node)."""
        return self.index[node]

    @cached_property
    def arc_rows(self) -> np.ndarray:
        """The row (position) each arc of :attr:`adjacency_indices` leaves."""
        return arc_rows(np.asarray(self.csr.indptr), dtype=np.int64)

    @cached_property
    def in_arcs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indptr, arcs, rows)``: the arcs into node ``u`` are
        ``arcs[indptr[u]:indptr[u + 1]]`` (ids into :attr:`adjacency_indices` and
        :attr:`weights`), the node each leaves ``rows[arc]``."""
        heads = self.adjacency_indices
        arcs = np.argsort(heads, kind="stable")
        indptr = np.zeros(len(self.nodes) + 1, dtype=np.int64)
        np.cumsum(np.bincount(heads, minlength=len(self.nodes)), out=indptr[1:])
        return indptr, arcs, self.arc_rows

    @cached_property
    def csr_arcs(self) -> np.ndarray:
        """Arc ``i`` of ``csr`` (whose rows are sorted) is arc ``csr_arcs[i]`` of
        :attr:`adjacency_indices` and :attr:`weights`: ``weights[csr_arcs]`` are the weights
        in ``csr``'s order, exact (``csr`` keeps them in float32)."""
        return np.lexsort((self.adjacency_indices, self.arc_rows))

    @cached_property
    def has_self_loops(self) -> bool:
        return bool(np.any(self.arc_rows == self.adjacency_indices))

    def labels_of(self, positions) -> list:
        """The labels at ``positions`` (an integer array), as a list of the nodes themselves."""
        if self._node_objects is not None:
            return self._node_objects[positions].tolist()
        labels = self.csr.file_ids      # None when the labels are the positions
        return np.asarray(positions).tolist() if labels is None else labels[positions].tolist()

    @cached_property
    def _node_objects(self):
        """The nodes as an object array where the CSR's integer ids would give back other
        objects than the nodes (NumPy's ints, an ``IntEnum``: equal, but of another type),
        else None (the ids' ``tolist`` gives the nodes: plain ints, or labels kept whole)."""
        labels = self.csr.file_ids
        if labels is not None and labels.dtype == object:
            return None
        if all(type(u) is int for u in self.nodes):
            return None
        out = np.empty(len(self.nodes), dtype=object)
        out[:] = self.nodes                 # integers all: no tuple to unpack
        return out

    def __str__(self) -> str:
        """NetworkX's ``str(G)`` of the graph converted, so that an error NetworkX raises with
        ``G`` in its message (``NotAPartition``) reads as NetworkX's does."""
        if self.nx_graph is not None:
            return str(self.nx_graph)
        edges = int(self.adjacency_indices.shape[0])
        if not self.directed:       # an edge is two arcs, a self-loop one
            edges = (edges + int(np.count_nonzero(self.arc_rows == self.adjacency_indices))) // 2
        named = f" named {self.name!r}" if self.name else ""
        return (f"{self.networkx_class.__name__}{named} with {len(self.nodes)} nodes and "
                f"{edges} edges")

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        w = f", weight={self.weight!r}" if self.weights is not None else ""
        return f"GrouteGraph({len(self.nodes):,} nodes, {self.csr.num_edges:,} arcs, {kind}{w})"


def from_networkx(G, *, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                  preserve_node_attrs=False, preserve_graph_attrs=False, name=None,
                  graph_name=None) -> GrouteGraph:
    """``convert_from_nx``: ``G`` with at most one edge attribute, numeric, defaulting to 1
    (NetworkX's weight rule), as the weight; with ``preserve_edge_attrs`` every edge's data
    as well (and ``"weight"`` read as the weight where it is numeric: NetworkX's cache serves
    any later call from such a conversion), with ``preserve_node_attrs`` every node's. A
    conversion groute cannot make raises NotImplementedError, so that NetworkX runs the call
    itself (and remembers the failure in the cache)."""
    what = f" for {name}()" if name else ""
    if not isinstance(G, nx.Graph):
        raise TypeError(f"{graph_name or 'G'}{what} must be a NetworkX graph; got "
                        f"{type(G).__name__}")
    if node_attrs:
        raise NotImplementedError(f"groute keeps a node attribute only with all of them"
                                  f"{what}")
    weight = None
    if preserve_edge_attrs:
        weight = "weight"
    elif edge_attrs:
        if len(edge_attrs) > 1:
            raise NotImplementedError(f"groute keeps one edge attribute{what}; asked for "
                                      f"{sorted(map(repr, edge_attrs))}")
        [(weight, default)] = edge_attrs.items()
        if default != 1 or isinstance(default, bool):
            raise NotImplementedError(f"groute weighs an edge without {weight!r} 1; asked for "
                                      f"{default!r}{what}")
    try:
        adjacency, csr = _arcs(G, weight)
    except ValueError as exc:       # a weight that is not a number, or past int32
        if not preserve_edge_attrs:
            raise NotImplementedError(f"groute cannot convert {graph_name or 'G'}{what}: "
                                      f"{exc}") from exc
        weight, (adjacency, csr) = None, _arcs(G, None)
    if csr.num_edges != adjacency.indices.shape[0]:
        raise AssertionError("the adjacency of a NetworkX graph holds no repeated arc")
    keep = preserve_edge_attrs or preserve_node_attrs or G.is_multigraph()
    return GrouteGraph(adjacency, csr, directed=G.is_directed(), multigraph=G.is_multigraph(),
                       weight=weight, graph=G.graph if preserve_graph_attrs else None,
                       nx_graph=G if keep else None, name=G.name)


def _arcs(G, weight):
    """``G``'s :class:`~groute.graph.convert.Adjacency` with ``weight`` and its CSR graph."""
    adjacency = networkx_adjacency(G, weight=weight)
    return adjacency, csr_from_adjacency(adjacency, directed=G.is_directed(),
                                         name=str(G.name) if G.name else "networkx")


def to_networkx(obj, *, name=None):
    """``convert_to_nx``: a :class:`GrouteGraph` as a NetworkX graph of its class (a
    multigraph's parallel edges come back as one edge of their least weight); any other
    result (dicts, sets, generators) as it is."""
    if not isinstance(obj, GrouteGraph):
        return obj
    G = obj.networkx_class()
    G.graph.update(obj.graph)
    G.add_nodes_from(obj.nodes)
    src = obj.arc_rows
    dst = obj.adjacency_indices
    keep = slice(None) if obj.directed else src <= dst      # an undirected edge once
    pairs = zip(obj.labels_of(src[keep]), obj.labels_of(dst[keep]))
    if obj.weights is None:
        G.add_edges_from(pairs)
    else:
        G.add_edges_from((u, v, {obj.weight: w})
                         for (u, v), w in zip(pairs, obj.weights[keep].tolist()))
    return G
