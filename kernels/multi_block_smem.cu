// multi_block_smem.cu: rows split over thread blocks, as multi_block, whose
// chunks stay in shared memory from their read until their write, so that
// device memory sees one read and one write per element even where a row is
// longer than a cluster holds (the long-row variant on sm_90: the GPU's
// shared memory, 132 x 227 KB on the H200, holds about two 16 MB rows; with
// companions, rows up to twice what it holds, the rest re-read from L2).
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
// MBS_SPLIT builds the other schedule: the block's warps in two groups of
// MBS_THREADS / 2, each syncing by a named barrier of its own.  The reducers
// reduce each slot as its bulk copy lands and tell the writers (an mbarrier
// a slot); the writers write the oldest reduced slot once its row is
// complete, then refill it.  So one group's phase overlaps the other's, where
// the one-group schedule runs them one after another.  The split leads where
// its ring holds two rows or more; below that the one group of 448 x 8 x 4
// waits better, unless the split takes companions (below), with which it
// holds two rows of tickets (the launch rule: softmax_lab/variants/
// multi_block_smem.py, block_rule; notes/TUNING.md#the-split-schedule).  The writers
// take the exponential (no e in place: a reducer's max would have to pass to
// a writer).  `lag` is unused.
// A reducer holds 2 x MBS_VPT vectors; halves sum them as two runs
// (split_max_sum).
//
// Progress: a waiting block holds MBS_SLOTS reduced chunks.  Let r be the
// lowest row with a chunk not yet reduced; the rows below it are complete,
// so every block waiting holds chunks of row r and above.  If a chunk of row
// r is not yet taken, no later chunk is, so the waiting blocks hold chunks
// of row r only; chunks taken but not reduced are reduced by their blocks
// without waiting.  So as long as the resident blocks hold a row's chunks
// (grid x MBS_SLOTS >= chunks, checked by the launcher against occupancy), a
// free slot or a complete row always exists: no deadlock.  With companions a
// row's tickets are its held chunks (grid x MBS_SLOTS >= held_chunks), and a
// companion is reduced and written with its chunk, waiting on nothing else.  The launch is
// cooperative, so all of the grid's blocks are resident together, whatever
// else runs on the GPU.
// The split schedule's reducers never wait on the writers but for free
// slots, so the same holds.  (tests/emulate.py multi_block_smem_schedule
// runs both schedules.)
//
// Slots and tickets as in multi_block_l2.cu: one 64-bit word per (row,
// chunk), filled with bytes 0xBF by the caller (SLOT_PENDING); one 64-bit
// ticket counter, zeroed.  One thread (thread 0, or the writers' first)
// takes the tickets and records each slot's row and chunk in shared memory
// (one division a chunk, not one a thread).  The merge order is fixed, so the output is
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
#define MBS_EXP_ELEM (SOFTMAX_DTYPE != 0)  // halves: the sums (and softmax's outputs) by exp_elem, as multi_block_l2's
static_assert(!SOFTMAX_BACKWARD, "multi_block_smem computes the forward ops");
static_assert(MBS_THREADS % 32 == 0 && MBS_THREADS >= 32 && MBS_THREADS <= 1024, "whole warps, at most 1024");
static_assert(MBS_VPT >= 1 && MBS_SLOTS >= 2 && MBS_BLOCKS_PER_SM >= 1, "positive sizes, two slots or more");

