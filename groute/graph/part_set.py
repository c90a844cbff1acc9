"""Part sets: a graph written once as one file per rank, so that each rank reads only its part.

``groute partition --graph FILE --parts K --out DIR`` (:func:`write_part_set`) loads a graph
once, cuts it into the ``K`` contiguous ranges a job of ``K`` ranks owns
(:func:`groute.graph.partition.contiguous_offsets`) and writes:

- ``DIR/manifest.json``: what every rank needs to know of the whole graph (name, vertex and arc
  counts, directed, the ranges, the id base, whether there are weights and labels);
- ``DIR/part-R-of-K.npz``: part ``R``'s rows (``indptr`` from 0, ``indices`` as global vertex
  ids, ``weights`` if any), uncompressed, so that reading is a straight read;
- ``DIR/ids.npy``: the vertex labels, for a graph whose ids are labels (an edge list's sparse or
  text ids).

A rank reads the manifest and its own part (:func:`read_part`): host memory about its share.
Every file carries (or the manifest holds the hash of) an id of the writing, so that a file of
another set put beside them is refused rather than read.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import shutil
import zipfile
from pathlib import Path

import numpy as np

from .partition import LocalGraph, contiguous_offsets
from .rank_graph import RankGraph

MANIFEST = "manifest.json"
IDS = "ids.npy"
_PART = re.compile(r"part-\d+-of-\d+\.npz")
#: where a writing puts its files before they replace the folder's
_STAGING = re.compile(r"\.writing-[0-9a-f]{16}")
FORMAT = "groute-part-set"
VERSION = 1


def part_file(folder: Path, rank: int, parts: int) -> Path:
    return Path(folder) / f"part-{rank}-of-{parts}.npz"


def write_part_set(graph, parts: int, folder) -> dict:
    """Write ``graph`` (a :class:`~groute.graph.CSRGraph`) as a part set of ``parts`` parts in
    ``folder`` (created if missing; see the module docstring); returns the manifest.

    Raises
    ------
    ValueError
        When ``parts`` is below 1 or above the vertex count, a vertex label is neither an
        integer of int64 nor text (it would be read back as another id), or ``folder`` holds
        another part set's files (a part set is written into a fresh or its own folder).
    OSError
        Naming the file that could not be written (a full disk): the folder's old set, if any,
        is left as it was, for the files are written beside it first and then put in place
        (:func:`_replace_set`; a writing cut short while they are put in place leaves a set
        that readers refuse and the next writing replaces).
    """
    graph = graph.to_host()
    n = graph.num_vertices
    parts = int(parts)
    if not 1 <= parts <= max(n, 1):
        raise ValueError(f"parts must be between 1 and the vertex count ({n}), got {parts}")
    _check_labels(graph)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    # a part set's own files are written over only where the folder holds a part set: a
    # manifest.json or ids.npy of anything else is the user's; a staging folder is ours
    ours = _holds_a_part_set(folder)
    stray = [p.name for p in folder.iterdir()
             if not (_STAGING.fullmatch(p.name) and p.is_dir())
             and not (ours and (p.name in (MANIFEST, IDS) or _PART.fullmatch(p.name)))]
    if stray:
        raise ValueError(f"{folder} holds other files ({', '.join(sorted(stray)[:3])}); write a "
                         f"part set into an empty folder or over a part set")
    # one id for this writing of the set, in the manifest, every part and the labels' hash: a
    # part or labels of another set (or of an older writing) put beside them are told apart
    # (read_part, and across ranks groute.graph.ranked compares the manifests' ids)
    set_id = secrets.token_hex(8)
    staging = folder / f".writing-{set_id}"
    try:
        manifest = _write_files(graph, parts, staging, set_id)
        _replace_set(folder, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for leftover in folder.iterdir():       # an earlier writing that was cut short
        if _STAGING.fullmatch(leftover.name):
            shutil.rmtree(leftover, ignore_errors=True)
    return manifest


def _check_labels(graph) -> None:
    """A ValueError for vertex labels a part set cannot keep as they are: it stores integer
    labels as int64 and other labels as text, so a label of another type (a float, an int
    past int64, a tuple: NetworkX node labels) would be read back as another id."""
    labels = graph.file_ids
    if labels is None or labels.dtype != object:
        return
    values = labels.tolist()
    # what made the labels objects: a label of another type, else ints beside text (or past
    # int64), which would come back as text
    other = next((x for x in values if not isinstance(x, (str, int))), None)
    if other is None:
        other = next((x for x in values if not isinstance(x, str)), None)
    if other is not None:
        raise ValueError(f"{graph.name or 'the graph'}: vertex label {other!r} "
                         f"({type(other).__name__}) cannot be kept in a part set, whose labels "
                         f"are all integers of int64 or all text: relabel the vertices first")


def _write_files(graph, parts: int, staging: Path, set_id: str) -> dict:
    """The set's files, written into ``staging`` (a new folder beside where they go, so that a
    failed writing leaves the folder's old set whole); the manifest."""
    staging.mkdir()
    n = graph.num_vertices
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    offsets = contiguous_offsets(indptr, parts)
    for r in range(parts):
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        a, b = int(indptr[lo]), int(indptr[hi])
        arrays = {"indptr": indptr[lo:hi + 1] - a, "indices": np.asarray(graph.indices[a:b]),
                  "set": np.array(set_id)}
        if graph.weights is not None:
            arrays["weights"] = np.asarray(graph.weights[a:b])
        _written(part_file(staging, r, parts), lambda path: np.savez(path, **arrays))
    labels = graph.file_ids
    ids_hash = None
    if labels is not None:
        buffer = io.BytesIO()
        np.save(buffer, labels.astype(str) if labels.dtype == object else labels,
                allow_pickle=False)
        ids_hash = hashlib.sha256(buffer.getvalue()).hexdigest()
        _written(staging / IDS, lambda path: path.write_bytes(buffer.getvalue()))
    manifest = {"format": FORMAT, "version": VERSION, "name": graph.name, "vertices": n,
                "arcs": int(graph.num_edges), "directed": bool(graph.directed), "parts": parts,
                "offsets": offsets.tolist(), "weighted": graph.weights is not None,
                "id_base": int(graph.id_base), "labels": labels is not None, "set": set_id}
    if ids_hash is not None:
        manifest["ids_sha256"] = ids_hash
    _written(staging / MANIFEST,
             lambda path: path.write_text(json.dumps(manifest, indent=1) + "\n"))
    return manifest


