// multi_block_l2.cu: rows split over thread blocks, as multi_block, in one
// persistent launch whose second read of each chunk comes from L2, so that
// device memory sees about one read and one write per element: the long-row
// variant (rows longer than a cluster holds on chip).
//
// Work items, taken in ticket order (an atomic counter) by a grid of resident
// blocks:
//   read  (row, c):  chunk c of the row (MBL2_THREADS x MBL2_VPT 16-byte
//                    vectors, in registers), each thread's max then sum of
//                    e^(x - max) (halves: online), the block's (max, sum)
//                    published as one 64-bit word in slot c     (read x)
//   write (row, c):  the chunk loaded again (from L2: its read item came `lag`
//                    items before), then the row's slots merged in a fixed
//                    order, y = e^(x - M) / S (or (x - M) - log S)   (write y)
// Ticket 2k is read item k and ticket 2k + 1 write item k - lag, items
// numbered row by row (row * chunks + c).  The caller's lag is a row's chunks
// plus the grid, so a write item's slots are written by the time it is taken;
// where one is not (a slow block), the item waits for it.  The kernel raises
// a lag below chunks - 1 to it, so that a write item's row is read at lower
// tickets (tests/emulate.py multi_block_l2_schedule runs the schedule).  A
// write item only waits on read items of lower tickets, which are held by
// running blocks, so the launch cannot deadlock whatever the residency.  The
// lag sets what L2 must hold: lag x chunk bytes of x (and of dy).  Write
// items load their chunk before they wait, with the evict-first policy (.cs)
// as the output stores (the backward's dy after the wait: fewer registers
// held across it).
//
// Slots: one 64-bit word per (row, chunk); the caller fills them with the
// byte 0xBF, so a slot whose high word is 0xBFBFBFBF is not yet written (a
// published high word is a sum of exponentials, never negative, or 0 in the
// backward).  Ticket counter: one 64-bit word, zeroed by the caller.  The
// merge order is fixed (thread t merges slots t, t + MBL2_THREADS, ..., then
// the block), so every write item of a row gets bitwise the same (M, S), and
// the output is bitwise the same on every run.
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE; the halves' sums
// and softmax outputs by exp_elem), softmax or
// log_softmax (SOFTMAX_LOG), and the backward ops (SOFTMAX_BACKWARD: the
// read item's partial is the dot of y and dy, the write item dx, reading y
// and dy each once from device memory): elements.cuh.  Float output bodies
// at any alignment of y use 16-byte stores (store4_warp).
// Launch: 1-D grid of resident blocks of MBL2_THREADS threads.  The backward
// build reads y (the forward output, here `x`) and dy and writes dx (`y`).
#include "elements.cuh"

#ifndef MBL2_THREADS
#define MBL2_THREADS 512
#endif
#ifndef MBL2_VPT  // 16-byte vectors per thread and chunk (of each array), all loads in flight at once;
#define MBL2_VPT (SOFTMAX_BACKWARD ? 1 : 4)  // multi_block_l2_plan sets it per device
#endif
#ifndef MBL2_BLOCKS_PER_SM
#define MBL2_BLOCKS_PER_SM 2
#endif
// The halves' forward: the sums (and softmax's outputs) by exp_elem, as cluster_row's (elements.cuh).
#define MBL2_EXP_ELEM (SOFTMAX_DTYPE != 0 && !SOFTMAX_BACKWARD)
static_assert(MBL2_THREADS % 32 == 0 && MBL2_THREADS >= 32 && MBL2_THREADS <= 1024, "whole warps, at most 1024");
static_assert(MBL2_VPT >= 1 && MBL2_BLOCKS_PER_SM >= 1, "positive sizes");

#define MBL2_CHUNK ((i64)MBL2_THREADS * MBL2_VPT)  // vectors per chunk

// Vector j of this thread's part of chunk [v0, v1): v0 + t + j * MBL2_THREADS
// (a warp's lanes hold consecutive vectors, as store4_warp needs).
__device__ __forceinline__ i64 chunk_vec(i64 v0, int j) { return v0 + threadIdx.x + (i64)j * MBL2_THREADS; }

#if SOFTMAX_BACKWARD
typedef float Partial;  // the dot of a chunk
__device__ __forceinline__ Partial no_partial() { return 0.f; }
__device__ __forceinline__ Partial combine(Partial a, Partial b) { return a + b; }
__device__ __forceinline__ Partial block_combine(Partial p, Partial* scratch) { return block_sum(p, scratch); }
__device__ __forceinline__ void publish(unsigned long long* slot, Partial p) { publish(slot, __float_as_uint(p), 0u); }
__device__ __forceinline__ Partial unpack(unsigned long long w) { return __uint_as_float((unsigned)w); }
#else
typedef MaxSum Partial;
__device__ __forceinline__ Partial no_partial() { return {SOFTMAX_NEG_INF, 0.f}; }
__device__ __forceinline__ Partial combine(Partial a, Partial b) { return merge(a, b); }
__device__ __forceinline__ Partial block_combine(Partial p, Partial* scratch) { return block_merge(p, scratch); }
__device__ __forceinline__ void publish(unsigned long long* slot, Partial p) {
    publish(slot, __float_as_uint(p.max), __float_as_uint(p.sum));
}
__device__ __forceinline__ Partial unpack(unsigned long long w) {
    return {__uint_as_float((unsigned)w), __uint_as_float((unsigned)(w >> 32))};
}
#endif

