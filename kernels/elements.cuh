// elements.cuh: the element type and the op of the row kernels (three_pass,
// two_pass, multi_block), chosen by -D defines at build time:
//
//   SOFTMAX_DTYPE  0: float32 (default), 1: float16, 2: bfloat16
//   SOFTMAX_LOG    0: softmax (default), 1: log_softmax
//   SOFTMAX_BACKWARD  0: the forward op (default), 1: its backward pass
//
// Arithmetic and accumulation are float32 whatever the element type.  Halves
// are kept as 16-bit patterns (NVRTC has no cuda_fp16.h without include
// paths): loads widen them to float exactly (cvt.f32.f16, or a shift for
// bfloat16) and stores round once from float to the nearest even
// (cvt.rn.f16.f32 / cvt.rn.bf16.f32, sm_80 and newer).  A 16-byte vector is 4
// floats or 8 halves; float rows use the float4 helpers of common.cuh, so the
// float32 softmax builds are those of the float-only kernels.
//
// The output, once a row's max m and sum s = sum_j e^(x_j - m) are known:
//   softmax      y = e^(x - m) * (1 / s)
//   log_softmax  y = (x - m) - log(s)    (never log of the softmax: as torch,
//                -inf entries give -inf, a row of all -inf gives NaN (-inf - -inf),
//                a NaN or +inf in the row gives NaN through s)
#pragma once
#include "common.cuh"

#ifndef SOFTMAX_DTYPE
#define SOFTMAX_DTYPE 0
#endif
#ifndef SOFTMAX_LOG
#define SOFTMAX_LOG 0
#endif
#ifndef SOFTMAX_BACKWARD
#define SOFTMAX_BACKWARD 0
#endif
static_assert(SOFTMAX_DTYPE >= 0 && SOFTMAX_DTYPE <= 2, "SOFTMAX_DTYPE: 0 float32, 1 float16, 2 bfloat16");
static_assert(SOFTMAX_LOG == 0 || SOFTMAX_LOG == 1, "SOFTMAX_LOG: 0 softmax, 1 log_softmax");
static_assert(SOFTMAX_BACKWARD == 0 || SOFTMAX_BACKWARD == 1, "SOFTMAX_BACKWARD: 0 forward, 1 backward");

struct half_bits {  // IEEE binary16, as stored
    unsigned short bits;
};
struct bf16_bits {  // bfloat16, as stored
    unsigned short bits;
};

#if SOFTMAX_DTYPE == 1
typedef half_bits elem_t;
#elif SOFTMAX_DTYPE == 2
typedef bf16_bits elem_t;
#else
typedef float elem_t;
#endif
static_assert(16 % sizeof(elem_t) == 0, "16-byte vectors hold whole elements");

__device__ __forceinline__ float to_float(float v) { return v; }

__device__ __forceinline__ float to_float(half_bits h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

__device__ __forceinline__ float to_float(bf16_bits b) { return __uint_as_float((unsigned)b.bits << 16); }

template <typename T>
__device__ __forceinline__ T from_float(float v);

template <>
__device__ __forceinline__ float from_float<float>(float v) {
    return v;
}

template <>
__device__ __forceinline__ half_bits from_float<half_bits>(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return {h};
}

template <>
__device__ __forceinline__ bf16_bits from_float<bf16_bits>(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return {h};
}

// ------------------------------------------------------------ 8 halves
struct Floats8 {
    float v[8];
};

// Element 2k of a vector is the low half of word k (little endian).
template <typename H>
__device__ __forceinline__ Floats8 widen8(uint4 raw) {
    const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
    Floats8 f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        f.v[2 * k] = to_float(H{(unsigned short)(w[k] & 0xffffu)});
        f.v[2 * k + 1] = to_float(H{(unsigned short)(w[k] >> 16)});
    }
    return f;
}

