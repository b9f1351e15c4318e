"""Session 17 probe 45 (p40's harness): single_read_warp with SR_ROW_WARPS warps a row (one block of
32 x W threads per row, the row in registers, block_max / block_sum across the warps).  Rows of 8-16 KB, where
three_pass (to 8.5 KB) and cluster_row run float32 at 1.16-1.29 / 0.98-1.09 and bf16 at 1.69-1.79 / 1.36-1.93
(p42, p44); rows of up to 8 KB at two warps (the halves' log_softmax build of 16 vectors spills, of 8 does not);
rows of 16-32 KB at four warps.  Candidate "warpWVVp": W warps a row, VV vectors a lane (e.g. warp208p: 2 x 8).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-row-warps-p45.py
"""
import runpy
import sys
import torch

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
run = p40["run"]
V = sys.modules["softmax_lab.variants"]
loader = p40["loader"]
dev = p40["dev"]


def warp(sh, code, wide):
    w, vpt = divmod(code, 100) if code >= 100 else (1, code)
    d = {"SR_WARP_VPT": vpt, "SR_ROW_WARPS": w} | V.kernel_defines(sh.dtype, sh.op) | ({"SR_WIDE": 1} if wide else {})
    f = loader.get_kernel("single_read.cu", "single_read_warp", d, device_id=dev.id).kernel
    return V._prepared_launcher(f, (min(sh.rows, 2**31 - 1),), (32 * w,), sh.scalars(), False)


run.__globals__["warp"] = warp


def plan(cols, itemsize, warps):
    return f"warp{warps}{-(-V._row_vecs(cols, itemsize) // (32 * warps)):02d}p"


print(torch.cuda.get_device_name(), flush=True)
GIB = 1 << 30
for cols in (2049, 2600, 3000, 4096):  # float32 8-16 KB: two warps against auto (three_pass / cluster_row)
    run(GIB // (4 * cols), cols, "float32", "softmax", ("auto", plan(cols, 4, 2), plan(cols, 4, 4)))
run(GIB // (4 * 3000), 3000, "float32", "log_softmax", ("auto", plan(3000, 4, 2)))
run(1056, 3000, "float32", "softmax", ("auto", plan(3000, 4, 2)))
for cols in (4097, 4800, 6000, 8192):  # bf16 8-16 KB
    for op in ("softmax", "log_softmax"):
        run(GIB // (2 * cols), cols, "bfloat16", op, ("auto", plan(cols, 2, 2), plan(cols, 2, 4)))
run(1056, 6000, "bfloat16", "softmax", ("auto", plan(6000, 2, 2)))
for cols in (3000, 4096):  # halves' log_softmax up to 8 KB: one warp of 12-16 vectors (spilling) or two
    run(GIB // (2 * cols), cols, "bfloat16", "log_softmax", ("auto", plan(cols, 2, 2)))
run(GIB // (4 * 2048), 2048, "float32", "softmax", ("auto", plan(2048, 4, 2)))
for cols, it, d in ((5000, 4, "float32"), (8192, 4, "float32"), (12000, 2, "bfloat16"), (16384, 2, "bfloat16")):
    run(GIB // (it * cols), cols, d, "softmax", ("auto", plan(cols, it, 4), plan(cols, it, 8)))
