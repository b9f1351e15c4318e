// three_pass.cu: the textbook softmax, one thread block per row.
//
//   pass 1: m = max_j x_j                       (read x)
//   pass 2: s = sum_j e^(x_j - m)               (read x)
//   pass 3: y_j = e^(x_j - m) / s               (read x, write y)
//
// Traffic: 3 reads + 1 write = 16 bytes per fp32 element.
// Launch: 1-D grid, any number of blocks (each loops over rows
// blockIdx.x, blockIdx.x + gridDim.x, ...), blockDim.x a multiple of 32.
#include "common.cuh"

extern "C" __global__ void three_pass(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 n,
                                      i64 ld_x, i64 ld_y) {
    __shared__ float scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpan r = row_span(x + row * ld_x, y + row * ld_y, n);
        const float4* in = body_in(r);

        float m = SOFTMAX_NEG_INF;
        for (i64 v = threadIdx.x; v < r.vecs; v += blockDim.x) m = fmaxf(m, max4(__ldg(in + v)));
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) m = fmaxf(m, r.x[scalar_index(r, k)]);
        m = block_max(m, scratch);

        const float base = exp_base(m);
        float s = 0.f;
        for (i64 v = threadIdx.x; v < r.vecs; v += blockDim.x) {
            const float4 e = scale4(__ldg(in + v), base, 1.f);
            s += (e.x + e.y) + (e.z + e.w);
        }
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x)
            s += exp_approx(r.x[scalar_index(r, k)] - base);
        s = block_sum(s, scratch);

        write_span(r, 0, r.vecs, true, m, 1.f / s);
    }
}
