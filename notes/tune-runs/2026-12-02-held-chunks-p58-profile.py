"""Session 22 probe 58: multi_block_smem built with MBS_PROFILE (thread 0's cycles by phase per block: the
row polls, the writes, the waits for bulk copies, the reductions), mean over blocks, and the launch's time.
Apply notes/tune-runs/2026-12-02-held-chunks-p58-profile.patch to main's kernel first (git apply; it adds the
counters, and MBS_DEBUG and MBS_LOAD_KEEP as in probe 57).  The v2 rows of -p58.txt came from probe 57's v2
kernel with the same counters, the v3 rows from this patch's kernel (v3 = main's, plus the counters).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-held-chunks-p58-profile.py ROWS:COLS:THREADS:VPT:SLOTS:LAG:BLOCKS_PER_SM:DTYPE ...
"""
import sys, time, numpy as np, cupy as cp
import softmax_lab
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
NAMES = ["poll_cyc", "polls", "poll_fail", "write_cyc", "writes", "sleeps", "loadwait_cyc", "loadwaits", "reduce_cyc", "total_cyc"]
def run(rows, cols, t, v, s, lag, bps=1, dtype="float32"):
    it = V.DTYPES[dtype]
    d = V.kernel_defines(dtype, "softmax") | {"MBS_THREADS": t, "MBS_VPT": v, "MBS_SLOTS": s, "MBS_PROFILE": 1,
                                               "MBS_BLOCKS_PER_SM": bps}
    k = loader.get_kernel("multi_block_smem.cu", "multi_block_smem", d, device_id=dev.id)
    smem = s * (t * v + 8) * 16
    k.max_dynamic_shared_size_bytes = smem
    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, t, smem)
    chunks = max(1, -(-(cols * it // 16) // (t * v)))
    items = rows * chunks
    grid = min(per_sm * dev.sm_count, items, 1024)
    if lag < 0:
        lag = min(s - 1, -(-chunks // grid) + 1)
    x = (cp.random.standard_normal((rows, cols), dtype=cp.float32) * 3).astype(dtype)
    y = cp.empty_like(x)
    g = loader._module("multi_block_smem.cu", tuple(sorted(d.items())), dev.id).get_global("mbs_profile")
    prof = cp.ndarray((16 * 1024,), dtype=cp.int64, memptr=g)
    times = []
    for rep in range(4):
        slots = cp.full(items, 0xBFBFBFBFBFBFBFBF, dtype=cp.uint64)
        tickets = cp.zeros(1, dtype=cp.uint64)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        k.kernel((grid,), (t,), (x, y, np.int64(rows), np.int64(cols), np.int64(cols), np.int64(cols), np.int64(chunks),
                                 np.int32(lag), slots, tickets), shared_mem=smem)
        e1.record(); e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1))
    st = prof.get().reshape(-1, 16)[:grid, :10].astype(np.float64)
    tot = st[:, 9:10]
    mean = st.mean(0)
    print(f"{rows}x{cols} {dtype} {t}.{v}.{s} lag {lag} grid {grid} chunks {chunks}: {np.median(times)*1e3:.0f} us "
          f"({items / grid:.1f} chunks/block, {mean[9] / (items / grid):.0f} cyc/chunk)", flush=True)
    print("   " + "  ".join(f"{n} {m:.0f}" for n, m in zip(NAMES, mean)), flush=True)
    print(f"   fractions: poll {mean[0]/mean[9]:.3f} write {mean[3]/mean[9]:.3f} loadwait {mean[6]/mean[9]:.3f} "
          f"reduce {mean[8]/mean[9]:.3f} rest {1 - (mean[0]+mean[3]+mean[6]+mean[8])/mean[9]:.3f}; "
          f"per write {mean[3]/max(mean[4],1):.0f} per poll {mean[0]/max(mean[1],1):.0f} per loadwait {mean[6]/max(mean[7],1):.0f}"
          f" per reduce {mean[8]/max(mean[7],1):.0f}", flush=True)
    del x, y
    cp.get_default_memory_pool().free_all_blocks()
print(cp.cuda.runtime.getDeviceProperties(0)["name"], time.strftime("%H:%M:%S"))
for spec in sys.argv[1:]:
    r, c, t, v, s, lag, bps, dt = spec.split(":")
    run(int(r), int(c), int(t), int(v), int(s), int(lag), int(bps), dt)
