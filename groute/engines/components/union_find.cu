// Union-find kernels of the connected components engine (groute/engines/components/device.py):
// hooking and compression on a parent array, after Soman et al., Sutton et al. ("Afforest") and
// Jaiganesh & Burtscher (ECL-CC). Invariant: parent[v] <= v, because a hook only ever CASes a
// larger root under a smaller one and every other write replaces a parent by one of its
// ancestors. So after full compression parent[v] is the smallest vertex id of v's component.
//
// Parent reads are volatile: other threads change the array concurrently and L1 is not coherent,
// so a cached value could make a loop spin on stale data.

__device__ __forceinline__ int load(const int* p) { return *(const volatile int*)p; }
__device__ __forceinline__ void store(int* p, int x) { *(volatile int*)p = x; }
__device__ __forceinline__ unsigned long long load64(const unsigned long long* p) {
    return *(const volatile unsigned long long*)p;
}

#define FULL_MASK 0xffffffffu
// The most devices the one-level merge takes: one bit each in the mask of devices to repair.
#define MAX_DEVICES 32

// Slots of a device's stats array (unsigned 64-bit; device.py's STAT_* name the same slots).
// The reset zeroes them; each kernel adds to or writes its own.
#define STAT_REST_ROWS 0       // rows whose late arcs were linked (rest and repair)
#define STAT_REST_ARCS 1       // their arcs
#define STAT_REMOTE_ROWS 2     // of those, rows of another device (read over NVLink)
#define STAT_REMOTE_ARCS 3     // and their arcs
#define STAT_GIANT 4           // cc_publish: the root of this device's giant tree
#define STAT_GIANT_BITS 5      // cc_publish: vertices in that tree (the root too)
#define STAT_OTHER_BITS 6      // cc_publish: vertices in other trees, their roots left out
#define STAT_MERGED_BLOCKS 7   // cc_merge_diffs: blocks done (the last one compares giants)
#define STAT_GIANT_SIZE 8      // cc_compress with a giant: vertices in the giant's component
#define STAT_REDO 9            // cc_merge_diffs: devices whose skipped rows are linked again
#define STATS 16

// The root of v's tree, splitting the path on the way (each visited vertex is pointed at its
// grandparent), so trees stay shallow even when one kernel hooks millions of edges of a long
// path or grid row. The stores are safe without atomics: a non-root never becomes a root again,
// and any ancestor is a valid parent.
__device__ __forceinline__ int find_root(int v, int* parent) {
    int curr = load(parent + v);
    if (curr != v) {
        int prev = v, next;
        while (curr > (next = load(parent + curr))) {
            store(parent + prev, next);
            prev = curr;
            curr = next;
        }
    }
    return curr;
}

// The root of v's tree, read only: for a thread that must leave the array to others (it may
// run while they compress, which only ever points a vertex at one of its ancestors).
__device__ __forceinline__ int root_of(int v, const int* parent) {
    int p = load(parent + v);
    for (int q = load(parent + p); q != p; q = load(parent + p)) p = q;
    return p;
}

// Make u's and v's trees one tree: CAS the larger root under the smaller; when the CAS loses a
// race, continue from the value that won (an ancestor of the old root) until the roots agree.
__device__ void hook(int u, int v, int* parent) {
    int ru = find_root(u, parent);
    int rv = find_root(v, parent);
    while (ru != rv) {
        if (ru < rv) {
            const int old = atomicCAS(parent + rv, rv, ru);
            if (old == rv) break;
            rv = find_root(old, parent);
        } else {
            const int old = atomicCAS(parent + ru, ru, rv);
            if (old == ru) break;
            ru = find_root(old, parent);
        }
    }
}

// Every vertex its own tree; the stats zeroed (so no kernel of a run needs a fill first).
extern "C" __global__ void cc_init(int n, int* __restrict__ parent,
                                   unsigned long long* __restrict__ stats) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t < STATS) stats[t] = 0ull;
    for (long long v = t; v < n; v += (long long)gridDim.x * blockDim.x) parent[v] = (int)v;
}

