"""The operators an algorithm is written with: ``advance``, ``filter``, ``compute``.

Each takes a :class:`~groute.operators.frontier.Frontier` (made by an engine, which runs the
operator on every device: :mod:`groute.engines`) and a :class:`~groute.operators.functor.Functor`;
keyword arguments are the functor's scalar parameters (``k=3``).

- ``advance(frontier, f, direction="push")``: for every arc ``u -> v`` with ``u`` in the
  frontier, ``f`` visits ``v`` on the device that owns it; the vertices a visit accepts (the
  CUDA body returns true, the NumPy callable returns their positions) form the output frontier,
  each once. ``"pull"``: every candidate ``v`` (the ``candidates`` frontier, else every vertex)
  visits its arcs from frontier members (its in-arcs: on a directed graph the engine keeps
  them, as for ``over="in"``), stopping once a visit accepts it (the NumPy backend visits them
  all: a functor must give the same answer either way, as BFS and k-core do).
  ``"auto"``: Beamer's direction rule (:mod:`groute.operators.direction`).
  ``over="in"``: the arcs into the frontier's vertices instead (``v -> u``, visiting ``v``):
  a backward traversal of a directed graph (an undirected graph's in-arcs are its out-arcs).
  A functor with a :class:`~groute.operators.functor.Message` carries a value from ``u`` to
  each visit of ``v`` (push only: ``"auto"`` pushes). A functor with a
  :class:`~groute.operators.functor.Gather` as well runs once per candidate on the combination
  of its arcs' messages, whatever the direction: it pulls without atomics (each candidate
  reads every arc from the frontier, no early exit; on a directed graph too, and
  ``over="in"``: its out-arcs) and pushes by depositing into an accumulator.
- ``filter(frontier, f)``: the vertices of ``frontier`` ``f`` keeps (CUDA body returns true;
  NumPy callable returns a bool mask aligned with ``v``).
- ``compute(frontier, f)``: run ``f`` on each vertex of ``frontier`` (returns nothing).
- ``reduce(frontier, state, op)``: one number, the sum, least or greatest of the per-vertex
  state ``state`` over the frontier's vertices on every device (one read-back per device): what
  an algorithm's host loop decides by (k-core jumps its level to the least degree left).
"""
from __future__ import annotations

from .frontier import Frontier
from .functor import Functor

#: the values ``advance``'s ``direction`` takes
DIRECTIONS = ("push", "pull", "auto")
#: the values ``advance``'s ``over`` takes: the frontier's out-arcs or in-arcs
ARCS = ("out", "in")
#: the values ``reduce``'s ``op`` takes
REDUCTIONS = ("sum", "min", "max")


def _engine_of(frontier, functor, what):
    if not isinstance(frontier, Frontier):
        raise TypeError(f"{what} takes a Frontier (from an engine: engine.all_vertices(), "
                        f"engine.frontier(ids)), got {type(frontier).__name__}")
    if not isinstance(functor, Functor):
        raise TypeError(f"{what} takes a Functor, got {type(functor).__name__}")
    return frontier.engine


def advance(frontier, functor, direction: str = "push", *, over: str = "out", candidates=None,
            **scalars):
    """The frontier of the vertices ``functor`` accepted along the arcs out of ``frontier``
    (``over="in"``: the arcs into it); the module docstring says how each direction visits.

    Parameters
    ----------
    frontier : Frontier
        From an engine (``engine.all_vertices()``, ``engine.frontier(ids)``) or an operator.
    functor : Functor
        What a visit of an arc's target does (CUDA body and NumPy callable), optionally with a
        :class:`~groute.operators.functor.Message` from the source and a
        :class:`~groute.operators.functor.Gather` of them.
    direction : {"push", "pull", "auto"}, optional
        Who walks the arcs: the frontier (push), every candidate (pull), or Beamer's rule.
    over : {"out", "in"}, optional
        The frontier's out-arcs, or its in-arcs (a backward step of a directed graph).
    candidates : Frontier, optional
        The vertices a pull may accept (default: every vertex).
    **scalars
        The functor's scalar parameters, by name.

    Returns
    -------
    Frontier
        The accepted vertices, each once.

    Raises
    ------
    TypeError
        ``frontier`` or ``functor`` of another type.
    ValueError
        A message pulled, ``over="in"`` not pushed, an unknown ``over``.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import Functor, advance
    >>> def claim(s, v):                       # NumPy: v holds the arcs' targets
    ...     v = np.unique(v[s["depth"][v] < 0])
    ...     s["depth"][v] = 1
    ...     return v
    >>> CLAIM = Functor(name="claim", params="int* depth",
    ...                 cuda="return atomicCAS(&depth[v], -1, 1) == -1;", numpy=claim)
    >>> with make_engine(nx.star_graph(3), backend="cpu", devices=1) as engine:
    ...     engine.state("depth", np.int32, -1)
    ...     advance(engine.frontier([0]), CLAIM).vertices().tolist()
    [1, 2, 3]
    """
    engine = _engine_of(frontier, functor, "advance")
    if over not in ARCS:
        raise ValueError(f"advance: over must be one of {', '.join(ARCS)}; got {over!r}")
    if functor.gather is not None:
        return engine.advance(frontier, functor, direction, candidates, scalars, over=over)
    if functor.message is not None:
        if direction == "pull":
            raise ValueError(f"advance: {functor.name} carries a message from each source, "
                             f"which a pull (the target reading its sources) cannot send; use "
                             f"direction='push'")
        if direction == "auto":
            direction = "push"
    if over == "in" and direction != "push":
        raise ValueError("advance: over='in' pushes along the frontier's in-arcs; "
                         "direction must be 'push'")
    return engine.advance(frontier, functor, direction, candidates, scalars, over=over)


