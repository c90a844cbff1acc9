// The device side of a device-initiated Link (groute/runtime/device_link.py): kernels send packets
// straight into receive slots in the receiver's memory and publish each with a flag; the receiver
// (a kernel, or the host) waits on the flags and hands a slot back by writing the sender's `freed`
// word. No host step is on the path.
//
// The protocol, per link of B slots. Packet n (numbered from 0 in reservation order) goes into
// slot n % B. The sender reserves n (`head`, in its own memory), waits until the packet before it
// in that slot (n - B) is released (`freed[slot] > n - B`, in its own memory, written by the
// receiver), writes the data into the slot, then writes the count and tag and publishes with a
// release store `ready[slot] = n + 1` (in the receiver's memory, or mapped host memory when the
// host receives). The receiver waits with an acquire load until `ready[slot] == n + 1`, reads,
// and releases with a release store `freed[slot] = n + 1` into the sender's memory. A slot's
// words only grow, so nothing is reset between packets or launches. Closing the link (the host,
// after the sending kernels) writes `end = packets sent + 1`: a receiver waiting for a packet
// at or past it learns that the stream ended. Every wait gives up when the host stops the link
// (`status` 1, in mapped host memory) or after `timeout_ns` (it sets `status` 2, which the host
// raises as a WaitTimeout naming the link).
//
// A large packet is written by many blocks (one block cannot fill NVLink): the `parts` blocks of
// a group each write a share of its bytes, then arrive at the slot's counter `written` (in the
// sender's memory) after a system fence; the block that arrives last resets the counter and
// publishes, so the packet is published once, after every share. A group of receiving blocks
// reads the shares the same way and the last of them (counter `taken`, in the receiver's memory)
// releases the slot. A counter is reset before the flag it precedes, so the slot's next packet
// counts from 0.
//
// Use: `#include "link.cuh"` (groute.kernels puts this folder on every include path; a RawKernel
// of your own takes groute.kernels.include_options()), take `const groute_link* link` as a kernel
// argument and pass the link's `tx` (sending kernels) or `rx` (receiving kernels). One thread
// calls the single-thread functions; the `_block` and `_part` ones are called by every thread of a
// block, the `_grid` ones by every thread of the grid.
#pragma once
#include "peer_memory.cuh"

struct groute_link {
    char* slots;                     // receiver: B slots of packet_bytes
    unsigned long long* ready;       // receiver (or mapped host): per slot, packet number + 1 once published
    unsigned long long* count;       // with ready: per slot, the packet's items
    unsigned long long* tag;         // with ready: per slot, the sender's tag
    unsigned long long* freed;       // sender: per slot, packet number + 1 of the last released
    unsigned long long* head;        // sender: packets reserved so far
    unsigned long long* tail;        // receiver: packets claimed by receiving kernels so far
    unsigned long long* end;         // with ready: 0 while open, packets sent + 1 once closed
    int* status;                     // mapped host: 0 open, 1 stopped by the host, 2 a wait timed out
    unsigned long long* written;     // sender: per slot, blocks done writing the packet in it
    unsigned long long* taken;       // receiver: per slot, blocks done reading the packet in it
    unsigned long long packet_bytes; // a slot's bytes: the packet size times item_bytes
    unsigned long long item_bytes;
    unsigned long long num_buffers;
    unsigned long long timeout_ns;   // a wait gives up after this long
};
// groute/runtime/device_link.py packs it as 15 words of 8 bytes (every field is 8 bytes: no
// padding to agree on)
static_assert(sizeof(groute_link) == 15 * 8, "groute_link: the size device_link.py packs");

#define GROUTE_LINK_NONE (~0ull)

// A wait's bookkeeping: true (give up) once the host stopped the link or the wait has lasted
// timeout_ns. Reads the host's word and the clock every 64th call only: a poll of host memory
// crosses PCIe.
__device__ __forceinline__ bool groute_link_gave_up(const groute_link& l, unsigned long long& t0,
                                                    unsigned int& polls) {
    if ((++polls & 63u) != 0u) return false;
    if (*(volatile int*)l.status != 0) return true;
    const unsigned long long now = global_timer();
    if (t0 == 0) t0 = now;
    if (now - t0 > l.timeout_ns) {
        *(volatile int*)l.status = 2;
        return true;
    }
    return false;
}

// Sender, one thread: reserve the next packet number (any number of threads, blocks and kernels
// of the sending device may reserve at once).
__device__ __forceinline__ unsigned long long groute_link_reserve(const groute_link& l) {
    return atomicAdd(l.head, 1ull);
}

