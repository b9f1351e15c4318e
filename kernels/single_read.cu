// single_read.cu: softmax that reads each element from device memory once
// and writes it once (Hopper, sm_90).
//
// A row is split over the SR_CLUSTER thread blocks of a cluster; block b
// holds slice b of the row (a contiguous run of float4 vectors) on chip:
//
//   1. a bulk asynchronous copy (cp.async.bulk, the copy engine) brings the
//      slice into a shared-memory stage and completes on that stage's
//      mbarrier; SR_STAGES stages form a ring, so the next rows are already
//      loading while this one is reduced and written;
//   2. each thread moves its SR_VPT vectors from the stage into registers,
//      and the stage is handed back to the copy engine at once;
//   3. per thread: max m_t, then e = 2^((x - m_t) log2 e) in place and its
//      sum; the block merges the (max, sum) pairs;
//   4. each block publishes its pair in its own shared memory; after one
//      cluster barrier every thread reads the SR_CLUSTER pairs through
//      distributed shared memory and merges them in a fixed order (the same
//      in every block, so every block gets bitwise the same (M, S));
//   5. y = e * e^(m_t - M) / S, stored with 16-byte stores at any alignment
//      of y: where y is not aligned like x, each stored vector is made of two
//      neighbouring ones (warp shuffles, and shared memory across warps), so
//      only the 3 + 3 floats at a slice's ends are stored one by one.  Loads and stores
//      carry an L2 evict-last policy (measured faster, notes/TUNING.md).
//
// Traffic: 1 read + 1 write = 8 bytes per fp32 element.
// Launch (persistent): 1-D grid of G * SR_CLUSTER blocks of SR_THREADS
// threads, G at most the number of clusters that can be resident at once;
// cluster g handles rows g, g + G, ...  Dynamic shared memory:
// SR_STAGES * SR_THREADS * SR_VPT * 16 bytes.  A row fits when
// ceil(vecs / SR_CLUSTER) <= SR_THREADS * SR_VPT, vecs = its float4 count.
// The scalar head and tail (row start not 16-byte aligned, n % 4 != 0; at
// most 3 + 3 elements) are read with plain loads by block 0, one row ahead.
#include "cluster.cuh"

#ifndef SR_CLUSTER
#define SR_CLUSTER 1
#endif
#ifndef SR_THREADS
#define SR_THREADS 256
#endif
#ifndef SR_VPT
#define SR_VPT 4
#endif
#ifndef SR_STAGES
#define SR_STAGES 2
#endif
#ifndef SR_BLOCKS_PER_SM
#define SR_BLOCKS_PER_SM 1  // register budget: 65536 / (SR_THREADS * SR_BLOCKS_PER_SM) per thread
#endif

#define SR_CAPACITY (SR_THREADS * SR_VPT)  // float4 vectors a block holds per row
#define SR_WARPS (SR_THREADS / 32)
#ifndef SR_SMEM_LIMIT
#define SR_SMEM_LIMIT 232448  // shared memory a block may opt in to on sm_90
#endif

// The configuration's invariants (softmax_lab/variants.py derives configurations
// that satisfy them; anything else must fail to compile, not run wrong).
static_assert(SR_CLUSTER >= 1 && SR_CLUSTER <= 16 && (SR_CLUSTER & (SR_CLUSTER - 1)) == 0,
              "the butterfly merge over the cluster needs a power-of-two cluster of at most 16 blocks");
static_assert(SR_THREADS % 32 == 0 && SR_THREADS >= 32 && SR_THREADS <= 1024,
              "whole warps (the block reductions and store4_warp), at most 1024 threads");
static_assert(SR_VPT >= 1 && SR_STAGES >= 1 && SR_BLOCKS_PER_SM >= 1, "positive sizes");
static_assert((long long)SR_STAGES * SR_CAPACITY * 16 + SR_CAPACITY / 2 + 1024 + 512 <= SR_SMEM_LIMIT,
              "the stages (and 1/32 of a stage for realigned stores) must fit in the shared memory of a block");
// Registers: an SM's 4 partitions hold 16384 each and take the warps in turn.
#define SR_WARPS_PER_PARTITION ((SR_THREADS / 32 * SR_BLOCKS_PER_SM + 3) / 4)
#define SR_REGISTER_BUDGET (16384 / (32 * SR_WARPS_PER_PARTITION) / 8 * 8)
static_assert(4 * SR_VPT + (SR_CLUSTER == 1 ? 40 : 32) <= (SR_REGISTER_BUDGET < 255 ? SR_REGISTER_BUDGET : 255),
              "the row (4 registers per vector) plus 32 others (40 without a cluster) must fit the register budget");

