// single_read.cu: softmax (or log_softmax) that reads each element from
// device memory once and writes it once (Hopper, sm_90).
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE), the op softmax or
// log_softmax (SOFTMAX_LOG): elements.cuh; float32 arithmetic throughout,
// outputs rounded once.  A row is split over the SR_CLUSTER thread blocks of
// a cluster; block b holds slice b of the row (a contiguous run of 16-byte
// vectors: 4 floats or 8 halves) on chip:
//
//   1. a bulk asynchronous copy (cp.async.bulk, the copy engine) brings the
//      slice into a shared-memory stage and completes on that stage's
//      mbarrier; SR_STAGES stages form a ring, so the next rows are already
//      loading while this one is reduced and written (SR_LINE_SHIFT: the
//      slice placed at its source's offset in a 128-byte line, line_offset);
//   2. each thread moves its SR_VPT vectors from the stage into registers,
//      and the stage is handed back to the copy engine at once;
//   3. per thread: max m_t, then e = 2^((x - m_t) log2 e) and its sum (halves:
//      the max on packed halves, e by ex2.approx.ftz, see exp_elem); the
//      block merges the (max, sum) pairs.  float32 softmax keeps e in place
//      of x (SR_IN_PLACE), one exponential per element; so does half softmax
//      built wide (SR_WIDE: each vector widened from the stage to 8 floats,
//      8 registers per vector); the other builds (log_softmax, half softmax
//      rows too long for the wide plan) keep x as loaded (halves stay packed,
//      4 registers per vector whatever the dtype) and compute the output from
//      x in step 5 (softmax: a second exponential);
//   4. each block publishes its pair in its own shared memory; after one
//      cluster barrier every thread reads the SR_CLUSTER pairs through
//      distributed shared memory and merges them in a fixed order (the same
//      in every block, so every block gets bitwise the same (M, S));
//   5. y = e * e^(m_t - M) / S (in place; wide: rounded once to halves from
//      that float product), or from x: e^(x - M) / S, (x - M) - log(S)
//      (RowOutput); stored with 16-byte stores at any
//      alignment of y: where y is not aligned like x, each stored vector is
//      made of two neighbouring ones (warp shuffles, and shared memory across
//      warps), so only the 3 + 3 floats (7 + 7 halves) at a slice's ends are
//      stored one by one.  Loads and stores carry an L2 evict-last policy
//      (faster than plain or evict-first: notes/TUNING.md#l2-policy-of-single_read).
//
// Memory-merged groups (SR_MEMORY_MERGE, forward only): rows longer than a
// cluster holds are split over a group of any resident blocks on any SMs (a
// kernel argument, up to SR_THREADS blocks); step 4 publishes each block's
// pair in device memory and waits for the group's (memory_merge), and a
// block's group and rank come from a ticket (see the launch below).
//
// Traffic: 1 read + 1 write = 2 x element size bytes per element (8 for fp32).
// Launch (persistent): 1-D grid of G * SR_CLUSTER blocks of SR_THREADS
// threads, G at most the number of clusters that can be resident at once;
// cluster g handles rows g, g + G, ...  Dynamic shared memory:
// SR_STAGES * (SR_THREADS * SR_VPT + 8 * SR_LINE_SHIFT) * 16 bytes.  A row fits when
// ceil(vecs / SR_CLUSTER) <= SR_THREADS * SR_VPT, vecs = its 16-byte vector
// count.  The scalar head and tail (row start not 16-byte aligned, n not a
// multiple of the vector; at most 3 + 3 floats or 7 + 7 halves) are read
// with plain loads by block 0, one row ahead.
#include "cluster.cuh"
#include "elements.cuh"

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
#ifndef SR_WIDE
#define SR_WIDE 0  // 1: half softmax held as floats, e in place (both kernels of the build)
#endif
#ifndef SR_MEMORY_MERGE  // 1: a row's blocks are a group of resident blocks on any SMs, merged through device memory
#define SR_MEMORY_MERGE 0
#endif

