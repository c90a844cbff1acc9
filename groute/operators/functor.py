"""What an algorithm supplies to the operators: a :class:`Functor`, one step for both backends.

A functor is the body of a device function on one vertex ``v`` (a local position: the
``v``-th vertex the device owns), written twice:

- ``cuda``: C statements, the body of ``__device__ bool f(int v, <params>)``. Falling off the
  end returns ``false``. Compiled into the operators' generated kernels
  (:mod:`groute.operators.generated`), which include the shared headers, so ``atomicSub``,
  ``bitmap_test`` and friends are at hand.
- ``numpy``: the same step vectorised over many vertices at once, ``numpy(state, v)`` where
  ``v`` is an int64 array of local positions and ``state`` a dict of the named parameters (the
  device's arrays, the scalars). What it returns depends on the operator (:mod:`groute.operators.api`):
  ``advance`` wants the positions that join the output frontier, ``filter`` a bool mask aligned
  with ``v``, ``compute`` nothing.

A functor given a :class:`Message` is an *arc* step: ``advance`` computes the message on the
source's device from the source ``u``'s state (``depth[u] + 1``, ``sigma[u]``) and the visit
of the target ``v`` receives it as ``m`` (CUDA: a ``const`` local of the message's type;
NumPy: ``numpy(state, v, m)`` with ``m`` aligned with ``v``). The message travels with the
target's id when another device owns ``v``, so a visit never reads another device's state.

A functor given a :class:`Gather` as well is a *gathering* arc step: each candidate ``v``
combines the messages of all its arcs from the frontier (``Gather.op``: sum, min, max) before
the body runs, once, with the combination as ``m`` (NumPy: ``numpy(state, v, m)`` with ``v``
distinct). A pull then needs no atomics where one thread or warp owns ``v``, and a push
combines into a per-vertex accumulator with atomics and runs the body after the last arc, so
the answer is the same either way (up to the order of a floating-point sum).

``params`` names the algorithm's state the body reads and writes, as a C parameter list
(``"int* degree, const int* core, int k"``). Arrays are per-vertex state the engine holds on
every device (``engine.state(name, ...)``), passed by name; scalars are given per call
(``advance(frontier, f, k=3)``). Parameter types are C's ``int``, ``long long``, ``float``,
``double``, ``unsigned int`` and pointers to them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: C types a parameter may have, and the NumPy dtype of each
C_TYPES = {"int": np.int32, "unsigned int": np.uint32, "unsigned": np.uint32,
           "long long": np.int64, "unsigned long long": np.uint64, "float": np.float32,
           "double": np.float64}
_PARAM = re.compile(r"^\s*(const\s+)?([A-Za-z_][A-Za-z_ ]*?)\s*(\*?)\s*([A-Za-z_]\w*)\s*$")
#: names the generated kernels give their own parameters (their locals and the push functor's
#: members do not clash: ``groute_``-prefixed, and the functor keeps the parameters in a
#: struct of their own); a parameter may not take them, nor begin with ``groute_``
RESERVED = frozenset({"v", "u", "m", "msgs", "remote_msg", "i", "n", "first", "end", "indptr", "indices", "cur", "items",
                      "out", "out_count", "out_bits", "remote", "remote_count", "front_bits",
                      "cand_bits", "counters", "big_items", "big_first_chunk"})

#: the arguments of ``advance``, ``filter`` and ``compute``: a scalar is given as a keyword of
#: the operator call, so it may not take one of these names
OPERATOR_KEYWORDS = frozenset({"frontier", "functor", "direction", "over", "candidates"})


@dataclass(frozen=True)
class Param:
    """One parameter of a functor: its name, its NumPy dtype, and whether it is an array."""

    name: str
    dtype: np.dtype
    array: bool
    const: bool
    ctype: str

    def declaration(self) -> str:
        return f"{'const ' if self.const else ''}{self.ctype}{'*' if self.array else ''} {self.name}"


def parse_params(text: str) -> tuple[Param, ...]:
    """``"int* degree, int k"`` as :class:`Param` objects; ValueError naming the bad one."""
    out = []
    for piece in (p for p in text.split(",") if p.strip()):
        m = _PARAM.match(piece)
        ctype = " ".join(m.group(2).split()) if m else None
        if m is None or ctype not in C_TYPES:
            raise ValueError(f"functor parameter {piece.strip()!r}: expected '<type> name' or "
                             f"'<type>* name' with a type from {', '.join(C_TYPES)}")
        name = m.group(4)
        if name in RESERVED or name.startswith("groute_"):
            raise ValueError(f"functor parameter {name!r}: the name is the operators' own "
                             f"(reserved: {', '.join(sorted(RESERVED))})")
        if not m.group(3) and name in OPERATOR_KEYWORDS:
            raise ValueError(f"functor parameter {name!r}: a scalar is passed as a keyword of "
                             f"the operator call, and {name!r} is one of the operators' own "
                             f"({', '.join(sorted(OPERATOR_KEYWORDS))}); rename it")
        if any(p.name == name for p in out):
            raise ValueError(f"functor parameter {name!r} appears twice")
        out.append(Param(name, np.dtype(C_TYPES[ctype]), bool(m.group(3)), bool(m.group(1)),
                         ctype))
    return tuple(out)


@dataclass(frozen=True)
class Message:
    """What an advance carries along each arc ``u -> v`` to the visit of ``v``: a value of C
    type ``ctype`` (``"int"``, ``"double"``, ...: a key of :data:`C_TYPES`), computed on the
    source's device before the visit. ``cuda``: a C expression over ``u`` (the source's local
    position) and the functor's parameters; ``numpy(state, u)``: the same, vectorised over an
    int64 array ``u``. It reads the source's state while the same advance's visits may write
    other vertices' state: an algorithm whose visits write what messages read keeps the two in
    different arrays (or different levels, as BFS-like algorithms do)."""

    ctype: str
    cuda: str = ""
    numpy: Callable | None = None

    def __post_init__(self):
        if self.ctype not in C_TYPES:
            raise ValueError(f"message type {self.ctype!r}: expected one of {', '.join(C_TYPES)}")

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(C_TYPES[self.ctype])

    @property
    def words(self) -> int:
        """int32 words one message takes in an exchange between devices."""
        return self.dtype.itemsize // 4

    def numpy_body(self, where: str) -> Callable:
        if self.numpy is None:
            raise TypeError(f"{where}: the message has no numpy callable, so it cannot run on "
                            f"CPU devices")
        return self.numpy

    def cuda_body(self, where: str) -> str:
        if not self.cuda.strip():
            raise TypeError(f"{where}: the message has no cuda expression, so it cannot run on "
                            f"CUDA devices")
        return self.cuda


#: how a :class:`Gather` combines messages: the NumPy ufunc of each (its ``.at`` combines in place)
GATHER_OPS = {"sum": np.add, "min": np.minimum, "max": np.maximum}


@dataclass(frozen=True)
class Gather:
    """What makes an advance *gathering* (module docstring): ``op`` combines the messages of a
    candidate's arcs from the frontier (``"sum"``, ``"min"``, ``"max"`` over the message's
    type; associative and commutative, so a warp can reduce them in any order), and the
    candidates are the vertices that gather: ``cuda``, a C ``bool`` expression over ``v`` and
    the functor's parameters; ``numpy(state, v)``, a bool mask aligned with ``v``. Neither:
    every vertex gathers. The body runs only for a candidate with at least one arc from the
    frontier, as a push visits only the vertices its arcs reach.

    As for every :class:`Message`, the message must not read state the body writes: inside a
    fused loop the pull computes a member's message while other candidates' bodies run, so a
    gather whose body writes what its message reads (and whose candidates can be frontier
    members) would see either value there."""

    op: str
    cuda: str = ""
    numpy: Callable | None = None

    def __post_init__(self):
        if self.op not in GATHER_OPS:
            raise ValueError(f"Gather: op must be one of {', '.join(GATHER_OPS)}; got "
                             f"{self.op!r}")

    def identity(self, dtype) -> np.generic:
        """The value ``op`` starts from over ``dtype`` (0; the largest; the smallest)."""
        dtype = np.dtype(dtype)
        if self.op == "sum":
            return dtype.type(0)
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        big = dtype.type(np.inf) if dtype.kind == "f" else dtype.type(info.max)
        small = dtype.type(-np.inf) if dtype.kind == "f" else dtype.type(info.min)
        return big if self.op == "min" else small

    def combine(self, v, m, dtype):
        """The distinct vertices of ``v`` and, aligned, the combination of their ``m``."""
        vertices, inverse = np.unique(v, return_inverse=True)
        acc = np.full(vertices.shape[0], self.identity(dtype), dtype)
        GATHER_OPS[self.op].at(acc, inverse, m)
        return vertices, acc

    def wants(self, values, v, where: str):
        """What the candidates' callable returns for ``v`` (NumPy), a bool mask aligned with it
        when it is right (the CPU operators check it:
        :func:`groute.operators.returns.mask`)."""
        if self.numpy is None:
            if self.cuda.strip():
                raise TypeError(f"{where}: the gather's candidates have no numpy callable, so "
                                f"it cannot run on CPU devices")
            return np.ones(v.shape, bool)
        return self.numpy(values, v)

    def wants_cuda(self) -> str:
        """The candidates' C expression (every vertex: ``true``)."""
        return self.cuda.strip() or "true"


