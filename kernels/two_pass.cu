// two_pass.cu: online softmax, one thread block per row.
//
//   pass 1: running (m, s) per thread: on a new max m', s <- s * e^(m - m');
//           s += e^(x_j - m); then the block merges the pairs  (read x)
//   pass 2: y_j = e^(x_j - m) / s                               (read x, write y)
//
// Traffic: 2 reads + 1 write = 12 bytes per fp32 element.
// Launch: 1-D grid, any number of blocks (each loops over rows), blockDim.x
// a multiple of 32.
#include "common.cuh"

extern "C" __global__ void two_pass(const float* __restrict__ x, float* __restrict__ y, i64 rows, i64 n,
                                    i64 ld_x, i64 ld_y) {
    __shared__ MaxSum scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const RowSpan r = row_span(x + row * ld_x, y + row * ld_y, n);
        const MaxSum total = block_merge(online_span(r, 0, r.vecs, true), scratch);
        write_span(r, 0, r.vecs, true, total.max, 1.f / total.sum);
    }
}