// 1: the per-row merge over the cluster pushed (cluster.cuh row_exchange), not
// published between two cluster barriers; the launch rule sets it for clusters
// of 8 or more (softmax_lab/variants/single_read.py, PUSHED_MERGE_MIN_CLUSTER), where it
// was faster; in clusters of 4 it was slower (notes/TUNING.md#the-pushed-merge).
#ifndef SR_PUSHED_MERGE
#define SR_PUSHED_MERGE 0
#endif
#define SR_CAPACITY (SR_THREADS * SR_VPT)  // float4 vectors a block holds per row
#ifndef SR_LINE_SHIFT  // 1: each slice sits in its stage at its source's offset in a 128-byte line
#define SR_LINE_SHIFT 0
#endif
#define SR_STAGE_VECS (SR_CAPACITY + 8 * SR_LINE_SHIFT)  // a stage: a slice, and the shift's 7 vectors
#define SR_WARPS (SR_THREADS / 32)
#ifndef SR_SMEM_LIMIT
#define SR_SMEM_LIMIT 232448  // shared memory a block may opt in to on sm_90
#endif

// The configuration's invariants (softmax_lab/variants/single_read.py derives
// configurations that satisfy them; anything else must fail to compile, not run wrong).
static_assert(SR_CLUSTER >= 1 && SR_CLUSTER <= 16 && (SR_CLUSTER & (SR_CLUSTER - 1)) == 0,
              "the butterfly merge over the cluster needs a power-of-two cluster of at most 16 blocks");
static_assert(SR_THREADS % 32 == 0 && SR_THREADS >= 32 && SR_THREADS <= 1024,
              "whole warps (the block reductions and store4_warp), at most 1024 threads");
static_assert(SR_VPT >= 1 && SR_STAGES >= 1 && SR_BLOCKS_PER_SM >= 1, "positive sizes");
static_assert(!SR_MEMORY_MERGE || SR_CLUSTER == 1, "a memory-merged group is made of plain blocks, not clusters");
static_assert(!SR_PUSHED_MERGE || (SR_CLUSTER > 1 && !SR_MEMORY_MERGE), "a pushed merge needs a cluster of blocks");
static_assert(SR_WIDE == 0 || (SR_WIDE == 1 && SOFTMAX_DTYPE != 0 && !SOFTMAX_LOG && !SOFTMAX_BACKWARD),
              "SR_WIDE is for float16 and bfloat16 softmax (forward) only");
static_assert((long long)SR_STAGES * SR_STAGE_VECS * 16 + SR_CAPACITY / 2 + 1024 + 512 <= SR_SMEM_LIMIT,
              "the stages (and 1/32 of a stage for realigned stores) must fit in the shared memory of a block");
// Registers: an SM's 4 partitions hold 16384 each and take the warps in turn.
#define SR_WARPS_PER_PARTITION ((SR_THREADS / 32 * SR_BLOCKS_PER_SM + 3) / 4)
#define SR_REGISTER_BUDGET (16384 / (32 * SR_WARPS_PER_PARTITION) / 8 * 8)
// The row: 4 registers per vector (4 floats, or 8 packed halves), 8 when wide
// (8 widened halves).  Others (ptxas's spills set them; softmax_lab/variants/
// single_read.py mirrors them; notes/TUNING.md#register-budgets): 32, 40 without a cluster, 76 for
// packed halves without a cluster, 40 for wide ones.  Wide, at most 12 vectors
// (96 registers, as 24 of floats): past 12, ptxas needed more others.
#define SR_REGISTERS_PER_VECTOR (SR_WIDE ? 8 : 4)
#define SR_OTHER_REGISTERS (SR_CLUSTER > 1 || SR_MEMORY_MERGE ? 32 : SOFTMAX_DTYPE == 0 || SR_WIDE ? 40 : 76)
static_assert(SR_REGISTERS_PER_VECTOR * SR_VPT + SR_OTHER_REGISTERS <=
                  (SR_REGISTER_BUDGET < 255 ? SR_REGISTER_BUDGET : 255),
              "the row (4 registers per vector, 8 wide) plus the others must fit the register budget");
static_assert(!SR_WIDE || SR_VPT <= 12, "wide: at most 12 vectors (96 registers) per thread");
// Step 2 and the aligned stores take a slice that holds all but each thread's
// last vector without comparing indices (the whole path): halves always, float32
// where its blocks keep 128 registers a thread (at 96, ptxas spilled it).
// softmax_lab/variants/single_read.py's WHOLE_PATH_REGISTERS is this rule's 128; its block shapes give
// float32 slices such blocks where they hold them (notes/TUNING.md#the-whole-path).
#define SR_WHOLE_PATH (SOFTMAX_DTYPE != 0 || SR_REGISTER_BUDGET >= 128)

