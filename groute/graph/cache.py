"""Binary caches of parsed graphs, in the user cache directory (never beside the user's file).

The first load of ``roadNet-CA.txt.gz`` parses text; the cache (an uncompressed ``.npz``, so
loading is a straight read) makes the next load a fraction of a second. Caches live in
``<cache dir>/graphs/``, named after the source's file name and a hash of its absolute path. A
cache records the SHA-256 of the source's bytes (see :func:`file_sha256`) and the reader options;
when they differ, or the cache is unreadable, it is ignored and rewritten. The content hash, not
the modification time, decides: a rewrite that keeps the size and restores the time (``cp -p``,
``rsync -t``, ``tar x``) is still seen. Hashing reads the file once at disk speed, a small
fraction of the parse it saves. Writes are atomic (temporary file, then rename), so a killed
process never leaves a half cache that looks complete. A graph's integer ids are an array of the
cache; text ids (an edge list's ``str`` ids, :mod:`.text_ids`) one UTF-8 buffer
(:func:`text_id_bytes`), so a cache holds no pickles and is read with ``allow_pickle=False``.

The cache directory (:func:`cache_root`) is ``$GROUTE_CACHE_DIR`` (``$GROUTE_DATA_DIR`` is read
as an older name for it), else ``$XDG_CACHE_HOME/groute``, else ``~/.cache/groute``; downloads
(:mod:`.datasets`), generated graphs and METIS partitions live there too. ``load_graph(...,
cache=False)`` neither reads nor writes caches.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .arrays import index_dtype
from .csr import CSRGraph
from ..tuning import overridden, setting

log = logging.getLogger(__name__)

CACHE_SUFFIX = ".groute-cache.npz"
#: bump when the parsed representation or the key changes, so old caches are not trusted
FORMAT_VERSION = 3


def cache_root() -> Path:
    """The user cache directory (see the module docstring); not created here."""
    for name in ("GROUTE_CACHE_DIR", "GROUTE_DATA_DIR"):
        env = setting(name)
        if env:
            return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "groute"
    return Path.home() / ".cache" / "groute"


@contextmanager
def private_cache_root():
    """For the ``with`` block, a new temporary directory is the cache directory (for this
    process and the processes it starts); it is removed afterwards. For a run that must leave
    the user cache directory alone but passes caches between its own processes (the bench
    computes METIS splits in a worker process and its solvers read them from the cache)."""
    with tempfile.TemporaryDirectory(prefix="groute-cache-") as tmp, \
            overridden("GROUTE_CACHE_DIR", tmp):
        yield Path(tmp)


def file_sha256(path, h=None):
    """``h`` (a new SHA-256 when None) updated with the bytes of ``path``, read in 1 MiB blocks:
    the content key of a graph cache, and a download's checksum (or the part a resume keeps)."""
    h = hashlib.sha256() if h is None else h
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h


def cache_path(source) -> Path:
    """Where the cache of ``source`` lives: ``<cache dir>/graphs/<name>-<path hash>.npz``."""
    src = Path(os.fspath(source)).resolve()
    tag = hashlib.sha1(str(src).encode()).hexdigest()[:12]
    return cache_root() / "graphs" / f"{src.name}-{tag}{CACHE_SUFFIX}"


def source_key(source, options: dict) -> dict:
    """What a cache must match: the source's size and content hash, reader options, version."""
    return {"version": FORMAT_VERSION, "size": os.stat(source).st_size,
            "sha256": file_sha256(source).hexdigest(), "options": options}


def text_id_bytes(labels: np.ndarray) -> np.ndarray:
    """Text ids as a cache stores them: one UTF-8 buffer of the ids separated by newlines,
    which no id a reader makes holds (it splits fields at blanks). Both ways are one C pass,
    and the cache needs no pickles. ValueError for labels that are not all such text (a
    NetworkX graph's tuples, say), which a file cache never holds."""
    items = labels.tolist()
    if not all(isinstance(x, str) for x in items):
        raise ValueError("its vertex ids are not all text")
    text = "\n".join(items)
    if items and text.count("\n") != len(items) - 1:
        raise ValueError("a vertex id holds a newline")
    return np.frombuffer(text.encode("utf-8", errors="strict"), dtype=np.uint8)


