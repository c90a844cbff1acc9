// PageRank kernels (apps/pr.py). Ranks are the "leaky" PageRank y = (1-d)/n + d * P^T y, in which
// the mass of dangling vertices is dropped; pr.py normalises y to sum 1 at the end, which equals
// the standard PageRank with uniform teleport and uniform dangling redistribution.
#define FULL_MASK 0xffffffffu

// BSP pull, edge-balanced: the in-arcs of this device's vertices as COO sorted by row
// (rows: local target ids, cols: global source ids). Each warp takes 32 consecutive arcs, sums
// the contributions of equal rows with a segmented warp scan and issues one atomicAdd per row
// segment, so a hub costs one atomic per 32 arcs and a low-degree row one per row.
extern "C" __global__ void pr_pull(const int* __restrict__ rows, const int* __restrict__ cols,
                                   long long m, const float* __restrict__ contrib,
                                   float* __restrict__ acc) {
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long base = warp * 32; base < m; base += nwarps * 32) {  // warp-uniform bound
        const long long e = base + lane;
        int row = -1;
        float v = 0.0f;
        if (e < m) {
            row = rows[e];
            v = __ldg(contrib + cols[e]);
        }
        // rows are sorted, so equal rows are adjacent: a Hillis-Steele scan restricted to them
        for (int off = 1; off < 32; off <<= 1) {
            const float ov = __shfl_up_sync(FULL_MASK, v, off);
            const int orow = __shfl_up_sync(FULL_MASK, row, off);
            if (lane >= off && orow == row) v += ov;
        }
        const int next = __shfl_down_sync(FULL_MASK, row, 1);
        if (row >= 0 && (lane == 31 || next != row)) atomicAdd(acc + row, v);
    }
}

__device__ __forceinline__ double warp_sum(double x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(FULL_MASK, x, off);
    return x;
}

// Block-wide sums of two values, added to out[0], out[1] with one atomic each per block.
__device__ void block_add2(double a, double b, double* out) {
    __shared__ double sa[32], sb[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) { sa[wid] = a; sb[wid] = b; }
    __syncthreads();
    if (wid == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        a = lane < nw ? sa[lane] : 0.0;
        b = lane < nw ? sb[lane] : 0.0;
        a = warp_sum(a);
        b = warp_sum(b);
        if (lane == 0) { atomicAdd(out, a); atomicAdd(out + 1, b); }
    }
}

// BSP finalize for this device's n_local vertices: y' = base + d * acc; acc is cleared for the next
// iteration; y' / outdeg (0 for dangling: its mass leaks) is stored at [offset + v] of vector j
// of outs when bit j of need[v] is set: bit 0 is this device's own vector (always set), the
// others are peers' copies (direct NVLink stores of only the vertices that peer's in-arcs read,
// CuSha-style boundary exchange). stats[0] += sum |y' - y|, stats[1] += sum y' (the host checks
// convergence from these).
extern "C" __global__ void pr_finalize(int n_local, int offset, float base, float damping,
                                       float* __restrict__ acc, float* __restrict__ y,
                                       const float* __restrict__ inv_outdeg,
                                       const unsigned long long* __restrict__ outs, int nouts,
                                       const unsigned char* __restrict__ need,
                                       double* __restrict__ stats) {
    double diff = 0.0, total = 0.0;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n_local; v += gridDim.x * blockDim.x) {
        const float ynew = base + damping * acc[v];
        acc[v] = 0.0f;
        diff += fabs((double)ynew - (double)y[v]);
        total += ynew;
        y[v] = ynew;
        const float c = ynew * inv_outdeg[v];
        const unsigned mask = need[v];
        for (int j = 0; j < nouts; ++j)
            if ((mask >> j) & 1u) reinterpret_cast<float*>(outs[j])[offset + v] = c;
    }
    block_add2(diff, total, stats);
}

// Asynchronous push sweep (residual propagation, Whang et al.): every owned vertex whose residual
// exceeds eps takes it (atomicExch: concurrent pushes only add), adds it to its rank and pushes
// d * r / outdeg to each out-neighbour: into the local residual when this device owns it, else into
// the dense remote accumulator (combined per vertex before it is sent). Load balance: a lane
// pushes the arcs of its own vertex when it has at most SMALL_DEGREE of them (road-like graphs);
// bigger vertices are pushed by the whole warp together (ballot), so hubs are spread over 32
// lanes. counters[0] += vertices pushed, counters[1] += arcs pushed.
#define SMALL_DEGREE 8