// One thread: the next number of `counter` below `limit`, or GROUTE_LINK_NONE when it has reached
// it (a kernel that sends or receives a known number of packets claims them so, and the counter
// never runs past what was sent).
__device__ __forceinline__ unsigned long long groute_link_claim(unsigned long long* counter,
                                                                unsigned long long limit) {
    unsigned long long cur = *(volatile unsigned long long*)counter;
    while (cur < limit) {
        const unsigned long long seen = atomicCAS(counter, cur, cur + 1);
        if (seen == cur) return cur;
        cur = seen;
    }
    return GROUTE_LINK_NONE;
}

// Sender, one thread: wait until packet n's slot is free; its address, or nullptr when the link
// gave up (leave the kernel).
__device__ __forceinline__ void* groute_link_acquire(const groute_link& l, unsigned long long n) {
    const unsigned long long slot = n % l.num_buffers;
    if (n >= l.num_buffers) {
        const unsigned long long need = n - l.num_buffers + 1;   // packet n - B released
        unsigned long long t0 = 0;
        unsigned int polls = 0;
        while (ld_acquire_sys(l.freed + slot) < need) {
            if (groute_link_gave_up(l, t0, polls)) return nullptr;
        }
    }
    return l.slots + slot * l.packet_bytes;
}

// Sender, one thread, after every write into packet n's slot (a block's: after __syncthreads):
// publish `count` items with `tag`.
__device__ __forceinline__ void groute_link_publish(const groute_link& l, unsigned long long n,
                                                    unsigned long long count, unsigned long long tag) {
    const unsigned long long slot = n % l.num_buffers;
    l.count[slot] = count;
    l.tag[slot] = tag;
    st_release_sys64(l.ready + slot, n + 1);
}

// Receiver, one thread: the next packet number for a receiving kernel that takes packets until
// the link ends (a kernel receiving a known number claims with groute_link_claim(l.tail, limit)).
__device__ __forceinline__ unsigned long long groute_link_next(const groute_link& l) {
    return atomicAdd(l.tail, 1ull);
}

// Receiver, one thread: wait for packet n; its slot's address with its count and tag, or nullptr
// when the link ended before packet n (*ended = true) or gave up (*ended = false).
__device__ __forceinline__ const void* groute_link_receive(const groute_link& l, unsigned long long n,
                                                           unsigned long long* count,
                                                           unsigned long long* tag, bool* ended) {
    const unsigned long long slot = n % l.num_buffers;
    unsigned long long t0 = 0;
    unsigned int polls = 0;
    *ended = false;
    while (ld_acquire_sys(l.ready + slot) != n + 1) {
        const unsigned long long e = ld_acquire_sys(l.end);
        if (e != 0 && n + 1 >= e) {
            *ended = true;
            return nullptr;
        }
        if (groute_link_gave_up(l, t0, polls)) return nullptr;
    }
    *count = l.count[slot];
    *tag = l.tag[slot];
    return l.slots + slot * l.packet_bytes;
}

// Receiver, one thread, after every read of packet n's slot (a block's: after __syncthreads):
// hand the slot back to the sender.
__device__ __forceinline__ void groute_link_release(const groute_link& l, unsigned long long n) {
    st_release_sys64(l.freed + n % l.num_buffers, n + 1);
}

// A block copies `bytes` from `src` to `dst` (which do not overlap), as 16-byte vectors when both
// allow it, four loads in flight per thread before their stores. The loads go to L2 (__ldcg), not
// through the read-only or L1 path: a slot is rewritten by the sender while the kernel runs, and
// a line of its earlier packet held there would be read as this one's.
__device__ __forceinline__ void groute_link_copy_block(void* __restrict__ dst, const void* src,
                                                       unsigned long long bytes) {
    unsigned long long i = threadIdx.x;
    if ((((unsigned long long)dst | (unsigned long long)src) & 15ull) == 0) {
        int4* __restrict__ d = static_cast<int4*>(dst);
        const int4* s = static_cast<const int4*>(src);
        const unsigned long long vectors = bytes / 16, step = blockDim.x;
        for (; i + 3 * step < vectors; i += 4 * step) {
            const int4 a = __ldcg(s + i), b = __ldcg(s + i + step), c = __ldcg(s + i + 2 * step),
                       e = __ldcg(s + i + 3 * step);
            d[i] = a;
            d[i + step] = b;
            d[i + 2 * step] = c;
            d[i + 3 * step] = e;
        }
        for (; i < vectors; i += step) d[i] = __ldcg(s + i);
        i = vectors * 16 + threadIdx.x;
    }
    for (; i < bytes; i += blockDim.x)
        static_cast<char*>(dst)[i] = __ldcg(static_cast<const char*>(src) + i);
}

