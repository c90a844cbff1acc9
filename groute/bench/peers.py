"""The peers our apps are measured against, in the same run on the same graph.

A peer is what a user would run instead of us: scipy.sparse.csgraph on the CPU (always there),
the plain CuPy code a user would write on one GPU (:mod:`groute.bench.baselines`), and, when
installed, python-igraph,
NetworkX (small graphs only: it is pure Python) and cuGraph. A peer that is not installed or not
applicable is *skipped with a note*; nothing is ever estimated or made up.

Each peer is prepared outside the timed region (building its matrix or graph object, uploading
to the GPU); only the call a user would time is timed. Its answer is then checked against the
reference like ours, so a ratio to a peer that computed something else cannot slip through.
"""
from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.util
import logging
import sys
from dataclasses import dataclass

import numpy as np

from .fmt import fmt_seconds
from .specs import PR_DAMPING, PR_TOL, hook_name, load, spec_for
from .suite import APPS
from .verify import Verdict, verify

log = logging.getLogger(__name__)

#: Longest a PageRank power iteration may run before it is called non-converged.
PR_MAX_ITERATIONS = 1000
#: Edges of the graph :func:`igraph_build_seconds_per_edge` builds to time this machine.
IGRAPH_CALIBRATION_EDGES = 1 << 22
#: The seconds an igraph peer being prepared may spend building its graph (None: no limit):
#: set by :func:`prepare_peer` around the app's hook, read by :func:`igraph_graph`, which alone
#: knows how many edges it builds.
_IGRAPH_BUDGET: contextvars.ContextVar = contextvars.ContextVar("igraph_budget", default=None)


class PeerSkipped(Exception):
    """The peer cannot run here (not installed, no GPU, graph too big for it): the note says why."""


@dataclass
class PreparedPeer:
    """A peer ready to time: ``run()`` does the timed work, ``answer(raw)`` converts untimed."""

    name: str             # scipy, cupy, igraph, networkx, cugraph
    label: str            # what exactly runs, e.g. "scipy.sparse.csgraph.dijkstra"
    device: str           # "cpu" or "gpu"
    run: object
    answer: object        # raw result -> (kind, values); kind "values" or "reached"
    note: str = ""


def prepare_peer(name: str, app: str, graph, source, *, networkx_max_arcs: int,
                 build_budget_s: float | None = None) -> PreparedPeer:
    """Set up peer ``name`` for ``app`` on ``graph``; raises :class:`PeerSkipped` with the reason.

    The size limits of igraph and NetworkX apply to every app; an app that registered its own
    ``peers`` (:class:`groute.bench.specs.BenchSpec`) is then set up by its hook, any other by the
    built-in code below. ``source``: None, a vertex, or the app's sample of sources.
    ``build_budget_s``: igraph is skipped when building its graph would take longer (None: no
    limit), see :func:`check_igraph_build`."""
    token = _IGRAPH_BUDGET.set(build_budget_s if name == "igraph" else None)
    try:
        return _prepare_peer(name, app, graph, source, networkx_max_arcs)
    finally:
        _IGRAPH_BUDGET.reset(token)


def _prepare_peer(name, app, graph, source, networkx_max_arcs) -> PreparedPeer:
    if name == "networkx" and graph.num_edges > networkx_max_arcs:
        raise PeerSkipped(f"NetworkX is pure Python: skipped above {networkx_max_arcs:,} arcs "
                          f"(this graph has {graph.num_edges:,})")
    hooks = spec_for(app).peers
    if hooks is not None and name != "cupy":    # cupy: the app's ``baseline``, as for any app
        if name not in hooks:
            raise PeerSkipped(f"{name} has no {APPS[app].label} (the bench spec of {app} names "
                              f"no {name} peer)")
        return load(hooks[name])(graph, source)
    if name == "scipy":
        return _scipy_peer(app, graph, source)
    if name == "cupy":
        return _cupy_peer(app, graph, source)
    if name == "igraph":
        return _igraph_peer(app, graph, source)
    if name == "networkx":
        return _networkx_peer(app, graph, source)
    if name == "cugraph":
        return _cugraph_peer(app, graph, source)
    raise ValueError(f"unknown peer {name!r}")


