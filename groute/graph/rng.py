"""Counter-based random numbers that come out bit-identical on NumPy and CuPy.

Generators must give the same graph for the same seed on every backend, so they cannot use the
backends' own RNGs (NumPy's PCG64 and CuPy's XORWOW/Philox streams differ). Instead every random
number is a pure function of ``(seed, stream, counter)``: the SplitMix64 finaliser (Steele et al.,
"Fast splittable pseudorandom number generators", OOPSLA 2014) applied to the counter mixed with a
per-(seed, stream) key. It is plain uint64 arithmetic (add, xor, shift, wrapping multiply), which
both array modules evaluate identically, and it is embarrassingly parallel: any chunk of the
sequence can be produced without the ones before it, which is what lets generators work in
edge-chunks of bounded memory.

Every function takes ``xp`` (``numpy`` or ``cupy``) and returns arrays of that module.
"""
from __future__ import annotations

import numpy as np

from groute.ints import is_int

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


def _mix_int(z: int) -> int:
    """SplitMix64 finaliser on a Python int (used to derive keys on the host)."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def checked_seed(seed, what: str = "seed", below: int | None = None) -> int:
    """``seed`` as an int, when it is one (NumPy's too, not a bool) >= 0 and, with ``below``,
    less than it (METIS takes a C int); else a TypeError or ValueError naming ``what``.

    Examples
    --------
    >>> checked_seed(3), checked_seed(np.int64(4))
    (3, 4)
    >>> checked_seed("x")
    Traceback (most recent call last):
    TypeError: seed must be an int >= 0, got 'x' (str)
    """
    if not is_int(seed):
        raise TypeError(f"{what} must be an int >= 0, got {seed!r} ({type(seed).__name__})")
    if seed < 0 or (below is not None and seed >= below):
        bound = f" and below {below:,}" if below is not None else ""
        raise ValueError(f"{what} must be an int >= 0{bound}, got {seed}")
    return int(seed)


def stream_key(seed: int, stream: int) -> int:
    """The 64-bit key of one independent stream of a seed (seed and stream any ints >= 0)."""
    if seed < 0 or stream < 0:
        raise ValueError(f"seed and stream must be non-negative, got seed={seed}, stream={stream}")
    return _mix_int(_mix_int((seed + _GOLDEN) & _MASK64) ^ ((stream * _GOLDEN + 0x632BE59BD9B4E019) & _MASK64))


def mix64(x, xp=np):
    """SplitMix64 finaliser applied elementwise to a uint64 array (a bijection on uint64)."""
    u64 = xp.uint64
    z = x ^ (x >> u64(30))
    z *= u64(_M1)
    z ^= z >> u64(27)
    z *= u64(_M2)
    z ^= z >> u64(31)
    return z


def hash_counters(counters, seed: int, stream: int, xp=np):
    """64 random bits for each uint64 counter in ``counters`` (any shape)."""
    key = stream_key(seed, stream)
    x = counters.astype(xp.uint64, copy=True)
    x *= xp.uint64(_GOLDEN)          # spread consecutive counters before the xor with the key
    x ^= xp.uint64(key)
    return mix64(x, xp)


def random_bits(start: int, count: int, seed: int, stream: int, xp=np):
    """Random uint64 words for counters ``start .. start+count-1`` of one stream."""
    counters = xp.arange(start, start + count, dtype=xp.uint64)
    return hash_counters(counters, seed, stream, xp)


def bounded(bits, low: int, high: int, xp=np):
    """Map uint64 random words to integers in ``[low, high]`` (inclusive), as int64.

    Uses the top 32 bits times the range, shifted down (Lemire's multiply-shift): integer-only,
    so identical on every backend; the bias is below range/2**32.
    """
    span = int(high) - int(low) + 1
    if span < 1 or span > 1 << 32:
        raise ValueError(f"need low <= high and a range of at most 2**32, got [{low}, {high}]")
    top = bits >> xp.uint64(32)
    return (top * xp.uint64(span) >> xp.uint64(32)).astype(xp.int64) + int(low)


#: counters hashed per step while a permutation's keys are made (bounded temporaries)
PERMUTATION_STEP = 1 << 20


def random_permutation(n: int, seed: int, stream: int, xp=np, dtype=None):
    """A random permutation of ``0..n-1`` (``dtype``, default int64), identical on every
    backend.

    Sorting keys that are unique by construction (random high bits, the index in the low bits)
    makes the result independent of the sort algorithm's stability. The keys are made in
    steps and sorted in place, so the peak is the keys and the result (8 bytes per element
    plus the result's own), not several key-sized temporaries.
    """
    dtype = xp.int64 if dtype is None else dtype
    if n <= 1:
        return xp.arange(n, dtype=dtype)
    bits = max(1, int(n - 1).bit_length())
    high, low = xp.uint64(bits), xp.uint64((1 << bits) - 1)
    keys = xp.empty(n, dtype=xp.uint64)
    for start in range(0, n, PERMUTATION_STEP):
        stop = min(start + PERMUTATION_STEP, n)
        part = random_bits(start, stop - start, seed, stream, xp)
        part >>= high
        part <<= high
        part |= xp.arange(start, stop, dtype=xp.uint64)
        keys[start:stop] = part
    del part
    keys.sort()
    keys &= low
    return keys.astype(dtype)


def get_xp(backend: str | None = None, xp=None):
    """Resolve the array module: an explicit ``xp`` wins; ``backend`` is "numpy"/"cpu",
    "cupy"/"cuda", or "auto" (CuPy if it imports and sees a GPU, else NumPy)."""
    if xp is not None:
        return xp
    if backend in (None, "numpy", "cpu"):
        return np
    if backend in ("cupy", "cuda", "auto"):
        try:
            import cupy  # imported lazily: CI machines have no CuPy
            if cupy.cuda.runtime.getDeviceCount() > 0:
                return cupy
        except Exception as exc:  # ImportError, or a CUDA runtime without a device
            if backend != "auto":
                raise RuntimeError(f"backend {backend!r} needs CuPy and a CUDA GPU: {exc}") from exc
        return np
    raise ValueError(f"unknown backend {backend!r}: use 'numpy', 'cupy' or 'auto'")