template <typename H>
__device__ __forceinline__ uint4 narrow8(const Floats8& f) {
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
        w[k] = (unsigned)from_float<H>(f.v[2 * k]).bits | ((unsigned)from_float<H>(f.v[2 * k + 1]).bits << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ float vec_max(const Floats8& f) {
    return fmaxf(fmaxf(fmaxf(f.v[0], f.v[1]), fmaxf(f.v[2], f.v[3])),
                 fmaxf(fmaxf(f.v[4], f.v[5]), fmaxf(f.v[6], f.v[7])));
}

__device__ __forceinline__ float vec_max(float4 v) { return max4(v); }

// Element-wise e^(v - base), a vector's pairwise sum and its product by s,
// for 4 floats or 8 widened halves.
__device__ __forceinline__ float4 vec_exp(float4 v, float base) { return scale4(v, base, 1.f); }
__device__ __forceinline__ float vec_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float4 vec_mul(float4 v, float s) { return mul4(v, s); }

__device__ __forceinline__ Floats8 vec_exp(const Floats8& f, float base) {
    Floats8 e;
#pragma unroll
    for (int c = 0; c < 8; ++c) e.v[c] = exp_approx(f.v[c] - base);
    return e;
}

__device__ __forceinline__ float vec_sum(const Floats8& f) {
    return ((f.v[0] + f.v[1]) + (f.v[2] + f.v[3])) + ((f.v[4] + f.v[5]) + (f.v[6] + f.v[7]));
}

__device__ __forceinline__ Floats8 vec_mul(const Floats8& f, float s) {
    Floats8 y;
#pragma unroll
    for (int c = 0; c < 8; ++c) y.v[c] = f.v[c] * s;
    return y;
}

// sum_j e^(v_j - base) over a vector.
__device__ __forceinline__ float vec_exp_sum(float4 v, float base) { return vec_sum(vec_exp(v, base)); }
__device__ __forceinline__ float vec_exp_sum(const Floats8& f, float base) { return vec_sum(vec_exp(f, base)); }

__device__ __forceinline__ void online_add_vec(MaxSum& acc, float4 v) { online_add4(acc, v); }

// online_add4 for 8 values: one rescale per new max.
__device__ __forceinline__ void online_add_vec(MaxSum& acc, const Floats8& f) {
    const float m8 = vec_max(f);
    if (m8 > acc.max) {
        acc.sum *= exp_approx(acc.max - m8);
        acc.max = m8;
    }
    acc.sum += vec_exp_sum(f, exp_base(acc.max));
}

// ------------------------------------------------------------ row access
// The body's 16-byte vectors: float4 for floats (body_in of common.cuh), 8
// halves in a uint4 otherwise; load_vec(body_in(r), v) is vector v as floats.
template <typename H>
struct HalfVecs {
    const uint4* p;
};

template <typename H>
__device__ __forceinline__ HalfVecs<H> body_in(const RowSpanOf<H>& r) {
    return {reinterpret_cast<const uint4*>(r.x + r.head)};
}

__device__ __forceinline__ float4 load_vec(const float4* in, i64 v) { return __ldg(in + v); }

template <typename H>
__device__ __forceinline__ Floats8 load_vec(HalfVecs<H> in, i64 v) {
    return widen8<H>(__ldg(in.p + v));
}

// Scalar element i of the row, as a float.
template <typename T>
__device__ __forceinline__ float load_scalar(const RowSpanOf<T>& r, i64 i) {
    return to_float(r.x[i]);
}

// Body vector v of the output: one 16-byte evict-first store where y shares
// x's alignment, else element by element.
__device__ __forceinline__ void store_out(const RowSpan& r, i64 v, float4 val) { store4(r, v, val); }

// One 16-byte store of 8 halves to an aligned address, by policy (common.cuh's
// store_vec for 4 floats).
template <int STORE>
__device__ __forceinline__ void store_vec(void* p, uint4 w) {
    if (STORE == STORE_LAST)
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(w.x), "r"(w.y),
                     "r"(w.z), "r"(w.w), "l"(l2_evict_last())
                     : "memory");
    else if (STORE == STORE_NORMAL)
        *reinterpret_cast<uint4*>(p) = w;
    else
        __stcs(reinterpret_cast<uint4*>(p), w);
}

template <int STORE = STORE_FIRST, typename H>
__device__ __forceinline__ void store_out(const RowSpanOf<H>& r, i64 v, const Floats8& val) {
    H* p = r.y + r.head + 8 * v;
    if (r.y_shift == 0) {
        store_vec<STORE>(p, narrow8<H>(val));
    } else {
#pragma unroll
        for (int c = 0; c < 8; ++c) p[c] = from_float<H>(val.v[c]);
    }
}

// ------------------------------------------------------------ the op
// f applied to each of 8 floats (the output functors' vector form).
template <typename F>
__device__ __forceinline__ Floats8 map8(const F& f, const Floats8& x) {
    Floats8 y;
#pragma unroll
    for (int c = 0; c < 8; ++c) y.v[c] = f(x.v[c]);
    return y;
}

struct RowOutput {
    float m;
    float a;  // 1 / s for softmax, log(s) for log_softmax

    __device__ __forceinline__ float operator()(float x) const {
#if SOFTMAX_LOG
        return (x - m) - a;
#else
        return exp_approx(x - m) * a;
#endif
    }
    __device__ __forceinline__ float4 operator()(float4 v) const {
        return make_float4((*this)(v.x), (*this)(v.y), (*this)(v.z), (*this)(v.w));
    }
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const { return map8(*this, f); }
};

__device__ __forceinline__ RowOutput row_output(float m, float sum) {
#if SOFTMAX_LOG
    return {m, logf(sum)};
#else
    return {m, 1.f / sum};
#endif
}

// ------------------------------------------------------------ the exponentials
// exp_elem(x, base): e^(x - base) of one element, as single_read's and
// cluster_row's sums and outputs take it.  float32: exp_approx, whose
// ex2.approx.f32 keeps subnormal results (ptxas adds a compare and two
// predicated multiplies around the ex2 unit: hidden behind memory at 8 bytes
// an element, but in cluster_row's short rows: FLOAT_EXP_FTZ below, shift 24
// for softmax, outputs reaching 2^-150).  Halves move half the bytes per element and the instructions
// per element set the pace (notes/TUNING.md#halves-instructions), so they take one FFMA and ex2.approx.ftz:
// 2^EXP_SHIFT e^(x - base), the shift keeping every e that can still round
// to a nonzero output out of ex2's flushed range (below 2^-126): bfloat16
// softmax outputs reach 2^-133 (shift 8); float16's stop at 2^-24 and
// log_softmax only sums them (shift 0: a flushed term is below 2^-126 of a
// sum of at least 1).  The sums carry the same factor, so e * (e^(m_t - M) /
// S) and e^(x - M) / S are unchanged.  The fused (x - base) log2(e) + shift
// is rounded once, at a magnitude of at most 2^7 where e is not flushed
// (float32's 2^8): 2^-18 (2^-17) relative in e, as exp_approx's product, against
// a half's 2^-9.  Merges keep exp_approx.
#ifndef FLOAT_EXP_FTZ  // float32 too by the FFMA and ex2.approx.ftz, softmax with a shift of 2^24 (cluster_row)
#define FLOAT_EXP_FTZ 0
#endif
#define EXP_SHIFT_BITS (SOFTMAX_LOG ? 0 : SOFTMAX_DTYPE == 2 ? 8 : SOFTMAX_DTYPE == 0 && FLOAT_EXP_FTZ ? 24 : 0)
#define EXP_SHIFT ((float)EXP_SHIFT_BITS)
#if SOFTMAX_DTYPE == 0 && !FLOAT_EXP_FTZ
__device__ __forceinline__ float exp_elem(float x, float base) { return exp_approx(x - base); }
__device__ __forceinline__ float4 exp_elems(float4 v, float base) { return vec_exp(v, base); }
#else
__device__ __forceinline__ float exp_elem(float x, float base) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(x - base, SOFTMAX_LOG2E, EXP_SHIFT)));
    return y;
}
__device__ __forceinline__ Floats8 exp_elems(const Floats8& f, float base) {
    Floats8 e;
#pragma unroll
    for (int c = 0; c < 8; ++c) e.v[c] = exp_elem(f.v[c], base);
    return e;
}
__device__ __forceinline__ float4 exp_elems(float4 v, float base) {
    return make_float4(exp_elem(v.x, base), exp_elem(v.y, base), exp_elem(v.z, base), exp_elem(v.w, base));
}
#endif

