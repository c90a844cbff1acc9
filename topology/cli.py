"""``groute topo``: run the topology microbenchmarks, print tables, write JSON and plots.

Progress goes to stderr, one line per benchmark step; tables and the summary go to stdout. The
exit code is 0 when every selected benchmark ran (or was skipped for lack of devices), 1 when any
failed -- the others still run and are reported.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from groute.cli_support import context_from_args, positive_int

from .runner import BENCHMARKS, resolve_names
from .settings import default_settings, parse_size, parse_sizes


def register(subparsers, common):
    names = ", ".join(f"{k} ({v[1]})" for k, v in BENCHMARKS.items())
    p = subparsers.add_parser(
        "topo", parents=[common], help="topology microbenchmarks: how the devices talk",
        description="Microbenchmarks of how the devices talk, after Groute's figure 2-1: " + names)
    p.add_argument("benchmarks", nargs="*", default=["all"], metavar="BENCHMARK",
                   help=f"which to run: {', '.join(BENCHMARKS)} or all (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats everywhere")
    p.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                   help="transfer sizes, e.g. 1M,16M,256M (the largest also sets the map, access "
                        "and packetization buffers; default per backend)")
    p.add_argument("--packet-sizes", type=_sizes, default=None, metavar="LIST",
                   help="packetization sweep (default: 4K, 8K, ... up to the largest size)")
    p.add_argument("--repeat", type=positive_int, default=None, metavar="N",
                   help="timed runs per measurement, median reported (default 7; --quick 3; CPU 3/1)")
    p.add_argument("--link-window", type=_size, default=None, metavar="SIZE",
                   help="packetization: each Link gets about SIZE / P receive buffers of P "
                        "(4 to 64; default 4M on GPUs, 64K on CPU)")
    p.add_argument("--chunks", type=positive_int, default=16, metavar="N",
                   help="pieces a pipelined transfer (staged, ring, broadcast Links) is cut into")
    p.add_argument("--json", metavar="FILE", default=None, help="write every measurement and the machine here")
    p.add_argument("--plot", metavar="DIR", default=None, help="write PNG plots (needs matplotlib) here")
    p.add_argument("--markdown", metavar="FILE", default=None,
                   help="write the tables as Markdown (machine, settings, every table, summary) here")
    p.add_argument("--from-json", metavar="FILE", default=None,
                   help="do not measure: re-render tables, --plot and --markdown from a saved --json report")
    p.set_defaults(func=run)


def _size(text):
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _sizes(text):
    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _progress(line: str) -> None:
    print(f"[topo {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def run(args) -> int:
    from . import report
    names = resolve_names(args.benchmarks)
    from groute.bench.cli import check_outputs     # before anything is measured
    check_outputs(args, [("--from-json", args.from_json)])
    if args.plot:
        from .plots import require_matplotlib
        require_matplotlib()
    if args.from_json:
        given = [option for option, value in (
            ("--quick", args.quick), ("--sizes", args.sizes), ("--packet-sizes", args.packet_sizes),
            ("--repeat", args.repeat), ("--link-window", args.link_window),
            ("--chunks", args.chunks != 16), ("--devices", args.devices != "auto"),
            ("--json", args.json)) if value]
        if given:
            raise ValueError(f"--from-json re-renders a saved report and measures nothing; "
                             f"drop {', '.join(given)}")
        document, results = _load(args.from_json, names if args.benchmarks != ["all"] else None)
        description = document.get("machine", {})
    else:
        from groute.runtime.context import resolve_backend
        from .runner import run_benchmarks
        backend = resolve_backend(args.backend)
        settings = default_settings(backend, quick=args.quick, sizes=args.sizes, repeat=args.repeat,
                                    packet_sizes=args.packet_sizes, link_window=args.link_window)
        settings.chunks = args.chunks
        settings.validate()
        args.backend = backend
        description, results = run_benchmarks(names, lambda: context_from_args(args), settings, _progress)
        options = {k: v for k, v in vars(args).items() if k != "func"}
        document = report.to_document(description, settings, results, options=options)
    d = description or {}
    print(f"groute topo on {d.get('label', '')}: {', '.join(d.get('device_models', []))} x{d.get('device_count', '?')}")
    for res in results:
        print()
        print(report.render_result(res))
    print()
    print(report.summary(description, results))
    if args.json and not args.from_json:
        report.write_json(args.json, document)
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        with open(args.markdown, "w") as f:
            f.write(report.markdown(document, results))
        print(f"wrote {args.markdown}")
    if args.plot:
        from .plots import write_plots
        for path in write_plots(args.plot, results, label=_plot_label(description)):
            print(f"wrote {path}")
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        print(f"groute topo: {len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _load(path, names):
    """A saved report and its results (only ``names`` if given); clear errors for a wrong file."""
    import json
    from .report import SCHEMA
    from .results import BenchResult
    try:
        with open(path) as f:
            document = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--from-json {path}: not a JSON file ({exc})") from None
    except IsADirectoryError:
        raise ValueError(f"--from-json {path}: a directory, not a file") from None
    except OSError as exc:
        raise ValueError(f"--from-json {path}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ValueError(f"--from-json {path}: not a groute topo report (expected schema "
                         f"{SCHEMA!r})")
    try:
        results = [BenchResult.from_dict(b) for b in document["benchmarks"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"--from-json {path}: malformed benchmark entry ({exc!r})") from None
    if names is not None:
        missing = [name for name in names if name not in {r.name for r in results}]
        if missing:
            raise ValueError(f"--from-json {path}: the report holds no {', '.join(missing)} "
                             f"(it has {', '.join(r.name for r in results) or 'none'})")
        results = [r for r in results if r.name in names]
    return document, results


def _plot_label(description) -> str:
    d = description or {}
    models = ", ".join(d.get("device_models", []))
    return f"{d.get('label', '')}: {d.get('device_count', '?')} x {models}"
