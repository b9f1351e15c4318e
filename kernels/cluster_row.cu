// cluster_row.cu: one row per thread-block cluster, held in registers; no
// persistent loop.  Many small blocks share each SM, so that one row's loads
// overlap another's reduction and stores: the variant for rows that fit on
// chip when there are few of them per SM (few rows, or rows whose clusters
// would leave SMs idle in single_read's persistent grid).  quack's softmax
// has this structure.
//
// Block b of a cluster of CR_CLUSTER holds slice b of the row's 16-byte
// vectors (ceil(vecs / CR_CLUSTER) of them, rounded up to whole 128-byte lines
// of x where the block holds that, so that no line is split between two
// blocks: notes/TUNING.md#line-slices), CR_VPT per thread, vector
// v0 + t + j * CR_THREADS for thread t (a warp's lanes hold consecutive
// vectors, as store4_warp needs):
//   1. all of the thread's vectors loaded at once (load_held: one base
//      address, the vectors past the slice padded so that no reduction
//      needs a predicate; evict-last, or evict-first for a forward of fewer
//      rows than SMs, CR_STREAM_LOADS, as the launch rule picks: notes/TUNING.md#load-policies);
//   2. the thread's max, then its sum of e^(x - max); block 0 adds the
//      scalar head and tail;
//   3. the row's (M, S) by exchange (cluster.cuh): each warp's merged pair
//      pushed into every block of the cluster with st.async, each block
//      waiting on its own mbarrier and merging the cluster's pairs in the
//      same order, so every block gets bitwise the same (M, S) and the
//      output is bitwise the same on every run; no block-wide barrier and
//      no cluster barrier after the reduction;
//   4. y = e^(x - M) / S (or (x - M) - log S) from the registers, 16-byte
//      stores at any alignment of float y (store4_warp).
// Why the padded loads: with a predicate per load, ptxas issued the loads
// seven at a time (notes/TUNING.md#held-loads); why the pushed exchange: no
// cluster barrier between a block's reduction and its output
// (notes/TUNING.md#the-exchange-and-the-relaxed-arrival).
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE), softmax or
// log_softmax (SOFTMAX_LOG), and the backward ops (SOFTMAX_BACKWARD: y and
// dy of a row held, the dot merged over the cluster, dx written; y and dy
// each read once): elements.cuh.
// Launch: a grid of CR_CLUSTER x R by ceil(rows / R) blocks of CR_THREADS
// (R rows a grid line, as many as a grid's x dimension takes); each cluster
// takes one row, cluster g of line l row l R + g.  No loop over rows: a row's
// indices and pointers then need not stay live across the row, which frees
// the registers that let four blocks of ten vectors per thread share an SM
// (ptxas: 64 registers without spills, against 4 bytes spilled with a
// loop).  The launch rule (softmax_lab/variants/cluster_row.py, cluster_row_plan)
// makes CR_CLUSTER x CR_THREADS x CR_VPT hold the longest body a row of n
// elements can have; the kernel traps on a row it cannot hold rather than
// leave part of it unwritten.
// float32 softmax takes e by exp_elem's FFMA and ex2.approx.ftz (shift 2^24:
// InPlaceScale's two multiplies), not exp_approx's six instructions: four
// blocks per SM spend their short rows' time in the exponentials, where
// single_read's one block per SM has issue slots to spare
// (notes/TUNING.md#exponentials-in-cluster_row).
#define FLOAT_EXP_FTZ 1  // elements.cuh's switch, before its include
#include "cluster.cuh"
#include "elements.cuh"

#ifndef CR_CLUSTER
#define CR_CLUSTER 1
#endif
#ifndef CR_THREADS
#define CR_THREADS 256
#endif
#ifndef CR_VPT  // 16-byte vectors per thread (of each array in the backward)
#define CR_VPT 6
#endif
#ifndef CR_BLOCKS_PER_SM  // __launch_bounds__' register budget; the backward's policies (below)
#define CR_BLOCKS_PER_SM 2
#endif
#ifndef CR_STREAM_LOADS  // 1: the loads evict-first (.cs), 0: evict-last (the launch rule picks)
#define CR_STREAM_LOADS 0
#endif
#define CR_LOAD (CR_STREAM_LOADS ? LOAD_STREAM : LOAD_KEEP)
// The output stores' L2 policy (common.cuh): plain (evict-normal) for the
// halves' forward, evict-first for float32's.  The backward: at two or more
// blocks per SM evict-first stores, with dy loaded evict-last as y is
// (CR_GRAD_LOAD); at one block per SM (512-thread blocks, float32 rows of
// 200000 and more), where evict-first stores were slower, evict-last stores
// and plain dy loads (notes/TUNING.md#store-policies).
#define CR_STORE (SOFTMAX_BACKWARD ? (CR_BLOCKS_PER_SM >= 2 ? STORE_FIRST : STORE_LAST) \
                  : SOFTMAX_DTYPE != 0 ? STORE_NORMAL : STORE_FIRST)
