"""Graphs for groute: the CSR type, readers, generators, partitioners, datasets, references.

Typical use::

    from groute.graph import load_graph, partition_graph
    g = load_graph("kron:21")                  # or a .mtx/.gr/.txt[.gz] path, or a dataset name,
                                               # or a NetworkX graph, scipy matrix, (src, dst)
    p = partition_graph(g, 4, method="metis")  # owner, renumbering, per-device CSRs, stats

See docs/GRAPHS.md for formats, specs, generators, partitioners and id conventions.
"""
from .csr import CSRGraph
from .errors import GraphFormatError
from .formats import detect_format, read_graph, write_graph
from .dimacs import read_dimacs, write_dimacs
from .mtx import read_mtx, write_mtx
from .snap import read_snap, write_snap
from .load import input_graph, load_graph
from .convert import as_graph
from .spec import GraphSpec, is_spec, parse_spec
from .generators import erdos_renyi, generate, grid, kronecker, rmat
from .partition import DEFAULT_PARTITION, LocalGraph, Partition, partition_graph
from .cache import cache_root
from . import reference

__all__ = [
    "CSRGraph", "GraphFormatError", "load_graph", "input_graph", "as_graph", "read_graph",
    "write_graph", "detect_format",
    "read_mtx", "write_mtx", "read_dimacs", "write_dimacs", "read_snap", "write_snap",
    "GraphSpec", "parse_spec", "is_spec", "generate", "kronecker", "rmat", "grid", "erdos_renyi",
    "partition_graph", "Partition", "LocalGraph", "DEFAULT_PARTITION", "cache_root", "reference",
    "shipped_graph_path",
]


def shipped_graph_path():
    """Path of the small real graph shipped with groute (power grid, see docs/GRAPHS.md)."""
    from pathlib import Path
    return Path(__file__).resolve().parent.parent / "data" / "power.mtx.gz"