// The whole block sends `count` items (at most a packet) from `src` as packet n, tagged `tag`,
// waiting for n's slot first. False when the link gave up (every thread: leave the kernel).
__device__ __forceinline__ bool groute_link_send_block_as(const groute_link& l, unsigned long long n,
                                                          const void* src, unsigned long long count,
                                                          unsigned long long tag) {
    __shared__ void* slot;
    if (threadIdx.x == 0) slot = groute_link_acquire(l, n);
    __syncthreads();
    void* dst = slot;
    __syncthreads();                 // every thread has read `slot` before anyone reuses it
    if (dst == nullptr) return false;
    groute_link_copy_block(dst, src, count * l.item_bytes);
    __syncthreads();
    if (threadIdx.x == 0) groute_link_publish(l, n, count, tag);
    return true;
}

// The whole block sends `count` items from `src` as the next packet it reserves.
__device__ __forceinline__ bool groute_link_send_block(const groute_link& l, const void* src,
                                                       unsigned long long count, unsigned long long tag) {
    __shared__ unsigned long long n;
    if (threadIdx.x == 0) n = groute_link_reserve(l);
    __syncthreads();
    const unsigned long long mine = n;
    __syncthreads();
    return groute_link_send_block_as(l, mine, src, count, tag);
}

// The whole block waits for packet n: every thread gets its slot (nullptr: ended or gave up, as
// groute_link_receive says in *ended), count and tag.
__device__ __forceinline__ const void* groute_link_receive_block(const groute_link& l,
                                                                 unsigned long long n,
                                                                 unsigned long long* count,
                                                                 unsigned long long* tag, bool* ended) {
    __shared__ const void* slot;
    __shared__ unsigned long long shared_count, shared_tag;
    __shared__ bool shared_ended;
    if (threadIdx.x == 0) {
        slot = groute_link_receive(l, n, &shared_count, &shared_tag, &shared_ended);
    }
    __syncthreads();
    const void* mine = slot;
    *count = shared_count;
    *tag = shared_tag;
    *ended = shared_ended;
    __syncthreads();
    return mine;
}

// The whole block, done reading packet n: hand its slot back.
__device__ __forceinline__ void groute_link_release_block(const groute_link& l, unsigned long long n) {
    __syncthreads();
    if (threadIdx.x == 0) groute_link_release(l, n);
}

// Many blocks per packet ---------------------------------------------------------------------------

// The bytes [*lo, *hi) of a packet of `bytes` that block `part` of `parts` writes or reads: whole
// 16-byte vectors (the last share ends at the packet's end), empty for the parts past the end.
__device__ __forceinline__ void groute_link_share(unsigned long long bytes, unsigned long long part,
                                                  unsigned long long parts, unsigned long long* lo,
                                                  unsigned long long* hi) {
    const unsigned long long vectors = (bytes + 15) / 16;
    const unsigned long long per = (vectors + parts - 1) / parts;
    *lo = min(bytes, part * per * 16);
    *hi = min(bytes, (part + 1) * per * 16);
}

// Every thread of a block, after its share of a group's work on the packet in `slot`: arrive at
// the slot's counter; true in thread 0 of the group's last block to arrive (which has reset the
// counter and seen every other block's work), false elsewhere.
__device__ __forceinline__ bool groute_link_arrive(unsigned long long* counter, unsigned long long slot,
                                                   unsigned long long parts) {
    if (parts == 1) {                // the block is the group: thread 0's release store suffices
        __syncthreads();
        return threadIdx.x == 0;
    }
    __threadfence_system();          // this thread's accesses to the slot, before the arrival
    __syncthreads();
    if (threadIdx.x != 0) return false;
    if (atomicAdd(counter + slot, 1ull) != parts - 1) return false;
    atomicExch(counter + slot, 0ull);
    __threadfence_system();          // the other blocks' arrivals (and so their work), before what follows
    return true;
}

