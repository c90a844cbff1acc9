"""``groute bench``: run the benchmark suite and write JSON, markdown and plots.

Exit status: 0 when every case that ran was verified; 3 when any case FAILed (wrong answer) or
raised (ERROR) -- the result files are written either way; 1 for bad options.
"""
from __future__ import annotations

import argparse
import shlex

from ..cli_support import common_parser, positive_number
from ..graph.cli import add_cache_option
from ..graph.partition import AUTO_RULE

from .suite import (APPS, MODES, PARTITIONS, PEERS, PRESETS, REFERENCE_GPU_MIN_ARCS, REFERENCES,
                    make_config)


def _list(text: str) -> list[str]:
    """A comma-separated option's items; none at all is an error (``--apps ''`` ran every
    app, where leaving the option out is how to ask for that)."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"no items in {text!r}: give one or more, separated "
                                         f"by commas (leave the option out for its default)")
    return items


def _device_list(text: str) -> list:
    """``--devices``: counts, and ``auto`` for the count ``devices="auto"`` chooses."""
    out = [item if item == "auto" else
           positive_number(item, int, "expected device counts like 1,2,4,auto; got {text!r}",
                           "device counts must be >= 1; got {value}") for item in _list(text)]
    if not out:
        raise argparse.ArgumentTypeError("expected device counts like 1,2,4,auto")
    return out


def register(subparsers, common):
    # a private copy of the common options: "resolve" removes the replaced --devices option
    # string from the parent's action object, which every other subcommand shares
    p = subparsers.add_parser(
        "bench", parents=[common_parser()], conflict_handler="resolve",
        help="benchmark the apps against scipy/CuPy peers and the bandwidth floor",
        description="Run every (app, graph, device count, mode) case: load and partition once, "
                    "warm up, time the median of repeats, verify against the reference (CPU, or "
                    "the plain-CuPy baselines for very large graphs: --reference), "
                    "and time the peers (scipy, plain CuPy, igraph, NetworkX, cuGraph when "
                    "installed) in the same run. See docs/BENCHMARKS.md.")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="quick: the full suite in minutes on 4 GPUs; cpu: tiny graphs on CPU "
                        "virtual devices (a harness check). Options given explicitly override it.")
    p.add_argument("--apps", type=_list, metavar="A,B",
                   help=f"apps to run, from {','.join(APPS)} (default all)")
    p.add_argument("--graphs", type=_list, metavar="SPEC,...",
                   help="graph specs (kron:21, grid:4900, rmat:20, er:N:D) or files (.mtx[.gz], .gr, SNAP)")
    # replaces the common --devices K: the suite takes a list of device counts
    p.add_argument("--devices", type=_device_list, metavar="K,K",
                   help="device counts to run each case on, e.g. 1,2,4; auto adds the count "
                        "each app's devices=\"auto\" chooses, and says why")
    p.add_argument("--modes", type=_list, metavar="M,M", help=f"from {','.join(MODES)} (default both)")
    p.add_argument("--repeat", type=int, metavar="N", help="timed runs per case (default 5)")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed runs before timing (default 1)")
    p.add_argument("--partition", choices=PARTITIONS,
                   help=f"partitioner for several devices; auto = the library's default, per "
                        f"graph: {AUTO_RULE} (default auto)")
    p.add_argument("--peers", type=_list, metavar="P,P",
                   help=f"peers to time, from {','.join(PEERS)}, or none (default all; absent "
                        "ones are skipped with a note)")
    p.add_argument("--peer-repeat", type=int, metavar="N", help="timed runs per peer (default 3)")
    p.add_argument("--max-case-seconds", type=_positive_float, metavar="S",
                   help="stop repeating a case once its timed runs add up to S seconds, and skip "
                        "the igraph peer where building its graph would take longer (default 60)")
    p.add_argument("--reference", choices=REFERENCES,
                   help="what every answer is checked against: cpu = groute.graph.reference "
                        "(scipy, one core); gpu = the plain-CuPy baselines on GPU 0 (for graphs "
                        f"whose CPU references take minutes); auto = gpu from "
                        f"{REFERENCE_GPU_MIN_ARCS // 1_000_000}M arcs on GPU runs, else cpu "
                        "(default auto)")
    p.add_argument("--json", metavar="FILE", help="write all results as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write a self-contained markdown section")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (needs matplotlib)")
    p.add_argument("--from-json", type=_list, metavar="FILE,FILE",
                   help="run nothing: merge results saved with --json (e.g. one run per graph) "
                        "and write them again with --json/--markdown/--plot")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_cache_option(p)
    p.set_defaults(func=run, backend=None)
    return p


def config_from_args(args):
    """The validated suite configuration for parsed ``args`` (ValueError names a bad option)."""
    return make_config(args.preset, apps=args.apps, graphs=args.graphs, devices=args.devices,
                       modes=args.modes, repeat=args.repeat, warmup=args.warmup,
                       backend=args.backend, partition=args.partition, peers=args.peers,
                       peer_repeat=args.peer_repeat, max_case_seconds=args.max_case_seconds,
                       timeout=args.timeout, reference=args.reference)


def _positive_float(text: str) -> float:
    return positive_number(text, float, "expected seconds, got {text!r}",
                           "expected positive seconds, got {value}")


def check_preset_fits(config, *, graphs_given: bool) -> None:
    """ValueError when the GPU-sized ``quick`` preset would run its graphs on CPU devices (it
    would spend its time generating and traversing kron:21 with NumPy), saying what to run."""
    if config.preset != "quick" or graphs_given:
        return
    from ..runtime.context import resolve_backend
    if resolve_backend(config.backend) != "cpu":
        return
    raise ValueError(f"--preset quick is sized for GPUs ({', '.join(config.graphs)} on up to "
                     f"{max(config.devices or [1])} devices) and this run is on CPU devices: run "
                     "`groute bench --preset cpu` (tiny graphs, a harness check), or give "
                     "--graphs with graphs of CPU size (e.g. --graphs kron:14,grid:100)")


def command_line(config) -> str:
    """The ``groute bench`` command that repeats this run exactly (every setting explicit)."""
    parts = ["groute", "bench"]
    if config.preset:
        parts += ["--preset", config.preset]
    parts += ["--apps", ",".join(config.apps), "--graphs", ",".join(config.graphs),
              "--devices", ",".join([*map(str, config.devices)] + ["auto"] * config.auto_devices),
              "--modes", ",".join(config.modes),
              "--repeat", str(config.repeat), "--warmup", str(config.warmup),
              "--backend", config.backend, "--partition", config.partition,
              "--peers", ",".join(config.peers) or "none", "--peer-repeat", str(config.peer_repeat),
              "--max-case-seconds", f"{config.max_case_seconds:g}",
              "--reference", config.reference]
    if config.timeout is not None:
        parts += ["--timeout", f"{config.timeout:g}"]
    return shlex.join(parts)


def check_outputs(args, inputs=()) -> None:
    """Refuse, before anything is measured, outputs that could not be written: ``--json``
    and ``--markdown`` files (their folders are made), the ``--plot`` folder; the two files
    alike, or one of the ``inputs`` (``(option, path)``: a graph file, a saved report)."""
    from ..cli_support import check_distinct_files, check_writable_file, check_writable_folder
    check_distinct_files((("--json", args.json), ("--markdown", args.markdown)), inputs)
    for option, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path:
            check_writable_file(option, path, make_folders=True)
    if args.plot:
        check_writable_folder("--plot", args.plot)


def _read_saved(path) -> dict:
    """A ``--from-json`` file's results; its errors name the option."""
    from .report import read_results
    try:
        return read_results(path)
    except ValueError as exc:
        raise ValueError(f"--from-json {exc}") from None