def check_peer_answer(app: str, kind: str, values, ref, graph) -> Verdict:
    """Verify a peer's converted answer; ``reached`` answers (BFS orders) compare reachable sets."""
    if kind == "reached":
        reached = np.zeros(ref.shape, bool)
        reached[np.asarray(values, dtype=np.int64)] = True
        if np.array_equal(reached, ref >= 0):
            return Verdict(True, f"reaches the same {int(reached.sum())} vertices as the reference")
        return Verdict(False, f"reaches {int(reached.sum())} vertices, the reference {int((ref >= 0).sum())}")
    return verify(app, values, ref, graph)


def _require(module: str, why: str):
    if importlib.util.find_spec(module) is None:
        raise PeerSkipped(f"{module} is not installed ({why})")
    return importlib.import_module(module)


# scipy ---------------------------------------------------------------------------------------------
def adjacency(graph, weighted: bool = False):
    """The graph as a scipy CSR matrix: its weights (``weighted`` and it has some) or ones."""
    import scipy.sparse as sp
    n = graph.num_vertices
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    if weighted and graph.weights is not None:
        data = np.asarray(graph.weights, dtype=np.float64)
    else:
        data = np.ones(indices.size, dtype=np.float64)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))


def _scipy_peer(app, graph, source) -> PreparedPeer:
    from scipy.sparse import csgraph
    if app == "bfs":
        a = adjacency(graph, False)
        return PreparedPeer("scipy", "scipy.sparse.csgraph.breadth_first_order", "cpu",
                            lambda: csgraph.breadth_first_order(a, source, directed=True,
                                                                return_predecessors=False),
                            lambda raw: ("reached", raw))
    if app == "sssp":
        a = adjacency(graph, True)
        return PreparedPeer("scipy", "scipy.sparse.csgraph.dijkstra", "cpu",
                            lambda: csgraph.dijkstra(a, directed=True, indices=source),
                            lambda raw: ("values", raw))
    if app == "cc":
        a = adjacency(graph, False)
        return PreparedPeer("scipy", "scipy.sparse.csgraph.connected_components (weak)", "cpu",
                            lambda: csgraph.connected_components(a, directed=True, connection="weak"),
                            lambda raw: ("values", raw[1]))
    if app == "pr":
        step = scipy_pagerank_operator(graph)
        return PreparedPeer("scipy", f"scipy.sparse power iteration (L1 change < {PR_TOL:g})", "cpu",
                            lambda: power_iteration(step, graph.num_vertices, np),
                            lambda raw: ("values", raw[0]), note="")
    raise ValueError(f"unknown app {app!r}")


def scipy_pagerank_operator(graph):
    """``x -> d * P^T x + (d * dangling mass + 1 - d) / n``: one PageRank step, as scipy code.

    P is the row-stochastic transition matrix of the out-arcs; dangling vertices (no out-arcs)
    spread their rank uniformly, the standard treatment the reference uses.
    """
    import scipy.sparse as sp
    n = graph.num_vertices
    indptr = np.asarray(graph.indptr)
    out_degree = np.diff(indptr)
    dangling = out_degree == 0
    rows = np.repeat(np.arange(n), out_degree)
    inv = 1.0 / np.maximum(out_degree, 1)
    pt = sp.csr_matrix((inv[rows], (np.asarray(graph.indices), rows)), shape=(n, n))
    d = PR_DAMPING

    def step(x):
        return d * (pt @ x) + (d * x[dangling].sum() + (1.0 - d)) / n
    return step


def power_iteration(step, n, xp):
    """Iterate ``step`` from the uniform vector until the L1 change is below ``PR_TOL``.

    Returns (ranks, iterations); raises RuntimeError if it does not converge.
    """
    x = xp.full(n, 1.0 / max(n, 1), dtype=xp.float64)
    for it in range(1, PR_MAX_ITERATIONS + 1):
        y = step(x)
        change = float(xp.abs(y - x).sum())
        x = y
        if change < PR_TOL:
            return x, it
    raise RuntimeError(f"power iteration did not reach L1 change {PR_TOL:g} in {PR_MAX_ITERATIONS} steps")


# plain CuPy baselines (written by the app engineers) ---------------------------------------------------
def baseline(app: str) -> tuple[str, str]:
    """``(module, function)`` of ``app``'s plain-CuPy baseline, as its bench spec names it;
    :class:`PeerSkipped` when it has none."""
    if spec_for(app).baseline is None:
        raise PeerSkipped(f"{app} has no plain-CuPy baseline (groute/bench/specs.py)")
    return spec_for(app).baseline