// ------------------------------------------------------------ the vectors
// SR_IN_PLACE: float32 softmax, and half softmax built wide, keep e =
// e^(x - m_t) in the registers (one exponential per element); the other builds
// keep x as loaded and compute the output from it (softmax: a second
// exponential, of x - M).
#define SR_IN_PLACE ((SOFTMAX_DTYPE == 0 || SR_WIDE) && !SOFTMAX_LOG)
#define SR_VEC (16 / (int)sizeof(elem_t))  // elements per 16-byte vector
// Halves take their max packed (max_into), before they are widened.
#define SR_PACKED_MAX (SOFTMAX_DTYPE != 0)

#if SOFTMAX_DTYPE == 0
typedef float4 vec_t;  // a 16-byte vector as loaded and stored
__device__ __forceinline__ float4 widen(float4 v) { return v; }
__device__ __forceinline__ float4 narrow(float4 v) { return v; }
#else
typedef uint4 vec_t;
__device__ __forceinline__ Floats8 widen(uint4 raw) { return widen8<elem_t>(raw); }
__device__ __forceinline__ uint4 narrow(const Floats8& f) { return narrow8<elem_t>(f); }
#endif

// reg_t: a vector as a thread holds it, hold(): from the loaded vector.  Wide,
// 8 floats (widened once, exactly); else as loaded.
#if SR_WIDE
typedef Floats8 reg_t;
__device__ __forceinline__ Floats8 hold(uint4 raw) { return widen(raw); }
#else
typedef vec_t reg_t;
__device__ __forceinline__ vec_t hold(vec_t raw) { return raw; }
#endif

// An empty asm that the compiler must assume changes v: the widened floats of
// one pass are not kept (8 registers per vector of halves) for the next one,
// which widens again (a few integer or HADD2 instructions per vector).
__device__ __forceinline__ void opaque(float4& v) { asm volatile("" : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)); }
__device__ __forceinline__ void opaque(uint4& v) { asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)); }

__device__ __forceinline__ const vec_t* body_vecs(const RowSpanOf<elem_t>& r) {
    return reinterpret_cast<const vec_t*>(r.x + r.head);
}

// Streaming (evict-first) scalar loads, as stored: halves are widened where they
// are used, so that a scalar loaded a row ahead is not waited for at its load.
__device__ __forceinline__ float raw_cs(const float* p) { return __ldcs(p); }
__device__ __forceinline__ half_bits raw_cs(const half_bits* p) { return half_bits{__ldcs(&p->bits)}; }
__device__ __forceinline__ bf16_bits raw_cs(const bf16_bits* p) { return bf16_bits{__ldcs(&p->bits)}; }
#if SOFTMAX_DTYPE == 0
__device__ __forceinline__ float raw_neg_inf_elem() { return SOFTMAX_NEG_INF; }
#else
__device__ __forceinline__ elem_t raw_neg_inf_elem() { return elem_t{(unsigned short)(NEG_INF_PAIR & 0xffffu)}; }
#endif

// One evict-last 16-byte store to an aligned address.
__device__ __forceinline__ void store_aligned(float* p, float4 v) { store_vec<STORE_LAST>(p, v); }

__device__ __forceinline__ void store_aligned(void* p, uint4 v) { store_vec<STORE_LAST>(p, v); }

// The next lane's vector (what store_shifted needs of it: 3 floats, or all 8 halves).
__device__ __forceinline__ float4 shfl_next(float4 val) {
    float4 next;
    next.x = __shfl_down_sync(0xffffffffu, val.x, 1);
    next.y = __shfl_down_sync(0xffffffffu, val.y, 1);
    next.z = __shfl_down_sync(0xffffffffu, val.z, 1);
    next.w = 0.f;
    return next;
}

__device__ __forceinline__ uint4 shfl_next(uint4 val) {
    return make_uint4(__shfl_down_sync(0xffffffffu, val.x, 1), __shfl_down_sync(0xffffffffu, val.y, 1),
                      __shfl_down_sync(0xffffffffu, val.z, 1), __shfl_down_sync(0xffffffffu, val.w, 1));
}

__device__ __forceinline__ void store_run(const RowSpan& r, i64 j, float4 val, float4 next, bool next_valid,
                                          bool first) {
    store_shifted<STORE_LAST>(r, j, val, next, next_valid, first);
}

