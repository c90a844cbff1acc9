"""Binary caches: parsed graphs as ``.npz`` next to their source, and the user cache directory.

The first load of ``roadNet-CA.txt.gz`` parses text; the cache ``roadNet-CA.txt.gz.groute-cache.npz``
(uncompressed npz, so loading is a straight read) makes the next load a fraction of a second. A
cache records the source's size and modification time and the reader options; when they differ,
or the cache is unreadable, it is ignored and rewritten. When the source's directory is not
writable the cache goes to ``<cache dir>/graphs/`` instead. Writes are atomic (temporary file,
then rename), so a killed process never leaves a half cache that looks complete.

The cache directory is ``$GROUTE_DATA_DIR``, else ``$XDG_CACHE_HOME/groute``, else
``~/.cache/groute``; downloads (:mod:`.datasets`), generated graphs and METIS partitions live there.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path

import numpy as np

from .csr import CSRGraph
from ..tuning import setting

log = logging.getLogger(__name__)

CACHE_SUFFIX = ".groute-cache.npz"
#: bump when the parsed representation changes, so old caches are not trusted
FORMAT_VERSION = 1


def cache_root() -> Path:
    """The user cache directory (see the module docstring); not created here."""
    env = setting("GROUTE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "groute"
    return Path.home() / ".cache" / "groute"


def _dir_writable(d: Path) -> bool:
    """Whether caches may be written into directory ``d``.

    A directory without any write permission bit counts as read-only even for root (for whom
    ``os.access`` says yes): shared data folders are marked that way and must stay untouched.
    """
    try:
        st = Path(d).stat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o222:
        return False
    return os.access(d, os.W_OK | os.X_OK)


def dir_writable(d) -> bool:
    """Public name of :func:`_dir_writable` (used by the partition cache)."""
    return _dir_writable(Path(d))


def cache_paths(source) -> list[Path]:
    """Where a cache for ``source`` may be: next to it first, then in the cache directory."""
    src = Path(os.fspath(source)).resolve()
    tag = hashlib.sha1(str(src).encode()).hexdigest()[:12]
    return [src.with_name(src.name + CACHE_SUFFIX),
            cache_root() / "graphs" / f"{src.name}-{tag}{CACHE_SUFFIX}"]


def source_key(source, options: dict) -> dict:
    """What a cache must match: the source's size and mtime, reader options, format version."""
    st = os.stat(source)
    return {"version": FORMAT_VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "options": options}


def save_graph_npz(g: CSRGraph, path: Path, key: dict) -> None:
    """Write ``g`` and ``key`` atomically to ``path`` (uncompressed npz)."""
    g = g.to_host()
    meta = {"key": key, "directed": g.directed, "name": g.name, "id_base": g.id_base,
            "source": None if g.source is None else os.fspath(g.source)}
    arrays = {"indptr": g.indptr, "indices": g.indices,
              "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
    if g.weights is not None:
        arrays["weights"] = g.weights
    if g.file_ids is not None:
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
    """The cached graph, or ``None`` when missing, stale (key differs) or unreadable."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            if key is not None and meta.get("key") != key:
                log.info("cache %s is stale; ignoring it", path)
                return None
            g = CSRGraph(z["indptr"], z["indices"], z["weights"] if "weights" in z.files else None,
                         directed=meta["directed"], name=meta["name"], source=meta.get("source"),
                         id_base=meta["id_base"],
                         file_ids=z["file_ids"] if "file_ids" in z.files else None, validate=False)
    except Exception as exc:  # a corrupt cache is never fatal: the source is still there
        log.warning("ignoring unreadable graph cache %s (%s)", path, exc)
        return None
    # Cheap structural checks (O(|V|)); the full index-range check is what made the cache.
    ip = g.indptr
    if ip.ndim != 1 or ip.size < 1 or ip[0] != 0 or ip[-1] != g.indices.size:
        log.warning("ignoring inconsistent graph cache %s", path)
        return None
    return g


def load_cached(source, options: dict) -> CSRGraph | None:
    """A valid cache of ``source`` read with ``options``, if there is one."""
    key = source_key(source, options)
    for p in cache_paths(source):
        g = load_graph_npz(p, key)
        if g is not None:
            log.info("loaded %s from cache %s", source, p)
            g.source = os.fspath(source)
            return g
    return None


def store_cached(source, options: dict, g: CSRGraph) -> Path | None:
    """Cache ``g`` next to ``source`` or, if that directory is read-only, in the cache dir."""
    key = source_key(source, options)
    for p in cache_paths(source):
        if p.parent.exists() and not _dir_writable(p.parent):
            continue
        try:
            save_graph_npz(g, p, key)
            log.info("cached %s as %s", source, p)
            return p
        except OSError as exc:
            log.info("could not write cache %s (%s)", p, exc)
    log.warning("could not cache %s anywhere; the next load parses it again", source)
    return None
