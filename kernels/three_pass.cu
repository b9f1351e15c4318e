// three_pass.cu: the textbook softmax, one thread block per row.
//
//   pass 1: m = max_j x_j                       (read x)
//   pass 2: s = sum_j e^(x_j - m)               (read x)
//   pass 3: y_j = e^(x_j - m) / s               (read x, write y)
//           log_softmax: y_j = (x_j - m) - log(s)
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE), the op softmax or
// log_softmax (SOFTMAX_LOG): elements.cuh.  Float32 arithmetic throughout.
// Traffic: 3 reads + 1 write = 4 x element size bytes per element (16 for fp32).
// Launch: 1-D grid, any number of blocks (each loops over rows
// blockIdx.x, blockIdx.x + gridDim.x, ...), blockDim.x a multiple of 32.
#include "elements.cuh"

extern "C" __global__ void three_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n,
                                      i64 ld_x, i64 ld_y) {
    __shared__ float scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const auto in = body_in(r);

        float m = SOFTMAX_NEG_INF;
        for (i64 v = threadIdx.x; v < r.vecs; v += blockDim.x) m = fmaxf(m, vec_max(load_vec(in, v)));
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x)
            m = fmaxf(m, load_scalar(r, scalar_index(r, k)));
        m = block_max(m, scratch);

        const float base = exp_base(m);
        float s = 0.f;
        for (i64 v = threadIdx.x; v < r.vecs; v += blockDim.x) s += vec_exp_sum(load_vec(in, v), base);
        for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x)
            s += exp_approx(load_scalar(r, scalar_index(r, k)) - base);
        s = block_sum(s, scratch);

        write_span(r, 0, r.vecs, true, row_output(m, s));
    }
}