#if SOFTMAX_DTYPE != 0
// store_shifted (common.cuh) for 8 packed halves: body vector j (`val`,
// `next` is vector j + 1) at y's alignment, y_shift = d halves (1 to 7).
// Output half e of the body lands on a 16-byte boundary when e % 8 == 8 - d,
// so vector j contributes the aligned vector made of halves 8 - d .. 15 - d
// of (val, next) when next is stored by the same run, else its last d halves
// one by one; the first vector of a run also stores its first 8 - d halves
// one by one.
__device__ __forceinline__ void store_run(const RowSpanOf<elem_t>& r, i64 j, uint4 val, uint4 next,
                                          bool next_valid, bool first) {
    unsigned short* p = reinterpret_cast<unsigned short*>(r.y + r.head + 8 * j);
    const int d = r.y_shift;
    const unsigned w[8] = {val.x, val.y, val.z, val.w, next.x, next.y, next.z, next.w};
    if (first) {
#pragma unroll
        for (int c = 0; c < 7; ++c)
            if (c < 8 - d) p[c] = (unsigned short)(w[c >> 1] >> (16 * (c & 1)));
    }
    if (next_valid) {
        const int q = (8 - d) >> 1;  // the first word of the aligned vector, then a half-word shift if d is odd
        unsigned u[5];
#pragma unroll
        for (int i = 0; i < 5; ++i) u[i] = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2] : w[i + 3 < 8 ? i + 3 : 7];
        uint4 out;
        if (d & 1)
            out = make_uint4(__funnelshift_r(u[0], u[1], 16), __funnelshift_r(u[1], u[2], 16),
                             __funnelshift_r(u[2], u[3], 16), __funnelshift_r(u[3], u[4], 16));
        else
            out = make_uint4(u[0], u[1], u[2], u[3]);
        store_aligned(p + 8 - d, out);
    } else {
#pragma unroll
        for (int c = 1; c < 8; ++c)
            if (c >= 8 - d) p[c] = (unsigned short)(w[c >> 1] >> (16 * (c & 1)));
    }
}
#endif

// store4_warp (common.cuh) for vec_t: lanes hold consecutive body vectors j0 +
// l (`valid` for a prefix of the lanes), each warp's 32 vectors one run.
// Every lane of the warp must call it.
__device__ __forceinline__ void store_warp(const RowSpan& r, i64 j, float4 val, bool valid) {
    store4_warp<STORE_LAST>(r, j, val, valid);
}

#if SOFTMAX_DTYPE != 0
__device__ __forceinline__ void store_warp(const RowSpanOf<elem_t>& r, i64 j, uint4 val, bool valid) {
    if (r.y_shift == 0) {
        if (valid) store_aligned(r.y + r.head + 8 * j, val);
        return;
    }
    const unsigned lane = threadIdx.x & 31;
    const uint4 next = shfl_next(val);
    const bool next_valid = __shfl_down_sync(0xffffffffu, (int)valid, 1) && lane < 31;
    if (valid) store_run(r, j, val, next, next_valid, lane == 0);
}
#endif

// A block's slice of the output where it is not aligned like the input (the
// whole block takes this path; every thread must call it): the slice is one
// run of store_run, vector j + 1 from the next lane, or for a warp's last lane
// from the next warp's first vector (published in `firsts`; the block's last
// warp takes thread 0's vector of the next k).  out[k] is body vector v0 + t +
// k * SR_THREADS of the row, for those below `vecs`.
__device__ __forceinline__ void store_slice_realigned(const RowSpanOf<elem_t>& r, i64 v0, i64 vecs,
                                                      const vec_t (&out)[SR_VPT], vec_t (*firsts)[SR_WARPS]) {
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) firsts[k][warp] = out[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < SR_VPT; ++k) {
        const i64 j = t + k * SR_THREADS;
        const vec_t val = out[k];
        vec_t next = shfl_next(val);
        if (lane == 31) {
            if (warp + 1 < SR_WARPS) next = firsts[k][warp + 1];
            else if (k + 1 < SR_VPT) next = firsts[(k + 1) % SR_VPT][0];
        }
        if (j < vecs) store_run(r, v0 + j, val, next, j + 1 < vecs, j == 0);
    }
}

// Where a slice starts in its stage: 0, or (SR_LINE_SHIFT) its source's
// vector offset in a 128-byte line, so that the bulk copy's source and
// destination sit alike in their lines (a copy between different offsets is
// slow: notes/TUNING.md#the-line-shift; the launch rule picks it, line_shifted).
__device__ __forceinline__ int line_offset(const void* src) {
    return SR_LINE_SHIFT ? (int)(((size_t)src >> 4) & 7) : 0;
}

