// Combining the messages of a gathering advance (groute.operators.Gather): sum, min and max over
// one C type, each as its identity (what a vertex with no message yet holds), its pairwise form
// (what one thread, or a warp's shuffle reduction, applies: no atomics) and its atomic form
// (what a push applies to the target's accumulator, and a hub's chunks to the hub's).
#pragma once

// The identities: the largest and the smallest value of each type.
template <class T> struct CombineLimits;
template <> struct CombineLimits<int> {
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
    static __device__ __forceinline__ int highest() { return 2147483647; }
};
template <> struct CombineLimits<unsigned int> {
    static __device__ __forceinline__ unsigned int lowest() { return 0u; }
    static __device__ __forceinline__ unsigned int highest() { return 0xffffffffu; }
};
template <> struct CombineLimits<long long> {
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807ll - 1; }
    static __device__ __forceinline__ long long highest() { return 9223372036854775807ll; }
};
template <> struct CombineLimits<unsigned long long> {
    static __device__ __forceinline__ unsigned long long lowest() { return 0ull; }
    static __device__ __forceinline__ unsigned long long highest() { return ~0ull; }
};
template <> struct CombineLimits<float> {
    static __device__ __forceinline__ float lowest() { return -__int_as_float(0x7f800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); }
};
template <> struct CombineLimits<double> {
    static __device__ __forceinline__ double lowest() {
        return __longlong_as_double((long long)0xfff0000000000000ull);
    }
    static __device__ __forceinline__ double highest() {
        return __longlong_as_double(0x7ff0000000000000ll);
    }
};

// Atomic sums (a signed 64-bit sum is the unsigned one in two's complement).
__device__ __forceinline__ void atomic_sum(int* p, int x) { atomicAdd(p, x); }
__device__ __forceinline__ void atomic_sum(unsigned int* p, unsigned int x) { atomicAdd(p, x); }
__device__ __forceinline__ void atomic_sum(long long* p, long long x) {
    atomicAdd((unsigned long long*)p, (unsigned long long)x);
}
__device__ __forceinline__ void atomic_sum(unsigned long long* p, unsigned long long x) {
    atomicAdd(p, x);
}
__device__ __forceinline__ void atomic_sum(float* p, float x) { atomicAdd(p, x); }
__device__ __forceinline__ void atomic_sum(double* p, double x) { atomicAdd(p, x); }

// Atomic min and max: native for the integers; a compare-and-swap loop on the bits for the
// floating types (it stops as soon as the stored value is no worse).
template <class T> __device__ __forceinline__ void atomic_min(T* p, T x) { atomicMin(p, x); }
template <class T> __device__ __forceinline__ void atomic_max(T* p, T x) { atomicMax(p, x); }
template <bool kMin>
__device__ __forceinline__ void atomic_extreme_float(float* p, float x) {
    int* q = (int*)p;
    int old = __ldcg(q);
    while (kMin ? x < __int_as_float(old) : x > __int_as_float(old)) {
        const int seen = atomicCAS(q, old, __float_as_int(x));
        if (seen == old) break;
        old = seen;
    }
}
template <bool kMin>
__device__ __forceinline__ void atomic_extreme_double(double* p, double x) {
    unsigned long long* q = (unsigned long long*)p;
    unsigned long long old = __ldcg(q);
    while (kMin ? x < __longlong_as_double((long long)old) : x > __longlong_as_double((long long)old)) {
        const unsigned long long seen =
            atomicCAS(q, old, (unsigned long long)__double_as_longlong(x));
        if (seen == old) break;
        old = seen;
    }
}
template <> __device__ __forceinline__ void atomic_min<float>(float* p, float x) {
    atomic_extreme_float<true>(p, x);
}
template <> __device__ __forceinline__ void atomic_max<float>(float* p, float x) {
    atomic_extreme_float<false>(p, x);
}
template <> __device__ __forceinline__ void atomic_min<double>(double* p, double x) {
    atomic_extreme_double<true>(p, x);
}
template <> __device__ __forceinline__ void atomic_max<double>(double* p, double x) {
    atomic_extreme_double<false>(p, x);
}

template <class T> struct CombineSum {
    static __device__ __forceinline__ T identity() { return T(0); }
    static __device__ __forceinline__ T apply(T a, T b) { return a + b; }
    static __device__ __forceinline__ void atomic(T* p, T x) { atomic_sum(p, x); }
};
template <class T> struct CombineMin {
    static __device__ __forceinline__ T identity() { return CombineLimits<T>::highest(); }
    static __device__ __forceinline__ T apply(T a, T b) { return b < a ? b : a; }
    static __device__ __forceinline__ void atomic(T* p, T x) { atomic_min(p, x); }
};
template <class T> struct CombineMax {
    static __device__ __forceinline__ T identity() { return CombineLimits<T>::lowest(); }
    static __device__ __forceinline__ T apply(T a, T b) { return b > a ? b : a; }
    static __device__ __forceinline__ void atomic(T* p, T x) { atomic_max(p, x); }
};
