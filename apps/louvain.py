"""Louvain community detection across devices, on the operator API and its reductions by key
(:mod:`groute.operators.keyed`).

``louvain_communities(G)`` and ``louvain_partitions(G)`` take NetworkX's parameters
(``weight``, ``resolution``, ``threshold``, ``max_level``, ``seed``) and find communities of
high modularity as NetworkX's do (Blondel et al. 2008): levels of local moves, each followed by
the graph of the communities; ``modularity(G, communities)`` is NetworkX's measure.

A level moves vertices in parallel (Lu, Halappanavar and Kalyanaraman, "Parallel heuristics
for scalable community detection", 2015; cuGraph's Louvain): every vertex finds, from one
snapshot of the communities, the neighbouring community its move to would gain the most
modularity (:func:`~groute.operators.keyed.best_key`, a segmented reduction by (vertex,
neighbour's community) and an argmax, ties to its own community, then the smallest); of the
vertices that gain, those whose random priority (from ``seed``) beats every gaining
neighbour's move at once (Luby's independent set: a gathering advance of the neighbours'
largest priority). No two neighbours move together, so each move gains what it computed but
for the community totals two moves into one community share, and a level runs until no vertex
gains (moves that lose together are undone and the first half of them tried, down to one, which
gains alone): a local optimum as the sequential algorithm's, reached in a different order.
A Louvain level starts with moves of every gaining vertex at once, neighbours too, each
iteration one way (to communities of smaller keys, then of larger ones: :data:`ONE_WAY`, the
rule of cuGraph's Louvain), for as long as they gain together: where most vertices gain, an
independent set holds a few percent of them. Once an independent set's moves have lost
together, the level ends sooner, at an iteration that gains less than :data:`TAIL_SHARE` of
the level's gain. The communities' totals and every vertex's community live in tables on
every device (:func:`~groute.operators.keyed.key_totals`, :func:`~groute.operators.keyed.share`).
Then the arcs are summed by the pair of communities they join
(:func:`~groute.operators.keyed.key_pair_sums`, summed on the devices, the pairs' CSR assembled
on the host): the next level's graph, a vertex per community, which runs on as many of the
devices as it has vertices.

The same seed gives the same communities on any number of devices of either backend (up to
ties that the order of floating-point sums decides). NetworkX moves the vertices one at a time
in a random order, so its communities differ from these; their modularity is of the same
quality (``docs/NETWORKX.md`` has the comparison).

Directed graphs follow NetworkX: the directed modularity (Leicht and Newman), a vertex's weight
to a community counting its arcs both ways. Internally every level is the symmetric graph of
the arcs with two weights per arc, what it carries out of the row and into it (an undirected
edge half each): the gain and the modularity are then the directed formulas, which for an
undirected graph are the undirected ones.
"""
from __future__ import annotations

import contextlib
import numbers
import random
import time
from dataclasses import dataclass

import numpy as np

from groute import AppResult
from groute.engines import make_engine
from groute.engines.device_rule import choose_devices
from groute.graph import DEFAULT_PARTITION, CSRGraph, input_graph
from groute.graph.rank_graph import refuse_rank_graph
from groute.operators import Functor, Gather, Message, advance, compute, filter, keyed, reduce
from groute.operators import keyed_ops
from groute.registry import public
from groute.runtime.kept import lease

#: the most iterations of local moves in one level (each moves an independent set of the
#: vertices that gain; a level ends well before this on every graph measured)
MAX_ITERATIONS = 10_000

#: once an iteration's moves lost together (a conflict, resolved by halving them), the level
#: ends at the first iteration that gains less than this share of what the level gained: the
#: iterations after a conflict move a few vertices each and can outnumber the level's earlier
#: ones many times over, where the next level, on the communities, does the same in a few.
#: Levels without a conflict run to their local optimum (docs/NETWORKX.md)
TAIL_SHARE = 1e-3

#: the least modularity moves of neighbours together must gain to be kept: their gain is the
#: difference of two modularities summed over every arc, whose rounding lies far below it
TOGETHER_MIN_GAIN = 1e-10

#: the position that becomes each vertex's first community, and its random priority's tail
POSITIONS = "pos"

#: a level of fewer arcs runs on one CPU virtual device when groute chooses the backend
#: (``backend="auto"``, devices not named): a level is a few hundred iterations of about twenty
#: operator calls, each of which costs a GPU a launch or a read-back of host time whatever the
#: level's size, while NumPy's whole work on so few arcs costs less; where the two meet was
#: measured on an H200 and its host (docs/NETWORKX.md, "Community detection, measured apart")
HOST_LEVEL_ARCS = 100_000


def _mix(salt: int, iteration: int, pos):
    """splitmix64 of (salt, iteration, position) as NumPy's uint64 arithmetic wraps it."""
    base = np.uint64((salt + (iteration + 1) * 0x9E3779B97F4A7C15) % 2**64)
    z = pos.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9) + base
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(33)) << np.uint64(32) | pos.astype(np.uint64)).astype(np.int64)


def _priority(s, v):
    s["prio"][v] = _mix(int(s["salt"]), int(s["iteration"]), s[POSITIONS][v])


#: a gaining vertex's random priority: 31 bits of splitmix64(salt, iteration, position), then
#: the position (unique, >= 0)
PRIORITY = Functor(
    name="louvain_priority", params="long long* prio, const long long* pos, long long salt, "
                                    "long long iteration",
    cuda="unsigned long long z = (unsigned long long)pos[v] * 0xBF58476D1CE4E5B9ull\n"
         "    + ((unsigned long long)salt + ((unsigned long long)iteration + 1ull)"
         " * 0x9E3779B97F4A7C15ull);\n"
         "z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n"
         "z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
         "z = z ^ (z >> 31);\n"
         "prio[v] = (long long)(((z >> 33) << 32) | (unsigned long long)pos[v]);",
    numpy=_priority)


