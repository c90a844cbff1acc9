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
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .partition import LocalGraph, contiguous_offsets
from .rank_graph import RankGraph

MANIFEST = "manifest.json"
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
        When ``parts`` is below 1 or above the vertex count, or ``folder`` holds another part
        set's files (a part set is written into a fresh or its own folder).
    """
    graph = graph.to_host()
    n = graph.num_vertices
    parts = int(parts)
    if not 1 <= parts <= max(n, 1):
        raise ValueError(f"parts must be between 1 and the vertex count ({n}), got {parts}")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / MANIFEST
    stray = [p.name for p in folder.iterdir() if p.name != MANIFEST
             and not (p.name.startswith("part-") or p.name == "ids.npy")]
    if stray:
        raise ValueError(f"{folder} holds other files ({', '.join(sorted(stray)[:3])}); write a "
                         f"part set into an empty folder")
    for p in folder.glob("part-*-of-*.npz"):
        p.unlink()
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    offsets = contiguous_offsets(indptr, parts)
    for r in range(parts):
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        a, b = int(indptr[lo]), int(indptr[hi])
        arrays = {"indptr": indptr[lo:hi + 1] - a, "indices": np.asarray(graph.indices[a:b])}
        if graph.weights is not None:
            arrays["weights"] = np.asarray(graph.weights[a:b])
        np.savez(part_file(folder, r, parts), **arrays)
    labels = graph.file_ids
    if labels is not None:
        np.save(folder / "ids.npy", labels.astype(str) if labels.dtype == object else labels,
                allow_pickle=False)
    elif (folder / "ids.npy").exists():
        (folder / "ids.npy").unlink()
    manifest = {"format": FORMAT, "version": VERSION, "name": graph.name, "vertices": n,
                "arcs": int(graph.num_edges), "directed": bool(graph.directed), "parts": parts,
                "offsets": offsets.tolist(), "weighted": graph.weights is not None,
                "id_base": int(graph.id_base), "labels": labels is not None}
    old.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


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
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} version {VERSION} manifest")
    return manifest


def read_part(folder, rank: int, size: int):
    """Rank ``rank``'s :class:`~groute.graph.ranked.RankGraph` from the part set in ``folder``,
    for a job of ``size`` ranks (which must be the set's part count)."""
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
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{path}: not a part file as groute partition writes them ({exc}); "
                         f"write the part set again") from None
    lo, hi = int(offsets[rank]), int(offsets[rank + 1])
    if indptr.shape != (hi - lo + 1,):
        raise ValueError(f"{path}: {indptr.shape[0] - 1} rows, but the manifest gives part "
                         f"{rank} the vertices [{lo}, {hi})")
    labels = np.load(Path(folder) / "ids.npy", allow_pickle=False) if manifest["labels"] else None
    if labels is not None and labels.dtype.kind == "U":
        labels = labels.astype(object)
    part = LocalGraph(rank, lo, indptr, indices, weights, num_global_vertices=manifest["vertices"],
                      directed=manifest["directed"], name=f"{manifest['name']}[{rank}]")
    return RankGraph(part, offsets, num_edges=manifest["arcs"], name=manifest["name"],
                     id_base=manifest["id_base"], labels=labels)


def read_whole(folder):
    """The whole graph of the part set in ``folder``, every part read in this process (a
    :class:`~groute.graph.CSRGraph`: what :func:`groute.graph.load_graph` gives for a part
    set's folder, e.g. to check a distributed run's answer)."""
    from .csr import CSRGraph
    manifest = read_manifest(folder)
    k = manifest["parts"]
    parts = [read_part(folder, r, k).part for r in range(k)]
    indptr = np.zeros(manifest["vertices"] + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(p.indptr) for p in parts]), out=indptr[1:])
    weights = (np.concatenate([p.weights for p in parts]) if manifest["weighted"] else None)
    labels = np.load(Path(folder) / "ids.npy", allow_pickle=False) if manifest["labels"] else None
    return CSRGraph(indptr, np.concatenate([p.indices for p in parts]), weights,
                    directed=manifest["directed"], name=manifest["name"],
                    id_base=manifest["id_base"],
                    file_ids=None if labels is None else
                    (labels.astype(object) if labels.dtype.kind == "U" else labels))
