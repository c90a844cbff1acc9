// What the relaxation kernels (fused.cu, linked.cu, peer.cu) share beyond the operator headers:
// the relaxation's arc_value (relaxation.cuh, generated per relaxation by relaxation.py, on the
// include path the engine gives), the control block and counters the host reads back.
// UNIT_STEP: every arc adds exactly one (BFS), which allows pull levels and the unique queue.
#pragma once
#include "values.cuh"
#include "relaxation.cuh"
#include "appends.cuh"
#include "frontier.cuh"
#include "advance.cuh"
#include "direction.cuh"
#include "partition.cuh"
#include "barriers.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNIT_STEP
#define UNIT_STEP 0
#endif
// BATCH: a warp relaxes its small vertices' arcs together (fused.cu's relax_small)
#ifndef BATCH
#define BATCH 1
#endif

// The bounds of the fused and linked kernels. Their grids are sized from how many blocks the
// compiled kernel keeps resident. With BATCH (one device's fused worker, the linked workers) the
// registers are left to what the code needs: with no minimum of blocks per SM, ptxas may cap them
// at an occupancy of its own choosing and spill inside the batched relaxation, which costs more
// than the extra blocks give back. Without it the code fits that cap without spilling, and the
// worklist's grids on several devices keep that occupancy.
#if BATCH
#define RESIDENT_BOUNDS __launch_bounds__(BLOCK, 1)
#else
#define RESIDENT_BOUNDS __launch_bounds__(BLOCK)
#endif

// The control block: counts and flags in device memory, read back by the host after a launch.
// Slots a round writes and all blocks must later read alike come in threes, indexed by
// round % 3: written in round r, read after round r's barrier, zeroed during round r + 2.
enum Ctl {
    NEAR_COUNT = 0,     // 3 slots
    ROUND = 3,          // current round: near queue (round % 2), count slot (round % 3)
    FAR_COUNT = 4,      // 2 slots, indexed by the far buffer in use
    FAR_INDEX = 6,
    FAR_MIN = 7,        // lower bound of deferred values (atomicMin on every far push)
    FAR_OVERFLOW = 8,   // 2 slots: a push found that far buffer full; its split scans the state
    THRESHOLD = 10,     // threshold when the kernel returned (it may advance it itself)
    ROUNDS = 11,        // rounds run by the last launch
    EXIT_REASON = 12,   // 0: done or stopped, 1: the frontier wants the other grid shape
    BARRIER_COUNT = 13, // monotonic arrivals (zeroed by the last block to leave)
    EXIT_COUNT = 14,
    PULLING = 15,       // BFS: the last launch ended in pull mode
    OUT_ROUND = 16,     // 3 slots: items put in outboxes this round
    OUT_ROUND_OVERFLOW = 19, // 3 slots: an outbox was full this round
    CEILING = 22,       // values from which an improved vertex is not queued (BFS depth limit;
                        // VALUE_INF: none), set by the host for the run
    OUT_COUNT = 24,     // one slot per destination device (cumulative fill of its outbox)
    CTL_SIZE = 64
};
enum Counter { PROCESSED = 0, EDGES = 1, DEFERRALS = 2, TOTAL_ROUNDS = 3,
               BIG_RESERVE = 4,   // 3 slots: (big vertices << 40) | chunks, per round % 3
               FRONT_ARCS = 7,    // 3 slots, per round % 3: arcs of the round's frontier
               EXPLORED_ARCS = 10, // arcs of the frontiers push rounds expanded (carried over)
               PULL_ROUNDS = 11,
               COUNTERS = 12 };
