"""Graph specs: short strings that name a generated graph wherever a file path is accepted.

Grammar (fields separated by ``:``; positional fields first, then ``key=value`` options in any
order; numbers may be written ``1e6``, ``2^20`` or ``1_000_000``)::

    kron:SCALE[:ef=16][:a=0.57][:b=0.19][:c=0.19][:seed=0]       Graph500 Kronecker, symmetric
    rmat:SCALE[:ef=16][:a=0.57][:b=0.19][:c=0.19][:seed=0][:sym=0][:perm=0]   R-MAT, directed
    grid:SIDE | grid:ROWSxCOLS [:drop=0.1][:seed=0][:low=1][:high=64]         road-like grid
    er:N:AVGDEG[:seed=0]                                           Erdos-Renyi G(n, m), symmetric

``kron`` and ``rmat`` also take the edge factor as a second positional field (``kron:21:16``).
:func:`parse_spec` returns a :class:`GraphSpec` whose :attr:`~GraphSpec.canonical` form lists
every parameter, defaults included (the key for caches).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..ints import is_int

_KINDS = {
    "kron": (("scale", int), ("ef", int)),
    "rmat": (("scale", int), ("ef", int)),
    "grid": (("rows", int), ("cols", int)),
    "er": (("n", int), ("avg_degree", float)),
}
DEFAULTS = {
    "kron": dict(ef=16, a=0.57, b=0.19, c=0.19, seed=0),
    "rmat": dict(ef=16, a=0.57, b=0.19, c=0.19, seed=0, sym=0, perm=0),
    "grid": dict(drop=0.1, seed=0, low=1, high=64),
    "er": dict(seed=0),
}
_TYPES = dict(ef=int, a=float, b=float, c=float, seed=int, sym=int, perm=int, drop=float, low=int,
              high=int)
_SPEC_RE = re.compile(r"^(kron|rmat|grid|er):")


@dataclass(frozen=True)
class GraphSpec:
    """A parsed spec: ``kind`` and all ``params`` (defaults filled in); ``text`` as written."""
    kind: str
    params: dict = field(hash=False)
    text: str = ""

    @property
    def canonical(self) -> str:
        pos = [name for name, _ in _KINDS[self.kind]]
        head = [_fmt(self.params[p]) for p in pos]
        rest = [f"{k}={_fmt(v)}" for k, v in sorted(self.params.items()) if k not in pos]
        return ":".join([self.kind] + head + rest)


def _fmt(v) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def is_spec(text) -> bool:
    """Whether ``text`` looks like a generator spec (``kind:...``) rather than a path."""
    return isinstance(text, str) and bool(_SPEC_RE.match(text.strip().lower()))


def parse_number(text: str, typ):
    """``"1e6"``, ``"2^20"``, ``"1_000"``, ``"0.57"`` -> int or float; ints must be whole."""
    t = text.strip().replace("_", "")
    try:
        power = "^" if "^" in t else "**" if "**" in t else None
        if power:
            base, exp = t.split(power, 1)
            value = float(int(base)) ** int(exp)    # as a float: a huge power overflows at once
        else:
            value = float(t)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
    except OverflowError:
        raise ValueError(f"{text!r} is too large") from None
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    if typ is int:
        if value != int(value):
            raise ValueError(f"expected a whole number, got {text!r}")
        return int(value)
    return float(value)


def parse_spec(text: str) -> GraphSpec:
    """Parse a spec string (grammar in the module docstring); ValueError says what is wrong."""
    raw = text.strip()
    parts = raw.split(":")
    kind = parts[0].lower()
    if kind not in _KINDS:
        raise ValueError(f"unknown graph spec kind {kind!r} in {text!r}: use one of {sorted(_KINDS)}")
    fields = parts[1:]
    n_pos = next((i for i, p in enumerate(fields) if "=" in p), len(fields))
    positional, options = fields[:n_pos], fields[n_pos:]
    if any("=" not in p for p in options):
        raise ValueError(f"in {text!r}: positional fields must come before key=value options")
    params = dict(DEFAULTS[kind])
    slots = _KINDS[kind]
    if kind == "grid" and positional and "x" in positional[0].lower():
        positional = positional[0].lower().split("x", 1) + positional[1:]
    if not positional:
        raise ValueError(f"{text!r}: {kind} needs {slots[0][0]} (e.g. {_EXAMPLES[kind]})")
    if len(positional) > len(slots):
        raise ValueError(f"{text!r}: too many positional fields for {kind} (e.g. {_EXAMPLES[kind]})")
    for (name, typ), value in zip(slots, positional):
        if value == "":
            raise ValueError(f"{text!r}: empty field")
        try:
            params[name] = parse_number(value, typ)
        except ValueError as exc:
            raise ValueError(f"graph spec {text!r}, field {name}: {exc}") from None
    for opt in options:
        key, _, value = opt.partition("=")
        key = key.strip().lower()
        if key not in DEFAULTS[kind]:
            raise ValueError(f"{text!r}: unknown option {key!r} for {kind}; "
                             f"options are {sorted(DEFAULTS[kind])}")
        try:
            params[key] = parse_number(value, _TYPES[key])
        except ValueError as exc:
            raise ValueError(f"graph spec {text!r}, option {key}: {exc}") from None
    if kind == "grid":
        params.setdefault("cols", params["rows"])
    if kind == "er" and "avg_degree" not in params:
        raise ValueError(f"{text!r}: er needs n and the average degree, e.g. er:1e6:8")
    _check(kind, params, repr(text))
    return GraphSpec(kind, params, raw)


_EXAMPLES = {"kron": "kron:21", "rmat": "rmat:20", "grid": "grid:4900", "er": "er:1e6:8"}


#: a spec's parameter -> the generator argument that takes it, where the names differ
_ARGUMENTS = {"ef": "edge_factor"}


def check_generator_args(kind: str, where: str, **given) -> None:
    """The checks of a spec of ``kind``, for a generator called with ``given`` (named as in
    specs: ``scale``, ``ef``, ``a``, ...; :data:`DEFAULTS` fill the rest): a generator called
    directly must refuse what its spec refuses. ``where`` (the call) begins the error.

    Raises
    ------
    TypeError
        A whole-number parameter that is no int (a bool neither), a real one that is no number.
    ValueError
        A value the spec would refuse, in the spec's words.
    """
    types = dict(_KINDS[kind], **_TYPES)
    for key, value in given.items():
        arg = _ARGUMENTS.get(key, key)      # as the generator's signature names it
        if types[key] is int and not is_int(value):
            raise TypeError(f"{where}: {arg} is an int, got {value!r} ({type(value).__name__})")
        if types[key] is float and (isinstance(value, bool) or
                                    not isinstance(value, (int, float, np.integer, np.floating))
                                    or not math.isfinite(value)):
            raise TypeError(f"{where}: {arg} is a finite real number, got {value!r}")
    _check(kind, dict(DEFAULTS[kind], **given), where)


def _check(kind, p, where):
    """``where``: the spec (as its repr) or the generator call that gave ``p``."""
    def need(cond, msg):
        if not cond:
            raise ValueError(f"{where}: {msg}")
    if kind in ("kron", "rmat"):
        need(1 <= p["scale"] <= 31, "scale must be between 1 and 31")
        need(p["ef"] >= 1, "edge factor must be >= 1")
        need(p["ef"] << p["scale"] <= 2**40,
             "edge factor times 2^scale (the edges drawn) must be at most 2^40")
        need(min(p["a"], p["b"], p["c"]) >= 0 and p["a"] + p["b"] + p["c"] <= 1,
             "a, b, c must be >= 0 with a + b + c <= 1 (d = 1 - a - b - c)")
    if kind == "rmat":
        need(p["sym"] in (0, 1) and p["perm"] in (0, 1), "sym and perm are 0 (no) or 1 (yes)")
    if kind == "grid":
        need(p["rows"] >= 1 and p["cols"] >= 1, "grid sides must be >= 1")
        need(p["rows"] * p["cols"] < 2**31, "grid too large (vertices must fit in int32)")
        need(0 <= p["drop"] < 1, "drop must be in [0, 1)")
        need(1 <= p["low"] <= p["high"] < p["low"] + 2**32,
             "need 1 <= low <= high < low + 2^32 (weights are drawn from a 32-bit range)")
    if kind == "er":
        need(p["n"] >= 1, "n must be >= 1")
        need(0 <= p["avg_degree"] <= max(p["n"] - 1, 0),
             "the average degree must be between 0 and n - 1 (no vertex has more neighbours)")
        need(p["n"] < 2**31, "n must fit in int32")
    need(p["seed"] >= 0, "seed must be >= 0")
