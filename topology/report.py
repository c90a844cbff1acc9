"""Presenting results: terminal tables per benchmark, a compact summary, and the JSON document.

The JSON (schema ``groute-topo/1``) holds the machine description, the settings, and every
benchmark's status and measurement records (including each repeat's seconds), so that plots and
docs can be regenerated from it without rerunning anything.
"""
from __future__ import annotations

import contextvars
import datetime as _dt
import json
import math
import statistics
from pathlib import Path

from .settings import format_bytes

SCHEMA = "groute-topo/1"
_MARKDOWN = contextvars.ContextVar("markdown", default=False)


# JSON ------------------------------------------------------------------------------------------
def to_document(description, settings, results, *, options=None) -> dict:
    return {"schema": SCHEMA,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "options": dict(options or {}),
            "label": (description or {}).get("label", ""),
            "machine": description or {},
            "settings": settings.to_dict(),
            "ok": all(r.status != "failed" for r in results),
            "benchmarks": [r.to_dict() for r in results]}


def write_json(path, document) -> None:
    """Write the report ``document`` to ``path`` (its folders made, as ``groute bench``'s)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(document, f, indent=1, default=_plain)
        f.write("\n")


def _plain(x):
    """NumPy scalars and arrays (and any other straggler) as JSON values."""
    import numpy as np
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


# tables ----------------------------------------------------------------------------------------
def table(headers, rows) -> str:
    """Right-aligned columns (first column left-aligned); a Markdown table inside :func:`markdown`."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    if _MARKDOWN.get():
        lines = ["", "| " + " | ".join(cells[0]) + " |", "|" + "|".join([":--"] + ["--:"] * (len(headers) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
        return "\n".join(lines) + "\n"
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(c):
    if c is None:
        return "-"
    if isinstance(c, float):
        if math.isnan(c):
            return "-"
        return f"{c:.3g}" if abs(c) < 10 else f"{c:.1f}"
    return str(c)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def render_result(res) -> str:
    md = _MARKDOWN.get()
    head = f"### {res.name}: {res.title}\n" if md else f"== {res.name}: {res.title}"
    if res.status != "ok":
        return f"{head}\n   {res.status.upper()}: {res.error}"
    body = _RENDERERS.get(res.name, _render_generic)(res)
    notes = "".join(f"\n{'*' if md else '   '}note: {n}{'*' if md else ''}" for n in res.notes
                    if "Traceback" not in n)
    return f"{head}{notes}\n{body}"


def _render_map(res) -> str:
    ex = res.extra
    names = ex["endpoints"]
    out = [f"copy bandwidth, GB/s ({format_bytes(ex['bytes'])}; row = source, column = destination):",
           table(["", *names], [[names[i], *ex["bandwidth_gbps"][i]] for i in range(len(names))]),
           "copy latency, us (4 bytes):",
           table(["", *names], [[names[i], *ex["latency_us"][i]] for i in range(len(names))])]
    if "links" in ex:
        devs = names[:-1]
        out += ["links (as the driver reports them):",
                table(["", *devs], [[devs[i], *ex["links"][i]] for i in range(len(devs))])]
    return "\n".join(out)


def _render_access(res) -> str:
    rows = []
    for method in sorted({r["method"] for r in res.records}):
        row = [method]
        for where in ("local", "peer", "host"):
            row.append(_median(r["gbps"] for r in res.select(method=method, where=where)))
        rows.append(row)
    return "GB/s of useful data, median over executors/targets:\n" + table(
        ["access", "local", "peer", "pinned host"], rows)


def _render_packets(res) -> str:
    rows, hosts = [], []
    for packet in sorted({r["packet_bytes"] for r in res.records}):
        by = {r["method"]: r for r in res.select(packet_bytes=packet)}
        copy, push = by["one copy"], by.get("kernel push")
        link, batched, device = by.get("Link"), by.get("Link, batched"), by.get("device Link")
        rows.append([format_bytes(packet), copy["packets"], format_bytes(copy["bytes"]), copy.get("buffers"),
                     copy["gbps"], by["raw packets"]["gbps"], _gbps(link), _gbps(batched),
                     _share(batched or link, copy), _gbps(push), _gbps(device), _share(device, push)])
        hosts.append([format_bytes(packet), *(by[m].get("host_us_per_packet") if m in by else None
                                              for m in ("raw packets", "Link", "Link, batched"))])
    out = (f"{res.extra.get('src')} -> {res.extra.get('dst')}, GB/s (B: receive buffers per Link):\n"
           + table(["packet", "packets", "bytes", "B", "one copy", "raw packets", "Link", "Link batched",
                    "batched/copy", "kernel push", "device Link", "device/push"], rows))
    return out + "\nhost time per packet, us (the host's time in the step over its packets):\n" + table(
        ["packet", "raw packets", "Link", "Link batched"], hosts)


def _gbps(rec):
    return None if rec is None else rec["gbps"]


def _share(rec, peer):
    return "-" if rec is None or peer is None else f"{rec['gbps'] / peer['gbps']:.0%}"


def _by_method_and_size(res, value, label) -> str:
    sizes = sorted({r["bytes"] for r in res.records})
    methods = list(dict.fromkeys(r["method"] for r in res.records))
    rows = [[m, *(_median(value(r) for r in res.select(method=m, bytes=s)) for s in sizes)] for m in methods]
    return label + "\n" + table(["method", *(format_bytes(s) for s in sizes)], rows)


def _render_pushpull(res) -> str:
    return _by_method_and_size(res, lambda r: r["gbps"], "GB/s, median over device pairs:")


def _render_broadcast(res) -> str:
    return (_by_method_and_size(res, lambda r: r["seconds"] * 1e3,
                                f"time, ms (source {res.extra.get('source')}, ring {res.extra.get('ring')}):")
            + "\n" + _by_method_and_size(res, lambda r: r["aggregate_gbps"],
                                         "aggregate GB/s delivered (bytes x destinations / time):"))


def _render_generic(res) -> str:
    return table(["method", "src", "dst", "bytes", "GB/s"],
                 [[r["method"], r["src"], r["dst"], format_bytes(r["bytes"]), r["gbps"]] for r in res.records])


_RENDERERS = {"map": _render_map, "access": _render_access, "packets": _render_packets,
              "pushpull": _render_pushpull, "broadcast": _render_broadcast}


def summary(description, results) -> str:
    """A compact final table: the headline number of each benchmark and its status."""
    rows = []
    by = {r.name: r for r in results}
    for r in results:
        if r.status != "ok":
            rows.append([r.name, r.status.upper(), (r.error or "")[:70]])
    if "map" in by and by["map"].status == "ok":
        m = by["map"]
        peer = _median(r["gbps"] for r in m.select(method="copy") if r["src"] != r["dst"]
                       and "host" not in (r["src"], r["dst"]))
        h2d = _median(r["gbps"] for r in m.select(method="copy", src="host"))
        d2h = _median(r["gbps"] for r in m.select(method="copy", dst="host"))
        lat = _median(r["seconds"] * 1e6 for r in m.select(method="latency") if r["src"] != r["dst"]
                      and "host" not in (r["src"], r["dst"]))
        rows += [["map", "peer copy", _fmt(peer, "GB/s")], ["map", "host->device copy", _fmt(h2d, "GB/s")],
                 ["map", "device->host copy", _fmt(d2h, "GB/s")], ["map", "peer copy latency", _fmt(lat, "us")]]
    if "access" in by and by["access"].status == "ok":
        a = by["access"]
        for method in ("read coalesced", "read random"):
            rows.append(["access", f"peer {method}", _fmt(_median(r["gbps"] for r in a.select(method=method, where="peer")), "GB/s")])
    if "packets" in by and by["packets"].status == "ok":
        p = by["packets"]
        biggest = max(r["packet_bytes"] for r in p.records)
        best_copy = max(r["gbps"] for r in p.select(method="one copy"))
        for method in ("Link", "Link, batched"):
            link = p.select(packet_bytes=biggest, method=method)[0]["gbps"]
            rows.append(["packets", f"{method}, {format_bytes(biggest)} packets",
                         f"{link:.1f} GB/s = {link / best_copy:.0%} of the best one copy"])
        smallest = min(r["packet_bytes"] for r in p.records)
        host = p.select(packet_bytes=smallest, method="Link")[0]["host_us_per_packet"]
        rows.append(["packets", f"Link host time, {format_bytes(smallest)} packets", _fmt(host, "us per packet")])
    for name, unit in (("pushpull", "gbps"), ("broadcast", "seconds")):
        if name in by and by[name].status == "ok":
            res = by[name]
            size = max(r["bytes"] for r in res.records)
            scores = {m: _median(r[unit] for r in res.select(method=m, bytes=size))
                      for m in dict.fromkeys(r["method"] for r in res.records)}
            best = (max if unit == "gbps" else min)(scores, key=scores.get)
            value = _fmt(scores[best], "GB/s") if unit == "gbps" else _fmt(scores[best] * 1e3, "ms")
            rows.append([name, f"fastest at {format_bytes(size)}", f"{best}: {value}"])
    label = (description or {}).get("label", "")
    head = f"### summary ({label})\n" if _MARKDOWN.get() else f"== summary ({label})\n"
    return head + table(["benchmark", "what", "result"], rows)


def markdown(document, results) -> str:
    """The whole report as Markdown (for docs/TOPOLOGY.md): machine, settings, tables, summary."""
    token = _MARKDOWN.set(True)
    try:
        m = document.get("machine", {})
        software = f"NumPy {m.get('numpy')}, Python {m.get('python')}"
        if m.get("backend") == "cuda":
            software = (f"driver {m.get('driver_version')}, CUDA runtime {m.get('cuda_runtime')}, "
                        f"CUDA driver API {m.get('cuda_driver')}, CuPy {m.get('cupy')}, {software}")
        lines = [f"Measured {document.get('created_utc', '')} on {m.get('label', '')}: "
                 f"{m.get('device_count', '?')} x {', '.join(m.get('device_models', []))}",
                 "",
                 f"- {software}",
                 f"- CPU: {m.get('cpu')} ({m.get('cpu_count')} logical cores)",
                 f"- project commit: {m.get('project_commit')}",
                 f"- settings: {_settings_line(document.get('settings', {}))}",
                 ""]
        for res in results:
            lines += [render_result(res), ""]
        lines.append(summary(m, results))
        return "\n".join(lines) + "\n"
    finally:
        _MARKDOWN.reset(token)


def _settings_line(s) -> str:
    if not s:
        return "?"
    return (f"sizes {', '.join(format_bytes(x) for x in s.get('sizes', []))}; "
            f"median of {s.get('repeat')} runs after {s.get('warmup')} warm-up; "
            f"access buffer {format_bytes(s.get('access_size', 0))}; "
            f"packets {format_bytes(min(s.get('packet_sizes') or [0]))}..{format_bytes(max(s.get('packet_sizes') or [0]))}, "
            f"at most {s.get('max_packets')} per run; {s.get('num_buffers')} Link buffers; "
            f"{s.get('chunks')} chunks per pipelined transfer")


def _fmt(value, unit):
    return "-" if value is None else f"{value:.3g} {unit}" if value < 10 else f"{value:.1f} {unit}"
