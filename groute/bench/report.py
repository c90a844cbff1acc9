"""Writing results: the JSON file (everything) and a self-contained markdown section.

The markdown is meant to be pasted into docs/PERFORMANCE.md as is: it carries the command,
the commit, the machine and the measured copy bandwidth, then one table of our cases (with the
ratio to each peer and to the floor) and one of the peers.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..machine import summary_line
from .fmt import fmt_bytes, fmt_ratio, fmt_seconds
from .specs import PR_DAMPING, PR_TOL, hook_name, spec_for
from .suite import APPS, OK, PR_MAX_L1, SKIP, app_label, mode_label
from .targets import TARGET_GPU, evaluate as evaluate_targets


def write_json(results: dict, path) -> None:
    """Write strict JSON (non-finite numbers become strings such as "inf"), atomically."""
    _write_atomic(Path(path), json.dumps(jsonable(results, max_list=1 << 30), indent=1, allow_nan=False) + "\n")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)


def jsonable(value, max_list: int = 256):
    """``value`` as strict JSON data: NumPy scalars become numbers, arrays lists (a summary when
    longer than ``max_list``), non-finite floats strings such as "inf", unknown objects repr."""
    import numpy as np
    if isinstance(value, dict):
        return {str(k): jsonable(v, max_list) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, max_list) for v in value]
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):
        value = value.get()
    if isinstance(value, np.ndarray):
        if value.size <= max_list:
            return jsonable(value.tolist(), max_list)
        return {"length": int(value.size), "sum": jsonable(value.sum().item())}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: dict, *, heading_level: int = 2) -> str:
    """The results as a markdown section (command, commit, machine, tables, notes)."""
    h = "#" * heading_level
    lines = [f"{h} Benchmark results", ""]
    runs = results.get("runs") or [results]
    for i, run in enumerate(runs):
        if len(runs) > 1:
            lines.append(f"Run {i + 1} of {len(runs)}:")
            lines.append("")
        lines += _run_lines(run)
        lines.append("")

    lines += _target_lines(results, h)

    graph_rows = []
    for g in results.get("graphs", []):
        if g.get("error"):
            graph_rows.append([_cell(g["spec"]), "-", "-", "-", f"did not load: {_cell(g['error'])}",
                               "-", "-", "-", "-"])
            continue
        if "vertices" not in g:         # partial results saved while it loads
            graph_rows.append([_cell(g["spec"]), "-", "-", "-", "not loaded yet", "-", "-", "-",
                               "-"])
            continue
        src = g.get("source")
        fid = g.get("source_file_id")
        src_text = f"{src}" + (f" (file id {fid})" if fid is not None and fid != src else "")
        load = g.get("load_memory") or {}
        graph_rows.append([_cell(g["spec"]), f"{g['vertices']:,}", f"{g['arcs']:,}",
                           "yes" if g["directed"] else "no", f"{src_text}: {g.get('source_rule', '')}",
                           fmt_seconds(g.get("load_s")), fmt_bytes(load.get("csr_bytes")),
                           fmt_bytes(load.get("peak_bytes")), fmt_ratio(load.get("over_csr"))])
    lines += _table(f"{h}# Graphs", ["graph", "vertices:", "arcs:", "directed", "source (rule)",
                                     "load:", "CSR:", "host peak loading:", "over CSR:"],
                    graph_rows, keep_empty=True)

    peer_names = sorted({p["peer"] for p in results.get("peers", []) if p["status"] == OK},
                        key=_peer_order)
    one_device = one_device_speedups(results.get("cases", []))
    header = ["app", "graph", "devices", "mode", "status", "time (median):", "min - max:", "runs:",
              "time / floor:", "moved between devices:", "vs 1 device:"] + [f"vs {p}:" for p in peer_names]
    case_rows = []
    for c in results.get("cases", []):
        row = [app_label(c["app"]), _cell(c["graph"]), devices_label(c), mode_label(c)]
        if c["status"] == OK:
            row += [OK, fmt_seconds(c["time_s"]),
                    f"{fmt_seconds(c['min_s'])} - {fmt_seconds(c['max_s'])}", str(c["repeats"]),
                    fmt_ratio(c.get("time_over_floor")), fmt_bytes(c.get("bytes_moved")),
                    fmt_ratio(one_device.get(id(c)))]
            row += [fmt_ratio(c.get("speedup", {}).get(p)) for p in peer_names]
        else:
            row += [f"**{c['status']}**: {_cell(c.get('note', ''))}"] + ["-"] * (len(header) - 5)
        case_rows.append(row)
    lines += _table(f"{h}# Our apps", header, case_rows, keep_empty=True)

    lines += _memory_lines(results, h)

    peer_rows = [[app_label(p["app"]), _cell(p["graph"]), _cell(p.get("label") or p["peer"]),
                  p.get("device") or "-", OK if p["status"] == OK else f"**{p['status']}**",
                  fmt_seconds(p.get("time_s")), str(p.get("repeats") or "-"), _cell(_peer_note(p))]
                 for p in results.get("peers", []) if p["status"] != SKIP]  # skips: under Notes
    lines += _table(f"{h}# Peers (same run, same graphs)",
                    ["app", "graph", "peer", "runs on", "status", "time (median):", "runs:", "note"],
                    peer_rows)

    ref_rows = [[app_label(r["app"]), _cell(r["graph"]),
                 _cell(r.get("label") or "groute.graph.reference (CPU)"),
                 fmt_seconds(r.get("wall_s")), "yes" if r.get("cached") else "no"]
                for r in results.get("references", [])]
    lines += _table(f"{h}# References (what every answer is checked against)",
                    ["app", "graph", "computed by", "time:", "from the disk cache"], ref_rows)

    lines += [f"{h}# How to read this", "",
              "- time: the apps' own measurement of the algorithm alone (CUDA events on one GPU, a "
              "clock between device synchronisations otherwise), median of the timed runs after "
              "warm-up; setup (partitioning, upload) is not included.",
              "- status: ok = verified against the reference (table above: a CPU reference, "
              "`groute.graph.reference` or the app's own in `groute.bench.checks`, or on very "
              "large graphs the plain-CuPy baseline, an independent GPU implementation) on the "
              "first and last run; **FAIL** = wrong answer "
              "(never timed); **ERROR** = raised; "
              "skip = not runnable here; n/a = app not in this checkout.",
              f"- PageRank: damping {PR_DAMPING:g}, tolerance {PR_TOL:g} passed to our app and the peers; "
              f"passes when the L1 distance to the reference is <= {PR_MAX_L1:g}.",
              "- time / floor: our time over the one-device floor (the CSR read once plus one "
              "4-byte answer per vertex written, unless the app's line below says otherwise, at "
              "the copy bandwidth above). The floor is a lower "
              "bound for one device, so 1-device rows are >= 1; k devices have k times the "
              "bandwidth, so their rows can reach 1/k.",
              "- vs 1 device: strong scaling, the same app, graph and mode on one device over "
              "this time (> 1: faster than one device).",
              "- vs PEER: the peer's median time over ours (> 1: we are faster).",
              "- memory: a case's peak on its fullest device above what was held before it "
              "(GPU: CuPy's memory pool, sampled through set-up and after every run; CPU "
              "backend: host allocations traced over set-up and the first run), per arc and "
              "as a multiple of the CSR's own bytes (int64 offsets, 4-byte ids and weights); "
              "estimate: the app's own model of one device's share (the engines' memory "
              "modules: groute.engines.relax.memory, groute.engines.iterate.memory, "
              "groute.engines.components.memory). Host peak loading: the resident-set peak while the graph was read or generated.",
              ] + _app_lines(results) + [""]
    notes = _notes(results)
    if notes:
        lines += [f"{h}# Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


#: ``App.verify`` kinds as the markdown explains them
VERIFY_TEXT = {"exact": "equal to the reference", "distances": None, "ranks": None,
               "partition": "the same grouping of vertices as the reference (labels free)",
               "allclose": "within relative {rtol:g} of the reference (absolute slack: {rtol:g} "
                           "of its largest value)"}


def _app_lines(results: dict) -> list[str]:
    """One line per app of the run that brings its own checks (its bench spec's hooks): what
    its answers are compared with, how, its floor model and its sources."""
    lines = []
    for app in dict.fromkeys(c["app"] for c in results.get("cases", [])):
        algorithm, spec = APPS.get(app), spec_for(app)
        if algorithm is None or (spec.peers is None and spec.floor is None and not spec.sources):
            continue
        how = (VERIFY_TEXT.get(spec.verify) or spec.verify).format(rtol=spec.rtol)
        parts = [f"- {algorithm.label}: passes when {how}"]
        if spec.floor is not None:
            parts.append(f"floor: `{hook_name(spec.floor)}`")
        if spec.sources:
            parts.append(f"run from the same {spec.sources} sources as its reference and peers "
                         f"(the graph's highest out-degree vertices; JSON `graphs[].sources`)")
        if not algorithm.self_loops:
            parts.append("run on the graph without self-loops")
        if algorithm.directed:
            parts.append("an undirected graph run as the directed graph of its arcs (each "
                         "edge both ways)")
        lines.append("; ".join(parts) + ".")
    return lines


def _memory_lines(results: dict, h: str) -> list[str]:
    """The cases' peak memory (:mod:`.memory`) as a table: where, peak, per arc, over the CSR,
    and the app's estimate; none when no case recorded it."""
    rows = []
    for c in results.get("cases", []):
        mem = c.get("memory")
        if not mem:
            continue
        per_arc = mem.get("bytes_per_arc")
        rows.append([app_label(c["app"]), _cell(c["graph"]), devices_label(c), mode_label(c),
                     c["status"], mem.get("where", "-"), fmt_bytes(mem.get("peak_bytes")),
                     "-" if per_arc is None else f"{per_arc:.2f}", fmt_ratio(mem.get("over_csr")),
                     fmt_bytes(mem.get("estimate_bytes"))])
    return _table(f"{h}# Memory (peak of each case)",
                  ["app", "graph", "devices", "mode", "status", "where", "peak:", "bytes / arc:",
                   "over CSR:", "estimate:"], rows)


def _target_lines(results: dict, h: str) -> list[str]:
    """The targets this run has cases for (:mod:`.targets`), as a table with a verdict."""
    rows = results.get("targets")
    if rows is None:                # partial results: the runner stores them when it finishes
        rows = evaluate_targets(results)
    if not rows:
        return []
    judged = any(r["met"] is not None for r in rows)
    table = []
    for r in rows:
        ours = r["ours"]
        if ours is None:
            value = "-"
        elif r["target"]["kind"] == "time":
            value = fmt_seconds(ours)
        else:
            value = fmt_ratio(ours)
        met = "-" if r["met"] is None else ("yes" if r["met"] else "**no**")
        table.append([str(r["target"]["issue"]), app_label(r["target"]["app"]),
                      _cell(r["target"]["graph"]), _cell(r["text"]), value, _cell(r["detail"]),
                      fmt_ratio(r["margin"]), met])
    lines = _table(f"{h}# Against the targets", ["issue", "app", "graph", "target", "ours:",
                                                   "measured as", "margin:", "met"], table)
    if judged:
        lines.append("margin: how far past the target (time: target / ours; ratios: ours / "
                     "target); below 1x the target is missed by that factor. Ours is the fastest "
                     "verified mode.")
    else:
        lines.append(f"The targets are set for {TARGET_GPU} GPUs and this run did not use them, so "
                     "they are shown but not judged (met: -).")
    return lines + [""]


def _table(heading: str, columns, rows, keep_empty: bool = False) -> list[str]:
    """A markdown table under ``heading``, then a blank line: ``columns`` are the header
    cells, a trailing ':' aligning that column right; no lines at all for no ``rows`` unless
    ``keep_empty``."""
    if not rows and not keep_empty:
        return []
    names = [c[:-1] if c.endswith(":") else c for c in columns]
    rule = ["---:" if c.endswith(":") else "---" for c in columns]
    return ([heading, "", "| " + " | ".join(names) + " |", "|" + "|".join(rule) + "|"]
            + ["| " + " | ".join(row) + " |" for row in rows] + [""])


def devices_label(case) -> str:
    """A case's device count as tables print it: ``4 (auto)`` for the count ``devices="auto"``
    chose."""
    return f"{case['devices']} (auto)" if case.get("auto") else str(case["devices"])


def one_device_speedups(cases) -> dict:
    """Strong scaling of every verified case on several devices (``auto`` cases too): the
    median time of the same app, graph and mode on one device over its own, keyed by
    ``id(case)`` (no entry where that one-device case is missing or failed)."""
    one = {(c["app"], c["graph"], c.get("mode")): c["time_s"] for c in cases
           if c["devices"] == 1 and not c.get("auto") and c["status"] == OK and c.get("time_s")}
    out = {}
    for c in cases:
        base = one.get((c["app"], c["graph"], c.get("mode")))
        if (c["devices"] > 1 or c.get("auto")) and c["status"] == OK and base and c.get("time_s"):
            out[id(c)] = base / c["time_s"]
    return out


def _run_lines(results: dict) -> list[str]:
    """Command, commit, machine, timing and bandwidth of one run, as markdown list items."""
    machine = results.get("machine", {})
    project = machine.get("project", {})
    commit = project.get("commit") or "unknown (not a git checkout; set GROUTE_COMMIT)"
    if project.get("dirty"):
        commit += " (with uncommitted changes)"
    bw = results.get("bandwidth") or {}
    lines = [f"- Command: `{results.get('command') or 'groute bench'}`",
             f"- Commit: `{commit}`, groute {project.get('version', '?')}",
             f"- Machine: {summary_line(machine)}",
             f"- Backend: {results.get('backend')}; partitioner for several devices: "
             f"{_partition_words(results.get('partition'))}",
             (f"- Run: {results.get('started')} to {results.get('finished')} "
              f"({(results.get('elapsed_s') or 0):.0f} s)" if results.get("finished") else
              f"- Run: started {results.get('started')}, **not finished** (partial results"
              f"{_running_text(results.get('running'))})")]
    if bw.get("bytes_per_s"):
        lines.append(f"- Device copy bandwidth measured in this run on {bw.get('device')}: "
                     f"{bw['bytes_per_s'] / 1e9:.0f} GB/s (read + write, {fmt_bytes(bw['copy_bytes'])} "
                     f"copy, {bw.get('method')})")
    elif bw.get("error"):
        lines.append(f"- Device copy bandwidth: not measured ({bw['error']}); no floor column")
    return lines


def _running_text(running) -> str:
    """What an unfinished run was doing when its results were last written, for its Run line."""
    if not running:
        return ""
    return (f"; when last written it was running {running.get('what')}, begun at "
            f"{running.get('since')}, {running.get('elapsed_s', 0):.0f} s into the run")


#: What a merged result keeps of each run (the rest is per case, peer or graph).
RUN_KEYS = ("command", "config", "backend", "partition", "started", "finished", "elapsed_s",
            "machine", "bandwidth", "running")


def read_results(path) -> dict:
    """A results file written by ``--json``; ValueError naming the file if it is not one."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: a directory, not a results file")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(data, dict) or data.get("schema") != "groute-bench/1":
        raise ValueError(f"{path}: not a groute bench results file (no schema groute-bench/1)")
    return data


def merge_results(parts: list[dict]) -> dict:
    """Several runs' results as one (e.g. one command per graph, run separately).

    Cases, peers, graphs and references are concatenated; each run's command, commit, machine
    and bandwidth are kept under ``runs`` and all printed by :func:`markdown`.
    """
    if not parts:
        raise ValueError("no results to merge")
    runs = []
    for part in parts:
        runs += part.get("runs") or [{k: part.get(k) for k in RUN_KEYS}]
    merged = {k: parts[0].get(k) for k in ("schema",) + RUN_KEYS}
    merged["runs"] = runs
    merged["elapsed_s"] = sum(r.get("elapsed_s") or 0.0 for r in runs)
    merged["apps"] = {}
    for key in ("graphs", "references", "peers", "cases"):
        merged[key] = [item for part in parts for item in part.get(key, [])]
    for part in parts:
        for app, info in (part.get("apps") or {}).items():
            if merged["apps"].get(app, {}).get("status") != "available":
                merged["apps"][app] = info
    merged["targets"] = evaluate_targets(merged)
    return merged


def _peer_note(p) -> str:
    parts = [f"{p['iterations']} iterations"] if p.get("iterations") else []
    if p.get("note"):
        parts.append(p["note"])
    return "; ".join(parts)


def _notes(results) -> list[str]:
    notes = []
    for app, info in (results.get("apps") or {}).items():
        if info.get("status") != "available":
            notes.append(f"{app}: {info.get('status')}: {info.get('note')}")
    skipped = {}
    for p in results.get("peers", []):
        if p["status"] == SKIP:
            skipped.setdefault((p["peer"], p["note"]), []).append(f"{p['app']} {p['graph']}")
    for (peer, note), where in skipped.items():
        notes.append(f"peer {peer} skipped ({note}) for {', '.join(where)}")
    return notes


def _peer_order(name):
    order = ["scipy", "cupy", "igraph", "networkx", "cugraph"]
    return order.index(name) if name in order else len(order)


def write_markdown(results: dict, path) -> None:
    _write_atomic(Path(path), markdown(results) + "\n")


def _partition_words(method) -> str:
    """The run's ``--partition`` as the report says it (``auto`` is decided per graph)."""
    if method != "auto":
        return str(method)
    from groute.graph.partition import AUTO_RULE
    return f"auto (per graph: {AUTO_RULE}; each case's in the JSON)"
