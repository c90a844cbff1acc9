// The kernels of the linear iteration engines (groute/engines/iterate): the fixed point
// y = base + d * A^T (scale * y) of a LinearIteration, where d is its alpha (PageRank's damping)
// and scale the per-source share of what a vertex sends (PageRank: 1 / outdeg, 0 for a dangling
// vertex, whose mass is dropped: the "leaky" PageRank, which the solver normalises to sum 1 at
// the end, equal to the standard PageRank with uniform teleport and uniform dangling
// redistribution). The pull kernels read the scale as an array (inv_outdeg); the push kernel
// and the stopping rule use arc_share and STOP_RULE of the iteration's generated header
// (iteration.cuh, LinearIteration.header). The kernel names keep the prefix pr_ of PageRank,
// the family's first instance.
#include "persistent.cuh"
#include "iteration.cuh"
#define FULL_MASK 0xffffffffu

// What an arc carries. Unweighted (the default), an arc is its other end's global id and
// carries the share of that vertex's value as it is. With ARC_WEIGHTS (a weighted iteration,
// weighted PageRank) it is an int2: the id, and the float bits of the arc's factor, which the
// share is multiplied by (the host computes it: the weight times the share of the vertex's
// weighted out-degree over that of its arc count, LinearIteration.arc_factors), so the
// per-vertex shares, the pull's inv_outdeg and the push's arc_share, are the same either way.
#ifndef ARC_WEIGHTS
#define ARC_WEIGHTS 0
#endif
#if ARC_WEIGHTS
typedef int2 arc_t;
__device__ __forceinline__ int arc_end(arc_t a) { return a.x; }
__device__ __forceinline__ float arc_carries(arc_t a, float share) {
    return share * __int_as_float(a.y);
}
__device__ __forceinline__ arc_t no_arc() { return make_int2(-1, 0); }
#else
typedef int arc_t;
__device__ __forceinline__ int arc_end(arc_t a) { return a; }
__device__ __forceinline__ float arc_carries(arc_t, float share) { return share; }
__device__ __forceinline__ arc_t no_arc() { return -1; }
#endif

// BSP pull, edge-balanced: the in-arcs of this device's vertices as COO sorted by row
// (rows: local target ids, cols: the arcs, from global source ids). Each warp takes 32 consecutive arcs, sums
// the contributions of equal rows with a segmented warp scan and issues one atomicAdd per row
// segment, so a hub costs one atomic per 32 arcs and a low-degree row one per row.
extern "C" __global__ void pr_pull(const int* __restrict__ rows, const arc_t* __restrict__ cols,
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
            const arc_t a = cols[e];
            v = arc_carries(a, __ldg(contrib + arc_end(a)));
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

// The base term of the BSP kernels: one value for every vertex (PageRank: (1-d)/n), or with
// BASE_VECTOR a vector indexed as y (personalized PageRank: (1-d) p[v]); base_of(base, v) reads it.
#ifndef BASE_VECTOR
#define BASE_VECTOR 0
#endif
#if BASE_VECTOR
typedef const float* base_t;
__device__ __forceinline__ float base_of(base_t base, long long v) { return base[v]; }
#else
typedef float base_t;
__device__ __forceinline__ float base_of(base_t base, long long) { return base; }
#endif

// The finalize step of every BSP kernel, for one vertex: y' = base + d * sum (float), |y' - y| and
// y' added to the thread's double sums diff and total (the stats row), y' stored at *y_v; returns
// the new contribution y' / outdeg, which the caller stores into the vectors it writes.
__device__ __forceinline__ float pr_update(float sum, float yold, float inv_outdeg, float base,
                                           float damping, float* y_v, double& diff,
                                           double& total) {
    const float ynew = base + damping * sum;
    diff += fabs((double)ynew - (double)yold);
    total += ynew;
    *y_v = ynew;
    return ynew * inv_outdeg;
}

// Where every BSP kernel puts a new contribution c of its local vertex v: at *own (its own next
// vector: [offset + v] of outs[0], as the caller addresses it), then at [offset + v] of each
// peer's vector j >= 1 of outs whose bit j is set in need[v] (the peers whose in-arcs read v:
// direct NVLink stores of only the boundary, CuSha-style). nouts == 1: need is not read.
template <typename V>
__device__ __forceinline__ void pr_store(float* own, const unsigned long long* __restrict__ outs,
                                         int nouts, const unsigned char* __restrict__ need,
                                         int offset, V v, float c) {
    *own = c;
    if (nouts > 1) {
        const unsigned mask = need[v];
        for (int j = 1; j < nouts; ++j)
            if ((mask >> j) & 1u) reinterpret_cast<float*>(outs[j])[offset + v] = c;
    }
}

// BSP finalize for this device's n_local vertices: y' = base + d * acc; acc is cleared for the next
// iteration; y' / outdeg (0 for dangling: its mass leaks) is stored at [offset + v] of outs[0],
// this device's own vector, and of the peers' copies whose bit is set in need[v] (pr_store).
// stats[0] += sum |y' - y|, stats[1] += sum y' (the host checks convergence from these).
extern "C" __global__ void pr_finalize(int n_local, int offset, base_t base, float damping,
                                       float* __restrict__ acc, float* __restrict__ y,
                                       const float* __restrict__ inv_outdeg,
                                       const unsigned long long* __restrict__ outs, int nouts,
                                       const unsigned char* __restrict__ need,
                                       double* __restrict__ stats) {
    double diff = 0.0, total = 0.0;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n_local; v += gridDim.x * blockDim.x) {
        const float sum = acc[v];
        acc[v] = 0.0f;
        const float c = pr_update(sum, y[v], inv_outdeg[v], base_of(base, v), damping, y + v,
                                  diff, total);
        pr_store(reinterpret_cast<float*>(outs[0]) + (offset + v), outs, nouts, need, offset, v, c);
    }
    block_add2(diff, total, stats);
}

// The start of a BSP run on one device: its n_local values y = y0, its whole vector 0 of
// contributions = contrib0 (every vertex its in-arcs may read), and zeros in its stats words
// and the counters of the kernel in use (zero_a, zero_b: "bins" hub and per-iteration task
// counters; acc: the COO pair's sums; null when absent). pr_bsp_reset runs it as one launch
// before the per-iteration kernels, the persistent kernels before their first iteration: one
// launch instead of a CuPy call per array saves host time on every run.
__device__ __forceinline__ void bsp_reset_body(int n_local, float y0, float* __restrict__ y,
                                               int n, const float* __restrict__ contrib0,
                                               float* __restrict__ contrib,
                                               double* __restrict__ stats, int stat_words,
                                               int* __restrict__ zero_a, int na,
                                               int* __restrict__ zero_b, int nb,
                                               float* __restrict__ acc) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    // the copy dominates (n floats): 16 bytes per thread and step (allocations are aligned)
    const long long n4 = n / 4;
    for (long long i = first; i < n4; i += stride)
        reinterpret_cast<float4*>(contrib)[i] = reinterpret_cast<const float4*>(contrib0)[i];
    for (long long i = 4 * n4 + first; i < n; i += stride) contrib[i] = contrib0[i];
    for (long long i = first; i < n_local; i += stride) {
        y[i] = y0;
        if (acc != nullptr) acc[i] = 0.0f;
    }
    for (long long i = first; i < stat_words; i += stride) stats[i] = 0.0;
    for (long long i = first; i < na; i += stride) zero_a[i] = 0;
    for (long long i = first; i < nb; i += stride) zero_b[i] = 0;
}