// y = e * e^(m_t - M) / S for e = exp_elem(x, m_t) held in place (a thread's
// max m_t).  Where e carries a shift of 2^24, e^(m_t - M) / S (S with the
// shift) falls below float32's normal range (and loses precision) as soon as
// m_t is 70 below M, so the two factors are taken one after the other.
struct InPlaceScale {
    float rescale;  // e^(m_t - M)
    float inv;  // 1 / S
    __device__ __forceinline__ float operator()(float e) const {
        return EXP_SHIFT_BITS > 8 ? e * rescale * inv : e * (rescale * inv);
    }
    __device__ __forceinline__ float4 operator()(float4 e) const {
        return make_float4((*this)(e.x), (*this)(e.y), (*this)(e.z), (*this)(e.w));
    }
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const { return map8(*this, f); }
};

// online_add1 for a sum of exp_elem terms: v's own term is 2^EXP_SHIFT e^0.
__device__ __forceinline__ void elem_add1(MaxSum& acc, float v) { acc = merge(acc, {v, (float)(1 << EXP_SHIFT_BITS)}); }

// The softmax output from x where e is not kept (halves held packed): e^(x - M)
// with the sums' shift, times 1 / S.
struct ExpOutput {
    float m;
    float a;  // 1 / S
    __device__ __forceinline__ float operator()(float x) const { return exp_elem(x, m) * a; }
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const { return map8(*this, f); }
};