def _cupy_peer(app, graph, source) -> PreparedPeer:
    from groute.device import cuda_device_count
    _require("cupy", "the plain-CuPy baselines need it")
    if cuda_device_count() == 0:
        raise PeerSkipped("no CUDA GPU: the plain-CuPy baselines need one")
    spec = spec_for(app)
    func = load(baseline(app))
    import cupy
    with cupy.cuda.Device(0):
        dgraph = graph.to_device(_OneGPU())
        if spec.baseline_setup is not None:
            # the per-graph matrices a user builds once (cached on the graph): untimed, like
            # uploading
            load(spec.baseline_setup)(dgraph)
        if APPS[app].needs_source or spec.sources:
            run = lambda: func(dgraph, source)  # noqa: E731
        else:
            run = lambda: func(dgraph, **spec.check_options)  # noqa: E731
    label = f"{hook_name(spec.baseline)} (plain CuPy, 1 GPU)"
    return PreparedPeer("cupy", label, "gpu", run, lambda raw: ("values", _host(raw)))


def gpu_reference(app: str, graph, source=None) -> np.ndarray:
    """The answer of the plain-CuPy baseline on GPU 0, in the CPU reference's dtype.

    The reference of ``--reference gpu``: an implementation independent of our kernels (per-level
    frontiers, ``scatter_min``, cuSPARSE SpMV in float64 with the reference's stopping rule), for
    graphs whose CPU references would take minutes. Raises RuntimeError when it cannot run here.
    """
    try:
        peer = _cupy_peer(app, graph, source)
    except PeerSkipped as exc:
        raise RuntimeError(f"no GPU reference: {exc}") from None
    _, values = peer.answer(peer.run())
    dtype = spec_for(app).dtype
    if dtype is not None:
        values = values.astype(dtype, copy=False)
    del peer
    free_gpu_memory()
    return values


def free_gpu_memory():
    """Give CuPy's cached device blocks (every GPU) and pinned host blocks back to the driver.
    Does nothing when CuPy was never imported; a CUDA error is logged, not raised (a poisoned
    context: later cases will say so themselves)."""
    if "cupy" not in sys.modules:
        return
    import cupy
    try:
        for i in range(cupy.cuda.runtime.getDeviceCount()):
            with cupy.cuda.Device(i):
                cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    except Exception as exc:
        log.info("could not free GPU memory pools: %s", exc)


class _OneGPU:
    """The device argument ``CSRGraph.to_device`` wants, for GPU 0 outside any Context."""
    backend = "cuda"
    index = 0

    def asarray(self, a):
        import cupy
        with cupy.cuda.Device(0):
            return cupy.asarray(a)


def _host(raw):
    if isinstance(raw, tuple):  # (values, extra info such as iteration counts)
        raw = raw[0]
    if hasattr(raw, "values") and not isinstance(raw, np.ndarray):  # an AppResult-like object
        raw = raw.values
    if hasattr(raw, "get") and hasattr(raw, "__cuda_array_interface__"):
        raw = raw.get()
    return np.asarray(raw)


# python-igraph ----------------------------------------------------------------------------------------
def igraph_graph(graph, *, directed: bool | None = True):
    """A python-igraph graph of ``graph`` (PeerSkipped without igraph): directed with every
    arc (``directed=True``, what the traversal peers take), or, with ``directed=None``, as the
    graph is: undirected with each edge once when its CSR holds both arcs of every edge."""
    _require("igraph", "pip install python-igraph to add it as a peer")
    from groute.graph.arcs import arc_rows
    src = arc_rows(np.asarray(graph.indptr), dtype=np.int64)
    dst = np.asarray(graph.indices, dtype=np.int64)
    directed = bool(graph.directed) if directed is None else directed
    if not directed:
        keep = src <= dst
        src, dst = src[keep], dst[keep]
    budget = _IGRAPH_BUDGET.get()
    if budget is not None:
        check_igraph_build(int(src.size), budget)
    return igraph_from_arcs(int(graph.num_vertices), src, dst, directed)


