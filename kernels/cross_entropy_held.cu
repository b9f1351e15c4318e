// cross_entropy_held.cu: the cross-entropy loss of a row, and its gradient,
// from one read of the logits: each row held in registers across a cluster
// of blocks, as cluster_row.cu holds a softmax row (its plan, slices, loads
// and exchange), one cluster a row, no persistent loop.
//
//   1. block b of the cluster loads slice b of the row's 16-byte vectors,
//      all of a thread's at once (load_held, padded with -inf);
//   2. each thread's (max, sum of e^(x - max)), its plain sum of x (for label
//      smoothing only) and x_t where it holds the target's element; block 0
//      adds the scalar head and tail;
//   3. the row's four statistics by the pushed exchange (cluster.cuh): every
//      block gets bitwise the same (max, sum, sum of x, x_t);
//   4. block 0's thread 0 writes the row's loss (and lse); with the gradient
//      (XENT_GRAD), every thread writes a e^(x - m) - b from its registers
//      (cross_entropy.cuh), and the thread that held x_t then writes the
//      target's element over it.
//
// Traffic: 1 read of x, and with the gradient 1 write of dx (which may be x
// itself: every element is read into registers before the exchange, and
// written after it).  The arguments: the pointers that change from call to
// call first, then the options, the shape last (a prepared launch sets only
// the first seven for a repeated call).  Launch: as cluster_row's forward (a grid of
// CR_CLUSTER x R by ceil(rows / R) blocks, variants/cross_entropy.py).  A
// mean's scale comes from cross_entropy.cu's count, launched before, and the
// reduced loss from its total, after; or, built with XENT_REDUCE (few rows,
// where those launches would cost more than the kernel), both come from this
// launch:
//   5. every block counts the rows kept (a mean's gradient needs the scale);
//      block 0 of each cluster, once its row's loss is written, takes a
//      ticket (atomicInc wrapping at `rows`, so the word is 0 again after
//      the launch), and the block that takes the last one sums every row's
//      loss in a fixed order, as cross_entropy_total does.
// Built with SOFTMAX_LOG: the halves' sums by exp_elem with no shift, as
// log_softmax's in cluster_row.
#include "cluster.cuh"
#include "cross_entropy.cuh"

#if !defined(CR_CLUSTER) || !defined(CR_THREADS) || !defined(CR_VPT) || !defined(CR_BLOCKS_PER_SM)
#error "built from cluster_row's plan: CR_CLUSTER, CR_THREADS, CR_VPT and CR_BLOCKS_PER_SM (variants/cross_entropy.py)"
#endif
#ifndef CR_STREAM_LOADS
#define CR_STREAM_LOADS 0
#endif
#ifndef XENT_GRAD  // 1: write the gradient too
#define XENT_GRAD 0
#endif
#ifndef XENT_REDUCE  // 1: the mean's count and the reduced loss in this launch (step 5)
#define XENT_REDUCE 0
#endif
#define CR_LOAD (CR_STREAM_LOADS ? LOAD_STREAM : LOAD_KEEP)
#define XENT_STORE (SOFTMAX_DTYPE != 0 ? STORE_NORMAL : STORE_FIRST)  // as cluster_row's forward
static_assert(SOFTMAX_LOG && !SOFTMAX_BACKWARD, "built as log_softmax: the sums without a shift");
static_assert(CR_CLUSTER >= 1 && CR_CLUSTER <= 16 && (CR_CLUSTER & (CR_CLUSTER - 1)) == 0,
              "a power-of-two cluster of at most 16 blocks (the butterfly merge)");
static_assert(CR_THREADS % 32 == 0 && CR_THREADS >= 32 && CR_THREADS <= 1024, "whole warps, at most 1024");

// What the exchange combines: the online pair, the sum of x and x_t (0 but in
// the one thread that holds it), all in the same order everywhere.
struct __align__(16) LossStats {
    MaxSum ms;
    float total;
    float target;
};

__device__ __forceinline__ LossStats shfl_xor(LossStats v, int o) {
    return {shfl_xor(v.ms, o), shfl_xor(v.total, o), shfl_xor(v.target, o)};
}
__device__ __forceinline__ LossStats combine(LossStats a, LossStats b) {
    return {merge(a.ms, b.ms), a.total + b.total, a.target + b.target};
}
__device__ __forceinline__ LossStats exchange_identity(LossStats) { return {{SOFTMAX_NEG_INF, 0.f}, 0.f, 0.f}; }
__device__ __forceinline__ void push_to(unsigned remote, unsigned remote_bar, LossStats v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                     remote),
                 "f"(v.ms.max), "f"(v.ms.sum), "f"(v.total), "f"(v.target), "r"(remote_bar)
                 : "memory");
}

// Element c of a held vector (by selects: no local memory).
__device__ __forceinline__ float element(float4 v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }
__device__ __forceinline__ float element(const Floats8& f, int c) {
    float out = f.v[0];
#pragma unroll
    for (int k = 1; k < 8; ++k)
        if (k == c) out = f.v[k];
    return out;
}

__device__ __forceinline__ i64 slice_vec(i64 v0, int j) { return v0 + threadIdx.x + (i64)j * CR_THREADS; }

extern "C" __global__ void __launch_bounds__(CR_THREADS, CR_BLOCKS_PER_SM)
#if CR_CLUSTER > 1
    __cluster_dims__(CR_CLUSTER, 1, 1)