// The output function of a row of total (max, sum), for kernels whose sums are
// of exp_elem terms where EXP_ELEM: then softmax's is ExpOutput (the sums'
// shift cancels), else RowOutput.
template <bool EXP_ELEM>
__device__ __forceinline__ auto output_of(MaxSum total) {
    if constexpr (EXP_ELEM && !SOFTMAX_LOG)
        return ExpOutput{total.max, 1.f / total.sum};
    else
        return row_output(total.max, total.sum);
}

// Writes the output of elements [v0, v1) of the body (vector index) and, when
// with_scalars, of the scalar head and tail, with a block-stride loop.
template <typename T, typename F>
__device__ __forceinline__ void write_span(const RowSpanOf<T>& r, i64 v0, i64 v1, bool with_scalars, const F& f) {
    const auto in = body_in(r);
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) store_out(r, v, f(load_vec(in, v)));
    if (with_scalars) {
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) {
            const i64 i = scalar_index(r, k);
            r.y[i] = from_float<T>(f(load_scalar(r, i)));
        }
    }
}

// online_add_vec for log_softmax, whose outputs near 0 are -log(sum) of a sum
// 1 + t (one element far above the rest): t must survive the running sum.
// Once the sum holds the row's max (its e is 1), a vector whose terms add up to
// less than half the sum's last place (2^-24) adds nothing, and a thread of 16
// such vectors dropped 2^-21 of t: 2 ulp of a float16 output near -2^-12
// (notes/TUNING.md#compensated-log-sums).
// `lost` carries what each addition rounds away (Kahan) for the caller to take
// back; a rescale to a new max scales it with the sum.
template <typename V>
__device__ __forceinline__ void online_add_vec_compensated(MaxSum& acc, float& lost, const V& v) {
    const float m = vec_max(v);
    if (m > acc.max) {
        const float f = exp_approx(acc.max - m);
        acc.sum *= f;
        lost *= f;
        acc.max = m;
    }
    const float y = vec_exp_sum(v, exp_base(acc.max)) - lost;
    const float t = acc.sum + y;
    lost = (t - acc.sum) - y;
    acc.sum = t;
}

// Online (max, sum) of elements [v0, v1) of the body and, when with_scalars,
// of the head and tail, for this thread; the caller reduces over the block.
// log_softmax compensates the body's sum (online_add_vec_compensated).
template <typename T>
__device__ __forceinline__ MaxSum online_span(const RowSpanOf<T>& r, i64 v0, i64 v1, bool with_scalars) {
    MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
    const auto in = body_in(r);
#if SOFTMAX_LOG
    float lost = 0.f;
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) online_add_vec_compensated(acc, lost, load_vec(in, v));
    acc.sum -= lost;
#else
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) online_add_vec(acc, load_vec(in, v));
#endif
    if (with_scalars)
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x)
            online_add1(acc, load_scalar(r, scalar_index(r, k)));
    return acc;
}

