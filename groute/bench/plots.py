"""Plots of a results dict: strong scaling, speedup over scipy, and time over the floor.

matplotlib is imported here only (with the Agg backend, no display needed), so the harness runs
without it unless ``--plot`` is given. Only verified ("ok") cases are drawn; a panel with none
says so instead of being left blank.
"""
from __future__ import annotations

from pathlib import Path

from .suite import app_label


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install matplotlib "
                           "(or pip install -e '.[plot]')") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def write_plots(results: dict, directory) -> list[Path]:
    """Write ``strong_scaling.png``, ``speedup_scipy.png`` and ``time_over_floor.png``; a bar
    plot with no value in any panel (e.g. no scipy peer in the run) is not written, and an old
    file of that name in ``directory`` is removed, so no plot of another run is left behind.
    Returns the paths written."""
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    # auto cases repeat a measured count: plotted once, as that count
    ok = [c for c in results.get("cases", []) if c.get("status") == "ok" and not c.get("auto")]
    apps = list(dict.fromkeys(c["app"] for c in results.get("cases", [])))
    graphs = list(dict.fromkeys(c["graph"] for c in results.get("cases", [])))
    title = f"groute bench ({results.get('backend')}) - commit " \
            f"{((results.get('machine') or {}).get('project') or {}).get('commit') or '?'}"[:90]
    paths = [
        _scaling(plt, ok, apps, graphs, title, out / "strong_scaling.png"),
        _bars(plt, ok, apps, graphs, title, out / "speedup_scipy.png",
              value=lambda c: (c.get("speedup") or {}).get("scipy"),
              ylabel="speedup over scipy (x)", reference_line=1.0),
        _bars(plt, ok, apps, graphs, title, out / "time_over_floor.png",
              value=lambda c: c.get("time_over_floor"), ylabel="time / bandwidth floor (x)",
              reference_line=1.0),
    ]
    return [p for p in paths if p is not None]


def _grid(plt, apps, graphs):
    rows, cols = max(len(apps), 1), max(len(graphs), 1)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1, 2.8 * rows + 0.8), squeeze=False)
    return fig, axes


def _empty(ax, text="no verified cases"):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


def _scaling(plt, ok, apps, graphs, title, path):
    fig, axes = _grid(plt, apps, graphs)
    for i, app in enumerate(apps):
        for j, graph in enumerate(graphs):
            ax = axes[i][j]
            mine = [c for c in ok if c["app"] == app and c["graph"] == graph]
            ax.set_title(f"{app_label(app)} - {graph}", fontsize=9)
            if not mine:
                _empty(ax)
                continue
            for mode in dict.fromkeys(c.get("mode") for c in mine):
                pts = sorted((c["devices"], c["time_s"]) for c in mine if c.get("mode") == mode)
                ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], marker="o",
                        label=mode or "time")
            ax.set_yscale("log")
            ax.set_xticks(sorted({c["devices"] for c in mine}))
            ax.set_xlabel("devices", fontsize=8)
            ax.set_ylabel("ms", fontsize=8)
            ax.legend(fontsize=7)
    fig.suptitle(f"Strong scaling: time by device count\n{title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bars(plt, ok, apps, graphs, title, path, *, value, ylabel, reference_line):
    if not any(value(c) for c in ok):
        path.unlink(missing_ok=True)
        return None
    fig, axes = _grid(plt, apps, graphs)
    for i, app in enumerate(apps):
        for j, graph in enumerate(graphs):
            ax = axes[i][j]
            ax.set_title(f"{app_label(app)} - {graph}", fontsize=9)
            verified = [c for c in ok if c["app"] == app and c["graph"] == graph]
            mine = [(c, value(c)) for c in verified]
            mine = [(c, v) for c, v in mine if v]
            if not mine:
                _empty(ax, "no value (peer or floor missing)" if verified else "no verified cases")
                continue
            names = [f"{c['devices']}" + (f" {c['mode']}" if c.get("mode") else "") for c, _ in mine]
            ax.bar(range(len(mine)), [v for _, v in mine], color="tab:blue")
            ax.set_xticks(range(len(mine)), names, fontsize=7, rotation=30)
            ax.axhline(reference_line, color="gray", lw=0.8, ls="--")
            ax.set_yscale("log")
            ax.set_ylabel(ylabel, fontsize=8)
    fig.suptitle(f"{ylabel}\n{title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