extern "C" __global__ void pr_bsp_reset(int n_local, float y0, float* y, int n,
                                        const float* contrib0, float* contrib, double* stats,
                                        int stat_words, int* zero_a, int na, int* zero_b, int nb,
                                        float* acc) {
    bsp_reset_body(n_local, y0, y, n, contrib0, contrib, stats, stat_words, zero_a, na, zero_b,
                   nb, acc);
}

// The stopping rule itself, for one thread: iteration `row`'s rows of all devices added in
// device order (bsp_converged and the persistent kernels' barrier share it, so every path
// stops at the same iteration).
__device__ __forceinline__ bool bsp_rule(const unsigned long long* __restrict__ stats_of,
                                         int nstats, int row, double tol) {
    double diff = 0.0, mass = 0.0;
    for (int j = 0; j < nstats; ++j) {
        const double* r = reinterpret_cast<const double*>(stats_of[j]) + 2 * (long long)row;
        diff += __ldcv(r);
        mass += __ldcv(r + 1);
    }
    return STOP_RULE(diff, mass, tol);
}

// The device-side stopping check of the fused BSP kernels: whether iteration prev met the rule
// STOP_RULE(sum_j diff_j, sum_j mass_j, tol) over the stats rows of all nstats devices
// (stats_of[j]: device j's stats array, [iteration][diff, mass]; a peer's is read over peer
// access). The rows are added in device order, as the host adds them, so every device and the
// host take the same decision bit for bit. The rows are final: the launching stream waited (events) for every
// device's iteration prev, and they are read uncached (__ldcv) as written by other kernels. A
// skipped iteration leaves its row zero (0 <= 0), so the iterations queued after it skip too:
// the host can queue many and read the stats once. prev < 0: no device-side check. Called by
// every thread of a block (one barrier when prev >= 0).
__device__ __forceinline__ bool bsp_converged(const unsigned long long* __restrict__ stats_of,
                                              int nstats, int prev, double tol) {
    if (prev < 0) return false;
    __shared__ int done;
    if (threadIdx.x == 0) done = bsp_rule(stats_of, nstats, prev, tol);
    __syncthreads();
    return done != 0;
}

// BSP pull, fused (one kernel per iteration): the in-arcs of this device's vertices as CSC
// (indptr: local arc offsets per owned vertex; sources: the arcs, from global ids), so an arc
// costs one 4-byte source id (8 with ARC_WEIGHTS) plus one 4-byte gather of contrib[source] =
// y[source] / outdeg[source]. A warp takes
// 32 * K consecutive vertices per step, K per lane (K independent load chains in flight: the
// kernel is latency-bound otherwise); all indptr / y / 1/outdeg loads, then the first 4 source
// ids of every small vertex, then their gathers are issued before any is used. A lane sums the
// in-arcs of its own vertex when it has at most small_degree of them (grids, most kron
// vertices); bigger ones are summed by the whole warp together (ballot, strided loads,
// butterfly sum), so a hub is spread over 32 lanes. The sum order is fixed, so a Jacobi sweep
// is deterministic. Then as pr_finalize: y' = base + d * sum, y' / outdeg stored into outs
// (bit j of need[v] selects vector j; nouts == 1: own vector only, need not read),
// stats[0] += sum |y' - y|, stats[1] += sum y'.
// When iteration prev met the stopping rule on all devices together (bsp_converged) the kernel
// returns at once, so the host can queue many iterations and read the stats once.
// Every gather of contrib loads through L2 (__ldcg). contrib may change while a kernel runs (in
// place it is also outs[0]; the persistent kernels rewrite the vectors in later iterations and
// the peers store into them), and L2 is where those stores land, so no stale L1 line is read.
// The read-only path (__ldg) fills L1 lines the random gathers rarely reuse, and plain loads
// make the persistent kernels spill (docs/PR_CC.md compares the three).
__device__ __forceinline__ float pr_load(const float* p) { return __ldcg(p); }

// What in-arc a brings from contrib (its source's share, as the arc carries it).
__device__ __forceinline__ float arc_pull(arc_t a, const float* contrib) {
    return arc_carries(a, pr_load(contrib + arc_end(a)));
}

template <int K, typename IDX>
__device__ __forceinline__ void pr_csc_body(int n_local, int offset, const IDX* __restrict__ indptr,
                                            const arc_t* __restrict__ sources, const float* contrib,
                                            base_t base, float damping, float* __restrict__ y,
                                            const float* __restrict__ inv_outdeg,
                                            const unsigned long long* __restrict__ outs, int nouts,
                                            const unsigned char* __restrict__ need, double* stats,
                                            const unsigned long long* __restrict__ stats_of,
                                            int nstats, int prev, double tol, int small_degree) {
    if (bsp_converged(stats_of, nstats, prev, tol)) return;
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    float* const out0 = reinterpret_cast<float*>(outs[0]);
    double diff = 0.0, total = 0.0;
    for (long long wbase = warp * 32 * K; wbase < n_local; wbase += nwarps * 32 * K) {
        IDX s[K], e[K];
        float yo[K], iv[K], sum[K];
        bool small[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const long long v = wbase + k * 32 + lane;
            s[k] = 0; e[k] = 0; yo[k] = 0.0f; iv[k] = 0.0f;
            if (v < n_local) { s[k] = indptr[v]; e[k] = indptr[v + 1]; yo[k] = y[v]; iv[k] = inv_outdeg[v]; }
            small[k] = e[k] - s[k] <= (IDX)small_degree;
        }
        arc_t a[K][4];
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                a[k][j] = (small[k] && s[k] + j < e[k]) ? sources[s[k] + j] : no_arc();
        float f[K][4];
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                f[k][j] = arc_end(a[k][j]) >= 0 ? arc_pull(a[k][j], contrib) : 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            sum[k] = (f[k][0] + f[k][1]) + (f[k][2] + f[k][3]);
            if (small[k])
                for (IDX i = s[k] + 4; i < e[k]; ++i) sum[k] += arc_pull(sources[i], contrib);
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            unsigned big = __ballot_sync(FULL_MASK, !small[k]);
            while (big) {
                const int src = __ffs(big) - 1;
                big &= big - 1;
                const IDX bs = __shfl_sync(FULL_MASK, s[k], src), be = __shfl_sync(FULL_MASK, e[k], src);
                float part = 0.0f;
                for (IDX i = bs + lane; i < be; i += 32) part += arc_pull(sources[i], contrib);
                for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(FULL_MASK, part, off);
                if (lane == src) sum[k] = part;
            }
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const long long v = wbase + k * 32 + lane;
            if (v < n_local) {
                const float c = pr_update(sum[k], yo[k], iv[k], base_of(base, v), damping, y + v,
                                          diff, total);
                pr_store(&out0[offset + v], outs, nouts, need, offset, v, c);
            }
        }
    }
    block_add2(diff, total, stats);
}