// ------------------------------------------------------------ vectors held in registers
// multi_block_l2 and cluster_row load a thread's vectors into registers as
// they are (raw_t: 4 floats, or 8 halves in a uint4) and widen them where
// they are used.
// Padding past a thread's vectors, which no reduction notices: -inf elements
// (raw_neg_inf) forward, zeros backward.
#if SOFTMAX_DTYPE == 0
typedef float4 raw_t;
__device__ __forceinline__ float4 widen_raw(float4 v) { return v; }
__device__ __forceinline__ float4 raw_neg_inf() { return neg_inf4(); }
__device__ __forceinline__ void keep_packed(float4&) {}
#else
typedef uint4 raw_t;
__device__ __forceinline__ Floats8 widen_raw(uint4 v) { return widen8<elem_t>(v); }
// Packed halves widened before a wait and again after it: an identity permute of each word
// between the two, which ptxas keeps, so that it widens them again rather than hold the first
// widening's floats across the wait (8 registers a vector where the packed halves take 4).
// An empty asm (single_read's opaque) is not enough here: ptxas merges the two widenings.
__device__ __forceinline__ void keep_packed(uint4& v) {
    asm volatile("prmt.b32 %0, %0, 0, 0x3210;\n\tprmt.b32 %1, %1, 0, 0x3210;\n\t"
                 "prmt.b32 %2, %2, 0, 0x3210;\n\tprmt.b32 %3, %3, 0, 0x3210;"
                 : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
}
#define NEG_INF_PAIR (SOFTMAX_DTYPE == 1 ? 0xfc00fc00u : 0xff80ff80u)  // two halves of -inf
__device__ __forceinline__ uint4 raw_neg_inf() { return make_uint4(NEG_INF_PAIR, NEG_INF_PAIR, NEG_INF_PAIR, NEG_INF_PAIR); }

// The max of 8 packed halves, exactly, by half2 maxima (as fmaxf, a NaN is
// ignored); the halves are not widened, so this pass needs no extra registers.
__device__ __forceinline__ unsigned max2(unsigned a, unsigned b) {
    unsigned d;
#if SOFTMAX_DTYPE == 1
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
    return d;
}

// The running max of a thread's halves stays packed (a half2 max per word, half
// an instruction per element) and is widened once.
__device__ __forceinline__ unsigned max_into(unsigned pair, uint4 raw) {
    return max2(pair, max2(max2(raw.x, raw.y), max2(raw.z, raw.w)));
}
__device__ __forceinline__ float pair_max(unsigned m) {
    return fmaxf(to_float(elem_t{(unsigned short)(m & 0xffffu)}), to_float(elem_t{(unsigned short)(m >> 16)}));
}
#endif

// 16-byte loads with the L2 evict-last policy.
__device__ __forceinline__ float4 load_evict_last(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(l2_evict_last()));
    return v;
}

__device__ __forceinline__ uint4 load_evict_last(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(l2_evict_last()));
    return v;
}

// Body vector v as loaded, by L2 policy: LOAD_PLAIN (__ldg), LOAD_STREAM
// (evict-first, .cs) or LOAD_KEEP (evict-last).
enum { LOAD_PLAIN, LOAD_STREAM, LOAD_KEEP };

template <int POLICY>
__device__ __forceinline__ float4 load_raw(const float4* in, i64 v) {
    return POLICY == LOAD_STREAM ? __ldcs(in + v) : POLICY == LOAD_KEEP ? load_evict_last(in + v) : __ldg(in + v);
}

template <int POLICY, typename H>
__device__ __forceinline__ uint4 load_raw(HalfVecs<H> in, i64 v) {
    return POLICY == LOAD_STREAM ? __ldcs(in.p + v) : POLICY == LOAD_KEEP ? load_evict_last(in.p + v) : __ldg(in.p + v);
}

// The body vectors in from `first` on, a thread's run of them: in + first for a
// float body, HalfVecs shifted alike for halves.
__device__ __forceinline__ const float4* vecs_from(const float4* in, i64 first) { return in + first; }

template <typename H>
__device__ __forceinline__ HalfVecs<H> vecs_from(HalfVecs<H> in, i64 first) {
    return {in.p + first};
}

// A thread's held vectors: raw[j] = body vector first + j * STRIDE for j <
// count, `pad` beyond, from one base address at immediate offsets.  Padding
// that the reductions ignore lets them run without a predicate per vector:
// with one (j < count) held from each load to its use, ptxas ran out of
// predicate registers and issued the loads in groups of at most seven, each
// group waited on before the next was issued (notes/TUNING.md#held-loads).
// How many of the vectors first, first + STRIDE, ... (V at most) lie below
// end: a thread's run in [v0, end) starting at first = v0 + threadIdx.x.
template <int STRIDE, int V>
__device__ __forceinline__ int held_count(i64 first, i64 end) {
    return (int)min((i64)V, max((i64)0, (end - first + STRIDE - 1) / STRIDE));
}