// One segment of the edge list: interleaved (u, v) pairs.
extern "C" __global__ void cc_hook(const int* __restrict__ edges, long long m, int* parent) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        const int2 uv = reinterpret_cast<const int2*>(edges)[e];
        hook(uv.x, uv.y, parent);
    }
}

// Merge another device's parent array into this one: each (v, other[v]) is an edge. other may be
// a peer's array, read over NVLink (coalesced); it does not change while this kernel runs.
extern "C" __global__ void cc_merge(const int* __restrict__ other, int n, int* parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        const int p = other[v];
        if (p != v) hook(v, p, parent);
    }
}

// Path compression of vertices lo .. hi - 1 (pointer jumping until each points at its root).
// With a giant (not null), also counts the vertices of the range whose root is the giant's
// root into stats[STAT_GIANT_SIZE]: called last over every vertex, the giant's size.
extern "C" __global__ void cc_compress(int lo, int hi, int* parent, const int* giant,
                                       unsigned long long* stats) {
    const int g = giant ? root_of(giant[0], parent) : -1;
    unsigned long long in_giant = 0;
    for (long long v = lo + blockIdx.x * (long long)blockDim.x + threadIdx.x; v < hi;
         v += (long long)gridDim.x * blockDim.x) {
        int p = load(parent + v);
        int pp = load(parent + p);
        while (p != pp) {
            p = pp;
            pp = load(parent + p);
        }
        parent[v] = p;
        in_giant += p == g;
    }
    if (giant) {
        for (int o = 16; o > 0; o >>= 1) in_giant += __shfl_down_sync(FULL_MASK, in_giant, o);
        if ((threadIdx.x & 31) == 0 && in_giant) atomicAdd(stats + STAT_GIANT_SIZE, in_giant);
    }
}

// ---- Afforest (Sutton et al., IPDPS 2018): link a few neighbours, find the giant, skip it ----

// GAPBS's Afforest link: no walk to the roots, only a CAS of the larger of two parents'
// parent under the smaller, retried one level up. Keeps parent[v] <= v like hook().
__device__ void link_light(int u, int v, int* parent) {
    int p1 = load(parent + u);
    int p2 = load(parent + v);
    while (p1 != p2) {
        const int high = p1 > p2 ? p1 : p2;
        const int low = p1 + p2 - high;
        const int ph = load(parent + high);
        if (ph == low) break;
        if (ph == high && atomicCAS(parent + high, high, low) == high) break;
        p1 = load(parent + load(parent + high));
        p2 = load(parent + low);
    }
}

__device__ __forceinline__ void link(int u, int v, int* parent, int light) {
    if (light) link_light(u, v, parent); else hook(u, v, parent);
}

// Sampling round r over one device's rows: vertex lo + u (u < rows) with more than r neighbours
// links to its r-th one. indptr / indices are the rows' own slice of the CSR (indptr[0] = 0);
// parent is this device's full-size array.
extern "C" __global__ void cc_link_round(const long long* __restrict__ indptr,
                                         const int* __restrict__ indices, int lo, int rows, int r,
                                         int light, int* parent) {
    for (int u = blockIdx.x * blockDim.x + threadIdx.x; u < rows; u += gridDim.x * blockDim.x) {
        const long long b = indptr[u];
        if (indptr[u + 1] - b > r) link(lo + u, indices[b + r], parent, light);
    }
}

// The most frequent value of parent[samples[i]] (i < s <= blockDim.x = 1024): the root of the
// (probably) giant component. One block; O(s^2) comparisons in shared memory.
extern "C" __global__ void cc_sample_mode(const int* __restrict__ parent,
                                          const int* __restrict__ samples, int s, int* out) {
    __shared__ int vals[1024];
    __shared__ unsigned long long best;
    const int t = threadIdx.x;
    if (t == 0) best = 0ull;
    vals[t] = t < s ? load(parent + samples[t]) : -1;
    __syncthreads();
    if (t < s) {
        const int x = vals[t];
        unsigned int c = 0;
        for (int j = 0; j < s; ++j) c += vals[j] == x;
        atomicMax(&best, ((unsigned long long)c << 32) | (unsigned int)x);
    }
    __syncthreads();
    if (t == 0) out[0] = (int)(best & 0xffffffffull);
}

