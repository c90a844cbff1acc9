"""Vertex ids: the names a graph's own input gives its vertices, and their positions 0..n-1.

Every array of a :class:`~groute.graph.CSRGraph` and of an app's result is indexed by
*position*: the order in which the reader or converter met the vertices. The user knows the
vertices by their *ids*, which are one of

* ``base + position``: 0-based for generated graphs, edge arrays and scipy matrices; 1-based for
  Matrix Market and DIMACS files (ids as written in the file);
* one label per position: an edge list's sparse integer ids, or its text ids (``str``, when
  some id in the file is not an integer), NetworkX node labels (any hashable objects).

:class:`VertexIds` is the one place that maps between the two; graphs and results carry one.
"""
from __future__ import annotations

import numpy as np

from groute.ints import is_int

from .arrays import vertex_outside


def label_array(labels) -> np.ndarray:
    """Labels as a graph stores them: int64 when every label is an integer (fast sorted lookup),
    else a 1-D object array holding the labels themselves (strings, tuples: kept whole)."""
    if isinstance(labels, np.ndarray) and labels.ndim == 1:
        if labels.dtype.kind in "iu":
            if labels.dtype == np.uint64 and labels.size and \
                    labels.max() > np.iinfo(np.int64).max:
                return _objects(labels.tolist())    # past int64: kept, not wrapped negative
            return labels.astype(np.int64, copy=False)
        if labels.dtype == object:
            # ints as objects: as other ints (a text label ends the look at the first)
            if labels.size and all(is_int(x) for x in labels):
                return label_array(labels.tolist())
            return labels
    items = list(labels)
    if all(is_int(x) for x in items):
        try:
            return np.array(items, dtype=np.int64)
        except OverflowError:                   # integers past int64: keep them as objects
            pass
    return _objects(items)


def _objects(items) -> np.ndarray:
    """``items`` as a 1-D object array, elementwise: a tuple label is one element."""
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out