// One 16-byte load under a predicate, by L2 policy (`policy`: LOAD_KEEP's
// createpolicy, made once by the caller); `v` keeps what it held where `load`
// is false.  The predicate lives inside the asm: a C++ `j < count ? load :
// pad` around an asm load became a branch (BSSY / BRA / BSYNC) and a fresh
// createpolicy per vector, a large part of the instructions of cluster_row's
// float32 backward (notes/TUNING.md#held-loads).
// C: the registers' constraint ("f" or "r"); OP: the load, TAIL: its policy operand (%6) and the end.
#define HELD_LOAD_IF(C, OP, TAIL)                                                               \
    asm volatile("{ .reg .pred q; setp.ne.b32 q, %4, 0; @q " OP " {%0, %1, %2, %3}, [%5]" TAIL \
                 : "+" C(v.x), "+" C(v.y), "+" C(v.z), "+" C(v.w)                              \
                 : "r"((int)load), "l"(p), "l"(policy))
template <int POLICY>
__device__ __forceinline__ void load_vec_if(float4& v, const float4* p, bool load, unsigned long long policy) {
    if (POLICY == LOAD_KEEP)
        HELD_LOAD_IF("f", "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32", ", %6; }");
    else if (POLICY == LOAD_STREAM)
        HELD_LOAD_IF("f", "ld.global.cs.v4.f32", "; }");
    else
        HELD_LOAD_IF("f", "ld.global.nc.v4.f32", "; }");
}

template <int POLICY>
__device__ __forceinline__ void load_vec_if(uint4& v, const uint4* p, bool load, unsigned long long policy) {
    if (POLICY == LOAD_KEEP)
        HELD_LOAD_IF("r", "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32", ", %6; }");
    else if (POLICY == LOAD_STREAM)
        HELD_LOAD_IF("r", "ld.global.cs.v4.u32", "; }");
    else
        HELD_LOAD_IF("r", "ld.global.nc.v4.u32", "; }");
}
#undef HELD_LOAD_IF

__device__ __forceinline__ const float4* vec_ptr(const float4* in) { return in; }
template <typename H>
__device__ __forceinline__ const uint4* vec_ptr(HalfVecs<H> in) {
    return in.p;
}

template <int POLICY, int STRIDE, int V, typename In>
__device__ __forceinline__ void load_held(raw_t (&raw)[V], In in, i64 first, int count, raw_t pad) {
    const raw_t* run = vec_ptr(vecs_from(in, first));
    const unsigned long long policy = POLICY == LOAD_KEEP ? l2_evict_last() : 0ull;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        raw[j] = pad;
        load_vec_if<POLICY>(raw[j], run + (i64)j * STRIDE, j < count, policy);
    }
}

// Output vector v, valid or not.  Every lane of a warp calls it, with the
// warp's lanes holding consecutive vectors: float bodies at any alignment of y
// keep 16-byte stores (store4_warp); half bodies misaligned with y are stored
// element by element.
// STORE: the 16-byte stores' L2 policy (store_vec).
template <int STORE = STORE_FIRST>
__device__ __forceinline__ void store_chunk_vec(const RowSpan& r, i64 v, float4 val, bool valid) {
    store4_warp<STORE>(r, v, val, valid);
}

template <int STORE = STORE_FIRST, typename H>
__device__ __forceinline__ void store_chunk_vec(const RowSpanOf<H>& r, i64 v, const Floats8& val, bool valid) {
    if (valid) store_out<STORE>(r, v, val);
}

// The max of this thread's held vectors (padded by load_held with -inf past
// its run); halves take it packed (max_into).
template <int V>
__device__ __forceinline__ float held_max(const raw_t (&raw)[V]) {
#if SOFTMAX_DTYPE == 0
    float m = SOFTMAX_NEG_INF;
#pragma unroll
    for (int j = 0; j < V; ++j) m = fmaxf(m, vec_max(raw[j]));
    return m;
#else
    unsigned max_pair = NEG_INF_PAIR;
#pragma unroll
    for (int j = 0; j < V; ++j) max_pair = max_into(max_pair, raw[j]);
    return pair_max(max_pair);
#endif
}

