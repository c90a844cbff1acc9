// The reductions by key's per-row choice on a GPU (groute/operators/keyed_cuda.py).

// A candidate of a row's choice: its value, its key, whether it is the row's own key.
struct Candidate {
    double value;
    long long key;
    bool own;
    bool valid;
};

// Whether a beats b in the choice's order: the greater value, then the row's own key, then the
// smaller key (largest == 0) or the larger one; any candidate beats none. A total order over a
// row's groups (their keys differ), so the warp's reduction below finds the same winner
// whatever the lanes' split.
__device__ __forceinline__ bool beats(const Candidate& a, const Candidate& b, int largest) {
    if (!b.valid) return a.valid;
    if (!a.valid) return false;
    if (a.value != b.value) return a.value > b.value;
    if (a.own != b.own) return a.own;
    return largest ? a.key > b.key : a.key < b.key;
}

// Per row i, the key of its groups [starts[i], starts[i+1]) whose value is greatest; ties go
// to the row's own key (own[i]), then to the smallest key (largest == 0) or the largest. One
// warp per row: its lanes take the groups in turn and the warp reduces their best, so a hub's
// many groups are shared by 32 lanes; the values are compared as they are (no float atomics).
extern "C" __global__ void best_of_rows(const long long* starts, const long long* keys,
                                        const double* values, const long long* own, int rows,
                                        int largest, long long* chosen)
{
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= rows) return;   // the whole warp leaves together
    const long long mine = own[warp];
    Candidate best = {0.0, 0, false, false};
    for (long long j = starts[warp] + lane; j < starts[warp + 1]; j += 32) {
        const Candidate c = {values[j], keys[j], keys[j] == mine, true};
        if (beats(c, best, largest)) best = c;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        Candidate other;
        other.value = __shfl_down_sync(0xffffffffu, best.value, offset);
        other.key = __shfl_down_sync(0xffffffffu, best.key, offset);
        other.own = __shfl_down_sync(0xffffffffu, (int)best.own, offset) != 0;
        other.valid = __shfl_down_sync(0xffffffffu, (int)best.valid, offset) != 0;
        if (beats(other, best, largest)) best = other;
    }
    if (lane == 0) chosen[warp] = best.valid ? best.key : mine;
}
