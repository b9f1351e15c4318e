// multi_block_smem.cu: rows split over thread blocks, as multi_block, whose
// chunks stay in shared memory from their read until their write, so that
// device memory sees one read and one write per element even where a row is
// longer than a cluster holds (the long-row variant on sm_90: the GPU's
// shared memory, 132 x 227 KB on the H200, holds about two 16 MB rows).
//
// A persistent grid of resident blocks, each with a ring of MBS_SLOTS slots
// of one chunk (MBS_THREADS x MBS_VPT 16-byte vectors of a row's body).
// Chunks are taken in ticket order (an atomic counter; items numbered row by
// row, row * chunks + c), so each block holds an increasing run of them.  A
// block's k-th chunk goes to slot k % MBS_SLOTS and passes three steps:
//   load:    a bulk copy (cp.async.bulk, sm_90) from x into the slot, issued
//            as soon as the slot is free;
//   reduce:  the slot's (max, sum of e^(x - max)) over the block, published
//            as one 64-bit word in slot c of the row (read x); float32
//            softmax leaves e = e^(x - m_t) in the slot in place of x (m_t
//            the thread's max, kept in a register per slot), so its write
//            takes a multiplication per element, not an exponential;
//   write:   once all the row's chunks are published, the row's slots merged
//            in a fixed order, y = e^(x - M) / S (or (x - M) - log S) from
//            the slot (write y); the slot is then free for the next ticket.
// A block writes its oldest chunk once `lag` later chunks are reduced (or
// none are left to reduce) and the chunk's row is complete; while it is not,
// the block reduces what it has loaded, and waits only when every chunk it
// holds is reduced.
//
// Progress: a waiting block holds MBS_SLOTS reduced chunks.  Let r be the
// lowest row with a chunk not yet reduced; the rows below it are complete,
// so every block waiting holds chunks of row r and above.  If a chunk of row
// r is not yet taken, no later chunk is, so the waiting blocks hold chunks
// of row r only; chunks taken but not reduced are reduced by their blocks
// without waiting.  So as long as the resident blocks hold a row's chunks
// (grid x MBS_SLOTS >= chunks, checked by the launcher against occupancy), a
// free slot or a complete row always exists: no deadlock.  The launch is
// cooperative, so all of the grid's blocks are resident together, whatever
// else runs on the GPU.
// (tests/emulate.py multi_block_smem_schedule runs this schedule.)
//
// Slots and tickets as in multi_block_l2.cu: one 64-bit word per (row,
// chunk), filled with bytes 0xBF by the caller (SLOT_PENDING); one 64-bit
// ticket counter, zeroed.  Thread 0 takes the tickets and records each
// slot's row and chunk in shared memory (one division a chunk, not one a
// thread).  The merge order is fixed, so the output is
// bitwise the same on every run, whichever block holds which chunk.
//
// Elements: float32, float16 or bfloat16, softmax or log_softmax (the
// forward ops; elements.cuh).  Launch: 1-D grid of resident blocks of
// MBS_THREADS threads, MBS_SLOTS x (MBS_THREADS x MBS_VPT + 8) x 16
// bytes of dynamic shared memory.
#include "cluster.cuh"
#include "elements.cuh"

#ifndef MBS_THREADS
#define MBS_THREADS 448
#endif
#ifndef MBS_VPT  // 16-byte vectors per thread and chunk
#define MBS_VPT 8
#endif
#ifndef MBS_SLOTS  // chunks a block holds
#define MBS_SLOTS 4
#endif
#ifndef MBS_BLOCKS_PER_SM
#define MBS_BLOCKS_PER_SM 1
#endif
#ifndef MBS_EXP_ELEM  // halves: the sums (and softmax's outputs) by exp_elem, as multi_block_l2's
#define MBS_EXP_ELEM (SOFTMAX_DTYPE != 0)
#endif
static_assert(!SOFTMAX_BACKWARD, "multi_block_smem computes the forward ops");
static_assert(!MBS_EXP_ELEM || SOFTMAX_DTYPE != 0, "exp_elem differs from exp_approx for halves only");
static_assert(MBS_THREADS % 32 == 0 && MBS_THREADS >= 32 && MBS_THREADS <= 1024, "whole warps, at most 1024");
static_assert(MBS_VPT >= 1 && MBS_SLOTS >= 2 && MBS_BLOCKS_PER_SM >= 1, "positive sizes, two slots or more");

#define MBS_CHUNK ((i64)MBS_THREADS * MBS_VPT)  // vectors per chunk
// float32 softmax: the reduce step leaves e = e^(x - m_t) in the slot in
// place of x (m_t: the thread's max, kept per slot), so the write takes one
// multiplication per element, not an exponential (cluster_row's CR_IN_PLACE).
#ifndef MBS_IN_PLACE
#define MBS_IN_PLACE (SOFTMAX_DTYPE == 0 && !SOFTMAX_LOG)
#endif
// A slot holds a chunk at its source's offset in a 128-byte line (0-7
// vectors in): a bulk copy whose source and destination sit at different
// offsets in a line is slow (single_read.cu's SR_LINE_SHIFT).
#define MBS_SLOT_VECS (MBS_CHUNK + 8)