#define CR_GRAD_LOAD (CR_BLOCKS_PER_SM >= 2 ? LOAD_KEEP : LOAD_PLAIN)  // dy's aligned loads (the backward): see CR_STORE
// float32 softmax keeps e = e^(x - m_t) in place of x (one exponential per element).
#define CR_IN_PLACE (SOFTMAX_DTYPE == 0 && !SOFTMAX_LOG && !SOFTMAX_BACKWARD)
// Half softmax keeps x packed and takes e^(x - m_t) twice, by exp_elem (an FFMA
// and ex2.approx.ftz, against exp_approx's six instructions with the subnormal
// fixup); e held as floats, one exponential at half the blocks per SM, was
// slower (notes/TUNING.md#exponentials-in-cluster_row).  The halves'
// log_softmax sums by exp_elem too.
#define CR_HALF_SOFTMAX (SOFTMAX_DTYPE != 0 && !SOFTMAX_LOG && !SOFTMAX_BACKWARD)
static_assert(CR_CLUSTER >= 1 && CR_CLUSTER <= 16 && (CR_CLUSTER & (CR_CLUSTER - 1)) == 0,
              "a power-of-two cluster of at most 16 blocks (the butterfly merge)");
static_assert(CR_THREADS % 32 == 0 && CR_THREADS >= 32 && CR_THREADS <= 1024, "whole warps, at most 1024");
static_assert(CR_VPT >= 1 && CR_BLOCKS_PER_SM >= 1, "positive sizes");

// Vector j of this thread's slice [v0, ...).
__device__ __forceinline__ i64 slice_vec(i64 v0, int j) { return v0 + threadIdx.x + (i64)j * CR_THREADS; }

extern "C" __global__ void __launch_bounds__(CR_THREADS, CR_BLOCKS_PER_SM)
#if CR_CLUSTER > 1
    __cluster_dims__(CR_CLUSTER, 1, 1)
#endif
#if SOFTMAX_BACKWARD
        cluster_row(const elem_t* __restrict__ x, const elem_t* __restrict__ dy, elem_t* __restrict__ y, i64 rows,
                    i64 n, i64 ld_x, i64 ld_dy, i64 ld_y) {
    typedef float Exchanged;  // a warp's share of the dot
#else
        cluster_row(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y) {
    typedef MaxSum Exchanged;  // a warp's (max, sum)
#endif
    __shared__ PushedExchange<CR_CLUSTER, CR_THREADS / 32, Exchanged> ex;
    const unsigned rank = cluster_rank<CR_CLUSTER>();
    const i64 row = blockIdx.x / CR_CLUSTER + (i64)blockIdx.y * (gridDim.x / CR_CLUSTER);
    if (row >= rows) return;  // the last grid line's spare clusters (every block of a cluster alike)
    exchange_open(ex);  // the cluster barrier's arrival: its wait comes before the pushes
    const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
    const HeldSlice slice = held_slice<CR_CLUSTER, (i64)CR_THREADS * CR_VPT>(r.vecs, r.x + r.head, rank);
    const i64 v0 = slice.v0, v1 = slice.v1;
    const auto in = body_in(r);
    // This thread's vectors in the slice: the first `mine`; the rest padded
    // with elements no reduction notices (-inf forward, zeros backward).
    const i64 first = v0 + threadIdx.x;  // this thread's first vector
    const int mine = held_count<CR_THREADS, CR_VPT>(first, v1);
    raw_t raw[CR_VPT];
#if SOFTMAX_BACKWARD
    const GradRow<elem_t> g = grad_row(r, dy + row * ld_dy);
    raw_t grad[CR_VPT];  // dy as loaded (halves packed), widened where used
    load_held<CR_LOAD, CR_THREADS>(raw, in, first, mine, raw_t{});
    load_held_grads<CR_THREADS, CR_GRAD_LOAD>(grad, r, g, first, mine);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) acc += vec_dot(widen_raw(raw[j]), widen_raw(grad[j]));
    if (rank == 0)
        for (i64 k = threadIdx.x; k < scalar_count(r); k += CR_THREADS) {
            const i64 i = scalar_index(r, k);
            acc += dot_term(load_scalar(r, i), to_float(g.g[i]));
        }
#else
    load_held<CR_LOAD, CR_THREADS>(raw, in, first, mine, raw_neg_inf());
#if CR_IN_PLACE
    // float32 softmax: e = 2^24 e^(x - m_t) replaces x in the registers (one
    // exponential per element, exp_elem); y = e * e^(m_t - M) * (1 / S) below.
    MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) acc.max = fmaxf(acc.max, vec_max(raw[j]));
    float scalar = SOFTMAX_NEG_INF;  // block 0: thread t's scalar (head or tail) element, if any
    if (rank == 0 && threadIdx.x < scalar_count(r)) scalar = load_scalar(r, scalar_index(r, threadIdx.x));
    acc.max = fmaxf(acc.max, scalar);
    const float base = exp_base(acc.max);
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) {
        raw[j] = exp_elems(raw[j], base);
        acc.sum += vec_sum(raw[j]);
    }
    scalar = exp_elem(scalar, base);
    acc.sum += scalar;
