// read.cu: the benchmark's floor of an op that only reads (a loss), not a softmax.
//
//   one pass: each thread sums 16-byte vectors of x as 32-bit words (wrapping,
//   as unsigned integers: any bits are a valid word), READ_UNROLL vectors a
//   step of a grid-stride loop so that as many loads are in flight, then the
//   n % 4 trailing words one by one; each block writes its sum to
//   sums[blockIdx.x], so no load can be dropped                  (read x)
//
// Traffic: 1 read, 4 bytes per word.  x must be 16-byte aligned.
// Launch: 1-D grid of any size, blocks of a multiple of 32 threads up to 1024.

#define READ_UNROLL 4

extern "C" __global__ void read_words(const unsigned* __restrict__ x, long long n, unsigned* __restrict__ sums) {
    __shared__ unsigned warp_sums[32];
    const long long vecs = n / 4;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4* in = reinterpret_cast<const uint4*>(x);
    unsigned acc = 0;
    long long v = first;
    for (; v + (READ_UNROLL - 1) * threads < vecs; v += READ_UNROLL * threads) {
        uint4 w[READ_UNROLL];
#pragma unroll
        for (int k = 0; k < READ_UNROLL; ++k) w[k] = __ldcs(in + v + k * threads);
#pragma unroll
        for (int k = 0; k < READ_UNROLL; ++k) acc += w[k].x + w[k].y + w[k].z + w[k].w;
    }
    for (; v < vecs; v += threads) {
        const uint4 w = __ldcs(in + v);
        acc += w.x + w.y + w.z + w.w;
    }
    for (long long i = 4 * vecs + first; i < n; i += threads) acc += x[i];
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int w = 0; w < (int)(blockDim.x / 32); ++w) total += warp_sums[w];
        sums[blockIdx.x] = total;
    }
}
