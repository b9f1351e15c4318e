// two_pass.cu: online softmax, one thread block per row.
//
//   pass 1: running (m, s) per thread: on a new max m', s <- s * e^(m - m');
//           s += e^(x_j - m); then the block merges the pairs  (read x)
//   pass 2: y_j = e^(x_j - m) / s, or (x_j - m) - log(s)        (read x, write y)
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE), the op softmax or
// log_softmax (SOFTMAX_LOG): elements.cuh.  Float32 arithmetic throughout.
// Traffic: 2 reads + 1 write = 3 x element size bytes per element (12 for fp32).
// Backward (SOFTMAX_BACKWARD=1): pass 1 the row's dot, sum dy * y (softmax)
// or sum dy (log_softmax), reduced over the block (read y, dy); pass 2
// dx = y * (dy - dot), or dy - e^y * dot (read y, dy, write dx; the second
// read is often served by L2).  Traffic: 2 + 2 reads + 1 write.
// Launch: 1-D grid, any number of blocks (each loops over rows), blockDim.x
// a multiple of 32.
#include "elements.cuh"

#if SOFTMAX_BACKWARD
extern "C" __global__ void two_pass(const elem_t* __restrict__ y, const elem_t* __restrict__ dy,
                                    elem_t* __restrict__ dx, i64 rows, i64 n, i64 ld_y, i64 ld_dy, i64 ld_dx) {
    __shared__ float scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpanOf<elem_t> r = row_span(y + row * ld_y, dx + row * ld_dx, n);
        const GradRow<elem_t> g = grad_row(r, dy + row * ld_dy);
        const float dot = block_sum(dot_span(r, g, 0, r.vecs, true), scratch);
        grad_span(r, g, 0, r.vecs, true, dot);
    }
}
#else
extern "C" __global__ void two_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows, i64 n,
                                    i64 ld_x, i64 ld_y) {
    __shared__ MaxSum scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const MaxSum total = block_merge(online_span(r, 0, r.vecs, true), scratch);
        write_span(r, 0, r.vecs, true, row_output(total.max, total.sum));
    }
}
#endif
