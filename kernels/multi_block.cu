// multi_block.cu: one row split over several thread blocks.
//
//   multi_block_partials: block (row, c) computes the online (m, s) of chunk c
//                         of the row                               (read x)
//   multi_block_combine:  one block per row merges the row's partials in a
//                         fixed order into one (m, s)              (tiny)
//   multi_block_write:    block (row, c) writes y = e^(x - m) / s (or
//                         (x - m) - log(s)) for chunk c
//                                                                  (read x, write y)
//
// Elements: float32, float16 or bfloat16 (SOFTMAX_DTYPE), the op softmax or
// log_softmax (SOFTMAX_LOG, applied by multi_block_write): elements.cuh.
// Traffic: 2 reads + 1 write = 3 x element size bytes per element (12 for
// fp32), plus 8 bytes per chunk for the partials.  The partials live in a buffer the caller
// allocates per launch, so concurrent launches share nothing, and no atomics
// are used: the output is bitwise the same on every run.
// Backward (SOFTMAX_BACKWARD=1), the same three launches: per-chunk partial
// dots (sum dy * y, or sum dy for log_softmax; read y, dy), a fixed-order
// sum per row (tiny), the write pass dx = y * (dy - dot), or dy - e^y * dot
// (read y, dy, write dx).  Traffic: 2 + 2 reads + 1 write, plus 4 bytes per
// chunk.  Bitwise repeatable, as the forward.
// Launch: 1-D grids of any size; work item w = (row, chunk) = (w / chunks,
// w % chunks), chunk = `chunk_vecs` 16-byte vectors of the body; the scalar
// head and tail belong to chunk 0.
// Row statistics (softmax_lab.logsumexp), two launches: the forward's
// partials, then multi_block_row_stats in place of the combine, which writes
// each row's lse = m + log(s) and max m in float32.  Traffic: 1 read.

#include "elements.cuh"

#if SOFTMAX_BACKWARD
extern "C" __global__ void multi_block_partials(const elem_t* __restrict__ y, const elem_t* __restrict__ dy,
                                                i64 rows, i64 n, i64 ld_y, i64 ld_dy, i64 chunk_vecs, i64 chunks,
                                                float* __restrict__ partials) {
    __shared__ float scratch[32];
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(y + row * ld_y, (elem_t*)nullptr, n);
        const GradRow<elem_t> g = grad_row(r, dy + row * ld_dy);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        const float part = block_sum(dot_span(r, g, v0, v1, c == 0), scratch);
        if (threadIdx.x == 0) partials[w] = part;
    }
}

extern "C" __global__ void multi_block_combine(const float* __restrict__ partials, i64 rows, i64 chunks,
                                               float* __restrict__ totals) {
    __shared__ float scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        float acc = 0.f;
        for (i64 c = threadIdx.x; c < chunks; c += blockDim.x) acc += partials[row * chunks + c];
        acc = block_sum(acc, scratch);
        if (threadIdx.x == 0) totals[row] = acc;
    }
}

extern "C" __global__ void multi_block_write(const elem_t* __restrict__ y, const elem_t* __restrict__ dy,
                                             elem_t* __restrict__ dx, i64 rows, i64 n, i64 ld_y, i64 ld_dy,
                                             i64 ld_dx, i64 chunk_vecs, i64 chunks, const float* __restrict__ totals) {
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(y + row * ld_y, dx + row * ld_dx, n);
        const GradRow<elem_t> g = grad_row(r, dy + row * ld_dy);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        grad_span(r, g, v0, v1, c == 0, totals[row]);
    }
}
#else

extern "C" __global__ void multi_block_partials(const elem_t* __restrict__ x, i64 rows, i64 n, i64 ld_x,
                                                i64 chunk_vecs, i64 chunks, MaxSum* __restrict__ partials) {
    __shared__ MaxSum scratch[32];
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, (elem_t*)nullptr, n);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        const MaxSum part = block_merge(online_span(r, v0, v1, c == 0), scratch);
        if (threadIdx.x == 0) partials[w] = part;
    }
}

extern "C" __global__ void multi_block_combine(const MaxSum* __restrict__ partials, i64 rows, i64 chunks,
                                               MaxSum* __restrict__ totals) {
    __shared__ MaxSum scratch[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
        for (i64 c = threadIdx.x; c < chunks; c += blockDim.x) acc = merge(acc, partials[row * chunks + c]);
        acc = block_merge(acc, scratch);
        if (threadIdx.x == 0) totals[row] = acc;
    }
}

// One block per row: the row's (m, s) as multi_block_combine merges it, then
// lse = m + log(s) and the max m, as torch.logsumexp and torch.amax give them:
// NaN for a row that holds a NaN, +inf for one that holds +inf and no NaN,
// -inf for a row of -inf (m = -inf, s = 0).  A NaN sum comes from a NaN
// element or from +inf (inf - inf): only a row whose max is +inf is read
// again, to tell them apart.
extern "C" __global__ void multi_block_row_stats(const MaxSum* __restrict__ partials, const elem_t* __restrict__ x,
                                                 i64 rows, i64 n, i64 ld_x, i64 chunks, float* __restrict__ lse,
                                                 float* __restrict__ row_max) {
    __shared__ MaxSum scratch[32];
    const float pos_inf = __int_as_float(0x7f800000), nan = __int_as_float(0x7fffffff);
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
        for (i64 c = threadIdx.x; c < chunks; c += blockDim.x) acc = merge(acc, partials[row * chunks + c]);
        acc = block_merge(acc, scratch);
        float l = acc.max + logf(acc.sum), m = acc.max;
        if (acc.max == pos_inf) {  // every thread alike: the block takes this branch whole
            const RowSpanOf<elem_t> r = row_span(x + row * ld_x, (elem_t*)nullptr, n);
            int has_nan = 0;
            for (i64 i = threadIdx.x; i < n && !has_nan; i += blockDim.x) has_nan = isnan(load_scalar(r, i));
            l = m = __syncthreads_or(has_nan) ? nan : pos_inf;
        } else if (isnan(acc.sum)) {
            l = m = nan;
        }
        if (threadIdx.x == 0) lse[row] = l, row_max[row] = m;
    }
}

extern "C" __global__ void multi_block_write(const elem_t* __restrict__ x, elem_t* __restrict__ y, i64 rows,
                                             i64 n, i64 ld_x, i64 ld_y, i64 chunk_vecs, i64 chunks,
                                             const MaxSum* __restrict__ totals) {
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, y + row * ld_y, n);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        const MaxSum t = totals[row];
        write_span(r, v0, v1, c == 0, row_output(t.max, t.sum));
    }
}
#endif
