"""What a benchmark run measures: the apps it knows, the presets, and one run's configuration.

What an app *is* (its solver class, whether it takes a source vertex, weights, modes and a
partitioner) is its :class:`groute.registry.Algorithm` in :data:`APPS`; how the harness checks
and compares it (reference, peers, baseline, floor) is its :class:`groute.bench.specs.BenchSpec`.
So the runner, the verifier and the floor model never special-case an app by name, and the
harness imports no algorithm by name.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import registry
from ..graph.partition import METHODS

MODES = ("async", "bsp")
PARTITIONS = METHODS       # auto: the solvers' default, decided per graph
#: Who computes the answer every case is checked against: the graph layer's CPU reference
#: (scipy, one core), the plain-CuPy baselines on GPU 0, or ``auto`` (see :func:`reference_where`).
REFERENCES = ("auto", "cpu", "gpu")
#: ``--reference auto`` checks graphs with at least this many arcs against the GPU baselines:
#: on kron:25 (1.05G arcs) the CPU references take minutes each (Dijkstra, 16 PageRank sweeps),
#: which a 30-minute GPU lease cannot spend; below it the CPU reference is cheap enough.
REFERENCE_GPU_MIN_ARCS = 200_000_000


#: name -> :class:`groute.registry.Algorithm`: the apps the harness runs, as they registered
#: themselves (the registry's own table, so an app registered later is benchmarked too).
APPS = registry.ALGORITHMS

#: Peers the harness knows. ``scipy`` always runs; the rest are used when installed.
PEERS = ("scipy", "cupy", "igraph", "networkx", "cugraph")

#: A PageRank result passes when its L1 distance to the reference is at most this (ranks sum to 1).
PR_MAX_L1 = 1e-4
#: SSSP distances pass when they match the reference to this relative tolerance (float32 kernels).
SSSP_RTOL = 1e-5
#: Seed for the edge weights SSSP runs on, when the graph has none of its own.
WEIGHT_SEED = 0


#: Case and peer outcomes. Only "ok" ones carry times; "skip" (not runnable here, e.g. more
#: devices than GPUs) and "n/a" (nothing to run it with: no reference) did not run at all.
OK, FAIL, ERROR, SKIP, NA = "ok", "FAIL", "ERROR", "skip", "n/a"
NOT_RUN = (SKIP, NA)


def mode_label(case: dict, none: str = "-") -> str:
    """A case's mode as tables print it: "(peer)" added where BFS or SSSP ran in one persistent
    kernel per GPU (:mod:`groute.engines.relax.peer`), "(persistent)" where an asynchronous
    linear iteration did (iterate.cu ``pr_async_persistent``, not the host-driven push), and
    "degree push" where it pushed by the degree rule (``PageRankTuning.push_rule``, set for a
    whole run by ``GROUTE_PR_PUSH_RULE=degree``), so two runs merged with ``--from-json`` tell
    the rules apart; ``none`` for an app without modes."""
    mode = case.get("mode") or none
    stats = case.get("stats") or {}
    if stats.get("exchange") == "peer":
        return mode + " (peer)"
    notes = []
    if mode == "async" and stats.get("persistent") is True:
        notes.append("persistent")
    if mode == "async" and stats.get("push_rule") == "degree":
        notes.append("degree push")
    return f"{mode} ({', '.join(notes)})" if notes else mode


def app_label(app: str) -> str:
    """The app's name in tables and plots (its own key when it is not one of :data:`APPS`)."""
    return APPS[app].label if app in APPS else app


@dataclass
class BenchConfig:
    """One run of the suite. Lists are already validated (see :func:`make_config`)."""

    apps: list[str]
    graphs: list[str]
    devices: list[int]
    modes: list[str]
    repeat: int = 5
    warmup: int = 1
    backend: str = "auto"
    partition: str = "auto"
    peers: list[str] = field(default_factory=lambda: ["scipy", "cupy", "igraph", "networkx", "cugraph"])
    peer_repeat: int = 3
    #: stop repeating a case once its timed runs add up to this many seconds (>= 1 run always)
    max_case_seconds: float = 60.0
    #: NetworkX is pure Python: only graphs with at most this many arcs are given to it
    networkx_max_arcs: int = 2_000_000
    timeout: float | None = None
    preset: str | None = None
    #: what the answers are checked against: auto, cpu or gpu (see REFERENCES)
    reference: str = "auto"
    #: also run every app as ``devices="auto"`` chooses (:mod:`groute.engines.device_rule`)
    auto_devices: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


