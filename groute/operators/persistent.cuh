// The persistent protocol: what every persistent kernel shares that runs on several devices at
// once, one launch per device, and meets the others inside the launch (the relaxations' peer
// and linked kernels, PageRank's persistent BSP kernels, the fused loops of operator steps).
// The host side is groute/engines/peer_barrier.py (LaunchStop, CrossDeviceBarrier).
//
// The control block. Each device has one in its own memory, whose first PROTOCOL_WORDS uint64
// words are the protocol's (ProtocolWord); the kernel's own words follow. The host reads it
// back once, after the launch: how far the launch got and why it stopped (RESULT), whether it
// left early and why (ABORT), the meetings it passed (CROSSED). A kernel on one device (the one-device fused
// loop) has the same block: it never meets, so ABORT and CROSSED stay 0.
//
// The meeting place: device 0's block, whose first MEETING_WORDS words are the protocol's
// (MeetingWord: the meeting counter, the flag of a device that gave up); a kernel's own device-0
// words follow (its rings of sums).
// The counter only grows: at every meeting each of the k devices adds one, so a launch that
// starts with it at `base` (the host says where: its launch argument) passes its m-th meeting
// when the counter reaches base + k * m. Nothing is reset between meetings or launches; the
// host advances its base by what the devices crossed (CROSSED) after a good run, and zeroes
// the block after a bad one.
//
// A meeting (protocol_meet): a grid barrier (the grid's writes are done), one thread arrives at
// device 0's counter (a system-scope release: cumulative, so it carries the whole grid's
// writes, its stores and reductions into the peers' memory among them) and polls it with
// acquire loads until every device has arrived, then a grid barrier passes what it acquired on
// to every block. Sums that every device must read alike are added into device 0's words just
// before the arrival and read back just after (the `before` and `after` of protocol_meet).
//
// The timeout and giving up: a device that waits longer than the host's timeout (a peer stopped
// or never started) gives up: ABORT_TIMEOUT in its own block (protocol_arrive), which every
// block of it sees after the meeting's second grid barrier (protocol_aborted) and leaves. A
// kernel that meets at every level tells the others nothing more: waiting for that device at
// their next meeting, they give up after their own timeout. One that runs without meetings
// (linked.cu) also raises device 0's GAVE_UP flag (protocol_abort) and reads it when it would
// otherwise wait (protocol_gave_up). The host raises naming the devices that timed out. A
// kernel may leave early for a reason of its own (ABORT_OWN and above: a round cap), which the
// host reports as that kernel's.
//
// Code generation: the hooks of protocol_meet capture by value ([=]). Captured by reference (or
// through a pointer to the kernel's arguments), and with the GAVE_UP store on the meeting's
// timeout path, ptxas gave the persistent kernels more registers or spills (nvcc 13, sm_90).
//
// Across processes (one rank per GPU): a kernel needs only device pointers, to device 0's
// meeting block and to whatever peer words it writes (inboxes, rings), plus its device index,
// the device count, the counter's base and the timeout as arguments; it never assumes that one
// host thread, or one process, set up the others' memory. So the same kernels run when the
// peers' words are mapped through CUDA IPC handles, each rank launching its own device and
// reading back its own control block, provided the ranks agree on the base (each advances it
// by the same CROSSED after a good run) and zero device 0's block together after a bad one.
#pragma once
#include "barriers.cuh"
#include "peer_memory.cuh"

// The protocol's words of a device's control block (uint64 each).
enum ProtocolWord {
    PROTO_GRID = 0,     // grid_barrier's arrivals (its low 32 bits), monotonic within a launch
    PROTO_EXIT = 1,     // blocks that left (grid_exit: the last one zeroes both words)
    PROTO_ABORT = 2,    // why the launch left early (AbortReason): 0 it did not
    PROTO_CROSSED = 3,  // the meetings the launch arrived at
    PROTO_RESULT = 4,   // two int32: the levels, rounds or iterations it ran; why it stopped, in
                        // the kernel's own codes
    PROTOCOL_WORDS = 5
};
enum AbortReason {
    ABORT_TIMEOUT = 1,  // a meeting timed out: another device stopped or never started
    ABORT_OWN = 2       // this and above: the kernel's own reasons
};
// The protocol's words of device 0's meeting block (uint64 each).
enum MeetingWord {
    MEET_COUNT = 0,     // the meeting counter: k arrivals per meeting, only growing
    MEET_GAVE_UP = 1,   // 1: a device gave up (the host zeroes the block after such a run)
    MEETING_WORDS = 2
};

// A grid barrier of the whole launch on its control block's word (barriers.cuh).
__device__ __forceinline__ void protocol_barrier(unsigned long long* ctl, unsigned int& bar) {
    grid_barrier((unsigned int*)&ctl[PROTO_GRID], bar);
}

