// Values and items of the traversal operators: int32 depths/distances, or the bits of a
// non-negative float32 distance, and (vertex, value) items packed into one int64.
//
// Values are stored as int bit patterns. Non-negative floats order like their bits, so every
// comparison and every atomicMin works on the int; only adding a weight differs (VALUE_FLOAT).
// Items are packed int64: (value bits << 32) | vertex, as groute/worklist/items.py.
#pragma once

#ifndef VALUE_FLOAT
#define VALUE_FLOAT 0
#endif
#ifndef WEIGHTS          // 0: none, 1: int32 weights, 2: float32 weights
#define WEIGHTS 0
#endif

#if WEIGHTS == 2
typedef float weight_t;
#else
typedef int weight_t;
#endif

#define INT_INF 0x7fffffff
#define FLOAT_INF_BITS 0x7f800000
#if VALUE_FLOAT
#define VALUE_INF FLOAT_INF_BITS
#else
#define VALUE_INF INT_INF
#endif

__device__ __forceinline__ int value_add(int d, weight_t w) {
#if VALUE_FLOAT
    return __float_as_int(__int_as_float(d) + (float)w);
#else
    long long s = (long long)d + (long long)w;
    return s >= (long long)INT_INF ? INT_INF - 1 : (int)s;   // saturate below "unreached"
#endif
}

// The soft-priority threshold after the near work ran out: delta beyond the larger of the
// old threshold and the least deferred value (saturating at "unreached" for ints). A float
// delta too small to move past the base takes the next float up: the step always admits a
// deferred value the last window did not (groute/worklist/priority.py, on the host).
__device__ __forceinline__ int next_threshold(int thr, int far_min, int delta) {
    int base = thr > far_min ? thr : far_min;
#if VALUE_FLOAT
    if (base >= VALUE_INF) return VALUE_INF;
    const float b = __int_as_float(base);
    const float s = b + __int_as_float(delta);
    return s > b ? __float_as_int(s) : base + 1;    // non-negative floats order as their bits
#else
    long long s = (long long)base + delta;
    return s >= (long long)INT_INF ? INT_INF : (int)s;
#endif
}

__device__ __forceinline__ long long pack_item(int vertex, int value) {
    return ((long long)value << 32) | (unsigned int)vertex;
}
__device__ __forceinline__ int item_vertex(long long item) { return (int)(item & 0xffffffffLL); }
__device__ __forceinline__ int item_value(long long item) { return (int)(item >> 32); }
