"""Session 17 probe 44 (p40's harness): rows just past the warp kernel's 8 KB, where auto keeps three_pass up to
8.5 KB (CLUSTER_ROW_MIN_ROW_BYTES): p42 ran float32 2049 columns at 1.17 x copy and bf16 4097 at 1.71 (odd
lengths: rows off 16-byte boundaries).  Candidates, ~1 GiB of rows each: three_pass, two_pass, cluster_row
and single_read's cluster plan, at odd and aligned lengths of 8-8.7 KB.
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-rows-8k-p44.py
"""
import runpy
import torch

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")
run = p40["run"]
print(torch.cuda.get_device_name(), flush=True)
for cols in (2049, 2052, 2100, 2176):
    run((1 << 30) // (4 * cols), cols, "float32", "softmax", ("three_pass", "two_pass", "cluster_row", "sr_plan"))
for cols in (4097, 4104, 4200, 4352):
    run((1 << 30) // (2 * cols), cols, "bfloat16", "softmax", ("three_pass", "two_pass", "cluster_row", "sr_plan"))
run((1 << 30) // (2 * 4104), 4104, "bfloat16", "log_softmax", ("three_pass", "two_pass", "cluster_row", "sr_plan"))
