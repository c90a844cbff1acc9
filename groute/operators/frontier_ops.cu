// The frontier's conversions between its sparse (queue) and dense (bitmap) forms, used by
// groute/operators/frontier.py on CUDA devices.
#include "frontier.cuh"

extern "C" __global__ void queue_to_bitmap_k(const int* queue, long long n, unsigned int* words) {
    queue_to_bitmap(queue, n, words, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                    (long long)gridDim.x * blockDim.x);
}

// The set bits of words (n vertices) as a queue, in any order.
extern "C" __global__ void bitmap_to_queue_k(const unsigned int* words, long long n, int* queue,
                                             int* count) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
        if (bitmap_test(words, (int)v)) queue_push(queue, count, (int)v);
    }
}

