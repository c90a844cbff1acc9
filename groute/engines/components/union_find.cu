// Union-find kernels of the connected components engine (groute/engines/components/device.py):
// hooking and compression on a parent array, after Soman et al., Sutton et al. ("Afforest") and
// Jaiganesh & Burtscher (ECL-CC). Invariant: parent[v] <= v, because a hook only ever CASes a
// larger root under a smaller one and every other write replaces a parent by one of its
// ancestors. So after full compression parent[v] is the smallest vertex id of v's component.
//
// Two kinds of parent reads. Plain reads may be served by the SM's L1, which other SMs' writes
// do not update, so they can be stale; "fresh" reads (volatile, load()) go to L2 and see every
// write that landed. Most reads are plain, because on graphs with a giant component millions of
// threads read the same few words (the giant's root, a hub's): fresh, every one of those reads
// queues at the one L2 slice that holds the word, and a whole-array pass takes several times
// as long as its bytes need.
//
// A stale read is safe here: every value ever stored in parent[v] is v (while v is a root) or
// a smaller vertex of v's tree, so a stale parent is a valid parent, and a walk that stops at a
// stale "root" stopped at a vertex of v's tree. The loops never wait for a read to change:
// hook() and link_light() continue from what their CAS returns (the word's value in L2), and
// every step moves to a smaller vertex id, so they end. A kernel starts with no stale line
// (what earlier kernels wrote is visible to it), and one that only compresses creates no root
// and removes none, so its walks end at the true roots even on stale reads.

__device__ __forceinline__ int load(const int* p) { return *(const volatile int*)p; }
__device__ __forceinline__ void store(int* p, int x) { *(volatile int*)p = x; }

// how many steps of a walk root_of() reads plainly before it reads fresh
#define CACHED_HOPS 8

// The root of v's tree, read only (no hook may run on the array meanwhile: the answer is the
// true root). v's entry and the next CACHED_HOPS steps read plainly (the hot words); past them
// the path is a long chain (a mesh's rows, linked lightly on another device), and fresh reads
// see the shortcuts other threads' compression writes into it, where stale ones would walk the
// whole chain from every vertex of it.
__device__ __forceinline__ int root_from(int p, int pp, const int* parent) {
    int hops = 0;
    while (p != pp) {
        p = pp;
        pp = ++hops < CACHED_HOPS ? parent[p] : load(parent + p);
    }
    return p;
}

__device__ __forceinline__ int root_of(int v, const int* parent) {
    const int p = parent[v];
    return root_from(p, parent[p], parent);
}

// Passes over every vertex take PASS_UNROLL vertices per thread per step, their first loads
// issued together: with one vertex, each step waits for its loads in turn, and even a full grid
// keeps too few loads in flight to stream the array at memory speed.
#define PASS_UNROLL 4

// The passes over the vertices: their blocks (device.py's BLOCK threads), 8 per multiprocessor
// (device.py's _grid), all resident at once. More registers per thread than that allows would
// leave the last blocks of the grid-stride loops to a second wave; cc_link_rest spills a few
// words to local memory under the bound instead.
#define PASS_BOUNDS __launch_bounds__(256, 8)

// The root of v's tree (or, on stale reads, a smaller vertex of it: hook() then CASes from
// there), splitting the path on the way (each visited vertex is pointed at its grandparent), so
// trees stay shallow even when one kernel hooks millions of edges of a long path or grid row.
// The stores are safe without atomics: a non-root never becomes a root again, and any smaller
// vertex of the tree is a valid parent.
__device__ __forceinline__ int find_root(int v, int* parent) {
    int curr = parent[v];
    if (curr != v) {
        int prev = v, next;
        while (curr > (next = parent[curr])) {
            store(parent + prev, next);
            prev = curr;
            curr = next;
        }
    }
    return curr;
}

// Make u's and v's trees one tree: CAS the larger root under the smaller; when the CAS loses a
// race (or the "root" was a stale read), continue from the value the CAS found (an ancestor of
// the old root, a smaller id) until the roots agree.
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

extern "C" __global__ void PASS_BOUNDS
cc_init(int n, int* __restrict__ parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x)
        parent[v] = v;
}

// One segment of the edge list: interleaved (u, v) pairs.
extern "C" __global__ void PASS_BOUNDS
cc_hook(const int* __restrict__ edges, long long m, int* parent) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        const int2 uv = reinterpret_cast<const int2*>(edges)[e];
        hook(uv.x, uv.y, parent);
    }
}

