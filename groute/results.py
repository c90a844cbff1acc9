"""What every graph app returns: :class:`AppResult`, and the stats key sets apps document.

Solvers (:mod:`groute.solver`) work on positions, the graph's internal 0..n-1 order
(``graph.vertex_of(id)`` maps an id to one). Every result's arrays are indexed by position and
carry the ids (:attr:`AppResult.ids`); :meth:`AppResult.to_dict` answers in ids throughout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from groute.graph.ids import VertexIds


@dataclass
class AppResult:
    """What an app returns: ``values[i]`` belongs to the vertex at position ``i``, whose id in
    the graph's own terms is ``ids[i]``.

    ``time_s``: time of the algorithm alone (no partitioning, upload or download), measured with
    CUDA events / a synchronised clock. ``stats``: work counters (items processed per device,
    items sent per link, rounds, deferrals, bytes moved between devices, ...).
    ``vertex_ids``: the graph's :class:`~groute.graph.ids.VertexIds` (``None``: ids are
    positions). ``unreached``: the value of vertices the run did not reach (-1 BFS, inf SSSP),
    which :meth:`to_dict` leaves out as NetworkX does. ``values_are_vertices``: the values are
    positions too (CC's labels: the smallest position in the component), translated to ids by
    :meth:`to_dict`. ``device_values``: the answer as a CuPy array on the one CUDA device that
    computed it, where the solver kept it (:meth:`to_cupy`). ``predecessors``: BFS and SSSP run
    with ``predecessors=True``: the position of each vertex's parent in a shortest-path tree,
    -1 for the sources and unreached vertices (:meth:`to_predecessors`, :meth:`path_to`).
    """

    values: np.ndarray
    time_s: float
    stats: dict = field(default_factory=dict)
    vertex_ids: VertexIds | None = None
    unreached: object = None
    values_are_vertices: bool = False
    device_values: object = field(default=None, repr=False)
    predecessors: np.ndarray | None = field(default=None, repr=False)

    @property
    def ids(self) -> np.ndarray:
        """The graph's own id of every position (int64, or objects for labels)."""
        if self.vertex_ids is None:
            return np.arange(np.asarray(self.values).shape[0], dtype=np.int64)
        return self.vertex_ids.array()

    def to_dict(self) -> dict:
        """``{id: value}`` in the graph's own ids (Python scalars), as NetworkX answers: vertices
        the run did not reach are left out; CC's labels are ids too (the representative's)."""
        values = np.asarray(self.values)
        keep = slice(None) if self.unreached is None else values != self.unreached
        ids = self.ids
        shown = ids[values[keep]] if self.values_are_vertices else values[keep]
        return dict(zip(ids[keep].tolist(), shown.tolist()))

    def components(self) -> list[set]:
        """The components of a result whose values are representatives (CC, SCC), as sets of
        ids, as NetworkX's ``connected_components`` and ``strongly_connected_components``
        yield them; ordered by their representative's position."""
        if not self.values_are_vertices:
            raise ValueError("components(): this result's values are not component labels "
                             "(only CC and SCC results have components)")
        from groute.graph.reference import label_groups
        ids = self.ids
        return [set(ids[members].tolist()) for members in label_groups(self.values)]

    def to_predecessors(self) -> dict:
        """``{id: parent's id}`` over the vertices that have a parent (reached, not a source),
        as ``dict(networkx.bfs_predecessors(G, s))``."""
        parent = self._parents()
        has = parent >= 0
        ids = self.ids
        return dict(zip(ids[has].tolist(), ids[parent[has]].tolist()))

    def paths(self) -> dict:
        """``{id: [ids on a shortest path from a source to it, source first]}`` over every
        vertex the run reached, as NetworkX's ``single_source_shortest_path`` answers; each
        path is its parent's and the vertex (the tree of :meth:`to_predecessors`)."""
        parent = self._parents()
        values = np.asarray(self.values)
        reached = np.flatnonzero(values != self.unreached) if self.unreached is not None \
            else np.arange(values.shape[0])
        ids = self.ids.tolist()
        up = parent.tolist()
        out = {}
        for v in reached.tolist():
            chain = []          # v and its ancestors without a path yet, nearest first
            while v not in out and v >= 0:
                chain.append(v)
                v = up[v]
                if len(chain) > len(up):
                    raise RuntimeError("the parents form a cycle; they are not from a "
                                       "finished run")
            above = out[v] if v >= 0 else []
            for w in reversed(chain):
                above = above + [ids[w]]
                out[w] = above
        return {ids[v]: out[v] for v in reached.tolist()}

    def path_to(self, target) -> list:
        """The ids on a shortest path from a source to ``target`` (one of the graph's ids),
        source first. ``networkx.NetworkXNoPath`` (a ValueError without NetworkX) when the run
        did not reach ``target``."""
        parent = self._parents()
        if self.vertex_ids is None:
            t = int(target)
            if not 0 <= t < parent.shape[0]:
                raise ValueError(f"target {target!r} is not a vertex (0..{parent.shape[0] - 1})")
        else:
            try:
                t = int(self.vertex_ids.position_of(target, "target"))
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
        if np.asarray(self.values)[t] == self.unreached:
            raise _no_path(f"target {target!r} is not reachable from the sources")
        return self.ids[path(parent, t)].tolist()

    def _parents(self) -> np.ndarray:
        if self.predecessors is None:
            raise ValueError("this result has no predecessors: run BFS or SSSP with "
                             "predecessors=True")
        return np.asarray(self.predecessors)

    def to_cupy(self):
        """The answer as a CuPy array: the one kept on the GPU that computed it (no copy; BFS and
        SSSP on one CUDA device), else one host-to-device copy of :attr:`values` onto CuPy's
        current device (several devices, PageRank, CC). Positions as :attr:`values`."""
        if self.device_values is not None:
            return self.device_values
        try:
            import cupy
        except ImportError:
            raise RuntimeError("to_cupy() needs CuPy (pip install cupy-cuda12x), and this result "
                               "was computed on CPU devices: its answer is .values, a NumPy "
                               "array") from None
        return cupy.asarray(self.values)


def _no_path(message):
    """NetworkX's NetworkXNoPath where NetworkX is installed (callers of a NetworkX-style
    ``shortest_path`` catch it), else a ValueError."""
    try:
        from networkx import NetworkXNoPath
    except ImportError:
        return ValueError(message)
    return NetworkXNoPath(message)


def complete_stats(keys, stats: dict) -> dict:
    """``stats`` over an app's documented key set ``keys``, in that order, whatever path ran:
    None where that path has no such counter. A key outside the set is a ValueError (an app
    that adds a counter documents it in its set)."""
    extra = set(stats) - set(keys)
    if extra:
        raise ValueError(f"stats keys {sorted(extra)} are not in the documented set {keys}")
    return {key: stats.get(key) for key in keys}


def path(parent, target: int) -> list[int]:
    """The positions from a source to ``target`` along ``parent`` (a host array of parent
    positions, -1 at the sources), source first; ``[target]`` for a source. The caller checks
    that ``target`` was reached."""
    steps = [int(target)]
    while parent[steps[-1]] >= 0:
        steps.append(int(parent[steps[-1]]))
        if len(steps) > parent.shape[0]:
            raise RuntimeError("the parents form a cycle; they are not from a finished run")
    return steps[::-1]
