"""How the engines run, apart from what they compute: one frozen tuning object per engine, and
the one place where groute reads its ``GROUTE_*`` environment variables.

An algorithm's signature keeps the options a user means (the graph, the devices, the mode,
``tol``...). Grid shapes, kernel variants, sweeps per round and traces change how fast an
answer comes, never the answer, so they live here instead:

* :class:`TraversalTuning`: BFS and SSSP (:mod:`groute.engines.relax.solver`): the fused worker's kernel
  (``groute/engines/relax/fused.cu``), the persistent peer kernels (``peer.cu``) and the
  linked workers (``linked.cu``), one object because one solver picks among them;
* :class:`WorklistTuning`: BFS and SSSP on the distributed worklist (routing, rounds per launch,
  packets, outbox flushes);
* :class:`PageRankTuning`: the linear iteration engines' BSP kernels and asynchronous push
  (:mod:`groute.engines.iterate`: PageRank, Katz centrality);
* :class:`CCTuning`: connected components' sampling and segments
  (:mod:`groute.engines.components`);
* :class:`BSPTuning`: the exchange of the operators' host-driven BSP engine
  (:mod:`groute.engines.bsp`); :class:`AsyncTuning`: the same and the chunk of the
  asynchronous engine's loops (:mod:`groute.engines.async_engine`).

A solver given ``tuning=None`` uses ``<Tuning>.from_environment()``: the defaults below,
overridden by the environment variables of :data:`VARIABLES` that are set. A tuning object
given is used as it is (``dataclasses.replace(PageRankTuning.from_environment(), sweeps=1)``
combines both). Every variable is parsed and checked by :func:`read_environment`, so a bad
value is an error naming the variable, whichever solver reads it first.

The objects are plain data: this module imports nothing of groute, so every layer may read it.
docs/ARCHITECTURE.md lists the variables (a test keeps that table equal to :data:`VARIABLES`).
"""
from __future__ import annotations

import math
import numbers
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: the linear iteration engines' BSP kernels (:func:`groute.engines.iterate.solver.choose_bsp_kernel`
#: picks for ``"auto"``)
BSP_KERNELS = ("auto", "csc", "bins", "coo")
#: ``PageRankTuning.persistent`` values
PERSISTENT_CHOICES = (True, False, "auto")
#: ``PageRankTuning.push_rule`` values: which vertices the asynchronous push takes
#: (:mod:`groute.engines.iterate.thresholds`)
PUSH_RULES = ("uniform", "degree")
#: ``CCTuning.link`` values
CC_LINKS = ("hook", "light", "mixed")


# ------------------------------------------------------------------------------------------------
# the environment
# ------------------------------------------------------------------------------------------------
def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("expected 0 or 1")
    return text == "1"


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("expected a whole number >= 0")
    return value


def _count_or_none(text: str) -> int | None:
    """A count where 0 means "the default" (None)."""
    return _count(text) or None


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("expected a whole number >= 1")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError("expected a finite positive number of seconds")
    return value


def _text(text: str) -> str:
    return text.strip()


