"""What NetworkX learns about the backend before loading it, and its configuration.

NetworkX calls :func:`get_info` at the end of its own import, so this module imports only
NetworkX's ``Config`` (already loaded then) and nothing of groute's algorithms.
"""
from __future__ import annotations

from networkx.utils.configs import Config

#: the NetworkX functions the backend implements, with what a reader of their docs should know
#: (NetworkX shows these notes under "Additional backend implementations")
FUNCTIONS = {
    "bfs_layers": "One source (several: NetworkX runs the call). Layers in NetworkX's order.",
    "connected_components": "Components in NetworkX's order.",
    "is_connected": "",
    "node_connected_component": "",
    "number_connected_components": "",
    "pagerank": (
        "Without personalization, nstart or dangling, with alpha in (0, 1), tol > 0 and "
        "max_iter >= 1, on a graph (not a multigraph) whose edges all weigh the same; "
        "otherwise NetworkX runs the call. Convergence: groute's rule, an L1 change of at most "
        "N * tol, as NetworkX's; values agree with NetworkX's within that tolerance."),
    "shortest_path_length": (
        "With a source and no target, method 'dijkstra' or weight=None; weights as "
        "single_source_dijkstra_path_length. Otherwise NetworkX runs the call."),
    "single_source_dijkstra_path_length": (
        "Integer weights (or integral floats) >= 0 whose sum fits in int32, summed exactly; "
        "other weights, or a weight function, and NetworkX runs the call. Nodes at equal "
        "distance may come in another order than NetworkX's."),
    "single_source_shortest_path_length": "Nodes in NetworkX's order.",
    "weakly_connected_components": "Components in NetworkX's order.",
}

#: ``nx.config.backends.groute.backend`` values: groute.context.BACKENDS, repeated here so that
#: NetworkX's import does not import groute's runtime (a test keeps the two equal)
BACKENDS = ("auto", "cuda", "cpu")
#: ``nx.config.backends.groute.partition`` values: groute.graph.partition.METHODS (likewise)
PARTITIONS = ("metis", "contiguous", "random")


class GrouteConfig(Config):
    """``nx.config.backends.groute``: where the backend runs.

    ``backend``: "auto" (CUDA GPUs when CuPy finds one, else CPU virtual devices), "cuda" or
    "cpu". ``devices``: how many devices one call uses (at most the graph's node count);
    None: every GPU, or one CPU virtual device (more of them test groute's multi-device code
    on a CPU but run no faster). ``partition``: how a graph is split over several devices.
    """

    backend: str = "auto"
    devices: int | None = None
    partition: str = "metis"

    def _on_setattr(self, key, value):
        if key == "backend" and value not in BACKENDS:
            raise ValueError(f"nx.config.backends.groute.backend must be one of "
                             f"{', '.join(BACKENDS)}; got {value!r}")
        if key == "devices" and value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"nx.config.backends.groute.devices must be None or an int >= 1; "
                             f"got {value!r}")
        if key == "partition" and value not in PARTITIONS:
            raise ValueError(f"nx.config.backends.groute.partition must be one of "
                             f"{', '.join(PARTITIONS)}; got {value!r}")
        return value


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
        "default_config": GrouteConfig(),
    }
