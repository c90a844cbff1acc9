"""Standard public graphs by name: a small registry and an atomic, checksum-verified downloader.

``download("roadNet-CA")`` fetches the original file into the cache directory (see
:func:`groute.graph.cache.cache_root`; ``$GROUTE_CACHE_DIR`` overrides it) through ``urllib``:
it streams into ``<file>.part`` while hashing, verifies the size and SHA-256 where the registry
knows them, and only then renames to the final name, so an interrupted download never looks
complete. An interrupted HTTP(S) download resumes from the ``.part`` file when the server honours
``Range``. SuiteSparse archives (``.tar.gz``) are unpacked to their ``.mtx``.

The registry lists the original public sources. Checksums are only recorded where they were
verified; entries with ``sha256=None`` download unverified and say so (we never invent hashes).
Extra or overriding entries can come from a JSON file named by ``$GROUTE_DATASETS`` (a list of
objects with the :class:`Dataset` fields) or from the ``registry`` argument, which is how tests
use ``file://`` URLs.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tarfile
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import NamedTuple

from ..errors import GrouteError
from ..tuning import setting
from .cache import cache_root, file_sha256
from .formats import FORMATS

log = logging.getLogger(__name__)


class DatasetError(GrouteError):
    """A download that failed verification or a dataset that is not known."""


class DownloadError(DatasetError, OSError):
    """A URL that could not be fetched (offline, refused, not found); names the URL."""


@dataclass(frozen=True)
class Dataset:
    """One downloadable graph. ``vertices``/``edges`` are as published by the source (for
    information); ``size`` is the download's byte count and ``sha256`` its hash, ``None`` when
    unknown. ``format``: ``snap``, ``dimacs``, ``mtx`` or ``mtx-tar`` (SuiteSparse archive).
    ``symmetric``: load an edge list with both directions stored (undirected graphs)."""
    name: str
    url: str
    format: str
    description: str = ""
    vertices: int | None = None
    edges: int | None = None
    size: int | None = None
    sha256: str | None = None
    symmetric: bool = False

    @property
    def filename(self) -> str:
        return Path(urllib.parse.urlparse(self.url).path).name or f"{self.name}.download"

    @property
    def graph_filename(self) -> str:
        """The file :func:`load_graph` reads once downloaded (archives: the extracted .mtx)."""
        if self.format == "mtx-tar":
            return f"{self.name}.mtx"
        return self.filename


_SNAP = "https://snap.stanford.edu/data/"
_DIMACS9 = "http://www.diag.uniroma1.it/challenge9/data/USA-road-d/"
_SUITESPARSE = "https://sparse.tamu.edu/MM/"

REGISTRY: dict[str, Dataset] = {d.name: d for d in [
    Dataset("roadNet-CA", _SNAP + "roadNet-CA.txt.gz", "snap",
            "California road network (SNAP; Leskovec et al. 2009); each edge listed both ways",
            1_965_206, 2_766_607, symmetric=True),
    Dataset("roadNet-PA", _SNAP + "roadNet-PA.txt.gz", "snap",
            "Pennsylvania road network (SNAP)", 1_088_092, 1_541_898, symmetric=True),
    Dataset("soc-LiveJournal1", _SNAP + "soc-LiveJournal1.txt.gz", "snap",
            "LiveJournal friendship network, directed (SNAP; Backstrom et al. 2006)",
            4_847_571, 68_993_773),
    Dataset("web-Google", _SNAP + "web-Google.txt.gz", "snap",
            "Google web graph, directed (SNAP; Google programming contest 2002)",
            875_713, 5_105_039),
    Dataset("USA-road-d.NY", _DIMACS9 + "USA-road-d.NY.gr.gz", "dimacs",
            "New York City road network, distances (9th DIMACS Implementation Challenge)",
            264_346, 733_846),
    Dataset("USA-road-d.BAY", _DIMACS9 + "USA-road-d.BAY.gr.gz", "dimacs",
            "San Francisco Bay Area roads, distances (9th DIMACS Challenge)", 321_270, 800_172),
    Dataset("USA-road-d.CAL", _DIMACS9 + "USA-road-d.CAL.gr.gz", "dimacs",
            "California and Nevada roads, distances (9th DIMACS Challenge)", 1_890_815, 4_657_742),
    Dataset("USA-road-d.USA", _DIMACS9 + "USA-road-d.USA.gr.gz", "dimacs",
            "Full USA road network, distances (9th DIMACS Challenge); Groute's 'USA'",
            23_947_347, 58_333_344),
    Dataset("kron_g500-logn21", _SUITESPARSE + "DIMACS10/kron_g500-logn21.tar.gz", "mtx-tar",
            "Graph500 Kronecker scale 21 (SuiteSparse DIMACS10; Groute's 'kron21'); edges = nnz/2",
            2_097_152, 91_042_010),
    Dataset("europe_osm", _SUITESPARSE + "DIMACS10/europe_osm.tar.gz", "mtx-tar",
            "OpenStreetMap road network of Europe (SuiteSparse DIMACS10; Groute's 'osm-eur')",
            50_912_018, 54_054_660),
    Dataset("road_usa", _SUITESPARSE + "DIMACS10/road_usa.tar.gz", "mtx-tar",
            "USA road network, undirected (SuiteSparse DIMACS10)", 23_947_347, 28_854_312),
    Dataset("soc-LiveJournal1-mtx", _SUITESPARSE + "SNAP/soc-LiveJournal1.tar.gz", "mtx-tar",
            "LiveJournal as a SuiteSparse Matrix Market archive (SNAP group)",
            4_847_571, 68_993_773),
]}


def registry(extra: dict | None = None) -> dict[str, Dataset]:
    """The built-in registry, updated from ``$GROUTE_DATASETS`` and then from ``extra``."""
    reg = dict(REGISTRY)
    env = setting("GROUTE_DATASETS")
    if env:
        try:
            entries = json.loads(Path(env).read_text())
        except (OSError, ValueError) as exc:
            raise DatasetError(f"cannot read GROUTE_DATASETS={env}: {exc}") from exc
        for d in _entries(entries, f"GROUTE_DATASETS={env}"):
            reg[d.name] = d
    if extra:
        reg.update({k: v if isinstance(v, Dataset) else Dataset(**v) for k, v in extra.items()})
    return reg


#: the URLs :func:`download` fetches
URL_SCHEMES = ("http", "https", "file")
#: the formats a dataset's file may be in (:class:`Dataset`)
DATASET_FORMATS = ("snap", "dimacs", "mtx", "mtx-tar")


def _entries(entries, where: str) -> list[Dataset]:
    """A registry file's entries (a JSON list of objects with at least ``name``, ``url`` and
    ``format``) as Datasets, or a DatasetError naming ``where`` and the entry at fault."""
    if not isinstance(entries, list):
        raise DatasetError(f"{where}: a list of datasets, got a JSON {type(entries).__name__}")
    known = {f.name for f in fields(Dataset)}
    out = []
    for i, e in enumerate(entries):
        what = f"{where}: entry {i}"
        if not isinstance(e, dict):
            raise DatasetError(f"{what}: an object with name, url and format, got {e!r}")
        missing = [k for k in ("name", "url", "format") if k not in e]
        unknown = sorted(set(e) - known)
        if missing or unknown:
            raise DatasetError(f"{what}: " + "; ".join(
                ([f"lacks {', '.join(missing)}"] if missing else [])
                + ([f"has unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})"]
                   if unknown else [])))
        if not all(isinstance(e[k], str) and e[k] for k in ("name", "url")):
            raise DatasetError(f"{what}: name and url are non-empty strings")
        if e["format"] not in DATASET_FORMATS:
            raise DatasetError(f"{what}: format {e['format']!r}; one of "
                               f"{', '.join(DATASET_FORMATS)}")
        out.append(Dataset(**e))
    return out


def data_dir(dir=None) -> Path:
    return Path(dir).expanduser() if dir else cache_root()


def lookup(name: str, reg: dict | None = None) -> Dataset:
    reg = reg if reg is not None else registry()
    if name in reg:
        return reg[name]
    low = {k.lower(): v for k, v in reg.items()}
    if name.lower() in low:
        return low[name.lower()]
    raise DatasetError(f"unknown dataset {name!r}; `groute data list` shows the known ones, or "
                       f"give a URL to fetch any file")


class Downloaded(NamedTuple):
    """A downloaded dataset's graph file, as :func:`load_graph` reads it."""
    path: Path
    symmetric: bool
    format: str       # the reader's: a SuiteSparse archive's extracted file is Matrix Market


