// An answer split across devices by new ids, gathered back into the graph's order: this
// device's slice of the answer, out[x] = the value of new id index[x], read from the part of
// the device whose new-id range [offsets[i], offsets[i+1]) holds it, through peer memory
// (groute/runtime/renumber.py). The parts' addresses come as arguments (at most eight
// devices); a value is copied as raw bytes, so one kernel per value size serves every dtype.

template <typename Index, typename Word>
__device__ void gather_parts(const Index* __restrict__ index, long long count,
                             const long long* __restrict__ offsets, int k,
                             const unsigned long long* parts, Word* __restrict__ out) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < count; x += stride) {
        const long long id = (long long)index[x];
        int owner = 0;
        while (owner + 1 < k && id >= offsets[owner + 1]) ++owner;
        out[x] = reinterpret_cast<const Word*>(parts[owner])[id - offsets[owner]];
    }
}

#define GROUTE_GATHER_PARTS(NAME, INDEX, WORD)                                                  \
    extern "C" __global__ void NAME(const INDEX* index, long long count,                        \
                                    const long long* offsets, int k,                            \
                                    unsigned long long p0, unsigned long long p1,               \
                                    unsigned long long p2, unsigned long long p3,               \
                                    unsigned long long p4, unsigned long long p5,               \
                                    unsigned long long p6, unsigned long long p7, WORD* out) {  \
        const unsigned long long parts[8] = {p0, p1, p2, p3, p4, p5, p6, p7};                   \
        gather_parts<INDEX, WORD>(index, count, offsets, k, parts, out);                        \
    }

GROUTE_GATHER_PARTS(groute_gather_parts_i32_w4, int, unsigned int)
GROUTE_GATHER_PARTS(groute_gather_parts_i32_w8, int, unsigned long long)
GROUTE_GATHER_PARTS(groute_gather_parts_i64_w4, long long, unsigned int)
GROUTE_GATHER_PARTS(groute_gather_parts_i64_w8, long long, unsigned long long)
