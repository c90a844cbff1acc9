// The intersect operator's kernels (groute/operators/intersect_cuda.py): sorted-row
// intersections over a device's copy of a graph's rows (CSR, every row sorted by target). Each
// thread takes one arc or one pair and walks the shorter of its two rows, finding each element
// in the longer one by binary search, so its work is min(deg) * log(max deg): a hub met by a
// small vertex costs the small vertex's degree.

// The row holding arc e: the last r in [0, n) with indptr[r] <= e.
__device__ __forceinline__ long long row_of(const long long* __restrict__ indptr, long long n,
                                            long long e) {
    long long lo = 0, hi = n;
    while (hi - lo > 1) {
        const long long mid = (lo + hi) >> 1;
        if (indptr[mid] <= e) lo = mid; else hi = mid;
    }
    return lo;
}

// The position of x in indices[lo, hi) (sorted), or -1.
__device__ __forceinline__ long long find_in(const int* __restrict__ indices, long long lo,
                                             long long hi, int x) {
    const long long end = hi;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (indices[mid] < x) lo = mid + 1; else hi = mid;
    }
    return (lo < end && indices[lo] == x) ? lo : -1;
}

// Triangles over oriented rows (every arc u -> v with u before v in the degree order, so each
// triangle u < v < w is the one arc u -> v with w in both rows): for arcs [first, end), every
// w common to the rows of u and v adds x to u, v and w, where x is 1 (counts) or the product of
// the three arcs' values (sums).
template <typename Acc, bool VALUES>
__device__ void triangles(const long long* __restrict__ indptr, const int* __restrict__ indices,
                          const double* __restrict__ values, long long first, long long end,
                          long long n, Acc* acc) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = first + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < end;
         e += stride) {
        const long long u = row_of(indptr, n, e);
        const int v = indices[e];
        const long long a0 = indptr[u], a1 = indptr[u + 1], b0 = indptr[v], b1 = indptr[v + 1];
        const bool a_short = a1 - a0 <= b1 - b0;
        const long long s0 = a_short ? a0 : b0, s1 = a_short ? a1 : b1;
        const long long l0 = a_short ? b0 : a0, l1 = a_short ? b1 : a1;
        Acc mine = 0;
        for (long long i = s0; i < s1; ++i) {
            const int w = indices[i];
            const long long j = find_in(indices, l0, l1, w);
            if (j < 0) continue;
            Acc x = 1;
            if (VALUES) x = values[e] * values[i] * values[j];
            mine += x;
            atomicAdd(acc + w, x);
        }
        if (mine != 0) {
            atomicAdd(acc + u, mine);
            atomicAdd(acc + v, mine);
        }
    }
}

extern "C" __global__ void triangle_counts_k(const long long* indptr, const int* indices,
                                             long long first, long long end, long long n,
                                             unsigned long long* acc) {
    triangles<unsigned long long, false>(indptr, indices, nullptr, first, end, n, acc);
}

extern "C" __global__ void triangle_sums_k(const long long* indptr, const int* indices,
                                           const double* values, long long first, long long end,
                                           long long n, double* acc) {
    triangles<double, true>(indptr, indices, values, first, end, n, acc);
}

// For each pair i, how many targets the rows of a[i] and b[i] share; with exclude_ends, not
// counting a[i] or b[i] themselves (a self-loop puts a vertex in its own row).
extern "C" __global__ void common_k(const long long* __restrict__ indptr,
                                    const int* __restrict__ indices, const int* __restrict__ a,
                                    const int* __restrict__ b, long long pairs, int exclude_ends,
                                    long long* __restrict__ out) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        const int x = a[p], y = b[p];
        const long long a0 = indptr[x], a1 = indptr[x + 1], b0 = indptr[y], b1 = indptr[y + 1];
        const bool a_short = a1 - a0 <= b1 - b0;
        const long long s0 = a_short ? a0 : b0, s1 = a_short ? a1 : b1;
        const long long l0 = a_short ? b0 : a0, l1 = a_short ? b1 : a1;
        long long count = 0;
        for (long long i = s0; i < s1; ++i) {
            const int w = indices[i];
            if (exclude_ends && (w == x || w == y)) continue;
            if (find_in(indices, l0, l1, w) >= 0) ++count;
        }
        out[p] = count;
    }
}

// For arcs [first, end): 1 where the reverse arc (v -> u) is an arc too (a self-loop is its
// own reverse), else 0, at flags[e - first].
extern "C" __global__ void reversed_k(const long long* __restrict__ indptr,
                                      const int* __restrict__ indices, long long first,
                                      long long end, long long n,
                                      unsigned char* __restrict__ flags) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = first + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < end;
         e += stride) {
        const long long u = row_of(indptr, n, e);
        const int v = indices[e];
        flags[e - first] = find_in(indices, indptr[v], indptr[v + 1], (int)u) >= 0;
    }
}
