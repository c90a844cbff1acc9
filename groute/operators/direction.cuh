// Direction optimisation (Beamer's rule): push while the frontier is small, pull once its arcs
// outnumber 1/PULL_ALPHA of the arcs not yet explored, push again once it holds less than
// 1/PULL_BETA of the vertices. The frontier's arcs are worth counting only for frontiers of more
// than 1/SCOUT_MIN of the vertices. The constants are defined once, in
// groute/operators/direction.py, and reach the kernels as -D options (direction.compile_options).
#pragma once

#if !defined(PULL_ALPHA) || !defined(PULL_BETA) || !defined(SCOUT_MIN)
#error "compile with groute.operators.direction.compile_options() (PULL_ALPHA, PULL_BETA, SCOUT_MIN)"
#endif

// Pushing: pull next, given the frontier's arcs and the arcs not yet explored.
__device__ __forceinline__ bool direction_push_to_pull(long long front_arcs, long long unexplored) {
    return front_arcs * PULL_ALPHA > unexplored;
}
// Pulling: go on pulling, given the frontier's vertices and all vertices.
__device__ __forceinline__ bool direction_stay_pulling(long long front_vertices, long long vertices) {
    return front_vertices * PULL_BETA >= vertices;
}
// Pushing: whether the frontier is big enough for its arcs to be counted (an extra pass).
__device__ __forceinline__ bool direction_scout(long long front_vertices, long long vertices) {
    return front_vertices * SCOUT_MIN > vertices;
}

// The direction of the next level, as DirectionState.next: `pulling` (whether the last level
// pulled) and `explored` (the arcs pushed so far) are the caller's state, carried from level to
// level; `arcs`: the graph's. front_arcs() gives the frontier's arcs, asked only while pushing a
// frontier large enough to scout (counting them costs a pass, and on several devices a meeting).
template <class FrontArcs>
__device__ __forceinline__ bool direction_next(int& pulling, long long& explored,
                                               long long front_vertices, long long vertices,
                                               long long arcs, FrontArcs front_arcs) {
    if (pulling) {
        pulling = direction_stay_pulling(front_vertices, vertices);
        return pulling;
    }
    if (!direction_scout(front_vertices, vertices)) return false;
    const long long front = front_arcs();
    pulling = direction_push_to_pull(front, arcs - explored);
    if (!pulling) explored += front;
    return pulling;
}

// Add the out-arcs of the frontier `cur` (n vertices; threads tid, tid + nthreads, ...) into
// sums[slot]: summed over the warp first, one atomic per warp. G: any struct with `indptr`.
template <class G>
__device__ __forceinline__ void count_frontier_arcs(const G& a, const int* cur, long long n,
                                                    long long tid, long long nthreads, int lane,
                                                    unsigned long long* sums, int slot) {
    unsigned long long mine = 0;
    for (long long i = tid; i < n; i += nthreads) {
        const int u = __ldcg(&cur[i]);
        mine += (unsigned long long)(a.indptr[u + 1] - a.indptr[u]);
    }
    for (int off = 16; off > 0; off >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, off);
    if (lane == 0 && mine) atomicAdd(&sums[slot], mine);
}
