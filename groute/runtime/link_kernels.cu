// The host's own kernels on a device-initiated Link (groute/runtime/device_link.py).
#include "link.cuh"

// Close: after the sending kernels (stream order), publish how many packets were sent.
extern "C" __global__ void groute_link_close(const groute_link* link) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        st_release_sys64(link->end, *(volatile unsigned long long*)link->head + 1);
}

// The struct's size and field offsets as this compiler lays it out, for the host to compare with
// what it packs (kernels.check_struct_layout).
extern "C" __global__ void groute_link_layout(long long* out) {
    out[0] = sizeof(groute_link);
    out[1] = (long long)(size_t)&((groute_link*)0)->ready;
    out[2] = (long long)(size_t)&((groute_link*)0)->status;
    out[3] = (long long)(size_t)&((groute_link*)0)->timeout_ns;
}
