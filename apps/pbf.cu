// Predicate-based filter (Groute seed 004, fig. 3-1/3-2): keep the elements of a segment for
// which GROUTE_PRED(x) holds. GROUTE_PRED is defined at compile time (-D) by apps/pbf.py.
//
// Appends use warp-aggregated atomics: the warp votes (ballot), its first active lane reserves
// popc(mask) slots with one atomicAdd, and each keeping lane writes at its rank within the vote.
// Output order is therefore not the input order (as in the paper); pbf.py documents this.

#ifndef GROUTE_PRED
#error "GROUTE_PRED(x) must be defined"
#endif

extern "C" __global__ void pbf_filter(const int* __restrict__ in, long long n,
                                      int* __restrict__ out, unsigned long long* __restrict__ count)
{
    const unsigned lane = threadIdx.x & 31u;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // base is uniform across the block, so whole warps iterate together (required by *_sync).
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long i = base + threadIdx.x;
        int x = 0;
        bool keep = false;
        if (i < n) {
            x = in[i];
            keep = GROUTE_PRED(x);
        }
        const unsigned mask = __ballot_sync(0xffffffffu, keep);
        if (mask == 0u) continue;  // warp-uniform
        const int leader = __ffs(mask) - 1;
        unsigned long long first = 0;
        if ((int)lane == leader) first = atomicAdd(count, (unsigned long long)__popc(mask));
        first = __shfl_sync(0xffffffffu, first, leader);
        if (keep) out[first + __popc(mask & ((1u << lane) - 1u))] = x;
    }
}
