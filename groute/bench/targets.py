"""The project's performance targets, judged from a benchmark run's own cases.

The issues set targets on H200s (one GPU for the single-device times, four for scaling). Keeping
them here as data lets every ``groute bench`` report say, from the cases it measured in that run,
which targets it met and by how much, instead of a hand-kept table in docs/PERFORMANCE.md.

A target is judged only from verified cases (status ok) and only where the run has the cases it
needs (a run without one-device cases, with one mode only, or whose 4-device cases were skipped
for want of GPUs leaves those targets out); where the cases ran but none of them was verified,
the target is reported as not met. "Ours" is the fastest verified mode, since ``mode="auto"`` is
meant to pick it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from .fmt import fmt_seconds
from .suite import NOT_RUN, OK, mode_label

#: The GPU the targets were set for; on any other machine the report shows the figures but
#: does not judge them.
TARGET_GPU = "H200"


@dataclass(frozen=True)
class Target:
    """One target. ``kind`` says how it is judged:

    - ``time``: our fastest verified one-device time is at most ``bound`` seconds;
    - ``peer``: that time is at least ``bound`` times faster than ``peer``'s in the same run;
    - ``modes``: one device, mode ``faster`` at least ``bound`` times faster than mode ``slower``;
    - ``scaling``: our fastest time on ``devices`` devices (in ``mode``, when given) is at
      least ``bound`` times faster than our fastest on one;
    - ``auto``: the count ``devices="auto"`` chose runs at least ``bound`` times as fast as one
      device (``bound`` 1/1.1: never more than 10% slower); ``graph`` ``"*"`` judges every
      graph the run has such cases for.
    """

    issue: int
    kind: str
    app: str
    graph: str
    bound: float
    peer: str | None = None
    devices: int = 1
    faster: str | None = None
    slower: str | None = None
    mode: str | None = None

    def describe(self) -> str:
        """The target as the issues state it, e.g. ``<= 3 ms`` or ``>= 2x plain CuPy``."""
        if self.kind == "time":
            return f"<= {self.bound * 1e3:g} ms on 1 GPU"
        if self.kind == "peer":
            return f">= {self.bound:g}x {PEER_NAMES.get(self.peer, self.peer)} on 1 GPU"
        if self.kind == "modes":
            return f"{self.faster} >= {self.bound:g}x {self.slower} on 1 GPU"
        if self.kind == "auto":
            return f"devices=auto at most {1 / self.bound - 1:.0%} slower than 1 GPU"
        mode = f" ({self.mode})" if self.mode else ""
        return f"{self.devices} GPUs{mode} >= {self.bound:g}x 1 GPU"


#: How the target column names a peer.
PEER_NAMES = {"cupy": "plain CuPy (cuSPARSE SpMV power iteration)", "scipy": "scipy"}

#: The targets of issue 7 (BFS, SSSP), issue 8 (PageRank, CC) and issue 37 (several GPUs), in
#: the order they are listed.
TARGETS: tuple[Target, ...] = (
    Target(7, "time", "bfs", "kron:21", 3e-3),
    Target(7, "time", "sssp", "kron:21", 8e-3),
    Target(7, "time", "bfs", "grid:4900", 60e-3),
    Target(7, "time", "sssp", "grid:4900", 200e-3),
    Target(7, "modes", "bfs", "grid:4900", 3.0, faster="async", slower="bsp"),
    Target(7, "modes", "sssp", "grid:4900", 3.0, faster="async", slower="bsp"),
    Target(7, "scaling", "bfs", "kron:25", 2.0, devices=4),
    Target(8, "peer", "pr", "kron:21", 2.0, peer="cupy"),
    Target(8, "peer", "pr", "grid:4900", 2.0, peer="cupy"),
    Target(8, "scaling", "pr", "kron:25", 3.0, devices=4),
    Target(8, "time", "cc", "kron:21", 5e-3),
    Target(8, "time", "cc", "grid:4900", 5e-3),
    # issue 37: 4 GPUs that pay off, and a default that never costs more than 10%
    *(Target(37, "scaling", app, graph, bound, devices=4, mode=mode)
      for graph, row in (("kron:26", {"bfs": 3.5, "pr": 3.7, "cc": 2.5}),
                         ("kron:25", {"bfs": 3.0, "sssp": 3.0, "pr": 3.6, "cc": 2.5}),
                         ("kron:21", {"bfs": 1.5, "sssp": 1.5, "pr": 2.5, "cc": 1.5}),
                         ("grid:4900", {"bfs": (1.0, "async"), "sssp": (1.0, "async"),
                                        "pr": 3.0, "cc": 1.5}))
      for app, spec in row.items()
      for bound, mode in [spec if isinstance(spec, tuple) else (spec, None)]),
    *(Target(37, "auto", app, "*", 1 / 1.1) for app in ("bfs", "sssp", "pr", "cc")),
)


def judged_here(results: dict) -> bool:
    """Whether ``results`` ran on the GPUs the targets are for (CUDA backend, H200s): every
    run of a merged result (``runs``), since its cases may come from several machines."""
    for run in results.get("runs") or [results]:
        if run.get("backend") != "cuda":
            return False
        gpus = (run.get("machine") or {}).get("gpus") or []
        if not gpus or not all(TARGET_GPU in str(g.get("name", "")) for g in gpus):
            return False
    return True


def evaluate(results: dict, targets=TARGETS) -> list[dict]:
    """One row per target the run has cases for, in ``targets`` order.

    Each row: ``target`` (the :class:`Target`'s fields), ``text`` (what it asks), ``ours`` (the
    measured value: seconds for ``time``, a ratio otherwise; None when nothing verified),
    ``detail`` (which cases and modes it comes from), ``margin`` (ours over what is asked, > 1
    when met, e.g. 1.5 = 1.5x better than the target) and ``met`` (True/False, or None when this
    run's machine is not the one the targets are for).
    """
    cases = results.get("cases") or []
    peers = results.get("peers") or []
    judged = judged_here(results)
    rows = []
    for t in _per_graph(targets, cases):
        mine = [c for c in cases if c.get("app") == t.app and c.get("graph") == t.graph]
        if not _ran(t, mine):
            continue
        ours, detail = _measure(t, mine, peers)
        if ours is None:
            margin = None
        elif t.kind == "time":
            margin = t.bound / ours if ours > 0 else None
        else:
            margin = ours / t.bound
        met = (margin is not None and margin >= 1.0) if judged else None
        rows.append(dict(target=asdict(t), text=t.describe(),
                         ours=ours, detail=detail, margin=margin, met=met))
    return rows


def _per_graph(targets, cases):
    """``targets`` with each ``"*"`` graph replaced by every graph of the run that has
    ``auto`` cases of its app, in the run's order."""
    for t in targets:
        if t.graph != "*":
            yield t
            continue
        graphs = dict.fromkeys(c.get("graph") for c in cases
                               if c.get("app") == t.app and c.get("auto"))
        yield from (replace(t, graph=g) for g in graphs)


def _ran(t: Target, cases) -> bool:
    """Whether the run has the cases ``t`` is judged from, verified or not: one device (and
    both modes for ``modes``; and ``t.devices`` devices for ``scaling``). Cases that did not
    run here (skip: too few devices; n/a: app not in this checkout) do not count."""
    ran = {(c.get("devices"), c.get("mode")) for c in cases
           if c.get("status") not in NOT_RUN and not c.get("auto")}
    if t.kind == "modes":
        return {(1, t.faster), (1, t.slower)} <= ran
    if t.kind == "auto":
        return 1 in {d for d, _ in ran} and any(c.get("auto") for c in cases)
    if t.kind == "scaling" and t.mode is not None:
        return 1 in {d for d, _ in ran} and (t.devices, t.mode) in ran
    devices = {d for d, _ in ran}
    return 1 in devices and (t.kind != "scaling" or t.devices in devices)


def _fastest(cases, devices, mode=None):
    """The verified case of ``devices`` devices (and ``mode``, if given) with the least time
    (the cases ``devices="auto"`` ran are judged on their own, by ``auto`` targets)."""
    ok = [c for c in cases if c.get("devices") == devices and c.get("status") == OK
          and not c.get("auto")
          and c.get("time_s") and (mode is None or c.get("mode") == mode)]
    return min(ok, key=lambda c: c["time_s"]) if ok else None


def _mode(case) -> str:
    return mode_label(case, none="its only mode")


def _measure(t: Target, cases, peers):
    """(ours, detail) for target ``t`` from the cases of its app and graph."""
    if t.kind == "modes":
        fast, slow = _fastest(cases, 1, t.faster), _fastest(cases, 1, t.slower)
        if fast is None or slow is None:
            return None, f"needs verified {t.faster} and {t.slower} cases on 1 device"
        return slow["time_s"] / fast["time_s"], (f"{t.slower} {fmt_seconds(slow['time_s'])} / "
                                                 f"{t.faster} {fmt_seconds(fast['time_s'])}")
    best = _fastest(cases, 1)
    if t.kind == "auto":
        auto = [c for c in cases if c.get("auto") and c.get("status") == OK and c.get("time_s")]
        if best is None or not auto:
            return None, "needs verified cases on 1 device and as devices=auto chose"
        chosen = min(auto, key=lambda c: c["time_s"])
        return best["time_s"] / chosen["time_s"], (
            f"1 device {fmt_seconds(best['time_s'])} ({_mode(best)}) / auto "
            f"{chosen['devices']} device{'s' if chosen['devices'] > 1 else ''} "
            f"{fmt_seconds(chosen['time_s'])} ({_mode(chosen)})")
    if t.kind == "scaling":
        many = _fastest(cases, t.devices, t.mode)
        if best is None or many is None:
            return None, f"needs verified cases on 1 and {t.devices} devices"
        return best["time_s"] / many["time_s"], (
            f"1 device {fmt_seconds(best['time_s'])} ({_mode(best)}) / {t.devices} devices "
            f"{fmt_seconds(many['time_s'])} ({_mode(many)})")
    if best is None:
        return None, "no verified case on 1 device"
    if t.kind == "time":
        return best["time_s"], _mode(best)
    peer = next((p for p in peers if p.get("app") == t.app and p.get("graph") == t.graph
                 and p.get("peer") == t.peer and p.get("status") == OK and p.get("time_s")), None)
    if peer is None:
        return None, f"peer {t.peer} not timed in this run"
    return peer["time_s"] / best["time_s"], (f"{t.peer} {fmt_seconds(peer['time_s'])} / ours "
                                             f"{fmt_seconds(best['time_s'])} ({_mode(best)})")