// Where chunk c of row r lies in the row's body: vectors [v0, v1), and the
// vector at which it sits in its slot.
struct ChunkSpan {
    i64 v0, v1;
    int shift;
};

__device__ __forceinline__ ChunkSpan chunk_span(const RowSpanOf<elem_t>& r, i64 c) {
    const i64 v0 = min(c * MBS_CHUNK, r.vecs);
    return {v0, min(v0 + MBS_CHUNK, r.vecs), (int)(((size_t)(r.x + r.head) & 127u) / 16u)};
}
static_assert(MBS_CHUNK * 16 < (1 << 20), "a chunk's bytes fit an mbarrier's transaction count");

// The row's (max, sum) from its `chunks` slots if all are written: the same
// fixed order in every block (multi_block_l2's row_total, one attempt).
__device__ __forceinline__ bool row_total_ready(const unsigned long long* slots, i64 chunks, MaxSum* scratch,
                                                MaxSum& total) {
    MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
    bool pending = false;
    for (i64 c = threadIdx.x; c < chunks; c += MBS_THREADS) {
        const unsigned long long w = read_slot(slots + c);
        pending |= (unsigned)(w >> 32) == SLOT_PENDING;
        acc = merge(acc, {__uint_as_float((unsigned)w), __uint_as_float((unsigned)(w >> 32))});
    }
    if (__syncthreads_or(pending)) return false;
    total = block_merge(acc, scratch);
    return true;
}

extern "C" __global__ void __launch_bounds__(MBS_THREADS, MBS_BLOCKS_PER_SM)
    multi_block_smem(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y,
                     i64 chunks, int lag, unsigned long long* __restrict__ slots,
                     unsigned long long* __restrict__ tickets) {
    extern __shared__ __align__(128) unsigned char smem[];
    raw_t* const held = reinterpret_cast<raw_t*>(smem);  // MBS_SLOTS chunks
    __shared__ unsigned long long bars[MBS_SLOTS];  // slot k's bulk copy
    __shared__ i64 row_of[MBS_SLOTS];               // the row of the chunk slot k holds (-1: the end)
    __shared__ i64 chunk_of[MBS_SLOTS];             // and which of its chunks
    __shared__ MaxSum scratch[32];
    const i64 items = rows * chunks;
    lag = min(max(lag, 1), MBS_SLOTS);  // slot p is filled while p < w + MBS_SLOTS
    const unsigned long long policy = l2_evict_first();  // x is read once (evict-last measured level)
    // Thread 0 fills the slots: at the start, then each as its write ends,
    // with no barrier of the block's: the slot's row and chunk are stored
    // before the mbarrier's arrival (release) and read after its wait
    // (acquire); a row of -1 (an arrival with no copy) marks the end of the
    // tickets.
    // The ticket is taken ahead, as a write begins (its slot is then sure to
    // be free without waiting); never while a block may wait, which would
    // hold back a chunk of the row it waits for.
    unsigned long long next = 0;
    bool have_next = false, exhausted = false;
    auto fill = [&](i64 seq) {  // thread 0: slot seq % MBS_SLOTS, free, gets the next ticket's chunk
        if (exhausted) return;
        if (!have_next) next = atomicAdd(tickets, 1ull);
        have_next = false;
        const int k = (int)(seq % MBS_SLOTS);
        if ((i64)next >= items) {
            exhausted = true;
            row_of[k] = -1;
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(&bars[k])) : "memory");
            return;
        }
        const i64 item = (i64)next, row = item / chunks, c = item % chunks;
        row_of[k] = row;
        chunk_of[k] = c;
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // after the slot's reads
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const ChunkSpan s = chunk_span(r, c);
        load_slice(held + k * MBS_SLOT_VECS + s.shift, reinterpret_cast<const raw_t*>(r.x + r.head) + s.v0,
                   s.v1 - s.v0, &bars[k], policy);
    };
    if (threadIdx.x == 0) {
        for (int k = 0; k < MBS_SLOTS; ++k) mbar_init(&bars[k], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < MBS_SLOTS; ++k) fill(k);
    }
    __syncthreads();  // the mbarriers initialised

    // Chunks reduced (p) and written (w) by this block; slots w .. w + MBS_SLOTS - 1 are filled (or
    // the end marked at `ended`'s slot).
    i64 p = 0, w = 0;
    bool ended = false;  // slot p holds the end mark: nothing from p on
    i64 total_row = -1;  // the row whose total is known
    MaxSum total = {};