// The export lists of a csc kernel (used by the persistent forms; the per-iteration ones take
// them too, unused, so that both share their argument order): exports[export_off[j] ..
// export_off[j + 1]) are the local vertices peer output j (1 .. nouts - 1) reads, nexports
// all of them.
#define EXPORT_PARAMS const int* __restrict__ exports, const int* __restrict__ export_off,        \
                      int nexports
#define PR_CSC_KERNEL(NAME, K, IDX, MIN_BLOCKS_UNUSED)                                             \
extern "C" __global__ void __launch_bounds__(256) NAME(                                            \
        int n_local, int offset, const IDX* __restrict__ indptr, const arc_t* __restrict__ sources,  \
        const float* contrib, base_t base, float damping, float* __restrict__ y,                   \
        const float* __restrict__ inv_outdeg, const unsigned long long* __restrict__ outs,         \
        int nouts, const unsigned char* __restrict__ need, EXPORT_PARAMS, double* stats,           \
        const unsigned long long* __restrict__ stats_of, int nstats, int prev, double tol,         \
        int small_degree) {                                                                        \
    pr_csc_body<K, IDX>(n_local, offset, indptr, sources, contrib, base, damping, y,        \
                               inv_outdeg, outs, nouts, need, stats, stats_of, nstats, prev, tol,  \
                               small_degree);                                                      \
}
// Every csc kernel family comes in six forms: NAME##{32,64}##TAG##{1,2,4} (index width of
// indptr, vertices per lane K).
// The last argument is the blocks per SM the persistent forms ask for (__launch_bounds__):
// left to itself the compiler gave pr_csc32_persistent_k2 40 registers and 52 bytes of spills
// (nvcc 13, sm_90); asked for 5 blocks, 48 and none. 4 keeps the others at 64 registers.
#define PR_CSC_FORMS(KERNEL, TAG)                                                                  \
    KERNEL(pr_csc32##TAG##1, 1, int, 5)                                                            \
    KERNEL(pr_csc32##TAG##2, 2, int, 5)                                                            \
    KERNEL(pr_csc32##TAG##4, 4, int, 4)                                                            \
    KERNEL(pr_csc64##TAG##1, 1, long long, 4)                                                      \
    KERNEL(pr_csc64##TAG##2, 2, long long, 4)                                                      \
    KERNEL(pr_csc64##TAG##4, 4, long long, 4)
// names: pr_csc{32,64}_k{1,2,4}; in place (Gauss-Seidel) is the same kernel given
// contrib == outs[0]
PR_CSC_FORMS(PR_CSC_KERNEL, _k)

// BSP pull, fused, for skewed degrees ("bins"): the vertices are relabelled at set-up so that
// in-degrees fall into non-increasing power-of-two buckets (floor(log2 indeg), stable, so a
// road-like graph keeps its order within a bucket), and the in-arcs are CSC in the new labels
// with each vertex's sources ascending. On several devices each owns a contiguous range of that
// order starting at offset (rows, y, inv_outdeg, need and the task list are local to it);
// sources stay global ids into the whole contribution vector, so the hub prefix below is the
// same on every device. Its new contributions go to [offset + row] of outs[0] (its own next
// vector) and, as pr_csc, of each peer's vector j whose bit is set in need[row] (the peers whose
// in-arcs read that row: stores over NVLink during the kernel instead of a copy after it).
// Two things follow. (1) Load balance from a task list built once on the host (bins_tasks in
// layout.py): a task is a run of rows of one bucket, summed by
// G = 2^lg lanes per row (G ~ degree / 4, so neighbouring lanes have similar work), or one chunk
// of a hub row (degree >= hub: ceil(degree / hub) equal chunks, one warp each, whose partial sums
// go to part[task]; the chunk that arrives last, by an atomic counter per hub row, adds them in
// chunk order: deterministic, no float atomics). Warps take tasks, biggest first, from an atomic
// counter per iteration (next), each fetching its next task before working on the current one.
// (2) Locality: the hubs get the smallest ids, so on a power-law graph most gathers read a
// compact prefix of contrib (docs/PR_CC.md, "bins"); each block (one of 1024
// threads per SM) first copies contrib[0, nhot) into shared memory and gathers from there
// (scattered loads from shared memory are served 32 lanes at a time, from L1 one cache line at
// a time). Finalize as pr_csc (y' = base + d * sum, contrib' = y' / outdeg, the two sums into
// stats, the same device-side skip once prev meets the stopping rule).
// task_info: bits 0-2 = lg for a row run (then bits 3.. = row count) or 7 for a hub chunk (then
// bits 3.. = chunk index within its row, task_row = the row).
template <typename IDX>
__device__ __forceinline__ void pr_bins_body(int ntasks, const int* __restrict__ task_row,
                                             const int* __restrict__ task_info,
                                             const IDX* __restrict__ indptr,
                                             const arc_t* __restrict__ sources,
                                             const float* contrib, base_t base,
                                             float damping, float* __restrict__ y,
                                             const float* __restrict__ inv_outdeg,
                                             const unsigned long long* __restrict__ outs,
                                             int nouts, const unsigned char* __restrict__ need,
                                             int offset, float* part, int* cnt,
                                             int hub, int nhot, int* next, double* stats,
                                             const unsigned long long* __restrict__ stats_of,
                                             int nstats, int prev, double tol) {
    extern __shared__ float4 hot4[];
    const float* hot = reinterpret_cast<const float*>(hot4);
    if (bsp_converged(stats_of, nstats, prev, tol)) return;
    if (nhot > 0) {                                     // nhot: a multiple of 4, <= n
        const float4* src4 = reinterpret_cast<const float4*>(contrib);
        for (int i = threadIdx.x; i < (nhot >> 2); i += blockDim.x)
            hot4[i] = __ldcg(src4 + i);     // through L2, as pr_load
        __syncthreads();
    }
    auto gather = [&](arc_t a) -> float {
        const int c = arc_end(a);
        return c < 0 ? 0.0f : arc_carries(a, c < nhot ? hot[c] : pr_load(contrib + c));
    };
    float* const out0 = reinterpret_cast<float*>(outs[0]) + offset;
    auto store = [&](int row, float c) { pr_store(out0 + row, outs, nouts, need, offset, row, c); };
    const int lane = threadIdx.x & 31;
    double diff = 0.0, total = 0.0;
    int t = 0;
    if (lane == 0) t = atomicAdd(next, 1);
    t = __shfl_sync(FULL_MASK, t, 0);
    while (t < ntasks) {
        int fetched = 0;
        if (lane == 0) fetched = atomicAdd(next, 1);    // the next task, fetched ahead
        const int r0 = task_row[t], info = task_info[t];   // one address per warp: a broadcast
        const int kind = info & 7;
        if (kind == 7) {
            // one chunk of a hub row, summed by the whole warp
            const int j = info >> 3;
            const IDX s = indptr[r0], e = indptr[r0 + 1];
            const IDX d = e - s;
            const int nch = (int)((d + hub - 1) / hub);
            const IDX len = (d + nch - 1) / nch;
            const IDX a0 = s + (IDX)j * len;
            const IDX a1 = a0 + len < e ? a0 + len : e;
            float sum = 0.0f;
            for (IDX a = a0 + lane; a < a1; a += 32 * 8) {
                arc_t c[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) c[q] = a + q * 32 < a1 ? __ldg(sources + a + q * 32) : no_arc();
                float f[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) f[q] = gather(c[q]);
                sum += ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
            }
            for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, off);
            int last = 0;
            if (lane == 0) {
                part[t] = sum;
                __threadfence();                        // the partial is visible before the count
                last = atomicAdd(cnt + r0, 1) == nch - 1;
            }
            last = __shfl_sync(FULL_MASK, last, 0);
            if (last) {                                 // every other chunk's partial has landed
                __threadfence();
                float p = 0.0f;
                for (int q = lane; q < nch; q += 32) p += __ldcg(part + (t - j) + q);
                for (int off = 16; off > 0; off >>= 1) p += __shfl_xor_sync(FULL_MASK, p, off);
                if (lane == 0) {
                    cnt[r0] = 0;                        // for the next iteration (next launch)
                    store(r0, pr_update(p, y[r0], inv_outdeg[r0], base_of(base, r0), damping,
                                        y + r0, diff, total));
                }
            }
        } else {
            // a run of rows of one bucket, G lanes per row, two rows per group at a time
            const int lg = kind, G = 1 << lg, sub = lane & (G - 1);
            const int groups = 32 >> lg, nrows = info >> 3;
            const int grp = lane >> lg;
            for (int i = 0; i < nrows; i += 2 * groups) {
                IDX s[2], e[2];
                float yo[2], iv[2], sum[2];
                int r[2];
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    const int ri = i + k * groups + grp;
                    r[k] = ri < nrows ? r0 + ri : -1;
                    s[k] = 0; e[k] = 0; yo[k] = 0.0f; iv[k] = 0.0f; sum[k] = 0.0f;
                    if (r[k] >= 0) { s[k] = indptr[r[k]]; e[k] = indptr[r[k] + 1]; yo[k] = y[r[k]]; iv[k] = inv_outdeg[r[k]]; }
                }
                const IDX len = (e[0] - s[0]) > (e[1] - s[1]) ? (e[0] - s[0]) : (e[1] - s[1]);
                for (IDX o = sub; o < len; o += 4 * G) {    // rows of a bucket: similar trip counts
                    arc_t c[2][4];
#pragma unroll
                    for (int k = 0; k < 2; ++k)
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const IDX a = s[k] + o + q * G;
                            c[k][q] = a < e[k] ? __ldg(sources + a) : no_arc();
                        }
                    float f[2][4];
#pragma unroll
                    for (int k = 0; k < 2; ++k)
#pragma unroll
                        for (int q = 0; q < 4; ++q) f[k][q] = gather(c[k][q]);
#pragma unroll
                    for (int k = 0; k < 2; ++k) sum[k] += (f[k][0] + f[k][1]) + (f[k][2] + f[k][3]);
                }
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    for (int off = G >> 1; off > 0; off >>= 1) sum[k] += __shfl_xor_sync(FULL_MASK, sum[k], off);
                    if (r[k] >= 0 && sub == 0) {
                        store(r[k], pr_update(sum[k], yo[k], iv[k], base_of(base, r[k]), damping,
                                              y + r[k], diff, total));
                    }
                }
            }
        }
        t = __shfl_sync(FULL_MASK, fetched, 0);
    }
    block_add2(diff, total, stats);
}

#define PR_BINS_KERNEL(NAME, IDX)                                                                  \
extern "C" __global__ void __launch_bounds__(1024, 1) NAME(                                        \
        int ntasks, const int* __restrict__ task_row, const int* __restrict__ task_info,           \
        const IDX* __restrict__ indptr, const arc_t* __restrict__ sources,                           \
        const float* __restrict__ contrib, base_t base, float damping, float* __restrict__ y,      \
        const float* __restrict__ inv_outdeg, const unsigned long long* __restrict__ outs,         \
        int nouts, const unsigned char* __restrict__ need, int offset, float* part, int* cnt,      \
        int hub, int nhot, int* next, double* stats, const unsigned long long* __restrict__ stats_of,\
        int nstats, int prev, double tol) {                                                        \
    pr_bins_body<IDX>(ntasks, task_row, task_info, indptr, sources, contrib, base, damping, y,     \
                      inv_outdeg, outs, nouts, need, offset, part, cnt, hub, nhot, next, stats,    \
                      stats_of, nstats, prev, tol);                                                \
}
// names: pr_bins{32,64} (index width of indptr); blocks of 1024 threads, one per SM
PR_BINS_KERNEL(pr_bins32, int)
PR_BINS_KERNEL(pr_bins64, long long)

// Persistent BSP (PageRankTuning(persistent=True)): one cooperative launch per device runs iterations
// [t_begin, t_end) of the fused kernels above, instead of one launch per device per iteration
// with events between the devices. The launch first resets this device's state
// (bsp_reset_body) behind a grid barrier. Iteration t is the per-iteration kernel's body (the
// same function, coherent loads: see pr_load) reading contribs[t & 1] and storing into the
// vectors of outs[(t + 1) & 1] ("bins" through the need masks; "csc" its own vector, then, after
// a grid barrier, the export lists into the peers': pr_export), then one meeting of every
// block of every device (persistent.cuh's protocol_meet): a grid barrier (this device's
// sweep, its peer stores and its stats row t are done), the arrival and wait of block 0's
// thread 0 on device 0's meeting counter gbar (system-scope release and acquire: the peers'
// stores and rows are visible after it), the stopping rule of row t over every device's stats
// (bsp_rule: the same rows, order and arithmetic on every device, so all stop after the same
// iteration), and a grid barrier that hands the decision and the acquired writes to the other
// blocks. One meeting per iteration is enough for the two vectors: a peer's stores of
// iteration t + 1 go to the vector this device read in iteration t, which it finished before it
// arrived at meeting t.
// ctl (this device's control block, persistent.cuh: RAN the iterations this launch ran, the
// last one met the rule unless t_end came first), then P_STOP, the leader's decision at the
// last meeting: 0 go on, 1 converged, 2 abort. The host reads it after the launch. A wait longer
// than timeout_ns sets ABORT and every device leaves within one more timeout (the others then
// wait at the next meeting in vain); the host raises and resets gbar.
enum PersistWord { P_STOP = PROTOCOL_WORDS };

// PageRankTuning.trace (GROUTE_PR_TRACE=1; trace != nullptr): block 0's thread 0 stamps 4 global-timer values per
// iteration for the first TRACE_ITERATIONS: sweep start, this device's grid barrier passed,
// the cross-device wait passed, the decision handed to every block (second grid barrier).
#define TRACE_ITERATIONS 256
// (recomputed at each stamp from the kernel parameter: a pointer kept live across the sweep
// cost the csc kernel 16 registers)
__device__ __forceinline__ void trace_stamp(unsigned long long* trace, int i, int phase) {
    if (trace != nullptr && i < TRACE_ITERATIONS) trace[4 * i + phase] = global_timer();
}

// The export step of the persistent csc kernels, by every thread of the grid after its sweep
// (and a grid barrier): the new contribution of each listed vertex, from this device's own
// vector (outs[0], written by any block: read through L2), stored into the peer output that
// reads it. A grid cut into row blocks exports its boundary rows only.
__device__ __forceinline__ void pr_export(const unsigned long long* __restrict__ outs, int nouts,
                                          int offset, const int* __restrict__ exports,
                                          const int* __restrict__ export_off) {
    const float* mine = reinterpret_cast<const float*>(outs[0]) + offset;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int j = 1; j < nouts; ++j) {
        float* peer = reinterpret_cast<float*>(outs[j]) + offset;
        for (long long i = export_off[j] + first; i < export_off[j + 1]; i += stride) {
            const int v = exports[i];
            peer[v] = __ldcg(mine + v);
        }
    }
}

template <class Reset, class Export, class Sweep>
__device__ __forceinline__ void bsp_persistent(int t_begin, int t_end, unsigned long long* ctl,
                                               unsigned long long* gbar, unsigned long long gbase,
                                               int k, long long timeout_ns,
                                               unsigned long long* trace,
                                               const unsigned long long* __restrict__ stats_of,
                                               int nstats, double tol, Reset reset,
                                               int nexports, Export export_to_peers,
                                               Sweep sweep) {
    unsigned int bar = 0;
    unsigned long long gtarget = gbase;
    const bool leader = blockIdx.x == 0 && threadIdx.x == 0;
    if (leader) protocol_begin(ctl);
    // this device's own state only (vector 0, y, the stats rows): the peers' stores of
    // iteration 0 go to vector 1, those of iteration 1 to vector 0 but after meeting 0, which
    // this device passes only after this
    reset();
    protocol_barrier(ctl, bar);
    int t = t_begin;
    while (t < t_end) {
        if (leader) trace_stamp(trace, t - t_begin, 0);
        sweep(t);
        protocol_barrier(ctl, bar);
        if (nexports > 0) {     // the same on every block: the peers' values, then meet again
            export_to_peers(t);
            protocol_barrier(ctl, bar);
        }
        protocol_meet_past_barrier(leader, ctl, bar, gbar, gtarget, k, timeout_ns,
                      [=]() { trace_stamp(trace, t - t_begin, 1); }, [=](bool met) {
            int stop = 2;
            if (met) {
                trace_stamp(trace, t - t_begin, 2);
                stop = bsp_rule(stats_of, nstats, t, tol) ? 1 : 0;
            }
            ctl[P_STOP] = stop;
        });
        if (leader) trace_stamp(trace, t - t_begin, 3);
        ++t;
        // written by the leader between the meeting's two grid barriers; rewritten only after
        // every block has arrived at the next meeting's first one, i.e. after this read
        if (__ldcg(&ctl[P_STOP])) break;
    }
    if (leader) {
        protocol_result(ctl, t - t_begin, 0);
        protocol_crossed(ctl, gtarget, gbase, k);
    }
    protocol_exit(ctl);
}

// The arguments every persistent kernel adds: iterations [t_begin, t_end), its control block,
// device 0's meeting counter and where it stands, the device count, the wait limit, the trace
// (null: off), and what bsp_reset_body needs at the start of a run (t_begin == 0): the start
// value y0, the start contributions contrib0 of all n_total vertices, the rows of y and the
// hub counters ("bins").
// (The host always starts at t_begin = 0. The parameter stays: without it nvcc spilled the
// iteration counter in pr_csc32_persistent_k2, which slowed the sweep; docs/PR_CC.md.)
#define PERSIST_PARAMS int t_begin, int t_end, unsigned long long* ctl, unsigned long long* gbar, \
                       unsigned long long gbase, int k, long long timeout_ns,                      \
                       unsigned long long* trace, float y0, const float* __restrict__ contrib0,    \
                       int n_total, int y_rows, int n_hubs
// The start of a run in a persistent kernel: this device's y, vector 0, stats rows [0, t_end)
// and the counters (zero_a / zero_b as bsp_reset_body)
#define PERSIST_RESET(ZERO_A, NA, ZERO_B, NB)                                                      \
    [&]() {                                                                                        \
        if (t_begin == 0)                                                                          \
            bsp_reset_body(y_rows, y0, y, n_total, contrib0,                                       \
                           reinterpret_cast<float*>(contribs[0]), stats, 2 * t_end, ZERO_A, NA,    \
                           ZERO_B, NB, nullptr);                                                   \
    }

// pr_csc_body per iteration: contribs[2] (this device's vectors by parity), outs[2][nouts] (by
// parity of the vector written), stats[t_end][2] (row t: iteration t).
#define PR_CSC_PERSISTENT(NAME, K, IDX, MIN_BLOCKS)                                                \
extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS) NAME(                                \
        int n_local, int offset, const IDX* __restrict__ indptr, const arc_t* __restrict__ sources,  \
        const unsigned long long* __restrict__ contribs, base_t base, float damping,               \
        float* __restrict__ y, const float* __restrict__ inv_outdeg,                               \
        const unsigned long long* __restrict__ outs, int nouts,                                    \
        const unsigned char* __restrict__ need, EXPORT_PARAMS, double* stats,                      \
        const unsigned long long* __restrict__ stats_of, int nstats, double tol,                   \
        int small_degree, PERSIST_PARAMS) {                                                        \
    bsp_persistent(t_begin, t_end, ctl, gbar, gbase, k, timeout_ns, trace, stats_of, nstats, tol,  \
                   PERSIST_RESET(nullptr, 0, nullptr, 0), nexports,                                \
                   [&](int t) {                                                                    \
        pr_export(outs + ((t + 1) & 1) * nouts, nouts, offset, exports, export_off);               \
    }, [&](int t) {                                                                                \
        /* one output (nouts 1: pr_store reads no need mask): the peers get their values */     \
        /* from the export lists after the sweep: testing a need byte or bit per vertex */     \
        /* lengthens the sweep (benchmarks/probes/gpu_need_probe.py, docs/PR_CC.md) */          \
        pr_csc_body<K, IDX>(n_local, offset, indptr, sources,                                      \
                            reinterpret_cast<const float*>(contribs[t & 1]), base, damping,        \
                            y, inv_outdeg, outs + ((t + 1) & 1) * nouts, 1, nullptr,               \
                            stats + 2 * (long long)t, stats_of, nstats, -1, tol, small_degree);    \
    });                                                                                            \
}
// names: pr_csc{32,64}_persistent_k{1,2,4}
PR_CSC_FORMS(PR_CSC_PERSISTENT, _persistent_k)

