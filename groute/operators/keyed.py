"""Reductions by key: sums grouped by a key, per vertex over its arcs and over the vertices,
across an engine's devices. What community detection is made of (Louvain, Leiden, label
propagation, modularity): a vertex's weight to each neighbouring community, the best
community to move to, the totals of every community, the graph of the communities.

A *key* is a non-negative integer below 2**31 per vertex (a community, a label, a colour; -1
where a vertex has none). An algorithm keeps a vertex's own key in per-vertex state
(``engine.state``) and reads its neighbours' keys from a *table*: an array over every vertex
by global id, held on every device (:func:`share` writes one), since an arc's other end may
live on another device. Per-key totals are tables too, over the keys (:func:`key_totals`). A
table is held with the device's state under its name, so functors read it as they read state
(``const double* totals``); it is not per-vertex state (``engine.gather`` does not apply).

The operations (each on every device of the frontier's engine, as the operators run):

- :func:`arc_state`: values per arc (an algorithm's float64 weights), aligned with the graph's
  arcs, split as the engine splits the graph;
- :func:`share`: the frontier's values of a state into a table on every device;
- :func:`key_totals`: per key, the sum of a state over the frontier's vertices with that key,
  on every device;
- :func:`arc_sums`: per vertex, the sum of an arc state (or the count) over its arcs;
- :func:`best_key`: per vertex, the key among its neighbours' (and its own) whose arcs' summed
  weight scores best: a segmented reduction by (vertex, neighbour's key) and an argmax per
  vertex, with a deterministic tie rule; the vertices whose best is not their own key come
  back as a Frontier;
- :func:`smallest_missing_key`: per vertex, the smallest key none of its neighbours has (a
  greedy colour);
- :func:`key_pair_sums`: the arcs' weights summed by (the vertex's key, the neighbour's key),
  over every device, on the host: the graph of the communities.

``where(s, v, u)`` restricts the arcs an operation counts and ``score(s, v, k, w)`` rates a
key: array callables run on both backends (NumPy arrays on CPU devices, CuPy arrays on CUDA
devices), so they use array operators and ``s["xp"]`` (the array module). ``s`` holds the
device's state and tables by name, the call's scalars and ``first`` (the global id of the
device's local position 0); ``v`` are local positions (of the rows), ``u`` global ids (the
arcs' other ends), ``k`` keys and ``w`` summed weights.

How they run: :mod:`groute.operators.keyed_ops` on each device, sorts of packed 64-bit keys
and sums by ``bincount`` (NumPy on CPU devices, CuPy on CUDA devices: CUB's radix sort). A
table crosses devices through the host: each device's share of it is read back, combined and
written to every device (the frontier's values for :func:`share`, a sum of every device's
partial totals for :func:`key_totals`); on one device nothing leaves it. The operations take
the devices of one process (not a context spanning MPI ranks).
"""
from __future__ import annotations

import numpy as np

from groute.ints import is_int

from . import keyed_ops
from .frontier import DeviceFrontier, Frontier

#: the tie rules of :func:`best_key`: after the vertex's own key, the smallest or largest key
TIES = ("smallest", "largest")


def _engine(frontier, what):
    if not isinstance(frontier, Frontier):
        raise TypeError(f"{what} takes a Frontier (from an engine: engine.all_vertices(), "
                        f"engine.frontier(ids)), got {type(frontier).__name__}")
    engine = frontier.engine
    engine._check(frontier, what)
    if engine.ctx.ranks is not None:
        raise ValueError(f"{what}: the keyed operations run on the devices of one process; "
                         f"this engine's context spans MPI ranks")
    return engine


def _each(engine, fn, *per_device):
    """``fn(part, *args_i)`` on every device, as the engine runs an operator."""
    return engine._each(lambda device, part, *args: fn(part, *args), engine.parts, *per_device)