// The cross-device part of a meeting of k devices, for one thread per device (thread 0 of
// block 0, after a grid barrier, so the release below carries the whole grid's writes).
// `target` follows the counter, k arrivals per meeting. The acquired writes of the other devices
// reach this device's other blocks through a grid barrier after the call. Returns false when
// the others did not all arrive within timeout_ns.
__device__ __forceinline__ bool cross_device_wait(unsigned long long* meeting,
                                                  unsigned long long& target, int k,
                                                  long long timeout_ns) {
    target += k;
    red_add_release_sys(meeting + MEET_COUNT, 1ull);
    const unsigned long long t0 = global_timer();
    while (ld_acquire_sys(meeting + MEET_COUNT) < target) {
        if (global_timer() - t0 > (unsigned long long)timeout_ns) return false;
    }
    return true;
}

// One thread: this device gives up for `reason`, in its control block (for its own blocks and
// the host) and in device 0's GAVE_UP flag (for the other devices, where they read it).
__device__ __forceinline__ void protocol_abort(unsigned long long* ctl,
                                               unsigned long long* meeting, int reason) {
    ctl[PROTO_ABORT] = (unsigned long long)reason;
    st_relaxed_sys64(meeting + MEET_GAVE_UP, 1ull);
}

// Whether a device gave up (device 0's GAVE_UP flag), for one thread.
__device__ __forceinline__ bool protocol_gave_up(unsigned long long* meeting) {
    return ld_acquire_sys(meeting + MEET_GAVE_UP) != 0ull;
}

// One thread's arrival at a meeting and its wait (cross_device_wait); a wait that timed out
// sets ABORT_TIMEOUT. Returns whether every device came.
__device__ __forceinline__ bool protocol_arrive(unsigned long long* ctl,
                                                unsigned long long* meeting,
                                                unsigned long long& target, int k,
                                                long long timeout_ns) {
    const bool met = cross_device_wait(meeting, target, k, timeout_ns);
    if (!met) ctl[PROTO_ABORT] = ABORT_TIMEOUT;
    return met;
}

// Meet every block of every device (see the top of the file), called by every thread alike:
// a grid barrier, then the one thread that speaks for the device (`leader`: thread 0 of block
// 0, as the caller already knows it) runs before(), arrives and waits (protocol_arrive) and
// runs after(met) (met: every device came), then a grid barrier. A block that must know whether
// the meeting failed reads protocol_aborted afterwards (or what after() wrote).
// protocol_meet_past_barrier is the same meeting for a caller that has just passed a grid
// barrier of its own, by which its grid's writes are done: the rest of it.
template <class Before, class After>
__device__ __forceinline__ void protocol_meet_past_barrier(bool leader, unsigned long long* ctl,
                                                           unsigned int& bar,
                                                           unsigned long long* meeting,
                                                           unsigned long long& target, int k,
                                                           long long timeout_ns, Before before,
                                                           After after) {
    if (leader) {
        before();
        after(protocol_arrive(ctl, meeting, target, k, timeout_ns));
    }
    protocol_barrier(ctl, bar);
}
template <class Before, class After>
__device__ __forceinline__ void protocol_meet(bool leader, unsigned long long* ctl,
                                              unsigned int& bar, unsigned long long* meeting,
                                              unsigned long long& target, int k,
                                              long long timeout_ns, Before before, After after) {
    protocol_barrier(ctl, bar);
    protocol_meet_past_barrier(leader, ctl, bar, meeting, target, k, timeout_ns, before, after);
}

// Whether this device left a meeting early (ABORT): every block reads it after the meeting's
// second grid barrier and leaves.
__device__ __forceinline__ bool protocol_aborted(const unsigned long long* ctl) {
    return __ldcg(&ctl[PROTO_ABORT]) != 0ull;
}

// Thread 0, before the launch's first meeting: no abort yet (a peer reads nothing of it).
__device__ __forceinline__ void protocol_begin(unsigned long long* ctl) {
    ctl[PROTO_ABORT] = 0ull;
}

// Thread 0, as the launch ends: what it ran and why it stopped, for the host (two int32 in one
// word: as two 64-bit words they cost the fused loops' kernels registers).
__device__ __forceinline__ void protocol_result(unsigned long long* ctl, int ran, int status) {
    int* const words = (int*)(ctl + PROTO_RESULT);
    words[0] = ran;
    words[1] = status;
}

// Thread 0, as the launch ends: the meetings it arrived at (its target, from the host's base).
__device__ __forceinline__ void protocol_crossed(unsigned long long* ctl, unsigned long long target,
                                                 unsigned long long base, int k) {
    ctl[PROTO_CROSSED] = (target - base) / (unsigned long long)k;
}

// Every block, after its last grid barrier: the last to leave zeroes the grid barrier's words,
// so the next launch of the same grid finds them at 0 (a kernel whose host zeroes its block
// before every launch need not call it).
__device__ __forceinline__ void protocol_exit(unsigned long long* ctl) {
    grid_exit((int*)&ctl[PROTO_GRID], (int*)&ctl[PROTO_EXIT]);
}