#ifndef SR_HELPERS_ONLY  // single_read_backward.cu takes the helpers above, not the forward kernels
// ------------------------------------------------------------ the cluster kernel
struct Slice {
    RowSpanOf<elem_t> r;
    i64 v0;    // first body vector of this block's slice
    i64 vecs;  // vectors in this block's slice
};

__device__ __forceinline__ Slice slice_of(const elem_t* x, elem_t* y, i64 row, i64 n, i64 ld_x, i64 ld_y,
                                          unsigned rank, i64 slice) {
    Slice s;
    s.r = row_span(x + row * ld_x, y + row * ld_y, n);
    // Memory-merged groups take the host's slice length, the same for every
    // row (no 64-bit division by a group size known only at run time).
    const i64 per_block = SR_MEMORY_MERGE ? slice : (s.r.vecs + SR_CLUSTER - 1) / SR_CLUSTER;
    s.v0 = min((i64)rank * per_block, s.r.vecs);
    s.vecs = min(per_block, s.r.vecs - s.v0);
    return s;
}

// Slice s's first vector in device memory, and where the slice sits in stage
// k: the copy into the stage and the reads from it both take it from here.
__device__ __forceinline__ const vec_t* slice_src(const Slice& s) { return body_vecs(s.r) + s.v0; }
template <typename Index>  // the prologue's i64 row count or the loop's int stage
__device__ __forceinline__ vec_t* slice_in_stage(vec_t* stages, Index k, const Slice& s) {
    return stages + k * SR_STAGE_VECS + line_offset(slice_src(s));
}

// The scalar (head or tail) element owned by this thread, or -inf, as stored.
__device__ __forceinline__ elem_t load_scalar(const Slice& s, unsigned rank) {
    const i64 k = threadIdx.x;
    return (rank == 0 && k < scalar_count(s.r)) ? raw_cs(s.r.x + scalar_index(s.r, k)) : raw_neg_inf_elem();
}

#if SR_MEMORY_MERGE
// The row's total from the `ranks` pairs its blocks publish in `row_slots`
// (this block's at `rank`), once all are written (waits for the missing
// ones): thread k reads slot k, then the block merges them in a fixed order,
// so every block of the group gets bitwise the same (M, S).
__device__ __forceinline__ MaxSum memory_merge(MaxSum block, unsigned long long* row_slots, unsigned rank,
                                               i64 ranks, MaxSum* scratch) {
    const unsigned t = threadIdx.x;
    if (t == 0) publish(row_slots + rank, __float_as_uint(block.max), __float_as_uint(block.sum));
    MaxSum pair = {SOFTMAX_NEG_INF, 0.f};
    if (t < ranks) {
        unsigned long long w;
        while ((unsigned)((w = read_slot(row_slots + t)) >> 32) == SLOT_PENDING) __nanosleep(64);
        pair = {__uint_as_float((unsigned)w), __uint_as_float((unsigned)(w >> 32))};
    }
    return block_merge(pair, scratch);
}
#endif

// Launch: clusters of SR_CLUSTER blocks; or (SR_MEMORY_MERGE) groups of
// `ranks` blocks (at most SR_THREADS, and no more than can be resident at
// once), block k of a group taking vectors [k * slice, (k + 1) * slice) of
// each row's body (ranks * slice >= ceil(n / elements per vector)), with
// `slots`: rows x ranks words for the pairs and one ticket counter after
// them, all filled with the byte 0xBF.  A block's place (its
// group, its rank) is its ticket: blocks take tickets as they start, so the
// blocks of a group that waits are running, or start once an earlier group's
// blocks leave; the launch cannot deadlock.  (Launches on several streams
// could each hold part of the GPU and wait for blocks that cannot start: the
// launcher makes the launch cooperative, every block resident at once.)
extern "C" __global__ void __launch_bounds__(SR_THREADS, SR_BLOCKS_PER_SM)
#if SR_CLUSTER > 1
    __cluster_dims__(SR_CLUSTER, 1, 1)