def arc_state(engine, name: str, values) -> None:
    """Hold per-arc values ``name`` on the devices, each device its vertices' arcs.

    Parameters
    ----------
    engine : Engine
        The engine of the graph (a BSP or async engine).
    name : str
        What the keyed operations call the values (``weight=name``).
    values : array
        One value per arc of the graph the engine was made of, in its CSR order (row after
        row, ``graph.indices``' order).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``values`` not one per arc.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.graph import load_graph
    >>> from groute.operators import keyed
    >>> g = load_graph(nx.path_graph(3))
    >>> with make_engine(g, "bsp", backend="cpu", devices=1) as engine:
    ...     keyed.arc_state(engine, "w", np.array([1.5, 1.5, 2.0, 2.0]))
    ...     engine.state("total", np.float64)
    ...     keyed.arc_sums(engine.all_vertices(), weight="w", into="total")
    ...     engine.gather("total").tolist()
    [1.5, 3.5, 2.0]
    """
    values = np.asarray(values)
    if values.shape != (engine.num_arcs,):
        raise ValueError(f"arc_state {name!r}: values has shape {values.shape}, the graph has "
                         f"{engine.num_arcs} arcs")
    partition = engine.partition
    if not partition.stats["identity"]:
        # the partition renumbered the vertices and re-sorted every row: the arcs' new order
        original = partition.original
        n = original.num_vertices
        perm = np.asarray(partition.perm, dtype=np.int64)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(original.indptr)))
        keys = perm[rows] * n + perm[np.asarray(original.indices, dtype=np.int64)]
        values = values[np.argsort(keys, kind="stable")]
    indptr = np.asarray(partition.graph.indptr)

    def upload(part):
        a, b = int(indptr[part.first]), int(indptr[part.end])
        part.scratch.setdefault("arc_state", {})[name] = part.device.asarray(
            np.ascontiguousarray(values[a:b]))
    _each(engine, upload)


def share(frontier, state: str, *, into: str, fill=-1) -> None:
    """Write the frontier's values of ``state`` into the table ``into`` on every device.

    Parameters
    ----------
    frontier : Frontier
        The vertices whose values are written (every vertex: the whole table).
    state : str
        Per-vertex state of the engine.
    into : str
        The table (by global id) on every device; made with ``fill`` where the engine does
        not hold it with ``state``'s dtype.
    fill : scalar, optional
        A new table's value of the vertices not written.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import keyed
    >>> with make_engine(nx.path_graph(3), "bsp", backend="cpu", devices=1) as engine:
    ...     engine.state("label", np.int32, values=np.array([7, 8, 9]))
    ...     keyed.share(engine.frontier([2]), "label", into="label_of")
    ...     engine.parts[0].state["label_of"].tolist()
    [-1, -1, 9]
    """
    engine = _engine(frontier, "share")
    n = engine.num_vertices
    dtype = keyed_ops.table(engine.parts[0], state).dtype
    _each(engine, lambda part: keyed_ops.hold_table(part, into, n, dtype, fill))
    if len(engine.parts) == 1:
        def write_own(part, fr):
            ids, vals = keyed_ops.frontier_values(part, fr, state)
            keyed_ops.write_table(part, into, ids, vals)
        _each(engine, write_own, frontier.parts)
        return
    pieces = _each(engine, lambda part, fr: [part.device.to_host(a) for a in
                                             keyed_ops.frontier_values(part, fr, state)],
                   frontier.parts)
    ids = np.concatenate([p[0] for p in pieces])
    vals = np.concatenate([p[1] for p in pieces])
    _each(engine, lambda part: keyed_ops.write_table(part, into, ids, vals))


def key_totals(frontier, value: str, key: str, *, into: str, num_keys: int | None = None) -> None:
    """Per key, the sum of ``value`` over the frontier's vertices with that ``key``: a float64
    table ``into`` over the keys, on every device.

    Parameters
    ----------
    frontier : Frontier
        The vertices summed.
    value : str
        Per-vertex state (any number type).
    key : str
        Per-vertex state: each vertex's key, in ``[0, num_keys)``.
    into : str
        The table of totals, float64, indexed by key.
    num_keys : int, optional
        The keys' range (default: the graph's vertex count).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        A key outside ``[0, num_keys)``, or ``num_keys`` below 0.
    TypeError
        A ``num_keys`` that is not an int.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import keyed
    >>> with make_engine(nx.path_graph(4), "bsp", backend="cpu", devices=2) as engine:
    ...     engine.out_degree_state("degree")
    ...     engine.state("team", np.int32, values=np.array([0, 0, 1, 1]))
    ...     keyed.key_totals(engine.all_vertices(), "degree", "team", into="sizes")
    ...     engine.parts[1].state["sizes"].tolist()
    [3.0, 3.0, 0.0, 0.0]
    """
    engine = _engine(frontier, "key_totals")
    if num_keys is None:
        num_keys = engine.num_vertices
    elif not is_int(num_keys):
        raise TypeError(f"key_totals: num_keys must be an int, got {type(num_keys).__name__} "
                        f"{num_keys!r}")
    elif num_keys < 0:
        raise ValueError(f"key_totals: num_keys must be >= 0, got {num_keys}")
    partials = _each(engine, lambda part, fr: keyed_ops.partial_totals(part, fr, value, key,
                                                                       num_keys), frontier.parts)
    # each partial's last entry counts the keys outside the range: read with the partials
    # where they come to the host anyway, else (one device) alone, one read-back
    if len(partials) == 1:
        total = partials[0]
        outside = engine.parts[0].device.to_host(total[num_keys:])[0]
    else:
        total = np.zeros(num_keys + 1, np.float64)
        for part, partial in zip(engine.parts, partials):
            total += part.device.to_host(partial)
        outside = total[num_keys]
    if outside:
        raise ValueError(f"key_totals: state {key!r} holds {int(outside)} key(s) outside "
                         f"[0, {num_keys}); keys are >= 0 and num_keys above the largest")
    _each(engine, lambda part: keyed_ops.put_table(part, into, total[:num_keys]))


