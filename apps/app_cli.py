"""Command-line plumbing the graph apps share (``groute bfs``, ``sssp``, ``pr``, ``cc``): graph
options, loading, running a solver (warm-up + repeats), what is printed, output files.

What a command prints: one summary line (time, and what the app found); ``--stats`` adds the
graph, the timing details and the work counters; ``--json`` prints one JSON object instead, for
machines. A reader that goes away (``| head``) ends the printing quietly, not the run. On
logical devices (several on one GPU, for testing) both say so beside the device count: their
times and GTEPS check that the code runs, not how fast it would on that many GPUs.

Vertex ids are the graph's own everywhere (ids as written in the file, CSV names): ``--source``
takes one, and every output file names the vertices by them, with CC's component labels as the
id of the component's representative. ``--output`` writes by suffix (:data:`OUTPUT_FORMATS`):
``.npy`` a structured array with fields ``id`` and the value (in the reader's vertex order),
``.npz`` arrays ``ids`` and ``values``, ``.csv`` a header and ``id,value`` rows, ``.json`` an
object with ``ids`` and ``values`` (``null`` for infinite values), ``.txt`` text lines ``id
value`` (SNAP style); ``-`` writes those lines to standard output, and the summary then goes to
standard error. An output the command could not write (another suffix, a missing or read-only
directory) is refused before the graph is loaded.
"""
from __future__ import annotations

import csv
import json
import logging
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groute.cli_support import check_distinct_files, check_writable_file, drop_stdout
from groute.graph.cli import add_cache_option, add_columns_option, parse_columns
from groute.solver import source_position

log = logging.getLogger(__name__)


def advanced_group(p):
    """The parser's "advanced" group, made on first use: how a run is scheduled on the devices
    (engine, partition, kernels), options whose defaults choose by the graph and the devices,
    apart from the options that say what is computed."""
    for group in p._action_groups:
        if group.title == "advanced":
            return group
    return p.add_argument_group("advanced", "how the run is scheduled on the devices; each "
                                            "default chooses by the graph and the devices")


def add_engine_options(p):
    """The options of an app written on an engine (``groute.engines``), in the "advanced"
    group: which engine runs it (``--mode``; ``auto``: ``groute.engines.ENGINE_RULE``, whose
    help this prints) and how the vertices are split over the devices
    (``groute.graph.partition_graph``)."""
    from groute.engines import ENGINE_CHOICES, ENGINE_RULE
    from groute.graph.partition import AUTO_RULE, DEFAULT_PARTITION, METHODS
    advanced = advanced_group(p)
    advanced.add_argument("--mode", choices=ENGINE_CHOICES, default="auto",
                          help="bsp: every loop level by level; async: order-free loops "
                               "without levels (groute.engines.ASYNC_LOOP_RULE); auto "
                               f"(default): {auto_help(ENGINE_RULE)}")
    advanced.add_argument("--partition", choices=METHODS, default=DEFAULT_PARTITION,
                          help=f"how vertices are split over devices (default "
                               f"{DEFAULT_PARTITION}: {AUTO_RULE})")


def add_graph_options(p, *, repeat_default=5,
                      verify_help="compare with groute.graph.reference", reads_weights=True,
                      negative_hint=None):
    """The options of a command that runs on a graph. ``reads_weights`` False: the command
    never reads the weights, so a file's negative ones are no error (:func:`load`); else
    ``negative_hint`` says how the command does without them, in its error for one."""
    p.set_defaults(reads_weights=reads_weights, negative_hint=negative_hint)
    p.add_argument("--graph", required=True, metavar="PATH|SPEC",
                   help="a graph file (.mtx[.gz], .gr, SNAP edge list, CSV) or a spec (kron:21, grid:4900, ...)")
    p.add_argument("--symmetric", action="store_true",
                   help="store every arc in both directions (an undirected reading of the input)")
    add_columns_option(p)
    add_cache_option(p)
    p.add_argument("--seed", type=int, default=0, help="generator / partition seed (default 0)")
    p.add_argument("--repeat", type=int, default=repeat_default, metavar="R",
                   help=f"timed runs after one warm-up; the median is printed (default {repeat_default})")
    p.add_argument("--verify", action="store_true", help=verify_help)
    p.add_argument("--output", default=None, metavar="FILE",
                   help="write the answer by the graph's vertex ids: .npy, .npz, .csv, .json, "
                        ".txt (lines 'id value'), or - for those lines on standard output "
                        "(the summary then goes to standard error); across processes, each "
                        "writes its vertices to FILE's name with .part-R-of-K before the suffix")
    p.add_argument("--stats", action="store_true",
                   help="also print the graph, the timing details and the work counters "
                        "(across processes, also every rank's host memory while loading, "
                        "traced: the load takes longer)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (summary, counters, verification) instead of text")