// pr_bins_body per iteration; next[t]: iteration t's task counter (zeroed at the start), the
// hub counters cnt are zeroed by each row's last chunk, in time for the next iteration (the
// barrier orders it). One block of 1024 threads per SM with the hub prefix in dynamic shared
// memory, as pr_bins; the copy into it is redone each iteration (the vector alternates).
#define PR_BINS_PERSISTENT(NAME, IDX)                                                              \
extern "C" __global__ void __launch_bounds__(1024, 1) NAME(                                        \
        int ntasks, const int* __restrict__ task_row, const int* __restrict__ task_info,           \
        const IDX* __restrict__ indptr, const arc_t* __restrict__ sources,                           \
        const unsigned long long* __restrict__ contribs, base_t base, float damping,               \
        float* __restrict__ y, const float* __restrict__ inv_outdeg,                               \
        const unsigned long long* __restrict__ outs, int nouts,                                    \
        const unsigned char* __restrict__ need, int offset, float* part, int* cnt, int hub,        \
        int nhot, int* next, double* stats, const unsigned long long* __restrict__ stats_of,       \
        int nstats, double tol, PERSIST_PARAMS) {                                                  \
    bsp_persistent(t_begin, t_end, ctl, gbar, gbase, k, timeout_ns, trace, stats_of, nstats, tol,  \
                   PERSIST_RESET(cnt, n_hubs, next, t_end), 0, [](int) {}, [&](int t) {            \
        pr_bins_body<IDX>(ntasks, task_row, task_info, indptr, sources,                      \
                                reinterpret_cast<const float*>(contribs[t & 1]), base, damping,    \
                                y, inv_outdeg, outs + ((t + 1) & 1) * nouts, nouts, need, offset,  \
                                part, cnt, hub, nhot, next + t, stats + 2 * (long long)t,          \
                                stats_of, nstats, -1, tol);                                        \
    });                                                                                            \
}
// names: pr_bins{32,64}_persistent
PR_BINS_PERSISTENT(pr_bins32_persistent, int)
PR_BINS_PERSISTENT(pr_bins64_persistent, long long)

