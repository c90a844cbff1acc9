"""What NetworkX learns about the backend before loading it, and its configuration.

NetworkX calls :func:`get_info` at the end of its own import, so this module imports nothing,
NetworkX included: a program whose first import of NetworkX comes through groute would
otherwise find this module half-initialised when NetworkX calls back.

``nx.config.backends.groute`` (``backend``, ``devices``, ``partition``, ``fallback_to_nx``):

* ``backend``: "auto" (CUDA GPUs when CuPy finds one, else CPU virtual devices), "cuda" or
  "cpu";
* ``devices``: how many devices one call uses (at most the graph's node count); None: every
  GPU, or one CPU virtual device (more of them test groute's multi-device code on a CPU but
  run no faster);
* ``partition``: how a graph is split over several devices;
* ``fallback_to_nx``: whether a call groute implements but declines (its ``can_run`` rule, the
  conversion or the function says why) runs on NetworkX (True) or raises
  :class:`groute.errors.NotRunOnGroute` naming the function and the reason (False); either
  way the reason is logged at INFO (:mod:`.refusal`).
"""
from __future__ import annotations

#: the NetworkX functions the backend implements, with what a reader of their docs should know
#: (NetworkX shows these notes under "Additional backend implementations")
FUNCTIONS = {
    # --- traversal (groute/nx_backend/algorithms/traversal.py) ---
    "bfs_layers": "One source (several: NetworkX runs the call). Layers in NetworkX's order.",
    "bfs_predecessors": (
        "Without sort_neighbors. NetworkX's order and NetworkX's choice of predecessor."),
    "bfs_edges": (
        "Without sort_neighbors; reverse=True on an undirected graph only (a directed graph's "
        "G.pred order is not kept, so NetworkX runs the call). NetworkX's edges, in its order."),
    "bfs_tree": "As bfs_edges: NetworkX's tree.",
    "bfs_successors": "Without sort_neighbors. NetworkX's pairs, in its order.",
    "descendants": "",
    "descendants_at_distance": "",
    "ancestors": "A BFS over the reversed arcs.",

    # --- shortest_paths (groute/nx_backend/algorithms/shortest_paths.py) ---
    "shortest_path": (
        "With a source and a target (otherwise NetworkX runs the call). Unweighted on an "
        "undirected graph: NetworkX's path. A directed or weighted call: the path when it is "
        "the only shortest one, else NetworkX runs the call (its choice among equally short "
        "paths follows its search order); weights as single_source_dijkstra_path_length."),
    "shortest_path_length": (
        "With a source and no target, method 'dijkstra' or weight=None; weights as "
        "single_source_dijkstra_path_length. Otherwise NetworkX runs the call."),
    "single_source_dijkstra_path_length": (
        "Integer weights (or integral floats) >= 0 whose sum fits in int32, summed exactly; "
        "other weights, or a weight function, and NetworkX runs the call. Nodes at equal "
        "distance may come in another order than NetworkX's."),
    "single_source_shortest_path_length": "Nodes in NetworkX's order.",
    "single_target_shortest_path_length": (
        "A BFS over the reversed arcs. Nodes in NetworkX's order on an undirected graph; on a "
        "directed one in the order of the nodes' in-arcs (NetworkX's follows G.pred)."),
    "all_pairs_shortest_path_length": (
        "Sources in batches, each on one BFS solver kept open; every dict in NetworkX's order."),
    "has_path": "With a source and a target.",
    "single_source_shortest_path": (
        "NetworkX's paths (its choice among equally short ones), in its order."),
    "dijkstra_path_length": "Weights as single_source_dijkstra_path_length.",
    "bellman_ford_path_length": "Weights as single_source_bellman_ford_path_length.",
    "single_source_bellman_ford_path_length": (
        "Weights as single_source_dijkstra_path_length (negative ones: NetworkX runs the "
        "call). Unweighted, nodes in NetworkX's order; weighted, by distance."),

    # --- distance_measures (groute/nx_backend/algorithms/distance_measures.py) ---
    "eccentricity": (
        "Without sp; weight=None (hops) or weights as single_source_dijkstra_path_length. One "
        "solver kept open across the nodes asked for."),

    # --- components (groute/nx_backend/algorithms/components.py) ---
    "connected_components": "Components in NetworkX's order.",
    "is_connected": "",
    "is_strongly_connected": "",
    "is_weakly_connected": "",
    "node_connected_component": "",
    "number_connected_components": "",
    "number_strongly_connected_components": "",
    "number_weakly_connected_components": "",
    "strongly_connected_components": (
        "Components in NetworkX's order (its Tarjan's), which groute replays on the host with "
        "a sequential depth-first pass over the arcs unless the graph is strongly connected."),
    "weakly_connected_components": "Components in NetworkX's order.",

    # --- cores (groute/nx_backend/algorithms/cores.py) ---
    "core_number": "",
    "k_core": "",
    "k_corona": (
        "With a core_number dict given, one holding an integer for every node of G (otherwise "
        "NetworkX runs the call)."),
    "k_crust": "",
    "k_shell": "",
    "k_truss": (
        "Support peeling rounds on the devices, each device holding a copy of the graph's rows "
        "(the intersect operator)."),

    # --- structure (groute/nx_backend/algorithms/structure.py) ---
    "color": (
        "The nodes with a neighbour come first, in G's order, then the isolated nodes "
        "(NetworkX's order of the first follows its traversal)."),
    "is_bipartite": "",
    "is_isolate": "",
    "isolates": "",
    "number_of_isolates": "",
    "overall_reciprocity": "Not on multigraphs (NetworkX runs the call).",
    "reciprocity": "Not on multigraphs (NetworkX runs the call).",

    # --- cluster (groute/nx_backend/algorithms/cluster.py) ---
    "average_clustering": "As clustering.",
    "clustering": (
        "Unweighted and weighted, undirected and directed. Weighted coefficients multiply the "
        "cube roots of the normalised weights (NetworkX takes the cube root of their product): "
        "equal up to floating-point rounding. A largest weight of 0 (NetworkX divides by it): "
        "NetworkX runs the call."),
    "transitivity": "",
    "triangles": "",

    # --- link_prediction (groute/nx_backend/algorithms/link_prediction.py) ---
    "jaccard_coefficient": (
        "A generator, as NetworkX's, computed a batch of pairs at a time on the devices; the "
        "default ebunch (every non-edge) in NetworkX's order."),

    # --- centrality (groute/nx_backend/algorithms/centrality.py) ---
    "betweenness_centrality": (
        "weight: lengths > 0 (other weights, or a weight function, and NetworkX runs the "
        "call), summed exactly as NetworkX's Dijkstra sums them. k sources drawn by NetworkX's "
        "own seed.sample(list(G), k), so the same sources for any seed NetworkX takes; scores "
        "equal NetworkX's up to floating-point summation order."),
    "closeness_centrality": (
        "Every node from 64-source breadth-first batches (or, with distance, one search per "
        "source on lengths >= 0); with u, one search over the in-arcs. NetworkX's values up "
        "to floating-point summation order."),
    "degree_centrality": "Not on a multigraph (its parallel edges count in NetworkX's degree).",
    "edge_betweenness_centrality": (
        "Not on a multigraph; weight: lengths > 0. NetworkX's sources, keys and order; scores "
        "equal NetworkX's up to floating-point summation order."),
    "eigenvector_centrality": (
        "NetworkX's power iteration and stopping rule, in float64; nstart a dict of every "
        "node."),
    "in_degree_centrality": "Not on a multigraph.",
    "katz_centrality": (
        "alpha >= 0, tol > 0, beta a number or a dict of every node, nstart a dict of every "
        "node, weights >= 0. NetworkX's iteration and stopping rule (values within its "
        "tolerance; float32 on CUDA devices)."),
    "out_degree_centrality": "Not on a multigraph.",

    # --- link_analysis (groute/nx_backend/algorithms/link_analysis.py) ---
    "hits": (
        "No nstart, normalized=True, not a multigraph, weights >= 0. NetworkX's own power "
        "iteration (_hits_scipy: tol on the L1 change, at most max_iter + 2 iterations) "
        "where NetworkX calls ARPACK: the same vectors within tol wherever the largest "
        "singular value is simple; a graph whose iteration converges slowly raises "
        "PowerIterationFailedConvergence where ARPACK might not."),
    "pagerank": (
        "With alpha in (0, 1), tol > 0 and max_iter >= 1, on a graph (not a multigraph) whose "
        "weights are >= 0; personalization and dangling as dicts, no nstart; otherwise NetworkX "
        "runs the call. Convergence: an L1 change of at most N * tol of the ranks' sum, as "
        "NetworkX's; values agree with NetworkX's within that tolerance."),

    # --- community (groute/nx_backend/algorithms/community.py) ---
    "louvain_communities": (
        "Not on a multigraph. Parallel local moves (independent sets of the vertices that "
        "gain, by random priorities from seed) instead of NetworkX's sequential ones: other "
        "communities of the same modularity, the same ones for a seed on any device count."),
    "louvain_partitions": "As louvain_communities.",
    "leiden_communities": (
        "Not on a multigraph. Louvain's parallel moves, then each community refined into "
        "well-connected groups (the greedy refinement: a lone vertex joins the group it gains "
        "most by), whose graph is the next level's; the same communities for a seed on any "
        "device count."),
    "leiden_partitions": "As leiden_communities.",
    "modularity": "Not on a multigraph.",
    "label_propagation_communities": (
        "Not on a multigraph. NetworkX's communities: its greedy colouring, computed in "
        "parallel (Jones-Plassmann in its largest-first order), then its semi-synchronous "
        "updates, a colour at a time."),
    "asyn_lpa_communities": (
        "Not on a multigraph with a weight. Independent sets of the vertices whose label is "
        "not among their neighbours' most frequent update at once, in an order drawn from "
        "seed, taking the smallest such label (NetworkX: one at a time, a random one): a "
        "stable labelling as NetworkX's, not necessarily the same one."),
    "fast_label_propagation_communities": (
        "Not on a multigraph. As asyn_lpa_communities over fast label propagation's queue "
        "(a vertex keeps its label while it is among the most frequent)."),

    # --- trees (groute/nx_backend/algorithms/trees.py) ---
    "minimum_spanning_edges": (
        "algorithm='kruskal' (Kruskal's answer and order, found by Borůvka's algorithm on the "
        "devices); the others, a weight function or a NaN weight without ignore_nan, and "
        "NetworkX runs the call."),
    "maximum_spanning_edges": "As minimum_spanning_edges.",
    "minimum_spanning_tree": "As minimum_spanning_edges: NetworkX's tree, its attributes too.",
    "maximum_spanning_tree": "As minimum_spanning_edges: NetworkX's tree, its attributes too.",
}

#: ``nx.config.backends.groute`` as NetworkX creates it; :func:`.devices.settings` checks the
#: values where a call reads them
DEFAULT_CONFIG = {"backend": "auto", "devices": None, "partition": "auto",
                  "fallback_to_nx": True}


def get_info() -> dict:
    """The ``networkx.backend_info`` entry point."""
    return {
        "backend_name": "groute",
        "project": "groute",
        "package": "groute",
        "short_summary": "Asynchronous multi-GPU graph analytics (CUDA GPUs or CPU virtual "
                         "devices).",
        "functions": {name: {"additional_docs": doc} if doc else {}
                      for name, doc in FUNCTIONS.items()},
        "default_config": dict(DEFAULT_CONFIG),
    }