def auto_help(rule) -> str:
    """What an option's ``auto`` runs, as :class:`~groute.engines.rules.Rule` says it (the
    rule the solver decides by), percent signs escaped for argparse."""
    return rule.help().replace("%", "%%")


def say(text: str = "", file=None) -> None:
    """``print`` for the app commands (to ``file``, default standard output): a closed stdout
    (``| head``) silences the rest of the output instead of ending the command, so it still
    writes its ``--output``. In a job of several processes, rank 0 prints (:func:`job`)."""
    if _part is not None and _part.rank != 0:
        return
    try:
        print(text, flush=True, file=file)
    except BrokenPipeError:
        drop_stdout()


# ------------------------------------------------------------------ several processes
#: this process's part of the graph when the command runs as several processes (:func:`job`)
_part = None


def job(args):
    """The context of a command run as several MPI processes (``mpiexec -n K python -m groute
    ...``, or ``groute launch``), made on first use; None when it runs as one process. Then
    every process loads only its part of the graph (:func:`load`), the solver runs on this
    context, rank 0 prints and checks (:func:`checked`), and ``--output`` is written by every
    rank for its own vertices (:func:`write_output`). A ``--devices`` count other than the
    processes' is an error (each process has one device)."""
    from groute import distributed
    if not distributed.launched():
        return None
    ctx = distributed.job_context(args.timeout, args.backend)
    if args.devices != "auto" and args.devices != ctx.num_devices:
        raise ValueError(f"--devices {args.devices}: run as {ctx.num_devices} processes, the "
                         f"command has one device per process, {ctx.num_devices} in all; leave "
                         f"--devices out, or start {args.devices} processes (groute launch -n "
                         f"{args.devices})")
    return ctx


def _load_part(args, ctx):
    """This rank's part of ``--graph`` (docs/DISTRIBUTED.md), kept for the outputs; with
    ``--stats``, every rank's host memory while loading is traced (the load is slower for it)
    and :func:`report` prints it."""
    global _part
    from groute.graph.ranked import load_ranked
    if args.symmetric or args.columns is not None:
        raise ValueError("--symmetric and --columns read a file whole: across processes, write "
                         "a part set from it once (groute partition --graph FILE --parts K "
                         "--out DIR with the same --symmetric or --columns) and give DIR as "
                         "--graph")
    graph = load_ranked(args.graph, ctx.ranks, seed=args.seed, measure=args.stats,
                        device=ctx.local_device)
    _part = graph
    return graph


def checked(args, graph, check):
    """``check(graph)``, an answer's verification ``(ok, detail)``; across processes (a graph
    loaded by ranks) on rank 0 over the whole graph, read there for the check only, and its
    verdict on every rank."""
    ranks = getattr(graph, "ranks", None)
    if ranks is None:
        return check(graph)
    verdict = None
    if ranks.rank == 0:
        from groute.graph import load_graph
        verdict = check(load_graph(args.graph, seed=args.seed, cache=not args.no_cache))
    return ranks.bcast(verdict, what="the verification")


def out_degrees(graph) -> np.ndarray:
    """Every vertex's out-degree (int64, by position): across processes, every rank's."""
    ranks = getattr(graph, "ranks", None)
    if ranks is None:
        return np.diff(np.asarray(graph.indptr))
    return np.concatenate(ranks.allgatherv(np.diff(np.asarray(graph.part.indptr)),
                                           what="the out-degrees"))


def load(args):
    """The graph ``--graph`` names (with ``--symmetric``, ``--columns``), and the seconds it took;
    first the outputs are checked (:func:`check_outputs`), so a run is never wasted on them.
    Run as several processes, this rank's part of it (:func:`job`)."""
    from groute.graph import load_graph
    from groute.graph.errors import NegativeWeightError
    if args.repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {args.repeat}")
    check_outputs(args)
    ctx = job(args)
    if ctx is not None:
        check_rank_outputs(args, ctx.rank, ctx.num_devices)
        t0 = time.perf_counter()
        graph = _load_part(args, ctx)
        return graph, time.perf_counter() - t0
    options = {"seed": args.seed, "symmetric": args.symmetric, "cache": not args.no_cache,
               "allow_negative": not getattr(args, "reads_weights", True)
               or getattr(args, "unweighted", False)}
    if args.columns is not None:
        options["columns"] = parse_columns(args.columns)
    t0 = time.perf_counter()
    try:
        g = load_graph(args.graph, **options)
    except NegativeWeightError as exc:       # load_graph's own hint is no option of ours
        raise exc.with_hint(getattr(args, "negative_hint", None)) from None
    return g, time.perf_counter() - t0