#endif
        cross_entropy_held(const elem_t* x, elem_t* dx, const target_t* __restrict__ target,
                           float* __restrict__ loss, float* __restrict__ lse_out, unsigned* __restrict__ ticket,
                           float* __restrict__ total_out, i64 ld_dx, i64 ld_t, i64 ignore_index, float smoothing,
                           float z_loss, const float* __restrict__ scale, i64 mean, i64 rows, i64 n, i64 ld_x) {
    __shared__ PushedExchange<CR_CLUSTER, CR_THREADS / 32, LossStats> ex;
    const unsigned rank = cluster_rank<CR_CLUSTER>();
    const i64 row = blockIdx.x / CR_CLUSTER + (i64)blockIdx.y * (gridDim.x / CR_CLUSTER);
    if (row >= rows) return;  // the last grid line's spare clusters (every block of a cluster alike)
    exchange_open(ex);
    const i64 t_read = (i64)target[row * ld_t];
    const bool ignored = t_read == ignore_index, valid = in_row(t_read, n);
    const int t = valid ? (int)t_read : -1;  // the target's element (n is below 2^31 here), or -1
    const RowSpanOf<elem_t> r = row_span(x + row * ld_x, XENT_GRAD ? dx + row * ld_dx : (elem_t*)nullptr, n);
    const HeldSlice slice = held_slice<CR_CLUSTER, (i64)CR_THREADS * CR_VPT>(r.vecs, r.x + r.head, rank);
    const i64 first = slice.v0 + threadIdx.x;
    const int mine = held_count<CR_THREADS, CR_VPT>(first, slice.v1);
    raw_t raw[CR_VPT];
    load_held<CR_LOAD, CR_THREADS>(raw, body_in(r), first, mine, raw_neg_inf());
#if XENT_REDUCE
    __shared__ i64 kept_scratch[32];
    const i64 kept = XENT_GRAD && mean ? kept_rows(target, ld_t, ignore_index, rows, kept_scratch) : 0;
    const float k = XENT_GRAD && mean ? 1.f / (float)kept : 1.f;
#else
    const float k = scale ? scale[0] : 1.f;
#endif
    float scalar = SOFTMAX_NEG_INF;  // block 0: this thread's scalar (head or tail) element, if any
    const bool has_scalar = rank == 0 && threadIdx.x < scalar_count(r);
    const i64 scalar_at = has_scalar ? scalar_index(r, threadIdx.x) : -1;
    if (has_scalar) scalar = load_scalar(r, scalar_at);

    // The target's element: in this thread's vector jt at component ct, or its scalar.
    constexpr int VEC = RowSpanOf<elem_t>::VEC;
    const i64 tv = t - r.head >= 0 ? (t - r.head) / VEC : -1;
    const bool holds_vec = tv >= first && tv < slice.v1 && (tv - first) % CR_THREADS == 0;
    const bool holds_target = holds_vec || (has_scalar && scalar_at == t);
    const int jt = holds_vec ? (int)((tv - first) / CR_THREADS) : -1, ct = (int)((t - r.head) % VEC);
    // The max (packed, for halves), then one pass that widens each vector once
    // for its exponentials, its sum (label smoothing only) and x_t.
    LossStats acc = {{held_max(raw), 0.f}, 0.f, 0.f};
    if (has_scalar) acc.ms.max = fmaxf(acc.ms.max, scalar);
    const float base = exp_base(acc.ms.max);
    const bool smoothed = smoothing != 0.f;
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) {
        const auto v = widen_raw(raw[j]);
        acc.ms.sum += vec_sum(exp_elems(v, base));
        if (smoothed && j < mine) acc.total += vec_sum(v);
        if (j == jt) acc.target = element(v, ct);
    }
    if (has_scalar) {
        acc.ms.sum += exp_elem(scalar, base);
        if (smoothed) acc.total += scalar;
        if (scalar_at == t) acc.target = scalar;
    }

    const LossStats row_stats = exchange(ex, acc, rank);  // the same in every thread of the cluster
    const RowLoss l = row_loss(row_stats.ms, row_stats.total, row_stats.target, ignored, valid, n, smoothing, z_loss, k);
    if (rank == 0 && threadIdx.x == 0) {
        loss[row] = l.loss;
        if (lse_out) lse_out[row] = row_stats.ms.max + logf(row_stats.ms.sum);
    }
#if XENT_GRAD
    const auto vec_of = [&](int j) { return slice_vec(slice.v0, j); };
    if (ignored) {
        store_held<XENT_STORE>(r, raw, vec_of, slice.v1, Zeros{});
        if (has_scalar) r.y[scalar_at] = from_float<elem_t>(0.f);
    } else {
        const GradOutput f = {l.grad.m, l.grad.a, l.grad.b};
        store_held<XENT_STORE>(r, raw, vec_of, slice.v1, f);
        if (has_scalar) r.y[scalar_at] = from_float<elem_t>(f(scalar));
        // The target's element over what the warp stored there (a float body
        // misaligned with dx is stored by the lanes of the warp that holds it).
        __syncwarp();
        if (holds_target) r.y[t] = from_float<elem_t>(l.grad.target_dx);
    }
#endif
#if XENT_REDUCE
    if (rank == 0) {  // its thread 0 wrote the row's loss
        __shared__ unsigned taken;
        __shared__ double total_scratch[32];
        if (threadIdx.x == 0) {
            __threadfence();  // the loss before the ticket
            taken = atomicInc(ticket, (unsigned)rows - 1);
        }
        __syncthreads();
        if (taken == (unsigned)rows - 1) {  // every other row's loss is written
            __threadfence();
            const double sum = loss_total(loss, rows, total_scratch);
            const i64 count = !mean ? 1 : XENT_GRAD ? kept : kept_rows(target, ld_t, ignore_index, rows, kept_scratch);
            if (threadIdx.x == 0) total_out[0] = (float)(mean ? sum / (double)count : sum);
        }
    }
#endif
}
