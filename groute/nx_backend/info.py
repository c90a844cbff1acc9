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

    # --- distance_measures (groute/nx_backend/algorithms/distance_measures.py) ---

    # --- components (groute/nx_backend/algorithms/components.py) ---
    "connected_components": "Components in NetworkX's order.",
    "is_connected": "",
    "node_connected_component": "",
    "number_connected_components": "",
    "strongly_connected_components": (
        "Components in NetworkX's order (its Tarjan's), which groute replays on the host with "
        "a sequential depth-first pass over the arcs unless the graph is strongly connected."),
    "weakly_connected_components": "Components in NetworkX's order.",

    # --- cores (groute/nx_backend/algorithms/cores.py) ---
    "core_number": "",

    # --- structure (groute/nx_backend/algorithms/structure.py) ---

    # --- cluster (groute/nx_backend/algorithms/cluster.py) ---

    # --- link_prediction (groute/nx_backend/algorithms/link_prediction.py) ---

    # --- centrality (groute/nx_backend/algorithms/centrality.py) ---
    "betweenness_centrality": (
        "Unweighted (weight=None; a weight and NetworkX runs the call). k sources drawn by "
        "NetworkX's own seed.sample(list(G), k), so the same sources for any seed NetworkX "
        "takes; scores equal NetworkX's up to floating-point summation order."),

    # --- link_analysis (groute/nx_backend/algorithms/link_analysis.py) ---
    "pagerank": (
        "With alpha in (0, 1), tol > 0 and max_iter >= 1, on a graph (not a multigraph) whose "
        "weights are >= 0; personalization and dangling as dicts, no nstart; otherwise NetworkX "
        "runs the call. Convergence: an L1 change of at most N * tol of the ranks' sum, as "
        "NetworkX's; values agree with NetworkX's within that tolerance."),

    # --- community (groute/nx_backend/algorithms/community.py) ---

    # --- trees (groute/nx_backend/algorithms/trees.py) ---
}

#: ``nx.config.backends.groute`` as NetworkX creates it; :func:`.devices.settings` checks the
#: values where a call reads them
DEFAULT_CONFIG = {"backend": "auto", "devices": None, "partition": "metis",
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