// Merge another parent array into this one: each (v, other[v]) is an edge (the segments path's
// tree of merges, the ranks' arrays); it does not change while this kernel runs.
extern "C" __global__ void PASS_BOUNDS
cc_merge(const int* __restrict__ other, int n, int* parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        const int p = other[v];
        if (p != v) hook(v, p, parent);
    }
}

// Path compression of the vertices lo .. hi - 1 (pointer jumping until each points at its root):
// all of them (0, n), or a device's own rows, the only ones its next sampling round starts from.
// Any ancestor is a valid parent, so the vertices left out stay correct, only less shallow.
// Written only where it changes: after a round most entries already hold their root.
extern "C" __global__ void PASS_BOUNDS
cc_compress(int lo, int hi, int* parent) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long v0 = lo + blockIdx.x * (long long)blockDim.x + threadIdx.x; v0 < hi;
         v0 += stride * PASS_UNROLL) {
        int p[PASS_UNROLL], pp[PASS_UNROLL];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j)
            p[j] = v0 + j * stride < hi ? parent[v0 + j * stride] : 0;
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) pp[j] = parent[p[j]];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            const long long v = v0 + j * stride;
            if (v >= hi) break;
            const int root = root_from(p[j], pp[j], parent);
            if (p[j] != root) parent[v] = root;
        }
    }
}

// ---- Afforest (Sutton et al., IPDPS 2018): link a few neighbours, find the giant, skip it ----

// GAPBS's Afforest link of two vertices, given their parents p1 and p2 (read at any time before:
// a stale parent is a valid parent): no walk to the roots, only a CAS of the larger parent's
// parent under the smaller, retried one level up. Keeps parent[v] <= v like hook(). A lost CAS
// continues from the value it found (a stale read of high as a root would otherwise repeat):
// each retry's high is below the last one's, so the loop ends.
__device__ void link_light(int p1, int p2, int* parent) {
    while (p1 != p2) {
        const int high = p1 > p2 ? p1 : p2;
        const int low = p1 + p2 - high;
        int ph = parent[high];
        if (ph == low) break;
        if (ph == high) {
            const int found = atomicCAS(parent + high, high, low);
            if (found == high) break;
            ph = found;
        }
        p1 = parent[ph];
        p2 = parent[low];
    }
}

__device__ __forceinline__ void link(int u, int v, int* parent, int light) {
    if (light) link_light(parent[u], parent[v], parent); else hook(u, v, parent);
}

// Sampling round r over one device's rows: vertex lo + u (u < rows) with more than r neighbours
// links to its r-th one. indptr / indices are the rows' own slice of the CSR (indptr[0] = 0);
// parent is this device's full-size array.
extern "C" __global__ void PASS_BOUNDS
cc_link_round(const long long* __restrict__ indptr, const int* __restrict__ indices, int lo,
              int rows, int r, int light, int* parent) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (!light) {
        // one vertex per step: a hook's walks to both roots and its CAS are a long dependent
        // chain of their own, which other vertices' loads issued ahead of it do not shorten.
        // And it reads its parents when it starts: a "root" read before the other hooks ran
        // is more often stale, and a hook from a stale root hangs its tree deeper.
        for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < rows;
             u += stride) {
            const long long b = indptr[u];
            if (indptr[u + 1] - b > r) hook(lo + (int)u, indices[b + r], parent);
        }
        return;
    }
    for (long long u0 = blockIdx.x * (long long)blockDim.x + threadIdx.x; u0 < rows;
         u0 += stride * PASS_UNROLL) {
        // linking lightly, each load of the PASS_UNROLL vertices (their row, neighbour and
        // both parents) is issued for all of them before any is used
        long long at[PASS_UNROLL];
        int v[PASS_UNROLL], pu[PASS_UNROLL], pv[PASS_UNROLL];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            const long long u = u0 + j * stride;
            at[j] = -1;
            if (u < rows) {
                const long long b = indptr[u];
                if (indptr[u + 1] - b > r) at[j] = b + r;
            }
        }
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            v[j] = at[j] >= 0 ? indices[at[j]] : 0;
        }
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            pu[j] = at[j] >= 0 ? parent[lo + u0 + j * stride] : 0;
            pv[j] = at[j] >= 0 ? parent[v[j]] : 0;
        }
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j)
            if (at[j] >= 0) link_light(pu[j], pv[j], parent);
    }
}