@dataclass
class TimedRuns:
    """What :func:`run_solver` measured: the last result, the median and all run times, the
    set-up time, and the (closed) solver for its descriptive attributes. ``logical_gpus``:
    on logical devices (:mod:`groute.device.logical`), how many GPUs they shared, else None;
    such times check that the code runs, not how fast, and the summary says so."""

    result: object
    median: float
    times: list
    setup_s: float
    solver: object
    devices: int
    backend: str
    logical_gpus: int | None = None

    @property
    def devices_why(self) -> str | None:
        """How the solver chose its device count (:mod:`groute.engines.device_rule`)."""
        choice = getattr(self.solver, "device_choice", None)
        return choice.why if choice is not None else None

    def time_line(self) -> str:
        return (f"  time: median {self.median * 1e3:.3f} ms over {len(self.times)} runs "
                f"(min {min(self.times) * 1e3:.3f}, max {max(self.times) * 1e3:.3f}) after one warm-up")

    def where(self, mode=None) -> str:
        """``median of 5; 2 cpu devices, async``: what the summary line says about the runs.
        Logical devices are named as such beside the count, so a time or GTEPS figure taken on
        GPUs they share is never read as a multi-GPU result."""
        devices = f"{self.devices} {self.backend} device{'s' if self.devices != 1 else ''}"
        if self.logical_gpus is not None:
            gpus = f"{self.logical_gpus} GPU{'s' if self.logical_gpus != 1 else ''}"
            devices += f" (logical, sharing {gpus}: for testing, not timing)"
        if (self.devices_why or "").startswith("auto"):
            devices += " (auto)"
        return f"median of {len(self.times)}; {devices}" + (f", {mode}" if mode else "")


def run_solver(args, graph, build, *run_args, **run_kwargs) -> TimedRuns:
    """Build a solver with ``build(where)``, ``where`` the solver options
    ``--backend/--devices/--timeout`` give (``devices``, ``backend``, ``timeout``; the solver
    chooses ``--devices auto``'s count and owns its context), run
    ``solver.run(*run_args, **run_kwargs)`` once to warm up and ``--repeat`` times timed, then
    close the solver and its context (also on failure)."""
    ctx = job(args)
    where = ({"ctx": ctx} if ctx is not None else
             {"devices": args.devices, "backend": args.backend, "timeout": args.timeout})
    t0 = time.perf_counter()
    solver = build(where)
    setup = time.perf_counter() - t0
    ctx = solver.ctx
    try:
        solver.run(*run_args, **run_kwargs)
        times, res = [], None
        for _ in range(args.repeat):
            res = solver.run(*run_args, **run_kwargs)
            times.append(res.time_s)
    finally:
        solver.close()
    logical_gpus = ctx.gpu_count if getattr(ctx, "logical", False) else None
    return TimedRuns(res, statistics.median(times), times, setup, solver, len(ctx.devices),
                     ctx.backend, logical_gpus)


def gteps(arcs: int, seconds: float) -> float:
    """Billions of arcs traversed per second."""
    return arcs / seconds / 1e9 if seconds > 0 else 0.0


def report(args, name, graph, load_s, runs, line, facts, verified=None, extra_stats=()):
    """Print what the command found: ``line`` (and the verification, if any), or with
    ``--json`` one object of the ``facts``, the timing and the counters; ``--stats`` adds the
    graph (across processes, every rank's host memory while loading), ``extra_stats`` lines,
    the timing and the counters. ``verified``: ``(ok, detail)``.
    To standard error when the answer goes to standard output (``--output -``)."""
    stats = runs.result.stats
    out = sys.stderr if STDOUT in _outputs(args).values() else None
    if args.json:
        record = {"app": name, "graph": graph.name, "vertices": graph.num_vertices,
                  "arcs": graph.num_edges, "directed": graph.directed,
                  "backend": runs.backend, "devices": runs.devices,
                  "logical": runs.logical_gpus is not None,
                  "time_s": runs.median, "times_s": runs.times, "setup_s": runs.setup_s,
                  "load_s": load_s, **facts}
        if runs.devices_why is not None:
            record["devices_why"] = runs.devices_why
        if runs.logical_gpus is not None:   # the times: a correctness check, not a measurement
            record["logical_gpus"] = runs.logical_gpus
        if verified is not None:
            record["verify"] = {"ok": verified[0], "detail": verified[1]}
        if getattr(graph, "load_memory", None) is not None:
            record["load_memory"] = graph.load_memory.as_dict()
        record["stats"] = stats
        say(json.dumps(jsonable(record)), out)
        return
    say(line, out)
    if verified is not None:
        say(f"  verify: {verified[1]}", out)
    if args.stats:
        kind = "directed" if graph.directed else "undirected"
        say(f"  graph {graph.name}: {graph.num_vertices:,} vertices, {graph.num_edges:,} arcs "
            f"({kind}), loaded in {load_s:.2f} s; solver set up in {runs.setup_s:.2f} s", out)
        if getattr(graph, "load_memory", None) is not None:    # several processes
            for text in graph.load_memory.lines():
                say(f"  {text}", out)
        if runs.devices_why is not None:
            say(f"  devices: {runs.devices_why}", out)
        for text in extra_stats:
            say(f"  {text}", out)
        say(runs.time_line(), out)
        print_stats(stats, file=out)


