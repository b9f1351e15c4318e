// common.cuh: pieces every softmax kernel of softmax-lab shares.
//
// * exp_approx: e^d through the hardware ex2 unit (one FMUL + one MUFU).
// * MaxSum and merge(): the online-softmax pair (running max m, sum of
//   e^(x - m)); merging two pairs rescales each sum to the larger max.
// * warp and block reductions of floats and of MaxSum pairs.
// * RowSpan (RowSpanOf<T>): splits a row into a scalar head (until the input
//   pointer is 16-byte aligned), a body of 16-byte vectors (4 floats or 8
//   halves) and a scalar tail, so that every row length and every view
//   offset is handled with 16-byte accesses wherever possible.
//
// Special values follow torch.softmax: -inf entries give 0, a row of all -inf
// gives NaN, a NaN anywhere in a row (or +inf, since inf - inf is NaN) makes
// the whole row NaN.  fmaxf() ignores NaN, so a NaN never becomes the max;
// it reaches the sum through e^(NaN - m) and from there every output.
//
// All index arithmetic is 64-bit (long long): tensors above 2^31 elements.
#pragma once

#define SOFTMAX_NEG_INF (__int_as_float(0xff800000))
#define SOFTMAX_LOG2E 1.4426950408889634f

typedef long long i64;

__device__ __forceinline__ float exp_approx(float d) {
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(d * SOFTMAX_LOG2E));
    return y;
}

struct MaxSum {
    float max;
    float sum;
};

// The reference point for e^(x - m): a running max of -inf means every
// element seen so far is -inf (or NaN); use 0 so that -inf - ref is -inf
// (giving 0) rather than -inf - -inf (NaN).
__device__ __forceinline__ float exp_base(float m) { return m == SOFTMAX_NEG_INF ? 0.f : m; }

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    const float base = exp_base(m);
    // Commutative: merge(a, b) and merge(b, a) are bitwise equal.
    return {m, a.sum * exp_approx(a.max - base) + b.sum * exp_approx(b.max - base)};
}

// Folds four values into a running (max, sum): one rescale per new max.
__device__ __forceinline__ void online_add4(MaxSum& acc, float4 v) {
    const float m4 = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (m4 > acc.max) {
        acc.sum *= exp_approx(acc.max - m4);
        acc.max = m4;
    }
    const float base = exp_base(acc.max);
    acc.sum += exp_approx(v.x - base) + exp_approx(v.y - base) + exp_approx(v.z - base) +
               exp_approx(v.w - base);
}

__device__ __forceinline__ void online_add1(MaxSum& acc, float v) {
    if (v > acc.max) {
        acc.sum *= exp_approx(acc.max - v);
        acc.max = v;
    }
    acc.sum += exp_approx(v - exp_base(acc.max));
}

__device__ __forceinline__ float4 neg_inf4() {
    return make_float4(SOFTMAX_NEG_INF, SOFTMAX_NEG_INF, SOFTMAX_NEG_INF, SOFTMAX_NEG_INF);
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// ---------------------------------------------------------------- reductions
// Butterfly (xor) reductions: every lane ends with the same, bitwise equal
// value, and the result does not depend on timing, so outputs are
// deterministic.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other = {__shfl_xor_sync(0xffffffffu, v.max, o), __shfl_xor_sync(0xffffffffu, v.sum, o)};
        v = merge(v, other);
    }
    return v;
}

// warp_merge in two butterflies: the max, then every sum rescaled to it once
// and added up: one exponential per lane, not two per step (single_read's
// half rows, where the merges cost about 1.4 instructions per element; the
// float32 single_read at 128 registers spills with it).  -inf maxima give 0
// terms, a NaN sum stays NaN, +inf makes the sum NaN (e^(inf - inf)), as in
// merge(); the sums differ from merge()'s in rounding only.
__device__ __forceinline__ MaxSum warp_merge_rescaled(MaxSum v) {
    const float m = warp_max(v.max);
    return {m, warp_sum(v.sum * exp_approx(v.max - exp_base(m)))};
}

// Block-wide reductions for blockDim.x a multiple of 32 (at most 1024):
// reduce each warp, then the warps' results.  `scratch` holds 32 entries; the
// call begins with a barrier so that a previous reduction's scratch may be
// reused at once.
template <typename T, T (*WARP_REDUCE)(T)>
__device__ __forceinline__ T block_reduce(T v, T* scratch, T identity) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = WARP_REDUCE(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return WARP_REDUCE(lane < warps ? scratch[lane] : identity);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    return block_reduce<float, warp_max>(v, scratch, SOFTMAX_NEG_INF);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    return block_reduce<float, warp_sum>(v, scratch, 0.f);
}

