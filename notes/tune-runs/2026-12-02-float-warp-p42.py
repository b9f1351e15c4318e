"""Session 16 probe 42 (p40's harness), prepared then; run in session 17 (H200, 2026-12-02 ~02:45 UTC, code
1a9505d; output beside it, .txt): float32
rows of 4-8 KB in the warp kernel at 9-16 vectors a lane (ptxas, NVRTC 13.0: no spills up to 16 for softmax and
log_softmax), against three_pass (auto there: 1.09 x copy at 131072 x 2048, p41) and cluster_row (1.19); and
rows of 8-11 KB (float32 and bf16), where auto keeps three_pass until cluster_row is measured there.  Also
the halves' log_softmax at 2817-4096 columns: three_pass (auto) against the warp kernel at 16 packed vectors,
whose build spills 152 bytes (p41: 1.16 against 1.25 at 4096).
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-float-warp-p42.py
"""
import runpy
import torch

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
run = p40["run"]
print(torch.cuda.get_device_name(), flush=True)
for cols in (1100, 1536, 2048):
    vpt = -(-cols * 4 // 16 // 32)
    for op in ("softmax", "log_softmax"):
        run((1 << 30) // (4 * cols), cols, "float32", op, ("auto", f"warp{vpt}p", "three_pass", "cluster_row"))
    run(1056, cols, "float32", "softmax", ("auto", f"warp{vpt}p", "three_pass"))
for cols in (2049, 2300, 2600, 2816):  # float32 rows of 8-11 KB: three_pass (auto) against cluster_row
    run((1 << 30) // (4 * cols), cols, "float32", "softmax", ("three_pass", "cluster_row"))
for cols in (4097, 4800, 5632):  # halves' rows of 8-11 KB: three_pass (auto) against cluster_row
    for op in ("softmax", "log_softmax"):
        run((1 << 30) // (2 * cols), cols, "bfloat16", op, ("three_pass", "cluster_row"))
for cols in (3000, 4096):
    run((1 << 30) // (2 * cols), cols, "bfloat16", "log_softmax", ("auto", "warp16p", "three_pass"))
