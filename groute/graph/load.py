"""``load_graph``: one call for a file, a generator spec, a dataset name or a graph object.

Resolution order for a string: an existing path; a generator spec (``kron:21``, see
:mod:`.spec`); the name of a registered dataset already downloaded with ``groute data get``.
Files go through the binary cache (:mod:`.cache`), and the last ones read stay in memory
(:data:`RECENT_FILE_BYTES`) until the file changes (its size, modification or change time), so
a second call on the same file in a process does not read it again; generated graphs with more
than
:data:`GENERATED_CACHE_MIN_ARCS` arcs are cached in ``<cache dir>/generated/`` since generating
them again costs seconds to minutes on a CPU, up to :data:`GENERATED_CACHE_MAX_BYTES` of CSR
arrays: a bigger graph would fill the disk (kron:26:32 is 17 GB) and generating it on a GPU is
about as fast as reading it back. Graph objects (a CSRGraph, NetworkX graph, scipy
matrix, edge arrays) go through :func:`.convert.as_graph`.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

from . import cache as _cache
from .convert import as_graph
from .csr import CSRGraph
from .formats import detect_format, read_graph
from .rng import checked_seed
from .spec import is_spec, parse_spec

log = logging.getLogger(__name__)

GENERATED_CACHE_MIN_ARCS = 4_000_000
#: generated graphs whose CSR arrays take more bytes than this are not cached (see above)
GENERATED_CACHE_MAX_BYTES = 4 << 30
GENERATOR_VERSION = 1
#: bytes of CSR arrays of the files read last that stay in memory for the next call on the same
#: file (options and modification time alike): a graph's binary cache takes milliseconds to
#: read per million arcs, more than a small run; a bigger graph is not kept
RECENT_FILE_BYTES = 1 << 30
_recent: dict[tuple, CSRGraph] = {}
_recent_lock = threading.Lock()


def load_graph(source, *, weighted: bool | None = None, seed: int | None = None,
               cache: bool = True, symmetric: bool = False, format: str | None = None,
               backend: str = "auto", allow_negative: bool = False, columns=None,
               weight: str | None = "weight", num_vertices: int | None = None,
               header: bool | None = None) -> CSRGraph:
    """Load or generate a graph; the result's arrays are NumPy arrays.

    ``source``: a part set's folder (written by ``groute partition``; every part is read), a
    path (``.mtx[.gz]``, ``.gr[.gz]``, SNAP ``.txt/.el/.edges[.gz]``,
    ``.csv/.tsv[.gz]``, else sniffed), a spec (``kron:21``, ``grid:4900``...), a downloaded
    dataset's name, or a graph object: a CSRGraph, a NetworkX Graph/DiGraph (node labels become
    the vertex ids; ``weight`` names the edge attribute read as weights), a scipy sparse matrix,
    or ``(src, dst[, weights])`` edge arrays (``num_vertices``: their vertex count, default the
    largest id plus one).
    ``weighted``: ``None`` keeps what the source has; ``True`` adds random integer weights in
    [1, 64] (seeded by ``seed``, default 0) when there are none; ``False`` drops weights.
    ``seed``: the generator seed for specs that do not set ``seed=`` themselves, and the weights'
    seed. ``symmetric``: store SNAP edge lists (and any directed input) in both directions.
    ``columns``: the source, target and optional weight columns of an edge list (CSV/TSV:
    0-based positions or header names, e.g. ``("from", "to", "cost")``; SNAP: positions).
    ``header``: whether a CSV/TSV file's first data line is a header row (None: a line with a
    field that is not a number is one, unless its weight is a number; see docs/GRAPHS.md).
    Edge lists whose ids are not all integers keep them as text (``str`` ids).
    ``cache``: read/write the binary caches in the user cache directory (``False``: neither
    read nor write). ``backend``: where generators run ("auto" uses a GPU
    through CuPy when there is one; the graph is the same either way).
    """
    if seed is not None:
        seed = checked_seed(seed)
    if not isinstance(source, (str, os.PathLike)):
        g = as_graph(source, weight=weight, num_vertices=num_vertices, symmetric=symmetric)
    else:
        text = os.fspath(source)
        if not text.strip():
            raise ValueError("the graph is an empty name: give a file, a part set's folder, a "
                             "graph spec (kron:21, rmat:20, grid:4900, er:1e6:8) or a "
                             "downloaded dataset")
        path = Path(text).expanduser()
        if path.is_dir():
            from .part_set import read_whole
            if symmetric or columns is not None:     # a part set is read as it was written
                raise ValueError(f"{text}: a part set is read as groute partition wrote it; "
                                 f"{'symmetric' if symmetric else 'columns'} applies to the "
                                 f"file it was written from (partition that with the option)")
            g = read_whole(path)
        elif path.exists():
            g = _load_file(path, cache=cache, symmetric=symmetric, format=format,
                           allow_negative=allow_negative, columns=columns, header=header)
        elif is_spec(text):
            if columns is not None:
                raise ValueError(f"{text}: a graph spec has no columns to choose (columns "
                                 f"apply to delimited files)")
            g = _load_spec(text, seed=seed, cache=cache, backend=backend)
            if symmetric and g.directed:
                g = g.symmetrize()
        else:
            from .datasets import find_downloaded
            found = find_downloaded(text)
            if found is None:
                raise FileNotFoundError(
                    f"{text!r} is neither a file, nor a graph spec (kron:21, rmat:20, grid:4900, "
                    f"er:1e6:8), nor a downloaded dataset (see `groute data list` / `groute data get`)")
            g = _load_file(found.path, cache=cache, symmetric=symmetric or found.symmetric,
                           format=format or found.format,
                           allow_negative=allow_negative, columns=columns, header=header)
    if weighted is True and g.weights is None:
        g = g.with_weights(seed=0 if seed is None else seed)
    elif weighted is False and g.weights is not None:
        g = g.without_weights()
    return g


def _load_file(path: Path, *, cache, symmetric, format, allow_negative, columns,
               header) -> CSRGraph:
    options = {"format": format or detect_format(path), "symmetric": bool(symmetric),
               "allow_negative": bool(allow_negative)}
    if columns is not None:
        options["columns"] = [c if isinstance(c, str) else int(c) for c in columns]
    if header is not None:
        options["header"] = bool(header)
    if not cache:
        return _read_file(path, options, cache=False)
    # the change time too: a rewrite of the same size with the old modification time restored
    # (cp -p, rsync -t, tar x) sets it to now
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns,
           repr(sorted(options.items())))
    with _recent_lock:
        g = _recent.get(key)
    if g is None:
        g = _read_file(path, options, cache=True)
        with _recent_lock:
            _keep_recent(key, g)
    return g


def _keep_recent(key, g: CSRGraph) -> None:
    """Keep ``g`` for the next call on its file, the oldest dropped past
    :data:`RECENT_FILE_BYTES` (a graph bigger than that is not kept)."""
    if g.nbytes > RECENT_FILE_BYTES:
        return
    _recent.pop(key, None)
    _recent[key] = g
    while sum(kept.nbytes for kept in _recent.values()) > RECENT_FILE_BYTES:
        del _recent[next(iter(_recent))]


def _read_file(path: Path, options: dict, *, cache: bool) -> CSRGraph:
    """The graph of ``path`` through the binary cache (``cache``) or parsed."""
    symmetric, allow_negative = options["symmetric"], options["allow_negative"]
    columns, header = options.get("columns"), options.get("header")
    if cache:
        # the file as it is before anything reads it: its key (hashed once, for the lookup
        # and the store), and what tells whether it was replaced while it was parsed
        before = _file_state(path)
        key = _cache.source_key(path, options)
        g = _cache.load_cached(path, options, key)
        if g is not None:
            return g
    t0 = time.perf_counter()
    g = read_graph(path, format=options["format"], symmetric=symmetric,
                   allow_negative=allow_negative, columns=columns, header=header)
    log.info("parsed %s in %.2f s: %s", path, time.perf_counter() - t0, g)
    if cache:
        if _file_state(path) == before:
            _cache.store_cached(path, options, g, key)
        else:
            log.warning("%s changed while it was read: not cached (the next load reads it "
                        "again)", path)
    return g


def _file_state(path: Path) -> tuple:
    """What changes when a file is written or replaced: its inode, size and modification."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _generated_cache_path(canonical: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", canonical)
    return _cache.cache_root() / "generated" / f"{safe}{_cache.CACHE_SUFFIX}"