def arc_sums(frontier, *, weight: str | None = None, into: str, where=None, loops: bool = True,
             **scalars) -> None:
    """Per vertex of the frontier, the sum of the arc state ``weight`` (None: one per arc)
    over its arcs that ``where`` keeps, into the float64 state ``into``.

    Parameters
    ----------
    frontier : Frontier
        The vertices whose arcs are summed (others keep their value).
    weight : str, optional
        An arc state (:func:`arc_state`); None counts the arcs.
    into : str
        Per-vertex float64 state.
    where : callable, optional
        ``where(s, v, u)``: a bool mask of the arcs ``v -> u`` to count (module docstring).
    loops : bool, optional
        False: arcs ``v -> v`` do not count.
    **scalars
        Values the callables read from ``s``.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import keyed
    >>> with make_engine(nx.star_graph(3), "bsp", backend="cpu", devices=1) as engine:
    ...     engine.state("n", np.float64)
    ...     keyed.arc_sums(engine.all_vertices(), into="n", where=lambda s, v, u: u > 1)
    ...     engine.gather("n").tolist()
    [2.0, 0.0, 0.0, 0.0]
    """
    engine = _engine(frontier, "arc_sums")
    _each(engine, lambda part, fr: keyed_ops.arc_sums(part, fr, weight, where, loops, into,
                                                      scalars), frontier.parts)


def best_key(frontier, key: str, *, own: str, into: str, weight: str | None = None, score=None,
             where=None, loops: bool = True, ties: str = "smallest", **scalars) -> Frontier:
    """Per vertex ``v`` of the frontier, the key that scores best among its neighbours' keys
    (table ``key``, read at each arc's other end) and its own (state ``own``, a candidate even
    with no arc to it), into the state ``into``.

    The arcs ``v -> u`` that ``where`` keeps are grouped by ``key[u]`` (keys < 0 count for
    none) and each group's ``weight`` summed (None: the arcs counted): ``w``. A key's score is
    ``score(s, v, k, w)`` (default: ``w``); the best has the greatest score, ties going to the
    vertex's own key, then to the ``"smallest"`` (or ``"largest"``) key. A NaN score counts as
    -inf. A vertex without a key of its own (-1) keeps none unless some key scores above -inf. A segmented reduction
    by (vertex, key) and an argmax per vertex, deterministic for given scores whatever the
    devices.

    Parameters
    ----------
    frontier : Frontier
        The vertices that choose.
    key : str
        The table of every vertex's key, by global id (:func:`share`).
    own : str
        Per-vertex state: each vertex's own key.
    into : str
        Per-vertex state: the chosen key (its own when nothing scores better).
    weight : str, optional
        An arc state (:func:`arc_state`); None counts the arcs.
    score : callable, optional
        ``score(s, v, k, w)``: a float per group (module docstring).
    where : callable, optional
        ``where(s, v, u)``: a bool mask of the arcs that count.
    loops : bool, optional
        False: arcs ``v -> v`` do not count.
    ties : {"smallest", "largest"}, optional
        Which key wins a tie that the vertex's own key is not in.
    **scalars
        Values the callables read from ``s``.

    Returns
    -------
    Frontier
        The vertices whose chosen key is not their own.

    Raises
    ------
    ValueError
        An unknown ``ties``; a callable's answer of the wrong shape; a key >= 2**31.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import keyed
    >>> G = nx.Graph([(0, 1), (0, 2), (0, 3), (3, 4)])
    >>> with make_engine(G, "bsp", backend="cpu", devices=1) as engine:
    ...     engine.state("label", np.int32, values=np.array([0, 5, 5, 7, 7]))
    ...     engine.state("best", np.int32)
    ...     keyed.share(engine.all_vertices(), "label", into="label_of")
    ...     moved = keyed.best_key(engine.all_vertices(), "label_of", own="label", into="best")
    ...     engine.gather("best").tolist(), moved.vertices().tolist()
    ([5, 0, 0, 7, 7], [0, 1, 2])
    """
    if ties not in TIES:
        raise ValueError(f"best_key: ties must be one of {', '.join(TIES)}; got {ties!r}")
    engine = _engine(frontier, "best_key")
    parts = _each(engine, lambda part, fr: keyed_ops.best_key(
        part, fr, key, own, weight, score, where, loops, ties, into, scalars), frontier.parts)
    return engine._frontier([DeviceFrontier(part.device, part.size, queue=q)
                             for part, q in zip(engine.parts, parts)])