#if MBS_IN_PLACE
    float thread_max[MBS_SLOTS];  // m_t of each slot's chunk (selected by a static index: registers)
#endif
    for (;;) {
        bool reduce = !ended && p - w < lag;
        if (!reduce && w < p) {  // the oldest chunk's write is due
            const int k = (int)(w % MBS_SLOTS);
            const i64 row = row_of[k];
            if (row != total_row && row_total_ready(slots + row * chunks, chunks, scratch, total)) total_row = row;
            if (row == total_row) {
                if (threadIdx.x == 0 && !exhausted && !have_next) {
                    next = atomicAdd(tickets, 1ull);  // for the slot this write frees: in flight during it
                    have_next = true;
                }
                const i64 c = chunk_of[k];
                const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
                const ChunkSpan s = chunk_span(r, c);
                const raw_t* slot = held + k * MBS_SLOT_VECS + s.shift + threadIdx.x;
                raw_t raw[MBS_VPT];
#pragma unroll
                for (int j = 0; j < MBS_VPT; ++j) raw[j] = slot[j * MBS_THREADS];
                // f: the output of an element of x (the scalar head and tail, read from x);
                // held: of a held vector (e in place, or x)
#if MBS_IN_PLACE
                float m_t = thread_max[0];
#pragma unroll
                for (int i = 1; i < MBS_SLOTS; ++i) m_t = i == k ? thread_max[i] : m_t;
                const RowOutput f = row_output(total.max, total.sum);
                const InPlaceScale held_out{exp_approx(m_t - total.max), 1.f / total.sum};
#elif MBS_EXP_ELEM && !SOFTMAX_LOG
                const ExpOutput f{total.max, 1.f / total.sum}, &held_out = f;  // the sums' shift cancels
#else
                const RowOutput f = row_output(total.max, total.sum), &held_out = f;
#endif
                store_held(r, raw, [&](int j) { return s.v0 + threadIdx.x + (i64)j * MBS_THREADS; }, s.v1, held_out);
                write_span(r, 0, 0, c == 0, f);  // the scalar head and tail (chunk 0)
                __syncthreads();  // the slot is read: free for the next bulk copy
                if (threadIdx.x == 0) fill(w + MBS_SLOTS);
                ++w;
                continue;
            }
            reduce = !ended && p < w + MBS_SLOTS;  // not complete: reduce what is filled, else wait
            if (!reduce) {
                __nanosleep(256);
                continue;
            }
        }
        if (reduce) {  // slot p is filled: p < w + MBS_SLOTS
            const int k = (int)(p % MBS_SLOTS);
            mbar_wait(&bars[k], (unsigned)((p / MBS_SLOTS) & 1));
            const i64 row = row_of[k];
            if (row < 0) {
                ended = true;
                continue;
            }
            const i64 c = chunk_of[k];
            const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
            const ChunkSpan s = chunk_span(r, c);
            const int mine = held_count<MBS_THREADS, MBS_VPT>(s.v0 + threadIdx.x, s.v1);
            raw_t* slot = held + k * MBS_SLOT_VECS + s.shift + threadIdx.x;
            raw_t raw[MBS_VPT];
#pragma unroll
            for (int j = 0; j < MBS_VPT; ++j) raw[j] = j < mine ? slot[j * MBS_THREADS] : raw_neg_inf();
#if MBS_IN_PLACE
            MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
#pragma unroll
            for (int j = 0; j < MBS_VPT; ++j) acc.max = fmaxf(acc.max, vec_max(raw[j]));
            const float base = exp_base(acc.max);
#pragma unroll
            for (int j = 0; j < MBS_VPT; ++j) {
                raw[j] = exp_elems(raw[j], base);
                acc.sum += vec_sum(raw[j]);
                if (j < mine) slot[j * MBS_THREADS] = raw[j];
            }
#pragma unroll
            for (int i = 0; i < MBS_SLOTS; ++i) thread_max[i] = i == k ? acc.max : thread_max[i];
            // e is written through the generic proxy; the slot's next bulk copy (async proxy) comes after
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
            MaxSum acc = held_max_sum<MBS_EXP_ELEM>(raw);
#endif
            if (c == 0) {
                for (i64 i = threadIdx.x; i < scalar_count(r); i += MBS_THREADS) {
#if MBS_EXP_ELEM
                    elem_add1(acc, load_scalar(r, scalar_index(r, i)));
#else
                    online_add1(acc, load_scalar(r, scalar_index(r, i)));
#endif
                }
            }
            const MaxSum part = block_merge(acc, scratch);
            if (threadIdx.x == 0) publish(slots + row * chunks + c, __float_as_uint(part.max), __float_as_uint(part.sum));
            ++p;
            continue;
        }
        if (ended && w == p) break;  // everything written
    }
}
