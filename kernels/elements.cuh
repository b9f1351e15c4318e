// elements.cuh: the element type and the op of the row kernels (three_pass,
// two_pass, multi_block), chosen by -D defines at build time:
//
//   SOFTMAX_DTYPE  0: float32 (default), 1: float16, 2: bfloat16
//   SOFTMAX_LOG    0: softmax (default), 1: log_softmax
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
static_assert(SOFTMAX_DTYPE >= 0 && SOFTMAX_DTYPE <= 2, "SOFTMAX_DTYPE: 0 float32, 1 float16, 2 bfloat16");
static_assert(SOFTMAX_LOG == 0 || SOFTMAX_LOG == 1, "SOFTMAX_LOG: 0 softmax, 1 log_softmax");

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

// sum_j e^(v_j - base) over a vector.
__device__ __forceinline__ float vec_exp_sum(float4 v, float base) {
    const float4 e = scale4(v, base, 1.f);
    return (e.x + e.y) + (e.z + e.w);
}

__device__ __forceinline__ float vec_exp_sum(const Floats8& f, float base) {
    float e[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) e[c] = exp_approx(f.v[c] - base);
    return ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
}

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

template <typename H>
__device__ __forceinline__ void store_out(const RowSpanOf<H>& r, i64 v, const Floats8& val) {
    H* p = r.y + r.head + 8 * v;
    if (r.y_shift == 0) {
        __stcs(reinterpret_cast<uint4*>(p), narrow8<H>(val));
    } else {
#pragma unroll
        for (int c = 0; c < 8; ++c) p[c] = from_float<H>(val.v[c]);
    }
}

// ------------------------------------------------------------ the op
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
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const {
        Floats8 y;
#pragma unroll
        for (int c = 0; c < 8; ++c) y.v[c] = (*this)(f.v[c]);
        return y;
    }
};

__device__ __forceinline__ RowOutput row_output(float m, float sum) {
#if SOFTMAX_LOG
    return {m, logf(sum)};
#else
    return {m, 1.f / sum};
#endif
}

// Writes the output of elements [v0, v1) of the body (vector index) and, when
// with_scalars, of the scalar head and tail, with a block-stride loop.
template <typename T>
__device__ __forceinline__ void write_span(const RowSpanOf<T>& r, i64 v0, i64 v1, bool with_scalars, RowOutput f) {
    const auto in = body_in(r);
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) store_out(r, v, f(load_vec(in, v)));
    if (with_scalars) {
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) {
            const i64 i = scalar_index(r, k);
            r.y[i] = from_float<T>(f(load_scalar(r, i)));
        }
    }
}

// Online (max, sum) of elements [v0, v1) of the body and, when with_scalars,
// of the head and tail, for this thread; the caller reduces over the block.
template <typename T>
__device__ __forceinline__ MaxSum online_span(const RowSpanOf<T>& r, i64 v0, i64 v1, bool with_scalars) {
    MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
    const auto in = body_in(r);
    for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) online_add_vec(acc, load_vec(in, v));
    if (with_scalars)
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x)
            online_add1(acc, load_scalar(r, scalar_index(r, k)));
    return acc;
}