def _reset(s, v):
    s["prio"][v] = -1
    s["top"][v] = -1


#: no priority, no gaining neighbour seen
RESET = Functor(name="louvain_reset", params="long long* prio, long long* top",
                cuda="prio[v] = -1; top[v] = -1;", numpy=_reset)


def _top(s, v, m):
    s["top"][v] = np.maximum(s["top"][v], m)
    return v[:0]


#: every gaining vertex's largest priority among its gaining neighbours (itself too, through
#: a self-loop); an advance along the in-arcs as well adds the other neighbours of a directed
#: graph
NEIGHBOUR_TOP = Functor(
    name="louvain_top", params="long long* top, const long long* prio",
    message=Message("long long", cuda="prio[u]", numpy=lambda s, u: s["prio"][u]),
    gather=Gather("max", cuda="prio[v] >= 0", numpy=lambda s, v: s["prio"][v] >= 0),
    cuda="if (m > top[v]) top[v] = m;\nreturn false;", numpy=_top)

#: moves now: no gaining neighbour has a higher priority (priorities are unique)
MOVES = Functor(name="louvain_moves", params="const long long* prio, const long long* top",
                cuda="return prio[v] >= top[v];",
                numpy=lambda s, v: s["prio"][v] >= s["top"][v])


def _take(s, v):
    s["comm"][v] = s["choice"][v]


#: the move
TAKE = Functor(name="louvain_take", params="int* comm, const int* choice",
               cuda="comm[v] = choice[v];", numpy=_take)


def _keep(s, v):
    s["kept"][v] = s["comm"][v]


def _undo(s, v):
    s["comm"][v] = s["kept"][v]


def _one_way(s, v):
    comm, choice = s["comm"][v], s["choice"][v]
    return choice > comm if s["up"] else choice < comm


#: a gaining vertex whose choice lies the iteration's way: a community of a smaller key on even
#: iterations, of a larger on odd ones, so that of two neighbours that would take each other's
#: community one waits (the moves of :meth:`_Level.move` while they gain together)
ONE_WAY = Functor(name="louvain_one_way", params="const int* comm, const int* choice, int up",
                  cuda="return up ? choice[v] > comm[v] : choice[v] < comm[v];",
                  numpy=_one_way)

#: the communities before an iteration's moves, and back to them
KEEP = Functor(name="louvain_keep", params="int* kept, const int* comm",
               cuda="kept[v] = comm[v];", numpy=_keep)
UNDO = Functor(name="louvain_undo", params="int* comm, const int* kept",
               cuda="comm[v] = kept[v];", numpy=_undo)


def _mark(s, v):
    s["mark"][v] = 1


def _mark_neighbours(s, v):
    s["mark"][v] = 1
    return v[:0]


def _unmark(s, v):
    s["mark"][v] = 0


#: the vertices the next iteration weighs: the gaining ones and the movers' neighbours
MARK = Functor(name="louvain_mark", params="int* mark", cuda="mark[v] = 1;", numpy=_mark)
MARK_NEIGHBOURS = Functor(name="louvain_mark_neighbours", params="int* mark",
                          cuda="mark[v] = 1; return false;", numpy=_mark_neighbours)
MARKED = Functor(name="louvain_marked", params="const int* mark", cuda="return mark[v] != 0;",
                 numpy=lambda s, v: s["mark"][v] != 0)
UNMARK = Functor(name="louvain_unmark", params="int* mark", cuda="mark[v] = 0;", numpy=_unmark)


def _product(s, v):
    p = s[POSITIONS][v]
    s["product"][v] = s["s_out"][p] * s["s_in"][p]


#: each community's product of out- and in-degree totals, at the vertex whose position is its
#: key (a community's key is a position, so each is counted once)
PRODUCT = Functor(name="louvain_product",
                  params="double* product, const double* s_out, const double* s_in, "
                         "const long long* pos",
                  cuda="product[v] = s_out[pos[v]] * s_in[pos[v]];", numpy=_product)


def gain(s, v, k, w):
    """The modularity a vertex's move to community ``k`` gains, up to a term of the vertex alone
    (its own community scores what staying does): the arcs' weight to ``k`` against the
    expected, ``resolution * (kout * Sin + kin * Sout) / m**2`` with ``k``'s totals without the
    vertex. NetworkX's gain, undirected and directed."""
    mine = (s["comm"][v] == k).astype(np.float64)
    kout, kin = s["kout"][v], s["kin"][v]
    s_out = s["s_out"][k] - mine * kout
    s_in = s["s_in"][k] - mine * kin
    m = s["size"]
    return w / m - s["resolution"] * (kout * s_in + kin * s_out) / (m * m)


def same_community(s, v, u):
    """The arcs inside a community."""
    return s["comm_of"][u] == s["comm"][v]


def left_community(s, v, u):
    """The arcs into the community a vertex left (``kept``: its community before the move)."""
    return s["comm_of"][u] == s["kept"][v]


def same_group(s, v, u):
    """The arcs inside a refined group."""
    return s["ref_of"][u] == s["ref"][v]


def _outside(s, v):
    s["ext"][v] = s["wc"][v] - s["ext"][v]


#: a vertex's weight to the rest of its community outside its refined group (``ext`` held its
#: weight inside the group)
OUTSIDE = Functor(name="leiden_outside", params="double* ext, const double* wc",
                  cuda="ext[v] = wc[v] - ext[v];", numpy=_outside)


def _refinable(s, v):
    k = s["kout"][v] + s["kin"][v]
    c = s["comm"][v]
    total = s["s_out"][c] + s["s_in"][c]
    return (s["r_size"][s["ref"][v]] == 1.0) & \
        (s["wc"][v] >= s["resolution"] * k * (total - k) / (2 * s["size"]))