// The most frequent root of samples[i] (i < s <= 1024): the root of the (probably) giant
// component; among roots drawn equally often the smallest, as the CPU path's (np.unique's first
// maximum). One block of exactly 1024 threads: the roots are sorted in shared memory (a bitonic
// sort, 55 steps of one compare-exchange per pair), then the first thread of each run of equal
// roots finds the run's end by a binary search and votes (count, root) with one atomic:
// O(log^2 s) shared-memory steps a thread, where comparing every pair takes s. The walk to the
// roots makes it right on an array not compressed (a merge sender's); on a compressed one it is
// one load more.
extern "C" __global__ void __launch_bounds__(1024)
cc_sample_mode(const int* __restrict__ parent, const int* __restrict__ samples, int s, int* out) {
    const int NONE = 0x7fffffff;           // above every vertex id: sorts after the samples
    __shared__ int vals[1024];
    __shared__ unsigned long long best;
    const int t = threadIdx.x;
    if (t == 0) best = 0ull;
    vals[t] = t < s ? root_of(samples[t], parent) : NONE;
    __syncthreads();
    for (int k = 2; k <= 1024; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int p = t ^ j;
            if (p > t) {
                const int x = vals[t], y = vals[p];
                if ((x > y) == ((t & k) == 0)) {
                    vals[t] = y;
                    vals[p] = x;
                }
            }
            __syncthreads();
        }
    }
    if (t < s && (t == 0 || vals[t - 1] != vals[t])) {
        const int x = vals[t];
        int lo = t + 1, hi = s;            // the first index past the run: vals[lo] > x
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (vals[mid] > x) hi = mid; else lo = mid + 1;
        }
        // more samples win; at equal counts the smaller root (its complement is larger)
        atomicMax(&best, ((unsigned long long)(lo - t) << 32) | (unsigned int)(NONE - x));
    }
    __syncthreads();
    if (t == 0) out[0] = best ? NONE - (int)(best & 0xffffffffull) : 0;
}

// The rest of the arcs (from slot r on) of every vertex not (yet) in the giant's tree. A vertex
// whose parent is the giant root is in its tree for good (trees only grow), and any arc (u, v)
// it skips is also an arc (v, u) of v, processed unless v is in the giant's tree too: the
// adjacency must be symmetric (solver.py symmetrises directed graphs). A warp takes 32
// consecutive vertices: short lists are linked by their own lane, lists longer than 32 arcs by
// the whole warp in turn (a hub outside the giant must not serialise on one thread).
//
// The rows may be spread over k devices: device d owns vertices off[d] .. off[d + 1] - 1, its
// CSR slice is rows[d] (indptr, int64, rebased to 0) and rows[k + d] (indices); slices of other
// devices are read over NVLink (peer access). late has bit u set when u has arcs from slot r on:
// an isolated or low-degree vertex costs one bit, not a (possibly remote) indptr read.
// count += {rows linked, arcs linked, rows of other devices, their arcs}: warp sums, one atomic
// per warp that linked anything. It runs on device 0 (solver.py), so "other devices" are
// d > 0.
extern "C" __global__ void PASS_BOUNDS
cc_link_rest(const unsigned long long* __restrict__ rows,
             const int* __restrict__ off, int k, int n, int r,
             const unsigned int* __restrict__ late,
             const int* __restrict__ giant, int light, int* parent,
             unsigned long long* count) {
    const int g = giant[0];
    const int lane = threadIdx.x & 31;
    const long long step = (((long long)gridDim.x * blockDim.x) >> 5) * 32;
    for (long long first = ((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5) * 32;
         first < n; first += step * PASS_UNROLL) {
        // the warp's PASS_UNROLL groups of 32 vertices: their late bits, then their parents,
        // each loaded for every group before any is used
        bool late_u[PASS_UNROLL];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            const long long uu = first + j * step + lane;
            late_u[j] = uu < n && ((late[uu >> 5] >> (uu & 31)) & 1u);
        }
        unsigned int outside = 0;   // bit j: group j's vertex is late and outside the giant
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j)
            if (late_u[j] && load(parent + first + j * step + lane) != g) outside |= 1u << j;
        for (int j = 0; j < PASS_UNROLL && first + j * step < n; ++j) {
            const int u = (int)(first + j * step + lane);
            long long b = 0, e = 0;
            const int* idx = nullptr;
            int d = 0;
            if ((outside >> j) & 1u) {
                while (d + 1 < k && u >= off[d + 1]) ++d;
                const long long* ip = reinterpret_cast<const long long*>(rows[d]);
                idx = reinterpret_cast<const int*>(rows[k + d]);
                b = ip[u - off[d]] + r;
                e = ip[u - off[d] + 1];
            }
            const unsigned int active = __ballot_sync(0xffffffffu, e > b);
            if (!active) continue;
            const bool big = e - b > 32;
            if (!big)
                for (long long i = b; i < e; ++i) link(u, idx[i], parent, light);
            unsigned int todo = __ballot_sync(0xffffffffu, big);
            while (todo) {
                const int src = __ffs(todo) - 1;
                todo &= todo - 1;
                const int v = __shfl_sync(0xffffffffu, u, src);
                const long long vb = __shfl_sync(0xffffffffu, b, src);
                const long long ve = __shfl_sync(0xffffffffu, e, src);
                const int* vidx = reinterpret_cast<const int*>(
                    __shfl_sync(0xffffffffu, reinterpret_cast<long long>(idx), src));
                for (long long i = vb + lane; i < ve; i += 32) link(v, vidx[i], parent, light);
            }
            long long arcs = e > b ? e - b : 0;
            long long remote = d > 0 ? arcs : 0;
            for (int o = 16; o > 0; o >>= 1) {
                arcs += __shfl_down_sync(0xffffffffu, arcs, o);
                remote += __shfl_down_sync(0xffffffffu, remote, o);
            }
            const unsigned int remote_rows = __ballot_sync(0xffffffffu, e > b && d > 0);
            if (lane == 0) {
                atomicAdd(count + 0, (unsigned long long)__popc(active));
                atomicAdd(count + 1, (unsigned long long)arcs);
                if (remote_rows) {
                    atomicAdd(count + 2, (unsigned long long)__popc(remote_rows));
                    atomicAdd(count + 3, (unsigned long long)remote);
                }
            }
        }
    }
}

