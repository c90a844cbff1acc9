"""The reductions by key's device code on a CUDA device (:file:`keyed.cu`): the per-row choice
of :func:`groute.operators.keyed_ops.best_of_rows`, a warp per row, which array code can only
make with a float scatter (not exact on a GPU) or a second sort and a dozen launches."""
from __future__ import annotations

import functools
from pathlib import Path

KERNEL = Path(__file__).with_name("keyed.cu")

#: threads per block of the per-row kernel (a warp per row)
BLOCK = 256
#: rows per block
ROWS_PER_BLOCK = BLOCK // 32


@functools.lru_cache(maxsize=None)
def _kernel(device: int):
    """The compiled ``best_of_rows`` of ``device`` (the current one)."""
    from groute.kernels import load_module
    return load_module(KERNEL).get_function("best_of_rows")


def best_of_rows(g_row, g_key, values, mine, largest: bool):
    """Per row, the chosen key (int64; :func:`groute.operators.keyed_ops.best_of_rows`): the
    groups ``g_row`` (sorted, every row with one), ``g_key`` and ``values`` (float64, NaN
    already -inf), the rows' own keys ``mine``; on the current device's current stream."""
    import cupy
    rows = int(mine.shape[0])
    chosen = cupy.empty(rows, dtype=cupy.int64)
    if rows == 0:
        return chosen
    starts = cupy.searchsorted(g_row, cupy.arange(rows + 1, dtype=g_row.dtype))
    kernel = _kernel(cupy.cuda.Device().id)
    kernel(((rows + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK,), (BLOCK,),
           (starts.astype(cupy.int64, copy=False), g_key.astype(cupy.int64, copy=False),
            cupy.ascontiguousarray(values, dtype=cupy.float64),
            mine.astype(cupy.int64, copy=False), cupy.int32(rows), cupy.int32(bool(largest)),
            chosen))
    return chosen