#endif
#if SR_MEMORY_MERGE
        single_read(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y,
                    i64 ranks, i64 slice, unsigned long long* __restrict__ slots) {
#else
        single_read(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
    const i64 slice = 0;  // unused: a cluster splits each row evenly (slice_of)
#endif
    extern __shared__ __align__(128) vec_t stages[];  // SR_STAGES x SR_CAPACITY
    __shared__ __align__(8) unsigned long long full[SR_STAGES];
#if SR_PUSHED_MERGE
    __shared__ RowExchange<SR_CLUSTER, MaxSum> merged;  // the cluster's pairs, by row parity (cluster.cuh)
#else
    __shared__ MaxSum published[2];  // this block's pair, by row parity
#endif
    __shared__ MaxSum scratch[32];
    __shared__ vec_t firsts[SR_VPT][SR_WARPS];  // each warp's first output vector, for realigned stores

#if SR_MEMORY_MERGE
    __shared__ unsigned long long ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(slots + rows * ranks, 1ull) - 0xBFBFBFBFBFBFBFBFull;
    __syncthreads();
    const unsigned rank = (unsigned)(ticket % ranks);
    const i64 cluster = (i64)(ticket / ranks), clusters = gridDim.x / ranks;
#else
    const unsigned rank = cluster_rank<SR_CLUSTER>();
    const i64 cluster = blockIdx.x / SR_CLUSTER, clusters = gridDim.x / SR_CLUSTER;
#endif
    const i64 my_rows = cluster < rows ? (rows - 1 - cluster) / clusters + 1 : 0;
    const unsigned t = threadIdx.x;

    if (t == 0) {
        for (int s = 0; s < SR_STAGES; ++s) mbar_init(&full[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#if SR_PUSHED_MERGE
    if (t == SR_THREADS - 1) {  // (by thread 0, ptxas spilled 56 bytes at 8 x 512 x 24 float32)
        row_exchange_init(merged);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#endif
    cluster_sync<SR_CLUSTER>();  // barriers initialised; every block of the cluster is running

    if (t == 0) {
        for (i64 it = 0; it < SR_STAGES && it < my_rows; ++it) {
            const Slice s = slice_of(x, y, cluster + it * clusters, n, ld_x, ld_y, rank, slice);
            load_slice(slice_in_stage(stages, it, s), slice_src(s), s.vecs, &full[it], l2_evict_last());
        }
    }
    elem_t scalar_next =
        my_rows > 0 ? load_scalar(slice_of(x, y, cluster, n, ld_x, ld_y, rank, slice), rank) : raw_neg_inf_elem();

    for (i64 it = 0; it < my_rows; ++it) {
        const int stage = (int)(it % SR_STAGES);
        const Slice s = slice_of(x, y, cluster + it * clusters, n, ld_x, ld_y, rank, slice);
        float scalar = to_float(scalar_next);

        // 2. stage -> registers, then hand the stage back to the copy engine.
        mbar_wait(&full[stage], (unsigned)((it / SR_STAGES) & 1));
        const vec_t* buf = slice_in_stage(stages, stage, s);
        // As loaded (4 floats or 8 packed halves); wide builds widen each vector
        // as its exponentials are taken: widened here, with ex2.approx.ftz, ptxas
        // spilled 16-48 bytes at 128 registers.
        vec_t raw[SR_VPT];
        // A slice that holds every thread's vectors but the last (every row of
        // a plan filled to (SR_VPT - 1) / SR_VPT or more, as the derived plans
        // are) loads those whatever their index: fewer instructions, which is
        // what the halves' one-block plans wait on; one loop, not a second
        // one for whole slices (notes/TUNING.md#halves-instructions).
        const bool most = SR_WHOLE_PATH && s.vecs >= (SR_VPT - 1) * SR_THREADS;
#if SR_PACKED_MAX
        unsigned max_pair = NEG_INF_PAIR;
#endif
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            const i64 j = t + k * SR_THREADS;
            raw[k] = (most && k < SR_VPT - 1) || j < s.vecs ? buf[j] : raw_neg_inf();
#if SR_PACKED_MAX
            max_pair = max_into(max_pair, raw[k]);
#endif
        }
        __syncthreads();
        if (it + SR_STAGES < my_rows) {
            if (t == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                const Slice next = slice_of(x, y, cluster + (it + SR_STAGES) * clusters, n, ld_x, ld_y, rank, slice);
                load_slice(slice_in_stage(stages, stage, next), slice_src(next), next.vecs, &full[stage],
                           l2_evict_last());
            }
        }
        if (it + 1 < my_rows) scalar_next = load_scalar(slice_of(x, y, cluster + (it + 1) * clusters, n, ld_x, ld_y, rank, slice), rank);

        // 3. per-thread max, exponentials, sum; block merge.
#if SR_PACKED_MAX
        const float m = fmaxf(scalar, pair_max(max_pair));
#else
        float m = scalar;
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) m = fmaxf(m, vec_max(raw[k]));
#endif
        const float base = exp_base(m);
        float sum = 0.f;
#if SR_IN_PLACE
        reg_t v[SR_VPT];  // e = e^(x - m_t)
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            v[k] = exp_elems(hold(raw[k]), base);
            sum += vec_sum(v[k]);
        }
        scalar = exp_elem(scalar, base);
        sum += scalar;
#else
        vec_t (&v)[SR_VPT] = raw;
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            opaque(v[k]);
            sum += vec_sum(exp_elems(widen(v[k]), base));
        }
        sum += exp_elem(scalar, base);
#endif
#if SOFTMAX_DTYPE == 0
        const MaxSum block = block_merge({m, sum}, scratch);
#else
        const MaxSum block = block_merge_rescaled({m, sum}, scratch);
#endif

        // 4. cluster-wide merge through distributed shared memory (or the group's, through device memory).
#if SR_MEMORY_MERGE
        const MaxSum total = memory_merge(block, slots + (cluster + it * clusters) * ranks, rank, ranks, scratch);
#elif SR_PUSHED_MERGE
        const MaxSum total = row_exchange(merged, block, rank, it);
#else
        if (t == 0) published[it & 1] = block;
        cluster_sync<SR_CLUSTER>();
        const MaxSum total = cluster_merge<SR_CLUSTER>(&published[it & 1]);
#endif

        // 5. the output.  In place, m = -inf means all of this thread's
        // elements are -inf: e^(m - M) is 0, or NaN when the whole row is -inf.
        // Wide, each product is rounded once to a half (narrow).
        vec_t out[SR_VPT];  // the output vectors, as stored
#if SR_IN_PLACE
        const InPlaceScale scale{exp_approx(m - total.max), 1.f / total.sum};
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) out[k] = narrow(scale(v[k]));
#else
#if SOFTMAX_LOG
        // log(S) + 0 * (1 / S) is log(S) (S >= 1, or 0 or NaN for a row whose
        // output is NaN anyway); the IEEE division, a called subroutine, makes
        // ptxas schedule the output pass without spills (NVRTC 12.9: without
        // it, 8 x 512 x 24 halves spill 516 bytes, and clusters of one
        // block from 14 vectors per thread).
        const RowOutput f = {total.max, logf(total.sum) + 0.f * (1.f / total.sum)};
#else
        const ExpOutput f = {total.max, 1.f / total.sum};
#endif
#pragma unroll
        for (int k = 0; k < SR_VPT; ++k) {
            opaque(v[k]);
            out[k] = narrow(f(widen(v[k])));
        }
#endif
        if (s.r.y_shift == 0) {
            // Two forms of one loop: the whole path's (with `most`) and the form
            // without it (one form for both changed the halves' SASS).
#if SR_WHOLE_PATH
            elem_t* dst = s.r.y + s.r.head + SR_VEC * (s.v0 + t);
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k)
                if ((most && k < SR_VPT - 1) || (int)t + k * SR_THREADS < (int)s.vecs)
                    store_aligned(dst + SR_VEC * k * SR_THREADS, out[k]);
#else
#pragma unroll
            for (int k = 0; k < SR_VPT; ++k) {
                const i64 j = t + k * SR_THREADS;
                if (j < s.vecs) store_aligned(s.r.y + s.r.head + SR_VEC * (s.v0 + j), out[k]);
            }
#endif
        } else {
            store_slice_realigned(s.r, s.v0, s.vecs, out, firsts);
        }
#if SR_IN_PLACE
        if (rank == 0 && t < scalar_count(s.r)) s.r.y[scalar_index(s.r, t)] = from_float<elem_t>(scale(scalar));
#else
        if (rank == 0 && t < scalar_count(s.r)) s.r.y[scalar_index(s.r, t)] = from_float<elem_t>(f(scalar));
#endif
    }
    cluster_sync<SR_CLUSTER>();  // no block leaves while another may still read its pairs
}