def find_downloaded(name: str, dir=None) -> Downloaded | None:
    """The graph file of a dataset that has been downloaded, how to read it, or None: a
    registered name in the data directory, else a name recorded by :func:`download` (any
    ``url``, read in the format it was given or found to have)."""
    try:
        d = lookup(name)
    except DatasetError:
        d = None
    if d is not None:
        p = data_dir(dir) / d.graph_filename
        if p.is_file():
            return Downloaded(p, d.symmetric, _reader_format(d.format))
    rec = _records().get(name)
    if rec is not None and Path(rec["path"]).is_file():
        return Downloaded(Path(rec["path"]), bool(rec.get("symmetric", False)),
                          _reader_format(rec.get("format")))
    return None


def _reader_format(fmt):
    """The reader of a dataset's graph file in format ``fmt`` (None: found by its name)."""
    if fmt == "mtx-tar":
        return "mtx"
    return fmt if fmt in DATASET_FORMATS else None


def _records_path() -> Path:
    return cache_root() / "downloaded.json"


def _records() -> dict:
    """Names given to downloads (``groute data get NAME --url U``), so NAME loads as a graph."""
    try:
        return json.loads(_records_path().read_text())
    except (OSError, ValueError):
        return {}


def named_downloads() -> dict:
    """The names given to downloads from a URL (``groute data get NAME --url U``): name ->
    ``{"path", "url", "format", "symmetric"}``, for listing them beside the registry."""
    return _records()


