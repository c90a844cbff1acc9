"""What a functor's NumPy callable returns, checked where the CPU operators take it.

A CUDA functor cannot return anything but ``true`` or ``false`` for the one vertex it visits,
and a message of its declared C type; a NumPy callable returns whole arrays, and NumPy turns a
wrong one into a different answer without a word: ``-1`` indexes from the end (another device's
vertex once the position is made global), ``v + 2**32`` wraps, ``v + 0.7`` truncates, NaN cast
to ``int`` becomes some integer, and a position past the device's vertices fails later as a
bare ``IndexError`` somewhere else. So every operator call checks what the callable returned,
once per call and in whole-array passes (a dtype test, a min and a max; no Python per item),
and raises :class:`~groute.errors.DeviceError` naming the device, the call and the functor,
and the bad value: :func:`positions` (advance), :func:`mask` (filter, a gather's candidates),
:func:`messages` (a message). The operators' loops (:func:`groute.operators.run_loop`,
whichever engine runs it on CPU devices) call the same operators, so the same checks.
"""
from __future__ import annotations

import numpy as np

from groute.errors import DeviceError


def _refuse(part, where: str, what: str) -> DeviceError:
    return DeviceError(part.device.name, f"{where}: {what}")


def positions(part, functor, where: str, out) -> np.ndarray:
    """What an advance's callable returned, as int64 local positions of ``part``'s vertices
    (``0..part.size - 1``): a 1-D array of integers, each a vertex the device owns (an empty
    array of any type is none)."""
    name = functor.name
    if out is None:
        raise _refuse(part, where, f"{name}'s numpy callable returned None; advance wants the "
                                   f"positions that join the output frontier (an empty array "
                                   f"for none)")
    out = np.asarray(out)
    if out.dtype == bool:
        raise _refuse(part, where, f"{name}'s numpy callable returned a bool mask; advance "
                                   f"wants the positions that join the output frontier "
                                   f"(v[mask])")
    if out.ndim != 1:
        raise _refuse(part, where, f"{name}'s numpy callable returned an array of shape "
                                   f"{out.shape}; advance wants a 1-D array of positions")
    if not out.shape[0]:
        return np.zeros(0, np.int64)
    if out.dtype.kind not in "iu":
        first = out[:1].tolist()[0]         # a Python value, of an object array too
        raise _refuse(part, where, f"{name}'s numpy callable returned {out.dtype} positions "
                                   f"(the first is {first!r}); positions are integers, the v "
                                   f"it was given or a selection of them")
    lo, hi = out.min(), out.max()
    if lo < 0 or hi >= part.size:
        bad = lo if lo < 0 else hi
        raise _refuse(part, where, f"{name}'s numpy callable returned position {int(bad)}, "
                                   f"which is not a vertex of this device (its positions are "
                                   f"0..{part.size - 1}: the v it was given)")
    return out.astype(np.int64, copy=False)


def mask(part, who: str, where: str, out, v) -> np.ndarray:
    """What a filter's callable, or a gather's candidates (``who`` names it), returned: a bool
    mask aligned with ``v``."""
    out = np.asarray(out)
    if out.dtype != bool or out.shape != v.shape:
        raise _refuse(part, where, f"{who}'s numpy callable must return a bool mask aligned "
                                   f"with v (shape {v.shape}), got {out.dtype} {out.shape}")
    return out


def messages(part, functor, where: str, m, sources) -> np.ndarray:
    """What a message's callable returned for ``sources``: one value per source, of a type
    the message's C type holds exactly (an integer message takes integers in its range, a
    float message any number that is not too large for it), as that type."""
    m = np.asarray(m)
    name, dtype = functor.name, functor.message.dtype
    if m.shape != sources.shape:
        raise _refuse(part, where, f"{name}'s message returned shape {m.shape}, expected one "
                                   f"value per source ({sources.shape})")
    if m.dtype == dtype or not m.size or np.can_cast(m.dtype, dtype, "safe"):
        return m.astype(dtype, copy=False)
    what = f"{name}'s message ({functor.message.ctype})"
    if m.dtype.kind not in "biuf":
        raise _refuse(part, where, f"{what} returned {m.dtype} values; it takes numbers")
    if dtype.kind in "iu":
        if m.dtype.kind == "f":
            bad = ~np.isfinite(m)
            if bad.any():
                raise _refuse(part, where, f"{what} returned {m[bad][0].item()!r}, which no integer "
                                           f"message holds")
            bad = m != np.trunc(m)
            if bad.any():
                raise _refuse(part, where, f"{what} returned {m[bad][0].item()!r}, which is not an "
                                           f"integer")
        info = np.iinfo(dtype)
        lo, hi = m.min(), m.max()
        if lo < info.min or hi > info.max:
            raise _refuse(part, where, f"{what} returned {(lo if lo < info.min else hi).item()!r}, "
                                       f"beyond its range {info.min}..{info.max}")
    else:
        bad = np.isfinite(m) & (np.abs(m) > np.finfo(dtype).max)
        if bad.any():
            raise _refuse(part, where, f"{what} returned {m[bad][0].item()!r}, too large for it")
    return m.astype(dtype)