// ------------------------------------------------------------ the warp kernel
// Rows of at most SR_ROW_WARPS * 32 * SR_WARP_VPT 16-byte vectors: one block
// of SR_ROW_WARPS warps per row (by default one warp), the row in registers,
// warp shuffles for the reductions (no shared memory, no block barrier; with
// several warps, the warps' results meet in shared memory: block_max,
// block_sum); loads and stores with the evict-last policy, as above.  Each
// warp holds runs of 32 vectors (lane order), warp w the run w of every
// SR_ROW_WARPS.  SR_WIDE holds halves as floats here too (8 x 8 registers + 32
// fit its 128: ptxas used 106 for 8 vectors, NVRTC 12.9), e in place, one
// exponential.  Launch: blocks of 32 * SR_ROW_WARPS threads, one per row (the
// block loops over rows blockIdx.x + k * gridDim.x beyond the grid).
#ifndef SR_WARP_VPT
#define SR_WARP_VPT 8
#endif
#ifndef SR_ROW_WARPS
#define SR_ROW_WARPS 1
#endif
static_assert(SR_WARP_VPT >= 1 && SR_REGISTERS_PER_VECTOR * SR_WARP_VPT + 32 <= 128,
              "the row (4 registers per vector, 8 wide) plus 32 others must fit 128 registers per thread");