// ---- the rest, and the one-level merge of several devices (solver.py's docstring) ----

// The arcs from slot r on of the rows of vertices off[0] .. off[k] - 1 that `keep` selects,
// linked into parent. The rows may be spread over k devices: device d owns vertices off[d] ..
// off[d + 1] - 1, its CSR slice is rows[d] (indptr, int64, rebased to 0) and rows[k + d]
// (indices), and rows[2k + d] its late bitmap (bit i set when its row i has arcs from slot r
// on: a low-degree vertex costs one bit, not a possibly remote indptr read); slices of other
// devices are read over NVLink (peer access). A warp takes 32 consecutive vertices: short lists
// are linked by their own lane, lists longer than 32 arcs by the whole warp in turn (a hub must
// not serialise on one thread). stats[STAT_REST_*] += rows linked, their arcs, and of those
// the rows (arcs) of devices d > 0, which are remote when this runs on device 0: warp sums,
// one atomic per warp that linked anything.
template <class Keep>
__device__ void link_rows(const unsigned long long* __restrict__ rows, const int* __restrict__ off,
                          int k, int r, int light, int* parent, unsigned long long* stats,
                          Keep keep) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long first = off[0], last = off[k];
    for (long long base = first + ((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5) * 32;
         base < last; base += warps * 32) {
        const long long uu = base + lane;
        const int u = (int)uu;
        long long b = 0, e = 0;
        const int* idx = nullptr;
        int d = 0;
        if (uu < last) {
            while (d + 1 < k && u >= off[d + 1]) ++d;
            const int i = u - off[d];
            const unsigned int* late = reinterpret_cast<const unsigned int*>(rows[2 * k + d]);
            if (((late[i >> 5] >> (i & 31)) & 1u) && keep(u, d, parent)) {
                const long long* ip = reinterpret_cast<const long long*>(rows[d]);
                idx = reinterpret_cast<const int*>(rows[k + d]);
                b = ip[i] + r;
                e = ip[i + 1];
            }
        }
        const unsigned int active = __ballot_sync(FULL_MASK, e > b);
        if (!active) continue;
        const bool big = e - b > 32;
        if (!big)
            for (long long a = b; a < e; ++a) link(u, idx[a], parent, light);
        unsigned int todo = __ballot_sync(FULL_MASK, big);
        while (todo) {
            const int src = __ffs(todo) - 1;
            todo &= todo - 1;
            const int v = __shfl_sync(FULL_MASK, u, src);
            const long long vb = __shfl_sync(FULL_MASK, b, src);
            const long long ve = __shfl_sync(FULL_MASK, e, src);
            const int* vidx = reinterpret_cast<const int*>(
                __shfl_sync(FULL_MASK, reinterpret_cast<long long>(idx), src));
            for (long long a = vb + lane; a < ve; a += 32) link(v, vidx[a], parent, light);
        }
        long long arcs = e > b ? e - b : 0;
        long long remote = d > 0 ? arcs : 0;
        for (int o = 16; o > 0; o >>= 1) {
            arcs += __shfl_down_sync(FULL_MASK, arcs, o);
            remote += __shfl_down_sync(FULL_MASK, remote, o);
        }
        const unsigned int remote_rows = __ballot_sync(FULL_MASK, e > b && d > 0);
        if (lane == 0) {
            atomicAdd(stats + STAT_REST_ROWS, (unsigned long long)__popc(active));
            atomicAdd(stats + STAT_REST_ARCS, (unsigned long long)arcs);
            if (remote_rows) {
                atomicAdd(stats + STAT_REMOTE_ROWS, (unsigned long long)__popc(remote_rows));
                atomicAdd(stats + STAT_REMOTE_ARCS, (unsigned long long)remote);
            }
        }
    }
}