class VertexIds:
    """The ids of the ``n`` vertices of a graph: ``base + position``, or ``labels[position]``.

    ``name`` (the graph's) appears in the errors of :meth:`position_of`.
    """

    def __init__(self, n: int, *, base: int = 0, labels=None, name: str = ""):
        self.n = int(n)
        self.base = int(base)
        self.labels = None if labels is None else label_array(labels)
        self.name = name or "the graph"
        if self.labels is not None and self.labels.shape[0] != self.n:
            raise ValueError(f"{self.labels.shape[0]} vertex labels for {self.n} vertices")
        self._order = None          # int labels: argsort, False when already increasing
        self._sorted_labels = None  # int labels in that order
        self._index = None          # other labels: {label: position}

    def repeated_label(self):
        """A label that names two vertices, or None when each is unique (or there are no
        labels). Integer labels take the order :meth:`position_of` looks them up in (one pass
        when they increase already, the readers' ids; else its argsort, kept); other labels
        the dict it looks them up in (label to position, kept when they are unique)."""
        labels = self.labels
        if labels is None:
            return None
        if labels.dtype == object:
            if self._index is not None:
                return None
            index = {}
            for position, label in enumerate(labels.tolist()):
                if index.setdefault(label, position) != position:
                    return label
            self._index = index
            return None
        if self._int_order() is None:
            return None
        ordered = self._sorted_labels
        same = np.flatnonzero(ordered[1:] == ordered[:-1])
        return int(ordered[same[0]]) if same.size else None

    def _int_order(self):
        """The argsort of integer labels, None when they increase already; found once, with
        the labels in that order (``_sorted_labels``)."""
        if self._order is None:
            labels = self.labels
            increasing = labels.shape[0] < 2 or bool(np.all(labels[1:] > labels[:-1]))
            self._order = False if increasing else np.argsort(labels, kind="stable")
            self._sorted_labels = labels if increasing else labels[self._order]
        return None if self._order is False else self._order

    @property
    def is_positions(self) -> bool:
        """Whether the ids are the positions themselves (0..n-1)."""
        return self.labels is None and self.base == 0

    def array(self) -> np.ndarray:
        """Every vertex's id, in position order (int64, or objects for labels)."""
        if self.labels is not None:
            return self.labels
        return np.arange(self.base, self.base + self.n, dtype=np.int64)

    def id_of(self, position):
        """The id of a position (int -> one id; array -> array of ids).

        Raises IndexError for a position outside ``0..n-1`` (as a negative index would not
        count from the end), TypeError for one that is not an integer."""
        if type(position) is not int or not 0 <= position < self.n:  # a plain int in range: as is
            position = self._checked_positions(position)
        out = self.labels[position] if self.labels is not None else position + self.base
        if np.ndim(out) == 0:
            return int(out) if self.labels is None or self.labels.dtype.kind == "i" else out
        return out

    def _checked_positions(self, position) -> np.ndarray:
        """``position`` (an int or an array of them) as an array, each in ``0..n-1``."""
        at = np.asarray(position)
        if at.ndim == 0 and not is_int(position):
            raise TypeError(f"a vertex position of {self.name} is an int (0..{self.n - 1}), "
                            f"got {position!r}")
        outside = vertex_outside(at, self.n, f"vertex positions of {self.name}")
        if outside is not None:
            raise IndexError(f"{outside[1]} is not a vertex position of {self.name} "
                             f"({self.n} vertices: 0..{self.n - 1})")
        return at.astype(np.int64, copy=False)

    # ------------------------------------------------------------------ ids -> positions
    def position_of(self, ident, what: str = "id"):
        """The position of one id, or an array of positions for an array (or list) of ids.

        Raises KeyError naming ``what`` (e.g. ``"source"``), the first id that is not a vertex,
        and the graph.
        """
        if self.labels is not None and self.labels.dtype == object:
            return self._position_of_label(ident, what)
        if isinstance(ident, (list, tuple)):
            # each id as given: NumPy would make a float of int64 mixed with uint64
            items = list(ident)
            fid = None
        else:
            fid = np.asarray(ident)
            items = fid.ravel().tolist() if fid.dtype.kind not in "iu" else None
        if items is not None:
            bad = [x for x in items if not is_int(x)]
            if bad:
                raise KeyError(f"{what} {bad[0]!r} is not a vertex of {self.name}: its ids are "
                               f"integers")
            try:
                fid = np.array([int(x) for x in items], dtype=np.int64).reshape(
                    (len(items),) if fid is None else fid.shape)
            except OverflowError:
                first = next(x for x in items if not -2**63 <= int(x) < 2**63)
                raise KeyError(f"{what} {first} is not a vertex of {self.name}"
                               f"{self._range_text()}") from None
        fid = fid.astype(np.int64)
        n = self.n
        if self.labels is None:
            pos = fid - self.base
            bad = (pos < 0) | (pos >= n)
        else:
            order = self._int_order()
            keys = self._sorted_labels
            at = np.searchsorted(keys, fid)
            at_c = np.minimum(at, max(n - 1, 0))
            bad = (at >= n) | (keys[at_c] != fid) if n else np.ones(fid.shape, bool)
            pos = at_c if order is None else order[at_c]
        if np.any(bad):
            first = int(fid[bad].ravel()[0])
            raise KeyError(f"{what} {first} is not a vertex of {self.name}{self._range_text()}")
        pos = np.asarray(pos, dtype=np.int64)
        return int(pos) if pos.ndim == 0 else pos

    def _range_text(self) -> str:
        if self.labels is not None:
            return ""
        if self.n == 0:
            return " (it has no vertices)"
        return f" (out of range: its ids are {self.base}..{self.base + self.n - 1})"

    def _position_of_label(self, ident, what):
        twice = self.repeated_label()
        if twice is not None:
            raise ValueError(f"the vertex labels of {self.name} repeat: {twice!r} names two "
                             f"vertices")
        index = self._index
        many = isinstance(ident, (list, np.ndarray))
        keys = ident.tolist() if isinstance(ident, np.ndarray) else (ident if many else [ident])
        out = []
        for key in keys:
            try:
                out.append(index[key])
            except (KeyError, TypeError):       # TypeError: unhashable, so not a label either
                hint = (f" (its ids are text: {str(key)!r} is one)"
                        if is_int(key) and str(key) in index else "")
                raise KeyError(f"{what} {key!r} is not a vertex of {self.name}{hint}") from None
        return np.asarray(out, dtype=np.int64) if many else out[0]