@dataclass(frozen=True)
class Functor:
    """One step of an algorithm on a vertex (module docstring): ``params``, the ``cuda`` body
    and the ``numpy`` callable; ``message``: a :class:`Message` for an arc step (``advance``
    only); ``gather``: a :class:`Gather` for a gathering one (it needs a message). ``name``
    only labels kernels and errors."""

    params: str = ""
    cuda: str = ""
    numpy: Callable | None = None
    name: str = "functor"
    message: Message | None = None
    gather: Gather | None = None
    parsed: tuple = field(init=False, repr=False, compare=False)
    #: the declarations of the arrays it declares ``const`` (read-only in NumPy too)
    const_arrays: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "parsed", parse_params(self.params))
        object.__setattr__(self, "const_arrays",
                           tuple(p.declaration() for p in self.parsed if p.array and p.const))
        if self.numpy is not None and not callable(self.numpy):
            raise TypeError(f"functor {self.name}: numpy must be a function (the CPU devices' "
                            f"form of the functor), got {type(self.numpy).__name__}")
        if not isinstance(self.cuda, str):
            raise TypeError(f"functor {self.name}: cuda must be the CUDA source text of its "
                            f"body, got {type(self.cuda).__name__}")
        if self.message is not None and not isinstance(self.message, Message):
            raise TypeError(f"functor {self.name}: message must be a groute.operators.Message, "
                            f"got {type(self.message).__name__}")
        if self.gather is not None:
            if not isinstance(self.gather, Gather):
                raise TypeError(f"functor {self.name}: gather must be a groute.operators.Gather, "
                                f"got {type(self.gather).__name__}")
            if self.message is None:
                raise ValueError(f"functor {self.name}: gather combines the messages of a "
                                 f"candidate's arcs; give it a message= as well")

    def bind(self, arrays: dict, scalars: dict, where: str) -> dict:
        """The value of every parameter: arrays by name from ``arrays`` (a device's state),
        scalars from ``scalars`` (the operator call's keywords), each checked against its
        declared type. ``where`` names the call for errors."""
        values = {}
        for p in self.parsed:
            if p.array:
                if p.name not in arrays:
                    raise KeyError(f"{where}: {self.name} reads state {p.name!r}, which the engine "
                                   f"does not hold (engine.state({p.name!r}, ...) makes it)")
                a = arrays[p.name]
                if a.dtype != p.dtype:
                    raise TypeError(f"{where}: {self.name} declares {p.declaration()!r} but state "
                                    f"{p.name!r} is {a.dtype}")
                if p.const and isinstance(a, np.ndarray):   # C refuses a write to it
                    a = a.view()
                    a.flags.writeable = False
                values[p.name] = a
            else:
                if p.name not in scalars:
                    raise TypeError(f"{where}: {self.name} needs the scalar {p.name!r} "
                                    f"(pass {p.name}=... to the operator)")
                given = scalars[p.name]
                try:
                    # one number: NumPy's type of a list or an array would be an array
                    if isinstance(given, int) and p.dtype.kind in "iu":    # the common case
                        value = p.dtype.type(given)     # OverflowError past the type's range
                    else:
                        with np.errstate(over="ignore", invalid="ignore"):    # refused below
                            value = p.dtype.type(given) if np.ndim(given) == 0 else None
                    # a float takes a number that stays finite (1e300 is no float)
                    if p.dtype.kind == "f" and value is not None and math.isinf(value) \
                            and not math.isinf(float(given)):
                        value = None
                except (TypeError, ValueError, OverflowError):
                    value = None
                values[p.name] = value
                # an integer parameter takes a whole number in its range, as the number it
                # is: C would truncate 1.7 to 1, a cast would wrap np.int64(2**40) to 0
                if value is None or (p.dtype.kind in "iu" and not isinstance(
                        given, int) and value != given):
                    raise TypeError(f"{where}: {self.name}'s scalar {p.name!r} is declared "
                                    f"{p.declaration()!r}, got {given!r} (not a number it "
                                    f"holds as it is)")
        extra = set(scalars) - {p.name for p in self.parsed if not p.array}
        if extra:
            states = sorted(extra & {p.name for p in self.parsed})
            if states:      # read from the engine's state of that name, never from a keyword
                raise TypeError(f"{where}: {self.name} reads {states} from the engine's state "
                                f"(engine.state(name, ..., values=...) sets it), not from a "
                                f"keyword")
            raise TypeError(f"{where}: {self.name} declares no parameter {sorted(extra)}")
        return values

    def numpy_body(self, where: str) -> Callable:
        """The NumPy callable; where the functor declares ``const`` arrays (:meth:`bind` gives
        them read-only), a write to one is a TypeError naming them, as CUDA's compiler refuses
        it."""
        if self.numpy is None:
            raise TypeError(f"{where}: {self.name} has no numpy callable, so it cannot run on "
                            f"CPU devices")
        const = self.const_arrays
        if not const:
            return self.numpy

        def body(*args):
            try:
                return self.numpy(*args)
            except ValueError as exc:
                if "read-only" not in str(exc):
                    raise
                raise TypeError(f"{where}: {self.name}'s numpy callable wrote to state it "
                                f"declares const ({', '.join(const)}): {exc}") from exc
        return body

    def cuda_body(self, where: str) -> str:
        if not self.cuda.strip():
            raise TypeError(f"{where}: {self.name} has no cuda body, so it cannot run on CUDA "
                            f"devices")
        return self.cuda
