// long_row.cu: softmax of rows longer than single_read holds on chip
// (Hopper, sm_90), reading device memory once for most of the row.
//
// A row is split over the LR_CLUSTER thread blocks of a cluster (cluster g
// handles rows g, g + G, ...); block b's slice of the body, P vectors, is
// held in three parts:
//   S  the first LR_THREADS * LR_SMEM_VPT vectors: one bulk copy (the copy
//      engine) into shared memory, issued while the previous row is written;
//   R  the next LR_THREADS * LR_VPT vectors: 16-byte loads into registers;
//   G  the rest (none when the slice fits on chip): read once for each
//      thread's online (max, sum), and read again, newest first, in the write
//      pass, when most of it is still in L2 (loaded with the evict-last
//      policy, re-read with evict-first).
// Per thread: max over S, R and G's running max; e = e^(x - m_t) in place
// in S and R; the block and then the cluster merge their (max, sum) pairs as
// single_read does (cluster.cuh), and y = e * e^(m_t - M) / S_total for S and
// R, y = e^(x - M) / S_total for G, stored with 16-byte evict-first stores at
// any alignment of y (store4_warp).
//
// Traffic: 1 read + 1 write per element, plus a second read of G (from L2
// where it stayed there).  Launch (persistent): 1-D grid of G * LR_CLUSTER
// blocks of LR_THREADS threads, G at most the resident clusters; dynamic
// shared memory LR_THREADS * LR_SMEM_VPT * 16 bytes.  Any row length.  One
// block's loads and stores are separate phases of each row, so two blocks
// per SM (LR_BLOCKS_PER_SM) let one block's loads overlap the other's stores.
#include "cluster.cuh"

#ifndef LR_CLUSTER
#define LR_CLUSTER 16
#endif
#ifndef LR_THREADS
#define LR_THREADS 512
#endif
#ifndef LR_VPT
#define LR_VPT 16  // vectors per thread in registers
#endif
#ifndef LR_SMEM_VPT
#define LR_SMEM_VPT 27  // vectors per thread in shared memory
#endif
#ifndef LR_UNROLL
#define LR_UNROLL 4  // loads in flight per thread while streaming G
#endif
#ifndef LR_BLOCKS_PER_SM
#define LR_BLOCKS_PER_SM 1  // blocks sharing an SM (their load and store phases interleave)
#endif
#ifndef LR_SMEM_LIMIT
#define LR_SMEM_LIMIT 232448  // shared memory a block may opt in to on sm_90
#endif

static_assert(LR_CLUSTER >= 1 && LR_CLUSTER <= 16 && (LR_CLUSTER & (LR_CLUSTER - 1)) == 0,
              "the butterfly merge over the cluster needs a power-of-two cluster of at most 16 blocks");
static_assert(LR_THREADS % 32 == 0 && LR_THREADS >= 32 && LR_THREADS <= 1024, "whole warps, at most 1024 threads");
static_assert(LR_VPT >= 0 && LR_SMEM_VPT >= 1 && LR_UNROLL >= 1, "sizes");
static_assert(LR_BLOCKS_PER_SM >= 1, "blocks per SM");
static_assert((long long)LR_THREADS * LR_SMEM_VPT * 16 + 1024 <= LR_SMEM_LIMIT, "S must fit in shared memory");
#define LR_REGISTER_BUDGET (16384 / (32 * ((LR_THREADS / 32 * LR_BLOCKS_PER_SM + 3) / 4)) / 8 * 8)  // 4 partitions
static_assert(4 * (LR_VPT + LR_UNROLL) + 32 <= (LR_REGISTER_BUDGET < 255 ? LR_REGISTER_BUDGET : 255),
              "R and the G loads in flight (4 registers per vector) plus 32 others must fit the registers");

#define LR_S_CAP ((i64)LR_THREADS * LR_SMEM_VPT)
#define LR_R_CAP ((i64)LR_THREADS * LR_VPT)

