"""Command-line plumbing the linear iteration apps share (``groute pr``, ``groute katz``): the
engine's options, whose help is rendered from the rules the solver decides by
(:mod:`groute.engines.iterate.rules`), the tuning they build, and the summary line.
What is printed and the ``--output`` formats: :mod:`groute.apps.app_cli`.
"""
from __future__ import annotations

import dataclasses

from groute.engines.iterate.solver import MODES, PARTITIONS
from groute.graph.partition import AUTO_RULE, DEFAULT_PARTITION
from groute.tuning import BSP_KERNELS, PUSH_RULES, PageRankTuning

from .app_cli import advanced_group, auto_help, gteps, report, write_output


def add_iteration_options(p, rules, *, what: str, tol_help: str, tol_default=1e-6,
                          max_iter_default=1000):
    """The engine's options on parser ``p``: tol and max iterations, then in the "advanced"
    group mode, partition, push sweeps, push rule, BSP kernel, in-place sweeps (``what``: the
    app's name in the help). ``tol_default`` None: :func:`tol_for` picks one by the graph."""
    p.add_argument("--tol", type=float, default=tol_default, help=tol_help)
    p.add_argument("--max-iter", type=int, default=max_iter_default, metavar="N",
                   help=f"bsp: stop {what} after N iterations if not converged, with an error "
                        f"(async: after 10*N sweeps or rounds per device; default "
                        f"{max_iter_default})")
    advanced = advanced_group(p)
    advanced.add_argument("--mode", choices=MODES + ("auto",), default="auto",
                          help="bsp Jacobi sweeps, async residual push (the Groute paper's "
                               f"variant), or auto (default): {auto_help(rules['mode'])}")
    advanced.add_argument("--partition", choices=PARTITIONS, default=DEFAULT_PARTITION,
                          help=f"vertex partitioner (default {DEFAULT_PARTITION}: {AUTO_RULE}; "
                               "bsp with the bins kernel cuts its degree order by arcs instead)")
    advanced.add_argument("--sweeps", type=int, default=None,
                          help="async, host-driven: push sweeps per worklist round (default: "
                               f"{auto_help(rules['sweeps'])})")
    advanced.add_argument("--push-rule", choices=PUSH_RULES, default=None,
                          help="async: which vertices a sweep pushes: uniform, those whose "
                               "residual exceeds one threshold (default; GROUTE_PR_PUSH_RULE), "
                               "or degree, those whose residual exceeds the threshold times "
                               "their out-degree; the thresholds add up to the same bound")
    advanced.add_argument("--bsp-kernel", choices=BSP_KERNELS, default=None,
                          help="bsp on CUDA: csc, the fused CSC pull; bins, the degree-binned "
                               "pull; coo, the COO pull pair; or auto (default): "
                               f"{auto_help(rules['bsp_kernel'])}")
    advanced.add_argument("--inplace", action="store_true",
                          help="bsp on one device: Gauss-Seidel sweeps in place (fewer "
                               "iterations)")
    advanced.add_argument("--persistent", choices=("auto", "on", "off"), default=None,
                          help="one launch per device for the whole run (CUDA devices that "
                               "reach each other's memory, or ranks of one host through CUDA "
                               "IPC): on, off, or auto (default): "
                               f"{auto_help(rules['persistent'])}")


def tol_for(args, graph) -> float:
    """``--tol``, or when not given an L1 change of 1e-6 of the mass (``1e-6 / n`` per
    vertex): NetworkX's default of 1e-6 per vertex allows an L1 change of ``n * 1e-6``, too
    loose for a command's answer on a graph of millions of vertices."""
    return args.tol if args.tol is not None else 1e-6 / max(int(graph.num_vertices), 1)


#: the engine options that only one mode reads, by that mode
MODE_ONLY = {"bsp": ("--inplace", "--bsp-kernel"), "async": ("--sweeps", "--push-rule")}


def check_mode_options(args, mode_rule=None) -> None:
    """Refuse, before the graph loads, an option the run would leave unused: one of the
    other mode's (:data:`MODE_ONLY`) beside an explicit ``--mode``, or beside ``--mode auto``
    where the solver's ``mode_rule`` (a :class:`~groute.engines.rules.Rule`) always makes the
    other mode; or ``--inplace`` (in-place sweeps on one device) beside ``--devices`` of
    several."""
    given_mode = getattr(args, "mode", "auto")
    mode = given_mode
    if mode == "auto" and mode_rule is not None and len(mode_rule.cases) == 1:
        mode = mode_rule.cases[0].choice
    for other, options in MODE_ONLY.items():
        if mode not in ("auto", other):
            for option in options:
                value = getattr(args, option[2:].replace("-", "_"), None)
                if not (value is None or value is False or value == "auto"):
                    runs = (f"--mode {mode}" if given_mode == mode else
                            f"--mode auto, which runs {mode} ({mode_rule.cases[0].why}),")
                    raise ValueError(f"{option} applies to --mode {other}; {runs} leaves it "
                                     f"unused")
    devices = getattr(args, "devices", None)
    if getattr(args, "inplace", False) and isinstance(devices, int) and devices > 1:
        raise ValueError(f"--inplace sweeps in place on one device; --devices {devices} leaves "
                         f"it unused")


def tuning_from(args, mode_rule=None) -> PageRankTuning:
    """The engine's tuning: the environment's, with the options given on the command line
    (checked first: :func:`check_mode_options`, with the solver's ``mode_rule``)."""
    check_mode_options(args, mode_rule)
    given = {"sweeps": args.sweeps, "bsp_kernel": getattr(args, "bsp_kernel", None),
             "push_rule": getattr(args, "push_rule", None),
             "inplace": True if getattr(args, "inplace", False) else None,
             "persistent": {"on": True, "off": False, "auto": "auto"}.get(
                 getattr(args, "persistent", None))}
    return dataclasses.replace(PageRankTuning.from_environment(),
                               **{k: v for k, v in given.items() if v is not None})


def arcs_processed(stats: dict, num_arcs: int) -> int:
    """Arcs a run processed: every arc per iteration (BSP), or the arcs pushed (async)."""
    if stats.get("iterations") is not None:
        return int(stats["iterations"]) * int(num_arcs)
    return int(sum(stats.get("arcs_pushed_per_device") or []))


def report_iteration(args, name, g, load_s, runs, verified, value_name) -> int:
    """Print the summary line (time, mode, iterations or rounds, GTEPS) and write
    ``--output``; the exit status (1 when the verification failed)."""
    stats = runs.result.stats
    arcs = arcs_processed(stats, g.num_edges)
    layout = stats.get("layout") if runs.devices > 1 else None
    rounds = (f"{stats['iterations']} iterations" if stats.get("iterations") is not None
              else f"{sum(stats.get('rounds') or []):,} rounds")
    line = (f"{name} {g.name}: {runs.median * 1e3:.3f} ms "
            f"({runs.where(stats['mode'] + (f', {layout}' if layout else ''))}), {rounds}, "
            f"{gteps(arcs, runs.median):.3f} GTEPS")
    facts = {"mode": stats["mode"], "iterations": stats.get("iterations"),
             "arcs_processed": arcs, "gteps": gteps(arcs, runs.median)}
    report(args, name, g, load_s, runs, line, facts, verified)
    if args.output:
        write_output(runs.result, args.output, value_name)
    return 0 if verified is None or verified[0] else 1
