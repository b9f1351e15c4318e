// cross_entropy.cu: the cross-entropy loss of rows of logits, and its gradient
// in the same launch sequence, with the row split over blocks as in multi_block.
//
//   cross_entropy_count:    one block, for a mean: the rows whose target is
//                           not ignore_index, and the gradient's scale
//                           (1 / that count)                           (tiny)
//   cross_entropy_partials: block (row, c) computes the online (m, s) and
//                           the plain sum of chunk c of the row        (read x)
//   cross_entropy_rows:     one block per row merges the row's partials in a
//                           fixed order: lse = m + log(s), the row's loss, and
//                           the coefficients of its gradient           (tiny)
//   cross_entropy_grad:     block (row, c) writes chunk c of the gradient
//                           (read x, write dx; dx may be x itself)
//   cross_entropy_total:    one block: the loss summed over the rows in a
//                           fixed order (in double), divided by the count
//                           for a mean (tiny)
//
// The loss, its gradient and the targets' type: cross_entropy.cuh.
// Traffic: 1 read of x for the loss alone; with the gradient, 2 reads and 1
// write.  No atomics: every result is bitwise the same on every run.
// Targets are `ld_t` elements apart.

#include "cross_entropy.cuh"

struct ChunkStats {  // a chunk's online (max, sum of e^(x - max)) and its plain sum of x
    float max;
    float sum;
    float total;
};

// The one-block kernels take their per-call arguments first, their shape's last
// (variants/cross_entropy.py launches them prepared).
extern "C" __global__ void cross_entropy_count(const target_t* __restrict__ target, i64 ld_t, i64 ignore_index,
                                               float* __restrict__ scale, i64 rows) {
    __shared__ i64 scratch[32];
    const i64 kept = kept_rows(target, ld_t, ignore_index, rows, scratch);
    if (threadIdx.x == 0) scale[0] = 1.f / (float)kept, scale[1] = (float)kept;
}

extern "C" __global__ void cross_entropy_partials(const elem_t* __restrict__ x, i64 rows, i64 n, i64 ld_x,
                                                  i64 chunk_vecs, i64 chunks, ChunkStats* __restrict__ partials) {
    __shared__ MaxSum scratch[32];
    __shared__ float totals[32];
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, (elem_t*)nullptr, n);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
        float total = 0.f;
        const auto in = body_in(r);
        for (i64 v = v0 + threadIdx.x; v < v1; v += blockDim.x) {
            const auto vec = load_vec(in, v);
            online_add_vec(acc, vec);
            total += vec_sum(vec);
        }
        if (c == 0) {
            for (i64 k = threadIdx.x; k < scalar_count(r); k += blockDim.x) {
                const float s = load_scalar(r, scalar_index(r, k));
                online_add1(acc, s);
                total += s;
            }
        }
        acc = block_merge(acc, scratch);
        total = block_sum(total, totals);
        if (threadIdx.x == 0) partials[w] = {acc.max, acc.sum, total};
    }
}

extern "C" __global__ void cross_entropy_rows(const ChunkStats* __restrict__ partials, const elem_t* __restrict__ x,
                                              const target_t* __restrict__ target, i64 rows, i64 n, i64 ld_x,
                                              i64 ld_t, i64 chunks, i64 ignore_index, float smoothing, float z_loss,
                                              const float* __restrict__ scale, float* __restrict__ loss,
                                              float* __restrict__ lse_out, RowGrad* __restrict__ grad) {
    __shared__ MaxSum scratch[32];
    __shared__ float totals[32];
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        MaxSum acc = {SOFTMAX_NEG_INF, 0.f};
        float total = 0.f;
        for (i64 c = threadIdx.x; c < chunks; c += blockDim.x) {
            const ChunkStats p = partials[row * chunks + c];
            acc = merge(acc, {p.max, p.sum});
            total += p.total;
        }
        acc = block_merge(acc, scratch);
        total = block_sum(total, totals);
        if (threadIdx.x != 0) continue;
        const i64 t = (i64)target[row * ld_t];
        const float xt = in_row(t, n) ? to_float(x[row * ld_x + t]) : 0.f;
        const RowLoss l = row_loss(acc, total, xt, t == ignore_index, in_row(t, n), n, smoothing, z_loss,
                                    scale ? scale[0] : 1.f);
        loss[row] = l.loss;
        if (lse_out) lse_out[row] = acc.max + logf(acc.sum);
        if (grad) grad[row] = l.grad;
    }
}

// The chunk of a row that holds element t: chunk 0 holds the scalar head and tail.
template <typename T>
__device__ __forceinline__ i64 chunk_of(const RowSpanOf<T>& r, i64 t, i64 chunk_vecs) {
    const i64 v = (t - r.head) / RowSpanOf<T>::VEC;
    return t < r.head || v >= r.vecs ? 0 : v / chunk_vecs;
}

extern "C" __global__ void cross_entropy_grad(const elem_t* x, elem_t* dx, const target_t* __restrict__ target,
                                              i64 rows, i64 n, i64 ld_x, i64 ld_dx, i64 ld_t, i64 chunk_vecs,
                                              i64 chunks, i64 ignore_index, const RowGrad* __restrict__ grad) {
    for (i64 w = blockIdx.x; w < rows * chunks; w += gridDim.x) {
        const i64 row = w / chunks, c = w % chunks;
        const RowSpanOf<elem_t> r = row_span(x + row * ld_x, dx + row * ld_dx, n);
        const i64 v0 = c * chunk_vecs, v1 = min(v0 + chunk_vecs, r.vecs);
        const i64 t = (i64)target[row * ld_t];
        const RowGrad g = grad[row];
        if (t == ignore_index) {
            write_span(r, v0, v1, c == 0, Zeros{});
        } else {
            write_span(r, v0, v1, c == 0, GradOutput{g.m, g.a, g.b});
            // The target's element: written over once the block's stores are done (dx may be x,
            // whose x_t cross_entropy_rows has read).
            if (in_row(t, n) && chunk_of(r, t, chunk_vecs) == c) {
                __syncthreads();
                if (threadIdx.x == 0) dx[row * ld_dx + t] = from_float<elem_t>(g.target_dx);
            }
        }
    }
}

extern "C" __global__ void cross_entropy_total(const float* __restrict__ loss, const float* __restrict__ count,
                                               float* __restrict__ out, i64 rows) {
    __shared__ double scratch[32];
    const double acc = loss_total(loss, rows, scratch);
    if (threadIdx.x == 0) out[0] = (float)(count ? acc / count[1] : acc);
}
