"""Work items: a vertex and the value it carries (depth, distance), packed into one int64.

The value's 32 bits (an int32, or a float32's bit pattern) go in the high half and the vertex in
the low half. Values are never negative, and a non-negative float32's bits order like the float,
so a packed item sorts by value then vertex, one 64-bit word moves per item on every link, and
the same layout serves NumPy and the CUDA kernels (``groute/operators/values.cuh`` unpacks it the same way).
"""
from __future__ import annotations

import numpy as np

ITEM_DTYPE = np.dtype(np.int64)

#: Value kinds: "int" (int32 depths or integer distances), "float" (float32 distances).
VALUE_KINDS = ("int", "float")

#: The "unreached" value of each kind, as stored (int32 max; +inf).
INT_INF = np.int32(np.iinfo(np.int32).max)
FLOAT_INF = np.float32(np.inf)


def value_dtype(kind: str):
    if kind not in VALUE_KINDS:
        raise ValueError(f"value kind must be one of {VALUE_KINDS}, got {kind!r}")
    return np.dtype(np.int32) if kind == "int" else np.dtype(np.float32)


def infinity(kind: str):
    return INT_INF if kind == "int" else FLOAT_INF


def value_bits(values, xp=np):
    """The int32 bit patterns of int32 or float32 values (a view, no copy)."""
    return values.view(xp.int32)


def pack(vertices, values, xp=np):
    """Items from vertex ids (< 2**31) and int32/float32 values (>= 0)."""
    bits = value_bits(xp.ascontiguousarray(values), xp).astype(xp.int64)
    return (bits << 32) | vertices.astype(xp.int64)


def unpack(items, kind: str, xp=np):
    """``(vertices int64, values)`` of packed items."""
    vertices = items & 0xFFFFFFFF
    bits = (items >> 32).astype(xp.int32)
    return vertices, bits.view(value_dtype(kind))
