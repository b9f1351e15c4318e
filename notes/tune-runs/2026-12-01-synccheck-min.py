"""Minimal cluster exchanges under compute-sanitizer: which of them does synccheck reject?
Usage: python3 sync_min.py KERNEL CLUSTER   (prints 'ok KERNEL' when the result is right)."""
import sys
import cupy as cp
import numpy as np

SRC = r'''
__device__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ unsigned rank_() { unsigned r; asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ unsigned mapa(const void* p, unsigned r) { unsigned o; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(o) : "r"(sa(p)), "r"(r)); return o; }
__device__ void carrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ void cwait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ void minit(unsigned long long* b, unsigned c) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(c) : "memory"); }
__device__ void mwait(unsigned long long* b, unsigned ph) {
    unsigned done;
    do { asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(sa(b)), "r"(ph) : "memory"); } while (!done);
}
#define C CLUSTER
// published: each block writes its value, cluster barrier, every block reads all values remotely.
extern "C" __global__ void __cluster_dims__(C, 1, 1) published(float* out) {
    __shared__ float mine;
    const unsigned r = rank_();
    if (threadIdx.x == 0) mine = 1.f + r + 10.f * (blockIdx.x / C);
    carrive(); cwait();
    float s = 0.f;
    for (unsigned p = 0; p < C; ++p) { float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(mapa(&mine, p)) : "memory"); s += v; }
    carrive(); cwait();
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
// local mbarrier only: arrive by every thread, wait.
extern "C" __global__ void __cluster_dims__(C, 1, 1) local_mbar(float* out) {
    __shared__ unsigned long long bar;
    if (threadIdx.x == 0) minit(&bar, blockDim.x);
    __syncthreads();
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(sa(&bar)) : "memory");
    mwait(&bar, 0);
    if (threadIdx.x == 0) out[blockIdx.x] = 1.f;
}
// pushed: st.async of one float into every peer's slot, completing the peer's mbarrier.
extern "C" __global__ void __cluster_dims__(C, 1, 1) pushed(float* out) {
    __shared__ float slots[C];
    __shared__ unsigned long long bar;
    const unsigned r = rank_();
    if (threadIdx.x == 0) { minit(&bar, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
    carrive(); cwait();
    const float v = 1.f + r + 10.f * (blockIdx.x / C);
    if (threadIdx.x == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(&bar)), "r"((unsigned)(C * 4)) : "memory");
    if (threadIdx.x < C)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" :: "r"(mapa(&slots[r], threadIdx.x)), "f"(v), "r"(mapa(&bar, threadIdx.x)) : "memory");
    mwait(&bar, 0);
    float s = 0.f;
    for (int p = 0; p < C; ++p) s += slots[p];
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
// pushed, then a cluster barrier before exit.
extern "C" __global__ void __cluster_dims__(C, 1, 1) pushed_exit_barrier(float* out) {
    __shared__ float slots[C];
    __shared__ unsigned long long bar;
    const unsigned r = rank_();
    if (threadIdx.x == 0) { minit(&bar, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
    carrive(); cwait();
    const float v = 1.f + r + 10.f * (blockIdx.x / C);
    if (threadIdx.x == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(&bar)), "r"((unsigned)(C * 4)) : "memory");
    if (threadIdx.x < C)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" :: "r"(mapa(&slots[r], threadIdx.x)), "f"(v), "r"(mapa(&bar, threadIdx.x)) : "memory");
    mwait(&bar, 0);
    float s = 0.f;
    for (int p = 0; p < C; ++p) s += slots[p];
    carrive(); cwait();
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
// pushed (max, sum) pairs by st.async.v2.f32 from a struct like cluster_row's.
struct Pair { float a, b; };
struct Ex { Pair slots[C]; unsigned long long full; };
extern "C" __global__ void __cluster_dims__(C, 1, 1) pushed_pair(float* out) {
    __shared__ Ex ex;
    const unsigned r = rank_();
    if (threadIdx.x == 0) { minit(&ex.full, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
    carrive();
    const float v = 1.f + r + 10.f * (blockIdx.x / C);
    __syncthreads();
    cwait();
    if (threadIdx.x == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(&ex.full)), "r"((unsigned)(C * 8)) : "memory");
    if (threadIdx.x < C)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" :: "r"(mapa(&ex.slots[r], threadIdx.x)), "f"(v), "f"(0.f), "r"(mapa(&ex.full, threadIdx.x)) : "memory");
    mwait(&ex.full, 0);
    float s = 0.f;
    for (int p = 0; p < C; ++p) s += ex.slots[p].a;
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
// remote plain store plus a remote mbarrier arrive (release, cluster scope).
extern "C" __global__ void __cluster_dims__(C, 1, 1) remote_arrive(float* out) {
    __shared__ float slots[C];
    __shared__ unsigned long long bar;
    const unsigned r = rank_();
    if (threadIdx.x == 0) { minit(&bar, C); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
    carrive(); cwait();
    const float v = 1.f + r + 10.f * (blockIdx.x / C);
    if (threadIdx.x < C) {
        asm volatile("st.shared::cluster.f32 [%0], %1;" :: "r"(mapa(&slots[r], threadIdx.x)), "f"(v) : "memory");
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(mapa(&bar, threadIdx.x)) : "memory");
    }
    mwait(&bar, 0);
    asm volatile("fence.acq_rel.cluster;" ::: "memory");
    float s = 0.f;
    for (int p = 0; p < C; ++p) s += slots[p];
    carrive(); cwait();
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
// a bulk copy global -> own shared memory completing the own mbarrier (single_read's loads).
extern "C" __global__ void __cluster_dims__(C, 1, 1) bulk_local(const float* in, float* out) {
    __shared__ alignas(16) float buf[4];
    __shared__ unsigned long long bar;
    if (threadIdx.x == 0) { minit(&bar, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" :: "r"(sa(&bar)) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16, [%2];" :: "r"(sa(buf)), "l"(in), "r"(sa(&bar)) : "memory");
    }
    mwait(&bar, 0);
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[1] + buf[2] + buf[3];
}
'''
name, C = sys.argv[1], int(sys.argv[2])
mod = cp.RawModule(code=SRC, options=("-std=c++17", f"-DCLUSTER={C}", "-arch=sm_90"))
k = mod.get_function(name)
if C > 8:
    cp.cuda.driver.funcSetAttribute(k.kernel.ptr, 14, 1)  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
clusters = 64
out = cp.full(clusters * C, -1, cp.float32)
if name == "bulk_local":
    src = cp.arange(4, dtype=cp.float32) + 1
    k((clusters * C,), (128,), (src, out))
    want = np.full(clusters * C, 10.0)
else:
    k((clusters * C,), (256,), (out,))
    g = np.arange(clusters * C) // C
    want = C * (C + 1) / 2 + 10.0 * C * g
cp.cuda.Device().synchronize()
got = out.get()
assert np.allclose(got, want), (got[:8], want[:8])
print("ok", name, C)
