// Which device owns a vertex: devices own consecutive ranges of (renumbered) vertex ids, device
// j the range [offsets[j], offsets[j + 1]). A linear scan: k is at most a handful.
#pragma once

template <class T>
__device__ __forceinline__ int owner_of(const T* offsets, int k, int v) {
    int j = 0;
    while (j + 1 < k && v >= offsets[j + 1]) ++j;
    return j;
}