// ---- The merge of several devices' parent arrays into the first, by what changed ----
//
// After sampling, a sender's array says which vertices it joined, and most of them (on graphs
// with a giant component) joined one tree. So a sender does not hand over its whole array (4
// bytes per vertex, read over NVLink) but what differs from the identity: one bit per vertex in
// its giant's tree (its own vote, cc_sample_mode) and a list of (vertex, root) pairs for the
// other vertices it moved. If the list would not fit its buffer, the receiver reads the
// sender's array whole instead (compressed by then), so nothing is lost.

// A sender's whole array, by every thread of the grid: compress it (each vertex points at its
// root) and describe it against its giant's root giant[0]: bit v of `bits` (one word per 32
// vertices, written whole by the warp of those vertices) set when v is in the giant's tree, and
// (v, root) appended to `list` for every other vertex whose root is not itself. info[0] counts
// the pairs, also those past `cap` (then the list is not used). A block reserves its pairs'
// places with one atomic per step of the grid-stride loop (the loop runs block by block so that
// its warps meet there): with an atomic per warp, every warp would queue at the one word.
extern "C" __global__ void PASS_BOUNDS
cc_changes(int n, int* parent, const int* __restrict__ giant,
           unsigned int* __restrict__ bits, int2* __restrict__ list,
           long long cap, unsigned long long* info) {
    __shared__ unsigned int warp_first[32];
    __shared__ unsigned long long block_first;
    const int g = giant[0];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const long long stride = (long long)gridDim.x * blockDim.x;   // a multiple of 32
    // a step of a block: PASS_UNROLL groups of blockDim.x vertices, group j at bb + j * stride
    for (long long bb = blockIdx.x * (long long)blockDim.x; bb < n; bb += stride * PASS_UNROLL) {
        int p[PASS_UNROLL], pp[PASS_UNROLL];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            const long long vv = bb + j * stride + threadIdx.x;
            p[j] = vv < n ? parent[vv] : 0;
        }
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) pp[j] = parent[p[j]];
        unsigned int movers[PASS_UNROLL];
        int roots[PASS_UNROLL];
        unsigned int listed = 0;
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            const long long base = bb + j * stride + (threadIdx.x & ~31);
            const long long vv = base + lane;
            int root = -1;
            if (vv < n) {
                root = root_from(p[j], pp[j], parent);
                if (p[j] != root) parent[vv] = root;
            }
            roots[j] = root;
            const bool in_giant = vv < n && root == g;
            const unsigned int word = __ballot_sync(0xffffffffu, in_giant);
            if (lane == 0 && base < n) bits[base >> 5] = word;
            movers[j] = __ballot_sync(0xffffffffu, vv < n && !in_giant && root != (int)vv);
            listed += __popc(movers[j]);
        }
        if (lane == 0) warp_first[warp] = listed;
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned int total = 0;
            for (int w = 0; w < warps; ++w) {
                const unsigned int c = warp_first[w];
                warp_first[w] = total;
                total += c;
            }
            block_first = total ? atomicAdd(info, (unsigned long long)total) : 0ull;
        }
        __syncthreads();
        unsigned long long at = block_first + warp_first[warp];
