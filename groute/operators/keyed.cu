// The reductions by key's per-row choice on a GPU (groute/operators/keyed_cuda.py).

// Per row i, the key of its groups [starts[i], starts[i+1]) whose value is greatest; ties go
// to the row's own key (own[i]), then to the smallest key (largest == 0) or the largest. A row
// scans its own groups, so the values are compared as they are (no float atomics) and the
// answer is the same whatever the order the groups were summed in.
extern "C" __global__ void best_of_rows(const long long* starts, const long long* keys,
                                        const double* values, const long long* own, int rows,
                                        int largest, long long* chosen)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const long long mine = own[i];
    long long best_key = mine;
    double best = 0.0;
    bool found = false;
    for (long long j = starts[i]; j < starts[i + 1]; ++j) {
        const double value = values[j];
        const long long key = keys[j];
        bool take;
        if (!found || value > best) {
            take = true;
        } else if (value == best && best_key != mine) {
            take = key == mine || (largest ? key > best_key : key < best_key);
        } else {
            take = false;
        }
        if (take) {
            best = value;
            best_key = key;
            found = true;
        }
    }
    chosen[i] = best_key;
}