def text_ids_of(buffer: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` text ids :func:`text_id_bytes` stored in ``buffer`` (an object array of
    ``str``); ValueError when the buffer holds another count or repeats an id."""
    items = buffer.tobytes().decode("utf-8").split("\n") if n else []
    if len(items) != n:
        raise ValueError(f"{len(items)} text ids for {n} vertices")
    if len(set(items)) != n:
        raise ValueError("its text ids repeat")
    out = np.empty(n, dtype=object)
    out[:] = items
    return out


def save_graph_npz(g: CSRGraph, path: Path, key: dict) -> None:
    """Write ``g`` and ``key`` atomically to ``path`` (uncompressed npz). ValueError (before
    anything is written) when ``g``'s ids are labels other than text (:func:`text_id_bytes`)."""
    g = g.to_host()
    meta = {"key": key, "directed": g.directed, "name": g.name, "id_base": g.id_base,
            "source": None if g.source is None else os.fspath(g.source)}
    arrays = {"indptr": g.indptr, "indices": g.indices,
              "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
    if g.weights is not None:
        arrays["weights"] = g.weights
    if g.file_ids is not None and g.file_ids.dtype == object:
        arrays["file_id_text"] = text_id_bytes(g.file_ids)
    elif g.file_ids is not None:
        arrays["file_ids"] = g.file_ids
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.chmod(tmp, 0o644)                 # mkstemp makes 0600; caches are for every user
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_graph_npz(path: Path, key: dict | None = None) -> CSRGraph | None:
    """The cached graph, or ``None`` when missing, stale (key differs), unreadable or invalid.

    The key says which source a cache was made from, but anyone who can write the cache
    directory can write a key, so what a cache holds is checked as a graph from a caller is
    (:meth:`CSRGraph.validate`: offsets from 0 to the arc count and never decreasing, every
    index a vertex, the arrays' sizes agree) and its indices must have the type the readers
    give them: what the devices index with never comes from the file unchecked. The checks
    are whole-array passes, a small fraction of reading the arrays."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            if key is not None and meta.get("key") != key:
                log.info("cache %s is stale; ignoring it", path)
                return None
            file_ids = z["file_ids"] if "file_ids" in z.files else None
            text = z["file_id_text"] if "file_id_text" in z.files else None
            g = CSRGraph(z["indptr"], z["indices"], z["weights"] if "weights" in z.files else None,
                         directed=meta["directed"], name=meta["name"], source=meta.get("source"),
                         id_base=meta["id_base"], file_ids=file_ids, validate=False)
    except Exception as exc:  # a corrupt cache is never fatal: the source is still there
        log.warning("ignoring unreadable graph cache %s (%s)", path, exc)
        return None
    try:
        if text is not None:
            g.file_ids = text_ids_of(text, g.num_vertices)
        g.validate(symmetry=False)      # the graph it was written from was checked so
        if g.indices.dtype != index_dtype(g.num_vertices):
            raise ValueError(f"indices are {g.indices.dtype}, a graph of {g.num_vertices} "
                             f"vertices has {np.dtype(index_dtype(g.num_vertices))}")
    except ValueError as exc:
        log.warning("ignoring invalid graph cache %s (%s); the source is read again", path, exc)
        return None
    return g


def load_cached(source, options: dict, key: dict | None = None) -> CSRGraph | None:
    """A valid cache of ``source`` read with ``options``, if there is one (``key``: its
    :func:`source_key`, when the caller has it)."""
    p = cache_path(source)
    if not p.is_file():
        return None
    g = load_graph_npz(p, key or source_key(source, options))
    if g is not None:
        log.info("loaded %s from cache %s", source, p)
        g.source = os.fspath(source)
    return g


def store_cached(source, options: dict, g: CSRGraph, key: dict | None = None) -> Path | None:
    """Cache ``g`` for ``source`` in the cache directory under ``key`` (its
    :func:`source_key`: taken before ``g`` was parsed, so that a file replaced meanwhile
    never files the old graph under the new bytes); ``None`` (logged) when it cannot."""
    p = cache_path(source)
    try:
        save_graph_npz(g, p, key or source_key(source, options))
    except ValueError as exc:
        log.info("not caching %s: %s", source, exc)
        return None
    except OSError as exc:
        log.warning("could not cache %s as %s (%s); the next load parses it again", source, p, exc)
        return None
    log.info("cached %s as %s", source, p)
    return p
