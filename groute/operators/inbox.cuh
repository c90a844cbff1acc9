// Device-initiated sends between the devices of one host: a device appends an item (a vertex
// another device owns, and its message) straight into the owner's inbox in the owner's memory
// through a peer pointer (NVLink; one GPU's own memory for logical devices), reserving the slot
// with a system-scope atomic on the owner's count. No host step moves anything. The owner reads
// its inbox after a meeting of the devices (persistent.cuh: a grid barrier, then its
// system-scope release and acquire), which orders every append before the read.
//
// Each device has two inboxes, by parity: the fused loop on several devices sends a step's items
// to the inbox of that step's parity while the owner may still be reading the other parity's
// inbox of the step before (groute/operators/loop_source.py says when each count is reset).
#pragma once
#include "appends.cuh"
#include "partition.cuh"

#define INBOX_MAX_DEVICES 8

// Where every device's inboxes are: the same table on every device, uploaded by the host
// (groute/engines/fused_multi.py packs it as uint64 words: every field is 8 bytes, so there is
// no padding to agree on).
struct InboxTable {
    long long off[INBOX_MAX_DEVICES + 1];   // device j owns the global ids [off[j], off[j + 1])
    long long cap[INBOX_MAX_DEVICES];       // the items each inbox of device j holds
    int* ids[2][INBOX_MAX_DEVICES];         // by parity: the items, as the owner's local positions
    void* msgs[2][INBOX_MAX_DEVICES];       // by parity: their messages (null: no step has one)
    unsigned long long* count[INBOX_MAX_DEVICES];   // device j's two counts, one per parity
    long long k;                            // the devices
};
// the host's words: off at 0, cap at 9, ids at 17, msgs at 33, count at 49, k at 57. NVRTC
// (the runtime compile) has no constant offsetof, so the offsets are asserted where nvcc
// compiles this header (the CPU tests' compile check); the size everywhere.
static_assert(sizeof(InboxTable) == 58 * 8, "InboxTable: the size groute/engines/fused_multi.py packs");
#if !defined(__CUDACC_RTC__)
static_assert(offsetof(InboxTable, cap) == 9 * 8
              && offsetof(InboxTable, ids) == 17 * 8 && offsetof(InboxTable, msgs) == 33 * 8
              && offsetof(InboxTable, count) == 49 * 8 && offsetof(InboxTable, k) == 57 * 8,
              "InboxTable: the layout groute/engines/fused_multi.py packs");
#endif

// Append global id v, which device j (not this one) owns, with message m (kMessage) to j's inbox
// of `parity`: one system-scope atomic per group of lanes sending to the same owner at once
// (several devices reserve in one count). False when the inbox is full: the host sizes it for
// every arc into j from the other devices' rows, which a frontier without repeats never exceeds.
template <bool kMessage, class T>
__device__ __forceinline__ bool inbox_send(const InboxTable& t, int parity, int j, int v, T m) {
    cg::coalesced_group g = cg::coalesced_threads();
    cg::coalesced_group same = cg::labeled_partition(g, j);
    unsigned long long base = 0;
    if (same.thread_rank() == 0)
        base = atomicAdd_system(t.count[j] + parity, (unsigned long long)same.size());
    const unsigned long long slot = same.shfl(base, 0) + same.thread_rank();
    if (slot >= (unsigned long long)t.cap[j]) return false;
    t.ids[parity][j][slot] = (int)(v - t.off[j]);
    if constexpr (kMessage) static_cast<T*>(t.msgs[parity][j])[slot] = m;
    return true;
}

// Device `me`'s inbox of `parity` (threads tid, tid + nthreads, ...): take(v, m) for each item,
// v a local position, m its message (kMessage; else a zero). After the cross-device barrier
// that follows the sends; the items were written by other devices, so they are read from L2.
template <bool kMessage, class T, class Take>
__device__ __forceinline__ void inbox_receive(const InboxTable& t, int me, int parity,
                                              long long tid, long long nthreads, Take take) {
    unsigned long long n = __ldcg(t.count[me] + parity);
    if (n > (unsigned long long)t.cap[me]) n = (unsigned long long)t.cap[me];  // a full inbox
    const int* ids = t.ids[parity][me];
    for (long long i = tid; i < (long long)n; i += nthreads) {
        if constexpr (kMessage)
            take(__ldcg(&ids[i]), __ldcg(&static_cast<const T*>(t.msgs[parity][me])[i]));
        else
            take(__ldcg(&ids[i]), T(0));
    }
}

// Empty device `me`'s inbox of `parity` for its next use (one thread, after a grid barrier
// that follows every thread's inbox_receive; the next cross-device barrier publishes it).
__device__ __forceinline__ void inbox_reset(const InboxTable& t, int me, int parity) {
    t.count[me][parity] = 0ull;
}