def _load_spec(text: str, *, seed, cache, backend) -> CSRGraph:
    from .generators import generate
    spec = parse_spec(text)
    if seed is not None and "seed=" not in text.replace(" ", ""):
        spec = parse_spec(f"{text}:seed={int(seed)}")
        spec = type(spec)(spec.kind, spec.params, text)
    key = {"version": GENERATOR_VERSION, "spec": spec.canonical}
    cpath = _generated_cache_path(spec.canonical)
    if cache:
        g = _cache.load_graph_npz(cpath, key)
        if g is not None:
            log.info("loaded %s from %s", text, cpath)
            g.name = text
            return g
    t0 = time.perf_counter()
    g = generate(spec, backend=backend, name=text, on_host=True)
    log.info("generated %s in %.2f s: %s", text, time.perf_counter() - t0, g)
    if cache and g.nbytes > GENERATED_CACHE_MAX_BYTES:
        log.info("not caching %s: its %.1f GiB of CSR arrays exceed the generated-graph cache's "
                 "limit of %.1f GiB", text, g.nbytes / 2**30, GENERATED_CACHE_MAX_BYTES / 2**30)
    elif cache and g.num_edges >= GENERATED_CACHE_MIN_ARCS:
        try:
            _cache.save_graph_npz(g, cpath, key)
        except OSError as exc:
            log.info("could not cache %s (%s)", text, exc)
    return g


