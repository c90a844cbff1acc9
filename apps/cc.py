"""Connected components across devices: every vertex labelled with the smallest vertex of its
weak component.

Components are found by union-find on a parent array per device (a hook links the larger root
under the smaller, compression points every vertex at its root): Afforest first links each
vertex to a few neighbours and finds the giant component by a vote, then only the arcs of
vertices outside it are linked, in place (the default where the devices read each other's
memory) or routed to the devices as segments (Groute's design). The machinery is the connected
components engine, :mod:`groute.engines.components`; :class:`CC` is its solver under this
app's name.

``connected_components(G)`` (an undirected graph) and ``weakly_connected_components(G)`` (a
directed one), as NetworkX's, return an :class:`~groute.results.AppResult` whose ``values`` are
the labels by position, with the graph's ids alongside (``result.components()``: the sets
NetworkX yields); :class:`CC` uploads once and can run many times, on either kind. Also the
``groute cc`` subcommand.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from groute.engines.components import STATS_KEYS, ComponentsSolver
from groute.engines.components.memory import components_bytes
from groute.registry import algorithm, command, public
from groute.results import AppResult
from groute.graph import input_graph
from groute.tuning import CC_LINKS, CCTuning

__all__ = ["CC", "STATS_KEYS", "connected_components", "weakly_connected_components"]


class CC(ComponentsSolver):
    """Weak connected components of ``graph``; upload once, :meth:`run` many times.

    ``afforest``: sample first (``False``: hook the whole edge list, Groute's design); ``rest``:
    how what sampling left is linked, ``"auto"`` (in place where the devices read each other's
    memory), ``"kernel"`` or ``"segments"``; ``exchange``: across processes, how the ranks'
    changes reach rank 0 (``"auto"``, ``"peer"``, ``"host"``); ``tuning``: a
    :class:`~groute.tuning.CCTuning` (sampling rounds, voters, the linking step, segments). Each as
    :class:`~groute.engines.components.ComponentsSolver` says; ``run`` returns the stats keys of
    :data:`STATS_KEYS`."""


@algorithm("cc", solver=CC, label="CC", takes_partition=False, memory=components_bytes)
def connected_components(G, *, num_vertices=None, symmetric=False, **options) -> AppResult:
    """The connected components of the undirected graph ``G``, as NetworkX's
    ``connected_components``.

    Parameters
    ----------
    G : graph input
        An undirected graph: a NetworkX ``Graph``, a symmetric scipy sparse matrix, a file or
        a graph spec read as undirected, or any input with ``symmetric=True``
        (:func:`groute.graph.load_graph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    symmetric : bool, optional
        Read every arc of the input both ways (edge arrays are directed otherwise).
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, and the engine's own
        (``afforest``, ``rest``, ``exchange``, ``tuning``:
        :class:`~groute.engines.ComponentsSolver`).

    Returns
    -------
    AppResult
        ``values``: the smallest position in each vertex's component; ``result.to_dict()``
        maps every id to its component representative's id, ``result.components()`` lists
        the components as sets of ids, as NetworkX yields them.

    Raises
    ------
    GraphNotSupported
        NetworkX's ``NetworkXNotImplemented``: ``G`` is directed (its components are
        :func:`weakly_connected_components`).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.Graph([(0, 1), (1, 2), (3, 4)])
    >>> groute.connected_components(G, backend="cpu", devices=1).components()
    [{0, 1, 2}, {3, 4}]
    >>> groute.connected_components(([0, 3], [1, 4]), symmetric=True, backend="cpu",
    ...                             devices=1).to_dict()
    {0: 0, 1: 0, 2: 2, 3: 3, 4: 3}
    """
    g = input_graph(G, weight=None, num_vertices=num_vertices, symmetric=symmetric)
    _check_direction(g, directed=False)
    with CC(g, **options) as solver:
        return solver.run()


@public(solver=CC)
def weakly_connected_components(G, *, num_vertices=None, **options) -> AppResult:
    """The weakly connected components of the directed graph ``G``, as NetworkX's
    ``weakly_connected_components``: the components of ``G`` with its arcs read both ways.

    Parameters
    ----------
    G : graph input
        A directed graph: a NetworkX ``DiGraph``, a scipy sparse matrix, ``(src, dst)`` edge
        arrays, a file or a graph spec read as directed (:func:`groute.graph.load_graph`).
    num_vertices : int, optional
        The vertex count of edge arrays (default: the largest id plus one).
    **options
        How it runs, as :func:`connected_components`.

    Returns
    -------
    AppResult
        As :func:`connected_components`.

    Raises
    ------
    GraphNotSupported
        NetworkX's ``NetworkXNotImplemented``: ``G`` is undirected (its components are
        :func:`connected_components`).

    Examples
    --------
    >>> import networkx as nx, groute
    >>> D = nx.DiGraph([(0, 1), (2, 1), (3, 4)])
    >>> groute.weakly_connected_components(D, backend="cpu", devices=1).components()
    [{0, 1, 2}, {3, 4}]
    """
    g = input_graph(G, weight=None, num_vertices=num_vertices)
    _check_direction(g, directed=True)
    with CC(g, **options) as solver:
        return solver.run()


def _check_direction(graph, *, directed: bool) -> None:
    """A GraphNotSupported error (NetworkX's ``NetworkXNotImplemented``) naming ``graph`` when
    it is not ``directed`` as the function asks, saying which function takes it."""
    if bool(graph.directed) == directed:
        return
    from groute.errors import GraphNotSupported
    if graph.directed:
        raise GraphNotSupported(
            f"not implemented for directed type: {graph.name or 'the graph'} is directed; its "
            f"weak components are groute.weakly_connected_components, or read it undirected "
            f"with symmetric=True")
    raise GraphNotSupported(
        f"not implemented for undirected type: {graph.name or 'the graph'} is undirected; its "
        f"components are groute.connected_components")


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------
@command
def register(subparsers, common):
    from groute.apps.app_cli import add_graph_options, advanced_group, auto_help
    from groute.cli_support import count_int, positive_float_count, positive_int
    p = subparsers.add_parser("cc", parents=[common],
                              help="connected (weak) components across devices")
    add_graph_options(p, reads_weights=False)
    advanced = advanced_group(p)
    advanced.add_argument("--segment-edges", type=positive_float_count, default=None, metavar="E",
                          help="edges per segment handed to devices (default: about 4 per device)")
    advanced.add_argument("--buffers", type=positive_int, default=None,
                          help="receive buffers per device link (default 2)")
    advanced.add_argument("--no-afforest", action="store_true",
                          help="hook the whole edge list (no sampling phase, Groute's design)")
    advanced.add_argument("--sample-rounds", type=count_int, default=None, metavar="R",
                          help="Afforest: neighbours each vertex links to before the vote "
                               "(default 2)")
    advanced.add_argument("--rest", choices=("auto", "kernel", "segments"), default="auto",
                          help="after sampling: 'kernel' splits sampling by rows, merges parent "
                               "arrays by peer reads and links the rest in place; 'segments' "
                               "compacts and routes it (Groute's path); auto (default): "
                               f"{auto_help(CC.rules['rest'])}")
    advanced.add_argument("--exchange", choices=("auto", "peer", "host"), default="auto",
                          help="across processes: 'peer' has rank 0 read every rank's changes "
                               "and rows in place over CUDA IPC, 'host' sends them as messages; "
                               f"auto (default): {auto_help(CC.rules['exchange'])}")
    advanced.add_argument("--link", choices=CC_LINKS, default=None,
                          help="CUDA linking step (default mixed: hook in the first round, then "
                               "GAPBS's one-level CAS)")
    p.set_defaults(func=_cli)


def _verify(g, labels):
    from groute.graph import reference
    ref = reference.connected_components(g)
    ok = bool(np.array_equal(labels, ref))
    return (ok, "OK (exact match with scipy weak components)" if ok
            else "FAILED: " + reference.mismatch_report(labels, ref))


def _cli(args) -> int:
    from groute.apps.app_cli import checked, load, report, run_solver, write_output
    if args.no_afforest and args.sample_rounds is not None:
        raise ValueError("--sample-rounds counts Afforest's sampling; --no-afforest leaves it "
                         "unused")
    g, load_s = load(args)
    given = {"segment_edges": args.segment_edges,
             "num_buffers": args.buffers, "sample_rounds": args.sample_rounds, "link": args.link}
    tuning = dataclasses.replace(CCTuning.from_environment(),
                                 **{k: v for k, v in given.items() if v is not None})
    runs = run_solver(args, g, lambda where: CC(g, **where, afforest=not args.no_afforest,
                                              rest=args.rest, exchange=args.exchange,
                                              tuning=tuning))
    res = runs.result
    labels = res.values
    roots = np.flatnonzero(labels == np.arange(labels.size))
    sizes = np.bincount(labels, minlength=labels.size)[roots] if labels.size else np.zeros(0, np.int64)
    largest = int(sizes.max()) if sizes.size else 0
    line = (f"cc {g.name}: {runs.median * 1e3:.3f} ms ({runs.where()}), {roots.size:,} "
            f"component{'s' if roots.size != 1 else ''} (largest {largest:,} vertices)")
    facts = {"components": int(roots.size), "largest": largest, "edges": runs.solver.m}
    verified = None
    if args.verify:
        verified = checked(args, g, lambda whole: _verify(whole, labels))
    report(args, "cc", g, load_s, runs, line, facts, verified,
           extra_stats=[f"edges: {runs.solver.m:,}"])
    if args.output:
        write_output(res, args.output, "component")
    return 0 if verified is None or verified[0] else 1
