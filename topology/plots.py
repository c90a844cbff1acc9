"""PNG plots in the manner of Groute's figure 2-1 (a-d), plus the bandwidth matrix as a heat map.

matplotlib is imported only here and only when plots are asked for (Agg backend: no display
needed); :func:`require_matplotlib` lets the CLI fail before running anything when it is missing.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from .settings import format_bytes


def require_matplotlib():
    """The pyplot module on the Agg backend; a clear error when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install matplotlib "
                           "(or install groute with the 'plot' extra)") from None
    return plt


def write_plots(directory, results, label: str = "") -> list[Path]:
    """One PNG per benchmark that ran; returns the paths written."""
    plt = require_matplotlib()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    drawers = {"map": ("map_bandwidth.png", _map), "access": ("fig2a_direct_access.png", _access),
               "packets": ("fig2b_packetization.png", _packets),
               "pushpull": ("fig2c_push_pull.png", _push_pull), "broadcast": ("fig2d_broadcast.png", _broadcast)}
    written = []
    for res in results:
        if res.status != "ok" or res.name not in drawers or not res.records:
            continue
        filename, draw = drawers[res.name]
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        try:
            draw(ax, res)
            ax.set_title(f"{ax.get_title()}\n{label}" if label else ax.get_title(), fontsize=10)
            fig.tight_layout()
            path = out / filename
            fig.savefig(path, dpi=120)
            written.append(path)
        finally:
            plt.close(fig)
    return written


def _median(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


def _map(ax, res):
    names = res.extra["endpoints"]
    m = [[float("nan") if v is None else v for v in row] for row in res.extra["bandwidth_gbps"]]
    im = ax.imshow(m, cmap="viridis")
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_yticks(range(len(names)), names)
    for i, row in enumerate(m):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, f"{v:.0f}" if v >= 10 else f"{v:.2g}", ha="center", va="center",
                        color="white", fontsize=8)
    ax.set_xlabel("destination")
    ax.set_ylabel("source")
    ax.set_title(f"Copy bandwidth, GB/s ({format_bytes(res.extra['bytes'])})")
    ax.figure.colorbar(im, ax=ax, label="GB/s")


def _access(ax, res):
    methods = ["read coalesced", "write coalesced", "read random", "write random"]
    wheres = [("local", "local memory"), ("peer", "peer device"), ("host", "pinned host")]
    width = 0.8 / len(wheres)
    for k, (where, label) in enumerate(wheres):
        ys = [_median(r["gbps"] for r in res.select(method=m, where=where)) for m in methods]
        ax.bar([i + (k - 1) * width for i in range(len(methods))], ys, width, label=label)
    ax.set_xticks(range(len(methods)), methods)
    ax.set_yscale("log")
    ax.set_ylabel("GB/s of useful data (log)")
    ax.set_title("(a) Direct access from a kernel")
    ax.legend()


def _packets(ax, res):
    sizes = sorted({r["packet_bytes"] for r in res.records})
    for method, style in (("one copy", "k-"), ("kernel push", "k--"), ("raw packets", "o-"),
                          ("Link", "s-"), ("Link, batched", "^-"), ("device Link", "D--")):
        ys = [_median(r["gbps"] for r in res.select(method=method, packet_bytes=p)) for p in sizes]
        if any(y == y for y in ys):       # a report without the method (an older one) draws none
            ax.plot(sizes, ys, style, label=method)  # dashed: device-initiated
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [format_bytes(p).replace(" ", "") for p in sizes], rotation=45, fontsize=7)
    ax.set_xlabel("packet size")
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (log)")
    ax.set_title(f"(b) Packetization, {res.extra.get('src')} -> {res.extra.get('dst')}")
    ax.legend()


def _lines_by_size(ax, res, value, ylabel, title, logy=False):
    sizes = sorted({r["bytes"] for r in res.records})
    for method in dict.fromkeys(r["method"] for r in res.records):
        ys = [_median(value(r) for r in res.select(method=method, bytes=s)) for s in sizes]
        ax.plot(sizes, ys, "o--" if "kernel" in method else "o-", label=method)  # dashed: device-initiated
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [format_bytes(s).replace(" ", "") for s in sizes])
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("transfer size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


def _push_pull(ax, res):
    _lines_by_size(ax, res, lambda r: r["gbps"], "GB/s (median over device pairs)",
                   "(c) Push vs push/pull through host")


def _broadcast(ax, res):
    _lines_by_size(ax, res, lambda r: r["seconds"] * 1e3, "time, ms (log)",
                   f"(d) Broadcast from {res.extra.get('source')} to all", logy=True)
