"""How bench tables and progress lines print numbers: times, bytes and ratios."""
from __future__ import annotations

import math


def fmt_seconds(t) -> str:
    """Seconds in the unit that reads best: 850 us, 3.12 ms, 2.50 s."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.0f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def fmt_bytes(n) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_ratio(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}x"