def _yes_no(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected 1 or 0")


def _share_or_never(text: str) -> float | None:
    """A share in [0, 1], or "never" (None)."""
    if text.strip().lower() == "never":
        return None
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError("expected a share in [0, 1] or never")
    return value


def _push_rule(text: str) -> str:
    value = text.strip().lower()
    if value not in PUSH_RULES:
        raise ValueError(f"expected {' or '.join(PUSH_RULES)}")
    return value


def _rank_transport(text: str) -> str:
    value = text.strip().lower()
    if value not in ("auto", "mpi", "nccl"):
        raise ValueError("expected auto, mpi or nccl")
    return value


@dataclass(frozen=True)
class Variable:
    """One ``GROUTE_*`` environment variable: how its text is read, its value when unset, what
    it means, and the tuning field it sets (``"TraversalTuning.block"``; None: a setting read
    where it is used, through :func:`setting`)."""
    name: str
    parse: Callable[[str], Any]
    default: Any
    meaning: str
    tuning: str | None = None


#: every environment variable groute reads
VARIABLES: tuple[Variable, ...] = (
    Variable("GROUTE_TIMEOUT", _seconds, 60.0,
             "seconds any blocking call waits by default (groute.config)"),
    Variable("GROUTE_LOGICAL_DEVICES", _yes_no, False,
             "run more CUDA devices than there are GPUs as logical devices, for testing "
             "(groute.config)"),
    Variable("GROUTE_RANK_TRANSPORT", _rank_transport, "auto",
             "how a distributed context's ranks move rows: auto (NCCL where every rank has a "
             "GPU of its own, else MPI), mpi or nccl (groute.runtime.rank_transport)"),
    Variable("GROUTE_CACHE_DIR", _text, None,
             "the graph, partition and download cache directory (groute.graph.cache)"),
    Variable("GROUTE_DATA_DIR", _text, None,
             "the graph cache and download directory (groute.graph.cache)"),
    Variable("GROUTE_DATASETS", _text, None,
             "a JSON file of extra dataset registry entries (groute.graph.datasets)"),
    Variable("GROUTE_COMMIT", _text, None,
             "the commit benchmark results name, where the tree has no usable .git "
             "(groute.machine)"),
    Variable("GROUTE_ANSWER_KEEP_BYTES", _count, 2 << 30,
             "bytes of host memory (pinned on CUDA) a context keeps to land its answers in "
             "run after run; 0: none, every answer in fresh memory "
             "(groute.runtime.answer_landing)"),
    Variable("GROUTE_PEER_BARRIER_TIMEOUT", _seconds, 10.0,
             "seconds a device waits at a cross-device barrier of a persistent kernel before "
             "the run raises (groute.engines.peer_barrier)"),
    Variable("GROUTE_TRAVERSAL_BLOCK", _positive_int, 256,
             "threads per block of the fused traversal worker", "TraversalTuning.block"),
    Variable("GROUTE_TRAVERSAL_BLOCKS_PER_SM", _count_or_none, None,
             "blocks per SM of the fused worker's wide grid (0: every resident block)",
             "TraversalTuning.blocks_per_sm"),
    Variable("GROUTE_TRAVERSAL_NARROW", _count_or_none, None,
             "blocks of the fused worker's narrow grid (0: one per two SMs)",
             "TraversalTuning.narrow_blocks"),
    Variable("GROUTE_TRAVERSAL_ADAPTIVE", _flag, True,
             "1: the fused worker switches between the narrow and the wide grid by frontier "
             "size; 0: always the wide grid", "TraversalTuning.adaptive"),
    Variable("GROUTE_TRAVERSAL_BATCH", _flag, None,
             "1/0: batched arcs of small-degree vertices on/off (unset: on one device only)",
             "TraversalTuning.batch"),
    Variable("GROUTE_TRAVERSAL_BARRIER", _flag, True,
             "1: the fused worker's grid barrier by acquire/release; 0: by fences",
             "TraversalTuning.acquire_release_barrier"),
    Variable("GROUTE_TRAVERSAL_SPIN_NS", _count, 0,
             "nanoseconds of back-off between a grid barrier's polls", "TraversalTuning.spin_ns"),
    Variable("GROUTE_TRAVERSAL_PULL", _flag, True,
             "0: BFS never pulls over in-arcs (push only)", "TraversalTuning.pull"),
    Variable("GROUTE_TRAVERSAL_BIGCHECK", _flag, False,
             "1: every round reads the big-vertex reservation, even with no vertex above a "
             "warp's arcs", "TraversalTuning.big_check"),
    Variable("GROUTE_PEER_BLOCKS", _count_or_none, None,
             "the most blocks per device of the persistent peer BFS/SSSP kernels (0: every "
             "resident block)", "TraversalTuning.peer_blocks"),
    Variable("GROUTE_LINKED_BLOCKS", _count_or_none, None,
             "blocks per device of the linked asynchronous workers (0: the fused worker's "
             "narrow grid)", "TraversalTuning.linked_blocks"),
    Variable("GROUTE_PEER_MAX_ROUNDS", _positive_int, 2**31 - 1,
             "rounds per device after which a peer or linked traversal raises",
             "TraversalTuning.max_rounds"),
    Variable("GROUTE_PEER_REFRESH", _share_or_never, 1 / 256,
             "SSSP's peer kernel: after a round whose improvements reached this share of the "
             "vertex count, each device reads its peers' distances into what it offered (never: "
             "not at all)", "TraversalTuning.peer_refresh"),
    Variable("GROUTE_PEER_TRACE", _flag, False,
             "1: the peer kernels time each level; stats['level_trace_us']",
             "TraversalTuning.trace"),
    Variable("GROUTE_PR_TRACE", _flag, False,
             "1: persistent PageRank times each iteration's phases; stats['iteration_trace']",
             "PageRankTuning.trace"),
    Variable("GROUTE_PR_PUSH_RULE", _push_rule, "uniform",
             "which vertices the asynchronous push takes: uniform (residual above one threshold) "
             "or degree (above the threshold times the out-degree)", "PageRankTuning.push_rule"),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def read_environment(environ: Mapping[str, str] | None = None,
                     variables=None) -> dict[str, Any]:
    """The parsed values of the :data:`VARIABLES` (or of ``variables``, some of them) set
    (non-empty) in ``environ`` (default ``os.environ``, read now): the one place groute reads
    its environment. A value that does not parse is a ValueError naming the variable."""
    environ = os.environ if environ is None else environ
    values = {}
    for var in VARIABLES if variables is None else variables:
        text = environ.get(var.name, "")
        if text != "":
            values[var.name] = _parsed(var, text)
    return values


def _parsed(var, text: str):
    """``text``, the value of variable ``var``, parsed; a ValueError naming the variable."""
    try:
        return var.parse(text)
    except ValueError as exc:
        raise ValueError(f"environment variable {var.name}={text!r}: {exc} "
                         f"({var.meaning})") from None


def setting(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of variable ``name`` (one of :data:`VARIABLES`) in ``environ`` (default
    ``os.environ``, read now), or its default when unset. Only this variable is parsed: a bad
    value of another one is reported where that one is read, not by every command."""
    var = _BY_NAME[name]
    text = (os.environ if environ is None else environ).get(name, "")
    return var.default if text == "" else _parsed(var, text)


@contextmanager
def overridden(name: str, value: str):
    """Variable ``name`` (one of :data:`VARIABLES`) set to ``value`` in ``os.environ`` for the
    ``with`` block, so that the processes started in it see it too; restored afterwards."""
    _BY_NAME[name].parse(value)
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


class _Tuning:
    """What every tuning class shares: built from the environment."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None):
        """The defaults, overridden by the variables of :data:`VARIABLES` that set this
        class's fields and are set in ``environ`` (default ``os.environ``, read now)."""
        prefix = cls.__name__ + "."
        mine = [v for v in VARIABLES if v.tuning and v.tuning.startswith(prefix)]
        values = read_environment(environ, mine)
        return cls(**{v.tuning[len(prefix):]: values[v.name] for v in mine if v.name in values})

    @classmethod
    def given(cls, value, keyword: str = "tuning"):
        """What a solver's ``keyword`` argument asks for: ``value`` itself when it is one of
        this class, the environment's (:meth:`from_environment`) when it is None; anything
        else a TypeError naming the keyword and the class it takes (a wrong object would
        otherwise fail deep inside the solver, or be ignored)."""
        if value is None:
            return cls.from_environment()
        if not isinstance(value, cls):
            raise TypeError(f"{keyword} must be a groute.tuning.{cls.__name__}, got "
                            f"{type(value).__name__}")
        return value


def _check_power_of_two(name, value, limit=1 << 20):
    v = int(value)
    if v < 1 or v & (v - 1) or v > limit:
        raise ValueError(f"{name} must be a power of two in [1, 2^20]; got {value!r}")


def _check_optional_count(name, value, least=1):
    if value is not None and (isinstance(value, bool) or int(value) < least):
        raise ValueError(f"{name} must be None or a whole number >= {least}; got {value!r}")


# ------------------------------------------------------------------------------------------------
# the engines' tuning
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraversalTuning(_Tuning):
    """How BFS and SSSP run on CUDA devices (the CPU backend's NumPy workers have no knobs).

    The fused worker (``groute/engines/relax/fused.cu``, the host worklist's engine and the linked workers'
    rounds): ``block`` threads per block; ``blocks_per_sm`` of the wide grid (None: every
    resident block); ``narrow_blocks`` of the narrow grid (None: one per two SMs, see
    ``groute.engines.relax.cuda_worker.NARROW_PER_SM``); ``adaptive`` switches between the two by frontier
    size (False: always wide); ``batch`` (None: on one device only) issues the arcs of
    small-degree vertices in batches; ``acquire_release_barrier`` (False: fences) and
    ``spin_ns`` (back-off between polls) shape the grid barrier; ``pull`` lets BFS pull over
    in-arcs; ``big_check`` makes every round read the big-vertex reservation.
    The persistent kernels: ``peer_blocks``, the most blocks per device of the peer kernels
    (None: every resident block); ``linked_blocks``, the linked workers' blocks per device
    (None: the narrow grid); ``max_rounds`` after which either raises; ``trace`` times each
    level (``stats["level_trace_us"]``); ``peer_refresh``: SSSP's peer kernel, after a round
    whose improvements (over all devices) reached this share of the vertex count, lowers each
    device's record of what it offered (``sent_best``) to what the owners hold, so offers the
    owners cannot use are not sent (None: never; 0: after every round). The default refreshes
    after the few heavy rounds of a low-diameter graph and never on a road-like one, whose
    rounds improve few vertices each.
    """
    block: int = 256
    blocks_per_sm: int | None = None
    narrow_blocks: int | None = None
    adaptive: bool = True
    batch: bool | None = None
    acquire_release_barrier: bool = True
    spin_ns: int = 0
    pull: bool = True
    big_check: bool = False
    peer_blocks: int | None = None
    linked_blocks: int | None = None
    max_rounds: int = 2**31 - 1
    trace: bool = False
    peer_refresh: float | None = 1 / 256

    def __post_init__(self):
        if isinstance(self.block, bool) or int(self.block) < 32 or int(self.block) % 32:
            raise ValueError(f"block must be a multiple of 32 threads; got {self.block!r}")
        for name in ("blocks_per_sm", "narrow_blocks", "peer_blocks", "linked_blocks"):
            _check_optional_count(name, getattr(self, name))
        if int(self.spin_ns) < 0:
            raise ValueError(f"spin_ns must be >= 0; got {self.spin_ns!r}")
        if int(self.max_rounds) < 1:
            raise ValueError(f"max_rounds must be >= 1; got {self.max_rounds!r}")
        if self.peer_refresh is not None and not 0 <= float(self.peer_refresh) <= 1:
            raise ValueError(f"peer_refresh must be None or a share in [0, 1]; "
                             f"got {self.peer_refresh!r}")


@dataclass(frozen=True)
class WorklistTuning(_Tuning):
    """How BFS and SSSP run on the distributed worklist (:class:`groute.worklist.DistributedWorklist`,
    the host path of :mod:`groute.engines.relax.solver`): ``routing`` of the items between devices
    (``"all2all"``, or ``"ring"``: each device forwards to the next); ``rounds_per_launch`` of a
    worker's fused rounds (None: until its local work runs out or its outboxes fill);
    ``packet_size`` items per packet of the worklist's links (None: the vertex count, within
    [2^10, 2^20]); ``flush_items`` items in a worker's outboxes after which it returns them
    (None: 2^16). Routing changes where items travel, never the answer, so it is a knob here
    and not an algorithm option. Any field other than its default asks for the worklist: the
    peer kernels have none of these."""
    routing: str = "all2all"
    rounds_per_launch: int | None = None
    packet_size: int | None = None
    flush_items: int | None = None

    def __post_init__(self):
        for name in ("rounds_per_launch", "packet_size", "flush_items"):
            _check_optional_count(name, getattr(self, name))


@dataclass(frozen=True)
class PageRankTuning(_Tuning):
    """How the linear iteration engines run PageRank, Katz and any other
    :class:`~groute.engines.LinearIteration` (:class:`groute.engines.IterateSolver` says what
    each option does); named after the first of them.

    Asynchronous push: ``sweeps`` per worklist round of the host-driven push (None:
    ``groute.engines.iterate.solver.default_sweeps``); ``check_every`` rounds between the
    persistent push kernel's stopping decisions (None: 4); ``push_rule`` (:data:`PUSH_RULES`),
    which vertices a sweep pushes: ``"uniform"`` (default) those whose residual exceeds one
    threshold, ``"degree"`` those whose residual exceeds the threshold times their out-degree
    (Andersen, Chung and Lang), both thresholds adding up to the stopping rule's bound
    (``groute.engines.iterate.thresholds``). BSP: ``bsp_kernel`` (``"auto"``:
    ``groute.engines.iterate.solver.choose_bsp_kernel``); ``check_every``
    iterations between the host's convergence checks (None: 8 with ``device_check``, else 4);
    ``device_check`` (the kernels stop themselves when the rule held); ``peer_writes`` (None:
    where every pair of devices has peer access); ``inplace`` Gauss-Seidel sweeps (one device);
    ``persistent`` (True, False, ``"auto"``: ``groute.engines.iterate.solver.choose_persistent``;
    both modes).
    The csc kernel:
    ``small_degree``, ``vertices_per_lane`` (1, 2, 4); the bins kernel: ``task_arcs``,
    ``hub_degree``, ``lane_arcs`` (powers of two, ``groute.engines.iterate.layout.bins_tasks``); both:
    ``waves`` (the grid in multiples of the resident blocks). ``trace``: persistent runs time
    each iteration's phases (``stats["iteration_trace"]``).
    """
    sweeps: int | None = None
    bsp_kernel: str = "auto"
    check_every: int | None = None
    device_check: bool = True
    peer_writes: bool | None = None
    inplace: bool = False
    persistent: bool | str = "auto"
    small_degree: int = 8
    vertices_per_lane: int = 2
    waves: int = 1
    task_arcs: int = 1024
    hub_degree: int = 4096
    lane_arcs: int = 4
    trace: bool = False
    push_rule: str = "uniform"

    def __post_init__(self):
        if self.bsp_kernel not in BSP_KERNELS:
            raise ValueError(f"bsp_kernel must be one of {', '.join(BSP_KERNELS)}; "
                             f"got {self.bsp_kernel!r}")
        if self.persistent not in PERSISTENT_CHOICES or not isinstance(self.persistent, (bool, str)):
            raise ValueError(f"persistent must be True, False or 'auto'; got {self.persistent!r}")
        if self.push_rule not in PUSH_RULES:
            raise ValueError(f"push_rule must be one of {', '.join(PUSH_RULES)}; "
                             f"got {self.push_rule!r}")
        _check_optional_count("sweeps", self.sweeps)
        _check_optional_count("check_every", self.check_every)
        if int(self.vertices_per_lane) not in (1, 2, 4):
            raise ValueError(f"vertices_per_lane must be 1, 2 or 4; got {self.vertices_per_lane!r}")
        if int(self.waves) < 1:
            raise ValueError(f"waves must be >= 1; got {self.waves!r}")
        for name in ("task_arcs", "hub_degree", "lane_arcs"):
            _check_power_of_two(name, getattr(self, name))


@dataclass(frozen=True)
class CCTuning(_Tuning):
    """How connected components run (:class:`groute.engines.components.ComponentsSolver` says
    what each option does): ``sample_rounds`` neighbours each vertex links to before the vote,
    ``num_samples`` voters (at most 1024), ``link`` (``"hook"``, ``"light"``, ``"mixed"``;
    CUDA) the linking step; ``hubs``, on several devices in place, the rows of highest degree
    whose sampled arcs every device links first (0: none); the segment path's
    ``segment_edges`` (None: about 4 segments per device) and ``num_buffers`` receive buffers
    per device link; ``replay``, in place, queues each device's phases of a run (sampling,
    description, merge and rest) the way its stream replays a fixed sequence fastest (CUDA:
    a graph captured at the second run, one launch per phase; ``False``: every kernel
    launched from the host each run, as a probe timing them one by one needs)."""
    sample_rounds: int = 2
    num_samples: int = 1024
    link: str = "mixed"
    hubs: int = 1024
    segment_edges: int | None = None
    num_buffers: int = 2
    replay: bool = True

    def __post_init__(self):
        _check_optional_count("segment_edges", self.segment_edges)
        if not 1 <= int(self.num_samples) <= 1024 or int(self.sample_rounds) < 0:
            raise ValueError(f"need 1 <= num_samples <= 1024 and sample_rounds >= 0, got "
                             f"{self.num_samples!r}, {self.sample_rounds!r}")
        if isinstance(self.hubs, bool) or not isinstance(self.hubs, numbers.Integral) \
                or self.hubs < 0:
            raise ValueError(f"hubs must be an int >= 0; got {self.hubs!r}")
        if self.link not in CC_LINKS:
            raise ValueError(f"link must be 'hook', 'light' or 'mixed', got {self.link!r}")
        if int(self.num_buffers) < 1:
            raise ValueError(f"num_buffers must be >= 1; got {self.num_buffers!r}")
        if not isinstance(self.replay, bool):
            raise ValueError(f"replay must be True or False; got {self.replay!r}")


@dataclass(frozen=True)
class BSPTuning(_Tuning):
    """How the host-driven BSP engine (:class:`groute.engines.BSPEngine`) exchanges between
    devices: ``packet_size`` vertex ids per packet of its Router's links and ``num_buffers``
    receive buffers per link."""
    packet_size: int = 1 << 16
    num_buffers: int = 4

    def __post_init__(self):
        _check_power_of_two("packet_size", self.packet_size)
        if isinstance(self.num_buffers, bool) or int(self.num_buffers) < 1:
            raise ValueError(f"num_buffers must be >= 1; got {self.num_buffers!r}")


@dataclass(frozen=True)
class AsyncTuning(BSPTuning):
    """How the asynchronous engine (:class:`groute.engines.AsyncEngine`) runs: the BSP
    engine's exchange, and ``chunk``, the most vertices a device takes from its worklist for
    one pass of an order-free loop's steps (smaller: other devices' targets leave sooner and
    arrivals are taken in more often; larger: fewer host steps)."""
    chunk: int = 1 << 16

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.chunk, bool) or int(self.chunk) < 1:
            raise ValueError(f"chunk must be >= 1; got {self.chunk!r}")