def print_stats(stats, skip=(), file=None):
    for key, value in stats.items():
        if key in skip:
            continue
        if isinstance(value, dict) and len(value) > 8:
            value = f"{sum(value.values()):,} in total over {len(value)} entries"
        say(f"  {key}: {value}", file)


def jsonable(value):
    """``value`` with NumPy scalars and arrays as Python numbers and lists, tuple keys as text,
    and non-finite floats as ``None`` (JSON has no inf or NaN)."""
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else str(k): jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# ------------------------------------------------------------------ vertex ids on the command line
def parse_vertex(graph, text: str, option: str):
    """The position of the vertex whose id ``text`` names (``option`` for errors): an integer
    for graphs whose ids are integers, else the label as written."""
    labels = graph.file_ids
    if labels is None or labels.dtype.kind in "iu":
        # digits, as a file writes an id: Python's int() would also take "1_0" (as 10)
        if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
            raise ValueError(f"{option} {text!r}: the vertex ids of {graph.name} are integers")
        ident = int(text)
    else:
        ident = text
    return source_position(graph, ident, option)


def parse_vertices(graph, text: str, option: str) -> list:
    """The positions of the vertices a comma-separated list of ids names (``option`` for
    errors, :func:`parse_vertex` for each): at least one, and no empty field (``0,,1`` is a
    typo, not two ids)."""
    fields = [field.strip() for field in text.split(",")]
    if not any(fields):
        raise ValueError(f"{option} {text!r}: no vertex ids given")
    if not all(fields):
        raise ValueError(f"{option} {text!r}: an empty field between commas")
    return [parse_vertex(graph, field, option) for field in fields]


def busiest_vertex(graph, where: str = "") -> int:
    """The position of the vertex with the most out-arcs: a default source that reaches much of
    the graph (the first vertex of a generated graph is often isolated). A graph of no
    vertices has none: a ValueError naming it (``where``: how the command was given it)."""
    if graph.num_vertices == 0:
        raise ValueError(f"{where or graph.name}: the graph has no vertices, so there is no "
                         f"source to start from")
    return int(np.argmax(out_degrees(graph)))


# ------------------------------------------------------------------ output files
#: what ``--output`` writes, by the file's suffix
OUTPUT_FORMATS = {".npy": "a NumPy structured array with fields id and the answer's name "
                          "(depth, distance, ...)",
                  ".npz": "NumPy arrays ids and values",
                  ".csv": "a header (id, the answer's name) and one row per vertex",
                  ".json": "an object with ids and values", ".txt": "text lines 'id value'"}
#: ``--output -``: the text lines on standard output
STDOUT = "-"


def _outputs(args) -> dict:
    """The command's output options that are set: option -> path."""
    given = {"--output": getattr(args, "output", None),
             "--predecessors": getattr(args, "predecessors", None)}
    return {option: path for option, path in given.items() if path is not None}


def check_outputs(args) -> None:
    """Refuse, before anything runs, an output the command could not write: a suffix not in
    :data:`OUTPUT_FORMATS` (the error lists them), a folder, a missing or read-only directory,
    a read-only file, standard output asked for twice, or standard output at all when the
    command runs as several processes (each writes its own vertices to a file of its own); a
    file named twice, or the input graph's file: writing would lose it."""
    from groute import distributed
    outputs = _outputs(args)
    if list(outputs.values()).count(STDOUT) > 1:
        raise ValueError(f"{' and '.join(outputs)} both ask for standard output ({STDOUT}); "
                         f"send one of them to a file")
    graph = getattr(args, "graph", None)
    check_distinct_files([(option, text) for option, text in outputs.items() if text != STDOUT],
                         [("--graph", graph if isinstance(graph, str) else None)])
    for option, text in outputs.items():
        if text == STDOUT:
            if distributed.launched():
                raise ValueError(f"{option} {STDOUT}: across processes every rank writes its "
                                 f"own vertices' answers to a file of its own; give a file name")
            continue
        path = Path(text)
        if path.suffix.lower() not in OUTPUT_FORMATS:
            formats = ", ".join(f"{suffix} ({what})" for suffix, what in OUTPUT_FORMATS.items())
            raise ValueError(f"{option} {text}: groute writes {formats}, or text lines to "
                             f"standard output with {option} {STDOUT}; got "
                             f"{path.suffix or 'a name without a suffix'}")
        check_writable_file(option, path)