#elif CR_HALF_SOFTMAX
    // Half softmax: the max packed, then the sum of exp_elem (ex2.approx.ftz,
    // with bfloat16's shift, which the sum and the outputs share).  A
    // thread's scalar (block 0's head and tail: at most 14 < CR_THREADS).
    unsigned max_pair = NEG_INF_PAIR;
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) max_pair = max_into(max_pair, raw[j]);
    float scalar = SOFTMAX_NEG_INF;
    if (rank == 0 && threadIdx.x < scalar_count(r)) scalar = load_scalar(r, scalar_index(r, threadIdx.x));
    MaxSum acc = {fmaxf(pair_max(max_pair), scalar), 0.f};
    const float base = exp_base(acc.max);
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) acc.sum += vec_sum(exp_elems(widen_raw(raw[j]), base));
    scalar = exp_elem(scalar, base);
    acc.sum += scalar;
#else
    // log_softmax (and float32's): the sum of halves by exp_elem (shift 0;
    // notes/TUNING.md#exponentials-in-cluster_row), floats' by exp_approx.
    MaxSum acc = held_max_sum<SOFTMAX_DTYPE != 0>(raw);
    if (rank == 0)
        for (i64 k = threadIdx.x; k < scalar_count(r); k += CR_THREADS) online_add1(acc, load_scalar(r, scalar_index(r, k)));
#endif
#endif
    const Exchanged total = exchange(ex, acc, rank);  // the row's (max, sum) or dot, in every thread
#if SOFTMAX_BACKWARD
    const float dot = total;
#pragma unroll
    for (int j = 0; j < CR_VPT; ++j) {
        keep_packed(raw[j]);  // halves: y and dy held packed over the exchange, widened again here
        keep_packed(grad[j]);
        const i64 v = slice_vec(v0, j);
        store_chunk_vec<CR_STORE>(r, v, vec_grad(widen_raw(raw[j]), widen_raw(grad[j]), dot), v < v1);
    }
    grad_span(r, g, 0, 0, rank == 0, dot);  // the scalar head and tail
#else
#if CR_IN_PLACE
    // m_t = -inf (all of this thread's elements -inf): e^(m_t - M) is 0, or
    // NaN when the whole row is -inf, as torch.
    const InPlaceScale scale{exp_approx(acc.max - total.max), 1.f / total.sum};
    store_held<CR_STORE>(r, raw, [&](int j) { return slice_vec(v0, j); }, v1, scale);
    if (rank == 0 && threadIdx.x < scalar_count(r)) r.y[scalar_index(r, threadIdx.x)] = scale(scalar);
#elif CR_HALF_SOFTMAX
    // y = e^(x - M) / S (both with the shift); the scalar's e times e^(m_t - M) / S
    // as in float32's path (NaN for a row of -inf).
    const float inv = 1.f / total.sum;
    store_held<CR_STORE>(r, raw, [&](int j) { return slice_vec(v0, j); }, v1, ExpOutput{total.max, inv});
    if (rank == 0 && threadIdx.x < scalar_count(r))
        r.y[scalar_index(r, threadIdx.x)] = from_float<elem_t>(InPlaceScale{exp_approx(acc.max - total.max), inv}(scalar));
#else
    const RowOutput f = row_output(total.max, total.sum);
    store_held<CR_STORE>(r, raw, [&](int j) { return slice_vec(v0, j); }, v1, f);
    write_span(r, 0, 0, rank == 0, f);  // the scalar head and tail
#endif
#endif
}