// Asynchronous push sweep (residual propagation, Whang et al.): every owned vertex whose residual
// exceeds its threshold (above_threshold: eps, or eps times its out-degree under the degree
// rule) takes it (atomicExch: concurrent pushes only add), adds it to its rank and pushes
// arc_share(d * r, outdeg) to each out-neighbour (PageRank: d * r / outdeg): into the local residual when this device owns it, else into
// the dense remote accumulator (combined per vertex before it is sent). The accumulator is double:
// it sums a vertex's contributions over all the sweeps of a round, and in float32 a late, small
// contribution to a hub's large sum falls below half an ulp and vanishes (on several GPUs a
// measurable share of the mass is lost); the sum is rounded to float32 once, when it is packed.
// Load balance: a lane pushes the arcs of its own vertex when it has at most SMALL_DEGREE of them (road-like graphs);
// bigger vertices are pushed by the whole warp together (ballot), so hubs are spread over 32
// lanes. counters[0] += vertices pushed, counters[1] += arcs pushed.
#define SMALL_DEGREE 8

__device__ __forceinline__ void push_arc(arc_t a, float share, int offset, int n_local,
                                         float* residual, double* remote_acc) {
    const int w = arc_end(a);
    const float c = arc_carries(a, share);
    const int lw = w - offset;
    if (lw >= 0 && lw < n_local) atomicAdd(residual + lw, c);
    else atomicAdd(remote_acc + w, (double)c);
}