__device__ __forceinline__ float4 load4_hint(const float4* p, unsigned long long policy) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(policy));
    return v;
}

struct LongSlice {
    RowSpan r;
    i64 v0;      // first body vector of this block's slice
    i64 s_vecs;  // vectors in S, R and G
    i64 r_vecs;
    i64 g_vecs;
};

__device__ __forceinline__ LongSlice long_slice(const float* x, float* y, i64 row, i64 n, i64 ld_x, i64 ld_y,
                                                unsigned rank) {
    LongSlice s;
    s.r = row_span(x + row * ld_x, y + row * ld_y, n);
    const i64 per_block = (s.r.vecs + LR_CLUSTER - 1) / LR_CLUSTER;
    s.v0 = min((i64)rank * per_block, s.r.vecs);
    const i64 vecs = min(per_block, s.r.vecs - s.v0);
    s.s_vecs = min(vecs, LR_S_CAP);
    s.r_vecs = min(vecs - s.s_vecs, LR_R_CAP);
    s.g_vecs = vecs - s.s_vecs - s.r_vecs;
    return s;
}

extern "C" __global__ void __launch_bounds__(LR_THREADS, LR_BLOCKS_PER_SM)
#if LR_CLUSTER > 1
    __cluster_dims__(LR_CLUSTER, 1, 1)