// This thread's (max, sum of e^(x - max)) over its held vectors: the max,
// then one sum (no rescaling as the max grows); halves widen each vector
// once, for the sum.  BY_EXP_ELEM: the terms by exp_elem (its shift then
// carried by the sum), else exp_approx.
template <bool BY_EXP_ELEM = false, int V>
__device__ __forceinline__ MaxSum held_max_sum(const raw_t (&raw)[V]) {
    MaxSum acc = {held_max(raw), 0.f};
    const float base = exp_base(acc.max);
#pragma unroll
    for (int j = 0; j < V; ++j)
        acc.sum += BY_EXP_ELEM ? vec_sum(exp_elems(widen_raw(raw[j]), base)) : vec_exp_sum(widen_raw(raw[j]), base);
    return acc;
}

// Stores f of each held vector j at body vector vec_of(j), where below v1.
template <int STORE = STORE_FIRST, int V, typename VecOf, typename F>
__device__ __forceinline__ void store_held(const RowSpanOf<elem_t>& r, const raw_t (&raw)[V], VecOf vec_of, i64 v1,
                                           const F& f) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const i64 v = vec_of(j);
        store_chunk_vec<STORE>(r, v, f(widen_raw(raw[j])), v < v1);
    }
}

#if SOFTMAX_BACKWARD
// ------------------------------------------------------------ backward
// The backward ops read y (the forward output, the row span's x), dy (`g`,
// a row of its own alignment) and write dx (the row span's y):
//   softmax      dot = sum_j dy_j * y_j,  dx = y * (dy - dot)
//   log_softmax  dot = sum_j dy_j,        dx = dy - e^y * dot   (fused: one rounding)
// The body's vectors are those of y; dy is read as 16-byte vectors where it
// shares y's alignment (g_shift 0), else element by element.
template <typename T>
struct GradRow {
    const T* g;  // dy's row
    int g_shift;  // elements of dy's body start past a 16-byte boundary
};

template <typename T>
__device__ __forceinline__ GradRow<T> grad_row(const RowSpanOf<T>& r, const T* g) {
    return {g, (int)((((size_t)(g + r.head)) & 15u) / sizeof(T))};
}

// dy's 16-byte loads: plain (__ldg, LOAD_PLAIN) unless the caller picks a policy.

__device__ __forceinline__ float4 load_grad_vec(const RowSpan& r, GradRow<float> g, i64 v) {
    const float* p = g.g + r.head + 4 * v;
    if (g.g_shift == 0) return load_raw<LOAD_PLAIN>(reinterpret_cast<const float4*>(p), 0);
    return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}

template <typename H>
__device__ __forceinline__ Floats8 load_grad_vec(const RowSpanOf<H>& r, GradRow<H> g, i64 v) {
    const H* p = g.g + r.head + 8 * v;
    if (g.g_shift == 0) return widen8<H>(load_raw<LOAD_PLAIN>(HalfVecs<H>{reinterpret_cast<const uint4*>(p)}, 0));
    Floats8 f;
#pragma unroll
    for (int c = 0; c < 8; ++c) f.v[c] = to_float(p[c]);
    return f;
}

// dy's vector v as it lies in memory (raw_t), where dy's body is off 16 bytes: element by element.
__device__ __forceinline__ float4 load_grad_raw(const RowSpan& r, GradRow<float> g, i64 v) {
    return load_grad_vec(r, g, v);
}

template <typename H>
__device__ __forceinline__ uint4 load_grad_raw(const RowSpanOf<H>& r, GradRow<H> g, i64 v) {
    const unsigned short* p = reinterpret_cast<const unsigned short*>(g.g + r.head + 8 * v);
    const auto pair = [p](int c) { return (unsigned)__ldg(p + 2 * c) | (unsigned)__ldg(p + 2 * c + 1) << 16; };
    return make_uint4(pair(0), pair(1), pair(2), pair(3));
}

template <typename A, typename B>
struct SameType { static constexpr bool value = false; };
template <typename A>
struct SameType<A, A> { static constexpr bool value = true; };