// The push rule (PageRankTuning.push_rule, groute/engines/iterate/thresholds.py): whether a
// residual r of a vertex with deg out-arcs is above its threshold, eps being the threshold per
// unit of weight: eps itself (uniform: every weight 1) or, with `degree` set, eps * w, w =
// max(deg, 1) (Andersen, Chung and Lang: a hub waits until it holds mass worth its arcs). The
// host picks eps = eps_v * n / W, eps_v the rule's threshold per vertex and W = sum of w over
// every vertex of every device, so the thresholds add up to n * eps_v under both rules:
//   no vertex above its threshold  =>  sum_v r_v <= sum_v eps * w_v = eps_v * n / W * W
//                                                 = n * eps_v,
// which is the stopping rule's bound (relative: n tol times the least mass; absolute: n tol),
// so a finite run with no vertex above its threshold has converged under either rule. The
// product is rounded once in float32 (and w when above 2^24): at most about 1.2e-7 relative
// above the exact one, within the host's margin (THRESHOLD_MARGIN). Every weight is >= 1, so
// eps is the least threshold: callers test r > eps first and read the vertex's indptr (for
// deg) only then, the common path's loads unchanged.
__device__ __forceinline__ bool above_threshold(float r, float eps, long long deg, int degree) {
    return r > (degree ? eps * (float)(deg > 1 ? deg : 1) : eps);
}