def input_graph(graph, *, weight=None, num_vertices=None, symmetric=False, multigraph=None):
    """The graph a one-shot algorithm function (``groute.bfs(G, ...)``, or one of your own on
    the operator API) runs on, from anything :func:`load_graph` takes; a NetworkX multigraph
    refused where the algorithm cannot answer for it as NetworkX does.

    Parameters
    ----------
    graph : path, spec, CSRGraph, NetworkX graph, scipy sparse matrix or tuple
        A file or spec, a graph, or ``(src, dst[, weights])`` edge arrays.
    weight : hashable, optional
        The NetworkX edge attribute read as the weights (its key; None: unweighted).
    num_vertices : int, optional
        For edge arrays: the vertex count (default: the largest id plus one).
    symmetric : bool
        Store every arc both ways.
    multigraph : str, optional
        Why the algorithm refuses a NetworkX multigraph (parallel edges that NetworkX counts
        and groute's graphs merge, or a function NetworkX does not implement for them); None
        when it takes one.

    Returns
    -------
    CSRGraph

    Raises
    ------
    GraphNotSupported
        A NetworkX multigraph where ``multigraph`` is given (NetworkX's
        ``NetworkXNotImplemented``), saying why.

    Examples
    --------
    >>> import networkx as nx
    >>> from groute.graph import input_graph
    >>> input_graph(nx.path_graph(3)).num_edges
    4
    """
    if multigraph is not None and getattr(graph, "is_multigraph", lambda: False)():
        from groute.errors import GraphNotSupported
        raise GraphNotSupported(f"a NetworkX {type(graph).__name__}: {multigraph}")
    return load_graph(graph, weight=weight, num_vertices=num_vertices, symmetric=symmetric)