struct Slice {
    RowSpan r;
    i64 v0;    // first body vector of this block's slice
    i64 vecs;  // vectors in this block's slice
};

__device__ __forceinline__ Slice slice_of(const float* x, float* y, i64 row, i64 n, i64 ld_x, i64 ld_y,
                                          unsigned rank) {
    Slice s;
    s.r = row_span(x + row * ld_x, y + row * ld_y, n);
    const i64 per_block = (s.r.vecs + SR_CLUSTER - 1) / SR_CLUSTER;
    s.v0 = min((i64)rank * per_block, s.r.vecs);
    s.vecs = min(per_block, s.r.vecs - s.v0);
    return s;
}

// The scalar (head or tail) element owned by this thread, or -inf.
__device__ __forceinline__ float load_scalar(const Slice& s, unsigned rank) {
    const i64 k = threadIdx.x;
    return (rank == 0 && k < scalar_count(s.r)) ? __ldcs(s.r.x + scalar_index(s.r, k)) : SOFTMAX_NEG_INF;
}

extern "C" __global__ void __launch_bounds__(SR_THREADS, SR_BLOCKS_PER_SM)
#if SR_CLUSTER > 1
    __cluster_dims__(SR_CLUSTER, 1, 1)
#endif
        single_read(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
    extern __shared__ __align__(128) float4 stages[];  // SR_STAGES x SR_CAPACITY
    __shared__ __align__(8) unsigned long long full[SR_STAGES];
    __shared__ MaxSum published[2];  // this block's pair, by row parity
    __shared__ MaxSum scratch[32];
    __shared__ float4 firsts[SR_VPT][SR_WARPS];  // each warp's first output vector, for realigned stores

    const unsigned rank = cluster_rank<SR_CLUSTER>();
    const i64 cluster = blockIdx.x / SR_CLUSTER, clusters = gridDim.x / SR_CLUSTER;
    const i64 my_rows = cluster < rows ? (rows - 1 - cluster) / clusters + 1 : 0;
    const unsigned t = threadIdx.x;

    if (t == 0) {
        for (int s = 0; s < SR_STAGES; ++s) mbar_init(&full[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync<SR_CLUSTER>();  // barriers initialised; every block of the cluster is running

    if (t == 0) {
        for (i64 it = 0; it < SR_STAGES && it < my_rows; ++it) {
            const Slice s = slice_of(x, y, cluster + it * clusters, n, ld_x, ld_y, rank);
            load_slice(stages + it * SR_CAPACITY, body_in(s.r) + s.v0, s.vecs, &full[it], l2_evict_last());
        }
    }
    float scalar_next =
        my_rows > 0 ? load_scalar(slice_of(x, y, cluster, n, ld_x, ld_y, rank), rank) : SOFTMAX_NEG_INF;

    for (i64 it = 0; it < my_rows; ++it) {
        const int stage = (int)(it % SR_STAGES);
        const Slice s = slice_of(x, y, cluster + it * clusters, n, ld_x, ld_y, rank);
        float scalar = scalar_next;

        // 2. stage -> registers, then hand the stage back to the copy engine.
        mbar_wait(&full[stage], (unsigned)((it / SR_STAGES) & 1));
        const float4* buf = stages + stage * SR_CAPACITY;
        float4 v[SR_VPT];
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            const i64 j = t + k * SR_THREADS;
            v[k] = j < s.vecs ? buf[j] : neg_inf4();
        }
        __syncthreads();
        if (it + SR_STAGES < my_rows) {
            if (t == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                const Slice next = slice_of(x, y, cluster + (it + SR_STAGES) * clusters, n, ld_x, ld_y, rank);
                load_slice(stages + stage * SR_CAPACITY, body_in(next.r) + next.v0, next.vecs, &full[stage],
                           l2_evict_last());
            }
        }
        if (it + 1 < my_rows) scalar_next = load_scalar(slice_of(x, y, cluster + (it + 1) * clusters, n, ld_x, ld_y, rank), rank);

        // 3. per-thread max, exponentials in place, sum; block merge.
        float m = scalar;
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) m = fmaxf(m, max4(v[k]));
        const float base = exp_base(m);
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            v[k] = scale4(v[k], base, 1.f);
            sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
        scalar = exp_approx(scalar - base);
        sum += scalar;
        const MaxSum block = block_merge({m, sum}, scratch);

        // 4. cluster-wide merge through distributed shared memory.
        if (t == 0) published[it & 1] = block;
        cluster_sync<SR_CLUSTER>();
        const MaxSum total = cluster_merge<SR_CLUSTER>(&published[it & 1]);

        // 5. normalise and store.  m = -inf here means all of this thread's
        // elements are -inf: e^(m - M) is 0, or NaN when the whole row is -inf.
        const float scale = exp_approx(m - total.max) * (1.f / total.sum);
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) v[k] = mul4(v[k], scale);
        if (s.r.y_shift == 0) {
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k) {
                const i64 j = t + k * SR_THREADS;
                if (j < s.vecs) store_vec<true>(s.r.y + s.r.head + 4 * (s.v0 + j), v[k]);
            }
        } else {
            // y is not aligned like x (the whole block takes this branch): the
            // slice is one run of store_shifted, vector j + 1 from the next
            // lane, or for a warp's last lane from the next warp's first
            // vector (published in `firsts`; the block's last warp takes
            // thread 0's vector of the next k).
            const unsigned lane = t & 31, warp = t >> 5;
            if (lane == 0) {
#pragma unroll
                for (int k = 0; k < SR_VPT; ++k) firsts[k][warp] = v[k];
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k) {
                const i64 j = t + k * SR_THREADS;
                const float4 val = v[k];
                float4 next;
                next.x = __shfl_down_sync(0xffffffffu, val.x, 1);
                next.y = __shfl_down_sync(0xffffffffu, val.y, 1);
                next.z = __shfl_down_sync(0xffffffffu, val.z, 1);
                next.w = 0.f;
                if (lane == 31) {
                    if (warp + 1 < SR_WARPS) next = firsts[k][warp + 1];
                    else if (k + 1 < SR_VPT) next = firsts[(k + 1) % SR_VPT][0];
                }
                if (j < s.vecs) store_shifted<true>(s.r, s.v0 + j, val, next, j + 1 < s.vecs, j == 0);
            }
        }
        if (rank == 0 && t < scalar_count(s.r)) s.r.y[scalar_index(s.r, t)] = scalar * scale;
    }
    cluster_sync<SR_CLUSTER>();  // no block leaves while another may still read its pairs
}

