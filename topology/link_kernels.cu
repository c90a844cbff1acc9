// Kernels that move one buffer through a device-initiated Link (groute/runtime/link.cuh), for the
// packetization benchmark: the sender's blocks each claim the next packet of the message and send
// that part of `src`; the receiver's blocks each claim the next packet, copy it into its place in
// `dst` (when dst is not null) and release it. Both claim below first + packets (`first`: the
// packets the link carried before this message), so a launch takes exactly its message.
#include "link.cuh"

typedef unsigned long long u64;

extern "C" __global__ void link_send_words(const groute_link* link, const int* src, u64 words, u64 first) {
    const groute_link& l = *link;
    const u64 per = l.packet_bytes / 4;
    const u64 packets = (words + per - 1) / per;
    __shared__ u64 n;
    while (true) {
        if (threadIdx.x == 0) n = groute_link_claim(l.head, first + packets);
        __syncthreads();
        const u64 mine = n;
        __syncthreads();
        if (mine == GROUTE_LINK_NONE) return;
        const u64 part = mine - first;
        const u64 count = min(per, words - part * per);
        if (!groute_link_send_block_as(l, mine, src + part * per, count, part)) return;
    }
}

extern "C" __global__ void link_receive_words(const groute_link* link, int* dst, u64 words, u64 first) {
    const groute_link& l = *link;
    const u64 per = l.packet_bytes / 4;
    const u64 packets = (words + per - 1) / per;
    __shared__ u64 n;
    while (true) {
        if (threadIdx.x == 0) n = groute_link_claim(l.tail, first + packets);
        __syncthreads();
        const u64 mine = n;
        __syncthreads();
        if (mine == GROUTE_LINK_NONE) return;
        u64 count, tag;
        bool ended;
        const void* slot = groute_link_receive_block(l, mine, &count, &tag, &ended);
        if (slot == nullptr) return;
        if (dst != nullptr) groute_link_copy_block(dst + tag * per, slot, count * 4);
        groute_link_release_block(l, mine);
    }
}
