"""Reader benchmark: parse a roadNet-CA-sized SNAP edge list, then reload it from the cache.

roadNet-CA itself (1,965,206 vertices, 5,533,214 directed lines) cannot be fetched on offline
machines, so this writes a file of the same size and shape: a road-like grid (``grid`` generator,
1402 x 1402, 29.6% of edges dropped -> ~1.97M vertices, ~5.5M arcs, each edge listed in both
directions as roadNet-CA does) with vertex ids scattered over 0..2.2M like SNAP's, tab separated,
with a SNAP-style comment header. Run::

    python -m groute.graph.bench_readers [--dir DIR] [--repeat 3] [--json]

It reports the median of ``--repeat`` runs for: parsing ``.txt``, parsing ``.txt.gz`` (both
without the cache), loading from the ``.npz`` cache, parsing the same graph (with weights)
written as DIMACS ``.gr`` and Matrix Market ``.mtx``, and parsing it as a SNAP file of text ids
(``v<id>``: :mod:`.text_ids`' path); it checks the graphs agree.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from . import rng
from .cache import cache_path
from .formats import read_graph
from .generators import grid
from .load import load_graph
from .dimacs import write_dimacs
from .mtx import write_mtx
from .snap import write_snap


def make_roadnet_like(directory: Path, *, side: int = 1402, drop: float = 0.296, seed: int = 7):
    """Write ``roadnet-like.txt`` and ``roadnet-like.txt.gz``; return (paths, graph)."""
    g = grid(side, drop=drop, seed=seed).without_weights()
    n = g.num_vertices
    # sparse, shuffled file ids in [0, 1.12 n) as in SNAP's road networks
    ids = np.sort(rng.random_permutation(int(n * 1.12), seed, 99)[:n])
    order = rng.random_permutation(n, seed, 98)
    g.file_ids = ids[order]
    paths = []
    for name in ("roadnet-like.txt", "roadnet-like.txt.gz"):
        p = directory / name
        write_snap(g, p, comment="roadNet-CA-shaped benchmark file written by groute.graph.bench_readers")
        paths.append(p)
    return paths, g


def _median_time(fn, repeat, cpu=None):
    """Median wall-clock seconds of ``repeat`` calls; the median CPU seconds go into ``cpu``."""
    times, cpus, out = [], [], None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    if cpu is not None:
        cpu.append(statistics.median(cpus))
    return statistics.median(times), out


def run(directory: Path, repeat: int = 3, other_formats: bool = True) -> dict:
    t0 = time.perf_counter()
    (txt, gz), ref = make_roadnet_like(directory)
    results = {"vertices": ref.num_vertices, "lines": ref.num_edges,
               "txt_bytes": txt.stat().st_size, "gz_bytes": gz.stat().st_size,
               "write_seconds": round(time.perf_counter() - t0, 2)}
    cpu = []
    t_txt, g1 = _median_time(lambda: read_graph(txt), repeat, cpu)
    t_gz, g2 = _median_time(lambda: read_graph(gz), repeat, cpu)
    cache_path(gz).unlink(missing_ok=True)
    t0 = time.perf_counter()
    load_graph(gz)                      # parse + write the cache
    first = time.perf_counter() - t0
    t_cache, g3 = _median_time(lambda: load_graph(gz), max(repeat, 5), cpu)
    for g in (g1, g2, g3):
        assert g.num_vertices == ref.num_vertices and g.num_edges == ref.num_edges
        assert np.array_equal(g.file_id_of(np.arange(3)), np.sort(ref.file_ids)[:3])
    same = (np.array_equal(g1.indices, g3.indices) and np.array_equal(g1.indptr, g3.indptr))
    assert same, "cached graph differs from the parsed one"
    if other_formats:
        weighted = ref.with_weights(seed=1)
        for fmt, writer, name in (("dimacs", write_dimacs, "roadnet-like.gr"),
                                  ("mtx", write_mtx, "roadnet-like.mtx")):
            p = directory / name
            writer(weighted, p)
            t, g = _median_time(lambda: read_graph(p), repeat, cpu)
            assert g.num_edges == ref.num_edges and g.weights is not None
            results[f"parse_{fmt}_seconds"] = round(t, 3)
            results[f"parse_{fmt}_cpu_seconds"] = round(cpu[-1], 3)
        text = ref.to_host()
        text.file_ids = np.array([f"v{i}" for i in ref.file_ids.tolist()], dtype=object)
        p = directory / "roadnet-like-text-ids.txt"
        write_snap(text, p)
        t, g = _median_time(lambda: read_graph(p), repeat, cpu)
        assert g.num_edges == ref.num_edges and g.num_vertices == ref.num_vertices
        assert g.file_ids.dtype == object
        results["parse_text_ids_seconds"] = round(t, 3)
        results["parse_text_ids_cpu_seconds"] = round(cpu[-1], 3)
    results.update(parse_txt_seconds=round(t_txt, 3), parse_gz_seconds=round(t_gz, 3),
                   first_load_with_cache_write_seconds=round(first, 3),
                   cache_load_seconds=round(t_cache, 3), parse_txt_cpu_seconds=round(cpu[0], 3),
                   parse_gz_cpu_seconds=round(cpu[1], 3), cache_load_cpu_seconds=round(cpu[2], 3),
                   load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--snap-only", action="store_true",
                    help="skip the DIMACS .gr and Matrix Market versions of the same graph")
    args = ap.parse_args(argv)
    if args.dir:
        d = Path(args.dir)
        d.mkdir(parents=True, exist_ok=True)
        res = run(d, args.repeat, not args.snap_only)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            res = run(Path(tmp), args.repeat, not args.snap_only)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"roadNet-CA-shaped SNAP file: {res['vertices']:,} vertices, {res['lines']:,} lines, "
              f"{res['txt_bytes'] / 2**20:.1f} MiB text, {res['gz_bytes'] / 2**20:.1f} MiB gzip")
        print(f"  parse .txt      {res['parse_txt_seconds']:.2f} s wall, "
              f"{res['parse_txt_cpu_seconds']:.2f} s CPU (median of {args.repeat})")
        print(f"  parse .txt.gz   {res['parse_gz_seconds']:.2f} s wall, {res['parse_gz_cpu_seconds']:.2f} s CPU")
        print(f"  first load_graph (parse + write cache) {res['first_load_with_cache_write_seconds']:.2f} s")
        print(f"  load from cache {res['cache_load_seconds']:.3f} s wall, "
              f"{res['cache_load_cpu_seconds']:.3f} s CPU (median of {max(args.repeat, 5)})")
        for fmt in ("dimacs", "mtx"):
            if f"parse_{fmt}_seconds" in res:
                print(f"  parse {fmt:6s}    {res[f'parse_{fmt}_seconds']:.2f} s wall, "
                      f"{res[f'parse_{fmt}_cpu_seconds']:.2f} s CPU (same graph, weights 1..64)")
        if "parse_text_ids_seconds" in res:
            print(f"  parse text ids  {res['parse_text_ids_seconds']:.2f} s wall, "
                  f"{res['parse_text_ids_cpu_seconds']:.2f} s CPU (same .txt, ids v<id>)")
        print(f"  1-minute load average at the end: {res['load_average']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