// One push sweep by every thread of the grid over this device's n_local vertices (pr_push,
// pr_async_persistent): `pushed` and `arcs` (the thread's own counts) grow by the vertices and
// arcs it pushed; `degree`: the push rule (above_threshold). The residual is tested as read
// through L2 (__ldcg): in the persistent kernel peers add into it over NVLink while it runs, and
// an L1 line would hide their additions.
__device__ __forceinline__ void push_sweep(int n_local, int offset,
                                           const long long* __restrict__ indptr,
                                           const arc_t* __restrict__ indices, float damping,
                                           float eps, int degree, float* residual, double* rank,
                                           double* remote_acc, unsigned long long& pushed,
                                           unsigned long long& arcs) {
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long base = warp * 32; base < n_local; base += nwarps * 32) {
        const long long v = base + lane;
        float r = 0.0f;
        long long s = 0, t = 0;
        const float seen = v < n_local ? __ldcg(residual + v) : 0.0f;
        if (seen > eps) {   // above the least threshold: the vertex's arcs decide
            s = indptr[v];
            t = indptr[v + 1];
            if (above_threshold(seen, eps, t - s, degree)) {
                r = atomicExch(residual + v, 0.0f);
                rank[v] += (double)r;
                pushed += 1;
                arcs += (unsigned long long)(t - s);
            }
        }
        const bool small = r > 0.0f && t - s <= SMALL_DEGREE;
        if (small && t > s) {  // t == s: dangling, its mass leaks (normalised away at the end)
            const float c = arc_share(damping * r, t - s);
            for (long long e = s; e < t; ++e) push_arc(indices[e], c, offset, n_local, residual, remote_acc);
        }
        unsigned big = __ballot_sync(FULL_MASK, r > 0.0f && !small);
        while (big) {
            const int src = __ffs(big) - 1;
            big &= big - 1;
            const float rs = __shfl_sync(FULL_MASK, r, src);
            const long long bs = __shfl_sync(FULL_MASK, s, src);
            const long long bt = __shfl_sync(FULL_MASK, t, src);
            const float c = arc_share(damping * rs, bt - bs);
            for (long long e = bs + lane; e < bt; e += 32)
                push_arc(indices[e], c, offset, n_local, residual, remote_acc);
        }
    }
}

// counters[j] += x[j] (j < N) for the whole warp: one atomic per counter per warp.
template <int N>
__device__ __forceinline__ void warp_add_counters(unsigned long long (&x)[N],
                                                  unsigned long long* counters) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
        for (int off = 16; off > 0; off >>= 1) x[j] += __shfl_down_sync(FULL_MASK, x[j], off);
        if ((threadIdx.x & 31) == 0 && x[j]) atomicAdd(counters + j, x[j]);
    }
}

extern "C" __global__ void pr_push(int n_local, int offset, const long long* __restrict__ indptr,
                                   const arc_t* __restrict__ indices, float damping, float eps,
                                   int degree, float* __restrict__ residual,
                                   double* __restrict__ rank, double* __restrict__ remote_acc,
                                   unsigned long long* __restrict__ counters) {
    unsigned long long done[2] = {0, 0};    // vertices, arcs
    push_sweep(n_local, offset, indptr, indices, damping, eps, degree, residual, rank,
               remote_acc, done[0], done[1]);
    warp_add_counters(done, counters);
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
extern "C" __global__ void pr_pack(double* __restrict__ remote_acc, int lo, int hi,
                                   long long* __restrict__ items, unsigned long long* __restrict__ count) {
    const int lane = threadIdx.x & 31;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long base = lo + warp * 32; base < hi; base += nwarps * 32) {
        const long long v = base + lane;
        double a = 0.0;
        if (v < hi) a = remote_acc[v];
        const unsigned keep = __ballot_sync(FULL_MASK, a != 0.0);
        if (!keep) continue;
        unsigned long long first = 0;
        if (lane == 0) first = atomicAdd(count, (unsigned long long)__popc(keep));
        first = __shfl_sync(FULL_MASK, first, 0);
        if (a != 0.0) {
            const unsigned rank = __popc(keep & ((1u << lane) - 1u));
            const float x = (float)a;   // one rounding per item (see the accumulator's comment)
            items[first + rank] = ((long long)(unsigned)__float_as_int(x) << 32) | (long long)v;
            remote_acc[v] = 0.0;
        }
    }
}

// Asynchronous push, persistent (pr_async_persistent; the solver's mode="async" on CUDA devices
// that reach each other's memory): one cooperative launch per device runs a whole solve, with
// no host in the loop. It starts as push_reset does (rank 0, residual = base, the remote
// accumulator 0) and meets the other devices once, so no peer adds into a residual before its
// owner has reset it. Then rounds, each:
//   sweep: push_sweep over the owned vertices whose residual exceeds their threshold (eps per
//     unit of weight, `degree` the push rule: above_threshold), local targets by atomicAdd
//     into the residual, remote ones into the dense double accumulator;
//     topology-driven (every owned residual is read each round: n_local floats, a short
//     stream at HBM bandwidth even for millions of vertices) rather than from a queue, whose
//     appends and duplicate checks would cost more than the scan they save, and which would
//     need a second pass for the vertices that peers' flushes raise above their threshold;
//   grid barrier (the round's additions into the accumulator are done);
//   flush: every nonzero accumulator entry is taken (atomicExch: the next round's pushes may
//     add to it meanwhile) and added, rounded to float once, straight into its owner's residual
//     through peer memory (red_add_sys_f32, fire-and-forget); a dense scan of the other devices'
//     ranges, which is no longer than the sweep's own.
// Every check_every rounds (and at the round cap max_rounds) the devices decide together:
//   meeting A (protocol_meet): every device's flushes are ordered before it, and nobody pushes
//     again before meeting B, so the residuals stand still;
//   each device sums its residuals, its ranks + residuals (the mass) and counts its vertices
//     above their threshold, the sweep's test (block sums into its control block);
//   meeting B: before the arrival each device stores its three sums into its own slot of device
//     0's meeting block; after it every device adds the k slots in device order and takes the
//     same decision: stop (converged) when STOP_RULE(residuals, mass, tol) holds; stop (stuck:
//     not converged) when no vertex anywhere is above its threshold and the rule still fails
//     (only a residual that is not finite does that, see below); stop (not converged) at
//     max_rounds;
//     else go on, with eps = max(eps0, eps_per_mass * mass rounded down).
// One slot per device is enough: a device rewrites its slot only at the next decision's
// meeting B, after meeting A, which every device reaches only after reading this one's slots.
// The residual r of the estimate x = rank is exactly base + d A^T (scale x) - x (a push keeps
// that invariant), so sum r is the L1 change of the Jacobi step from x, the BSP rule's diff,
// and rank + residual, the answer, is that step's result: the two modes stop on the same
// measure. The host sets eps so that residuals at or below their thresholds satisfy the rule:
// eps0 and eps_per_mass * mass (the mass at a decision: it only grows) are below tol * mass / n
// by a margin, times n / W under the degree rule (above_threshold: the thresholds add up to n
// times that), so quiescence always means convergence for a finite run.
// ctl (persistent.cuh's protocol words, then AsyncWord): RESULT holds the rounds run and the
// AsyncStatus; the host reads the counters and the last decision's sums from the own words.
#define ASYNC_MAX_DEVICES 8
enum AsyncWord {
    A_STOP = PROTOCOL_WORDS,    // the last decision: an AsyncStatus (0: go on)
    A_EPS,          // the threshold per unit of weight from the last decision on (float bits)
    A_RESID,        // double: this device's residual sum at a decision
    A_MASS,         // double: its rank + residual sum (right after A_RESID: block_add2's pair)
    A_ACTIVE,       // its vertices above their threshold at a decision
    A_PUSHED,       // over the run: vertices pushed,
    A_ARCS,         // arcs pushed,
    A_SENT,         // accumulator entries flushed into the peers' residuals
    A_TOTAL_RESID,  // double: the last decision's residual sum over every device
    A_TOTAL_MASS,   // double: its mass over every device
    ASYNC_CTL_WORDS
};
enum AsyncStatus { ASYNC_GO_ON = 0, ASYNC_CONVERGED = 1, ASYNC_STUCK = 2, ASYNC_ROUNDS = 3 };
// device 0's meeting block: the protocol's words, then per device j its three sums of the
// current decision (residuals, mass: double bits; vertices above eps) at ASYNC_SUMS + 3 j
enum AsyncMeeting {
    ASYNC_SUMS = MEETING_WORDS,
    ASYNC_MEETING_WORDS = MEETING_WORDS + 3 * ASYNC_MAX_DEVICES
};