#define MBS_CHUNK ((i64)MBS_THREADS * MBS_VPT)  // vectors per chunk
// float32 softmax: the reduce step leaves e = e^(x - m_t) in the slot in
// place of x (m_t: the thread's max, kept per slot), so the write takes one
// multiplication per element, not an exponential (cluster_row's CR_IN_PLACE).
#ifndef MBS_SPLIT  // 1: the schedule of two groups of warps (above)
#define MBS_SPLIT 0
#endif
// The split's writers refill a slot as soon as its chunk is in their registers,
// before its stores (MBS_EARLY_FILL 1), where the launch rule says so: where the
// ring holds few rows, a row completes only once slots that the row before
// frees are refilled, and the stores' issue under DRAM write pressure sat on
// that path; with rows to spare the refill competes with the stores
// (notes/TUNING.md#early-fill).
#ifndef MBS_EARLY_FILL
#define MBS_EARLY_FILL 0
#endif
static_assert(!MBS_EARLY_FILL || MBS_SPLIT, "early refills: the split schedule's writers");
// Companions (MBS_COMPANIONS 1, the split only): where the ring holds fewer
// than two rows, a row's first `held_chunks` chunks take tickets and go
// through the ring; chunk c + held_chunks (c < chunks - held_chunks), c's
// companion, is reduced by the reducers that reduced chunk c, straight from x
// into registers (evict-last), and written by the writers that write chunk c,
// read again from x (from L2, where it stayed).  So the ring needs
// `held_chunks` of a row, not `chunks`: the launch rule picks half the ring,
// so that the split runs with two rows held, and device memory still sees
// about one read of x (notes/TUNING.md#companions).
#ifndef MBS_COMPANIONS
#define MBS_COMPANIONS 0
#endif
static_assert(!MBS_COMPANIONS || MBS_SPLIT, "companions: the split schedule's");
// L2 policies: x's bulk copies evict-last, the outputs' 16-byte stores
// evict-normal (against evict-first both, the copies gained for float32, the
// stores for the halves).  With companions the copies evict first, leaving L2
// to the companions that are read twice (notes/TUNING.md#l2-policies-of-multi_block_smem).
#define MBS_COPY_LAST (!MBS_COMPANIONS)  // 1: x's bulk copies evict-last, 0: evict-first
#define MBS_STORE STORE_NORMAL
#define MBS_POLL_NS 256  // a waiting block's sleep between two reads of its row's slots (notes/TUNING.md#one-group)
// float32 softmax in the one-group schedule (the split's writers take the exponential).
#define MBS_IN_PLACE (SOFTMAX_DTYPE == 0 && !SOFTMAX_LOG && !MBS_SPLIT)
#define MBS_GROUP (MBS_SPLIT ? MBS_THREADS / 2 : MBS_THREADS)  // threads of a group (the block, unsplit)
#define MBS_GVPT (MBS_CHUNK / MBS_GROUP)                      // vectors a group's thread holds of a chunk
static_assert(MBS_GVPT == (MBS_SPLIT ? 2 : 1) * MBS_VPT, "a group's thread holds MBS_VPT vectors, or twice that split");
static_assert(MBS_GROUP % 32 == 0, "whole warps in each group");
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

// Named barrier ID of the THREADS threads that reach it (ID 0 with the whole
// block: __syncthreads), its OR, and a merge over those threads (block_merge).
template <int ID, int THREADS>
__device__ __forceinline__ void bar_sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

template <int ID, int THREADS>
__device__ __forceinline__ bool bar_or(bool pred) {
    unsigned out;
    asm volatile(
        "{ .reg .pred q, o; setp.ne.u32 q, %1, 0; bar.red.or.pred o, %2, %3, q; selp.u32 %0, 1, 0, o; }"
        : "=r"(out)
        : "r"((unsigned)pred), "n"(ID), "n"(THREADS)
        : "memory");
    return out != 0;
}

template <int ID, int THREADS>
__device__ __forceinline__ MaxSum bar_merge(MaxSum v, MaxSum* scratch) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x % THREADS) >> 5;
    v = warp_merge(v);
    bar_sync<ID, THREADS>();  // a previous merge's scratch is read
    if (lane == 0) scratch[warp] = v;
    bar_sync<ID, THREADS>();
    return warp_merge(lane < THREADS / 32 ? scratch[lane] : MaxSum{SOFTMAX_NEG_INF, 0.f});
}

// The row's (max, sum) from its `chunks` slots if all are written: the same
// fixed order in every block (multi_block_l2's row_total, one attempt), over
// the THREADS threads at barrier ID.
template <int ID, int THREADS>
__device__ __forceinline__ bool row_total_ready(const unsigned long long* slots, i64 chunks, MaxSum* scratch,
                                                MaxSum& total) {
    MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
    bool pending = false;
    for (i64 c = threadIdx.x % THREADS; c < chunks; c += THREADS) {
        const unsigned long long w = read_slot(slots + c);
        pending |= (unsigned)(w >> 32) == SLOT_PENDING;
        acc = merge(acc, {__uint_as_float((unsigned)w), __uint_as_float((unsigned)(w >> 32))});
    }
    if (bar_or<ID, THREADS>(pending)) return false;
    total = bar_merge<ID, THREADS>(acc, scratch);
    return true;
}

