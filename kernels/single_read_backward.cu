// single_read_backward.cu: the backward passes of softmax and log_softmax
// reading y (the forward output) and dy from device memory once each and
// writing dx once (Hopper, sm_90).  Built with -DSOFTMAX_BACKWARD=1 (and
// SOFTMAX_LOG, SOFTMAX_DTYPE: elements.cuh):
//   softmax      dot = sum_j dy_j * y_j,  dx = y * (dy - dot)
//   log_softmax  dot = sum_j dy_j,        dx = dy - e^y * dot
// float32 arithmetic, dx rounded once.
//
// The structure is single_read.cu's (whose vector helpers and realigned
// stores this file takes): a row split over a cluster of SR_CLUSTER blocks,
// block b holding slice b of the row, now of y AND of dy:
//   1. two bulk asynchronous copies (y's slice and dy's slice) into one
//      shared-memory stage, completing on the stage's mbarrier (two
//      arrivals); SR_STAGES stages form a ring; with SR_LINE_SHIFT each
//      slice sits in its half of the stage at its source's offset in a
//      128-byte line (single_read.cu's line_offset);
//   2. each thread moves its SR_VPT vectors of y and SR_VPT of dy into
//      registers and the stage goes back to the copy engine (SRB_Y_DIRECT,
//      log_softmax: the stages hold dy alone, and y comes by plain loads
//      straight into the registers here);
//   3. per thread the partial dot, summed over the block (fixed butterfly);
//   4. each block publishes its partial dot; after one cluster barrier every
//      thread reads the SR_CLUSTER partials through distributed shared memory
//      and sums them by a butterfly over SR_CLUSTER lanes (float addition is
//      commutative, so every lane of every block gets bitwise the same dot);
//   5. dx with 16-byte stores at any alignment of dx (single_read.cu's
//      store_run realignment).
// dy's body is copied by the vectors of y's body, so dy must share y's
// 16-byte alignment on every row (softmax_lab/variants/single_read.py refuses other
// shapes: CannotRun).
// The scalar head and tail of a row (at most 3 + 3 floats, 7 + 7 halves) are
// read with plain loads by block 0.
// Traffic: 2 reads + 1 write.  Launch: as single_read (a persistent 1-D grid
// of resident clusters, cluster g takes rows g, g + G, ...).  Dynamic shared
// memory: SR_STAGES * 2 * SR_STAGE_VECS * 16 bytes (SRB_Y_DIRECT: 1, not 2).
// A row fits when ceil(vecs / SR_CLUSTER) <= SR_THREADS * SR_VPT.
#define SR_HELPERS_ONLY 1
#include "single_read.cu"

#if !SOFTMAX_BACKWARD
#error "single_read_backward.cu is the backward pass: build it with -DSOFTMAX_BACKWARD=1"
#endif

// Registers: 8 per vector pair (y and dy, 4 + 4 whatever the dtype) plus the
// others: 32 with a cluster, 40 for a cluster of one block, 56 for halves
// there (ptxas, NVRTC 12.9: 1 x 512 x 10 halves log_softmax spilled at 48;
// softmax_lab/variants/single_read.py's BACKWARD_OTHER_REGISTERS* mirror these).
#define SRB_OTHER_REGISTERS (SR_CLUSTER > 1 ? 32 : SOFTMAX_DTYPE == 0 ? 40 : 56)
static_assert(8 * SR_VPT + SRB_OTHER_REGISTERS <= (SR_REGISTER_BUDGET < 255 ? SR_REGISTER_BUDGET : 255),
              "the row of y and dy (8 registers per vector pair) plus the others must fit the register budget");
// SRB_Y_DIRECT (log_softmax only, whose dot is the sum of dy alone): the
// stages hold dy alone, and each thread loads its vectors of y straight from
// device memory (plain loads) as it moves its dy from the stage, so that y's
// loads are in flight during the barriers before step 5.  softmax_lab/variants/
// single_read.py (single_read_backward_plan) builds the halves' log_softmax in clusters so
// (notes/TUNING.md#y-direct).
#ifndef SRB_Y_DIRECT
#define SRB_Y_DIRECT 0
#endif
static_assert(!SRB_Y_DIRECT || SOFTMAX_LOG, "SRB_Y_DIRECT: only log_softmax's dot leaves y out");
#define SRB_STAGED (SRB_Y_DIRECT ? 1 : 2)  // arrays a stage holds
static_assert((long long)SR_STAGES * SR_STAGE_VECS * 16 * SRB_STAGED + SR_CAPACITY / 2 + 1024 + 512 <= SR_SMEM_LIMIT,
              "the stages of y and dy (and 1/32 of a stage for realigned stores) must fit a block's shared memory");