// Block `part` of a group of `parts` blocks that send packet n together: every thread of each of
// those blocks calls it with the same n, src, count and tag. The block waits for n's slot, writes
// its share of the `count` items from `src`, and the group's last block to finish publishes the
// packet. With parts == 1 it is groute_link_send_block_as. False when the link gave up (every
// thread: leave the kernel).
__device__ __forceinline__ bool groute_link_send_part(const groute_link& l, unsigned long long n,
                                                      const void* src, unsigned long long count,
                                                      unsigned long long tag, unsigned long long part,
                                                      unsigned long long parts) {
    __shared__ void* slot;
    if (threadIdx.x == 0) slot = groute_link_acquire(l, n);
    __syncthreads();
    char* dst = static_cast<char*>(slot);
    __syncthreads();                 // every thread has read `slot` before anyone reuses it
    if (dst == nullptr) return false;
    unsigned long long lo, hi;
    groute_link_share(count * l.item_bytes, part, parts, &lo, &hi);
    groute_link_copy_block(dst + lo, static_cast<const char*>(src) + lo, hi - lo);
    if (groute_link_arrive(l.written, n % l.num_buffers, parts)) groute_link_publish(l, n, count, tag);
    return true;
}

// Block `part` of a group of `parts` blocks that received packet n (groute_link_receive_block,
// each) and read it: the group's last block to get here hands the slot back.
__device__ __forceinline__ void groute_link_release_part(const groute_link& l, unsigned long long n,
                                                         unsigned long long parts) {
    if (groute_link_arrive(l.taken, n % l.num_buffers, parts)) groute_link_release(l, n);
}

// The grid's blocks as groups of *parts (brought within 1..gridDim.x; the blocks past the last
// whole group idle): group g takes packets g, g + groups, ... of a message. Sets *group, *part
// and *groups; false for an idle block.
__device__ __forceinline__ bool groute_link_group(unsigned long long* parts, unsigned long long* group,
                                                  unsigned long long* part, unsigned long long* groups) {
    *parts = max(1ull, min(*parts, (unsigned long long)gridDim.x));
    const unsigned long long parts_ = *parts;
    *groups = gridDim.x / parts_;
    *group = blockIdx.x / parts_;
    *part = blockIdx.x % parts_;
    return *group < *groups;
}

// The whole grid sends `count` items from `src` as the packets first, first + 1, ... (the i-th
// tagged i), each written by a group of `parts` blocks (the host's DeviceLink.grid_shape picks
// the grid and `parts`), gridDim.x / parts packets at once. `first`: the
// packets the link carried before (the host counts what its kernels send); the link's head moves
// past the message, so no other kernel may reserve on the link meanwhile. False when the link gave
// up (leave the kernel).
__device__ __forceinline__ bool groute_link_send_grid(const groute_link& l, unsigned long long first,
                                                      const void* src, unsigned long long count,
                                                      unsigned long long parts) {
    const unsigned long long per = l.packet_bytes / l.item_bytes;
    const unsigned long long packets = (count + per - 1) / per;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicMax(l.head, first + packets);
    unsigned long long group, part, groups;
    if (!groute_link_group(&parts, &group, &part, &groups)) return true;
    for (unsigned long long i = group; i < packets; i += groups) {
        const unsigned long long items = min(per, count - i * per);
        if (!groute_link_send_part(l, first + i, static_cast<const char*>(src) + i * l.packet_bytes,
                                   items, i, part, parts))
            return false;
    }
    return true;
}

// The receiving side of groute_link_send_grid: the grid receives the packets first, first + 1, ...
// of a message of `count` items, each read by a group of `parts` blocks that place its items at
// its place in `dst` (nullptr: only hand the slots back), and releases them. False when the link
// ended before the message did or gave up (leave the kernel).
__device__ __forceinline__ bool groute_link_receive_grid(const groute_link& l, unsigned long long first,
                                                         void* dst, unsigned long long count,
                                                         unsigned long long parts) {
    const unsigned long long per = l.packet_bytes / l.item_bytes;
    const unsigned long long packets = (count + per - 1) / per;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicMax(l.tail, first + packets);
    unsigned long long group, part, groups;
    if (!groute_link_group(&parts, &group, &part, &groups)) return true;
    for (unsigned long long i = group; i < packets; i += groups) {
        unsigned long long items, tag;
        bool ended;
        const char* slot = static_cast<const char*>(
            groute_link_receive_block(l, first + i, &items, &tag, &ended));
        if (slot == nullptr) return false;
        if (dst != nullptr) {
            unsigned long long lo, hi;
            items = min(items, count - i * per);    // a longer message's rest is not placed
            groute_link_share(items * l.item_bytes, part, parts, &lo, &hi);
            groute_link_copy_block(static_cast<char*>(dst) + i * l.packet_bytes + lo, slot + lo, hi - lo);
        }
        groute_link_release_part(l, first + i, parts);
    }
    return true;
}
