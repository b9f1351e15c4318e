"""Session 21 probe 57's debug run: multi_block_smem built with MBS_DEBUG (each block's loop state in a
device array, at most MBS_DEBUG turns of its loop, so a hang ends), on three shapes; prints the tickets
taken, the slots published, the largest relative error against a float32 CuPy reference and a few blocks' states.
Needs notes/tune-runs/2026-12-02-held-chunks-p57.patch applied: that kernel has the fix, so it gives the
09:16 output of -p57.txt; the 09:15 output came from the same kernel with the inverted test
(`tickets_left = s_taken < w + MBS_SLOTS`).  Its block state is q p w left total_row turns next have (the
v2 patch records p w ended exhausted total_row turns next have).
PYTHONPATH=. timeout 120 python3 notes/tune-runs/2026-12-02-held-chunks-p57-debug.py
"""
import sys, time, numpy as np, cupy as cp
import softmax_lab
from softmax_lab import loader
V = sys.modules["softmax_lab.variants"]
dev = softmax_lab.device_info()
def run(rows, cols, t, v, s, grid, lag, cap, dtype="float32"):
    it = V.DTYPES[dtype]
    d = V.kernel_defines(dtype, "softmax") | {"MBS_THREADS": t, "MBS_VPT": v, "MBS_SLOTS": s, "MBS_DEBUG": cap}
    k = loader.get_kernel("multi_block_smem.cu", "multi_block_smem", d, device_id=dev.id)
    smem = s * (t * v + 8) * 16
    k.max_dynamic_shared_size_bytes = smem
    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, t, smem)
    chunks = max(1, -(-(cols * it // 16) // (t * v)))
    items = rows * chunks
    grid = min(grid or per_sm * dev.sm_count, items)
    x = (cp.random.standard_normal((rows, cols), dtype=cp.float32) * 3)
    y = cp.full((rows, cols), cp.nan, dtype=cp.float32)
    slots = cp.full(items, 0xBFBFBFBFBFBFBFBF, dtype=cp.uint64)
    tickets = cp.zeros(1, dtype=cp.uint64)
    g = loader._module("multi_block_smem.cu", tuple(sorted(d.items())), dev.id).get_global("mbs_debug")
    dbg = cp.ndarray((8 * 8192,), dtype=cp.int64, memptr=g); dbg.fill(-7)
    cp.cuda.Device().synchronize()
    t0 = time.time()
    k.kernel((grid,), (t,), (x, y, np.int64(rows), np.int64(cols), np.int64(cols), np.int64(cols), np.int64(chunks),
                             np.int32(lag), slots, tickets), shared_mem=smem)
    cp.cuda.Device().synchronize()
    el = time.time() - t0
    st = dbg.get().reshape(-1, 8)[:grid]
    pub = int(((slots.get() >> np.uint64(32)) != 0xBFBFBFBF).sum())
    ref = cp.exp(x - x.max(1, keepdims=True)); ref /= ref.sum(1, keepdims=True)
    err = float(cp.nanmax(cp.abs(y - ref) / ref))
    print(f"{rows}x{cols} {t}.{v}.{s} grid {grid} (per_sm {per_sm}) chunks {chunks} lag {lag} cap {cap}: {el:.2f}s "
          f"tickets {int(tickets.get()[0])} published {pub}/{items} err {err:.2e} nan {int(cp.isnan(y).sum())}", flush=True)
    turns = st[:, 5]
    print("  turns max", turns.max(), "blocks at cap", int((turns >= cap).sum()), flush=True)
    for b in list(range(min(4, grid))) + [int(np.argmax(turns))]:
        print("  block", b, "q p w left total_row turns next have", st[b].tolist(), flush=True)
print(cp.cuda.runtime.getDeviceProperties(0)["name"])
run(2, 2048, 32, 1, 2, 8, 1, 200000)
run(5, 100003, 64, 1, 3, None, 2, 200000)
run(4, 4194304, 512, 4, 7, None, 5, 200000)