__device__ __forceinline__ MaxSum block_merge(MaxSum v, MaxSum* scratch) {
    return block_reduce<MaxSum, warp_merge>(v, scratch, MaxSum{SOFTMAX_NEG_INF, 0.f});
}

__device__ __forceinline__ MaxSum block_merge_rescaled(MaxSum v, MaxSum* scratch) {
    return block_reduce<MaxSum, warp_merge_rescaled>(v, scratch, MaxSum{SOFTMAX_NEG_INF, 0.f});
}

// ------------------------------------------------------------- slots
// Partials published through device memory to blocks on other SMs
// (multi_block_l2, single_read's memory-merged groups): one 64-bit word a
// slot, stored and loaded whole (relaxed, at GPU scope, so that no stale L1
// line is read).  The caller fills the slots with the byte 0xBF before the
// launch, so a slot whose high word is SLOT_PENDING is not yet written: a
// published high word is a sum of exponentials, never negative, or 0.
#define SLOT_PENDING 0xBFBFBFBFu

__device__ __forceinline__ void publish(unsigned long long* slot, unsigned lo, unsigned hi) {
    const unsigned long long w = ((unsigned long long)hi << 32) | lo;
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(slot), "l"(w) : "memory");
}

__device__ __forceinline__ unsigned long long read_slot(const unsigned long long* slot) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(slot) : "memory");
    return w;
}

// ------------------------------------------------------------- row layout
// A row of elements of type T (float: 4 to a 16-byte vector; 2-byte halves:
// 8).  Elements [0, head) and [head + VEC * vecs, n) are scalar; [head,
// head + VEC * vecs) is read as 16-byte vectors from an aligned address.  The
// output body y + head starts y_shift elements (0 to VEC - 1) past a 16-byte
// boundary: 0 when x and y share their alignment.  store4 writes a misaligned
// float body one float at a time; store4_warp realigns a warp's vectors with
// shuffles instead, so that every alignment keeps 16-byte stores.
template <typename T>
struct RowSpanOf {
    enum { VEC = 16 / (int)sizeof(T) };  // elements per 16-byte vector
    const T* x;
    T* y;
    i64 head;
    i64 vecs;
    i64 n;
    int y_shift;
};

typedef RowSpanOf<float> RowSpan;

template <typename T>
__device__ __forceinline__ RowSpanOf<T> row_span(const T* x, T* y, i64 n) {
    RowSpanOf<T> r;
    r.x = x;
    r.y = y;
    r.n = n;
    i64 head = (i64)((16u - ((unsigned)(size_t)x & 15u)) & 15u) / (int)sizeof(T);
    r.head = head < n ? head : n;
    r.vecs = (n - r.head) / RowSpanOf<T>::VEC;
    r.y_shift = (int)((((size_t)(y + r.head)) & 15u) / sizeof(T));
    return r;
}

__device__ __forceinline__ const float4* body_in(const RowSpan& r) {
    return reinterpret_cast<const float4*>(r.x + r.head);
}

// Index of scalar element k of the row, k in [0, scalars): the head, then the tail.
template <typename T>
__device__ __forceinline__ i64 scalar_index(const RowSpanOf<T>& r, i64 k) {
    return k < r.head ? k : r.head + RowSpanOf<T>::VEC * r.vecs + (k - r.head);
}

template <typename T>
__device__ __forceinline__ i64 scalar_count(const RowSpanOf<T>& r) {
    return r.n - RowSpanOf<T>::VEC * r.vecs;
}