def run(args) -> int:
    from .report import merge_results, write_json, write_markdown
    from .runner import run_suite
    if args.from_json:
        given = [opt for opt, value in (("--preset", args.preset), ("--apps", args.apps),
                                        ("--graphs", args.graphs), ("--devices", args.devices),
                                        ("--modes", args.modes)) if value]
        if given:
            raise ValueError(f"--from-json re-renders saved results and runs nothing; "
                             f"drop {', '.join(given)}")
        twice = sorted({path for path in args.from_json if args.from_json.count(path) > 1})
        if twice:
            raise ValueError(f"--from-json names {twice[0]} twice: its cases would be listed "
                             f"twice")
        config = None
    else:
        config = config_from_args(args)
        check_preset_fits(config, graphs_given=bool(args.graphs))
    # fail before minutes of benchmarking, not after
    check_outputs(args, [("--from-json", path) for path in args.from_json or ()]
                  + [("--graphs", spec) for spec in args.graphs or ()])
    if args.plot:
        from .plots import _pyplot
        _pyplot()

    def save(results):
        if args.json:
            write_json(results, args.json)
        if args.markdown:
            write_markdown(results, args.markdown)

    if config is None:
        results = merge_results([_read_saved(path) for path in args.from_json])
    else:
        results = run_suite(config, command=command_line(config), progress=not args.quiet,
                            on_update=save if (args.json or args.markdown) else None)
    if args.json:
        write_json(results, args.json)
    if args.markdown:
        write_markdown(results, args.markdown)
    if args.plot:
        from .plots import write_plots
        write_plots(results, args.plot)
    counts = {}
    for case in results["cases"]:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"groute bench: {len(results['cases'])} cases ({summary}) in {results['elapsed_s']:.0f} s"
          + "".join(f"; {what} {path}" for what, path in
                    (("json", args.json), ("markdown", args.markdown), ("plots", args.plot)) if path))
    if not (args.json or args.markdown):
        from .report import markdown
        print(markdown(results))
    return 3 if counts.get("FAIL") or counts.get("ERROR") else 0