def _written(path: Path, write) -> None:
    """``write(path)``; an OSError naming the file (a full disk said only "No space left")."""
    try:
        write(path)
    except OSError as exc:
        raise OSError(exc.errno, f"{path.parent.parent / path.name}: cannot write it "
                                 f"({exc.strerror or exc})") from None


def _replace_set(folder: Path, staging: Path) -> None:
    """The set written in ``staging`` in place of ``folder``'s: its parts and labels over the
    old ones while the old manifest stays (a reader meanwhile refuses the mix by the set id and
    the labels' hash, and a writing cut short here finds a set to write over), then its
    manifest (from there the set is whole), then the old files it does not have (parts of
    another count, labels). Renames within one file system: no file is written twice."""
    names = {p.name for p in staging.iterdir()}
    for name in sorted(names - {MANIFEST}):
        os.replace(staging / name, folder / name)
    os.replace(staging / MANIFEST, folder / MANIFEST)
    for old in folder.iterdir():
        if (old.name == IDS or _PART.fullmatch(old.name)) and old.name not in names:
            old.unlink()


def _holds_a_part_set(folder) -> bool:
    """Whether ``folder``'s manifest is one a part set's writer made."""
    try:
        read_manifest(folder)
    except ValueError:
        return False
    return True


def read_manifest(folder) -> dict:
    """The manifest of the part set in ``folder``; ValueError naming the folder when there is
    none or it is not one groute wrote."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise ValueError(f"{folder}: no {MANIFEST}; a part set is written by groute partition")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a part set's manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
            or manifest.get("version") != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} version {VERSION} manifest")
    _check_manifest(path, manifest)
    return manifest


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: the manifest's fields other than the format's and the ranges: name -> (what it is, check)
FIELDS = {"name": ("a text", lambda v: isinstance(v, str)),
          "parts": ("a whole number >= 1", lambda v: _whole(v) and v >= 1),
          "vertices": ("a whole number >= 0", lambda v: _whole(v) and v >= 0),
          "arcs": ("a whole number >= 0", lambda v: _whole(v) and v >= 0),
          "id_base": ("a whole number", _whole),
          "directed": ("true or false", lambda v: isinstance(v, bool)),
          "weighted": ("true or false", lambda v: isinstance(v, bool)),
          "labels": ("true or false", lambda v: isinstance(v, bool))}


def _check_manifest(path: Path, manifest: dict) -> None:
    """ValueError naming ``path`` and the field, for a manifest whose fields are missing or
    not what :func:`write_part_set` writes (a file edited or cut short)."""
    for key, (what, ok) in FIELDS.items():
        if key not in manifest:
            raise ValueError(f"{path}: no {key!r}; write the part set again (groute partition)")
        if not ok(manifest[key]):
            raise ValueError(f"{path}: {key!r} must be {what}, got {manifest[key]!r}; write the "
                             f"part set again (groute partition)")
    offsets, parts, n = manifest.get("offsets"), manifest["parts"], manifest["vertices"]
    if not (isinstance(offsets, list) and len(offsets) == parts + 1
            and all(_whole(o) for o in offsets) and offsets[0] == 0 and offsets[-1] == n
            and all(a <= b for a, b in zip(offsets, offsets[1:]))):
        raise ValueError(f"{path}: 'offsets' must be {parts + 1} ascending whole numbers from 0 "
                         f"to the {n} vertices, got {offsets!r}; write the part set again "
                         f"(groute partition)")


def _check_part(path: Path, manifest: dict, rank: int, indptr, indices, weights) -> None:
    """ValueError naming the part file ``path`` and what is wrong, for arrays that are not
    part ``rank``'s rows as :func:`write_part_set` writes them: row pointers from 0, not
    decreasing, to the arc count; targets that are vertices; a weight per arc where the set
    has weights, none where it has not."""
    lo, hi = manifest["offsets"][rank], manifest["offsets"][rank + 1]
    n = manifest["vertices"]

    def bad(what):
        return ValueError(f"{path}: {what}; write the part set again (groute partition)")
    if indptr.ndim != 1 or indptr.dtype.kind not in "iu" or indices.ndim != 1 \
            or indices.dtype.kind not in "iu":
        raise bad(f"indptr and indices must be whole numbers in one dimension, got "
                  f"{indptr.dtype} {indptr.shape} and {indices.dtype} {indices.shape}")
    if indptr.shape != (hi - lo + 1,):
        raise bad(f"{indptr.shape[0] - 1} rows, but the manifest gives part {rank} the "
                  f"vertices [{lo}, {hi})")
    if indptr[0] != 0 or indptr[-1] != indices.shape[0] or (np.diff(indptr) < 0).any():
        raise bad(f"indptr must rise from 0 to its {indices.shape[0]:,} arcs without falling, "
                  f"but runs from {indptr[0]} to {indptr[-1]}"
                  + (" and falls" if (np.diff(indptr) < 0).any() else ""))
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        v = int(indices.min()) if int(indices.min()) < 0 else int(indices.max())
        raise bad(f"arc target {v} is not one of the {n} vertices")
    if manifest["weighted"] != (weights is not None):
        raise bad("no weights, but the manifest says the graph has them" if weights is None
                  else "weights, but the manifest says the graph has none")
    if weights is not None and (weights.shape != indices.shape or weights.dtype.kind not in "iuf"):
        raise bad(f"weights must be {indices.shape[0]:,} numbers, one per arc, got "
                  f"{weights.dtype} {weights.shape}")


def read_part(folder, rank: int, size: int):
    """Rank ``rank``'s :class:`~groute.graph.ranked.RankGraph` from the part set in ``folder``,
    for a job of ``size`` ranks (which must be the set's part count); a ValueError naming the
    file and what is wrong for a manifest or part that is not what :func:`write_part_set`
    writes (the part's arrays are checked: a wrong row or target would give wrong answers or
    fail deep inside a run)."""
    manifest = read_manifest(folder)
    if manifest["parts"] != size:
        raise ValueError(f"{folder} holds {manifest['parts']} parts for a job of {size} ranks; "
                         f"run {manifest['parts']} ranks, or write the set again in {size} "
                         f"parts (write_part_set, the command groute partition)")
    offsets = np.asarray(manifest["offsets"], dtype=np.int64)
    path = part_file(folder, rank, size)
    try:
        with np.load(path, allow_pickle=False) as z:
            indptr, indices = z["indptr"], z["indices"]
            weights = z["weights"] if "weights" in z.files else None
            got = str(z["set"]) if "set" in z.files else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:   # truncated, bit-flipped
        raise ValueError(f"{path}: not a part file as groute partition writes them ({exc}); "
                         f"write the part set again") from None
    if manifest.get("set") is not None and got != manifest["set"]:
        raise ValueError(f"{path}: a part of another writing of a part set (its set {got}, the "
                         f"manifest's {manifest['set']}); write the part set again (groute "
                         f"partition)")
    _check_part(path, manifest, rank, indptr, indices, weights)
    lo = int(offsets[rank])
    labels = _read_labels(folder, manifest) if manifest["labels"] else None
    part = LocalGraph(rank, lo, indptr, indices, weights, num_global_vertices=manifest["vertices"],
                      directed=manifest["directed"], name=f"{manifest['name']}[{rank}]")
    return RankGraph(part, offsets, num_edges=manifest["arcs"], name=manifest["name"],
                     id_base=manifest["id_base"], labels=labels)


def _read_labels(folder, manifest: dict) -> np.ndarray:
    """The set's vertex labels (``ids.npy``: text labels as objects), one per vertex; a
    ValueError naming the file where it cannot be read or holds another count."""
    path = Path(folder) / IDS
    try:
        with open(path, "rb") as fh:        # hashed as read, never held twice
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        labels = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: the part set's vertex labels cannot be read ({exc}); write "
                         f"the part set again (groute partition)") from None
    if "ids_sha256" in manifest and digest != manifest["ids_sha256"]:
        raise ValueError(f"{path}: the labels of another writing of a part set (they differ "
                         f"from those the manifest was written with); write the part set again "
                         f"(groute partition)")
    if labels.shape != (manifest["vertices"],):
        raise ValueError(f"{path}: {labels.shape} labels for {manifest['vertices']} vertices; "
                         f"write the part set again (groute partition)")
    return labels.astype(object) if labels.dtype.kind == "U" else labels


def check_arc_count(folder, manifest: dict, arcs: int) -> None:
    """ValueError naming ``folder`` when its parts hold ``arcs`` arcs in all, not the
    manifest's count (a part replaced by another set's)."""
    if arcs != manifest["arcs"]:
        raise ValueError(f"{folder}: the parts hold {arcs:,} arcs, but its {MANIFEST} says "
                         f"{manifest['arcs']:,}; write the part set again (groute partition)")


def read_whole(folder):
    """The whole graph of the part set in ``folder``, every part read in this process (a
    :class:`~groute.graph.CSRGraph`: what :func:`groute.graph.load_graph` gives for a part
    set's folder, e.g. to check a distributed run's answer)."""
    from .csr import CSRGraph
    manifest = read_manifest(folder)
    k = manifest["parts"]
    parts = [read_part(folder, r, k).part for r in range(k)]
    check_arc_count(folder, manifest, sum(int(p.num_edges) for p in parts))
    indptr = np.zeros(manifest["vertices"] + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(p.indptr) for p in parts]), out=indptr[1:])
    weights = (np.concatenate([p.weights for p in parts]) if manifest["weighted"] else None)
    labels = _read_labels(folder, manifest) if manifest["labels"] else None
    return CSRGraph(indptr, np.concatenate([p.indices for p in parts]), weights,
                    directed=manifest["directed"], name=manifest["name"],
                    id_base=manifest["id_base"], file_ids=labels)