// An L2 cache policy that keeps lines over evict-normal ones: single_read's
// output stores and input copies are faster with it than plain or evict-first
// (.cs); the multi-pass kernels, whose later passes re-read x from L2, are
// faster with evict-first (.cs) output stores (notes/TUNING.md#l2-policy-of-single_read).
__device__ __forceinline__ unsigned long long l2_evict_last() {
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// The output stores' L2 policies: evict-first (.cs), evict-last, or a plain
// C++ store (evict-normal), which, unlike the other two's asm with its memory
// clobber, lets the compiler move shared-memory loads across it: what made it
// pay in multi_block_smem's halves, where the same store as asm did not
// (notes/TUNING.md#l2-policies-of-multi_block_smem; single_read's cluster
// kernel is slower with it).
enum { STORE_FIRST, STORE_LAST, STORE_NORMAL };

// One 16-byte store to a 16-byte aligned address, by policy.
template <int STORE>
__device__ __forceinline__ void store_vec(float* p, float4 val) {
    if (STORE == STORE_LAST)
        asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "f"(val.x), "f"(val.y),
                     "f"(val.z), "f"(val.w), "l"(l2_evict_last())
                     : "memory");
    else if (STORE == STORE_NORMAL)
        *reinterpret_cast<float4*>(p) = val;
    else
        __stcs(reinterpret_cast<float4*>(p), val);
}

template <int STORE = STORE_FIRST>
__device__ __forceinline__ void store4(const RowSpan& r, i64 v, float4 val) {
    float* p = r.y + r.head + 4 * v;
    if (r.y_shift == 0) {
        store_vec<STORE>(p, val);
    } else {
        p[0] = val.x;
        p[1] = val.y;
        p[2] = val.z;
        p[3] = val.w;
    }
}

// Body vector j of the row (`val`; `next` is vector j + 1) stored at the
// alignment of y.  With y_shift = d > 0, output float e of the body lands on a
// 16-byte boundary when e % 4 == 4 - d, so vector j contributes the aligned
// vector made of its last d floats and the first 4 - d of vector j + 1 (when
// j + 1 is stored by the same call sequence: `next_valid`), else its last d
// floats one by one; `first` (the first vector of a run) also stores its first
// 4 - d floats one by one.  So a run of vectors is written with 16-byte
// stores except for at most 3 + 3 floats at its ends.
template <int STORE = STORE_FIRST>
__device__ __forceinline__ void store_shifted(const RowSpan& r, i64 j, float4 val, float4 next, bool next_valid,
                                              bool first) {
    float* p = r.y + r.head + 4 * j;
    const int d = r.y_shift;
    const float a[4] = {val.x, val.y, val.z, val.w};
    if (first) {
#pragma unroll
        for (int c = 0; c < 3; ++c)
            if (c < 4 - d) p[c] = a[c];
    }
    if (next_valid) {
        float4 out;
        if (d == 1) out = make_float4(val.w, next.x, next.y, next.z);
        else if (d == 2) out = make_float4(val.z, val.w, next.x, next.y);
        else out = make_float4(val.y, val.z, val.w, next.x);
        store_vec<STORE>(p + 4 - d, out);
    } else {
#pragma unroll
        for (int c = 1; c < 4; ++c)
            if (c >= 4 - d) p[c] = a[c];
    }
}

// store_shifted for a warp whose lanes hold consecutive body vectors j0 + l
// (`valid` true for a prefix of the lanes): vector j + 1 comes from the next
// lane by a shuffle, and each warp's 32 vectors are one run (31 16-byte
// stores and up to 6 single floats).  Every lane of the warp must call it.
template <int STORE = STORE_FIRST>
__device__ __forceinline__ void store4_warp(const RowSpan& r, i64 j, float4 val, bool valid) {
    if (r.y_shift == 0) {
        if (valid) store_vec<STORE>(r.y + r.head + 4 * j, val);
        return;
    }
    const unsigned lane = threadIdx.x & 31;
    float4 next;
    next.x = __shfl_down_sync(0xffffffffu, val.x, 1);
    next.y = __shfl_down_sync(0xffffffffu, val.y, 1);
    next.z = __shfl_down_sync(0xffffffffu, val.z, 1);
    next.w = 0.f;
    const bool next_valid = __shfl_down_sync(0xffffffffu, (int)valid, 1) && lane < 31;
    if (valid) store_shifted<STORE>(r, j, val, next, next_valid, lane == 0);
}

__device__ __forceinline__ float4 mul4(float4 v, float s) { return make_float4(v.x * s, v.y * s, v.z * s, v.w * s); }

__device__ __forceinline__ float4 scale4(float4 v, float m, float inv_sum) {
    return make_float4(exp_approx(v.x - m) * inv_sum, exp_approx(v.y - m) * inv_sum,
                       exp_approx(v.z - m) * inv_sum, exp_approx(v.w - m) * inv_sum);
}
