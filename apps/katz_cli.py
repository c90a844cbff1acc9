"""``groute katz``: Katz centrality of a graph file or spec (:mod:`groute.apps.katz`).

Prints the summary line (time, mode, iterations or rounds, GTEPS); the engine's options
(``--mode``, ``--bsp-kernel``, ...) and their ``auto`` as ``groute pr``
(:mod:`groute.apps.iterate_cli`); ``--stats``, ``--json`` and ``--output`` as every app command (:mod:`groute.apps.app_cli`).
``--verify`` compares with a float64 power iteration (:func:`groute.graph.reference.katz`).
"""
from __future__ import annotations

import numpy as np

from groute.registry import command

from .app_cli import add_graph_options, checked, load, run_solver
from .iterate_cli import add_iteration_options, report_iteration, tuning_from
from .katz import Katz


@command
def register(subparsers, common):
    p = subparsers.add_parser("katz", parents=[common],
                              help="Katz centrality across devices (async push or BSP)")
    add_graph_options(p, verify_help="compare with groute.graph.reference.katz")
    add_iteration_options(p, Katz.rules, what="Katz",
                          tol_help="stop when an iteration's L1 change is below n*tol (async: "
                                   "residual bound tol per vertex; default 1e-6)")
    p.add_argument("--alpha", type=float, default=0.1,
                   help="attenuation factor, below 1/lambda_max (default 0.1)")
    p.add_argument("--beta", type=float, default=1.0, help="base term (default 1.0)")
    p.add_argument("--raw", action="store_true",
                   help="leave the values as computed (default: unit Euclidean norm)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    tuning = tuning_from(args, Katz.rules["mode"])   # checked before the graph loads
    g, load_s = load(args)
    runs = run_solver(args, g, lambda where: Katz(
        g, **where, partition=args.partition, mode=args.mode, alpha=args.alpha, beta=args.beta,
        normalized=not args.raw, tol=args.tol, seed=args.seed, max_iter=args.max_iter,
        tuning=tuning))
    verified = None
    if args.verify:
        verified = checked(args, g, lambda whole: _verify(whole, runs.result, args))
    return report_iteration(args, "katz", g, load_s, runs, verified, "centrality")


def _verify(g, res, args):
    from groute.graph import reference
    ref = reference.katz(g, alpha=args.alpha, beta=args.beta, tol=min(args.tol, 1e-6) * 1e-3,
                         max_iter=100 * args.max_iter, normalized=not args.raw)
    values = np.asarray(res.values, dtype=np.float64)
    err = float(np.abs(values - ref).max() / max(float(np.abs(ref).max()), 1e-300))
    ok = err <= 1e-4
    return ok, (f"max relative error {err:.3e} vs reference power iteration -> "
                f"{'OK (<= 1e-4)' if ok else 'FAILED (> 1e-4)'}")