static_assert(SR_ROW_WARPS == 1 || SR_ROW_WARPS == 2 || SR_ROW_WARPS == 4 || SR_ROW_WARPS == 8 || SR_ROW_WARPS == 16,
              "SR_ROW_WARPS: 1, 2, 4, 8 or 16 warps a row (16 blocks of 32 threads an SM at 128 registers)");

#if SR_ROW_WARPS == 1
#define SR_ROW_MAX(v) warp_max(v)
#define SR_ROW_SUM(v) warp_sum(v)
#else
#define SR_ROW_MAX(v) block_max(v, scratch)
#define SR_ROW_SUM(v) block_sum(v, scratch)
#endif

extern "C" __global__ void __launch_bounds__(32 * SR_ROW_WARPS, 16 / SR_ROW_WARPS)
    single_read_warp(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
#if SR_ROW_WARPS > 1
    __shared__ float scratch[32];
#endif
    const unsigned t = threadIdx.x;  // lane t & 31 of warp t >> 5
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const vec_t* in = body_vecs(r);
        reg_t v[SR_WARP_VPT];
#if SR_PACKED_MAX
        unsigned max_pair = NEG_INF_PAIR;
#endif
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            const i64 j = t + 32 * SR_ROW_WARPS * k;
            const vec_t raw = j < r.vecs ? load_evict_last(in + j) : raw_neg_inf();
#if SR_PACKED_MAX
            max_pair = max_into(max_pair, raw);
#endif
            v[k] = hold(raw);
        }
        const bool owns_scalar = t < scalar_count(r);
        float scalar = owns_scalar ? to_float(r.x[scalar_index(r, t)]) : SOFTMAX_NEG_INF;
#if SR_PACKED_MAX
        float m = fmaxf(scalar, pair_max(max_pair));
#else
        float m = scalar;
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) m = fmaxf(m, vec_max(v[k]));
#endif
        m = SR_ROW_MAX(m);
        const float base = exp_base(m);
        float sum = exp_elem(scalar, base);
#if SR_IN_PLACE
        scalar = sum;
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            v[k] = exp_elems(v[k], base);
            sum += vec_sum(v[k]);
        }
        // e^(base - m) is 1, or NaN-making inf when the whole row is -inf.
        const float scale = exp_approx(base - m) / SR_ROW_SUM(sum);
        const auto out = [scale](const reg_t& e) { return narrow(vec_mul(e, scale)); };
        const auto out1 = [scale](float e) { return from_float<elem_t>(e * scale); };
#else
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            opaque(v[k]);
            sum += vec_sum(exp_elems(widen(v[k]), base));
        }
        // m = -inf (the whole row -inf) gives NaN: e^(-inf - -inf), -inf - -inf.
#if SOFTMAX_LOG
        const RowOutput f = row_output(m, SR_ROW_SUM(sum));
#else
        const ExpOutput f = {m, 1.f / SR_ROW_SUM(sum)};
#endif
        const auto out = [f](vec_t x) {
            opaque(x);
            return narrow(f(widen(x)));
        };
        const auto out1 = [f](float x) { return from_float<elem_t>(f(x)); };
#endif
        // A warp's 32 vectors are one run of store_run (store_warp).  (A
        // whole-row run, lane 31 taking lane 0's vector of the next k, must have
        // lane 0 *provide* that vector to the shuffle; the first try had lane
        // 31 ask for it, wrong: notes/TUNING.md#warp-row-loads.)
#pragma unroll
        for (int k = 0; k < SR_WARP_VPT; ++k) {
            const i64 j = t + 32 * SR_ROW_WARPS * k;
            store_warp(r, j, out(v[k]), j < r.vecs);
        }
        if (owns_scalar) r.y[scalar_index(r, t)] = out1(scalar);
    }
}
#endif  // SR_HELPERS_ONLY
