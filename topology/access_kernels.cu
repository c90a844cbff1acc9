// Kernels for the topology microbenchmarks.
//
// Every pointer arrives as a 64-bit integer so that one kernel serves memory on this device, on a
// peer device (read or written over NVLink/PCIe once peer access is enabled) and mapped pinned
// host memory alike: with unified addressing the same address works from any device.
// Grids are grid-stride loops, sized by the caller to fill the device.

typedef unsigned long long u64;

// splitmix64 finaliser: a cheap, well-mixed hash turning a counter into a random-looking index.
__device__ __forceinline__ u64 mix64(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 grid_threads() {
    return (u64)gridDim.x * blockDim.x;
}

// Device-initiated copy of n_words 4-byte words, as 16-byte vectors when both ends allow it.
extern "C" __global__ void copy_words(u64 dst_addr, u64 src_addr, u64 n_words) {
    int* dst = (int*)dst_addr;
    const int* src = (const int*)src_addr;
    const u64 stride = grid_threads();
    u64 n_vec = ((dst_addr | src_addr) & 15ull) == 0 ? n_words / 4 : 0;
    int4* dst4 = (int4*)dst;
    const int4* src4 = (const int4*)src;
    for (u64 i = global_thread(); i < n_vec; i += stride) {
        dst4[i] = src4[i];
    }
    for (u64 i = n_vec * 4 + global_thread(); i < n_words; i += stride) {
        dst[i] = src[i];
    }
}

// Coalesced read: consecutive threads read consecutive 16-byte vectors. The XOR of everything a
// thread read goes to sink[thread] so the loads cannot be optimised away.
extern "C" __global__ void read_coalesced(u64 src_addr, u64 n_words, u64 sink_addr) {
    const int* src = (const int*)src_addr;
    const int4* src4 = (const int4*)src;
    const u64 stride = grid_threads();
    const u64 n_vec = (src_addr & 15ull) == 0 ? n_words / 4 : 0;
    int acc = 0;
    for (u64 i = global_thread(); i < n_vec; i += stride) {
        int4 v = src4[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    for (u64 i = n_vec * 4 + global_thread(); i < n_words; i += stride) {
        acc ^= src[i];
    }
    ((int*)sink_addr)[global_thread()] = acc;
}

// Coalesced write of `value` into n_words words.
extern "C" __global__ void write_coalesced(u64 dst_addr, u64 n_words, int value) {
    int* dst = (int*)dst_addr;
    int4* dst4 = (int4*)dst;
    const u64 stride = grid_threads();
    const u64 n_vec = (dst_addr & 15ull) == 0 ? n_words / 4 : 0;
    const int4 v = make_int4(value, value, value, value);
    for (u64 i = global_thread(); i < n_vec; i += stride) {
        dst4[i] = v;
    }
    for (u64 i = n_vec * 4 + global_thread(); i < n_words; i += stride) {
        dst[i] = value;
    }
}

// Random read: n_access independent 4-byte loads at hashed word indices within [0, mask].
extern "C" __global__ void read_random(u64 src_addr, u64 mask, u64 n_access, u64 seed, u64 sink_addr) {
    const int* src = (const int*)src_addr;
    const u64 stride = grid_threads();
    int acc = 0;
    for (u64 i = global_thread(); i < n_access; i += stride) {
        acc ^= src[mix64(i ^ seed) & mask];
    }
    ((int*)sink_addr)[global_thread()] = acc;
}

// Random write: n_access independent 4-byte stores at hashed word indices within [0, mask].
extern "C" __global__ void write_random(u64 dst_addr, u64 mask, u64 n_access, u64 seed) {
    int* dst = (int*)dst_addr;
    const u64 stride = grid_threads();
    for (u64 i = global_thread(); i < n_access; i += stride) {
        dst[mix64(i ^ seed) & mask] = (int)i;
    }
}

// Holds the stream for `ns` nanoseconds (one thread polls the global timer), so that the host
// can enqueue a whole benchmark step behind it before any of that step starts.
extern "C" __global__ void spin_ns(u64 ns) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    u64 start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