def smallest_missing_key(frontier, key: str, *, into: str, where=None, loops: bool = True,
                         **scalars) -> None:
    """Per vertex of the frontier, the smallest key >= 0 that none of its neighbours (over the
    arcs ``where`` keeps; keys < 0 are none) has in the table ``key``, into the state ``into``:
    the colour a greedy colouring gives it.

    Parameters
    ----------
    frontier : Frontier
        The vertices coloured.
    key : str
        The table of every vertex's key (-1: none yet), by global id.
    into : str
        Per-vertex integer state.
    where : callable, optional
        ``where(s, v, u)``: a bool mask of the arcs that count.
    loops : bool, optional
        False: arcs ``v -> v`` do not count.
    **scalars
        Values the callables read from ``s``.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import keyed
    >>> with make_engine(nx.star_graph(3), "bsp", backend="cpu", devices=1) as engine:
    ...     engine.state("colour", np.int32, values=np.array([-1, 0, 1, 3]))
    ...     keyed.share(engine.all_vertices(), "colour", into="colour_of")
    ...     keyed.smallest_missing_key(engine.frontier([0]), "colour_of", into="colour")
    ...     int(engine.gather("colour")[0])
    2
    """
    engine = _engine(frontier, "smallest_missing_key")
    _each(engine, lambda part, fr: keyed_ops.smallest_missing_key(
        part, fr, key, where, loops, into, scalars), frontier.parts)


def key_pair_sums(frontier, key: str, other: str, weights) -> tuple:
    """The arcs ``v -> u`` of the frontier's vertices grouped by ``(key[v], other[u])`` (the
    state ``key``, the table ``other``), with each arc state of ``weights`` summed: the arcs
    of the graph whose vertices are the keys. On the host, over every device.

    Parameters
    ----------
    frontier : Frontier
        The vertices whose arcs count.
    key : str
        Per-vertex state: each row's key.
    other : str
        The table of every vertex's key, by global id.
    weights : str or sequence of str
        Arc states to sum (:func:`arc_state`): one name, or several.

    Returns
    -------
    tuple
        ``(a, b, sums)``: int64 host arrays of the distinct pairs, sorted by ``a`` then ``b``,
        and a float64 array per weight, aligned with them.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.graph import load_graph
    >>> from groute.operators import keyed
    >>> g = load_graph(nx.path_graph(4))
    >>> with make_engine(g, "bsp", backend="cpu", devices=2) as engine:
    ...     keyed.arc_state(engine, "w", np.ones(g.num_edges))
    ...     engine.state("team", np.int32, values=np.array([0, 0, 1, 1]))
    ...     keyed.share(engine.all_vertices(), "team", into="team_of")
    ...     a, b, (w,) = keyed.key_pair_sums(engine.all_vertices(), "team", "team_of", ["w"])
    ...     a.tolist(), b.tolist(), w.tolist()
    ([0, 0, 1, 1], [0, 1, 0, 1], [2.0, 1.0, 1.0, 2.0])
    """
    engine = _engine(frontier, "key_pair_sums")
    # one arc state's name is one name, not its letters
    weights = [weights] if isinstance(weights, str) else list(weights)
    pieces = _each(engine, lambda part, fr: keyed_ops.key_pair_sums(part, fr, key, other,
                                                                    weights, {}), frontier.parts)
    if len(pieces) == 1:
        return pieces[0]
    a = np.concatenate([p[0] for p in pieces])
    b = np.concatenate([p[1] for p in pieces])
    sums = [np.concatenate([p[2][i] for p in pieces]) for i in range(len(weights))]
    return keyed_ops.group(a, b, sums, np)
