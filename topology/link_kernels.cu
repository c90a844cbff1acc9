// Kernels that move one buffer through a device-initiated Link (groute/runtime/link.cuh), for the
// packetization and broadcast benchmarks: the sender's grid sends `src` as the packets first,
// first + 1, ... (groute_link_send_grid); the receiver's grid takes them, copies each into its
// place in `dst` (when dst is not null) and releases it (groute_link_receive_grid). `first`: the
// packets the link carried before this message; `parts`: the blocks per packet
// (DeviceLink.grid_shape). Blocks of 256 threads (device_ops.THREADS), eight of them resident per
// multiprocessor: a kernel at the link's other end on the same GPU finds room.
#include "link.cuh"

typedef unsigned long long u64;

extern "C" __global__ void __launch_bounds__(256, 8)
link_send_words(const groute_link* link, const int* src, u64 words, u64 first, u64 parts) {
    groute_link_send_grid(*link, first, src, words, parts);
}

extern "C" __global__ void __launch_bounds__(256, 8)
link_receive_words(const groute_link* link, int* dst, u64 words, u64 first, u64 parts) {
    groute_link_receive_grid(*link, first, dst, words, parts);
}