// A group's thread u: its vectors u, u + MBS_GROUP, ... of a slot's chunk.
__device__ __forceinline__ void load_from_slot(raw_t (&raw)[MBS_GVPT], const raw_t* slot, int count) {
#pragma unroll
    for (int j = 0; j < MBS_GVPT; ++j) raw[j] = j < count ? slot[j * MBS_GROUP] : raw_neg_inf();
}

// A split reducer's (max, sum) of its 2 x MBS_VPT vectors.  Halves sum the two
// runs of MBS_VPT apart and merge them: one sum of 16 half vectors that holds
// the row's max loses the terms below half its last place, which float16
// log_softmax's outputs near 0 need (tests/test_dtypes_gpu.py
// test_log_softmax_near_0; notes/TUNING.md#the-split-schedule).  float32 keeps one sum.
__device__ __forceinline__ MaxSum split_max_sum(const raw_t (&raw)[MBS_GVPT]) {
#if SOFTMAX_DTYPE == 0
    return held_max_sum<MBS_EXP_ELEM>(raw);
#else
    raw_t first[MBS_VPT], second[MBS_VPT];
#pragma unroll
    for (int j = 0; j < MBS_VPT; ++j) first[j] = raw[j], second[j] = raw[MBS_VPT + j];
    return merge(held_max_sum<MBS_EXP_ELEM>(first), held_max_sum<MBS_EXP_ELEM>(second));
#endif
}

// Chunk 0 of a row also takes the row's scalar head and tail (u: the
// thread's index in its group).
__device__ __forceinline__ void add_scalars(MaxSum& acc, const RowSpanOf<elem_t>& r, int u) {
    for (i64 i = u; i < scalar_count(r); i += MBS_GROUP) {
#if MBS_EXP_ELEM
        elem_add1(acc, load_scalar(r, scalar_index(r, i)));
#else
        online_add1(acc, load_scalar(r, scalar_index(r, i)));
#endif
    }
}

template <typename F>
__device__ __forceinline__ void write_scalars(const RowSpanOf<elem_t>& r, int u, const F& f) {
    for (i64 i = u; i < scalar_count(r); i += MBS_GROUP) {
        const i64 e = scalar_index(r, i);
        r.y[e] = from_float<elem_t>(f(load_scalar(r, e)));
    }
}

__device__ __forceinline__ unsigned long long copy_policy() {
    return MBS_COPY_LAST ? l2_evict_last() : l2_evict_first();
}

// The tickets and the fills: one thread's (thread 0, or the writers' first).
// A slot is filled once free: the next ticket's chunk (the ticket taken
// ahead, as a write begins, where take_ahead was called), its row and chunk
// recorded in shared memory before the mbarrier's arrival (release) and read
// after its wait (acquire); a row of -1 (an arrival with no copy) marks the
// end of the tickets.  A ticket is never taken ahead while the block may
// wait: it would hold back a chunk of the row it waits for.
struct Filler {
    const elem_t* x;
    elem_t* y;
    i64 n, ld_x, ld_y, chunks, items;  // chunks: tickets a row (its held chunks)
    unsigned long long* tickets;
    unsigned long long policy = copy_policy();  // the bulk copies' L2 policy (MBS_COPY_LAST)
    unsigned long long next = 0;
    bool have_next = false, exhausted = false;

    __device__ __forceinline__ void take_ahead() {
        if (!exhausted && !have_next) {
            next = atomicAdd(tickets, 1ull);  // for the slot this write frees: in flight during it
            have_next = true;
        }
    }

    // Slot k = seq % MBS_SLOTS (free) gets the next ticket's chunk.
    __device__ __forceinline__ void fill(i64 seq, raw_t* held, unsigned long long* bars, i64* row_of, i64* chunk_of) {
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
    }
};

#define MBS_REDUCERS 1  // the split's named barriers (0 is __syncthreads)
#define MBS_WRITERS 2