#: Presets: option values used where the command line gives none.
PRESETS: dict[str, dict] = {
    # The whole suite on nvidia-h200-x4 in under 5 minutes: two graphs of the issues' sizes, one
    # repeat of each CPU peer (scipy's Dijkstra on grid:4900 alone takes seconds), and a per-case
    # budget so a slow case cannot eat the run.
    "quick": dict(apps=["bfs", "sssp", "pr", "cc"], graphs=["kron:21", "grid:4900"],
                  devices=[1, 2, 4], modes=["async", "bsp"], repeat=5, warmup=1, peer_repeat=1,
                  max_case_seconds=10.0),
    # A test that the harness works, on CPU virtual devices in CI (< 1 min): tiny generated
    # graphs, one of them high-diameter, and 1 and 2 devices.
    "cpu": dict(apps=["bfs", "sssp", "pr", "cc"], graphs=["kron:10", "grid:24"],
                devices=[1, 2], modes=["async", "bsp"], repeat=2, warmup=1, peer_repeat=1,
                max_case_seconds=5.0, backend="cpu"),
}

_DEFAULTS = dict(apps=None, graphs=None, devices=None,
                 modes=["async", "bsp"], repeat=5, warmup=1, backend="auto", partition="auto",
                 peers=list(PEERS), peer_repeat=3, max_case_seconds=60.0, timeout=None,
                 reference="auto")


def _check_graph(graph: str) -> None:
    """Refuse, before anything runs, a ``--graphs`` entry no case could load: a spec that does
    not parse, or a name that is neither a file nor a downloaded dataset (each case of it would
    fail, reported only in the table at the end)."""
    from ..graph.datasets import find_downloaded
    from ..graph.spec import is_spec, parse_spec
    if Path(graph).expanduser().exists():       # a file or a part set (load_graph's order)
        return
    if is_spec(graph):
        try:
            parse_spec(graph)
        except ValueError as exc:
            raise ValueError(f"--graphs {graph}: {exc}") from None
    elif find_downloaded(graph) is None:
        raise ValueError(f"--graphs {graph}: neither a file, a graph spec (kron:, rmat:, grid:, "
                         f"er:) nor a downloaded dataset (groute data get)")


def make_config(preset: str | None = None, **options) -> BenchConfig:
    """A validated :class:`BenchConfig`: explicit ``options`` (None = not given) over the preset.

    Raises ValueError naming the option and the bad value.
    """
    values = dict(_DEFAULTS)
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"--preset must be one of {', '.join(PRESETS)}; got {preset!r}")
        values.update(PRESETS[preset])
    values.update({k: v for k, v in options.items() if v is not None})

    apps = _check_choices("--apps", values["apps"] or list(APPS), APPS)   # default: all
    modes = _check_choices("--modes", values["modes"], MODES)
    peers = _check_choices("--peers", values["peers"], PEERS, allow_empty=True)
    graphs = [g.strip() for g in (values["graphs"] or []) if g.strip()]
    if not graphs:
        raise ValueError("no graphs: give --graphs SPEC[,SPEC...] (e.g. kron:21,grid:4900 or a "
                         "file path) or a --preset")
    for graph in graphs:
        _check_graph(graph)
    devices = values["devices"]
    if not devices:
        raise ValueError("no device counts: give --devices K[,K...] (e.g. 1,2,4) or a --preset")
    auto_devices = "auto" in devices
    devices = sorted(set(int(k) for k in devices if k != "auto"))
    if devices and devices[0] < 1:
        raise ValueError(f"--devices: device counts must be >= 1, got {devices[0]}")
    for name in ("repeat", "peer_repeat"):
        if int(values[name]) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {values[name]}")
    if int(values["warmup"]) < 0:
        raise ValueError(f"--warmup must be >= 0, got {values['warmup']}")
    if not float(values["max_case_seconds"]) > 0:
        raise ValueError(f"--max-case-seconds must be positive, got {values['max_case_seconds']}")
    if values["partition"] not in PARTITIONS:
        raise ValueError(f"--partition must be one of {', '.join(PARTITIONS)}; "
                         f"got {values['partition']!r}")
    if values["backend"] not in ("auto", "cuda", "cpu"):
        raise ValueError(f"--backend must be auto, cuda or cpu; got {values['backend']!r}")
    if values["reference"] not in REFERENCES:
        raise ValueError(f"--reference must be one of {', '.join(REFERENCES)}; "
                         f"got {values['reference']!r}")
    check_reference(values["reference"], values["backend"])
    return BenchConfig(apps=apps, graphs=graphs, devices=devices, auto_devices=auto_devices,
                       modes=modes,
                       repeat=int(values["repeat"]), warmup=int(values["warmup"]),
                       backend=values["backend"], partition=values["partition"], peers=peers,
                       peer_repeat=int(values["peer_repeat"]),
                       max_case_seconds=float(values["max_case_seconds"]),
                       timeout=values["timeout"], preset=preset, reference=values["reference"])