// Afforest's skip: a vertex whose parent is the giant's root is in its tree for good (trees
// only grow), and any arc (u, v) it skips is also an arc (v, u) of v, linked unless v is in a
// giant's tree too: the adjacency must be symmetric (solver.py symmetrises directed graphs).
struct OutsideGiant {
    int g;
    __device__ bool operator()(int u, int, const int* parent) const { return load(parent + u) != g; }
};

// The rest: the late arcs of every row of `rows` whose vertex is not in the giant's tree
// (giant[0], this device's vote). On one device and in the one-level merge, each device
// calls it on its own rows (k = 1).
extern "C" __global__ void cc_link_rest(const unsigned long long* __restrict__ rows,
                                        const int* __restrict__ off, int k, int r,
                                        const int* __restrict__ giant, int light, int* parent,
                                        unsigned long long* stats) {
    link_rows(rows, off, k, r, light, parent, stats, OutsideGiant{giant[0]});
}

// What a device sends in the one-level merge, in place, over every vertex: compresses the
// array and marks each vertex in one of two bitmaps (bit v % 32 of word v / 32): `giant` when
// its root is the root of the giant's tree (giant[0], the vote; the root itself too, so that
// the bitmap holds every row the rest skipped), `other` when it is in another tree and not its
// root (the receiver reads its root from this array then). Writes the giant's root into
// stats[STAT_GIANT] and counts the bits. A warp writes whole words (a ballot each), so the
// bitmaps need no clearing first.
extern "C" __global__ void cc_publish(int n, const int* __restrict__ giant, int* parent,
                                      unsigned int* __restrict__ in_giant,
                                      unsigned int* __restrict__ other,
                                      unsigned long long* stats) {
    const int g = root_of(giant[0], parent);
    if (blockIdx.x == 0 && threadIdx.x == 0) stats[STAT_GIANT] = (unsigned long long)g;
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    unsigned long long giant_bits = 0, other_bits = 0;
    for (long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; w * 32 < n;
         w += warps) {
        const long long vv = w * 32 + lane;
        bool mine = false, theirs = false;
        if (vv < n) {
            const int v = (int)vv;
            int p = load(parent + v);
            if (p != v) {
                for (int q = load(parent + p); q != p; q = load(parent + p)) p = q;
                parent[v] = p;
            }
            mine = p == g;
            theirs = p != g && p != v;
        }
        const unsigned int gw = __ballot_sync(FULL_MASK, mine);
        const unsigned int ow = __ballot_sync(FULL_MASK, theirs);
        if (lane == 0) {
            in_giant[w] = gw;
            other[w] = ow;
            giant_bits += __popc(gw);
            other_bits += __popc(ow);
        }
    }
    if (lane == 0 && (giant_bits | other_bits)) {
        atomicAdd(stats + STAT_GIANT_BITS, giant_bits);
        atomicAdd(stats + STAT_OTHER_BITS, other_bits);
    }
}