#pragma unroll
        for (int j = 0; j < PASS_UNROLL; ++j) {
            if ((movers[j] >> lane) & 1u) {
                const unsigned long long mine = at + __popc(movers[j] & ((1u << lane) - 1u));
                if (mine < (unsigned long long)cap)
                    list[mine] = make_int2((int)(bb + j * stride + threadIdx.x), roots[j]);
            }
            at += __popc(movers[j]);
        }
        __syncthreads();
    }
}

// One sender as the receiver reads it: the addresses (in the receiver's view: a peer's memory
// over NVLink, or a message another process sent) of what cc_changes wrote and of the sender's
// array. The pairs are read as ints: in a message they may start at any 4-byte boundary.
struct Changes {
    const unsigned int* bits;
    const int* list;
    const unsigned long long* info;
    const int* giant;
    const int* parent;
};

// The receiver, by every thread of the grid: merge every sender's changes (`senders` of them,
// `table`) into `parent`. A sender whose list fits (info[0] <= cap) gives a hook of every vertex
// of its giant's tree under its giant's root, then one per pair; the others give (v,
// sender's parent[v]) for every v, as a whole-array merge. moved[0] += bytes read from the
// senders, moved[1] += senders read whole (thread 0 counts them).
extern "C" __global__ void PASS_BOUNDS
cc_merge_changes(const Changes* __restrict__ table, int senders, int n,
                 long long cap, int* parent,
                 unsigned long long* moved) {
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;   // a multiple of 32
    const int lane = threadIdx.x & 31;
    for (int s = 0; s < senders; ++s) {
        const Changes c = table[s];
        const unsigned long long listed = *c.info;
        if (listed > (unsigned long long)cap) {
            if (tid == 0) {
                atomicAdd(moved + 0, 4ull * (unsigned long long)n);
                atomicAdd(moved + 1, 1ull);
            }
            for (long long v = tid; v < n; v += stride) {
                const int p = c.parent[v];
                if (p != (int)v) hook((int)v, p, parent);
            }
            continue;
        }
        const long long words = ((long long)n + 31) >> 5;
        if (tid == 0) atomicAdd(moved + 0, 4ull * (unsigned long long)words + 8ull * listed);
        const int g = *c.giant;
        // A warp reads `per` of the sender's words at once (lane l word base + l, one
        // coalesced remote load), then hooks their vertices word by word, lane b taking bit b
        // (its parent reads coalesced): a remote load per vertex's word would make the loop
        // wait on NVLink latency at every step. `per` is 32 (1024 vertices a load) where the
        // words fill the grid's warps 32 deep, fewer on a smaller array, so that the words are
        // spread over most of the warps (ceil(words / per) of them, at least about half the
        // grid when there are as many words as warps): a warp hooks its words one after
        // another, and 32 of them on a quarter of the warps would leave the rest idle.
        const long long warps = stride >> 5;
        const int per = (int)min(32LL, max(1LL, (words + warps - 1) / warps));
        for (long long base = (tid >> 5) * per; base < words; base += warps * per) {
            const unsigned int mine = lane < per && base + lane < words ? c.bits[base + lane] : 0u;
            unsigned int set = __ballot_sync(0xffffffffu, mine != 0u);
            while (set) {
                const int j = __ffs(set) - 1;
                set &= set - 1;
                const unsigned int word = __shfl_sync(0xffffffffu, mine, j);
                const long long v = (base + j) * 32 + lane;
                if (((word >> lane) & 1u) && v < n) hook((int)v, g, parent);
            }
        }
        for (long long i = tid; i < (long long)listed; i += stride)
            hook(c.list[2 * i], c.list[2 * i + 1], parent);
    }
}

// The giant's size for the answer's facts: count += the vertices whose parent is the root of
// giant[0] (parent compressed: every vertex points at its root), without an n-sized temporary.
// Warp sums, one atomic per warp that counted any.
extern "C" __global__ void PASS_BOUNDS
cc_count_root(int n, const int* __restrict__ parent,
              const int* __restrict__ giant,
              unsigned long long* count) {
    const int root = parent[giant[0]];
    unsigned long long c = 0;
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < n;
         v += (long long)gridDim.x * blockDim.x)
        c += parent[v] == root;
    for (int o = 16; o; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}
