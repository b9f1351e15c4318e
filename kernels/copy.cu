// copy.cu: y = x, the benchmark's bandwidth ceiling (not a softmax).
//
//   one pass: each thread copies 16-byte float4 vectors with a grid-stride
//   loop; the n % 4 trailing floats are copied one by one   (read x, write y)
//
// Traffic: 1 read + 1 write = 8 bytes per fp32 element, the least any
// softmax can move.  x and y must be 16-byte aligned (every CuPy allocation
// is) and must not overlap.
// Launch: 1-D grid of any number of blocks of any size; softmax_lab.bench
// launches one float4 per thread (grid = ceil(n / 4 / threads), capped).

extern "C" __global__ void copy_f32(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long vecs = n / 4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float4* in = reinterpret_cast<const float4*>(x);
    float4* out = reinterpret_cast<float4*>(y);
    for (long long v = first; v < vecs; v += stride) out[v] = in[v];
    for (long long i = 4 * vecs + first; i < n; i += stride) y[i] = x[i];
}