#endif
        long_row(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
    extern __shared__ __align__(128) float4 s_part[];  // LR_S_CAP vectors
    __shared__ __align__(8) unsigned long long s_full;
    __shared__ MaxSum published[2];  // this block's pair, by row parity
    __shared__ MaxSum scratch[32];

    const unsigned rank = cluster_rank<LR_CLUSTER>();
    const i64 cluster = blockIdx.x / LR_CLUSTER, clusters = gridDim.x / LR_CLUSTER;
    const i64 my_rows = cluster < rows ? (rows - 1 - cluster) / clusters + 1 : 0;
    const unsigned t = threadIdx.x;
    const unsigned long long keep = l2_evict_last(), once = l2_evict_first();

    if (t == 0) {
        mbar_init(&s_full, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync<LR_CLUSTER>();
    if (t == 0 && my_rows > 0) {
        const LongSlice s = long_slice(x, y, cluster, n, ld_x, ld_y, rank);
        load_slice(s_part, body_in(s.r) + s.v0, s.s_vecs, &s_full, once);
    }

    for (i64 it = 0; it < my_rows; ++it) {
        const LongSlice s = long_slice(x, y, cluster + it * clusters, n, ld_x, ld_y, rank);
        const float4* in = body_in(s.r) + s.v0;

        // R: 16-byte loads into registers, all in flight at once.
        float4 v[LR_VPT > 0 ? LR_VPT : 1];
#pragma unroll
        for (int k = 0; k < LR_VPT; ++k) {
            const i64 j = t + k * LR_THREADS;
            v[k] = j < s.r_vecs ? load4_hint(in + s.s_vecs + j, once) : neg_inf4();
        }
        const bool owns_scalar = rank == 0 && t < scalar_count(s.r);
        float scalar = owns_scalar ? s.r.x[scalar_index(s.r, t)] : SOFTMAX_NEG_INF;

        // G: stream once for the online (max, sum).
        const float4* g_in = in + s.s_vecs + s.r_vecs;
        const i64 g_iters = (s.g_vecs + LR_THREADS - 1) / LR_THREADS;
        MaxSum g = {SOFTMAX_NEG_INF, 0.f};
        for (i64 k = 0; k < g_iters; k += LR_UNROLL) {
            float4 w[LR_UNROLL];
#pragma unroll
            for (int u = 0; u < LR_UNROLL; ++u) {
                const i64 j = t + (k + u) * LR_THREADS;
                w[u] = j < s.g_vecs ? load4_hint(g_in + j, keep) : neg_inf4();
            }
#pragma unroll
            for (int u = 0; u < LR_UNROLL; ++u) online_add4(g, w[u]);
        }

        // S has landed: per-thread max, exponentials in place, sum.
        mbar_wait(&s_full, (unsigned)(it & 1));
        float m = fmaxf(g.max, scalar);
#pragma unroll
        for (int k = 0; k < LR_VPT; ++k) m = fmaxf(m, max4(v[k]));
#pragma unroll 4
        for (int k = 0; k < LR_SMEM_VPT; ++k) {
            const i64 j = t + k * LR_THREADS;
            if (j < s.s_vecs) m = fmaxf(m, max4(s_part[j]));
        }
        const float base = exp_base(m);
        float sum = g.sum * exp_approx(g.max - base);
#pragma unroll
        for (int k = 0; k < LR_VPT; ++k) {
            v[k] = scale4(v[k], base, 1.f);
            sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
#pragma unroll 4
        for (int k = 0; k < LR_SMEM_VPT; ++k) {
            const i64 j = t + k * LR_THREADS;
            if (j < s.s_vecs) {
                const float4 e = scale4(s_part[j], base, 1.f);
                s_part[j] = e;
                sum += (e.x + e.y) + (e.z + e.w);
            }
        }
        scalar = exp_approx(scalar - base);
        sum += scalar;
        const MaxSum block = block_merge({m, sum}, scratch);

        // The cluster's (M, S_total), bitwise the same in every block.
        if (t == 0) published[it & 1] = block;
        cluster_sync<LR_CLUSTER>();
        const MaxSum total = cluster_merge<LR_CLUSTER>(&published[it & 1]);
        const float inv_sum = 1.f / total.sum;
        const float scale = exp_approx(m - total.max) * inv_sum;

        // Write S, then hand the shared memory to the next row's bulk copy.
#pragma unroll 4
        for (int k = 0; k < LR_SMEM_VPT; ++k) {
            const i64 j = t + k * LR_THREADS;
            const bool valid = j < s.s_vecs;
            const float4 e = valid ? s_part[j] : make_float4(0.f, 0.f, 0.f, 0.f);
            store4_warp(s.r, s.v0 + j, make_float4(e.x * scale, e.y * scale, e.z * scale, e.w * scale), valid);
        }
        __syncthreads();
        if (t == 0 && it + 1 < my_rows) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            const LongSlice next = long_slice(x, y, cluster + (it + 1) * clusters, n, ld_x, ld_y, rank);
            load_slice(s_part, body_in(next.r) + next.v0, next.s_vecs, &s_full, once);
        }

        // Write G, newest chunk first (what is still in L2), then R.
        const float g_base = exp_base(total.max);
        for (i64 k = (g_iters - 1) / LR_UNROLL * LR_UNROLL; k >= 0; k -= LR_UNROLL) {
            float4 w[LR_UNROLL];
#pragma unroll
            for (int u = 0; u < LR_UNROLL; ++u) {
                const i64 j = t + (k + u) * LR_THREADS;
                w[u] = j < s.g_vecs ? load4_hint(g_in + j, once) : neg_inf4();
            }
#pragma unroll
            for (int u = 0; u < LR_UNROLL; ++u) {
                const i64 j = t + (k + u) * LR_THREADS;
                store4_warp(s.r, s.v0 + s.s_vecs + s.r_vecs + j, scale4(w[u], g_base, inv_sum), j < s.g_vecs);
            }
        }
#pragma unroll
        for (int k = 0; k < LR_VPT; ++k) {
            const i64 j = t + k * LR_THREADS;
            store4_warp(s.r, s.v0 + s.s_vecs + j, make_float4(v[k].x * scale, v[k].y * scale, v[k].z * scale, v[k].w * scale),
                        j < s.r_vecs);
        }
        if (owns_scalar) s.r.y[scalar_index(s.r, t)] = scalar * scale;
    }
    cluster_sync<LR_CLUSTER>();  // no block leaves while another may still read its pairs
}
