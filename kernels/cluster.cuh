// cluster.cuh: the Hopper (sm_90) pieces that the cluster kernels share:
// mbarriers, bulk asynchronous copies (the copy engine) from device memory
// into shared memory, and the cluster's rank, barrier and distributed
// shared memory.  The cluster size is a template parameter; 1 means a plain
// block (no cluster instructions).
#pragma once
#include "common.cuh"

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// One arrival on the mbarrier, which then also waits for `bytes` of
// asynchronous copies or stores to complete on it.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// An L2 cache policy that evicts these lines first (data read once).
__device__ __forceinline__ unsigned long long l2_evict_first() {
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// Copies `vecs` 16-byte vectors (4 floats or 8 halves) from global memory
// into shared memory; the mbarrier completes when the bytes have landed (an
// empty copy just arrives).  One thread calls it; `policy` is an L2 cache
// policy.
__device__ __forceinline__ void load_slice(void* dst, const void* src, i64 vecs, unsigned long long* bar,
                                           unsigned long long policy) {
    const unsigned bytes = (unsigned)(vecs * 16);
    if (bytes == 0) {
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
        return;
    }
    mbar_expect_tx(bar, bytes);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
        : "memory");
}

// Block `rank`'s slice [v0, v1) of a row body of `vecs` 16-byte vectors that
// starts at `body`, for a cluster of CLUSTER blocks that each hold at most
// CAPACITY vectors.  Where the blocks hold it, each slice is a whole number
// of 128-byte lines, shifted by the body's first vector's place in its line,
// so that no line of the row is split between two blocks
// (notes/TUNING.md#line-slices); else an even split.  Traps where a slice
// would not fit (the launch rule's invariant).
struct HeldSlice {
    i64 v0;
    i64 v1;
};

template <int CLUSTER, i64 CAPACITY>
__device__ __forceinline__ HeldSlice held_slice(i64 vecs, const void* body, unsigned rank) {
    i64 per_block = (vecs + CLUSTER - 1) / CLUSTER, shift = 0;
    const i64 line_shift = (i64)(((size_t)body & 127u) / 16u);
    const i64 lined = ((vecs + line_shift + CLUSTER - 1) / CLUSTER + 7) & ~(i64)7;
    if (lined <= CAPACITY) per_block = lined, shift = line_shift;
    if (per_block > CAPACITY) __trap();
    return {min(max((i64)rank * per_block - shift, (i64)0), vecs), min((i64)(rank + 1) * per_block - shift, vecs)};
}

template <int CLUSTER>
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r = 0;
    if constexpr (CLUSTER > 1) asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

template <int CLUSTER>
__device__ __forceinline__ void cluster_sync() {
    if constexpr (CLUSTER > 1)
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    else
        __syncthreads();
}

// The address of `local` in block `block` of the cluster (distributed shared memory).
__device__ __forceinline__ unsigned cluster_addr(const void* local, unsigned block) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(local)), "r"(block));
    return remote;
}

// Lane l's address of `local` in block l % CLUSTER of the cluster.
template <int CLUSTER>
__device__ __forceinline__ unsigned peer_addr(const void* local) {
    return cluster_addr(local, (threadIdx.x & 31) % CLUSTER);
}

// One lane's value from lane (this lane ^ o), and two values combined: the
// (max, sum) pairs merged, the backward's dots added.
__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int o) {
    return {__shfl_xor_sync(0xffffffffu, v.max, o), __shfl_xor_sync(0xffffffffu, v.sum, o)};
}
__device__ __forceinline__ float shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) { return merge(a, b); }
__device__ __forceinline__ float combine(float a, float b) { return a + b; }

// The combination of the LANES lanes' values by a butterfly (lane l holding,
// for the cluster merges, block l % CLUSTER's): the same order of the same
// values in every lane, so bitwise the same result in every lane, warp and
// block.  (warp_merge and warp_sum in common.cuh are its 32-lane forms, kept
// as they are so that the float32 builds keep their machine code.)
template <int LANES, typename T>
__device__ __forceinline__ T butterfly(T total) {
    static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
                  "the butterfly needs a power-of-two number of lanes, at most 32");
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) total = combine(total, shfl_xor(total, o));
    return total;
}

