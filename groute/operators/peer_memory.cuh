// Operations on memory that the GPUs of one host share (a peer's memory reached over NVLink,
// or device 0's counters): system-scope loads, stores and reductions, and the host-wide clock.
#pragma once

// System-scope release and acquire on a counter that devices of one host share (in device 0's
// memory, reached over NVLink with native peer atomics).
__device__ __forceinline__ void red_add_release_sys(unsigned long long* p, unsigned long long v) {
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
// A flag another device (or the host) waits on with ld_acquire_sys: every write this thread
// has made or seen (a block's, after __syncthreads) is visible before the flag.
__device__ __forceinline__ void st_release_sys64(unsigned long long* p, unsigned long long v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

// Fire-and-forget reductions and stores on a peer's memory (no value comes back over the link);
// ordered before the owner's reads by a later system-scope release and acquire.
// Mixed scopes on one word: the owner's own device-scope atomics (atomicAdd, atomicExch) and
// the peers' system-scope reductions below meet on the same words (the relaxations' best
// values, the asynchronous push's residuals). CUDA promises atomicity only among atomics whose
// scope includes both threads; over NVLink a peer's reduction is performed at the owner's L2,
// where the owner's device-scope atomics are performed too, and that is what these kernels
// rely on. On a platform that performed them elsewhere the owner's atomics on such words would
// have to become system-scope (atomicAdd_system).
__device__ __forceinline__ void red_min_sys(int* p, int v) {
    asm volatile("red.relaxed.sys.global.min.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_or_sys(unsigned int* p, unsigned int v) {
    asm volatile("red.relaxed.sys.global.or.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add_sys_f32(float* p, float v) {
    asm volatile("red.relaxed.sys.global.add.f32 [%0], %1;" :: "l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void red_add_sys64(unsigned long long* p, unsigned long long v) {
    asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys64(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

// The global timer (ns), the same clock on every device of the host.
__device__ __forceinline__ unsigned long long global_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
