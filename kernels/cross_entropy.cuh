// cross_entropy.cuh: what the cross-entropy kernels share (cross_entropy.cu,
// the row split over blocks; cross_entropy_held.cu, the row held on chip):
// the targets' type, a row's loss and the coefficients of its gradient.
//
// A row's loss, for target t, smoothing e, z-loss coefficient z, V = n:
//   (1 - e) (lse - x_t) + e (lse - sum(x) / V) + z lse^2
// and its gradient, scaled by k (1 / count for a mean, else 1):
//   dx_j = k ((1 + 2 z lse) e^(x_j - lse) - e / V - (1 - e) [j == t])
// A row whose target is ignore_index has loss 0 and gradient 0.  A target
// outside [0, V) that is not ignore_index gives that row a NaN loss and a NaN
// gradient (never a read outside the row).  Special values follow
// torch.nn.functional.cross_entropy: a row of -inf, or holding +inf or NaN,
// gives NaN.
// Targets are int64 (XENT_TARGET_BYTES 8) or int32 (4).
#pragma once
#include "elements.cuh"

#ifndef XENT_TARGET_BYTES
#define XENT_TARGET_BYTES 8
#endif
static_assert(XENT_TARGET_BYTES == 4 || XENT_TARGET_BYTES == 8, "XENT_TARGET_BYTES: 4 int32, 8 int64");
#if XENT_TARGET_BYTES == 4
typedef int target_t;
#else
typedef long long target_t;
#endif

__device__ __forceinline__ bool in_row(i64 t, i64 n) { return t >= 0 && t < n; }

struct RowGrad {  // dx = a e^(x - m) - b, and at the target target_dx
    float m;
    float a;
    float b;
    float target_dx;
};

struct RowLoss {
    float loss;
    RowGrad grad;
};

// The loss and the gradient's coefficients of a row whose (max, sum of
// e^(x - max)) is `stats`, logit sum `total` and target logit `xt`, scaled by
// k; `ignored`: its target is ignore_index, `valid`: its target is in [0, n).
__device__ __forceinline__ RowLoss row_loss(MaxSum stats, float total, float xt, bool ignored, bool valid, i64 n,
                                            float smoothing, float z_loss, float k) {
    RowLoss out = {0.f, {stats.max, 0.f, 0.f, 0.f}};
    if (ignored) return out;
    if (!valid) {
        out.loss = out.grad.a = __int_as_float(0x7fffffff);
        return out;
    }
    const float lse = stats.max + logf(stats.sum);
    out.loss = (1.f - smoothing) * (lse - xt) + z_loss * lse * lse;
    if (smoothing != 0.f) out.loss += smoothing * (lse - total / (float)n);
    RowGrad& g = out.grad;
    g.a = k * (1.f + 2.f * z_loss * lse) / stats.sum;
    g.b = k * smoothing / (float)n;
    g.target_dx = g.a * exp_approx(xt - stats.max) - g.b - k * (1.f - smoothing);
    return out;
}

// The call's count of rows whose target is not ignore_index, over every row in
// one block (all of its threads call it: a block reduction), and the rows'
// losses summed in a fixed order, in double: a 64-bit count is exact at any
// number of rows (a float's stops at 2^24), a double total keeps the float32
// losses' digits.  The losses are read through L2 (__ldcg): other blocks of
// the launch may have written them (cross_entropy_held.cu's XENT_REDUCE).
template <typename T>
__device__ __forceinline__ T warp_total(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ i64 kept_rows(const target_t* __restrict__ target, i64 ld_t, i64 ignore_index, i64 rows,
                                         i64* scratch) {
    i64 kept = 0;
    for (i64 row = threadIdx.x; row < rows; row += blockDim.x) kept += (i64)target[row * ld_t] != ignore_index;
    return block_reduce<i64, warp_total<i64>>(kept, scratch, 0);
}

__device__ __forceinline__ double loss_total(const float* loss, i64 rows, double* scratch) {
    double acc = 0.0;
    for (i64 row = threadIdx.x; row < rows; row += blockDim.x) acc += __ldcg(loss + row);
    return block_reduce<double, warp_total<double>>(acc, scratch, 0.0);
}

struct GradOutput {  // a row's gradient, from its logits
    float m;
    float a;
    float b;
    __device__ __forceinline__ float operator()(float x) const { return a * exp_approx(x - m) - b; }
    __device__ __forceinline__ float4 operator()(float4 v) const {
        return make_float4((*this)(v.x), (*this)(v.y), (*this)(v.z), (*this)(v.w));
    }
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const { return map8(*this, f); }
};

struct Zeros {  // an ignored row's gradient
    __device__ __forceinline__ float operator()(float) const { return 0.f; }
    __device__ __forceinline__ float4 operator()(float4) const { return make_float4(0.f, 0.f, 0.f, 0.f); }
    __device__ __forceinline__ Floats8 operator()(const Floats8& f) const { return map8(*this, f); }
};