// The one-level merge on the first device: the s other devices' published trees joined into
// this device's parent array at once. senders holds four addresses per sender j: its `giant`
// and `other` bitmaps, its parent array and its stats (all read over NVLink). A giant bit of v
// hooks (v, the sender's giant root), an other bit (v, the sender's parent[v]); a hook walks
// both ends to their roots here and links only where they differ (CAS, so senders' hooks may
// interleave). A warp loads 32 words of each bitmap at once (one remote round trip per 1024
// vertices), then hooks word by word, a lane per bit.
//
// The block that finishes last (a counter in stats) then finds every device's giant root in the
// merged forest, this device's (its own publish) first. The reference is the root whose devices
// skipped the most (the most vertices in their giant trees, plus one per device; the first
// such device's on a tie), written to giant[0]; the devices whose giant lies elsewhere are the
// bits of stats[STAT_REDO], whose skipped rows cc_repair links.
extern "C" __global__ void cc_merge_diffs(const unsigned long long* __restrict__ senders, int s,
                                          int n, int* parent, unsigned long long* stats,
                                          int* giant) {
    __shared__ int rho[MAX_DEVICES];
    __shared__ bool last;
    if (threadIdx.x < s)
        rho[threadIdx.x] = (int)load64(
            reinterpret_cast<const unsigned long long*>(senders[4 * threadIdx.x + 3]) + STAT_GIANT);
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long words = ((long long)n + 31) >> 5;
    for (int j = 0; j < s; ++j) {
        const unsigned int* gb = reinterpret_cast<const unsigned int*>(senders[4 * j]);
        const unsigned int* ob = reinterpret_cast<const unsigned int*>(senders[4 * j + 1]);
        const int* theirs = reinterpret_cast<const int*>(senders[4 * j + 2]);
        const int g = rho[j];
        for (long long w0 = ((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5) * 32;
             w0 < words; w0 += warps * 32) {
            const long long w = w0 + lane;
            const unsigned int gw = w < words ? gb[w] : 0u;
            const unsigned int ow = w < words ? ob[w] : 0u;
            unsigned int todo = __ballot_sync(FULL_MASK, (gw | ow) != 0u);
            while (todo) {
                const int src = __ffs(todo) - 1;
                todo &= todo - 1;
                const unsigned int a = __shfl_sync(FULL_MASK, gw, src);
                const unsigned int b = __shfl_sync(FULL_MASK, ow, src);
                const int v = (int)((w0 + src) * 32 + lane);
                if ((a >> lane) & 1u)
                    hook(v, g, parent);
                else if ((b >> lane) & 1u)
                    hook(v, theirs[v], parent);
            }
        }
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(stats + STAT_MERGED_BLOCKS, 1ull) == gridDim.x - 1;
    __syncthreads();
    if (!last || threadIdx.x != 0) return;
    __threadfence();
    int roots[MAX_DEVICES];
    unsigned long long weight[MAX_DEVICES];
    roots[0] = root_of((int)load64(stats + STAT_GIANT), parent);
    weight[0] = load64(stats + STAT_GIANT_BITS) + 1;
    for (int j = 0; j < s; ++j) {
        roots[j + 1] = root_of(rho[j], parent);
        weight[j + 1] = load64(reinterpret_cast<const unsigned long long*>(senders[4 * j + 3]) +
                               STAT_GIANT_BITS) + 1;
    }
    int best = 0;
    unsigned long long most = 0;
    for (int a = 0; a <= s; ++a) {
        unsigned long long group = 0;
        for (int b = 0; b <= s; ++b)
            if (roots[b] == roots[a]) group += weight[b];
        if (group > most) {
            most = group;
            best = a;
        }
    }
    unsigned long long redo = 0;
    for (int a = 0; a <= s; ++a)
        if (roots[a] != roots[best]) redo |= 1ull << a;
    giant[0] = roots[best];
    stats[STAT_REDO] = redo;
}

// A row its device may have skipped: in that device's giant tree (its published `giant`
// bitmap, at bits[d]), on a device whose giant cc_merge_diffs found apart from the reference.
struct SkippedBy {
    unsigned long long redo;
    const unsigned long long* bits;
    __device__ bool operator()(int u, int d, const int*) const {
        return ((redo >> d) & 1ull) &&
               ((reinterpret_cast<const unsigned int*>(bits[d])[u >> 5] >> (u & 31)) & 1u);
    }
};

// After the merge, on the first device: the late arcs of every row skipped by a device of
// stats[STAT_REDO] (none: returns at once), read where they lie, linked here.
extern "C" __global__ void cc_repair(const unsigned long long* __restrict__ rows,
                                     const int* __restrict__ off, int k, int r,
                                     const unsigned long long* __restrict__ bits, int light,
                                     int* parent, unsigned long long* stats) {
    const unsigned long long redo = load64(stats + STAT_REDO);
    if (!redo) return;
    link_rows(rows, off, k, r, light, parent, stats, SkippedBy{redo, bits});
}