__device__ __forceinline__ float4 load4_evict_last(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(l2_evict_last()));
    return v;
}

// Rows of at most 32 * SR_WARP_VPT float4: one warp per row, the row in
// registers, warp shuffles for the reductions (no shared memory, no block
// barrier); loads and stores with the evict-last policy, as above.  Launch:
// blocks of 32 threads, one per row (the block loops over rows blockIdx.x +
// k * gridDim.x beyond the grid).
#ifndef SR_WARP_VPT
#define SR_WARP_VPT 8
#endif
static_assert(SR_WARP_VPT >= 1 && 4 * SR_WARP_VPT + 32 <= 128, "the row must fit 128 registers per thread");

extern "C" __global__ void __launch_bounds__(32, 16)
    single_read_warp(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
    const unsigned lane = threadIdx.x;
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpan r = row_span(x + row * ld_x, y + row * ld_y, n);
        const float4* in = body_in(r);
        float4 v[SR_WARP_VPT];
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            const i64 j = lane + 32 * k;
            v[k] = j < r.vecs ? load4_evict_last(in + j) : neg_inf4();
        }
        const bool owns_scalar = lane < scalar_count(r);
        float scalar = owns_scalar ? r.x[scalar_index(r, lane)] : SOFTMAX_NEG_INF;
        float m = scalar;
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) m = fmaxf(m, max4(v[k]));
        m = warp_max(m);
        const float base = exp_base(m);
        float sum = exp_approx(scalar - base);
        scalar = sum;
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            v[k] = scale4(v[k], base, 1.f);
            sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
        // e^(base - m) is 1, or NaN-making inf when the whole row is -inf.
        const float scale = exp_approx(base - m) / warp_sum(sum);
        // A warp's 32 vectors are one run of store_shifted (store4_warp).  (A
        // whole-row run, lane 31 taking lane 0's vector of the next k, must have
        // lane 0 *provide* that vector to the shuffle: run7 shows the first try,
        // where lane 31 asked for it, wrong; kept per warp until measured.)
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            const i64 j = lane + 32 * k;
            store4_warp<true>(r, j, mul4(v[k], scale), j < r.vecs);
        }
        if (owns_scalar) r.y[scalar_index(r, lane)] = scalar * scale;
    }
}