def igraph_from_arcs(n: int, src, dst, directed: bool):
    """``igraph.Graph`` on ``n`` vertices with the arcs ``src[i] -> dst[i]`` (int64 arrays).

    python-igraph's wheels use the limited C API, which cannot read a NumPy buffer: an edge
    array is turned into Python pairs whichever way it is handed over. The cheapest is a
    ``zip`` of two memoryviews (each pair built and dropped as igraph reads it, no list of
    lists), with the cyclic garbage collector off meanwhile: the millions of live pairs would
    otherwise trigger collections that scan all of them, several times the build itself.
    """
    import gc
    import igraph
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise ValueError(f"igraph_from_arcs: src and dst must be 1-D arrays of one length, got "
                         f"shapes {src.shape} and {dst.shape}")
    collecting = gc.isenabled()
    gc.disable()
    try:
        return igraph.Graph(n=n, edges=zip(memoryview(src), memoryview(dst)),
                            directed=directed)
    finally:
        if collecting:
            gc.enable()


@functools.lru_cache(maxsize=1)
def igraph_build_seconds_per_edge() -> float:
    """Seconds :func:`igraph_from_arcs` takes per edge on this machine, timed once per process
    on a random directed graph of :data:`IGRAPH_CALIBRATION_EDGES` edges (a fraction of a
    second). The build is linear in the edges, so this predicts a big graph's build before
    spending it (docs/BENCHMARKS.md, "Peers")."""
    import time
    rng = np.random.default_rng(0)
    n = IGRAPH_CALIBRATION_EDGES // 16
    src = np.sort(rng.integers(0, n, IGRAPH_CALIBRATION_EDGES))
    dst = rng.integers(0, n, IGRAPH_CALIBRATION_EDGES)
    t0 = time.perf_counter()
    igraph_from_arcs(n, src, dst, True)
    return (time.perf_counter() - t0) / IGRAPH_CALIBRATION_EDGES


def check_igraph_build(num_edges: int, budget_s: float) -> None:
    """PeerSkipped when building an igraph graph of ``num_edges`` edges would take longer than
    ``budget_s`` seconds on this machine, by :func:`igraph_build_seconds_per_edge`; igraph not
    installed is a skip too. The build is not timed, but a run has to wait for it."""
    if not budget_s > 0:
        raise ValueError(f"check_igraph_build: budget_s must be positive seconds, got {budget_s!r}")
    _require("igraph", "pip install python-igraph to add it as a peer")
    per_edge = igraph_build_seconds_per_edge()
    estimate = num_edges * per_edge
    if estimate > budget_s:
        raise PeerSkipped(f"building its igraph graph would take about "
                          f"{fmt_seconds(estimate)} ({num_edges:,} edges at "
                          f"{per_edge * 1e9:.0f} ns each, timed on this machine), over the "
                          f"{fmt_seconds(budget_s)} case budget")


def as_array(mapping, n, fill, dtype):
    """A peer's ``{vertex: value}`` dict as an array over ``0..n-1`` (``fill`` where absent)."""
    out = np.full(n, fill, dtype=dtype)
    if mapping:
        keys = np.fromiter(mapping.keys(), dtype=np.int64, count=len(mapping))
        out[keys] = np.fromiter(mapping.values(), dtype=dtype, count=len(mapping))
    return out


def _igraph_peer(app, graph, source) -> PreparedPeer:
    g = igraph_graph(graph)
    if app == "bfs":
        return PreparedPeer("igraph", "igraph.Graph.bfs", "cpu", lambda: g.bfs(source)[0],
                            lambda raw: ("reached", np.asarray(raw, dtype=np.int64)))
    if app == "sssp":
        weights = np.asarray(graph.weights if graph.weights is not None else np.ones(graph.num_edges),
                             dtype=np.float64).tolist()
        return PreparedPeer("igraph", "igraph.Graph.distances (Dijkstra)", "cpu",
                            lambda: g.distances(source=source, weights=weights, mode="out"),
                            lambda raw: ("values", np.asarray(raw[0], dtype=np.float64)))
    if app == "cc":
        return PreparedPeer("igraph", "igraph.Graph.connected_components (weak)", "cpu",
                            lambda: g.connected_components(mode="weak").membership,
                            lambda raw: ("values", np.asarray(raw, dtype=np.int64)))
    return PreparedPeer("igraph", "igraph.Graph.pagerank (PRPACK, solved exactly)", "cpu",
                        lambda: g.pagerank(damping=PR_DAMPING, directed=True),
                        lambda raw: ("values", np.asarray(raw, dtype=np.float64)),
                        note="PRPACK solves the linear system; its tolerance is not settable")


