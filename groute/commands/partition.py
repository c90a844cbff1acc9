"""``groute partition --graph G --parts K --out DIR``: write a graph as a part set, one file per
rank, so that a job of K processes reads only its part of it (:mod:`groute.graph.part_set`)."""
from __future__ import annotations

from ..cli_support import positive_int
from ..graph.cli import add_cache_option, add_columns_option, parse_columns


def register(subparsers, common):
    p = subparsers.add_parser(
        "partition", parents=[common], help="write a graph as K part files for K MPI processes",
        description="Load a graph once and write it as a part set: the K contiguous ranges of "
                    "about equal arcs that a job of K processes owns, one file each, and a "
                    "manifest. Then `groute launch -n K -- bfs --graph DIR` has each process "
                    "read its own part only.")
    p.add_argument("--graph", required=True, metavar="PATH|SPEC",
                   help="a graph file (.mtx[.gz], .gr, SNAP edge list, CSV) or a spec")
    p.add_argument("--parts", type=positive_int, required=True, metavar="K",
                   help="parts to write: the number of processes that will read them")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (made if missing)")
    p.add_argument("--symmetric", action="store_true",
                   help="store every arc in both directions (an undirected reading of the input)")
    add_columns_option(p)
    p.add_argument("--seed", type=int, default=0, help="generator seed for a spec (default 0)")
    add_cache_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..graph import load_graph
    from ..graph.part_set import write_part_set
    from ..graph.errors import NegativeWeightError
    from ..cli_support import check_writable_folder
    if not args.out.strip():
        raise ValueError("--out '': give the folder to write the part set in")
    check_writable_folder("--out", args.out)        # before a graph of minutes loads
    options = {} if args.columns is None else {"columns": parse_columns(args.columns)}
    try:
        graph = load_graph(args.graph, seed=args.seed, symmetric=args.symmetric,
                           cache=not args.no_cache, **options)
    except NegativeWeightError as exc:      # load_graph's own hint is no option of this command
        raise exc.with_hint(None) from None
    manifest = write_part_set(graph, args.parts, args.out)
    sizes = [b - a for a, b in zip(manifest["offsets"][:-1], manifest["offsets"][1:])]
    print(f"wrote {graph.name} ({graph.num_vertices:,} vertices, {graph.num_edges:,} arcs) as "
          f"{args.parts} parts of {min(sizes):,}-{max(sizes):,} vertices to {args.out}")
    return 0