def _check_choices(option, items, known, allow_empty=False) -> list[str]:
    items = [str(x).strip().lower() for x in (items or []) if str(x).strip()]
    if items == ["none"] and allow_empty:
        return []
    if items == ["all"]:
        return list(known)
    if not items and not allow_empty:
        raise ValueError(f"{option} is empty; choose from {', '.join(known)}")
    bad = [x for x in items if x not in known]
    if bad:
        raise ValueError(f"{option}: unknown {bad[0]!r}; choose from {', '.join(known)}")
    return list(dict.fromkeys(items))


def check_reference(reference: str, backend: str):
    """ValueError for ``--reference gpu`` on a run without GPUs: ``backend`` ``cpu``, as given
    (:func:`make_config`) or as ``auto`` resolved on this machine (the runner, before any work).
    ``auto`` not yet resolved may still be CUDA and passes."""
    if reference == "gpu" and backend not in ("cuda", "auto"):
        raise ValueError("--reference gpu needs CUDA GPUs (it runs the plain-CuPy baselines on "
                         f"one), and this run has none: it runs as --backend {backend} "
                         "(use --reference cpu or auto)")


def reference_where(reference: str, backend: str, num_arcs: int) -> str:
    """``"cpu"`` or ``"gpu"``: where a graph's reference answers are computed.

    ``auto`` uses the CPU reference unless the suite runs on GPUs and the graph has at least
    :data:`REFERENCE_GPU_MIN_ARCS` arcs. ``gpu`` on a run without GPUs is a ValueError
    (:func:`check_reference`).
    """
    check_reference(reference, backend)
    if reference == "auto":
        return "gpu" if backend == "cuda" and num_arcs >= REFERENCE_GPU_MIN_ARCS else "cpu"
    return reference


def choose_source(graph, spec: str) -> tuple[int, str]:
    """The BFS/SSSP source for a graph, by a fixed rule recorded with the results.

    Grids (``grid:``) start at vertex 0, a corner, which gives the longest traversal (the
    road-network case). Every other graph starts at its highest-out-degree vertex (lowest id among
    ties): never isolated, and in the giant component of Kronecker/RMAT graphs.
    """
    if graph.num_vertices == 0:
        raise ValueError(f"graph {spec!r} has no vertices")
    if spec.strip().lower().startswith("grid:"):
        return 0, "vertex 0 (grid corner)"
    degrees = np.diff(np.asarray(graph.indptr))
    return int(np.argmax(degrees)), "highest out-degree vertex (lowest id among ties)"


#: how :func:`choose_sources` picks an app's sample of sources (recorded with the results)
SOURCES_RULE = "highest out-degree vertices (lowest id among ties)"


def choose_sources(graph, count: int) -> np.ndarray:
    """The fixed sample of sources an app with ``App.sources`` runs from, and that its
    reference and peers are given: the ``count`` vertices of highest out-degree (lowest id among
    ties; all vertices when there are fewer), in increasing id order. A rule rather than a
    random draw, so every run, machine and peer uses the same ones."""
    degrees = np.diff(np.asarray(graph.indptr))
    order = np.argsort(-degrees, kind="stable")[:count]
    return np.sort(order).astype(np.int64)


def case_modes(spec: registry.Algorithm, modes: list[str]) -> list[str | None]:
    """The modes a case list runs an app in: the asked ones it supports, or [None] if it has none."""
    if not spec.modes:
        return [None]
    return [m for m in modes if m in spec.modes]