#: still alone in its refined group, and well connected to its community: E(v, C - v) >=
#: resolution * k_v (K_C - k_v) / 2m
REFINABLE = Functor(
    name="leiden_refinable",
    params="const int* ref, const int* comm, const double* r_size, const double* wc, "
           "const double* kout, const double* kin, const double* s_out, const double* s_in, "
           "double size, double resolution",
    cuda="const double k = kout[v] + kin[v];\n"
         "const double total = s_out[comm[v]] + s_in[comm[v]];\n"
         "return r_size[ref[v]] == 1.0\n"
         "    && wc[v] >= resolution * k * (total - k) / (2.0 * size);",
    numpy=_refinable)


def _join(s, v):
    s["ref"][v] = s["choice"][v]


#: the join of a refined group
JOIN = Functor(name="leiden_join", params="int* ref, const int* choice",
               cuda="ref[v] = choice[v];", numpy=_join)


def refined_gain(s, v, k, w):
    """:func:`gain` for a join of the refined group ``k`` (``-inf`` where the group is not well
    connected to the rest of its community: E(T, C - T) < resolution * K_T (K_C - K_T) /
    2m)."""
    xp = s["xp"]
    mine = s["ref"][v] == k
    kout, kin = s["kout"][v], s["kin"][v]
    share = mine.astype(np.float64)
    m, resolution = s["size"], s["resolution"]
    score = w / m - resolution * (kout * (s["r_in"][k] - share * kin)
                                  + kin * (s["r_out"][k] - share * kout)) / (m * m)
    group = s["r_out"][k] + s["r_in"][k]
    c = s["comm"][v]
    total = s["s_out"][c] + s["s_in"][c]
    connected = s["r_ext"][k] >= resolution * group * (total - group) / (2 * m)
    return xp.where(mine | connected, score, -xp.inf)


@dataclass
class LevelGraph:
    """A level's graph: ``csr`` symmetric (each arc both ways, a self-loop once) with two
    float64 weights per arc in its order: ``w_out`` what the row sends along it, ``w_in`` what
    it receives (an undirected edge's weight half each; a self-loop's whole both ways)."""

    csr: CSRGraph
    w_out: np.ndarray
    w_in: np.ndarray

    @property
    def num_vertices(self) -> int:
        return self.csr.num_vertices

    @property
    def total(self) -> float:
        """``m``: the weight of the edges (NetworkX's ``G.size(weight)``)."""
        return float(self.w_out.sum())


def _from_arcs(n: int, src, dst, w_out, w_in) -> LevelGraph:
    """The level graph of arcs ``src -> dst`` (positions), repeated ones summed."""
    src, dst, (w_out, w_in) = keyed_group(src, dst, [w_out, w_in])
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    csr = CSRGraph(indptr, dst.astype(np.int32), directed=False, name="louvain level")
    return LevelGraph(csr, w_out, w_in)


def keyed_group(a, b, values):
    """Distinct ``(a, b)`` pairs sorted, with each of ``values`` summed per pair (host)."""
    return keyed_ops.group(np.asarray(a, np.int64), np.asarray(b, np.int64), values, np)


def level_graph(graph: CSRGraph, weights=None) -> LevelGraph:
    """The first level of ``graph``: every arc both ways, an undirected edge's weight split
    between its two arcs, a directed arc's counted out of its tail and into its head.
    ``weights``: float64 per arc of ``graph`` (its CSR order), else its own (or 1)."""
    refuse_rank_graph(graph, "community detection (Louvain, Leiden, modularity)")
    n = graph.num_vertices
    indptr = np.asarray(graph.indptr)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(graph.indices, dtype=np.int64)
    if weights is None:
        weights = np.ones(dst.shape[0]) if graph.weights is None else graph.weights
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != dst.shape:
        raise ValueError(f"weights has shape {w.shape}; the graph has {dst.shape[0]} arcs")
    zero = np.zeros_like(w)
    if graph.directed:
        return _from_arcs(n, np.concatenate([src, dst]), np.concatenate([dst, src]),
                          np.concatenate([w, zero]), np.concatenate([zero, w]))
    half = np.where(src == dst, w, w / 2)   # a self-loop is listed once, and counts both ways
    return _from_arcs(n, src, dst, half, half)


def independent_movers(engine, gaining, salt: int, iteration: int, *, direction: str = "push",
                       in_arcs: bool = False):
    """The vertices of ``gaining`` (a frontier of ``engine``, whose states ``prio`` and ``top``
    it overwrites) that move at once: those whose random priority (drawn from ``salt`` and
    ``iteration``) tops every gaining neighbour's, an independent set, so that no two
    neighbours move on what the other had. Louvain's and Leiden's moves and refinement, and
    asynchronous label propagation, choose their movers so.

    Parameters
    ----------
    engine : engine
        The operator engine holding ``prio`` and ``top`` (int64 states).
    gaining : Frontier
        The vertices that would gain by moving.
    salt, iteration : int
        Seed the priorities: the same pair draws the same priorities.
    direction : str, optional
        The advance's direction (:func:`groute.operators.advance`).
    in_arcs : bool, optional
        Neighbours along the in-arcs count too (a directed graph's).

    Returns
    -------
    Frontier
        The movers.
    """
    compute(engine.all_vertices(), RESET)
    compute(gaining, PRIORITY, salt=salt, iteration=iteration)
    advance(gaining, NEIGHBOUR_TOP, direction, candidates=gaining)
    if in_arcs:
        advance(gaining, NEIGHBOUR_TOP, direction, over="in", candidates=gaining)
    return filter(gaining, MOVES)


