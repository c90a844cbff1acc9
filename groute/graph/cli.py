"""``groute data``: list, download and inspect graphs.

    groute data list                         registered datasets and whether they are downloaded
    groute data get NAME [--dir D] [--url URL] [--sha256 HEX] [--force]
    groute data info PATH|SPEC|NAME [--parts K] [--method auto|metis|contiguous|random] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from groute.cli_support import positive_int

from .datasets import DATASET_FORMATS
from .partition import AUTO_RULE, DEFAULT_PARTITION, METHODS


def add_cache_option(parser) -> None:
    """``--no-cache``: for any command that loads graphs (pass ``cache=not args.no_cache`` to
    :func:`groute.graph.load_graph`; :func:`groute.cli.main` runs the command with a private
    cache directory, so METIS splits and references stay out of the user's too)."""
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the caches (graphs, METIS splits) in the "
                             "user cache directory")


def add_columns_option(parser) -> None:
    """``--columns``, for commands that read an edge list's columns (:func:`parse_columns`)."""
    parser.add_argument("--columns", default=None, metavar="COLS",
                        help="edge-list input: the source, target and optional weight columns, "
                             "comma-separated header names or 0-based positions (e.g. "
                             "from,to,cost)")


def parse_columns(text: str) -> list:
    """``--columns``: comma-separated header names or 0-based positions, 2 or 3 of them."""
    cols = [c.strip() for c in text.split(",")]
    if len(cols) not in (2, 3) or not all(cols):
        raise ValueError(f"--columns takes 2 or 3 comma-separated names or positions "
                         f"(source, target[, weight]), got {text!r}")
    return [int(c) if c.isdigit() else c for c in cols]


def register(subparsers, common) -> None:
    p = subparsers.add_parser("data", parents=[common], help="list, download and inspect graphs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    common_dests = {a.dest for a in common._actions}

    def leaf(name, **kw):
        # a private copy of the common options: the defaults changed below belong to the action
        # objects, which parents=[common] would share with every other subcommand
        from groute.cli_support import common_parser
        q = sub.add_parser(name, parents=[common_parser()], **kw)
        for a in q._actions:               # don't let the leaf's defaults hide `data -v ...`
            if a.dest in common_dests:
                a.default = argparse.SUPPRESS
        return q

    q = leaf("list", help="show the dataset registry")
    q.add_argument("--dir", default=None, help="data directory (default: the groute cache dir)")
    q.set_defaults(func=cmd_list)

    q = leaf("get", help="download a dataset (atomic, checksum-verified where known)")
    q.add_argument("name", help="registered name (see `groute data list`), or any name with --url")
    q.add_argument("--dir", default=None, help="where to put it (default: the groute cache dir)")
    q.add_argument("--url", default=None, help="download from this URL (http(s):// or file://)")
    q.add_argument("--sha256", default=None, help="expected SHA-256 of the download")
    q.add_argument("--format", default=None, choices=DATASET_FORMATS,
                   help="file format when --url is given (default: from the URL)")
    q.add_argument("--force", action="store_true", help="download again even if present")
    q.set_defaults(func=cmd_get)

    q = leaf("info", help="load a graph and print its size and degree statistics")
    q.add_argument("graph", help="file path, spec (kron:21, grid:4900, rmat:20, er:1e6:8) or dataset")
    q.add_argument("--symmetric", action="store_true", help="store edge lists in both directions")
    add_cache_option(q)
    q.add_argument("--parts", type=positive_int, default=None, metavar="K",
                   help="also partition into K parts")
    q.add_argument("--method", default=DEFAULT_PARTITION, choices=METHODS,
                   help=f"with --parts (default {DEFAULT_PARTITION}: {AUTO_RULE})")
    q.add_argument("--json", action="store_true", help="print JSON instead of text")
    q.set_defaults(func=cmd_info)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_list(args) -> int:
    from .datasets import data_dir, named_downloads, registry
    d = data_dir(args.dir)
    rows = []
    known = registry()
    for ds in known.values():
        have = (d / ds.graph_filename).is_file()
        rows.append((ds.name, ds.format, f"{ds.vertices:,}" if ds.vertices else "?",
                     f"{ds.edges:,}" if ds.edges else "?", "yes" if have else "",
                     "yes" if ds.sha256 else "no", ds.url))
    # names the user gave with `groute data get NAME --url U` load by name too: list them
    for name, rec in sorted(named_downloads().items()):
        if name not in known:
            rows.append((name, str(rec.get("format", "?")), "?", "?",
                         "yes" if Path(rec.get("path", "")).is_file() else "", "no",
                         str(rec.get("url", ""))))
    head = ("name", "format", "vertices", "edges", "here", "sha256", "url")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\ndata directory: {d}  (set GROUTE_CACHE_DIR to change it)")
    return 0


def cmd_get(args) -> int:
    from .datasets import download
    tty = sys.stderr.isatty()

    def progress(done, total):
        if tty:
            frac = f" ({100 * done / total:.0f}%)" if total else ""
            sys.stderr.write(f"\r{done / 2**20:,.1f} MiB{frac}")
            sys.stderr.flush()

    r = download(args.name, dir=args.dir, url=args.url, sha256=args.sha256, format=args.format,
                 force=args.force, progress=progress)
    if tty:
        sys.stderr.write("\n")
    state = "verified" if r.verified else "NOT verified (no checksum known; pass --sha256 to check)"
    print(f"{args.name}: {r.path}  (load it by name: --graph {args.name}, "
          f"load_graph({args.name!r}))")
    print(f"sha256 {r.sha256} {state}")
    for note in r.notes:
        if not note.startswith("not verified"):
            print(note)
    return 0


def cmd_info(args) -> int:
    from .load import load_graph
    t0 = time.perf_counter()
    g = load_graph(args.graph, symmetric=args.symmetric, cache=not args.no_cache)
    seconds = time.perf_counter() - t0
    info = {"graph": g.name, "source": g.source, "seconds_to_load": round(seconds, 3),
            "weighted": g.weighted, **g.degree_stats()}
    if args.parts:
        from .partition import partition_graph
        p = partition_graph(g, args.parts, method=args.method)
        info["partition"] = p.stats
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['graph']}: {g.num_vertices:,} vertices, {g.num_edges:,} arcs "
          f"({'directed' if g.directed else 'undirected, both directions stored'}), "
          f"{'weighted ' + str(g.weights.dtype) if g.weighted else 'unweighted'}")
    print(f"  loaded in {seconds:.2f} s" + (f" from {g.source}" if g.source else ""))
    print(f"  out-degree: min {info['min']}, median {info['median']:g}, mean {info['mean']:.2f}, "
          f"p99 {info['p99']:g}, max {info['max']}, std {info['std']:.2f}")
    print(f"  isolated vertices {info['isolated']:,}; top 1% of vertices hold "
          f"{100 * info['top1pct_arc_share']:.1f}% of arcs")
    if args.parts:
        s = info["partition"]
        print(f"  partition ({s['method']}, {args.parts} parts, {s['seconds']:.2f} s): edge cut "
              f"{s['edge_cut']:,} arcs ({100 * s['edge_cut_fraction']:.2f}%)")
        print(f"    vertices per part {s['vertices_per_part']}")
        print(f"    arcs per part     {s['edges_per_part']}")
        print(f"    boundary vertices {s['boundary_vertices_per_part']}")
    return 0