// The flush of a round, by every thread of the grid (see above): the nonzero entries of the
// accumulator over the other devices' ranges [offsets[j], offsets[j + 1]) into their
// residuals (residual_of[j]); `sent` counts them.
__device__ __forceinline__ void flush_remote(double* remote_acc,
                                             const unsigned long long* __restrict__ residual_of,
                                             const int* __restrict__ offsets, int k, int me,
                                             unsigned long long& sent) {
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int j = 0; j < k; ++j) {
        if (j == me) continue;
        const int lo = offsets[j], hi = offsets[j + 1];
        float* const peer = reinterpret_cast<float*>(residual_of[j]);
        for (long long v = lo + first; v < hi; v += stride) {
            if (__ldcg(remote_acc + v) == 0.0) continue;
            const double a = __longlong_as_double((long long)atomicExch(
                reinterpret_cast<unsigned long long*>(remote_acc + v), 0ull));
            red_add_sys_f32(peer + (v - lo), (float)a);     // one rounding per entry and round
            ++sent;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 4) pr_async_persistent(
        int n_local, int offset, int n, const long long* __restrict__ indptr,
        const arc_t* __restrict__ indices, base_t base, float damping, float eps0,
        double eps_per_mass, int degree, double tol, float* residual, double* rank,
        double* remote_acc,
        const unsigned long long* __restrict__ residual_of, const int* __restrict__ offsets,
        int check_every, int max_rounds, unsigned long long* ctl, unsigned long long* gbar,
        unsigned long long gbase, int k, int me, long long timeout_ns) {
    unsigned int bar = 0;
    unsigned long long gtarget = gbase;
    const bool leader = blockIdx.x == 0 && threadIdx.x == 0;
    if (leader) {
        protocol_begin(ctl);
        for (int w = A_STOP; w < ASYNC_CTL_WORDS; ++w) ctl[w] = 0ull;
        ctl[A_EPS] = __float_as_uint(eps0);
    }
    {
        const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        const long long stride = (long long)gridDim.x * blockDim.x;
        for (long long v = first; v < n_local; v += stride) {
            rank[v] = 0.0;
            residual[v] = base_of(base, v);
        }
        if (k > 1)
            for (long long v = first; v < n; v += stride) remote_acc[v] = 0.0;
    }
    // the peers flush into this device's residuals only after this meeting
    protocol_meet(leader, ctl, bar, gbar, gtarget, k, timeout_ns, []() {}, [](bool) {});
    unsigned long long done[3] = {0, 0, 0};     // vertices, arcs pushed; entries sent
    int round = 0, status = ASYNC_GO_ON;
    while (!protocol_aborted(ctl)) {
        const float eps = __uint_as_float((unsigned)__ldcg(&ctl[A_EPS]));
        push_sweep(n_local, offset, indptr, indices, damping, eps, degree, residual, rank,
                   remote_acc, done[0], done[1]);
        protocol_barrier(ctl, bar);
        if (k > 1) flush_remote(remote_acc, residual_of, offsets, k, me, done[2]);
        ++round;
        if (round % check_every != 0 && round < max_rounds) continue;
        // meeting A: every flush has landed, and the residuals stand still until meeting B
        protocol_meet(leader, ctl, bar, gbar, gtarget, k, timeout_ns, []() {}, [](bool) {});
        if (protocol_aborted(ctl)) break;
        double resid = 0.0, mass = 0.0;
        unsigned long long above[1] = {0};
        for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < n_local;
             v += (long long)gridDim.x * blockDim.x) {
            const float r = __ldcg(residual + v);
            resid += r;
            mass += __ldcg(rank + v) + r;
            if (r > eps)    // the sweep's test, the same per-vertex threshold
                above[0] += above_threshold(r, eps, degree ? indptr[v + 1] - indptr[v] : 1,
                                            degree);
        }
        block_add2(resid, mass, reinterpret_cast<double*>(ctl + A_RESID));
        warp_add_counters(above, ctl + A_ACTIVE);
        // meeting B: the sums of every device, added alike everywhere, and the decision
        protocol_meet(leader, ctl, bar, gbar, gtarget, k, timeout_ns, [=]() {
            unsigned long long* const mine = gbar + ASYNC_SUMS + 3 * me;
            for (int f = 0; f < 3; ++f) {
                st_relaxed_sys64(mine + f, __ldcg(&ctl[A_RESID + f]));
                ctl[A_RESID + f] = 0ull;     // for the next decision: nobody adds before it
            }
        }, [=](bool met) {
            if (!met) return;
            double r = 0.0, m = 0.0;
            unsigned long long a = 0;
            for (int j = 0; j < k; ++j) {
                const unsigned long long* const s = gbar + ASYNC_SUMS + 3 * j;
                r += __longlong_as_double((long long)ld_acquire_sys(s));
                m += __longlong_as_double((long long)ld_acquire_sys(s + 1));
                a += ld_acquire_sys(s + 2);
            }
            ctl[A_STOP] = STOP_RULE(r, m, tol) ? ASYNC_CONVERGED
                          : a == 0 ? ASYNC_STUCK
                          : round >= max_rounds ? ASYNC_ROUNDS : ASYNC_GO_ON;
            ctl[A_TOTAL_RESID] = (unsigned long long)__double_as_longlong(r);
            ctl[A_TOTAL_MASS] = (unsigned long long)__double_as_longlong(m);
            ctl[A_EPS] = __float_as_uint(fmaxf(eps0, __double2float_rd(eps_per_mass * m)));
        });
        if (protocol_aborted(ctl)) break;
        // written by the leader between meeting B's grid barriers; rewritten only at the next
        // decision, after every block has passed another barrier
        status = (int)__ldcg(&ctl[A_STOP]);
        if (status != ASYNC_GO_ON) break;
    }
    warp_add_counters(done, ctl + A_PUSHED);
    if (leader) {
        protocol_result(ctl, round, status);
        protocol_crossed(ctl, gtarget, gbase, k);
    }
    protocol_exit(ctl);
}