// The row's total from its `chunks` slots, once all are written (waits for
// the missing ones): the same fixed order in every block.
__device__ __forceinline__ Partial row_total(const unsigned long long* slots, i64 chunks, Partial* scratch) {
    for (;;) {
        Partial acc = no_partial();
        bool pending = false;
        for (i64 c = threadIdx.x; c < chunks; c += MBL2_THREADS) {
            const unsigned long long w = read_slot(slots + c);
            pending |= (unsigned)(w >> 32) == SLOT_PENDING;
            acc = combine(acc, unpack(w));
        }
        if (!__syncthreads_or(pending)) return block_combine(acc, scratch);
        __nanosleep(256);
    }
}

extern "C" __global__ void __launch_bounds__(MBL2_THREADS, MBL2_BLOCKS_PER_SM)
#if SOFTMAX_BACKWARD
    multi_block_l2(const elem_t* __restrict__ x, const elem_t* __restrict__ dy, elem_t* __restrict__ y, i64 rows,
                   i64 n, i64 ld_x, i64 ld_dy, i64 ld_y,
#else
    multi_block_l2(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y,
#endif
                   i64 chunks, i64 lag, unsigned long long* __restrict__ slots,
                   unsigned long long* __restrict__ tickets) {
    __shared__ Partial scratch[32];
    __shared__ unsigned long long s_ticket;
    lag = max(lag, chunks - 1);  // a row's last read item before its first write item (else a block could hang)
    const i64 items = rows * chunks, last_ticket = 2 * (items + lag);
    if (threadIdx.x == 0) s_ticket = atomicAdd(tickets, 1ull);
    __syncthreads();
    for (unsigned long long ticket = s_ticket; (i64)ticket < last_ticket;) {
        unsigned long long next = 0;
        if (threadIdx.x == 0) next = atomicAdd(tickets, 1ull);  // in flight during this item
        const bool again = ticket & 1;
        const i64 item = (i64)(ticket >> 1) - (again ? lag : 0);
        if (item >= 0 && item < items) {
            const i64 row = item / chunks, c = item % chunks;
            const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
            const i64 v0 = c * MBL2_CHUNK, v1 = min(v0 + MBL2_CHUNK, r.vecs);
            const auto in = body_in(r);
            // This thread's vectors of the chunk: the first `mine`; the rest
            // padded with elements no reduction notices (load_held).
            const i64 first = v0 + threadIdx.x;
            const int mine = held_count<MBL2_THREADS, MBL2_VPT>(first, v1);
            raw_t raw[MBL2_VPT];
#if SOFTMAX_BACKWARD
            const GradRow<elem_t> g = grad_row(r, dy + row * ld_dy);
            decltype(widen_raw(raw[0])) grad[MBL2_VPT];
            const raw_t pad = raw_t{};
#else
            const raw_t pad = raw_neg_inf();
#endif
            if (again)
                load_held<LOAD_STREAM, MBL2_THREADS>(raw, in, first, mine, pad);
            else
                load_held<LOAD_KEEP, MBL2_THREADS>(raw, in, first, mine, pad);  // evict-last: kept for the second read
            if (!again) {
#if SOFTMAX_BACKWARD
                load_held_grads<MBL2_THREADS>(grad, r, g, first, mine);  // write items load dy after the wait (registers)
                Partial acc = no_partial();
#pragma unroll
                for (int j = 0; j < MBL2_VPT; ++j) acc = combine(acc, vec_dot(widen_raw(raw[j]), grad[j]));
#else
                Partial acc = held_max_sum<MBL2_EXP_ELEM>(raw);
#endif
                if (c == 0) {
                    for (i64 k = threadIdx.x; k < scalar_count(r); k += MBL2_THREADS) {
                        const i64 i = scalar_index(r, k);
#if SOFTMAX_BACKWARD
                        acc += dot_term(load_scalar(r, i), to_float(g.g[i]));
#elif MBL2_EXP_ELEM
                        elem_add1(acc, load_scalar(r, i));
#else
                        online_add1(acc, load_scalar(r, i));
#endif
                    }
                }
                const Partial part = block_combine(acc, scratch);
                if (threadIdx.x == 0) publish(slots + item, part);
            } else {
                const Partial total = row_total(slots + row * chunks, chunks, scratch);
#if SOFTMAX_BACKWARD
                load_held_grads<MBL2_THREADS>(grad, r, g, first, mine);
#pragma unroll
                for (int j = 0; j < MBL2_VPT; ++j) {
                    const i64 v = chunk_vec(v0, j);
                    store_chunk_vec(r, v, vec_grad(widen_raw(raw[j]), grad[j], total), v < v1);
                }
                if (c == 0) {  // the scalar head and tail (grad_span's loop spills here: ptxas, halves log)
                    for (i64 k = threadIdx.x; k < scalar_count(r); k += MBL2_THREADS) {
                        const i64 i = scalar_index(r, k);
                        r.y[i] = from_float<elem_t>(grad_out(load_scalar(r, i), to_float(g.g[i]), total));
                    }
                }
#else
                const auto f = output_of<MBL2_EXP_ELEM>(total);
                store_held(r, raw, [&](int j) { return chunk_vec(v0, j); }, v1, f);
                write_span(r, 0, 0, c == 0, f);  // the scalar head and tail (chunk 0)
#endif
            }
        }
        __syncthreads();  // every thread has read s_ticket
        if (threadIdx.x == 0) s_ticket = next;
        __syncthreads();
        ticket = s_ticket;
    }
}
