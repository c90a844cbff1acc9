// Connected components kernels (apps/cc.py): hooking and compression on a parent array, after
// Soman et al. and Sutton et al. ("Afforest"). Invariant: parent[v] <= v, because a hook only
// ever writes a smaller root under a larger one (CAS) and compression only shortcuts to an
// ancestor. So after full compression parent[v] is the smallest vertex id of v's component.
//
// Parent reads are volatile: other threads change the array concurrently and L1 is not coherent,
// so a cached value could make the hook loop spin on stale data.

__device__ __forceinline__ int load(const int* p) { return *(const volatile int*)p; }

// Make u and v's trees one tree (GAP/Afforest Link): climb towards the roots; when the higher
// of the two is a root, CAS it under the lower one.
__device__ void hook(int u, int v, int* parent) {
    int p1 = load(parent + u);
    int p2 = load(parent + v);
    while (p1 != p2) {
        const int high = p1 > p2 ? p1 : p2;
        const int low = p1 + p2 - high;
        const int p_high = load(parent + high);
        if (p_high == low) break;
        if (p_high == high && atomicCAS(parent + high, high, low) == high) break;
        p1 = load(parent + load(parent + high));
        p2 = load(parent + low);
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
