// Connected components kernels (apps/cc.py): hooking and compression on a parent array, after
// Soman et al., Sutton et al. ("Afforest") and Jaiganesh & Burtscher (ECL-CC). Invariant:
// parent[v] <= v, because a hook only ever CASes a larger root under a smaller one and every
// other write replaces a parent by one of its ancestors. So after full compression parent[v] is
// the smallest vertex id of v's component.
//
// Parent reads are volatile: other threads change the array concurrently and L1 is not coherent,
// so a cached value could make a loop spin on stale data.

__device__ __forceinline__ int load(const int* p) { return *(const volatile int*)p; }
__device__ __forceinline__ void store(int* p, int x) { *(volatile int*)p = x; }

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

extern "C" __global__ void cc_init(int n, int* __restrict__ parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x)
        parent[v] = v;
}

// One segment of the edge list: interleaved (u, v) pairs.
extern "C" __global__ void cc_hook(const int* __restrict__ edges, long long m, int* parent) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        const int2 uv = reinterpret_cast<const int2*>(edges)[e];
        hook(uv.x, uv.y, parent);
    }
}

// Merge another device's parent array into this one: each (v, other[v]) is an edge.
extern "C" __global__ void cc_merge(const int* __restrict__ other, int n, int* parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        const int p = other[v];
        if (p != v) hook(v, p, parent);
    }
}

// Full path compression (pointer jumping until every vertex points at its root).
extern "C" __global__ void cc_compress(int n, int* parent) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        int p = load(parent + v);
        int pp = load(parent + p);
        while (p != pp) {
            p = pp;
            pp = load(parent + p);
        }
        parent[v] = p;
    }
}