// Every thread gets the merge of the CLUSTER pairs published at `local` in
// the blocks of its cluster: lane l reads block l % CLUSTER's pair through
// distributed shared memory, then the butterfly.
template <int CLUSTER>
__device__ __forceinline__ MaxSum cluster_merge(const MaxSum* local) {
    MaxSum total;
    if constexpr (CLUSTER > 1) {
        asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(total.max), "=f"(total.sum) : "r"(peer_addr<CLUSTER>(local)) : "memory");
    } else {
        total = *local;
    }
    return butterfly<CLUSTER>(total);
}

// cluster_merge for a float sum (the backward's dot): the same order everywhere.
template <int CLUSTER>
__device__ __forceinline__ float cluster_sum(const float* local) {
    float total;
    if constexpr (CLUSTER > 1) {
        asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(total) : "r"(peer_addr<CLUSTER>(local)) : "memory");
    } else {
        total = *local;
    }
    return butterfly<CLUSTER>(total);
}

// The cluster barrier in two halves, so that work can go on between them.
// The arrival is relaxed: it orders none of the thread's earlier memory
// operations (barrier.cluster.arrive.release compiles to MEMBAR.ALL.GPU and
// ERRBAR in every warp, which wait for the warp's memory operations in flight).
template <int CLUSTER>
__device__ __forceinline__ void cluster_arrive_relaxed() {
    if constexpr (CLUSTER > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

template <int CLUSTER>
__device__ __forceinline__ void cluster_wait() {
    if constexpr (CLUSTER > 1) asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ------------------------------------------------------------ pushed exchange
// Each warp's value exchanged by pushes (quack's scheme): lane l < CLUSTER of
// warp w stores the warp's value into slot (rank, w) of block l with
// st.async, which completes block l's mbarrier by its bytes; each block then
// waits on its own mbarrier only and combines all CLUSTER x WARPS slots in
// the same order.  No block-wide barrier, no cluster barrier between a
// block's reduction and its output, and none at its end: a block's slots are
// written only while it waits for them.  The mbarrier is initialised, and the
// initialisation fenced for the cluster, before the cluster barrier's arrival
// (exchange_open); a block pushes only after that barrier's wait.
template <int CLUSTER, int WARPS, typename T>
struct PushedExchange {
    T slots[CLUSTER * WARPS];
    unsigned long long full;
};

// Every thread of every block of the cluster calls it, once, early.
// (A plain block, CLUSTER 1, has no cluster to push to: lane 0 of each warp
// stores the warp's value, then the block's barrier.)  The barrier's arrival
// is relaxed: the mbarrier's initialisation is all it has to publish, and
// fence.mbarrier_init does that (the order CUTLASS and quack use).  With the
// release arrival, every warp of every block first waited in ERRBAR
// (notes/TUNING.md#the-exchange-and-the-relaxed-arrival).
template <int CLUSTER, int WARPS, typename T>
__device__ __forceinline__ void exchange_open(PushedExchange<CLUSTER, WARPS, T>& ex) {
    if constexpr (CLUSTER > 1) {
        if (threadIdx.x == 0) {
            mbar_init(&ex.full, 1);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        cluster_arrive_relaxed<CLUSTER>();
    }
}

__device__ __forceinline__ void push_to(unsigned remote, unsigned remote_bar, MaxSum v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(remote),
                 "f"(v.max), "f"(v.sum), "r"(remote_bar)
                 : "memory");
}
__device__ __forceinline__ void push_to(unsigned remote, unsigned remote_bar, float v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(remote), "f"(v),
                 "r"(remote_bar)
                 : "memory");
}

__device__ __forceinline__ MaxSum exchange_identity(MaxSum) { return {SOFTMAX_NEG_INF, 0.f}; }
__device__ __forceinline__ float exchange_identity(float) { return 0.f; }

// Every thread gets the combination of every thread's `value` over the
// cluster: the warp's by a butterfly, then the cluster's warps' pushed
// (above), every lane combining its share of the slots in a fixed order and
// the warp a butterfly: the same order in every warp of every block, so
// bitwise the same result everywhere.
template <int CLUSTER, int WARPS, typename T>
__device__ __forceinline__ T exchange(PushedExchange<CLUSTER, WARPS, T>& ex, T value, unsigned rank) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    value = butterfly<32>(value);
    if constexpr (CLUSTER == 1) {
        if (lane == 0) ex.slots[warp] = value;
        __syncthreads();
    } else {
        cluster_wait<CLUSTER>();  // every block's barrier initialised
        if (threadIdx.x == 0) mbar_expect_tx(&ex.full, CLUSTER * WARPS * sizeof(T));
        if (lane < CLUSTER) push_to(cluster_addr(&ex.slots[rank * WARPS + warp], lane), cluster_addr(&ex.full, lane), value);
        mbar_wait(&ex.full, 0);
    }
    T total = exchange_identity(value);
#pragma unroll
    for (int i = 0; i < CLUSTER * WARPS; i += 32)
        if (i + lane < CLUSTER * WARPS) total = combine(total, ex.slots[i + lane]);
    return butterfly<32>(total);
}

// ------------------------------------------------------------ pushed row merge
// single_read's per-row merge of the blocks' (max, sum) pairs over the cluster,
// pushed as above rather than published in shared memory between two cluster
// barriers (SR_PUSHED_MERGE): block b's pair goes into slot b of every block's
// slot set for the row's parity with st.async, completing that block's
// mbarrier of the parity; each block waits on its own mbarrier only, then
// combines the CLUSTER slots as cluster_merge does (lane l slot l % CLUSTER,
// then the butterfly): bitwise the same result.  The per-row barrier's release
// arrival compiled to MEMBAR.ALL.GPU and ERRBAR in every warp, which waited
// for the warp's previous row's output stores (notes/TUNING.md#the-pushed-merge).
// Reuse: a block pushes row it + 2's pair into the slot set of row it only
// after it has had every block's pair of row it + 1, which each block pushes
// after a block-wide barrier that follows its reads of row it's slots (the
// caller's block merge begins with one).  Initialise `full` (count 1) before
// a fence.mbarrier_init and the cluster barrier.
template <int CLUSTER, typename T>
struct RowExchange {
    T slots[2][CLUSTER];
    unsigned long long full[2];
};

template <int CLUSTER, typename T>
__device__ __forceinline__ void row_exchange_init(RowExchange<CLUSTER, T>& ex) {
    mbar_init(&ex.full[0], 1);
    mbar_init(&ex.full[1], 1);
}

// `value`: the block's, the same in threads 0 .. CLUSTER - 1; `it`: the row's
// index in this cluster's sequence (every block of the cluster alike).
template <int CLUSTER, typename T>
__device__ __forceinline__ T row_exchange(RowExchange<CLUSTER, T>& ex, T value, unsigned rank, long long it) {
    static_assert(CLUSTER > 1, "a cluster of blocks to push to");
    const int p = (int)(it & 1);
    if (threadIdx.x == 0) mbar_expect_tx(&ex.full[p], CLUSTER * sizeof(T));
    if (threadIdx.x < CLUSTER) {
        const unsigned remote = cluster_addr(&ex, threadIdx.x);  // block threadIdx.x's RowExchange
        const char* local = reinterpret_cast<const char*>(&ex);
        push_to(remote + (unsigned)(reinterpret_cast<const char*>(&ex.slots[p][rank]) - local),
                remote + (unsigned)(reinterpret_cast<const char*>(&ex.full[p]) - local), value);
    }
    // The wait's loop in one asm statement (mbar_wait's C loop, here, made ptxas
    // spill at 8 x 512 x 24 float32).
    asm volatile(
        "{ .reg .pred done; ROW_EXCHANGE_WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1; @!done bra "
        "ROW_EXCHANGE_WAIT_%=; }" ::"r"(smem_addr(&ex.full[p])),
        "r"((unsigned)((it >> 1) & 1))
        : "memory");
    return butterfly<CLUSTER>(ex.slots[p][(threadIdx.x & 31) % CLUSTER]);
}