def _vertex_step(frontier, functor, what):
    engine = _engine_of(frontier, functor, what)
    if functor.message is not None:
        raise TypeError(f"{what}: {functor.name} carries a message along arcs; only advance "
                        f"sends one (give {what} a functor without message=)")
    return engine


def filter(frontier, functor, **scalars):  # noqa: A001 - the operator's name in the literature
    """The vertices of ``frontier`` that ``functor`` keeps.

    Parameters
    ----------
    frontier : Frontier
        From an engine or an operator.
    functor : Functor
        A test of one vertex: the CUDA body returns true to keep ``v``, the NumPy callable a
        bool mask aligned with its ``v``; no message.
    **scalars
        The functor's scalar parameters, by name.

    Returns
    -------
    Frontier
        The kept vertices.

    Raises
    ------
    TypeError
        ``frontier`` or ``functor`` of another type, or a functor with a message.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import Functor, filter
    >>> BIG = Functor(name="big", params="const int* degree, int least",
    ...               cuda="return degree[v] >= least;",
    ...               numpy=lambda s, v: s["degree"][v] >= s["least"])
    >>> with make_engine(nx.star_graph(3), backend="cpu", devices=1) as engine:
    ...     engine.out_degree_state("degree")
    ...     filter(engine.all_vertices(), BIG, least=2).vertices().tolist()
    [0]
    """
    return _vertex_step(frontier, functor, "filter").filter(frontier, functor, scalars)


def compute(frontier, functor, **scalars) -> None:
    """Run ``functor`` on every vertex of ``frontier``.

    Parameters
    ----------
    frontier : Frontier
        From an engine or an operator.
    functor : Functor
        What happens to one vertex (its CUDA body and NumPy callable write state); no message.
    **scalars
        The functor's scalar parameters, by name.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        ``frontier`` or ``functor`` of another type, or a functor with a message.

    Examples
    --------
    >>> import numpy as np, networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import Functor, compute
    >>> def mark(s, v):
    ...     s["seen"][v] = s["value"]
    >>> MARK = Functor(name="mark", params="int* seen, int value",
    ...                cuda="seen[v] = value;", numpy=mark)
    >>> with make_engine(nx.path_graph(["a", "b", "c"]), backend="cpu", devices=1) as engine:
    ...     engine.state("seen", np.int32, 0)
    ...     compute(engine.frontier(["b"]), MARK, value=7)
    ...     engine.gather("seen").tolist()
    [0, 7, 0]
    """
    _vertex_step(frontier, functor, "compute").compute(frontier, functor, scalars)


def reduce(frontier, state: str, op: str = "sum"):  # noqa: A001 - the operator's name
    """The ``op`` of per-vertex state ``state`` over the vertices of ``frontier``.

    Parameters
    ----------
    frontier : Frontier
        From an engine or an operator.
    state : str
        The name of per-vertex state the engine holds.
    op : {"sum", "min", "max"}, optional
        The reduction (one read-back per device).

    Returns
    -------
    int or float or None
        A Python number; an empty frontier's sum is 0 and its min or max None.

    Raises
    ------
    TypeError
        ``frontier`` not a Frontier, ``state`` not a name.
    ValueError
        An unknown ``op``.

    Examples
    --------
    >>> import networkx as nx
    >>> from groute.engines import make_engine
    >>> from groute.operators import reduce
    >>> with make_engine(nx.star_graph(3), backend="cpu", devices=1) as engine:
    ...     engine.out_degree_state("degree")
    ...     reduce(engine.all_vertices(), "degree", "max"), reduce(engine.frontier([]), "degree")
    (3, 0)
    """
    if not isinstance(frontier, Frontier):
        raise TypeError(f"reduce takes a Frontier (from an engine: engine.all_vertices(), "
                        f"engine.frontier(ids)), got {type(frontier).__name__}")
    if not isinstance(state, str):
        raise TypeError(f"reduce: state must be the name of per-vertex state (a str), got "
                        f"{type(state).__name__}")
    if op not in REDUCTIONS:
        raise ValueError(f"reduce: op must be one of {', '.join(REDUCTIONS)}; got {op!r}")
    return frontier.engine.reduce(frontier, state, op)