// The scalar pair loaded a row ahead (as single_read.cu's scalar): loaded at the top
// of its own row, its latency holds block 0, and with it the cluster, on rows whose
// length or start is not a multiple of 16 bytes.  It keeps two more registers
// across the row: only where the row and the others leave registers free
// (ptxas spilled 2-20 bytes at 8 x 512 x 12 and 4 x 608 x 8 halves, whose rows
// fill the budget), and not for the halves' log_softmax at a budget of 128 or
// more: ptxas (NVRTC 12.9) takes all 128 there whatever the row, and spilled
// 4 bytes with the pair ahead at 4 x 512 x 6 to 8 x 512 x 7.  Rows off 16
// bytes run faster with it (notes/TUNING.md#single_read-backward).
#define SRB_SCALAR_AHEAD \
    (8 * SR_VPT + SRB_OTHER_REGISTERS < SR_REGISTER_BUDGET && !(SOFTMAX_DTYPE != 0 && SOFTMAX_LOG && SR_REGISTER_BUDGET >= 128))

struct SliceB {
    RowSpanOf<elem_t> r;  // y (the span's x) and dx (its y)
    const elem_t* g;      // dy's row
    i64 v0;               // first body vector of this block's slice
    i64 vecs;             // vectors in this block's slice
};

__device__ __forceinline__ SliceB slice_b(const elem_t* y, const elem_t* dy, elem_t* dx, i64 row, i64 n, i64 ld_y,
                                          i64 ld_dy, i64 ld_dx, unsigned rank) {
    SliceB s;
    s.r = row_span(y + row * ld_y, dx + row * ld_dx, n);
    s.g = dy + row * ld_dy;
    const i64 per_block = (s.r.vecs + SR_CLUSTER - 1) / SR_CLUSTER;
    s.v0 = min((i64)rank * per_block, s.r.vecs);
    s.vecs = min(per_block, s.r.vecs - s.v0);
    return s;
}

// The slices' first vectors in device memory, and where they sit in a stage
// (y's in its first SR_STAGE_VECS, dy's in the second): the copies into the
// stage and the reads from it both take them from here.
__device__ __forceinline__ const vec_t* y_src(const SliceB& s) { return body_vecs(s.r) + s.v0; }
__device__ __forceinline__ const vec_t* g_src(const SliceB& s) {
    return reinterpret_cast<const vec_t*>(s.g + s.r.head) + s.v0;
}
__device__ __forceinline__ vec_t* y_in_stage(vec_t* stage, const SliceB& s) { return stage + line_offset(y_src(s)); }
__device__ __forceinline__ vec_t* g_in_stage(vec_t* stage, const SliceB& s) {
    return stage + (SRB_STAGED - 1) * SR_STAGE_VECS + line_offset(g_src(s));
}

// Both copies of a slice on one mbarrier (initialised for two arrivals).
__device__ __forceinline__ void load_pair(vec_t* stage, const SliceB& s, unsigned long long* bar) {
    const unsigned long long policy = l2_evict_last();
    if (!SRB_Y_DIRECT) load_slice(y_in_stage(stage, s), y_src(s), s.vecs, bar, policy);
    load_slice(g_in_stage(stage, s), g_src(s), s.vecs, bar, policy);
}

// The scalar (head or tail) element pair owned by this thread, as stored (halves are
// widened where used, so that a pair loaded a row ahead is not waited for at once);
// zeros add nothing to the dot.
struct RawPair {
    elem_t y, dy;
};
struct Pair {
    float y, dy;
};

__device__ __forceinline__ RawPair load_scalar_pair(const SliceB& s, unsigned rank) {
    const i64 k = threadIdx.x;
    if (rank == 0 && k < scalar_count(s.r)) {
        const i64 i = scalar_index(s.r, k);
        return {raw_cs(s.r.x + i), raw_cs(s.g + i)};
    }
    return {elem_t{}, elem_t{}};
}

__device__ __forceinline__ Pair widen(RawPair p) { return {to_float(p.y), to_float(p.dy)}; }

__device__ __forceinline__ void opaque(float& v) { asm volatile("" : "+f"(v)); }

#if SOFTMAX_DTYPE == 0
__device__ __forceinline__ float pair_dot(float4 y, float4 dy) { return vec_dot(y, dy); }
__device__ __forceinline__ float4 pair_grad(float4 y, float4 dy, float dot) { return vec_grad(y, dy, dot); }
#else
__device__ __forceinline__ float pair_dot(uint4 y, uint4 dy) { return vec_dot(widen(y), widen(dy)); }
__device__ __forceinline__ uint4 pair_grad(uint4 y, uint4 dy, float dot) {
    return narrow(vec_grad(widen(y), widen(dy), dot));
}
#endif

extern "C" __global__ void __launch_bounds__(SR_THREADS, SR_BLOCKS_PER_SM)
#if SR_CLUSTER > 1
    __cluster_dims__(SR_CLUSTER, 1, 1)