def check_rank_outputs(args, rank: int, ranks: int) -> None:
    """Across processes, where each rank writes its own file (:func:`rank_path`): refuse, on
    the rank whose file it is and before anything runs, a file of this rank that could not be
    written (a folder there, a read-only file; its host's directory missing). The job then
    stops with that rank named."""
    for option, text in _outputs(args).items():
        if text != STDOUT:
            check_writable_file(option, rank_path(text, rank, ranks))


def write_output(result, path, value_name: str = "value", option: str = "--output") -> None:
    """Write ``result``'s answer by vertex id to ``path`` (formats: the module docstring;
    ``-``: text lines on standard output). A file that cannot be written after all (checked
    before the run by :func:`check_outputs`; a place such as ``/proc`` passes those checks) is
    a ValueError naming ``option`` and the path."""
    # several processes: each writes its own vertices to a file of its own (check_outputs
    # refused standard output)
    written = path if _part is None else rank_path(path, _part.rank, _part.num_parts)
    try:
        _write_output(result, written, value_name)
    except OSError as exc:
        shown = path if written == path else f"{path} (this rank's part: {written})"
        raise ValueError(f"{option} {shown}: cannot write it ({exc.strerror or exc})") from exc


def _write_output(result, path, value_name: str) -> None:
    ids = np.asarray(result.ids)
    values = np.asarray(result.values)
    if result.values_are_vertices:
        values = ids[values]
    if _part is not None:
        ids, values = ids[_part.first:_part.end], values[_part.first:_part.end]
    if path == STDOUT:
        try:
            _write_lines(sys.stdout, ids, values)
            sys.stdout.flush()
        except BrokenPipeError:
            drop_stdout()
        return
    path = Path(path)
    suffix = path.suffix.lower()
    # NumPy's writers given a name add their suffix to one they do not see as theirs (a.NPY
    # became a.NPY.npy): they write to the file opened here, under the name given
    if suffix == ".npy":
        with open(path, "wb") as fh:
            np.save(fh, _records(ids, values, value_name))
    elif suffix == ".npz":
        with open(path, "wb") as fh:
            np.savez(fh, ids=_plain(ids), values=_plain(values))
    elif suffix == ".csv":
        with open(path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["id", value_name])
            out.writerows(zip(ids.tolist(), values.tolist()))
    elif suffix == ".json":
        with open(path, "w") as fh:
            json.dump(jsonable({"ids": ids, "values": values}), fh)
            fh.write("\n")                  # a text file ends its last line
    else:
        with open(path, "w") as fh:
            _write_lines(fh, ids, values)
    log.info("wrote %s values to %s", f"{values.size:,}", path)


def rank_path(path, rank: int, ranks: int) -> Path:
    """Where rank ``rank`` of ``ranks`` writes its part of an ``--output`` ``path``:
    ``dist.part-1-of-4.npz`` for ``dist.npz``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.part-{rank}-of-{ranks}{path.suffix}")


def _write_lines(fh, ids, values) -> None:
    """Text lines ``id value`` (SNAP style)."""
    if ids.dtype.kind in "iu" and values.dtype.kind in "iuf":
        fmt = "%d %d" if values.dtype.kind in "iu" else "%d %.10g"
        np.savetxt(fh, np.rec.fromarrays([ids, values]), fmt=fmt)
    else:
        fh.writelines(f"{i} {v}\n" for i, v in zip(ids.tolist(), values.tolist()))


def _plain(a):
    """Object arrays of strings as NumPy strings (loadable without pickle), else unchanged."""
    if a.dtype == object and all(isinstance(x, str) for x in a.tolist()):
        return a.astype(str)
    return a


def _records(ids, values, value_name):
    ids, values = _plain(ids), _plain(values)
    out = np.empty(ids.shape[0], dtype=[("id", ids.dtype), (value_name, values.dtype)])
    out["id"], out[value_name] = ids, values
    return out