class _Level:
    """One level's engine, weights and state (``comm``: each vertex's community, a position)."""

    def __init__(self, level: LevelGraph, ctx, partition):
        self.level = level
        self.engine = make_engine(level.csr, "bsp", ctx=ctx, partition=partition)
        eng = self.engine
        keyed.arc_state(eng, "w_out", level.w_out)
        keyed.arc_state(eng, "w_in", level.w_in)
        keyed.arc_state(eng, "w", level.w_out + level.w_in)
        n = level.num_vertices
        eng.state(POSITIONS, np.int64, values=np.arange(n, dtype=np.int64))
        for name in ("kout", "kin", "inside", "left", "product", "wc", "ext"):
            eng.state(name, np.float64)
        for name in ("comm", "choice", "kept", "mark"):
            eng.state(name, np.int32)
        eng.state("prio", np.int64, -1)
        eng.state("top", np.int64, -1)
        everyone = eng.all_vertices()
        keyed.arc_sums(everyone, weight="w_out", into="kout")
        keyed.arc_sums(everyone, weight="w_in", into="kin")
        self.m = level.total

    def close(self):
        self.engine.close()

    def start(self, comm=None):
        """Every vertex in its own community, or in ``comm`` (by position)."""
        n = self.level.num_vertices
        self.engine.state("comm", np.int32, values=np.arange(n) if comm is None else comm)

    def tables(self, changed=None):
        """Every vertex's community (``changed``: only those vertices' have changed) and every
        community's degree totals, on every device."""
        everyone = self.engine.all_vertices()
        keyed.share(everyone if changed is None else changed, "comm", into="comm_of")
        keyed.key_totals(everyone, "kout", "comm", into="s_out")
        keyed.key_totals(everyone, "kin", "comm", into="s_in")

    def products(self) -> float:
        """The sum over the communities of their out- and in-degree totals' product."""
        everyone = self.engine.all_vertices()
        compute(everyone, PRODUCT)
        return reduce(everyone, "product")

    def modularity(self, resolution: float) -> float:
        """Of the communities the tables hold (NetworkX's, directed or not)."""
        return self.weigh(resolution)[0]

    def weigh(self, resolution: float) -> tuple[float, float]:
        """The modularity of the communities the tables hold and their totals' products
        (:meth:`products`, which the modularity is made of)."""
        everyone = self.engine.all_vertices()
        keyed.arc_sums(everyone, weight="w", into="inside", where=same_community)
        m, products = self.m, self.products()
        return reduce(everyone, "inside") / (2 * m) - resolution * products / (m * m), products

    def undo(self, movers) -> None:
        """Back to the communities before ``movers`` moved (kept by :data:`KEEP`), tables
        too."""
        compute(movers, UNDO)
        self.tables(movers)

    def move(self, resolution: float, salt: int, *, together: bool = True):
        """Local moves to a local optimum (module docstring). Returns the modularity before
        and after, and whether any vertex moved for good.

        With ``together`` (Louvain's; Leiden's moves go without), a level's first iterations
        move every gaining vertex whose choice lies the iteration's way (:data:`ONE_WAY`; the
        other way where none goes this one), neighbours too, and weigh the modularity anew
        over every arc (:meth:`take_together`), until such an iteration gains
        :data:`TOGETHER_MIN_GAIN` or less: it is undone, and independent sets move from there
        on. The first iterations, where most vertices gain, so move most of them at once, where
        an independent set holds a few percent of them.

        An iteration weighs the vertices that gained last time and the neighbours of those
        that moved (the others' neighbourhoods are as they were, only the communities' totals
        moved); when none of them gains, every vertex is weighed once more, and the level ends
        when none gains. What an independent set's moves gained is summed over the movers'
        arcs alone (no two movers are neighbours, so only their own arcs change sides) and the
        communities' totals; moves that lose together (two joining one community) are undone
        and the first half of them tried, down to one, which gains alone. After such a
        conflict the level ends at an iteration that gains less than :data:`TAIL_SHARE` of the
        level's gain."""
        eng = self.engine
        everyone = eng.all_vertices()
        m, resolution = self.m, float(resolution)
        self.tables()
        before, products = self.weigh(resolution)
        moved, quality = False, before
        level_gain, conflicted = 0.0, False
        weighed, whole = everyone, True
        for iteration in range(MAX_ITERATIONS):
            gaining = keyed.best_key(weighed, "comm_of", own="comm", into="choice",
                                     weight="w", score=gain, loops=False, size=m,
                                     resolution=resolution)
            if not gaining:
                if whole:
                    break
                weighed, whole = everyone, True
                continue
            movers = None
            if together:
                # this iteration's way, or the other where no gaining vertex goes this way
                movers = filter(gaining, ONE_WAY, up=iteration % 2) or \
                    filter(gaining, ONE_WAY, up=1 - iteration % 2)
            if movers:
                gained, after, now = self.take_together(movers, quality, resolution)
                if not gained > TOGETHER_MIN_GAIN:
                    # neighbours' moves outweighed each other: independent sets from here on
                    self.undo(movers)
                    movers, together = None, False
            if not movers:
                movers = self.movers(gaining, salt, iteration)
                gained, after = self.take(movers, products, resolution)
                lost = not gained > 0
                while not gained > 0:
                    # the moves lost together (each gains alone, but two may join one
                    # community and outweigh it): undo them and try the first half of them,
                    # down to one
                    self.undo(movers)
                    positions = eng.positions_of(movers)
                    if positions.shape[0] <= 1:
                        break
                    movers = eng.frontier_at(positions[:positions.shape[0] // 2])
                    gained, after = self.take(movers, products, resolution)
                if not gained > 0:      # not even one mover gains (rounding): a local optimum
                    break
                conflicted = conflicted or lost
                now = quality + gained
            products, quality, moved = after, now, True
            level_gain += gained
            if conflicted and gained < TAIL_SHARE * level_gain:
                # past its first conflict a level moves few vertices an iteration and gains
                # little: the next level, on the communities, settles the rest far sooner
                break
            compute(gaining, MARK)
            advance(movers, MARK_NEIGHBOURS)
            weighed, whole = filter(everyone, MARKED), False
            compute(weighed, UNMARK)
        return before, self.modularity(resolution), moved

    def take(self, movers, products: float, resolution: float) -> tuple[float, float]:
        """Move ``movers`` to their choices (their communities kept for an undo) and say what
        that gained together (summed over the movers' arcs and the communities' totals) and
        the totals' products after it."""
        m = self.m
        compute(movers, KEEP)
        compute(movers, TAKE)
        self.tables(movers)
        keyed.arc_sums(movers, weight="w", into="inside", where=same_community, loops=False)
        keyed.arc_sums(movers, weight="w", into="left", where=left_community, loops=False)
        after = self.products()
        gained = (reduce(movers, "inside") - reduce(movers, "left")) / m \
            - resolution * (after - products) / (m * m)
        return gained, after

    def take_together(self, movers, quality: float, resolution: float):
        """Move ``movers`` (neighbours among them: :meth:`take`'s sum over their arcs would
        count an arc between two of them twice) and weigh the communities' modularity anew
        over every arc. Returns what that gained over ``quality`` (the modularity before), the
        totals' products and the modularity after."""
        compute(movers, KEEP)
        compute(movers, TAKE)
        self.tables(movers)
        now, after = self.weigh(resolution)
        return now - quality, after, now

    def movers(self, gaining, salt: int, iteration: int):
        """The vertices of ``gaining`` that move at once (:func:`independent_movers`): the
        moves' and the refinement's."""
        return independent_movers(self.engine, gaining, salt, iteration, direction="auto")

    def communities(self) -> np.ndarray:
        """Every vertex's community, by position (host)."""
        return self.engine.gather("comm").astype(np.int64)

    def aggregate(self, keys, state="comm", table="comm_of") -> tuple[LevelGraph, np.ndarray]:
        """The graph of the groups ``keys`` (the ``state``'s, by position; ``table`` holds them
        by global id): a vertex per group, in the order of their keys, its self-loop the
        weight inside it; and each vertex's new position."""
        distinct, new = np.unique(keys, return_inverse=True)
        everyone = self.engine.all_vertices()
        a, b, (w_out, w_in) = keyed.key_pair_sums(everyone, state, table, ["w_out", "w_in"])
        return _from_arcs(distinct.shape[0], np.searchsorted(distinct, a),
                          np.searchsorted(distinct, b), w_out, w_in), new

    def refine(self, resolution: float, salt: int) -> np.ndarray:
        """Leiden's refinement of the communities (``comm``): every vertex starts alone
        (``ref``), and a vertex still alone that is well connected to its community joins the
        refined group within that community whose join gains the most modularity, among those
        well connected to the rest of the community (Traag, Waltman and van Eck 2019, with the
        greedy choice); independent sets of such vertices at once, as the moves. Returns the
        refined groups by position."""
        eng = self.engine
        everyone = eng.all_vertices()
        m, resolution = self.m, float(resolution)
        n = self.level.num_vertices
        eng.state("ref", np.int32, values=np.arange(n))
        eng.state("one", np.float64, 1.0)
        keyed.arc_sums(everyone, weight="w", into="wc", where=same_community, loops=False)
        keyed.share(everyone, "ref", into="ref_of")
        for iteration in range(MAX_ITERATIONS):
            keyed.key_totals(everyone, "kout", "ref", into="r_out")
            keyed.key_totals(everyone, "kin", "ref", into="r_in")
            keyed.key_totals(everyone, "one", "ref", into="r_size")
            keyed.arc_sums(everyone, weight="w", into="ext", where=same_group, loops=False)
            compute(everyone, OUTSIDE)
            keyed.key_totals(everyone, "ext", "ref", into="r_ext")
            alone = filter(everyone, REFINABLE, size=m, resolution=resolution)
            gaining = keyed.best_key(alone, "ref_of", own="ref", into="choice", weight="w",
                                     score=refined_gain, where=same_community, loops=False,
                                     size=m, resolution=resolution)
            if not gaining:
                break
            movers = self.movers(gaining, salt, iteration)
            compute(movers, JOIN)
            keyed.share(movers, "ref", into="ref_of")
        return eng.gather("ref").astype(np.int64)


def level_backend(backend: str, devices, num_arcs: int) -> str:
    """The backend a Louvain or Leiden level runs on.

    Parameters
    ----------
    backend : str
        The caller's backend (``"auto"``, ``"cuda"`` or ``"cpu"``).
    devices : int, sequence, "auto" or None
        The caller's devices.
    num_arcs : int
        The level's arcs.

    Returns
    -------
    str
        ``"cpu"`` below :data:`HOST_LEVEL_ARCS` arcs when the caller left both the backend and
        the devices to groute, else ``backend`` as given.

    Examples
    --------
    >>> level_backend("auto", None, 100), level_backend("cuda", None, 100)
    ('cpu', 'cuda')
    """
    if backend == "auto" and devices in (None, "auto") and num_arcs < HOST_LEVEL_ARCS:
        return "cpu"
    return backend


def _number(value, name: str) -> float:
    """``value`` (``resolution``, ``threshold``) as a float; a TypeError naming ``name`` for
    what is not a number (a string: float() would say only "could not convert"); a bool is
    0 or 1, as in NetworkX's arithmetic."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


def salt_of(seed) -> int:
    """A 62-bit salt drawn from ``seed`` as NetworkX gives it (``py_random_state``: a
    ``random.Random`` or its wrapper of a NumPy generator), an int, a NumPy generator or
    ``RandomState`` (as NetworkX takes them), or None (the global ``random``); a TypeError
    naming what else it got."""
    if seed is None:
        return random.randrange(1 << 62)
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        seed = int(seed)        # NumPy's integers too
    from networkx.utils import create_py_random_state
    try:
        rng = create_py_random_state(seed)
    except ValueError:
        raise TypeError(f"seed must be an int, None, a random.Random or a NumPy random "
                        f"generator; got {type(seed).__name__}") from None
    return int(rng.randrange(1 << 62))


class Louvain:
    """Louvain levels of ``graph`` (a :class:`~groute.graph.CSRGraph`): on its weights as
    float64 when ``weighted`` (1 for a graph without), on ``arc_weights`` when given (float64
    per arc, in its CSR order: exact where the graph's own are float32); each level on a
    context of ``ctx``'s devices (at most one per vertex of the level), or of ``devices``
    (``"auto"``: :mod:`groute.engines.device_rule`) on ``backend``, leased per level;
    ``partition`` splits each level's graph. With the backend and the devices left to groute,
    a level of fewer than :data:`HOST_LEVEL_ARCS` arcs runs on the host (:func:`level_backend`;
    ``stats["backends"]`` of a result names each level's)."""

    def __init__(self, graph, *, weighted=True, arc_weights=None, ctx=None, devices="auto",
                 backend="auto", timeout=None, partition: str = DEFAULT_PARTITION):
        self.graph = graph.to_host()
        if arc_weights is None and not weighted:
            arc_weights = np.ones(self.graph.num_edges)
        self.first = level_graph(self.graph, arc_weights)
        self.ctx, self.devices, self.backend = ctx, devices, backend
        self.timeout, self.partition = timeout, partition

    @contextlib.contextmanager
    def _context(self, level: LevelGraph, backends: list):
        """A context for ``level``: no more devices than it has vertices; on the host when
        :func:`level_backend` says so. Its backend is appended to ``backends`` (a run's list,
        for its results' stats)."""
        n = max(level.num_vertices, 1)
        if self.ctx is not None:
            backends.append(self.ctx.backend)
            if self.ctx.num_devices <= n:
                yield self.ctx
                return
            indices = tuple(d.index for d in self.ctx.devices[:n])
            ctx, release = lease(devices=indices, backend=self.ctx.backend,
                                 timeout=self.ctx.timeout)
        else:
            backend = level_backend(self.backend, self.devices, level.csr.num_edges)
            devices = choose_devices(self.devices, backend=backend, engine="operators",
                                     num_vertices=n, num_arcs=level.csr.num_edges).devices
            devices = (min(int(devices), n) if isinstance(devices, numbers.Integral)
                       else tuple(devices)[:n])
            ctx, release = lease(devices=devices, backend=backend, timeout=self.timeout)
            backends.append(ctx.backend)
        try:
            yield ctx
        finally:
            release()

    @contextlib.contextmanager
    def _stage(self, level: LevelGraph, backends: list):
        """A :class:`_Level` of ``level`` on a context of :meth:`_context`: what every level of
        :meth:`partitions`, :meth:`leiden_partitions` and :meth:`modularity` runs on, its engine
        closed and then its context released however the block ends."""
        with self._context(level, backends) as ctx:
            stage = _Level(level, ctx, self.partition)
            try:
                yield stage
            finally:
                stage.close()

    def _check_total(self) -> None:
        """Raise NetworkX's ZeroDivisionError where the edges weigh 0 in all: modularity, what
        every level's moves and the answer of :meth:`modularity` are made of, divides by it."""
        if self.first.total == 0:
            raise ZeroDivisionError("the edges weigh 0 in all: modularity divides by it")

    def partitions(self, resolution=1, threshold=1e-7, seed=None):
        """NetworkX's ``louvain_partitions``: a generator of every level's communities, as
        :class:`~groute.results.AppResult` s (``components()``: the communities as sets of the
        graph's ids). A level is yielded when its moves changed the communities (the first
        always); the levels stop when one gains ``threshold`` or less."""
        resolution, threshold = _number(resolution, "resolution"), _number(threshold, "threshold")
        n = self.graph.num_vertices
        started = time.perf_counter()
        members = np.arange(n, dtype=np.int64)      # each vertex's vertex at this level
        backends: list[str] = []         # each level's, in order
        if self.first.csr.num_edges == 0:
            yield self._result(members, started, 0, backends)
            return
        self._check_total()
        salt = salt_of(seed)
        level, mod = self.first, None
        for depth in range(1, n + 1):
            with self._stage(level, backends) as stage:
                stage.start()
                before, after, moved = stage.move(resolution, salt + depth)
                comm = stage.communities()
                if moved or mod is None:
                    level, new = stage.aggregate(comm)
            if mod is None:
                mod = before
            elif not moved:
                return
            members = new[members]
            yield self._result(members, started, depth, backends)
            if after - mod <= threshold:
                return
            mod = after

    def leiden_partitions(self, resolution=1, seed=None):
        """Leiden's levels (``leiden_partitions``, which NetworkX leaves to backends): each the
        local moves from the last level's communities, then their refinement, whose groups
        become the next level's vertices (starting in their communities); a generator of every
        level's communities as :meth:`partitions`, until a level moves nothing (the first is
        always yielded)."""
        resolution = _number(resolution, "resolution")
        n = self.graph.num_vertices
        started = time.perf_counter()
        members = np.arange(n, dtype=np.int64)
        backends: list[str] = []         # each level's, in order
        if self.first.csr.num_edges == 0:
            yield self._result(members, started, 0, backends)
            return
        self._check_total()
        salt = salt_of(seed)
        level, start = self.first, None
        for depth in range(1, n + 1):
            with self._stage(level, backends) as stage:
                stage.start(start)
                _, _, moved = stage.move(resolution, salt + 2 * depth, together=False)
                comm = stage.communities()
                if moved:
                    refined = stage.refine(resolution, salt + 2 * depth + 1)
                    level, new = stage.aggregate(refined, "ref", "ref_of")
            if depth > 1 and not moved:
                return
            yield self._result(comm[members], started, depth, backends)
            if not moved:
                return
            # the next level's vertices (the refined groups) start in their communities, each
            # community keyed by its first group
            groups = int(new.max()) + 1
            community = np.zeros(groups, dtype=np.int64)
            community[new] = comm
            first = np.full(int(comm.max()) + 1, groups, dtype=np.int64)
            np.minimum.at(first, community, np.arange(groups))
            start = first[community]
            members = new[members]

    def modularity(self, labels, resolution=1) -> float:
        """NetworkX's modularity of the communities ``labels`` (a key per position, each a
        position of the graph)."""
        resolution = _number(resolution, "resolution")
        self._check_total()
        with self._stage(self.first, []) as stage:
            stage.start(labels)
            stage.tables()
            return stage.modularity(resolution)

    def _result(self, members, started, levels, backends) -> AppResult:
        """The communities ``members`` (a group per position) as an AppResult; ``backends``:
        the backend of each level run so far."""
        return AppResult(first_members(members), time.perf_counter() - started,
                         {"levels": levels, "backends": list(backends)},
                         vertex_ids=getattr(self.graph, "vertex_ids", None),
                         values_are_vertices=True)


def first_members(groups) -> np.ndarray:
    """Each position's group (non-negative ints) as the smallest position in it: the labels of
    an AppResult whose ``components()`` lists the groups in the order of their first vertex, as
    NetworkX lists communities."""
    groups = np.asarray(groups, dtype=np.int64)
    first = np.full(int(groups.max(initial=-1)) + 1, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, groups, np.arange(groups.shape[0], dtype=np.int64))
    return first[groups]


def _last_level(max_level, levels):
    """The last of the levels that ``levels()`` yields, after at most ``max_level`` of them
    (None: every level): what ``louvain_communities`` and ``leiden_communities`` return, as
    NetworkX's. ``max_level`` is checked before ``levels()`` reads the graph, as NetworkX
    checks it."""
    if max_level is not None and max_level <= 0:
        raise ValueError("max_level argument must be a positive integer or None")
    last = None
    for level, found in enumerate(levels(), 1):
        last = found
        if level == max_level:
            break
    return last


def _graph(G, weight, options):
    """The input graph and the solver of a one-shot function."""
    g = input_graph(G, weight=weight, multigraph=MULTIGRAPH)
    return Louvain(g, weighted=weight is not None, **options)


#: why the functions refuse a NetworkX multigraph
MULTIGRAPH = ("NetworkX adds up its parallel edges' weights, and groute's graphs keep one arc "
              "of their least weight; pass nx.Graph(G) with the weights summed")


@public(solver=Louvain)
def louvain_partitions(G, weight="weight", resolution=1, threshold=1e-7, seed=None, **options):
    """Every level's communities, as NetworkX's ``louvain_partitions``.

    Parameters
    ----------
    G : graph input
        A NetworkX graph (not a multigraph), a scipy sparse matrix, ``(src, dst[, weights])``
        edge arrays, a file, a graph spec or a :class:`~groute.graph.CSRGraph`; directed
        graphs by the directed modularity.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge weighs 1.
    resolution : float, optional
        Below 1 favours larger communities, above 1 smaller ones.
    threshold : float, optional
        The levels stop when one gains this much modularity or less.
    seed : int, random.Random or None, optional
        Where the moves' random priorities come from (NetworkX's ``seed``).
    **options
        How it runs: ``backend``, ``devices``, ``ctx``, ``timeout``, ``partition``,
        ``arc_weights`` (:class:`Louvain`).

    Returns
    -------
    generator of AppResult
        A level's communities each: ``result.components()`` the sets of ids,
        ``result.to_dict()`` each id's community as the id of its first vertex.

    Raises
    ------
    GraphNotSupported
        A NetworkX multigraph (NetworkX's ``NetworkXNotImplemented``).
    ZeroDivisionError
        Edges whose weights add up to 0, as NetworkX.
    TypeError
        A ``seed`` that is no int, None, ``random.Random`` or NumPy random generator.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.barbell_graph(5, 0)
    >>> [p.components() for p in groute.louvain_partitions(G, seed=1, backend="cpu", devices=1)]
    [[{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}]]
    """
    solver = _graph(G, weight, options)
    return solver.partitions(resolution, threshold, seed)


@public(solver=Louvain)
def louvain_communities(G, weight="weight", resolution=1, threshold=1e-7, max_level=None,
                        seed=None, **options) -> AppResult:
    """Communities of high modularity, as NetworkX's ``louvain_communities``: the last level of
    :func:`louvain_partitions` (at most ``max_level`` of them).

    Parameters
    ----------
    G : graph input
        As :func:`louvain_partitions`.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge weighs 1.
    resolution : float, optional
        Below 1 favours larger communities, above 1 smaller ones.
    threshold : float, optional
        The levels stop when one gains this much modularity or less.
    max_level : int or None, optional
        The most levels run (> 0).
    seed : int, random.Random or None, optional
        Where the moves' random priorities come from (NetworkX's ``seed``).
    **options
        How it runs (:class:`Louvain`).

    Returns
    -------
    AppResult
        ``result.components()``: the communities as sets of ids.

    Raises
    ------
    ValueError
        ``max_level`` not positive (NetworkX's message).
    GraphNotSupported
        A NetworkX multigraph.
    TypeError
        A ``seed`` that is no int, None, ``random.Random`` or NumPy random generator.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.connected_caveman_graph(3, 4)
    >>> groute.louvain_communities(G, seed=7, backend="cpu", devices=1).components()
    [{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}]
    """
    return _last_level(max_level, lambda: louvain_partitions(G, weight, resolution, threshold,
                                                             seed, **options))


@public(solver=Louvain)
def modularity(G, communities, weight="weight", resolution=1, **options) -> float:
    """The modularity of a partition of the vertices, as NetworkX's
    ``community.modularity``: ``sum over communities of L_c / m - resolution * (k_c / 2m)^2``
    (directed: ``k_c^out k_c^in / m^2``).

    Parameters
    ----------
    G : graph input
        As :func:`louvain_partitions`.
    communities : iterable of collections of ids
        Every vertex in exactly one.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge weighs 1.
    resolution : float, optional
        The weight of the expected edges.
    **options
        How it runs (:class:`Louvain`).

    Returns
    -------
    float
        The modularity.

    Raises
    ------
    ValueError
        ``communities`` is not a partition of the vertices (an id in none, in two, or not a
        vertex).
    ZeroDivisionError
        A graph whose edges weigh 0 in all, as NetworkX.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.barbell_graph(3, 0)
    >>> round(groute.modularity(G, [{0, 1, 2}, {3, 4, 5}], backend="cpu", devices=1), 6)
    0.357143
    """
    solver = _graph(G, weight, options)
    return solver.modularity(partition_labels(solver.graph, communities), resolution)


def partition_labels(graph, communities) -> np.ndarray:
    """Each position's community, as the first position of its community's list (a
    ValueError when ``communities`` is not a partition of the vertices)."""
    n = graph.num_vertices
    labels = np.full(n, -1, dtype=np.int64)
    for members in communities:
        ids = list(members)
        if not ids:
            continue
        try:
            where = np.asarray(graph.vertex_of(ids, "community member"), dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"communities is not a partition: {exc.args[0]}") from None
        if bool(np.any(labels[where] >= 0)) or np.unique(where).shape[0] < where.shape[0]:
            raise ValueError("communities is not a partition: a vertex is in two of them")
        labels[where] = where[0]
    if bool(np.any(labels < 0)):
        missing = graph.file_id_of(int(np.flatnonzero(labels < 0)[0]))
        raise ValueError(f"communities is not a partition: vertex {missing!r} is in none")
    return labels


def _undirected(G, weight, options, name):
    solver = _graph(G, weight, options)
    if solver.graph.directed:
        from groute.errors import GraphNotSupported
        raise GraphNotSupported(f"{name} takes an undirected graph, as NetworkX's; got "
                                f"{solver.graph.name or 'a directed graph'}")
    return solver


@public(solver=Louvain)
def leiden_partitions(G, weight="weight", resolution=1, seed=None, **options):
    """Every level's communities by Leiden's algorithm, as NetworkX's ``leiden_partitions``
    (which NetworkX leaves to backends): Louvain's moves, then a refinement of each community
    into well-connected groups, which become the next level's vertices.

    Parameters
    ----------
    G : graph input
        As :func:`louvain_partitions`, undirected.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge weighs 1.
    resolution : float, optional
        Below 1 favours larger communities, above 1 smaller ones.
    seed : int, random.Random or None, optional
        Where the moves' random priorities come from (NetworkX's ``seed``).
    **options
        How it runs (:class:`Louvain`).

    Returns
    -------
    generator of AppResult
        A level's communities each (``result.components()``).

    Raises
    ------
    GraphNotSupported
        A directed graph or a NetworkX multigraph (NetworkX's ``NetworkXNotImplemented``).
    ZeroDivisionError
        Edges whose weights add up to 0.
    TypeError
        A ``seed`` that is no int, None, ``random.Random`` or NumPy random generator.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.barbell_graph(5, 0)
    >>> [p.components() for p in groute.leiden_partitions(G, seed=1, backend="cpu", devices=1)]
    [[{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}]]
    """
    return _undirected(G, weight, options, "leiden_partitions").leiden_partitions(resolution,
                                                                                   seed)


@public(solver=Louvain)
def leiden_communities(G, weight="weight", resolution=1, max_level=None, seed=None,
                       **options) -> AppResult:
    """Communities by Leiden's algorithm, as NetworkX's ``leiden_communities``: the last level
    of :func:`leiden_partitions` (at most ``max_level`` of them).

    Parameters
    ----------
    G : graph input
        As :func:`louvain_partitions`, undirected.
    weight : str or None, optional
        The edge attribute holding the weights; None: every edge weighs 1.
    resolution : float, optional
        Below 1 favours larger communities, above 1 smaller ones.
    max_level : int or None, optional
        The most levels run (> 0).
    seed : int, random.Random or None, optional
        Where the moves' random priorities come from.
    **options
        How it runs (:class:`Louvain`).

    Returns
    -------
    AppResult
        ``result.components()``: the communities as sets of ids.

    Raises
    ------
    ValueError
        ``max_level`` not positive (NetworkX's message).
    GraphNotSupported
        A directed graph or a NetworkX multigraph.
    TypeError
        A ``seed`` that is no int, None, ``random.Random`` or NumPy random generator.

    Examples
    --------
    >>> import networkx as nx, groute
    >>> G = nx.connected_caveman_graph(3, 4)
    >>> groute.leiden_communities(G, seed=7, backend="cpu", devices=1).components()
    [{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}]
    """
    return _last_level(max_level,
                       lambda: leiden_partitions(G, weight, resolution, seed, **options))