#endif
        single_read_backward(const elem_t* __restrict__ y, const elem_t* __restrict__ dy, elem_t* __restrict__ dx,
                             i64 rows, i64 n, i64 ld_y, i64 ld_dy, i64 ld_dx) {
    extern __shared__ __align__(128) vec_t stages[];  // SR_STAGES x (y: SR_STAGE_VECS, dy: SR_STAGE_VECS)
    __shared__ __align__(8) unsigned long long full[SR_STAGES];
    __shared__ float published[2];  // this block's partial dot, by row parity
    __shared__ float scratch[32];
    __shared__ vec_t firsts[SR_VPT][SR_WARPS];  // each warp's first output vector, for realigned stores

    const unsigned rank = cluster_rank<SR_CLUSTER>();
    const i64 cluster = blockIdx.x / SR_CLUSTER, clusters = gridDim.x / SR_CLUSTER;
    const i64 my_rows = cluster < rows ? (rows - 1 - cluster) / clusters + 1 : 0;
    const unsigned t = threadIdx.x;
#define SRB_SLICE(it) slice_b(y, dy, dx, cluster + (it) * clusters, n, ld_y, ld_dy, ld_dx, rank)

    if (t == 0) {
        for (int s = 0; s < SR_STAGES; ++s) mbar_init(&full[s], SRB_STAGED);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync<SR_CLUSTER>();  // barriers initialised; every block of the cluster is running

    if (t == 0) {
        for (i64 it = 0; it < SR_STAGES && it < my_rows; ++it)
            load_pair(stages + it * SRB_STAGED * SR_STAGE_VECS, SRB_SLICE(it), &full[it]);
    }

    RawPair scalar_next = SRB_SCALAR_AHEAD && my_rows > 0 ? load_scalar_pair(SRB_SLICE(0), rank) : RawPair{};
    for (i64 it = 0; it < my_rows; ++it) {
        const int stage = (int)(it % SR_STAGES);
        const SliceB s = SRB_SLICE(it);
        const Pair scalar = widen(SRB_SCALAR_AHEAD ? scalar_next : load_scalar_pair(s, rank));

        // 2. this thread's part of the dot, read from the stage (zero-filled
        // past the slice: adds 0), then the block's.
        mbar_wait(&full[stage], (unsigned)((it / SR_STAGES) & 1));
        const vec_t* buf_y = y_in_stage(stages + stage * SRB_STAGED * SR_STAGE_VECS, s);
        const vec_t* buf_g = g_in_stage(stages + stage * SRB_STAGED * SR_STAGE_VECS, s);
        float part = dot_term(scalar.y, scalar.dy);
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            const i64 j = t + k * SR_THREADS;
            if (j < s.vecs) part += pair_dot(SRB_Y_DIRECT ? vec_t{} : buf_y[j], buf_g[j]);
        }
        const float block = block_sum(part, scratch);

        // 3. stage -> registers, then hand the stage back to the copy engine.
        // (Widening the halves of registers for both the dot and dx made
        // ptxas keep both widened copies: 16 registers per pair, spills from
        // 8 pairs per thread; the dot from shared memory keeps 8.)
        vec_t vy[SR_VPT], vg[SR_VPT];
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            const i64 j = t + k * SR_THREADS;
            const bool in = j < s.vecs;
            vy[k] = in ? (SRB_Y_DIRECT ? __ldg(y_src(s) + j) : buf_y[j]) : vec_t{};
            vg[k] = in ? buf_g[j] : vec_t{};
        }
        __syncthreads();
        if (it + SR_STAGES < my_rows && t == 0) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            load_pair(stages + stage * SRB_STAGED * SR_STAGE_VECS, SRB_SLICE(it + SR_STAGES), &full[stage]);
        }
        if (SRB_SCALAR_AHEAD && it + 1 < my_rows) scalar_next = load_scalar_pair(SRB_SLICE(it + 1), rank);

        // 4. the cluster's dot through distributed shared memory.
        if (t == 0) published[it & 1] = block;
        cluster_sync<SR_CLUSTER>();
        const float dot = cluster_sum<SR_CLUSTER>(&published[it & 1]);

        // 5. dx, one pair at a time: the widened halves of one pair are live at once,
        // not those of the whole slice (ptxas otherwise spilled halves' softmax).
        if (s.r.y_shift == 0) {
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k) {
                const i64 j = t + k * SR_THREADS;
                opaque(vy[k]);
                opaque(vg[k]);
                vec_t out = pair_grad(vy[k], vg[k], dot);
                opaque(out);
                if (j < s.vecs) store_aligned(s.r.y + s.r.head + SR_VEC * (s.v0 + j), out);
            }
        } else {
            vec_t v[SR_VPT];
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k) {
                opaque(vy[k]);
                opaque(vg[k]);
                v[k] = pair_grad(vy[k], vg[k], dot);
                opaque(v[k]);
            }
            store_slice_realigned(s.r, s.v0, s.vecs, v, firsts);  // dx is not aligned like y
        }
        if (rank == 0 && t < scalar_count(s.r))
            s.r.y[scalar_index(s.r, t)] = from_float<elem_t>(grad_out(scalar.y, scalar.dy, dot));
    }
    cluster_sync<SR_CLUSTER>();  // no block leaves while another may still read its partial dots
#undef SRB_SLICE
}