# NetworkX ------------------------------------------------------------------------------------------------
def _networkx_peer(app, graph, source) -> PreparedPeer:
    import networkx as nx
    n = graph.num_vertices
    g = nx.from_scipy_sparse_array(adjacency(graph, app == "sssp"), create_using=nx.DiGraph)

    if app == "bfs":
        return PreparedPeer("networkx", "networkx.single_source_shortest_path_length", "cpu",
                            lambda: nx.single_source_shortest_path_length(g, source),
                            lambda raw: ("values", as_array(raw, n, -1, np.int64)))
    if app == "sssp":
        return PreparedPeer("networkx", "networkx.single_source_dijkstra_path_length", "cpu",
                            lambda: nx.single_source_dijkstra_path_length(g, source, weight="weight"),
                            lambda raw: ("values", as_array(raw, n, np.inf, np.float64)))
    if app == "cc":
        def labels(components):
            out = np.empty(n, dtype=np.int64)
            for comp in components:
                members = np.fromiter(comp, dtype=np.int64)
                out[members] = members.min()
            return ("values", out)
        return PreparedPeer("networkx", "networkx.weakly_connected_components", "cpu",
                            lambda: list(nx.weakly_connected_components(g)), labels)
    # NetworkX stops when the L1 change is below n * tol: scale so it is PR_TOL, like the others
    return PreparedPeer("networkx", f"networkx.pagerank (L1 change < {PR_TOL:g})", "cpu",
                        lambda: nx.pagerank(g, alpha=PR_DAMPING, tol=PR_TOL / max(n, 1),
                                            max_iter=PR_MAX_ITERATIONS, weight=None),
                        lambda raw: ("values", as_array(raw, n, 0.0, np.float64)))


# cuGraph ---------------------------------------------------------------------------------------------------
def _cugraph_peer(app, graph, source) -> PreparedPeer:
    cugraph = _require("cugraph", "a RAPIDS install adds it as a peer")
    cudf = _require("cudf", "cuGraph needs it")
    src = np.repeat(np.arange(graph.num_vertices, dtype=np.int32), np.diff(np.asarray(graph.indptr)))
    frame = {"src": src, "dst": np.asarray(graph.indices, dtype=np.int32)}
    if app == "sssp":
        frame["w"] = np.asarray(graph.weights, dtype=np.float32)
    df = cudf.DataFrame(frame)
    g = cugraph.Graph(directed=True)
    g.from_cudf_edgelist(df, source="src", destination="dst",
                         edge_attr="w" if app == "sssp" else None, renumber=False)
    n = graph.num_vertices

    def column(name, fill, dtype):
        def convert(result):
            out = np.full(n, fill, dtype=dtype)
            out[result["vertex"].to_numpy()] = result[name].to_numpy()
            return ("values", out)
        return convert

    if app == "bfs":
        def depths(result):
            kind, out = column("distance", -1, np.int64)(result)
            out[out >= np.iinfo(np.int32).max] = -1  # cuGraph marks unreachable with int max
            return kind, out
        return PreparedPeer("cugraph", "cugraph.bfs", "gpu", lambda: cugraph.bfs(g, start=source), depths)
    if app == "sssp":
        def distances(result):
            kind, out = column("distance", np.inf, np.float64)(result)
            out[out >= np.finfo(np.float32).max] = np.inf
            return kind, out
        return PreparedPeer("cugraph", "cugraph.sssp", "gpu", lambda: cugraph.sssp(g, source=source),
                            distances)
    if app == "cc":
        return PreparedPeer("cugraph", "cugraph.weakly_connected_components", "gpu",
                            lambda: cugraph.weakly_connected_components(g),
                            column("labels", -1, np.int64))
    return PreparedPeer("cugraph", "cugraph.pagerank", "gpu",
                        lambda: cugraph.pagerank(g, alpha=PR_DAMPING, tol=PR_TOL),
                        column("pagerank", 0.0, np.float64),
                        note="cuGraph's tol is its own convergence measure")