__device__ __forceinline__ void push_arc(int w, float c, int offset, int n_local,
                                         float* residual, float* remote_acc) {
    const int lw = w - offset;
    if (lw >= 0 && lw < n_local) atomicAdd(residual + lw, c);
    else atomicAdd(remote_acc + w, c);
}

extern "C" __global__ void pr_push(int n_local, int offset, const long long* __restrict__ indptr,
                                   const int* __restrict__ indices, float damping, float eps,
                                   float* __restrict__ residual, double* __restrict__ rank,
                                   float* __restrict__ remote_acc,
                                   unsigned long long* __restrict__ counters) {
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    unsigned long long pushed = 0, arcs = 0;
    for (long long base = warp * 32; base < n_local; base += nwarps * 32) {
        const long long v = base + lane;
        float r = 0.0f;
        long long s = 0, t = 0;
        if (v < n_local && residual[v] > eps) {
            r = atomicExch(residual + v, 0.0f);
            rank[v] += (double)r;
            s = indptr[v];
            t = indptr[v + 1];
            pushed += 1;
            arcs += (unsigned long long)(t - s);
        }
        const bool small = r > 0.0f && t - s <= SMALL_DEGREE;
        if (small && t > s) {  // t == s: dangling, its mass leaks (normalised away at the end)
            const float c = damping * r / (float)(t - s);
            for (long long e = s; e < t; ++e) push_arc(indices[e], c, offset, n_local, residual, remote_acc);
        }
        unsigned big = __ballot_sync(FULL_MASK, r > 0.0f && !small);
        while (big) {
            const int src = __ffs(big) - 1;
            big &= big - 1;
            const float rs = __shfl_sync(FULL_MASK, r, src);
            const long long bs = __shfl_sync(FULL_MASK, s, src);
            const long long bt = __shfl_sync(FULL_MASK, t, src);
            const float c = damping * rs / (float)(bt - bs);
            for (long long e = bs + lane; e < bt; e += 32)
                push_arc(indices[e], c, offset, n_local, residual, remote_acc);
        }
    }
    // one atomic per warp for the counters
    for (int off = 16; off > 0; off >>= 1) {
        pushed += __shfl_down_sync(FULL_MASK, pushed, off);
        arcs += __shfl_down_sync(FULL_MASK, arcs, off);
    }
    if (lane == 0 && pushed) {
        atomicAdd(counters, pushed);
        atomicAdd(counters + 1, arcs);
    }
}

// Apply contributions received from other devices: worklist items (float32 value bits << 32 |
// vertex), already combined per vertex by the sender: residual[vertex - offset] += value.
extern "C" __global__ void pr_apply(const long long* __restrict__ items, long long count, int offset,
                                    float* __restrict__ residual) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const long long item = items[i];
        const int v = (int)(item & 0xffffffffLL);
        atomicAdd(residual + (v - offset), __int_as_float((int)(item >> 32)));
    }
}

// Pack this device's remote accumulator for destination range [lo, hi) into worklist items and
// clear it (ballot + popc: one atomic per warp for the output slots).
extern "C" __global__ void pr_pack(float* __restrict__ remote_acc, int lo, int hi,
                                   long long* __restrict__ items, unsigned long long* __restrict__ count) {
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long base = lo + warp * 32; base < hi; base += nwarps * 32) {
        const long long v = base + lane;
        float x = 0.0f;
        if (v < hi) x = remote_acc[v];
        const unsigned keep = __ballot_sync(FULL_MASK, x != 0.0f);
        if (!keep) continue;
        unsigned long long first = 0;
        if (lane == 0) first = atomicAdd(count, (unsigned long long)__popc(keep));
        first = __shfl_sync(FULL_MASK, first, 0);
        if (x != 0.0f) {
            const unsigned rank = __popc(keep & ((1u << lane) - 1u));
            items[first + rank] = ((long long)(unsigned)__float_as_int(x) << 32) | (long long)v;
            remote_acc[v] = 0.0f;
        }
    }
}