// load_held for dy: grad[j] = dy's body vector first + j * STRIDE for j < count, zero beyond,
// held as G: raw_t (as loaded, widened where used: half the registers of the halves'
// widened vectors) or widen_raw's type; POLICY: the aligned loads' L2 policy (cluster_row
// picks its own).
template <int STRIDE, int POLICY = LOAD_PLAIN, int V, typename T, typename G>
__device__ __forceinline__ void load_held_grads(G (&grad)[V], const RowSpanOf<T>& r, GradRow<T> g, i64 first,
                                                int count) {
    constexpr bool AS_LOADED = SameType<G, raw_t>::value;
    const GradRow<T> run = {g.g + RowSpanOf<T>::VEC * first, g.g_shift};
    if (g.g_shift == 0) {  // dy's body on 16 bytes, as y's: predicated vector loads (load_held)
        const raw_t* p = reinterpret_cast<const raw_t*>(run.g + r.head);
        const unsigned long long policy = POLICY == LOAD_KEEP ? l2_evict_last() : 0ull;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            raw_t v{};
            load_vec_if<POLICY>(v, p + (i64)j * STRIDE, j < count, policy);
            if constexpr (AS_LOADED)
                grad[j] = v;
            else
                grad[j] = widen_raw(v);
        }
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            if constexpr (AS_LOADED)
                grad[j] = j < count ? load_grad_raw(r, run, (i64)j * STRIDE) : G{};
            else
                grad[j] = j < count ? load_grad_vec(r, run, (i64)j * STRIDE) : G{};
        }
    }
}

// One element's share of the row's dot.
__device__ __forceinline__ float dot_term(float y, float dy) {
#if SOFTMAX_LOG
    return dy;
#else
    return dy * y;
#endif
}

// log_softmax's e^y uses expf (a few ulp), not exp_approx: the ex2 unit's
// argument y * log2(e) is rounded, which costs |y| * 2^-24 relative, 1e-6 at
// y = -17, and the backward is bound by memory, not by these instructions.
__device__ __forceinline__ float grad_out(float y, float dy, float dot) {
#if SOFTMAX_LOG
    return dy - expf(y) * dot;
#else
    return y * (dy - dot);
#endif
}

__device__ __forceinline__ float vec_dot(float4 y, float4 dy) {
    return (dot_term(y.x, dy.x) + dot_term(y.y, dy.y)) + (dot_term(y.z, dy.z) + dot_term(y.w, dy.w));
}

__device__ __forceinline__ float vec_dot(const Floats8& y, const Floats8& dy) {
    float t[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) t[c] = dot_term(y.v[c], dy.v[c]);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

__device__ __forceinline__ float4 vec_grad(float4 y, float4 dy, float dot) {
    return make_float4(grad_out(y.x, dy.x, dot), grad_out(y.y, dy.y, dot), grad_out(y.z, dy.z, dot),
                       grad_out(y.w, dy.w, dot));
}

__device__ __forceinline__ Floats8 vec_grad(const Floats8& y, const Floats8& dy, float dot) {
    Floats8 dx;
#pragma unroll
    for (int c = 0; c < 8; ++c) dx.v[c] = grad_out(y.v[c], dy.v[c], dot);
    return dx;
}

// This thread's part of the dot over body vectors [v0, v1) and, when
// with_scalars, the head and tail; the caller reduces over the block.
template <typename T>
__device__ __forceinline__ float dot_span(const RowSpanOf<T>& r, GradRow<T> g, i64 v0, i64 v1, bool with_scalars) {
    float acc = 0.f;
    const auto in = body_in(r);
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) acc += vec_dot(load_vec(in, v), load_grad_vec(r, g, v));
    if (with_scalars)
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) {
            const i64 i = scalar_index(r, k);
            acc += dot_term(load_scalar(r, i), to_float(g.g[i]));
        }
    return acc;
}

// Writes dx for body vectors [v0, v1) and, when with_scalars, the head and tail.
template <typename T>
__device__ __forceinline__ void grad_span(const RowSpanOf<T>& r, GradRow<T> g, i64 v0, i64 v1, bool with_scalars,
                                          float dot) {
    const auto in = body_in(r);
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x)
        store_out(r, v, vec_grad(load_vec(in, v), load_grad_vec(r, g, v), dot));
    if (with_scalars) {
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) {
            const i64 i = scalar_index(r, k);
            r.y[i] = from_float<T>(grad_out(load_scalar(r, i), to_float(g.g[i]), dot));
        }
    }
}
#endif