extern "C" __global__ void __launch_bounds__(MBS_THREADS, MBS_BLOCKS_PER_SM)
    multi_block_smem(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n, i64 ld_x, i64 ld_y,
                     i64 chunks, i64 held_chunks, int lag, unsigned long long* __restrict__ slots,
                     unsigned long long* __restrict__ tickets) {
    extern __shared__ __align__(128) unsigned char smem[];
    raw_t* const held = reinterpret_cast<raw_t*>(smem);  // MBS_SLOTS chunks
#if !MBS_SPLIT
    __shared__ unsigned long long bars[MBS_SLOTS];  // slot k's bulk copy
    __shared__ i64 row_of[MBS_SLOTS];               // the row of the chunk slot k holds (-1: the end)
    __shared__ i64 chunk_of[MBS_SLOTS];             // and which of its chunks
    __shared__ MaxSum scratch[32];
    Filler filler{x, y, n, ld_x, ld_y, held_chunks, rows * held_chunks, tickets};  // held_chunks == chunks here
    lag = min(max(lag, 1), MBS_SLOTS);  // slot p is filled while p < w + MBS_SLOTS
    if (threadIdx.x == 0) {
        for (int k = 0; k < MBS_SLOTS; ++k) mbar_init(&bars[k], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < MBS_SLOTS; ++k) filler.fill(k, held, bars, row_of, chunk_of);
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
            if (row != total_row && row_total_ready<0, MBS_THREADS>(slots + row * chunks, chunks, scratch, total))
                total_row = row;
            if (row == total_row) {
                if (threadIdx.x == 0) filler.take_ahead();
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
                store_held<MBS_STORE>(r, raw, [&](int j) { return s.v0 + threadIdx.x + (i64)j * MBS_THREADS; }, s.v1,
                                      held_out);
                if (c == 0) write_scalars(r, threadIdx.x, f);
                __syncthreads();  // the slot is read: free for the next bulk copy
                if (threadIdx.x == 0) filler.fill(w + MBS_SLOTS, held, bars, row_of, chunk_of);
                ++w;
                continue;
            }
            reduce = !ended && p < w + MBS_SLOTS;  // not complete: reduce what is filled, else wait
            if (!reduce) {
                __nanosleep(MBS_POLL_NS);
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
            load_from_slot(raw, slot, mine);
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
            if (c == 0) add_scalars(acc, r, threadIdx.x);
            const MaxSum part = block_merge(acc, scratch);
            if (threadIdx.x == 0) publish(slots + row * chunks + c, __float_as_uint(part.max), __float_as_uint(part.sum));
            ++p;
            continue;
        }
        if (ended && w == p) break;  // everything written
    }
#else
    __shared__ unsigned long long full[MBS_SLOTS];     // slot k's bulk copy landed
    __shared__ unsigned long long reduced[MBS_SLOTS];  // slot k's chunk reduced (by the reducers' first thread)
    __shared__ i64 row_of[MBS_SLOTS];                  // the row of the chunk slot k holds (-1: the end)
    __shared__ i64 chunk_of[MBS_SLOTS];                // and which of its chunks
    __shared__ MaxSum scratch[2][32];                  // the reducers', the writers'
    const int u = threadIdx.x % MBS_GROUP;
    if (threadIdx.x == 0) {
        for (int k = 0; k < MBS_SLOTS; ++k) mbar_init(&full[k], 1), mbar_init(&reduced[k], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // the mbarriers initialised; from here on each group syncs by its own barrier

    if (threadIdx.x < MBS_GROUP) {  // the reducers: slot p % MBS_SLOTS as its copy lands, p = 0, 1, ...
        for (i64 p = 0;; ++p) {
            const int k = (int)(p % MBS_SLOTS);
            mbar_wait(&full[k], (unsigned)((p / MBS_SLOTS) & 1));
            const i64 row = row_of[k];
            if (row >= 0) {
                const i64 c = chunk_of[k];
                const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
                const ChunkSpan s = chunk_span(r, c);
                raw_t raw[MBS_GVPT];
                load_from_slot(raw, held + k * MBS_SLOT_VECS + s.shift + u,
                               held_count<MBS_GROUP, MBS_GVPT>(s.v0 + u, s.v1));
                MaxSum acc = split_max_sum(raw);
                if (c == 0) add_scalars(acc, r, u);
                const MaxSum part = bar_merge<MBS_REDUCERS, MBS_GROUP>(acc, scratch[0]);
                if (u == 0) publish(slots + row * chunks + c, __float_as_uint(part.max), __float_as_uint(part.sum));
#if MBS_COMPANIONS
                if (c + held_chunks < chunks) {  // the companion, from x (evict-last: its write reads it again)
                    const ChunkSpan t = chunk_span(r, c + held_chunks);
                    load_held<LOAD_KEEP, MBS_GROUP>(raw, body_in(r), t.v0 + u,
                                                    held_count<MBS_GROUP, MBS_GVPT>(t.v0 + u, t.v1), raw_neg_inf());
                    const MaxSum cpart = bar_merge<MBS_REDUCERS, MBS_GROUP>(split_max_sum(raw), scratch[0]);
                    if (u == 0)
                        publish(slots + row * chunks + c + held_chunks, __float_as_uint(cpart.max), __float_as_uint(cpart.sum));
                }
#endif
            }
            if (u == 0)  // the slot's chunk reduced (or the end reached): the writers may take it
                asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_addr(&reduced[k]))
                             : "memory");
            if (row < 0) return;
        }
    }

    // The writers: slot w % MBS_SLOTS once reduced and its row complete, w = 0, 1, ...; then refilled.
    Filler filler{x, y, n, ld_x, ld_y, held_chunks, rows * held_chunks, tickets};  // a ticket per held chunk
    if (u == 0)
        for (int k = 0; k < MBS_SLOTS; ++k) filler.fill(k, held, full, row_of, chunk_of);
    i64 total_row = -1;  // the row whose total is known
    MaxSum total = {};
    for (i64 w = 0;; ++w) {
        const int k = (int)(w % MBS_SLOTS);
        const unsigned phase = (unsigned)((w / MBS_SLOTS) & 1);
        mbar_wait(&reduced[k], phase);
        const i64 row = row_of[k];
        if (row < 0) return;
        while (row != total_row) {
            if (row_total_ready<MBS_WRITERS, MBS_GROUP>(slots + row * chunks, chunks, scratch[1], total))
                total_row = row;
            else
                __nanosleep(MBS_POLL_NS);
        }
        if (u == 0) filler.take_ahead();
        const i64 c = chunk_of[k];
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const ChunkSpan s = chunk_span(r, c);
        mbar_wait(&full[k], phase);  // long complete (the reducers waited for it): the copy's bytes seen here too
        raw_t raw[MBS_GVPT];
        load_from_slot(raw, held + k * MBS_SLOT_VECS + s.shift + u, MBS_GVPT);
#if MBS_EARLY_FILL
        bar_sync<MBS_WRITERS, MBS_GROUP>();  // the slot is in registers: free for the next bulk copy
        if (u == 0) filler.fill(w + MBS_SLOTS, held, full, row_of, chunk_of);
#endif
        const auto f = output_of<MBS_EXP_ELEM>(total);
        store_held<MBS_STORE>(r, raw, [&](int j) { return s.v0 + u + (i64)j * MBS_GROUP; }, s.v1, f);
        if (c == 0) write_scalars(r, u, f);
#if MBS_COMPANIONS
        if (c + held_chunks < chunks) {  // the companion, read again (from L2) and written
            const ChunkSpan t = chunk_span(r, c + held_chunks);
            load_held<LOAD_STREAM, MBS_GROUP>(raw, body_in(r), t.v0 + u,
                                              held_count<MBS_GROUP, MBS_GVPT>(t.v0 + u, t.v1), raw_neg_inf());
            store_held<MBS_STORE>(r, raw, [&](int j) { return t.v0 + u + (i64)j * MBS_GROUP; }, t.v1, f);
        }
#endif
#if !MBS_EARLY_FILL
        bar_sync<MBS_WRITERS, MBS_GROUP>();  // the slot is read: free for the next bulk copy
        if (u == 0) filler.fill(w + MBS_SLOTS, held, full, row_of, chunk_of);
#endif
    }
#endif
}