def _record(d: Dataset, path: Path, fmt: str | None) -> None:
    """Remember ``d.name`` -> ``path``, read in format ``fmt`` (None: found from the file, as
    any graph file's), atomically: a temporary file, then rename."""
    recs = _records()
    recs[d.name] = {"path": str(Path(path).resolve()), "url": d.url, "format": fmt,
                    "symmetric": d.symmetric}
    target = _records_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    tmp.write_text(json.dumps(recs, indent=1, sort_keys=True))
    os.replace(tmp, target)


def dataset_for_path(path) -> Dataset | None:
    """The registry entry whose graph file this is (to know e.g. that it is symmetric)."""
    name = Path(path).name
    for d in registry().values():
        if d.graph_filename == name:
            return d
    return None


@dataclass
class DownloadResult:
    path: Path                 # the graph file to load
    sha256: str                # hash of the downloaded file
    verified: bool             # True when a known checksum matched
    downloaded: bool = True    # False when it was already there
    notes: list = field(default_factory=list)


def download(name: str, *, dir=None, url: str | None = None, sha256: str | None = None,
             format: str | None = None, registry_extra: dict | None = None, force: bool = False,
             progress=None) -> DownloadResult:
    """Fetch dataset ``name`` (or any ``url`` under that name) into ``dir`` (default cache dir).

    ``sha256`` overrides the registry's checksum. ``progress(done_bytes, total_or_None)`` is
    called as data arrives. Raises DatasetError when verification fails (the partial file is
    removed) and OSError for network/file problems.
    """
    if not isinstance(name, str) or not name.strip() or "/" in name:
        raise DatasetError(f"a dataset's name is a non-empty word without '/', got {name!r}")
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", str(sha256)):
        raise DatasetError(f"sha256 is 64 hexadecimal digits, got {sha256!r}")
    if format is not None and format not in DATASET_FORMATS:
        raise DatasetError(f"format {format!r}: one of {', '.join(DATASET_FORMATS)}")
    if url is not None and urllib.parse.urlparse(url).scheme not in URL_SCHEMES:
        raise DatasetError(f"url {url!r}: groute downloads {', '.join(URL_SCHEMES)} URLs "
                           f"(a local file: file:///path/to/it)")
    if dir is not None and Path(dir).expanduser().exists() and \
            not Path(dir).expanduser().is_dir():
        raise DatasetError(f"dir {dir}: a file, not a folder to download into")
    reg = registry(registry_extra)
    if url is not None:
        base = reg.get(name)
        # a URL whose name does not say its format is read as any file is: by its content
        fmt = format or (base.format if base else _format_from_url(url))
        d = Dataset(name, url, fmt or "snap", base.description if base else "",
                    symmetric=base.symmetric if base else False)
        if base is not None and d.filename != base.filename:
            # a registered name from another URL is a mirror of its file: another file under
            # it would be loaded as that dataset, while the registry still describes its own
            raise DatasetError(f"{name!r} is the registry's dataset from {base.url}; a URL for "
                               f"it is a mirror of {base.filename}, got {d.filename}: give "
                               f"this download a name of its own")
    else:
        d = lookup(name, reg)
        fmt = d.format
    expected = (sha256 or d.sha256 or "").lower() or None
    target_dir = data_dir(dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    dest = target_dir / d.filename
    owner = _held_for(d, [dest, target_dir / d.graph_filename], reg,
                      default_dir=target_dir.resolve() == data_dir().resolve())
    if owner is not None:
        raise DatasetError(f"{dest}: {owner}; download {d.name!r} into another directory")
    notes = []
    if dest.is_file() and not force:
        digest = file_sha256(dest).hexdigest()
        if expected and digest != expected:
            raise DatasetError(f"{dest} exists but its sha256 {digest} does not match {expected}; "
                               "delete it or download again with force=True")
        result = DownloadResult(dest, digest, bool(expected), downloaded=False,
                                notes=["already downloaded"])
    else:
        digest, size = _fetch(d.url, dest, progress)
        if d.size is not None and size != d.size and not sha256:
            dest.with_name(dest.name + ".part").unlink(missing_ok=True)
            raise DatasetError(f"{d.url}: got {size} bytes, the registry says {d.size}; "
                               "nothing was kept")
        if expected and digest != expected:
            dest.with_name(dest.name + ".part").unlink(missing_ok=True)
            raise DatasetError(f"{d.url}: sha256 {digest} does not match the expected {expected}; "
                               "the download was discarded")
        os.replace(dest.with_name(dest.name + ".part"), dest)
        if not expected:
            notes.append("not verified: no sha256 known for this file")
            log.warning("%s: not verified (no sha256 known); sha256 is %s", dest, digest)
        result = DownloadResult(dest, digest, bool(expected), notes=notes)
    if d.format == "mtx-tar":
        result.path = _extract_mtx(dest, target_dir / d.graph_filename, force=force)
    _record(d, result.path, fmt)
    return result


def _held_for(d: Dataset, paths, reg, *, default_dir: bool) -> str | None:
    """Who else ``paths`` (where ``d`` would be written) belong to, as words: another name
    given to a download from another URL (its file there), or, in the default data directory
    (``default_dir``), where a registry dataset's name finds its file, another dataset of the
    registry whose file has that name; None when nobody. A second URL ending in the same file
    name would otherwise load the first one's graph under the new name, or overwrite it
    (names for one URL share its file; ``d``'s own name from a mirror is ``d``)."""
    resolved = {str(Path(p).resolve()) for p in paths}
    for name, rec in _records().items():
        if name != d.name and rec.get("path") in resolved and rec.get("url") != d.url:
            return f"already holds {name!r}, downloaded from {rec.get('url')}"
    if not default_dir:
        return None
    names = {Path(p).name for p in paths}
    for other in reg.values():
        if other.name.lower() != d.name.lower() and other.url != d.url and \
                (other.filename in names or other.graph_filename in names):
            return f"the file name of the registry's dataset {other.name!r}"
    return None


def _format_from_url(url: str) -> str | None:
    """The dataset format a URL's file name says (:data:`groute.graph.formats.FORMATS`, an
    archive: ``mtx-tar``); None where it says none a dataset has."""
    path = urllib.parse.urlparse(url).path.lower()
    if path.endswith((".tar.gz", ".tgz")):
        return "mtx-tar"
    path = path.removesuffix(".gz")
    return next((fmt for fmt, endings in FORMATS.items()
                 if fmt in DATASET_FORMATS and path.endswith(endings)), None)


def _fetch(url: str, dest: Path, progress) -> tuple[str, int]:
    """Stream ``url`` into ``dest.part``, resuming an HTTP(S) download; return (sha256, size)."""
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    done = 0
    headers = {"User-Agent": "groute-data/1"}
    scheme = urllib.parse.urlparse(url).scheme
    if part.is_file() and scheme in ("http", "https") and part.stat().st_size > 0:
        done = part.stat().st_size
        headers["Range"] = f"bytes={done}-"
    elif part.exists():
        part.unlink()
    req = urllib.request.Request(url, headers=headers)
    log.info("downloading %s -> %s", url, dest)
    try:
        resp = urllib.request.urlopen(req, timeout=60)
    except (OSError, ValueError) as exc:     # URLError, HTTPError, timeouts, a malformed URL
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"cannot download {url}: {reason} (is the network reachable? "
                            f"a local copy can be given as a file:// URL)") from exc
    with resp:
        status = getattr(resp, "status", None)
        if done and status != 206:          # server ignored Range: start over
            done = 0
        mode = "ab" if done else "wb"
        if done:
            file_sha256(part, h)
        length = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
        total = done + int(length) if length and length.isdigit() else None
        with open(part, mode) as out:
            while True:
                block = resp.read(1 << 20)
                if not block:
                    break
                out.write(block)
                h.update(block)
                done += len(block)
                if progress:
                    progress(done, total)
    if total is not None and done != total:
        raise OSError(f"{url}: connection closed after {done} of {total} bytes; run again to resume")
    return h.hexdigest(), done


def _extract_mtx(archive: Path, out: Path, *, force: bool) -> Path:
    """Unpack the main ``.mtx`` of a SuiteSparse ``.tar.gz`` to ``out`` (atomically)."""
    if out.is_file() and not force:
        return out
    want = out.name
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".mtx")]
        if not members:
            raise DatasetError(f"{archive} holds no .mtx file")
        member = next((m for m in members if Path(m.name).name == want), members[0])
        src = tar.extractfile(member)
        tmp = out.with_name(out.name + ".part")
        with open(tmp, "wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)
    os.replace(tmp, out)
    log.info("extracted %s from %s", out, archive)
    return out


def describe(d: Dataset) -> dict:
    return asdict(d)
